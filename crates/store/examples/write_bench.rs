//! Benchmark sanity check (not a test): time writing N 60-byte packets with O_DIRECT and through
//! the page cache. When the pool is full the loop sleeps briefly and retries, so every packet is
//! written and the figures are throughput, not loss.
//!
//! cargo run --release -p store --example write_bench -- [DIR] [PACKETS]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use store::{CaptureWriter, Format, WriterOptions};

fn cpu_ns(who: i32) -> u64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
    t(u.ru_utime) + t(u.ru_stime)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "/var/tmp".into()));
    let n: u64 = args
        .next()
        .map(|s| s.parse().expect("packet count"))
        .unwrap_or(10_000_000);
    let frame: Vec<u8> = (0..60u8).collect();
    for (format, fname) in [
        (Format::Pcap { nanos: true }, "pcap"),
        (Format::PcapNg, "pcapng"),
    ] {
        for direct in [true, false] {
            let path = dir.join(format!(
                "ringcap-write-bench-{}.{fname}",
                std::process::id()
            ));
            let opts = WriterOptions {
                format,
                direct_io: direct,
                ..Default::default()
            };
            let (cpu0, thread0, t0) = (
                cpu_ns(libc::RUSAGE_SELF),
                cpu_ns(libc::RUSAGE_THREAD),
                Instant::now(),
            );
            let mut w = CaptureWriter::create(&path, opts).expect("create");
            let mut waits = 0u64;
            for i in 0..n {
                while !w.write_packet(i * 1000, 60, &frame, None) {
                    waits += 1;
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            let capture_cpu = cpu_ns(libc::RUSAGE_THREAD) - thread0;
            let s = w.finish(None).expect("finish");
            let (wall, cpu) = (
                t0.elapsed().as_nanos() as u64,
                cpu_ns(libc::RUSAGE_SELF) - cpu0,
            );
            let refused = s.storage_drops; // retried, so these are waits, not losses
            println!(
                "{fname:6} direct_io={:5} {n} pkts {:.0} MiB: wall {:.1} ns/pkt, cpu (both threads) {:.1} ns/pkt, \
                 capture thread {:.1} ns/pkt, pool-full waits {waits} ({refused} refusals)",
                s.direct_io,
                s.bytes_written as f64 / (1 << 20) as f64,
                wall as f64 / n as f64,
                cpu as f64 / n as f64,
                capture_cpu as f64 / n as f64,
            );
            let _ = std::fs::remove_file(&path);
        }
    }
}
