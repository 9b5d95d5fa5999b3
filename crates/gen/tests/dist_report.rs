//! Measurements, not checks: `cargo test --release -p gen --test dist_report -- --ignored --nocapture`
//! prints fidelity and draw cost per distribution and writes plots to $TMPDIR.

use std::time::Instant;

use gen::sizes::{plot_svg, sampled_tv, Distribution, Mode, Params, SizeModel};

#[test]
#[ignore = "measurement; run with --ignored --nocapture (release build for timings)"]
fn report_fidelity_and_draw_cost() {
    const N: u64 = 1_000_000;
    const DRAWS: u64 = 50_000_000;
    println!(
        "{:<16} {:>6} {:>8} | {:>9} {:>9} {:>7} | {:>9} {:>9} {:>7}",
        "dist", "sizes", "mean", "exact TV", "@1M", "ns", "cdist TV", "@1M", "ns"
    );
    for spec in [
        "internet",
        "imix",
        "rfc6985:aaafg",
        "uniform:46-1500",
        "fixed:46",
    ] {
        let dist = Distribution::from_spec(spec).unwrap();
        let mut row = format!(
            "{:<16} {:>6} {:>8.2} |",
            spec,
            dist.histogram.distinct(),
            dist.histogram.mean()
        );
        for mode in [Mode::Exact, Mode::CreateDist] {
            let m = SizeModel::build(&dist, mode, Params::default()).unwrap();
            let tv = m.tv_distance();
            let stv = sampled_tv(&mut m.sampler(1), N, m.source());
            let mut s = m.sampler(2);
            let t = Instant::now();
            let mut acc = 0u64;
            for _ in 0..DRAWS {
                acc = acc.wrapping_add(s.next_size() as u64);
            }
            let ns = t.elapsed().as_nanos() as f64 / DRAWS as f64;
            std::hint::black_box(acc);
            row += &format!(" {tv:>9.5} {stv:>9.5} {ns:>7.2} |");
            if spec == "internet" {
                let svg = plot_svg(
                    m.source(),
                    &m.probabilities(),
                    &format!("{spec}: source vs {mode:?} model"),
                )
                .unwrap();
                let path = std::env::temp_dir().join(format!("ringcap-dist-{spec}-{mode:?}.svg"));
                std::fs::write(&path, svg).unwrap();
                println!("plot: {}", path.display());
            }
        }
        println!("{row}");
    }
}
