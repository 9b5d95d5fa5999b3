//! The per-file flow tables (`NAME.flows.parquet`) end to end: a real capture with rotation writes
//! plain and zstd stores; DuckDB reads the tables, and every UDP flow must equal tshark's
//! conversation of the same file (packets and bytes per direction, `-z conv,udp`) and the first
//! and last timestamps tshark decodes for its packets. A cut flow table is found and rebuilt by
//! `ringcap index`.

mod common;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::stores::*;
use common::*;

/// A flow as both sides name it: (vlan, src, src port, dst, dst port), `src` the sender of the
/// first packet (tshark's "A").
type Flow = (Option<u16>, String, u16, String, u16);

/// Per flow: packets and bytes sent by src, then by dst; first and last timestamp (ns).
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Counts {
    src_packets: u64,
    src_bytes: u64,
    dst_packets: u64,
    dst_bytes: u64,
    first_ts: u64,
    last_ts: u64,
}

/// Rows of a DuckDB query, tab-separated (NULL as empty).
fn duckdb(sql: &str) -> String {
    python(&format!(
        "import duckdb\nfor r in duckdb.sql(\"\"\"{sql}\"\"\").fetchall(): print('\\t'.join('' if v is None else str(v) for v in r))"
    ))
}

/// The UDP flows of one flow table, read by DuckDB.
fn table_flows(capture: &Path) -> HashMap<Flow, Counts> {
    let table = index::flows_path(capture);
    let name = capture.file_name().unwrap().to_string_lossy().to_string();
    let text = duckdb(&format!(
        "SELECT vlan, src, src_port, dst, dst_port, src_packets, src_bytes, dst_packets, dst_bytes, \
         epoch_ns(first_ts), epoch_ns(last_ts), packets, bytes, file \
         FROM read_parquet('{}') WHERE protocol = 17",
        table.display()
    ));
    let mut out = HashMap::new();
    for line in text.lines() {
        let v: Vec<&str> = line.split('\t').collect();
        let n = |i: usize| v[i].parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
        let c = Counts {
            src_packets: n(5),
            src_bytes: n(6),
            dst_packets: n(7),
            dst_bytes: n(8),
            first_ts: n(9),
            last_ts: n(10),
        };
        assert_eq!(n(11), c.src_packets + c.dst_packets, "{line}");
        assert_eq!(n(12), c.src_bytes + c.dst_bytes, "{line}");
        assert_eq!(v[13], name, "{line}");
        let vlan = (!v[0].is_empty()).then(|| v[0].parse().unwrap());
        let flow = (
            vlan,
            v[1].to_string(),
            n(2) as u16,
            v[3].to_string(),
            n(4) as u16,
        );
        assert!(out.insert(flow, c).is_none(), "flow listed twice: {line}");
    }
    out
}

/// "1.2.3.4:53" (or an IPv6 address and port) as (address, port).
fn endpoint(s: &str) -> (String, u16) {
    let (a, p) = s.rsplit_once(':').unwrap_or_else(|| panic!("{s}"));
    (a.to_string(), p.parse().unwrap_or_else(|_| panic!("{s}")))
}

/// tshark prints bytes exactly up to 9999, then in kB (SI, cut down): the range it means.
fn tshark_bytes(n: &str, unit: &str) -> (u64, u64) {
    let n: u64 = n.parse().unwrap();
    match unit {
        "bytes" => (n, n),
        "kB" => (n * 1000, n * 1000 + 999),
        u => panic!("unit {u}"),
    }
}

/// tshark's UDP conversations of `capture` (VLAN-tagged packets or not, as `vlan` says) with the
/// first and last time of their packets: (flow, counts, byte ranges as tshark prints them).
fn tshark_flows(capture: &Path, vlan: Option<u16>) -> HashMap<Flow, (Counts, [(u64, u64); 2])> {
    let filter = match vlan {
        Some(id) => format!("vlan.id=={id}"),
        None => "!vlan".to_string(),
    };
    let conv = sh(&format!(
        "{} | tshark -n -q -r - -z 'conv,udp,{filter}' 2>/dev/null",
        cat_cmd(capture)
    ));
    let mut out = HashMap::new();
    for line in conv.lines().filter(|l| l.contains("<->")) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (a, pa) = endpoint(w[0]);
        let (b, pb) = endpoint(w[2]);
        // "<-" is B to A, "->" is A to B.
        let c = Counts {
            dst_packets: w[3].parse().unwrap(),
            src_packets: w[6].parse().unwrap(),
            ..Counts::default()
        };
        let ranges = [tshark_bytes(w[7], w[8]), tshark_bytes(w[4], w[5])];
        out.insert((vlan, a, pa, b, pb), (c, ranges));
    }
    // The first and last packet of each conversation, as tshark decodes their times.
    let fields = sh(&format!(
        "{} | tshark -n -r - -Y 'udp && {filter}' -T fields -E separator=/t -E occurrence=f \
         -e frame.time_epoch -e ip.src -e udp.srcport -e ip.dst -e udp.dstport \
         -e ipv6.src -e ipv6.dst 2>/dev/null",
        cat_cmd(capture)
    ));
    let mut times: HashMap<[(String, u16); 2], (u64, u64)> = HashMap::new();
    for line in fields.lines() {
        let v: Vec<&str> = line.split('\t').collect();
        let (s, ns) = v[0].split_once('.').unwrap();
        let ts = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        let (src, dst) = if v[1].is_empty() {
            (v[5], v[6])
        } else {
            (v[1], v[3])
        };
        let mut ends = [
            (src.to_string(), v[2].parse().unwrap()),
            (dst.to_string(), v[4].parse().unwrap()),
        ];
        ends.sort();
        let t = times.entry(ends).or_insert((u64::MAX, 0));
        *t = (t.0.min(ts), t.1.max(ts));
    }
    for ((_, a, pa, b, pb), (c, _)) in out.iter_mut() {
        let mut ends = [(a.clone(), *pa), (b.clone(), *pb)];
        ends.sort();
        let (first, last) = times[&ends];
        c.first_ts = first;
        c.last_ts = last;
    }
    out
}

/// Every complete file's flow table equals tshark's conversations of the file.
fn check_store(store: &Path) -> usize {
    let files: Vec<PathBuf> = store_files(store)
        .into_iter()
        .filter(|f| !f.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(files.len() >= 3, "rotation made {} files", files.len());
    let mut flows = 0;
    for f in &files {
        let table = index::flows_path(f);
        let mode = std::fs::metadata(&table).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", table.display());
        let got = table_flows(f);
        let mut want = tshark_flows(f, None);
        want.extend(tshark_flows(f, Some(100)));
        assert_eq!(
            got.len(),
            want.len(),
            "{}: number of UDP flows",
            f.display()
        );
        for (flow, c) in &got {
            let (w, bytes) = want.get(flow).unwrap_or_else(|| {
                panic!("{}: {flow:?} not in tshark's conversations", f.display())
            });
            assert_eq!(
                (c.src_packets, c.dst_packets, c.first_ts, c.last_ts),
                (w.src_packets, w.dst_packets, w.first_ts, w.last_ts),
                "{}: {flow:?}",
                f.display()
            );
            for (v, (lo, hi)) in [c.src_bytes, c.dst_bytes].into_iter().zip(bytes) {
                assert!(
                    (*lo..=*hi).contains(&v),
                    "{}: {flow:?} bytes {v}, tshark {lo}..={hi}",
                    f.display()
                );
            }
        }
        flows += got.len();
    }
    // The whole store in one query, as a user would ask it: what 10.0.0.7 sent.
    let sent = duckdb(&format!(
        "SELECT coalesce(sum(src_packets), 0) FROM read_parquet('{}/*.flows.parquet') \
         WHERE src = '10.0.0.7'",
        store.display()
    ));
    let sent: u64 = sent.trim().parse().unwrap();
    let mut want = 0;
    for f in &files {
        want += sh(&format!(
            "{} | tcpdump -nn -r - '(src host 10.0.0.7 and udp) or \
             (vlan and src host 10.0.0.7 and udp)' 2>/dev/null | wc -l",
            cat_cmd(f)
        ))
        .trim()
        .parse::<u64>()
        .unwrap();
        // Reverse traffic to 10.0.0.7 does not exist in this mix: all it sent is in `src_packets`.
    }
    assert_eq!(sent, want, "packets sent by 10.0.0.7");
    assert!(want > 0);
    flows
}

fn ringcap_index(store: &Path) -> String {
    let out = Command::new(ringcap())
        .arg("index")
        .arg(store)
        .output()
        .unwrap();
    assert!(out.status.success(), "index: {}", stderr_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn flow_tables_equal_tshark_conversations() {
    for t in ["tshark", "tcpdump", "zstd", "python3"] {
        need(t);
    }
    let work = temp_dir("flowtable");
    for (name, extra) in [("plain", vec![]), ("zstd", vec!["--compress", "zstd"])] {
        let tb = testbed();
        let store = work.join(name);
        std::fs::create_dir_all(&store).unwrap();
        capture_store(&tb, &store, &extra);
        drop(tb);
        // What the live indexer indexed has its flow table too.
        let files = store_files(&store);
        let live: Vec<&PathBuf> = files
            .iter()
            .filter(|f| index::index_path(f).exists())
            .collect();
        assert!(!live.is_empty(), "{name}: no file indexed live");
        for f in &live {
            assert!(
                index::flows_path(f).exists(),
                "{}: no flow table",
                f.display()
            );
        }
        // `ringcap index` catches up the files the live indexer left, and leaves the rest.
        ringcap_index(&store);
        let n = check_store(&store);
        assert!(n > 100, "{name}: only {n} UDP flows");

        // A cut flow table and a missing one are found and rebuilt; the index alone is current.
        let files: Vec<PathBuf> = store_files(&store);
        let (cut, gone) = (&files[0], &files[1]);
        let before = table_flows(cut);
        let table = index::flows_path(cut);
        let bytes = std::fs::read(&table).unwrap();
        std::fs::write(&table, &bytes[..bytes.len() - 100]).unwrap();
        assert!(index::check_flow_table(cut).is_err(), "a cut table passes");
        std::fs::remove_file(index::flows_path(gone)).unwrap();
        let out = ringcap_index(&store);
        for f in [cut, gone] {
            let line = out
                .lines()
                .find(|l| l.starts_with(&*f.to_string_lossy()))
                .unwrap_or_else(|| panic!("{out}"));
            assert!(line.contains("flow table"), "not rebuilt: {line}");
        }
        assert_eq!(
            out.matches("index is current").count(),
            files.len() - 2,
            "{out}"
        );
        assert_eq!(table_flows(cut), before, "the rebuilt table differs");

        // A capture file replaced under its name (another file's packets): its table and index are
        // stale, found so and rebuilt; check_store then holds the new table against tshark.
        assert!(files.len() >= 4, "{name}: only {} files", files.len());
        let (replaced, donor) = (&files[2], &files[3]);
        let old_flows = table_flows(replaced);
        std::fs::copy(donor, replaced).unwrap();
        let checked = index::check_flow_table(replaced);
        let opened = index::IndexFile::open(&index::index_path(replaced), replaced);
        assert!(
            matches!(opened, Err(index::IndexError::Stale(_))),
            "a replaced capture file's index is not stale: {:?}",
            opened.err()
        );
        assert!(
            matches!(checked, Err(index::FlowTableError::Stale(_))),
            "a replaced capture file's table is not stale: {checked:?}"
        );
        let out = ringcap_index(&store);
        let line = out
            .lines()
            .find(|l| l.starts_with(&*replaced.to_string_lossy()))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(line.contains("flow table"), "not rebuilt: {line}");
        assert_eq!(
            table_flows(replaced),
            table_flows(donor),
            "rebuilt from what?"
        );
        assert_ne!(
            table_flows(replaced),
            old_flows,
            "the replacement changed nothing"
        );
        check_store(&store);
    }
    let _ = std::fs::remove_dir_all(&work);
}
