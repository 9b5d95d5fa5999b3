//! Coverage records (`NAME.coverage.json`) of a real capture on the testbed's veth pair: each
//! file a rotating capture completes has one, whose packet count and first and last packet times
//! are what tcpdump reads from the file, whose open and close times bracket them and meet the
//! neighbouring files' (no gap, no overlap), and whose kernel drops, summed over the files, are the
//! capture's own final count (a tiny ring under a flood): attribution loses nothing.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{send, spawn_capture, stderr_text, stop, tcpdump_count, temp_dir, testbed};

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// The capture files of base `base` in `dir`, in sequence order (their names sort so).
fn captures(dir: &Path, base: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with(&format!("{base}-")) && n.ends_with(".pcap")
        })
        .collect();
    v.sort();
    v
}

/// The coverage record next to `cap`, read as plain JSON (not with ringcap's reader).
fn coverage(cap: &Path) -> serde_json::Value {
    let mut p = cap.as_os_str().to_owned();
    p.push(".coverage.json");
    let text = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// Every packet's time in `cap` as tcpdump prints it (`-tt`, nanosecond precision), in ns.
fn tcpdump_times(cap: &Path) -> Vec<u64> {
    let o = std::process::Command::new("tcpdump")
        .args(["-nn", "-tt", "--time-stamp-precision=nano", "-r"])
        .arg(cap)
        .output()
        .expect("tcpdump");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let t = l.split_whitespace().next().unwrap();
            let (s, f) = t.split_once('.').unwrap();
            assert_eq!(f.len(), 9, "{l}");
            s.parse::<u64>().unwrap() * 1_000_000_000 + f.parse::<u64>().unwrap()
        })
        .collect()
}

fn summary(out: &std::process::Output) -> serde_json::Value {
    stderr_text(out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no summary: {}", stderr_text(out)))
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn each_rotated_file_has_a_coverage_record_that_agrees_with_tcpdump() {
    if !common::have("tcpdump") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("coverage");
    let t0 = now_ns();
    let base = dir.join("cap");
    let cap = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "-w",
            base.to_str().unwrap(),
            "-C",
            "1",
            "-W",
            "5",
            "--time-stamp-precision",
            "nano",
            "--json",
            "-q",
        ],
    );
    // Three bursts of ~2.5 MB with pauses: about eight 1 MB files, the oldest deleted by -W 5.
    for burst in 0..3u32 {
        send(&tb, &common::varied_frames(burst * 5000, 5000, 900));
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_millis(500));
    let out = stop(cap, libc::SIGINT);
    let t1 = now_ns();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let s = summary(&out);
    assert!(u(&s["files"]["deleted"]) > 0, "-W 5 deleted nothing: {s}");

    let files = captures(&dir, "cap");
    assert!(files.len() >= 4, "{files:?}");
    // Retention took each deleted file's record with it: no record without its file.
    let records = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_str().unwrap().ends_with(".coverage.json"))
        .count();
    assert_eq!(
        records,
        files.len(),
        "a record outlived its file (or one is missing)"
    );
    let mut prev_closed = None;
    for f in &files {
        let c = coverage(f);
        let name = f.file_name().unwrap().to_str().unwrap();
        assert_eq!(c["version"], 1);
        assert_eq!(c["file"], name);
        assert_eq!(u(&c["size"]), fs::metadata(f).unwrap().len(), "{name}");
        let times = tcpdump_times(f);
        assert_eq!(u(&c["packets"]), times.len() as u64, "{name}");
        assert_eq!(u(&c["packets"]), tcpdump_count(f) as u64, "{name}");
        let (first, last) = (u(&c["first_ns"]), u(&c["last_ns"]));
        assert_eq!(first, times[0], "{name}: first packet");
        assert_eq!(last, *times.last().unwrap(), "{name}: last packet");
        let (opened, closed) = (u(&c["opened_ns"]), u(&c["closed_ns"]));
        assert!(
            t0 <= opened && opened <= first,
            "{name}: {t0} {opened} {first}"
        );
        assert!(
            last <= closed && closed <= t1,
            "{name}: {last} {closed} {t1}"
        );
        // Rotation by size: one file ends where the next begins.
        if let Some(p) = prev_closed {
            assert_eq!(
                opened, p,
                "{name} does not begin where the previous file ended"
            );
        }
        prev_closed = Some(closed);
        assert_eq!(c["drops"]["kernel"], 0, "{name}");
        assert_eq!(c["drops"]["storage"], 0, "{name}");
    }
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn kernel_drops_of_a_tiny_ring_under_a_flood_are_all_attributed_to_files() {
    if !common::have("tcpdump") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("coverage-drops");
    let base = dir.join("d");
    // A 64 KiB ring and a slow consumer (every packet copied 200 times): the kernel drops.
    let cap = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "-w",
            base.to_str().unwrap(),
            "-C",
            "2",
            "-B",
            "64",
            "--load",
            "memcpy:200",
            "--json",
            "-q",
        ],
    );
    for burst in 0..4u32 {
        send(&tb, &common::varied_frames(burst * 20_000, 20_000, 900));
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    let out = stop(cap, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let s = summary(&out);
    let kernel = u(&s["drops"]["kernel"]);
    assert!(kernel > 0, "no kernel drops to attribute: {s}");
    let files = captures(&dir, "d");
    assert!(files.len() >= 2, "{files:?}");
    let (mut k, mut storage, mut packets) = (0, 0, 0);
    for f in &files {
        let c = coverage(f);
        assert_eq!(u(&c["packets"]), tcpdump_count(f) as u64, "{f:?}");
        k += u(&c["drops"]["kernel"]);
        storage += u(&c["drops"]["storage"]);
        packets += u(&c["packets"]);
    }
    assert_eq!(k, kernel, "kernel drops over the files vs the summary: {s}");
    assert_eq!(storage, u(&s["drops"]["storage"]), "{s}");
    assert_eq!(packets, u(&s["captured"]), "{s}");
    fs::remove_dir_all(dir).unwrap();
}
