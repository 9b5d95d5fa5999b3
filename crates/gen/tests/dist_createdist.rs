//! createDist (seed 000 §4.2.3, eqs. 4.1–4.10) on small histograms worked out by hand.
//! The expected arrays below come from the working in the comments, not from the code.

use gen::sizes::{CreateDist, Distribution, Histogram, Mode, Params, SizeModel};

/// The worked example: ρ = 100, σ_bin = 4, N_ps = 16, p_Ωbound = 0.1.
fn example() -> (Histogram, Params) {
    let hist = Histogram::from_pairs([
        (2, 1),
        (4, 2),
        (5, 30),
        (6, 4),
        (9, 10),
        (10, 3),
        (11, 5),
        (12, 13),
        (13, 6),
        (14, 6),
        (16, 20),
        (17, 5), // above N_ps: left out, c_all counts only sizes ≤ 16
    ]);
    let params = Params {
        precision: 100,
        max_size: 16,
        outlier_bound: 0.1,
        bin_width: 4,
    };
    (hist, params)
}

// Working (by hand):
//   c_all = 1+2+30+4+10+3+5+13+6+6+20 = 100 (size 17 is above N_ps = 16: left out).
//   n_bin = ⌈16/4⌉ = 4; bin j = [4j, 4j+4): 1 = 4..7, 2 = 8..11, 3 = 12..15, 4 = 16..19.
//   Bin 4 would jitter up to 19 > N_ps, so it is not usable (edge rule); size 2 is below
//   bin 1. Both sizes can only be outliers.
//   (4.1) p: 2 .01, 4 .02, 5 .30, 6 .04, 9 .10, 10 .03, 11 .05, 12 .13, 13 .06, 14 .06, 16 .20
//   (4.2) Ω = {p ≥ .1} = {5, 9 (p = .1 exactly), 12, 16}; edge rule adds 2 (forced).
//   bin 1: Ω_1 = {5}, n = 1, b = c4+c6+c7 = 2+4+0 = 6, avg = 6/(4−1) = 2,
//          c5 = 30−2 = 28, b_1 = 6 + 1·2 = 8
//   bin 2: Ω_2 = {9}, n = 1, b = c8+c10+c11 = 0+3+5 = 8, avg = 8/3,
//          c9 = 10 − 8/3 = 22/3 ≈ 7.33, b_2 = 8 + 8/3 = 32/3 ≈ 10.67
//   bin 3: Ω_3 = {12}, n = 1, b = c13+c14+c15 = 6+6+0 = 12, avg = 4, c12 = 9, b_3 = 16
//   bin 4: unusable, b_4 = 0; c16 stays 20.
//   (4.9)/(4.10) with ρ = 100 and c_all = 100: cells = c:
//     outl 2 → 1, 5 → 28, 9 → 7.33 → 7, 12 → 9, 16 → 20   (Σ = 65 → 35 cells of −1)
//     hist 4 → 8, 8 → 10.67 → 11, 12 → 16, 16 → 0          (bins array: 35 cells)
#[test]
fn worked_example_entries_and_arrays() {
    let (hist, params) = example();
    let m = CreateDist::build(&hist, params).unwrap();
    assert_eq!(m.c_all, 100);
    assert_eq!(m.above_max, 5);

    let outl: Vec<(u16, u32, bool)> = m
        .outliers
        .iter()
        .map(|o| (o.size, o.cells, o.forced))
        .collect();
    assert_eq!(
        outl,
        vec![
            (2, 1, true),
            (5, 28, false),
            (9, 7, false),
            (12, 9, false),
            (16, 20, false)
        ]
    );
    let exact9 = m.outliers[2].exact_cells;
    assert!((exact9 - 22.0 / 3.0).abs() < 1e-9, "{exact9}");

    let bins: Vec<(u32, u32, bool)> = m.bins.iter().map(|b| (b.size, b.cells, b.usable)).collect();
    assert_eq!(
        bins,
        vec![(4, 8, true), (8, 11, true), (12, 16, true), (16, 0, false)]
    );
    assert!((m.bins[1].exact_cells - 32.0 / 3.0).abs() < 1e-9);
    assert_eq!(m.minus_one_cells, 35);

    let mut want_outl = vec![2];
    want_outl.extend([5; 28]);
    want_outl.extend([9; 7]);
    want_outl.extend([12; 9]);
    want_outl.extend([16; 20]);
    want_outl.extend([-1; 35]);
    assert_eq!(m.outliers_array(), &want_outl[..]);
    assert_eq!(m.outliers_array().len(), 100, "ρ cells");

    let mut want_bins = vec![4u16; 8];
    want_bins.extend([8; 11]);
    want_bins.extend([12; 16]);
    assert_eq!(m.bins_array(), &want_bins[..]);
}

// procfs lines (A.2.2): dist <precision> <hist_width> <max_pkt_size> <#outliers> <#histos>,
// then one `outl <size> <cells>` per outlier and one `hist <size> <cells>` per bin.
#[test]
fn worked_example_procfs() {
    let (hist, params) = example();
    let m = CreateDist::build(&hist, params).unwrap();
    let plain = "dist 100 4 16 5 4\n\
                 outl 2 1\noutl 5 28\noutl 9 7\noutl 12 9\noutl 16 20\n\
                 hist 4 8\nhist 8 11\nhist 12 16\nhist 16 0\n";
    assert_eq!(m.procfs_string(false), plain);
    let wrapped: String = plain.lines().map(|l| format!("pgset \"{l}\"\n")).collect();
    assert_eq!(m.procfs_string(true), wrapped);
    assert!(m
        .procfs_string(true)
        .starts_with("pgset \"dist 100 4 16 5 4\"\n"));
}

// Model probabilities from the arrays (Figure 4.3): P(outlier cell) = cells/100,
// P(−1) = 35/100, then bin j with cells_j/35 and each of its 4 sizes with 1/4:
//   bin 1: .35 · 8/35 / 4 = .02    bin 2: .35 · 11/35 / 4 = .0275    bin 3: .35 · 16/35 / 4 = .04
//   P(2) = .01, P(4) = .02, P(5) = .28 + .02 = .30, P(6) = P(7) = .02,
//   P(8) = .0275, P(9) = .07 + .0275 = .0975, P(10) = P(11) = .0275,
//   P(12) = .09 + .04 = .13, P(13) = P(14) = P(15) = .04, P(16) = .20.     Σ = 1.
// TV against the source shares c_i/105 (the 5 packets of size 17 count as missed).
#[test]
fn worked_example_model_probabilities_and_tv() {
    let (hist, params) = example();
    let m = CreateDist::build(&hist, params).unwrap();
    let p = m.probabilities();
    let want: &[(usize, f64)] = &[
        (2, 0.01),
        (4, 0.02),
        (5, 0.30),
        (6, 0.02),
        (7, 0.02),
        (8, 0.0275),
        (9, 0.0975),
        (10, 0.0275),
        (11, 0.0275),
        (12, 0.13),
        (13, 0.04),
        (14, 0.04),
        (15, 0.04),
        (16, 0.20),
    ];
    for &(s, w) in want {
        assert!((p[s] - w).abs() < 1e-12, "P({s}) = {} want {w}", p[s]);
    }
    let listed: f64 = want.iter().map(|x| x.1).sum();
    assert!((listed - 1.0).abs() < 1e-12);
    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);

    let src = |s: usize| hist.count(s as u16) as f64 / 105.0;
    let mut tv = 0.0;
    for s in 0..=17 {
        let model = want.iter().find(|x| x.0 == s).map_or(0.0, |x| x.1);
        tv += (model - src(s)).abs();
    }
    tv /= 2.0;
    let dist = Distribution::from_histogram("example", hist.clone());
    let model = SizeModel::build(&dist, Mode::CreateDist, params).unwrap();
    assert!(
        (model.tv_distance() - tv).abs() < 1e-12,
        "{} vs {tv}",
        model.tv_distance()
    );
}

// Drawing follows Figure 4.3: every drawn size is one the arrays can produce.
#[test]
fn worked_example_draws_only_model_sizes() {
    let (hist, params) = example();
    let dist = Distribution::from_histogram("example", hist);
    let model = SizeModel::build(&dist, Mode::CreateDist, params).unwrap();
    let mut s = model.sampler(7);
    let mut seen = [0u32; 20];
    for _ in 0..200_000 {
        seen[s.next_size() as usize] += 1;
    }
    // Possible: 2, 4..=16. Impossible: 0, 1, 3, 17..
    for (size, &n) in seen.iter().enumerate() {
        let possible = size == 2 || (4..=16).contains(&size);
        assert_eq!(n > 0, possible, "size {size} drawn {n} times");
    }
    // P(5) = .30: 60 000 expected, σ ≈ 205.
    assert!((seen[5] as i64 - 60_000).abs() < 1_500, "{}", seen[5]);
}

// The simple IMIX with the defaults (ρ = 1000, σ = 20, N_ps = 1500, bound .002):
//   c_all = 12; p = 7/12, 4/12, 1/12, all ≥ .002 → Ω = {40, 576, 1500}.
//   Bins: 40 lies in [40, 60), 576 in [560, 580); neither bin has another size with
//   packets → b = 0, avg = 0. 1500 lies in [1500, 1520), unusable (past N_ps), no change.
//   (4.10): 583.33 → 583, 333.33 → 333, 83.33 → 83; Σ = 999, one −1 cell, but every bin
//   has 0 cells → the spare cell goes to the outlier furthest below its share
//   (583.33, 333.33, 83.33: all .33 below; tie → smallest size): 40 → 584.
//   Result: 584 × 40, 333 × 576, 83 × 1500, no −1 cell, empty bins array.
#[test]
fn imix_defaults_rounding_gives_spare_cell_to_outlier() {
    let m = CreateDist::build(&Distribution::imix().histogram, Params::default()).unwrap();
    let outl: Vec<(u16, u32)> = m.outliers.iter().map(|o| (o.size, o.cells)).collect();
    assert_eq!(outl, vec![(40, 584), (576, 333), (1500, 83)]);
    assert_eq!(m.minus_one_cells, 0);
    assert!(m.bins_array().is_empty());
    assert_eq!(
        m.bins.len(),
        75,
        "n_bin = ⌈1500/20⌉ = 75 hist lines, as in A.2.2's example"
    );
    let procfs = m.procfs_string(false);
    assert!(procfs.starts_with(
        "dist 1000 20 1500 3 75\noutl 40 584\noutl 576 333\noutl 1500 83\nhist 20 0\n"
    ));
    assert!(procfs.ends_with("hist 1500 0\n"));
}

// Overshoot: four sizes 100, 200, 300, 400 with one packet each, ρ = 10.
//   p = .25 each ≥ .002 → all outliers; their bins hold nothing else → avg = 0.
//   (4.10): 2.5 → 3 each, Σ = 12 > ρ = 10 → take back 2 cells from those rounded up most
//   (all by .5; tie → smallest size first): 100 → 2, 200 → 2, 300 → 3, 400 → 3.
#[test]
fn rounding_overshoot_is_taken_back() {
    let hist = Histogram::from_pairs([(100, 1), (200, 1), (300, 1), (400, 1)]);
    let params = Params {
        precision: 10,
        ..Params::default()
    };
    let m = CreateDist::build(&hist, params).unwrap();
    let outl: Vec<(u16, u32)> = m.outliers.iter().map(|o| (o.size, o.cells)).collect();
    assert_eq!(outl, vec![(100, 2), (200, 2), (300, 3), (400, 3)]);
    assert_eq!(m.outliers_array().len(), 10);
    assert_eq!(m.minus_one_cells, 0);
}

// A bin whose every size is an outlier (σ − n_Ωj = 0 in eq. 4.6): avg = 0, bin empty.
//   σ = 2, N_ps = 10, sizes 4 and 5 (bin 2 = [4, 6)) with 1 packet each, bound .1:
//   both outliers, b_2 = 0 → 0 cells; ρ = 10: 5 cells each.
#[test]
fn bin_of_only_outliers_is_empty() {
    let hist = Histogram::from_pairs([(4, 1), (5, 1)]);
    let params = Params {
        precision: 10,
        max_size: 10,
        outlier_bound: 0.1,
        bin_width: 2,
    };
    let m = CreateDist::build(&hist, params).unwrap();
    assert_eq!(m.outliers_array(), &[4, 4, 4, 4, 4, 5, 5, 5, 5, 5]);
    assert!(m.bins.iter().all(|b| b.cells == 0));
}

#[test]
fn bad_parameters_are_refused() {
    let hist = Distribution::imix().histogram;
    for (p, what) in [
        (
            Params {
                precision: 0,
                ..Params::default()
            },
            "precision",
        ),
        (
            Params {
                bin_width: 0,
                ..Params::default()
            },
            "bin width",
        ),
        (
            Params {
                max_size: 0,
                ..Params::default()
            },
            "maximum size",
        ),
        (
            Params {
                outlier_bound: 0.0,
                ..Params::default()
            },
            "outlier bound",
        ),
        (
            Params {
                outlier_bound: 2.0,
                ..Params::default()
            },
            "outlier bound",
        ),
    ] {
        let e = CreateDist::build(&hist, p).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    }
    // Nothing at or below N_ps.
    let e = CreateDist::build(&Histogram::from_pairs([(9000, 3)]), Params::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("3 packets above N_ps = 1500"), "{e}");
}

// The default distribution through createDist: the model is a proper distribution, never
// draws above N_ps, and stays close to the table (bins average the flat floor well).
#[test]
fn internet_createdist_defaults() {
    let dist = Distribution::internet();
    let model = SizeModel::build(&dist, Mode::CreateDist, Params::default()).unwrap();
    let p = model.probabilities();
    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    assert!(p[1501..].iter().all(|&x| x == 0.0));
    let tv = model.tv_distance();
    assert!(tv < 0.05, "createDist TV {tv}");
    let cd = model.create_dist_model().unwrap();
    assert_eq!(cd.outliers_array().len(), 1000);
    let mut s = model.sampler(1);
    for _ in 0..100_000 {
        let x = s.next_size();
        assert!((20..=1500).contains(&x), "{x}");
    }
}
