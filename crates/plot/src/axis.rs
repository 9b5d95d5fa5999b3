//! Axes: scale, range and tick labels.

use std::ops::Range;

/// One axis of a chart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Axis {
    /// With the unit, e.g. "data rate (Mbit/s)".
    pub label: String,
    /// Fixed range; None fits the data ([`Axis::fit`]).
    pub range: Option<Range<f64>>,
    /// Logarithmic scale.
    pub log: bool,
    /// Names of a categorical axis: values 1, 2, … are drawn with these names (filters, loads). Empty: numeric.
    pub names: Vec<String>,
}

impl Axis {
    /// A numeric, linear axis fitted to the data.
    pub fn new(label: &str) -> Axis {
        Axis {
            label: label.into(),
            ..Axis::default()
        }
    }

    /// The range drawn for data from `lo` to `hi`: the categories 1…n with half a step either side, else
    /// the fixed range, else a factor 1.3 either side (log) or [`pad`] (linear).
    pub fn fit(&self, lo: f64, hi: f64) -> Range<f64> {
        if !self.names.is_empty() {
            return 0.5..self.names.len() as f64 + 0.5;
        }
        match &self.range {
            Some(r) => r.clone(),
            None if self.log => lo / 1.3..hi * 1.3,
            None => pad(lo, hi),
        }
    }

    /// True if the range comes from the data, so there must be data.
    pub(crate) fn fitted(&self) -> bool {
        self.names.is_empty() && self.range.is_none()
    }

    /// True if drawn on a log scale (a categorical axis never is).
    pub(crate) fn is_log(&self) -> bool {
        self.log && self.names.is_empty()
    }

    /// A tick label: the category's name on a categorical axis (blank between categories), else [`tick`].
    pub fn tick_label(&self, v: f64) -> String {
        if self.names.is_empty() {
            return tick(v);
        }
        let i = v.round();
        if (v - i).abs() < 1e-9 && i >= 1.0 && (i as usize) <= self.names.len() {
            self.names[i as usize - 1].clone()
        } else {
            String::new()
        }
    }
}

/// A range a little wider than [lo, hi] (5 % either side) so points don't sit on the frame; a flat
/// range gets ±1.
pub fn pad(lo: f64, hi: f64) -> Range<f64> {
    if hi <= lo {
        return lo - 1.0..hi + 1.0;
    }
    let m = (hi - lo) * 0.05;
    lo - m..hi + m
}

/// (min, max) of the values; (∞, −∞) if there are none.
pub fn bounds(v: impl IntoIterator<Item = f64>) -> (f64, f64) {
    v.into_iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        })
}

/// Tick labels: from 10 000 up with an SI prefix (`100 k`, `1.5 M`: a rate axis of 550000 is read at a
/// glance), other integers without decimals, small values (below 0.01) as a short power of ten (`2.5e-4`),
/// others with up to 3 decimals.
pub fn tick(v: f64) -> String {
    let trim = |s: &str| s.trim_end_matches('0').trim_end_matches('.').to_string();
    if v.abs() >= 1e4 && v.is_finite() {
        units::si(v, "")
    } else if v == v.round() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() < 0.01 {
        let s = format!("{v:.2e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        format!("{}e{exp}", trim(mantissa))
    } else {
        trim(&format!("{v:.3}"))
    }
}
