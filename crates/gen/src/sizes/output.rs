//! Outputs: `dist` text, `sizes` (draws from a model) and `summary` (heavy hitters, Fig. 4.2).
//! The `procfs` output is [`super::CreateDist::write_procfs`].

use std::fmt;
use std::io::{self, Write};

use super::histogram::Histogram;
use super::sampler::SizeSampler;

/// Default number of sizes the `sizes` output draws (A.1.3 `-n`).
pub const DEFAULT_SIZES_COUNT: u64 = 10_000_000;

/// Writes `<size><sep><count>` lines, smallest size first (A.1.1 `dist`).
pub fn write_dist<W: Write>(hist: &Histogram, w: &mut W, sep: char) -> io::Result<()> {
    let mut buf = itoa::Buffer::new();
    let mut sep_buf = [0u8; 4];
    let sep = sep.encode_utf8(&mut sep_buf).as_bytes();
    for (size, count) in hist.iter() {
        w.write_all(buf.format(size).as_bytes())?;
        w.write_all(sep)?;
        w.write_all(buf.format(count).as_bytes())?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes `n` sizes drawn from `sampler`, one per line (A.1.2: createDist "acts like the
/// generator"). Wrap `w` in a `BufWriter`.
pub fn write_sizes<W: Write>(sampler: &mut SizeSampler, n: u64, w: &mut W) -> io::Result<()> {
    let mut buf = itoa::Buffer::new();
    for _ in 0..n {
        w.write_all(buf.format(sampler.next_size()).as_bytes())?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// One heavy hitter: a size with its count, share and the cumulative share down to it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeavyHitter {
    /// IP packet size.
    pub size: u16,
    /// Packets of this size.
    pub count: u64,
    /// count / total.
    pub share: f64,
    /// Sum of the shares of this and all more frequent sizes (the red curve of Fig. 4.2).
    pub cumulative: f64,
}

/// A summary of a histogram: totals, mean and the most frequent sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Packets.
    pub count: u64,
    /// Different sizes.
    pub distinct: usize,
    /// Mean size in bytes.
    pub mean: f64,
    /// Smallest and largest size.
    pub min: Option<u16>,
    /// Largest size.
    pub max: Option<u16>,
    /// The `top` most frequent sizes, most frequent first (ties: smaller size first).
    pub heavy_hitters: Vec<HeavyHitter>,
}

impl Summary {
    /// Summarises `hist`, listing its `top` most frequent sizes.
    pub fn of(hist: &Histogram, top: usize) -> Summary {
        let mut by_count: Vec<(u16, u64)> = hist.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let total = hist.total().max(1) as f64;
        let mut cum = 0u64;
        let heavy_hitters = by_count
            .into_iter()
            .take(top)
            .map(|(size, count)| {
                cum += count;
                HeavyHitter {
                    size,
                    count,
                    share: count as f64 / total,
                    cumulative: cum as f64 / total,
                }
            })
            .collect();
        Summary {
            count: hist.total(),
            distinct: hist.distinct(),
            mean: hist.mean(),
            min: hist.min_size(),
            max: hist.max_size(),
            heavy_hitters,
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let range = match (self.min, self.max) {
            (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
            _ => "-".into(),
        };
        writeln!(
            f,
            "packets {}   distinct sizes {}   mean {:.2} B   range {} B (IP lengths)",
            self.count, self.distinct, self.mean, range
        )?;
        writeln!(
            f,
            "{:>5} {:>6} {:>14} {:>8} {:>11}",
            "rank", "size", "count", "share", "cumulative"
        )?;
        for (rank, h) in self.heavy_hitters.iter().enumerate() {
            writeln!(
                f,
                "{:>5} {:>6} {:>14} {:>7.2}% {:>10.2}%",
                rank + 1,
                h.size,
                h.count,
                h.share * 100.0,
                h.cumulative * 100.0
            )?;
        }
        Ok(())
    }
}
