//! Analysis of variance of a k-factor full-factorial design with r replications per cell (Jain, *The Art of
//! Computer Systems Performance Analysis*, ch. 20–22; the tables of seed 004): sums of squares, allocation
//! of variation, degrees of freedom, mean squares, F-test against the F table, p-values, every interaction,
//! and the residuals for the visual tests (residuals vs. predicted, normal Q-Q).
//!
//! The model is the full one: main effects plus all interactions, so the predicted value of an observation
//! is the mean of its cell and the error is the spread of the replications inside a cell.

use std::collections::HashMap;
use std::io::Read;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, FisherSnedecor, Normal};

use plot::{Chart, RefLine};

/// At most this many factors: 2^k components, and a plan with more factors is not a full factorial anyone runs.
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

/// Read observations from CSV text with a header row: the factor columns (any text) and a numeric
/// response column. Extra columns are ignored.
pub fn read_csv(
    input: impl Read,
    response: &str,
    factors: &[String],
) -> Result<Vec<Observation>, AnovaError> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(input);
    let header = reader.headers()?.clone();
    let find = |name: &str| -> Result<usize, AnovaError> {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| AnovaError::MissingColumn {
                column: name.to_string(),
                available: header.iter().collect::<Vec<_>>().join(", "),
            })
    };
    let response_col = find(response)?;
    let factor_cols = factors
        .iter()
        .map(|f| find(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record?;
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        let text = record.get(response_col).unwrap_or("");
        let value = text
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| AnovaError::NotNumeric {
                line,
                column: response.to_string(),
                value: text.to_string(),
            })?;
        let levels = factor_cols
            .iter()
            .map(|&c| record.get(c).unwrap_or("").to_string())
            .collect();
        out.push(Observation {
            levels,
            response: value,
            line,
        });
    }
    Ok(out)
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

/// The ANOVA table as text, laid out like seed 004's Tables 3 and 5 (plus a p-value column).
pub fn format_table(a: &Anova) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let levels: Vec<String> = a
        .factors
        .iter()
        .map(|f| format!("{} ({} levels)", f.name, f.levels.len()))
        .collect();
    let _ = writeln!(
        out,
        "{}-factor full factorial design: {}; {} replications, {} observations{}",
        a.factors.len(),
        levels.join(" × "),
        a.replications,
        a.observations,
        if a.log10 {
            "; response transformed: log10"
        } else {
            ""
        }
    );
    let width = a
        .components
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(9);
    let _ = writeln!(
        out,
        "{:<width$}  {:>18}  {:>9}  {:>5}  {:>16}  {:>14}  {:>7}  {:>8}",
        "Component",
        "Sum of Squares",
        "% of Var.",
        "DF",
        "Mean Square",
        "F-Computed",
        "F-Table",
        "p-value",
    );
    let n = a.observations;
    let head = [
        ("y", a.ss_y, n, None),
        ("y..", a.ss_0, 1, None),
        ("y-y..", a.ss_total, n - 1, Some(100.0)),
    ];
    for (name, ss, df, pct) in head {
        let pct = pct.map(|p: f64| format!("{p:.2}%")).unwrap_or_default();
        let line = format!("{name:<width$}  {:>18}  {pct:>9}  {df:>5}", num(ss));
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for c in &a.components {
        let f = c.f.map(num).unwrap_or_default();
        let table = c.f_table.map(|t| format!("{t:.2}")).unwrap_or_default();
        let p = c.p.map(|p| pvalue(p, "<")).unwrap_or_default();
        let line = format!(
            "{:<width$}  {:>18}  {:>9}  {:>5}  {:>16}  {:>14}  {:>7}  {:>8}",
            c.name,
            num(c.ss),
            format!("{:.2}%", c.percent),
            c.df,
            num(c.ms),
            f,
            table,
            p
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let significant: Vec<&str> = a
        .components
        .iter()
        .filter(|c| c.significant())
        .map(|c| c.name.as_str())
        .collect();
    let _ = writeln!(
        out,
        "Significant at {:.0} % confidence (F-Computed > F-Table): {}",
        a.confidence * 100.0,
        if significant.is_empty() {
            "none".to_string()
        } else {
            significant.join(", ")
        }
    );
    out
}

/// A number with thousands separators and 2 decimals (as the tables of seed 004); tiny values keep
/// 3 significant digits so a log-scale error term does not print as 0.00.
pub fn num(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        return format!("{v:.2e}");
    }
    let s = format!("{:.2}", v.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, "00"));
    let grouped = units::group_digits(int, ',');
    format!("{}{grouped}.{frac}", if v < 0.0 { "-" } else { "" })
}

/// A p-value with 4 decimals, or `less` and 0.0001 below that (`<` in text, `&lt; ` in HTML).
pub fn pvalue(p: f64, less: &str) -> String {
    if p < 1e-4 {
        format!("{less}0.0001")
    } else {
        format!("{p:.4}")
    }
}

/// The two visual tests of seed 004 Figure 3 as plots: residuals vs. predicted response (with the zero
/// line) and the normal Q-Q plot of the residuals (with the line expected for normal errors).
/// `what` names the response in titles and labels, e.g. "capture rate".
pub fn residual_plots(a: &Anova, what: &str) -> [Chart; 2] {
    let what = if a.log10 {
        format!("log10({what})")
    } else {
        what.to_string()
    };
    let fitted: Vec<(f64, f64)> = a.fitted.iter().map(|f| (f.predicted, f.residual)).collect();
    let (lo, hi) = fitted
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
            (l.min(p.0), h.max(p.0))
        });
    let mut residuals = Chart::scatter(
        &format!("Residuals vs. predicted {what}"),
        &format!("predicted {what} (mean of the cell)"),
        "residual (observed − predicted)",
        fitted,
    )
    .line(RefLine {
        from: (lo, 0.0),
        to: (hi, 0.0),
        label: "zero residual".into(),
    });
    residuals.size = (700, 500);
    // Under normal errors the sorted residuals lie on the line residual = s · z (s: error standard deviation).
    let qq = a.qq_points();
    let s = a.component("error").map(|e| e.ms.sqrt()).unwrap_or(0.0);
    let (z0, z1) = match (qq.first(), qq.last()) {
        (Some(f), Some(l)) => (f.0, l.0),
        _ => (-1.0, 1.0),
    };
    let mut normal_qq = Chart::scatter(
        &format!("Normal Q-Q plot of the residuals of {what}"),
        "normal quantile",
        "residual quantile",
        qq,
    )
    .line(RefLine {
        from: (z0, s * z0),
        to: (z1, s * z1),
        label: format!("expected if the errors are normal (σ = {})", num(s)),
    });
    normal_qq.size = (700, 500);
    [residuals, normal_qq]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(levels: &[&str], y: f64) -> Observation {
        Observation {
            levels: levels.iter().map(|s| s.to_string()).collect(),
            response: y,
            line: 0,
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn close(got: f64, want: f64, tol: f64) {
        assert!(
            (got - want).abs() <= tol,
            "got {got}, want {want} (± {tol})"
        );
    }

    /// Montgomery, *Design and Analysis of Experiments*, Example 5.1 (battery life in hours; material
    /// type × temperature in °F, 4 replications). Published ANOVA (Table 5.5): SS material 10,683.72 (df 2,
    /// F 7.91, P 0.0020), temperature 39,118.72 (df 2, F 28.97, P < 0.0001), interaction 9,613.78 (df 4,
    /// F 3.56, P 0.0186), error 18,230.75 (df 27, MS 675.21), total 77,646.97 (df 35).
    ///
    /// The same values come from an independent pure-Python computation with Jain's effect formulas
    /// (alpha_j = column mean − mean, SSA = r·b·Σalpha², …; run once):
    ///   SSY=478547 SS0=400900.027778 SST=77646.972222
    ///   SSA=10683.722222 SSB=39118.722222 SSAB=9613.777778 SSE=18230.750000
    ///   F: A 7.911372, B 28.967692, AB 3.559535; p (regularized incomplete beta, Numerical Recipes betacf):
    ///   A 0.0019760826, B 1.9085959e-07, AB 0.018611168; F(0.95; 2, 27) = 3.354131, F(0.95; 4, 27) = 2.727765
    fn battery() -> Vec<Observation> {
        let data: [(&str, &str, [f64; 4]); 9] = [
            ("1", "15", [130., 155., 74., 180.]),
            ("1", "70", [34., 40., 80., 75.]),
            ("1", "125", [20., 70., 82., 58.]),
            ("2", "15", [150., 188., 159., 126.]),
            ("2", "70", [136., 122., 106., 115.]),
            ("2", "125", [25., 70., 58., 45.]),
            ("3", "15", [138., 110., 168., 160.]),
            ("3", "70", [174., 120., 150., 139.]),
            ("3", "125", [96., 104., 82., 60.]),
        ];
        data.iter()
            .flat_map(|&(m, t, ys)| ys.into_iter().map(move |y| obs(&[m, t], y)))
            .collect()
    }

    #[test]
    fn two_factor_with_replications_matches_montgomery_example_5_1() {
        let a = analyse(
            &names(&["material", "temp"]),
            &battery(),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(a.replications, 4);
        assert_eq!(a.observations, 36);
        close(a.ss_y, 478547.0, 1e-6);
        close(a.ss_0, 400900.027778, 1e-5);
        close(a.ss_total, 77646.97, 0.005);
        let names: Vec<&str> = a.components.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["material", "temp", "material:temp", "error"]);

        let m = a.component("material").unwrap();
        close(m.ss, 10683.72, 0.005);
        assert_eq!(m.df, 2);
        close(m.f.unwrap(), 7.91, 0.005);
        close(m.p.unwrap(), 0.0020, 0.00005);
        close(m.f_table.unwrap(), 3.354131, 1e-5);
        let t = a.component("temp").unwrap();
        close(t.ss, 39118.72, 0.005);
        close(t.f.unwrap(), 28.97, 0.005);
        close(t.p.unwrap(), 1.9085959e-07, 1e-12);
        let i = a.component("material:temp").unwrap();
        close(i.ss, 9613.78, 0.005);
        assert_eq!(i.df, 4);
        close(i.f.unwrap(), 3.56, 0.005);
        close(i.p.unwrap(), 0.0186, 0.00005);
        close(i.f_table.unwrap(), 2.727765, 1e-5);
        let e = a.component("error").unwrap();
        close(e.ss, 18230.75, 1e-6);
        assert_eq!(e.df, 27);
        close(e.ms, 675.21, 0.005);
        assert!(e.f.is_none() && e.p.is_none());
        // Allocation of variation (independent computation): 13.759355, 50.380229, 12.381394 %.
        close(m.percent, 13.759355, 1e-5);
        close(t.percent, 50.380229, 1e-5);
        close(i.percent, 12.381394, 1e-5);
        let sum: f64 = a.components.iter().map(|c| c.percent).sum();
        close(sum, 100.0, 1e-9);
        assert!(m.significant() && t.significant() && i.significant());
    }

    /// Residuals are y − cell mean: cell (1, 15 °F) has mean (130+155+74+180)/4 = 134.75, so the first
    /// observation (130) is predicted 134.75 with residual −4.75.
    #[test]
    fn predicted_is_the_cell_mean_and_qq_is_sorted() {
        let a = analyse(&names(&["m", "t"]), &battery(), &Default::default()).unwrap();
        close(a.fitted[0].predicted, 134.75, 1e-9);
        close(a.fitted[0].residual, -4.75, 1e-9);
        close(a.fitted[3].residual, 180.0 - 134.75, 1e-9);
        let qq = a.qq_points();
        assert_eq!(qq.len(), 36);
        assert!(qq.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        // First quantile: Φ⁻¹(0.5/36) = −2.2004106 (Python statistics.NormalDist().inv_cdf).
        close(qq[0].0, -2.2004106, 1e-6);
        // Smallest and largest residuals, by hand from the cell means: 74 − 134.75 = −60.75 and
        // 180 − 134.75 = 45.25 (all other cells' residuals lie within ±32.25).
        close(qq[0].1, -60.75, 1e-9);
        close(qq[35].1, 45.25, 1e-9);
    }

    /// Montgomery Example 5.3 (soft-drink bottling: fill-height deviation; carbonation 10/12/14 % ×
    /// pressure 25/30 psi × line speed 200/250 bpm, 2 replications). Published (Table 5.13): SS A 252.750,
    /// B 45.375, C 22.042, AB 5.250, AC 0.583, BC 1.042, ABC 1.083, error 8.500 (df 12), total 336.625.
    /// An independent pure-Python computation with explicit three-factor effect formulas gave the same
    /// and p-values A 1.1862487e-09, AB 0.055808116, AC 0.67149386, BC 0.24858669, ABC 0.48687109.
    #[test]
    fn three_factor_matches_montgomery_example_5_3() {
        let data: [(&str, &str, &str, [f64; 2]); 12] = [
            ("10", "25", "200", [-3., -1.]),
            ("10", "25", "250", [-1., 0.]),
            ("10", "30", "200", [-1., 0.]),
            ("10", "30", "250", [1., 1.]),
            ("12", "25", "200", [0., 1.]),
            ("12", "25", "250", [2., 1.]),
            ("12", "30", "200", [2., 3.]),
            ("12", "30", "250", [6., 5.]),
            ("14", "25", "200", [5., 4.]),
            ("14", "25", "250", [7., 6.]),
            ("14", "30", "200", [7., 9.]),
            ("14", "30", "250", [10., 11.]),
        ];
        // Shuffled input order must not matter: feed the rows in reverse.
        let rows: Vec<Observation> = data
            .iter()
            .rev()
            .flat_map(|&(a, b, c, ys)| ys.into_iter().map(move |y| obs(&[a, b, c], y)))
            .collect();
        let a = analyse(&names(&["A", "B", "C"]), &rows, &Default::default()).unwrap();
        let want = [
            ("A", 252.750, 2, Some(1.1862487e-09)),
            ("B", 45.375, 1, None),
            ("C", 22.042, 1, None),
            ("A:B", 5.250, 2, Some(0.055808116)),
            ("A:C", 0.583, 2, Some(0.67149386)),
            ("B:C", 1.042, 1, Some(0.24858669)),
            ("A:B:C", 1.083, 2, Some(0.48687109)),
            ("error", 8.500, 12, None),
        ];
        assert_eq!(a.components.len(), want.len());
        for (c, (name, ss, df, p)) in a.components.iter().zip(want) {
            assert_eq!(c.name, name);
            close(c.ss, ss, 0.0005);
            assert_eq!(c.df, df, "{name}");
            if let Some(p) = p {
                close(c.p.unwrap(), p, p * 1e-6 + 1e-12);
            }
        }
        close(a.ss_total, 336.625, 1e-9);
    }

    /// Seed 004, Tables 2 and 3: throughput of 3 capture methods × 2 kernel configurations, 12 samples per
    /// cell. Table 2 gives only the cell means (2 decimals) and Table 3 the error SS (1,519.46), so the test
    /// builds 12 samples per cell as mean ± d with 6 above and 6 below (SSE = 72 d²). The effects depend
    /// only on the cell means, so SS and allocation must match Table 3 up to the rounding of the means
    /// (Python from the same means: method 2,195,858.36, config 25,285.51, interaction 176,172.50).
    #[test]
    fn two_factor_reproduces_seed_004_table_3() {
        let means = [
            ("Default", "Kernel Module", 943.67),
            ("Default", "PF_PACKET", 562.17),
            ("Default", "PF_RING", 577.08),
            ("Custom", "Kernel Module", 951.75),
            ("Custom", "PF_PACKET", 495.89),
            ("Custom", "PF_RING", 747.72),
        ];
        let d = (1519.46f64 / 72.0).sqrt();
        let rows: Vec<Observation> = means
            .iter()
            .flat_map(|&(cfg, m, y)| {
                (0..12).map(move |i| obs(&[m, cfg], if i % 2 == 0 { y + d } else { y - d }))
            })
            .collect();
        let a = analyse(
            &names(&["Capture Method", "Configuration"]),
            &rows,
            &Default::default(),
        )
        .unwrap();
        let method = a.component("Capture Method").unwrap();
        let config = a.component("Configuration").unwrap();
        let inter = a.component("Capture Method:Configuration").unwrap();
        let error = a.component("error").unwrap();
        // Published: 2,195,829.29 / 25,288.13 / 176,177.69 / 1,519.46; total 2,398,814.57.
        close(method.ss, 2_195_829.29, 2_195_829.29 * 2e-5);
        close(config.ss, 25_288.13, 25_288.13 * 2e-4);
        close(inter.ss, 176_177.69, 176_177.69 * 5e-5);
        close(error.ss, 1_519.46, 1e-6);
        close(a.ss_total, 2_398_814.57, 2_398_814.57 * 2e-5);
        assert_eq!((method.df, config.df, inter.df, error.df), (2, 1, 2, 66));
        // Percentages as printed: 91.54 %, 1.05 %, 7.34 %, 0.06 %.
        assert_eq!(format!("{:.2}", method.percent), "91.54");
        assert_eq!(format!("{:.2}", config.percent), "1.05");
        assert_eq!(format!("{:.2}", inter.percent), "7.34");
        assert_eq!(format!("{:.2}", error.percent), "0.06");
        close(error.ms, 23.02, 0.005);
        // F computed 47,689.47 / 1,098.43 / 3,826.26 (within the rounding of the means).
        close(method.f.unwrap(), 47_689.47, 47_689.47 * 1e-4);
        close(config.f.unwrap(), 1_098.43, 1_098.43 * 2e-4);
        close(inter.f.unwrap(), 3_826.26, 3_826.26 * 1e-4);
    }

    /// Seed 004's F-Table column reads a printed table at 40 denominator degrees of freedom (the row below
    /// 66): 3.23 for F(0.95; 2, 40) and 4.08 for F(0.95; 1, 40). statrs must give the same quantiles.
    #[test]
    fn f_table_quantiles_match_printed_tables() {
        let q = |d1: f64, d2: f64| FisherSnedecor::new(d1, d2).unwrap().inverse_cdf(0.95);
        assert_eq!(format!("{:.2}", q(2.0, 40.0)), "3.23");
        assert_eq!(format!("{:.2}", q(1.0, 40.0)), "4.08");
        // Exact at 66 (independent bisection on the incomplete beta): 3.135918 and 3.986269.
        close(q(2.0, 66.0), 3.135918, 1e-5);
        close(q(1.0, 66.0), 3.986269, 1e-5);
    }

    /// The log transform analyses log10(y): a purely multiplicative effect (level b is ×10) becomes additive.
    /// log10 values: level a cells hold log10 0.5, log10 2 (= ∓0.30103); level b cells 1 ∓ 0.30103. Grand
    /// mean 0.5, effects of L ±0.5 on 4 observations each: SS_L = 8 · 0.25; SS_G = 0; SSE = 8 · 0.30103².
    #[test]
    fn log_transform_uses_log10() {
        let mut rows = Vec::new();
        for (level, base) in [("a", 1.0), ("b", 10.0)] {
            for g in ["x", "y"] {
                for f in [0.5, 2.0] {
                    rows.push(obs(&[level, g], base * f));
                }
            }
        }
        let opts = AnovaOptions {
            log10: true,
            ..Default::default()
        };
        let a = analyse(&names(&["L", "G"]), &rows, &opts).unwrap();
        close(a.component("L").unwrap().ss, 8.0 * 0.25, 1e-12);
        close(a.component("G").unwrap().ss, 0.0, 1e-12);
        close(
            a.component("error").unwrap().ss,
            8.0 * 2f64.log10().powi(2),
            1e-12,
        );
        rows[0].response = 0.0;
        rows[0].line = 7;
        let err = analyse(&names(&["L", "G"]), &rows, &opts).unwrap_err();
        assert!(err.to_string().contains("line 7"), "{err}");
    }

    #[test]
    fn unbalanced_design_names_the_cells() {
        let mut rows = battery();
        rows.remove(5); // one of (1, 70 °F)
        let err = analyse(&names(&["m", "t"]), &rows, &Default::default()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("cell (m=1, t=70) has 3 replication(s) but cell (m=1, t=15) has 4"),
            "{msg}"
        );
        // A whole missing cell.
        let rows: Vec<Observation> = battery()
            .into_iter()
            .filter(|o| o.levels != ["3", "125"])
            .collect();
        let msg = analyse(&names(&["m", "t"]), &rows, &Default::default())
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("cell (m=3, t=125) has no observations"),
            "{msg}"
        );
    }

    #[test]
    fn too_few_levels_and_replications_are_rejected() {
        let rows: Vec<Observation> = battery()
            .into_iter()
            .filter(|o| o.levels[0] == "2")
            .collect();
        let msg = analyse(&names(&["m", "t"]), &rows, &Default::default())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("factor `m` has only one level (`2`)"), "{msg}");
        let rows = vec![obs(&["a"], 1.0), obs(&["b"], 2.0)];
        assert!(matches!(
            analyse(&names(&["x"]), &rows, &Default::default()),
            Err(AnovaError::NoReplications)
        ));
    }

    #[test]
    fn csv_errors_are_clear() {
        let text = "method,rate,tput\nring,1,5.5\ncopy,1,abc\n";
        let msg = read_csv(text.as_bytes(), "tput", &names(&["method"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            "line 3: response `tput` is `abc`, not a finite number; fix or remove that row"
        );
        let msg = read_csv(text.as_bytes(), "tput", &names(&["speed"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            msg,
            "column `speed` is not in the CSV header; the columns are: method, rate, tput"
        );
        let rows = read_csv(
            "method, rate ,tput\nring,1, 5.5\n".as_bytes(),
            "tput",
            &names(&["rate", "method"]),
        )
        .unwrap();
        assert_eq!(rows[0].levels, ["1", "ring"]);
        assert_eq!(rows[0].response, 5.5);
        assert_eq!(rows[0].line, 2);
    }

    #[test]
    fn numbers_print_like_the_seed_tables() {
        assert_eq!(num(39_006_074.256), "39,006,074.26");
        assert_eq!(num(23.02), "23.02");
        assert_eq!(num(100.0), "100.00");
        assert_eq!(num(-1234.5), "-1,234.50");
        assert_eq!(num(0.0), "0.00");
        assert_eq!(num(0.000123), "1.23e-4");
    }
}
