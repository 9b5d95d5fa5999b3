//! Differential test against tcpdump (issue 33): `ringcap query STORE EXPR -w OUT` must give what
//! `tcpdump -r FILE -w OUT EXPR` gives, record by record (timestamp fields, caplen, len, bytes),
//! with the same output header link type and snaplen and the same exit status (zero or not), on
//! files written by other tools, indexed (`ringcap index` first) and not (`--no-index`).
//!
//! The inputs are generated here from a seeded RNG (hand-written packet builders, no ringcap
//! code) and written by text2pcap, tcpdump, editcap, mergecap, zstd/lz4/gzip and head, or by the
//! test's own writers for edge cases (see inputs.rs). tcpdump is the only oracle.
//!
//! Timestamps are compared as the record fields mean, not as times carried into seconds: the
//! reference is written by tcpdump at ns (`--time-stamp-precision=nano`) and compared field for
//! field with ringcap's default output at the precision its header says (µs for µs inputs, as
//! tcpdump -w writes; ns for finer ones): a µs field against the reference's as nsec / 1000; where
//! libpcap's ns scaling would mangle a µs field (ts_usec ≥ 10^6) the reference stays at µs, and
//! `-F pcap` is compared too. Time windows (`--after/--before`, RFC 3339)
//! are compared with tcpdump's records filtered here by the same window.
//!
//! A store of several files is compared with mergecap's merge of them. Tie rule: among packets of
//! equal time ringcap takes the file whose name sorts first; mergecap takes the file given last
//! (wiretap/merge.c counts an equal time as earlier), so it is given the files in reverse name
//! order (inputs.rs, `store`).
//!
//! Every case runs; all failures are collected, written to report.txt in the work directory
//! (kept when anything failed) and summarised by class before the test fails.
//!
//! `make test` runs the bounded matrix (seed 1, ~300 packets per file); `make test-differential`
//! runs the long one (`RINGCAP_DIFF_SEEDS`, default 1-6; `RINGCAP_DIFF_PACKETS`, default 1500).
//! `RINGCAP_DIFF_SEED=N` reruns the bounded matrix with another seed.

mod capfile;
mod compare;
mod inputs;
mod packets;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use capfile::{read_pcap, rfc3339, Pcap, Rec};
use compare::*;
use inputs::{Gen, Input, Prec};

/// Expressions of every matrix: the index's terms, combinations, byte tests, link-level tests,
/// and some that tcpdump refuses on some link types (`vlan and udp` on raw IP, `inbound` on
/// Ethernet savefiles) or that reject every packet (`tcp and udp`).
const EXPRS: &[&str] = &[
    "",
    "host 10.0.0.1",
    "src host 10.0.0.2 and dst port 80",
    "net 10.1.0.0/16",
    "dst net 192.168.1.0/24 or src net 10.0.0.0/30",
    "port 53",
    "tcp port 443 or udp port 53",
    "portrange 1000-1010",
    "ip proto 47",
    "proto 17",
    "ip6 proto 0",
    "ip6 proto 44",
    "ip",
    "ip6",
    "arp",
    "not tcp",
    "udp",
    "tcp",
    "icmp",
    "ip6 and tcp",
    "ip6 or arp",
    "host fd00::1 and udp",
    "vlan",
    "vlan 100 and udp",
    "mpls",
    "mpls 1000 and host 10.0.0.3",
    "geneve",
    "geneve and host 10.0.0.3",
    "host 10.0.0.1 and geneve 42 and tcp",
    "geneve and (port 53 or net 10.1.0.0/16)",
    "udp port 4789 or ip proto 4",
    "tcp[13] & 2 != 0",
    "ip[8] < 64",
    "ether[0] & 1 = 1",
    "udp[8:2] = 0x1234",
    "ip[6:2] & 0x1fff != 0",
    "greater 1000",
    "less 100",
    "ether host 02:00:00:00:00:01",
    "ether broadcast",
    "(tcp or udp) and not (port 80 or port 443)",
    "vlan and udp",
    "tcp and udp",
    "inbound",
];

/// More for the long run.
const LONG_EXPRS: &[&str] = &[
    "icmp6",
    "ip6 net fd00::/64 and not icmp6",
    "tcp dst portrange 1000-1007",
    "vlan 200 and vlan 100",
    "ip host 10.0.0.1 and not udp",
    "ip[0] & 0xf > 5",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn",
    "ip6 protochain 6",
    "net 10.0.0.0 mask 255.255.255.252",
    "len <= 64",
    "ether proto 0x88b5",
    "ether multicast and not ip6",
    "ip multicast",
    "icmp[0] = 8",
    "wlan host 02:00:00:00:00:01",
    "src portrange 1000-1010 and ip6",
    "ip and not ip",
    "mpls and host 10.0.0.3 and udp",
    "geneve 7 and ip6 and not tcp",
    "proto 47 and host 10.0.0.2",
    "ip6 proto 41 or ip proto 41",
];

fn ringcap() -> &'static str {
    env!("CARGO_BIN_EXE_ringcap")
}

/// What a command did.
pub struct Out {
    pub code: Option<i32>,
    pub stderr: Vec<u8>,
}

impl Out {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
    fn status(&self) -> String {
        match self.code {
            Some(c) => format!("exit {c}"),
            None => "killed by a signal".into(),
        }
    }
    fn err_text(&self) -> String {
        let t = String::from_utf8_lossy(&self.stderr);
        let t = t.trim();
        if t.chars().count() > 700 {
            format!("{}…", t.chars().take(700).collect::<String>())
        } else {
            t.to_string()
        }
    }
}

/// Runs `line` with sh in an empty directory (so no word of an expression names a file there);
/// stdout is discarded.
pub fn sh(line: &str) -> Out {
    let o = Command::new("sh")
        .args(["-c", line])
        .current_dir(cwd())
        .stdout(std::process::Stdio::null())
        .output()
        .expect("sh");
    Out {
        code: o.status.code(),
        stderr: o.stderr,
    }
}

static CWD: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn cwd() -> &'static Path {
    CWD.get().expect("work dir set")
}

/// Single-quoted for sh (expressions hold no single quote).
fn q(s: &str) -> String {
    assert!(!s.contains('\''));
    format!("'{s}'")
}

/// Every tool the matrix runs, with the package that brings it; a missing one fails the test
/// (`make deps` installs them), it is never skipped.
fn check_tools() {
    let tools = [
        ("tcpdump", "tcpdump"),
        ("text2pcap", "wireshark-common (tshark)"),
        ("editcap", "wireshark-common (tshark)"),
        ("mergecap", "wireshark-common (tshark)"),
        ("zstd", "zstd"),
        ("lz4", "lz4"),
        ("gzip", "gzip"),
        ("head", "coreutils"),
        ("timeout", "coreutils"),
    ];
    let missing: Vec<String> = tools
        .iter()
        .filter(|(t, _)| !sh(&format!("command -v {t}")).ok())
        .map(|(t, p)| format!("{t} (Debian package {p})"))
        .collect();
    assert!(
        missing.is_empty(),
        "the differential test needs {}: run `make deps`",
        missing.join(", ")
    );
}

struct Matrix {
    inputs: Vec<Input>,
    /// `ringcap index` per input: (status, command).
    index: Vec<(Out, String)>,
    exprs: Vec<&'static str>,
    out_dir: PathBuf,
}

#[derive(Default)]
struct Results {
    failures: Vec<Failure>,
    comparisons: usize,
    /// Comparisons where tcpdump returned at least one packet (the matrix tests something).
    nonempty: usize,
    /// Per input, the times of tcpdump's packets (empty expression).
    times: HashMap<usize, Vec<u64>>,
    /// Failing outputs kept per (input class, first kind): a few are enough to look at, and the
    /// long run's would take hundreds of MB (the reproduction commands write them again).
    kept: HashMap<(String, String), usize>,
}

impl Matrix {
    fn run_case(&self, case: &Case, reference: &Reference, tag: &str, res: &Mutex<Results>) {
        let input = &self.inputs[case.input];
        let got_path = self.out_dir.join(format!("{}-{tag}.pcap", input.name));
        let _ = std::fs::remove_file(&got_path);
        let cmd = case.command(&input.store, &got_path);
        let got = sh(&format!("timeout -k 5 120 {cmd}"));
        let verdict = compare(reference, &got, &got_path, case);
        let mut r = res.lock().unwrap();
        r.comparisons += 1;
        if reference.pcap.as_ref().is_some_and(|p| !p.recs.is_empty()) {
            r.nonempty += 1;
        }
        let Some((kinds, diff)) = verdict else {
            let _ = std::fs::remove_file(&got_path);
            return;
        };
        let (ix, ixcmd) = &self.index[case.input];
        let mut d = format!(
            "--- FAIL [{}] {}: {} ({})\n  differs in: {}\n  provenance:\n",
            input.class,
            input.name,
            if case.expr.is_empty() {
                "(empty expression)".to_string()
            } else {
                q(case.expr)
            },
            case.label(),
            kinds.join("; ")
        );
        for p in &input.provenance {
            d.push_str(&format!("    {p}\n"));
        }
        d.push_str(&diff);
        d.push_str(&format!(
            "  ringcap index: {}{}\n  tcpdump: {}, {}; stderr: {}\n  ringcap: {}; stderr: {}\n",
            ix.status(),
            if ix.ok() {
                String::new()
            } else {
                format!(" ({})", ix.err_text())
            },
            reference.out.status(),
            reference
                .pcap
                .as_ref()
                .map_or("no file written".into(), |p| format!(
                    "{} packets",
                    p.recs.len()
                )),
            reference.out.err_text(),
            got.status(),
            got.err_text()
        ));
        let nano = if case.refp == Prec::Nano {
            " --nano"
        } else {
            ""
        };
        d.push_str(&format!(
            "  reproduce (in {}):\n    {ixcmd}\n    {}\n    {cmd}\n    diff <(tcpdump -r {} -nn -tt -xx{nano}) <(tcpdump -r {} -nn -tt -xx{nano})\n",
            cwd().display(),
            reference.cmd,
            reference.path.display(),
            got_path.display(),
        ));
        let kept = r
            .kept
            .entry((input.class.clone(), kinds[0].clone()))
            .or_default();
        *kept += 1;
        if *kept > 3 {
            let _ = std::fs::remove_file(&got_path);
            d.push_str("  (ringcap's output was removed; the query above writes it again)\n");
        }
        r.failures.push(Failure {
            input: case.input,
            mode: if case.indexed {
                "indexed"
            } else {
                "--no-index"
            },
            kinds,
            detail: d,
        });
    }

    /// Phase 1: every expression on every input, each reference precision, indexed and not.
    fn expression_job(&self, i: usize, e: usize, res: &Mutex<Results>) {
        let input = &self.inputs[i];
        let expr = self.exprs[e];
        let mut refs: Vec<(Prec, Reference)> = Vec::new();
        for &(refp, _) in &input.checks {
            if !refs.iter().any(|(p, _)| *p == refp) {
                let path = self
                    .out_dir
                    .join(format!("{}-e{e}-{refp:?}.ref.pcap", input.name));
                refs.push((refp, tcpdump(input, expr, refp, &path)));
            }
        }
        for &(refp, outp) in &input.checks {
            let reference = &refs.iter().find(|(p, _)| *p == refp).unwrap().1;
            for indexed in [true, false] {
                let case = Case {
                    input: i,
                    expr,
                    indexed,
                    refp,
                    outp,
                    after: None,
                    before: None,
                    terms: false,
                };
                let tag = format!(
                    "e{e}-{refp:?}-{outp:?}-{}",
                    if indexed { "idx" } else { "scan" }
                );
                self.run_case(&case, reference, &tag, res);
            }
        }
        let mut r = res.lock().unwrap();
        if let Some(&(refp, _)) = input.checks.first() {
            let reference = &refs.iter().find(|(p, _)| *p == refp).unwrap().1;
            // `ringcap index` must index what tcpdump reads without complaint.
            if expr.is_empty() && reference.out.ok() && !self.index[i].0.ok() {
                let (ix, cmd) = &self.index[i];
                r.failures.push(Failure {
                    input: i,
                    mode: "index",
                    kinds: vec!["ringcap index failed on a file tcpdump reads whole".into()],
                    detail: format!(
                        "--- FAIL [{}] {}: ringcap index {}\n  provenance:\n    {}\n  ringcap index stderr: {}\n  reproduce: {cmd}\n",
                        input.class,
                        input.name,
                        ix.status(),
                        input.provenance.join("\n    "),
                        ix.err_text()
                    ),
                });
            }
            // The times of every packet, where the windows of phase 2 are cut.
            if input.windows && expr.is_empty() {
                if let Some(p) = &reference.pcap {
                    let nano = refp == Prec::Nano;
                    let times = p.recs.iter().map(|r| r.ns(nano)).collect();
                    r.times.insert(i, times);
                }
            }
        }
        for (_, reference) in refs {
            let _ = std::fs::remove_file(&reference.path);
        }
    }

    /// Phase 2: time windows, as flags (UTC and other zones) and as terms of the expression.
    fn window_job(&self, i: usize, res: &Mutex<Results>) {
        let input = &self.inputs[i];
        let Some((refp, outp)) = input.checks.first().copied() else {
            return;
        };
        let times = match res.lock().unwrap().times.get(&i) {
            Some(t) if t.len() >= 8 => t.clone(),
            _ => return,
        };
        let n = times.len();
        // (expression, --after, --before, as terms of the expression)
        let windows: [(&str, Bound, Bound, bool); 4] = [
            (
                "",
                Some((times[n / 3], 0)),
                Some((times[2 * n / 3], 0)),
                false,
            ),
            ("udp", Some((times[n / 4], 330)), None, false),
            ("ip6 or arp", None, Some((times[n / 2], -480)), false),
            (
                "tcp",
                Some((times[n / 5] + 1, 0)),
                Some((times[4 * n / 5], 60)),
                true,
            ),
        ];
        for (w, (expr, after, before, terms)) in windows.into_iter().enumerate() {
            let path = self.out_dir.join(format!("{}-w{w}.ref.pcap", input.name));
            let reference = tcpdump(input, expr, refp, &path);
            for indexed in [true, false] {
                let case = Case {
                    input: i,
                    expr,
                    indexed,
                    refp,
                    outp,
                    after,
                    before,
                    terms,
                };
                let tag = format!("w{w}-{}", if indexed { "idx" } else { "scan" });
                self.run_case(&case, &reference, &tag, res);
            }
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Runs `jobs` on `threads` threads.
fn parallel(threads: usize, jobs: usize, f: impl Fn(usize) + Sync) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                if j >= jobs {
                    break;
                }
                f(j);
            });
        }
    });
}

fn run_matrix(seeds: &[u64], n: usize, long: bool) {
    let started = Instant::now();
    let work = PathBuf::from(format!(
        "/var/tmp/ringcap-diff-{}{}",
        std::process::id(),
        if long { "-long" } else { "" }
    ));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("cwd")).unwrap();
    let _ = CWD.set(work.join("cwd"));
    check_tools();
    let threads: usize = std::env::var("RINGCAP_DIFF_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);

    let mut all_inputs = Vec::new();
    for &seed in seeds {
        let mut g = Gen {
            dir: work.join(format!("seed-{seed}")),
            seed,
            n,
            long,
            inputs: Vec::new(),
        };
        g.all();
        for mut i in g.inputs {
            i.name = format!("s{seed}-{}", i.name);
            all_inputs.push(i);
        }
    }
    let made = started.elapsed();
    let out_dir = work.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();

    // `ringcap index` of every input first (a directory store as a whole).
    let index: Vec<Mutex<Option<(Out, String)>>> =
        all_inputs.iter().map(|_| Mutex::new(None)).collect();
    parallel(threads, all_inputs.len(), |i| {
        let cmd = format!("{} index -q {}", ringcap(), all_inputs[i].store.display());
        *index[i].lock().unwrap() = Some((sh(&format!("timeout -k 5 300 {cmd}")), cmd));
    });
    let mut exprs: Vec<&'static str> = EXPRS.to_vec();
    if long {
        exprs.extend(LONG_EXPRS);
    }
    let m = Matrix {
        index: index
            .into_iter()
            .map(|m| m.into_inner().unwrap().unwrap())
            .collect(),
        inputs: all_inputs,
        exprs,
        out_dir,
    };
    let res = Mutex::new(Results::default());
    let per = m.exprs.len();
    parallel(threads, m.inputs.len() * per, |j| {
        m.expression_job(j / per, j % per, &res)
    });
    parallel(threads, m.inputs.len(), |i| m.window_job(i, &res));
    let res = res.into_inner().unwrap();
    let took = started.elapsed();

    let mut report = String::new();
    for f in &res.failures {
        report.push_str(&f.detail);
    }
    // The summary: per input class and kind of difference, the count and the first example.
    let mut classes: BTreeMap<(String, String), ClassCount> = BTreeMap::new();
    for (k, f) in res.failures.iter().enumerate() {
        for kind in &f.kinds {
            let e = classes
                .entry((m.inputs[f.input].class.clone(), kind.clone()))
                .or_insert((BTreeMap::new(), k));
            *e.0.entry(f.mode).or_default() += 1;
        }
    }
    let mut summary = format!(
        "differential matrix: seeds {seeds:?}, {n} packets per file, {} inputs, {} expressions, {} comparisons with tcpdump ({} with packets), {} failed; inputs made in {:.0} s, all in {:.0} s\n",
        m.inputs.len(),
        m.exprs.len(),
        res.comparisons,
        res.nonempty,
        res.failures.len(),
        made.as_secs_f64(),
        took.as_secs_f64()
    );
    // A short view first: what differed, over all inputs; and the inputs that matched tcpdump.
    let mut kinds: BTreeMap<&str, (usize, std::collections::BTreeSet<&str>)> = BTreeMap::new();
    for f in &res.failures {
        for kind in &f.kinds {
            // "header link type (1 vs 113)" and the like count as one kind here.
            let short = kind.split(" (").next().unwrap_or(kind);
            let e = kinds.entry(short).or_default();
            e.0 += 1;
            e.1.insert(&m.inputs[f.input].class);
        }
    }
    for (kind, (n, cls)) in &kinds {
        summary.push_str(&format!(
            "  {kind}: {n} comparisons, {} input classes\n",
            cls.len()
        ));
    }
    let clean: Vec<&str> = m
        .inputs
        .iter()
        .enumerate()
        .filter(|(i, _)| !res.failures.iter().any(|f| f.input == *i))
        .map(|(_, inp)| inp.name.as_str())
        .collect();
    summary.push_str(&format!(
        "inputs where every comparison matched tcpdump ({}): {}\n",
        clean.len(),
        clean.join(", ")
    ));
    if !classes.is_empty() {
        summary
            .push_str("failures by class (input class | what differed: count; first example):\n");
        for ((class, kind), (modes, first)) in &classes {
            let f = &res.failures[*first];
            let head = f
                .detail
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("--- FAIL ");
            let count: usize = modes.values().sum();
            let modes: Vec<String> = modes.iter().map(|(m, n)| format!("{m} {n}")).collect();
            summary.push_str(&format!(
                "  {class} | {kind}: {count} ({}); e.g. {head}\n",
                modes.join(", ")
            ));
        }
    }
    report.push_str(&summary);
    std::fs::write(work.join("report.txt"), &report).unwrap();
    // Details of the first two failures of each class on stdout; all of them in report.txt.
    let mut shown: HashMap<(String, String), usize> = HashMap::new();
    for f in &res.failures {
        let key = (m.inputs[f.input].class.clone(), f.kinds[0].clone());
        let c = shown.entry(key).or_default();
        *c += 1;
        if *c <= 2 {
            println!("{}", f.detail);
        }
    }
    println!("{summary}");
    assert!(
        res.comparisons > 1000 && res.nonempty * 2 > res.comparisons,
        "the matrix compared too little: {} comparisons, {} with packets",
        res.comparisons,
        res.nonempty
    );
    if res.failures.is_empty() {
        let _ = std::fs::remove_dir_all(&work);
    } else {
        panic!(
            "{} of {} comparisons differ from tcpdump (all of them, with reproductions: {}):\n{summary}",
            res.failures.len(),
            res.comparisons,
            work.join("report.txt").display()
        );
    }
}

fn seeds_from(var: &str, default: &str) -> Vec<u64> {
    let v = std::env::var(var).unwrap_or_else(|_| default.to_string());
    if let Some((a, b)) = v.split_once('-') {
        (a.trim().parse().unwrap()..=b.trim().parse().unwrap()).collect()
    } else {
        v.split(',').map(|s| s.trim().parse().expect(var)).collect()
    }
}

/// The bounded matrix of `make test`.
#[test]
fn query_equals_tcpdump_on_other_tools_files() {
    run_matrix(&seeds_from("RINGCAP_DIFF_SEED", "1"), 300, false);
}

/// The long run of `make test-differential`: more seeds, packets, formats and expressions.
#[test]
#[ignore = "long: make test-differential"]
fn query_equals_tcpdump_long() {
    let n = std::env::var("RINGCAP_DIFF_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    run_matrix(&seeds_from("RINGCAP_DIFF_SEEDS", "1-6"), n, true);
}
