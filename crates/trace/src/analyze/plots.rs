//! SVG plots of the analyses: the data of each, drawn by the `plot` crate.

use plot::{chart_svg, stack_svg, Chart, ErrorPoint, PlotError, Series};

use super::rates::{Bin, Burstiness};

/// Packet and bit rates per bin (seed 002 Figure 1: per minute; shorter traces get finer bins),
/// time since the first bin on x.
pub fn timeline_svg(bins: &[Bin]) -> Result<String, PlotError> {
    let starts: Vec<u64> = bins.iter().map(|b| b.start_ns).collect();
    let values = |f: fn(&Bin) -> f64| bins.iter().map(f).collect::<Vec<f64>>();
    let (width, sub) = bins
        .first()
        .map_or((60_000_000_000, 1_000_000_000), |b| (b.width_ns, b.sub_ns));
    let (per, average) = (span_name(width), format!("{} average", span_name(width)));
    let pps = Chart::time_series(
        &format!("(a) packets per second, per {per}"),
        "packets/s",
        &starts,
        width,
        &[
            (
                &format!("max over {}", span_name(sub)),
                values(|b| b.max_pps),
            ),
            (&average, values(|b| b.pps)),
            (
                &format!("min over {}", span_name(sub)),
                values(|b| b.min_pps),
            ),
        ],
    );
    let mbps = Chart::time_series(
        &format!("(b) megabits per second, per {per}"),
        "Mb/s",
        &starts,
        width,
        // Named like (a)'s average, so both legends are as wide and the bins line up.
        &[(&average, values(|b| b.mbps))],
    );
    stack_svg(None, &[pps, mbps])
}

/// "minute", "second", "100 ms", "10 ms": how the timeline names a bin or sub-window.
pub fn span_name(ns: u64) -> String {
    match ns {
        60_000_000_000 => "minute".into(),
        n if n >= 1_000_000_000 => format!("{} s", n / 1_000_000_000),
        n => format!("{} ms", n / 1_000_000),
    }
}

/// Rate percentiles against window size (seed 002 Figure 2), packets/s on a log axis.
pub fn burstiness_svg(bursts: &[Burstiness]) -> Result<String, PlotError> {
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
    c.x.names = bursts.iter().map(|b| units::seconds(b.window_s)).collect();
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
