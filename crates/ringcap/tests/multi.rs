//! Several interfaces in one capture (issue 13 item 1): a second veth pair joins the testbed's namespaces,
//! frames go out on both, and `ringcap capture -i veth-rx -i veth-rx2` must give one file with every packet
//! under the interface it arrived on, in time order, as tshark and tcpdump read it.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use testbed::{Side, Testbed};

const A: &str = "veth-rx";
const B: &str = "veth-rx2";
const B_TX: &str = "veth-tx2";

/// The testbed with a second veth pair between its namespaces (removed with them).
fn two_pair_testbed() -> Testbed {
    let tb = testbed();
    let ip = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().expect("ip");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ip(&[
        "-n", &tb.tx_ns, "link", "add", B_TX, "type", "veth", "peer", "name", B, "netns", &tb.rx_ns,
    ]);
    ip(&["-n", &tb.tx_ns, "link", "set", B_TX, "up"]);
    ip(&["-n", &tb.rx_ns, "link", "set", B, "up"]);
    tb
}

/// Sends `rounds` times `na` frames on the first pair and `nb` on the second, so the two interleave in time.
fn send_both(tb: &Testbed, rounds: u32, na: u32, nb: u32) {
    let mut seq = 0;
    for _ in 0..rounds {
        let fa: Vec<Vec<u8>> = (0..na).map(|i| frame(seq + i, 1000, 2000, 100)).collect();
        seq += na;
        let fb: Vec<Vec<u8>> = (0..nb).map(|i| frame(seq + i, 3000, 4000, 200)).collect();
        seq += nb;
        send(tb, &fa);
        send_on(tb, B_TX, &fb);
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past the block timeout: everything is in the rings before the stop.
    std::thread::sleep(Duration::from_millis(300));
}

/// The summary object of `--json` on stderr.
fn summary(stderr: &str) -> serde_json::Value {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no JSON summary in: {stderr}"))
}

fn check_summary(stderr: &str, sent: [u64; 2]) {
    let s = summary(stderr);
    let ifs = s["interfaces"].as_array().expect("per-interface counters");
    assert_eq!(ifs.len(), 2, "{s}");
    for (i, (name, n)) in [A, B].iter().zip(sent).enumerate() {
        assert_eq!(ifs[i]["name"], *name, "{s}");
        assert_eq!(ifs[i]["received_by_filter"], n, "{s}");
        assert_eq!(ifs[i]["delivered"], n, "{s}");
        assert_eq!(ifs[i]["written"], n, "{s}");
        assert_eq!(ifs[i]["dropped_by_kernel"], 0, "{s}");
    }
    assert_eq!(s["out_of_order"], 0, "{s}");
}

/// Nanoseconds since the epoch from tshark's `frame.time_epoch` ("1764000000.123456789").
fn epoch_ns(s: &str) -> u128 {
    let (sec, frac) = s.split_once('.').unwrap_or((s, "0"));
    let frac = format!("{frac:0<9}");
    sec.parse::<u128>().unwrap() * 1_000_000_000 + frac[..9].parse::<u128>().unwrap()
}

#[test]
fn pcapng_has_one_interface_block_per_interface_and_time_order() {
    if !have("tshark") {
        return;
    }
    let tb = two_pair_testbed();
    let dir = temp_dir("multi-ng");
    let file = dir.join("out.pcapng");
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            A,
            "-i",
            B,
            "-F",
            "pcapng",
            "-w",
            file.to_str().unwrap(),
            "-q",
            "--json",
            "--metrics",
            "127.0.0.1:9478",
            "udp",
        ],
    );
    send_both(&tb, 6, 50, 30);
    // --metrics: one received_packets_total series per interface, each what was sent on it.
    let want = [
        format!("ringcap_received_packets_total{{interface=\"{A}\"}} 300"),
        format!("ringcap_received_packets_total{{interface=\"{B}\"}} 180"),
    ];
    let mut page = String::new();
    for _ in 0..50 {
        let o = tb
            .command(Side::Rx, "curl")
            .args(["-s", "http://127.0.0.1:9478/metrics"])
            .output()
            .expect("curl (make deps installs it)");
        page = String::from_utf8_lossy(&o.stdout).into_owned();
        if want.iter().all(|w| page.lines().any(|l| l == w)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for w in &want {
        assert!(page.lines().any(|l| l == w), "no `{w}` in:\n{page}");
    }
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    check_summary(&err, [300, 180]);

    let rows = tshark_fields(
        &file,
        &[
            "frame.interface_id",
            "frame.interface_name",
            "frame.time_epoch",
            "frame.len",
        ],
    );
    assert_eq!(rows.len(), 480);
    let mut per = [0u64; 2];
    let mut last = 0u128;
    for r in &rows {
        let (id, name, len) = (r[0].as_str(), r[1].as_str(), r[3].as_str());
        match (id, name) {
            ("0", A) => {
                assert_eq!(len, "100");
                per[0] += 1
            }
            ("1", B) => {
                assert_eq!(len, "200");
                per[1] += 1
            }
            _ => panic!("unexpected interface {id} {name}"),
        }
        let t = epoch_ns(&r[2]);
        assert!(t >= last, "timestamps go back: {t} after {last}");
        last = t;
    }
    assert_eq!(per, [300, 180]);
    // The two interfaces do interleave in the file (not one after the other).
    let switches = rows.windows(2).filter(|w| w[0][0] != w[1][0]).count();
    assert!(
        switches >= 10,
        "only {switches} switches between interfaces"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn pcap_of_two_interfaces_is_linux_sll2() {
    if !have("tcpdump") {
        return;
    }
    let tb = two_pair_testbed();
    let dir = temp_dir("multi-pcap");
    let file = dir.join("out.pcap");
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            A,
            "-i",
            B,
            "-w",
            file.to_str().unwrap(),
            "-q",
            "--json",
            "udp",
        ],
    );
    send_both(&tb, 5, 40, 20);
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    check_summary(&err, [200, 100]);
    // tcpdump names SLL2 interfaces by index: run it where those indexes are.
    let td = tb
        .command(Side::Rx, "tcpdump")
        .args(["-nn", "-e", "-r"])
        .arg(&file)
        .output()
        .expect("tcpdump");
    let text = String::from_utf8_lossy(&td.stdout);
    let head = String::from_utf8_lossy(&td.stderr);
    assert!(head.contains("LINUX_SLL2"), "{head}");
    let count = |name: &str| {
        text.lines()
            .filter(|l| l.split_whitespace().nth(1) == Some(name))
            .count()
    };
    assert_eq!((count(A), count(B)), (200, 100), "{text}");
    // The frames after the cooked header are what was sent: UDP 10.77.0.1 → 10.77.0.2, length 100 - 14 - 28.
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("10.77.0.1.1000 > 10.77.0.2.2000: UDP, length 58"))
            .count(),
        200,
        "{text}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_second_interface_is_named_and_exits_2() {
    let tb = testbed();
    let out = ringcap_rx(&tb, &["capture", "-i", A, "-i", "nosuch0", "-c", "1"])
        .output()
        .expect("run ringcap");
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nosuch0"), "{err}");
}
