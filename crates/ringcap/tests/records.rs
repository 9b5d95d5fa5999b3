//! `ringcap capture --records` end to end: the probe captures real frames on the testbed's Rx side and sends
//! header records to collectors listening on loopback inside the Rx namespace; the records must match
//! tshark's decode of the same packets captured to pcap by the same process (`-w` alongside).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::*;
use records::auth::{self, Hello, KeySet, ServerPending};
use records::batch::{self, Key, HEADER_LEN};
use testbed::{Side, Testbed};
use wire::record::Record;

const KEY: &[u8] = b"ringcap-records-e2e-test-key\n";

/// A TCP collector on 127.0.0.1 inside the Rx namespace: opens each batch, stores its records, acks it.
struct Collector {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<(u64, Vec<Record>)>>,
}

impl Collector {
    fn start(tb: &Testbed) -> Collector {
        Collector::start_dying(tb, None)
    }

    /// With `die_after = Some(k)`: stores and acks k batches, then closes its connection and its listener
    /// on the next one without storing it (a collector killed mid-run).
    fn start_dying(tb: &Testbed, die_after: Option<usize>) -> Collector {
        let ns = tb.ns(Side::Rx).to_string();
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let st = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            testbed::enter_netns(&ns).expect("enter rx netns");
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.set_nonblocking(true).unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            let key = Key::from_bytes(KEY).unwrap();
            let mut stored = Vec::new();
            let mut buf = vec![0u8; batch::MAX_BATCH_LEN];
            while !st.load(Relaxed) {
                let Ok((mut s, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                // The v2 handshake (records::auth), as `ringcap collect` runs it.
                let mut hello = [0u8; auth::HELLO_LEN];
                assert!(read_full(&mut s, &mut hello, &st));
                let hello = Hello::parse(&hello).expect("hello");
                let pending =
                    ServerPending::reply(hello, &KeySet::Shared(key.clone()), b"e2e").unwrap();
                s.write_all(pending.bytes()).unwrap();
                let mut finish = [0u8; auth::FINISH_LEN];
                assert!(read_full(&mut s, &mut finish, &st));
                let session = pending.finish(&finish).expect("probe holds the key");
                while read_full(&mut s, &mut buf[..HEADER_LEN], &st) {
                    let n = batch::batch_len(&buf[..HEADER_LEN]).expect("valid header");
                    assert!(read_full(&mut s, &mut buf[HEADER_LEN..n], &st));
                    if die_after.is_some_and(|k| stored.len() >= k) {
                        return stored;
                    }
                    let v = batch::open(&buf[..n], &key, b"e2e").expect("authentic batch");
                    stored.push((v.header().seq, v.records().collect()));
                    s.write_all(&session.ack(v.header().seq)).unwrap();
                }
            }
            stored
        });
        let addr = rx.recv().unwrap();
        Collector { addr, stop, handle }
    }

    fn finish(self) -> Vec<(u64, Vec<Record>)> {
        self.stop.store(true, Relaxed);
        self.handle.join().unwrap()
    }
}

fn read_full(s: &mut impl Read, buf: &mut [u8], stop: &AtomicBool) -> bool {
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => return false,
            Ok(n) => at += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Relaxed) && at == 0 {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    true
}

fn key_file(dir: &std::path::Path) -> String {
    let p = dir.join("key");
    std::fs::write(&p, KEY).unwrap();
    // Keys must be private (ringcap refuses files group or others can read).
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    p.display().to_string()
}

fn frames(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            frame(
                i,
                1000 + (i % 50) as u16,
                2000 + (i % 7) as u16,
                60 + (i as usize * 37) % 900,
            )
        })
        .collect()
}

/// The header fields of one packet, from a record or from tshark's decode of the pcap: (ns, frame length,
/// dst MAC, src MAC, ethertype, IP version, IP header length, protocol, src IP, dst IP, IP length, ports).
// Two tuples: the standard library compares and prints tuples of at most 12.
type Headers = (
    (u64, u32, String, String, u16),
    (u8, u8, u8, String, String, u16, u16, u16),
);

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn headers_of(r: &Record) -> Headers {
    let ip = |a: [u8; 4]| std::net::Ipv4Addr::from(a).to_string();
    (
        (
            r.ts_ns,
            r.wire_len,
            mac(r.dst_mac),
            mac(r.src_mac),
            r.ethertype,
        ),
        (
            r.ip_version,
            r.ip_header_len,
            r.protocol,
            ip(r.src_ip4),
            ip(r.dst_ip4),
            r.ip_len,
            r.src_port,
            r.dst_port,
        ),
    )
}

/// The same fields as tshark decodes them from the pcap written alongside (an independent decoder), sorted.
fn tshark_headers(path: &std::path::Path) -> Vec<Headers> {
    let rows = tshark_fields(
        path,
        &[
            "frame.time_epoch",
            "frame.len",
            "eth.dst",
            "eth.src",
            "eth.type",
            "ip.version",
            "ip.hdr_len",
            "ip.proto",
            "ip.src",
            "ip.dst",
            "ip.len",
            "udp.srcport",
            "udp.dstport",
        ],
    );
    let mut v: Vec<Headers> = rows
        .iter()
        .map(|f| {
            let (s, frac) = f[0].split_once('.').unwrap();
            let ns = s.parse::<u64>().unwrap() * 1_000_000_000
                + format!("{frac:0<9}")[..9].parse::<u64>().unwrap();
            let n = |i: usize| {
                f[i].parse::<u64>()
                    .unwrap_or_else(|_| panic!("field {i} of {f:?}"))
            };
            (
                (
                    ns,
                    n(1) as u32,
                    f[2].clone(),
                    f[3].clone(),
                    u16::from_str_radix(f[4].trim_start_matches("0x"), 16).unwrap(),
                ),
                (
                    n(5) as u8,
                    n(6) as u8,
                    n(7) as u8,
                    f[8].clone(),
                    f[9].clone(),
                    n(10) as u16,
                    n(11) as u16,
                    n(12) as u16,
                ),
            )
        })
        .collect();
    v.sort_by_key(|h| (h.0 .0, h.1 .6, h.0 .1));
    v
}

fn json_summary(stderr: &str) -> serde_json::Value {
    let line = stderr
        .lines()
        .find(|l| l.contains("\"type\":\"summary\""))
        .unwrap_or_else(|| panic!("no JSON summary in: {stderr}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn records_match_the_pcap_of_the_same_packets() {
    if !have("tshark") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("records-e2e");
    let key = key_file(&dir);
    let (a, b) = (Collector::start(&tb), Collector::start(&tb));
    let dests = format!("tcp://{},tcp://{}", a.addr, b.addr);
    let pcap = dir.join("same.pcap");
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "-w",
            pcap.to_str().unwrap(),
            "--records",
            &dests,
            "--key",
            &key,
            "--probe-id",
            "9",
            "--json",
            "-q",
        ],
    );
    let n = 20_000u32;
    let before = tb.rx_packets();
    send(&tb, &frames(n));
    std::thread::sleep(Duration::from_millis(500));
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(tb.rx_packets() - before, n as u64, "offered");
    let (sa, sb) = (a.finish(), b.finish());

    let s = json_summary(&err);
    assert_eq!(s["captured"], n, "{err}");
    assert_eq!(s["drops"]["kernel"], 0);
    assert_eq!(s["drops"]["queue"], 0);
    let r = &s["records"];
    assert_eq!(r["records"], n);
    let acked: u64 = (0..2)
        .map(|i| r["collectors"][i]["acked"].as_u64().unwrap())
        .sum();
    assert_eq!(acked, n as u64, "{r}");
    assert_eq!(
        r["collectors"][0]["acked"],
        sa.iter().map(|b| b.1.len()).sum::<usize>()
    );
    assert_eq!(
        r["collectors"][1]["acked"],
        sb.iter().map(|b| b.1.len()).sum::<usize>()
    );

    // The same packets, decoded by tshark from the pcap written alongside: the same header fields.
    let mut got: Vec<Record> = sa
        .iter()
        .chain(&sb)
        .flat_map(|b| b.1.iter().copied())
        .collect();
    got.sort_by_key(|r| (r.ts_ns, r.src_port, r.wire_len));
    let want = tshark_headers(&pcap);
    assert_eq!(want.len(), n as usize);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(&headers_of(g), w, "record {i}");
        assert_eq!((g.vlan, g.tcp_flags), (0, 0), "record {i}: untagged UDP");
    }
    // And they are the frames that were sent (ports, lengths, addresses).
    let f0 = frames(1).remove(0);
    let r0 = got
        .iter()
        .find(|r| r.src_port == 1000 && r.dst_port == 2000)
        .unwrap();
    assert_eq!(
        (r0.wire_len as usize, r0.src_ip4, r0.dst_ip4),
        (f0.len(), [10, 77, 0, 1], [10, 77, 0, 2])
    );
    // Each collector's sequence numbers are 0, 1, 2, ... with nothing missing.
    for s in [&sa, &sb] {
        let mut seqs: Vec<u64> = s.iter().map(|b| b.0).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
        assert!(!seqs.is_empty(), "batch striping used both collectors");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreachable_collector_at_start_is_retried_not_fatal() {
    let tb = testbed();
    let dir = temp_dir("records-dead");
    let key = key_file(&dir);
    let a = Collector::start(&tb);
    // Port 9 on loopback in the fresh namespace: nothing listens.
    let dests = format!("tcp://127.0.0.1:9,tcp://{}", a.addr);
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--records",
            &dests,
            "--key",
            &key,
            "--stripe",
            "flow",
            "--json",
        ],
    );
    let n = 3000u32;
    send(&tb, &frames(n));
    std::thread::sleep(Duration::from_millis(500));
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("collector tcp://127.0.0.1:9 unreachable"),
        "{err}"
    );
    let sa = a.finish();
    let s = json_summary(&err);
    assert_eq!(s["captured"], n);
    assert_eq!(s["records"]["collectors"][1]["acked"], n, "{err}");
    assert_eq!(sa.iter().map(|b| b.1.len()).sum::<usize>(), n as usize);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_destination_and_short_key_are_clear_errors() {
    let tb = testbed();
    let dir = temp_dir("records-bad");
    let key = key_file(&dir);
    let out = ringcap_rx(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--records",
            "http://x:1",
            "--key",
            &key,
        ],
    )
    .output()
    .unwrap();
    let err = stderr_text(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("bad --records destination 'http://x:1'") && err.contains("tcp://HOST:PORT"),
        "{err}"
    );
    let short = dir.join("short");
    std::fs::write(&short, b"abc\n").unwrap();
    std::fs::set_permissions(&short, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = ringcap_rx(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--records",
            "tcp://127.0.0.1:9",
            "--key",
            short.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    let err = stderr_text(&out);
    assert!(!out.status.success());
    assert!(err.contains("is 3 bytes, at least 16"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn collector_killed_mid_run_the_probe_fails_over_and_nothing_is_lost() {
    let tb = testbed();
    let dir = temp_dir("records-failover");
    let key = key_file(&dir);
    let (a, b) = (Collector::start_dying(&tb, Some(3)), Collector::start(&tb));
    let dests = format!("tcp://{},tcp://{}", a.addr, b.addr);
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--records",
            &dests,
            "--key",
            &key,
            "--records-flush",
            "20",
            "--json",
        ],
    );
    // Bursts with pauses, so batches flush and a dies while traffic still flows.
    let all = frames(12_000);
    for chunk in all.chunks(1000) {
        send(&tb, chunk);
        std::thread::sleep(Duration::from_millis(60));
    }
    std::thread::sleep(Duration::from_millis(300));
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("failed"), "the failover is reported: {err}");
    let (sa, sb) = (a.finish(), b.finish());
    assert_eq!(sa.len(), 3);
    let s = json_summary(&err);
    let r = &s["records"];
    let c = &r["collectors"];
    assert_eq!(s["captured"], 12_000, "{err}");
    let stored = |v: &Vec<(u64, Vec<Record>)>| v.iter().map(|b| b.1.len() as u64).sum::<u64>();
    // Every captured packet's record is stored exactly once: a's acked ones, the rest (re-sent) on b.
    assert_eq!(stored(&sa) + stored(&sb), 12_000);
    assert_eq!(c[0]["acked"], stored(&sa));
    assert_eq!(c[1]["acked"], stored(&sb));
    assert!(c[1]["resent"].as_u64().unwrap() > 0, "{r}");
    assert!(c[0]["failures"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(
        c[0]["dropped"].as_u64().unwrap() + c[1]["dropped"].as_u64().unwrap(),
        0
    );
    let distinct: std::collections::HashSet<Record> = sa
        .iter()
        .chain(&sb)
        .flat_map(|b| b.1.iter().copied())
        .collect();
    assert_eq!(distinct.len(), 12_000, "no record twice");
    let _ = std::fs::remove_dir_all(&dir);
}
