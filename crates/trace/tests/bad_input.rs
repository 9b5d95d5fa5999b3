//! Damaged inputs: what is valid is converted, what is not is reported with file and offset; no
//! panic, no hang.

mod common;

use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use common::*;
use trace::{convert, ConvertOptions, ConvertReport, Progress};

const T0: u64 = 1_795_309_000_000_000_000;

fn packets(n: u64) -> Vec<Pkt> {
    (0..n)
        .map(|i| {
            Pkt::new(
                T0 + i * 1000,
                udp4(
                    [10, 0, 0, 1],
                    [10, 0, 0, 2],
                    1000 + i as u16,
                    53,
                    20 + i as usize,
                    None,
                ),
            )
        })
        .collect()
}

fn run(inputs: &[PathBuf], out: &Path) -> ConvertReport {
    let mut o = ConvertOptions::new(out);
    o.threads = 1;
    convert(inputs, &o, &Progress::default()).expect("convert runs even on bad input")
}

/// Offsets of all converted rows, sorted.
fn offsets(out: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = read_all(out)
        .iter()
        .flat_map(|b| {
            b.column_by_name("offset")
                .unwrap()
                .as_primitive::<UInt64Type>()
                .values()
                .to_vec()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn truncated_anywhere() {
    let dir = tempdir();
    let (bytes, offs) = pcap_bytes(&packets(5), 1);
    // Record i spans [offs[i] - 16, offs[i] + caplen).
    let ends: Vec<usize> = (0..5)
        .map(|i| offs[i] as usize + 20 + 28 + 14 + i)
        .collect();
    assert_eq!(*ends.last().unwrap(), bytes.len());
    let mut cut = 0;
    while cut <= bytes.len() {
        let input = write(dir.path(), &format!("cut{cut}.pcap"), &bytes[..cut]);
        let out = dir.path().join(format!("out{cut}"));
        let r = run(std::slice::from_ref(&input), &out);
        let rep = &r.inputs[0];
        if cut < 24 {
            assert!(
                rep.error.is_some(),
                "cut {cut}: a file without a whole header is refused"
            );
            assert_eq!(r.failed_inputs(), 1);
        } else {
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(rep.packets as usize, whole, "cut {cut}");
            let start = if whole == 0 { 24 } else { ends[whole - 1] };
            if cut > start {
                let i = &rep.issues[0];
                assert!(i.corrupt);
                assert_eq!(
                    (i.offset, i.bytes),
                    (start as u64, (cut - start) as u64),
                    "cut {cut}: {i:?}"
                );
                assert_eq!(rep.path, input.display().to_string());
            } else {
                assert_eq!(rep.issues_total, 0, "cut {cut}");
            }
            assert_eq!(offsets(&out), offs[..whole]);
        }
        cut += if cut < 30 { 1 } else { 7 };
    }
}

#[test]
fn wrong_magic_is_reported_and_the_other_inputs_converted() {
    let dir = tempdir();
    let junk = write(
        dir.path(),
        "notes.txt",
        b"this is not a capture file at all\n",
    );
    let empty = write(dir.path(), "empty.pcap", b"");
    let (bytes, _) = pcap_bytes(&packets(3), 1);
    let good = write(dir.path(), "good.pcap", &bytes);
    let out = dir.path().join("out");
    let r = run(&[junk, empty, good], &out);
    assert_eq!(r.failed_inputs(), 2);
    assert!(
        r.inputs[0]
            .error
            .as_ref()
            .unwrap()
            .contains("not a pcap or pcapng file"),
        "{:?}",
        r.inputs[0].error
    );
    assert!(
        r.inputs[1].error.as_ref().unwrap().contains("empty"),
        "{:?}",
        r.inputs[1].error
    );
    assert_eq!(r.inputs[2].packets, 3);
    assert_eq!(r.packets, 3);
}

#[test]
fn absurd_caplen_is_skipped_and_a_zero_length_record_is_a_packet() {
    let dir = tempdir();
    let pk = packets(6);
    let (mut bytes, offs) = pcap_bytes(&pk, 1);
    // Record 1 claims a 2 GiB caplen; before record 4 comes a zero-length record, which is legal
    // (libpcap and tcpdump read it and every record after it).
    let h1 = offs[1] as usize - 16;
    bytes[h1 + 8..h1 + 12].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let h4 = offs[4] as usize - 16;
    bytes.splice(h4..h4, [0u8; 16]);
    let input = write(dir.path(), "bad.pcap", &bytes);
    let out = dir.path().join("out");
    let r = run(std::slice::from_ref(&input), &out);
    let rep = &r.inputs[0];
    assert_eq!(
        offsets(&out),
        [
            offs[0],
            offs[2],
            offs[3],
            offs[4],
            offs[4] + 16,
            offs[5] + 16
        ]
    );
    let corrupt: Vec<_> = rep.issues.iter().filter(|i| i.corrupt).collect();
    assert_eq!(corrupt.len(), 1, "{:?}", rep.issues);
    assert_eq!(corrupt[0].offset, h1 as u64);
    assert!(
        corrupt[0].reason.contains("caplen"),
        "{}",
        corrupt[0].reason
    );
    assert_eq!(corrupt[0].bytes, (offs[2] - 16) - h1 as u64);
}

#[test]
fn caplen_above_snaplen_is_kept_and_noted() {
    let dir = tempdir();
    let (mut bytes, _) = pcap_bytes(&packets(3), 1);
    bytes[16..20].copy_from_slice(&60u32.to_le_bytes());
    let input = write(dir.path(), "snap.pcap", &bytes);
    let out = dir.path().join("out");
    let r = run(&[input], &out);
    assert_eq!(r.packets, 3);
    assert!(r.inputs[0].issues.iter().all(|i| !i.corrupt));
    assert!(r.inputs[0]
        .issues
        .iter()
        .any(|i| i.reason.contains("snaplen")));
}

#[test]
fn damaged_pcapng_block_and_cut_compressed_stream() {
    let dir = tempdir();
    let pk: Vec<(u32, Pkt)> = packets(4).into_iter().map(|p| (0, p)).collect();
    let (mut ng, offs) = pcapng_bytes(
        &[Iface {
            linktype: 1,
            tsresol: 9,
        }],
        &pk,
        false,
    );
    // Break the trailing length of packet 1's block: the reader resynchronises at the next block.
    let end1 = offs[2] as usize - 28;
    ng[end1 - 4..end1].copy_from_slice(&7u32.to_le_bytes());
    let p_ng = write(dir.path(), "broken.pcapng", &ng);
    let out = dir.path().join("ng");
    let r = run(std::slice::from_ref(&p_ng), &out);
    assert!(
        r.inputs[0].issues.iter().any(|i| i.corrupt),
        "{:?}",
        r.inputs[0].issues
    );
    let got = offsets(&out);
    assert!(
        got.contains(&offs[0]) && got.contains(&offs[2]) && got.contains(&offs[3]),
        "{got:?}"
    );

    // A zstd stream cut in the middle: the decoded prefix is converted, the cut reported.
    let big = packets(3000);
    let (plain, all_offs) = pcap_bytes(&big, 1);
    let z = zstd::encode_all(&plain[..], 1).unwrap();
    let p_z = write(dir.path(), "cut.pcap.zst", &z[..z.len() / 2]);
    let out = dir.path().join("z");
    let r = run(std::slice::from_ref(&p_z), &out);
    let rep = &r.inputs[0];
    assert!(rep.packets > 0 && rep.packets < 3000, "{}", rep.packets);
    assert!(
        rep.error.is_some() || rep.issues.iter().any(|i| i.corrupt),
        "{rep:?}"
    );
    assert_eq!(offsets(&out), all_offs[..rep.packets as usize]);
}

#[test]
fn random_garbage_never_panics_or_hangs() {
    let dir = tempdir();
    let (good, _) = pcap_bytes(&packets(3), 1);
    let mut x = 0x1234_5678_9abc_def0u64;
    for seed in 0..12 {
        let mut bytes = good[..24].to_vec();
        for _ in 0..(4096 + seed * 777) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.push(x as u8);
        }
        // Every third file keeps a valid record after the garbage.
        if seed % 3 == 0 {
            bytes.extend_from_slice(&good[24..]);
        }
        let input = write(dir.path(), &format!("g{seed}.pcap"), &bytes);
        let out = dir.path().join(format!("out{seed}"));
        let r = run(&[input], &out);
        assert!(r.inputs[0].error.is_none() || r.inputs[0].packets == 0);
    }
}
