//! wire::dns on any bytes: the header, every question and answer (names decompressed with bounded,
//! loop-proof pointer following), the DNS-over-TCP length prefix, and a name read from any offset.
//! No panic; a name is never cut (a name over 255 bytes on the wire is an error, and its dotted form fits).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::dns::{read_name, strip_tcp_length, Message, Rdata};
use wire::Name;

fn message(d: &[u8]) {
    let Ok(m) = Message::new_checked(d) else {
        assert!(d.len() < wire::dns::DNS_HDR);
        return;
    };
    let _ = (
        m.id(),
        m.flags(),
        m.is_response(),
        m.opcode(),
        m.truncated(),
        m.rcode(),
    );
    let _ = (m.authority_count(), m.additional_count());
    let mut errs = 0;
    for q in m.questions().take(1000) {
        match q {
            Ok(q) => assert!(q.name.len() <= 253 && !q.name.is_cut()),
            Err(_) => errs += 1,
        }
    }
    assert!(errs <= 1);
    errs = 0;
    for a in m.answers().take(1000) {
        match a {
            Ok(a) => {
                assert!(a.name.len() <= 253 && !a.name.is_cut());
                assert!(a.rdata.len() <= d.len());
                if let Rdata::Cname(n) = &a.data {
                    assert!(n.len() <= 253 && !n.is_cut());
                }
                let _ = a.name.to_string();
            }
            Err(_) => errs += 1,
        }
    }
    assert!(errs <= 1);
}

fuzz_target!(|data: &[u8]| {
    message(data);
    if let Ok(m) = strip_tcp_length(data) {
        message(m);
    }
    if data.len() >= 2 {
        let at = u16::from_be_bytes([data[0], data[1]]) as usize % data.len();
        let mut n = Name::new();
        if let Ok(end) = read_name(data, at, &mut n) {
            assert!(end > at && end <= data.len());
            assert!(n.len() <= 253 && !n.is_cut());
        }
    }
});
