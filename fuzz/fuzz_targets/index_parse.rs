//! An index file is read from disk: damaged bytes must give an error, never a panic or a huge
//! allocation, and whatever parses must answer look-ups without panicking. The input is a header,
//! two directories and a body; the target assembles them as the builder does (magic, version,
//! chunks, table, CRC) so the fuzzer reaches the section and chunk checks instead of stopping at
//! the checksum.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 118 {
        return;
    }
    let (head, rest) = data.split_at(116);
    let (h, _, _) = index::file::Header::read(head);
    // Directory entries the header's flow count calls for, from the input where it has them.
    let dir_len = (h.flows as usize).div_ceil(1024).min(1 << 16);
    let split = (usize::from(rest[0]) * 8).min(rest.len() - 1);
    let (dirs, body) = rest[1..].split_at(split.min(rest.len() - 1));
    let word = |i: usize| {
        let at = 4 * i;
        dirs.get(at..at + 4)
            .map_or(i as u32, |b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let flows_dir: Vec<u32> = (0..dir_len).map(word).collect();
    let by_b_dir: Vec<u32> = (0..dir_len).map(|i| word(dir_len + i)).collect();
    let file = index::file::assemble(&h, body, &flows_dir, &by_b_dir);
    let Ok(ix) = index::IndexFile::parse(file, "fuzz") else {
        return;
    };
    let _ = ix.prelude();
    let _ = ix.frames();
    for n in [
        index::Narrow::Host("10.0.0.1".parse().unwrap()),
        index::Narrow::Port(53),
        index::Narrow::Net { addr: "10.0.0.0".parse().unwrap(), prefix: 8 },
        index::Narrow::Proto(17),
    ] {
        if let Ok(Some(flows)) = ix.candidates(&n) {
            let mut out = Vec::new();
            let _ = ix.postings(&flows, &mut out);
        }
    }
    let _ = ix.verify();
});
