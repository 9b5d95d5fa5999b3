//! `ringcap query s3://…` gives what `tcpdump -r` gives over the same local files, fetching what the index names.

use super::*;

/// `ringcap query s3://pcap/PREFIX ARGS` against the test's s3proxy.
pub(crate) fn remote_query(
    s3: &S3,
    home: &Path,
    prefix: &str,
    expr: &str,
    args: &[&str],
) -> Output {
    let mut c = ringcap_with_credentials(home);
    c.arg("query").arg(format!("s3://{BUCKET}/{prefix}"));
    if !expr.is_empty() {
        c.arg(expr);
    }
    c.args(args)
        .args(["--endpoint", &s3.endpoint()])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A time as `--after`/`--before` take it (Unix seconds, to the nanosecond).
fn at(ns: u64) -> String {
    format!("@{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The JSON summary a `--json` query printed on stdout.
fn query_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "query --json: {e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Checks `ringcap query s3://pcap/PREFIX` against tcpdump over the local `files` for each
/// (expression, window); returns the packets compared.
fn compare_with_tcpdump(
    s3: &S3,
    tmp: &Path,
    prefix: &str,
    files: &[PathBuf],
    cases: &[(String, Option<(u64, u64)>)],
) -> usize {
    use common::stores::{decode, expected, sh};
    let out = tmp.join("remote.pcap");
    let mut total = 0;
    for (expr, window) in cases {
        let mut args = vec!["-w".to_string(), out.display().to_string(), "-q".into()];
        if let Some((a, b)) = window {
            args.extend(["--after".into(), at(*a), "--before".into(), at(*b)]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = remote_query(s3, tmp, prefix, expr, &args);
        assert!(
            o.status.success(),
            "query s3 `{expr}` {window:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let got = decode(&sh(&format!(
            "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
            out.display()
        )));
        let (a, b) = window.unwrap_or((0, u64::MAX));
        let want = expected(files, expr, a, b);
        assert_eq!(
            got.len(),
            want.len(),
            "`{expr}` {window:?}: packets from the archive vs tcpdump -r"
        );
        assert!(
            got == want,
            "`{expr}` {window:?}: the archive's packets differ from tcpdump's"
        );
        total += got.len();
    }
    total
}

/// The one connection of [`capture_with_a_connection`], among the mix's many hosts and ports.
pub(crate) const CONNECTION: &str =
    "udp and src host 10.0.0.99 and src port 4000 and dst host 10.1.0.99 and dst port 5000";

/// A zstd store captured with rotation (1 MB files) on the testbed: the time-machine tests' mix
/// (many hosts and ports, some VLAN-tagged) and, at the same time, 1500 packets of one connection
/// spread among them.
pub(crate) fn capture_with_a_connection(tb: &testbed::Testbed, dir: &Path) {
    use common::stores::send_mix;
    let base = dir.join("cap");
    let args = [
        "capture",
        "-i",
        &tb.rx_if,
        "-w",
        base.to_str().unwrap(),
        "-C",
        "1MB",
        "--compress",
        "zstd",
    ];
    let cap = common::spawn_capture(tb, &args);
    let mut flow = tb
        .command(testbed::Side::Tx, ringcap().to_str().unwrap())
        .args(["gen", "-i", &tb.tx_if, "-n", "1500", "--pps", "10000", "-q"])
        .args(["--src-ip", "10.0.0.99", "--dst-ip", "10.1.0.99"])
        .args([
            "--src-port",
            "4000",
            "--dst-port",
            "5000",
            "--payload",
            "half",
        ])
        .spawn()
        .unwrap();
    send_mix(tb, 6000, 1, None);
    send_mix(tb, 2000, 2, Some(100));
    assert!(
        common::finish(&mut flow).status.success(),
        "gen of the connection"
    );
    std::thread::sleep(Duration::from_millis(500));
    let out = common::stop(cap, libc::SIGINT);
    assert!(
        out.status.success(),
        "capture: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ringcap query s3://…` over the archive of a store a ringcap capture wrote (zstd, rotated,
/// indexed) gives what `tcpdump -r` gives over the same local files, packet for packet and byte
/// for byte (tcpdump -xx of both), for one host, one connection, a port, `ip`, a time window and
/// the empty expression; so does the archive of a file tcpdump wrote (indexed by `ringcap
/// index`). A one-connection query fetches at most twice the bytes the same query reads locally
/// (the frames it names and the index bytes it reads, from the local `--explain --json`).
#[test]
fn query_of_the_archive_equals_tcpdump_and_fetches_what_the_index_names() {
    use common::stores::{expected, need, sh, store_files};
    need("tcpdump");
    need("zstd");
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    fs::create_dir_all(&store).unwrap();
    capture_with_a_connection(&common::testbed(), &store);
    // The live indexer runs last in line: what it left is indexed here.
    let o = Command::new(ringcap())
        .args(["index", "-q"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files = store_files(&store);
    assert!(files.len() >= 3, "{files:?}");
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let all = expected(&files, "", 0, u64::MAX);
    assert!(all.len() > 1000, "{} packets captured", all.len());
    let conn = CONNECTION.to_string();
    assert_eq!(expected(&files, &conn, 0, u64::MAX).len(), 1500);
    let (t1, t2) = (all[all.len() / 3].0, all[2 * all.len() / 3].0);
    let cases: Vec<(String, Option<(u64, u64)>)> = vec![
        (String::new(), None),
        ("host 10.0.0.7".into(), None),
        (conn.clone(), None),
        ("udp port 53".into(), None),
        ("ip".into(), None),
        ("udp".into(), Some((t1, t2))),
        (String::new(), Some((t1, t2))),
    ];
    let n = compare_with_tcpdump(&s3, tmp.path(), "site", &files, &cases);
    assert!(n > all.len(), "{n} packets compared");

    // The bytes of one connection: local reads (frames named by the index, index chunks) against
    // what the archive query fetched.
    let local = Command::new(ringcap())
        .arg("query")
        .arg(&store)
        .arg(&conn)
        .args(["-w", "/dev/null", "--explain", "--json"])
        .output()
        .unwrap();
    let local = query_json(&local);
    let reports = local["explain"].as_array().expect("explain");
    let frames: u64 = reports
        .iter()
        .map(|r| r["bytes_read"].as_u64().unwrap())
        .sum();
    let index: u64 = reports
        .iter()
        .map(|r| r["index_bytes_read"].as_u64().unwrap())
        .sum();
    assert!(
        reports.iter().all(|r| r["how"] == "index"),
        "local: {reports:?}"
    );
    let remote = remote_query(
        &s3,
        tmp.path(),
        "site",
        &conn,
        &["-w", "/dev/null", "--explain", "--json"],
    );
    assert!(
        remote.status.success(),
        "{}",
        String::from_utf8_lossy(&remote.stderr)
    );
    let remote = query_json(&remote);
    let fetched = remote["archive"]["bytes_fetched"].as_u64().unwrap();
    let requests = remote["archive"]["requests"].as_u64().unwrap();
    let rreports = remote["explain"].as_array().expect("explain");
    assert!(
        rreports.iter().all(|r| r["how"] == "index"),
        "remote: {rreports:?}"
    );
    assert_eq!(remote["packets"], local["packets"]);
    let stored: u64 = files.iter().map(|f| fs::metadata(f).unwrap().len()).sum();
    eprintln!(
        "one connection ({conn}): {} packets, {} files of {stored} B; local reads {frames} B of \
         frames + {index} B of index; the archive query fetched {fetched} B in {requests} requests",
        local["packets"],
        reports.len()
    );
    assert!(
        fetched <= 2 * (frames + index),
        "fetched {fetched} B for {frames} B of frames and {index} B of index"
    );

    // Windows outside the capture: files (and partitions) are left out by their names before any
    // index is opened; only the series' last file is opened for a window after it (it may run
    // on), and gives nothing.
    let hour = 3_600_000_000_000;
    let (first, last) = (all[0].0, all[all.len() - 1].0);
    for (flag, t, opened) in [("--before", first - hour, 0), ("--after", last + hour, 1)] {
        let o = remote_query(
            &s3,
            tmp.path(),
            "site",
            "",
            &[flag, &at(t), "-w", "/dev/null", "--explain", "--json"],
        );
        assert!(
            o.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v = query_json(&o);
        let x = &v["archive"];
        assert_eq!(v["packets"], 0, "{flag}");
        let listed = x["files_listed"].as_u64().unwrap();
        let pruned = x["files_pruned"].as_u64().unwrap();
        assert_eq!(listed - pruned, opened, "{flag}: {x}");
        if opened == 0 {
            assert_eq!(x["requests"], 0, "{flag}: {x}");
        }
    }

    // A file tcpdump wrote, indexed by `ringcap index`, archived under another sensor.
    let other = tmp.path().join("other");
    fs::create_dir_all(&other).unwrap();
    let trace = other.join("trace.pcap");
    let written = |from: &Path, to: &Path| {
        sh(&format!(
            "zstd -dc '{}' | tcpdump -r - -w '{}' 2>/dev/null",
            from.display(),
            to.display()
        ))
    };
    written(&files[0], &trace);
    let o = Command::new(ringcap())
        .args(["index", "-q"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // And one without an index: read whole.
    let unindexed = other.join("trace2.pcap");
    written(&files[1], &unindexed);
    let o = archive(
        &s3,
        &other,
        tmp.path(),
        &["--once", "--to", "s3://pcap/tcpdump"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cases: Vec<(String, Option<(u64, u64)>)> = vec![
        (String::new(), None),
        ("host 10.0.0.7".into(), None),
        (conn.clone(), None),
    ];
    compare_with_tcpdump(&s3, tmp.path(), "tcpdump", &[trace, unindexed], &cases);
    let o = remote_query(
        &s3,
        tmp.path(),
        "tcpdump",
        &conn,
        &["-w", "/dev/null", "--explain", "--json"],
    );
    let hows: Vec<String> = query_json(&o)["explain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["how"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hows, ["index", "scan (no index)"]);
}
