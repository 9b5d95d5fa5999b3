//! cpusage's and trimusage's summary of a run's samples, and its text.

use std::fmt::Write as _;

use serde::Serialize as DeriveSerialize;

use super::usage::{
    cpu_map, first_window_under, longest_window_under, stats, Sample, Usage, Window,
};

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
