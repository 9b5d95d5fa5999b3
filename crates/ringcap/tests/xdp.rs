//! `capture --source xdp` and `--drop-all --source xdp` on a real veth pair with native XDP: what was sent
//! is what is in the file, byte for byte; filters agree with tcpdump on the same packets; every receive
//! queue is read; the program is gone after SIGINT, SIGTERM and kill -9.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use testbed::{Side, Testbed, TestbedOptions};

/// Frames of many flows (ports vary, so a multi-queue veth spreads them) and sizes 60..=1514.
fn frames(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            frame(
                i,
                1000 + (i % 97) as u16,
                7 + (i % 3) as u16,
                60 + (i as usize * 37) % 1455,
            )
        })
        .collect()
}

/// The XDP programs attached to the Rx end, as `ip link` shows them ("prog/xdp id N" / "xdp" lines).
fn xdp_attached(tb: &Testbed) -> bool {
    let out = tb
        .command(Side::Rx, "ip")
        .args(["-d", "link", "show", "dev", &tb.rx_if])
        .output()
        .expect("ip link");
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("prog/xdp") || text.contains(" xdp ") || text.contains("xdpdrv")
}

fn summary_json(o: &std::process::Output) -> serde_json::Value {
    stderr_text(o)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no JSON summary in:\n{}", stderr_text(o)))
}

/// tcpdump's view of a file: one line of hex per packet, in order.
fn tcpdump_hex(path: &Path, filter: &str) -> Vec<String> {
    let out = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(path)
        .args(["-xx", "-t"])
        .arg(filter)
        .output()
        .expect("tcpdump (make deps installs it)");
    assert!(
        out.status.success(),
        "tcpdump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut packets: Vec<String> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.starts_with('\t') {
            let hex: String = line
                .split(':')
                .nth(1)
                .unwrap_or("")
                .split_whitespace()
                .collect();
            if let Some(p) = packets.last_mut() {
                p.push_str(&hex);
            }
        } else {
            packets.push(String::new());
        }
    }
    packets
}

/// `capture --source xdp --json EXTRA...` into `file` on the Rx end while `sent` crosses the veth pair,
/// stopped with SIGINT once `settle` has passed (time for the last frames to reach the file).
fn capture_xdp_while_sending(
    tb: &Testbed,
    file: &Path,
    extra: &[&str],
    sent: &[Vec<u8>],
    settle: Duration,
) -> std::process::Output {
    let mut args = vec!["--source", "xdp", "--json"];
    args.extend_from_slice(extra);
    let child = capture_to_file(tb, file, &args);
    send(tb, sent);
    std::thread::sleep(settle);
    stop(child, libc::SIGINT)
}

#[test]
fn the_file_holds_every_frame_sent_byte_for_byte() {
    let tb = testbed();
    let dir = temp_dir("xdp-all");
    let file = dir.join("x.pcap");
    let child = capture_to_file(&tb, &file, &["--source", "xdp", "--json"]);
    assert!(
        xdp_attached(&tb),
        "the XDP program is not attached while capturing"
    );
    let sent = frames(5000);
    send(&tb, &sent);
    std::thread::sleep(Duration::from_millis(300));
    let out = stop(child, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let got = read_all(&file);
    assert_eq!(got.len(), sent.len(), "{}", stderr_text(&out));
    for (i, ((wire_len, bytes), want)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(bytes, want, "frame {i} differs");
        assert_eq!(*wire_len as usize, want.len());
    }
    assert_eq!(
        tcpdump_count(&file),
        sent.len(),
        "tcpdump reads a different count"
    );
    let s = summary_json(&out);
    assert_eq!(s["captured"], sent.len() as u64);
    assert_eq!(s["dropped_by_kernel"], 0);
    assert_eq!(s["xdp"]["program_seen"], sent.len() as u64);
    assert!(
        !xdp_attached(&tb),
        "the program stayed attached after the capture ended"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_filter_keeps_what_tcpdump_keeps_from_the_same_packets() {
    if !have("tcpdump") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("xdp-filter");
    let ours = dir.join("ours.pcap");
    let reference = dir.join("sent.pcap");
    let expr = "udp dst port 7 or greater 800";
    let sent = frames(3000);
    let out = capture_xdp_while_sending(&tb, &ours, &[expr], &sent, Duration::from_millis(500));
    assert!(out.status.success(), "{}", stderr_text(&out));
    // The reference: the frames sent, in a pcap file written here, filtered by tcpdump itself.
    write_pcap(&reference, &sent);
    assert_eq!(tcpdump_hex(&reference, "").len(), sent.len());
    let want = tcpdump_hex(&reference, expr);
    let got = tcpdump_hex(&ours, "");
    assert!(
        !want.is_empty() && want.len() < sent.len(),
        "the filter should keep some frames, not all"
    );
    assert_eq!(got.len(), want.len(), "{}", stderr_text(&out));
    assert!(got == want, "the packets kept differ from tcpdump's");
    let s = summary_json(&out);
    assert_eq!(s["xdp"]["filtered_out"], (sent.len() - want.len()) as u64);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `udp and dst port 9000` is in the prefilter's subset: the capture is still tcpdump's reading of all
/// frames sent, and what could not match never reached ringcap: the program counted it as left to the
/// stack, and a packet socket on the same interface (tcpdump) got exactly those frames.
#[test]
fn the_prefilter_leaves_what_cannot_match_to_the_stack_and_the_capture_is_tcpdumps() {
    if !have("tcpdump") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("xdp-prefilter");
    let ours = dir.join("ours.pcap");
    let stack = dir.join("stack.pcap");
    let reference = dir.join("sent.pcap");
    let expr = "udp and dst port 9000";
    // tcpdump first: the helpers keep the stderr of the child started last, which must be ringcap.
    let mut cmd = tb.command(Side::Rx, "tcpdump");
    cmd.args([
        "-i",
        &tb.rx_if,
        "-B",
        "65536",
        "--immediate-mode",
        "-U",
        "-n",
        "-w",
    ])
    .arg(&stack);
    let watcher = spawn_listening(cmd);
    let sent = prefilter_traffic(9000);
    let out = capture_xdp_while_sending(&tb, &ours, &[expr], &sent, Duration::from_millis(500));
    stop(watcher, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    write_pcap(&reference, &sent);
    let want = tcpdump_hex(&reference, expr);
    let got = tcpdump_hex(&ours, "");
    assert!(!want.is_empty() && want.len() < sent.len() / 2);
    assert_eq!(got.len(), want.len(), "{}", stderr_text(&out));
    assert!(got == want, "the packets kept differ from tcpdump's");
    // Every IPv6 frame sent matches, so what tcpdump rejects is all IPv4 or not IP: the prefilter's share.
    let rejected = tcpdump_hex(&reference, &format!("not ({expr})"));
    assert!(tcpdump_hex(&reference, &format!("ip6 and not ({expr})")).is_empty());
    let s = summary_json(&out);
    assert_eq!(s["xdp"]["prefilter"]["active"], true, "{s}");
    assert_eq!(
        s["xdp"]["prefilter"]["left_to_stack"],
        rejected.len() as u64,
        "{s}"
    );
    assert!(stderr_text(&out).contains("XDP prefilter on: (udp and dst port 9000)"));
    // The stack got them (tcpdump's packet socket sees what XDP passed, and nothing it redirected).
    let on_stack = tcpdump_hex(&stack, "not ip6");
    assert!(
        on_stack == rejected,
        "the stack saw {} frames, not the {} that cannot match",
        on_stack.len(),
        rejected.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An expression outside the subset (a byte test, a length) leaves the prefilter off: every frame goes to
/// user space, and the capture is still tcpdump's.
#[test]
fn outside_the_subset_the_prefilter_is_off_and_the_capture_is_tcpdumps() {
    if !have("tcpdump") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("xdp-no-prefilter");
    let ours = dir.join("ours.pcap");
    let reference = dir.join("sent.pcap");
    let expr = "udp[8] = 0 and len > 100";
    let sent = prefilter_traffic(9000);
    let out = capture_xdp_while_sending(&tb, &ours, &[expr], &sent, Duration::from_millis(500));
    assert!(out.status.success(), "{}", stderr_text(&out));
    write_pcap(&reference, &sent);
    let want = tcpdump_hex(&reference, expr);
    assert!(!want.is_empty() && want.len() < sent.len() / 2);
    assert!(
        tcpdump_hex(&ours, "") == want,
        "the packets kept differ from tcpdump's"
    );
    let s = summary_json(&out);
    assert_eq!(s["xdp"]["prefilter"]["active"], false, "{s}");
    assert_eq!(
        s["xdp"]["prefilter"]["left_to_stack"],
        serde_json::Value::Null
    );
    assert_eq!(s["xdp"]["filtered_out"], (sent.len() - want.len()) as u64);
    assert!(stderr_text(&out).contains("XDP prefilter off"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// 802.1Q-tagged frames: XDP sees the frame before the stack takes the tag off, so the file holds the tag
/// in place (as a tap delivers it), and a `vlan N` filter keeps what tcpdump keeps from the frames sent.
#[test]
fn vlan_tagged_frames_keep_their_tag_and_filter_as_tcpdump() {
    let tb = testbed();
    let dir = temp_dir("xdp-vlan");
    let all = dir.join("all.pcap");
    let some = dir.join("vlan6.pcap");
    let reference = dir.join("sent.pcap");
    let expr = "vlan 6 and udp dst port 7";
    // Two XDP captures cannot share the interface: the filtered one runs after, on the same frames.
    let sent: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| {
            let mut f = frame(
                i,
                1000 + (i % 97) as u16,
                7 + (i % 3) as u16,
                60 + (i as usize * 37) % 1300,
            );
            let vid = 5 + (i % 4) as u16;
            f.splice(12..12, [0x81, 0x00, (vid >> 8) as u8, vid as u8]);
            f
        })
        .collect();
    let out = capture_xdp_while_sending(&tb, &all, &[], &sent, Duration::from_millis(300));
    assert!(out.status.success(), "{}", stderr_text(&out));
    let got = read_all(&all);
    assert_eq!(got.len(), sent.len(), "{}", stderr_text(&out));
    for (i, ((_, bytes), want)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(bytes, want, "frame {i} differs (tag lost or moved?)");
    }

    let out = capture_xdp_while_sending(&tb, &some, &[expr], &sent, Duration::from_millis(300));
    assert!(out.status.success(), "{}", stderr_text(&out));
    write_pcap(&reference, &sent);
    let want = tcpdump_hex(&reference, expr);
    assert!(!want.is_empty() && want.len() < sent.len() / 3);
    assert!(
        tcpdump_hex(&some, "") == want,
        "the tagged packets kept differ from tcpdump's"
    );
    // A leading `vlan N` is in the prefilter's subset: the other tags and ports never left the driver.
    let s = summary_json(&out);
    assert_eq!(s["xdp"]["prefilter"]["active"], true, "{s}");
    assert_eq!(
        s["xdp"]["prefilter"]["left_to_stack"],
        (sent.len() - want.len()) as u64,
        "{s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_receive_queue_has_its_socket() {
    let tb = Testbed::new(TestbedOptions {
        queues: Some(2),
        ..TestbedOptions::default()
    })
    .expect("testbed");
    // One thread for two queues would miss half the traffic: refused, with the fix.
    let o = ringcap_rx(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--source",
            "xdp",
            "-w",
            "/dev/null",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr_text(&o));
    assert!(
        stderr_text(&o).contains("--threads 2"),
        "{}",
        stderr_text(&o)
    );

    let dir = temp_dir("xdp-queues");
    let file = dir.join("q.pcap");
    let sent = frames(4000);
    let out = capture_xdp_while_sending(
        &tb,
        &file,
        &["--threads", "2"],
        &sent,
        Duration::from_millis(300),
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let s = summary_json(&out);
    assert_eq!(s["xdp"]["queues"], 2);
    // Both queues carried traffic (the flows hash apart), and each queue's socket reports what the
    // driver redirected to it (its per-queue counter in `ethtool -S`), less its counted drops.
    assert!(
        have("ethtool"),
        "ethtool is needed to read the per-queue counters"
    );
    let st = tb
        .command(Side::Rx, "ethtool")
        .args(["-S", &tb.rx_if])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&st.stdout).into_owned();
    for q in 0..2 {
        let redirected: u64 = text
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(&format!("rx_queue_{q}_xdp_redirect:"))
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no rx_queue_{q}_xdp_redirect in ethtool -S:\n{text}"));
        assert!(
            redirected > 100,
            "queue {q} redirected only {redirected} frames: the test did not spread the flows"
        );
        let pq = &s["xdp"]["per_queue"][q];
        assert_eq!(pq["queue"], q as u64, "{s}");
        let taken = pq["packets"].as_u64().unwrap()
            + pq["socket_ring_full"].as_u64().unwrap()
            + pq["other"].as_u64().unwrap();
        assert_eq!(
            taken, redirected,
            "queue {q}: the socket's packets and drops against the driver's count\n{s}"
        );
    }
    let mut got: Vec<Vec<u8>> = read_all(&file).into_iter().map(|(_, b)| b).collect();
    let mut want = sent.clone();
    got.sort();
    want.sort();
    assert_eq!(got.len(), want.len(), "{}", stderr_text(&out));
    assert!(
        got == want,
        "the frames captured over two queues differ from those sent"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_program_is_left_behind_after_sigint_sigterm_or_kill_9() {
    let tb = testbed();
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        let child = spawn_capture(
            &tb,
            &[
                "capture",
                "-i",
                &tb.rx_if,
                "--source",
                "xdp",
                "-w",
                "/dev/null",
            ],
        );
        assert!(
            xdp_attached(&tb),
            "signal {sig}: not attached while running"
        );
        let _ = stop(child, sig);
        // The link is released when the process's descriptors close, which exit does.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while xdp_attached(&tb) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !xdp_attached(&tb),
            "signal {sig}: the XDP program is still attached"
        );
    }
    // And the stack has its packets back: a ring capture sees traffic again.
    let dir = temp_dir("xdp-after");
    let file = dir.join("ring.pcap");
    let child = capture_to_file(&tb, &file, &[]);
    let sent = frames(200);
    send(&tb, &sent);
    std::thread::sleep(Duration::from_millis(300));
    let out = stop(child, libc::SIGINT);
    assert_eq!(read_all(&file).len(), sent.len(), "{}", stderr_text(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `capture --source xdp --drop-all --json` on the Rx end: the XDP program counts and drops, listening.
fn spawn_drop_counter(tb: &Testbed) -> std::process::Child {
    spawn_capture(
        tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--source",
            "xdp",
            "--drop-all",
            "--json",
            "-q",
        ],
    )
}

#[test]
fn drop_all_in_the_driver_counts_every_frame_sent() {
    let tb = testbed();
    let child = spawn_drop_counter(&tb);
    let before = tb.tx_packets();
    let sent = frames(20_000);
    send(&tb, &sent);
    let left = tb.tx_packets() - before;
    std::thread::sleep(Duration::from_millis(200));
    let out = stop(child, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let s = summary_json(&out);
    assert_eq!(left, sent.len() as u64, "the sending veth lost frames");
    assert_eq!(s["received_by_filter"], left, "{}", stderr_text(&out));
    let bytes: usize = sent.iter().map(Vec::len).sum();
    assert_eq!(s["wire_bytes"], bytes as u64);
    assert!(!xdp_attached(&tb));
}

#[test]
fn a_bridge_without_native_xdp_is_refused_with_the_way_out() {
    let tb = testbed();
    let ok = tb
        .command(Side::Rx, "ip")
        .args(["link", "add", "br0", "type", "bridge"])
        .status()
        .unwrap()
        .success()
        && tb
            .command(Side::Rx, "ip")
            .args(["link", "set", "br0", "up"])
            .status()
            .unwrap()
            .success();
    assert!(ok, "cannot create a bridge");
    // A bridge has no native XDP.
    let o = ringcap_rx(
        &tb,
        &["capture", "-i", "br0", "--source", "xdp", "-w", "/dev/null"],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr_text(&o));
    assert!(
        stderr_text(&o).contains("--xdp-mode generic"),
        "{}",
        stderr_text(&o)
    );
}

#[test]
fn gen_backend_xdp_sends_exactly_the_count_asked() {
    let tb = testbed();
    let child = spawn_drop_counter(&tb);
    let before = tb.tx_packets();
    let n = 100_000u64;
    let o = tb
        .command(Side::Tx, ringcap().to_str().unwrap())
        .args([
            "gen",
            "-i",
            &tb.tx_if,
            "--backend",
            "xdp",
            "-n",
            &n.to_string(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "gen: {}", stderr_text(&o));
    let left = tb.tx_packets() - before;
    std::thread::sleep(Duration::from_millis(200));
    let out = stop(child, libc::SIGINT);
    let s = summary_json(&out);
    assert_eq!(
        left, n,
        "the sending veth counted a different number of frames"
    );
    assert_eq!(
        s["received_by_filter"], n,
        "the receiving XDP program counted a different number"
    );
}

/// Whether this kernel sends live XDP frames at all (asked of the kernel, not of ringcap). When it does
/// not, even to root, checks that `gen --backend xdp-live` says so and names the backends that work, and
/// returns false: the frame checks that follow cannot run on such a kernel.
fn live_frames_or_clear_refusal(tb: &Testbed) -> bool {
    if testbed::kernel::allows_xdp_live_frames() {
        return true;
    }
    let o = tb
        .command(Side::Tx, ringcap().to_str().unwrap())
        .args(["gen", "-i", &tb.tx_if, "--backend", "xdp-live", "-n", "10"])
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "gen succeeded where the kernel refuses live frames"
    );
    let e = stderr_text(&o);
    assert!(
        e.contains("this kernel refused --backend xdp-live")
            && e.contains("--backend xdp (AF_XDP)"),
        "{e}"
    );
    println!(
        "this kernel refuses live XDP frames even to root: only ringcap's refusal was checked"
    );
    false
}

/// `ringcap gen --backend xdp-live ARGS` on the Tx end; panics unless it succeeds.
fn gen_live(tb: &Testbed, args: &[&str]) -> std::process::Output {
    let o = tb
        .command(Side::Tx, ringcap().to_str().unwrap())
        .args(["gen", "-i", &tb.tx_if, "--backend", "xdp-live"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "gen: {}", stderr_text(&o));
    o
}

#[test]
fn gen_backend_xdp_live_sends_exactly_the_count_asked() {
    let tb = testbed();
    if !live_frames_or_clear_refusal(&tb) {
        return;
    }
    let child = spawn_drop_counter(&tb);
    let before = tb.tx_packets();
    // One call, then several (a count that is no multiple of the repeat), with a size mix.
    let (a, b) = (100_000u64, 250_001u64);
    gen_live(&tb, &["-n", &a.to_string(), "--dist", "fixed:46", "-q"]);
    gen_live(
        &tb,
        &[
            "-n",
            &b.to_string(),
            "--live-repeat",
            "60000",
            "--dist",
            "imix",
            "-q",
        ],
    );
    let left = tb.tx_packets() - before;
    std::thread::sleep(Duration::from_millis(200));
    let out = stop(child, libc::SIGINT);
    let s = summary_json(&out);
    assert_eq!(left, a + b, "the sending veth counted a different number");
    assert_eq!(
        s["received_by_filter"],
        a + b,
        "the receiving XDP program counted a different number"
    );
}

#[test]
fn gen_backend_xdp_live_refuses_clearly_when_the_peer_cannot_take_xdp_frames() {
    let tb = testbed();
    let o = tb
        .command(Side::Tx, ringcap().to_str().unwrap())
        .args(["gen", "-i", "nosuch0", "--backend", "xdp-live", "-n", "1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr_text(&o).contains("no interface"),
        "{}",
        stderr_text(&o)
    );
    if !live_frames_or_clear_refusal(&tb) {
        return;
    }
    // No XDP program and no GRO on the Rx end: veth refuses XDP frames without counting them.
    let o = tb
        .command(Side::Tx, ringcap().to_str().unwrap())
        .args([
            "gen",
            "-i",
            &tb.tx_if,
            "--backend",
            "xdp-live",
            "-n",
            "1000",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success(), "gen succeeded without a receiver");
    let e = stderr_text(&o);
    assert!(
        e.contains("took none of the frames") && e.contains("gro on"),
        "{e}"
    );
}

#[test]
fn gen_backend_xdp_live_frames_are_the_frames_sendmmsg_sends() {
    // With one frame per call, xdp-live sends the sequence the other backends send for the same seed;
    // tcpdump on the Rx end (GRO on gives the veth peer the NAPI that XDP frames need) sees both.
    if !have("tcpdump") {
        return;
    }
    let tb = testbed();
    if !live_frames_or_clear_refusal(&tb) {
        return;
    }
    let st = tb
        .command(Side::Rx, "ethtool")
        .args(["-K", &tb.rx_if, "gro", "on"])
        .status()
        .expect("ethtool (make deps installs it)");
    assert!(st.success(), "ethtool -K gro on");
    let dir = temp_dir("gen-xdp-live");
    let n = 500u64;
    let common = [
        "-n",
        "500",
        "--dist",
        "imix",
        "--seed",
        "7",
        "--src-port",
        "1000-1099",
        "-q",
    ];
    let mut files = Vec::new();
    for (name, backend_args) in [
        ("live", vec!["--backend", "xdp-live", "--live-repeat", "1"]),
        ("mmsg", vec!["--backend", "sendmmsg"]),
    ] {
        let file = dir.join(format!("{name}.pcap"));
        let mut cmd = tb.command(Side::Rx, "tcpdump");
        // Immediate mode: a SIGINT must not leave frames in an unretired ring block; 64 MiB: no drops.
        cmd.args([
            "-i",
            &tb.rx_if,
            "-B",
            "65536",
            "--immediate-mode",
            "-U",
            "-n",
            "-w",
        ])
        .arg(&file);
        let child = spawn_listening(cmd);
        let o = tb
            .command(Side::Tx, ringcap().to_str().unwrap())
            .args(["gen", "-i", &tb.tx_if])
            .args(&backend_args)
            .args(common)
            .output()
            .unwrap();
        assert!(o.status.success(), "gen {name}: {}", stderr_text(&o));
        std::thread::sleep(Duration::from_millis(300));
        stop(child, libc::SIGINT);
        files.push(file);
    }
    let live = tcpdump_hex(&files[0], "udp");
    let mmsg = tcpdump_hex(&files[1], "udp");
    assert_eq!(
        live.len() as u64,
        n,
        "tcpdump saw a different count from xdp-live"
    );
    assert_eq!(
        mmsg.len() as u64,
        n,
        "tcpdump saw a different count from sendmmsg"
    );
    assert!(live == mmsg, "xdp-live sent other bytes than sendmmsg");
}
