//! records::spool: the collector's spool reader on damaged files. Mode 0: any bytes after the magic (no
//! panic, no endless loop, and frames plus skipped bytes never exceed the file). Mode 1: a spool of six
//! frames written by SpoolWriter, then overwritten by the fuzz bytes at a fuzz offset: every frame that
//! lies wholly outside the damage is read back (the reader resynchronises past a corrupt region instead
//! of dropping the rest), unless the damage forged a frame of its own with a matching crc.
#![no_main]

use libfuzzer_sys::fuzz_target;
use records::spool::{SpoolReader, SpoolWriter, SPOOL_MAGIC};
use std::path::PathBuf;

const RECORD: usize = wire::record::RECORD_LEN;

fn path() -> PathBuf {
    std::env::temp_dir().join(format!("ringcap-spool-fuzz-{}", std::process::id()))
}

/// Frames read: (probe_id, payload); None when the file is refused (a damaged magic).
fn read_all(p: &std::path::Path, file_len: u64) -> Option<Vec<(u64, Vec<u8>)>> {
    let mut r = SpoolReader::open(p).ok()?;
    let mut out = Vec::new();
    let mut consumed = 8u64;
    while let Ok(Some(h)) = r.next_frame() {
        consumed += 24 + r.payload().len() as u64;
        out.push((h.probe_id, r.payload().to_vec()));
        assert!(out.len() < 100_000, "endless reader");
    }
    assert!(consumed + r.skipped_bytes() <= file_len, "{consumed} + {} > {file_len}", r.skipped_bytes());
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let p = path();
    if mode & 1 == 0 {
        let mut bytes = SPOOL_MAGIC.to_vec();
        bytes.extend_from_slice(rest);
        std::fs::write(&p, &bytes).unwrap();
        read_all(&p, bytes.len() as u64).expect("the magic is intact");
        return;
    }
    if rest.len() < 2 {
        return;
    }
    // Six frames of 1..=6 records; frame i's payload is bytes of value i + 1.
    let _ = std::fs::remove_file(&p);
    let mut w = SpoolWriter::create(&p).unwrap();
    let mut spans = Vec::new();
    let mut at = 8u64;
    let frames: Vec<Vec<u8>> = (0..6).map(|i| vec![i as u8 + 1; RECORD * (i + 1)]).collect();
    for (i, f) in frames.iter().enumerate() {
        w.append(i as u64, 7, (i + 1) as u32, f).unwrap();
        let end = at + 24 + f.len() as u64;
        spans.push((at, end));
        at = end;
    }
    drop(w);
    let mut bytes = std::fs::read(&p).unwrap();
    let off = u16::from_le_bytes([rest[0], rest[1]]) as usize % bytes.len();
    let damage = &rest[2..];
    let end = (off + damage.len()).min(bytes.len());
    bytes[off..end].copy_from_slice(&damage[..end - off]);
    std::fs::write(&p, &bytes).unwrap();
    let Some(got) = read_all(&p, bytes.len() as u64) else {
        assert!(off < 8, "refused with the magic intact");
        return;
    };
    let forged = got.iter().any(|(id, payload)| frames.get(*id as usize) != Some(payload));
    if forged {
        return; // a forged frame may swallow real ones
    }
    for (i, &(s, e)) in spans.iter().enumerate() {
        let untouched = e <= off as u64 || s >= end as u64;
        if untouched {
            assert!(
                got.iter().any(|(id, payload)| *id == i as u64 && *payload == frames[i]),
                "frame {i} at {s}..{e} lost; damage at {off}..{end}; got {:?}",
                got.iter().map(|g| g.0).collect::<Vec<_>>()
            );
        }
    }
});
