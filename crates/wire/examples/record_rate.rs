//! Per-packet cost of the header record's hot path (`Record::from_frame` + `encode`) on the real
//! sample frames, and on the same frames' IPv4 ones wrapped in VXLAN (a cloud mirror's traffic).
//! `cargo run --release -p wire --example record_rate` (issue 36: before/after decapsulation).

#[path = "../tests/samples/mod.rs"]
mod samples;

use std::hint::black_box;
use std::time::Instant;

use wire::record::Record;
use wire::LinkType;

/// `inner` (an Ethernet frame) in Ethernet / IPv4 192.0.2.1 → 192.0.2.2 / UDP → 4789 / VXLAN 42.
fn vxlan(inner: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let ip_len = (20 + 8 + 8 + inner.len()) as u16;
    f.extend_from_slice(&[
        0x45,
        0,
        (ip_len >> 8) as u8,
        ip_len as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ]);
    f.extend_from_slice(&[192, 0, 2, 1, 192, 0, 2, 2]);
    let udp_len = ip_len - 20;
    f.extend_from_slice(&[
        0xc0,
        0x00,
        0x12,
        0xb5,
        (udp_len >> 8) as u8,
        udp_len as u8,
        0,
        0,
    ]);
    f.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 42, 0]);
    f.extend_from_slice(inner);
    f
}

fn rate(name: &str, frames: &[(Vec<u8>, LinkType)], rounds: u32) {
    let mut out = [0u8; 256];
    let t = Instant::now();
    let mut acc = 0u64;
    for _ in 0..rounds {
        for (f, lt) in frames {
            let r = Record::from_frame(1, f.len() as u32, black_box(f), *lt);
            acc += r.encode(&mut out) as u64;
        }
    }
    let n = rounds as f64 * frames.len() as f64;
    let ns = t.elapsed().as_nanos() as f64 / n;
    println!("{name:28} {ns:6.1} ns/packet  [{acc}]");
}

fn main() {
    let plain: Vec<(Vec<u8>, LinkType)> = samples::ALL
        .iter()
        .map(|&(_, f, _, lt)| (f.to_vec(), lt))
        .collect();
    let wrapped: Vec<(Vec<u8>, LinkType)> = samples::ALL
        .iter()
        .filter(|s| s.3 == LinkType::Ethernet)
        .map(|&(_, f, _, _)| (vxlan(f), LinkType::Ethernet))
        .collect();
    // RECORD_RATE=plain: only the samples (for perf).
    let only_plain = std::env::var("RECORD_RATE").is_ok_and(|v| v == "plain");
    for _ in 0..3 {
        rate("from_frame+encode, samples", &plain, 500_000);
        if !only_plain {
            rate("the same in VXLAN", &wrapped, 500_000);
        }
    }
}
