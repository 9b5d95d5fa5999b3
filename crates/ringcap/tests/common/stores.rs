//! Stores written by a real capture on the testbed, and what tcpdump makes of them: the
//! independent expectation the time-machine and serve tests compare ringcap's answers with.

use std::path::{Path, PathBuf};
use std::process::Command;

use testbed::{Side, Testbed};

use super::*;

/// Runs a shell line; panics with its output on failure.
pub fn sh(line: &str) -> String {
    let out = Command::new("sh").args(["-c", line]).output().expect("sh");
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A tool these tests cannot do without: fails when missing (under CI with the reason).
pub fn need(tool: &str) {
    assert!(
        have(tool),
        "{tool} is needed by this test (make deps installs it)"
    );
}

/// Sends `n` UDP frames from the Tx side with ringcap gen (many hosts and ports), `vlan` tagged.
pub fn send_mix(tb: &Testbed, n: u32, seed: u32, vlan: Option<u16>) {
    let n = n.to_string();
    let seed = seed.to_string();
    let mut args = vec![
        "gen",
        "-i",
        &tb.tx_if,
        "-n",
        &n,
        "--pps",
        "40000",
        "--seed",
        &seed,
        "-q",
        "--src-ip",
        "10.0.0.1-10.0.0.23",
        "--dst-ip",
        "10.1.0.1-10.1.0.5",
        "--src-port",
        "1000-1030",
        "--dst-port",
        "53-54",
        "--payload",
        "half",
    ];
    let v;
    if let Some(id) = vlan {
        v = id.to_string();
        args.extend(["--vlan", &v]);
    }
    let st = tb
        .command(Side::Tx, ringcap().to_str().unwrap())
        .args(&args)
        .status()
        .expect("gen");
    assert!(st.success(), "gen failed");
}

/// The capture files of a store (with the one a capture was writing, `.NAME.partial`), oldest
/// first (the names sort by time; a partial file is the newest).
pub fn store_files(dir: &Path) -> Vec<PathBuf> {
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().to_string();
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = name(p);
            // Companions of a capture file: its index, flow table and coverage record.
            let index_or_table = [
                ".idx",
                ".idx.partial",
                ".parquet",
                ".parquet.partial",
                ".coverage.json",
                ".coverage.json.tmp",
            ]
            .iter()
            .any(|s| n.ends_with(s));
            !index_or_table && n.contains(".pcap")
        })
        .collect();
    v.sort_by_key(|p| (name(p).starts_with('.'), name(p)));
    v
}

/// A command that prints a capture file as a plain pcap stream on stdout.
pub fn cat_cmd(f: &Path) -> String {
    let p = f.display();
    let name = f.to_string_lossy();
    let plain = Path::new(name.strip_suffix(".partial").unwrap_or(&name));
    match plain.extension().and_then(|e| e.to_str()) {
        Some("zst") => format!("zstd -dc '{p}'"),
        Some("lz4") => format!("lz4 -dc '{p}'"),
        Some("gz") => format!("gzip -dc '{p}'"),
        _ => format!("cat '{p}'"),
    }
}

/// tcpdump's decode of packets: one string per packet (header line with the ns timestamp, then the
/// hex of every byte), with the packet's time.
pub fn decode(text: &str) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with(|c: char| c.is_ascii_digit()) {
            let ts = line.split_whitespace().next().unwrap();
            let (s, ns) = ts.split_once('.').unwrap();
            let t = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
            out.push((t, format!("{line}\n")));
        } else if let Some(last) = out.last_mut() {
            last.1.push_str(line);
            last.1.push('\n');
        }
    }
    out
}

/// What tcpdump -r gives for `expr` over `files` in order, restricted to [after, before).
pub fn expected(files: &[PathBuf], expr: &str, after: u64, before: u64) -> Vec<(u64, String)> {
    let mut all = Vec::new();
    for f in files {
        // A file cut by kill -9 ends inside a packet (or a frame): tcpdump prints what is whole
        // and then fails, which is what is expected of it.
        let text = sh(&format!(
            "{} 2>/dev/null | tcpdump -r - -nn --nano -tt -xx '{expr}' 2>/dev/null || true",
            cat_cmd(f)
        ));
        all.extend(decode(&text));
    }
    all.retain(|(t, _)| *t >= after && *t < before);
    all
}

/// Captures mixed traffic (some of it VLAN-tagged) with rotation into `dir/cap`.
pub fn capture_store(tb: &Testbed, dir: &Path, extra: &[&str]) {
    let base = dir.join("cap");
    let mut args = vec![
        "capture",
        "-i",
        &tb.rx_if,
        "-w",
        base.to_str().unwrap(),
        "-C",
        "1MB",
    ];
    args.extend(extra);
    let cap = spawn_capture(tb, &args);
    send_mix(tb, 6000, 1, None);
    send_mix(tb, 2000, 2, Some(100));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = stop(cap, libc::SIGINT);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "capture: {err}");
    // The live indexer runs at the lowest priority: on a loaded machine it may leave files to
    // `ringcap index` (the summary says so), but it must have indexed some.
    let indexed = err
        .split("index: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse::<u32>().ok());
    assert!(
        indexed.is_some_and(|n| n > 0),
        "no file indexed live: {err}"
    );
}
