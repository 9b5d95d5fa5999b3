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

mod estimate;
mod interface;
mod parse;
mod setup;
#[cfg(test)]
mod tests;
mod traffic;
mod validate;

pub use interface::{InterfaceSpec, OfferedBy};
pub use setup::{method_known, pipe_method, Burst, Output, Placement, Rate, Setup};
pub use traffic::{SynthTraffic, Traffic};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The factors a plan may vary (or fix in `[run]`).
pub const FACTORS: [&str; 15] = [
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
    "traffic",
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

/// The `[disk]` section: before the runs, time raw writes to `disk_dir` (seed 000 Fig 6.13, bonnie++'s
/// block write) so the report can set the disk's speed against the capture's demand.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskSpec {
    /// Size of the file written per measurement, MiB.
    pub write_mib: u64,
    /// Block sizes of the writes, KiB (one measurement per size and rerun).
    pub block_kib: Vec<u64>,
}

/// Time-based runs (seed 004, Schultz): the generator sends for `warmup_s`, then `samples` samples of
/// `sample_s` seconds, each with its own offered and captured count (bench::samples), instead of a count of
/// packets. Set by `[run] samples` (with `sample_s`, default 10, and `warmup_s`, default 10).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    pub samples: u32,
    pub sample_s: f64,
    pub warmup_s: f64,
}

impl Sampling {
    /// How long the generator sends: warm-up, the samples, and half a second for its start-up.
    pub fn send_s(&self) -> f64 {
        self.warmup_s + self.samples as f64 * self.sample_s + 0.5
    }
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
    disk_write_mib: Option<u64>,
    samples: Option<u32>,
    sample_s: Option<f64>,
    warmup_s: Option<f64>,
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
    /// `[run] seed`: seed of the `traffic = "synth:..."` traces (same seed, same traces).
    pub seed: u64,
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
    pub disk: Option<DiskSpec>,
    /// Time-based runs (None: each run sends `packets`).
    pub sampling: Option<Sampling>,
    quick: Option<Quick>,
    /// Filter levels resolved when the plan was read (file contents), so expansion never re-reads files.
    filters: BTreeMap<String, Option<String>>,
    /// The setup with the `[run]` settings applied (resolved in parse).
    base: Setup,
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

    /// The plan as `--quick` and `--reruns`/`--packets` change it.
    pub fn with_overrides(&self, o: &Overrides) -> Plan {
        let mut p = self.clone();
        if o.quick {
            if let Some(q) = &self.quick {
                p.reruns = q.reruns.unwrap_or(p.reruns);
                p.packets = q.packets.unwrap_or(p.packets);
                p.warmup_packets = q.warmup_packets.unwrap_or(p.warmup_packets);
                if let Some(sp) = p.sampling.as_mut() {
                    sp.samples = q.samples.unwrap_or(sp.samples);
                    sp.sample_s = q.sample_s.unwrap_or(sp.sample_s);
                    sp.warmup_s = q.warmup_s.unwrap_or(sp.warmup_s);
                }
                if let (Some(d), Some(n)) = (p.disk.as_mut(), q.disk_write_mib) {
                    d.write_mib = n;
                }
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
