//! The two-stage size model of createDist (seed 000 §4.2.2–4.2.3, A.1, A.2).
//!
//! Stage one, the *outliers array* of ρ cells, holds the frequent sizes exactly; its other
//! cells hold −1. Drawing (Figure 4.3): pick a cell uniformly; a size is the answer, −1 means
//! "pick a cell of the *bins array* uniformly and add a uniform jitter 0..σ_bin−1 to it".
//! A bin is represented by its smallest size (A.2.1).
//!
//! ## Readings where the thesis is ambiguous (all documented at the code that does them)
//!
//! * **Outlier bound.** §4.2.2 says 2 %, A.1.3 says `0.0020`. We use **0.002 as a fraction
//!   (0.2 %)**: it is createDist's own default, and it is the only one of the two that fits the
//!   example of A.2.2 (`dist 1000 20 1500 33 75`, 33 outliers): with a 2 % bound, 33 outliers
//!   would hold ≥ 66 % of the packets, while Figure 4.2 (same example distribution) puts > 55 %
//!   in the top three sizes alone, which would need ≥ 121 % in all.
//! * **Equation 4.8** adds avg_j once, but the text after it says "as many times as outliers
//!   have been found in the bin". We add **n_Ωj · avg_j**: it is what makes the model exact at
//!   the outliers (an outlier gets (c_i − avg_j) from stage one plus avg_j from the jitter of
//!   its bin) and keeps Σ cells = ρ.
//! * **Equation 4.6** divides by σ_bin − n_Ωj; when every size of a bin is an outlier that is
//!   0/0 and we take avg_j = 0 (the bin holds nothing).
//! * **Bins.** Equation 4.3 takes j ∈ {1, …, n_bin} and bin j = [j·σ_bin, (j+1)·σ_bin). We
//!   keep that literally (so A.2.2's `#histos` is n_bin), and add one **edge rule** the thesis
//!   does not need for its defaults: a size with packets that no bin can produce without
//!   leaving 1..=N_ps (sizes below σ_bin, and sizes in a bin whose jitter would reach past
//!   N_ps, e.g. 1500 in [1500, 1520)) is put into Ω whatever its share ("forced" outlier).
//!   So no packet is lost and the jitter never yields a size above N_ps. With the defaults
//!   this touches only size 1500, which is an outlier in any real trace anyway.
//! * **Sizes above N_ps** are not "considered" (§4.2.2): they are left out and c_all counts
//!   only the considered packets, so the model's probabilities sum to one.
//! * **Rounding (4.10).** f = ρ·p is real; the kernel needs whole cells. We take the nearest
//!   integer (halves away from zero), the integer closest to what the equation says. Two
//!   corners the thesis leaves open can only come from rounding and are fixed by largest
//!   remainder: if the outlier cells add up to more than ρ, the cells rounded up most are
//!   taken back; if no bin got a cell but −1 cells remain, the outliers most rounded down
//!   get them (a −1 cell would otherwise point into an empty bins array). Ties go to the
//!   smaller size.
//! * **The bins array** holds Σ f_j^bin cells (not ρ): Figure 4.3 draws from it only after a
//!   −1, so its cells must give the bins' shares *among the bins*; eq. 4.10's f_j^bin = ρ·p_j^bin
//!   does that without rescaling.

use std::io::{self, Write};

use super::error::{DistError, Result};
use super::histogram::{Histogram, SIZE_SLOTS};

/// Default precision ρ: cells of the outliers array (§4.2.2, A.1.3 `-prec`).
pub const DEFAULT_PRECISION: u32 = 1000;
/// Default maximum packet size N_ps (§4.2.2, A.1.3 `-max`).
pub const DEFAULT_MAX_SIZE: u16 = 1500;
/// Default outlier bound p_Ωbound as a fraction: 0.002 = 0.2 % (A.1.3 `-outlb`; see module doc).
pub const DEFAULT_OUTLIER_BOUND: f64 = 0.002;
/// Default bin width σ_bin (§4.2.2, A.1.3 `-hwidth`).
pub const DEFAULT_BIN_WIDTH: u16 = 20;
/// Largest precision accepted (the outliers array costs 4 bytes a cell).
pub const MAX_PRECISION: u32 = 1 << 26;

/// The parameters of §4.2.2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// ρ: number of cells of the outliers array.
    pub precision: u32,
    /// N_ps: largest size considered.
    pub max_size: u16,
    /// p_Ωbound: a size with at least this share of the packets is an outlier (fraction, 0..=1).
    pub outlier_bound: f64,
    /// σ_bin: sizes per bin.
    pub bin_width: u16,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            precision: DEFAULT_PRECISION,
            max_size: DEFAULT_MAX_SIZE,
            outlier_bound: DEFAULT_OUTLIER_BOUND,
            bin_width: DEFAULT_BIN_WIDTH,
        }
    }
}

impl Params {
    /// n_bin = ⌈N_ps / σ_bin⌉ (§4.2.2).
    pub fn n_bin(&self) -> u32 {
        (self.max_size as u32).div_ceil(self.bin_width.max(1) as u32)
    }

    /// Checks the ranges; the message says which parameter and what is allowed.
    pub fn validate(&self) -> Result<()> {
        if self.precision == 0 || self.precision > MAX_PRECISION {
            return Err(DistError::Param(format!(
                "precision ρ = {} must be in 1..={MAX_PRECISION}",
                self.precision
            )));
        }
        if self.max_size == 0 {
            return Err(DistError::Param(
                "maximum size N_ps must be at least 1".into(),
            ));
        }
        if self.bin_width == 0 {
            return Err(DistError::Param(
                "bin width σ_bin must be at least 1".into(),
            ));
        }
        if !(self.outlier_bound > 0.0 && self.outlier_bound <= 1.0) {
            return Err(DistError::Param(format!(
                "outlier bound {} must be a fraction in (0, 1] (0.002 means 0.2 %)",
                self.outlier_bound
            )));
        }
        Ok(())
    }
}

/// One first-stage entry: an `outl <size> <cells>` line of A.2.2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outlier {
    /// Packet size.
    pub size: u16,
    /// f_i^outl of eq. 4.10 before rounding (ρ · p_i^outl).
    pub exact_cells: f64,
    /// Cells of the outliers array holding this size.
    pub cells: u32,
    /// True if the edge rule (no bin can produce this size) put it into Ω, not eq. 4.2.
    pub forced: bool,
}

/// One second-stage entry: a `hist <size> <cells>` line of A.2.2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bin {
    /// j of eq. 4.3 (1..=n_bin).
    pub index: u32,
    /// Smallest size of the bin, j · σ_bin: the value stored in the bins array (A.2.1).
    pub size: u32,
    /// f_j^bin of eq. 4.10 before rounding (ρ · p_j^bin).
    pub exact_cells: f64,
    /// Cells of the bins array holding this bin.
    pub cells: u32,
    /// False if the bin's jitter would leave 1..=N_ps (edge rule): it then holds nothing.
    pub usable: bool,
}

/// The createDist model built from a histogram: arrays, entries and what was left out.
#[derive(Clone, Debug)]
pub struct CreateDist {
    /// Parameters used.
    pub params: Params,
    /// c_all: packets of size ≤ N_ps.
    pub c_all: u64,
    /// Packets above N_ps, left out of the model.
    pub above_max: u64,
    /// Ω in increasing size (one `outl` line each).
    pub outliers: Vec<Outlier>,
    /// Bins 1..=n_bin (one `hist` line each, empty ones included).
    pub bins: Vec<Bin>,
    /// Cells of the outliers array holding −1.
    pub minus_one_cells: u32,
    outliers_array: Vec<i32>,
    bins_array: Vec<u16>,
}

impl CreateDist {
    /// Runs steps 1–5 of §4.2.3 on `hist` (equations 4.1–4.10).
    pub fn build(hist: &Histogram, params: Params) -> Result<CreateDist> {
        params.validate()?;
        let n_ps = params.max_size as usize;
        let sigma = params.bin_width as usize;
        let rho = params.precision as f64;
        let n_bin = params.n_bin() as usize;

        // c_i for 0 < i ≤ N_ps as reals: eq. 4.7 makes them fractional.
        let mut c: Vec<f64> = hist.counts()[..=n_ps].iter().map(|&x| x as f64).collect();
        c[0] = 0.0;
        let c_all: u64 = hist.counts()[1..=n_ps].iter().sum();
        let above_max = hist.count_above(params.max_size);
        if c_all == 0 {
            return Err(DistError::Model(format!(
                "no packet of size 1..={n_ps} in the input ({above_max} packets above N_ps = {n_ps}); raise the maximum size"
            )));
        }
        let c_all_f = c_all as f64;

        // A bin is usable when all of its sizes j·σ..(j+1)·σ−1 lie in 1..=N_ps (edge rule).
        let usable = |j: usize| j >= 1 && (j + 1) * sigma - 1 <= n_ps;
        let bin_of = |i: usize| i / sigma; // j with j·σ ≤ i < (j+1)·σ (eq. 4.3)

        // Step 1, eq. 4.1: p_i = c_i / c_all.  Step 2, eq. 4.2: Ω = {i | p_i ≥ p_Ωbound}.
        let mut in_omega = vec![false; n_ps + 1];
        let mut forced = vec![false; n_ps + 1];
        for i in 1..=n_ps {
            if c[i] == 0.0 {
                continue;
            }
            let p_i = c[i] / c_all_f; // (4.1)
            if p_i >= params.outlier_bound {
                in_omega[i] = true; // (4.2)
            } else if !usable(bin_of(i)) {
                in_omega[i] = true; // edge rule: no bin can produce i
                forced[i] = true;
            }
        }

        // Step 3, eqs. 4.3–4.8, for every bin j = 1..=n_bin.
        let mut b = vec![0.0f64; n_bin + 1];
        #[allow(clippy::needless_range_loop)] // j and i are the indices of eqs. 4.3–4.8
        for j in 1..=n_bin {
            if !usable(j) {
                continue; // holds nothing; its sizes with packets are all in Ω
            }
            let sizes = j * sigma..(j + 1) * sigma;
            let omega_j: Vec<usize> = sizes.clone().filter(|&i| in_omega[i]).collect(); // (4.3)
            let n_omega_j = omega_j.len(); // (4.4)
            let b_j: f64 = sizes.filter(|&i| !in_omega[i]).map(|i| c[i]).sum(); // (4.5)
            let avg_j = if sigma > n_omega_j {
                b_j / (sigma - n_omega_j) as f64 // (4.6)
            } else {
                0.0 // every size of the bin is an outlier: 0/0, nothing to spread
            };
            for &i in &omega_j {
                c[i] -= avg_j; // (4.7)
            }
            b[j] = b_j + n_omega_j as f64 * avg_j; // (4.8), n_Ωj times as the text says
        }

        // Step 4, eq. 4.9, and step 5, eq. 4.10: f = ρ · p, rounded to the nearest integer.
        let mut outliers: Vec<Outlier> = (1..=n_ps)
            .filter(|&i| in_omega[i])
            .map(|i| {
                let p_outl = c[i] / c_all_f; // (4.9)
                let exact = rho * p_outl; // (4.10)
                Outlier {
                    size: i as u16,
                    exact_cells: exact,
                    cells: exact.round() as u32,
                    forced: forced[i],
                }
            })
            .collect();
        let bins: Vec<Bin> = (1..=n_bin)
            .map(|j| {
                let p_bin = b[j] / c_all_f; // (4.9)
                let exact = rho * p_bin; // (4.10)
                Bin {
                    index: j as u32,
                    size: (j * sigma) as u32,
                    exact_cells: exact,
                    cells: exact.round() as u32,
                    usable: usable(j),
                }
            })
            .collect();

        let bin_cells: u64 = bins.iter().map(|b| b.cells as u64).sum();
        let mut outl_cells: u64 = outliers.iter().map(|o| o.cells as u64).sum();
        let rho_cells = params.precision as u64;

        // Rounding corner 1: outlier cells above ρ → take back from those rounded up most.
        if outl_cells > rho_cells {
            let excess = (outl_cells - rho_cells) as usize;
            let mut order: Vec<usize> = (0..outliers.len()).collect();
            order.sort_by(|&a, &b| {
                let ra = outliers[a].cells as f64 - outliers[a].exact_cells;
                let rb = outliers[b].cells as f64 - outliers[b].exact_cells;
                cmp_remainders(rb, ra).then(outliers[a].size.cmp(&outliers[b].size))
            });
            for &k in order.iter().take(excess) {
                outliers[k].cells -= 1;
            }
            outl_cells = rho_cells;
        }
        // Rounding corner 2: −1 cells but an empty bins array → give them to the outliers,
        // one at a time to the one furthest below its share of the outlier stage.
        if bin_cells == 0 && outl_cells < rho_cells {
            let exact_sum: f64 = outliers.iter().map(|o| o.exact_cells).sum();
            if outliers.is_empty() || exact_sum <= 0.0 {
                return Err(DistError::Model(format!(
                    "precision ρ = {} is too small: no cell of either array is filled; raise the precision",
                    params.precision
                )));
            }
            for _ in outl_cells..rho_cells {
                let target = |o: &Outlier| o.exact_cells / exact_sum * rho;
                let best = (0..outliers.len())
                    .max_by(|&a, &b| {
                        let da = target(&outliers[a]) - outliers[a].cells as f64;
                        let db = target(&outliers[b]) - outliers[b].cells as f64;
                        cmp_remainders(da, db).then(outliers[b].size.cmp(&outliers[a].size))
                    })
                    .expect("outliers is not empty");
                outliers[best].cells += 1;
            }
            outl_cells = rho_cells;
        }
        let minus_one_cells = (rho_cells - outl_cells) as u32;

        // The arrays of §4.2.2 / Figure 4.3.
        let mut outliers_array = Vec::with_capacity(params.precision as usize);
        for o in &outliers {
            outliers_array.resize(outliers_array.len() + o.cells as usize, o.size as i32);
        }
        outliers_array.resize(outliers_array.len() + minus_one_cells as usize, -1);
        let mut bins_array = Vec::with_capacity(bin_cells as usize);
        for bin in &bins {
            // Usable bins have size + σ − 1 ≤ N_ps ≤ 65535, unusable ones have no cells.
            bins_array.resize(bins_array.len() + bin.cells as usize, bin.size as u16);
        }

        Ok(CreateDist {
            params,
            c_all,
            above_max,
            outliers,
            bins,
            minus_one_cells,
            outliers_array,
            bins_array,
        })
    }

    /// The outliers array: ρ cells, sizes in increasing order, then the −1 cells.
    pub fn outliers_array(&self) -> &[i32] {
        &self.outliers_array
    }

    /// The bins array: each bin's smallest size, repeated by its cell count.
    pub fn bins_array(&self) -> &[u16] {
        &self.bins_array
    }

    /// The probability of every size under this model, dense (index = size), from the arrays:
    /// P(i) = cells_i/ρ + (−1 cells/ρ) · (cells of i's bin / bin cells) · 1/σ_bin.
    pub fn probabilities(&self) -> Vec<f64> {
        let mut p = vec![0.0; SIZE_SLOTS];
        let outl_len = self.outliers_array.len() as f64;
        for o in &self.outliers {
            p[o.size as usize] += o.cells as f64 / outl_len;
        }
        let bins_len = self.bins_array.len();
        if bins_len > 0 && self.minus_one_cells > 0 {
            let to_bins = self.minus_one_cells as f64 / outl_len;
            let sigma = self.params.bin_width as usize;
            for bin in self.bins.iter().filter(|b| b.cells > 0) {
                let each = to_bins * bin.cells as f64 / bins_len as f64 / sigma as f64;
                let first = bin.size as usize;
                for x in &mut p[first..first + sigma] {
                    *x += each;
                }
            }
        }
        p
    }

    /// Writes the A.2.2 procfs lines: `dist ρ σ N_ps n_outl n_hist`, then `outl`s and `hist`s;
    /// with `pgset` each line is wrapped as `pgset "…"` (createDist `-s`).
    pub fn write_procfs<W: Write>(&self, w: &mut W, pgset: bool) -> io::Result<()> {
        let line = |w: &mut W, s: String| {
            if pgset {
                writeln!(w, "pgset \"{s}\"")
            } else {
                writeln!(w, "{s}")
            }
        };
        let p = &self.params;
        line(
            w,
            format!(
                "dist {} {} {} {} {}",
                p.precision,
                p.bin_width,
                p.max_size,
                self.outliers.len(),
                self.bins.len()
            ),
        )?;
        for o in &self.outliers {
            line(w, format!("outl {} {}", o.size, o.cells))?;
        }
        for b in &self.bins {
            line(w, format!("hist {} {}", b.size, b.cells))?;
        }
        Ok(())
    }

    /// The procfs lines as a string (see [`CreateDist::write_procfs`]).
    pub fn procfs_string(&self, pgset: bool) -> String {
        let mut out = Vec::new();
        self.write_procfs(&mut out, pgset)
            .expect("writing to a Vec cannot fail");
        String::from_utf8(out).expect("procfs lines are ASCII")
    }
}

/// Orders two rounding remainders, treating floating-point noise (< 1e-9 cells) as a tie so
/// that equal remainders in exact arithmetic go to the tie-break (smaller size first).
fn cmp_remainders(a: f64, b: f64) -> std::cmp::Ordering {
    if (a - b).abs() < 1e-9 {
        std::cmp::Ordering::Equal
    } else {
        a.total_cmp(&b)
    }
}
