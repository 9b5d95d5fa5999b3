//! Analysis of variance of a k-factor full-factorial design with r replications per cell (Jain, *The Art of
//! Computer Systems Performance Analysis*, ch. 20–22; the tables of seed 004): sums of squares, allocation
//! of variation, degrees of freedom, mean squares, F-test against the F table, p-values, every interaction,
//! and the residuals for the visual tests (residuals vs. predicted, normal Q-Q).
//!
//! The model is the full one: main effects plus all interactions, so the predicted value of an observation
//! is the mean of its cell and the error is the spread of the replications inside a cell.

use std::collections::HashMap;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, FisherSnedecor, Normal};

/// At most this many factors: 2^k components, and a plan with more factors is not a full factorial anyone runs.
mod csv_input;
mod residual_plots;
mod table;

pub use csv_input::read_csv;
pub use residual_plots::residual_plots;
pub use table::{format_table, num, pvalue};

pub const MAX_FACTORS: usize = 8;

/// Why an analysis could not be done. Each message says what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum AnovaError {
    #[error("no factors given: name at least one factor column (e.g. --factors method,rate)")]
    NoFactors,
    #[error("{0} factors given; at most {MAX_FACTORS} are supported")]
    TooManyFactors(usize),
    #[error("factor `{0}` is given twice")]
    DuplicateFactor(String),
    #[error("column `{column}` is not in the CSV header; the columns are: {available}")]
    MissingColumn { column: String, available: String },
    #[error("line {line}: response `{column}` is `{value}`, not a finite number; fix or remove that row")]
    NotNumeric {
        line: u64,
        column: String,
        value: String,
    },
    #[error("line {line}: response {value} is not positive, so --log cannot be used (log10 needs values > 0)")]
    NotPositive { line: u64, value: f64 },
    #[error("the data has no rows")]
    Empty,
    #[error("factor `{factor}` has only one level (`{level}`); a factor needs at least 2 levels to have an effect")]
    TooFewLevels { factor: String, level: String },
    #[error("cell {cell} has no observations; a full factorial design needs every combination of levels")]
    EmptyCell { cell: String },
    #[error(
        "unbalanced design: cell {cell} has {count} replication(s) but cell {first_cell} has {first_count}; \
         every cell needs the same number of replications (rerun or drop runs to balance it)"
    )]
    Unbalanced {
        cell: String,
        count: usize,
        first_cell: String,
        first_count: usize,
    },
    #[error(
        "every cell has a single observation: at least 2 replications per cell are needed to estimate the error"
    )]
    NoReplications,
    #[error("the response is the same in every row ({0}): there is no variation to allocate")]
    ConstantResponse(f64),
    #[error("reading the CSV: {0}")]
    Csv(#[from] csv::Error),
}

/// One observation: the level of each factor (in factor order) and the response.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub levels: Vec<String>,
    pub response: f64,
    /// Where it came from (CSV line), for error messages; 0 if unknown.
    pub line: u64,
}

/// Options of an analysis.
#[derive(Clone, Copy, Debug)]
pub struct AnovaOptions {
    /// Analyse log10(response) instead of the response (multiplicative effects, seed 004 Table 5).
    pub log10: bool,
    /// Confidence level of the F table column (0.95 in Jain and seed 004).
    pub confidence: f64,
}

impl Default for AnovaOptions {
    fn default() -> Self {
        AnovaOptions {
            log10: false,
            confidence: 0.95,
        }
    }
}

/// A factor and its levels in order of first appearance.
#[derive(Clone, Debug, Serialize)]
pub struct Factor {
    pub name: String,
    pub levels: Vec<String>,
}

/// One row of the ANOVA table: a main effect, an interaction (`A:B`) or `error`.
#[derive(Clone, Debug, Serialize)]
pub struct Component {
    pub name: String,
    /// Sum of squares.
    pub ss: f64,
    /// Degrees of freedom.
    pub df: usize,
    /// Mean square ss / df.
    pub ms: f64,
    /// F computed = ms / ms_error; None for the error row, or when the error mean square is 0.
    pub f: Option<f64>,
    /// P(F > f) under the null hypothesis of no effect.
    pub p: Option<f64>,
    /// Allocation of variation: 100 · ss / ss_total.
    pub percent: f64,
    /// Quantile of the F distribution at the confidence level: the effect is significant if f > f_table.
    pub f_table: Option<f64>,
}

impl Component {
    /// True if the F-test says this effect is significant at the chosen confidence.
    pub fn significant(&self) -> bool {
        matches!((self.f, self.f_table), (Some(f), Some(t)) if f > t)
    }
}

/// Predicted value (the cell mean) and residual of one observation, in input order.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Fitted {
    pub predicted: f64,
    pub residual: f64,
}

/// The result of an analysis.
#[derive(Clone, Debug, Serialize)]
pub struct Anova {
    pub factors: Vec<Factor>,
    /// Replications per cell.
    pub replications: usize,
    pub observations: usize,
    /// True if the response was replaced by log10(response).
    pub log10: bool,
    pub confidence: f64,
    /// SSY: sum of the squared responses (df = observations).
    pub ss_y: f64,
    /// SS0 = n · mean² (df = 1).
    pub ss_0: f64,
    /// SST = SSY − SS0, the total variation (df = observations − 1).
    pub ss_total: f64,
    pub mean: f64,
    /// Main effects, then interactions by order, then `error` last.
    pub components: Vec<Component>,
    /// Predicted value and residual per observation, in input order (not in the JSON: one per row).
    #[serde(skip)]
    pub fitted: Vec<Fitted>,
}

impl Anova {
    /// The component with this name (`A`, `A:B`, `error`).
    pub fn component(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }

    /// Points of a normal quantile-quantile plot of the residuals: (normal quantile, residual), sorted.
    /// Quantiles at (i − 0.5) / n as in Jain §12.5.
    pub fn qq_points(&self) -> Vec<(f64, f64)> {
        let mut r: Vec<f64> = self.fitted.iter().map(|f| f.residual).collect();
        r.sort_by(f64::total_cmp);
        let n = r.len() as f64;
        let normal = Normal::new(0.0, 1.0).expect("standard normal");
        r.iter()
            .enumerate()
            .map(|(i, &e)| (normal.inverse_cdf((i as f64 + 0.5) / n), e))
            .collect()
    }
}

/// Analyse a full-factorial design with replications. `factors` names the factors in the order of
/// `Observation::levels`.
pub fn analyse(
    factors: &[String],
    observations: &[Observation],
    opts: &AnovaOptions,
) -> Result<Anova, AnovaError> {
    let k = factors.len();
    if k == 0 {
        return Err(AnovaError::NoFactors);
    }
    if k > MAX_FACTORS {
        return Err(AnovaError::TooManyFactors(k));
    }
    for (i, f) in factors.iter().enumerate() {
        if factors[..i].contains(f) {
            return Err(AnovaError::DuplicateFactor(f.clone()));
        }
    }
    if observations.is_empty() {
        return Err(AnovaError::Empty);
    }

    // Responses, transformed.
    let mut ys = Vec::with_capacity(observations.len());
    for o in observations {
        if opts.log10 {
            if o.response <= 0.0 {
                return Err(AnovaError::NotPositive {
                    line: o.line,
                    value: o.response,
                });
            }
            ys.push(o.response.log10());
        } else {
            ys.push(o.response);
        }
    }

    // Levels per factor (first-appearance order) and each observation's cell (mixed radix, factor 0 slowest).
    let mut levels: Vec<Vec<String>> = vec![Vec::new(); k];
    let mut index: Vec<HashMap<&str, usize>> = vec![HashMap::new(); k];
    let mut coords: Vec<Vec<usize>> = Vec::with_capacity(observations.len());
    for o in observations {
        let mut c = Vec::with_capacity(k);
        for f in 0..k {
            let level = o.levels.get(f).map(String::as_str).unwrap_or("");
            let next = levels[f].len();
            let i = *index[f].entry(level).or_insert(next);
            if i == next {
                levels[f].push(level.to_string());
            }
            c.push(i);
        }
        coords.push(c);
    }
    for f in 0..k {
        if levels[f].len() < 2 {
            return Err(AnovaError::TooFewLevels {
                factor: factors[f].clone(),
                level: levels[f].first().cloned().unwrap_or_default(),
            });
        }
    }
    let sizes: Vec<usize> = levels.iter().map(Vec::len).collect();
    let n_cells: usize = sizes.iter().product();
    let cell_of = |c: &[usize]| c.iter().zip(&sizes).fold(0, |acc, (&i, &n)| acc * n + i);
    let cell_name = |cell: usize| -> String {
        let mut rest = cell;
        let mut parts = vec![String::new(); k];
        for f in (0..k).rev() {
            parts[f] = format!("{}={}", factors[f], levels[f][rest % sizes[f]]);
            rest /= sizes[f];
        }
        format!("({})", parts.join(", "))
    };

    // Balance: every cell the same number of replications.
    let mut counts = vec![0usize; n_cells];
    let cells: Vec<usize> = coords.iter().map(|c| cell_of(c)).collect();
    for &c in &cells {
        counts[c] += 1;
    }
    if let Some(empty) = counts.iter().position(|&n| n == 0) {
        return Err(AnovaError::EmptyCell {
            cell: cell_name(empty),
        });
    }
    let r = counts[0];
    if let Some(odd) = counts.iter().position(|&n| n != r) {
        return Err(AnovaError::Unbalanced {
            cell: cell_name(odd),
            count: counts[odd],
            first_cell: cell_name(0),
            first_count: r,
        });
    }
    if r < 2 {
        return Err(AnovaError::NoReplications);
    }

    let n = ys.len();
    let mean = ys.iter().sum::<f64>() / n as f64;
    let ss_y: f64 = ys.iter().map(|y| y * y).sum();
    let ss_0 = n as f64 * mean * mean;
    // Centred data: the effects don't change and the sums below don't cancel catastrophically when the
    // mean is large compared with the spread.
    let centred: Vec<f64> = ys.iter().map(|y| y - mean).collect();
    let ss_total: f64 = centred.iter().map(|d| d * d).sum();
    if ss_total == 0.0 {
        return Err(AnovaError::ConstantResponse(observations[0].response));
    }

    let mut cell_sum = vec![0.0; n_cells];
    for (&c, &d) in cells.iter().zip(&centred) {
        cell_sum[c] += d;
    }
    let cell_mean: Vec<f64> = cell_sum.iter().map(|s| s / r as f64).collect();

    // For each subset S of factors, Q(S) = Σ over the margin cells of S of (margin sum)² / (margin count):
    // the variation explained by the S-margin means. The sum of squares of the effect S (main effect for
    // |S| = 1, interaction otherwise) is the Möbius inversion SS(S) = Σ_{T ⊆ S} (−1)^{|S|−|T|} Q(T);
    // for two factors this is Jain's SSA = Q(A), SSAB = Q(AB) − Q(A) − Q(B) (Q(∅) = 0 on centred data).
    let n_subsets = 1usize << k;
    let mut q = vec![0.0; n_subsets];
    for (s, q_s) in q.iter_mut().enumerate().skip(1) {
        let margin_cells: usize = (0..k)
            .filter(|f| s >> f & 1 == 1)
            .map(|f| sizes[f])
            .product();
        let mut sums = vec![0.0; margin_cells];
        for (cell, &sum) in cell_sum.iter().enumerate() {
            sums[margin_index(cell, s, &sizes)] += sum;
        }
        let count = (n / margin_cells) as f64;
        *q_s = sums.iter().map(|x| x * x / count).sum();
    }

    let ss_error: f64 = cells
        .iter()
        .zip(&centred)
        .map(|(&c, &d)| (d - cell_mean[c]).powi(2))
        .sum();
    let df_error = n - n_cells;
    let ms_error = ss_error / df_error as f64;

    // Subsets in table order: by size, then by factor order (A, B, C, A:B, A:C, B:C, A:B:C).
    let mut order: Vec<usize> = (1..n_subsets).collect();
    let members = |s: usize| (0..k).filter(move |f| s >> f & 1 == 1);
    order.sort_by_key(|&s| (s.count_ones(), members(s).collect::<Vec<_>>()));

    let mut components = Vec::with_capacity(n_subsets);
    for s in order {
        let mut ss = 0.0;
        // Iterate over all subsets t of s (including 0).
        let mut t = s;
        loop {
            let sign = if (s.count_ones() - t.count_ones()) % 2 == 0 {
                1.0
            } else {
                -1.0
            };
            ss += sign * q[t];
            if t == 0 {
                break;
            }
            t = (t - 1) & s;
        }
        // Cancellation can leave −1e-12 for a null effect.
        let ss = ss.max(0.0);
        let df: usize = members(s).map(|f| sizes[f] - 1).product();
        let ms = ss / df as f64;
        let name = members(s)
            .map(|f| factors[f].as_str())
            .collect::<Vec<_>>()
            .join(":");
        components.push(f_test(
            name,
            ss,
            df,
            ms,
            ms_error,
            df_error,
            ss_total,
            opts.confidence,
        ));
    }
    components.push(Component {
        name: "error".into(),
        ss: ss_error,
        df: df_error,
        ms: ms_error,
        f: None,
        p: None,
        percent: 100.0 * ss_error / ss_total,
        f_table: None,
    });

    let fitted = cells
        .iter()
        .zip(&centred)
        .map(|(&c, &d)| Fitted {
            predicted: mean + cell_mean[c],
            residual: d - cell_mean[c],
        })
        .collect();

    Ok(Anova {
        factors: factors
            .iter()
            .cloned()
            .zip(levels)
            .map(|(name, levels)| Factor { name, levels })
            .collect(),
        replications: r,
        observations: n,
        log10: opts.log10,
        confidence: opts.confidence,
        ss_y,
        ss_0,
        ss_total,
        mean,
        components,
        fitted,
    })
}

/// Index of `cell` in the margin of the factor subset `s` (mixed radix over the factors in s).
fn margin_index(cell: usize, s: usize, sizes: &[usize]) -> usize {
    let mut rest = cell;
    let mut digits = vec![0; sizes.len()];
    for f in (0..sizes.len()).rev() {
        digits[f] = rest % sizes[f];
        rest /= sizes[f];
    }
    (0..sizes.len())
        .filter(|f| s >> f & 1 == 1)
        .fold(0, |acc, f| acc * sizes[f] + digits[f])
}

#[allow(clippy::too_many_arguments)]
fn f_test(
    name: String,
    ss: f64,
    df: usize,
    ms: f64,
    ms_error: f64,
    df_error: usize,
    ss_total: f64,
    confidence: f64,
) -> Component {
    let dist = FisherSnedecor::new(df as f64, df_error as f64).ok();
    let f = (ms_error > 0.0).then(|| ms / ms_error);
    Component {
        name,
        ss,
        df,
        ms,
        f,
        p: f.zip(dist.as_ref()).map(|(f, d)| d.sf(f)),
        percent: 100.0 * ss / ss_total,
        f_table: dist.map(|d| d.inverse_cdf(confidence)),
    }
}

#[cfg(test)]
mod tests;
