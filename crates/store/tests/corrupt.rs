//! Damaged input: truncation at every offset, bad lengths, zero-length records, unknown blocks,
//! wrong magic. The reader must return every whole packet it can find, say what it skipped and
//! where, and never panic or hang. Also `repair`.

mod common;

use std::io::Cursor;
use std::path::Path;

use common::*;
use store::{repair, CaptureReader, Format, Issue, RepairOptions, StoreError, WriterOptions};

/// Reads all packets from bytes; Err only when the header is unusable.
fn read_bytes(bytes: &[u8]) -> Result<(Vec<ReadPacket>, Vec<Issue>), StoreError> {
    let mut r =
        CaptureReader::from_reader(Box::new(Cursor::new(bytes.to_vec())), Path::new("mem"))?;
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("in-memory reads cannot fail");
        out.push(ReadPacket {
            ts_ns: p.ts_ns,
            wire_len: p.wire_len,
            data: p.data.to_vec(),
            linktype: p.linktype,
            interface: p.interface,
        });
    }
    Ok((out, r.issues().to_vec()))
}

/// A small file written by our writer, its packets, and the end offset of each record.
fn sample(format: Format, n: usize) -> (Vec<u8>, Vec<ReadPacket>, Vec<usize>) {
    let dir = TempDir::new("corrupt");
    let path = dir.path("s");
    let pkts: Vec<TestPacket> = packets(n, true)
        .into_iter()
        .map(|mut p| {
            p.data.truncate(40 + p.data.len() % 50);
            p
        })
        .collect();
    write_all(
        &path,
        WriterOptions {
            format,
            buffer_size: 1 << 20,
            ..Default::default()
        },
        &pkts,
    );
    let bytes = std::fs::read(&path).unwrap();
    let (read, _) = read_all(&path);
    // Record ends, from the format definitions (not from the crate).
    let mut ends = Vec::new();
    match format {
        Format::Pcap { .. } => {
            let mut at = 24;
            for p in &read {
                at += 16 + p.data.len();
                ends.push(at);
            }
        }
        Format::PcapNg => {
            let mut at = 0;
            while at < bytes.len() {
                let ty = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
                at += u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
                if ty == 6 {
                    ends.push(at);
                }
            }
        }
    }
    assert_eq!(ends.len(), n);
    (bytes, read, ends)
}

fn header_len(format: Format, bytes: &[u8]) -> usize {
    match format {
        Format::Pcap { .. } => 24,
        Format::PcapNg => {
            let shb = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
            shb + u32::from_le_bytes(bytes[shb + 4..shb + 8].try_into().unwrap()) as usize
        }
    }
}

#[test]
fn truncation_at_every_offset_keeps_every_whole_packet_before_the_cut() {
    for format in [Format::Pcap { nanos: true }, Format::PcapNg] {
        let (bytes, full, ends) = sample(format, 6);
        let hdr = header_len(format, &bytes);
        for cut in 0..=bytes.len() {
            let result = read_bytes(&bytes[..cut]);
            let shb_len = if format == Format::PcapNg {
                u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize
            } else {
                24
            };
            if cut < shb_len {
                let e = result.expect_err("a cut header is an error");
                assert!(!e.to_string().is_empty());
                continue;
            }
            let (got, issues) = result.unwrap_or_else(|e| panic!("{format:?} cut {cut}: {e}"));
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(got, full[..whole], "{format:?} cut at {cut}");
            let at_boundary =
                cut == hdr || cut == shb_len || ends.contains(&cut) || cut == bytes.len();
            if at_boundary {
                assert_eq!(issues, vec![], "{format:?} cut at boundary {cut}");
            } else {
                assert_eq!(issues.len(), 1, "{format:?} cut {cut}: {issues:?}");
                assert!(
                    issues[0].corrupt && issues[0].reason.contains("ends"),
                    "{:?}",
                    issues[0]
                );
                assert_eq!(issues[0].offset + issues[0].skipped, cut as u64);
            }
        }
    }
}

#[test]
fn truncated_compressed_streams_yield_a_prefix() {
    if !have("zstd") {
        return;
    }
    let (bytes, full, _) = sample(Format::PcapNg, 200);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("zstd -q -c -1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(&bytes)?;
            c.wait_with_output()
        })
        .unwrap();
    let z = out.stdout;
    for cut in (4..z.len()).step_by(7) {
        if let Ok((got, _)) = read_bytes(&z[..cut]) {
            assert!(got.len() <= full.len());
            assert_eq!(got, full[..got.len()], "zstd cut at {cut}");
        }
    }
}

#[test]
fn pcap_absurd_caplen_is_skipped_and_reading_resumes() {
    let (mut bytes, full, ends) = sample(Format::Pcap { nanos: true }, 6);
    let rec2 = ends[1];
    bytes[rec2 + 8..rec2 + 12].copy_from_slice(&4_000_000u32.to_le_bytes());
    let (got, issues) = read_bytes(&bytes).unwrap();
    let want: Vec<_> = full
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(got, want);
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].offset, rec2 as u64);
    assert_eq!(issues[0].skipped, (ends[2] - rec2) as u64);
    assert!(issues[0].reason.contains("caplen 4000000"), "{}", issues[0]);
}

#[test]
fn pcap_zero_length_record_is_a_packet_as_in_libpcap() {
    let (bytes, full, ends) = sample(Format::Pcap { nanos: false }, 4);
    let mut b = bytes[..ends[1]].to_vec();
    b.extend([0u8; 16]);
    b.extend(&bytes[ends[1]..]);
    let (got, issues) = read_bytes(&b).unwrap();
    assert!(issues.is_empty(), "{issues:?}");
    assert_eq!(got.len(), 5);
    assert_eq!(got[..2], full[..2]);
    assert_eq!(
        (got[2].ts_ns, got[2].wire_len, got[2].data.len()),
        (0, 0, 0)
    );
    assert_eq!(got[3..], full[2..]);
}

#[test]
fn pcap_caplen_above_snaplen_is_cut_to_it_and_noted_as_in_libpcap() {
    let mut b = Vec::new();
    b.extend(0xa1b2c3d4u32.to_le_bytes());
    b.extend(2u16.to_le_bytes());
    b.extend(4u16.to_le_bytes());
    b.extend([0; 8]);
    b.extend(10u32.to_le_bytes()); // snaplen 10
    b.extend(1u32.to_le_bytes());
    b.extend([1, 0, 0, 0, 2, 0, 0, 0, 20, 0, 0, 0, 20, 0, 0, 0]);
    b.extend([0xab; 20]);
    let (got, issues) = read_bytes(&b).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].data.len(), got[0].wire_len), (10, 20));
    assert_eq!(got[0].ts_ns, 1_000_002_000);
    assert_eq!(issues.len(), 1);
    assert!(
        !issues[0].corrupt
            && issues[0]
                .reason
                .contains("exceeds the file's snaplen 10: cut to 10")
    );
}

#[test]
fn pcapng_bad_block_lengths_are_skipped_by_resync() {
    let (bytes, full, ends) = sample(Format::PcapNg, 6);
    let without = |i: usize| -> Vec<ReadPacket> {
        full.iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, p)| p.clone())
            .collect()
    };
    // EPB 2 starts where EPB 1 ends.
    let at = ends[1];
    for (what, patch) in [
        ("not a multiple of 4", (at + 4, 4_001u32)),
        ("below 12", (at + 4, 0u32)),
        ("trailer", (ends[2] - 4, 12_345u32)),
        ("caplen", (at + 20, 1_000u32)),
    ] {
        let mut b = bytes.clone();
        b[patch.0..patch.0 + 4].copy_from_slice(&patch.1.to_le_bytes());
        let (got, issues) = read_bytes(&b).unwrap();
        assert_eq!(got, without(2), "{what}");
        assert_eq!(issues.len(), 1, "{what}: {issues:?}");
        assert!(issues[0].corrupt);
        assert_eq!(issues[0].offset, at as u64, "{what}");
        assert_eq!(
            issues[0].skipped,
            (ends[2] - at) as u64,
            "{what}: {}",
            issues[0]
        );
    }
}

#[test]
fn pcapng_unknown_and_zero_blocks_and_undeclared_interfaces() {
    let (bytes, full, ends) = sample(Format::PcapNg, 4);
    // An unknown (but well-formed) block is legal: skipped and noted, nothing lost.
    let mut b = bytes[..ends[0]].to_vec();
    b.extend(0x1234_5678u32.to_le_bytes());
    b.extend(16u32.to_le_bytes());
    b.extend([9, 9, 9, 9]);
    b.extend(16u32.to_le_bytes());
    b.extend(&bytes[ends[0]..]);
    let (got, issues) = read_bytes(&b).unwrap();
    assert_eq!(got, full);
    assert_eq!(issues.len(), 1);
    assert!(!issues[0].corrupt && issues[0].skipped == 16 && issues[0].offset == ends[0] as u64);

    // Eight zero bytes (a zero-length block) between two packets.
    let mut b = bytes[..ends[0]].to_vec();
    b.extend([0u8; 8]);
    b.extend(&bytes[ends[0]..]);
    let (got, issues) = read_bytes(&b).unwrap();
    assert_eq!(got, full);
    assert_eq!((issues.len(), issues[0].skipped), (1, 8));

    // A packet for interface 7, which no IDB declared.
    let mut b = bytes.clone();
    b[ends[0] + 8..ends[0] + 12].copy_from_slice(&7u32.to_le_bytes());
    let (got, issues) = read_bytes(&b).unwrap();
    assert_eq!(got.len(), 3);
    assert!(issues[0].reason.contains("interface 7"));
}

#[test]
fn wrong_magic_and_empty_input_are_clear_errors() {
    let e = read_bytes(b"").unwrap_err().to_string();
    assert!(e.contains("empty"), "{e}");
    let e = read_bytes(b"GIF89a this is not a capture")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a pcap or pcapng file"), "{e}");
    let mut b = 0xa1b2c3d4u32.to_le_bytes().to_vec();
    b.extend(9u16.to_le_bytes());
    b.extend([0; 18]);
    let e = read_bytes(&b).unwrap_err().to_string();
    assert!(e.contains("version 9"), "{e}");
}

#[test]
fn random_garbage_after_a_header_terminates_without_panic() {
    let mut state = 1u64;
    for format in [Format::Pcap { nanos: false }, Format::PcapNg] {
        let (bytes, _, _) = sample(format, 1);
        let hdr = header_len(format, &bytes);
        for round in 0..200 {
            let mut b = bytes[..hdr].to_vec();
            for _ in 0..(round * 37 % 3000) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Mostly small bytes so lengths and types are often "almost valid".
                b.push(if state.is_multiple_of(3) {
                    (state >> 8) as u8
                } else {
                    (state >> 8) as u8 & 0x0f
                });
            }
            let _ = read_bytes(&b).unwrap();
        }
    }
}

#[test]
fn repair_cuts_after_the_last_whole_packet() {
    let dir = TempDir::new("repair");
    let force = RepairOptions {
        force: true, // not a .partial file
        dry_run: false,
    };
    for format in [Format::Pcap { nanos: true }, Format::PcapNg] {
        let (bytes, _, ends) = sample(format, 5);
        let path = dir.path("r.cap");
        // A crash mid-record; zero-filled blocks after a whole record (what a torn write leaves);
        // for pcapng also a cut record followed by zeros (its trailing length catches that; in
        // pcap the zeros would complete the record, which no reader can tell).
        let mut cases = vec![
            bytes[..ends[3] + 10].to_vec(),
            [&bytes[..ends[3]], &[0u8; 4096][..]].concat(),
        ];
        if format == Format::PcapNg {
            cases.push([&bytes[..ends[3] + 10], &[0u8; 4096][..]].concat());
        }
        for b in cases {
            std::fs::write(&path, &b).unwrap();
            let rep = repair(&path, force).unwrap();
            assert!(rep.changed() && !rep.rewritten);
            assert_eq!(
                (rep.original_len, rep.new_len, rep.packets),
                (b.len() as u64, ends[3] as u64, 4)
            );
            assert_eq!(rep.first_damage.as_ref().unwrap().offset, ends[3] as u64);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), ends[3] as u64);
            let (got, r) = read_all(&path);
            assert_eq!((got.len(), r.issues().len()), (4, 0));
            if have("capinfos") {
                assert_eq!(capinfos_count(&path), 4);
            }
        }
        // A clean file is left alone.
        std::fs::write(&path, &bytes).unwrap();
        let rep = repair(&path, force).unwrap();
        assert!(!rep.changed());
        assert_eq!(rep.packets, 5);
    }
}
