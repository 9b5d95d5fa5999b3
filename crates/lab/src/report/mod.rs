//! Reports of bench output directories (issue 5): from DIR/results.csv, DIR/plan.toml and DIR/meta.json
//! write DIR/summary.csv (per point: n, avg, min, max, median; eq. 6.2–6.4 of seed 000), the plots
//! (DIR/plots/*.svg + .png), the ANOVA of the plan's `[anova]` (DIR/anova.json, seed 004) and
//! DIR/report.html. Works on the partial results of an interrupted plan.

mod burst;
mod data;
mod disk;
mod figures;
mod html;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use data::{
    level_text, read_plan, read_results, runs, series_name, stats, summarize, summary_csv,
    summary_metrics, AnovaConfig, Meta, PlanInfo, PointSummary, ReportConfig, Results, Row,
    RunResult, Skipped, Stats,
};
pub use disk::{demand, Demand, HEADER_BYTES};
pub use figures::{Figure, Section};

use crate::anova::{self, Anova, AnovaOptions, Observation};

/// Why no report could be written. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0} has no results.csv; run `ringcap bench PLAN --out {0}` first (or give the right directory)")]
    NoResults(PathBuf),
    #[error("{}: {msg}", path.display())]
    Csv { path: PathBuf, msg: String },
    #[error("{}: not a plan this report can read: {msg}", path.display())]
    Plan { path: PathBuf, msg: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What [`write`] produced.
#[derive(Clone, Debug, Serialize)]
pub struct ReportSummary {
    pub dir: PathBuf,
    pub html: PathBuf,
    pub summary_csv: PathBuf,
    /// SVG files written (each with a PNG next to it when rsvg-convert is installed).
    pub plots: Vec<PathBuf>,
    pub anova_json: Option<PathBuf>,
    pub runs: usize,
    pub runs_ok: usize,
    pub runs_failed: usize,
    pub points: usize,
    /// False if meta.json says the plan has not finished (interrupted, or still running).
    pub complete: bool,
    /// Things a reader should know (unreadable lines, plots that could not be drawn, ANOVA not possible).
    pub warnings: Vec<String>,
}

/// The ANOVA of the plan's `[anova]`, or why it could not be computed.
#[derive(Clone, Debug)]
pub enum AnovaOutcome {
    Done { response: String, anova: Anova },
    NotPossible { response: String, reason: String },
}

/// Write summary.csv, plots/, anova.json (when the plan has `[anova]`) and report.html into `dir`.
pub fn write(dir: &Path) -> Result<ReportSummary, ReportError> {
    let results_path = dir.join("results.csv");
    if !results_path.is_file() {
        return Err(ReportError::NoResults(dir.to_path_buf()));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Io { path, source }
    };
    let results = read_results(&results_path)?;
    let mut warnings: Vec<String> = results
        .skipped_lines
        .iter()
        .map(|l| format!("results.csv {l}: ignored"))
        .collect();

    let plan_path = dir.join("plan.toml");
    let plan_text = std::fs::read_to_string(&plan_path).ok();
    let plan = match &plan_text {
        Some(t) => read_plan(t).map_err(|msg| ReportError::Plan {
            path: plan_path.clone(),
            msg,
        })?,
        None => {
            warnings.push("no plan.toml next to results.csv: title and plot layout guessed".into());
            PlanInfo::default()
        }
    };
    let meta_path = dir.join("meta.json");
    let meta: Meta = match std::fs::read_to_string(&meta_path) {
        Ok(t) => serde_json::from_str(&t).unwrap_or_else(|e| {
            warnings.push(format!(
                "meta.json is not readable ({e}): machine and tools not shown"
            ));
            Meta::default()
        }),
        Err(_) => {
            warnings.push("no meta.json: machine and tool versions unknown".into());
            Meta::default()
        }
    };

    let all_runs = sample_replications(dir, runs(&results, plan.report.multi_app));
    let metrics = summary_metrics(&all_runs);
    let summaries = summarize(&all_runs, &metrics);
    let summary_path = dir.join("summary.csv");
    std::fs::write(
        &summary_path,
        summary_csv(&results.factors, &summaries, &metrics),
    )
    .map_err(io(&summary_path))?;

    let layout = figures::layout(&results.factors, &all_runs, &plan.report, &mut warnings);
    // Fig 6.13 (the disk alone) reads before the runs' figures (6.14).
    let mut figs = disk::disk_figures(dir, &all_runs, &mut warnings);
    figs.extend(figures::line_figures(
        &results.factors,
        &all_runs,
        &layout,
        &mut warnings,
    ));
    figs.extend(burst::burst_figures(dir, &all_runs, &mut warnings));

    let anova = plan
        .anova
        .as_ref()
        .map(|cfg| run_anova(cfg, &results.factors, &all_runs));
    let mut anova_json = None;
    if let Some(AnovaOutcome::Done { response, anova: a }) = &anova {
        let path = dir.join("anova.json");
        #[derive(Serialize)]
        struct Out<'a> {
            response: &'a str,
            #[serde(flatten)]
            anova: &'a Anova,
        }
        let text = serde_json::to_string_pretty(&Out { response, anova: a }).unwrap_or_default();
        std::fs::write(&path, text).map_err(io(&path))?;
        anova_json = Some(path);
        let what = figures_metric_name(response);
        for (name, p) in ["anova_residuals", "anova_qq"]
            .into_iter()
            .zip(anova::residual_plots(a, &what))
        {
            match plot::chart_svg(&p) {
                Ok(svg) => figs.push(Figure {
                    name: name.into(),
                    caption: String::new(),
                    section: Section::Anova,
                    svg,
                }),
                Err(e) => warnings.push(e.to_string()),
            }
        }
    }
    if let Some(AnovaOutcome::NotPossible { reason, .. }) = &anova {
        warnings.push(format!("ANOVA not computed: {reason}"));
    }

    // Plots: SVG always, PNG when rsvg-convert is there (one warning if not).
    let plot_dir = dir.join("plots");
    std::fs::create_dir_all(&plot_dir).map_err(io(&plot_dir))?;
    // Plots of an earlier report of this directory would linger next to the new ones: remove them.
    for entry in std::fs::read_dir(&plot_dir)
        .map_err(io(&plot_dir))?
        .flatten()
    {
        let p = entry.path();
        if matches!(p.extension().and_then(|e| e.to_str()), Some("svg" | "png")) {
            std::fs::remove_file(&p).map_err(io(&p))?;
        }
    }
    let mut plots = Vec::new();
    let mut png_failed = false;
    for f in &figs {
        let svg = plot_dir.join(format!("{}.svg", f.name));
        plot::write_svg(&svg, &f.svg).map_err(io(&svg))?;
        if !png_failed {
            if let Err(e) = plot::svg_to_png(&svg, &svg.with_extension("png")) {
                warnings.push(format!("no PNG copies of the plots: {e}"));
                png_failed = true;
            }
        }
        plots.push(svg);
    }

    let runs_ok = all_runs.iter().filter(|r| r.ok).count();
    let complete = meta.finished.is_some() || meta.started.is_none();
    let search: serde_json::Value = std::fs::read_to_string(dir.join("search.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let page = html::Page {
        dir,
        plan: &plan,
        plan_text: plan_text.as_deref(),
        meta: &meta,
        factors: &results.factors,
        runs: &all_runs,
        summaries: &summaries,
        layout: &layout,
        figures: &figs,
        anova: anova.as_ref(),
        warnings: &warnings,
        search: &search,
    };
    let html_path = dir.join("report.html");
    std::fs::write(&html_path, html::render(&page)).map_err(io(&html_path))?;

    Ok(ReportSummary {
        dir: dir.to_path_buf(),
        html: html_path,
        summary_csv: summary_path,
        plots,
        anova_json,
        runs: all_runs.len(),
        runs_ok,
        runs_failed: all_runs.len() - runs_ok,
        points: summaries.len(),
        complete,
        warnings,
    })
}

/// Time-sampled runs (DIR/samples/RUN.csv, seed 004): each sample becomes one replication of its point
/// (summaries, plots and the ANOVA), with its own offered and captured count, capture rate, packet and bit
/// rates; the run's other values (CPU, per-packet cost) are the whole run's. Runs without samples stay.
/// The per-sample captured count is the first app's.
pub fn sample_replications(dir: &Path, runs: Vec<RunResult>) -> Vec<RunResult> {
    let samples_dir = dir.join("samples");
    if !samples_dir.is_dir() {
        return runs;
    }
    let mut out = Vec::new();
    for r in runs {
        let path = samples_dir.join(format!("{}.csv", r.run));
        let samples = crate::bench::samples::read(&path).unwrap_or_default();
        if samples.is_empty() || !r.ok {
            out.push(r);
            continue;
        }
        let n = samples.len();
        for s in samples {
            let mut x = r.clone();
            x.rerun = r.rerun * n + s.sample as usize;
            let line = crate::bench::cycle::line_bytes(s.offered, s.offered_bytes);
            for (k, v) in [
                ("offered", Some(s.offered as f64)),
                ("received", Some(s.captured as f64)),
                ("capture_rate", s.capture_rate()),
                ("duration_s", Some(s.seconds)),
                ("pps", Some(s.pps())),
                ("mbps", Some(s.mbps())),
                ("line_mbps", Some(line as f64 * 8.0 / s.seconds / 1e6)),
            ] {
                match v {
                    Some(v) => x.values.insert(k.into(), v),
                    None => x.values.remove(k),
                };
            }
            x.values.remove("generated");
            out.push(x);
        }
    }
    out
}

/// A metric's name in words for titles ("capture_rate" → "capture rate").
fn figures_metric_name(m: &str) -> String {
    match m {
        "app_ns_per_pkt" => "capturer CPU ns per packet".into(),
        "cpu_busy" => "CPU busy %".into(),
        m => m.replace('_', " "),
    }
}

/// The ANOVA over the successful runs: one observation per run (multi-app: the average over the apps).
pub fn run_anova(cfg: &AnovaConfig, factors: &[String], runs: &[RunResult]) -> AnovaOutcome {
    let not = |reason: String| AnovaOutcome::NotPossible {
        response: cfg.response.clone(),
        reason,
    };
    let mut idx = Vec::new();
    for f in &cfg.factors {
        match factors.iter().position(|g| g == f) {
            Some(i) => idx.push(i),
            None => {
                return not(format!(
                    "factor `{f}` of [anova] is not a factor of the results ({})",
                    factors.join(", ")
                ))
            }
        }
    }
    let observations: Vec<Observation> = runs
        .iter()
        .filter(|r| r.ok)
        .filter_map(|r| {
            Some(Observation {
                levels: idx.iter().map(|&i| r.levels[i].clone()).collect(),
                response: *r.values.get(&cfg.response)?,
                line: r.run as u64,
            })
        })
        .collect();
    let opts = AnovaOptions {
        log10: cfg.log,
        ..AnovaOptions::default()
    };
    match anova::analyse(&cfg.factors, &observations, &opts) {
        Ok(a) => AnovaOutcome::Done {
            response: cfg.response.clone(),
            anova: a,
        },
        Err(e) => not(e.to_string()),
    }
}

#[cfg(test)]
mod tests;
