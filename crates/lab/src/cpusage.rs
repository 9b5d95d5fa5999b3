//! CPU profiling as the thesis's `cpusage` and `trimusage` (seed 000 §5, A.3, A.4): read the tick counters
//! of `/proc/stat` every interval (0.5 s), turn the differences into percentages of the interval per mode
//! (user, nice, system, idle, iowait, irq, softirq, steal), per CPU and for the whole machine, and
//! summarise them with min / max / avg.
//!
//! Idle-threshold snapping (A.3, `-l`): the average covers only the first stretch of samples in which the
//! machine's idle percentage is below the limit — it starts when idle drops under the limit and stops when
//! idle returns to or above it (the profiler runs long before and after the traffic). `trimusage` (A.4)
//! fixes the case where that first stretch was a short unrelated burst: it takes the *longest* stretch
//! under the limit instead. Min and max always cover all samples (as trimusage does). The stretches are
//! found on the machine total (the `cpu` line); the per-CPU summaries use the same samples.

use std::fmt::{self, Write as _};
use std::io;
use std::time::{Duration, Instant};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde::Serialize as DeriveSerialize;

/// The modes of `/proc/stat` in kernel order. `guest` and `guest_nice` follow in the file but are already
/// counted in user and nice, so they are not added again.
pub const MODES: [&str; 8] = [
    "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
];
/// Index of idle in [`MODES`].
pub const IDLE: usize = 3;

/// Tick counters of one CPU (or the machine total) since boot, in [`MODES`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ticks(pub [u64; 8]);

impl Ticks {
    /// Sum of all modes.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// One readout of `/proc/stat`: the machine total and each online CPU by number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub all: Ticks,
    pub cpus: Vec<(u32, Ticks)>,
}

/// Parse the text of `/proc/stat` (only the `cpu` and `cpuN` lines are used). Kernels before 2.6.11 have
/// fewer columns; missing ones count as 0.
pub fn parse_proc_stat(text: &str) -> io::Result<ProcStat> {
    let bad = |line: &str, why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/stat line `{line}`: {why}"),
        )
    };
    let mut all = None;
    let mut cpus = Vec::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let Some(label) = parts.next() else { continue };
        let Some(num) = label.strip_prefix("cpu") else {
            continue;
        };
        let mut ticks = [0u64; 8];
        let mut n = 0;
        for (slot, field) in ticks.iter_mut().zip(parts) {
            *slot = field
                .parse()
                .map_err(|_| bad(line, &format!("`{field}` is not a tick count")))?;
            n += 1;
        }
        if n < 4 {
            return Err(bad(line, "fewer than 4 counters (user nice system idle)"));
        }
        if num.is_empty() {
            all = Some(Ticks(ticks));
        } else {
            let cpu = num
                .parse()
                .map_err(|_| bad(line, "not a cpu number after `cpu`"))?;
            cpus.push((cpu, Ticks(ticks)));
        }
    }
    let all = all.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "/proc/stat has no `cpu` line (is /proc mounted?)",
        )
    })?;
    Ok(ProcStat { all, cpus })
}

/// Read and parse `/proc/stat` now.
pub fn read_proc_stat() -> io::Result<ProcStat> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat")?)
}

/// Percentage of an interval spent in each mode, in [`MODES`] order (they add up to 100).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage(pub [f64; 8]);

impl Usage {
    /// Usage between two readouts; None if no tick passed (interval shorter than a tick).
    /// A counter that went backwards (iowait can, on some kernels) counts as 0.
    pub fn between(before: &Ticks, after: &Ticks) -> Option<Usage> {
        let mut d = [0u64; 8];
        for (i, slot) in d.iter_mut().enumerate() {
            *slot = after.0[i].saturating_sub(before.0[i]);
        }
        let total: u64 = d.iter().sum();
        if total == 0 {
            return None;
        }
        Some(Usage(d.map(|x| 100.0 * x as f64 / total as f64)))
    }

    /// Idle percentage.
    pub fn idle(&self) -> f64 {
        self.0[IDLE]
    }

    /// CPU usage as the thesis plots it (§6.2.2): 100 % − idle.
    pub fn busy(&self) -> f64 {
        100.0 - self.idle()
    }

    /// The percentage of a mode by name (`user`, `softirq`, …).
    pub fn get(&self, mode: &str) -> Option<f64> {
        MODES.iter().position(|m| *m == mode).map(|i| self.0[i])
    }
}

/// One line of the thesis's output: `user: 35.2%, nice: 0.0%, …, steal: 0.0%,` (Figure 5.1).
impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in MODES.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}: {:.1}%,", self.0[i])?;
        }
        Ok(())
    }
}

/// JSON: `{"user": 35.2, …}`.
impl Serialize for Usage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(MODES.len()))?;
        for (name, v) in MODES.iter().zip(self.0) {
            m.serialize_entry(name, &v)?;
        }
        m.end()
    }
}

/// The usage over one sampling interval.
#[derive(Clone, Debug, PartialEq, DeriveSerialize)]
pub struct Sample {
    /// Seconds from the start of sampling to the end of this interval.
    pub t: f64,
    pub all: Usage,
    /// Per CPU (by number), for the CPUs online at both readouts. JSON: `{"cpu0": {…}, …}`.
    #[serde(serialize_with = "cpu_map")]
    pub cpus: Vec<(u32, Usage)>,
}

impl Sample {
    /// Usage between two readouts `t` seconds after the start; None if no tick passed.
    pub fn between(before: &ProcStat, after: &ProcStat, t: f64) -> Option<Sample> {
        let all = Usage::between(&before.all, &after.all)?;
        let cpus = after
            .cpus
            .iter()
            .filter_map(|(cpu, a)| {
                let (_, b) = before.cpus.iter().find(|(c, _)| c == cpu)?;
                Some((*cpu, Usage::between(b, a)?))
            })
            .collect();
        Some(Sample { t, all, cpus })
    }
}

/// A run of consecutive samples: `len` samples from index `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, DeriveSerialize)]
pub struct Window {
    pub start: usize,
    pub len: usize,
}

impl Window {
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len
    }
}

/// cpusage's snapping: the first run of samples with idle < `limit`.
pub fn first_window_under(idle: &[f64], limit: f64) -> Option<Window> {
    let start = idle.iter().position(|&i| i < limit)?;
    let len = idle[start..].iter().take_while(|&&i| i < limit).count();
    Some(Window { start, len })
}

/// trimusage: the longest run of samples with idle < `limit` (the first of equally long ones).
/// Unlike the awk script, a run of a single sample counts too.
pub fn longest_window_under(idle: &[f64], limit: f64) -> Option<Window> {
    let mut best: Option<Window> = None;
    let mut i = 0;
    while i < idle.len() {
        if idle[i] < limit {
            let len = idle[i..].iter().take_while(|&&x| x < limit).count();
            if best.is_none_or(|b| len > b.len) {
                best = Some(Window { start: i, len });
            }
            i += len;
        } else {
            i += 1;
        }
    }
    best
}

/// Min, max and average of each mode.
#[derive(Clone, Copy, Debug, PartialEq, DeriveSerialize)]
pub struct Stats {
    pub min: Usage,
    pub max: Usage,
    pub avg: Usage,
}

/// Min, max and average per mode; None for no samples.
pub fn stats<'a>(usages: impl IntoIterator<Item = &'a Usage>) -> Option<Stats> {
    let mut min = [f64::INFINITY; 8];
    let mut max = [f64::NEG_INFINITY; 8];
    let mut sum = [0.0; 8];
    let mut n = 0usize;
    for u in usages {
        for i in 0..8 {
            min[i] = min[i].min(u.0[i]);
            max[i] = max[i].max(u.0[i]);
            sum[i] += u.0[i];
        }
        n += 1;
    }
    (n > 0).then(|| Stats {
        min: Usage(min),
        max: Usage(max),
        avg: Usage(sum.map(|s| s / n as f64)),
    })
}

/// Summary of one series (the machine or one CPU): min/max over all samples, avg over the window.
#[derive(Clone, Copy, Debug, PartialEq, DeriveSerialize)]
pub struct Summary {
    pub min: Usage,
    pub max: Usage,
    /// None if the window is empty (idle never dropped below the limit).
    pub avg: Option<Usage>,
}

/// The full result: samples, the cpusage summary, and the trimusage one if asked for.
#[derive(Clone, Debug, PartialEq, DeriveSerialize)]
pub struct Report {
    pub interval_s: f64,
    /// cpusage `-l`: the idle limit of the averaging window; None averages over all samples (`-a`).
    pub limit: Option<f64>,
    /// Samples the cpusage average covers.
    pub avg_window: Option<Window>,
    pub samples: Vec<Sample>,
    pub all: Option<Summary>,
    #[serde(serialize_with = "cpu_map")]
    pub cpus: Vec<(u32, Summary)>,
    pub trim: Option<Trim>,
}

/// trimusage's result: the longest stretch under the idle threshold and its averages.
#[derive(Clone, Debug, PartialEq, DeriveSerialize)]
pub struct Trim {
    pub threshold: f64,
    /// None if idle never dropped below the threshold.
    pub window: Option<Window>,
    pub seconds: f64,
    pub all: Option<Usage>,
    #[serde(serialize_with = "cpu_map")]
    pub cpus: Vec<(u32, Usage)>,
}

/// Per-CPU values as a JSON object keyed `cpu0`, `cpu1`, … .
#[allow(clippy::ptr_arg)] // serde hands the field itself
fn cpu_map<S: Serializer, T: Serialize>(v: &Vec<(u32, T)>, s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(v.len()))?;
    for (c, x) in v {
        m.serialize_entry(&format!("cpu{c}"), x)?;
    }
    m.end()
}

impl Report {
    /// Summarise samples: cpusage's min/max/avg with the optional idle `limit`, and trimusage's longest
    /// stretch under `trim` if given.
    pub fn new(
        interval_s: f64,
        samples: Vec<Sample>,
        limit: Option<f64>,
        trim: Option<f64>,
    ) -> Report {
        let idle: Vec<f64> = samples.iter().map(|s| s.all.idle()).collect();
        let avg_window = match limit {
            Some(l) => first_window_under(&idle, l),
            None => (!samples.is_empty()).then_some(Window {
                start: 0,
                len: samples.len(),
            }),
        };
        let cpu_ids: Vec<u32> = samples
            .first()
            .map(|s| s.cpus.iter().map(|(c, _)| *c).collect())
            .unwrap_or_default();
        let series = |cpu: Option<u32>| -> Vec<Option<Usage>> {
            samples
                .iter()
                .map(|s| match cpu {
                    None => Some(s.all),
                    Some(c) => s.cpus.iter().find(|(id, _)| *id == c).map(|(_, u)| *u),
                })
                .collect()
        };
        let summarise = |cpu: Option<u32>| -> Option<Summary> {
            let s = series(cpu);
            let all = stats(s.iter().flatten())?;
            let avg = avg_window
                .and_then(|w| stats(s[w.range()].iter().flatten()))
                .map(|st| st.avg);
            Some(Summary {
                min: all.min,
                max: all.max,
                avg,
            })
        };
        let all = summarise(None);
        let cpus = cpu_ids
            .iter()
            .filter_map(|&c| Some((c, summarise(Some(c))?)))
            .collect();
        let trim = trim.map(|threshold| {
            let window = longest_window_under(&idle, threshold);
            let avg_of = |cpu: Option<u32>| {
                let s = series(cpu);
                window
                    .and_then(|w| stats(s[w.range()].iter().flatten()))
                    .map(|st| st.avg)
            };
            Trim {
                threshold,
                window,
                seconds: window.map_or(0.0, |w| {
                    let end = samples[w.start + w.len - 1].t;
                    let begin = if w.start == 0 {
                        0.0
                    } else {
                        samples[w.start - 1].t
                    };
                    end - begin
                }),
                all: avg_of(None),
                cpus: cpu_ids
                    .iter()
                    .filter_map(|&c| Some((c, avg_of(Some(c))?)))
                    .collect(),
            }
        });
        Report {
            interval_s,
            limit,
            avg_window,
            samples,
            all,
            cpus,
            trim,
        }
    }

    /// The text output, as the thesis's Figure 5.1: one line per sample, `---Summary---`, then Min, Max and
    /// Avg for the machine and each CPU, and the trimusage average if asked for. `per_cpu_lines` also prints
    /// every sample of every CPU (prefixed `cpuN`).
    pub fn format(&self, per_cpu_lines: bool) -> String {
        let mut out = String::new();
        for s in &self.samples {
            let _ = writeln!(out, "{}", s.all);
            if per_cpu_lines {
                for (c, u) in &s.cpus {
                    let _ = writeln!(out, "  cpu{c} {u}");
                }
            }
        }
        out.push_str(&self.format_summary());
        out
    }

    /// Everything after the sample lines (from `---Summary---` on).
    pub fn format_summary(&self) -> String {
        let mut out = String::from("---Summary---\n");
        let avg_note = match (self.limit, self.avg_window) {
            (None, _) => "avg over all samples".to_string(),
            (Some(l), Some(w)) => format!(
                "avg over samples {}–{}: the first stretch with idle < {l:.1}%",
                w.start + 1,
                w.start + w.len
            ),
            (Some(l), None) => format!("no avg: idle never dropped below {l:.1}%"),
        };
        let mut block = |prefix: &str, s: &Summary| {
            let _ = writeln!(out, "{prefix}Min: {}", s.min);
            let _ = writeln!(out, "{prefix}Max: {}", s.max);
            if let Some(avg) = s.avg {
                let _ = writeln!(out, "{prefix}Avg: {avg}");
            }
        };
        if let Some(s) = &self.all {
            block("", s);
        }
        for (c, s) in &self.cpus {
            block(&format!("cpu{c} "), s);
        }
        let _ = writeln!(
            out,
            "({} samples of {:.2} s; {avg_note})",
            self.samples.len(),
            self.interval_s
        );
        if let Some(t) = &self.trim {
            match (t.window, &t.all) {
                (Some(w), Some(all)) => {
                    let _ = writeln!(
                        out,
                        "---Trimmed: longest stretch with idle < {:.1}%: samples {}–{} ({:.1} s)---",
                        t.threshold,
                        w.start + 1,
                        w.start + w.len,
                        t.seconds
                    );
                    let _ = writeln!(out, "Avg: {all}");
                    for (c, u) in &t.cpus {
                        let _ = writeln!(out, "cpu{c} Avg: {u}");
                    }
                }
                _ => {
                    let _ = writeln!(
                        out,
                        "---Trimmed: idle never dropped below {:.1}%---",
                        t.threshold
                    );
                }
            }
        }
        out
    }
}

/// Takes readouts of `/proc/stat` and turns consecutive pairs into samples.
pub struct Sampler {
    start: Instant,
    last: ProcStat,
}

impl Sampler {
    /// First readout now.
    pub fn start() -> io::Result<Sampler> {
        Ok(Sampler {
            start: Instant::now(),
            last: read_proc_stat()?,
        })
    }

    /// Read now and return the usage since the previous readout (None if no tick passed; the previous
    /// readout is then kept so the next sample covers the whole time).
    pub fn sample(&mut self) -> io::Result<Option<Sample>> {
        let now = read_proc_stat()?;
        let t = self.start.elapsed().as_secs_f64();
        let s = Sample::between(&self.last, &now, t);
        if s.is_some() {
            self.last = now;
        }
        Ok(s)
    }

    /// Sample every `interval` while `keep_going()` is true (checked every 50 ms, so a stop is quick),
    /// calling `on_sample` for each, then take a last sample of the partial interval. Deadlines are
    /// absolute, so the sampling does not drift.
    pub fn run(
        mut self,
        interval: Duration,
        mut keep_going: impl FnMut() -> bool,
        mut on_sample: impl FnMut(&Sample),
    ) -> io::Result<Vec<Sample>> {
        let mut samples = Vec::new();
        let mut next = Instant::now() + interval;
        loop {
            if !keep_going() {
                break;
            }
            let now = Instant::now();
            if now < next {
                std::thread::sleep((next - now).min(Duration::from_millis(50)));
                continue;
            }
            next += interval;
            if let Some(s) = self.sample()? {
                on_sample(&s);
                samples.push(s);
            }
        }
        if let Some(s) = self.sample()? {
            on_sample(&s);
            samples.push(s);
        }
        Ok(samples)
    }
}

/// cpusage in the background of a measurement cycle (§3.4: the profiler starts before the capturers and
/// stops after them): a thread samples until [`Profiler::stop`].
pub struct Profiler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<io::Result<Vec<Sample>>>,
    interval: Duration,
}

impl Profiler {
    /// Take the first readout now and sample every `interval` on a thread.
    pub fn start(interval: Duration) -> io::Result<Profiler> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let sampler = Sampler::start()?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("cpusage".into())
            .spawn(move || sampler.run(interval, || !flag.load(Ordering::Relaxed), |_| {}))?;
        Ok(Profiler {
            stop,
            thread,
            interval,
        })
    }

    /// Stop sampling (the last, partial interval is kept) and summarise as [`Report::new`].
    pub fn stop(self, limit: Option<f64>, trim: Option<f64>) -> io::Result<Report> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let samples = self
            .thread
            .join()
            .map_err(|_| io::Error::other("the cpusage thread panicked"))??;
        Ok(Report::new(
            self.interval.as_secs_f64(),
            samples,
            limit,
            trim,
        ))
    }
}

#[cfg(test)]
mod tests {
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
        let v: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
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
}
