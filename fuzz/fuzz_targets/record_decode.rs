//! wire::record: `Record::decode` on any bytes (a decoded record re-encodes to exactly the bytes it
//! consumed), and `Record::from_frame` on any frame under every link type (the record round-trips).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::record::{records, Record, RECORD_MAX_LEN};
use wire::LinkType;

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    for r in records(data) {
        let Ok(r) = r else { break };
        let mut out = [0u8; RECORD_MAX_LEN];
        let n = r.encode(&mut out);
        assert_eq!(&out[..n], &data[at..at + n]);
        at += n;
    }
    for lt in [LinkType::Ethernet, LinkType::Raw, LinkType::LinuxSll, LinkType::LinuxSll2, LinkType::Null] {
        let r = Record::from_frame(1, data.len() as u32, data, lt);
        let mut out = [0u8; RECORD_MAX_LEN];
        let n = r.encode(&mut out);
        assert_eq!(Record::decode(&out[..n]), Ok((r, n)));
    }
});
