//! A `ringcap collect` started for a test, and batches sealed and sent to it as a probe does: shared by
//! tests/collect.rs (kept apart so that file holds the tests).

use records::auth::{self, Session};
use records::batch::{self, BatchBuilder, Key};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wire::record::Record;
use wire::LinkType;

use super::*;

pub const KEY: &[u8] = b"collector-test-key-0123456789abcdef";
/// `--collector-id` of the collectors these tests start (unless a test gives its own).
pub const TEST_ID: &str = "test-collector";

pub fn key() -> Key {
    Key::from_bytes(KEY).unwrap()
}

pub fn key_file(dir: &Path) -> PathBuf {
    let p = dir.join("key");
    std::fs::write(&p, KEY).unwrap();
    // Keys must be private (ringcap refuses files group or others can read).
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    p
}

/// A running `ringcap collect` and the addresses it bound.
pub struct Collector {
    pub child: Child,
    pub tcp: Option<SocketAddr>,
    pub udp: Option<SocketAddr>,
    pub stderr: Arc<Mutex<String>>,
}

/// Starts `ringcap collect -o DIR` on tcp and udp 127.0.0.1:0, waits for "listening on".
pub fn start(dir: &Path, key: &Path) -> Collector {
    start_with(Command::new(ringcap()), dir, key, &[])
}

/// The same with a given command (e.g. `ip netns exec NS ringcap`).
pub fn start_with(mut cmd: Command, dir: &Path, key: &Path, extra: &[&str]) -> Collector {
    cmd.args([
        "collect",
        "--listen",
        "tcp://127.0.0.1:0",
        "--listen",
        "udp://127.0.0.1:0",
    ])
    .arg("-o")
    .arg(dir)
    .arg("--key")
    .arg(key)
    .args(["--json", "--stats-interval", "0"])
    .args(if extra.contains(&"--collector-id") {
        &[][..]
    } else {
        &["--collector-id", TEST_ID][..]
    })
    .args(extra);
    let Announced {
        child,
        line,
        stderr,
    } = spawn_announced(cmd, "listening on");
    // "ringcap collect: listening on tcp://127.0.0.1:P, udp://127.0.0.1:Q (output DIR)"
    let mut c = Collector {
        child,
        tcp: None,
        udp: None,
        stderr,
    };
    for word in line.split([' ', ',']) {
        if let Some(a) = word.strip_prefix("tcp://") {
            c.tcp = Some(a.parse().unwrap());
        } else if let Some(a) = word.strip_prefix("udp://") {
            c.udp = Some(a.parse().unwrap());
        }
    }
    assert!(c.tcp.is_some() && c.udp.is_some(), "{line}");
    c
}

impl Collector {
    /// Signal, wait (30 s at most), return status, stdout and all of stderr.
    pub fn stop(mut self, sig: i32) -> Output {
        let status = signal_and_wait(&mut self.child, sig, "collector");
        let mut stdout = Vec::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_end(&mut stdout)
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let stderr = self.stderr.lock().unwrap().clone().into_bytes();
        Output {
            status,
            stdout,
            stderr,
        }
    }
}

/// The JSON summary of a collector stopped with SIGINT (checks exit 0).
pub fn stop_json(c: Collector) -> (serde_json::Value, String) {
    let out = c.stop(libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "collect failed: {err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (v, err)
}

/// `n` records of distinct UDP frames (ports and lengths vary), timestamps from `t0` 1 µs apart.
pub fn make_records(t0: u64, first: u32, n: u32) -> Vec<Record> {
    varied_frames(first, n, 50)
        .iter()
        .zip(first..)
        .map(|(f, i)| {
            Record::from_frame(t0 + i as u64 * 1000, f.len() as u32, f, LinkType::Ethernet)
        })
        .collect()
}

/// One batch sealed for a collector id, as the probe sends it.
pub fn sealed_for(
    id: &[u8],
    key: &Key,
    probe: u64,
    stream: u32,
    seq: u64,
    recs: &[Record],
    sent_ns: u64,
) -> Vec<u8> {
    let mut b = BatchBuilder::new(batch::MAX_PAYLOAD);
    for r in recs {
        assert!(b.push(r), "test batch too large");
    }
    b.take(probe, stream).seal(key, id, seq, sent_ns).to_vec()
}

/// One batch for TCP to a collector started here ([`TEST_ID`]).
pub fn sealed(
    key: &Key,
    probe: u64,
    stream: u32,
    seq: u64,
    recs: &[Record],
    sent_ns: u64,
) -> Vec<u8> {
    sealed_for(TEST_ID.as_bytes(), key, probe, stream, seq, recs, sent_ns)
}

/// One batch for UDP (no handshake, so bound to no collector id).
pub fn sealed_udp(
    key: &Key,
    probe: u64,
    stream: u32,
    seq: u64,
    recs: &[Record],
    sent_ns: u64,
) -> Vec<u8> {
    sealed_for(b"", key, probe, stream, seq, recs, sent_ns)
}

/// A TCP connection after the handshake as probe `probe` with `key`.
pub fn connect(addr: SocketAddr, key: &Key, probe: u64) -> (TcpStream, Session) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let session = auth::client_handshake(&mut s, key, probe).expect("handshake");
    (s, session)
}

pub fn now() -> u64 {
    sys::now_ns()
}

/// Sends batches on one TCP connection (after the handshake as the first batch's probe), checking each ack.
pub fn send_tcp_acked(addr: SocketAddr, batches: &[(u64, Vec<u8>)]) {
    let probe = batch::claimed_probe_id(&batches[0].1).unwrap();
    let (mut s, session) = connect(addr, &key(), probe);
    for (seq, b) in batches {
        s.write_all(b).unwrap();
        let mut ack = [0u8; auth::ACK_LEN];
        s.read_exact(&mut ack).unwrap();
        assert_eq!(session.check_ack(&ack), Ok(*seq));
    }
}

/// Sends raw bytes on a new connection after the handshake as probe 1; true if the collector closed it
/// without acking anything.
pub fn tcp_refused(addr: SocketAddr, bytes: &[u8], close_write: bool) -> bool {
    let (mut s, _) = connect(addr, &key(), 1);
    s.write_all(bytes).unwrap();
    if close_write {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

pub fn send_udp(addr: SocketAddr, datagrams: &[Vec<u8>]) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in datagrams {
        s.send_to(d, addr).unwrap();
        // Loopback does not drop on the wire; pacing keeps the collector's socket buffer from overflowing.
        std::thread::sleep(Duration::from_micros(200));
    }
}

pub fn stream(v: &serde_json::Value, probe: u64) -> &serde_json::Value {
    v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["probe_id"] == probe)
        .unwrap_or_else(|| panic!("no stream of probe {probe} in {v}"))
}
