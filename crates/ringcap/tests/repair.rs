//! `ringcap repair` keeps every whole packet around a damaged region, refuses finished files
//! without --force, and changes nothing with --dry-run. The expectation is tcpdump's reading of
//! the file before it was damaged, less the packets the damage hit.

mod common;

use common::{frame, have, ringcap, temp_dir};
use std::path::Path;
use std::process::{Command, Output};

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
