//! `ringcap bench` end to end: a tiny plan (ringcap and tcpdump, two rates, one rerun) through the real
//! binary, real namespaces, the real generator and capturers; then `--resume` on the finished plan.

mod common;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Packets in a classic pcap file (µs or ns magic, either byte order), each checked to be one of the
/// generator's 60-byte frames to the non-local MAC. Read here, independently of capinfos and the runner.
fn pcap_frames(path: &Path) -> u64 {
    let b = fs::read(path).unwrap();
    assert!(b.len() >= 24, "{} is too short", path.display());
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let le = matches!(magic, 0xa1b2c3d4 | 0xa1b23c4d);
    assert!(
        le || matches!(magic, 0xd4c3b2a1 | 0x4d3cb2a1),
        "not a pcap file: {magic:x}"
    );
    let u32_at = |i: usize| {
        let x: [u8; 4] = b[i..i + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(x)
        } else {
            u32::from_be_bytes(x)
        }
    };
    let (mut off, mut n) = (24, 0);
    while off + 16 <= b.len() {
        let caplen = u32_at(off + 8) as usize;
        let wirelen = u32_at(off + 12);
        assert_eq!(wirelen, 60, "frame {n} of {}", path.display());
        let frame = &b[off + 16..off + 16 + caplen];
        assert_eq!(&frame[..6], &common::DST_MAC, "frame {n}");
        off += 16 + caplen;
        n += 1;
    }
    assert_eq!(off, b.len(), "{} ends in a partial record", path.display());
    n
}

/// results.csv of a bench output directory: its header, and each row by column name.
fn results(out: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let mut r = csv::Reader::from_path(out.join("results.csv")).unwrap();
    let head: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    let rows = r
        .records()
        .map(|rec| {
            head.iter()
                .cloned()
                .zip(rec.unwrap().iter().map(str::to_string))
                .collect()
        })
        .collect();
    (head, rows)
}

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(common::ringcap())
        .arg("bench")
        .args(args)
        .output()
        .expect("run ringcap bench")
}

#[test]
fn tiny_plan_runs_counts_and_resumes() {
    let tmp = PathBuf::from(format!(
        "/var/tmp/ringcap-bench-test-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&tmp);
    let disk = tmp.join("captures");
    let out = tmp.join("out");
    fs::create_dir_all(&tmp).unwrap();
    let plan = tmp.join("tiny.toml");
    fs::write(
        &plan,
        format!(
            r#"title = "tiny"
[run]
reruns = 1
packets = 20000
warmup_packets = 1000
disk_dir = "{}"
keep_files = true
buffer_kib = 16384
[factors]
method = ["ringcap", "tcpdump"]
rate_pps = [40000, 80000]
"#,
            disk.display()
        ),
    )
    .unwrap();
    let plan_s = plan.to_str().unwrap();
    let out_s = out.to_str().unwrap();

    let o = bench(&[plan_s, "--out", out_s, "-v"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "ringcap bench failed:\n{stderr}");

    let (head, rows) = results(&out);
    assert_eq!(
        &head[..7],
        &[
            "run",
            "point",
            "rerun",
            "app",
            "method",
            "rate_pps",
            "generated"
        ]
    );
    // Columns are only ever appended: the run's status and set-up time, the CPU-limit cgroup's counters,
    // then the line rate, the machine and the capture CPU's busy share.
    assert_eq!(
        &head[head.len() - 8..],
        &[
            "status",
            "app_setup_s",
            "cg_periods",
            "cg_throttled",
            "cg_throttled_s",
            "line_mbps",
            "machine",
            "capture_cpu_busy"
        ]
    );
    assert_eq!(rows.len(), 4, "{rows:?}");
    let points: Vec<&str> = rows.iter().map(|r| r["point"].as_str()).collect();
    assert_eq!(
        points,
        [
            "method=ringcap;rate_pps=40000",
            "method=ringcap;rate_pps=80000",
            "method=tcpdump;rate_pps=40000",
            "method=tcpdump;rate_pps=80000"
        ]
    );
    let num = |r: &HashMap<String, String>, k: &str| -> f64 {
        r[k].parse()
            .unwrap_or_else(|_| panic!("{k} = {:?} in {r:?}", r[k]))
    };
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["status"], "ok", "{row:?}\n{stderr}");
        assert_eq!(row["run"], i.to_string());
        // The generator's -n is exact and veth loses nothing: warm-up + measured packets, all offered.
        assert_eq!(num(row, "generated"), 21000.0, "{row:?}");
        assert_eq!(num(row, "offered"), 21000.0, "{row:?}");
        let received = num(row, "received");
        assert!(received <= 21000.0);
        let rate = num(row, "capture_rate");
        assert!((rate - received / 21000.0).abs() < 1e-6, "{row:?}");
        // 20 000 frames in 0.25-0.5 s; pps is measured over the generator's time.
        let pps = num(row, "pps");
        let want = num(row, "rate_pps");
        assert!((pps / want - 1.0).abs() < 0.1, "pps {pps} for {want}");
        let (cpu, setup) = (num(row, "app_cpu_s"), num(row, "app_setup_s"));
        assert!(cpu > 0.0 && (0.0..cpu).contains(&setup), "{row:?}");
        let per_pkt = num(row, "app_ns_per_pkt");
        assert!(
            (per_pkt - (cpu - setup) / 21000.0 * 1e9).abs() < 1.0,
            "{row:?}"
        );
        // On the line each 60-byte frame takes 84 bytes (FCS, preamble, gap: Schultz).
        let line = num(row, "line_mbps");
        assert!(
            (line / num(row, "mbps") - 84.0 / 60.0).abs() < 0.01,
            "{row:?}"
        );
        let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(row["machine"], host.trim(), "{row:?}");
        let busy = 100.0 - num(row, "cpu_idle");
        assert!((0.0..=100.0).contains(&busy));

        // The kept file holds exactly what the row says was received.
        let suffix = format!("-run{i}-app0.pcap");
        let file = fs::read_dir(&disk)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(&suffix))
            .unwrap_or_else(|| panic!("no *{suffix} in {}", disk.display()));
        assert_eq!(pcap_frames(&file) as f64, received, "{}", file.display());
        // A 16 MiB ring holds all 21 000 frames even if a capturer was descheduled: nothing lost.
        assert_eq!(received, 21000.0, "{row:?}");
    }
    assert!(out.join("results.parquet").exists());
    assert!(out.join("cpusage/0.txt").exists());
    // Every plot of the report draws data, not only axes and a legend.
    let mut plots = 0;
    for e in fs::read_dir(out.join("plots")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "svg") {
            let marks = plot::drawn_data_marks(&fs::read_to_string(&p).unwrap());
            assert!(marks.is_some_and(|n| n > 0), "{}: {marks:?}", p.display());
            plots += 1;
        }
    }
    assert!(plots >= 3, "only {plots} plots");
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert!(meta["finished"].is_string(), "{meta}");
    assert!(meta["tools"]["tcpdump"].is_string(), "{meta}");
    assert_eq!(
        fs::read_to_string(out.join("plan.toml")).unwrap(),
        fs::read_to_string(&plan).unwrap()
    );

    // Without --resume the finished directory is refused; with it nothing is redone.
    let before = fs::read(out.join("results.csv")).unwrap();
    let o = bench(&[plan_s, "--out", out_s]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--resume"));
    let o = bench(&[plan_s, "--out", out_s, "--resume"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("0 runs"), "{stderr}");
    assert_eq!(fs::read(out.join("results.csv")).unwrap(), before);
    // A different plan in the same directory is refused.
    fs::write(
        &plan,
        fs::read_to_string(&plan).unwrap().replace("20000", "30000"),
    )
    .unwrap();
    let o = bench(&[plan_s, "--out", out_s, "--resume"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("different plan"));

    fs::remove_dir_all(&tmp).unwrap();
}

/// A plan's `[interface]`: capture on a named interface (the testbed's receiving veth, named as a user would
/// name a NIC) with the traffic from a generator command template. 500 extra frames reach the interface before
/// each generator run, as other traffic on a real link would. The offered count must be the interface's
/// (checked against the sending veth's own counter), the generator's report the cross-check.
#[test]
fn named_interface_with_a_generator_template() {
    let tb = common::testbed();
    let tmp = common::temp_dir("bench-iface");
    let disk = tmp.join("captures");
    let plan = tmp.join("iface.toml");
    let write_plan = |offered: &str| {
        fs::write(
            &plan,
            format!(
                r#"title = "named interface"
[run]
reruns = 1
packets = 20000
warmup_packets = 1000
disk_dir = "{disk}"
keep_files = true
buffer_kib = 16384
method = "tcpdump"
rate_pps = 50000
[interface]
capture = "{rx_if}"
netns = "{rx_ns}"
generator = "ip netns exec {tx_ns} {{ringcap}} gen -i {tx_if} -n 500 --dist {{dist}} -q && ip netns exec {tx_ns} {{ringcap}} gen -i {tx_if} -n {{packets}} {{rate}} --dist {{dist}} --json -q"
offered = "{offered}"
"#,
                disk = disk.display(),
                rx_if = tb.rx_if,
                rx_ns = tb.rx_ns,
                tx_ns = tb.tx_ns,
                tx_if = tb.tx_if,
            ),
        )
        .unwrap()
    };
    let row = |out: &Path| -> HashMap<String, String> {
        results(out).1.into_iter().next().expect("one row")
    };

    // offered = "interface": the capture rate is over what reached the interface.
    write_plan("interface");
    let out = tmp.join("out-interface");
    let sent0 = tb.tx_packets();
    let o = bench(&[plan.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let sent = tb.tx_packets() - sent0;
    assert!(o.status.success(), "{}", common::stderr_text(&o));
    let r = row(&out);
    assert_eq!(r["status"], "ok", "{r:?}");
    assert_eq!(sent, 22000, "the sending veth's counter");
    assert_eq!(r["offered"], "22000", "{r:?}");
    assert_eq!(
        r["generated"], "21000",
        "the generator's own reports: {r:?}"
    );
    let file = fs::read_dir(&disk)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-run0-app0.pcap"))
        .expect("the kept capture file");
    let received = pcap_frames(&file);
    assert_eq!(r["received"], received.to_string(), "{r:?}");
    let rate: f64 = r["capture_rate"].parse().unwrap();
    assert!((rate - received as f64 / 22000.0).abs() < 1e-6, "{r:?}");
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        meta["machine"]["nics"][0]["name"],
        tb.rx_if.as_str(),
        "{meta}"
    );

    // offered = "generator": the 1000 packets it did not report make the run fail its cross-check.
    write_plan("generator");
    let _ = fs::remove_dir_all(&disk);
    let out = tmp.join("out-generator");
    let o = bench(&[plan.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let r = row(&out);
    assert!(
        r["status"].contains("the generator sent 21000 packets, the interface counted 22000"),
        "{r:?}\n{}",
        common::stderr_text(&o)
    );

    // A capture interface that does not exist is refused before any run.
    fs::write(
        &plan,
        fs::read_to_string(&plan)
            .unwrap()
            .replace(&format!("netns = \"{}\"\n", tb.rx_ns), "")
            .replace(
                &format!("capture = \"{}\"", tb.rx_if),
                "capture = \"nosuch0\"",
            ),
    )
    .unwrap();
    let o = bench(&[
        plan.to_str().unwrap(),
        "--out",
        tmp.join("out-none").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr_text(&o));
    assert!(
        common::stderr_text(&o).contains("nosuch0"),
        "{}",
        common::stderr_text(&o)
    );
    let _ = fs::remove_dir_all(&tmp);
}

/// Time-based runs (seed 004): 1 s of warm-up, then 3 samples of 1 s at 20 000 pps. Each sample's captured
/// count must be what tshark finds time-stamped inside the sample in the kept file, its offered count what
/// 20 000 pps gives in its length (the generator paces to 1 %), and the samples' offered packets at most
/// what the interface counted over the whole run.
#[test]
fn time_sampled_runs_count_each_sample() {
    let tmp = PathBuf::from(format!(
        "/var/tmp/ringcap-bench-samples-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&tmp);
    let disk = tmp.join("captures");
    let out = tmp.join("out");
    fs::create_dir_all(&tmp).unwrap();
    let plan = tmp.join("sampled.toml");
    fs::write(
        &plan,
        format!(
            "title = \"sampled\"\n[run]\nreruns = 1\nsamples = 3\nsample_s = 1\nwarmup_s = 1\n\
             disk_dir = \"{}\"\nkeep_files = true\nmethod = \"ringcap\"\n[factors]\nrate_pps = [20000]\n",
            disk.display()
        ),
    )
    .unwrap();
    let o = bench(&[plan.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "ringcap bench failed:\n{stderr}");

    let row = results(&out).1.into_iter().next().expect("one row");
    assert_eq!(row["status"], "ok", "{row:?}\n{stderr}");
    let run_offered: u64 = row["offered"].parse().unwrap();

    let file = fs::read_dir(&disk)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-run0-app0.pcap"))
        .expect("kept capture file");
    let stamps: Vec<f64> = common::tshark_fields(&file, &["frame.time_epoch"])
        .iter()
        .map(|f| f[0].parse().unwrap())
        .collect();
    let text = fs::read_to_string(out.join("samples/0.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "sample,start_ns,seconds,offered,offered_bytes,captured,capture_rate,pps,mbps"
    );
    let samples: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(samples.len(), 3, "{text}");
    let mut offered_sum = 0.0;
    for s in &samples {
        let (start, secs, offered, captured) = (s[1] / 1e9, s[2], s[3], s[5]);
        assert!((secs - 1.0).abs() < 0.05, "sample length {secs} s");
        // tshark's epoch has µs precision here (pcap µs stamps), so compare at the sample's µs edges.
        let end = start + secs;
        let inside = stamps.iter().filter(|&&t| t >= start && t < end).count() as f64;
        assert!(
            (inside - captured).abs() <= 2.0,
            "tshark counts {inside} in the sample, the runner {captured}"
        );
        assert!(
            (offered / (20_000.0 * secs) - 1.0).abs() < 0.05,
            "{offered} offered in {secs} s at 20 000 pps"
        );
        // ringcap keeps up with 20 kpps: every offered frame captured, give or take the edges (the counter
        // read takes a few ms: up to ~1 % of a 1 s sample at each edge).
        assert!((captured - offered).abs() <= 0.03 * offered, "{s:?}");
        offered_sum += offered;
    }
    assert!(
        offered_sum <= run_offered as f64,
        "{offered_sum} > {run_offered}"
    );
    // The report takes each sample as one replication of the point.
    let summary = fs::read_to_string(out.join("summary.csv")).unwrap();
    let mut sr = csv::Reader::from_reader(summary.as_bytes());
    let sh: Vec<String> = sr.headers().unwrap().iter().map(str::to_string).collect();
    let col = |name: &str| sh.iter().position(|h| h == name).unwrap();
    let rate = sr
        .records()
        .map(|r| r.unwrap())
        .find(|r| &r[col("metric")] == "capture_rate")
        .unwrap_or_else(|| panic!("no capture_rate in {summary}"));
    assert_eq!(&rate[col("n")], "3", "{summary}");
    fs::remove_dir_all(&tmp).unwrap();
}

/// A level this machine cannot run (placement "siblings" without SMT) is said on the command line with the
/// reason and how many runs it leaves out, not only in meta.json.
#[test]
fn skipped_levels_are_printed_with_the_reason() {
    let tmp = PathBuf::from(format!(
        "/var/tmp/ringcap-bench-skiplevel-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).unwrap();
    let plan = tmp.join("smt.toml");
    fs::write(
        &plan,
        "title = \"smt\"\n[run]\nreruns = 2\npackets = 2000\nwarmup_packets = 0\noutput = \"null\"\n\
         method = \"ringcap\"\n[factors]\nplacement = [\"split\", \"siblings\"]\n",
    )
    .unwrap();
    let out = tmp.join("out");
    let o = bench(&[plan.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    // The reason from sysfs, read here through the lab's own probe only to know which case this machine is.
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    match lab::smt::machine_sibling_pair() {
        Err(reason) => {
            let line = format!("skipping placement=siblings (2 runs): {reason}");
            assert!(stderr.contains(&line), "no `{line}` in:\n{stderr}");
            assert_eq!(meta["skipped_levels"][0]["runs"], 2, "{meta}");
        }
        Ok(_) => assert!(!stderr.contains("skipping placement"), "{stderr}"),
    }
    fs::remove_dir_all(&tmp).unwrap();
}

/// `traffic = "synth:..."`: the lab writes a b-model trace and replays it instead of `ringcap gen`. With a big
/// ring and no CPU budget nothing is lost, so every count must agree with an independent one: the interface's
/// offered packets are the warm-up plus every frame of the trace as `tcpdump -r` reads it, and the kept capture
/// holds, by `tcpdump -r`, as many packets as the row says were received, which is all that was offered.
#[test]
fn synth_traffic_is_replayed_and_captured_whole() {
    if !common::have("tcpdump") {
        return;
    }
    let tmp = common::temp_dir("bench-synth");
    let disk = tmp.join("captures");
    let out = tmp.join("out");
    let plan = tmp.join("synth.toml");
    fs::write(
        &plan,
        format!(
            r#"title = "synth"
[run]
reruns = 1
packets = 20000
warmup_packets = 1000
seed = 7
disk_dir = "{}"
keep_files = true
rate_pps = 20000
[factors]
method = ["ringcap"]
traffic = ["synth:bmodel=0.8,levels=10"]
"#,
            disk.display()
        ),
    )
    .unwrap();
    let o = bench(&[plan.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stderr = common::stderr_text(&o);
    assert!(o.status.success(), "ringcap bench failed:\n{stderr}");
    let rows = results(&out).1;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["status"], "ok", "{row:?}\n{stderr}");
    assert_eq!(row["traffic"], "synth:bmodel=0.8,levels=10");

    let trace = fs::read_dir(out.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "pcap"))
        .expect("a trace in out/traces");
    assert!(
        trace.to_string_lossy().contains("seed7"),
        "{}",
        trace.display()
    );
    let in_trace = common::tcpdump_count(&trace) as u64;
    // The b-model keeps each period's count: about packets, not a few.
    assert!(
        (15_000..=25_000).contains(&in_trace),
        "{in_trace} packets in the trace"
    );
    let num = |k: &str| -> u64 { row[k].parse().unwrap_or_else(|_| panic!("{k} in {row:?}")) };
    assert_eq!(num("offered"), 1000 + in_trace, "{row:?}");
    assert_eq!(num("generated"), num("offered"), "{row:?}");
    assert_eq!(num("received"), num("offered"), "{row:?}");

    let capture = fs::read_dir(&disk)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-run0-app0.pcap"))
        .unwrap_or_else(|| panic!("no capture in {}", disk.display()));
    assert_eq!(common::tcpdump_count(&capture) as u64, num("received"));
    let _ = fs::remove_dir_all(&tmp);
}
