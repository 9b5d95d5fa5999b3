//! Hostile capture files must not grow a reader without bound (issue 33, item 11): a few hundred
//! KB of zstd can hold hundreds of millions of interface descriptions or zeroed records. Each
//! command runs under GNU time, whose peak resident size is compared with the bound docs/index.md
//! states (under 200 MiB for a file being indexed; a reader holds its buffers and at most 65 536
//! interfaces per section).

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bound docs/index.md gives: indexing one file stays under 200 MiB.
const BOUND_KIB: u64 = 200 << 10;

fn dir(name: &str) -> PathBuf {
    // On a disk: /tmp may be memory.
    let d =
        PathBuf::from("/var/tmp").join(format!("ringcap-membound-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `ringcap ARGS` under GNU time; (exit code, stderr, peak resident KiB).
fn peak(args: &[&str]) -> (Option<i32>, String, u64) {
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("PEAK_KIB=%M")
        .arg(common::ringcap())
        .args(args)
        .output()
        .expect("/usr/bin/time (Debian package time: make deps)");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let kib = err
        .lines()
        .find_map(|l| l.strip_prefix("PEAK_KIB="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak size from GNU time: {err}"));
    (out.status.code(), err, kib)
}

fn le32(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}

/// A pcapng section header, then `n` interface descriptions (Ethernet), then one packet.
fn write_idb_bomb(path: &Path, n: u64) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zstd::stream::Encoder::new(f, 3).unwrap();
    let mut shb = Vec::new();
    shb.extend_from_slice(&le32(0x0a0d_0d0a));
    shb.extend_from_slice(&le32(28));
    shb.extend_from_slice(&le32(0x1a2b_3c4d));
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    shb.extend_from_slice(&le32(28));
    z.write_all(&shb).unwrap();
    let mut idb = Vec::new();
    idb.extend_from_slice(&le32(1));
    idb.extend_from_slice(&le32(20));
    idb.extend_from_slice(&[1, 0, 0, 0]);
    idb.extend_from_slice(&le32(0));
    idb.extend_from_slice(&le32(20));
    let block: Vec<u8> = idb.repeat(4096);
    for _ in 0..n / 4096 {
        z.write_all(&block).unwrap();
    }
    let mut epb = Vec::new();
    epb.extend_from_slice(&le32(6));
    epb.extend_from_slice(&le32(32 + 60));
    epb.extend_from_slice(&le32(0));
    epb.extend_from_slice(&[0; 8]);
    epb.extend_from_slice(&le32(60));
    epb.extend_from_slice(&le32(60));
    epb.extend_from_slice(&[0; 60]);
    epb.extend_from_slice(&le32(32 + 60));
    z.write_all(&epb).unwrap();
    z.finish().unwrap();
}

/// A pcap header, then `bytes` of zeros: 16-byte records of length 0 at time 0, in one zstd
/// frame.
fn write_zero_records(path: &Path, bytes: u64) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zstd::stream::Encoder::new(f, 1).unwrap();
    let mut h = Vec::new();
    h.extend_from_slice(&le32(0xa1b2_c3d4));
    h.extend_from_slice(&[2, 0, 4, 0]);
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&le32(65535));
    h.extend_from_slice(&le32(1));
    z.write_all(&h).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..bytes >> 20 {
        z.write_all(&zeros).unwrap();
    }
    z.finish().unwrap();
}

#[test]
fn interface_descriptions_without_end_stay_bounded_in_index_query_and_convert() {
    let d = dir("idb");
    let file = d.join("bomb.pcapng.zst");
    // 20 M descriptions: 400 MB decoded, a few hundred KB stored; 800 MB of interfaces before
    // the bound.
    write_idb_bomb(&file, 20 << 20);
    let f = file.to_str().unwrap();
    let out = d.join("out.pcap");
    let pq = d.join("pq");
    let runs: [(&str, Vec<&str>); 3] = [
        ("index", vec!["index", "-q", f]),
        (
            "query",
            vec!["query", f, "", "-w", out.to_str().unwrap(), "-q"],
        ),
        (
            "convert",
            vec!["convert", f, "-o", pq.to_str().unwrap(), "-q"],
        ),
    ];
    for (what, args) in runs {
        let (code, err, kib) = peak(&args);
        assert!(code.is_some(), "{what} died: {err}");
        assert!(
            kib < BOUND_KIB,
            "{what} peaked at {} MiB on 20 M interface descriptions: {err}",
            kib >> 10
        );
        eprintln!("{what}: exit {code:?}, peak {} MiB", kib >> 10);
    }
    // The query says what it could not read (more interfaces than a section may have).
    let (code, err, _) = peak(&["query", f, "", "-w", out.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("interfaces"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn one_frame_of_16_million_zeroed_records_is_indexed_within_the_bound() {
    let d = dir("zeros");
    let file = d.join("zeros.pcap.zst");
    // 16 M records (256 MiB decoded, 4x the index's packet limit): 450 MB of log before the
    // bound held within a frame.
    write_zero_records(&file, 256 << 20);
    let f = file.to_str().unwrap();
    let (code, err, kib) = peak(&["index", "-q", f]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        kib < BOUND_KIB,
        "ringcap index peaked at {} MiB on 256 MiB of zeroed records: {err}",
        kib >> 10
    );
    eprintln!("index: peak {} MiB", kib >> 10);
    // The index stopped at its packet limit; a query scans the rest and counts every record, as
    // libpcap reads 16 M empty packets.
    let out = d.join("out.pcap");
    let (code, err, kib) = peak(&["query", f, "", "-w", out.to_str().unwrap(), "-q"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(kib < BOUND_KIB, "query peaked at {} MiB: {err}", kib >> 10);
    let records = (std::fs::metadata(&out).unwrap().len() - 24) / 16;
    assert_eq!(records, (256 << 20) / 16);
    std::fs::remove_dir_all(&d).unwrap();
}
