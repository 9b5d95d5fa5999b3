//! How close a model is to its source: total-variation distance and the Figure 4.4 plot.

use plot::{Chart, Series};

use super::error::{DistError, Result};
use super::histogram::Histogram;
use super::sampler::SizeSampler;

/// Total-variation distance ½ Σ |p_i − q_i| of two dense probability vectors (0 = same,
/// 1 = disjoint). Missing tail entries count as 0.
pub fn tv_distance(p: &[f64], q: &[f64]) -> f64 {
    let n = p.len().max(q.len());
    let at = |v: &[f64], i: usize| v.get(i).copied().unwrap_or(0.0);
    0.5 * (0..n).map(|i| (at(p, i) - at(q, i)).abs()).sum::<f64>()
}

/// Total-variation distance between the shares of two histograms (e.g. a capture and its
/// source); 1 if either is empty.
pub fn histogram_tv(a: &Histogram, b: &Histogram) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    tv_distance(&a.probabilities(), &b.probabilities())
}

/// Draws `n` sizes from `sampler` into a histogram.
pub fn sample_histogram(sampler: &mut SizeSampler, n: u64) -> Histogram {
    let mut h = Histogram::new();
    for _ in 0..n {
        h.add_one(sampler.next_size());
    }
    h
}

/// Sampled total-variation distance: `n` draws from `sampler` against the `source` shares.
/// Even a perfect model shows sampling noise here, about √(1/(2πn)) · Σ √p_i.
pub fn sampled_tv(sampler: &mut SizeSampler, n: u64, source: &Histogram) -> f64 {
    histogram_tv(&sample_histogram(sampler, n), source)
}

/// An SVG of source vs model probability by size, after seed 000 Figure 4.4: (a) by size,
/// (b) sizes ranked by decreasing source share. Log y-axis; zero shares are not drawn.
pub fn plot_svg(source: &Histogram, model: &[f64], title: &str) -> Result<String> {
    let src = source.probabilities();
    let by_size = Chart::histogram(
        "(a) share by packet size",
        "IP packet size (bytes)",
        "share of packets",
        &[("source", &src), ("model", model)],
    );

    // Ranked view: sizes by decreasing source share, model share at the same size.
    let mut ranked: Vec<(usize, f64, f64)> = src
        .iter()
        .enumerate()
        .filter(|(_, &p)| p > 0.0)
        .map(|(s, &p)| (s, p, model.get(s).copied().unwrap_or(0.0)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let source_line = ranked.iter().enumerate().map(|(r, x)| (r as f64, x.1));
    let model_points = ranked
        .iter()
        .enumerate()
        .filter(|(_, x)| x.2 > 0.0)
        .map(|(r, x)| (r as f64, x.2));
    let mut by_rank = Chart {
        size: by_size.size,
        ..Chart::new("(b) sizes ranked by decreasing source share", "rank", "")
    }
    .with(Series::line("source", source_line))
    .with(Series::points("model", model_points));
    by_rank.x.range = Some(0.0..ranked.len().max(1) as f64);
    // The same log scale as (a).
    by_rank.y = by_size.y.clone();

    plot::stack_svg(Some(title), &[by_size, by_rank])
        .map_err(|e| DistError::Model(format!("drawing the plot failed: {e}")))
}
