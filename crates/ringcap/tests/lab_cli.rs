//! End-to-end tests of `ringcap anova` and `ringcap cpusage`: the real binary on real files and the real
//! /proc/stat.

use std::path::PathBuf;
use std::process::{Command, Output};

fn ringcap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringcap"))
        .args(args)
        .output()
        .expect("run ringcap")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringcap-labcli-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Montgomery, *Design and Analysis of Experiments*, Example 5.1 (battery life, material × temperature,
/// 4 replications), as a tidy CSV with an unused extra column. Published ANOVA (Table 5.5): SS material
/// 10,683.72, temperature 39,118.72, interaction 9,613.78, error 18,230.75 (df 27); total 77,646.97.
fn battery_csv(dir: &std::path::Path) -> PathBuf {
    let data: [(&str, &str, [u32; 4]); 9] = [
        ("1", "15", [130, 155, 74, 180]),
        ("1", "70", [34, 40, 80, 75]),
        ("1", "125", [20, 70, 82, 58]),
        ("2", "15", [150, 188, 159, 126]),
        ("2", "70", [136, 122, 106, 115]),
        ("2", "125", [25, 70, 58, 45]),
        ("3", "15", [138, 110, 168, 160]),
        ("3", "70", [174, 120, 150, 139]),
        ("3", "125", [96, 104, 82, 60]),
    ];
    let mut csv = String::from("rerun,material,temp,life\n");
    for (m, t, ys) in data {
        for (i, y) in ys.iter().enumerate() {
            csv.push_str(&format!("{i},{m},{t},{y}\n"));
        }
    }
    let path = dir.join("battery.csv");
    std::fs::write(&path, csv).unwrap();
    path
}

#[test]
fn anova_json_matches_the_published_table() {
    let dir = temp_dir("json");
    let csv = battery_csv(&dir);
    let out = ringcap(&[
        "anova",
        csv.to_str().unwrap(),
        "--response",
        "life",
        "--factors",
        "material,temp",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let comps = v["components"].as_array().unwrap();
    let names: Vec<&str> = comps.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["material", "temp", "material:temp", "error"]);
    let want = [(10683.72, 2), (39118.72, 2), (9613.78, 4), (18230.75, 27)];
    for (c, (ss, df)) in comps.iter().zip(want) {
        assert!((c["ss"].as_f64().unwrap() - ss).abs() < 0.005, "{c}");
        assert_eq!(c["df"].as_u64().unwrap(), df);
    }
    // Published F 7.91 and P 0.0020 for material; error has no F or p.
    assert!((comps[0]["f"].as_f64().unwrap() - 7.91).abs() < 0.005);
    assert!((comps[0]["p"].as_f64().unwrap() - 0.0020).abs() < 0.00005);
    assert!(comps[3]["f"].is_null() && comps[3]["p"].is_null());
    let pct: f64 = comps.iter().map(|c| c["percent"].as_f64().unwrap()).sum();
    assert!((pct - 100.0).abs() < 1e-9);
    assert_eq!(v["replications"], 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn anova_pools_several_files_into_one_experiment() {
    // Results of several machines merge: the battery data split over two files (material 3 "measured on
    // another host", its columns in another order) must give the published table of the whole.
    let dir = temp_dir("two");
    let whole = std::fs::read_to_string(battery_csv(&dir)).unwrap();
    let (mut a, mut b) = (
        String::from("rerun,material,temp,life\n"),
        String::from("life,temp,material,rerun\n"),
    );
    for line in whole.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[1] == "3" {
            b.push_str(&format!("{},{},{},{}\n", f[3], f[2], f[1], f[0]));
        } else {
            a.push_str(&format!("{line}\n"));
        }
    }
    let (pa, pb) = (dir.join("a.csv"), dir.join("b.csv"));
    std::fs::write(&pa, a).unwrap();
    std::fs::write(&pb, b).unwrap();
    let out = ringcap(&[
        "anova",
        pa.to_str().unwrap(),
        pb.to_str().unwrap(),
        "--response",
        "life",
        "--factors",
        "material,temp",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ss: Vec<f64> = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["ss"].as_f64().unwrap())
        .collect();
    for (got, want) in ss.iter().zip([10683.72, 39118.72, 9613.78, 18230.75]) {
        assert!((got - want).abs() < 0.005, "{ss:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn anova_text_table_and_plots() {
    let dir = temp_dir("text");
    let csv = battery_csv(&dir);
    let plots = dir.join("plots");
    let out = ringcap(&[
        "anova",
        csv.to_str().unwrap(),
        "--response",
        "life",
        "--factors",
        "material,temp",
        "--plots",
        plots.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    // Seed 004 layout: y, y.., y-y.. rows, then the components with their share of the variation.
    let row = |name: &str| {
        t.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no `{name}` row in:\n{t}"))
            .to_string()
    };
    assert!(row("y").contains("478,547.00"), "{t}");
    assert!(row("y-y..").contains("77,646.97") && row("y-y..").contains("100.00%"));
    assert!(row("material").contains("10,683.72") && row("material").contains("13.76%"));
    assert!(row("material:temp").contains("9,613.78"));
    assert!(row("error").contains("18,230.75") && row("error").contains("675.21"));
    assert!(t.contains(
        "Significant at 95 % confidence (F-Computed > F-Table): material, temp, material:temp"
    ));
    for f in ["residuals.svg", "qq.svg"] {
        let svg = std::fs::read_to_string(plots.join(f)).unwrap();
        assert_eq!(
            svg.matches("<circle").count(),
            36,
            "{f}: one dot per observation"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn anova_bad_input_is_a_usage_error_with_the_reason() {
    let dir = temp_dir("bad");
    let csv = battery_csv(&dir);
    let csv_s = csv.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut a = vec!["anova", csv_s];
        a.extend_from_slice(args);
        let out = ringcap(&a);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        text(&out.stderr)
    };
    let e = run(&["--response", "hours", "--factors", "material,temp"]);
    assert!(
        e.contains(
            "column `hours` is not in the CSV header; the columns are: rerun, material, temp, life"
        ),
        "{e}"
    );
    // With the rerun number as a third factor every cell holds a single row: no error estimate.
    let e = run(&["--response", "life", "--factors", "material,temp,rerun"]);
    assert!(e.contains("single observation"), "{e}");

    // Unbalanced: drop one row of (3, 125).
    let body = std::fs::read_to_string(&csv).unwrap();
    let cut: Vec<&str> = body.lines().filter(|l| *l != "3,3,125,60").collect();
    std::fs::write(&csv, cut.join("\n") + "\n").unwrap();
    let e = run(&["--response", "life", "--factors", "material,temp"]);
    assert!(
        e.contains(
            "cell (material=3, temp=125) has 3 replication(s) but cell (material=1, temp=15) has 4"
        ),
        "{e}"
    );
    std::fs::write(&csv, "material,temp,life\n1,15,x\n").unwrap();
    let e = run(&["--response", "life", "--factors", "material,temp"]);
    assert!(
        e.contains("line 2: response `life` is `x`, not a finite number"),
        "{e}"
    );
    std::fs::write(&csv, "material,temp,life\n1,15,3\n1,15,4\n").unwrap();
    let e = run(&["--response", "life", "--factors", "material,temp"]);
    assert!(
        e.contains("factor `material` has only one level (`1`)"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cpusage_for_a_duration_prints_figure_5_1_lines() {
    let out = ringcap(&["cpusage", "--interval", "0.2", "--duration", "1s"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    let lines: Vec<&str> = t.lines().collect();
    let summary = lines.iter().position(|l| *l == "---Summary---").expect(&t);
    // 5 intervals of 0.2 s (a last partial one may be added); each line is one Figure 5.1 line.
    assert!((4..=6).contains(&summary), "{t}");
    for l in &lines[..summary] {
        assert!(l.starts_with("user: ") && l.ends_with("%,"), "{l}");
        let sum: f64 = l
            .split(", ")
            .map(|f| {
                f.split(": ")
                    .nth(1)
                    .unwrap()
                    .trim_end_matches([',', '%'])
                    .parse::<f64>()
                    .unwrap()
            })
            .sum();
        assert!((sum - 100.0).abs() < 0.5, "{l}");
    }
    assert!(lines[summary + 1].starts_with("Min: user: "));
    assert!(lines[summary + 2].starts_with("Max: user: "));
    assert!(lines[summary + 3].starts_with("Avg: user: "));
    assert!(t.contains("\ncpu0 Min: user: "));
}

#[test]
fn cpusage_profiles_a_command_while_it_runs() {
    // Idle, then one CPU busy for 1.5 s, then idle again: sampling lasts as long as the command (≈ 2.7 s).
    // Other work may share the machine (parallel builds), so the assertions hold under load too.
    let out = ringcap(&[
        "cpusage",
        "--interval",
        "0.25",
        "--trim",
        "95",
        "--json",
        "--",
        "sh",
        "-c",
        "sleep 0.6; timeout 1.5 sh -c 'while :; do :; done'; sleep 0.6",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let samples = v["samples"].as_array().unwrap();
    let last_t = samples.last().unwrap()["t"].as_f64().unwrap();
    assert!((2.6..4.0).contains(&last_t), "sampled until {last_t} s");
    assert!(
        (10..=16).contains(&samples.len()),
        "{} samples",
        samples.len()
    );
    let ncpu = samples[0]["cpus"].as_object().unwrap().len() as f64;
    // The busy loop runs in user mode ("user", or "nice" if the test runs niced) and gets most of a CPU
    // even next to other builds, so the machine's user-mode share peaks at ≥ 40 % of one CPU's share.
    let peak_user = samples
        .iter()
        .map(|s| s["all"]["user"].as_f64().unwrap() + s["all"]["nice"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        peak_user > 40.0 / ncpu,
        "peak user-mode {peak_user} % with {ncpu} CPUs"
    );
    for s in samples {
        let sum: f64 = s["all"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_f64().unwrap())
            .sum();
        assert!((sum - 100.0).abs() < 1e-6);
    }
    assert_eq!(v["trim"]["threshold"], 95.0);

    // The command's failure is ringcap's exit status.
    let out = ringcap(&["cpusage", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("---Summary---"));
    let out = ringcap(&["cpusage", "--", "/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot start `/nonexistent/program`"));
}

#[test]
fn cpusage_stops_on_sigint_and_still_summarises() {
    let child = Command::new(env!("CARGO_BIN_EXE_ringcap"))
        .args(["cpusage", "--interval", "0.2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: signalling our own child, which has not been waited for.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        text(&out.stderr)
    );
    let t = text(&out.stdout);
    let lines: Vec<&str> = t.lines().collect();
    let summary = lines.iter().position(|l| *l == "---Summary---").expect(&t);
    // About 0.7 s of 0.2 s intervals: 3 full ones and the partial last one.
    assert!((2..=5).contains(&summary), "{t}");
    assert!(lines[summary + 3].starts_with("Avg: user: "), "{t}");
}
