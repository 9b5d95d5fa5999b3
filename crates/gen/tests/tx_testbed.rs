//! The sender on a real kernel: throwaway netns + veth testbeds, real AF_PACKET sockets, captures taken by
//! tcpdump on the receiving side and checked by tshark and by reading the files back.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use gen::frames::{Order, Payload};
use gen::pace::Burst;
use gen::sizes::{Distribution, Mode, Params, SizeModel};
use gen::tx::Backend;
use gen::{Control, FixedSize, GenOptions, GenReport, ReplayOptions, Sizes};
use testbed::{Side, Testbed, TestbedOptions};
use wire::Vlan;

/// One test at a time: they measure timing and rates, and two CPUs shared by top-speed senders, tcpdump
/// and tshark would make those numbers about the machine, not the generator.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn testbed() -> Testbed {
    Testbed::new(TestbedOptions::default()).expect("testbed (needs root)")
}

fn opts(tb: &Testbed, count: u64) -> GenOptions {
    GenOptions {
        interface: tb.tx_if.clone(),
        count: Some(count),
        ..Default::default()
    }
}

fn send<Z: Sizes>(tb: &Testbed, o: &GenOptions, sizes: &Z) -> GenReport {
    tb.run_in(Side::Tx, || gen::run(o, sizes, &Control::default()))
        .expect("generator run")
}

fn model(spec: &str) -> SizeModel {
    SizeModel::build(
        &Distribution::from_spec(spec).unwrap(),
        Mode::Exact,
        Params::default(),
    )
    .unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gen-tx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// tcpdump on the Rx end writing `count` packets to `file` (nanosecond timestamps, promiscuous).
struct Capture {
    child: Child,
    file: PathBuf,
}

impl Capture {
    fn start(tb: &Testbed, file: &Path, count: u64) -> Capture {
        let mut child = tb
            .command(Side::Rx, "tcpdump")
            .args([
                "-i",
                &tb.rx_if,
                "-n",
                "-U",
                "-B",
                "32768",
                "--time-stamp-precision=nano",
            ])
            .args(["-c", &count.to_string(), "-w"])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump");
        // tcpdump says "listening on" once its socket is attached.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while err.read_line(&mut line).unwrap() > 0 && !line.contains("listening on") {
            line.clear();
        }
        assert!(
            line.contains("listening on"),
            "tcpdump did not start: {line}"
        );
        Capture {
            child,
            file: file.to_path_buf(),
        }
    }

    /// Waits for tcpdump to have written its `count` packets.
    fn finish(mut self) -> PathBuf {
        let t = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "capture incomplete after 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.file.clone()
    }
}

/// (timestamp ns, frame bytes) of every packet in a capture file.
fn read_capture(file: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut r = store::CaptureReader::open(file).unwrap();
    let mut out = vec![];
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        out.push((p.ts_ns, p.data.to_vec()));
    }
    out
}

/// Packets tshark finds with a bad IP or UDP checksum, and packets it verified as good.
fn tshark_checksums(file: &Path) -> (usize, usize) {
    let out = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(file)
        .args([
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
        ])
        .args([
            "-T",
            "fields",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.checksum.status",
        ])
        .output()
        .expect("tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut bad = 0;
    let mut good = 0;
    for line in text.lines() {
        // IPv4 lines: "<ip status>\t<udp status>"; IPv6 lines: "\t<udp status>". 0 = Bad, 1 = Good.
        let fields: Vec<&str> = line.split('\t').filter(|f| !f.is_empty()).collect();
        if fields.contains(&"0") {
            bad += 1;
        } else if !fields.is_empty() && fields.iter().all(|&f| f == "1") {
            good += 1;
        }
    }
    (bad, good)
}

#[test]
fn exactly_count_frames_leave_with_both_backends_and_threads() {
    let _serial = serial();
    let tb = testbed();
    for backend in [Backend::Sendmmsg, Backend::TxRing] {
        for threads in [1, 2] {
            let mut o = opts(&tb, 100_001);
            o.backend = backend;
            o.threads = threads;
            o.batch = 32;
            o.ring_frames = 256;
            let before = tb.rx_packets();
            let r = send(&tb, &o, &model("imix"));
            let got = tb.rx_packets() - before;
            assert_eq!(got, 100_001, "{backend} × {threads}: receiver saw {got}");
            assert_eq!(r.packets, 100_001);
            assert_eq!(
                r.threads
                    .iter()
                    .map(|t| t.packets)
                    .collect::<Vec<_>>()
                    .len(),
                threads
            );
            assert!(r.pps > 0.0 && r.gap.samples == 100_001 - threads as u64);
            // The --json form records what ran: mode, options, the size model and the seed.
            let j = serde_json::to_value(&r).unwrap();
            assert_eq!(j["spec"]["mode"], "generate");
            assert_eq!(j["spec"]["backend"], backend.to_string());
            assert!(
                j["spec"]["sizes"].as_str().unwrap().starts_with("imix"),
                "{}",
                j["spec"]["sizes"]
            );
            assert_eq!(j["seed"], 1);
            assert_eq!(j["packets"], 100_001);
        }
    }
}

#[test]
fn checksums_are_good_for_ipv4_and_ipv6_with_every_payload() {
    let _serial = serial();
    let tb = testbed();
    let payload_file = tmp("payload.bin");
    std::fs::write(&payload_file, (0..=255u8).rev().collect::<Vec<_>>()).unwrap();
    // sendmmsg gathers random payloads from the pool; TX_RING copies them into its frames.
    let (mmsg, ring) = (Backend::Sendmmsg, Backend::TxRing);
    let cases = [
        (false, Payload::Random, None, mmsg),
        (false, Payload::Half, Some(Vlan::dot1q(3, 7)), mmsg),
        (false, Payload::Half, None, ring),
        (false, Payload::File(payload_file.clone()), None, ring),
        (true, Payload::Random, None, mmsg),
        (true, Payload::Random, None, ring),
        (true, Payload::Zero, Some(Vlan::dot1q(0, 4000)), mmsg),
    ];
    for (i, (v6, payload, vlan, backend)) in cases.into_iter().enumerate() {
        let n = 3000;
        let mut o = opts(&tb, n);
        o.backend = backend;
        o.frame = if v6 {
            gen::frames::FrameOptions::ipv6()
        } else {
            Default::default()
        };
        o.frame.payload = payload.clone();
        o.frame.vlan = vlan;
        o.frame.src_ip = if v6 {
            "fd00::1-fd00::1:0"
        } else {
            "10.0.0.1-10.0.255.255"
        }
        .parse()
        .unwrap();
        o.frame.src_ip_order = Order::Random;
        o.frame.dst_port = "1-65535".parse().unwrap();
        o.frame.dst_port_order = Order::Random;
        o.pps = Some(100_000.0);
        // IPv4 and IPv6 minimums differ: the size model covers both, small sizes get raised.
        let cap = Capture::start(&tb, &tmp(&format!("sum{i}.pcap")), n);
        let r = send(&tb, &o, &model("uniform:20-1500"));
        let file = cap.finish();
        let (bad, good) = tshark_checksums(&file);
        assert_eq!(
            bad,
            0,
            "case {i} ({payload}, v6 {v6}, {backend}): tshark found bad checksums in {}",
            file.display()
        );
        assert_eq!(good, n as usize, "case {i}: every packet verified good");
        let min = if v6 { 48 } else { 28 };
        // uniform:20-1500 asks for less than the minimum with probability (min - 20) / 1481.
        assert!(
            r.clamped_small > 0 && r.clamped_small < n / 10,
            "clamped {}",
            r.clamped_small
        );
        let frames = read_capture(&file);
        let l2 = if vlan.is_some() { 18 } else { 14 };
        assert!(frames.iter().all(|(_, f)| f.len() >= l2 + min));
    }
}

#[test]
fn same_seed_same_sizes_addresses_and_payloads() {
    let _serial = serial();
    let tb = testbed();
    let capture = |seed: u64, tag: &str| {
        let n = 5000;
        let mut o = opts(&tb, n);
        o.seed = seed;
        o.frame.payload = Payload::Half;
        o.frame.dst_ip = "10.1.0.0-10.1.255.255".parse().unwrap();
        o.frame.dst_ip_order = Order::Random;
        o.frame.src_port = "1024-65535".parse().unwrap();
        o.frame.src_port_order = Order::Random;
        o.pps = Some(200_000.0);
        let cap = Capture::start(&tb, &tmp(&format!("seed{seed}{tag}.pcap")), n);
        let r = send(&tb, &o, &model("internet"));
        assert_eq!(r.seed, seed);
        read_capture(&cap.finish())
            .into_iter()
            .map(|(_, f)| f)
            .collect::<Vec<_>>()
    };
    let a = capture(11, "a");
    let b = capture(11, "b");
    let c = capture(12, "c");
    assert_eq!(a.len(), 5000);
    assert!(a == b, "two runs with seed 11 differ");
    assert!(a != c, "seeds 11 and 12 gave the same frames");
    // Sizes vary (a real distribution) and half of each payload is zero.
    let sizes: std::collections::BTreeSet<usize> = a.iter().map(|f| f.len()).collect();
    assert!(sizes.len() > 3, "{sizes:?}");
    for f in &a {
        let payload = &f[42..];
        assert!(payload[payload.len().div_ceil(2)..].iter().all(|&x| x == 0));
    }
}

#[test]
fn pacing_50_kpps_for_one_second_is_within_one_percent() {
    let _serial = serial();
    let tb = testbed();
    let n = 50_000;
    let mut o = opts(&tb, n);
    o.pps = Some(50_000.0);
    let cap = Capture::start(&tb, &tmp("pace.pcap"), n);
    let r = send(&tb, &o, &FixedSize(46));
    let frames = read_capture(&cap.finish());
    assert_eq!(frames.len(), n as usize);
    // At the receiver: mean inter-arrival from first to last.
    let span = (frames[frames.len() - 1].0 - frames[0].0) as f64;
    let rx_pps = (n - 1) as f64 / (span / 1e9);
    assert!(
        (rx_pps / 50_000.0 - 1.0).abs() < 0.01,
        "receiver saw {rx_pps:.0} pps"
    );
    // At the sender: mean gap 20 µs, and the run took about 1 s.
    assert!(
        (r.gap.mean_ns / 20_000.0 - 1.0).abs() < 0.01,
        "mean gap {} ns",
        r.gap.mean_ns
    );
    assert!(
        (r.duration_s - 1.0).abs() < 0.01,
        "duration {} s",
        r.duration_s
    );
    assert!((r.pps / 50_000.0 - 1.0).abs() < 0.01, "pps {}", r.pps);
}

#[test]
fn bit_rate_counts_line_bytes_and_bursts_follow_the_schedule() {
    let _serial = serial();
    let tb = testbed();
    // 100 Mb/s at line rate with 60-byte frames: 84 bytes × 8 = 672 bits → 148 810 pps, for 1 s.
    let mut o = opts(&tb, 148_810);
    o.mbps = Some(100.0);
    let r = send(&tb, &o, &FixedSize(46));
    assert!((r.pps / 148_809.5 - 1.0).abs() < 0.01, "pps {}", r.pps);
    assert!(
        (r.mbps_l1 / 100.0 - 1.0).abs() < 0.01,
        "line Mb/s {}",
        r.mbps_l1
    );
    assert!(
        (r.mbps / (100.0 * 60.0 / 84.0) - 1.0).abs() < 0.01,
        "frame Mb/s {}",
        r.mbps
    );

    // 10 kpps on for 100 ms, off for 100 ms, for 0.5 s: on during 0-0.1, 0.2-0.3, 0.4-0.5 s → 3000 frames.
    let mut o = opts(&tb, 1_000_000);
    o.count = None;
    o.pps = Some(10_000.0);
    o.duration_s = Some(0.5);
    o.burst = Some(Burst {
        on_s: 0.1,
        off_s: 0.1,
        phases: Vec::new(),
    });
    let before = tb.rx_packets();
    let r = send(&tb, &o, &FixedSize(46));
    assert_eq!(r.packets, 3000);
    assert_eq!(tb.rx_packets() - before, 3000);
    // The last frame leaves just before 0.5 s; the two off periods show as two long gaps.
    assert!(
        (r.duration_s - 0.4999).abs() < 0.005,
        "duration {}",
        r.duration_s
    );
}

#[test]
fn progress_is_reported_and_a_stop_ends_the_run_with_exact_counts() {
    let _serial = serial();
    let tb = testbed();
    for backend in [Backend::Sendmmsg, Backend::TxRing] {
        let o = GenOptions {
            interface: tb.tx_if.clone(),
            backend,
            pps: Some(200_000.0),
            ..Default::default()
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let calls = std::sync::atomic::AtomicU64::new(0);
        let progress = |p: &gen::Progress| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            assert_eq!((p.total_packets, p.total_s), (None, None));
            if p.packets >= 20_000 {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let ctl = Control {
            stop: Some(&stop),
            progress: Some(&progress),
            progress_every: Duration::from_millis(20),
        };
        let before = tb.rx_packets();
        let r = tb
            .run_in(Side::Tx, || gen::run(&o, &FixedSize(46), &ctl))
            .expect("run");
        assert!(r.stopped, "{backend}: not marked as stopped");
        assert!(
            r.packets >= 20_000 && r.packets < 200_000,
            "{backend}: {} packets",
            r.packets
        );
        assert_eq!(
            tb.rx_packets() - before,
            r.packets,
            "{backend}: report and receiver disagree"
        );
        assert!(calls.load(std::sync::atomic::Ordering::Relaxed) >= 3);
    }
}

#[test]
fn back_pressure_is_waited_out_never_fatal() {
    // RPS moves the receive work to CPU 1, so frames queue behind the veth and the tiny send buffer fills.
    let _serial = serial();
    let tb = Testbed::new(TestbedOptions {
        rps_cpu: Some(1),
        ..TestbedOptions::default()
    })
    .expect("testbed");
    // The tiny send buffer fills (EAGAIN), and sendmmsg calls return having sent part of their batch; the
    // rest is offered again. (ENOBUFS, a frame dropped by veth when the receive backlog is full, takes the same
    // path: count, wait, send again.)
    for backend in [Backend::Sendmmsg, Backend::TxRing] {
        let mut o = opts(&tb, 200_000);
        o.backend = backend;
        o.sndbuf = Some(4096);
        o.cpus = vec![0];
        let before = tb.rx_packets();
        let r = send(&tb, &o, &FixedSize(46));
        assert_eq!(r.packets, 200_000);
        assert_eq!(tb.rx_packets() - before, 200_000, "{backend}");
        assert!(
            r.errors.eagain > 0,
            "{backend}: no back-pressure seen ({:?})",
            r.errors
        );
        if backend == Backend::Sendmmsg {
            assert!(r.errors.partial > 0, "no partial sendmmsg ({:?})", r.errors);
        }
    }
}

/// Writes a pcap (µs) of Ethernet frames with the given (µs timestamp, caplen bytes, wire length).
fn write_pcap(path: &Path, packets: &[(u64, Vec<u8>, u32)]) {
    let mut b = vec![];
    b.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (ts, data, wire) in packets {
        b.extend_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&wire.to_le_bytes());
        b.extend_from_slice(data);
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn replay_keeps_order_and_timing_and_loops() {
    let _serial = serial();
    let tb = testbed();
    // 20 frames 10 ms apart (span 190 ms), numbered in their payload, plus one frame too large for the MTU.
    let mut packets = vec![];
    for i in 0..20u32 {
        let mut f = vec![0u8; 60 + (i as usize % 7) * 100];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[11] = 1;
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[20..24].copy_from_slice(&i.to_be_bytes());
        let wire = if i == 5 {
            f.len() as u32 + 100
        } else {
            f.len() as u32
        }; // one truncated capture
        let ts = 1_700_000_000_000_000 + i as u64 * 10_000; // µs
        packets.push((ts, f, wire));
        if i == 10 {
            packets.push((ts, vec![0u8; 2000], 2000));
        }
    }
    let src = tmp("replay-src.pcap");
    write_pcap(&src, &packets);

    let o = ReplayOptions {
        interface: tb.tx_if.clone(),
        file: src.clone(),
        speed: 2.0,
        loops: 2,
        ..Default::default()
    };
    let cap = Capture::start(&tb, &tmp("replayed.pcap"), 40);
    let r = tb
        .run_in(Side::Tx, || gen::replay(&o, &Control::default()))
        .expect("replay");
    let got = read_capture(&cap.finish());
    assert_eq!(r.packets, 40);
    assert_eq!(serde_json::to_value(&r).unwrap()["spec"]["mode"], "replay");
    let st = r.replay.unwrap();
    assert_eq!(
        (st.read, st.loops_done, st.skipped_oversize, st.truncated),
        (42, 2, 2, 2)
    );
    let want: Vec<&Vec<u8>> = packets
        .iter()
        .filter(|p| p.1.len() < 2000)
        .map(|p| &p.1)
        .collect();
    for (k, (_, f)) in got.iter().enumerate() {
        assert_eq!(f, want[k % 20], "frame {k} differs or is out of order");
    }
    // At speed 2, frame k of a loop is due 5 k ms after the loop's start; loop 2 starts one mean recorded gap
    // (190 / 19 = 10 ms) after loop 1's last frame: (190 + 10) / 2 = 100 ms after the first frame.
    let at_ms = |k: usize| (got[k].0 - got[0].0) as f64 / 1e6;
    assert!(
        (at_ms(19) - 95.0).abs() < 2.0,
        "loop 1 took {} ms",
        at_ms(19)
    );
    assert!(
        (at_ms(20) - 100.0).abs() < 2.0,
        "loop 2 started after {} ms",
        at_ms(20)
    );
    assert!(
        (at_ms(39) - 195.0).abs() < 2.0,
        "loop 2 ended after {} ms",
        at_ms(39)
    );

    // Top speed ignores the timestamps.
    let o = ReplayOptions {
        topspeed: true,
        loops: 30,
        ..o
    };
    let before = tb.rx_packets();
    let r = tb
        .run_in(Side::Tx, || gen::replay(&o, &Control::default()))
        .expect("replay");
    assert_eq!(tb.rx_packets() - before, 600);
    assert!(r.duration_s < 0.05, "top speed took {} s", r.duration_s);
}

#[test]
fn bad_options_are_refused_with_a_hint() {
    let _serial = serial();
    let tb = testbed();
    let mut o = opts(&tb, 10);
    o.pps = Some(1000.0);
    o.mbps = Some(10.0);
    let e = send_err(&tb, &o);
    assert!(e.contains("at most one of pps"), "{e}");
    let mut o = opts(&tb, 10);
    o.interface = "nosuch0".into();
    let e = send_err(&tb, &o);
    assert!(e.contains("no interface \"nosuch0\""), "{e}");
    let o = ReplayOptions {
        interface: tb.tx_if.clone(),
        file: tmp("missing.pcap"),
        ..Default::default()
    };
    let e = tb
        .run_in(Side::Tx, || gen::replay(&o, &Control::default()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.pcap"), "{e}");
}

fn send_err(tb: &Testbed, o: &GenOptions) -> String {
    tb.run_in(Side::Tx, || {
        gen::run(o, &FixedSize(46), &Control::default())
    })
    .unwrap_err()
    .to_string()
}
