//! `ringcap convert` and `ringcap analyze` end to end: a real capture on the testbed, converted by
//! the binary, read back by DuckDB and pyarrow (requirements-test.txt), counts and byte sums
//! checked against capinfos; damaged input through the CLI.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// capinfos's packet count and data size (sum of captured lengths) of a file.
fn capinfos(path: &Path) -> (u64, u64) {
    let out = Command::new("capinfos")
        .args(["-M", "-c", "-d"])
        .arg(path)
        .output()
        .expect("capinfos (install tshark)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "capinfos: {text}");
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    (field("Number of packets:"), field("Data size:"))
}

fn run_ok(args: &[&str]) -> String {
    let out = Command::new(ringcap()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ringcap {args:?}: {}",
        stderr_text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn testbed_capture_converts_and_reads_back_in_duckdb_and_pyarrow() {
    let tb = testbed();
    let dir = temp_dir("trace-interop");
    let cap = dir.join("cap.pcapng");
    let child = capture_to_file(&tb, &cap, &["-F", "pcapng"]);
    let sent: Vec<Vec<u8>> = (0..5000u32)
        .map(|i| {
            frame(
                i,
                1000 + (i % 13) as u16,
                53 + (i % 3) as u16,
                60 + (i as usize * 37) % 1400,
            )
        })
        .collect();
    send(&tb, &sent);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = stop(child, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let (packets, data) = capinfos(&cap);
    assert_eq!(packets, sent.len() as u64);
    assert_eq!(data, sent.iter().map(|f| f.len() as u64).sum::<u64>());

    let set = dir.join("set");
    let json = run_ok(&[
        "convert",
        cap.to_str().unwrap(),
        "-o",
        set.to_str().unwrap(),
        "--threads",
        "2",
        "--json",
    ]);
    let rep: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(rep["packets"], packets);
    assert_eq!(rep["inputs"][0]["format"], "pcapng");

    let glob = format!("{}/**/*.parquet", set.display());
    let duck = python(&format!(
        "import duckdb\n\
         r = duckdb.sql(\"SELECT count(*), sum(cap_len), sum(wire_len), count(DISTINCT hour), \
         count(DISTINCT dst_port), min(ip_len), max(ip_len) \
         FROM read_parquet('{glob}', hive_partitioning = true)\").fetchall()[0]\n\
         print(' '.join(str(x) for x in r))"
    ));
    let v: Vec<u64> = duck
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(v[0], packets, "duckdb count");
    assert_eq!(v[1], data, "duckdb sum(cap_len)");
    assert_eq!(v[2], data, "duckdb sum(wire_len)");
    assert!(
        v[3] == 1 || v[3] == 2,
        "a few seconds of capture span one or two hours"
    );
    assert_eq!(v[4], 3);
    assert_eq!((v[5], v[6]), (46, 1399 + 60 - 14));

    let pa = python(&format!(
        "import pyarrow.dataset as ds, pyarrow.compute as pc\n\
         t = ds.dataset('{}', format='parquet', partitioning='hive').to_table(columns=['wire_len', 'ts', 'src_ip4'])\n\
         print(t.num_rows, pc.sum(t['wire_len']).as_py(), str(t.schema.field('ts').type), \
         pc.min(t['src_ip4']).as_py(), sep='|')",
        set.display()
    ));
    let f: Vec<&str> = pa.split('|').collect();
    assert_eq!(f[0].parse::<u64>().unwrap(), packets, "pyarrow rows");
    assert_eq!(f[1].parse::<u64>().unwrap(), data, "pyarrow sum(wire_len)");
    assert_eq!(f[2], "timestamp[ns, tz=UTC]");
    assert_eq!(
        f[3].parse::<u32>().unwrap(),
        u32::from_be_bytes([10, 77, 0, 1])
    );

    // analyze over the set: the same totals, a dist file of the IP lengths sent.
    let report = dir.join("report");
    let json = run_ok(&[
        "analyze",
        set.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--json",
    ]);
    let a: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(a["packets"], packets);
    assert_eq!(a["bytes"], data);
    assert_eq!(a["sizes"]["ip_packets"], packets);
    let dist = std::fs::read_to_string(report.join("sizes.dist")).unwrap();
    let lines: u64 = dist
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(lines, packets);
    // The generator's dist reader accepts it.
    run_ok(&[
        "dist",
        "-I",
        "dist",
        "-i",
        report.join("sizes.dist").to_str().unwrap(),
        "-O",
        "summary",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn convert_reports_damage_with_file_and_offset() {
    let dir = temp_dir("trace-damage");
    // A pcap with three 60-byte records, cut 10 bytes into the third.
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0]);
    for i in 0..3u32 {
        b.extend_from_slice(&(1_700_000_000 + i).to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&60u32.to_le_bytes());
        b.extend_from_slice(&60u32.to_le_bytes());
        b.extend_from_slice(&frame(i, 1, 2, 60));
    }
    b.truncate(24 + 2 * 76 + 10);
    let bad = dir.join("cut.pcap");
    std::fs::write(&bad, &b).unwrap();
    let junk = dir.join("junk.pcap");
    std::fs::write(&junk, b"GIF89a not a capture").unwrap();
    let set = dir.join("set");
    let out = Command::new(ringcap())
        .args([
            "convert",
            bad.to_str().unwrap(),
            junk.to_str().unwrap(),
            "-o",
            set.to_str().unwrap(),
            "-q",
        ])
        .output()
        .unwrap();
    let err = stderr_text(&out);
    // The unreadable input makes the run fail after converting the rest.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{}: offset 176", bad.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}: ", junk.display())) && err.contains("not a pcap"),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("converted 2 packets"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}
