//! Drawing charts with plotters' SVG backend.

use std::ops::Range;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_backend::DrawingErrorKind;

use crate::axis::bounds;
use crate::chart::{Chart, Legend, Mark};
use crate::PlotError;

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
/// Height of a stack's title.
const TITLE_H: u32 = 40;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn<'a> = Result<(), Box<dyn std::error::Error + 'a>>;

/// Draw one chart as an SVG document.
pub fn chart_svg(c: &Chart) -> Result<String, PlotError> {
    stack_svg(None, std::slice::from_ref(c))
}

/// Draw charts one above the other, under a title if given, as one SVG document: as wide as the widest
/// chart, as high as all of them (+ 40 pixels for the title).
pub fn stack_svg(title: Option<&str>, charts: &[Chart]) -> Result<String, PlotError> {
    let ranges = charts.iter().map(ranges).collect::<Result<Vec<_>, _>>()?;
    let width = charts.iter().map(|c| c.size.0).max().unwrap_or(1);
    let height = charts.iter().map(|c| c.size.1).sum::<u32>() + title.map_or(0, |_| TITLE_H);
    let caption = if charts.len() > 1 { 16 } else { 20 };
    let mut svg = String::new();
    let drawn = (|| -> Drawn<'_> {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut rest = match title {
            Some(t) => root.titled(t, (FONT, 20))?,
            None => root.clone(),
        };
        for (c, (x, y)) in charts.iter().zip(ranges) {
            let (area, below) = rest.split_vertically(c.size.1);
            draw_x(&area, c, x, y, caption)?;
            rest = below;
        }
        root.present()?;
        Ok(())
    })();
    drawn.map_err(|e| PlotError::Draw {
        title: title
            .or(charts.first().map(|c| c.title.as_str()))
            .unwrap_or_default()
            .to_string(),
        error: e.to_string(),
    })?;
    // Say in the document how much data it draws, so a test can fail on a plot that has axes
    // and a legend but nothing in them, whichever report it belongs to.
    let marks: usize = charts.iter().map(data_marks).sum();
    if let Some(end) = svg
        .find("<svg")
        .and_then(|at| svg[at..].find('>').map(|e| at + e + 1))
    {
        svg.insert_str(end, &format!("\n<desc>{DATA_MARKS} {marks}</desc>"));
    }
    Ok(svg)
}

/// The words before the count in a plot's `<desc>`.
const DATA_MARKS: &str = "data marks drawn:";

/// Marks that show data: a marker per point, a segment per pair of points of a line (a line
/// through one point draws nothing). Reference and labelled lines are not data.
fn data_marks(c: &Chart) -> usize {
    c.series
        .iter()
        .map(|s| match s.mark {
            Mark::Line => s.points.len().saturating_sub(1),
            Mark::Points | Mark::LinePoints => s.points.len(),
        })
        .sum()
}

/// The data marks an SVG made by [`stack_svg`] or [`chart_svg`] draws; `None` for other SVGs.
pub fn drawn_data_marks(svg: &str) -> Option<usize> {
    let at = svg.find(DATA_MARKS)? + DATA_MARKS.len();
    svg[at..].split('<').next()?.trim().parse().ok()
}

/// The chart's x and y ranges, after checking that its points can be drawn.
fn ranges(c: &Chart) -> Result<(Range<f64>, Range<f64>), PlotError> {
    let points: Vec<_> = c.series.iter().flat_map(|s| &s.points).collect();
    if let Some(h) = c.hlines.iter().find(|h| !h.y.is_finite()) {
        return Err(PlotError::NotFinite {
            title: c.title.clone(),
            what: format!("the line `{}`", h.label),
        });
    }
    for pt in &points {
        let values = [pt.x, pt.y, pt.y_min, pt.y_max, pt.x_min, pt.x_max];
        if values.iter().any(|v| !v.is_finite()) {
            return Err(PlotError::NotFinite {
                title: c.title.clone(),
                what: format!("a point near x = {}", pt.x),
            });
        }
    }
    if points.is_empty() && (c.x.fitted() || c.y.fitted()) {
        return Err(PlotError::Empty(c.title.clone()));
    }
    // The reference lines are part of the picture: the ranges include their ends.
    let ends = c.lines.iter().flat_map(|l| [l.from, l.to]);
    let (x_lo, x_hi) = bounds(
        points
            .iter()
            .flat_map(|q| [q.x_min, q.x_max])
            .chain(ends.clone().map(|e| e.0)),
    );
    let (y_lo, y_hi) = bounds(
        points
            .iter()
            .flat_map(|q| [q.y_min, q.y_max])
            .chain(ends.map(|e| e.1))
            .chain(c.hlines.iter().map(|h| h.y)),
    );
    let (x, y) = (c.x.fit(x_lo, x_hi), c.y.fit(y_lo, y_hi));
    if (c.x.is_log() && x.start <= 0.0) || (c.y.is_log() && y.start <= 0.0) {
        return Err(PlotError::LogOfNonPositive(c.title.clone()));
    }
    Ok((x, y))
}

/// Pick the x coordinate: linear, or log with ticks at the measured x values (buffer sizes are powers of
/// two, not of ten) when they are few.
fn draw_x<'a>(area: &Area<'a>, c: &Chart, x: Range<f64>, y: Range<f64>, caption: u32) -> Drawn<'a> {
    if !c.x.is_log() {
        return draw_y(area, c, x, y, caption);
    }
    let mut xs: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| &s.points)
        .map(|q| q.x)
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() <= 12 {
        draw_y(area, c, x.log_scale().with_key_points(xs), y, caption)
    } else {
        draw_y(area, c, x.log_scale(), y, caption)
    }
}

fn draw_y<'a, X>(area: &Area<'a>, c: &Chart, x: X, y: Range<f64>, caption: u32) -> Drawn<'a>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    if c.y.is_log() {
        draw(area, c, x, y.log_scale(), caption)
    } else {
        draw(area, c, x, y, caption)
    }
}

/// Series (or reference line) i's colour.
fn series_color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// A legend entry: the name, and what it shows in which colour.
struct Entry<'a> {
    name: &'a str,
    index: usize,
    mark: Mark,
}

fn draw<'a, X, Y>(area: &Area<'a>, c: &Chart, x: X, y: Y, caption: u32) -> Drawn<'a>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    // Series first, then the reference lines, each with the next colour.
    let series = c.series.iter().enumerate().map(|(index, s)| Entry {
        name: &s.name,
        index,
        mark: s.mark,
    });
    let lines = c.lines.iter().enumerate().map(|(i, l)| Entry {
        name: &l.label,
        index: c.series.len() + i,
        mark: Mark::Line,
    });
    let hlines = c.hlines.iter().enumerate().map(|(i, h)| Entry {
        name: &h.label,
        index: c.series.len() + c.lines.len() + i,
        mark: Mark::Line,
    });
    let legend: Vec<Entry> = series
        .chain(lines)
        .chain(hlines)
        .filter(|e| !e.name.is_empty())
        .collect();

    // The legend column is split off the right, so it never hides a line.
    let (plot_area, column) = if c.legend == Legend::Right && !legend.is_empty() {
        let longest = legend
            .iter()
            .map(|e| e.name.chars().count())
            .max()
            .unwrap_or(0);
        let w = (longest as u32 * 8 + 60).min(c.size.0 / 3);
        let (p, l) = area.split_horizontally(area.dim_in_pixel().0 - w);
        (p, Some(l))
    } else {
        (area.clone(), None)
    };

    let mut chart = ChartBuilder::on(&plot_area)
        .caption(&c.title, (FONT, caption))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)?;
    let x_fmt = |v: &f64| c.x.tick_label(*v);
    let y_fmt = |v: &f64| c.y.tick_label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&c.x.label)
        .y_desc(&c.y.label)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(210, 210, 210));
    if !c.x.names.is_empty() {
        mesh.x_labels(c.x.names.len() + 1);
    }
    mesh.draw()?;

    for (i, s) in c.series.iter().enumerate() {
        let color = series_color(i);
        let mut pts = s.points.clone();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        let anno = match s.mark {
            Mark::Points => chart.draw_series(pts.iter().map(|q| Marker::new(i, (q.x, q.y), 3)))?,
            Mark::Line | Mark::LinePoints => chart.draw_series(LineSeries::new(
                pts.iter().map(|q| (q.x, q.y)),
                color.stroke_width(2),
            ))?,
        };
        if !s.name.is_empty() {
            let anno = anno.label(s.name.as_str());
            match s.mark {
                Mark::Line => anno.legend(move |at| line_sample(color, at)),
                _ => anno.legend(move |(x, y)| Marker::new(i, (x + 12, y), 4)),
            };
        }
        // Error bars only where min and max differ from the average.
        chart.draw_series(pts.iter().filter(|q| q.y_min < q.y_max).map(|q| {
            ErrorBar::new_vertical(q.x, q.y_min, q.y, q.y_max, color.stroke_width(1), 8)
        }))?;
        chart.draw_series(pts.iter().filter(|q| q.x_min < q.x_max).map(|q| {
            ErrorBar::new_horizontal(q.y, q.x_min, q.x, q.x_max, color.stroke_width(1), 8)
        }))?;
        if s.mark == Mark::LinePoints {
            chart.draw_series(pts.iter().map(|q| Marker::new(i, (q.x, q.y), 4)))?;
        }
    }
    for (i, l) in c.lines.iter().enumerate() {
        let color = series_color(c.series.len() + i);
        let anno = chart.draw_series(DashedLineSeries::new(
            [l.from, l.to],
            6,
            4,
            color.stroke_width(2),
        ))?;
        if !l.label.is_empty() {
            anno.label(l.label.as_str())
                .legend(move |at| line_sample(color, at));
        }
    }

    // Across the x range drawn, the label above the right end so it reads without the legend.
    let (x_lo, x_hi) = (chart.x_range().start, chart.x_range().end);
    for (i, h) in c.hlines.iter().enumerate() {
        let color = series_color(c.series.len() + c.lines.len() + i);
        let anno = chart.draw_series(DashedLineSeries::new(
            [(x_lo, h.y), (x_hi, h.y)],
            10,
            4,
            color.stroke_width(2),
        ))?;
        if !h.label.is_empty() {
            anno.label(h.label.as_str())
                .legend(move |at| line_sample(color, at));
            let style = (FONT, 13)
                .into_font()
                .color(&color)
                .pos(Pos::new(HPos::Right, VPos::Bottom));
            chart.draw_series(std::iter::once(Text::new(
                h.label.clone(),
                (x_hi, h.y),
                style,
            )))?;
        }
    }

    match column {
        // Line, marker and name per entry, top-aligned with the plot.
        Some(column) => {
            for (row, e) in legend.iter().enumerate() {
                let y = 60 + 26 * row as i32;
                if e.mark != Mark::Points {
                    column.draw(&line_sample(series_color(e.index), (7, y)))?;
                }
                if e.mark != Mark::Line {
                    column.draw(&Marker::new(e.index, (19, y), 4))?;
                }
                column.draw(&Text::new(
                    e.name.to_string(),
                    (42, y - 8),
                    (FONT, 15).into_font(),
                ))?;
            }
        }
        None if !legend.is_empty() => {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.9))
                .border_style(RGBColor(160, 160, 160))
                .label_font((FONT, 13))
                .draw()?;
        }
        None => {}
    }
    Ok(())
}

/// A line in the legend, from `at` (its left end) 24 pixels to the right.
fn line_sample(color: RGBColor, (x, y): (i32, i32)) -> PathElement<(i32, i32)> {
    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2))
}

/// Series i's marker of radius about `r` at `at`: filled circle, triangle, square, cross (then again).
/// One element type for all shapes, in the plot and in the legend.
struct Marker<C> {
    at: C,
    index: usize,
    r: i32,
}

impl<C> Marker<C> {
    fn new(index: usize, at: C, r: i32) -> Marker<C> {
        Marker { at, index, r }
    }
}

impl<'a, C: 'a> PointCollection<'a, C> for &'a Marker<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;
    fn point_iter(self) -> std::iter::Once<&'a C> {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Marker<C> {
    fn draw<I: Iterator<Item = (i32, i32)>>(
        &self,
        mut pos: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = pos.next() else {
            return Ok(());
        };
        let color = series_color(self.index);
        let r = self.r;
        match self.index % SHAPES {
            0 => backend.draw_circle((x, y), r as u32, &color.filled(), true),
            1 => {
                // Point up, corners at −90°, 30° and 150°.
                let size = f64::from(r * 3 / 2);
                let corners = [-90.0f64, 30.0, 150.0].map(|deg| {
                    let rad = deg.to_radians();
                    (
                        (rad.cos() * size + f64::from(x)).round() as i32,
                        (rad.sin() * size + f64::from(y)).round() as i32,
                    )
                });
                backend.fill_polygon(corners, &color.filled())
            }
            2 => backend.draw_rect((x - r, y - r), (x + r, y + r), &color.filled(), true),
            _ => {
                let (d, style) = (r + 1, color.stroke_width(2));
                backend.draw_line((x - d, y - d), (x + d, y + d), &style)?;
                backend.draw_line((x - d, y + d), (x + d, y - d), &style)
            }
        }
    }
}
