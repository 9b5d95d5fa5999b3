//! Interoperability with the standard tools: our files read by capinfos/tshark, their files
//! (tcpdump, editcap, zstd, lz4) read by us, and hand-built files in forms our writer never
//! makes (big-endian, several interfaces, SPB, obsolete PB), checked against tshark too.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use store::{Compression, Format, InputFormat, WriterOptions};

fn write_sample(path: &Path, format: Format, n: usize) -> Vec<TestPacket> {
    let o = WriterOptions {
        format,
        buffer_size: 1 << 20,
        buffers: 8,
        ..Default::default()
    };
    let (accepted, stats) = write_all(path, o, &packets(n, true));
    assert_eq!(
        stats.storage_drops, 0,
        "a few thousand packets fit the pool"
    );
    accepted
}

#[test]
fn our_files_are_read_by_capinfos_and_tshark() {
    if !have("capinfos") || !have("tshark") {
        return;
    }
    let dir = TempDir::new("tools");
    for (name, format) in [
        ("us.pcap", Format::Pcap { nanos: false }),
        ("ns.pcap", Format::Pcap { nanos: true }),
        ("f.pcapng", Format::PcapNg),
    ] {
        let path = dir.path(name);
        let pkts = write_sample(&path, format, 3000);
        assert_eq!(capinfos_count(&path), 3000, "{name}: capinfos count");
        let want: Vec<u32> = pkts
            .iter()
            .map(|p| p.wire_len + if p.vlan.is_some() { 4 } else { 0 })
            .collect();
        assert_eq!(tshark_lengths(&path), want, "{name}: tshark frame lengths");
    }
}

#[test]
fn files_written_by_tcpdump_and_editcap_are_read_exactly() {
    if !have("tcpdump") || !have("editcap") {
        return;
    }
    let dir = TempDir::new("theirs");
    let ours = dir.path("ours.pcap");
    let pkts = write_sample(&ours, Format::Pcap { nanos: true }, 2000);
    let (mine, _) = read_all(&ours);
    assert_eq!(mine.len(), 2000);

    let us = dir.path("tcpdump-us.pcap");
    run(Command::new("tcpdump")
        .args(["-q", "-r"])
        .arg(&ours)
        .arg("-w")
        .arg(&us));
    let ns = dir.path("tcpdump-ns.pcap");
    run(Command::new("tcpdump")
        .args(["-q", "--time-stamp-precision=nano", "-r"])
        .arg(&ours)
        .arg("-w")
        .arg(&ns));
    let ng = dir.path("editcap.pcapng");
    run(Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&ours)
        .arg(&ng));

    for (path, us_precision) in [(&us, true), (&ns, false), (&ng, false)] {
        let (theirs, r) = read_all(path);
        assert_eq!(r.issues(), &[], "{}", path.display());
        assert_eq!(theirs.len(), pkts.len(), "{}", path.display());
        for (t, m) in theirs.iter().zip(&mine) {
            let ts = if us_precision {
                m.ts_ns / 1000 * 1000
            } else {
                m.ts_ns
            };
            assert_eq!(
                (t.ts_ns, t.wire_len, &t.data, t.linktype),
                (ts, m.wire_len, &m.data, 1)
            );
        }
    }
}

#[test]
fn zstd_and_lz4_files_are_read_by_content_not_name() {
    if !have("zstd") || !have("lz4") {
        return;
    }
    let dir = TempDir::new("compressed");
    let plain = dir.path("plain.pcapng");
    write_sample(&plain, Format::PcapNg, 2500);
    let (want, _) = read_all(&plain);
    let bytes = std::fs::read(&plain).unwrap();

    let zst = dir.path("a.zst");
    run(Command::new("zstd")
        .args(["-q", "-3", "-f"])
        .arg(&plain)
        .arg("-o")
        .arg(&zst));
    let lz4 = dir.path("misleading-name.pcap");
    run(Command::new("lz4").args(["-q", "-f"]).arg(&plain).arg(&lz4));

    // Concatenated frames: each half compressed on its own, cut in the middle of a record.
    let half = bytes.len() / 2 + 7;
    let (h1, h2) = (dir.path("h1"), dir.path("h2"));
    std::fs::write(&h1, &bytes[..half]).unwrap();
    std::fs::write(&h2, &bytes[half..]).unwrap();
    let cat = |tool: &str, out: &Path| {
        let mut all = Vec::new();
        // Different parameters per frame (lz4 block size 64 KiB then 4 MiB; zstd levels 1, 19).
        for (h, opt) in [
            (&h1, if tool == "zstd" { "-1" } else { "-B4" }),
            (&h2, if tool == "zstd" { "-19" } else { "-B7" }),
        ] {
            let out = Command::new(tool)
                .args(["-q", "-c", opt])
                .arg(h)
                .output()
                .unwrap();
            assert!(out.status.success(), "{tool} -c failed");
            all.extend(out.stdout);
        }
        std::fs::write(out, all).unwrap();
    };
    let zst2 = dir.path("two-frames.zst");
    cat("zstd", &zst2);
    let lz42 = dir.path("two-frames.lz4");
    cat("lz4", &lz42);

    for (path, c) in [
        (&zst, Compression::Zstd),
        (&lz4, Compression::Lz4),
        (&zst2, Compression::Zstd),
        (&lz42, Compression::Lz4),
    ] {
        let (got, r) = read_all(path);
        assert_eq!(r.compression(), c, "{}", path.display());
        assert_eq!(r.issues(), &[], "{}", path.display());
        assert_eq!(got, want, "{}", path.display());
    }
}

// ---- hand-built files ----

/// A pcapng block in either byte order.
fn block(be: bool, ty: u32, body: &[u8]) -> Vec<u8> {
    let w = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut b = body.to_vec();
    b.resize(body.len().div_ceil(4) * 4, 0);
    let len = (b.len() + 12) as u32;
    let mut out = w(ty).to_vec();
    out.extend(w(len));
    out.extend(b);
    out.extend(w(len));
    out
}

struct Ng {
    be: bool,
    bytes: Vec<u8>,
}

impl Ng {
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn section(be: bool) -> Ng {
        let mut ng = Ng {
            be,
            bytes: Vec::new(),
        };
        ng.shb();
        ng
    }
    fn shb(&mut self) {
        let mut body = self.u32(0x1a2b3c4d).to_vec();
        body.extend(self.u16(1));
        body.extend(self.u16(0));
        body.extend([0xff; 8]);
        self.bytes.extend(block(self.be, 0x0a0d0d0a, &body));
    }
    fn idb(&mut self, linktype: u16, snaplen: u32, tsresol: Option<u8>) {
        let mut body = self.u16(linktype).to_vec();
        body.extend([0, 0]);
        body.extend(self.u32(snaplen));
        if let Some(r) = tsresol {
            body.extend(self.u16(9));
            body.extend(self.u16(1));
            body.extend([r, 0, 0, 0]);
        }
        body.extend([0; 4]);
        self.bytes.extend(block(self.be, 1, &body));
    }
    fn epb(&mut self, iface: u32, ts: u64, wire: u32, data: &[u8]) {
        let mut body = self.u32(iface).to_vec();
        body.extend(self.u32((ts >> 32) as u32));
        body.extend(self.u32(ts as u32));
        body.extend(self.u32(data.len() as u32));
        body.extend(self.u32(wire));
        body.extend(data);
        self.bytes.extend(block(self.be, 6, &body));
    }
    fn spb(&mut self, wire: u32, data: &[u8]) {
        let mut body = self.u32(wire).to_vec();
        body.extend(data);
        self.bytes.extend(block(self.be, 3, &body));
    }
    fn opb(&mut self, iface: u16, ts: u64, wire: u32, data: &[u8]) {
        let mut body = self.u16(iface).to_vec();
        body.extend(self.u16(0));
        body.extend(self.u32((ts >> 32) as u32));
        body.extend(self.u32(ts as u32));
        body.extend(self.u32(data.len() as u32));
        body.extend(self.u32(wire));
        body.extend(data);
        self.bytes.extend(block(self.be, 2, &body));
    }
    fn raw(&mut self, ty: u32, body: &[u8]) {
        self.bytes.extend(block(self.be, ty, body));
    }
}

fn frame(n: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| n.wrapping_mul(17).wrapping_add(i as u8))
        .collect()
}

/// Two sections (big-endian, then little-endian); interfaces with different link types and
/// resolutions (10^-6 default, 10^-9, 2^-10, 10^-3); EPB, SPB, obsolete PB; an unknown block.
fn multi_interface_file() -> (Vec<u8>, Vec<ReadPacket>) {
    let mut want = Vec::new();
    let mut p = |ts_ns, wire_len, data: Vec<u8>, linktype, interface| {
        want.push(ReadPacket {
            ts_ns,
            wire_len,
            data,
            linktype,
            interface,
        })
    };
    let mut ng = Ng::section(true);
    ng.idb(1, 0, None); // Ethernet, µs
    ng.idb(101, 0, Some(9)); // raw IP, ns
    ng.idb(1, 0, Some(0x8a)); // 2^-10 s
    ng.epb(0, 1_700_000_000_123_456, 60, &frame(1, 60));
    p(1_700_000_000_123_456_000, 60, frame(1, 60), 1, 0);
    ng.epb(1, 1_700_000_000_123_456_789, 41, &frame(2, 40));
    p(1_700_000_000_123_456_789, 41, frame(2, 40), 101, 1);
    ng.epb(2, (1_700_000_000u64 << 10) + 512, 33, &frame(3, 33)); // .5 s
    p(1_700_000_000_500_000_000, 33, frame(3, 33), 1, 2);
    ng.raw(0x0000_7777, &[1, 2, 3, 4]); // unknown: skipped
    ng.opb(1, 1_600_000_000_000_000_001, 20, &frame(4, 20));
    p(1_600_000_000_000_000_001, 20, frame(4, 20), 101, 1);
    let mut bytes = ng.bytes;

    let mut ng = Ng::section(false); // new section: interfaces start again
    ng.idb(1, 64, Some(3)); // ms, snaplen 64
    ng.spb(100, &frame(5, 64));
    p(0, 100, frame(5, 64), 1, 0);
    ng.epb(0, 1_700_000_000_001, 70, &frame(6, 64));
    p(1_700_000_000_001_000_000, 70, frame(6, 64), 1, 0);
    bytes.extend(ng.bytes);
    (bytes, want)
}

#[test]
fn pcapng_sections_interfaces_resolutions_and_block_kinds() {
    let dir = TempDir::new("ng-multi");
    let path = dir.path("multi.pcapng");
    let (bytes, want) = multi_interface_file();
    std::fs::write(&path, &bytes).unwrap();
    let (got, r) = read_all(&path);
    assert_eq!(got, want);
    assert_eq!(r.format(), InputFormat::PcapNg);
    assert_eq!(
        r.issues().len(),
        1,
        "only the unknown block is noted: {:?}",
        r.issues()
    );
    assert!(!r.issues()[0].corrupt && r.issues()[0].reason.contains("unknown block type 0x7777"));
    if have("tshark") {
        // tshark agrees the hand-built file holds these six frames.
        assert_eq!(
            tshark_lengths(&path),
            want.iter().map(|p| p.wire_len).collect::<Vec<_>>()
        );
    }
}

#[test]
fn big_endian_pcap_both_precisions() {
    let dir = TempDir::new("be-pcap");
    for nanos in [false, true] {
        let mut b = Vec::new();
        b.extend(if nanos { 0xa1b23c4du32 } else { 0xa1b2c3d4 }.to_be_bytes());
        b.extend(2u16.to_be_bytes());
        b.extend(4u16.to_be_bytes());
        b.extend([0; 8]);
        b.extend(1500u32.to_be_bytes());
        b.extend(1u32.to_be_bytes());
        let mut want = Vec::new();
        for i in 0..5u32 {
            let data = frame(i as u8, 50 + i as usize);
            b.extend((1_700_000_000 + i).to_be_bytes());
            b.extend((999 * i).to_be_bytes());
            b.extend((data.len() as u32).to_be_bytes());
            b.extend(200u32.to_be_bytes());
            b.extend(&data);
            let sub = if nanos {
                999 * i as u64
            } else {
                999_000 * i as u64
            };
            want.push(ReadPacket {
                ts_ns: (1_700_000_000 + i as u64) * 1_000_000_000 + sub,
                wire_len: 200,
                data,
                linktype: 1,
                interface: 0,
            });
        }
        let path = dir.path("be.pcap");
        std::fs::write(&path, &b).unwrap();
        let (got, r) = read_all(&path);
        assert_eq!(
            r.format(),
            InputFormat::Pcap {
                nanos,
                big_endian: true
            }
        );
        assert_eq!(got, want);
        if have("capinfos") {
            assert_eq!(capinfos_count(&path), 5);
        }
    }
}
