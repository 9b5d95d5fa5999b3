//! The residual plots of the visual tests: residuals vs. predicted, and normal Q-Q.

use plot::{Chart, RefLine};

use super::{num, Anova};

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
