//! Sender benchmark on the lab testbed: ringcap's sendmmsg and TX_RING backends against trafgen, 60-byte
//! frames (IP length 46) to a non-local MAC, every sender pinned to CPU0, nothing capturing. The rate is
//! counted at the receiving veth (rx_packets) over a window in the middle of each run.
//!
//! `cargo run --release -p gen --example bench_tx -- [runs] [seconds] [batch,...]` (root; defaults 3, 3, 64)

use std::io::Write;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gen::tx::Backend;
use gen::{Control, FixedSize, GenOptions};
use testbed::{Side, Testbed, TestbedOptions};

/// A 60-byte UDP/IPv4 frame, 00:00:00:00:00:01 → 02:00:00:00:00:02, 10.0.0.1:9 → 10.0.0.2:9, zero payload,
/// checksums filled in (the same bytes ringcap sends).
const TRAFGEN_CFG: &str = "{
  0x02, 0x00, 0x00, 0x00, 0x00, 0x02,  0x00, 0x00, 0x00, 0x00, 0x00, 0x01,  0x08, 0x00,
  0x45, 0x00, 0x00, 0x2e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0xbd,
  0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
  0x00, 0x09, 0x00, 0x09, 0x00, 0x1a, 0xeb, 0xa5,
  fill(0x00, 18)
}
";

/// Receiver pps between `warm` and `warm + window` seconds after `started`.
fn rx_rate(tb: &Testbed, started: Instant, warm: f64, window: f64) -> f64 {
    let until = |s: f64| {
        let t = started + Duration::from_secs_f64(s);
        if let Some(d) = t.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    };
    until(warm);
    let (t1, a) = (Instant::now(), tb.rx_packets());
    until(warm + window);
    let (t2, b) = (Instant::now(), tb.rx_packets());
    (b - a) as f64 / (t2 - t1).as_secs_f64()
}

fn ringcap(tb: &Testbed, backend: Backend, batch: usize, seconds: f64) -> f64 {
    let o = GenOptions {
        interface: tb.tx_if.clone(),
        duration_s: Some(seconds),
        backend,
        batch,
        ring_frames: 1024.max(batch),
        cpus: vec![0],
        ..Default::default()
    };
    let started = Instant::now();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            tb.run_in(Side::Tx, || {
                gen::run(&o, &FixedSize(46), &Control::default())
            })
        });
        let pps = rx_rate(tb, started, 0.5, seconds - 1.0);
        let r = h.join().unwrap().expect("ringcap gen");
        assert!(r.errors.total() < r.packets, "{:?}", r.errors);
        pps
    })
}

fn trafgen(tb: &Testbed, cfg: &std::path::Path, seconds: f64) -> f64 {
    use std::os::unix::process::CommandExt;
    let mut child: Child = tb
        .command(Side::Tx, "trafgen")
        .args(["--dev", &tb.tx_if, "--conf"])
        .arg(cfg)
        .args(["--cpus", "1", "-n", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("trafgen");
    let started = Instant::now();
    let pps = rx_rate(tb, started, 0.5, seconds - 1.0);
    // trafgen's sending process is a fork; signal the whole group (ours), INT first, KILL if it lingers.
    let group = -(child.id() as i32);
    // SAFETY: signalling the process group of our own child.
    unsafe { libc::kill(group, libc::SIGINT) };
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(3) {
            // SAFETY: as above.
            unsafe { libc::kill(group, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    pps
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let seconds: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let batches: Vec<usize> = args
        .get(3)
        .map(|a| a.split(',').filter_map(|b| b.parse().ok()).collect())
        .unwrap_or_else(|| vec![64]);
    // The sampler and the benchmark itself stay off CPU0, where the senders (and the receive softirq) run.
    sys::pin_thread(1).expect("pin to CPU1");
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed (root needed)");
    let cfg = std::env::temp_dir().join(format!("bench-tx-{}.trafgen", std::process::id()));
    std::fs::write(&cfg, TRAFGEN_CFG).unwrap();
    let stop = AtomicBool::new(false);
    let mut rows: Vec<(String, Vec<f64>)> = vec![];
    let mut add = |name: String, v: f64| match rows.iter_mut().find(|r| r.0 == name) {
        Some(r) => r.1.push(v),
        None => rows.push((name, vec![v])),
    };
    for run in 0..runs {
        for &b in &batches {
            add(
                format!("sendmmsg batch {b}"),
                ringcap(&tb, Backend::Sendmmsg, b, seconds),
            );
            add(
                format!("tx-ring batch {b}"),
                ringcap(&tb, Backend::TxRing, b, seconds),
            );
        }
        add("trafgen".into(), trafgen(&tb, &cfg, seconds));
        eprintln!("run {} of {runs} done", run + 1);
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let _ = std::fs::remove_file(&cfg);
    let tg: f64 = rows
        .iter()
        .find(|r| r.0 == "trafgen")
        .map(|r| r.1.iter().sum::<f64>() / r.1.len() as f64)
        .unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "| sender | runs (Mpps) | mean Mpps | × trafgen |").unwrap();
    writeln!(out, "|---|---|---|---|").unwrap();
    for (name, v) in &rows {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let each: Vec<String> = v.iter().map(|x| format!("{:.3}", x / 1e6)).collect();
        writeln!(
            out,
            "| {name} | {} | {:.3} | {:.2} |",
            each.join(", "),
            mean / 1e6,
            mean / tg
        )
        .unwrap();
    }
}
