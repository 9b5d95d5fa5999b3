//! `ringcap query` must give what libpcap gives (issue 33): a small random pcap (one of a few link
//! types, random lengths, times and bytes; sometimes cut, sometimes zstd-compressed in pieces not
//! cut at records) and a random expression from tcpdump's grammar are queried in process, indexed
//! and not, and compared record by record with libpcap itself reading the file (pcap_open_offline,
//! pcap_setfilter, pcap_next_ex: what tcpdump -r does). A filter libpcap refuses, or a file it
//! cannot read whole, must make the query fail too.
#![no_main]
use std::io::Write;
use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;

/// Draws from the fuzzer's bytes (zeros when they run out).
struct Draw<'a>(&'a [u8]);

impl Draw<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn pick<'b, T>(&mut self, xs: &'b [T]) -> &'b T {
        &xs[usize::from(self.byte()) % xs.len()]
    }
}

const LINKTYPES: [u32; 6] = [1, 101, 0, 113, 105, 12];
const HOSTS: [&str; 4] = ["10.0.0.1", "10.0.0.2", "192.168.1.1", "::1"];

/// A primitive of tcpdump's language, with values drawn.
fn primitive(d: &mut Draw) -> String {
    match d.byte() % 16 {
        0 => format!("host {}", d.pick(&HOSTS)),
        1 => format!("src net 10.0.0.0/{}", d.byte() % 33),
        2 => format!("port {}", d.u16() % 8),
        3 => format!("portrange {}-{}", d.byte() % 8, d.byte() % 16),
        4 => d.pick(&["tcp", "udp", "icmp", "ip", "ip6", "arp", "sctp", "icmp6"]).to_string(),
        5 => format!("vlan {}", d.byte() % 4),
        6 => "vlan".into(),
        7 => "mpls".into(),
        8 => format!("greater {}", d.byte()),
        9 => format!("less {}", d.byte()),
        10 => format!("ip[{}] & {} != 0", d.byte() % 24, d.byte()),
        11 => format!("tcp[13] & {} != 0", d.byte()),
        12 => "ether broadcast".into(),
        13 => format!("ether[{}] = {}", d.byte() % 16, d.byte()),
        14 => format!("ip proto {}", d.byte()),
        _ => "inbound".into(),
    }
}

fn expression(d: &mut Draw, depth: u32) -> String {
    if depth > 3 {
        return primitive(d);
    }
    match d.byte() % 6 {
        0 => String::new(),
        1 => format!("not {}", expression(d, depth + 1)),
        2 => format!("({}) and {}", expression(d, depth + 1), primitive(d)),
        3 => format!("{} or ({})", primitive(d), expression(d, depth + 1)),
        _ => primitive(d),
    }
    .trim()
    .to_string()
}

/// A frame that often parses: Ethernet/IPv4/UDP-or-TCP templates with drawn bytes over them.
fn frame(d: &mut Draw, linktype: u32) -> Vec<u8> {
    let mut ip = vec![0x45, 0, 0, 40, 0, 0, 0, 0, 64, *d.pick(&[6u8, 17, 1, 132]), 0, 0];
    ip.extend_from_slice(&[10, 0, 0, d.byte() % 3, 10, 0, 0, d.byte() % 3]);
    ip.extend_from_slice(&[0, d.byte() % 8, 0, d.byte() % 8, 0, 0, 0, 0]);
    ip.extend_from_slice(&[0, 0, 0, 0, 0x50, d.byte(), 0, 0, 0, 0, 0, 0]);
    let mut f = match linktype {
        1 => {
            let mut e = vec![0xff; 6];
            e.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
            if d.byte() % 4 == 0 {
                e.extend_from_slice(&[0x81, 0, 0, d.byte() % 4]);
            }
            e.extend_from_slice(&[8, 0]);
            e
        }
        0 => d.pick(&[2u32, 24, 28, 30]).to_le_bytes().to_vec(),
        113 => {
            let mut s = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
            s.extend_from_slice(&[8, 0]);
            s
        }
        _ => Vec::new(),
    };
    f.extend_from_slice(&ip);
    // Some bytes changed anywhere.
    for _ in 0..d.byte() % 4 {
        let at = usize::from(d.byte()) % f.len();
        f[at] = d.byte();
    }
    f.truncate(usize::from(d.byte()).max(1).min(f.len()));
    f
}

fn pcap_file(d: &mut Draw) -> Vec<u8> {
    let linktype = *d.pick(&LINKTYPES);
    let snaplen = *d.pick(&[0u32, 65535, 40, 262_144]);
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&snaplen.to_le_bytes());
    b.extend_from_slice(&linktype.to_le_bytes());
    for _ in 0..d.byte() % 24 {
        let data = frame(d, linktype);
        let sec = 1_700_000_000 + u32::from(d.byte());
        let usec = if d.byte() % 8 == 0 { d.u32() } else { d.u32() % 1_000_000 };
        let wire = data.len() as u32 + u32::from(d.byte() % 3);
        for v in [sec, usec, data.len() as u32, wire] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&data);
    }
    if d.byte() % 8 == 0 {
        let cut = usize::from(d.u16()) % b.len();
        b.truncate(cut.max(24));
    }
    b
}

/// (sec, usec, caplen, len, bytes) as libpcap gives them at µs.
type Rec = (u32, u32, u32, u32, Vec<u8>);

/// libpcap's answer: Err when it refuses the filter or the file (whole or in part).
fn libpcap(path: &std::path::Path, expr: &str) -> Result<Vec<Rec>, ()> {
    let mut cap = pcap::Capture::from_file(path).map_err(drop)?;
    cap.filter(expr, true).map_err(drop)?;
    let mut out = Vec::new();
    loop {
        match cap.next_packet() {
            Ok(p) => out.push((
                p.header.ts.tv_sec as u32,
                p.header.ts.tv_usec as u32,
                p.header.caplen,
                p.header.len,
                p.data.to_vec(),
            )),
            Err(pcap::Error::NoMorePackets) => return Ok(out),
            Err(_) => return Err(()),
        }
    }
}

fn ringcap(path: &PathBuf, expr: &str) -> Result<Vec<Rec>, ()> {
    let q = index::parse_query(expr, 0).map_err(drop)?;
    let opts = index::QueryOptions {
        jobs: 1,
        ..Default::default()
    };
    let mut out = Vec::new();
    let reports = index::query::run(std::slice::from_ref(path), &q, &opts, |h| {
        let (sec, usec) = h.time.at(store::MICROS);
        out.push((
            sec as u32,
            usec as u32,
            h.data.len() as u32,
            h.wire_len,
            h.data.to_vec(),
        ));
        Ok(true)
    })
    .map_err(drop)?;
    if reports.iter().any(|r| r.error.is_some()) {
        return Err(());
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let mut d = Draw(data);
    let plain = pcap_file(&mut d);
    let expr = expression(&mut d, 0);
    let dir = std::env::temp_dir().join(format!("ringcap-fuzz-query-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let reference = dir.join("ref.pcap");
    std::fs::write(&reference, &plain).unwrap();
    let want = libpcap(&reference, &expr);
    // The file as queried: plain, or zstd frames cut every `piece` bytes (not at records).
    let path = if d.byte() % 2 == 0 {
        let p = dir.join("q.pcap.zst");
        let piece = usize::from(d.byte()).max(7);
        let mut z = Vec::new();
        for c in plain.chunks(piece) {
            z.write_all(&zstd::bulk::compress(c, 1).unwrap()).unwrap();
        }
        std::fs::write(&p, z).unwrap();
        p
    } else {
        let p = dir.join("q.pcap");
        std::fs::write(&p, &plain).unwrap();
        p
    };
    let _ = std::fs::remove_file(index::index_path(&path));
    let scanned = ringcap(&path, &expr);
    assert_eq!(scanned, want, "scan: {expr:?}");
    if index::index_file(&path, &std::sync::atomic::AtomicU64::new(0)).is_ok() {
        let indexed = ringcap(&path, &expr);
        assert_eq!(indexed, want, "indexed: {expr:?}");
    }
});
