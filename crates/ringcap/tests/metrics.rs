//! `ringcap capture --metrics ADDR`: scraped with curl during a testbed capture, checked with Prometheus's
//! own `promtool check metrics`, and compared with the summary the capture prints when it stops.

mod common;
use common::*;
use std::time::{Duration, Instant};
use testbed::Side;

const ADDR: &str = "127.0.0.1:9100"; // inside the testbed's own namespace: always free

/// `curl URL` inside the receiving namespace: (HTTP status, body).
fn get(tb: &testbed::Testbed, path: &str) -> (u32, String) {
    let out = tb
        .command(Side::Rx, "curl")
        .args(["-sS", "--max-time", "5", "-w", "\n%{http_code}"])
        .arg(format!("http://{ADDR}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// The value of the sample `name` (with its labels exactly as written, e.g. `x{a="b"}`).
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.rsplit_once(' ').filter(|(k, _)| *k == name))
        .map(|(_, v)| v.parse().unwrap())
}

#[test]
fn metrics_count_what_the_summary_says() {
    if !have("curl") || !have("promtool") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("metrics");
    let base = dir.join("m");
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "-w",
            base.to_str().unwrap(),
            "--compress",
            "zstd:3",
            "-C",
            "1",
            "--metrics",
            ADDR,
            "--json",
            "--stats-interval",
            "0",
        ],
    );
    let frames: Vec<Vec<u8>> = (0..3000).map(|i| frame(i, 1000, 9, 1000)).collect();
    send(&tb, &frames);
    let iface = format!("interface=\"{}\"", tb.rx_if);
    let received = format!("ringcap_received_packets_total{{{iface}}}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let body = loop {
        let (code, body) = get(&tb, "/metrics");
        assert_eq!(code, 200, "{body}");
        if sample(&body, &received) == Some(3000.0) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // Prometheus's own parser accepts the page (names, types, HELP, label escaping).
    let mut check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    check
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}\n{body}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    // 3 MB at -C 1 (MB before compression): files were completed and indexed while it ran.
    let files = sample(&body, &format!("ringcap_files_written_total{{{iface}}}")).unwrap();
    assert!(files >= 2.0, "{body}");
    let level = sample(&body, &format!("ringcap_compression_level{{{iface}}}")).unwrap();
    assert_eq!(level, 3.0, "{body}");
    // The disk line of the output directory agrees with df.
    let df = std::process::Command::new("df")
        .args(["-B1", "--output=size"])
        .arg(&dir)
        .output()
        .unwrap();
    let size: f64 = String::from_utf8(df.stdout)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let dir_label = format!("dir=\"{}\"", dir.display());
    assert_eq!(
        sample(&body, &format!("ringcap_disk_size_bytes{{{dir_label}}}")),
        Some(size),
        "{body}"
    );
    // Anything but /metrics is refused, with the HTTP status a client understands.
    assert_eq!(get(&tb, "/nope").0, 404);

    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("metrics on http://{ADDR}/metrics")),
        "{err}"
    );
    let summary: serde_json::Value = err
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .expect("summary");
    // No traffic after the scrape: the counters the summary prints are the ones scraped.
    assert_eq!(
        summary["delivered_to_ringcap"].as_f64(),
        sample(&body, &received),
        "{summary}\n{body}"
    );
    for stage in ["kernel", "ring", "storage"] {
        let scraped = sample(
            &body,
            &format!("ringcap_dropped_packets_total{{{iface},stage=\"{stage}\"}}"),
        );
        assert_eq!(
            summary["drops"][stage].as_f64(),
            scraped,
            "{stage}: {summary}\n{body}"
        );
    }
    assert!(
        summary["files"]["complete"].as_f64().unwrap() >= files,
        "{summary}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_taken_metrics_address_is_a_usage_error() {
    let tb = testbed();
    // Something already listens there (in the receiving namespace).
    let mut holder = tb
        .command(Side::Rx, "python3")
        .args(["-c", "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',9100)); s.listen(); print('up', flush=True); time.sleep(30)"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(holder.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "up");
    let out = ringcap_rx(
        &tb,
        &["capture", "-i", &tb.rx_if, "--metrics", ADDR, "-c", "1"],
    )
    .output()
    .unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--metrics 127.0.0.1:9100: cannot listen there"),
        "{err}"
    );
    assert!(
        err.contains("Address already in use") || err.contains("in use"),
        "{err}"
    );
}
