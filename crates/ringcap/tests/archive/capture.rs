//! `ringcap capture --archive`: a real capture on the testbed archives each file it completes,
//! with its coverage record, index and flow table, to s3proxy running in the capture's network
//! namespace; and an object store killed mid-capture (kill -9) costs the capture nothing: it keeps
//! every packet, retention deletes nothing unarchived meanwhile, and the backlog goes up once the
//! store is back, no object under a final name partial.

use super::*;
use common::{send, spawn_listening, stderr_text, stop, varied_frames};
use testbed::Side;

/// The key of a store file `name` (a capture `cap-YYYYMMDDTHHMMSS-N.pcap` or one of its
/// companions), computed here from the name's stamp as docs/archive.md says.
fn key_of(name: &str) -> String {
    let s = &name[4..19];
    format!(
        "site/sensor=s1/date={}-{}-{}/hour={}/{name}",
        &s[0..4],
        &s[4..6],
        &s[6..8],
        &s[9..11]
    )
}

/// The complete capture files of the store, oldest first.
fn local_captures(store: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(store)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with("cap-") && n.ends_with(".pcap")
        })
        .collect();
    v.sort();
    v
}

/// `ringcap capture` in the testbed's receiving namespace, rotating 1 MB files into `store` and
/// archiving them to the test's bucket.
fn capture_archiving(
    tb: &testbed::Testbed,
    s3: &S3,
    store: &Path,
    home: &Path,
    extra: &[&str],
) -> Child {
    let base = store.join("cap");
    let endpoint = s3.endpoint();
    let mut args = vec![
        "capture",
        "-i",
        &tb.rx_if,
        "-w",
        base.to_str().unwrap(),
        "-C",
        "1",
        "--archive",
        "s3://pcap/site",
        "--sensor",
        "s1",
        "--endpoint",
        &endpoint,
        "--json",
        "-q",
    ];
    args.extend_from_slice(extra);
    let mut c = common::ringcap_rx(tb, &args);
    with_test_credentials(&mut c, home);
    spawn_listening(c)
}

fn capture_summary(o: &Output) -> serde_json::Value {
    stderr_text(o)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no summary: {}", stderr_text(o)))
}

/// Waits until the bucket holds at least `n` capture objects.
fn wait_captures_archived(s3: &S3, n: usize, within: Duration) -> BTreeSet<String> {
    let t0 = Instant::now();
    loop {
        let keys = s3.keys("site/sensor=s1/");
        let captures = keys.iter().filter(|k| k.ends_with(".pcap")).count();
        if captures >= n {
            return keys;
        }
        assert!(
            t0.elapsed() < within,
            "{captures} of {n} captures archived after {within:?}: {keys:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Every local capture, its coverage, index and flow table is in the bucket under its key, with
/// the local file's SHA-256.
fn assert_archived(s3: &S3, store: &Path, tmp: &Path) -> usize {
    let caps = local_captures(store);
    let mut n = 0;
    for cap in &caps {
        let name = cap.file_name().unwrap().to_str().unwrap();
        for suffix in ["", ".coverage.json", ".idx", ".flows.parquet"] {
            let local = store.join(format!("{name}{suffix}"));
            assert!(local.exists(), "{} missing locally", local.display());
            let key = key_of(&format!("{name}{suffix}"));
            assert_eq!(
                s3.sha256(&key, tmp).as_deref(),
                Some(sha256_file(&local).as_str()),
                "{key}"
            );
            n += 1;
        }
    }
    n
}

#[test]
fn capture_archives_each_completed_file_with_its_coverage_index_and_flow_table() {
    let tb = common::testbed();
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start_in(tmp.path(), Some(tb.ns(Side::Rx))) else {
        return;
    };
    let store = tmp.path().join("store");
    fs::create_dir_all(&store).unwrap();
    let cap = capture_archiving(&tb, &s3, &store, tmp.path(), &[]);
    for burst in 0..3u32 {
        send(&tb, &varied_frames(burst * 3000, 3000, 900));
        std::thread::sleep(Duration::from_millis(300));
    }
    // At least one file archived while the capture runs, not only by the last pass.
    wait_captures_archived(&s3, 1, Duration::from_secs(60));
    let out = stop(cap, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let s = capture_summary(&out);
    assert_eq!(s["drops"]["kernel"], 0, "{s}");
    assert_eq!(s["drops"]["storage"], 0, "{s}");
    assert_eq!(s["archive"]["left_objects"], 0, "{s}");
    assert_eq!(s["archive"]["timed_out"], false, "{s}");
    let caps = local_captures(&store);
    assert!(caps.len() >= 3, "{caps:?}");
    let n = assert_archived(&s3, &store, tmp.path());
    // Nothing else went there.
    assert_eq!(s3.keys("site/").len(), n);
    // The manifest lists each of them as verified.
    let manifest = fs::read_to_string(store.join(".ringcap-archive/manifest.jsonl")).unwrap();
    assert_eq!(manifest.lines().count(), n, "{manifest}");
}

#[test]
fn object_store_killed_mid_capture_costs_no_packet_and_the_backlog_goes_up_after() {
    if !common::have("tcpdump") {
        return;
    }
    let tb = common::testbed();
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut s3) = S3::start_in(tmp.path(), Some(tb.ns(Side::Rx))) else {
        return;
    };
    let store = tmp.path().join("store");
    fs::create_dir_all(&store).unwrap();
    // -W 3: retention would keep three files; it must wait for the archive instead.
    let cap = capture_archiving(
        &tb,
        &s3,
        &store,
        tmp.path(),
        &["-W", "3", "--metrics", "127.0.0.1:9107"],
    );
    let mut sent = 0u32;
    let mut burst = |tb: &testbed::Testbed, n: u32| {
        send(tb, &varied_frames(sent, n, 900));
        sent += n;
        std::thread::sleep(Duration::from_millis(300));
    };
    burst(&tb, 5000); // ~2.5 MB: two files complete
    wait_captures_archived(&s3, 1, Duration::from_secs(60));
    s3.kill();
    for _ in 0..6 {
        burst(&tb, 3000);
    }
    std::thread::sleep(Duration::from_secs(2));
    // Six more files at least, none archived: retention kept them all.
    let during = local_captures(&store);
    assert!(
        during.len() >= 6,
        "retention deleted unarchived files: {during:?}"
    );
    // The backlog shows in the metrics (scraped inside the capture's namespace).
    let body = s3
        .command("curl")
        .args(["-sS", "http://127.0.0.1:9107/metrics"])
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&body.stdout).to_string();
    let sample = |name: &str| -> u64 {
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("ringcap_{name} ")))
            .unwrap_or_else(|| panic!("no {name}: {body}"))
            .parse()
            .unwrap()
    };
    assert!(sample("archive_backlog_objects") >= 4, "{body}");
    assert!(sample("archive_failed_passes_total") > 0, "{body}");
    s3.restart();
    let local_now = local_captures(&store).len();
    wait_captures_archived(&s3, local_now, Duration::from_secs(120));
    let out = stop(cap, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let s = capture_summary(&out);
    assert_eq!(s["drops"]["kernel"], 0, "{s}");
    assert_eq!(s["drops"]["storage"], 0, "{s}");
    assert_eq!(s["captured"], sent, "{s}");
    assert_eq!(s["archive"]["left_objects"], 0, "{s}");
    assert!(s["archive"]["failed_passes"].as_u64().unwrap() > 0, "{s}");
    // What is still here is there byte for byte.
    assert_archived(&s3, &store, tmp.path());
    // Every file the capture wrote reached the archive (sequence numbers without a hole: one
    // deleted before it was archived would be missing), each object whole: tcpdump reads as many
    // packets as its archived coverage record says, and all of them are every packet captured.
    let keys = s3.keys("site/sensor=s1/");
    let captures: Vec<&String> = keys.iter().filter(|k| k.ends_with(".pcap")).collect();
    let seqs: Vec<u64> = captures
        .iter()
        .map(|k| {
            k.rsplit('-')
                .next()
                .unwrap()
                .trim_end_matches(".pcap")
                .parse()
                .unwrap()
        })
        .collect();
    let (lo, hi) = (*seqs.iter().min().unwrap(), *seqs.iter().max().unwrap());
    assert_eq!(
        seqs.len() as u64,
        hi - lo + 1,
        "a file never reached the archive: {captures:?}"
    );
    let mut total = 0;
    for key in captures {
        let obj = tmp.path().join("object.pcap");
        let o = s3.curl(&[
            &s3.url(&format!("{BUCKET}/{key}")),
            "-o",
            obj.to_str().unwrap(),
        ]);
        assert!(o.status.success());
        let o = s3.curl(&[&s3.url(&format!("{BUCKET}/{key}.coverage.json"))]);
        let cov: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let n = common::tcpdump_count(&obj) as u64;
        assert_eq!(cov["packets"].as_u64(), Some(n), "{key}");
        assert_eq!(
            cov["size"].as_u64(),
            Some(fs::metadata(&obj).unwrap().len()),
            "{key}"
        );
        total += n;
    }
    assert_eq!(total, u64::from(sent));
}
