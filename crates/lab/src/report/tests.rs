//! The report on hand-written bench directories (crates/lab/testdata/report): every expected number below
//! was computed by hand from those files, not taken from the code's output.

use std::path::{Path, PathBuf};

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/report")
        .join(name)
}

/// A copy of a fixture directory in a fresh temp dir (the report writes into it).
fn copy_fixture(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "lab-report-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(fixture(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}

fn close(got: f64, want: f64) {
    assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
}

fn point<'a>(s: &'a [PointSummary], key: &str) -> &'a PointSummary {
    s.iter()
        .find(|p| p.point == key)
        .unwrap_or_else(|| panic!("no point {key}"))
}

fn check(st: &Stats, n: usize, avg: f64, min: f64, max: f64, median: f64) {
    assert_eq!(st.n, n);
    close(st.avg, avg);
    close(st.min, min);
    close(st.max, max);
    close(st.median, median);
}

#[test]
fn baseline_summaries_match_hand_computed_numbers() {
    let results = read_results(&fixture("baseline").join("results.csv")).unwrap();
    assert_eq!(results.factors, ["method", "rate_mbps"]);
    assert_eq!(results.rows.len(), 12);
    let runs = runs(&results, false);
    assert_eq!(runs.iter().filter(|r| !r.ok).count(), 1);
    let metrics = summary_metrics(&runs);
    let s = summarize(&runs, &metrics);
    assert_eq!(s.len(), 4);

    let rc100 = point(&s, "method=ringcap;rate_mbps=100");
    check(&rc100.metrics["capture_rate"], 3, 1.0, 1.0, 1.0, 1.0);
    // busy = 100 − idle: idle 80, 82, 84.
    check(&rc100.metrics["cpu_busy"], 3, 18.0, 16.0, 20.0, 18.0);
    check(&rc100.metrics["mbps"], 3, 100.0, 99.0, 101.0, 100.0);

    let rcmax = point(&s, "method=ringcap;rate_mbps=max");
    check(&rcmax.metrics["capture_rate"], 3, 0.99, 0.98, 1.0, 0.99);
    check(
        &rcmax.metrics["app_ns_per_pkt"],
        3,
        300.0,
        100.0,
        600.0,
        200.0,
    );
    check(&rcmax.metrics["drop_ring"], 3, 10.0, 0.0, 20.0, 10.0);
    check(&rcmax.metrics["cpu_softirq"], 3, 30.0, 20.0, 40.0, 30.0);
    assert!(!rcmax.metrics.contains_key("drop_storage"), "empty column");

    let td100 = point(&s, "method=tcpdump;rate_mbps=100");
    check(
        &td100.metrics["capture_rate"],
        3,
        2.995 / 3.0,
        0.995,
        1.0,
        1.0,
    );

    // The failed rerun is counted but not averaged in: two values, the median of an even count is the mean
    // of the middle two.
    let tdmax = point(&s, "method=tcpdump;rate_mbps=max");
    assert_eq!((tdmax.runs_ok, tdmax.runs_failed), (2, 1));
    check(&tdmax.metrics["capture_rate"], 2, 0.8, 0.7, 0.9, 0.8);
    check(&tdmax.metrics["cpu_busy"], 2, 75.0, 70.0, 80.0, 75.0);
    check(
        &tdmax.metrics["app_ns_per_pkt"],
        2,
        1100.0,
        1000.0,
        1200.0,
        1100.0,
    );
}

#[test]
fn multi_app_is_worst_avg_best_per_run_first() {
    let results = read_results(&fixture("multi").join("results.csv")).unwrap();
    // The last line was cut short (an interrupted plan): skipped and noted, the rest is used.
    assert_eq!(results.rows.len(), 6);
    assert_eq!(
        results.skipped_lines.len(),
        1,
        "{:?}",
        results.skipped_lines
    );
    let runs = runs(&results, true);
    assert_eq!(runs.len(), 4);
    assert_eq!(runs[2].apps, 2);
    let s = summarize(&runs, &summary_metrics(&runs));
    let two = point(&s, "apps=2;method=tcpdump");
    // Run 2: apps 0.8, 0.6 → worst 0.6, avg 0.7, best 0.8; run 3: 0.5, 0.9 → 0.5, 0.7, 0.9.
    check(&two.metrics["capture_rate_worst"], 2, 0.55, 0.5, 0.6, 0.55);
    check(&two.metrics["capture_rate_avg"], 2, 0.7, 0.7, 0.7, 0.7);
    check(&two.metrics["capture_rate_best"], 2, 0.85, 0.8, 0.9, 0.85);
    check(&two.metrics["capture_rate"], 2, 0.7, 0.7, 0.7, 0.7);
    // Per-app ns/packet averaged over the apps per run: (100 + 300) / 2 = 200, then 300.
    check(
        &two.metrics["app_ns_per_pkt"],
        2,
        250.0,
        200.0,
        300.0,
        250.0,
    );
    check(&two.metrics["cpu_busy"], 2, 65.0, 60.0, 70.0, 65.0);
    let one = point(&s, "apps=1;method=tcpdump");
    check(&one.metrics["capture_rate_worst"], 2, 0.95, 0.9, 1.0, 0.95);
}

/// Every plot must be well-formed XML with an <svg> root and draw data, not only axes and a legend.
fn parse_svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let marks = plot::drawn_data_marks(&text);
    assert!(
        marks.is_some_and(|n| n > 0),
        "{}: {marks:?} data marks",
        path.display()
    );
    text
}

#[test]
fn baseline_report_files_and_values() {
    let dir = copy_fixture("baseline");
    let sum = write(&dir).unwrap();
    assert_eq!(
        (sum.runs, sum.runs_ok, sum.runs_failed, sum.points),
        (12, 11, 1, 4)
    );
    assert!(sum.complete);
    assert!(sum.anova_json.is_none());

    // summary.csv: one row per point and metric, in results.csv units.
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(
        csv.starts_with("point,method,rate_mbps,runs_ok,runs_failed,metric,n,avg,min,max,median\n")
    );
    assert!(
        csv.contains(
            "method=tcpdump;rate_mbps=max,tcpdump,max,2,1,capture_rate,2,0.8,0.7,0.9,0.8\n"
        ),
        "{csv}"
    );
    assert!(csv.contains(
        "method=ringcap;rate_mbps=max,ringcap,max,3,0,app_ns_per_pkt,3,300,100,600,200\n"
    ));

    // Plots: capture rate, ns/packet, CPU busy, and the CPU modes above 1 % (user, system, softirq).
    let names: Vec<String> = sum
        .plots
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "capture_rate.svg",
        "app_ns_per_pkt.svg",
        "cpu_busy.svg",
        "cpu_user.svg",
        "cpu_system.svg",
        "cpu_softirq.svg",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    assert!(
        !names.iter().any(|n| n == "cpu_nice.svg"),
        "nice is always 0"
    );
    for p in &sum.plots {
        parse_svg(p);
    }
    let cap = parse_svg(&dir.join("plots/capture_rate.svg"));
    for text in [
        "capture rate (% of generated packets)",
        "offered data rate (Mbit/s, measured)",
        "ringcap",
        "tcpdump",
    ] {
        assert!(cap.contains(text), "capture_rate.svg lacks `{text}`");
    }
    if crate::machine::which("rsvg-convert").is_some() {
        let png = std::fs::read(dir.join("plots/capture_rate.png")).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
    }

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for text in [
        "<h1>Fixture: capture rate &amp; CPU vs data rate</h1>",
        "one run failed &lt;on purpose&gt;",
        // tcpdump at max: avg 80 %, min 70 %, max 90 %; ringcap at max 99 %; ns/packet 300; CPU busy 75 %.
        "80.00 %",
        "(70.00 %–90.00 %)",
        "99.00 %",
        "300 ns/pkt",
        "75.0 %",
        "950 Mb/s",
        "tcpdump exited 1 before it was ready",
        "stenotype not installed (apt install stenographer)",
        "Fixture CPU 3000",
        "interface rcrx0",
        "driver veth",
        "4.99.3",
        "rate_mbps = [100, &quot;max&quot;]",
        "<svg",
    ] {
        assert!(html.contains(text), "report.html lacks `{text}`");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multi_app_report_has_worst_avg_best_plot() {
    let dir = copy_fixture("multi");
    let sum = write(&dir).unwrap();
    assert_eq!(sum.runs, 4);
    assert!(
        sum.warnings.iter().any(|w| w.contains("fields instead of")),
        "{:?}",
        sum.warnings
    );
    // No meta.json: still a report, with a note.
    assert!(sum.warnings.iter().any(|w| w.contains("no meta.json")));
    let svg = parse_svg(&dir.join("plots/multi_app_method-tcpdump.svg"));
    assert!(svg.contains("worst app") && svg.contains("best app"));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("55.00 % / 70.00 % / 85.00 %"),
        "worst / avg / best of apps=2"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// 2 × 2 design, 2 replications. By hand: grand mean 0.835; method means 0.95 / 0.72 → SSA = 4 · 2 · 0.115²
/// = 0.1058; placement means 0.765 / 0.905 → SSB = 0.0392; SSE = 2 · (0.01² · 2) + 2 · (0.02² · 2) = 0.002;
/// SST = 0.1542; SSAB = SST − SSA − SSB − SSE = 0.0072; F_A = 0.1058 / (0.002 / 4) = 211.6.
#[test]
fn anova_of_the_plan_is_in_json_html_and_plots() {
    let dir = copy_fixture("schultz");
    let sum = write(&dir).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sum.anova_json.unwrap()).unwrap()).unwrap();
    assert_eq!(json["response"], "capture_rate");
    let comp = |name: &str| {
        json["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no component {name}"))
            .clone()
    };
    let ss = |name: &str| comp(name)["ss"].as_f64().unwrap();
    close(ss("method"), 0.1058);
    close(ss("placement"), 0.0392);
    close(ss("method:placement"), 0.0072);
    close(ss("error"), 0.002);
    assert_eq!(comp("error")["df"], 4);
    assert!((comp("method")["f"].as_f64().unwrap() - 211.6).abs() < 1e-6);
    assert!((comp("method")["percent"].as_f64().unwrap() - 100.0 * 0.1058 / 0.1542).abs() < 1e-9);
    for f in ["anova_residuals.svg", "anova_qq.svg"] {
        let svg = parse_svg(&dir.join("plots").join(f));
        assert_eq!(svg.matches("<circle").count(), 8, "{f}: one point per run");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Analysis of variance"));
    assert!(html.contains("<td class=\"l\">method:placement</td>"));
    assert!(
        html.contains("68.61 %"),
        "method explains 0.1058 / 0.1542 of the variation"
    );
    // x = placement (categorical), series = method: the category names are the x ticks.
    let cap = parse_svg(&dir.join("plots/capture_rate.svg"));
    assert!(
        cap.contains("\nsingle\n") && cap.contains("\ndual\n"),
        "{cap}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unbalanced_anova_and_missing_results_are_explained() {
    let dir = copy_fixture("schultz");
    // Drop the last run: the cell (a2, dual) has one replication less.
    let text = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let cut: Vec<&str> = text.lines().collect();
    std::fs::write(
        dir.join("results.csv"),
        cut[..cut.len() - 1].join("\n") + "\n",
    )
    .unwrap();
    let sum = write(&dir).unwrap();
    assert!(sum.anova_json.is_none());
    assert!(
        sum.warnings
            .iter()
            .any(|w| w.contains("ANOVA not computed") && w.contains("unbalanced")),
        "{:?}",
        sum.warnings
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("could not be computed"));

    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = write(&empty).unwrap_err().to_string();
    assert!(
        err.contains("no results.csv") && err.contains("ringcap bench"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn human_units() {
    // si and sig are tested in the units crate.
    use super::html::{mbit, pct01};
    assert_eq!(mbit(950.0), "950 Mb/s");
    assert_eq!(mbit(1234.0), "1.23 Gb/s");
    assert_eq!(pct01(0.9987), "99.87 %");
}

#[test]
fn gap_plan_plots_rates_against_the_gap_as_set() {
    // Seed 000 Fig 6.1: x is the gap the generator was given, not the rate it reached.
    let dir = copy_fixture("gap");
    let sum = write(&dir).unwrap();
    assert_eq!((sum.runs_ok, sum.points), (6, 3));
    for (file, y) in [
        ("pps.svg", "offered packet rate (packets/s)"),
        ("mbps.svg", "offered data rate (Mbit/s)"),
    ] {
        let svg = parse_svg(&dir.join("plots").join(file));
        // 1000..20000 ns spans more than 16×: log axis.
        assert!(
            svg.contains("inter-packet gap (ns, as set), log scale"),
            "{file}: x axis"
        );
        assert!(!svg.contains("measured"), "{file}: x must be the set gap");
        assert!(svg.contains(y), "{file}: y axis `{y}`");
    }
    // 50 k packets/s at 20 µs, saturated at 400 k at 1 µs (fixture values, 60-byte frames).
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(
        csv.contains("gap_ns=20000,20000,2,0,pps,2,50000,50000,50000,50000\n"),
        "{csv}"
    );
    assert!(
        csv.contains("gap_ns=1000,1000,2,0,mbps,2,192,192,192,192\n"),
        "{csv}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn burst_time_lines_are_folded_over_the_cycle() {
    // Seed 002 Fig 4: two cycles of 0.2 s in run 0's time line; phase 0 offered 10 k and 30 k pps (avg 20 k).
    let dir = copy_fixture("gap");
    let bins = [
        (0.0, 10_000.0, 9_000.0),
        (0.1, 0.0, 0.0),
        (0.0, 30_000.0, 29_000.0),
        (0.1, 0.0, 0.0),
    ];
    let lines: Vec<crate::bench::timeline::Bin> = bins
        .iter()
        .enumerate()
        .map(|(i, &(phase_s, o, c))| crate::bench::timeline::Bin {
            t_ns: 1_000_000_000 + i as u64 * 100_000_000,
            phase_s,
            offered_pps: o,
            offered_mbps: o * 480.0 / 1e6,
            captured_pps: c,
            captured_mbps: c * 480.0 / 1e6,
        })
        .collect();
    crate::bench::timeline::write(&dir.join("timeline/0.csv"), &lines).unwrap();
    let sum = write(&dir).unwrap();
    assert!(
        sum.plots.iter().any(|p| p.ends_with("burst_cycle_pps.svg")),
        "{:?}",
        sum.plots
    );
    let svg = parse_svg(&dir.join("plots/burst_cycle_pps.svg"));
    assert!(svg.contains("time in the on/off cycle (s)"));
    assert!(svg.contains("offered") && svg.contains("captured"));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("burst_cycle_mbps"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn x2_draws_the_load_against_packet_rate_and_bit_rate() {
    // ringmap Abb. 5-6 from one plan: the same points against measured pps (x) and measured Mb/s (x2).
    let dir = copy_fixture("ringmap");
    let sum = write(&dir).unwrap();
    assert_eq!((sum.runs_ok, sum.points), (8, 4));
    for (file, x) in [
        (
            "capture_cpu_busy.svg",
            "offered packet rate (packets/s, measured)",
        ),
        (
            "capture_cpu_busy_vs_mbps.svg",
            "offered data rate (Mbit/s, measured)",
        ),
    ] {
        let svg = parse_svg(&dir.join("plots").join(file));
        assert!(svg.contains(x), "{file}: x axis `{x}`");
        assert!(
            svg.contains("capture CPU busy (% of that CPU)"),
            "{file}: y axis"
        );
    }
    // Rightmost point per series (hollow circles, one per point, stroke = series colour): on the packet-rate
    // axis the 64-byte frames reach further (400 k vs 300 k pps), on the bit-rate axis the 300-byte frames
    // do (720 vs 204.8 Mb/s).
    let rightmost = |file: &str| -> Vec<(String, f64)> {
        let svg = parse_svg(&dir.join("plots").join(file));
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let mut by: Vec<(String, f64)> = Vec::new();
        for n in doc
            .descendants()
            .filter(|n| n.has_tag_name("circle") && n.attribute("fill") == Some("none"))
        {
            let colour = n.attribute("stroke").unwrap().to_string();
            let cx: f64 = n.attribute("cx").unwrap().parse().unwrap();
            match by.iter_mut().find(|(c, _)| *c == colour) {
                Some(e) => e.1 = e.1.max(cx),
                None => by.push((colour, cx)),
            }
        }
        by
    };
    let pps = rightmost("capture_cpu_busy.svg");
    let mbps = rightmost("capture_cpu_busy_vs_mbps.svg");
    assert_eq!(pps.len(), 2, "{pps:?}");
    assert!(
        pps[0].1 > pps[1].1,
        "64-byte frames rightmost in packets/s: {pps:?}"
    );
    assert_eq!(mbps[0].0, pps[0].0, "same series colours");
    assert!(
        mbps[1].1 > mbps[0].1,
        "300-byte frames rightmost in Mbit/s: {mbps:?}"
    );
    // 64-byte frames at max: busy 90 and 94 (fixture), 300-byte frames at max: 70 and 72.
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(
        csv.contains(
            "dist=fixed:50;rate_pps=max,fixed:50,max,2,0,capture_cpu_busy,2,92,90,94,92\n"
        ),
        "{csv}"
    );
    assert!(
        csv.contains(",fixed:286,max,2,0,capture_cpu_busy,2,71,70,72,71\n"),
        "{csv}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    // An x2 that is not a measured rate is named in a warning, and nothing extra is drawn.
    let dir = copy_fixture("ringmap");
    let plan = std::fs::read_to_string(dir.join("plan.toml")).unwrap();
    std::fs::write(
        dir.join("plan.toml"),
        plan.replace("x2 = \"mbps\"", "x2 = \"dist\""),
    )
    .unwrap();
    let sum = write(&dir).unwrap();
    assert!(
        sum.warnings.iter().any(|w| w.contains("x2 = \"dist\"")),
        "{:?}",
        sum.warnings
    );
    assert!(!dir.join("plots/capture_cpu_busy_vs_mbps.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn skipped_levels_are_listed_with_their_reason() {
    // meta.json as the runner writes it on a machine without SMT siblings (placement = "siblings").
    let dir = copy_fixture("gap");
    std::fs::write(
        dir.join("meta.json"),
        r#"{"skipped": [], "skipped_levels": [{"level": "placement=siblings", "runs": 8,
            "reason": "no SMT siblings: every thread_siblings_list names one CPU"}]}"#,
    )
    .unwrap();
    write(&dir).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("<td class=\"l\">placement=siblings</td><td>8</td>"),
        "{html}"
    );
    assert!(
        html.contains("Not run on this machine: placement=siblings (8 runs): no SMT siblings"),
        "{html}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Seed 000 Fig 6.13: the disk figure draws disk.json's write speeds against the demand at the runs' top
/// rate. The baseline fixture's fastest ok run offered 1 000 000 pps at 1000 Mb/s (125-byte frames): every
/// frame needs 125 MB/s, the first 76 bytes of each 76 MB/s.
#[test]
fn disk_figure_draws_write_speed_against_demand_lines() {
    let dir = copy_fixture("baseline");
    let sample = |block_kib: u64, rerun: u32, mb_per_s: f64| {
        serde_json::json!({"block_kib": block_kib, "rerun": rerun, "bytes": 1u64 << 27,
            "seconds": (1u64 << 27) as f64 / mb_per_s / 1e6, "mb_per_s": mb_per_s,
            "writer_cpu_pct": 30.0, "machine_busy_pct": 20.0})
    };
    let json = serde_json::json!({"disk_dir": "/var/tmp/x", "write_mib": 128,
        "samples": [sample(8, 0, 100.0), sample(8, 1, 120.0), sample(1024, 0, 200.0)]});
    std::fs::write(dir.join("disk.json"), json.to_string()).unwrap();
    let sum = write(&dir).unwrap();
    for name in ["disk_write_speed", "disk_write_cpu"] {
        assert!(
            sum.plots.iter().any(|p| p.ends_with(format!("{name}.svg"))),
            "{name}: {:?}",
            sum.plots
        );
    }
    let svg = parse_svg(&dir.join("plots/disk_write_speed.svg"));
    assert!(
        svg.contains("full frames at 1000 kpps: 125.0 MB/s"),
        "{svg}"
    );
    assert!(svg.contains("76-byte headers at 1000 kpps: 76.0 MB/s"));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("disk_write_speed") && html.contains("Figure 6.13"));
    let _ = std::fs::remove_dir_all(&dir);

    // The thesis's own figure: 76 bytes of each of ~178.4 k packets per second is 13.56 MB/s (§6.3.5).
    let thesis = RunResult {
        run: 0,
        point: "all".into(),
        rerun: 0,
        levels: vec![],
        apps: 1,
        ok: true,
        status: "ok".into(),
        values: [("pps".to_string(), 178_421.0), ("mbps".to_string(), 920.0)].into(),
    };
    let d = demand(&[thesis]).unwrap();
    assert!((d.headers_mb_s - 13.56).abs() < 0.005, "{d:?}");
    assert!((d.full_mb_s - 115.0).abs() < 1e-9, "{d:?}");
}
