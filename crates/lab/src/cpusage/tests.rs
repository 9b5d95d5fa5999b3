//! Parsing, percentages, windows and summaries checked on hand-made `/proc/stat` readouts.

use std::time::{Duration, Instant};

use super::*;

/// Two readouts 0.5 s apart on a 2-CPU machine at 100 Hz: 50 ticks per CPU, 100 in the total.
/// cpu0 spent 45 user, 3 system, 2 softirq; cpu1 1 user, 1 nice, 1 system, 46 idle, 1 iowait.
const BEFORE: &str = "cpu  1000 10 500 8000 100 0 50 0 0 0
cpu0 600 10 300 3900 50 0 40 0 0 0
cpu1 400 0 200 4100 50 0 10 0 0 0
intr 3960035 0 0 0
ctxt 7498647
btime 1795305629
";
const AFTER: &str = "cpu  1046 11 504 8046 101 0 52 0 0 0
cpu0 645 10 303 3900 50 0 42 0 0 0
cpu1 401 1 201 4146 51 0 10 0 0 0
intr 3960135 0 0 0
ctxt 7498847
btime 1795305629
";

#[test]
fn percentages_of_the_interval_per_cpu_and_total() {
    let a = parse_proc_stat(BEFORE).unwrap();
    let b = parse_proc_stat(AFTER).unwrap();
    let s = Sample::between(&a, &b, 0.5).unwrap();
    // Total: 46 user, 1 nice, 4 system, 46 idle, 1 iowait, 0 irq, 2 softirq of 100 ticks.
    assert_eq!(s.all.0, [46.0, 1.0, 4.0, 46.0, 1.0, 0.0, 2.0, 0.0]);
    assert_eq!(s.cpus.len(), 2);
    // cpu0: 45/50 = 90 % user, 3/50 = 6 % system, 2/50 = 4 % softirq.
    assert_eq!(
        s.cpus[0],
        (0, Usage([90.0, 0.0, 6.0, 0.0, 0.0, 0.0, 4.0, 0.0]))
    );
    // cpu1: 1/50 = 2 % each of user, nice, system, iowait; 46/50 = 92 % idle.
    assert_eq!(
        s.cpus[1],
        (1, Usage([2.0, 2.0, 2.0, 92.0, 2.0, 0.0, 0.0, 0.0]))
    );
    assert_eq!(
            s.all.to_string(),
            "user: 46.0%, nice: 1.0%, system: 4.0%, idle: 46.0%, iowait: 1.0%, irq: 0.0%, softirq: 2.0%, steal: 0.0%,"
        );
    assert_eq!(s.all.busy(), 54.0);
}

/// The head of this machine's /proc/stat (kernel 6.18, 10 columns with guest and guest_nice).
#[test]
fn parses_a_real_proc_stat_and_old_short_lines() {
    let text = "cpu  219719 62 132895 335552 2443 0 56489 385 0 0
cpu0 97903 2 94630 126403 419 0 54975 194 0 0
cpu1 121815 60 38264 209148 2024 0 1514 190 0 0
intr 3960035 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 7498647
btime 1795305629
processes 78869
procs_running 2
procs_blocked 0
softirq 757165362 0 179139 1804 756066186 169600 0 325 229772 23145 495391
";
    let p = parse_proc_stat(text).unwrap();
    assert_eq!(p.all.0, [219719, 62, 132895, 335552, 2443, 0, 56489, 385]);
    assert_eq!(
        p.cpus[1],
        (1, Ticks([121815, 60, 38264, 209148, 2024, 0, 1514, 190]))
    );
    // Linux 2.4 had 4 columns, 2.6.0 7: the rest count as 0.
    let p = parse_proc_stat("cpu 1 2 3 4\ncpu0 1 2 3 4 5 6 7\n").unwrap();
    assert_eq!(p.all.0, [1, 2, 3, 4, 0, 0, 0, 0]);
    assert_eq!(p.cpus[0].1 .0, [1, 2, 3, 4, 5, 6, 7, 0]);
    assert!(parse_proc_stat("cpu 1 2 x 4\n")
        .unwrap_err()
        .to_string()
        .contains("`x` is not a tick count"));
    assert!(parse_proc_stat("intr 1\n").is_err());
}

#[test]
fn no_ticks_means_no_sample_and_backwards_counters_count_as_zero() {
    let a = parse_proc_stat(BEFORE).unwrap();
    assert!(Sample::between(&a, &a, 0.5).is_none());
    // iowait 100 -> 90 (went backwards), idle +10: all idle.
    let b = parse_proc_stat("cpu  1000 10 500 8010 90 0 50 0 0 0\n").unwrap();
    let u = Usage::between(&a.all, &b.all).unwrap();
    assert_eq!(u.idle(), 100.0);
    assert_eq!(u.get("iowait"), Some(0.0));
}

fn usage_with_idle(idle: f64) -> Usage {
    Usage([100.0 - idle, 0.0, 0.0, idle, 0.0, 0.0, 0.0, 0.0])
}

#[test]
fn snapping_windows_first_and_longest() {
    let idle = [99.0, 98.0, 40.0, 50.0, 97.0, 30.0, 20.0, 10.0, 60.0, 99.0];
    assert_eq!(
        first_window_under(&idle, 95.0),
        Some(Window { start: 2, len: 2 })
    );
    assert_eq!(
        longest_window_under(&idle, 95.0),
        Some(Window { start: 5, len: 4 })
    );
    assert_eq!(first_window_under(&idle, 5.0), None);
    // A single sample under the limit is a stretch (the awk script skipped those).
    assert_eq!(
        longest_window_under(&[99.0, 50.0, 99.0], 95.0),
        Some(Window { start: 1, len: 1 })
    );
    // Equal lengths: the first wins.
    assert_eq!(
        longest_window_under(&[50.0, 99.0, 50.0], 95.0),
        Some(Window { start: 0, len: 1 })
    );
    // Idle exactly at the limit is not under it ("$4 < limit").
    assert_eq!(first_window_under(&[95.0], 95.0), None);
}

#[test]
fn report_min_max_over_all_avg_over_windows() {
    let idle = [99.0, 98.0, 40.0, 50.0, 97.0, 30.0, 20.0, 10.0, 60.0, 99.0];
    let samples: Vec<Sample> = idle
        .iter()
        .enumerate()
        .map(|(i, &x)| Sample {
            t: 0.5 * (i + 1) as f64,
            all: usage_with_idle(x),
            cpus: vec![(0, usage_with_idle(x)), (1, usage_with_idle(100.0))],
        })
        .collect();
    let r = Report::new(0.5, samples, Some(95.0), Some(95.0));
    let all = r.all.unwrap();
    assert_eq!(all.min.idle(), 10.0);
    assert_eq!(all.max.idle(), 99.0);
    assert_eq!(all.max.get("user"), Some(90.0));
    // cpusage: first stretch (40, 50): avg idle 45.
    assert_eq!(all.avg.unwrap().idle(), 45.0);
    assert_eq!(r.avg_window, Some(Window { start: 2, len: 2 }));
    // trimusage: longest stretch (30, 20, 10, 60): avg idle 30, user 70; from t = 2.5 to 4.5 s.
    let t = r.trim.as_ref().unwrap();
    assert_eq!(t.all.unwrap().idle(), 30.0);
    assert_eq!(t.all.unwrap().get("user"), Some(70.0));
    assert_eq!(t.seconds, 2.0);
    // Per CPU over the same samples: cpu1 was idle all along.
    assert_eq!(t.cpus[1], (1, usage_with_idle(100.0)));
    assert_eq!(r.cpus[0].1.avg.unwrap().idle(), 45.0);

    let text = r.format(false);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 10 + 1 + 3 + 2 * 3 + 1 + 1 + 1 + 2);
    assert_eq!(lines[10], "---Summary---");
    assert_eq!(
            lines[13],
            "Avg: user: 55.0%, nice: 0.0%, system: 0.0%, idle: 45.0%, iowait: 0.0%, irq: 0.0%, softirq: 0.0%, steal: 0.0%,"
        );
    assert_eq!(
        lines[20],
        "(10 samples of 0.50 s; avg over samples 3–4: the first stretch with idle < 95.0%)"
    );
    assert_eq!(
        lines[21],
        "---Trimmed: longest stretch with idle < 95.0%: samples 6–9 (2.0 s)---"
    );

    // Without a limit (-a) the avg covers everything: idle (99+98+40+50+97+30+20+10+60+99)/10 = 60.3.
    let r = Report::new(0.5, r.samples, None, None);
    assert!((r.all.unwrap().avg.unwrap().idle() - 60.3).abs() < 1e-9);
}

#[test]
fn json_names_modes_and_cpus() {
    let a = parse_proc_stat(BEFORE).unwrap();
    let b = parse_proc_stat(AFTER).unwrap();
    let s = Sample::between(&a, &b, 0.5).unwrap();
    let r = Report::new(0.5, vec![s], None, Some(95.0));
    let v: serde_json::Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(v["samples"][0]["all"]["user"], 46.0);
    assert_eq!(v["samples"][0]["cpus"]["cpu1"]["idle"], 92.0);
    assert_eq!(v["all"]["avg"]["softirq"], 2.0);
    assert_eq!(v["cpus"]["cpu0"]["max"]["user"], 90.0);
    assert_eq!(v["trim"]["window"]["len"], 1);
    assert_eq!(v["trim"]["cpus"]["cpu0"]["system"], 6.0);
    assert!(v["limit"].is_null());
}

/// Burn 1 s of CPU time on CPU 1 (or 0 on a single-CPU machine) from a pinned thread: that CPU's
/// user-mode share of the interval must be high. User-mode time is "user", or "nice" when the test runs
/// niced. The loop runs until its own thread clock says 1 s (not for 1 s of wall time: on a loaded
/// machine that gave it 0.63 s), and /proc must then show the process's CPU time grown by that second.
#[test]
fn live_busy_loop_shows_up_as_user_time_on_its_cpu() {
    let cpus = testbed::cpu_count();
    let cpu = if cpus > 1 { 1 } else { 0 };
    let own_before = crate::proc_cpu::read(std::process::id()).unwrap();
    let before = read_proc_stat().unwrap();
    let wall = Instant::now();
    std::thread::spawn(move || {
        sys::pin_thread(cpu).unwrap();
        let mut x = 1u64;
        while sys::thread_cpu_ns() < 1_000_000_000 && wall.elapsed() < Duration::from_secs(20) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
    })
    .join()
    .unwrap();
    let after = read_proc_stat().unwrap();
    let own_after = crate::proc_cpu::read(std::process::id()).unwrap();
    let s = Sample::between(&before, &after, wall.elapsed().as_secs_f64()).unwrap();
    let (_, u) = s.cpus.iter().find(|(c, _)| *c == cpu as u32).unwrap();
    let user_mode = u.get("user").unwrap() + u.get("nice").unwrap();
    assert!(user_mode > 70.0, "cpu{cpu}: {u}");
    assert!(u.idle() < 20.0, "cpu{cpu}: {u}");
    let own_ns = own_after.total_ns() - own_before.total_ns();
    assert!(own_ns > 950_000_000, "the loop got only {own_ns} ns of CPU");
}

#[test]
fn profiler_in_the_background_sees_a_busy_stretch() {
    let p = Profiler::start(Duration::from_millis(100)).unwrap();
    std::thread::sleep(Duration::from_millis(250));
    let t = Instant::now();
    let mut x = 1u64;
    while t.elapsed() < Duration::from_millis(500) {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    let r = p.stop(None, Some(100.0)).unwrap();
    assert!((5..=9).contains(&r.samples.len()), "{}", r.samples.len());
    // Our loop kept one CPU in user mode for 0.5 s: some interval shows ≥ 40 % of one CPU's share.
    let ncpu = r.samples[0].cpus.len() as f64;
    let peak = r
        .samples
        .iter()
        .map(|s| s.all.get("user").unwrap() + s.all.get("nice").unwrap())
        .fold(0.0, f64::max);
    assert!(peak > 40.0 / ncpu, "peak {peak} with {ncpu} CPUs");
    assert!(r.all.unwrap().avg.is_some());
}

#[test]
fn sampler_run_stops_when_asked_and_keeps_the_partial_interval() {
    let sampler = Sampler::start().unwrap();
    let t = Instant::now();
    let mut seen = 0;
    let samples = sampler
        .run(
            Duration::from_millis(100),
            || t.elapsed() < Duration::from_millis(350),
            |_| seen += 1,
        )
        .unwrap();
    // 3 full intervals and the partial one (fewer if this machine is so loaded that wake-ups slip).
    assert_eq!(samples.len(), seen);
    assert!((2..=4).contains(&samples.len()), "{}", samples.len());
    for s in &samples {
        let sum: f64 = s.all.0.iter().sum();
        assert!((sum - 100.0).abs() < 1e-9);
    }
    assert!(samples.windows(2).all(|w| w[0].t < w[1].t));
}
