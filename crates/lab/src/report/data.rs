//! Reading a bench output directory (results.csv, plan.toml, meta.json) and the per-point summaries
//! (eq. 6.2–6.4 of seed 000 plus the median).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;

use super::ReportError;
use crate::bench::results::{cpu_modes, HEAD, MEASURES};
use crate::machine::Machine;

/// Whether a column after `app` is a measure (never a factor): one `ringcap bench` writes, or
/// `cpu_busy`, which the report derives (and older results kept).
fn is_measure(name: &str) -> bool {
    MEASURES.contains(&name) || name == "cpu_busy"
}

/// How a factor's level reads in plots and tables: `name = level`, except where the bare number would
/// mislead (a CPU budget must never look like the machine's own speed).
pub fn level_text(factor: &str, level: &str) -> String {
    match (factor, level) {
        ("cpu_limit", "none") => "capturer CPU not limited".into(),
        ("cpu_limit", pct) => format!("capturer CPU limited to {pct} %"),
        // Seed 000 Fig 6.14: whole packets vs the headers only (`-s 76`).
        ("snaplen", "0") => "full packets (snaplen 0)".into(),
        ("snaplen", n) => format!("first {n} bytes (snaplen {n})"),
        _ => format!("{factor} = {level}"),
    }
}

/// A series' name in a legend: the level, or the level in words where [`level_text`] says so.
pub fn series_name(factor: &str, level: &str) -> String {
    match factor {
        "cpu_limit" | "snaplen" => level_text(factor, level),
        _ => level.to_string(),
    }
}

/// One row of results.csv: one capturing app in one run.
#[derive(Clone, Debug)]
pub struct Row {
    pub run: usize,
    pub point: String,
    pub rerun: usize,
    pub app: usize,
    /// Levels of the factors, in `Results::factors` order.
    pub levels: Vec<String>,
    /// Numeric columns that have a number in this row.
    pub values: HashMap<String, f64>,
    pub status: String,
}

/// results.csv as read.
#[derive(Clone, Debug, Default)]
pub struct Results {
    pub factors: Vec<String>,
    /// Numeric columns in file order (measured and any extra).
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
    /// Lines that could not be used (e.g. the last line of an interrupted plan), with the reason.
    pub skipped_lines: Vec<String>,
}

/// Read results.csv. A truncated or malformed line is skipped and noted, never fatal: the file of an
/// interrupted plan may end in the middle of a line.
pub fn read_results(path: &Path) -> Result<Results, ReportError> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| ReportError::Csv {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?;
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| ReportError::Csv {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?
        .iter()
        .map(str::to_string)
        .collect();
    let col = |name: &str| header.iter().position(|h| h == name);
    let mut head = [0usize; 4];
    for (i, name) in HEAD.iter().enumerate() {
        head[i] = col(name).ok_or_else(|| ReportError::Csv {
            path: path.to_path_buf(),
            msg: format!(
                "the header has no `{name}` column (columns: {}); is this a results.csv of `ringcap bench`?",
                header.join(", ")
            ),
        })?;
    }
    let status_col = col("status");
    let first_measured = col("generated").unwrap_or(header.len());
    let after_head = head.iter().max().map_or(0, |&i| i + 1);
    let factor_cols: Vec<usize> = (after_head..first_measured)
        .filter(|&i| !is_measure(&header[i]))
        .collect();
    let value_cols: Vec<usize> = (0..header.len())
        .filter(|&i| {
            !HEAD.contains(&header[i].as_str())
                && !factor_cols.contains(&i)
                && header[i] != "status"
        })
        .collect();
    let mut out = Results {
        factors: factor_cols.iter().map(|&i| header[i].clone()).collect(),
        columns: value_cols.iter().map(|&i| header[i].clone()).collect(),
        ..Results::default()
    };
    for record in reader.records() {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                out.skipped_lines.push(format!("{e}"));
                continue;
            }
        };
        let line = record.position().map_or(0, |p| p.line());
        if record.len() != header.len() {
            out.skipped_lines.push(format!(
                "line {line}: {} fields instead of {} (cut short by an interrupted run?)",
                record.len(),
                header.len()
            ));
            continue;
        }
        let int = |i: usize| record.get(head[i]).and_then(|s| s.parse::<usize>().ok());
        let (Some(run), Some(rerun), Some(app)) = (int(0), int(2), int(3)) else {
            out.skipped_lines
                .push(format!("line {line}: run, rerun or app is not a number"));
            continue;
        };
        let values = value_cols
            .iter()
            .filter_map(|&i| {
                let v = record
                    .get(i)?
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())?;
                Some((header[i].clone(), v))
            })
            .collect();
        out.rows.push(Row {
            run,
            point: record.get(head[1]).unwrap_or("").to_string(),
            rerun,
            app,
            levels: factor_cols
                .iter()
                .map(|&i| record.get(i).unwrap_or("").to_string())
                .collect(),
            values,
            status: status_col
                .and_then(|i| record.get(i))
                .unwrap_or("ok")
                .to_string(),
        });
    }
    Ok(out)
}

/// One run: its rows (one per app) folded into one set of values.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub run: usize,
    pub point: String,
    pub rerun: usize,
    pub levels: Vec<String>,
    /// Number of app rows.
    pub apps: usize,
    /// All rows of the run have status `ok`.
    pub ok: bool,
    /// The distinct non-ok statuses, joined.
    pub status: String,
    /// Every numeric column averaged over the apps, plus `cpu_busy` (100 − cpu_idle) and, for several apps,
    /// `capture_rate_worst` / `capture_rate_avg` / `capture_rate_best` (§6.3.3).
    pub values: BTreeMap<String, f64>,
}

/// Fold rows into runs, in run order. `multi_app` adds worst/avg/best of the capture rate over the apps
/// (also done whenever a run has more than one app).
pub fn runs(results: &Results, multi_app: bool) -> Vec<RunResult> {
    let mut by_run: BTreeMap<usize, Vec<&Row>> = BTreeMap::new();
    for r in &results.rows {
        by_run.entry(r.run).or_default().push(r);
    }
    by_run
        .into_iter()
        .map(|(run, rows)| {
            let first = rows[0];
            let mut bad: Vec<&str> = rows
                .iter()
                .map(|r| r.status.as_str())
                .filter(|s| *s != "ok")
                .collect();
            bad.dedup();
            let mut values = BTreeMap::new();
            for c in &results.columns {
                let v: Vec<f64> = rows
                    .iter()
                    .filter_map(|r| r.values.get(c).copied())
                    .collect();
                if !v.is_empty() {
                    values.insert(c.clone(), v.iter().sum::<f64>() / v.len() as f64);
                }
            }
            if let Some(idle) = values.get("cpu_idle").copied() {
                values.insert("cpu_busy".into(), 100.0 - idle);
            }
            if multi_app || rows.len() > 1 {
                let rates: Vec<f64> = rows
                    .iter()
                    .filter_map(|r| r.values.get("capture_rate").copied())
                    .collect();
                if !rates.is_empty() {
                    let (lo, avg, hi) = plot::min_avg_max(&rates).unwrap_or_default();
                    values.insert("capture_rate_worst".into(), lo);
                    values.insert("capture_rate_avg".into(), avg);
                    values.insert("capture_rate_best".into(), hi);
                }
            }
            RunResult {
                run,
                point: first.point.clone(),
                rerun: first.rerun,
                levels: first.levels.clone(),
                apps: rows.len(),
                ok: bad.is_empty(),
                status: if bad.is_empty() {
                    "ok".into()
                } else {
                    bad.join("; ")
                },
                values,
            }
        })
        .collect()
}

/// n, average, min, max and median of a metric over the reruns of one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub n: usize,
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub median: f64,
}

/// Stats of the values; None if empty.
pub fn stats(v: &[f64]) -> Option<Stats> {
    let (min, avg, max) = plot::min_avg_max(v)?;
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Some(Stats {
        n,
        avg,
        min,
        max,
        median,
    })
}

/// The summary of one point (one combination of factor levels) over its successful reruns.
#[derive(Clone, Debug)]
pub struct PointSummary {
    pub point: String,
    pub levels: Vec<String>,
    pub runs_ok: usize,
    pub runs_failed: usize,
    /// Per metric, only metrics with at least one value.
    pub metrics: BTreeMap<String, Stats>,
}

/// The metrics summarized, in the order of summary.csv.
pub fn summary_metrics(runs: &[RunResult]) -> Vec<String> {
    let mut order: Vec<String> = [
        "capture_rate",
        "capture_rate_worst",
        "capture_rate_avg",
        "capture_rate_best",
        "generated",
        "offered",
        "received",
        "drop_kernel",
        "drop_ring",
        "drop_storage",
        "pps",
        "mbps",
        "line_mbps",
        "duration_s",
        "app_cpu_s",
        "app_ns_per_pkt",
        "cpu_busy",
        "capture_cpu_busy",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(cpu_modes().iter().map(|s| s.to_string()))
    .collect();
    // Any further numeric column, after the known ones.
    for r in runs {
        for k in r.values.keys() {
            if !order.contains(k) {
                order.push(k.clone());
            }
        }
    }
    order.retain(|m| runs.iter().any(|r| r.values.contains_key(m)));
    order
}

/// Summaries per point, in order of first appearance. Failed runs are counted, never averaged in.
pub fn summarize(runs: &[RunResult], metrics: &[String]) -> Vec<PointSummary> {
    let mut order: Vec<&str> = Vec::new();
    let mut groups: HashMap<&str, Vec<&RunResult>> = HashMap::new();
    for r in runs {
        if !groups.contains_key(r.point.as_str()) {
            order.push(&r.point);
        }
        groups.entry(&r.point).or_default().push(r);
    }
    order
        .into_iter()
        .map(|p| {
            let rs = &groups[p];
            let ok: Vec<&&RunResult> = rs.iter().filter(|r| r.ok).collect();
            let metrics = metrics
                .iter()
                .filter_map(|m| {
                    let v: Vec<f64> = ok.iter().filter_map(|r| r.values.get(m).copied()).collect();
                    Some((m.clone(), stats(&v)?))
                })
                .collect();
            PointSummary {
                point: p.to_string(),
                levels: rs[0].levels.clone(),
                runs_ok: ok.len(),
                runs_failed: rs.len() - ok.len(),
                metrics,
            }
        })
        .collect()
}

/// summary.csv: one row per (point, metric): point, the factor levels, runs_ok, runs_failed, metric, n,
/// avg, min, max, median. Numbers in the units of results.csv (capture rate 0..1, CPU in %).
pub fn summary_csv(factors: &[String], summaries: &[PointSummary], metrics: &[String]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut head: Vec<&str> = vec!["point"];
    head.extend(factors.iter().map(String::as_str));
    head.extend([
        "runs_ok",
        "runs_failed",
        "metric",
        "n",
        "avg",
        "min",
        "max",
        "median",
    ]);
    // Writing to a Vec cannot fail.
    let _ = w.write_record(&head);
    for s in summaries {
        for m in metrics {
            let Some(st) = s.metrics.get(m) else { continue };
            let mut rec: Vec<String> = vec![s.point.clone()];
            rec.extend(s.levels.iter().cloned());
            rec.extend([
                s.runs_ok.to_string(),
                s.runs_failed.to_string(),
                m.clone(),
                st.n.to_string(),
                num(st.avg),
                num(st.min),
                num(st.max),
                num(st.median),
            ]);
            let _ = w.write_record(&rec);
        }
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// Shortest text that reads back as the same f64.
fn num(v: f64) -> String {
    format!("{v}")
}

/// What the report reads of the plan: title, description, `[report]` and `[anova]`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PlanInfo {
    pub title: Option<String>,
    pub description: Option<String>,
    #[serde(default)]
    pub report: ReportConfig,
    pub anova: Option<AnovaConfig>,
}

/// `[report]` of a plan.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ReportConfig {
    /// Factor on the x axis.
    pub x: Option<String>,
    /// Factor with one line per level.
    pub series: Option<String>,
    /// A measured rate (`mbps`, `pps` or `line_mbps`) every plot is also drawn against, e.g. system load
    /// vs. bit rate and vs. packet rate from one plan (ringmap Abb. 5 and 6).
    pub x2: Option<String>,
    /// y columns to plot (`cpu_busy` = 100 − cpu_idle).
    pub plots: Option<Vec<String>>,
    /// Worst/avg/best over the concurrent apps.
    #[serde(default)]
    pub multi_app: bool,
}

/// `[anova]` of a plan.
#[derive(Clone, Debug, Deserialize)]
pub struct AnovaConfig {
    pub response: String,
    pub factors: Vec<String>,
    #[serde(default)]
    pub log: bool,
}

/// Parse the parts of a plan the report needs.
pub fn read_plan(text: &str) -> Result<PlanInfo, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

/// A peer that was not run.
#[derive(Clone, Debug, Deserialize)]
pub struct Skipped {
    pub method: String,
    pub reason: String,
}

/// meta.json of the bench output directory; every field optional so an older or partial file still reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Meta {
    pub plan: Option<String>,
    pub quick: Option<bool>,
    pub started: Option<String>,
    pub finished: Option<String>,
    /// Kept as JSON: shown as a [`Machine`] when it is one, else as it is.
    pub machine: Option<serde_json::Value>,
    pub tools: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// Factor levels this machine cannot run (e.g. placement = "siblings" without SMT).
    #[serde(default)]
    pub skipped_levels: Vec<SkippedLevel>,
}

/// A factor level whose runs were not done.
#[derive(Clone, Debug, Deserialize)]
pub struct SkippedLevel {
    pub level: String,
    pub runs: usize,
    pub reason: String,
}

impl Meta {
    /// The machine, if meta.json has one in [`Machine`]'s shape.
    pub fn machine(&self) -> Option<Machine> {
        serde_json::from_value(self.machine.clone()?).ok()
    }
}
