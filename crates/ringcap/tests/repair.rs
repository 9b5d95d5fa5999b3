//! `ringcap repair` keeps every whole packet around a damaged region, refuses finished files
//! without --force, and changes nothing with --dry-run. The expectation is tcpdump's reading of
//! the file before it was damaged, less the packets the damage hit.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// A pcap (µs, little-endian, Ethernet) file of `n` frames; returns it and each record's offset.
fn pcap_file(n: u32) -> (Vec<u8>, Vec<usize>) {
    // magic, version 2.4, thiszone, sigfigs, snaplen, link type.
    let mut f = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    f.extend_from_slice(&[2, 0, 4, 0]);
    for v in [0u32, 0, 65_535, 1] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    let mut offsets = Vec::new();
    for i in 0..n {
        offsets.push(f.len());
        let data = frame(i, 1000, 2000, 60 + (i as usize * 37) % 900);
        for v in [
            1_700_000_000 + i,
            i * 1000,
            data.len() as u32,
            data.len() as u32,
        ] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(&data);
    }
    (f, offsets)
}

/// A pcapng file (one section, one Ethernet interface, µs) of `n` frames as EPBs; returns it
/// and each EPB's offset.
fn pcapng_file(n: u32) -> (Vec<u8>, Vec<usize>) {
    let le = |v: u32| v.to_le_bytes();
    let mut f = Vec::new();
    // SHB: type, length 28, byte-order magic, version 1.0, section length -1, length.
    f.extend_from_slice(&le(0x0a0d_0d0a));
    f.extend_from_slice(&le(28));
    f.extend_from_slice(&le(0x1a2b_3c4d));
    f.extend_from_slice(&[1, 0, 0, 0]);
    f.extend_from_slice(&[0xff; 8]);
    f.extend_from_slice(&le(28));
    // IDB: link type 1, snaplen 65535, no options.
    f.extend_from_slice(&le(1));
    f.extend_from_slice(&le(20));
    f.extend_from_slice(&[1, 0, 0, 0]);
    f.extend_from_slice(&le(65_535));
    f.extend_from_slice(&le(20));
    let mut offsets = Vec::new();
    for i in 0..n {
        offsets.push(f.len());
        let data = frame(i, 1000, 2000, 60 + (i as usize * 37) % 900);
        let padded = data.len().div_ceil(4) * 4;
        let len = 32 + padded as u32;
        let ts = (1_700_000_000 + u64::from(i)) * 1_000_000 + u64::from(i) * 1000;
        for v in [
            6,
            len,
            0,
            (ts >> 32) as u32,
            ts as u32,
            data.len() as u32,
            data.len() as u32,
        ] {
            f.extend_from_slice(&le(v));
        }
        f.extend_from_slice(&data);
        f.resize(f.len() + padded - data.len(), 0);
        f.extend_from_slice(&le(len));
    }
    (f, offsets)
}

/// Each packet as tcpdump prints it (`-tt -nn -xx`: timestamp, summary, every byte in hex);
/// tcpdump must read the file without complaint.
fn tcpdump_packets(path: &Path) -> Vec<String> {
    let out = Command::new("tcpdump")
        .args(["-tt", "-nn", "-xx", "-r"])
        .arg(path)
        .output()
        .expect("run tcpdump");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tcpdump -r {}: {err}", path.display());
    assert!(
        !err.contains("truncated") && !err.contains("pcap_loop"),
        "tcpdump -r {}: {err}",
        path.display()
    );
    let mut packets: Vec<String> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        match packets.last_mut() {
            Some(p) if line.starts_with(char::is_whitespace) => {
                p.push('\n');
                p.push_str(line);
            }
            _ => packets.push(line.to_string()),
        }
    }
    packets
}

fn repair(args: &[&str], file: &Path) -> Output {
    Command::new(ringcap())
        .arg("repair")
        .args(args)
        .arg(file)
        .output()
        .expect("run ringcap repair")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn repair_keeps_every_whole_packet_around_damage() {
    if !(have("tcpdump") && have("zstd")) {
        return;
    }
    let dir = temp_dir("repair");
    let n = 40;
    for (ext, (bytes, offsets)) in [("pcap", pcap_file(n)), ("pcapng", pcapng_file(n))] {
        let original = dir.join(format!("orig.{ext}"));
        std::fs::write(&original, &bytes).unwrap();
        let all = tcpdump_packets(&original);
        assert_eq!(all.len(), n as usize);
        // Damage from inside packet 15's header to inside packet 16's data (garbage, as a bad
        // sector or a torn write leaves), and a tail cut inside the last packet (kill -9).
        let mut damaged = bytes.clone();
        damaged[offsets[15] + 5..offsets[16] + 20].fill(0xab);
        damaged.truncate(offsets[39] + 30);
        let expected: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| ![15, 16, 39].contains(i))
            .map(|(_, p)| p.clone())
            .collect();

        // A finished (non-.partial) file is refused, and left as it was.
        let finished = dir.join(format!("other.{ext}"));
        std::fs::write(&finished, &damaged).unwrap();
        let out = repair(&[], &finished);
        assert!(!out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains("refused: not a file ringcap was writing")
                && text(&out).contains("--force"),
            "{}",
            text(&out)
        );
        assert_eq!(std::fs::read(&finished).unwrap(), damaged);
        // --force repairs it in place.
        let out = repair(&["--force"], &finished);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(tcpdump_packets(&finished), expected, "{ext} --force");

        // --dry-run says what it would do and changes nothing (same bytes, same name).
        let partial = dir.join(format!(".cap-x.{ext}.partial"));
        std::fs::write(&partial, &damaged).unwrap();
        let out = repair(&["--dry-run"], &partial);
        assert!(out.status.success(), "{}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("nothing changed")
                && said.contains(&format!("would keep {} whole packets", n - 3))
                && said.contains("would cut 2 damaged region(s)")
                && said.contains("would rename"),
            "{said}"
        );
        assert_eq!(std::fs::read(&partial).unwrap(), damaged);
        assert!(!dir.join(format!("cap-x.{ext}")).exists());

        // The real thing: every whole packet before and after the damage, under the final name.
        let out = repair(&[], &partial);
        assert!(out.status.success(), "{}", text(&out));
        let fixed = dir.join(format!("cap-x.{ext}"));
        assert!(!partial.exists() && fixed.exists(), "{}", text(&out));
        assert_eq!(tcpdump_packets(&fixed), expected, "{ext}");

        // Compressed: the damage is inside the zstd stream's content; the file is re-encoded.
        let plain = dir.join(format!("damaged.{ext}"));
        std::fs::write(&plain, &damaged).unwrap();
        let zpartial = dir.join(format!(".cap-z.{ext}.zst.partial"));
        let st = Command::new("zstd")
            .args(["-q", "-f", "-o"])
            .arg(&zpartial)
            .arg(&plain)
            .status()
            .unwrap();
        assert!(st.success());
        let out = repair(&[], &zpartial);
        assert!(out.status.success(), "{}", text(&out));
        let zfixed = dir.join(format!("cap-z.{ext}.zst"));
        let unpacked = dir.join(format!("unpacked.{ext}"));
        let st = Command::new("zstd")
            .args(["-q", "-d", "-f", "-o"])
            .arg(&unpacked)
            .arg(&zfixed)
            .status()
            .unwrap();
        assert!(st.success(), "zstd -d {}", zfixed.display());
        assert_eq!(tcpdump_packets(&unpacked), expected, "{ext}.zst");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Offsets of the records of a pcap file (host byte order, as ringcap and tcpdump write here).
fn pcap_records(bytes: &[u8]) -> Vec<usize> {
    let mut at = 24;
    let mut v = Vec::new();
    while at + 16 <= bytes.len() {
        v.push(at);
        at += 16 + u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
    }
    v
}

/// The (offset, length) of each frame of a zstd or lz4 file.
fn frames(bytes: &[u8], zstd_file: bool) -> Vec<(usize, usize)> {
    let mut at = 0;
    let mut v = Vec::new();
    while at < bytes.len() {
        let n = if zstd_file {
            zstd::zstd_safe::find_frame_compressed_size(&bytes[at..]).unwrap()
        } else {
            // ringcap's lz4 frames: 7-byte header, one block (size, data), end mark.
            let size = u32::from_le_bytes(bytes[at + 7..at + 11].try_into().unwrap());
            7 + 4 + (size & 0x7FFF_FFFF) as usize + 4
        };
        v.push((at, n));
        at += n;
    }
    v
}

fn flip(bytes: &[u8], at: usize, bit: u8) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[at] ^= 1 << bit;
    b
}

/// `zstd -d` or `lz4 -d` of `file` into `to`.
fn unpack(tool: &str, file: &Path, to: &Path) {
    // zstd names its output with -o, lz4 takes it after the input.
    let st = match tool {
        "zstd" => Command::new(tool)
            .args(["-q", "-d", "-f", "-o"])
            .arg(to)
            .arg(file)
            .status(),
        _ => Command::new(tool)
            .args(["-q", "-d", "-f"])
            .arg(file)
            .arg(to)
            .status(),
    }
    .unwrap();
    assert!(st.success(), "{tool} -d {}", file.display());
}

/// The number in "kept N whole packets".
fn kept(said: &str) -> usize {
    said.split_once("kept ")
        .and_then(|(_, r)| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in: {said}"))
}

/// Issue 33 item 13: one flipped bit made repair say "cut 0 damaged region(s) (0 B)" while half the
/// packets went: the zstd decoder stopped at the damaged frame and nothing after it was counted (or
/// kept). Now every frame is decoded alone, so ringcap's files lose only the frame that was hit,
/// and the summary counts every part left out: regions, bytes and, where known, packets. Files of
/// ringcap's own (plain, .zst, .lz4, written by a real capture) and of tcpdump -w (plain and through
/// the zstd tool), one bit flipped in a record header or in compressed data.
#[test]
fn repair_counts_what_one_flipped_bit_left_out() {
    if !(have("tcpdump") && have("zstd") && have("lz4")) {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("repair-flip");
    let mut procs = Vec::new();
    for (base, compress) in [("plain", "none"), ("zst", "zstd:3"), ("lz4", "lz4")] {
        let w = dir.join(base);
        let cmd = ringcap_rx(
            &tb,
            &[
                "capture",
                "-i",
                &tb.rx_if,
                "-w",
                w.to_str().unwrap(),
                "-C",
                "100MB",
                "--compress",
                compress,
                "--frame-size",
                "16KiB",
                "--no-index",
                "-q",
            ],
        );
        procs.push(spawn_announced(cmd, "listening on").child);
    }
    let td = dir.join("td.pcap");
    let mut cmd = tb.command(testbed::Side::Rx, "tcpdump");
    cmd.args(["-i", &tb.rx_if, "-B", "65536", "-w"]).arg(&td);
    procs.push(spawn_announced(cmd, "listening on").child);
    // ~7 MB: more than a frame held whole (4 MiB) once tcpdump's file is one zstd frame.
    for first in (0..14_000).step_by(2000) {
        send(&tb, &varied_frames(first, 2000, 900));
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    for mut p in procs {
        assert!(signal_and_wait(&mut p, libc::SIGINT, "a capture").success());
    }
    let own = |base: &str, ext: &str| {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with(base) && n.ends_with(ext)
            })
            .unwrap_or_else(|| panic!("no {base}*{ext}"))
    };
    let (plain, zst, lz4) = (
        own("plain-", ".pcap"),
        own("zst-", ".pcap.zst"),
        own("lz4-", ".pcap.lz4"),
    );

    let check = |name: &str, damaged: &[u8], all: &[String], lost: Option<usize>| {
        let partial = dir.join(format!(".{name}.partial"));
        std::fs::write(&partial, damaged).unwrap();
        let out = repair(&[], &partial);
        let said = text(&out);
        assert!(out.status.success(), "{name}: {said}");
        let fixed = dir.join(name);
        let readable = if name.ends_with(".zst") || name.ends_with(".lz4") {
            let to = dir.join(format!("{name}.unpacked.pcap"));
            unpack(
                if name.ends_with(".zst") {
                    "zstd"
                } else {
                    "lz4"
                },
                &fixed,
                &to,
            );
            to
        } else {
            fixed.clone()
        };
        let got = tcpdump_packets(&readable);
        // What the summary says it kept is what is there, every packet as it was, in order.
        assert_eq!(kept(&said), got.len(), "{name}: {said}");
        // (Unless a frame kept is said to fail its checksum, or what was kept of it is unverified:
        // the flipped bit may be in that data.)
        let suspect = said.contains("fail their checksum") || said.contains("unverified");
        let mut rest = all.iter();
        for p in got.iter().filter(|_| !suspect) {
            assert!(
                rest.any(|q| q == p),
                "{name}: a packet that was not there: {p}"
            );
        }
        // Something was left out, and the summary counts it: never 0 regions or 0 B. (A frame
        // kept whole that fails its checksum may have hit only a packet's payload.)
        if said.contains("already whole") && suspect {
            return said;
        }
        assert!(got.len() < all.len(), "{name}: {said}");
        assert!(
            said.contains("damaged region(s)")
                && !said.contains(" 0 damaged region(s)")
                && !said.contains("(0 B"),
            "{name}: {said}"
        );
        if let Some(n) = lost {
            assert_eq!(all.len() - got.len(), n, "{name}: {said}");
            assert!(said.contains("cut 1 damaged region(s)"), "{name}: {said}");
        }
        // Where the summary knows the packets left out, they add up.
        if let Some((_, r)) = said.split_once("compressed, ") {
            if let Some(n) = r
                .split(" packets")
                .next()
                .and_then(|n| n.parse::<usize>().ok())
            {
                assert_eq!(got.len() + n, all.len(), "{name}: {said}");
            }
        }
        said
    };

    // A record header's caplen with its top bit set: that record goes, every other stays.
    for (name, file) in [("own.pcap", &plain), ("td-hdr.pcap", &td)] {
        let bytes = std::fs::read(file).unwrap();
        let all = tcpdump_packets(file);
        let recs = pcap_records(&bytes);
        assert_eq!(recs.len(), all.len());
        let k = recs.len() / 2;
        let cap_msb = recs[k] + 8 + if cfg!(target_endian = "little") { 3 } else { 0 };
        check(name, &flip(&bytes, cap_msb, 7), &all, Some(1));
        // The same inside tcpdump -w | zstd: decoded, cut, encoded anew.
        if file == &td {
            let damaged = dir.join("td-hdr-damaged.pcap");
            std::fs::write(&damaged, flip(&bytes, cap_msb, 7)).unwrap();
            let z = dir.join("td-hdr-damaged.pcap.zst");
            let st = Command::new("zstd")
                .args(["-q", "-f", "-o"])
                .arg(&z)
                .arg(&damaged)
                .status()
                .unwrap();
            assert!(st.success());
            check(
                "td-hdr.pcap.zst",
                &std::fs::read(&z).unwrap(),
                &all,
                Some(1),
            );
        }
    }

    // One bit of compressed data in ringcap's own files: only the frame hit is lost (at most what a
    // 16 KiB frame holds), not everything after it.
    for (name, file, zstd_file) in [("own.pcap.zst", &zst, true), ("own.pcap.lz4", &lz4, false)] {
        let bytes = std::fs::read(file).unwrap();
        let unpacked = dir.join(format!("{name}.orig.pcap"));
        unpack(if zstd_file { "zstd" } else { "lz4" }, file, &unpacked);
        let all = tcpdump_packets(&unpacked);
        let f = frames(&bytes, zstd_file);
        assert!(f.len() > 50, "{name}: {} frames", f.len());
        let (at, len) = f[f.len() / 2];
        // zstd: the middle of the frame's compressed blocks; lz4: the block's first token (its
        // literal length), a bit no lz4 checksum guards in these frames but the records do.
        let (byte, bit) = if zstd_file {
            (at + len / 2, 3)
        } else {
            (at + 11, 4)
        };
        let said = check(name, &flip(&bytes, byte, bit), &all, None);
        assert!(
            kept(&said) + 300 > all.len(),
            "{name}: more than a frame lost: {said}"
        );
    }

    // tcpdump -w through the zstd tool is one frame for everything: decoded as read, so what came
    // before the damage stays, and the rest of the frame is counted as left out.
    let z = dir.join("td-orig.pcap.zst");
    let st = Command::new("zstd")
        .args(["-q", "-f", "-o"])
        .arg(&z)
        .arg(&td)
        .status()
        .unwrap();
    assert!(st.success());
    let bytes = std::fs::read(&z).unwrap();
    let all = tcpdump_packets(&td);
    // Where the flip lands decides whether the decoder stops there or only the checksum fails at
    // the end (then the frame is kept and said to fail it, and the reader cuts what does not read
    // as records): either way it is said.
    let said = check("td.pcap.zst", &flip(&bytes, bytes.len() / 2, 3), &all, None);
    assert!(
        said.contains("1 compressed frame(s) that do not decode past the damage")
            || said.contains("1 frame(s) kept that fail their checksum"),
        "{said}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
