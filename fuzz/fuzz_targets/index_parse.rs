//! An index file is read from disk: damaged bytes must give an error, never a panic or a huge
//! allocation, and whatever parses must answer look-ups without panicking. The input is a header
//! and a body; the target wraps them as a well-formed file (magic, version, body length, zstd,
//! CRC) so the fuzzer reaches the section checks instead of stopping at the checksum.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 116 {
        return;
    }
    let (head, body) = data.split_at(116);
    let mut file = b"RCINDEX\x01".to_vec();
    file.extend_from_slice(&1u32.to_le_bytes());
    let mut h = head.to_vec();
    h[80..88].copy_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(&h);
    file.extend_from_slice(&zstd::bulk::compress(body, 1).unwrap());
    let crc = crc32fast::hash(&file);
    file.extend_from_slice(&crc.to_le_bytes());
    file.extend_from_slice(b"RCIN");
    let Ok(ix) = index::IndexFile::parse(file, "fuzz") else {
        return;
    };
    let _ = ix.prelude();
    let _: Vec<_> = ix.frames().collect();
    for n in [
        index::Narrow::Host("10.0.0.1".parse().unwrap()),
        index::Narrow::Port(53),
        index::Narrow::Net { addr: "10.0.0.0".parse().unwrap(), prefix: 8 },
        index::Narrow::Proto(17),
    ] {
        if let Some(flows) = ix.candidates(&n) {
            let mut out = Vec::new();
            let _ = ix.postings(&flows, &mut out);
        }
    }
});
