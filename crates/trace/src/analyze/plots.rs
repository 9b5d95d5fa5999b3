//! SVG plots of the analyses: the data of each, drawn by the `plot` crate.

use plot::{chart_svg, stack_svg, Chart, ErrorPoint, PlotError, Series};

use super::rates::{Burstiness, Minute};

/// Per-minute packet and bit rates (seed 002 Figure 1), minutes since the first one on x.
pub fn timeline_svg(minutes: &[Minute]) -> Result<String, PlotError> {
    let starts: Vec<u64> = minutes.iter().map(|m| m.start_ns).collect();
    let values = |f: fn(&Minute) -> f64| minutes.iter().map(f).collect::<Vec<f64>>();
    let pps = Chart::time_series(
        "(a) packets per second, per minute",
        "packets/s",
        &starts,
        &[
            ("max over 1 s", values(|m| m.max_pps_1s)),
            ("minute average", values(|m| m.pps)),
            ("min over 1 s", values(|m| m.min_pps_1s)),
        ],
    );
    let mbps = Chart::time_series(
        "(b) megabits per second, per minute",
        "Mb/s",
        &starts,
        // Named like (a)'s average, so both legends are as wide and the minutes line up.
        &[("minute average", values(|m| m.mbps))],
    );
    stack_svg(None, &[pps, mbps])
}

/// Rate percentiles against window size (seed 002 Figure 2), packets/s on a log axis.
pub fn burstiness_svg(bursts: &[Burstiness]) -> Result<String, PlotError> {
    let names = ["100 µs", "1 ms", "10 ms", "100 ms", "1 s"];
    let ymax = bursts
        .iter()
        .flat_map(|b| b.pps.iter().copied())
        .fold(10.0, f64::max)
        * 2.0;
    let mut c = Chart::new(
        "burstiness: packet rate percentiles by window",
        "window",
        "packets/s",
    );
    c.size = (1000, 500);
    c.x.names = (0..bursts.len())
        .map(|i| names.get(i).copied().unwrap_or("").to_string())
        .collect();
    // Without windows, still an (empty) axis.
    c.x.range = Some(0.5..1.5);
    c.y.log = true;
    c.y.range = Some(1.0..ymax);
    // Percentile index into PERCENTILES: 1, 50, 99, 100 (max).
    for (idx, name) in [(1usize, "p1"), (4, "median"), (7, "p99"), (9, "max")] {
        let points = bursts
            .iter()
            .enumerate()
            .map(|(i, b)| ErrorPoint::new(i as f64 + 1.0, b.pps[idx].max(1.0)));
        c = c.with(Series::new(name, points.collect()));
    }
    chart_svg(&c)
}

/// IP length distribution: (a) share by size, log y; (b) cumulative share of packets by size.
pub fn sizes_svg(hist: &[u64]) -> Result<String, PlotError> {
    let total = hist.iter().sum::<u64>().max(1) as f64;
    let shares: Vec<f64> = hist.iter().map(|&c| c as f64 / total).collect();
    let by_size = Chart::histogram(
        "(a) share of packets by IP length",
        "IP packet length (bytes)",
        "share",
        &[("", &shares)],
    );
    let x = by_size.x.range.clone();
    let mut cdf = Chart {
        size: by_size.size,
        ..Chart::new("(b) cumulative share", "IP packet length (bytes)", "CDF")
    }
    .with(Series::line(
        "",
        plot::cdf_steps(&shares, x.as_ref().map_or(1.0, |r| r.end)),
    ));
    cdf.x.range = x;
    cdf.y.range = Some(0.0..1.02);
    stack_svg(None, &[by_size, cdf])
}
