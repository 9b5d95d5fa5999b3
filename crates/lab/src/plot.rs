//! SVG plots for the lab report: line plots with min/max error bars, one line per series (capture rate or
//! CPU usage vs. data rate, seed 000 Figures 6.2–6.16), and scatter plots with reference lines (the ANOVA
//! visual tests). SVG only: plotters' bitmap backend needs system fonts to draw text; a PNG can be made
//! from the SVG with `rsvg-convert` ([`svg_to_png`]).

use std::io;
use std::ops::Range;
use std::path::Path;
use std::process::Command;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("plot `{0}` has no points to draw")]
    Empty(String),
    #[error("plot `{title}`: {what} is not a finite number")]
    NotFinite { title: String, what: String },
    #[error("plot `{0}`: a log-scale x axis needs x values > 0")]
    LogOfNonPositive(String),
    #[error("drawing plot `{title}` failed: {error}")]
    Draw { title: String, error: String },
}

/// One point of a line: the average with the min and max of the reruns (eq. 6.2–6.4) in y and,
/// optionally, in x (the data rate also varies between reruns, §6.2.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorPoint {
    pub x: f64,
    pub y: f64,
    pub y_min: f64,
    pub y_max: f64,
    pub x_min: f64,
    pub x_max: f64,
}

impl ErrorPoint {
    /// A point without error bars.
    pub fn new(x: f64, y: f64) -> ErrorPoint {
        ErrorPoint {
            x,
            y,
            y_min: y,
            y_max: y,
            x_min: x,
            x_max: x,
        }
    }

    /// Average, min and max of the reruns of one level: `xs[i]`, `ys[i]` are rerun i's x and y.
    /// None if there are no reruns.
    pub fn from_reruns(xs: &[f64], ys: &[f64]) -> Option<ErrorPoint> {
        let (x_min, x, x_max) = min_avg_max(xs)?;
        let (y_min, y, y_max) = min_avg_max(ys)?;
        Some(ErrorPoint {
            x,
            y,
            y_min,
            y_max,
            x_min,
            x_max,
        })
    }
}

/// (min, average, max) of the values; None if empty.
pub fn min_avg_max(v: &[f64]) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((min, v.iter().sum::<f64>() / v.len() as f64, max))
}

/// A named line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<ErrorPoint>,
}

/// A line plot: one line per series, error bars from min to max.
#[derive(Clone, Debug, PartialEq)]
pub struct LinePlot {
    pub title: String,
    /// With the unit, e.g. "data rate (Mbit/s)".
    pub x_label: String,
    /// With the unit, e.g. "capture rate (%)".
    pub y_label: String,
    pub series: Vec<Series>,
    /// Fixed y range (e.g. 0..100 for percentages); None fits the data.
    pub y_range: Option<Range<f64>>,
    /// Fixed x range; None fits the data.
    pub x_range: Option<Range<f64>>,
    /// Logarithmic x axis (buffer sizes).
    pub x_log: bool,
    /// Names of a categorical x axis: x = 1, 2, … is drawn with these names (filters, loads). Empty: numeric.
    pub x_names: Vec<String>,
    /// Size in pixels.
    pub size: (u32, u32),
}

impl LinePlot {
    /// A plot with the default size (900 × 560) and ranges fitted to the data.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> LinePlot {
        LinePlot {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            y_range: None,
            x_range: None,
            x_log: false,
            x_names: Vec::new(),
            size: (900, 560),
        }
    }

    /// Add a series.
    pub fn series(mut self, name: &str, points: Vec<ErrorPoint>) -> LinePlot {
        self.series.push(Series {
            name: name.into(),
            points,
        });
        self
    }
}

/// Colour-blind-safe colours (Okabe & Ito) in series order; the marker shape changes too, so the lines
/// stay apart in grey print.
const COLORS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];
const SHAPES: usize = 4;
const FONT: &str = "sans-serif";

/// Draw a line plot as an SVG document.
pub fn line_plot_svg(p: &LinePlot) -> Result<String, PlotError> {
    let points: Vec<&ErrorPoint> = p.series.iter().flat_map(|s| &s.points).collect();
    if points.is_empty() {
        return Err(PlotError::Empty(p.title.clone()));
    }
    for pt in &points {
        let values = [pt.x, pt.y, pt.y_min, pt.y_max, pt.x_min, pt.x_max];
        if values.iter().any(|v| !v.is_finite()) {
            return Err(PlotError::NotFinite {
                title: p.title.clone(),
                what: format!("a point near x = {}", pt.x),
            });
        }
    }
    let x_range = p.x_range.clone().unwrap_or_else(|| {
        let lo = points.iter().map(|q| q.x_min).fold(f64::INFINITY, f64::min);
        let hi = points
            .iter()
            .map(|q| q.x_max)
            .fold(f64::NEG_INFINITY, f64::max);
        if p.x_log {
            lo / 1.3..hi * 1.3
        } else {
            pad(lo, hi)
        }
    });
    let y_range = p.y_range.clone().unwrap_or_else(|| {
        let lo = points.iter().map(|q| q.y_min).fold(f64::INFINITY, f64::min);
        let hi = points
            .iter()
            .map(|q| q.y_max)
            .fold(f64::NEG_INFINITY, f64::max);
        pad(lo, hi)
    });
    let mut svg = String::new();
    let result = if !p.x_names.is_empty() {
        // Categories at 1, 2, …; x_tick prints their names and leaves ticks between them blank.
        let n = p.x_names.len() as f64;
        draw_lines(&mut svg, p, 0.5..n + 0.5, y_range)
    } else if p.x_log {
        if x_range.start <= 0.0 {
            return Err(PlotError::LogOfNonPositive(p.title.clone()));
        }
        // Ticks at the measured x values (buffer sizes are powers of two, not of ten) when they are few.
        let mut xs: Vec<f64> = points.iter().map(|q| q.x).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        if xs.len() <= 12 {
            draw_lines(
                &mut svg,
                p,
                x_range.log_scale().with_key_points(xs),
                y_range,
            )
        } else {
            draw_lines(&mut svg, p, x_range.log_scale(), y_range)
        }
    } else {
        draw_lines(&mut svg, p, x_range, y_range)
    };
    result.map_err(|error| PlotError::Draw {
        title: p.title.clone(),
        error,
    })?;
    Ok(svg)
}

/// A range a little wider than [lo, hi] so points don't sit on the frame; a flat range gets ±1.
fn pad(lo: f64, hi: f64) -> Range<f64> {
    if hi <= lo {
        return lo - 1.0..hi + 1.0;
    }
    let m = (hi - lo) * 0.05;
    lo - m..hi + m
}

/// Tick labels: integers without decimals, others with up to 3 significant decimals.
fn tick(v: &f64) -> String {
    if *v == v.round() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// An x tick label: the category's name on a categorical axis, else the number.
fn x_tick(p: &LinePlot, v: &f64) -> String {
    if p.x_names.is_empty() {
        return tick(v);
    }
    let i = v.round();
    if (v - i).abs() < 1e-9 && i >= 1.0 && (i as usize) <= p.x_names.len() {
        p.x_names[i as usize - 1].clone()
    } else {
        String::new()
    }
}

fn draw_lines<X>(svg: &mut String, p: &LinePlot, x: X, y: Range<f64>) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let root = SVGBackend::with_string(svg, p.size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    // The legend gets its own column right of the plot, so it never hides a line.
    let longest = p
        .series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    let legend_w = (longest as u32 * 8 + 60).min(p.size.0 / 3);
    let (plot_area, legend_area) = root.split_horizontally(p.size.0 - legend_w);

    let mut chart = ChartBuilder::on(&plot_area)
        .caption(&p.title, (FONT, 22))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    let x_fmt = |v: &f64| x_tick(p, v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&tick)
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(210, 210, 210));
    if !p.x_names.is_empty() {
        mesh.x_labels(p.x_names.len() + 1);
    }
    mesh.draw().map_err(|e| e.to_string())?;

    for (i, s) in p.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts = s.points.clone();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|q| (q.x, q.y)),
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        // Error bars only where min and max differ from the average.
        chart
            .draw_series(pts.iter().filter(|q| q.y_min < q.y_max).map(|q| {
                ErrorBar::new_vertical(q.x, q.y_min, q.y, q.y_max, color.stroke_width(1), 8)
            }))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(pts.iter().filter(|q| q.x_min < q.x_max).map(|q| {
                ErrorBar::new_horizontal(q.y, q.x_min, q.x, q.x_max, color.stroke_width(1), 8)
            }))
            .map_err(|e| e.to_string())?;
        for q in &pts {
            chart
                .plotting_area()
                .draw(&marker(i, (q.x, q.y), color))
                .map_err(|e| e.to_string())?;
        }
    }

    // Legend: line, marker and name per series, top-aligned with the plot.
    for (i, s) in p.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let y = 60 + 26 * i as i32;
        legend_area
            .draw(&PathElement::new(
                vec![(4, y), (34, y)],
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        legend_area
            .draw(&marker(i, (19, y), color))
            .map_err(|e| e.to_string())?;
        legend_area
            .draw(&Text::new(
                s.name.clone(),
                (42, y - 8),
                (FONT, 15).into_font(),
            ))
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Series i's marker at `at`: filled circle, triangle, square, cross (then again).
fn marker<'a, DB: DrawingBackend + 'a, C: Clone + 'static>(
    i: usize,
    at: C,
    color: RGBColor,
) -> DynElement<'a, DB, C> {
    let style = color.filled();
    match i % SHAPES {
        0 => (EmptyElement::at(at) + Circle::new((0, 0), 4, style)).into_dyn(),
        1 => (EmptyElement::at(at) + TriangleMarker::new((0, 0), 6, style)).into_dyn(),
        2 => (EmptyElement::at(at) + Rectangle::new([(-4, -4), (4, 4)], style)).into_dyn(),
        _ => (EmptyElement::at(at) + Cross::new((0, 0), 5, color.stroke_width(2))).into_dyn(),
    }
}

/// A scatter plot with optional straight reference lines (ANOVA: residuals vs. predicted with the
/// zero line; normal Q-Q with the line of a normal distribution).
#[derive(Clone, Debug, PartialEq)]
pub struct ScatterPlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed reference lines, each with a legend text.
    pub lines: Vec<RefLine>,
    pub size: (u32, u32),
}

/// A straight dashed line from one point to another, named in the legend.
#[derive(Clone, Debug, PartialEq)]
pub struct RefLine {
    pub from: (f64, f64),
    pub to: (f64, f64),
    pub label: String,
}

/// Draw a scatter plot as an SVG document.
pub fn scatter_svg(p: &ScatterPlot) -> Result<String, PlotError> {
    if p.points.is_empty() {
        return Err(PlotError::Empty(p.title.clone()));
    }
    if p.points
        .iter()
        .any(|(x, y)| !x.is_finite() || !y.is_finite())
    {
        return Err(PlotError::NotFinite {
            title: p.title.clone(),
            what: "a point".into(),
        });
    }
    // The reference lines are part of the picture: the ranges include their ends.
    let ends = p.lines.iter().flat_map(|l| [l.from, l.to]);
    let all = p.points.iter().copied().chain(ends);
    let (x_lo, x_hi) = bounds(all.clone().map(|q| q.0));
    let (y_lo, y_hi) = bounds(all.map(|q| q.1));
    let mut svg = String::new();
    draw_scatter(&mut svg, p, pad(x_lo, x_hi), pad(y_lo, y_hi)).map_err(|error| {
        PlotError::Draw {
            title: p.title.clone(),
            error,
        }
    })?;
    Ok(svg)
}

fn bounds(v: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    (
        v.clone().fold(f64::INFINITY, f64::min),
        v.fold(f64::NEG_INFINITY, f64::max),
    )
}

fn draw_scatter(
    svg: &mut String,
    p: &ScatterPlot,
    x: Range<f64>,
    y: Range<f64>,
) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, p.size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart: ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>> =
        ChartBuilder::on(&root)
            .caption(&p.title, (FONT, 20))
            .margin(12)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(x, y)
            .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 12))
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(210, 210, 210))
        .draw()
        .map_err(|e| e.to_string())?;
    let color = COLORS[0];
    chart
        .draw_series(
            p.points
                .iter()
                .map(|&q| Circle::new(q, 3, color.mix(0.7).filled())),
        )
        .map_err(|e| e.to_string())?;
    for (i, line) in p.lines.iter().enumerate() {
        let c = COLORS[(i + 1) % COLORS.len()];
        chart
            .draw_series(DashedLineSeries::new(
                [line.from, line.to],
                6,
                4,
                c.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?
            .label(line.label.as_str())
            .legend(move |(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 24, ly)], c.stroke_width(2))
            });
    }
    if !p.lines.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(160, 160, 160))
            .label_font((FONT, 13))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Write an SVG document to a file.
pub fn write_svg(path: &Path, svg: &str) -> io::Result<()> {
    std::fs::write(path, svg)
}

/// Convert an SVG file to PNG with `rsvg-convert` (Debian: librsvg2-bin). An error says how to install it.
pub fn svg_to_png(svg: &Path, png: &Path) -> io::Result<()> {
    let out = Command::new("rsvg-convert")
        .arg("-o")
        .arg(png)
        .arg(svg)
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("rsvg-convert not runnable ({e}); install it with `apt-get install librsvg2-bin`"),
            )
        })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "rsvg-convert {}: {}",
            svg.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_reruns_is_eq_6_2_to_6_4() {
        // Seven reruns of one inter-packet gap: capture rates and data rates.
        let rate = [91.0, 95.0, 99.0, 97.0, 93.0, 96.0, 94.0];
        let mbit = [500.0, 510.0, 490.0, 505.0, 495.0, 500.0, 500.0];
        let p = ErrorPoint::from_reruns(&mbit, &rate).unwrap();
        assert_eq!((p.y_min, p.y_max), (91.0, 99.0));
        assert_eq!(p.y, 665.0 / 7.0);
        assert_eq!((p.x_min, p.x, p.x_max), (490.0, 500.0, 510.0));
        assert!(ErrorPoint::from_reruns(&[], &[]).is_none());
    }

    fn sample_plot() -> LinePlot {
        let mk = |base: f64, drop: f64| -> Vec<ErrorPoint> {
            [100.0, 300.0, 500.0, 700.0, 900.0]
                .iter()
                .map(|&x| {
                    let y = (base - drop * x / 900.0).max(0.0);
                    ErrorPoint {
                        x,
                        y,
                        y_min: (y - 3.0).max(0.0),
                        y_max: (y + 2.0).min(100.0),
                        x_min: x - 10.0,
                        x_max: x + 10.0,
                    }
                })
                .collect()
        };
        let mut p = LinePlot::new(
            "Capture rate vs. data rate (single CPU)",
            "data rate (Mbit/s)",
            "capture rate (% of generated packets)",
        )
        .series("ringcap ring", mk(100.0, 5.0))
        .series("ringcap copy", mk(100.0, 30.0))
        .series("tcpdump", mk(100.0, 45.0))
        .series("netsniff-ng", mk(99.0, 15.0))
        .series("tcpdump | gzip -1", mk(95.0, 80.0));
        p.y_range = Some(0.0..105.0);
        p
    }

    #[test]
    fn line_plot_has_title_labels_legend_and_bars() {
        let svg = line_plot_svg(&sample_plot()).unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "Capture rate vs. data rate (single CPU)",
            "data rate (Mbit/s)",
            "capture rate (% of generated packets)",
            "ringcap ring",
            "netsniff-ng",
            "tcpdump | gzip -1",
        ] {
            let escaped = text.replace('&', "&amp;");
            assert!(svg.contains(&escaped), "missing `{text}`");
        }
        // 5 series × 5 points: one polyline per series plus 2 × 25 error bars (each a polyline/line set).
        assert!(svg.matches("<polyline").count() >= 5);
        if std::env::var_os("RINGCAP_PLOT_OUT").is_some() {
            let dir = std::env::var("RINGCAP_PLOT_OUT").unwrap();
            std::fs::write(format!("{dir}/line.svg"), &svg).unwrap();
            let mut log = sample_plot();
            log.title = "Capture rate vs. buffer size".into();
            log.x_label = "buffer size (KiB)".into();
            log.x_log = true;
            for s in &mut log.series {
                for (i, q) in s.points.iter_mut().enumerate() {
                    let x = 64.0 * 4f64.powi(i as i32);
                    *q = ErrorPoint {
                        x,
                        x_min: x,
                        x_max: x,
                        ..*q
                    };
                }
            }
            std::fs::write(format!("{dir}/log.svg"), line_plot_svg(&log).unwrap()).unwrap();
        }
    }

    #[test]
    fn log_axis_and_bad_points_are_handled() {
        let mut p = sample_plot();
        p.x_log = true;
        assert!(line_plot_svg(&p).is_ok());
        p.x_range = Some(0.0..1000.0);
        assert!(matches!(
            line_plot_svg(&p),
            Err(PlotError::LogOfNonPositive(_))
        ));
        let p = LinePlot::new("empty", "x", "y");
        assert_eq!(
            line_plot_svg(&p).unwrap_err().to_string(),
            "plot `empty` has no points to draw"
        );
        let p = LinePlot::new("nan", "x", "y").series("a", vec![ErrorPoint::new(1.0, f64::NAN)]);
        assert!(matches!(
            line_plot_svg(&p),
            Err(PlotError::NotFinite { .. })
        ));
    }

    #[test]
    fn scatter_draws_points_and_reference_lines() {
        let p = ScatterPlot {
            title: "Residuals vs. predicted".into(),
            x_label: "predicted response".into(),
            y_label: "residual".into(),
            points: vec![(1.0, 0.5), (2.0, -0.5), (3.0, 0.1)],
            lines: vec![RefLine {
                from: (1.0, 0.0),
                to: (3.0, 0.0),
                label: "zero".into(),
            }],
            size: (600, 450),
        };
        let svg = scatter_svg(&p).unwrap();
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("Residuals vs. predicted") && svg.contains("zero"));
    }

    /// PNG for reports: needs rsvg-convert (apt-get install librsvg2-bin); without it the error says so.
    #[test]
    fn svg_to_png_converts_or_says_what_to_install() {
        let dir = std::env::temp_dir().join(format!("lab-plot-png-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let svg = dir.join("p.svg");
        let png = dir.join("p.png");
        write_svg(&svg, &line_plot_svg(&sample_plot()).unwrap()).unwrap();
        match svg_to_png(&svg, &png) {
            Ok(()) => {
                let bytes = std::fs::read(&png).unwrap();
                assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
                // IHDR width and height: the plot's size in pixels.
                assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 900);
                assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 560);
            }
            Err(e) => assert!(
                e.to_string().contains("apt-get install librsvg2-bin"),
                "{e}"
            ),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(&20.0), "20");
        assert_eq!(tick(&0.25), "0.25");
        assert_eq!(tick(&(1.0 / 3.0)), "0.333");
    }
}
