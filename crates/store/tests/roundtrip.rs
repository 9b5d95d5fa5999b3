//! Write → read round trips through the real writer thread and files, every format.

mod common;

use common::*;
use store::{CaptureWriter, Format, IfStats, InputFormat, WriterOptions};

fn opts(format: Format, snaplen: u32) -> WriterOptions {
    WriterOptions {
        format,
        snaplen,
        buffer_size: 1 << 20,
        buffers: 8,
        ..Default::default()
    }
}

/// Checks what was read against what was accepted, given the format's time precision.
fn check(read: &[ReadPacket], accepted: &[TestPacket], snaplen: usize, us: bool) {
    assert_eq!(read.len(), accepted.len());
    for (i, (r, p)) in read.iter().zip(accepted).enumerate() {
        let ts = if us { p.ts_ns / 1000 * 1000 } else { p.ts_ns };
        assert_eq!(r.ts_ns, ts, "packet {i} timestamp");
        assert_eq!(
            r.wire_len,
            p.wire_len
                + if p.vlan.is_some() && p.data.len() >= 12 {
                    4
                } else {
                    0
                },
            "packet {i} wire length"
        );
        assert_eq!(r.data, expected_bytes(p, snaplen), "packet {i} bytes");
        assert_eq!((r.linktype, r.interface), (1, 0));
    }
}

fn round_trip(format: Format, vlan: bool, snaplen: u32) {
    let dir = TempDir::new("rt");
    let path = dir.path("rt.cap");
    // ~17 MB: many 1 MiB buffers, so records straddle buffer boundaries many times.
    let pkts = packets(22_000, vlan);
    let (accepted, stats) = write_all(&path, opts(format, snaplen), &pkts);
    assert!(
        accepted.len() > 1000,
        "most packets accepted ({} of {})",
        accepted.len(),
        pkts.len()
    );
    let (read, r) = read_all(&path);
    assert_eq!(r.issues(), &[], "a clean file has no issues");
    check(
        &read,
        &accepted,
        snaplen as usize,
        format == Format::Pcap { nanos: false },
    );
    assert_eq!(stats.packets, read.len() as u64);
    assert_eq!(stats.bytes_written, std::fs::metadata(&path).unwrap().len());
    assert_eq!(r.snaplen(), Some(snaplen));
    match format {
        Format::Pcap { nanos } => assert_eq!(
            r.format(),
            InputFormat::Pcap {
                nanos,
                big_endian: false
            }
        ),
        Format::PcapNg => assert_eq!(r.format(), InputFormat::PcapNg),
    }
}

#[test]
fn pcap_microseconds() {
    round_trip(Format::Pcap { nanos: false }, false, 262_144);
}

#[test]
fn pcap_nanoseconds_with_vlan() {
    round_trip(Format::Pcap { nanos: true }, true, 262_144);
}

#[test]
fn pcapng_with_vlan() {
    round_trip(Format::PcapNg, true, 262_144);
}

#[test]
fn snaplen_cuts_after_the_vlan_tag() {
    round_trip(Format::Pcap { nanos: true }, true, 14);
    round_trip(Format::PcapNg, true, 64);
}

#[test]
fn tiny_frames_with_vlan_and_snaplen() {
    // Frames shorter than the two MAC addresses stay untagged (as in libpcap); snaplen still applies.
    let dir = TempDir::new("tiny");
    let path = dir.path("tiny.pcapng");
    let tag = Some(wire::Vlan {
        tpid: 0x88a8,
        tci: 7,
    });
    let pkts: Vec<TestPacket> = (0..20)
        .map(|i| TestPacket {
            ts_ns: i,
            wire_len: i as u32,
            data: vec![0xa5; i as usize],
            vlan: tag,
        })
        .collect();
    let (accepted, _) = write_all(&path, opts(Format::PcapNg, 9), &pkts);
    let (read, _) = read_all(&path);
    check(&read, &accepted, 9, false);
}

#[test]
fn pcapng_statistics_block_carries_the_final_counters() {
    let dir = TempDir::new("isb");
    let path = dir.path("isb.pcapng");
    let pkts = packets(10, false);
    let mut w = CaptureWriter::create(
        &path,
        WriterOptions {
            if_names: vec!["veth-rx".into()],
            ..opts(Format::PcapNg, 0)
        },
    )
    .unwrap();
    for p in &pkts {
        assert!(w.write_packet(p.ts_ns, p.wire_len, &p.data, None));
    }
    let fin = IfStats {
        ifrecv: Some(12),
        ifdrop: Some(1),
        filter_accept: Some(11),
        os_drop: Some(2),
        ..Default::default()
    };
    w.finish(Some(fin)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let blocks = parse_blocks_le(&bytes);
    let types: Vec<u32> = blocks.iter().map(|b| b.0).collect();
    assert_eq!(types.first(), Some(&0x0a0d0d0a));
    assert_eq!(types[1], 1);
    assert_eq!(types.iter().filter(|&&t| t == 6).count(), 10);
    assert_eq!(types.last(), Some(&5), "ISB comes last");
    let idb_opts = options(&blocks[1].1[8..]);
    assert!(idb_opts.contains(&(2, b"veth-rx".to_vec())));
    assert!(idb_opts.contains(&(9, vec![9])));
    let isb = options(&blocks.last().unwrap().1[12..]);
    let u64_opt = |code| {
        isb.iter()
            .find(|o| o.0 == code)
            .map(|o| u64::from_le_bytes(o.1[..8].try_into().unwrap()))
    };
    let time_opt = |code| {
        isb.iter().find(|o| o.0 == code).map(|o| {
            (u64::from(u32::from_le_bytes(o.1[..4].try_into().unwrap())) << 32)
                | u64::from(u32::from_le_bytes(o.1[4..8].try_into().unwrap()))
        })
    };
    assert_eq!(u64_opt(4), Some(12));
    assert_eq!(u64_opt(5), Some(1));
    assert_eq!(u64_opt(6), Some(11));
    assert_eq!(u64_opt(7), Some(2));
    assert_eq!(
        u64_opt(8),
        Some(10),
        "usrdeliv defaults to the packets written"
    );
    assert_eq!(time_opt(2), Some(pkts[0].ts_ns));
    assert_eq!(time_opt(3), Some(pkts[9].ts_ns));
    if have("tshark") {
        assert_eq!(tshark_lengths(&path).len(), 10);
    }
}

/// (type, body) of each little-endian pcapng block, parsed here independently of the crate.
fn parse_blocks_le(b: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 12 <= b.len() {
        let ty = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
        assert_eq!(
            u32::from_le_bytes(b[at + len - 4..at + len].try_into().unwrap()) as usize,
            len
        );
        out.push((ty, b[at + 8..at + len - 4].to_vec()));
        at += len;
    }
    assert_eq!(at, b.len());
    out
}

fn options(mut b: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let code = u16::from_le_bytes([b[0], b[1]]);
        let len = u16::from_le_bytes([b[2], b[3]]) as usize;
        if code == 0 {
            break;
        }
        out.push((code, b[4..4 + len].to_vec()));
        b = &b[4 + len.div_ceil(4) * 4..];
    }
    out
}

#[test]
fn stdout_style_stream_output_and_time_flush() {
    // A pipe reader must see packets after maybe_flush, long before the buffer is full.
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    use std::os::fd::FromRawFd;
    let rd = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let wr = unsafe { std::fs::File::from_raw_fd(fds[1]) };
    let o = WriterOptions {
        flush_interval: std::time::Duration::from_millis(100),
        ..opts(Format::Pcap { nanos: true }, 0)
    };
    let mut w = CaptureWriter::to_stream(Box::new(wr), "pipe", o).unwrap();
    let pkts = packets(3, false);
    for p in &pkts {
        assert!(w.write_packet(p.ts_ns, p.wire_len, &p.data, None));
    }
    assert!(!w.maybe_flush(std::time::Instant::now()), "not due yet");
    assert!(w.maybe_flush(std::time::Instant::now() + std::time::Duration::from_millis(150)));
    // Read the three packets while the writer is still open (a blocking read would hang otherwise).
    let mut r =
        store::CaptureReader::from_reader(Box::new(rd), std::path::Path::new("pipe")).unwrap();
    for p in &pkts {
        let got = r.next_packet().unwrap().unwrap();
        assert_eq!((got.ts_ns, got.data), (p.ts_ns, &p.data[..]));
    }
    let stats = w.finish(None).unwrap();
    assert!(!stats.direct_io);
    assert!(r.next_packet().is_none());
}
