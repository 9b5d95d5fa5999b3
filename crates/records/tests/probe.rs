//! The probe's senders over real loopback sockets, against small collectors written here with
//! `records::auth` (the v2 handshake) and `records::batch::open` (they store a batch, then ack it).

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use records::antireplay::ReplayGuard;
use records::auth::{self, Hello, KeySet, ServerPending, Session};
use records::batch::{self, Key, HEADER_LEN};
use records::probe::{flow_hash, Dest, Probe, ProbeConfig, Stripe, Transport};
use wire::record::Record;

fn key() -> Key {
    Key::from_bytes(b"probe-test-key-0123456789").unwrap()
}

/// What a test collector stored: (seq, records) per accepted batch, in arrival order.
#[derive(Default, Debug)]
struct Stored {
    batches: Vec<(u64, Vec<Record>)>,
    rejected: usize,
}

impl Stored {
    fn records(&self) -> usize {
        self.batches.iter().map(|b| b.1.len()).sum()
    }
}

struct TestCollector {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Stored>,
}

impl TestCollector {
    fn finish(self) -> Stored {
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

/// The collector's side of the handshake (id "test-collector"); None if the probe went away.
fn serve_handshake(s: &mut std::net::TcpStream, stop: &AtomicBool) -> Option<Session> {
    let mut hello = [0u8; auth::HELLO_LEN];
    if !read_full(s, &mut hello, stop) {
        return None;
    }
    let hello = Hello::parse(&hello).ok()?;
    let pending = ServerPending::reply(hello, &KeySet::Shared(key()), b"test-collector").ok()?;
    s.write_all(pending.bytes()).ok()?;
    let mut finish = [0u8; auth::FINISH_LEN];
    if !read_full(s, &mut finish, stop) {
        return None;
    }
    pending.finish(&finish).ok()
}

/// A TCP collector; with `die_after = Some(n)` it stores and acks n batches, then reads one more and
/// closes everything (listener included) without storing it: a collector killed mid-run.
fn tcp_collector(die_after: Option<usize>) -> TestCollector {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = Arc::clone(&stop);
    let handle = std::thread::spawn(move || {
        let key = key();
        let mut stored = Stored::default();
        let mut buf = vec![0u8; batch::MAX_BATCH_LEN];
        while !st.load(Relaxed) {
            let mut s = match listener.accept() {
                Ok((s, _)) => s,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let Some(session) = serve_handshake(&mut s, &st) else {
                continue;
            };
            loop {
                if !read_full(&mut s, &mut buf[..HEADER_LEN], &st) {
                    break;
                }
                let Ok(n) = batch::batch_len(&buf[..HEADER_LEN]) else {
                    stored.rejected += 1;
                    break;
                };
                if !read_full(&mut s, &mut buf[HEADER_LEN..n], &st) {
                    break;
                }
                if die_after.is_some_and(|d| stored.batches.len() >= d) {
                    return stored; // killed: this batch is neither stored nor acked
                }
                match batch::open(&buf[..n], &key, session.collector_id()) {
                    Ok(v) => {
                        let seq = v.header().seq;
                        stored.batches.push((seq, v.records().collect()));
                        if s.write_all(&session.ack(seq)).is_err() {
                            break;
                        }
                    }
                    Err(_) => {
                        stored.rejected += 1;
                        break;
                    }
                }
            }
        }
        stored
    });
    TestCollector { addr, stop, handle }
}

/// A UDP collector; `pause` delays reading (with a small receive buffer) so datagrams are lost.
fn udp_collector(pause: Duration) -> TestCollector {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    if pause.is_zero() {
        // Room for a whole test's datagrams, so "keeps up" does not depend on scheduling (root may force it).
        use std::os::fd::AsRawFd;
        let size: libc::c_int = 16 << 20;
        // SAFETY: setsockopt with a c_int of the right size.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let st = Arc::clone(&stop);
    let handle = std::thread::spawn(move || {
        std::thread::sleep(pause);
        let key = key();
        let mut stored = Stored::default();
        let mut buf = vec![0u8; 70000];
        let mut idle_since = Instant::now();
        loop {
            match sock.recv(&mut buf) {
                Ok(n) => {
                    idle_since = Instant::now();
                    match batch::open(&buf[..n], &key, b"") {
                        Ok(v) => stored.batches.push((v.header().seq, v.records().collect())),
                        Err(_) => stored.rejected += 1,
                    }
                }
                Err(_) => {
                    if st.load(Relaxed) && idle_since.elapsed() > Duration::from_millis(100) {
                        break;
                    }
                }
            }
        }
        stored
    });
    TestCollector { addr, stop, handle }
}

fn dest(t: Transport, addr: SocketAddr) -> Dest {
    let scheme = if t == Transport::Tcp { "tcp" } else { "udp" };
    Dest::parse(&format!("{scheme}://{addr}")).unwrap()
}

/// Record i: flow (i % flows), both directions alternating, distinct timestamps.
fn record(i: u64, flows: u64) -> Record {
    let f = (i % flows) as u16;
    let fwd = (i / flows).is_multiple_of(2);
    let (a, b) = ([10, 0, (f >> 8) as u8, f as u8], [10, 1, 0, 1]);
    let (pa, pb) = (10000 + f, 80);
    Record {
        ts_ns: 1_000_000 + i,
        wire_len: 60 + (i % 1400) as u32,
        ethertype: 0x0800,
        ip_version: 4,
        ip_header_len: 20,
        protocol: 6,
        src_ip4: if fwd { a } else { b },
        dst_ip4: if fwd { b } else { a },
        src_port: if fwd { pa } else { pb },
        dst_port: if fwd { pb } else { pa },
        ip_len: 46,
        l4_len: 20,
        ..Record::default()
    }
}

fn config(dests: Vec<Dest>) -> ProbeConfig {
    let mut c = ProbeConfig::new(dests, key());
    c.probe_id = 42;
    c.stream_id = 7;
    c.quiet = true;
    c.ack_timeout = Duration::from_millis(500);
    c
}

fn push_all(probe: &Probe, n: u64, flows: u64) {
    let mut b = probe.batcher();
    for i in 0..n {
        b.push(&record(i, flows));
    }
    b.finish();
}

fn seqs_contiguous(s: &Stored) {
    let mut seqs: Vec<u64> = s.batches.iter().map(|b| b.0).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}

#[test]
fn tcp_two_collectors_batch_striping_exact() {
    let (a, b) = (tcp_collector(None), tcp_collector(None));
    let probe = Probe::start(config(vec![
        dest(Transport::Tcp, a.addr),
        dest(Transport::Tcp, b.addr),
    ]))
    .unwrap();
    assert_eq!(probe.capacities(), &[65536, 65536]);
    let n = 200_000;
    push_all(&probe, n, 1000);
    let st = probe.finish();
    let (sa, sb) = (a.finish(), b.finish());
    assert_eq!(st.records, n);
    assert_eq!(st.queue_drops, 0);
    let c = &st.collectors;
    assert_eq!(c[0].acked + c[1].acked, n);
    assert_eq!((c[0].sent, c[1].sent), (c[0].acked, c[1].acked));
    assert_eq!(c[0].resent + c[1].resent + c[0].dropped + c[1].dropped, 0);
    assert_eq!(sa.records() as u64, c[0].acked);
    assert_eq!(sb.records() as u64, c[1].acked);
    // Round robin per batch: 65536 / 48 = 1365 records per full batch, alternating.
    let (ba, bb) = (sa.batches.len() as i64, sb.batches.len() as i64);
    assert!((ba - bb).abs() <= 1, "{ba} vs {bb}");
    assert_eq!(st.batches as i64, ba + bb);
    assert_eq!(sa.batches[0].1.len(), 1365);
    seqs_contiguous(&sa);
    seqs_contiguous(&sb);
    // Every record arrived once, unchanged.
    let mut got: Vec<Record> = sa
        .batches
        .iter()
        .chain(&sb.batches)
        .flat_map(|b| b.1.iter().copied())
        .collect();
    got.sort_by_key(|r| r.ts_ns);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, r)| *r == record(i as u64, 1000)));
}

#[test]
fn flow_striping_keeps_each_flow_on_one_collector() {
    let (a, b) = (tcp_collector(None), tcp_collector(None));
    let mut cfg = config(vec![
        dest(Transport::Tcp, a.addr),
        dest(Transport::Tcp, b.addr),
    ]);
    cfg.stripe = Stripe::Flow;
    let probe = Probe::start(cfg).unwrap();
    let (n, flows) = (50_000, 200);
    push_all(&probe, n, flows);
    let st = probe.finish();
    let (sa, sb) = (a.finish(), b.finish());
    assert_eq!(sa.records() + sb.records(), n as usize);
    let flow_of = |r: &Record| {
        let p = if r.src_port == 80 {
            r.dst_port
        } else {
            r.src_port
        };
        p - 10000
    };
    let set = |s: &Stored| -> HashSet<u16> {
        s.batches
            .iter()
            .flat_map(|b| b.1.iter().map(flow_of))
            .collect()
    };
    let (fa, fb) = (set(&sa), set(&sb));
    assert!(fa.is_disjoint(&fb), "a flow went to both collectors");
    assert_eq!(fa.len() + fb.len(), flows as usize);
    assert!(
        fa.len() > 50 && fb.len() > 50,
        "uneven split {} / {}",
        fa.len(),
        fb.len()
    );
    // Both directions of a flow hash alike.
    for i in 0..flows {
        assert_eq!(
            flow_hash(&record(i, flows)),
            flow_hash(&record(i + flows, flows))
        );
    }
    assert_eq!(st.collectors[0].acked, sa.records() as u64);
    seqs_contiguous(&sa);
    seqs_contiguous(&sb);
}

#[test]
fn collector_killed_mid_run_fails_over_without_loss() {
    let a = tcp_collector(Some(5));
    let b = tcp_collector(None);
    let probe = Probe::start(config(vec![
        dest(Transport::Tcp, a.addr),
        dest(Transport::Tcp, b.addr),
    ]))
    .unwrap();
    let n = 100_000u64;
    let mut bt = probe.batcher();
    for i in 0..n {
        bt.push(&record(i, 500));
        if i % 10_000 == 0 {
            std::thread::sleep(Duration::from_millis(20)); // let the sender interleave with the kill
        }
    }
    bt.finish();
    let st = probe.finish();
    let (sa, sb) = (a.finish(), b.finish());
    assert_eq!(
        sa.batches.len(),
        5,
        "a stored 5 batches before it was killed"
    );
    let c = &st.collectors;
    // Nothing lost: what a stored (and acked) plus what b stored is everything, each record once.
    assert_eq!(sa.records() + sb.records(), n as usize);
    assert_eq!(c[0].acked + c[1].acked, n);
    assert_eq!(c[0].acked, sa.records() as u64);
    assert!(c[0].failures >= 1 && !c[0].up);
    assert!(c[1].resent > 0, "a's unacked batches were re-sent to b");
    assert_eq!(c[0].dropped + c[1].dropped + st.queue_drops, 0);
    let mut ts: Vec<u64> = sa
        .batches
        .iter()
        .chain(&sb.batches)
        .flat_map(|b| b.1.iter().map(|r| r.ts_ns))
        .collect();
    ts.sort_unstable();
    ts.dedup();
    assert_eq!(ts.len(), n as usize);
    seqs_contiguous(&sb);
}

#[test]
fn unreachable_collector_at_start_is_retried_and_others_take_everything() {
    // A port with nothing listening.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let b = tcp_collector(None);
    let probe = Probe::start(config(vec![
        dest(Transport::Tcp, dead),
        dest(Transport::Tcp, b.addr),
    ]))
    .unwrap();
    push_all(&probe, 30_000, 10);
    let st = probe.finish();
    let sb = b.finish();
    assert_eq!(sb.records(), 30_000);
    assert_eq!(st.collectors[1].acked, 30_000);
    assert_eq!((st.collectors[0].sent, st.collectors[0].connects), (0, 0));
    assert!(!st.collectors[0].up);
}

#[test]
fn no_live_collector_drops_are_counted() {
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut cfg = config(vec![dest(Transport::Tcp, dead)]);
    cfg.ack_timeout = Duration::from_millis(100);
    let probe = Probe::start(cfg).unwrap();
    push_all(&probe, 10_000, 10);
    let st = probe.finish();
    assert_eq!(st.records, 10_000);
    assert_eq!(st.collectors[0].dropped + st.queue_drops, 10_000);
    assert_eq!(st.collectors[0].sent, 0);
}

#[test]
fn udp_exact_when_the_collector_keeps_up() {
    let a = udp_collector(Duration::ZERO);
    let probe = Probe::start(config(vec![dest(Transport::Udp, a.addr)])).unwrap();
    // Loopback MTU 65536: datagram capped at 65507 minus header and tag.
    assert_eq!(probe.capacities(), &[65507 - 96]);
    let mut bt = probe.batcher();
    let n = 20_000;
    for i in 0..n {
        bt.push(&record(i, 100));
        if i % 2000 == 0 {
            std::thread::sleep(Duration::from_millis(5)); // stay below the receiver's buffer
        }
    }
    bt.finish();
    let st = probe.finish();
    let sa = a.finish();
    assert_eq!(st.collectors[0].sent, n);
    assert_eq!(sa.records() as u64, n);
    seqs_contiguous(&sa);
}

#[test]
fn udp_loss_shows_as_sequence_gaps() {
    // The collector sleeps while the probe sends far more than a receive buffer holds.
    // It sleeps 300 ms, then keeps up: the bursts sent meanwhile overflow its receive buffer, later ones
    // arrive, so the loss shows as holes in the sequence.
    let a = udp_collector(Duration::from_millis(300));
    let probe = Probe::start(config(vec![dest(Transport::Udp, a.addr)])).unwrap();
    let n = 400_000;
    let mut bt = probe.batcher();
    for i in 0..n {
        bt.push(&record(i, 100));
        if i % 40_000 == 0 {
            std::thread::sleep(Duration::from_millis(60));
        }
    }
    bt.finish();
    let st = probe.finish();
    let sa = a.finish();
    let sent_batches = st.collectors[0].batches_sent;
    assert_eq!(st.collectors[0].sent, n);
    let mut g = ReplayGuard::default();
    let now = sys::now_ns();
    let mut lost: i64 = 0;
    for (seq, _) in &sa.batches {
        lost += g.check(42, 7, *seq, now, now).unwrap().loss_delta();
    }
    let s = g.stream(42, 7).unwrap();
    assert!(lost > 0, "a sleeping collector lost nothing?");
    assert_eq!(lost as u64, s.lost());
    // Every batch is either received or counted lost (the tail after the last received one is unknown to
    // the collector but known to the probe).
    assert_eq!(
        s.distinct + s.lost() + (sent_batches - 1 - s.max_seq),
        sent_batches
    );
    assert!((sa.records() as u64) < n);
}

#[test]
fn dest_syntax() {
    let d = Dest::parse("udp://127.0.0.1:9000").unwrap();
    assert_eq!((d.transport, d.addr.port()), (Transport::Udp, 9000));
    assert_eq!(
        Dest::parse("127.0.0.1:9").unwrap().transport,
        Transport::Tcp
    );
    for bad in [
        "http://x:1",
        "tcp://127.0.0.1",
        "tcp://127.0.0.1:",
        "udp://nosuchhost.invalid:1",
    ] {
        let e = Dest::parse(bad).unwrap_err().to_string();
        assert!(e.contains(bad) && e.contains("tcp://HOST:PORT"), "{e}");
    }
    assert!("rr".parse::<Stripe>().is_err());
}

#[test]
fn flow_hash_spreads() {
    let mut counts = HashMap::new();
    for i in 0..10_000 {
        *counts.entry(flow_hash(&record(i, 10_000)) % 4).or_insert(0) += 1;
    }
    assert!(counts.values().all(|&c| c > 2000), "{counts:?}");
}
