//! Measurement plans (TOML): the factors and levels of a study, how many reruns and packets, and their
//! expansion into an ordered list of runs (seed 000 §6.2.1: every point is measured several times).
//!
//! ```toml
//! title = "Thesis baseline"
//! [run]
//! reruns = 7
//! packets = 1000000
//! placement = "dual"          # any factor may be fixed here instead of varied
//! [factors]
//! method = ["ringcap", "tcpdump"]
//! rate_mbps = [100, "max"]
//! [quick]                     # what --quick changes
//! reruns = 2
//! [quick.factors]
//! rate_mbps = ["max"]
//! ```
//!
//! Runs are interleaved: rerun 0 of every point, then rerun 1, ... so slow drift of the machine (page cache,
//! other load, thermal) hits every point alike instead of biasing whichever was measured last.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The factors a plan may vary (or fix in `[run]`).
pub const FACTORS: [&str; 14] = [
    "method",
    "rate_mbps",
    "rate_pps",
    "gap_ns",
    "buffer_kib",
    "filter",
    "apps",
    "load",
    "snaplen",
    "placement",
    "dist",
    "output",
    "cpu_limit",
    "burst",
];

/// Capture methods the runner knows without a `[methods.NAME]` section (plus `tcpdump|gzip -N`).
pub const BUILTIN_METHODS: [&str; 8] = [
    "ringcap",
    "ringcap-copy",
    "ringcap-xdp",
    "drop-all-xdp",
    "tcpdump",
    "netsniff-ng",
    "dumpcap",
    "stenographer",
];

/// Packet rate assumed for `max` in time estimates: what `ringcap gen` reaches on the 2-vCPU test machine.
const MAX_PPS_ESTIMATE: f64 = 500_000.0;
/// Fixed cost of one run in time estimates (testbed, start-up, drain, stop, counting), seconds.
const RUN_OVERHEAD_S: f64 = 3.5;

/// A plan that cannot be used, with what to fix.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot read plan {path}: {err}")]
    Read { path: PathBuf, err: std::io::Error },
    #[error("plan is not valid TOML: {0}")]
    Toml(String),
    #[error("{0}")]
    Invalid(String),
}

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

/// How the capturers' output is counted: from their file, or their own summary on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    File,
    Stderr,
}

/// A method defined by the plan: `[methods.NAME] command = "tcpdump -i {if} -w {out}"`.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomMethod {
    /// Shell command; placeholders {if} {out} {cpu} {buffer_kib} {buffer_mib} {snaplen} {filter} {ringcap}.
    pub command: String,
    /// A line the tool prints once it captures (empty: only wait for its packet socket).
    pub ready: String,
    pub count: Count,
    /// Output file extension.
    pub ext: String,
}

/// One factor and its levels, as written in the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Factor {
    pub name: String,
    pub levels: Vec<String>,
}

/// The `[anova]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct AnovaSpec {
    pub response: String,
    pub factors: Vec<String>,
    pub log: bool,
}

/// The `[search]` section: bisect the plan's rate factor for the max loss-free rate of every other point.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchSpec {
    /// `rate_pps` or `rate_mbps` (the plan's varied rate factor).
    pub factor: String,
    /// Loss (fraction of generated packets) at or above which a run counts as lossy.
    pub loss: f64,
    /// Bisection runs per point.
    pub steps: u32,
}

/// The `[interface]` section: capture on a named interface, traffic from a generator command, instead of
/// the throwaway testbed (bench::bed).
#[derive(Clone, Debug, PartialEq)]
pub struct InterfaceSpec {
    /// The capture interface.
    pub capture: String,
    /// Its network namespace (None: the host's).
    pub netns: Option<String>,
    /// Shell command that sends the packets, with {ringcap} {packets} {rate} {dist} {cpu}.
    pub generator: String,
    /// Which count is the capture rate's denominator; the other is the cross-check.
    pub offered: OfferedBy,
}

/// Who counts the offered packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfferedBy {
    /// The capture interface's counters (packets that reached it, NIC drops included).
    Interface,
    /// The generator's report (`ringcap gen --json`'s packets).
    Generator,
}

impl InterfaceSpec {
    fn parse(t: &toml::Table) -> Result<InterfaceSpec, PlanError> {
        check_keys(
            t,
            &["capture", "netns", "generator", "offered"],
            "[interface]",
        )?;
        let capture = get_str(t, "capture", "interface")?.ok_or_else(|| {
            invalid("[interface] needs capture = \"IF\": the interface the capturers listen on")
        })?;
        let generator = get_str(t, "generator", "interface")?.ok_or_else(|| {
            invalid(
                "[interface] needs generator = \"...\": the command that sends the packets, e.g. \
                 \"ssh gen1 ringcap gen -i eth1 -n {packets} {rate} --dist {dist} --json -q\"",
            )
        })?;
        if !generator.contains("{packets}") {
            return Err(invalid(
                "[interface] generator must send {packets} packets (the run's count): put {packets} in the command",
            ));
        }
        let offered = match get_str(t, "offered", "interface")?.as_deref() {
            None | Some("interface") => OfferedBy::Interface,
            Some("generator") => OfferedBy::Generator,
            Some(o) => {
                return Err(invalid(format!(
                    "[interface] offered = \"{o}\": expected \"interface\" (its counters) or \"generator\" (its --json report)"
                )))
            }
        };
        Ok(InterfaceSpec {
            capture,
            netns: get_str(t, "netns", "interface")?.filter(|n| !n.is_empty()),
            generator,
            offered,
        })
    }
}

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
/// run's rate, `off_s` idle, for `cycles` periods. The generator starts on a wall-clock multiple of the
/// period, so a time stamp's phase in the cycle is its wall-clock time modulo the period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Burst {
    pub on_s: f64,
    pub off_s: f64,
    pub cycles: u32,
}

impl Burst {
    pub fn period_s(&self) -> f64 {
        self.on_s + self.off_s
    }
    /// `ringcap gen --burst` of this schedule.
    pub fn gen_arg(&self) -> String {
        format!("on={}ms,off={}ms", ms(self.on_s), ms(self.off_s))
    }
}

fn ms(s: f64) -> u64 {
    (s * 1000.0).round() as u64
}

/// `on=2s,off=2s,cycles=5` (cycles default 5; times in s or ms).
fn parse_burst(level: &str) -> Result<Option<Burst>, String> {
    if level == "none" {
        return Ok(None);
    }
    let usage = || {
        format!("burst = `{level}`: expected \"none\" or \"on=T,off=T[,cycles=N]\" with T like 2s or 500ms")
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
        }
    }
}

/// One measurement: a point (a combination of levels) and which rerun of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// 0-based position in the expansion.
    pub index: usize,
    /// 0-based rerun of the point.
    pub rerun: u32,
    /// Stable key of the levels, e.g. `method=tcpdump;rate_mbps=400`.
    pub point: String,
    /// (factor, level as written), in plan order.
    pub levels: Vec<(String, String)>,
    pub setup: Setup,
}

/// What the command line changes: `--quick`, `--reruns`, `--packets`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    pub quick: bool,
    pub reruns: Option<u32>,
    pub packets: Option<u64>,
    /// `--machine LABEL`: the results.csv `machine` column (default: the plan's, else the host name).
    pub machine: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Quick {
    reruns: Option<u32>,
    packets: Option<u64>,
    warmup_packets: Option<u64>,
    search_steps: Option<u32>,
    factors: Vec<Factor>,
}

/// A parsed, validated plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub title: String,
    pub description: String,
    /// The plan file's exact text (copied to the output directory).
    pub source: String,
    /// Directory the plan was read from: `filter = "file:..."` paths are relative to it.
    pub dir: PathBuf,
    /// The plan file (empty when parsed from text).
    pub path: PathBuf,
    pub reruns: u32,
    pub packets: u64,
    /// Packets sent (at the run's rate) after the capturers are ready and before the measured phase.
    pub warmup_packets: u64,
    /// Where `output = "disk"` files go (must not be tmpfs).
    pub disk_dir: PathBuf,
    /// Keep the capture files after counting them (default: delete each run's files).
    pub keep_files: bool,
    /// `[run] machine`: label of the machine in results.csv (None: the host name).
    pub machine: Option<String>,
    /// Factors fixed in `[run]` (name, level).
    pub fixed: Vec<(String, String)>,
    pub factors: Vec<Factor>,
    pub methods: BTreeMap<String, CustomMethod>,
    pub anova: Option<AnovaSpec>,
    pub search: Option<SearchSpec>,
    /// Capture on a named interface instead of the throwaway testbed.
    pub interface: Option<InterfaceSpec>,
    quick: Option<Quick>,
    /// Filter levels resolved when the plan was read (file contents), so expansion never re-reads files.
    filters: BTreeMap<String, Option<String>>,
    /// The setup with the `[run]` settings applied (resolved in parse).
    base: Setup,
}

/// A level as written: numbers as TOML prints them, strings as they are.
fn level_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

fn get_u64(t: &toml::Table, key: &str, section: &str) -> Result<Option<u64>, PlanError> {
    match t.get(key) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as u64)),
        Some(v) => Err(invalid(format!(
            "[{section}] {key} = {v}: expected a whole number ≥ 0"
        ))),
    }
}

fn get_str(t: &toml::Table, key: &str, section: &str) -> Result<Option<String>, PlanError> {
    match t.get(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(invalid(format!(
            "[{section}] {key} = {v}: expected a string"
        ))),
    }
}

fn table<'a>(
    root: &'a toml::Table,
    key: &str,
    parent: &str,
) -> Result<Option<&'a toml::Table>, PlanError> {
    match root.get(key) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(invalid(format!(
            "{parent}{key} must be a table ([{parent}{key}])"
        ))),
    }
}

fn check_keys(t: &toml::Table, allowed: &[&str], section: &str) -> Result<(), PlanError> {
    for k in t.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(invalid(format!(
                "unknown key `{k}` in {section}; known keys: {}",
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}

fn parse_factors(t: &toml::Table, section: &str) -> Result<Vec<Factor>, PlanError> {
    let mut out = Vec::new();
    for (name, v) in t {
        if !FACTORS.contains(&name.as_str()) {
            return Err(invalid(format!(
                "unknown factor `{name}` in [{section}]; known factors: {}",
                FACTORS.join(", ")
            )));
        }
        let toml::Value::Array(items) = v else {
            return Err(invalid(format!(
                "[{section}] {name} must be a list of levels, e.g. {name} = [{}]",
                example_levels(name)
            )));
        };
        if items.is_empty() {
            return Err(invalid(format!(
                "[{section}] {name} has no levels: give at least one, e.g. {name} = [{}]",
                example_levels(name)
            )));
        }
        let mut levels = Vec::new();
        for item in items {
            let l = level_text(item).ok_or_else(|| {
                invalid(format!(
                    "[{section}] {name}: level {item} must be a string or a number"
                ))
            })?;
            if levels.contains(&l) {
                return Err(invalid(format!(
                    "[{section}] {name}: level `{l}` is listed twice"
                )));
            }
            levels.push(l);
        }
        out.push(Factor {
            name: name.clone(),
            levels,
        });
    }
    Ok(out)
}

fn example_levels(factor: &str) -> &'static str {
    match factor {
        "method" => "\"ringcap\", \"tcpdump\"",
        "rate_mbps" => "100, 400, \"max\"",
        "rate_pps" => "100000, \"max\"",
        "gap_ns" => "10000, 2000",
        "buffer_kib" => "1024, 65536",
        "filter" => "\"none\", \"file:filters/thesis-fig6.5.txt\"",
        "apps" => "1, 2, 4",
        "load" => "\"none\", \"memcpy:25\", \"gzip:3\"",
        "snaplen" => "0, 76",
        "placement" => "\"single\", \"dual\", \"split\", \"siblings\"",
        "dist" => "\"fixed:46\", \"imix\"",
        "output" => "\"disk\", \"null\"",
        "cpu_limit" => "\"none\", 50, 10",
        "burst" => "\"none\", \"on=2s,off=2s,cycles=5\"",
        _ => "...",
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

    /// Packets per second the generator is asked for (an estimate for `max` and size mixes).
    pub fn pps_estimate(&self) -> f64 {
        let frame = self
            .dist
            .strip_prefix("fixed:")
            .and_then(|n| n.parse::<f64>().ok())
            .map_or(400.0, |ip| (ip + 14.0).max(60.0));
        let pps = match self.rate {
            Rate::Max => MAX_PPS_ESTIMATE,
            Rate::Pps(p) => p,
            Rate::Mbps(m) => m * 1e6 / ((frame + 24.0) * 8.0),
            Rate::GapNs(g) => 1e9 / g,
        };
        pps.min(MAX_PPS_ESTIMATE)
    }
}

impl Plan {
    /// Read and validate a plan file.
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|err| PlanError::Read {
            path: path.to_path_buf(),
            err,
        })?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut plan = Plan::parse(&text, dir)?;
        plan.path = path.to_path_buf();
        Ok(plan)
    }

    /// Parse and validate a plan's text; `dir` is where relative filter files are looked up.
    pub fn parse(text: &str, dir: &Path) -> Result<Plan, PlanError> {
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| PlanError::Toml(e.to_string().trim_end().to_string()))?;
        check_keys(
            &root,
            &[
                "title",
                "description",
                "run",
                "factors",
                "quick",
                "report",
                "anova",
                "methods",
                "search",
                "interface",
            ],
            "the plan",
        )?;
        let title = get_str(&root, "title", "plan")?.unwrap_or_else(|| "Measurement plan".into());
        let description = get_str(&root, "description", "plan")?.unwrap_or_default();

        let empty = toml::Table::new();
        let run = table(&root, "run", "")?.unwrap_or(&empty);
        let mut run_keys = vec![
            "reruns",
            "packets",
            "warmup_packets",
            "disk_dir",
            "keep_files",
            "machine",
        ];
        run_keys.extend(FACTORS);
        check_keys(run, &run_keys, "[run]")?;
        let reruns = get_u64(run, "reruns", "run")?.unwrap_or(7);
        let packets = get_u64(run, "packets", "run")?.unwrap_or(1_000_000);
        let warmup_packets = get_u64(run, "warmup_packets", "run")?.unwrap_or(10_000);
        let disk_dir = get_str(run, "disk_dir", "run")?
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp/ringcap-bench"));
        let keep_files = match run.get("keep_files") {
            None => false,
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err(invalid("[run] keep_files must be true or false")),
        };
        let machine = get_str(run, "machine", "run")?.filter(|m| !m.trim().is_empty());
        let mut fixed = Vec::new();
        for (k, v) in run {
            if FACTORS.contains(&k.as_str()) {
                let l = level_text(v).ok_or_else(|| {
                    invalid(format!("[run] {k} = {v}: expected a string or a number"))
                })?;
                fixed.push((k.clone(), l));
            }
        }

        let factors = match table(&root, "factors", "")? {
            Some(t) => parse_factors(t, "factors")?,
            None => Vec::new(),
        };

        let mut methods = BTreeMap::new();
        if let Some(t) = table(&root, "methods", "")? {
            for (name, v) in t {
                let toml::Value::Table(m) = v else {
                    return Err(invalid(format!(
                        "[methods] {name} must be a table: [methods.\"{name}\"] command = \"...\""
                    )));
                };
                let sec = format!("[methods.\"{name}\"]");
                check_keys(m, &["command", "ready", "count", "ext"], &sec)?;
                let command = get_str(m, "command", &sec)?.ok_or_else(|| {
                    invalid(format!(
                        "{sec} needs command = \"...\", e.g. \"tcpdump -i {{if}} -w {{out}}\""
                    ))
                })?;
                let count = match get_str(m, "count", &sec)?.as_deref() {
                    None | Some("file") => Count::File,
                    Some("stderr") => Count::Stderr,
                    Some(o) => {
                        return Err(invalid(format!(
                            "{sec} count = \"{o}\": expected \"file\" or \"stderr\""
                        )))
                    }
                };
                methods.insert(
                    name.clone(),
                    CustomMethod {
                        command,
                        ready: get_str(m, "ready", &sec)?.unwrap_or_default(),
                        count,
                        ext: get_str(m, "ext", &sec)?.unwrap_or_else(|| "pcap".into()),
                    },
                );
            }
        }

        let quick = match table(&root, "quick", "")? {
            None => None,
            Some(q) => {
                check_keys(
                    q,
                    &[
                        "reruns",
                        "packets",
                        "warmup_packets",
                        "search_steps",
                        "factors",
                    ],
                    "[quick]",
                )?;
                let qf = match table(q, "factors", "quick.")? {
                    Some(t) => parse_factors(t, "quick.factors")?,
                    None => Vec::new(),
                };
                for f in &qf {
                    if !factors.iter().any(|p| p.name == f.name) {
                        return Err(invalid(format!(
                            "[quick.factors] {} is not a factor of the plan's [factors]; --quick can only change the levels of existing factors",
                            f.name
                        )));
                    }
                }
                Some(Quick {
                    reruns: get_u64(q, "reruns", "quick")?.map(|v| v as u32),
                    packets: get_u64(q, "packets", "quick")?,
                    warmup_packets: get_u64(q, "warmup_packets", "quick")?,
                    search_steps: get_u64(q, "search_steps", "quick")?.map(|v| v as u32),
                    factors: qf,
                })
            }
        };

        let anova = match table(&root, "anova", "")? {
            None => None,
            Some(a) => {
                let response =
                    get_str(a, "response", "anova")?.unwrap_or_else(|| "capture_rate".into());
                let names: Vec<String> = match a.get("factors") {
                    None => factors.iter().map(|f| f.name.clone()).collect(),
                    Some(toml::Value::Array(v)) => v
                        .iter()
                        .map(|x| x.as_str().map(str::to_string))
                        .collect::<Option<_>>()
                        .ok_or_else(|| invalid("[anova] factors must be a list of factor names"))?,
                    Some(_) => {
                        return Err(invalid("[anova] factors must be a list of factor names"))
                    }
                };
                for n in &names {
                    if !factors.iter().any(|f| &f.name == n) {
                        return Err(invalid(format!(
                            "[anova] factor `{n}` is not varied in [factors]; ANOVA needs factors with levels"
                        )));
                    }
                }
                let log = match a.get("log") {
                    None => false,
                    Some(toml::Value::Boolean(b)) => *b,
                    Some(_) => return Err(invalid("[anova] log must be true or false")),
                };
                Some(AnovaSpec {
                    response,
                    factors: names,
                    log,
                })
            }
        };

        let search = match table(&root, "search", "")? {
            None => None,
            Some(t) => {
                check_keys(t, &["loss", "steps"], "[search]")?;
                let loss = match t.get("loss") {
                    None => 0.001,
                    Some(v) => v
                        .as_float()
                        .or(v.as_integer().map(|i| i as f64))
                        .filter(|l| *l > 0.0 && *l < 1.0)
                        .ok_or_else(|| {
                            invalid("[search] loss must be a fraction between 0 and 1, e.g. 0.001 (0.1 %)")
                        })?,
                };
                let steps = get_u64(t, "steps", "search")?.unwrap_or(5);
                if !(1..=12).contains(&steps) {
                    return Err(invalid(
                        "[search] steps must be from 1 to 12 (each is one run per point)",
                    ));
                }
                let factor = ["rate_pps", "rate_mbps"]
                    .into_iter()
                    .find(|r| factors.iter().any(|f| f.name == *r))
                    .ok_or_else(|| {
                        invalid(
                            "[search] bisects the rate: vary rate_pps or rate_mbps in [factors]",
                        )
                    })?;
                Some(SearchSpec {
                    factor: factor.into(),
                    loss,
                    steps: steps as u32,
                })
            }
        };

        let interface = table(&root, "interface", "")?
            .map(InterfaceSpec::parse)
            .transpose()?;

        let plan = Plan {
            title,
            description,
            source: text.to_string(),
            dir: dir.to_path_buf(),
            path: PathBuf::new(),
            reruns: reruns as u32,
            packets,
            warmup_packets,
            disk_dir,
            keep_files,
            machine,
            fixed,
            factors,
            methods,
            anova,
            search,
            interface,
            quick,
            filters: BTreeMap::new(),
            base: Setup::default(),
        };
        let mut plan = plan;
        plan.validate()?;
        Ok(plan)
    }

    /// Check every level of every factor (and the fixed ones) and the combination rules.
    fn validate(&mut self) -> Result<(), PlanError> {
        if self.reruns == 0 {
            return Err(invalid("[run] reruns = 0: at least 1 rerun is needed"));
        }
        if self.packets < 1000 {
            return Err(invalid(format!(
                "[run] packets = {}: use at least 1000 packets per run",
                self.packets
            )));
        }
        let mut base = Setup::default();
        for (k, v) in &self.fixed {
            base.apply(k, v, &self.dir, &self.methods)
                .map_err(|e| invalid(format!("[run] {e}")))?;
        }
        self.base = base.clone();
        let mut all = self.factors.clone();
        if let Some(q) = &self.quick {
            all.extend(q.factors.iter().cloned());
        }
        for f in &all {
            for l in &f.levels {
                let mut s = base.clone();
                s.apply(&f.name, l, &self.dir, &self.methods)
                    .map_err(|e| invalid(format!("[factors] {e}")))?;
                if f.name == "filter" {
                    self.filters.insert(l.clone(), s.filter);
                }
            }
        }
        let rates: Vec<&str> = ["rate_mbps", "rate_pps", "gap_ns"]
            .into_iter()
            .filter(|r| {
                self.factors.iter().any(|f| f.name == *r) || self.fixed.iter().any(|f| f.0 == *r)
            })
            .collect();
        if rates.len() > 1 {
            return Err(invalid(format!(
                "the plan sets {}: use only one of rate_mbps, rate_pps, gap_ns",
                rates.join(" and ")
            )));
        }
        for f in &self.factors {
            if self.fixed.iter().any(|(k, _)| k == &f.name) {
                return Err(invalid(format!(
                    "{} is both fixed in [run] and varied in [factors]: keep one",
                    f.name
                )));
            }
        }
        Ok(())
    }

    /// The plan as `--quick` and `--reruns`/`--packets` change it.
    pub fn with_overrides(&self, o: &Overrides) -> Plan {
        let mut p = self.clone();
        if o.quick {
            if let Some(q) = &self.quick {
                p.reruns = q.reruns.unwrap_or(p.reruns);
                p.packets = q.packets.unwrap_or(p.packets);
                p.warmup_packets = q.warmup_packets.unwrap_or(p.warmup_packets);
                if let (Some(s), Some(n)) = (p.search.as_mut(), q.search_steps) {
                    s.steps = n.clamp(1, 12);
                }
                for qf in &q.factors {
                    if let Some(f) = p.factors.iter_mut().find(|f| f.name == qf.name) {
                        f.levels = qf.levels.clone();
                    }
                }
            }
        }
        if let Some(r) = o.reruns {
            p.reruns = r.max(1);
        }
        if let Some(n) = o.packets {
            p.packets = n;
        }
        if let Some(m) = o.machine.as_ref().filter(|m| !m.trim().is_empty()) {
            p.machine = Some(m.clone());
        }
        p.quick = None;
        p
    }

    /// Every run in order: rerun 0 of all points, then rerun 1, ...; points in plan order (the first factor
    /// changes slowest).
    pub fn expand(&self) -> Vec<Run> {
        let base = self.base.clone();
        let mut points: Vec<Vec<(String, String)>> = vec![Vec::new()];
        for f in &self.factors {
            let mut next = Vec::with_capacity(points.len() * f.levels.len());
            for p in &points {
                for l in &f.levels {
                    let mut q = p.clone();
                    q.push((f.name.clone(), l.clone()));
                    next.push(q);
                }
            }
            points = next;
        }
        let mut runs = Vec::new();
        for rerun in 0..self.reruns {
            for levels in &points {
                let mut setup = base.clone();
                for (k, v) in levels {
                    if k == "filter" {
                        // Resolved (and validated) in parse.
                        setup.filter = self.filters.get(v).cloned().flatten();
                    } else {
                        // Validated in parse; applying a valid level cannot fail.
                        let _ = setup.apply(k, v, &self.dir, &self.methods);
                    }
                }
                runs.push(Run {
                    index: runs.len(),
                    rerun,
                    point: point_key(levels),
                    levels: levels.clone(),
                    setup,
                });
            }
        }
        runs
    }

    /// The results.csv `machine` of this plan's runs: the label given, else the host name.
    pub fn machine_label(&self) -> String {
        self.machine.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "unknown".into())
        })
    }

    /// Rough wall time of the given runs in seconds (fixed overhead per run plus sending time).
    pub fn estimate_seconds(&self, runs: &[Run]) -> f64 {
        runs.iter()
            .map(|r| {
                let send = match r.setup.burst {
                    // A burst run lasts its cycles (or ends earlier at `packets`).
                    Some(b) => (b.cycles as f64 * b.period_s() + b.period_s())
                        .min(self.packets as f64 / r.setup.pps_estimate() * b.period_s() / b.on_s),
                    None => self.packets as f64 / r.setup.pps_estimate(),
                };
                RUN_OVERHEAD_S + send + self.warmup_packets as f64 / r.setup.pps_estimate()
            })
            .sum()
    }
}

/// `method=tcpdump;rate_mbps=400` (plan order; `all` when the plan varies nothing).
pub fn point_key(levels: &[(String, String)]) -> String {
    if levels.is_empty() {
        return "all".into();
    }
    levels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
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

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
title = "t"
[run]
reruns = 3
packets = 5000
placement = "single"
[factors]
method = ["ringcap", "tcpdump|gzip -1"]
rate_mbps = [100, "max"]
[quick]
reruns = 1
packets = 2000
[quick.factors]
rate_mbps = ["max"]
"#;

    fn parse(text: &str) -> Result<Plan, PlanError> {
        Plan::parse(text, Path::new("."))
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn expansion_interleaves_reruns_in_plan_order() {
        let p = parse(BASE).unwrap();
        let runs = p.expand();
        assert_eq!(runs.len(), 3 * 2 * 2);
        let keys: Vec<(u32, &str)> = runs.iter().map(|r| (r.rerun, r.point.as_str())).collect();
        let points = [
            "method=ringcap;rate_mbps=100",
            "method=ringcap;rate_mbps=max",
            "method=tcpdump|gzip -1;rate_mbps=100",
            "method=tcpdump|gzip -1;rate_mbps=max",
        ];
        for (i, (rerun, point)) in keys.iter().enumerate() {
            assert_eq!(*rerun as usize, i / 4, "run {i}");
            assert_eq!(*point, points[i % 4], "run {i}");
            assert_eq!(runs[i].index, i);
        }
        // Levels resolve into the setup; [run] fixes placement for every run.
        assert_eq!(runs[0].setup.rate, Rate::Mbps(100.0));
        assert_eq!(runs[1].setup.rate, Rate::Max);
        assert_eq!(runs[2].setup.method, "tcpdump|gzip -1");
        assert!(runs.iter().all(|r| r.setup.placement == Placement::Single));
        assert_eq!(
            runs[3].levels,
            vec![
                ("method".to_string(), "tcpdump|gzip -1".to_string()),
                ("rate_mbps".to_string(), "max".to_string())
            ]
        );
    }

    #[test]
    fn quick_and_command_line_overrides() {
        let p = parse(BASE).unwrap();
        let q = p.with_overrides(&Overrides {
            quick: true,
            ..Default::default()
        });
        assert_eq!((q.reruns, q.packets), (1, 2000));
        let runs = q.expand();
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|r| r.setup.rate == Rate::Max));
        let o = p.with_overrides(&Overrides {
            quick: true,
            reruns: Some(4),
            packets: Some(30_000),
            machine: Some("lab-2".into()),
        });
        assert_eq!(o.machine.as_deref(), Some("lab-2"));
        assert_eq!((o.reruns, o.packets), (4, 30_000));
        assert_eq!(o.expand().len(), 8);
        // Without --quick the [quick] section changes nothing.
        assert_eq!(p.with_overrides(&Overrides::default()).expand().len(), 12);
    }

    #[test]
    fn defaults_and_factor_order_kept() {
        let p = parse("[factors]\nrate_pps = [1000]\nmethod = [\"dumpcap\"]\n").unwrap();
        assert_eq!(
            (p.reruns, p.packets, p.warmup_packets),
            (7, 1_000_000, 10_000)
        );
        let runs = p.expand();
        assert_eq!(runs[0].point, "rate_pps=1000;method=dumpcap");
        let s = &runs[0].setup;
        assert_eq!(
            (s.placement, s.output, s.apps),
            (Placement::Dual, Output::Disk, 1)
        );
        assert_eq!(s.dist, "fixed:46");
        assert_eq!(parse("").unwrap().expand()[0].point, "all");
    }

    #[test]
    fn interface_section() {
        let p = parse(
            "[interface]\ncapture = \"eth1\"\ngenerator = \"ssh g {ringcap} gen -n {packets} {rate}\"\n",
        )
        .unwrap();
        let i = p.interface.unwrap();
        assert_eq!(
            (i.capture.as_str(), i.netns, i.offered),
            ("eth1", None, OfferedBy::Interface)
        );
        let e = err("[interface]\ngenerator = \"x {packets}\"\n");
        assert!(e.contains("needs capture"), "{e}");
        let e = err("[interface]\ncapture = \"eth1\"\n");
        assert!(
            e.contains("needs generator") && e.contains("{packets}"),
            "{e}"
        );
        let e = err("[interface]\ncapture = \"eth1\"\ngenerator = \"gen -n 5\"\n");
        assert!(e.contains("put {packets} in the command"), "{e}");
        let e = err("[interface]\ncapture = \"e\"\ngenerator = \"{packets}\"\noffered = \"nic\"\n");
        assert!(e.contains("expected \"interface\""), "{e}");
        let e = err("[interface]\ncapture = \"e\"\ngenerator = \"{packets}\"\nhost = \"x\"\n");
        assert!(e.contains("host"), "{e}");
    }

    #[test]
    fn clear_errors() {
        let e = err("[factors]\nspeed = [1]\n");
        assert!(
            e.contains("unknown factor `speed`") && e.contains("rate_mbps"),
            "{e}"
        );
        let e = err("[factors]\nmethod = [\"pcapture\"]\n");
        assert!(
            e.contains("unknown method `pcapture`") && e.contains("netsniff-ng"),
            "{e}"
        );
        let e = err("[factors]\nmethod = []\n");
        assert!(e.contains("method has no levels"), "{e}");
        let e = err("[factors]\nrate_mbps = [\"fast\"]\n");
        assert!(e.contains("expected a number or \"max\""), "{e}");
        let e = err("[factors]\nrate_mbps = [100]\ngap_ns = [10]\n");
        assert!(e.contains("only one of"), "{e}");
        let e = err("[factors]\nload = [\"memcpy\"]\n");
        assert!(e.contains("memcpy:N"), "{e}");
        let e = err("[factors]\nmethod = [\"tcpdump|gzip -12\"]\n");
        assert!(e.contains("unknown method"), "{e}");
        let e = err("[run]\nrerun = 3\n");
        assert!(e.contains("unknown key `rerun`"), "{e}");
        let e = err("[factors]\napps = [1,2]\n[quick.factors]\nmethod = [\"tcpdump\"]\n");
        assert!(e.contains("not a factor of the plan"), "{e}");
        let e = err("[factors]\napps = [1,2]\n[anova]\nfactors = [\"method\"]\n");
        assert!(e.contains("`method` is not varied"), "{e}");
        let e = err("[factors]\nfilter = [\"file:no/such/file.txt\"]\n");
        assert!(e.contains("cannot read"), "{e}");
        let e = err("[factors\n");
        assert!(e.contains("not valid TOML"), "{e}");
        let e = err("[run]\napps = 2\n[factors]\napps = [1]\n");
        assert!(e.contains("both fixed"), "{e}");
    }

    #[test]
    fn custom_methods_and_filter_files() {
        let dir = std::env::temp_dir().join(format!("ringcap-plan-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("f")).unwrap();
        std::fs::write(dir.join("f/x.txt"), "udp\n  and not port 53\n").unwrap();
        let text = r#"
[methods.mydump]
command = "tcpdump -i {if} -w {out}"
ready = "listening on"
[factors]
method = ["mydump", "ringcap"]
filter = ["none", "file:f/x.txt", "tcp"]
"#;
        let p = Plan::parse(text, &dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(p.methods["mydump"].count, Count::File);
        let runs = p.expand();
        assert_eq!(runs.len(), 7 * 6);
        assert_eq!(runs[0].setup.filter, None);
        assert_eq!(runs[1].setup.filter.as_deref(), Some("udp and not port 53"));
        assert_eq!(runs[1].point, "method=mydump;filter=file:f/x.txt");
        assert_eq!(runs[2].setup.filter.as_deref(), Some("tcp"));
    }

    #[test]
    fn shipped_plans_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "toml") {
                let p = Plan::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let quick = p.with_overrides(&Overrides {
                    quick: true,
                    ..Default::default()
                });
                assert!(
                    quick.expand().len() < p.expand().len(),
                    "{}",
                    path.display()
                );
                n += 1;
            }
        }
        assert!(n >= 6, "{n} plans in {}", dir.display());
    }

    #[test]
    fn burst_levels() {
        let p = parse(
            "[factors]\nburst = [\"none\", \"on=2s,off=500ms\", \"on=1s,off=1s,cycles=3\"]\n",
        )
        .unwrap();
        let runs = p.expand();
        assert_eq!(runs[0].setup.burst, None);
        let b = runs[1].setup.burst.unwrap();
        assert_eq!(
            (b.on_s, b.off_s, b.cycles, b.period_s()),
            (2.0, 0.5, 5, 2.5)
        );
        assert_eq!(b.gen_arg(), "on=2000ms,off=500ms");
        assert_eq!(runs[2].setup.burst.unwrap().cycles, 3);
        for bad in [
            "on=2s",
            "on=2,off=1s",
            "on=0s,off=1s",
            "on=1s,off=1s,cycles=0",
            "fast",
        ] {
            let e = err(&format!("[factors]\nburst = [\"{bad}\"]\n"));
            assert!(e.contains("on=T,off=T"), "{bad}: {e}");
        }
    }

    #[test]
    fn pipe_methods() {
        assert_eq!(pipe_method("tcpdump|gzip -1"), Some(1));
        assert_eq!(pipe_method("tcpdump | gzip -9"), Some(9));
        assert_eq!(pipe_method("tcpdump|zstd -3"), None);
        assert_eq!(pipe_method("tcpdump|gzip"), None);
        assert_eq!(pipe_method("dumpcap|gzip -1"), None);
    }

    #[test]
    fn estimate_counts_overhead_and_sending_time() {
        let p = parse(
            "[run]\npackets = 100000\nwarmup_packets = 0\n[factors]\nrate_pps = [50000, 100000]\n",
        )
        .unwrap();
        let runs = p.expand();
        let est = p.estimate_seconds(&runs[..2]);
        assert!(
            (est - (2.0 * RUN_OVERHEAD_S + 2.0 + 1.0)).abs() < 1e-9,
            "{est}"
        );
    }
}
