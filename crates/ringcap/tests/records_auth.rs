//! Header-record authentication end to end (issue 12 item 9): the real `ringcap collect` and, where a probe
//! is needed, the real `ringcap capture --records` on the testbed, with attackers written here on real
//! sockets: a recorder that replays a probe's stream to another collector, a man in the middle that forges
//! acks, a probe using another probe's key, silent and slow-drip clients, too many connections from one
//! address, and probes with and without a TLS client certificate (certificates made by the openssl CLI).
//!
//! Expected counts come from the frames the test sends, never from the code under test.

mod common;
use common::auth_harness::*;
use common::collector::connect;
use common::*;

use records::auth;
use records::batch::{self, BatchBuilder, Key, HEADER_LEN};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEY: &[u8] = b"records-auth-test-key-0123456789";
const KEY2: &[u8] = b"records-auth-second-probe-key-0123";

#[test]
fn a_batch_stream_replayed_to_another_collector_is_refused() {
    let tb = rx_testbed();
    let dir = temp_dir("auth-replay");
    let k = write_private(&dir.join("key"), KEY);
    let ks = k.to_str().unwrap();
    let a = collector(
        rx_ringcap(&tb),
        &dir.join("a"),
        &["--key", ks, "--collector-id", "col-a"],
    );
    let b = collector(
        rx_ringcap(&tb),
        &dir.join("b"),
        &["--key", ks, "--collector-id", "col-b"],
    );
    // A recorder between the probe and A: relays both ways, keeps what the probe sent.
    let recorded = Arc::new(Mutex::new(Vec::<u8>::new()));
    let stop_rec = Arc::new(AtomicBool::new(false));
    let (rec2, up) = (Arc::clone(&recorded), a.tcp);
    let (rec_addr, rec) = rx_server(&tb, Arc::clone(&stop_rec), move |mut probe_side| {
        probe_side.set_read_timeout(None).unwrap();
        let mut up_side = TcpStream::connect(up).unwrap();
        let (mut p2, mut u2) = (
            probe_side.try_clone().unwrap(),
            up_side.try_clone().unwrap(),
        );
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut u2, &mut p2);
        });
        let mut buf = [0u8; 65536];
        while let Ok(n) = probe_side.read(&mut buf) {
            if n == 0 || up_side.write_all(&buf[..n]).is_err() {
                break;
            }
            rec2.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        let _ = up_side.shutdown(std::net::Shutdown::Write);
        back.join().unwrap();
    });
    let p = probe(
        &tb,
        &format!("tcp://{rec_addr}"),
        &["--key", ks, "--probe-id", "7"],
    );
    send_frames(&tb);
    let (pr, captured, perr) = stop_probe(p);
    assert_eq!(captured, N as u64, "{perr}");
    assert_eq!(pr["collectors"][0]["acked"], N, "{pr}");
    stop_rec.store(true, Relaxed);
    rec.join().unwrap();
    let stream = recorded.lock().unwrap().clone();
    // hello, finish, then batches.
    let mut batches = Vec::new();
    let mut at = &stream[auth::HELLO_LEN + auth::FINISH_LEN..];
    while let Some(b) = read_batch(&mut at) {
        batches.push(b);
    }
    assert!(
        at.is_empty() && !batches.is_empty(),
        "recorded stream does not parse"
    );

    let b_addr = b.tcp;
    let (raw_reply, authed_closed) = in_rx(&tb, move || {
        // 1. The stream as recorded: B answers the recorded hello with its own nonce, so the recorded
        //    finish (made for A's nonce) fails; B says so and closes before any batch is read.
        let mut s = TcpStream::connect(b_addr).unwrap();
        s.write_all(&stream[..auth::HELLO_LEN + auth::FINISH_LEN])
            .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        let _ = s.write_all(&stream[auth::HELLO_LEN + auth::FINISH_LEN..]);
        // 2. Even inside a connection authenticated to B (we hold the key), A's batches fail: their tags
        //    cover "col-a".
        let (mut s, _) = connect(b_addr, &Key::from_bytes(KEY).unwrap(), 7);
        s.write_all(&batches[0]).unwrap();
        (reply, closed_within(&mut s, Duration::from_secs(5)))
    })
    .join()
    .unwrap();
    assert!(
        raw_reply.windows(5).any(|w| w == b"RCE2\x02"),
        "B did not refuse the replayed finish: {raw_reply:02x?}"
    );
    assert!(
        authed_closed,
        "B kept the connection after a batch made for A"
    );
    let (va, _) = a.stop_json();
    let (vb, errb) = b.stop_json();
    assert_eq!(va["records_stored"], N, "{va}");
    assert_eq!(vb["records_stored"], 0, "{vb}");
    assert_eq!(rejected(&vb, "bad_auth"), 1, "{vb}");
    assert_eq!(rejected(&vb, "bad_tag"), 1, "{vb}");
    assert!(errb.contains("handshake failed"), "{errb}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn forged_acks_leave_batches_unacked_until_the_real_collector_stores_them() {
    let tb = rx_testbed();
    let dir = temp_dir("auth-forge");
    let k = write_private(&dir.join("key"), KEY);
    let ks = k.to_str().unwrap();
    let real = collector(rx_ringcap(&tb), &dir.join("real"), &["--key", ks]);
    // A man in the middle without the key: relays the handshake to the real collector (so the probe takes
    // it for the collector), then keeps the batches and acks each with a made-up tag.
    let forged = Arc::new(AtomicU64::new(0));
    let stop_mitm = Arc::new(AtomicBool::new(false));
    let (forged2, up) = (Arc::clone(&forged), real.tcp);
    let (mitm_addr, mitm) = rx_server(&tb, Arc::clone(&stop_mitm), move |mut s| {
        let mut hello = [0u8; auth::HELLO_LEN];
        if s.read_exact(&mut hello).is_err() {
            return;
        }
        let mut u = TcpStream::connect(up).unwrap();
        u.write_all(&hello).unwrap();
        let reply = read_server_reply(&mut u).unwrap();
        s.write_all(&reply).unwrap();
        let mut finish = [0u8; auth::FINISH_LEN];
        if s.read_exact(&mut finish).is_err() {
            return;
        }
        u.write_all(&finish).unwrap();
        drop(u);
        while let Some(b) = read_batch(&mut s) {
            let mut ack = [0u8; auth::ACK_LEN];
            ack[..4].copy_from_slice(b"RCA2");
            ack[8..16].copy_from_slice(&b[24..32]); // the batch's seq
            for (i, x) in ack[16..].iter_mut().enumerate() {
                *x = (i as u8).wrapping_mul(37) ^ b[30];
            }
            if s.write_all(&ack).is_err() {
                break;
            }
            forged2.fetch_add(1, Relaxed);
        }
    });
    let p = probe(
        &tb,
        &format!("tcp://{mitm_addr},tcp://{}", real.tcp),
        &["--key", ks, "--probe-id", "3"],
    );
    send_frames(&tb);
    let (pr, captured, perr) = stop_probe(p);
    stop_mitm.store(true, Relaxed);
    mitm.join().unwrap();
    let (v, _) = real.stop_json();
    assert_eq!(captured, N as u64, "{perr}");
    assert!(
        forged.load(Relaxed) >= 1,
        "the probe never sent a batch to the man in the middle: {perr}"
    );
    let (fake, good) = (&pr["collectors"][0], &pr["collectors"][1]);
    assert_eq!(fake["acked"], 0, "{pr}");
    assert!(fake["bad_acks"].as_u64().unwrap() >= 1, "{pr}");
    assert_eq!(good["acked"], N, "{pr}");
    assert_eq!(
        (fake["unacked"].as_u64(), good["unacked"].as_u64()),
        (Some(0), Some(0)),
        "{pr}"
    );
    assert!(perr.contains("forged or replayed"), "{perr}");
    // Every record is stored once, by the real collector.
    assert_eq!(v["records_stored"], N, "{v}");
    assert_eq!(v["rejected_total"], 0, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_probe_cannot_speak_for_another() {
    let tb = rx_testbed();
    let dir = temp_dir("auth-keydir");
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    write_private(&keys.join("1"), KEY);
    let k2 = write_private(&keys.join("2"), KEY2);
    let c = collector(
        rx_ringcap(&tb),
        &dir.join("out"),
        &["--key-dir", keys.to_str().unwrap()],
    );
    let dest = format!("tcp://{}", c.tcp);
    // Probe 2 with its own key; a second probe claims id 1 but holds probe 2's key.
    let honest = probe(
        &tb,
        &dest,
        &["--key", k2.to_str().unwrap(), "--probe-id", "2"],
    );
    let liar = probe(
        &tb,
        &dest,
        &["--key", k2.to_str().unwrap(), "--probe-id", "1"],
    );
    send_frames(&tb);
    let (lr, lcap, lerr) = stop_probe(liar);
    let (hr, hcap, herr) = stop_probe(honest);
    assert_eq!((hcap, lcap), (N as u64, N as u64), "{herr}\n{lerr}");
    assert_eq!(hr["collectors"][0]["acked"], N, "{hr}");
    assert_eq!(lr["collectors"][0]["acked"], 0, "{lr}");
    assert!(
        lr["collectors"][0]["handshake_failures"].as_u64().unwrap() >= 1,
        "{lr}"
    );
    assert!(lerr.contains("does not hold this probe's key"), "{lerr}");
    // Probe 1 (with its key) cannot slip in a batch with probe 2's id either.
    let addr = c.tcp;
    let id = c.id.clone();
    let closed = in_rx(&tb, move || {
        let k1 = Key::from_bytes(KEY).unwrap();
        let (mut s, session) = connect(addr, &k1, 1);
        assert_eq!(session.collector_id(), id.as_bytes());
        let mut bb = BatchBuilder::new(batch::MAX_PAYLOAD);
        let f = frame(1, 1, 2, 100);
        bb.push(&wire::record::Record::from_frame(
            1,
            100,
            &f,
            wire::LinkType::Ethernet,
        ));
        let bytes = bb
            .take(2, 5)
            .seal(&k1, session.collector_id(), 0, sys::now_ns())
            .to_vec();
        s.write_all(&bytes).unwrap();
        closed_within(&mut s, Duration::from_secs(5))
    })
    .join()
    .unwrap();
    assert!(
        closed,
        "a batch of probe 2 on probe 1's connection was not refused"
    );
    let (v, _) = c.stop_json();
    assert_eq!(v["records_stored"], N, "{v}");
    let probes: Vec<u64> = v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["probe_id"].as_u64().unwrap())
        .collect();
    assert_eq!(probes, vec![2], "{v}");
    assert_eq!(rejected(&v, "probe_id_mismatch"), 1, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn silent_and_slow_drip_clients_are_closed_and_cannot_block_a_probe() {
    let tb = rx_testbed();
    let dir = temp_dir("auth-drip");
    let k = write_private(&dir.join("key"), KEY);
    let ks = k.to_str().unwrap();
    let c = collector(
        rx_ringcap(&tb),
        &dir.join("out"),
        &[
            "--key",
            ks,
            "--auth-timeout",
            "2s",
            "--message-timeout",
            "2s",
        ],
    );
    let addr = c.tcp;
    // One client that sends nothing: closed after the 2 s auth timeout.
    let silent = in_rx(&tb, move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let t = Instant::now();
        assert!(
            closed_within(&mut s, Duration::from_secs(6)),
            "silent client never closed"
        );
        t.elapsed()
    })
    .join()
    .unwrap();
    // 64 clients from 64 addresses (all the slots) dripping a hello at 1 byte/s, reconnecting whenever
    // they are closed, for as long as the probe runs. Each connection's life is recorded.
    let stop_drip = Arc::new(AtomicBool::new(false));
    let lives = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let drippers: Vec<_> = (0..64u8)
        .map(|i| {
            let (stop, lives) = (Arc::clone(&stop_drip), Arc::clone(&lives));
            in_rx(&tb, move || {
                let src = Ipv4Addr::new(127, 0, 1, 2 + i);
                while !stop.load(Relaxed) {
                    let Ok(mut s) = connect_from(src, addr) else {
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    };
                    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                    let t = Instant::now();
                    let hello = auth::Hello::new(9);
                    let mut closed = false;
                    for b in hello.bytes().iter().cycle() {
                        if stop.load(Relaxed) || t.elapsed() > Duration::from_secs(20) {
                            break;
                        }
                        if s.write_all(&[*b]).is_err() {
                            closed = true;
                            break;
                        }
                        let mut x = [0u8; 64];
                        match s.read(&mut x) {
                            Ok(0) => {
                                closed = true;
                                break;
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                                closed = true;
                                break;
                            }
                            _ => {}
                        }
                    }
                    if closed {
                        lives.lock().unwrap().push(t.elapsed());
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1000));
    let p = probe(
        &tb,
        &format!("tcp://{addr}"),
        &["--key", ks, "--probe-id", "4"],
    );
    send_frames(&tb);
    // A key holder that starts a batch and drips it: closed by the 2 s message timeout.
    let dripped_batch = in_rx(&tb, move || {
        let (mut s, _) = connect(addr, &Key::from_bytes(KEY).unwrap(), 8);
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let t = Instant::now();
        for _ in 0..10 {
            if s.write_all(b"R").is_err() {
                return t.elapsed();
            }
            let mut x = [0u8; 8];
            match s.read(&mut x) {
                Ok(0) => return t.elapsed(),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return t.elapsed(),
                _ => {}
            }
        }
        Duration::MAX
    });
    let (pr, captured, perr) = stop_probe(p);
    // Keep the pressure on until every dripper was closed at least once (or 10 s passed).
    let deadline = Instant::now() + Duration::from_secs(10);
    while lives.lock().unwrap().len() < 64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop_drip.store(true, Relaxed);
    for d in drippers {
        d.join().unwrap();
    }
    let dripped_batch = dripped_batch.join().unwrap();
    let (v, _) = c.stop_json();
    assert_eq!(captured, N as u64, "{perr}");
    assert_eq!(pr["collectors"][0]["acked"], N, "{pr}\n{perr}");
    assert_eq!(v["records_stored"], N, "{v}");
    assert!(
        silent >= Duration::from_millis(1800) && silent < Duration::from_secs(4),
        "{silent:?}"
    );
    assert!(
        dripped_batch < Duration::from_secs(4),
        "a dripped batch held its connection {dripped_batch:?}"
    );
    let lives = lives.lock().unwrap();
    assert!(
        lives.len() >= 64,
        "only {} drip connections were closed",
        lives.len()
    );
    let longest = lives.iter().max().unwrap();
    assert!(
        *longest < Duration::from_secs(4),
        "a drip connection lived {longest:?}"
    );
    assert!(
        rejected(&v, "auth_timeout") + rejected(&v, "handshake_evicted") >= 64,
        "{v}"
    );
    assert_eq!(rejected(&v, "message_timeout"), 1, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn connections_per_address_are_limited() {
    let dir = temp_dir("auth-peraddr");
    let k = write_private(&dir.join("key"), KEY);
    let c = collector(
        Command::new(ringcap()),
        &dir.join("out"),
        &[
            "--key",
            k.to_str().unwrap(),
            "--max-per-address",
            "3",
            "--auth-timeout",
            "20s",
        ],
    );
    let local = Ipv4Addr::new(127, 0, 0, 1);
    let held: Vec<TcpStream> = (0..3)
        .map(|_| connect_from(local, c.tcp).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut fourth = connect_from(local, c.tcp).unwrap();
    assert!(
        closed_within(&mut fourth, Duration::from_secs(2)),
        "a 4th connection from one address was kept"
    );
    let mut other = connect_from(Ipv4Addr::new(127, 0, 0, 2), c.tcp).unwrap();
    assert!(
        !closed_within(&mut other, Duration::from_secs(1)),
        "another address was refused"
    );
    // Closing one frees its place.
    drop(held);
    std::thread::sleep(Duration::from_millis(500));
    let (mut again, session) = connect(c.tcp, &Key::from_bytes(KEY).unwrap(), 1);
    assert!(
        !closed_within(&mut again, Duration::from_millis(500)),
        "{:?}",
        session.key_id()
    );
    let (v, _) = c.stop_json();
    assert_eq!(rejected(&v, "per_address_limit"), 1, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mutual_tls_delivers_with_a_client_certificate_and_refuses_without() {
    if !have("openssl") {
        return;
    }
    let tb = rx_testbed();
    let dir = temp_dir("auth-tls");
    make_certs(&dir);
    let k = write_private(&dir.join("key"), KEY);
    let ks = k.to_str().unwrap();
    let p = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let c = collector(
        rx_ringcap(&tb),
        &dir.join("out"),
        &[
            "--key",
            ks,
            "--tls-cert",
            &p("collector.pem"),
            "--tls-key",
            &p("collector.key"),
            "--tls-ca",
            &p("ca.pem"),
        ],
    );
    let dest = format!("tcp://{}", c.tcp);
    let with_cert = probe(
        &tb,
        &dest,
        &[
            "--key",
            ks,
            "--probe-id",
            "1",
            "--tls-ca",
            &p("ca.pem"),
            "--tls-cert",
            &p("probe.pem"),
            "--tls-key",
            &p("probe.key"),
        ],
    );
    let no_cert = probe(
        &tb,
        &dest,
        &["--key", ks, "--probe-id", "2", "--tls-ca", &p("ca.pem")],
    );
    let no_tls = probe(&tb, &dest, &["--key", ks, "--probe-id", "3"]);
    send_frames(&tb);
    let (r3, _, e3) = stop_probe(no_tls);
    let (r2, _, e2) = stop_probe(no_cert);
    let (r1, cap1, e1) = stop_probe(with_cert);
    let (v, err) = c.stop_json();
    assert_eq!(cap1, N as u64, "{e1}");
    assert_eq!(r1["collectors"][0]["acked"], N, "{r1}\n{e1}");
    for (r, e) in [(&r2, &e2), (&r3, &e3)] {
        assert_eq!(r["collectors"][0]["acked"], 0, "{r}");
        assert!(
            r["collectors"][0]["handshake_failures"].as_u64().unwrap() >= 1,
            "{r}\n{e}"
        );
    }
    assert_eq!(v["records_stored"], N, "{v}");
    let probes: Vec<u64> = v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["probe_id"].as_u64().unwrap())
        .collect();
    assert_eq!(probes, vec![1], "{v}");
    assert!(rejected(&v, "tls_failed") >= 2, "{v}\n{err}");
    assert!(err.contains("mutual TLS"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn old_version_peers_get_a_clear_error() {
    let tb = rx_testbed();
    let dir = temp_dir("auth-v1");
    let k = write_private(&dir.join("key"), KEY);
    let ks = k.to_str().unwrap();
    // A v1 probe at this collector: its first bytes are a batch header (RCB1, version 1, header length 64).
    let c = collector(rx_ringcap(&tb), &dir.join("out"), &["--key", ks]);
    let addr = c.tcp;
    let reply = in_rx(&tb, move || {
        let mut v1 = [0u8; HEADER_LEN];
        v1[..4].copy_from_slice(b"RCB1");
        v1[4] = 1;
        v1[6..8].copy_from_slice(&64u16.to_le_bytes());
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&v1).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        reply
    })
    .join()
    .unwrap();
    assert_eq!(
        auth::parse_error(&reply),
        Some(auth::RefuseCode::Version),
        "{reply:02x?}"
    );
    let (v, err) = c.stop_json();
    assert_eq!(rejected(&v, "bad_version"), 1, "{v}");
    assert!(
        err.contains("speaks record protocol v1 (an older ringcap); upgrade it"),
        "{err}"
    );
    // This probe at a v1 collector, which reads a 64-byte batch header, finds no RCB1 and closes.
    let stop_old = Arc::new(AtomicBool::new(false));
    let (old, h) = rx_server(&tb, Arc::clone(&stop_old), |mut s| {
        let mut header = [0u8; HEADER_LEN];
        if s.read_exact(&mut header).is_ok() {
            assert_ne!(&header[..4], b"RCB1");
        }
    });
    let p = probe(&tb, &format!("tcp://{old}"), &["--key", ks]);
    std::thread::sleep(Duration::from_millis(500));
    let (r, _, perr) = stop_probe(p);
    stop_old.store(true, Relaxed);
    h.join().unwrap();
    assert!(
        r["collectors"][0]["handshake_failures"].as_u64().unwrap() >= 1,
        "{r}"
    );
    assert!(
        perr.contains("a collector older than record protocol v2"),
        "{perr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
