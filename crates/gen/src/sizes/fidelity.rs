//! How close a model is to its source: total-variation distance and the Figure 4.4 plot.

use plotters::prelude::*;

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
    let max_size = source
        .max_size()
        .max(model.iter().rposition(|&p| p > 0.0).map(|s| s as u16))
        .unwrap_or(1) as u32;
    let positive = |v: &[f64]| {
        v.iter()
            .enumerate()
            .filter(|(_, &p)| p > 0.0)
            .map(|(s, &p)| (s as u32, p))
            .collect::<Vec<_>>()
    };
    let src_pts = positive(&src);
    let model_pts = positive(model);
    let floor = src_pts
        .iter()
        .chain(&model_pts)
        .map(|&(_, p)| p)
        .fold(1.0f64, f64::min)
        / 2.0;

    // Ranked view: sizes by decreasing source share, model share at the same size.
    let mut ranked: Vec<(u32, f64, f64)> = src_pts
        .iter()
        .map(|&(s, p)| (s, p, model.get(s as usize).copied().unwrap_or(0.0)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));

    let mut svg = String::new();
    let draw = |svg: &mut String| -> std::result::Result<(), Box<dyn std::error::Error + '_>> {
        let root = SVGBackend::with_string(svg, (1000, 800)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 20))?;
        let (top, bottom) = root.split_vertically(400);

        let mut a = ChartBuilder::on(&top)
            .caption("(a) share by packet size", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(
                0u32..max_size + max_size / 40 + 2,
                (floor..1.0f64).log_scale(),
            )?;
        a.configure_mesh()
            .x_desc("IP packet size (bytes)")
            .y_desc("share of packets")
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .draw()?;
        a.draw_series(
            src_pts
                .iter()
                .map(|&(s, p)| Circle::new((s, p), 2, BLUE.filled())),
        )?
        .label("source")
        .legend(|(x, y)| Circle::new((x, y), 3, BLUE.filled()));
        a.draw_series(model_pts.iter().map(|&(s, p)| Cross::new((s, p), 3, RED)))?
            .label("model")
            .legend(|(x, y)| Cross::new((x, y), 3, RED));
        a.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;

        let n = ranked.len().max(1) as u32;
        let mut b = ChartBuilder::on(&bottom)
            .caption(
                "(b) sizes ranked by decreasing source share",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0u32..n, (floor..1.0f64).log_scale())?;
        b.configure_mesh()
            .x_desc("rank")
            .y_desc("share of packets")
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .draw()?;
        b.draw_series(LineSeries::new(
            ranked.iter().enumerate().map(|(r, x)| (r as u32, x.1)),
            BLUE.stroke_width(2),
        ))?
        .label("source")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
        b.draw_series(
            ranked
                .iter()
                .enumerate()
                .filter(|(_, x)| x.2 > 0.0)
                .map(|(r, x)| Cross::new((r as u32, x.2), 2, RED)),
        )?
        .label("model")
        .legend(|(x, y)| Cross::new((x, y), 3, RED));
        b.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw(&mut svg).map_err(|e| DistError::Model(format!("drawing the plot failed: {e}")))?;
    Ok(svg)
}
