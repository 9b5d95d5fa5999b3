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

/// Prometheus's own parser (`promtool check metrics`) accepts the page: names, types, HELP, label escaping.
fn promtool_accepts(body: &str) {
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
    let files_written = format!("ringcap_files_written_total{{{iface}}}");
    let deadline = Instant::now() + Duration::from_secs(15);
    // The writer may still hold buffers when the last packet is counted (CI saw a
    // backlog of 2 and one file): wait for both, not only for the ring's count.
    let body = loop {
        let (code, body) = get(&tb, "/metrics");
        assert_eq!(code, 200, "{body}");
        let all_in = sample(&body, &received) == Some(3000.0);
        let files_done = sample(&body, &files_written).is_some_and(|f| f >= 2.0);
        if (all_in && files_done) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // Prometheus's own parser accepts the page (names, types, HELP, label escaping).
    promtool_accepts(&body);
    // 3 MB at -C 1 (MB before compression): files were completed and indexed while it ran.
    let files = sample(&body, &files_written).unwrap();
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
    // The status too: once (under load, 2026-11-29) it failed with nothing more on stderr.
    assert!(out.status.success(), "{:?}: {err}", out.status);
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

/// Packets `tcpdump -r path expr` reads (one line each with -q).
fn tcpdump_matches(path: &std::path::Path, expr: &str) -> u64 {
    let out = std::process::Command::new("tcpdump")
        .args(["-nn", "-q", "-r"])
        .arg(path)
        .arg(expr)
        .output()
        .expect("tcpdump (make deps installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

/// The sum of every sample of `name` whose labels contain all of `labels`.
fn sum_of(body: &str, name: &str, labels: &[&str]) -> f64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(k, _)| {
            k.split_once('{')
                .is_some_and(|(n, rest)| n == name && labels.iter().all(|l| rest.contains(l)))
        })
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

/// `--source xdp` with a prefilter: the scraped AF_XDP counters account for every frame sent (received +
/// filtered at each stage + dropped == sent, each filter stage what tcpdump says of the frames sent), and
/// agree with the file and the summary.
#[test]
fn xdp_counters_account_for_every_frame_sent() {
    if !have("curl") || !have("promtool") || !have("tcpdump") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("metrics-xdp");
    let file = dir.join("x.pcap");
    let reference = dir.join("sent.pcap");
    let expr = "udp and dst port 9000";
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--source",
            "xdp",
            "-w",
            file.to_str().unwrap(),
            "--metrics",
            ADDR,
            "--json",
            "--stats-interval",
            "0",
            expr,
        ],
    );
    // IPv6 to another port: the prefilter never judges IPv6, so user space rejects those.
    let sent = prefilter_traffic(9002);
    let before = tb.tx_packets();
    send(&tb, &sent);
    assert_eq!(
        tb.tx_packets() - before,
        sent.len() as u64,
        "the sending veth lost frames"
    );
    // The independent account of what was sent: tcpdump's reading of the same frames.
    write_pcap(&reference, &sent);
    let matching = tcpdump_matches(&reference, expr);
    let to_stack = tcpdump_matches(&reference, &format!("not ip6 and not ({expr})"));
    let in_user_space = tcpdump_matches(&reference, &format!("ip6 and not ({expr})"));
    assert_eq!(matching + to_stack + in_user_space, sent.len() as u64);
    assert!(matching > 0 && to_stack > 0 && in_user_space > 0);

    let iface = format!("interface=\"{}\"", tb.rx_if);
    let sample_of = |body: &str, name: &str, extra: &str| {
        sample(body, &format!("ringcap_{name}{{{iface}{extra}}}"))
    };
    let accounted = |body: &str| {
        sample_of(body, "received_packets_total", "").unwrap_or(0.0)
            + sum_of(body, "ringcap_filtered_packets_total", &[&iface])
            + sum_of(body, "ringcap_dropped_packets_total", &[&iface])
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let body = loop {
        let (code, body) = get(&tb, "/metrics");
        assert_eq!(code, 200, "{body}");
        if accounted(&body) == sent.len() as f64 || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    promtool_accepts(&body);
    // The program saw every frame, and each one ended in exactly one place.
    assert_eq!(
        sample_of(&body, "xdp_seen_packets_total", ""),
        Some(sent.len() as f64),
        "{body}"
    );
    let bytes: usize = sent.iter().map(Vec::len).sum();
    assert_eq!(
        sample_of(&body, "xdp_seen_bytes_total", ""),
        Some(bytes as f64),
        "{body}"
    );
    assert_eq!(accounted(&body), sent.len() as f64, "{body}");
    // The prefilter runs before the sockets, so nothing it judged can be among the drops.
    assert_eq!(
        sample_of(&body, "filtered_packets_total", ",stage=\"xdp_prefilter\""),
        Some(to_stack as f64),
        "{body}"
    );
    let received = sample_of(&body, "received_packets_total", "").unwrap();
    let user_space = sample_of(&body, "filtered_packets_total", ",stage=\"user_space\"").unwrap();
    let reasons = ["socket_ring_full", "fill_ring_empty", "other"];
    let drops: Vec<f64> = reasons
        .iter()
        .map(|r| {
            sample_of(
                &body,
                "dropped_packets_total",
                &format!(",stage=\"kernel\",reason=\"{r}\""),
            )
            .unwrap_or_else(|| panic!("no {r} series:\n{body}"))
        })
        .collect();
    let dropped: f64 = drops.iter().sum();
    assert_eq!(
        received + user_space + dropped,
        (matching + in_user_space) as f64,
        "{body}"
    );
    if dropped == 0.0 {
        assert_eq!(received, matching as f64, "{body}");
        assert_eq!(user_space, in_user_space as f64, "{body}");
    }
    assert_eq!(
        sample_of(&body, "xdp_invalid_descriptors_total", ""),
        Some(0.0),
        "{body}"
    );
    // The ring source's own stages do not exist here.
    assert!(
        !body.contains("stage=\"ring\"") && !body.contains("ringcap_ring_freezes_total"),
        "{body}"
    );

    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    // No traffic after the scrape: the file, the summary and the scrape say the same.
    assert_eq!(tcpdump_count(&file) as f64, received, "{err}");
    let summary: serde_json::Value = err
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .expect("summary");
    let x = &summary["xdp"];
    assert_eq!(
        x["prefilter"]["left_to_stack"].as_u64(),
        Some(to_stack),
        "{summary}"
    );
    assert_eq!(x["filtered_out"].as_f64(), Some(user_space), "{summary}");
    assert_eq!(x["invalid_descriptors"].as_u64(), Some(0), "{summary}");
    for (r, n) in reasons.iter().zip(&drops) {
        assert_eq!(x["drops"][r].as_f64(), Some(*n), "{r}: {summary}\n{body}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--drop-all --source xdp` has no sockets: the XDP program's count is what the page says was received,
/// and it is what left the sending veth.
#[test]
fn xdp_drop_all_serves_the_programs_count() {
    if !have("curl") || !have("promtool") {
        return;
    }
    let tb = testbed();
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--source",
            "xdp",
            "--drop-all",
            "--metrics",
            ADDR,
            "--json",
            "-q",
        ],
    );
    let sent: Vec<Vec<u8>> = (0..5000)
        .map(|i| frame(i, 1000, 9, 60 + (i as usize * 13) % 1400))
        .collect();
    let before = tb.tx_packets();
    send(&tb, &sent);
    let left = tb.tx_packets() - before;
    assert_eq!(left, sent.len() as u64, "the sending veth lost frames");
    let iface = format!("interface=\"{}\"", tb.rx_if);
    let received = format!("ringcap_received_packets_total{{{iface}}}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let body = loop {
        let (code, body) = get(&tb, "/metrics");
        assert_eq!(code, 200, "{body}");
        if sample(&body, &received) == Some(left as f64) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    promtool_accepts(&body);
    assert_eq!(sample(&body, &received), Some(left as f64), "{body}");
    let bytes: usize = sent.iter().map(Vec::len).sum();
    assert_eq!(
        sample(&body, &format!("ringcap_received_bytes_total{{{iface}}}")),
        Some(bytes as f64),
        "{body}"
    );
    assert_eq!(
        sample(&body, &format!("ringcap_xdp_seen_packets_total{{{iface}}}")),
        Some(left as f64),
        "{body}"
    );
    let out = stop(child, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
}
