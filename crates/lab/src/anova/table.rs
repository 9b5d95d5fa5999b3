//! The ANOVA table as text, and its numbers (seed 004's layout).

use super::Anova;

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

#[cfg(test)]
mod tests {
    use super::*;

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
