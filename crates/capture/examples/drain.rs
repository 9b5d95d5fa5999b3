//! Drain a capture source and count: the capture path's CPU cost per packet, nothing else.
//!
//! Run inside the receiving namespace, e.g.
//! `ip netns exec NS drain -i veth-rx --source ring --cpu 1 --idle-ms 1000`
//! It stops after `--idle-ms` without packets (once some arrived) or after `--max-s` seconds, then prints
//! packets, kernel drops, and CPU ns per packet from its own utime + stime (/proc/self/stat).

use std::time::{Duration, Instant};

use capture::{Source, SourceConfig, SourceKind};

fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the ")" that ends the command name: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| {
        f.get(i - 3)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(14) + get(15)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut cfg = SourceConfig::new("eth0");
    let (mut cpu, mut idle_ms, mut max_s) = (None, 1000u64, 60u64);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "-i" => cfg.interface = val(),
            "--source" => cfg.kind = val().parse::<SourceKind>().unwrap(),
            "--cpu" => cpu = Some(val().parse::<usize>().unwrap()),
            "-B" => cfg.set_buffer_kib(val().parse().unwrap()),
            "-s" => cfg.snaplen = val().parse().unwrap(),
            "--idle-ms" => idle_ms = val().parse().unwrap(),
            "--max-s" => max_s = val().parse().unwrap(),
            other => panic!("unknown argument {other}"),
        }
    }
    if let Some(c) = cpu {
        sys::pin_thread(c).expect("pin");
    }
    let mut src = match Source::open(&cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("drain: {e}");
            std::process::exit(2);
        }
    };
    eprintln!("drain: ready on {} ({:?})", cfg.interface, cfg.kind);
    let ticks0 = cpu_ticks();
    let start = Instant::now();
    let mut last = Instant::now();
    let (mut packets, mut bytes) = (0u64, 0u64);
    loop {
        let n = src
            .for_each_batch(Duration::from_millis(50), |p| bytes += p.data.len() as u64)
            .expect("capture");
        packets += n as u64;
        let now = Instant::now();
        if n > 0 {
            last = now;
        } else if packets > 0 && now - last > Duration::from_millis(idle_ms) {
            break;
        }
        if now - start > Duration::from_secs(max_s) {
            break;
        }
    }
    let ticks = cpu_ticks() - ticks0;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let cpu_ns = ticks * 1_000_000_000 / hz;
    let k = src.kernel_stats();
    let c = src.counters().snapshot();
    println!(
        "source={:?} packets={packets} bytes={bytes} kernel_packets={} drops={} freeze={} batches={} polls={} cpu_ms={} ns_per_pkt={:.1}",
        cfg.kind,
        k.packets,
        k.drops,
        k.freeze_q_cnt,
        c.batches,
        c.polls,
        cpu_ns / 1_000_000,
        cpu_ns as f64 / packets.max(1) as f64
    );
}
