//! Builders of real capture files with known contents, and a Parquet reader for the checks.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// One packet of a test trace.
#[derive(Clone, Debug)]
pub struct Pkt {
    pub ts_ns: u64,
    pub frame: Vec<u8>,
    /// Wire length (≥ frame length; larger means snapped).
    pub wire_len: u32,
}

impl Pkt {
    pub fn new(ts_ns: u64, frame: Vec<u8>) -> Pkt {
        let wire_len = frame.len() as u32;
        Pkt {
            ts_ns,
            frame,
            wire_len,
        }
    }
}

fn ipv4_header(total_len: u16, proto: u8, ttl: u8, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut ip = vec![0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total_len.to_be_bytes());
    ip[6] = 0x40;
    ip[8] = ttl;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    ip
}

fn eth(dst: [u8; 6], src: [u8; 6], vlan: Option<u16>, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some(v) = vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// Ethernet + IPv4 + UDP with `payload` bytes of payload.
pub fn udp4(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    payload: usize,
    vlan: Option<u16>,
) -> Vec<u8> {
    let ip_len = (20 + 8 + payload) as u16;
    let mut f = eth(MAC_B, MAC_A, vlan, 0x0800);
    f.extend(ipv4_header(ip_len, 17, 64, src, dst));
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(8 + payload as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend(std::iter::repeat_n(0xa5, payload));
    f
}

/// Ethernet + IPv4 + TCP (20-byte header) with the given flags.
pub fn tcp4(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    flags: u8,
    payload: usize,
) -> Vec<u8> {
    let ip_len = (20 + 20 + payload) as u16;
    let mut f = eth(MAC_B, MAC_A, None, 0x0800);
    f.extend(ipv4_header(ip_len, 6, 57, src, dst));
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    f.extend(t);
    f.extend(std::iter::repeat_n(0x5a, payload));
    f
}

/// Ethernet + IPv4 + ICMP echo request.
pub fn icmp4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut f = eth(MAC_B, MAC_A, None, 0x0800);
    f.extend(ipv4_header(28, 1, 64, src, dst));
    f.extend_from_slice(&[8, 0, 0, 0, 0, 1, 0, 1]);
    f
}

/// Ethernet + IPv6 + UDP.
pub fn udp6(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let mut f = eth(MAC_B, MAC_A, None, 0x86dd);
    f.extend(ipv6_udp(src, dst, sport, dport, payload));
    f
}

/// IPv6 + UDP without a link header (for raw-IP link types).
pub fn ipv6_udp(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let plen = (8 + payload) as u16;
    let mut f = vec![0x60, 0, 0, 0];
    f.extend_from_slice(&plen.to_be_bytes());
    f.push(17);
    f.push(33);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&plen.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend(std::iter::repeat_n(0x33, payload));
    f
}

/// An ARP request (not IP).
pub fn arp() -> Vec<u8> {
    let mut f = eth([0xff; 6], MAC_A, None, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&MAC_A);
    f.extend_from_slice(&[10, 0, 0, 1]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[10, 0, 0, 2]);
    f.resize(60, 0);
    f
}

/// A nanosecond pcap (little endian) of `pkts` with link type `linktype`; returns the bytes and
/// the offset of each packet's data.
pub fn pcap_bytes(pkts: &[Pkt], linktype: u32) -> (Vec<u8>, Vec<u64>) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&262_144u32.to_le_bytes());
    b.extend_from_slice(&linktype.to_le_bytes());
    let mut offsets = Vec::new();
    for p in pkts {
        b.extend_from_slice(&((p.ts_ns / 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((p.ts_ns % 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(p.frame.len() as u32).to_le_bytes());
        b.extend_from_slice(&p.wire_len.to_le_bytes());
        offsets.push(b.len() as u64);
        b.extend_from_slice(&p.frame);
    }
    (b, offsets)
}

fn block(ty: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len()).div_ceil(4) * 4;
    let mut b = Vec::new();
    b.extend_from_slice(&ty.to_le_bytes());
    b.extend_from_slice(&(len as u32).to_le_bytes());
    b.extend_from_slice(body);
    b.resize(len - 4, 0);
    b.extend_from_slice(&(len as u32).to_le_bytes());
    b
}

/// A pcapng interface: link type and if_tsresol (6 = µs, 9 = ns).
pub struct Iface {
    pub linktype: u16,
    pub tsresol: u8,
}

/// A pcapng file: SHB, the interfaces, an unknown block after the first packet if `unknown`, and
/// one EPB per (interface, packet). Returns bytes and the offset of each packet's data.
pub fn pcapng_bytes(ifaces: &[Iface], pkts: &[(u32, Pkt)], unknown: bool) -> (Vec<u8>, Vec<u64>) {
    let mut b = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    b.extend(block(0x0a0d_0d0a, &shb));
    for i in ifaces {
        let mut idb = Vec::new();
        idb.extend_from_slice(&i.linktype.to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&262_144u32.to_le_bytes());
        // if_tsresol option (code 9, length 1), padded, then opt_endofopt.
        idb.extend_from_slice(&9u16.to_le_bytes());
        idb.extend_from_slice(&1u16.to_le_bytes());
        idb.extend_from_slice(&[i.tsresol, 0, 0, 0]);
        idb.extend_from_slice(&[0, 0, 0, 0]);
        b.extend(block(1, &idb));
    }
    let mut offsets = Vec::new();
    for (n, (iface, p)) in pkts.iter().enumerate() {
        let units = match ifaces[*iface as usize].tsresol {
            6 => p.ts_ns / 1000,
            _ => p.ts_ns,
        };
        let mut epb = Vec::new();
        epb.extend_from_slice(&iface.to_le_bytes());
        epb.extend_from_slice(&((units >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(units as u32).to_le_bytes());
        epb.extend_from_slice(&(p.frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&p.wire_len.to_le_bytes());
        offsets.push(b.len() as u64 + 28);
        epb.extend_from_slice(&p.frame);
        b.extend(block(6, &epb));
        if unknown && n == 0 {
            b.extend(block(0x0000_0777, &[1, 2, 3, 4, 5, 6, 7, 8]));
        }
    }
    (b, offsets)
}

/// A fresh directory under the target dir's tmp (removed by the caller's TempDir).
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// All Parquet files under `dir`, sorted.
pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every row of a Parquet file, as batches.
pub fn read_batches(path: &Path) -> Vec<RecordBatch> {
    let b = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    b.build().unwrap().map(|r| r.unwrap()).collect()
}

/// Every row of a converted set, sorted by (ts, offset).
pub fn read_all(dir: &Path) -> Vec<RecordBatch> {
    parquet_files(dir)
        .iter()
        .flat_map(|p| read_batches(p))
        .collect()
}
