//! Header-record authentication end to end (issue 12 item 9): the real `ringcap collect` and, where a probe
//! is needed, the real `ringcap capture --records` on the testbed, with attackers written here on real
//! sockets: a recorder that replays a probe's stream to another collector, a man in the middle that forges
//! acks, a probe using another probe's key, silent and slow-drip clients, too many connections from one
//! address, and probes with and without a TLS client certificate (certificates made by the openssl CLI).
//!
//! Expected counts come from the frames the test sends, never from the code under test.

mod common;
use common::*;

use records::auth::{self, Session};
use records::batch::{self, BatchBuilder, Key, HEADER_LEN};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use testbed::{Side, Testbed};

const KEY: &[u8] = b"records-auth-test-key-0123456789";
const KEY2: &[u8] = b"records-auth-second-probe-key-0123";
/// Frames each probe test sends (and so the records each must store).
const N: u32 = 3000;

fn write_private(path: &Path, bytes: &[u8]) -> PathBuf {
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    path.to_path_buf()
}

/// A running `ringcap collect` listening on tcp://127.0.0.1:0.
struct Collector {
    child: Child,
    tcp: SocketAddr,
    id: String,
    stderr: Arc<Mutex<String>>,
}

/// Starts `cmd collect --listen tcp://127.0.0.1:0 -o OUT --json --stats-interval 0 ARGS` and reads the
/// address and collector id from its "listening on" line.
fn collector(mut cmd: Command, out: &Path, args: &[&str]) -> Collector {
    cmd.args([
        "collect",
        "--listen",
        "tcp://127.0.0.1:0",
        "--json",
        "--stats-interval",
        "0",
        "-o",
    ])
    .arg(out)
    .args(args);
    let Announced {
        child,
        line,
        stderr,
    } = spawn_announced(cmd, "listening on");
    // "ringcap collect: listening on tcp://127.0.0.1:P (output DIR, collector id ID[, mutual TLS])"
    let tcp = line
        .split([' ', ','])
        .find_map(|w| w.strip_prefix("tcp://"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    let id = line
        .split_once("collector id ")
        .map(|(_, r)| r.split([',', ')']).next().unwrap().to_string())
        .unwrap_or_else(|| panic!("{line}"));
    Collector {
        child,
        tcp,
        id,
        stderr,
    }
}

impl Collector {
    /// SIGINT, wait, the JSON summary and stderr (checks exit 0).
    fn stop_json(mut self) -> (serde_json::Value, String) {
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "collector did not exit in 30 s");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = Vec::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_end(&mut stdout)
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let err = self.stderr.lock().unwrap().clone();
        assert!(status.success(), "collect failed: {err}");
        let v = serde_json::from_slice(&stdout)
            .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&stdout)));
        (v, err)
    }
}

fn rejected(v: &serde_json::Value, reason: &str) -> u64 {
    v["rejected"][reason].as_u64().unwrap_or(0)
}

/// The testbed with loopback up in the Rx namespace (collectors and attackers live there, with the probe).
fn rx_testbed() -> Testbed {
    let tb = testbed();
    let lo = tb
        .command(Side::Rx, "ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(lo.success());
    tb
}

fn rx_ringcap(tb: &Testbed) -> Command {
    tb.command(Side::Rx, ringcap().to_str().unwrap())
}

/// A running probe and all it printed on stderr (kept per child: several probes run at once).
struct Probe {
    child: Child,
    stderr: Arc<Mutex<String>>,
    done: std::sync::mpsc::Receiver<()>,
}

/// `ringcap capture -i RX --records DESTS -q --json EXTRA... udp` on the testbed, once it is listening.
fn probe(tb: &Testbed, dests: &str, extra: &[&str]) -> Probe {
    let mut child = rx_ringcap(tb)
        .args([
            "capture",
            "-i",
            &tb.rx_if,
            "--records",
            dests,
            "-q",
            "--json",
        ])
        .args(extra)
        .arg("udp")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringcap capture");
    let stderr = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done) = std::sync::mpsc::channel();
    let pipe = child.stderr.take().unwrap();
    let all = Arc::clone(&stderr);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if line.contains("listening on") {
                let _ = tx.send(());
            }
            let mut a = all.lock().unwrap();
            a.push_str(&line);
            a.push('\n');
        }
        let _ = done_tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("probe not listening in 20 s: {}", stderr.lock().unwrap()));
    Probe {
        child,
        stderr,
        done,
    }
}

/// Stops a probe (SIGINT) and returns its JSON summary's `records` object, `captured` and stderr.
fn stop_probe(mut p: Probe) -> (serde_json::Value, u64, String) {
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(p.child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "probe did not exit in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = p.done.recv_timeout(Duration::from_secs(5));
    let err = p.stderr.lock().unwrap().clone();
    assert!(status.success(), "probe: {err}");
    let v: serde_json::Value = err
        .lines()
        .rfind(|l| l.starts_with('{') && l.contains("\"records\""))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON summary: {err}"));
    let captured = v["captured"].as_u64().unwrap_or_else(|| panic!("{v}"));
    (v["records"].clone(), captured, err)
}

/// N distinct UDP frames, sent from the Tx side.
fn send_frames(tb: &Testbed) {
    let frames: Vec<Vec<u8>> = (0..N)
        .map(|i| {
            frame(
                i,
                1000 + (i % 7) as u16,
                2000 + (i % 11) as u16,
                60 + (i % 300) as usize,
            )
        })
        .collect();
    send(tb, &frames);
    std::thread::sleep(Duration::from_millis(700));
}

/// A thread inside the Rx namespace serving a listener on 127.0.0.1 with `serve` per connection (one at a
/// time) until `stop`.
fn rx_server(
    tb: &Testbed,
    stop: Arc<AtomicBool>,
    serve: impl Fn(TcpStream) + Send + 'static,
) -> (SocketAddr, JoinHandle<()>) {
    let ns = tb.ns(Side::Rx).to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        testbed::enter_netns(&ns).expect("enter rx netns");
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        tx.send(l.local_addr().unwrap()).unwrap();
        while !stop.load(Relaxed) {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                    serve(s);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (rx.recv().unwrap(), h)
}

/// Runs `f` on a thread inside the Rx namespace.
fn in_rx<T: Send + 'static>(tb: &Testbed, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let ns = tb.ns(Side::Rx).to_string();
    std::thread::spawn(move || {
        testbed::enter_netns(&ns).expect("enter rx netns");
        f()
    })
}

/// The collector's reply to a hello, read off `s`: fixed part, id, tag.
fn read_server_reply(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut fixed = [0u8; auth::SERVER_FIXED_LEN];
    s.read_exact(&mut fixed)?;
    let mut rest = vec![0u8; fixed[5] as usize + batch::TAG_LEN];
    s.read_exact(&mut rest)?;
    let mut all = fixed.to_vec();
    all.extend_from_slice(&rest);
    Ok(all)
}

/// Reads one whole batch off `s` (None at EOF or on garbage).
fn read_batch(s: &mut impl Read) -> Option<Vec<u8>> {
    let mut b = vec![0u8; HEADER_LEN];
    s.read_exact(&mut b).ok()?;
    let n = batch::batch_len(&b).ok()?;
    b.resize(n, 0);
    s.read_exact(&mut b[HEADER_LEN..]).ok()?;
    Some(b)
}

/// Handshake as `probe` with `key` on a fresh connection.
fn connect(addr: SocketAddr, key: &Key, probe: u64) -> (TcpStream, Session) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let session = auth::client_handshake(&mut s, key, probe).expect("handshake");
    (s, session)
}

/// True when the peer closes `s` (EOF or reset) within `within`, reading and discarding what it sends.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut buf = [0u8; 256];
    while Instant::now() < end {
        s.set_read_timeout(Some((end - Instant::now()).max(Duration::from_millis(10))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => {}
        }
    }
    false
}

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
            .seal(&k1, session.collector_id(), 0, batch::unix_now_ns())
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

/// A TCP connection from `src` (any 127/8 address is local on Linux) to `dst`.
fn connect_from(src: Ipv4Addr, dst: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(dst) = dst else {
        panic!("IPv4 only")
    };
    let sa = |a: SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a fresh socket, bound and connected with valid sockaddr_in values; the fd is owned by the
    // TcpStream from then on (closed on error paths).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = TcpStream::from_raw_fd(fd);
        let src = sa(SocketAddrV4::new(src, 0));
        if libc::bind(fd, (&src as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let d = sa(dst);
        if libc::connect(fd, (&d as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }
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

/// `openssl ARGS` in `dir`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl (make deps installs it)");
    assert!(o.status.success(), "openssl {args:?}: {}", stderr_text(&o));
}

/// A CA, and certificates it signs: the collector's (for IP 127.0.0.1) and a probe's client certificate.
fn make_certs(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca = [
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=ringcap test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    ]
    .concat();
    openssl(dir, &ca);
    for (name, ext) in [
        (
            "collector",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        ),
        (
            "probe",
            "subjectAltName=DNS:probe1\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
        ),
    ] {
        let (key, csr, pem, extf) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(dir.join(&extf), ext).unwrap();
        openssl(
            dir,
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    &key,
                    "-out",
                    &csr,
                    "-subj",
                    &format!("/CN={name}"),
                ],
            ]
            .concat(),
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &extf,
            ],
        );
        std::fs::set_permissions(
            dir.join(&key),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
    }
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
