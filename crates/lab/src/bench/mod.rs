//! The bench runner: run every run of a plan through the measurement cycle and write the output directory
//! (bench-contract.md): `plan.toml`, `meta.json`, `cpusage/<run>.txt`, logs of failed runs in `logs/`, and the
//! results through the [`export`]ers: `results.csv`, `results.parquet` and the report.

pub mod bed;
pub mod cycle;
pub mod disk;
pub mod export;
pub mod methods;
pub mod process;
pub mod results;
pub mod samples;
pub mod search;
pub mod timeline;
pub mod traffic;

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use crate::plan::{Output, Overrides, Placement, Plan, Run};
use crate::report::{ReportError, ReportSummary};
use bed::Bed;
use export::Exporter;
pub use results::Row;

/// How to run a plan.
pub struct Options<'a> {
    /// Output directory.
    pub out: PathBuf,
    /// The ringcap binary (capture and gen).
    pub ringcap: PathBuf,
    /// Continue a plan whose results.csv already has runs.
    pub resume: bool,
    /// `--quick`, `--reruns`, `--packets` (recorded in meta.json: a resume must use the same).
    pub overrides: Overrides,
    /// Set by Ctrl-C: the run in flight is abandoned, finished runs stay in results.csv.
    pub stop: &'a AtomicBool,
}

/// A method that is not run, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    pub method: String,
    pub reason: String,
}

/// Runs of a factor level that cannot be done on this machine (placement = "siblings" without SMT).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SkippedLevel {
    /// `factor=level`.
    pub level: String,
    pub runs: usize,
    pub reason: String,
}

/// Levels of the plan's runs this machine cannot do, with the reason and how many runs each leaves out.
pub fn skipped_levels(runs: &[Run]) -> Vec<SkippedLevel> {
    let mut out: Vec<SkippedLevel> = Vec::new();
    for r in runs {
        let Some(reason) = r.setup.placement.unavailable() else {
            continue;
        };
        let level = r
            .levels
            .iter()
            .find(|(f, _)| f == "placement")
            .map_or("placement=siblings".into(), |(f, l)| format!("{f}={l}"));
        match out.iter_mut().find(|s| s.level == level) {
            Some(s) => s.runs += 1,
            None => out.push(SkippedLevel {
                level,
                runs: 1,
                reason,
            }),
        }
    }
    out
}

/// What the runner tells its caller (progress bar, `-v` lines).
pub enum Event<'a> {
    /// Before the first run: runs to do now, runs already done (resume), estimated seconds.
    Start {
        todo: usize,
        done: usize,
        estimate_s: f64,
    },
    /// A method is left out.
    Skip(&'a Skipped),
    /// The runs of a factor level this machine cannot do are left out (also in meta.json).
    SkipLevel(&'a SkippedLevel),
    RunStarted(&'a Run),
    RunFinished {
        run: &'a Run,
        rows: &'a [Row],
        seconds: f64,
    },
}

/// How a plan ended.
#[derive(Debug)]
pub struct Outcome {
    pub runs_done: usize,
    pub runs_failed: usize,
    pub skipped: Vec<Skipped>,
    pub interrupted: bool,
    /// The report, written when the plan was not interrupted.
    pub report: Option<ReportSummary>,
    /// The max loss-free rate per point (plans with `[search]`), also in search.json.
    pub search: Vec<search::Found>,
}

/// Why a plan could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Refused(String),
    #[error("{what}: {err}")]
    Io { what: String, err: io::Error },
    #[error("{0}")]
    Report(ReportError),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> BenchError {
    let what = what.into();
    move |err| BenchError::Io { what, err }
}

/// Methods of the plan that cannot run here (not installed), each with the reason.
pub fn skipped_methods(plan: &Plan, ringcap: &Path) -> Vec<Skipped> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for r in plan.expand() {
        if seen.insert(r.setup.method.clone()) {
            if let Err(reason) = methods::available(&r.setup.method, plan, ringcap) {
                out.push(Skipped {
                    method: r.setup.method.clone(),
                    reason,
                });
            }
        }
    }
    out
}

fn now_rfc3339() -> String {
    // `date` keeps this free of a time crate; the runner is Linux-only anyway.
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Refuse a disk directory on tmpfs: page allocation in memory is not the cost of writing to a disk.
fn check_disk_dir(dir: &Path) -> Result<(), BenchError> {
    fs::create_dir_all(dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| BenchError::Refused("disk_dir contains a NUL byte".into()))?;
    // SAFETY: statfs into a zeroed struct with a valid path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0 {
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        const RAMFS_MAGIC: i64 = 0x8584_58f6;
        let t = st.f_type as i64;
        if t == TMPFS_MAGIC || t == RAMFS_MAGIC {
            return Err(BenchError::Refused(format!(
                "{} is in memory (tmpfs), not on a disk: set [run] disk_dir to a directory on a real disk",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// The bed of the runs: the plan's named interface, or a testbed made for the run's placement (RPS is set
/// when it comes up), remade when the placement changes.
struct Beds<'a> {
    spec: Option<&'a crate::plan::InterfaceSpec>,
    current: Option<(Placement, Bed)>,
}

impl Beds<'_> {
    fn for_placement(&mut self, placement: Placement) -> Result<&Bed, BenchError> {
        if !matches!(&self.current, Some((p, b)) if b.fits(placement, *p)) {
            // Remove the old namespaces before making new ones.
            drop(self.current.take());
            let bed = Bed::new(self.spec, placement).map_err(|e| match self.spec {
                Some(_) => BenchError::Refused(e.to_string()),
                None => BenchError::Io {
                    what: "cannot set up the testbed (needs root, iproute2)".into(),
                    err: e,
                },
            })?;
            self.current = Some((placement, bed));
        }
        Ok(&self.current.as_ref().expect("set above").1)
    }
}

/// Run a plan (already with its overrides applied) into `opts.out`.
pub fn run(plan: &Plan, opts: &Options, mut on: impl FnMut(Event)) -> Result<Outcome, BenchError> {
    let dir = &opts.out;
    fs::create_dir_all(dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    let csv = dir.join("results.csv");
    let plan_copy = dir.join("plan.toml");
    let meta_path = dir.join("meta.json");
    let factors: Vec<String> = plan.factors.iter().map(|f| f.name.clone()).collect();
    let overrides = serde_json::json!({
        "quick": opts.overrides.quick,
        "reruns": opts.overrides.reruns,
        "packets": opts.overrides.packets,
        "machine": opts.overrides.machine,
    });

    let mut meta = serde_json::json!({});
    let done: BTreeSet<usize> = if csv.exists() {
        if !opts.resume {
            return Err(BenchError::Refused(format!(
                "{} already has results: add --resume to continue that plan, or choose another --out",
                dir.display()
            )));
        }
        let old = fs::read_to_string(&plan_copy).unwrap_or_default();
        if old != plan.source {
            return Err(BenchError::Refused(format!(
                "{} holds a different plan than the one given: --resume only continues the same plan file (compare them, or choose another --out)",
                plan_copy.display()
            )));
        }
        meta = fs::read_to_string(&meta_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(meta);
        if let Some(old) = meta.get("overrides") {
            if old != &overrides {
                return Err(BenchError::Refused(format!(
                    "the plan in {} was started with {old}, now {overrides}: --resume needs the same --quick/--reruns/--packets/--machine",
                    dir.display()
                )));
            }
        }
        results::finished_runs(&csv, &factors).map_err(io_err("cannot resume"))?
    } else {
        BTreeSet::new()
    };

    let runs = plan.expand();
    let skipped = skipped_methods(plan, &opts.ringcap);
    let todo: Vec<&Run> = runs
        .iter()
        .filter(|r| !done.contains(&r.index))
        .filter(|r| !skipped.iter().any(|s| s.method == r.setup.method))
        .filter(|r| r.setup.placement.unavailable().is_none())
        .collect();
    let skipped_levels = skipped_levels(&runs);
    if todo.iter().any(|r| r.setup.output == Output::Disk) {
        check_disk_dir(&plan.disk_dir)?;
    }

    fs::write(&plan_copy, &plan.source).map_err(io_err("cannot write plan.toml"))?;
    results::create(&csv, &factors).map_err(io_err("cannot create results.csv"))?;
    if meta.get("started").is_none() {
        meta["started"] = now_rfc3339().into();
    }
    meta["plan"] = plan.path.to_string_lossy().into_owned().into();
    meta["title"] = plan.title.clone().into();
    meta["quick"] = opts.overrides.quick.into();
    meta["overrides"] = overrides;
    meta["finished"] = serde_json::Value::Null;
    meta["machine"] = serde_json::to_value(crate::machine::Machine::probe()).unwrap_or_default();
    meta["tools"] = serde_json::to_value(crate::machine::tool_versions()).unwrap_or_default();
    meta["skipped"] = serde_json::to_value(&skipped).unwrap_or_default();
    meta["skipped_levels"] = serde_json::to_value(&skipped_levels).unwrap_or_default();
    meta["reruns"] = plan.reruns.into();
    meta["packets"] = plan.packets.into();
    meta["warmup_packets"] = plan.warmup_packets.into();
    let write_meta = |m: &serde_json::Value| -> Result<(), BenchError> {
        let tmp = dir.join("meta.json.partial");
        fs::write(&tmp, serde_json::to_string_pretty(m).unwrap_or_default())
            .and_then(|_| fs::rename(&tmp, &meta_path))
            .map_err(io_err("cannot write meta.json"))
    };
    write_meta(&meta)?;

    for s in &skipped {
        on(Event::Skip(s));
    }
    for s in &skipped_levels {
        on(Event::SkipLevel(s));
    }
    let disk_json = dir.join("disk.json");
    if let (Some(spec), false) = (&plan.disk, disk_json.exists()) {
        // Before the runs, on a quiet machine: the disk's speed alone (a resumed plan keeps its first).
        check_disk_dir(&plan.disk_dir)?;
        let mut samples = Vec::new();
        for rerun in 0..plan.reruns {
            for &kib in &spec.block_kib {
                if opts.stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let s = disk::measure(&plan.disk_dir, kib, spec.write_mib << 20, rerun).map_err(
                    io_err(format!("cannot time writes to {}", plan.disk_dir.display())),
                )?;
                samples.push(s);
            }
        }
        let json = serde_json::json!({
            "disk_dir": plan.disk_dir,
            "write_mib": spec.write_mib,
            "samples": samples,
        });
        fs::write(
            &disk_json,
            serde_json::to_string_pretty(&json).unwrap_or_default(),
        )
        .map_err(io_err("cannot write disk.json"))?;
    }
    let todo_owned: Vec<Run> = todo.iter().map(|r| (*r).clone()).collect();
    // Bisection runs: one per step for every point of the other factors (one rerun's worth of points).
    let probes = plan.search.as_ref().map_or(0, |s| {
        let per_rate = plan
            .factors
            .iter()
            .find(|f| f.name == s.factor)
            .map_or(1, |f| f.levels.len());
        runs.len() / plan.reruns.max(1) as usize / per_rate * s.steps as usize
    });
    let mut estimate = plan.estimate_seconds(&todo_owned);
    if let Some(r) = todo_owned.first() {
        estimate += probes as f64 * plan.estimate_seconds(std::slice::from_ref(r));
    }
    on(Event::Start {
        todo: todo.len() + probes,
        done: done.len(),
        estimate_s: estimate,
    });

    let env = cycle::Env {
        plan,
        ringcap: &opts.ringcap,
        out_dir: dir,
        stop: opts.stop,
    };
    let mut beds = Beds {
        spec: plan.interface.as_ref(),
        current: None,
    };
    let mut nics_probed = false;
    let mut outcome = Outcome {
        runs_done: 0,
        runs_failed: 0,
        skipped: skipped.clone(),
        interrupted: false,
        report: None,
        search: Vec::new(),
    };
    let mut html = export::Html::default();
    let mut exporters: [&mut dyn Exporter; 3] = [&mut export::Csv, &mut export::Parquet, &mut html];
    for run in todo {
        on(Event::RunStarted(run));
        let t0 = Instant::now();
        let placement = run.setup.placement;
        let bed = beds.for_placement(placement)?;
        if !nics_probed {
            // The interfaces the runs use and their driver (veth here; a NIC on real hardware).
            nics_probed = true;
            meta["machine"] = serde_json::to_value(bed.describe(crate::machine::Machine::probe()))
                .unwrap_or_default();
            write_meta(&meta)?;
        }
        let rows = match cycle::run_once(bed, &env, run) {
            Ok(rows) => rows,
            Err(cycle::Interrupted) => {
                outcome.interrupted = true;
                break;
            }
        };
        for e in exporters.iter_mut() {
            e.run_finished(dir, &rows)?;
        }
        outcome.runs_done += 1;
        if rows.iter().any(|r| r.status != "ok") {
            outcome.runs_failed += 1;
        }
        on(Event::RunFinished {
            run,
            rows: &rows,
            seconds: t0.elapsed().as_secs_f64(),
        });
    }

    if let (Some(spec), false) = (&plan.search, outcome.interrupted) {
        let results = crate::report::read_results(&csv)
            .map_err(|e| BenchError::Refused(format!("cannot read results.csv back: {e}")))?;
        let all = crate::report::runs(&results, false);
        let mut next_index = runs.len();
        for (levels, clean, lossy_at) in
            search::brackets(&results.factors, &all, &spec.factor, spec.loss)
        {
            let key = crate::plan::point_key(&levels);
            // A run of this point to copy the setup from (the sweep's runs differ only in the rate).
            let Some(template) = runs.iter().find(|r| {
                levels
                    .iter()
                    .all(|(f, l)| r.levels.iter().any(|(g, m)| g == f && m == l))
            }) else {
                continue;
            };
            let mut found = search::Found {
                point: key,
                levels: levels.clone(),
                factor: spec.factor.clone(),
                max_loss_free: clean.map(|c| c.0),
                measured_pps: clean.and_then(|c| c.1),
                lossy_at,
                probes: Vec::new(),
                note: String::new(),
            };
            let Some(hi) = lossy_at else {
                found.note = match clean {
                    Some((r, _)) => format!(
                        "no loss anywhere in the sweep: the maximum is at least {} (the highest rate reached; the generator's limit here)",
                        search::rate_text(&spec.factor, r)
                    ),
                    None => "no loss-free run to report".into(),
                };
                outcome.search.push(found);
                continue;
            };
            let lo = clean.map_or(0.0, |c| c.0);
            let bed = beds.for_placement(template.setup.placement)?;
            let mut stopped = false;
            let bisected = search::bisect(
                lo,
                hi,
                spec.steps,
                |rate| {
                    let run = search::probe_run(template, &spec.factor, rate, next_index);
                    next_index += 1;
                    on(Event::RunStarted(&run));
                    let t0 = Instant::now();
                    let rows = cycle::run_once(bed, &env, &run)?;
                    on(Event::RunFinished {
                        run: &run,
                        rows: &rows,
                        seconds: t0.elapsed().as_secs_f64(),
                    });
                    let ok = rows.iter().all(|r| r.status == "ok");
                    let loss = ok
                        .then(|| {
                            rows.iter()
                                .filter_map(|r| r.capture_rate)
                                .map(|c| 1.0 - c)
                                .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))))
                        })
                        .flatten();
                    let measured_pps = rows.first().and_then(|r| r.pps);
                    let reached = rows.first().and_then(|r| {
                        if spec.factor == "rate_pps" {
                            r.pps
                        } else {
                            r.mbps
                        }
                    });
                    found.probes.push(search::Probe {
                        reached,
                        rate: match run.setup.rate {
                            crate::plan::Rate::Pps(v) | crate::plan::Rate::Mbps(v) => v,
                            _ => rate,
                        },
                        loss,
                        measured_pps,
                        status: rows
                            .iter()
                            .map(|r| r.status.as_str())
                            .find(|s| *s != "ok")
                            .unwrap_or("ok")
                            .to_string(),
                    });
                    Ok::<_, cycle::Interrupted>(loss)
                },
                spec.loss,
            )
            .map_err(|_| stopped = true);
            if stopped {
                outcome.interrupted = true;
                break;
            }
            if let Ok((_, _, complete)) = bisected {
                // The bracket in rates reached (measured), as the sweep's: the highest loss-free probe
                // and the lowest lossy one, or the sweep's bracket where no probe beat it.
                let rate = |p: &search::Probe| p.reached.unwrap_or(p.rate);
                for p in found.probes.iter().filter(|p| p.loss.is_some()) {
                    let lossy = p.loss.is_some_and(|l| l >= spec.loss);
                    if lossy && found.lossy_at.is_none_or(|h| rate(p) < h) {
                        found.lossy_at = Some(rate(p));
                    }
                    if !lossy && found.max_loss_free.is_none_or(|m| rate(p) > m) {
                        found.max_loss_free = Some(rate(p));
                        found.measured_pps = p.measured_pps;
                    }
                }
                found.note = if complete {
                    format!("bisected in {} runs", spec.steps)
                } else {
                    "a bisection run failed: the bracket is as far as it got".into()
                };
                if let (Some(clean), Some(lossy)) = (found.max_loss_free, found.lossy_at) {
                    if lossy < clean {
                        // Loss below a rate that ran clean: the capturer's share of the CPU changed between
                        // the runs (other work on the machine), so neither figure can be trusted alone.
                        found.note.push_str(&format!(
                            "; runs disagree: loss at {} below the loss-free {} (was the machine busy? rerun it quiet)",
                            search::rate_text(&spec.factor, lossy),
                            search::rate_text(&spec.factor, clean)
                        ));
                    }
                }
            }
            outcome.search.push(found);
        }
        let json = serde_json::to_string_pretty(&outcome.search).unwrap_or_default();
        fs::write(dir.join("search.json"), json).map_err(io_err("cannot write search.json"))?;
    }
    drop(beds);

    if !outcome.interrupted {
        // meta.json first: the report reads from it whether the plan is complete.
        meta["finished"] = now_rfc3339().into();
        write_meta(&meta)?;
        for e in exporters.iter_mut() {
            e.plan_finished(dir)?;
        }
        outcome.report = html.summary;
    }
    Ok(outcome)
}
