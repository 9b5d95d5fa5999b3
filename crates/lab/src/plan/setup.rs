//! A run's setup: the factors' levels resolved into what the runner starts (rate, burst, placement, ...).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use super::traffic::{parse_traffic, Traffic};
use super::{CustomMethod, BUILTIN_METHODS, FACTORS};

/// Offered rate of the generator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// As fast as the generator goes.
    Max,
    Mbps(f64),
    Pps(f64),
    GapNs(f64),
}

/// An on/off schedule of the generator (seed 002 §5.2, driverdump's burst test): `on_s` sending at the
/// run's rate, `off_s` idle, for `cycles` periods; with `phases` (`ringcap gen --burst`'s
/// `DIST[@RATE]`), on-period k sends phase k mod n instead of the run's traffic. The generator starts on a
/// wall-clock multiple of the fold (the period times the number of phases), so a time stamp's place in the
/// cycle is its wall-clock time modulo the fold.
#[derive(Clone, Debug, PartialEq)]
pub struct Burst {
    pub on_s: f64,
    pub off_s: f64,
    pub cycles: u32,
    /// Traffic of the on-periods in turn (empty: the run's dist and rate).
    pub phases: Vec<String>,
}

impl Burst {
    pub fn period_s(&self) -> f64 {
        self.on_s + self.off_s
    }
    /// The stretch the time lines are folded over and aligned to: one period per phase.
    pub fn fold_s(&self) -> f64 {
        self.period_s() * self.phases.len().max(1) as f64
    }
    /// `ringcap gen --burst` of this schedule.
    pub fn gen_arg(&self) -> String {
        let mut arg = format!("on={}ms,off={}ms", ms(self.on_s), ms(self.off_s));
        if !self.phases.is_empty() {
            arg += &format!(",phases={}", self.phases.join(";"));
        }
        arg
    }
}

fn ms(s: f64) -> u64 {
    (s * 1000.0).round() as u64
}

/// `on=2s,off=2s,cycles=5[,phases=DIST@RATE;...]` (cycles default 5; times in s or ms; phases last, checked
/// by `ringcap gen`, which names the phase that is wrong).
fn parse_burst(level: &str) -> Result<Option<Burst>, String> {
    if level == "none" {
        return Ok(None);
    }
    let usage = || {
        format!("burst = `{level}`: expected \"none\" or \"on=T,off=T[,cycles=N][,phases=DIST@RATE;...]\" with T like 2s or 500ms")
    };
    // Phases come last and keep their commas (`mix:50,186,1500`).
    let (level, phases) = match level.find("phases=") {
        Some(i) => {
            let head = level[..i].trim_end().strip_suffix(',').ok_or_else(usage)?;
            let phases: Vec<String> = level[i + "phases=".len()..]
                .split(';')
                .map(|p| p.trim().to_string())
                .collect();
            if phases.iter().any(String::is_empty) {
                return Err(format!("{}: a phase is empty", usage()));
            }
            (head, phases)
        }
        None => (level, Vec::new()),
    };
    let secs = |v: &str| -> Option<f64> {
        let (n, scale) = match v.strip_suffix("ms") {
            Some(n) => (n, 1e-3),
            None => (v.strip_suffix('s')?, 1.0),
        };
        n.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(|x| x * scale)
    };
    let (mut on, mut off, mut cycles) = (None, None, 5u32);
    for part in level.split(',') {
        let (k, v) = part.trim().split_once('=').ok_or_else(usage)?;
        match k.trim() {
            "on" => on = Some(secs(v.trim()).ok_or_else(usage)?),
            "off" => off = Some(secs(v.trim()).ok_or_else(usage)?),
            "cycles" => {
                cycles = v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|c| (1..=10_000).contains(c))
                    .ok_or_else(usage)?
            }
            _ => return Err(usage()),
        }
    }
    match (on, off) {
        // Whole milliseconds: the generator's schedule and the wall-clock alignment use ms.
        (Some(on), Some(off)) if on >= 0.001 => Ok(Some(Burst {
            on_s: ms(on) as f64 / 1000.0,
            off_s: ms(off) as f64 / 1000.0,
            cycles,
            phases,
        })),
        _ => Err(usage()),
    }
}

/// CPU placement (TESTBED.md): `single` puts generator, receive softirq and capturer on CPU 0; `dual` keeps
/// the generator on CPU 0 and steers receive processing (RPS) and the capturers to CPU 1; `split` leaves the
/// receive softirq with the generator on CPU 0 (veth delivers on the sender's CPU) and runs only the
/// capturers on CPU 1, so their CPU time holds no softirq work charged to them by tick accounting.
/// `siblings` is `split` on two SMT threads of one core (seed 000 Fig 6.16); runs with it are skipped, with
/// the reason, on a machine without siblings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Single,
    Dual,
    Split,
    Siblings,
}

impl Placement {
    /// CPU of the capturers.
    pub fn capture_cpu(self) -> usize {
        match self {
            Placement::Single => 0,
            Placement::Dual | Placement::Split => 1,
            Placement::Siblings => crate::smt::machine_sibling_pair().map_or(1, |p| p.1),
        }
    }
    /// CPU that RPS steers receive processing to (None: it stays on the sender's CPU).
    pub fn rps_cpu(self) -> Option<usize> {
        (self == Placement::Dual).then_some(1)
    }
    /// CPU of the generator.
    pub fn gen_cpu(self) -> usize {
        match self {
            Placement::Siblings => crate::smt::machine_sibling_pair().map_or(0, |p| p.0),
            _ => 0,
        }
    }
    /// Why runs with this placement cannot be done on this machine (None: they can).
    pub fn unavailable(self) -> Option<String> {
        match self {
            Placement::Siblings => crate::smt::machine_sibling_pair().err(),
            _ => None,
        }
    }
}

/// Where capturers write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Files on a real disk (the plan's `disk_dir`).
    Disk,
    /// /dev/null: counted from the tool's own summary.
    Null,
}

/// Everything one run needs, resolved from the levels.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    pub method: String,
    pub rate: Rate,
    pub buffer_kib: u64,
    /// Filter expression (tcpdump syntax), None = capture all.
    pub filter: Option<String>,
    pub apps: u32,
    /// `memcpy:N` / `gzip:N` / `zstd:N` (ringcap only).
    pub load: Option<String>,
    /// Bytes kept per packet, 0 = whole packet.
    pub snaplen: u32,
    pub placement: Placement,
    /// `ringcap gen --dist` spec.
    pub dist: String,
    pub output: Output,
    /// CPU budget of the capturers' cgroup in percent of one CPU (None: not limited).
    pub cpu_limit: Option<u32>,
    /// On/off cycles of the generator (None: it sends without pause).
    pub burst: Option<Burst>,
    /// What is sent: `ringcap gen`'s stream or a replayed synth trace.
    pub traffic: Traffic,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            method: "ringcap".into(),
            rate: Rate::Max,
            // The same 64 MiB for every tool (ringcap's default) so no method wins by a bigger buffer.
            buffer_kib: 65536,
            filter: None,
            apps: 1,
            load: None,
            snaplen: 0,
            placement: Placement::Dual,
            dist: "fixed:46".into(),
            output: Output::Disk,
            cpu_limit: None,
            burst: None,
            traffic: Traffic::Gen,
        }
    }
}

/// Is `name` a method the runner can start (built in, `tcpdump|gzip -N`, or plan-defined)?
pub fn method_known(name: &str, custom: &BTreeMap<String, CustomMethod>) -> bool {
    BUILTIN_METHODS.contains(&name) || pipe_method(name).is_some() || custom.contains_key(name)
}

/// `tcpdump|gzip -6` → 6: tcpdump writing to a pipe into gzip (seed 000 Fig. 6.12, compression via pipes).
/// Only gzip: capinfos reads .gz files directly, so the count needs no extra decompression step.
pub fn pipe_method(name: &str) -> Option<u32> {
    let (left, right) = name.split_once('|')?;
    if left.trim() != "tcpdump" {
        return None;
    }
    let mut words = right.split_whitespace();
    if words.next()? != "gzip" {
        return None;
    }
    let level: u32 = words.next()?.strip_prefix('-')?.parse().ok()?;
    (words.next().is_none() && (1..=9).contains(&level)).then_some(level)
}

fn parse_rate(factor: &str, level: &str) -> Result<Rate, String> {
    if level == "max" {
        return Ok(Rate::Max);
    }
    let v: f64 = level
        .parse()
        .map_err(|_| format!("{factor} = `{level}`: expected a number or \"max\""))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!(
            "{factor} = {level}: must be > 0 (or \"max\" for top speed)"
        ));
    }
    Ok(match factor {
        "rate_mbps" => Rate::Mbps(v),
        "rate_pps" => Rate::Pps(v),
        _ => Rate::GapNs(v),
    })
}

fn parse_load(level: &str) -> Result<Option<String>, String> {
    if level == "none" {
        return Ok(None);
    }
    let ok = level.split_once(':').is_some_and(|(kind, n)| {
        matches!(kind, "memcpy" | "gzip" | "zstd") && n.parse::<i32>().is_ok_and(|n| n > 0)
    });
    if ok {
        Ok(Some(level.to_string()))
    } else {
        Err(format!(
            "load = `{level}`: expected \"none\", \"memcpy:N\" (copy N times), \"gzip:N\" (zlib level N) or \"zstd:N\" (level N)"
        ))
    }
}

/// The expression of a filter level: `none`, `file:PATH` (relative to the plan's directory, lines joined)
/// or the expression itself.
fn resolve_filter(level: &str, dir: &Path) -> Result<Option<String>, String> {
    if level == "none" || level.is_empty() {
        return Ok(None);
    }
    let Some(path) = level.strip_prefix("file:") else {
        return Ok(Some(level.to_string()));
    };
    let full = dir.join(path);
    let text = std::fs::read_to_string(&full)
        .or_else(|_| std::fs::read_to_string(path))
        .map_err(|e| {
            format!(
                "filter = `{level}`: cannot read {} ({e}); paths are relative to the plan's directory",
                full.display()
            )
        })?;
    let expr = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if expr.is_empty() {
        return Err(format!("filter = `{level}`: {} is empty", full.display()));
    }
    Ok(Some(expr))
}

impl Setup {
    /// Set one factor to a level (as written); the error says what is wrong with the level.
    pub fn apply(
        &mut self,
        factor: &str,
        level: &str,
        plan_dir: &Path,
        custom: &BTreeMap<String, CustomMethod>,
    ) -> Result<(), String> {
        let whole = |min: u64, max: u64| -> Result<u64, String> {
            level
                .parse::<u64>()
                .ok()
                .filter(|v| (min..=max).contains(v))
                .ok_or_else(|| {
                    format!("{factor} = `{level}`: expected a whole number from {min} to {max}")
                })
        };
        match factor {
            "method" => {
                if !method_known(level, custom) {
                    let mut known: Vec<String> =
                        BUILTIN_METHODS.iter().map(|s| s.to_string()).collect();
                    known.push("tcpdump|gzip -N".into());
                    known.extend(custom.keys().cloned());
                    return Err(format!(
                        "unknown method `{level}`; known: {} (or define it in [methods.\"{level}\"] with a command)",
                        known.join(", ")
                    ));
                }
                self.method = level.to_string();
            }
            "rate_mbps" | "rate_pps" | "gap_ns" => self.rate = parse_rate(factor, level)?,
            "buffer_kib" => self.buffer_kib = whole(64, 16 << 20)?,
            "filter" => self.filter = resolve_filter(level, plan_dir)?,
            "apps" => self.apps = whole(1, 64)? as u32,
            "load" => self.load = parse_load(level)?,
            "snaplen" => self.snaplen = whole(0, 262144)? as u32,
            "placement" => {
                self.placement = match level {
                    "single" => Placement::Single,
                    "dual" => Placement::Dual,
                    "split" => Placement::Split,
                    "siblings" => Placement::Siblings,
                    _ => {
                        return Err(format!(
                            "placement = `{level}`: expected \"single\", \"dual\", \"split\" or \"siblings\""
                        ))
                    }
                }
            }
            "dist" => {
                if level.trim().is_empty() {
                    return Err("dist is empty: give a ringcap gen --dist spec such as \"fixed:46\" or \"imix\"".into());
                }
                self.dist = level.to_string();
            }
            "output" => {
                self.output = match level {
                    "disk" => Output::Disk,
                    "null" => Output::Null,
                    _ => return Err(format!("output = `{level}`: expected \"disk\" or \"null\"")),
                }
            }
            "burst" => self.burst = parse_burst(level)?,
            "traffic" => self.traffic = parse_traffic(level)?,
            "cpu_limit" => {
                self.cpu_limit = if level == "none" {
                    None
                } else {
                    // Up to every CPU of a big machine; 1 % still gets the kernel's 1 ms minimum quota.
                    Some(
                        whole(1, 100 * 1024)
                            .map_err(|e| format!("{e} (percent of one CPU), or \"none\""))?
                            as u32,
                    )
                }
            }
            _ => {
                return Err(format!(
                    "unknown factor `{factor}`; known factors: {}",
                    FACTORS.join(", ")
                ))
            }
        }
        Ok(())
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::Max => write!(f, "max"),
            Rate::Mbps(v) => write!(f, "{v} Mb/s"),
            Rate::Pps(v) => write!(f, "{v} pps"),
            Rate::GapNs(v) => write!(f, "{v} ns gap"),
        }
    }
}
