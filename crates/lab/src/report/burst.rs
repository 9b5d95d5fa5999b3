//! The report's plots of burst runs: offered and captured rate over the on/off cycle.

use super::data::RunResult;
use plot::{Chart, ErrorPoint, Series};

use super::figures::{finish, push, Figure, Section, YSpec};

/// Burst runs (seed 002 Fig. 4): the time lines of DIR/timeline folded over the on/off cycle, per point the
/// min/avg/max offered and captured rate at each 100 ms of the cycle over all its cycles and reruns.
pub fn burst_figures(
    dir: &std::path::Path,
    runs: &[RunResult],
    warnings: &mut Vec<String>,
) -> Vec<Figure> {
    use crate::bench::timeline;
    let tl = dir.join("timeline");
    if !tl.is_dir() {
        return Vec::new();
    }
    // Point → phase bin (in 100 ms) → (offered pps, captured pps, offered Mb/s, captured Mb/s) per bin.
    type Folded = std::collections::BTreeMap<u64, [Vec<f64>; 4]>;
    let mut points: Vec<(String, Folded)> = Vec::new();
    for r in runs.iter().filter(|r| r.ok) {
        let Ok(bins) = timeline::read(&tl.join(format!("{}.csv", r.run))) else {
            continue;
        };
        let i = match points.iter().position(|(p, _)| *p == r.point) {
            Some(i) => i,
            None => {
                points.push((r.point.clone(), Folded::new()));
                points.len() - 1
            }
        };
        for b in bins {
            let k = (b.phase_s * 10.0).round() as u64;
            let e = points[i].1.entry(k).or_default();
            for (v, x) in e.iter_mut().zip([
                b.offered_pps,
                b.captured_pps,
                b.offered_mbps,
                b.captured_mbps,
            ]) {
                v.push(x);
            }
        }
    }
    // Legends name only the levels that differ between the points.
    let parts: Vec<Vec<&str>> = points.iter().map(|(p, _)| p.split(';').collect()).collect();
    let label = |i: usize| -> String {
        let own: Vec<&str> = parts[i]
            .iter()
            .copied()
            .filter(|x| parts.iter().any(|o| !o.contains(x)))
            .collect();
        if own.is_empty() {
            "all runs".into()
        } else {
            own.join(", ")
        }
    };
    let mut out = Vec::new();
    for (metric, idx, ylabel) in [
        ("pps", 0usize, "packets per second"),
        ("mbps", 2, "Mbit/s (frames)"),
    ] {
        let mut series = Vec::new();
        for (pi, (_, folded)) in points.iter().enumerate() {
            let point = label(pi);
            for (what, j) in [("offered", idx), ("captured", idx + 1)] {
                let pts: Vec<ErrorPoint> = folded
                    .iter()
                    .filter_map(|(k, v)| {
                        let xs = vec![*k as f64 / 10.0; v[j].len()];
                        ErrorPoint::from_reruns(&xs, &v[j])
                    })
                    .collect();
                if !pts.is_empty() {
                    series.push(Series::new(&format!("{what}, {point}"), pts));
                }
            }
        }
        let y = YSpec {
            label: ylabel.into(),
            title: format!("Burst cycle: offered and captured {ylabel}"),
            scale: 1.0,
            percent: false,
        };
        let chart = Chart::new(&y.title, "time in the on/off cycle (s)", ylabel);
        let Some(p) = finish(chart, series, &y) else {
            continue;
        };
        let caption = "Seed 002 Figure 4: every run's time line (offered from the receiving interface's \
                       counters, captured from the capture file's time stamps, 100 ms bins) folded over the \
                       on/off cycle (with phases, over one period per phase, in the order given); points: \
                       average over all cycles and reruns, bars: min and max."
            .to_string();
        push(
            &mut out,
            warnings,
            format!("burst_cycle_{metric}"),
            caption,
            Section::Main,
            &p,
        );
    }
    out
}
