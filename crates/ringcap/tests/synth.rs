//! `ringcap synth` against independent expectations: the burstiness `ringcap analyze` measures on the trace
//! against the b-model's binomial law (Wang, Ailamaki, Faloutsos 2002), tshark's TCP analysis of its
//! connections, and the flow sizes tshark adds up against the Pareto law asked for.

mod common;
use common::*;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// A period of 2^12 bins of 100 µs; 2026-01-01T00:00:00Z is a whole number of them since the epoch, so
/// analyze's windows (counted from the epoch) line up with the cascade.
const START: &str = "2026-01-01T00:00:00Z";
const START_S: u64 = 1_767_225_600;
const LEVELS: u32 = 12;
const BIN_NS: u64 = 100_000;

fn run_ok(args: &[&str]) -> String {
    let out = Command::new(ringcap()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ringcap {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// P(J ≤ j) for J ~ Binomial(k, 1/2).
fn binomial_cdf(k: u32, j: u32) -> f64 {
    let mut c = 1.0f64; // C(k, 0)
    let mut sum = 0.0;
    for i in 0..=j.min(k) {
        if i > 0 {
            c = c * (k - i + 1) as f64 / i as f64;
        }
        sum += c;
    }
    sum / 2f64.powi(k as i32)
}

/// Smallest j with P(J ≤ j) ≥ q.
fn binomial_quantile(k: u32, q: f64) -> u32 {
    (0..=k)
        .find(|&j| binomial_cdf(k, j) >= q - 1e-12)
        .unwrap_or(k)
}

#[test]
fn analyze_sees_the_burstiness_the_b_model_asks_for() {
    let dir = temp_dir("synth-bmodel");
    let trace = dir.join("t.pcap");
    let (pps, b) = (20_000.0f64, 0.7f64);
    let period_ns = BIN_NS << LEVELS;
    assert_eq!(
        START_S * 1_000_000_000 % period_ns,
        0,
        "the start must begin a period"
    );
    // 16 periods.
    let duration = format!("{}ns", 16 * period_ns);
    run_ok(&[
        "synth",
        "-w",
        trace.to_str().unwrap(),
        "-s",
        "64",
        "--duration",
        &duration,
        "--pps",
        "20000",
        "--bmodel",
        "0.7",
        "--levels",
        "12",
        "--bin",
        "100us",
        "--concurrent",
        "64",
        "--start",
        START,
        "--seed",
        "11",
        "-q",
    ]);
    let conv = dir.join("conv");
    run_ok(&[
        "convert",
        "-q",
        "-o",
        conv.to_str().unwrap(),
        trace.to_str().unwrap(),
    ]);
    // One window per cascade level: 100 µs × 2^m is level 12 - m.
    let windows: Vec<String> = (0..=LEVELS).map(|m| format!("{}us", 100u64 << m)).collect();
    let report = json(&run_ok(&[
        "analyze",
        conv.to_str().unwrap(),
        "--report",
        dir.join("rep").to_str().unwrap(),
        "--json",
        "--windows",
        &windows.join(","),
    ]));
    let bursts = report["burstiness"].as_array().unwrap();
    assert_eq!(bursts.len(), LEVELS as usize + 1);
    let mut checked = 0;
    for (m, burst) in bursts.iter().enumerate() {
        let k = LEVELS - m as u32;
        let window_s = (BIN_NS << m) as f64 / 1e9;
        assert!((burst["window_s"].as_f64().unwrap() - window_s).abs() < 1e-12);
        let n = burst["windows"].as_u64().unwrap() as f64;
        let mean = burst["mean_pps"].as_f64().unwrap();
        assert!(
            (mean - pps).abs() < 0.01 * pps,
            "window {window_s}: mean {mean} pps, asked {pps}"
        );
        // The rate of an interval with j busy halves out of k; counts are within 2 packets of the mass.
        let rate = |j: u32| pps * (2.0 * b).powi(j as i32) * (2.0 * (1.0 - b)).powi((k - j) as i32);
        let slack = 2.0 / window_s;
        let percentiles = burst["percentiles"].as_array().unwrap();
        for (i, p) in percentiles.iter().enumerate() {
            let p = p.as_f64().unwrap() / 100.0;
            if !(0.01..=0.99).contains(&p) {
                continue;
            }
            // The windows' j are a sample of Binomial(k, 1/2): allow 3 standard errors of the empirical CDF.
            let spread = 3.0 * (p * (1.0 - p) / n).sqrt() + 1.0 / n;
            let lo = rate(binomial_quantile(k, (p - spread).max(0.0))) - slack;
            let hi = rate(binomial_quantile(k, (p + spread).min(1.0))) + slack;
            let got = burst["pps"][i].as_f64().unwrap();
            assert!(
                (lo..=hi).contains(&got),
                "window {window_s} s (level {k}), percentile {}: {got} pps, the b-model gives {lo:.0}-{hi:.0}",
                p * 100.0
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 7 * (LEVELS as usize + 1)); // 1, 5, 25, 50, 75, 95, 99
                                                    // The spread grows as the window shrinks (burstiness across time scales): p99 / median.
    let ratio = |m: usize| {
        bursts[m]["pps"][7].as_f64().unwrap() / bursts[m]["pps"][4].as_f64().unwrap().max(1.0)
    };
    assert!(
        ratio(2) > ratio(6) && ratio(6) > ratio(10),
        "{} {} {}",
        ratio(2),
        ratio(6),
        ratio(10)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Per TCP stream as tshark sees it.
#[derive(Default)]
struct Stream {
    first_is_syn_to_server: Option<bool>,
    to_server: u64,
    to_client: u64,
    response_bytes: u64,
    fins_from_client: u32,
    fins_from_server: u32,
}

fn count_lines(path: &Path, filter: &str) -> usize {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args(["-Y", filter, "-T", "fields", "-e", "frame.number"])
        .output()
        .expect("tshark (make deps installs it)");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn tcp_connections_are_whole_and_flow_sizes_are_heavy_tailed() {
    if !have("tshark") {
        return;
    }
    let dir = temp_dir("synth-flows");
    let trace = dir.join("t.pcap");
    let concurrent = 16;
    let report = json(&run_ok(&[
        "synth",
        "-w",
        trace.to_str().unwrap(),
        "-s",
        "96",
        "--duration",
        "8s",
        "--pps",
        "20000",
        "--concurrent",
        "16",
        "--udp-share",
        "0.1",
        "--flow-size",
        "pareto:1.2:2KB:100MB",
        "--seed",
        "5",
        "--json",
    ]));
    // tshark's TCP analysis finds nothing odd: no lost or unseen segment, no retransmission, no
    // out-of-order or reused port, no window problem.
    assert_eq!(count_lines(&trace, "tcp.analysis.flags"), 0);

    let rows = tshark_fields(
        &trace,
        &[
            "tcp.stream",
            "tcp.srcport",
            "tcp.dstport",
            "tcp.len",
            "tcp.flags.syn",
            "tcp.flags.ack",
            "tcp.flags.fin",
            "udp.stream",
        ],
    );
    assert_eq!(rows.len() as u64, report["packets"].as_u64().unwrap());
    let mut streams: HashMap<u64, Stream> = HashMap::new();
    let mut udp_streams = std::collections::HashSet::new();
    for r in &rows {
        if let Ok(u) = r[7].parse::<u64>() {
            udp_streams.insert(u);
            continue;
        }
        let id: u64 = r[0].parse().expect("a TCP or UDP packet");
        let (sport, dport): (u16, u16) = (r[1].parse().unwrap(), r[2].parse().unwrap());
        let to_server = dport < 32768 && sport >= 32768;
        assert!(
            to_server || (sport < 32768 && dport >= 32768),
            "ports {sport} > {dport}"
        );
        let s = streams.entry(id).or_default();
        if s.first_is_syn_to_server.is_none() {
            s.first_is_syn_to_server = Some(to_server && r[4] == "1" && r[5] == "0");
        }
        let fin = r[6] == "1";
        if to_server {
            s.to_server += 1;
            s.fins_from_client += fin as u32;
        } else {
            s.to_client += 1;
            s.response_bytes += r[3].parse::<u64>().unwrap();
            s.fins_from_server += fin as u32;
        }
    }
    // Many flows, each opened by its client's SYN; all but the ones still open at the end are closed by
    // both sides and have packets both ways.
    assert!(
        streams.len() >= 1000,
        "only {} TCP connections",
        streams.len()
    );
    assert!(streams
        .values()
        .all(|s| s.first_is_syn_to_server == Some(true)));
    let done: Vec<&Stream> = streams
        .values()
        .filter(|s| s.fins_from_client == 1 && s.fins_from_server == 1)
        .collect();
    assert!(
        streams.len() - done.len() <= concurrent,
        "{} of {} connections unfinished",
        streams.len() - done.len(),
        streams.len()
    );
    assert!(done.iter().all(|s| s.to_server >= 4 && s.to_client >= 3));
    // The UDP share asked for, within 4 standard errors.
    let flows = (streams.len() + udp_streams.len()) as f64;
    let share = udp_streams.len() as f64 / flows;
    assert!(
        (share - 0.1).abs() < 4.0 * (0.1 * 0.9 / flows).sqrt(),
        "UDP share {share}"
    );
    // Response sizes of the finished connections follow P(size > x) = (2000 / x)^1.2.
    let sizes: Vec<f64> = done.iter().map(|s| s.response_bytes as f64).collect();
    let n = sizes.len() as f64;
    let ccdf = |x: f64| sizes.iter().filter(|&&s| s > x).count() as f64 / n;
    let mut points = Vec::new();
    for x in [2500.0f64, 5000.0, 10_000.0, 20_000.0, 40_000.0, 80_000.0] {
        let expect = (2000.0 / x).powf(1.2);
        let got = ccdf(x);
        assert!(
            (got - expect).abs() < 4.0 * (expect * (1.0 - expect) / n).sqrt() + 0.002,
            "P(size > {x}) = {got}, Pareto(1.2, 2000) gives {expect}"
        );
        points.push((x.ln(), got.ln()));
    }
    // Least-squares slope of the log-log tail: -alpha.
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / points.len() as f64,
        points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64,
    );
    let slope = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
        / points.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
    assert!((slope + 1.2).abs() < 0.15, "tail slope {slope}, asked -1.2");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_options_say_what_to_change() {
    let dir = temp_dir("synth-usage");
    let out = dir.join("x.pcap");
    for (args, says) in [
        (vec!["--bmodel", "1.2"], "0.5"),
        (vec!["--flow-size", "lognormal:3"], "pareto:ALPHA:MIN"),
        (vec!["--udp-share", "2"], "UDP share"),
        (vec!["--start", "yesterday-ish"], "--start"),
    ] {
        let o = Command::new(ringcap())
            .args(["synth", "-w", out.to_str().unwrap()])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr_text(&o);
        assert!(e.contains(says), "{args:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
