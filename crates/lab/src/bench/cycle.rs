//! One run of the measurement cycle (seed 000 §3.4, Figure 3.2): start the capturers and wait until each
//! is ready, warm up, read the interface counters, start the CPU profile, generate, let the capturers
//! drain, read the counters, stop the capturers by signal, and collect what each one received.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::bed::{self, Bed, Sent};
use super::methods::{self, Launch};
use super::process::{self, Proc};
use super::results::Row;
use super::timeline;
use super::traffic;
use crate::cgroup::CpuLimit;
use crate::cpusage::{self, Profiler, Usage};
use crate::plan::{Count, OfferedBy, Output, Plan, Run, Traffic};

/// Interrupted by the user (Ctrl-C): the run in flight is abandoned.
#[derive(Debug)]
pub struct Interrupted;

/// What a run needs from the runner.
pub struct Env<'a> {
    pub plan: &'a Plan,
    pub ringcap: &'a Path,
    /// Where logs of failed runs (and the cpusage reports) go.
    pub out_dir: &'a Path,
    pub stop: &'a AtomicBool,
}

fn interrupted(stop: &AtomicBool) -> Result<(), Interrupted> {
    if stop.load(Ordering::Relaxed) {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Sleep in small steps so Ctrl-C is noticed.
fn nap(d: Duration, stop: &AtomicBool) -> Result<(), Interrupted> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        interrupted(stop)?;
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now()));
    }
    Ok(())
}

/// Run the generator where the bed says and wait for it (Ctrl-C kills it).
fn generate(
    bed: &Bed,
    env: &Env,
    run: &Run,
    packets: u64,
    log: &Path,
    measured: bool,
) -> Result<Result<Sent, String>, Interrupted> {
    let s = &run.setup;
    let burst = s.burst.as_ref().filter(|_| measured);
    let mut start_ns = None;
    let mut extra = Vec::new();
    let mut packets = packets;
    if let (Some(sp), true) = (env.plan.sampling, measured) {
        // Time-based: the duration ends the send; the count only has to be out of reach.
        packets = 1 << 62;
        extra = vec![
            "--duration".to_string(),
            format!("{}ms", (sp.send_s() * 1000.0).round() as u64),
        ];
    }
    if let Some(b) = burst {
        let period_ms = (b.period_s() * 1000.0).round() as u64;
        extra = vec![
            "--burst".to_string(),
            b.gen_arg(),
            "--duration".to_string(),
            format!("{}ms", period_ms * b.cycles as u64),
        ];
        // Start on a wall-clock multiple of the fold (seed 002: generators started on a boundary), at
        // least 100 ms ahead, so every time stamp's place in the cycle (and with phases, which phase) is its
        // wall-clock time modulo the fold.
        let fold = (b.fold_s() * 1e9).round() as u64;
        let now = sys::now_ns();
        let start = (now + 100_000_000).div_ceil(fold) * fold;
        start_ns = Some(start);
        nap(Duration::from_nanos(start - now), env.stop)?;
    }
    // The measured phase of a synth run replays its trace (written before the capturers started); the
    // warm-up stays `ringcap gen`'s, which only has to reach the capturers before the counters are read.
    let trace = traffic::trace_path(env.out_dir, env.plan, run).filter(|_| measured);
    let c = match trace
        .and_then(|t| traffic::replay_command(bed, env.ringcap, &t, s.placement.gen_cpu()))
    {
        Some(replay) => replay,
        None => bed.generator(
            env.ringcap,
            packets,
            s.rate,
            &s.dist,
            s.placement.gen_cpu(),
            &extra,
        ),
    };
    let started = Instant::now();
    let mut p = match process::spawn(c, None, log, None) {
        Ok(p) => p,
        Err(e) => return Ok(Err(format!("cannot start the generator: {e}"))),
    };
    let exit = loop {
        interrupted(env.stop)?;
        if let Some(e) = p.wait_timeout(Duration::from_millis(50)) {
            break e;
        }
    };
    let sent = Sent {
        start_ns,
        ..bed::read_sent(log, started)
    };
    match (exit.code, bed, sent.packets) {
        (0, Bed::Testbed(_), Some(_)) | (0, Bed::Interface(_), _) => Ok(Ok(sent)),
        (code, _, _) => Ok(Err(format!(
            "the generator failed (exit {code}): {}",
            last_line(&fs::read_to_string(log).unwrap_or_default())
        ))),
    }
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no output")
        .chars()
        .take(160)
        .collect()
}

/// With the generator's count as the offered load, the interface must have seen about as many: fewer means
/// packets were lost on the way (link, switch, NIC) and the capture rate would blame the capturer; more means
/// other traffic reached the interface. Tolerance 0.1 % (the search's loss threshold). `hint`: what to do.
fn cross_check(generated: Option<u64>, at_interface: u64, hint: &str) -> Option<String> {
    let g = generated?;
    let diff = (at_interface as f64 - g as f64) / (g.max(1) as f64);
    (diff.abs() > 0.001).then(|| {
        format!(
            "the generator sent {g} packets, the interface counted {at_interface} ({:+.2} %): {hint}",
            diff * 100.0
        )
    })
}

/// Capture packets in a file: `capinfos -M -c` (TESTBED.md: `tcpdump -r | wc -l` overcounts).
fn count_file(path: &Path) -> Result<u64, String> {
    if !path.exists() {
        return Err(format!("no output file {}", path.display()));
    }
    let out = Command::new("capinfos")
        .args(["-M", "-c"])
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run capinfos ({e}): apt install tshark"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains("Number of packets"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "capinfos cannot read {}: {}",
                path.display(),
                last_line(&String::from_utf8_lossy(&out.stderr))
            )
        })
}

/// Wait until each capturer's log shows its ready line and the namespace has as many running packet
/// sockets as capturers, then a little longer for them to reach their capture loop.
fn wait_ready(
    procs: &mut [(Proc, Launch, PathBuf)],
    stop: &AtomicBool,
) -> Result<Result<(), String>, Interrupted> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        interrupted(stop)?;
        let mut all = true;
        for (i, (p, l, log)) in procs.iter_mut().enumerate() {
            if !p.alive() {
                let text = fs::read_to_string(&*log).unwrap_or_default();
                return Ok(Err(format!(
                    "app {i} exited before it was ready: {}",
                    last_line(&text)
                )));
            }
            if !l.ready.is_empty() && !fs::read_to_string(&*log).is_ok_and(|t| t.contains(&l.ready))
            {
                all = false;
            }
        }
        let sockets = procs.iter().filter(|p| p.1.opens_packet_socket()).count();
        if all && process::packet_sockets(procs[0].0.pid as u32) >= sockets {
            nap(Duration::from_millis(500), stop)?;
            return Ok(Ok(()));
        }
        if Instant::now() > deadline {
            return Ok(Err("capturers not ready after 20 s".into()));
        }
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// After the last packet: wait the method's drain time, then until no capturer used more than 2 ms of
/// CPU in 0.25 s (at most 10 s more): the tool has written everything it got.
fn wait_drained(procs: &[(Proc, Launch, PathBuf)], stop: &AtomicBool) -> Result<(), Interrupted> {
    let drain = procs.iter().map(|p| p.1.drain_s).fold(0.0, f64::max);
    nap(Duration::from_secs_f64(drain), stop)?;
    let cpu = || -> u64 {
        procs
            .iter()
            .map(|(p, _, _)| process::tree_cpu_ns(p.pid as u32))
            .sum()
    };
    let mut before = cpu();
    for _ in 0..40 {
        nap(Duration::from_millis(250), stop)?;
        let after = cpu();
        if after.saturating_sub(before) < 2_000_000 {
            break;
        }
        before = after;
    }
    Ok(())
}

/// A run's capture files: removed when the run ends, also when it fails or is interrupted (unless the plan
/// keeps them).
struct Outputs {
    paths: Vec<PathBuf>,
    remove: bool,
}

impl Drop for Outputs {
    fn drop(&mut self) {
        if self.remove {
            for p in &self.paths {
                let _ = fs::remove_file(p);
            }
        }
    }
}

/// Bytes on an Ethernet wire for `pkts` frames of `bytes` frame bytes (no FCS, as rx_bytes counts them):
/// each frame padded to 60 plus FCS 4, preamble 8 and gap 12 (84 bytes for a 60-byte frame). The counters
/// give sums, not each frame, so the padding is exact when no frame is below 60 bytes or all are the same
/// size (every fixed:N plan); a mix with frames under 60 bytes is counted a little short.
pub fn line_bytes(pkts: u64, bytes: u64) -> u64 {
    // The same constants as gen::pace (MIN_FRAME, L1_OVERHEAD), which paces --mbps by them.
    const MIN_FRAME: u64 = 60;
    const L1_OVERHEAD: u64 = 24;
    bytes.max(pkts * MIN_FRAME) + pkts * L1_OVERHEAD
}

/// Run one point once; returns one row per app (status says what failed, if anything).
pub fn run_once(bed: &Bed, env: &Env, run: &Run) -> Result<Vec<Row>, Interrupted> {
    let s = &run.setup;
    let base = Row {
        run: run.index,
        point: run.point.clone(),
        rerun: run.rerun,
        levels: run.levels.iter().map(|(_, v)| v.clone()).collect(),
        machine: env.plan.machine_label(),
        ..Row::default()
    };
    let fail_all = |why: String| -> Vec<Row> {
        (0..s.apps)
            .map(|app| Row {
                app,
                status: why.clone(),
                ..base.clone()
            })
            .collect()
    };
    let logs = env.out_dir.join("logs");
    let _ = fs::create_dir_all(&logs);
    let cpu = s.placement.capture_cpu();
    if cpu >= testbed::cpu_count() {
        return Ok(fail_all(format!(
            "placement needs CPU {cpu}, this machine has {}",
            testbed::cpu_count()
        )));
    }
    // Before the capturers start, so writing a trace costs them nothing.
    if let Err(why) = traffic::write_trace(env.ringcap, env.out_dir, env.plan, run) {
        return Ok(fail_all(why));
    }
    let ext = methods::extension(&s.method, env.plan);
    let tag = format!("{}-run{}", std::process::id(), run.index);

    // The capturers' CPU budget: declared before them, so it is removed after they are reaped.
    let limit = match s.cpu_limit {
        None => None,
        Some(pct) => match CpuLimit::create(&tag, pct) {
            Ok(l) => Some(l),
            Err(e) => return Ok(fail_all(format!("cannot limit the capturers' CPU: {e}"))),
        },
    };

    // 1. Capturers, each pinned to the capture CPU, inside the Rx namespace (and the budget's cgroup).
    let mut procs: Vec<(Proc, Launch, PathBuf)> = Vec::new();
    let mut outs = Outputs {
        paths: Vec::new(),
        remove: s.output == Output::Disk && !env.plan.keep_files,
    };
    for app in 0..s.apps {
        let out = methods::output_path(s, &env.plan.disk_dir, &format!("{tag}-app{app}"), &ext);
        if s.output == Output::Disk {
            // Never for /dev/null: removing it would let a tool create a regular file in its place.
            let _ = fs::remove_file(&out);
        }
        let ctx = methods::Ctx {
            iface: bed.capture_if(),
            out: &out,
            cpu,
            ringcap: env.ringcap,
        };
        let launch = match methods::launch(&s.method, s, &ctx, env.plan) {
            Ok(l) => l,
            Err(why) => return Ok(fail_all(format!("unsupported: {why}"))),
        };
        let log = logs.join(format!("run{}-app{app}.log", run.index));
        let mut cmd = bed.capture_command(&launch.argv);
        if let Some(l) = &limit {
            l.enter_on_exec(&mut cmd);
        }
        match process::spawn(cmd, Some(cpu), &log, launch.stop_comm.clone()) {
            Ok(p) => procs.push((p, launch, log)),
            Err(e) => return Ok(fail_all(format!("cannot start {}: {e}", s.method))),
        }
        outs.paths.push(out);
    }
    if let Err(why) = wait_ready(&mut procs, env.stop)? {
        for (p, _, _) in procs.iter_mut() {
            p.stop(Duration::from_secs(2));
        }
        return Ok(fail_all(format!(
            "{why} (logs: {})",
            logs.join(format!("run{}-app*.log", run.index)).display()
        )));
    }

    // CPU spent before the first packet (a 64 MiB ring costs a libpcap tool ~0.2 s here): left out of the
    // per-packet cost, which short runs would otherwise mostly measure.
    let setup_ns: Vec<u64> = procs
        .iter()
        .map(|(p, _, _)| process::tree_cpu_ns(p.pid as u32))
        .collect();

    // 2. Warm-up, counters, profile, the measured phase.
    let gen_log = logs.join(format!("run{}-gen.log", run.index));
    let c0 = match bed.counters() {
        Ok(c) => c,
        Err(e) => return Ok(fail_all(format!("cannot read the interface counters: {e}"))),
    };
    let nic0 = bed.driver_stats();
    let mut warm = Sent::default();
    // Time-based runs warm up inside the measured send (the first warmup_s of it).
    let warmup_packets = if env.plan.sampling.is_some() {
        0
    } else {
        env.plan.warmup_packets
    };
    if warmup_packets > 0 {
        match generate(bed, env, run, env.plan.warmup_packets, &gen_log, false)? {
            Ok(w) => warm = w,
            Err(why) => return Ok(fail_all(why)),
        }
        nap(Duration::from_millis(200), env.stop)?;
    }
    let c1 = bed.counters().unwrap_or(c0);
    let stat0 = cpusage::read_proc_stat();
    let profiler = Profiler::start(Duration::from_millis(100)).ok();
    // Burst runs: the receiving interface's counters every 100 ms, for the time line.
    let sampling = AtomicBool::new(false);
    let mut samples: Vec<timeline::Sample> = Vec::new();
    let mut boundaries: Vec<timeline::Sample> = Vec::new();
    let sent = std::thread::scope(|scope| {
        let sampler = s.burst.as_ref().map(|_| {
            scope.spawn(|| {
                let mut out = Vec::new();
                while !sampling.load(Ordering::Relaxed) {
                    if let Ok(c) = bed.counters() {
                        out.push((sys::now_ns(), c.packets, c.bytes));
                    }
                    let now = sys::now_ns();
                    let next = (now / timeline::BIN_NS + 1) * timeline::BIN_NS;
                    std::thread::sleep(Duration::from_nanos(next - now));
                }
                out
            })
        });
        // Time-based runs: the counters at every sample boundary, from warmup_s after the start.
        let bounds = env.plan.sampling.map(|sp| {
            let start = sys::now_ns() + (sp.warmup_s * 1e9) as u64;
            let step = (sp.sample_s * 1e9) as u64;
            let sampling = &sampling;
            scope.spawn(move || {
                let mut out: Vec<timeline::Sample> = Vec::new();
                for k in 0..=sp.samples as u64 {
                    let at = start + k * step;
                    while sys::now_ns() < at {
                        if sampling.load(Ordering::Relaxed) {
                            return out;
                        }
                        let left = at.saturating_sub(sys::now_ns());
                        std::thread::sleep(Duration::from_nanos(left.min(20_000_000)));
                    }
                    // The read runs `cat` in the namespace (some ms): stamp it at the middle, so a
                    // sample's edges are uncertain by about half a read either way.
                    let before = sys::now_ns();
                    if let Ok(c) = bed.counters() {
                        let after = sys::now_ns();
                        out.push((before + (after - before) / 2, c.packets, c.bytes));
                    }
                }
                out
            })
        });
        let sent = generate(bed, env, run, env.plan.packets, &gen_log, true);
        sampling.store(true, Ordering::Relaxed);
        if let Some(h) = sampler {
            samples = h.join().unwrap_or_default();
        }
        if let Some(h) = bounds {
            boundaries = h.join().unwrap_or_default();
        }
        sent
    })?;
    let stat1 = cpusage::read_proc_stat();
    let report = profiler.and_then(|p| p.stop(None, None).ok());
    let sent = match sent {
        Ok(s) => s,
        Err(why) => {
            for (p, _, _) in procs.iter_mut() {
                p.stop(Duration::from_secs(2));
            }
            return Ok(fail_all(why));
        }
    };
    wait_drained(&procs, env.stop)?;
    let c2 = bed.counters().unwrap_or(c1);
    let nic = bed::stats_delta(&nic0, &bed.driver_stats());
    if !nic.is_empty() {
        let _ = fs::create_dir_all(env.out_dir.join("nic"));
        let _ = fs::write(
            env.out_dir.join("nic").join(format!("{}.txt", run.index)),
            nic,
        );
    }

    // 3. Stop by signal; collect.
    let mut exits = Vec::new();
    for (p, _, _) in procs.iter_mut() {
        exits.push(p.stop(Duration::from_secs(10)));
    }
    let cg = limit.as_ref().and_then(|l| l.stat().ok());
    if let Some(r) = &report {
        let _ = fs::create_dir_all(env.out_dir.join("cpusage"));
        let _ = fs::write(
            env.out_dir
                .join("cpusage")
                .join(format!("{}.txt", run.index)),
            r.format(true),
        );
    }
    let cpu_modes: Option<[f64; 8]> = match (&stat0, &stat1) {
        (Ok(a), Ok(b)) => Usage::between(&a.all, &b.all).map(|u| u.0),
        _ => None,
    };
    let capture_cpu_busy = match (&stat0, &stat1) {
        (Ok(a), Ok(b)) => {
            let of = |p: &cpusage::ProcStat| {
                p.cpus.iter().find(|(n, _)| *n as usize == cpu).map(|c| c.1)
            };
            of(a)
                .zip(of(b))
                .and_then(|(x, y)| Usage::between(&x, &y))
                .map(|u| u.busy())
        }
        _ => None,
    };
    let generated = match (warm.packets, sent.packets) {
        (w, Some(m)) if warmup_packets == 0 || w.is_some() => Some(w.unwrap_or(0) + m),
        _ => None,
    };
    let offered = c2.packets.saturating_sub(c0.packets);
    let main_pkts = c2.packets.saturating_sub(c1.packets);
    let main_bytes = c2.bytes.saturating_sub(c1.bytes);
    let dur = sent.duration_s;
    // The capture rate's denominator: the generator's count on the testbed (veth loses nothing between its
    // ends), the plan's choice on a named interface, where the other count is the cross-check.
    // A replayed trace is checked too: replay skips frames it cannot send (non-Ethernet, over the MTU), and
    // its report must still match what the interface got.
    let (denominator, check) = match (bed, env.plan.interface.as_ref().map(|i| i.offered)) {
        (Bed::Testbed(_), _) if s.traffic != Traffic::Gen => (
            generated,
            cross_check(
                generated,
                offered,
                "veth lost frames, or other traffic reached it",
            ),
        ),
        (Bed::Testbed(_), _) => (generated, None),
        (Bed::Interface(_), Some(OfferedBy::Generator)) => (
            generated,
            cross_check(
                generated,
                offered,
                "use offered = \"interface\" or stop the other traffic",
            ),
        ),
        (Bed::Interface(_), _) => (Some(offered), None),
    };
    let mut rows = Vec::new();
    let mut all_ok = true;
    for (app, ((_, launch, log), exit)) in procs.iter().zip(&exits).enumerate() {
        let text = fs::read_to_string(log).unwrap_or_default();
        let summary = methods::parse_summary(launch.summary, &text);
        let mut status = String::from("ok");
        let received = match (launch.count, s.output) {
            (Count::File, Output::Disk) => match count_file(&outs.paths[app]) {
                Ok(n) => Some(n),
                Err(why) => {
                    status = why;
                    None
                }
            },
            _ => summary.captured,
        };
        if received.is_none() && status == "ok" {
            status = format!(
                "no packet count in the tool's summary: {}",
                last_line(&text)
            );
        }
        if exit.stopped_by == libc::SIGKILL || exit.stopped_by == libc::SIGTERM {
            status = format!("did not stop on SIGINT (needed signal {})", exit.stopped_by);
        } else if exit.code != 0 && status == "ok" {
            status = format!("exit {}: {}", exit.code, last_line(&text));
        }
        if offered == 0 && status == "ok" {
            status = format!("nothing offered ({} counted 0 packets)", bed.capture_if());
        }
        if let (Some(why), true) = (&check, status == "ok") {
            status = why.clone();
        }
        if denominator.is_none() && status == "ok" {
            status = "the generator printed no --json report: use offered = \"interface\"".into();
        }
        all_ok &= status == "ok";
        let app_cpu_s = exit.cpu_ns as f64 / 1e9;
        let run_cpu_s = exit.cpu_ns.saturating_sub(setup_ns[app]) as f64 / 1e9;
        rows.push(Row {
            app: app as u32,
            generated,
            offered: Some(offered),
            received,
            drop_kernel: summary.drop_kernel,
            drop_ring: summary.drop_ring,
            drop_storage: summary.drop_storage,
            capture_rate: received
                .zip(denominator.filter(|d| *d > 0))
                .map(|(r, d)| r as f64 / d as f64),
            duration_s: (dur > 0.0).then_some(dur),
            pps: (dur > 0.0).then(|| main_pkts as f64 / dur),
            mbps: (dur > 0.0).then(|| main_bytes as f64 * 8.0 / dur / 1e6),
            line_mbps: (dur > 0.0)
                .then(|| line_bytes(main_pkts, main_bytes) as f64 * 8.0 / dur / 1e6),
            cpu: cpu_modes,
            app_cpu_s: Some(app_cpu_s),
            app_ns_per_pkt: (offered > 0).then(|| run_cpu_s / offered as f64 * 1e9),
            app_setup_s: Some(setup_ns[app] as f64 / 1e9),
            cg_periods: cg.map(|c| c.nr_periods),
            cg_throttled: cg.map(|c| c.nr_throttled),
            cg_throttled_s: cg.map(|c| c.throttled_s),
            capture_cpu_busy,
            status,
            ..base.clone()
        });
    }
    if let (Some(b), Some(path)) = (&s.burst, outs.paths.first()) {
        // Captured per bin from the first app's file (needs pcap on disk); offered from the counters.
        let stamps = if s.output == Output::Disk {
            timeline::pcap_stamps(path).unwrap_or_default()
        } else {
            Vec::new()
        };
        let fold_ns = (b.fold_s() * 1e9).round() as u64;
        // From the generator's start: the counters read while waiting for the wall-clock boundary are not
        // part of any cycle, and folded in they would pull down whatever phase of the cycle that wait
        // happened to cover.
        if let Some(start) = sent.start_ns {
            samples.retain(|s| s.0 >= start);
        }
        let bins = timeline::bins(&samples, &stamps, fold_ns);
        let _ = timeline::write(
            &env.out_dir
                .join("timeline")
                .join(format!("{}.csv", run.index)),
            &bins,
        );
    }
    if let (Some(sp), Some(path)) = (env.plan.sampling, outs.paths.first()) {
        // Captured per sample from the first app's capture file; a sample the generator did not fill
        // (it ended early) is left out, and a run with fewer samples than asked says so.
        let stamps = timeline::PcapStamps::open(path).into_iter().flatten();
        let per = super::samples::per_sample(&boundaries, stamps);
        let _ = super::samples::write(
            &env.out_dir
                .join("samples")
                .join(format!("{}.csv", run.index)),
            &per,
        );
        if per.len() < sp.samples as usize {
            let why = format!(
                "{} of {} samples measured (the send ended early?)",
                per.len(),
                sp.samples
            );
            for r in rows.iter_mut().filter(|r| r.status == "ok") {
                r.status = why.clone();
            }
        }
    }
    drop(outs);
    if s.output == Output::Disk {
        // No dirty pages of this run left to be written back during the next one.
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
    }
    if all_ok {
        for (_, _, log) in &procs {
            let _ = fs::remove_file(log);
        }
        let _ = fs::remove_file(&gen_log);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::line_bytes;

    #[test]
    fn line_bytes_add_preamble_fcs_gap_and_padding() {
        // Schultz: a 60-byte frame is 84 bytes on the wire (8 preamble + 60 + 4 FCS + 12 gap).
        assert_eq!(line_bytes(1, 60), 84);
        assert_eq!(line_bytes(1000, 60_000), 84_000);
        // 1514-byte frames: 1538 on the wire.
        assert_eq!(line_bytes(10, 15_140), 15_380);
        // 42-byte frames (the smallest UDP/IPv4) are padded to 60 first.
        assert_eq!(line_bytes(2, 84), 2 * 84);
        // 148.8 kpps of 60-byte frames is 100 Mb/s on the line, 71.4 Mb/s of frames.
        let pps: f64 = 100e6 / (84.0 * 8.0);
        let line = line_bytes(pps.round() as u64, (pps.round() * 60.0) as u64) as f64 * 8.0 / 1e6;
        assert!((line - 100.0).abs() < 0.01, "{line}");
    }
}
