//! Packet offsets: every packet's record offset and data offset, as the reader reports them, against
//! offsets found here by walking the file bytes (or noted while building them), for pcap and pcapng in
//! both byte orders, after damage, and through gzip, zstd and lz4 (offsets in the decompressed stream).

mod common;
use common::*;

use std::io::Write;

use store::{CaptureReader, Format, WriterOptions};

/// (record offset, data offset, captured bytes) of every packet the reader returns.
fn read_offsets(path: &std::path::Path) -> Vec<(u64, u64, Vec<u8>)> {
    let mut r = CaptureReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("read");
        v.push((p.offset, p.data_offset, p.data.to_vec()));
    }
    v
}

/// Record offsets of a pcap file's packets: 24-byte header, then 16-byte headers with caplen at +8.
fn walk_pcap(b: &[u8]) -> Vec<u64> {
    let be = b[0..4] == [0xa1, 0xb2, 0xc3, 0xd4] || b[0..4] == [0xa1, 0xb2, 0x3c, 0x4d];
    let mut at = 24;
    let mut v = Vec::new();
    while at + 16 <= b.len() {
        let c: [u8; 4] = b[at + 8..at + 12].try_into().unwrap();
        let caplen = if be {
            u32::from_be_bytes(c)
        } else {
            u32::from_le_bytes(c)
        };
        v.push(at as u64);
        at += 16 + caplen as usize;
    }
    assert_eq!(at, b.len(), "the walk ends at the end of the file");
    v
}

/// (block offset, data offset) of a pcapng file's packet blocks (EPB, SPB, OPB), per section's byte order.
fn walk_pcapng(b: &[u8]) -> Vec<(u64, u64)> {
    let mut at = 0;
    let mut be = false;
    let mut v = Vec::new();
    while at + 12 <= b.len() {
        if b[at..at + 4] == [0x0a, 0x0d, 0x0d, 0x0a] {
            be = b[at + 8..at + 12] == [0x1a, 0x2b, 0x3c, 0x4d];
        }
        let rd = |o: usize| {
            let x: [u8; 4] = b[o..o + 4].try_into().unwrap();
            if be {
                u32::from_be_bytes(x)
            } else {
                u32::from_le_bytes(x)
            }
        };
        let (ty, len) = (rd(at), rd(at + 4) as usize);
        match ty {
            6 | 2 => v.push((at as u64, at as u64 + 28)),
            3 => v.push((at as u64, at as u64 + 12)),
            _ => {}
        }
        at += len;
    }
    assert_eq!(at, b.len(), "the walk ends at the end of the file");
    v
}

/// Checks the reader's offsets against `want` and that the data offset points at the packet's bytes.
fn check(path: &std::path::Path, plain: &[u8], want: &[(u64, u64)]) {
    let got = read_offsets(path);
    assert_eq!(
        got.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>(),
        want,
        "{}",
        path.display()
    );
    for (i, (_, data_off, data)) in got.iter().enumerate() {
        let at = *data_off as usize;
        assert_eq!(&plain[at..at + data.len()], &data[..], "packet {i}");
    }
}

fn write_file(path: &std::path::Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn writer_output_offsets_match_the_file_layout() {
    let dir = TempDir::new("offsets-writer");
    let pkts = packets(3000, true);
    for (name, format) in [
        ("us.pcap", Format::Pcap { nanos: false }),
        ("ns.pcap", Format::Pcap { nanos: true }),
        ("ng.pcapng", Format::PcapNg),
    ] {
        let path = dir.path(name);
        let opts = WriterOptions {
            format,
            snaplen: 1000, // some packets cut
            direct_io: false,
            ..WriterOptions::default()
        };
        let (accepted, _) = write_all(&path, opts, &pkts);
        assert_eq!(accepted.len(), pkts.len());
        let bytes = std::fs::read(&path).unwrap();
        let want: Vec<(u64, u64)> = match format {
            Format::PcapNg => walk_pcapng(&bytes),
            Format::Pcap { .. } => walk_pcap(&bytes).into_iter().map(|o| (o, o + 16)).collect(),
        };
        assert_eq!(want.len(), pkts.len(), "{name}");
        check(&path, &bytes, &want);
    }
}

#[test]
fn compressed_inputs_give_offsets_in_the_decompressed_stream() {
    let dir = TempDir::new("offsets-compressed");
    let plain_path = dir.path("plain.pcapng");
    let opts = WriterOptions {
        format: Format::PcapNg,
        direct_io: false,
        ..WriterOptions::default()
    };
    write_all(&plain_path, opts, &packets(5000, false));
    let plain = std::fs::read(&plain_path).unwrap();
    let want = walk_pcapng(&plain);
    // Several frames, cut mid-record, as rotation and the compressor pool write them.
    let (a, b) = plain.split_at(plain.len() / 3 + 7);
    let mut zst = zstd::encode_all(a, 3).unwrap();
    zst.extend(zstd::encode_all(b, 1).unwrap());
    write_file(&dir.path("x.pcapng.zst"), &zst);
    let mut lz = Vec::new();
    for part in [a, b] {
        let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
        enc.write_all(part).unwrap();
        lz.extend(enc.finish().unwrap());
    }
    write_file(&dir.path("x.pcapng.lz4"), &lz);
    // Two gzip members, as `cat a.gz b.gz` makes.
    let mut gz = Vec::new();
    for part in [a, b] {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(part).unwrap();
        gz.extend(enc.finish().unwrap());
    }
    write_file(&dir.path("x.pcapng.gz"), &gz);
    for name in [
        "plain.pcapng",
        "x.pcapng.zst",
        "x.pcapng.lz4",
        "x.pcapng.gz",
    ] {
        check(&dir.path(name), &plain, &want);
    }
}

#[test]
fn progress_counts_the_file_bytes_read() {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    let dir = TempDir::new("offsets-progress");
    let plain_path = dir.path("plain.pcap");
    let opts = WriterOptions {
        direct_io: false,
        ..WriterOptions::default()
    };
    write_all(&plain_path, opts, &packets(3000, false));
    let plain = std::fs::read(&plain_path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    write_file(&dir.path("x.pcap.gz"), &gz.finish().unwrap());
    write_file(
        &dir.path("x.pcap.zst"),
        &zstd::encode_all(&plain[..], 3).unwrap(),
    );
    // One counter for all files, as a progress bar over several inputs uses it.
    let progress = Arc::new(AtomicU64::new(0));
    let mut total = 0;
    for name in ["plain.pcap", "x.pcap.gz", "x.pcap.zst"] {
        let path = dir.path(name);
        let len = std::fs::metadata(&path).unwrap().len();
        let before = progress.load(Relaxed);
        let mut r = CaptureReader::open_with_progress(&path, progress.clone()).unwrap();
        let mut packets = 0;
        while let Some(p) = r.next_packet() {
            p.unwrap();
            packets += 1;
            assert!(progress.load(Relaxed) - before <= len, "{name}");
        }
        assert_eq!(packets, 3000, "{name}");
        assert_eq!(
            progress.load(Relaxed) - before,
            len,
            "{name}: every byte counted once"
        );
        total += len;
    }
    assert_eq!(progress.load(Relaxed), total);
}

/// A big-endian µs pcap built by hand: header, then records of the given lengths.
fn pcap_be(lens: &[usize]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_be_bytes());
    b.extend_from_slice(&2u16.to_be_bytes());
    b.extend_from_slice(&4u16.to_be_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    for (i, &len) in lens.iter().enumerate() {
        b.extend_from_slice(&(1_700_000_000 + i as u32).to_be_bytes());
        b.extend_from_slice(&(i as u32 * 10).to_be_bytes());
        b.extend_from_slice(&(len as u32).to_be_bytes());
        b.extend_from_slice(&(len as u32).to_be_bytes());
        b.extend((0..len).map(|j| (i * 3 + j) as u8));
    }
    b
}

#[test]
fn big_endian_pcap_and_damage_keep_true_offsets() {
    let dir = TempDir::new("offsets-damage");
    let lens = [60, 1514, 42, 300, 61, 999];
    let clean = pcap_be(&lens);
    let offs = walk_pcap(&clean);
    let path = dir.path("be.pcap");
    write_file(&path, &clean);
    let want: Vec<(u64, u64)> = offs.iter().map(|&o| (o, o + 16)).collect();
    check(&path, &clean, &want);

    // 37 bytes of garbage (an absurd caplen) before the 4th record: the reader skips them, and the
    // records after it keep their real place in the damaged file.
    let cut = offs[3] as usize;
    let mut bad = clean[..cut].to_vec();
    bad.extend_from_slice(&[0xff; 37]);
    bad.extend_from_slice(&clean[cut..]);
    let path = dir.path("damaged.pcap");
    write_file(&path, &bad);
    let mut want: Vec<(u64, u64)> = offs[..3].iter().map(|&o| (o, o + 16)).collect();
    want.extend(offs[3..].iter().map(|&o| (o + 37, o + 37 + 16)));
    check(&path, &bad, &want);
}

/// One pcapng block of type `ty` in the given byte order.
fn block(ty: u32, body: &[u8], be: bool) -> Vec<u8> {
    let w = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let len = (12 + body.len()).div_ceil(4) * 4;
    let mut b = Vec::new();
    b.extend_from_slice(&w(ty));
    b.extend_from_slice(&w(len as u32));
    b.extend_from_slice(body);
    b.resize(len - 4, 0);
    b.extend_from_slice(&w(len as u32));
    b
}

#[test]
fn pcapng_sections_of_both_orders_and_every_packet_block() {
    let dir = TempDir::new("offsets-ng");
    let mut b = Vec::new();
    for be in [false, true] {
        let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut shb = w32(0x1a2b_3c4d).to_vec();
        shb.extend_from_slice(&w16(1));
        shb.extend_from_slice(&w16(0));
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        b.extend(block(0x0a0d_0d0a, &shb, be));
        let mut idb = w16(1).to_vec();
        idb.extend_from_slice(&w16(0));
        idb.extend_from_slice(&w32(65535));
        b.extend(block(1, &idb, be));
        for (i, kind) in [6u32, 0x777, 3, 2, 6].into_iter().enumerate() {
            let data: Vec<u8> = (0..50 + i * 13).map(|j| (j * 5 + i) as u8).collect();
            let mut body = Vec::new();
            match kind {
                6 | 2 => {
                    if kind == 6 {
                        body.extend_from_slice(&w32(0));
                    } else {
                        body.extend_from_slice(&w16(0));
                        body.extend_from_slice(&w16(0));
                    }
                    body.extend_from_slice(&w32(0));
                    body.extend_from_slice(&w32(i as u32));
                    body.extend_from_slice(&w32(data.len() as u32));
                    body.extend_from_slice(&w32(data.len() as u32));
                }
                3 => body.extend_from_slice(&w32(data.len() as u32)),
                _ => {} // an unknown block: skipped, no packet
            }
            body.extend_from_slice(&data);
            b.extend(block(kind, &body, be));
        }
    }
    let path = dir.path("mixed.pcapng");
    write_file(&path, &b);
    let want = walk_pcapng(&b);
    assert_eq!(want.len(), 8, "4 packet blocks per section");
    check(&path, &b, &want);
}
