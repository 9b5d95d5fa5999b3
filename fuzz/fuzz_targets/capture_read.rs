//! Fuzz the capture reader: any bytes (plain, gzip, zstd or lz4) must give whole packets and issues,
//! never a panic, hang or runaway allocation.
#![no_main]

use std::io::Cursor;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use store::{CaptureReader, Compression};

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = CaptureReader::from_reader(Box::new(Cursor::new(data.to_vec())), Path::new("fuzz")) else {
        return;
    };
    let mut n = 0u64;
    while let Some(p) = r.next_packet() {
        let Ok(p) = p else { break };
        // No packet is larger than the largest block the reader believes.
        assert!(p.data.len() <= 400_000);
        n += 1;
    }
    assert_eq!(n, r.packets());
    assert!(r.clean_packets() <= n);
    if r.compression() == Compression::None {
        assert!(r.clean_end() <= data.len() as u64);
    }
    assert!(r.next_packet().is_none(), "the end stays the end");
});
