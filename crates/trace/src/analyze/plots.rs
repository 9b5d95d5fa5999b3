//! SVG plots of the analyses (plotters' SVG backend: no fonts or C libraries needed).

use plotters::prelude::*;

use super::rates::{Burstiness, Minute};

type DrawResult<'a> = Result<(), Box<dyn std::error::Error + 'a>>;

fn to_string_result(r: DrawResult<'_>) -> Result<(), String> {
    r.map_err(|e| e.to_string())
}

/// Per-minute packet and bit rates (seed 002 Figure 1), minutes since the first one on x.
pub fn timeline_svg(minutes: &[Minute]) -> Result<String, String> {
    let t0 = minutes.first().map_or(0, |m| m.start_ns);
    let x = |m: &Minute| (m.start_ns - t0) as f64 / 60e9;
    let xmax = minutes.last().map_or(1.0, |m| x(m) + 1.0);
    let pmax = minutes
        .iter()
        .map(|m| m.max_pps_1s.max(m.pps))
        .fold(1.0, f64::max)
        * 1.1;
    let bmax = minutes.iter().map(|m| m.mbps).fold(0.001, f64::max) * 1.1;
    let mut svg = String::new();
    let draw = |svg: &mut String| -> DrawResult<'_> {
        let root = SVGBackend::with_string(svg, (1000, 700)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, bottom) = root.split_vertically(350);
        let mut a = ChartBuilder::on(&top)
            .caption("(a) packets per second, per minute", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..xmax, 0.0..pmax)?;
        a.configure_mesh()
            .x_desc("minutes")
            .y_desc("packets/s")
            .draw()?;
        a.draw_series(LineSeries::new(
            minutes.iter().map(|m| (x(m), m.max_pps_1s)),
            RED,
        ))?
        .label("max over 1 s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
        a.draw_series(LineSeries::new(minutes.iter().map(|m| (x(m), m.pps)), BLUE))?
            .label("minute average")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
        a.draw_series(LineSeries::new(
            minutes.iter().map(|m| (x(m), m.min_pps_1s)),
            GREEN,
        ))?
        .label("min over 1 s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN));
        a.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        let mut b = ChartBuilder::on(&bottom)
            .caption("(b) megabits per second, per minute", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..xmax, 0.0..bmax)?;
        b.configure_mesh().x_desc("minutes").y_desc("Mb/s").draw()?;
        b.draw_series(LineSeries::new(
            minutes.iter().map(|m| (x(m), m.mbps)),
            BLUE,
        ))?;
        root.present()?;
        Ok(())
    };
    to_string_result(draw(&mut svg))?;
    Ok(svg)
}

/// Rate percentiles against window size (seed 002 Figure 2), packets/s on a log axis.
pub fn burstiness_svg(bursts: &[Burstiness]) -> Result<String, String> {
    let names = ["100 µs", "1 ms", "10 ms", "100 ms", "1 s"];
    let ymax = bursts
        .iter()
        .flat_map(|b| b.pps.iter().copied())
        .fold(10.0, f64::max)
        * 2.0;
    // Percentile index into PERCENTILES: 1, 50, 99, 100 (max).
    let lines = [
        (1usize, "p1", GREEN),
        (4, "median", BLUE),
        (7, "p99", MAGENTA),
        (9, "max", RED),
    ];
    let mut svg = String::new();
    let draw = |svg: &mut String| -> DrawResult<'_> {
        let root = SVGBackend::with_string(svg, (1000, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        let n = bursts.len().max(1) as f64;
        let mut c = ChartBuilder::on(&root)
            .caption(
                "burstiness: packet rate percentiles by window",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.3..n - 0.7, (1.0..ymax).log_scale())?;
        c.configure_mesh()
            .x_labels(bursts.len())
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() < 0.01 && i >= 0.0 {
                    names.get(i as usize).copied().unwrap_or("").to_string()
                } else {
                    String::new()
                }
            })
            .x_desc("window")
            .y_desc("packets/s")
            .draw()?;
        for (idx, name, color) in lines {
            let pts: Vec<(f64, f64)> = bursts
                .iter()
                .enumerate()
                .map(|(i, b)| (i as f64, b.pps[idx].max(1.0)))
                .collect();
            c.draw_series(LineSeries::new(pts.clone(), color))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            c.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    to_string_result(draw(&mut svg))?;
    Ok(svg)
}

/// IP length distribution: (a) share by size, log y; (b) cumulative share of packets by size.
pub fn sizes_svg(hist: &[u64]) -> Result<String, String> {
    let total: u64 = hist.iter().sum();
    let total = total.max(1) as f64;
    let pts: Vec<(u32, f64)> = hist
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(s, &c)| (s as u32, c as f64 / total))
        .collect();
    let xmax = pts.last().map_or(1, |p| p.0) + 10;
    let floor = pts.iter().map(|p| p.1).fold(1.0, f64::min) / 2.0;
    let mut cum = 0.0;
    let cdf: Vec<(u32, f64)> = pts
        .iter()
        .map(|&(s, p)| {
            cum += p;
            (s, cum)
        })
        .collect();
    let mut svg = String::new();
    let draw = |svg: &mut String| -> DrawResult<'_> {
        let root = SVGBackend::with_string(svg, (1000, 700)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, bottom) = root.split_vertically(350);
        let mut a = ChartBuilder::on(&top)
            .caption("(a) share of packets by IP length", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0u32..xmax, (floor..1.0f64).log_scale())?;
        a.configure_mesh()
            .x_desc("IP packet length (bytes)")
            .y_desc("share")
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .draw()?;
        a.draw_series(pts.iter().map(|&p| Circle::new(p, 2, BLUE.filled())))?;
        let mut b = ChartBuilder::on(&bottom)
            .caption("(b) cumulative share", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0u32..xmax, 0.0..1.02f64)?;
        b.configure_mesh()
            .x_desc("IP packet length (bytes)")
            .y_desc("CDF")
            .draw()?;
        let mut steps = Vec::with_capacity(cdf.len() * 2 + 1);
        let mut prev = 0.0;
        for &(s, c) in &cdf {
            steps.push((s, prev));
            steps.push((s, c));
            prev = c;
        }
        steps.push((xmax, prev));
        b.draw_series(LineSeries::new(steps, BLUE))?;
        root.present()?;
        Ok(())
    };
    to_string_result(draw(&mut svg))?;
    Ok(svg)
}
