//! The time machine end to end: a real capture with rotation writes indexed stores (plain, zstd,
//! lz4, pcapng); `ringcap query` must return what `tcpdump -r` of the same files returns, packet
//! for packet and byte for byte (both decoded by tcpdump -xx). Also, one test each: files of other
//! tools, a corrupt index, damaged frames, --max-read-rate, kill -9 of the capture and of
//! `ringcap index`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::stores::*;
use common::*;

/// What `ringcap query` gives, as tcpdump decodes it.
fn queried(store: &Path, out_dir: &Path, query: &str, extra: &[&str]) -> Vec<(u64, String)> {
    let out = out_dir.join("result.pcap");
    let st = Command::new(ringcap())
        .arg("query")
        .arg(store)
        .arg(query)
        .args(["-w", out.to_str().unwrap(), "-q"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "query {query}: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    decode(&sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
        out.display()
    )))
}

fn stamp(ns: u64) -> String {
    format!("@{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Compares query and tcpdump for every expression; returns how many packets matched in total.
fn check_store(store: &Path, work: &Path) -> usize {
    let files = store_files(store);
    assert!(files.len() >= 3, "rotation made {} files", files.len());
    let done: Vec<&PathBuf> = files
        .iter()
        .filter(|f| !f.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(done.len() >= 3, "only {} complete files", done.len());
    let all = expected(&files, "", 0, u64::MAX);
    assert!(all.len() > 1000, "only {} packets in the store", all.len());
    let (t0, t1) = (all[all.len() / 3].0, all[2 * all.len() / 3].0);
    let exprs = [
        "host 10.0.0.7",
        "src host 10.0.0.3 and dst port 53",
        "net 10.1.0.0/30 and port 1001",
        "udp and (port 1002 or port 1003)",
        "ip proto 17 and not host 10.1.0.2",
        "vlan 100 and host 10.0.0.9",
        "host 10.0.0.11 or 10.0.0.12",
        "udp[8:2] = 0x1234",
        "udp[8] & 1 = 1",
    ];
    let mut total = 0;
    for e in exprs {
        let want = expected(&files, e, 0, u64::MAX);
        let got = queried(store, work, e, &[]);
        assert_eq!(got.len(), want.len(), "{e}: packet count");
        assert!(got == want, "{e}: packets differ from tcpdump's");
        total += got.len();
    }
    // A time window, as terms and as flags, with and without other terms.
    let want = expected(&files, "host 10.0.0.5", t0, t1);
    let q = format!(
        "host 10.0.0.5 and after {} and before {}",
        stamp(t0),
        stamp(t1)
    );
    assert!(queried(store, work, &q, &[]) == want, "{q}");
    let want = expected(&files, "", t0, t1);
    let got = queried(
        store,
        work,
        "",
        &["--after", &stamp(t0), "--before", &stamp(t1)],
    );
    assert!(
        got == want,
        "time window alone: {} vs {}",
        got.len(),
        want.len()
    );
    // The scan path gives the same (the index is only a shortcut).
    let got = queried(store, work, "port 1005", &["--no-index"]);
    assert!(
        got == expected(&files, "port 1005", 0, u64::MAX),
        "--no-index"
    );
    total
}

#[test]
fn query_equals_tcpdump_on_every_store_kind() {
    for t in ["tcpdump", "zstd", "lz4"] {
        need(t);
    }
    let work = tempdir("tm-kinds");
    for (name, extra) in [
        ("plain", vec![]),
        ("zstd", vec!["--compress", "zstd"]),
        ("lz4", vec!["--compress", "lz4"]),
        ("pcapng", vec!["-F", "pcapng", "--compress", "auto"]),
    ] {
        let tb = testbed();
        let dir = work.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        capture_store(&tb, &dir, &extra);
        let n = check_store(&dir, &work);
        assert!(n > 500, "{name}: the expressions matched only {n} packets");
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Frames of `zstd -lv` (zstd's own count, not ours).
fn zstd_frames(f: &Path) -> u64 {
    let text = sh(&format!("zstd -lv '{}' 2>&1", f.display()));
    text.lines()
        .find_map(|l| l.trim().strip_prefix("# Zstandard Frames:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("zstd -lv {}: {text}", f.display()))
}

#[test]
fn small_frames_query_equals_tcpdump_and_zstd_reads_them() {
    for t in ["tcpdump", "zstd", "lz4"] {
        need(t);
    }
    let work = tempdir("tm-frames");
    for (name, extra) in [
        (
            "zstd-8k",
            vec!["--compress", "auto", "--frame-size", "8KiB"],
        ),
        (
            "lz4-16k",
            vec!["--compress", "lz4", "--frame-size", "16KiB"],
        ),
    ] {
        let tb = testbed();
        let dir = work.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        capture_store(&tb, &dir, &extra);
        let files = store_files(&dir);
        for f in files
            .iter()
            .filter(|f| !f.to_string_lossy().ends_with(".partial"))
        {
            let p = f.display();
            if name.starts_with("zstd") {
                let t = sh(&format!("zstd -t '{p}' 2>&1 && echo OK"));
                assert!(t.contains("OK"), "zstd -t {p}: {t}");
                // Frames of at most 8 KiB of records: a file of n bytes holds at least n / 8 KiB.
                let raw: u64 = sh(&format!("zstd -dc '{p}' | wc -c"))
                    .trim()
                    .parse()
                    .unwrap();
                let frames = zstd_frames(f);
                assert!(
                    frames >= raw / 8192 && frames > 1,
                    "{p}: {frames} frames for {raw} bytes"
                );
            } else {
                let t = sh(&format!("lz4 -t '{p}' 2>&1 && echo OK"));
                assert!(t.contains("OK"), "lz4 -t {p}: {t}");
            }
        }
        // The live index, then one rebuilt by `ringcap index` from the frames it finds.
        let n = check_store(&dir, &work);
        assert!(n > 500, "{name}: the expressions matched only {n} packets");
        let st = Command::new(ringcap())
            .args(["index", "--force", "-q"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "index: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        check_store(&dir, &work);
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// The set-up the tests below share: a work directory of their own and in it a zstd store captured
/// with rotation (`store`), every file indexed (what the live indexer left is done by `ringcap
/// index`). The testbed is gone once the capture has ended.
fn zstd_store(name: &str) -> (PathBuf, PathBuf) {
    need("tcpdump");
    need("zstd");
    let work = tempdir(name);
    let store = work.join("store");
    std::fs::create_dir_all(&store).unwrap();
    capture_store(&testbed(), &store, &["--compress", "zstd"]);
    sh(&format!(
        "{} index -q {}",
        ringcap().display(),
        store.display()
    ));
    (work, store)
}

/// A corrupt index is detected (the query scans that file instead) and rebuilt by `index`:
/// damage in the header (which the file's checksum covers) when the query opens it, damage in a
/// chunk of the body (each has its own checksum) when a look-up reads that chunk, and by `index`,
/// which reads every chunk, in any case.
#[test]
fn a_corrupt_index_is_reported_scanned_around_and_rebuilt() {
    let (work, store) = zstd_store("tm-corrupt-index");
    let files = store_files(&store);
    let idx = store::index_path(&files[1]);
    let mut bytes = std::fs::read(&idx).unwrap();
    bytes[20] ^= 0x55;
    std::fs::write(&idx, &bytes).unwrap();
    let idx2 = store::index_path(&files[2]);
    let mut bytes = std::fs::read(&idx2).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&idx2, &bytes).unwrap();
    let explain = Command::new(ringcap())
        .args([
            "query",
            store.to_str().unwrap(),
            "host 10.0.0.7",
            "--explain",
            "-w",
        ])
        .arg(work.join("x.pcap"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explain.stderr);
    assert!(
        text.contains("damaged"),
        "corrupt index not reported: {text}"
    );
    check_store(&store, &work);
    let out = sh(&format!(
        "{} index {}",
        ringcap().display(),
        store.display()
    ));
    assert!(
        out.contains("index is current") && out.contains("packets, index"),
        "{out}"
    );
    for (i, f) in [(&idx, &files[1]), (&idx2, &files[2])] {
        let rebuilt = index::IndexFile::open(i, f).and_then(|ix| ix.verify());
        assert!(rebuilt.is_ok(), "{} not rebuilt: {rebuilt:?}", i.display());
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn damaged_zstd_frames_are_skipped_and_said() {
    let (work, store) = zstd_store("tm-damaged-frames");
    damaged_frames_are_skipped_and_said(&store_files(&store)[1], &work);
    let _ = std::fs::remove_dir_all(&work);
}

/// --max-read-rate paces what is read: a query over the whole store takes at least bytes / rate
/// (less the pace's 100 ms of credit), and still returns everything.
#[test]
fn max_read_rate_paces_a_query_that_still_returns_everything() {
    let (work, store) = zstd_store("tm-read-rate");
    let started = std::time::Instant::now();
    let out = Command::new(ringcap())
        .args([
            "query",
            store.to_str().unwrap(),
            "udp",
            "-w",
            "/dev/null",
            "--json",
        ])
        .args(["--max-read-rate", "2MB"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = v["bytes_read"].as_u64().unwrap() as f64;
    let took = started.elapsed().as_secs_f64();
    assert!(
        bytes > 1e6 && took >= bytes / 2e6 - 0.15,
        "{bytes} bytes in {took:.2} s at 2 MB/s"
    );
    let all = expected(&store_files(&store), "udp", 0, u64::MAX).len() as u64;
    assert_eq!(v["packets"].as_u64(), Some(all));
    let _ = std::fs::remove_dir_all(&work);
}

/// Another tool's files: tcpdump's pcap, gzip'd, zstd'd in one frame, lz4'd; indexed by `index`
/// and queried as tcpdump reads them.
#[test]
fn other_tools_files_are_indexed_and_queried() {
    for t in ["lz4", "gzip"] {
        need(t);
    }
    let (work, store) = zstd_store("tm-other-tools");
    let other = work.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let plain = other.join("tcpdump.pcap");
    sh(&format!(
        "{} | tcpdump -r - -w '{}' 2>/dev/null",
        cat_cmd(&store_files(&store)[0]),
        plain.display()
    ));
    for (f, how) in [
        ("a.pcap.gz", "gzip -c"),
        ("b.pcap.zst", "zstd -19 -c"),
        ("c.pcap.lz4", "lz4 -c"),
    ] {
        sh(&format!(
            "{how} '{}' > '{}'",
            plain.display(),
            other.join(f).display()
        ));
    }
    let out = sh(&format!(
        "{} index {}",
        ringcap().display(),
        other.display()
    ));
    assert!(out.contains("4 files"), "{out}");
    for f in store_files(&other) {
        let want = expected(std::slice::from_ref(&f), "host 10.0.0.4", 0, u64::MAX);
        let got = queried(&f, &work, "host 10.0.0.4", &[]);
        assert!(!want.is_empty() && got == want, "{}", f.display());
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// kill -9 of the capture: the hidden partial file is not queried, finished files still answer
/// exactly. `repair` gives the partial file (if any) its name; the next capture on the same base
/// then indexes every file of the store without a current index (the repaired one, and two whose
/// index the kill is made to have prevented), with no `ringcap index`.
#[test]
fn after_kill9_of_the_capture_the_next_capture_indexes_what_was_left() {
    for t in ["tcpdump", "zstd"] {
        need(t);
    }
    let work = tempdir("tm-kill-capture");
    let tb = testbed();
    let dead = work.join("dead");
    std::fs::create_dir_all(&dead).unwrap();
    let base = dead.join("cap");
    let capture_args = [
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
    let cap = spawn_capture(&tb, &capture_args);
    send_mix(&tb, 6000, 3, None);
    let out = stop(cap, libc::SIGKILL);
    assert!(!out.status.success());
    check_store(&dead, &work);
    // (None if the kill came between a file's end and the next packet.)
    let partial: Vec<PathBuf> = store_files(&dead)
        .into_iter()
        .filter(|f| f.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(partial.len() <= 1, "{partial:?}");
    if !partial.is_empty() {
        let out = Command::new(ringcap())
            .arg("repair")
            .args(&partial)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_text(&out));
    }
    let old = store_files(&dead);
    for f in &old[..2] {
        // (The kill may have left it without one already.)
        let _ = std::fs::remove_file(store::index_path(f));
    }
    let unindexed: Vec<&PathBuf> = old
        .iter()
        .filter(|f| index::IndexFile::open(&store::index_path(f), f).is_err())
        .collect();
    assert!(unindexed.len() >= 2, "{unindexed:?}");
    let cap = spawn_capture(&tb, &capture_args);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline
        && !unindexed.iter().all(|f| store::index_path(f).exists())
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    send_mix(&tb, 1000, 4, None);
    let out = stop(cap, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "(+{} older files of the store that had no index)",
            unindexed.len()
        )),
        "{} files without an index: {err}",
        unindexed.len()
    );
    for f in &old {
        let ix = index::IndexFile::open(&store::index_path(f), f).and_then(|ix| ix.verify());
        assert!(ix.is_ok(), "{}: {ix:?}", f.display());
        assert!(index::check_flow_table(f).is_ok(), "{}", f.display());
    }
    check_store(&dead, &work);
    let _ = std::fs::remove_dir_all(&work);
}

/// kill -9 of `ringcap index` mid-way: what it leaves is either absent, whole or rebuilt, and a
/// query answers exactly.
#[test]
fn kill9_of_index_leaves_no_index_a_query_would_trust_wrongly() {
    let (work, store) = zstd_store("tm-kill-index");
    let big = work.join("big");
    std::fs::create_dir_all(&big).unwrap();
    let all_plain = big.join("all.pcap");
    let q = Command::new(ringcap())
        .args([
            "query",
            store.to_str().unwrap(),
            "",
            "-F",
            "pcap",
            "-q",
            "-w",
        ])
        .arg(&all_plain)
        .status()
        .unwrap();
    assert!(q.success());
    for _ in 0..5 {
        let mut child = Command::new(ringcap())
            .args(["index", "--force", "-q"])
            .arg(&all_plain)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let _ = child.kill();
        let _ = child.wait();
        let got = queried(&all_plain, &work, "host 10.0.0.6", &[]);
        let want = expected(
            std::slice::from_ref(&all_plain),
            "host 10.0.0.6",
            0,
            u64::MAX,
        );
        assert!(got == want, "after kill -9 of index");
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// A zstd file with damaged frames in the middle (its index still current: the index checks the
/// file's size and ends): a query reads every other frame and says what it skipped; the
/// expectation is tcpdump over the frames that libzstd decodes, one by one. A scan (no index)
/// stops at the first damage, as `zstd -dc | tcpdump -r -` does, and says so too.
fn damaged_frames_are_skipped_and_said(original: &Path, work: &Path) {
    let dir = work.join("damaged");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cap.pcap.zst");
    std::fs::copy(original, &file).unwrap();
    std::fs::copy(store::index_path(original), store::index_path(&file)).unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let mut frames = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = zstd::zstd_safe::find_frame_compressed_size(&bytes[at..]).unwrap();
        frames.push(at..at + n);
        at += n;
    }
    let n = frames.len();
    assert!(n >= 10, "only {n} frames in {}", original.display());
    let bad = [n / 3, n / 2, 2 * n / 3];
    for &k in &bad {
        let mid = (frames[k].start + frames[k].end) / 2;
        for b in &mut bytes[mid..mid + 8] {
            *b ^= 0xff;
        }
    }
    std::fs::write(&file, &bytes).unwrap();
    let mut good = Vec::new();
    for (k, r) in frames.iter().enumerate() {
        match zstd::stream::decode_all(&bytes[r.clone()]) {
            Ok(raw) => good.extend_from_slice(&raw),
            Err(_) => assert!(bad.contains(&k), "frame {k} of {n} does not decode"),
        }
    }
    let readable = dir.join("readable.pcap");
    std::fs::write(&readable, &good).unwrap();
    for expr in ["", "host 10.0.0.7"] {
        let want = decode(&sh(&format!(
            "tcpdump -r '{}' -nn --nano -tt -xx '{expr}' 2>/dev/null",
            readable.display()
        )));
        for (how, extra) in [("index", None), ("scan", Some("--no-index"))] {
            let out_file = dir.join("result.pcap");
            let _ = std::fs::remove_file(&out_file);
            let out = Command::new(ringcap())
                .arg("query")
                .arg(&file)
                .arg(expr)
                .args(["-q", "-w"])
                .arg(&out_file)
                .args(extra)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{how} '{expr}': {err}");
            let got = decode(&sh(&format!(
                "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null || true",
                out_file.display()
            )));
            if how == "index" {
                assert!(err.contains("3 damaged frame(s) skipped"), "{err}");
                assert_eq!(got.len(), want.len(), "'{expr}': packet count");
                assert!(
                    got == want,
                    "'{expr}': packets differ from the readable frames'"
                );
            } else {
                assert!(err.contains("damaged") && err.contains("missing"), "{err}");
                let cut = expected(std::slice::from_ref(&file), expr, 0, u64::MAX);
                assert!(
                    got == cut,
                    "'{expr}' scanned: not what zstd -dc | tcpdump gives"
                );
                assert!(
                    !expr.is_empty() || got.len() < want.len(),
                    "the scan read past damage"
                );
            }
        }
    }

    // `ringcap index` of the damaged file: the frames that do not decode are left out and said
    // (ringcap cuts its frames at packets, so the rest lines up); queries then read all the rest.
    let run = |args: &[&str]| {
        let out = Command::new(ringcap()).args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let f = file.to_str().unwrap();
    let (code, text) = run(&["index", "--force", f]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("3 damaged frame(s) left out"), "{text}");
    let (code, text) = run(&["index", f]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("index is current (3 damaged frame(s)"),
        "{text}"
    );
    let out_file = dir.join("result.pcap");
    for expr in ["", "host 10.0.0.7"] {
        let want = decode(&sh(&format!(
            "tcpdump -r '{}' -nn --nano -tt -xx '{expr}' 2>/dev/null",
            readable.display()
        )));
        let (code, text) = run(&[
            "query",
            f,
            expr,
            "-q",
            "--explain",
            "-w",
            out_file.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(1), "'{expr}': {text}");
        assert!(
            text.contains("3 damaged frame(s) skipped") && text.contains(": index;"),
            "{text}"
        );
        let got = decode(&sh(&format!(
            "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
            out_file.display()
        )));
        assert!(
            got == want,
            "'{expr}' after re-indexing: {} packets, tcpdump {}",
            got.len(),
            want.len()
        );
    }
    // A window that ends before the first damaged frame's neighbours does not reach it.
    let all = decode(&sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
        readable.display()
    )));
    let before = stamp(all[0].0 + 1);
    let (code, text) = run(&[
        "query",
        f,
        "",
        "--before",
        &before,
        "-q",
        "-w",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{text}");

    // Another tool's multi-frame file whose frames are not cut at packets: what follows a frame
    // that does not decode cannot be trusted, so it is not indexed.
    let pieces = dir.join("pieces");
    std::fs::create_dir_all(&pieces).unwrap();
    sh(&format!(
        "cd '{}' && split -n 4 '{}' part. && for p in part.*; do zstd -q -f $p; done && cat part.*.zst > ../foreign.pcap.zst",
        pieces.display(),
        readable.display()
    ));
    let foreign = dir.join("foreign.pcap.zst");
    let mut bytes = std::fs::read(&foreign).unwrap();
    let first = zstd::zstd_safe::find_frame_compressed_size(&bytes).unwrap();
    let second = zstd::zstd_safe::find_frame_compressed_size(&bytes[first..]).unwrap();
    for b in &mut bytes[first + second / 2..first + second / 2 + 8] {
        *b ^= 0xff;
    }
    std::fs::write(&foreign, &bytes).unwrap();
    let (code, text) = run(&["index", foreign.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("not cut at packets") && text.contains("not indexed"),
        "{text}"
    );
    assert!(!store::index_path(&foreign).exists());
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringcap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
