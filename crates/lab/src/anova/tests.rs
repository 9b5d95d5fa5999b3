//! The analysis checked against the worked examples of Jain and the tables of seed 004.

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
