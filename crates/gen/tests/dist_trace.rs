//! Trace input: real pcap, pcapng and .zst files on disk, counted as createDist counts them
//! (IP packets by IP length, non-IP skipped), cross-checked with tshark (a missing tshark fails under CI=true).

use std::path::{Path, PathBuf};
use std::process::Command;

use gen::sizes::{read_files, Histogram, InputKind, ReadOptions};

/// An Ethernet frame to a non-local MAC carrying an IPv4/UDP packet of `ip_len` bytes.
fn ipv4_frame(ip_len: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let mut ip = vec![0u8; ip_len as usize];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 77, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 77, 0, 2]);
    let mut sum = 0u32;
    for w in ip[..20].chunks(2) {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    ip[20..22].copy_from_slice(&9u16.to_be_bytes());
    ip[22..24].copy_from_slice(&9u16.to_be_bytes());
    ip[24..26].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f.extend(ip);
    while f.len() < 60 {
        f.push(0); // Ethernet padding: not part of the IP packet
    }
    f
}

/// An ARP request frame (not IP).
fn arp_frame() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend([0x02, 0, 0, 0, 0, 1, 0x08, 0x06]);
    f.extend([0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend([
        0x02, 0, 0, 0, 0, 1, 10, 77, 0, 1, 0, 0, 0, 0, 0, 0, 10, 77, 0, 2,
    ]);
    f.resize(60, 0);
    f
}

/// Classic pcap (µs, little endian, Ethernet), each frame captured up to `snaplen` bytes.
fn pcap_bytes(frames: &[Vec<u8>], snaplen: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(0xa1b2c3d4u32.to_le_bytes());
    b.extend(2u16.to_le_bytes());
    b.extend(4u16.to_le_bytes());
    b.extend([0u8; 8]);
    b.extend(snaplen.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let cap = f.len().min(snaplen as usize);
        b.extend((1_700_000_000u32 + i as u32).to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend((cap as u32).to_le_bytes());
        b.extend((f.len() as u32).to_le_bytes());
        b.extend(&f[..cap]);
    }
    b
}

/// pcapng: section header, one Ethernet interface, one enhanced packet block per frame.
fn pcapng_bytes(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::new();
    let block = |b: &mut Vec<u8>, kind: u32, body: &[u8]| {
        let len = 12 + body.len().div_ceil(4) * 4;
        b.extend(kind.to_le_bytes());
        b.extend((len as u32).to_le_bytes());
        b.extend(body);
        b.resize(b.len() + (len - 12 - body.len()), 0);
        b.extend((len as u32).to_le_bytes());
    };
    let mut shb = Vec::new();
    shb.extend(0x1a2b3c4du32.to_le_bytes());
    shb.extend(1u16.to_le_bytes());
    shb.extend(0u16.to_le_bytes());
    shb.extend((-1i64).to_le_bytes());
    block(&mut b, 0x0a0d0d0a, &shb);
    let mut idb = Vec::new();
    idb.extend(1u16.to_le_bytes());
    idb.extend(0u16.to_le_bytes());
    idb.extend(65535u32.to_le_bytes());
    block(&mut b, 1, &idb);
    for f in frames {
        let mut epb = Vec::new();
        epb.extend(0u32.to_le_bytes());
        epb.extend(0u32.to_le_bytes());
        epb.extend(0u32.to_le_bytes());
        epb.extend((f.len() as u32).to_le_bytes());
        epb.extend((f.len() as u32).to_le_bytes());
        epb.extend(f);
        block(&mut b, 6, &epb);
    }
    b
}

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("ringcap-dist-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The IP lengths tshark reports for a trace (None if tshark is not installed, which fails under CI).
fn tshark_ip_lengths(path: &Path) -> Option<Vec<u16>> {
    if !testbed::have("tshark", "apt install tshark") {
        return None;
    }
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-Y", "ip", "-T", "fields", "-e", "ip.len"])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect(),
    )
}

// 46 × 3, 576 × 2, 1500 × 1, 1600 × 1 (above N_ps), ARP × 2.
fn frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for len in [46, 576, 46, 1500, 1600, 46, 576] {
        v.push(ipv4_frame(len));
    }
    v.insert(2, arp_frame());
    v.push(arp_frame());
    v
}

#[test]
fn pcap_pcapng_and_zst_count_ip_lengths() {
    let d = Dir::new("trace-ok");
    let want = Histogram::from_pairs([(46, 3), (576, 2), (1500, 1)]);
    let pcap = d.write("t.pcap", &pcap_bytes(&frames(), 65535));
    let ng = d.write("t.pcapng", &pcapng_bytes(&frames()));
    let zst = d.write(
        "t.pcap.zst",
        &zstd::encode_all(&pcap_bytes(&frames(), 65535)[..], 3).unwrap(),
    );
    // A snap length of 64 cuts the big packets, not their IP length fields.
    let snapped = d.write("snap.pcap", &pcap_bytes(&frames(), 64));
    for p in [&pcap, &ng, &zst, &snapped] {
        let (h, rep) = read_files(InputKind::Trace, &[p], &ReadOptions::default()).unwrap();
        assert_eq!(h, want, "{}", p.display());
        assert_eq!(rep.trace.packets, 9);
        assert_eq!(rep.trace.ip, 6);
        assert_eq!(rep.trace.non_ip, 2);
        assert_eq!(rep.trace.oversize, 1);
    }
    // Several traces concatenate; a larger N_ps keeps the 1600-byte packet.
    let opts = ReadOptions {
        max_size: 9000,
        ..ReadOptions::default()
    };
    let (h, rep) = read_files(InputKind::Trace, &[&pcap, &ng], &opts).unwrap();
    assert_eq!(
        h,
        Histogram::from_pairs([(46, 6), (576, 4), (1500, 2), (1600, 2)])
    );
    assert_eq!(rep.files, 2);

    // tshark sees the same IP lengths.
    if let Some(mut lens) = tshark_ip_lengths(&pcap) {
        lens.sort_unstable();
        assert_eq!(lens, vec![46, 46, 46, 576, 576, 1500, 1600]);
    }
}

#[test]
fn trace_errors() {
    let d = Dir::new("trace-err");
    let only_arp = d.write("arp.pcap", &pcap_bytes(&[arp_frame(), arp_frame()], 65535));
    let e = read_files(InputKind::Trace, &[&only_arp], &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("arp.pcap") && e.contains("no IP packet") && e.contains("2 non-IP"),
        "{e}"
    );

    let text = d.write("sizes.txt", b"40\n1500\n");
    let e = read_files(InputKind::Trace, &[&text], &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("sizes.txt"), "{e}");

    let missing = d.0.join("missing.pcap");
    let e = read_files(InputKind::Trace, &[&missing], &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.pcap"), "{e}");

    // Link type 147 (user-defined) has no IP to find.
    let mut odd = pcap_bytes(&[ipv4_frame(46)], 65535);
    odd[20..24].copy_from_slice(&147u32.to_le_bytes());
    let odd = d.write("odd.pcap", &odd);
    let e = read_files(InputKind::Trace, &[&odd], &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("link type 147"), "{e}");
}
