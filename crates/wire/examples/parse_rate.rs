//! Rough per-packet cost of `parse`, `format_line` and `emit` on the real sample frames.
//! `cargo run --release -p wire --example parse_rate`

#[path = "../tests/samples/mod.rs"]
mod samples;

use std::hint::black_box;
use std::time::Instant;

use wire::*;

fn main() {
    println!(
        "size_of::<Headers>() = {} bytes",
        std::mem::size_of::<Headers>()
    );
    let rounds = 200_000u32;
    let n = rounds as f64 * samples::ALL.len() as f64;

    let t = Instant::now();
    let mut acc = 0u64;
    for _ in 0..rounds {
        for &(_, f, _, lt) in samples::ALL {
            let h = parse(black_box(f), lt);
            acc += h.l4_offset.unwrap_or(0) as u64 + h.src_port.unwrap_or(0) as u64;
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / n;
    println!(
        "parse:       {ns:6.1} ns/packet ({:.1} Mpps)  [{acc}]",
        1e3 / ns
    );

    let mut line = String::with_capacity(512);
    let t = Instant::now();
    for i in 0..rounds / 10 {
        for &(_, f, wire, lt) in samples::ALL {
            line.clear();
            format_line(&mut line, i as u64, black_box(f), wire, lt).unwrap();
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (n / 10.0);
    println!("format_line: {ns:6.1} ns/packet");

    let spec = UdpFrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        ip: IpPair::V4 {
            src: [10, 77, 0, 1].into(),
            dst: [10, 77, 0, 2].into(),
        },
        src_port: 1024,
        dst_port: 9,
        ttl: 64,
        payload_len: 18,
    };
    let mut buf = [0u8; 1600];
    let t = Instant::now();
    for _ in 0..rounds {
        black_box(spec.emit(black_box(&mut buf)));
    }
    let ns = t.elapsed().as_nanos() as f64 / rounds as f64;
    println!("emit 60 B:   {ns:6.1} ns/frame");
    let big = spec.with_ip_len(1500).unwrap();
    let t = Instant::now();
    for _ in 0..rounds {
        black_box(big.emit(black_box(&mut buf)));
    }
    let ns = t.elapsed().as_nanos() as f64 / rounds as f64;
    println!("emit 1514 B: {ns:6.1} ns/frame (checksums the payload)");
    let t = Instant::now();
    for i in 0..rounds {
        big.set_ports(black_box(&mut buf), i as u16, 9);
        big.write_payload(&mut buf, 0, &i.to_be_bytes());
    }
    let ns = t.elapsed().as_nanos() as f64 / rounds as f64;
    println!("rewrite ports + 4 payload bytes: {ns:6.1} ns/frame (RFC 1624)");
}
