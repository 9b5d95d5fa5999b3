//! The report's plots: a metric vs. the x factor, one line per series level, one plot per combination of
//! the remaining factors (a "panel", like seed 000's (a) single / (b) dual processor plots).

use std::collections::HashMap;

use super::data::{level_text, series_name, ReportConfig, RunResult};
use crate::bench::results::cpu_modes;
use plot::{chart_svg, Chart, ErrorPoint, Series};

/// Factors that make a good x axis, best first (when the plan's `[report]` names none).
const X_CANDIDATES: [&str; 12] = [
    "rate_mbps",
    "rate_pps",
    "gap_ns",
    "buffer_kib",
    "apps",
    "load",
    "snaplen",
    "filter",
    "dist",
    "placement",
    "output",
    "method",
];

/// Which part of the report a figure belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Main,
    Cpu,
    MultiApp,
    Anova,
}

/// A drawn plot.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File stem in plots/.
    pub name: String,
    pub caption: String,
    pub section: Section,
    pub svg: String,
}

/// How the results are laid out in plots.
#[derive(Clone, Debug)]
pub struct Layout {
    pub x: Option<usize>,
    pub series: Option<usize>,
    /// Other factors with more than one level: one plot per combination.
    pub panels: Vec<usize>,
    pub plots: Vec<String>,
    /// Measured rate column every plot is drawn against a second time (`[report] x2`).
    pub x2: Option<&'static str>,
    pub multi_app: bool,
}

/// Choose x, series and panels from the plan's `[report]`, or from the factors that vary.
pub fn layout(
    factors: &[String],
    runs: &[RunResult],
    cfg: &ReportConfig,
    warnings: &mut Vec<String>,
) -> Layout {
    let varies = |i: usize| {
        let mut seen: Vec<&str> = runs.iter().map(|r| r.levels[i].as_str()).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len() > 1
    };
    let find = |name: &str| factors.iter().position(|f| f == name);
    let mut pick = |wanted: &Option<String>, what: &str| -> Option<Option<usize>> {
        let name = wanted.as_ref()?;
        match find(name) {
            Some(i) => Some(Some(i)),
            None => {
                warnings.push(format!(
                    "[report] {what} = \"{name}\" is not a factor of the results ({}); chose one instead",
                    factors.join(", ")
                ));
                None
            }
        }
    };
    let x = pick(&cfg.x, "x").unwrap_or_else(|| {
        X_CANDIDATES
            .iter()
            .filter_map(|c| find(c))
            .find(|&i| varies(i))
            .or_else(|| (0..factors.len()).find(|&i| varies(i)))
    });
    let series = pick(&cfg.series, "series").unwrap_or_else(|| {
        let other = |i: &usize| Some(*i) != x && varies(*i);
        find("method")
            .filter(other)
            .or_else(|| (0..factors.len()).find(other))
    });
    let series = series.filter(|&s| Some(s) != x);
    let panels = (0..factors.len())
        .filter(|&i| Some(i) != x && Some(i) != series && varies(i))
        .collect();
    let plots = cfg.plots.clone().unwrap_or_else(|| {
        vec![
            "capture_rate".into(),
            "app_ns_per_pkt".into(),
            "cpu_busy".into(),
        ]
    });
    let x2 = cfg.x2.as_deref().and_then(|c| {
        let known = MEASURED_X.iter().copied().find(|m| *m == c);
        if known.is_none() {
            warnings.push(format!(
                "[report] x2 = \"{c}\": expected one of the measured rates {}; no second x axis drawn",
                MEASURED_X.join(", ")
            ));
        }
        known
    });
    Layout {
        x,
        series,
        x2,
        panels,
        plots,
        multi_app: cfg.multi_app || runs.iter().any(|r| r.apps > 1),
    }
}

/// Measured columns that can be an x axis (`[report] x2`), each a rate the run reached.
const MEASURED_X: [&str; 3] = ["mbps", "pps", "line_mbps"];

fn measured_label(column: &str) -> &'static str {
    match column {
        "mbps" => "offered data rate (Mbit/s, measured)",
        "line_mbps" => "offered line rate (Mbit/s incl. preamble and gap, measured)",
        _ => "offered packet rate (packets/s, measured)",
    }
}

/// The x axis: what a run's x value is and how the axis is labelled.
struct XAxis {
    factor: usize,
    label: String,
    /// Measured column used instead of the nominal level (data rate varies between reruns, §6.2.2).
    measured: Option<&'static str>,
    log: bool,
    /// Categorical axis: the levels in order.
    names: Vec<String>,
}

impl XAxis {
    fn new(name: &str, factor: usize, runs: &[&RunResult]) -> XAxis {
        let mut levels: Vec<String> = Vec::new();
        for r in runs {
            if !levels.contains(&r.levels[factor]) {
                levels.push(r.levels[factor].clone());
            }
        }
        // The gap is the generator's setting and the thesis's x axis (seed 000 Fig 6.1): it stays as set, and
        // the rates it yields are the plotted y values.
        let measured = match name {
            "rate_mbps" => Some("mbps"),
            "rate_pps" => Some("pps"),
            _ => None,
        }
        .filter(|m| runs.iter().any(|r| r.values.contains_key(*m)));
        let numbers: Option<Vec<f64>> = levels.iter().map(|l| l.parse::<f64>().ok()).collect();
        let label = match (name, measured) {
            (_, Some(m)) => measured_label(m).to_string(),
            ("buffer_kib", _) => "capture buffer size (KiB)".to_string(),
            ("apps", _) => "concurrent capturing apps".to_string(),
            ("snaplen", _) => "snap length (bytes)".to_string(),
            ("load", _) => "per-packet load".to_string(),
            ("rate_mbps", _) => "data rate (Mbit/s, as set)".to_string(),
            ("gap_ns", _) => "inter-packet gap (ns, as set)".to_string(),
            ("cpu_limit", _) => "capturer CPU limit (% of one CPU)".to_string(),
            _ => name.replace('_', " "),
        };
        match (measured, numbers) {
            (Some(m), _) => XAxis {
                factor,
                label,
                measured: Some(m),
                log: false,
                names: Vec::new(),
            },
            (None, Some(n)) if !n.is_empty() => {
                let lo = n.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = n.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                // Sizes that span decades (buffers: 64 KiB … 256 MiB) need a log axis.
                let log = lo > 0.0 && hi / lo >= 16.0;
                XAxis {
                    factor,
                    label: if log {
                        format!("{label}, log scale")
                    } else {
                        label
                    },
                    measured: None,
                    log,
                    names: Vec::new(),
                }
            }
            _ => XAxis {
                factor,
                label,
                measured: None,
                log: false,
                names: levels,
            },
        }
    }

    /// A measured column as the x axis, points still grouped by the levels of `factor`.
    fn measured(factor: usize, column: &'static str) -> XAxis {
        XAxis {
            factor,
            label: measured_label(column).to_string(),
            measured: Some(column),
            log: false,
            names: Vec::new(),
        }
    }

    fn x(&self, r: &RunResult) -> Option<f64> {
        let level = &r.levels[self.factor];
        if let Some(m) = self.measured {
            return r.values.get(m).copied();
        }
        if !self.names.is_empty() {
            return self
                .names
                .iter()
                .position(|n| n == level)
                .map(|i| i as f64 + 1.0);
        }
        level.parse().ok()
    }

    fn plot(&self, title: &str, y: &YSpec) -> Chart {
        let mut p = Chart::new(title, &self.label, &y.label);
        p.x.log = self.log;
        p.x.names = self.names.clone();
        p
    }
}

/// How a metric is shown on the y axis.
pub(super) struct YSpec {
    pub(super) label: String,
    pub(super) title: String,
    /// Multiply by this (capture rate 0..1 → %).
    pub(super) scale: f64,
    /// Percent of something: the axis runs from 0 to at least 100.
    pub(super) percent: bool,
}

fn yspec(metric: &str) -> YSpec {
    let spec = |label: &str, title: &str, scale: f64, percent: bool| YSpec {
        label: label.into(),
        title: title.into(),
        scale,
        percent,
    };
    match metric {
        "capture_rate" => spec(
            "capture rate (% of generated packets)",
            "Capture rate",
            100.0,
            true,
        ),
        "app_ns_per_pkt" => spec(
            "capturer CPU time per packet (ns)",
            "CPU time of the capturer per offered packet",
            1.0,
            false,
        ),
        "app_cpu_s" => spec(
            "capturer CPU time (s)",
            "CPU time of the capturer",
            1.0,
            false,
        ),
        "cpu_busy" => spec(
            "CPU busy (% of all CPUs)",
            "CPU usage of the whole machine (100 % − idle)",
            1.0,
            true,
        ),
        "capture_cpu_busy" => spec(
            "capture CPU busy (% of that CPU)",
            "Load of the capturers' CPU (100 % − its idle)",
            1.0,
            true,
        ),
        "mbps" => spec(
            "offered data rate (Mbit/s)",
            "Offered data rate",
            1.0,
            false,
        ),
        "line_mbps" => spec(
            "offered line rate (Mbit/s, frame + 24 B)",
            "Offered rate on the line",
            1.0,
            false,
        ),
        "pps" => spec(
            "offered packet rate (packets/s)",
            "Offered packet rate",
            1.0,
            false,
        ),
        "received" => spec(
            "packets received",
            "Packets received by the capturer",
            1.0,
            false,
        ),
        "drop_kernel" => spec("packets", "Packets dropped by the kernel", 1.0, false),
        "drop_ring" => spec("packets", "Packets dropped in the ring", 1.0, false),
        "drop_storage" => spec("packets", "Packets dropped by storage", 1.0, false),
        m if m.starts_with("cpu_") => {
            let mode = &m[4..];
            spec(
                &format!("CPU in {mode} mode (% of all CPUs)"),
                &format!("CPU time in {mode} mode"),
                1.0,
                true,
            )
        }
        m => spec(m, m, 1.0, false),
    }
}

/// The line plots of the main and CPU sections, and the multi-app plots.
pub fn line_figures(
    factors: &[String],
    runs: &[RunResult],
    layout: &Layout,
    warnings: &mut Vec<String>,
) -> Vec<Figure> {
    let Some(xf) = layout.x else {
        if !runs.is_empty() {
            warnings.push("no factor has more than one level: nothing to plot against".into());
        }
        return Vec::new();
    };
    let mut figures = Vec::new();
    for (panel_name, panel_runs) in panels(factors, runs, &layout.panels) {
        let x = XAxis::new(&factors[xf], xf, &panel_runs);
        let suffix = |t: &str| {
            if panel_name.is_empty() {
                t.to_string()
            } else {
                format!("{t} ({panel_name})")
            }
        };
        let stem = |m: &str| file_stem(m, &panel_name);
        let reruns = max_reruns(&panel_runs);
        for metric in &layout.plots {
            let y = yspec(metric);
            let series = by_series(&panel_runs, layout.series, factors, &x, |r| {
                r.values.get(metric.as_str()).map(|v| v * y.scale)
            });
            let Some(p) = finish(x.plot(&suffix(&y.title), &y), series, &y) else {
                continue;
            };
            let caption = caption(&y.title, &x, reruns, layout.series.map(|s| &factors[s]));
            push(
                &mut figures,
                warnings,
                stem(metric),
                caption,
                Section::Main,
                &p,
            );
        }
        // The same plots against a second, measured x (bit rate next to packet rate), unless x is it already.
        if let Some(col) = layout.x2.filter(|c| x.measured != Some(*c)) {
            let x2 = XAxis::measured(xf, col);
            for metric in &layout.plots {
                let y = yspec(metric);
                let series = by_series(&panel_runs, layout.series, factors, &x2, |r| {
                    r.values.get(metric.as_str()).map(|v| v * y.scale)
                });
                let Some(p) = finish(x2.plot(&suffix(&y.title), &y), series, &y) else {
                    continue;
                };
                let caption = caption(&y.title, &x2, reruns, layout.series.map(|s| &factors[s]));
                let name = stem(&format!("{metric}_vs_{col}"));
                push(&mut figures, warnings, name, caption, Section::Main, &p);
            }
        }
        // CPU by mode: one plot per mode that is ever above 1 %, all on the same scale so they compare.
        if layout.plots.iter().any(|p| p == "cpu_busy") {
            let modes: Vec<&str> = cpu_modes()
                .iter()
                .copied()
                .filter(|m| *m != "cpu_idle")
                .filter(|m| {
                    panel_runs
                        .iter()
                        .any(|r| r.values.get(*m).is_some_and(|v| *v >= 1.0))
                })
                .collect();
            let top = panel_runs
                .iter()
                .filter_map(|r| r.values.get("cpu_busy"))
                .fold(0.0f64, |a, &b| a.max(b));
            for m in modes {
                let y = yspec(m);
                let series = by_series(&panel_runs, layout.series, factors, &x, |r| {
                    r.values.get(m).copied()
                });
                let Some(mut p) = finish(x.plot(&suffix(&y.title), &y), series, &y) else {
                    continue;
                };
                p.y.range = Some(0.0..((top / 10.0).ceil() * 10.0).clamp(10.0, 100.0) + 2.0);
                p.size = (700, 440);
                let caption = format!(
                    "Share of all CPUs' time in {} mode (from /proc/stat), same scale in every mode plot.",
                    &m[4..]
                );
                push(&mut figures, warnings, stem(m), caption, Section::Cpu, &p);
            }
        }
        if layout.multi_app {
            figures.extend(multi_app(
                factors,
                &panel_runs,
                layout,
                &x,
                &suffix,
                &panel_name,
                warnings,
            ));
        }
    }
    figures
}

fn multi_app(
    factors: &[String],
    runs: &[&RunResult],
    layout: &Layout,
    x: &XAxis,
    suffix: &dyn Fn(&str) -> String,
    panel: &str,
    warnings: &mut Vec<String>,
) -> Vec<Figure> {
    let mut out = Vec::new();
    let y = yspec("capture_rate");
    let levels = series_levels(runs, layout.series);
    for level in levels {
        let these: Vec<&RunResult> = runs
            .iter()
            .copied()
            .filter(|r| layout.series.is_none_or(|s| r.levels[s] == level))
            .collect();
        let series: Vec<Series> = [
            ("worst app", "capture_rate_worst"),
            ("average of the apps", "capture_rate_avg"),
            ("best app", "capture_rate_best"),
        ]
        .iter()
        .map(|(name, m)| {
            Series::new(
                name,
                points(&these, x, |r| r.values.get(*m).map(|v| v * 100.0)),
            )
        })
        .filter(|s| !s.points.is_empty())
        .collect();
        let title = if level.is_empty() {
            "Capture rate of concurrent apps".to_string()
        } else {
            format!("{level}: capture rate of concurrent apps")
        };
        let Some(p) = finish(x.plot(&suffix(&title), &y), series, &y) else {
            continue;
        };
        let name = if level.is_empty() {
            file_stem("multi_app", panel)
        } else {
            let key = format!("{}-{level}", factors[layout.series.unwrap_or(0)]);
            file_stem(&format!("multi_app_{key}"), panel)
        };
        let caption = format!(
            "Several copies of the capturer ran at once (§6.3.3 of seed 000). Per run, the worst, average and \
             best capture rate over the apps; points average them over the reruns, bars show min and max. {}",
            if level.is_empty() { String::new() } else { format!("Capturer: {level}.") }
        );
        push(&mut out, warnings, name, caption, Section::MultiApp, &p);
    }
    out
}

fn caption(title: &str, x: &XAxis, reruns: usize, series: Option<&String>) -> String {
    let lines = series
        .map(|s| format!("One line per {}. ", s.replace('_', " ")))
        .unwrap_or_default();
    let xbars = if x.measured.is_some() {
        " Horizontal bars: min and max of the measured rate over the reruns."
    } else {
        ""
    };
    format!(
        "{title} vs. {}. {lines}Points: average of up to {reruns} reruns; vertical bars: min and max.{xbars}",
        x.label
    )
}

fn max_reruns(runs: &[&RunResult]) -> usize {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for r in runs.iter().filter(|r| r.ok) {
        *count.entry(&r.point).or_default() += 1;
    }
    count.values().copied().max().unwrap_or(0)
}

/// Runs grouped by the levels of the panel factors, in order of first appearance; ("", all) if none.
fn panels<'a>(
    factors: &[String],
    runs: &'a [RunResult],
    panel_factors: &[usize],
) -> Vec<(String, Vec<&'a RunResult>)> {
    let mut out: Vec<(String, Vec<&RunResult>)> = Vec::new();
    for r in runs {
        let key = panel_factors
            .iter()
            .map(|&i| level_text(&factors[i], &r.levels[i]))
            .collect::<Vec<_>>()
            .join(", ");
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(r),
            None => out.push((key, vec![r])),
        }
    }
    out
}

fn series_levels(runs: &[&RunResult], series: Option<usize>) -> Vec<String> {
    let mut levels: Vec<String> = Vec::new();
    for r in runs {
        let l = series.map(|s| r.levels[s].clone()).unwrap_or_default();
        if !levels.contains(&l) {
            levels.push(l);
        }
    }
    levels
}

/// One series per level of the series factor (one unnamed series without it).
fn by_series(
    runs: &[&RunResult],
    series: Option<usize>,
    factors: &[String],
    x: &XAxis,
    y: impl Fn(&RunResult) -> Option<f64> + Copy,
) -> Vec<Series> {
    series_levels(runs, series)
        .into_iter()
        .map(|level| {
            let these: Vec<&RunResult> = runs
                .iter()
                .copied()
                .filter(|r| series.is_none_or(|s| r.levels[s] == level))
                .collect();
            let name = match series {
                Some(s) if !level.is_empty() => series_name(&factors[s], &level),
                _ => "all runs".into(),
            };
            Series::new(&name, points(&these, x, y))
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// One error point per level of x over the successful reruns that have both values.
fn points(
    runs: &[&RunResult],
    x: &XAxis,
    y: impl Fn(&RunResult) -> Option<f64>,
) -> Vec<ErrorPoint> {
    let mut order: Vec<&str> = Vec::new();
    let mut xs: HashMap<&str, (Vec<f64>, Vec<f64>)> = HashMap::new();
    for r in runs.iter().filter(|r| r.ok) {
        let (Some(xv), Some(yv)) = (x.x(r), y(r)) else {
            continue;
        };
        let level = r.levels[x.factor].as_str();
        if !xs.contains_key(level) {
            order.push(level);
        }
        let e = xs.entry(level).or_default();
        e.0.push(xv);
        e.1.push(yv);
    }
    order
        .iter()
        .filter_map(|l| {
            let (a, b) = &xs[l];
            ErrorPoint::from_reruns(a, b)
        })
        .collect()
}

/// Put the series in the plot and fix the y range (from 0; 0..100 % for percentages). None if empty.
pub(super) fn finish(mut p: Chart, series: Vec<Series>, y: &YSpec) -> Option<Chart> {
    if series.is_empty() {
        return None;
    }
    let top = series
        .iter()
        .flat_map(|s| &s.points)
        .map(|q| q.y_max)
        .fold(0.0f64, f64::max);
    p.series = series;
    p.y.range = Some(if y.percent {
        0.0..top.max(100.0) * 1.04
    } else if top > 0.0 {
        0.0..top * 1.08
    } else {
        0.0..1.0
    });
    Some(p)
}

pub(super) fn push(
    figures: &mut Vec<Figure>,
    warnings: &mut Vec<String>,
    name: String,
    caption: String,
    section: Section,
    p: &Chart,
) {
    match chart_svg(p) {
        Ok(svg) => figures.push(Figure {
            name,
            caption,
            section,
            svg,
        }),
        Err(e) => warnings.push(e.to_string()),
    }
}

/// A file name from a metric and a panel: letters, digits, '-', '_' and '.' only.
pub fn file_stem(metric: &str, panel: &str) -> String {
    let raw = if panel.is_empty() {
        metric.to_string()
    } else {
        format!(
            "{metric}__{}",
            panel.replace(" = ", "-").replace(", ", "__")
        )
    };
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}
