//! The charts of every ringcap report, drawn once: a [`Chart`] is one panel (line plot with min/max error
//! bars, scatter with reference lines, histogram, time series: one struct, with a constructor for each
//! kind), [`chart_svg`] draws one and [`stack_svg`] draws panels one above the other under a title. The
//! axis helpers ([`tick`], [`pad`], [`bounds`]) and one error type ([`PlotError`]) serve them all, and
//! [`html`] has what the HTML reports share (escaping, the page, an inline SVG figure).
//!
//! SVG only: plotters' bitmap backend needs system fonts to draw text; a PNG is made from the SVG with
//! `rsvg-convert` ([`svg_to_png`]).

mod axis;
mod chart;
mod draw;
pub mod html;

use std::io;
use std::path::Path;
use std::process::Command;

pub use axis::{bounds, pad, tick, Axis};
pub use chart::{cdf_steps, min_avg_max, Chart, ErrorPoint, HLine, Legend, Mark, RefLine, Series};
pub use draw::{chart_svg, drawn_data_marks, stack_svg};

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("plot `{0}` has no points to draw")]
    Empty(String),
    #[error("plot `{title}`: {what} is not a finite number")]
    NotFinite { title: String, what: String },
    #[error("plot `{0}`: a log-scale axis needs values > 0")]
    LogOfNonPositive(String),
    #[error("drawing plot `{title}` failed: {error}")]
    Draw { title: String, error: String },
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
mod tests;
