//! Retention on real, small file systems this test makes (loop-mounted ext4 with the usual 5 %
//! reserved for root): `--disk-budget P%` is `df`'s Use%, files are deleted only while a budget is
//! exceeded, never the newest `keep_newest`, and a full disk deletes nothing under a size budget.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::*;
use store::{Budget, CaptureWriter, FilePlan, Format, WriterOptions, WriterStats};
use testbed::LoopExt4;

fn ext4(tag: &str, mib: u64) -> Option<LoopExt4> {
    match LoopExt4::new(tag, mib, &["-m", "5"]) {
        Ok(fs) => Some(fs),
        Err(e) => {
            skip(&format!("cannot make a loop-mounted ext4: {e}"));
            None
        }
    }
}

/// `df --output=pcent,used,avail DIR`: (Use% as df rounds it, used KiB, available KiB).
fn df(dir: &Path) -> (u64, u64, u64) {
    let out = run(Command::new("df")
        .args(["--output=pcent,used,avail"])
        .arg(dir));
    let line = out.lines().nth(1).expect("df's second line");
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.trim_end_matches('%').parse().expect("df number"))
        .collect();
    (v[0], v[1], v[2])
}

/// Fills `dir` with `mib` MiB of other data (not this capture's), synced.
fn other_data(dir: &Path, mib: usize) {
    let mut f = std::fs::File::create(dir.join("other.bin")).unwrap();
    let chunk = vec![0x5a; 1 << 20];
    for _ in 0..mib {
        f.write_all(&chunk).unwrap();
    }
    f.sync_all().unwrap();
}

/// Writes `n` test packets through file mode with 1 MB files; returns the stats and events.
fn capture(plan: FilePlan, n: usize) -> (WriterStats, Vec<String>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut plan = plan;
    let sink = events.clone();
    plan.events = Some(Arc::new(move |m: &str| {
        sink.lock().unwrap().push(m.to_string())
    }));
    plan.rotate_bytes = Some(1_000_000);
    let opts = WriterOptions {
        format: Format::Pcap { nanos: true },
        buffer_size: 1 << 20,
        buffers: 64, // room for every packet: drops here come only from a full disk
        direct_io: false,
        ..Default::default()
    };
    let mut w = CaptureWriter::create_files(plan, opts).expect("create_files");
    for p in packets(n, false) {
        w.write_packet(p.ts_ns, p.wire_len, &p.data, p.vlan);
    }
    let stats = w.finish(None).expect("finish");
    let ev = events.lock().unwrap().clone();
    (stats, ev)
}

/// Sequence numbers of the complete files of `base` in `dir`, ascending.
fn seqs(dir: &Path, base: &str) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| store::parse_name(base, e.ok()?.file_name().to_str()?).map(|k| k.1))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn disk_use_is_computed_as_df_shows_it() {
    let Some(fs) = ext4("dfpct", 32) else {
        return;
    };
    for mib in [0, 6, 14] {
        if mib > 0 {
            other_data(&fs.dir, mib);
        }
        let ours = store::disk_use_percent(&fs.dir).unwrap();
        let (pcent, used, avail) = df(&fs.dir);
        let exact = 100.0 * used as f64 / (used + avail) as f64;
        assert_eq!(
            ours.ceil() as u64,
            pcent,
            "ours {ours:.3}, df {pcent}% ({used} used, {avail} avail)"
        );
        assert!(
            (ours - exact).abs() < 0.05,
            "ours {ours:.3}, df's columns give {exact:.3}"
        );
    }
}

#[test]
fn a_percent_budget_deletes_only_while_df_is_over_it() {
    let Some(fs) = ext4("pct", 32) else {
        return;
    };
    // About 10 MB of packets into ~30 MB: under 60 %, nothing is deleted.
    let mut plan = FilePlan::new(&fs.dir, "u");
    plan.budget = Some(Budget::Percent(60.0));
    let (st, _) = capture(plan, 13_000);
    let kept = seqs(&fs.dir, "u");
    assert_eq!(st.files_deleted, 0);
    assert_eq!(kept, (0..st.files_done).collect::<Vec<_>>());
    assert!(df(&fs.dir).0 < 60, "{:?}", df(&fs.dir));
    // Twice that under 40 % (without the first files): the oldest go, until df says 40 % or less.
    for e in std::fs::read_dir(&fs.dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::remove_file(p).unwrap();
        }
    }
    let mut plan = FilePlan::new(&fs.dir, "o");
    plan.budget = Some(Budget::Percent(40.0));
    let (st, _) = capture(plan, 26_000);
    let kept = seqs(&fs.dir, "o");
    assert!(st.files_deleted > 0, "{st:?}");
    assert!(df(&fs.dir).0 <= 41, "df {:?}", df(&fs.dir)); // the last file's close may add a block
                                                          // Oldest first: what is left is the newest files, without a gap.
    let first = st.files_done - kept.len() as u64;
    assert_eq!(kept, (first..st.files_done).collect::<Vec<_>>());
}

#[test]
fn a_percent_budget_on_a_disk_full_of_other_data_keeps_the_newest_files() {
    let Some(fs) = ext4("keep", 32) else {
        return;
    };
    other_data(&fs.dir, 22); // ~75 % as df shows it, over the budget before the capture starts
    assert!(df(&fs.dir).0 > 50, "{:?}", df(&fs.dir));
    for keep in [2, 1] {
        let base = format!("k{keep}");
        let mut plan = FilePlan::new(&fs.dir, &base);
        plan.budget = Some(Budget::Percent(50.0));
        plan.keep_newest = keep;
        let (st, ev) = capture(plan, 6000);
        let kept = seqs(&fs.dir, &base);
        assert!(st.files_done >= 3, "{st:?}");
        // The default keeps the file being written and the newest complete one: at the end, the
        // last two files. --keep-newest 1 lets the budget delete every complete file but the last.
        let want: Vec<u64> = (st.files_done - keep as u64..st.files_done).collect();
        assert_eq!(kept, want, "keep_newest {keep}: {ev:?}");
        assert!(
            ev.iter()
                .any(|e| e.contains("disk budget cannot hold") && e.contains("other data")),
            "{ev:?}"
        );
        for s in kept {
            let name = std::fs::read_dir(&fs.dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| {
                    store::parse_name(&base, p.file_name().unwrap().to_str().unwrap())
                        .is_some_and(|k| k.1 == s)
                })
                .unwrap();
            std::fs::remove_file(name).unwrap(); // room for the next round
        }
    }
}

#[test]
fn a_full_disk_deletes_nothing_under_a_size_budget() {
    let Some(fs) = ext4("full", 24) else {
        return;
    };
    other_data(&fs.dir, 14);
    let mut plan = FilePlan::new(&fs.dir, "f");
    plan.budget = Some(Budget::Bytes(1 << 30)); // far above what fits: never reached
    let (st, ev) = capture(plan, 13_000); // ~10 MB into the few MB left
    assert!(st.disk_full_events > 0, "the disk filled: {st:?}");
    assert!(st.storage_drops > 0, "{st:?}");
    assert_eq!(st.files_deleted, 0, "{ev:?}");
    let kept = seqs(&fs.dir, "f");
    assert_eq!(kept, (0..st.files_done).collect::<Vec<_>>(), "{ev:?}");
    assert!(ev.iter().any(|e| e.contains("DISK FULL")), "{ev:?}");
}
