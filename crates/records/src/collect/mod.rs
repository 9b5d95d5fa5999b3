//! The collector (seed 001's "application box"): receives record batches over TCP and UDP, checks them
//! ([`crate::batch::open`] with the probe's key and this collector's id, then [`ReplayGuard`]), appends them
//! to the spool and, on TCP, acks them (authenticated acks, [`crate::auth`]) once they are on disk: a connection reads the batches that are already waiting in its socket
//! (up to [`ACK_RUN_MAX`]), appends them, makes them durable with one fdatasync and acks the last one (an
//! ack covers every batch up to its seq on that connection).
//!
//! A TCP connection first runs the handshake ([`crate::auth`], inside TLS when configured) and must finish
//! it within `auth_timeout`; a connection still handshaking takes one of `max_connections` handshake slots
//! (when all are taken the oldest is closed), an authenticated one one of `max_connections` connection
//! slots, and one address holds at most `max_per_address` connections. Once a message's first byte arrived,
//! the whole message must arrive within `message_timeout`, so a client dripping bytes cannot hold a slot.
//!
//! Threads: one acceptor per TCP listener (a thread per connection), one receiver per UDP socket; the owner calls [`Collector::tick`] for time rotation. Every buffer is bounded
//! (one batch per connection/socket). A batch that fails any check is counted by reason and logged at most
//! once per second per peer address and transport; a TCP peer that sends one is disconnected. Nothing of it is stored.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::antireplay::{Rejected, ReplayGuard};
use crate::archive::{Archive, ArchiveReport, ConvertedFile};
use crate::auth::{HandshakeError, KeySet, Session};
use crate::batch::{self, batch_len, BatchError, MAX_BATCH_LEN};
use crate::tls::Stream;

mod config;
mod kafka;
mod tcp;

use config::{check_collector_id, default_collector_id};
pub use config::{CollectorConfig, Listen};

/// How often blocked receivers look at the stop flag.
const POLL: Duration = Duration::from_millis(200);
/// Batches a connection appends before it syncs and acks them, even when more are waiting.
pub const ACK_RUN_MAX: usize = 64;

/// Counters of one (probe, stream).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamReport {
    /// The probe.
    pub probe_id: u64,
    /// Its stream (one per probe process start).
    pub stream_id: u32,
    /// Batches accepted and stored.
    pub batches: u64,
    /// Records stored.
    pub records: u64,
    /// Record bytes stored (batch payloads, without batch headers and tags).
    pub record_bytes: u64,
    /// Batches missing from the sequence (highest seq + 1 - distinct seqs received); late arrivals
    /// (reordering) are subtracted when they come.
    pub seq_loss: u64,
    /// Batches whose seq had been received already (refused, counted under "replay" too).
    pub duplicates: u64,
    /// Highest seq received.
    pub max_seq: u64,
    /// Batches that arrived after a higher seq (reordering).
    pub reordered: u64,
}

/// The collector's counters at one moment (and at the end).
#[derive(Clone, Debug, Default, Serialize)]
pub struct CollectStats {
    /// Records stored (appended to the spool) in this run.
    pub records_stored: u64,
    /// Batches stored in this run.
    pub batches: u64,
    /// Record bytes stored in this run (payloads: 48 bytes per IPv4/non-IP record, 80 per IPv6 one).
    pub record_bytes: u64,
    /// Per (probe, stream).
    pub streams: Vec<StreamReport>,
    /// Refused input by reason (bad_tag, truncated, bad_magic, replay, skew, ...).
    pub rejected: BTreeMap<String, u64>,
    /// Sum of `rejected`.
    pub rejected_total: u64,
    /// TCP connections accepted in total.
    pub connections: u64,
    /// TCP connections open now (handshaking or authenticated).
    pub connections_open: u64,
    /// Of those, authenticated.
    pub connections_authenticated: u64,
    /// Per-stream reports dropped to stay within `max_streams` (their records stay counted above).
    pub streams_evicted: u64,
    /// Log lines about rejected input left out because the rate limiter's table was full of recent peers.
    pub log_suppressed: u64,
}

impl CollectStats {
    /// Batches missing over all streams.
    pub fn seq_loss(&self) -> u64 {
        self.streams.iter().map(|s| s.seq_loss).sum()
    }
}

/// What a stopped collector did.
#[derive(Clone, Debug, Serialize)]
pub struct CollectReport {
    /// Final counters.
    #[serde(flatten)]
    pub stats: CollectStats,
    /// Parquet files written in this run.
    pub files: Vec<ConvertedFile>,
    /// Spools of an earlier run converted at start.
    pub recovered: Vec<ConvertedFile>,
    /// Conversion errors (their spools are kept).
    pub errors: Vec<String>,
}

/// Entries of the log rate limiter (peer address, transport); when full, entries older than a second go and,
/// if it is still full, lines of new peers are left out (counted in `log_suppressed`).
const LOGGED_MAX: usize = 4096;

/// Guard + archive + per-stream counters: one lock per batch keeps seq accounting and the spool in step.
struct State {
    guard: ReplayGuard,
    archive: Option<Archive>,
    /// Per (probe, stream): report and when it last stored a batch. At most `max_streams` entries: a new
    /// stream evicts the one idle longest.
    streams: BTreeMap<(u64, u32), (StreamReport, Instant)>,
    streams_evicted: u64,
}

struct Shared {
    keys: KeySet,
    /// Covered by every batch tag and ack on TCP.
    collector_id: Vec<u8>,
    stop: AtomicBool,
    state: Mutex<State>,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    /// Last log line per peer address and transport (rate limit: one per second each; LOGGED_MAX entries).
    logged: Mutex<HashMap<(IpAddr, &'static str), Instant>>,
    log_suppressed: AtomicU64,
    connections_open: AtomicUsize,
    connections_authenticated: AtomicUsize,
    connections: AtomicU64,
    /// Open connections per address (entries removed at 0: at most 2 × max_connections).
    per_address: Mutex<HashMap<IpAddr, usize>>,
    /// Connections still handshaking, oldest first, with a handle to close them (at most max_connections).
    handshaking: Mutex<VecDeque<(u64, TcpStream)>>,
    next_conn: AtomicU64,
    workers: Mutex<Vec<JoinHandle<()>>>,
    cfg: CollectorConfig,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking receiver thread must not take the collector down with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why one batch (or connection) was refused.
enum Refusal {
    Batch(BatchError),
    Handshake(HandshakeError),
    Replay(Rejected),
    Storage(io::Error),
    Other(&'static str, String),
}

impl Refusal {
    fn reason(&self) -> &'static str {
        match self {
            Refusal::Batch(e) => e.reason(),
            Refusal::Handshake(e) => e.reason(),
            Refusal::Replay(r) => r.reason(),
            Refusal::Storage(_) => "storage",
            Refusal::Other(r, _) => r,
        }
    }
    fn message(&self) -> String {
        match self {
            Refusal::Batch(e) => e.to_string(),
            Refusal::Handshake(e) => format!("handshake failed: {e}"),
            Refusal::Replay(r) => r.to_string(),
            Refusal::Storage(e) => format!("could not write the spool: {e}"),
            Refusal::Other(_, m) => m.clone(),
        }
    }
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Checks and stores one batch of an authenticated TCP connection: it must carry the connection's probe
    /// id and verify under its key and this collector's id.
    fn accept_tcp(&self, buf: &[u8], session: &Session) -> Result<(u64, u64), Refusal> {
        let view =
            batch::open(buf, session.key(), session.collector_id()).map_err(Refusal::Batch)?;
        if view.header().probe_id != session.key_id() {
            return Err(Refusal::Other(
                "probe_id_mismatch",
                format!(
                    "a batch of probe {} on a connection authenticated as probe {}",
                    view.header().probe_id,
                    session.key_id()
                ),
            ));
        }
        self.store(&view)
    }

    /// Checks and stores one UDP batch: no handshake, so the key is chosen by the probe id it claims (and the
    /// tag covers an empty collector id: UDP batches are not bound to a collector).
    fn accept_udp(&self, buf: &[u8]) -> Result<(u64, u64), Refusal> {
        batch_len(buf).map_err(Refusal::Batch)?;
        let id = batch::claimed_probe_id(buf).unwrap_or(0);
        let key = self
            .keys
            .get(id)
            .ok_or(Refusal::Handshake(HandshakeError::UnknownKeyId(id)))?;
        let view = batch::open(buf, key, b"").map_err(Refusal::Batch)?;
        self.store(&view)
    }

    /// Replay check, spool append and counters of one authentic batch; returns its seq (to ack) and its
    /// number in the archive (to sync).
    fn store(&self, view: &batch::BatchView<'_>) -> Result<(u64, u64), Refusal> {
        self.store_at(view, None)
    }

    /// [`Shared::store`] with the replay guard's clock set to `now_ns` (Kafka: the batch's own sent time,
    /// so a batch kept by the broker for hours is not refused as stale; seq still refuses copies).
    fn store_at(
        &self,
        view: &batch::BatchView<'_>,
        now_ns: Option<u64>,
    ) -> Result<(u64, u64), Refusal> {
        let h = *view.header();
        let mut st = lock(&self.state);
        let now = now_ns.unwrap_or_else(sys::now_ns);
        let st = &mut *st;
        let gap = match st
            .guard
            .check(h.probe_id, h.stream_id, h.seq, h.sent_unix_ns, now)
        {
            Ok(g) => g,
            Err(r) => {
                if let Rejected::Duplicate { .. } = r {
                    if let Some((s, _)) = st.streams.get_mut(&(h.probe_id, h.stream_id)) {
                        s.duplicates += 1;
                    }
                }
                return Err(Refusal::Replay(r));
            }
        };
        let archive = st
            .archive
            .as_mut()
            .ok_or(Refusal::Other("stopping", "collector is stopping".into()))?;
        let number = archive
            .append(h.probe_id, h.stream_id, h.record_count, view.payload())
            .map_err(Refusal::Storage)?;
        let id = (h.probe_id, h.stream_id);
        if !st.streams.contains_key(&id) && st.streams.len() >= self.cfg.max_streams.max(1) {
            // Bounded: the stream idle longest goes (its records stay in the totals).
            let oldest = st
                .streams
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                st.streams.remove(&k);
                st.streams_evicted += 1;
            }
        }
        let (s, seen) = st.streams.entry(id).or_insert((
            StreamReport {
                probe_id: h.probe_id,
                stream_id: h.stream_id,
                ..StreamReport::default()
            },
            Instant::now(),
        ));
        *seen = Instant::now();
        s.batches += 1;
        s.records += h.record_count as u64;
        s.record_bytes += view.payload().len() as u64;
        s.seq_loss = (s.seq_loss as i64 + gap.loss_delta()).max(0) as u64;
        s.max_seq = s.max_seq.max(h.seq);
        s.reordered += gap.late_fill as u64;
        Ok((h.seq, number))
    }

    /// Makes batches up to archive number `upto` durable, then acks `seq` on `c`. False when the
    /// connection must be closed (the sync failed: the probe re-sends; or the ack could not be written).
    fn sync_and_ack(
        &self,
        c: &mut Stream,
        session: &Session,
        peer: SocketAddr,
        upto: u64,
        seq: u64,
    ) -> bool {
        let synced = match lock(&self.state).archive.as_mut() {
            Some(a) => a.sync(upto),
            None => Err(io::Error::other("collector is stopping")),
        };
        if let Err(e) = synced {
            self.refuse(peer, "tcp", &Refusal::Storage(e));
            return false;
        }
        // On a write error the batches are stored anyway; the probe re-sends them elsewhere and
        // `ringcap dedup` removes the second copy.
        c.write_all(&session.ack(seq)).is_ok() && c.flush().is_ok()
    }

    /// Counts a refusal and logs it (at most once per second per peer address).
    fn refuse(&self, peer: SocketAddr, via: &'static str, r: &Refusal) {
        *lock(&self.rejected).entry(r.reason()).or_insert(0) += 1;
        let now = Instant::now();
        let mut logged = lock(&self.logged);
        if logged.len() >= LOGGED_MAX && !logged.contains_key(&(peer.ip(), via)) {
            // Bounded: a flood from many addresses forgets entries older than the rate limit, and while the
            // table is still full of recent peers their lines are left out (counted, never stored).
            logged.retain(|_, t| now.duration_since(*t) < Duration::from_secs(1));
            if logged.len() >= LOGGED_MAX {
                self.log_suppressed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let due = logged
            .get(&(peer.ip(), via))
            .is_none_or(|t| now.duration_since(*t) >= Duration::from_secs(1));
        if due {
            logged.insert((peer.ip(), via), now);
            drop(logged);
            (self.cfg.events)(&format!(
                "rejected {via} input from {peer}: {} [{}]",
                r.message(),
                r.reason()
            ));
        }
    }
}

/// A running collector.
pub struct Collector {
    shared: Arc<Shared>,
    local: Vec<Listen>,
    threads: Vec<JoinHandle<()>>,
    recovered: Vec<ConvertedFile>,
}

impl Collector {
    /// Recovers leftover spools, binds every address and starts receiving.
    pub fn start(cfg: CollectorConfig) -> io::Result<Collector> {
        if cfg.listen.is_empty() && cfg.kafka.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no address to listen on (give --listen tcp://ADDR:PORT or udp://ADDR:PORT)",
            ));
        }
        // Bind first: a typo in an address should fail before anything is touched on disk.
        let mut tcp = Vec::new();
        let mut udp = Vec::new();
        let mut local = Vec::new();
        for l in &cfg.listen {
            match *l {
                Listen::Tcp(a) => {
                    let s = TcpListener::bind(a).map_err(|e| {
                        io::Error::new(e.kind(), format!("cannot listen on {l}: {e}"))
                    })?;
                    local.push(Listen::Tcp(s.local_addr()?));
                    tcp.push(s);
                }
                Listen::Udp(a) => {
                    let s = UdpSocket::bind(a).map_err(|e| {
                        io::Error::new(e.kind(), format!("cannot listen on {l}: {e}"))
                    })?;
                    set_rcvbuf(&s, cfg.udp_rcvbuf);
                    s.set_read_timeout(Some(POLL))?;
                    local.push(Listen::Udp(s.local_addr()?));
                    udp.push(s);
                }
            }
        }
        let collector_id = match (&cfg.collector_id, cfg.kafka.first()) {
            (Some(id), _) => check_collector_id(id)?,
            // Only Kafka: its batches are bound to the topic, not to this collector.
            (None, Some(k)) if local.is_empty() => {
                String::from_utf8_lossy(&k.collector_id()).into_owned()
            }
            (None, _) => default_collector_id(&local),
        };
        let (archive, recovered) = Archive::open(cfg.archive.clone(), Arc::clone(&cfg.events))?;
        let shared = Arc::new(Shared {
            keys: cfg.keys.clone(),
            collector_id: collector_id.into_bytes(),
            stop: AtomicBool::new(false),
            state: Mutex::new(State {
                guard: ReplayGuard::new(cfg.max_skew, cfg.max_streams),
                archive: Some(archive),
                streams: BTreeMap::new(),
                streams_evicted: 0,
            }),
            rejected: Mutex::new(BTreeMap::new()),
            logged: Mutex::new(HashMap::new()),
            log_suppressed: AtomicU64::new(0),
            connections_open: AtomicUsize::new(0),
            connections_authenticated: AtomicUsize::new(0),
            connections: AtomicU64::new(0),
            per_address: Mutex::new(HashMap::new()),
            handshaking: Mutex::new(VecDeque::new()),
            next_conn: AtomicU64::new(0),
            workers: Mutex::new(Vec::new()),
            cfg,
        });
        let mut threads = Vec::new();
        for (i, l) in tcp.into_iter().enumerate() {
            l.set_nonblocking(true)?;
            let sh = Arc::clone(&shared);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("collect-tcp{i}"))
                    .spawn(move || tcp::accept_loop(sh, l))?,
            );
        }
        for (i, s) in udp.into_iter().enumerate() {
            let sh = Arc::clone(&shared);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("collect-udp{i}"))
                    .spawn(move || udp_loop(sh, s))?,
            );
        }
        for (i, k) in shared.cfg.kafka.clone().into_iter().enumerate() {
            let sh = Arc::clone(&shared);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("collect-kafka{i}"))
                    .spawn(move || kafka::consume_loop(sh, k))?,
            );
        }
        Ok(Collector {
            shared,
            local,
            threads,
            recovered,
        })
    }

    /// The bound addresses, in the order given (with the ports the kernel chose for port 0).
    pub fn local_addrs(&self) -> &[Listen] {
        &self.local
    }

    /// The id batch tags and acks are bound to (printed at start: probes learn it in the handshake).
    pub fn collector_id(&self) -> String {
        String::from_utf8_lossy(&self.shared.collector_id).into_owned()
    }

    /// Spools of an earlier run converted at start.
    pub fn recovered(&self) -> &[ConvertedFile] {
        &self.recovered
    }

    /// Time-based rotation and eviction of idle replay state; call a few times per second.
    pub fn tick(&self) -> io::Result<()> {
        let mut st = lock(&self.shared.state);
        st.guard.evict_idle(sys::now_ns());
        match st.archive.as_mut() {
            Some(s) => s.tick(Instant::now()),
            None => Ok(()),
        }
    }

    /// Counters now.
    pub fn stats(&self) -> CollectStats {
        let st = lock(&self.shared.state);
        let (records_stored, batches) = st
            .archive
            .as_ref()
            .map_or((0, 0), |s| (s.records(), s.batches()));
        let streams: Vec<StreamReport> = st.streams.values().map(|(r, _)| *r).collect();
        let streams_evicted = st.streams_evicted;
        drop(st);
        let record_bytes = streams.iter().map(|s| s.record_bytes).sum();
        let rejected: BTreeMap<String, u64> = lock(&self.shared.rejected)
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        CollectStats {
            records_stored,
            batches,
            record_bytes,
            streams,
            rejected_total: rejected.values().sum(),
            rejected,
            connections: self.shared.connections.load(Ordering::Relaxed),
            connections_open: self.shared.connections_open.load(Ordering::Relaxed) as u64,
            connections_authenticated: self
                .shared
                .connections_authenticated
                .load(Ordering::Relaxed) as u64,
            streams_evicted,
            log_suppressed: self.shared.log_suppressed.load(Ordering::Relaxed),
        }
    }

    /// Files converted so far in this run.
    pub fn archive_report(&self) -> ArchiveReport {
        lock(&self.shared.state)
            .archive
            .as_ref()
            .map(|s| s.report())
            .unwrap_or_default()
    }

    /// Stops receiving (a batch half-read is dropped and was not acked), converts the last spool and
    /// waits for every conversion.
    pub fn stop(self) -> io::Result<CollectReport> {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let workers = std::mem::take(&mut *lock(&self.shared.workers));
        for t in workers {
            let _ = t.join();
        }
        let stats = Collector {
            shared: Arc::clone(&self.shared),
            local: Vec::new(),
            threads: Vec::new(),
            recovered: Vec::new(),
        }
        .stats();
        let archive = lock(&self.shared.state).archive.take();
        let rep = match archive {
            Some(s) => s.close()?,
            None => ArchiveReport::default(),
        };
        Ok(CollectReport {
            stats,
            files: rep.files,
            recovered: self.recovered,
            errors: rep.errors,
        })
    }
}

/// Asks for a large receive buffer (root may exceed net.core.rmem_max with SO_RCVBUFFORCE).
fn set_rcvbuf(s: &UdpSocket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt on our own socket with a valid int.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

/// A read that ended by its socket timeout or a signal, not by a failure: look at the stop flag and try
/// again.
pub(crate) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn udp_loop(sh: Arc<Shared>, s: UdpSocket) {
    // One datagram at most (65507 bytes of UDP payload < MAX_BATCH_LEN + 1).
    let mut buf = vec![0u8; MAX_BATCH_LEN + 1];
    while !sh.stopping() {
        let (n, peer) = match s.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if timed_out(&e) => continue,
            Err(e) => {
                (sh.cfg.events)(&format!("udp receive failed: {e}"));
                std::thread::sleep(POLL);
                continue;
            }
        };
        if let Err(r) = sh.accept_udp(&buf[..n]) {
            sh.refuse(peer, "udp", &r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collector_ids() {
        let tcp = |s: &str| Listen::Tcp(s.parse().unwrap());
        let udp = |s: &str| Listen::Udp(s.parse().unwrap());
        assert_eq!(
            default_collector_id(&[udp("10.0.0.1:9"), tcp("10.0.0.2:5400")]),
            "10.0.0.2:5400"
        );
        assert_eq!(default_collector_id(&[udp("[fd00::1]:7")]), "fd00::1:7");
        // An unspecified address stands for the host: its name, so two hosts differ.
        let any = default_collector_id(&[tcp("0.0.0.0:5400")]);
        assert!(
            any.ends_with(":5400") && !any.starts_with("0.0.0.0"),
            "{any}"
        );
        assert!(check_collector_id("col-a").is_ok());
        for bad in ["", "has space", &"x".repeat(256)] {
            assert!(check_collector_id(bad).is_err(), "{bad}");
        }
    }
}
