//! Named distributions, exact sampling, reproducibility and fidelity (TV distance, plot).

use gen::sizes::{
    plot_svg, sample_histogram, sampled_tv, write_sizes, Distribution, Histogram, Mode, Params,
    SizeModel, Summary,
};

fn exact(spec: &str) -> SizeModel {
    SizeModel::build(
        &Distribution::from_spec(spec).unwrap(),
        Mode::Exact,
        Params::default(),
    )
    .unwrap()
}

#[test]
fn named_distributions_have_the_right_means() {
    // Simple IMIX: (7·40 + 4·576 + 1·1500) / 12 = 4084 / 12 = 340.33 IP bytes.
    let imix = Distribution::from_spec("imix").unwrap();
    assert!((imix.histogram.mean() - 4084.0 / 12.0).abs() < 1e-9);
    assert_eq!(
        imix.histogram,
        Histogram::from_pairs([(40, 7), (576, 4), (1500, 1)])
    );

    // fixed:46 is one size (60-byte frames, 64 with FCS).
    let f = Distribution::from_spec("fixed:46").unwrap();
    assert_eq!(f.histogram, Histogram::from_pairs([(46, 1)]));

    // uniform:100-199: mean 149.5, 100 sizes.
    let u = Distribution::from_spec("uniform:100-199").unwrap();
    assert_eq!(u.histogram.distinct(), 100);
    assert!((u.histogram.mean() - 149.5).abs() < 1e-9);

    // RFC 6985 genome aaafg: frames 64,64,64,1280,1518 → IP 46,46,46,1262,1500;
    // mean (3·46 + 1262 + 1500) / 5 = 2900 / 5 = 580.
    let g = Distribution::from_spec("rfc6985:aaafg").unwrap();
    assert_eq!(g.sequence.as_deref(), Some(&[46, 46, 46, 1262, 1500][..]));
    assert!((g.histogram.mean() - 580.0).abs() < 1e-9);
    // All seven letters: IP = frame − 18.
    let all = Distribution::from_spec("rfc6985:abcdefg").unwrap();
    assert_eq!(
        all.sequence.unwrap(),
        vec![46, 110, 238, 494, 1006, 1262, 1500]
    );
    let hz = Distribution::from_spec("rfc6985:ahz,h=9018,z=300").unwrap();
    assert_eq!(hz.sequence.unwrap(), vec![46, 9000, 282]);

    // internet: by hand from the table (see Distribution::internet):
    //   Σ size·count = 40·400000 + 1500·200000 + 52·50000 + 576·30000 + 552·10000
    //                 + 1300·20000 + 2000·(Σ41..64 − 52 = 1208) + 1500·(Σ1420..1499 = 116760)
    //                 + 92·(Σ65..1419 − 552 − 576 − 1300 = 1002982) = 637 230 344
    //   Σ count = 710000 + 23·2000 + 80·1500 + 1352·92 = 1 000 384 → mean ≈ 636.99
    let net = Distribution::from_spec("internet").unwrap();
    assert_eq!(net.histogram.total(), 1_000_384);
    assert!((net.histogram.mean() - 637_230_344.0 / 1_000_384.0).abs() < 1e-9);
    let top = Summary::of(&net.histogram, 3);
    assert_eq!(
        top.heavy_hitters.iter().map(|h| h.size).collect::<Vec<_>>(),
        vec![40, 1500, 52]
    );
}

#[test]
fn bad_specs_say_what_is_accepted() {
    for (spec, what) in [
        ("fixed:0", "out of range"),
        ("fixed:x", "not a size"),
        ("fixed:70000", "out of range"),
        ("uniform:50", "A-B"),
        ("uniform:60-50", "smaller size first"),
        ("rfc6985:aax", "not a genome letter"),
        ("rfc6985:ah", "h=FRAME"),
        ("rfc6985:", "empty"),
        ("rfc6985:az,z=40", "below the Ethernet minimum"),
        ("bogus", "internet, imix"),
        ("file:", "give a path"),
        ("mix:", "not a size"),
        ("mix:50,,1500", "with commas"),
        ("mix:50,0", "out of range"),
    ] {
        let e = Distribution::from_spec(spec).unwrap_err().to_string();
        assert!(e.contains(what), "{spec}: {e}");
    }
    let e = Distribution::from_spec("file:/nonexistent/x.dist")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/x.dist"), "{e}");
}

#[test]
fn same_seed_same_sizes() {
    for spec in ["internet", "imix", "uniform:46-1500"] {
        for mode in [Mode::Exact, Mode::CreateDist] {
            let m = SizeModel::build(
                &Distribution::from_spec(spec).unwrap(),
                mode,
                Params::default(),
            )
            .unwrap();
            let a: Vec<u16> = m.sampler(1234).take(10_000).collect();
            let b: Vec<u16> = m.clone().sampler(1234).take(10_000).collect();
            assert_eq!(a, b, "{spec} {mode:?}");
            let c: Vec<u16> = m.sampler(1235).take(10_000).collect();
            assert_ne!(a, c, "{spec} {mode:?}: another seed gives another sequence");
            let d: Vec<u16> = m.sampler_stream(1234, 1).take(10_000).collect();
            assert_ne!(
                a, d,
                "{spec} {mode:?}: another stream gives another sequence"
            );
        }
    }
}

// The createDist sampler is Figure 4.3 driven by the named PRNG (ChaCha8, seed_from_u64):
// redo Figure 4.3 here from the arrays with the same generator and compare draw by draw.
#[test]
fn createdist_sampler_is_figure_4_3_on_chacha8() {
    use rand::distributions::{Distribution as _, Uniform};
    let m = SizeModel::build(
        &Distribution::internet(),
        Mode::CreateDist,
        Params::default(),
    )
    .unwrap();
    let cd = m.create_dist_model().unwrap();
    let (outl, bins) = (cd.outliers_array(), cd.bins_array());
    let mut rng = gen::sizes::seeded_rng(77, 0);
    let pick_o = Uniform::new(0, outl.len() as u32);
    let pick_b = Uniform::new(0, bins.len() as u32);
    let jitter = Uniform::new(0u16, 20);
    let mut sampler = m.sampler(77);
    let mut via_bins = 0;
    for _ in 0..100_000 {
        let cell = outl[pick_o.sample(&mut rng) as usize];
        let want = if cell >= 0 {
            cell as u16
        } else {
            via_bins += 1;
            bins[pick_b.sample(&mut rng) as usize] + jitter.sample(&mut rng)
        };
        assert_eq!(sampler.next_size(), want);
    }
    assert!(
        via_bins > 10_000,
        "the bins stage was exercised ({via_bins})"
    );
}

#[test]
fn genome_is_replayed_in_order() {
    let m = exact("rfc6985:aaafg");
    let got: Vec<u16> = m.sampler(99).take(12).collect();
    assert_eq!(
        got,
        vec![46, 46, 46, 1262, 1500, 46, 46, 46, 1262, 1500, 46, 46]
    );
    assert_eq!(m.tv_distance(), 0.0);
}

#[test]
fn mix_sends_its_sizes_in_turn_in_equal_shares() {
    // Seed 002's mixed burst phase: frames of 64, 200, 576, 768, 1024 and 1514 bytes (IP = frame − 14).
    let d = Distribution::from_spec("mix:50,186,562,754,1010,1500").unwrap();
    assert_eq!(d.histogram.distinct(), 6);
    assert!((d.histogram.mean() - 4062.0 / 6.0).abs() < 1e-9);
    let m = exact("mix:50,186,562,754,1010,1500");
    let got: Vec<u16> = m.sampler(3).take(8).collect();
    assert_eq!(got, vec![50, 186, 562, 754, 1010, 1500, 50, 186]);
    assert_eq!(m.tv_distance(), 0.0);
}

#[test]
fn fixed_always_gives_the_size() {
    let m = exact("fixed:46");
    assert!(m.sampler(5).take(1000).all(|s| s == 46));
    assert_eq!(m.tv_distance(), 0.0);
}

// Exact mode: TV ≈ 0 analytically; sampled at 1 M draws < 0.01. Sampling noise alone is
// about √(1/(2πn)) · Σ√p_i: ≈ 0.0075 for `internet`, ≈ 0.0006 for imix, ≈ 0.003 for 64
// equally likely sizes (but ≈ 0.015 for uniform:46-1500: 1455 sizes need ~2.3 M draws).
#[test]
fn exact_mode_tv() {
    for spec in ["internet", "imix", "uniform:64-127"] {
        let m = exact(spec);
        assert!(
            m.tv_distance() < 1e-12,
            "{spec}: analytic TV {}",
            m.tv_distance()
        );
        let tv = sampled_tv(&mut m.sampler(2024), 1_000_000, m.source());
        assert!(tv < 0.01, "{spec}: sampled TV {tv}");
        assert!(tv > 0.0);
    }
}

// createDist's analytic TV agrees with sampling it (the arrays are what is drawn).
#[test]
fn createdist_analytic_tv_matches_sampling() {
    let m = SizeModel::build(
        &Distribution::internet(),
        Mode::CreateDist,
        Params::default(),
    )
    .unwrap();
    let analytic = m.tv_distance();
    let sampled = sampled_tv(&mut m.sampler(3), 1_000_000, m.source());
    assert!(
        (analytic - sampled).abs() < 0.01,
        "analytic {analytic} sampled {sampled}"
    );
    // Model mean from the tables vs the mean of 1 M draws.
    let h = sample_histogram(&mut m.sampler(4), 1_000_000);
    assert!(
        (h.mean() - m.mean()).abs() < 2.0,
        "{} vs {}",
        h.mean(),
        m.mean()
    );
}

#[test]
fn sizes_output_is_the_sampler_sequence() {
    let m = exact("imix");
    let mut out = Vec::new();
    write_sizes(&mut m.sampler(8), 1000, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let parsed: Vec<u16> = text.lines().map(|l| l.parse().unwrap()).collect();
    let direct: Vec<u16> = m.sampler(8).take(1000).collect();
    assert_eq!(parsed, direct);
}

#[test]
fn summary_heavy_hitters() {
    let s = Summary::of(&Distribution::imix().histogram, 10);
    assert_eq!(s.count, 12);
    assert_eq!(s.distinct, 3);
    let rows: Vec<(u16, u64)> = s.heavy_hitters.iter().map(|h| (h.size, h.count)).collect();
    assert_eq!(rows, vec![(40, 7), (576, 4), (1500, 1)]);
    assert!((s.heavy_hitters[1].cumulative - 11.0 / 12.0).abs() < 1e-12);
    assert!((s.heavy_hitters[2].cumulative - 1.0).abs() < 1e-12);
    let text = s.to_string();
    assert!(text.contains("mean 340.33 B"), "{text}");
    assert!(text.contains("58.33%"), "{text}");
}

#[test]
fn plot_is_an_svg_with_both_series() {
    let m = SizeModel::build(
        &Distribution::internet(),
        Mode::CreateDist,
        Params::default(),
    )
    .unwrap();
    let svg = plot_svg(
        m.source(),
        &m.probabilities(),
        "internet: source vs createDist",
    )
    .unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("source") && svg.contains("model"));
    assert!(svg.contains("internet: source vs createDist"));
}
