//! What a chart shows: points, series, reference lines, axes; with a constructor per kind of chart.

use crate::axis::{bounds, Axis};

/// One point: the average with the min and max of the reruns (seed 000 eq. 6.2–6.4) in y and,
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
    let (min, max) = bounds(v.iter().copied());
    Some((min, v.iter().sum::<f64>() / v.len() as f64, max))
}

/// How a series is drawn. Error bars are drawn for any point whose min and max differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A line through the points (sorted by x).
    Line,
    /// A marker per point, no line (scatter, histogram).
    Points,
    /// A line with a marker per point: the measurement plots.
    LinePoints,
}

/// A named series; an empty name keeps it out of the legend.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<ErrorPoint>,
    pub mark: Mark,
}

impl Series {
    /// A line with markers and error bars: one measurement per point.
    pub fn new(name: &str, points: Vec<ErrorPoint>) -> Series {
        Series {
            name: name.into(),
            points,
            mark: Mark::LinePoints,
        }
    }

    /// A plain line through (x, y) points.
    pub fn line(name: &str, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
        Series::of(Mark::Line, name, points)
    }

    /// Markers at (x, y) points.
    pub fn points(name: &str, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
        Series::of(Mark::Points, name, points)
    }

    fn of(mark: Mark, name: &str, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points: points
                .into_iter()
                .map(|(x, y)| ErrorPoint::new(x, y))
                .collect(),
            mark,
        }
    }
}

/// A straight dashed line from one point to another, named in the legend.
#[derive(Clone, Debug, PartialEq)]
pub struct RefLine {
    pub from: (f64, f64),
    pub to: (f64, f64),
    pub label: String,
}

/// A horizontal line at a constant y across the whole plot, its label written above its right end and in
/// the legend: a demand or a limit the series are read against (seed 000 Fig 6.13's demand lines).
#[derive(Clone, Debug, PartialEq)]
pub struct HLine {
    pub y: f64,
    pub label: String,
}

/// Where the legend goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legend {
    /// A column right of the plot: never hides a point. Charts stacked on one x axis stay aligned if
    /// each has a legend with the same longest name.
    Right,
    /// A box in the plot's upper left corner (scatter plots, whose corners are mostly empty).
    UpperLeft,
}

/// One chart: a title, two axes, the series (colours and marker shapes in series order), the dashed
/// reference lines and the horizontal lines (coloured after the series).
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub lines: Vec<RefLine>,
    /// Horizontal lines across the plot (coloured after the reference lines); the y axis includes them.
    pub hlines: Vec<HLine>,
    pub legend: Legend,
    /// Size in pixels.
    pub size: (u32, u32),
}

impl Chart {
    /// A line plot with the default size (900 × 560), axes fitted to the data and the legend on the right.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.into(),
            x: Axis::new(x_label),
            y: Axis::new(y_label),
            series: Vec::new(),
            lines: Vec::new(),
            hlines: Vec::new(),
            legend: Legend::Right,
            size: (900, 560),
        }
    }

    /// Add a measured series (line, markers, error bars).
    pub fn series(self, name: &str, points: Vec<ErrorPoint>) -> Chart {
        self.with(Series::new(name, points))
    }

    /// Add a series.
    pub fn with(mut self, s: Series) -> Chart {
        self.series.push(s);
        self
    }

    /// Add a dashed reference line.
    pub fn line(mut self, l: RefLine) -> Chart {
        self.lines.push(l);
        self
    }

    /// Add a labelled horizontal line at `y` across the plot.
    pub fn hline(mut self, y: f64, label: &str) -> Chart {
        self.hlines.push(HLine {
            y,
            label: label.into(),
        });
        self
    }

    /// A scatter plot of the points (one unnamed series); add reference lines with [`Chart::line`].
    /// The axes fit the points and the lines' ends.
    pub fn scatter(title: &str, x_label: &str, y_label: &str, points: Vec<(f64, f64)>) -> Chart {
        Chart {
            legend: Legend::UpperLeft,
            ..Chart::new(title, x_label, y_label)
        }
        .with(Series::points("", points))
    }

    /// Shares by bin (`shares[i]`: the share of bin i, e.g. packets of size i), one series of markers per
    /// named distribution, on a log y axis from half the smallest share to 1; empty bins are not drawn.
    /// 1000 × 400 pixels.
    pub fn histogram(title: &str, x_label: &str, y_label: &str, dists: &[(&str, &[f64])]) -> Chart {
        let mut c = Chart {
            size: (1000, 400),
            ..Chart::new(title, x_label, y_label)
        };
        for (name, shares) in dists {
            let positive = shares.iter().enumerate().filter(|(_, &p)| p > 0.0);
            c = c.with(Series::points(name, positive.map(|(i, &p)| (i as f64, p))));
        }
        let points = || c.series.iter().flat_map(|s| &s.points);
        let last = points().map(|q| q.x).fold(1.0, f64::max);
        let floor = points().map(|q| q.y).fold(1.0, f64::min) / 2.0;
        c.x.range = Some(0.0..last + (last / 40.0).floor() + 2.0);
        c.y.range = Some(floor..1.0);
        c.y.log = true;
        c
    }

    /// Binned values against time since the first bin: `start_ns[i]` is the start of bin i, each
    /// `bin_ns` long, and each line has a value per bin. x in minutes for bins of a minute or more,
    /// else in seconds. y from 0; 1000 × 350 pixels.
    pub fn time_series(
        title: &str,
        y_label: &str,
        start_ns: &[u64],
        bin_ns: u64,
        lines: &[(&str, Vec<f64>)],
    ) -> Chart {
        let (unit_ns, unit) = if bin_ns >= 60_000_000_000 {
            (60e9, "minutes")
        } else {
            (1e9, "seconds")
        };
        let t0 = start_ns.first().copied().unwrap_or(0);
        let xs: Vec<f64> = start_ns
            .iter()
            .map(|&t| (t - t0) as f64 / unit_ns)
            .collect();
        let mut c = Chart {
            size: (1000, 350),
            ..Chart::new(title, unit, y_label)
        };
        for (name, values) in lines {
            let points = xs.iter().copied().zip(values.iter().copied());
            // A trace of one bin has one value per line: a line through one point draws nothing,
            // so it gets a marker.
            c = c.with(if xs.len() == 1 {
                Series::new(name, points.map(|(x, y)| ErrorPoint::new(x, y)).collect())
            } else {
                Series::line(name, points)
            });
        }
        let top = lines
            .iter()
            .flat_map(|(_, v)| v)
            .fold(1e-3, |a: f64, &b| a.max(b));
        let bin = bin_ns as f64 / unit_ns;
        c.x.range = Some(0.0..xs.last().map_or(bin, |m| m + bin));
        c.y.range = Some(0.0..top * 1.1);
        c
    }
}

/// The cumulative share of a histogram (`shares[i]`: the share of bin i) as a step line: up at each
/// non-empty bin, flat to `x_end` after the last.
pub fn cdf_steps(shares: &[f64], x_end: f64) -> Vec<(f64, f64)> {
    let mut steps = Vec::new();
    let mut sum = 0.0;
    for (i, &p) in shares.iter().enumerate().filter(|(_, &p)| p > 0.0) {
        steps.push((i as f64, sum));
        sum += p;
        steps.push((i as f64, sum));
    }
    steps.push((x_end, sum));
    steps
}
