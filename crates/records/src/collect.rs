//! The collector (seed 001's "application box"): receives record batches over TCP and UDP, checks them
//! ([`crate::batch::open`] with the shared key, then [`ReplayGuard`]), appends them to the spool and, on TCP,
//! acks them once they are on disk: a connection reads the batches that are already waiting in its socket
//! (up to [`ACK_RUN_MAX`]), appends them, makes them durable with one fdatasync and acks the last one (an
//! ack covers every batch up to its seq on that connection).
//!
//! Threads: one acceptor per TCP listener (a thread per connection, at most `max_connections`), one
//! receiver per UDP socket; the owner calls [`Collector::tick`] for time rotation. Every buffer is bounded
//! (one batch per connection/socket). A batch that fails any check is counted by reason and logged at most
//! once per second per peer address and transport; a TCP peer that sends one is disconnected. Nothing of it is stored.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::antireplay::{Rejected, ReplayGuard, DEFAULT_MAX_SKEW};
use crate::archive::{Archive, ArchiveConfig, ArchiveReport, ConvertedFile, Events};
use crate::batch::{self, batch_len, BatchError, Key, HEADER_LEN, MAX_BATCH_LEN};

/// How often blocked receivers look at the stop flag.
const POLL: Duration = Duration::from_millis(200);
/// Batches a connection appends before it syncs and acks them, even when more are waiting.
pub const ACK_RUN_MAX: usize = 64;

/// One address to receive on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// Batches back to back on TCP connections, acked.
    Tcp(SocketAddr),
    /// One batch per datagram, no acks.
    Udp(SocketAddr),
}

impl FromStr for Listen {
    type Err = String;
    /// `tcp://ADDR:PORT` or `udp://ADDR:PORT` (ADDR may be a host name or `[v6]`).
    fn from_str(s: &str) -> Result<Listen, String> {
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            format!("`{s}`: write tcp://ADDR:PORT or udp://ADDR:PORT, e.g. tcp://0.0.0.0:5400")
        })?;
        let addr = rest
            .to_socket_addrs()
            .map_err(|e| format!("`{s}`: {e} (write ADDR:PORT, e.g. 0.0.0.0:5400)"))?
            .next()
            .ok_or_else(|| format!("`{s}`: the name has no address"))?;
        match scheme {
            "tcp" => Ok(Listen::Tcp(addr)),
            "udp" => Ok(Listen::Udp(addr)),
            other => Err(format!(
                "`{s}`: unknown transport `{other}` (use tcp or udp)"
            )),
        }
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "tcp://{a}"),
            Listen::Udp(a) => write!(f, "udp://{a}"),
        }
    }
}

/// Everything a collector needs.
#[derive(Clone)]
pub struct CollectorConfig {
    /// Addresses to receive on (port 0 picks a free port; see [`Collector::local_addrs`]).
    pub listen: Vec<Listen>,
    /// Output directory and rotation.
    pub archive: ArchiveConfig,
    /// The shared key.
    pub key: Key,
    /// Allowed difference between a batch's sent time and our clock (replay freshness).
    pub max_skew: Duration,
    /// Probe streams tracked by the replay guard at once.
    pub max_streams: usize,
    /// TCP connections served at once; more are accepted and closed at once.
    pub max_connections: usize,
    /// A TCP connection that sends nothing for this long is closed (frees its slot).
    pub idle_timeout: Duration,
    /// Socket receive buffer asked for each UDP socket (absorbs bursts while the spool is written).
    pub udp_rcvbuf: usize,
    /// Event lines (recovery, rotation, rejected input).
    pub events: Events,
}

impl CollectorConfig {
    /// Defaults: 120 s skew, 4096 streams, 64 connections, 10 min idle, 8 MiB UDP buffers.
    pub fn new(listen: Vec<Listen>, archive: ArchiveConfig, key: Key, events: Events) -> Self {
        CollectorConfig {
            listen,
            archive,
            key,
            max_skew: DEFAULT_MAX_SKEW,
            max_streams: 4096,
            max_connections: 64,
            idle_timeout: Duration::from_secs(600),
            udp_rcvbuf: 8 << 20,
            events,
        }
    }
}

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
    /// TCP connections open now.
    pub connections_open: u64,
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

/// Guard + archive + per-stream counters: one lock per batch keeps seq accounting and the spool in step.
struct State {
    guard: ReplayGuard,
    archive: Option<Archive>,
    streams: BTreeMap<(u64, u32), StreamReport>,
}

struct Shared {
    key: Key,
    stop: AtomicBool,
    state: Mutex<State>,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    /// Last log line per peer address and transport (rate limit: one per second each).
    logged: Mutex<HashMap<(IpAddr, &'static str), Instant>>,
    connections_open: AtomicUsize,
    connections: AtomicU64,
    workers: Mutex<Vec<JoinHandle<()>>>,
    cfg: CollectorConfig,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking receiver thread must not take the collector down with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why one batch was refused.
enum Refusal {
    Batch(BatchError),
    Replay(Rejected),
    Storage(io::Error),
    Other(&'static str, String),
}

impl Refusal {
    fn reason(&self) -> &'static str {
        match self {
            Refusal::Batch(e) => e.reason(),
            Refusal::Replay(r) => r.reason(),
            Refusal::Storage(_) => "storage",
            Refusal::Other(r, _) => r,
        }
    }
    fn message(&self) -> String {
        match self {
            Refusal::Batch(e) => e.to_string(),
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

    /// Checks and stores one batch; returns its seq (to ack) and its number in the archive (to sync).
    fn accept(&self, buf: &[u8]) -> Result<(u64, u64), Refusal> {
        let view = batch::open(buf, &self.key).map_err(Refusal::Batch)?;
        let h = *view.header();
        let mut st = lock(&self.state);
        let now = batch::unix_now_ns();
        let st = &mut *st;
        let gap = match st
            .guard
            .check(h.probe_id, h.stream_id, h.seq, h.sent_unix_ns, now)
        {
            Ok(g) => g,
            Err(r) => {
                if let Rejected::Duplicate { .. } = r {
                    if let Some(s) = st.streams.get_mut(&(h.probe_id, h.stream_id)) {
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
        let s = st
            .streams
            .entry((h.probe_id, h.stream_id))
            .or_insert(StreamReport {
                probe_id: h.probe_id,
                stream_id: h.stream_id,
                ..StreamReport::default()
            });
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
    fn sync_and_ack(&self, c: &mut TcpStream, peer: SocketAddr, upto: u64, seq: u64) -> bool {
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
        c.write_all(&batch::ack(seq)).is_ok()
    }

    /// Counts a refusal and logs it (at most once per second per peer address).
    fn refuse(&self, peer: SocketAddr, via: &'static str, r: &Refusal) {
        *lock(&self.rejected).entry(r.reason()).or_insert(0) += 1;
        let now = Instant::now();
        let mut logged = lock(&self.logged);
        if logged.len() > 4096 {
            // Bounded: a flood from many addresses forgets old entries (and logs a little more).
            logged.retain(|_, t| now.duration_since(*t) < Duration::from_secs(1));
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
        if cfg.listen.is_empty() {
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
        let (archive, recovered) = Archive::open(cfg.archive.clone(), Arc::clone(&cfg.events))?;
        let shared = Arc::new(Shared {
            key: cfg.key.clone(),
            stop: AtomicBool::new(false),
            state: Mutex::new(State {
                guard: ReplayGuard::new(cfg.max_skew, cfg.max_streams),
                archive: Some(archive),
                streams: BTreeMap::new(),
            }),
            rejected: Mutex::new(BTreeMap::new()),
            logged: Mutex::new(HashMap::new()),
            connections_open: AtomicUsize::new(0),
            connections: AtomicU64::new(0),
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
                    .spawn(move || accept_loop(sh, l))?,
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

    /// Spools of an earlier run converted at start.
    pub fn recovered(&self) -> &[ConvertedFile] {
        &self.recovered
    }

    /// Time-based rotation and eviction of idle replay state; call a few times per second.
    pub fn tick(&self) -> io::Result<()> {
        let mut st = lock(&self.shared.state);
        st.guard.evict_idle(batch::unix_now_ns());
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
        let streams: Vec<StreamReport> = st.streams.values().copied().collect();
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

/// Waits up to POLL for the listener to become readable.
fn wait_readable(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, POLL.as_millis() as i32) > 0 }
}

fn accept_loop(sh: Arc<Shared>, l: TcpListener) {
    while !sh.stopping() {
        if !wait_readable(l.as_raw_fd()) {
            continue;
        }
        let (conn, peer) = match l.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                // EMFILE and friends: say so, back off, keep serving the open connections.
                (sh.cfg.events)(&format!("accept failed: {e}"));
                std::thread::sleep(POLL);
                continue;
            }
        };
        sh.connections.fetch_add(1, Ordering::Relaxed);
        if sh.connections_open.load(Ordering::Relaxed) >= sh.cfg.max_connections {
            let r = Refusal::Other(
                "too_many_connections",
                format!(
                    "{} connections open (limit {}); closed",
                    sh.cfg.max_connections, sh.cfg.max_connections
                ),
            );
            sh.refuse(peer, "tcp", &r);
            drop(conn);
            continue;
        }
        sh.connections_open.fetch_add(1, Ordering::Relaxed);
        let sh2 = Arc::clone(&sh);
        let spawned = std::thread::Builder::new()
            .name("collect-conn".into())
            .spawn(move || {
                serve_connection(&sh2, conn, peer);
                sh2.connections_open.fetch_sub(1, Ordering::Relaxed);
            });
        let mut workers = lock(&sh.workers);
        workers.retain(|t| !t.is_finished());
        match spawned {
            Ok(t) => workers.push(t),
            Err(e) => {
                sh.connections_open.fetch_sub(1, Ordering::Relaxed);
                (sh.cfg.events)(&format!("cannot start a thread for {peer}: {e}"));
            }
        }
    }
}

/// How a read of a whole buffer ended.
enum Fill {
    Full,
    /// EOF before the first byte.
    Closed,
    /// EOF after `have` bytes.
    Short(usize),
    Stopped,
    Idle,
    /// Reset or another socket error: the peer is gone.
    Failed,
}

/// Reads exactly `buf.len()` bytes, looking at the stop flag between timeouts.
fn fill(sh: &Shared, c: &mut TcpStream, buf: &mut [u8], last_byte: &mut Instant) -> Fill {
    let mut have = 0;
    while have < buf.len() {
        match c.read(&mut buf[have..]) {
            Ok(0) if have == 0 => return Fill::Closed,
            Ok(0) => return Fill::Short(have),
            Ok(n) => {
                have += n;
                *last_byte = Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                if sh.stopping() {
                    return Fill::Stopped;
                }
                if last_byte.elapsed() >= sh.cfg.idle_timeout {
                    return Fill::Idle;
                }
            }
            Err(_) => return Fill::Failed,
        }
    }
    Fill::Full
}

/// True when the socket has bytes to read right now.
fn readable_now(c: &TcpStream) -> bool {
    let mut p = libc::pollfd {
        fd: c.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// Batches stored on one connection but not yet synced and acked.
#[derive(Default)]
struct Run {
    batches: usize,
    /// Archive number and seq of the last one.
    last: Option<(u64, u64)>,
}

fn serve_connection(sh: &Shared, mut c: TcpStream, peer: SocketAddr) {
    if c.set_read_timeout(Some(POLL)).is_err()
        || c.set_write_timeout(Some(Duration::from_secs(5))).is_err()
    {
        return;
    }
    let _ = c.set_nodelay(true);
    // One batch at most: the per-connection bound.
    let mut buf = vec![0u8; MAX_BATCH_LEN];
    let mut last_byte = Instant::now();
    let mut run = Run::default();
    // Acks what was stored before the connection ends (or before the next batch is waited for).
    let flush = |c: &mut TcpStream, run: &mut Run| -> bool {
        let Some((upto, seq)) = run.last.take() else {
            return true;
        };
        run.batches = 0;
        sh.sync_and_ack(c, peer, upto, seq)
    };
    loop {
        // Group commit: sync and ack once nothing more is waiting (or the run is long enough).
        if run.last.is_some()
            && (run.batches >= ACK_RUN_MAX || !readable_now(&c))
            && !flush(&mut c, &mut run)
        {
            return;
        }
        let hdr = match fill(sh, &mut c, &mut buf[..HEADER_LEN], &mut last_byte) {
            Fill::Full => HEADER_LEN,
            Fill::Closed | Fill::Stopped | Fill::Failed => {
                flush(&mut c, &mut run);
                return;
            }
            Fill::Idle => {
                (sh.cfg.events)(&format!("closing idle connection from {peer}"));
                return;
            }
            Fill::Short(have) => {
                flush(&mut c, &mut run);
                let r = Refusal::Batch(BatchError::Truncated {
                    need: HEADER_LEN,
                    have,
                });
                sh.refuse(peer, "tcp", &r);
                return;
            }
        };
        // Magic, version and length bound before reading on: garbage is refused after 64 bytes.
        let total = match batch_len(&buf[..hdr]) {
            Ok(n) => n,
            Err(e) => {
                flush(&mut c, &mut run);
                sh.refuse(peer, "tcp", &Refusal::Batch(e));
                return;
            }
        };
        match fill(sh, &mut c, &mut buf[HEADER_LEN..total], &mut last_byte) {
            Fill::Full => {}
            Fill::Closed => {
                flush(&mut c, &mut run);
                let r = Refusal::Batch(BatchError::Truncated {
                    need: total,
                    have: HEADER_LEN,
                });
                sh.refuse(peer, "tcp", &r);
                return;
            }
            Fill::Short(have) => {
                flush(&mut c, &mut run);
                let r = Refusal::Batch(BatchError::Truncated {
                    need: total,
                    have: HEADER_LEN + have,
                });
                sh.refuse(peer, "tcp", &r);
                return;
            }
            Fill::Stopped | Fill::Failed => {
                flush(&mut c, &mut run);
                return;
            }
            Fill::Idle => {
                flush(&mut c, &mut run);
                (sh.cfg.events)(&format!("closing connection from {peer}: batch stalled"));
                return;
            }
        }
        match sh.accept(&buf[..total]) {
            Ok((seq, number)) => {
                run.batches += 1;
                run.last = Some((number, seq));
            }
            Err(r) => {
                flush(&mut c, &mut run);
                sh.refuse(peer, "tcp", &r);
                return;
            }
        }
    }
}

fn udp_loop(sh: Arc<Shared>, s: UdpSocket) {
    // One datagram at most (65507 bytes of UDP payload < MAX_BATCH_LEN + 1).
    let mut buf = vec![0u8; MAX_BATCH_LEN + 1];
    while !sh.stopping() {
        let (n, peer) = match s.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                (sh.cfg.events)(&format!("udp receive failed: {e}"));
                std::thread::sleep(POLL);
                continue;
            }
        };
        if let Err(r) = sh.accept(&buf[..n]) {
            sh.refuse(peer, "udp", &r);
        }
    }
}
