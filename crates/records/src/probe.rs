//! The probe side: capture threads fill batches ([`Batcher`]); one sender thread seals them with each
//! collector's sequence number and sends them over TCP (acked, re-sent elsewhere on failure) or UDP.
//!
//! ```text
//!  capture thread ─ Batcher (record → BatchBuilder) ─► bounded queue ─► sender thread ─┬─► collector 0 (tcp/udp)
//!  capture thread ─ Batcher ──────────────────────────┘  (full: drop, count)          └─► collector 1 ...
//! ```
//!
//! The capture threads never block on the network: when the queue is full the batch's records are dropped
//! and counted (`queue_drops`). Striping: `batch` sends each batch to the next live collector in turn;
//! `flow` keeps a builder per collector and puts each record in the builder of its flow's collector (a
//! symmetric 5-tuple hash, so both directions of a flow go to the same place) while that collector is live.
//!
//! TCP: a connection starts with the handshake of [`crate::auth`] (inside TLS when configured), which names
//! the collector's id (every batch tag covers it) and binds acks to both sides' nonces. Every batch stays in
//! the collector's unacked queue until an ack whose tag verifies arrives; an ack that does not verify is
//! counted (`bad_acks`) and the connection dropped, its batches re-sent like any failure's. A collector that
//! refuses, resets or does not ack within `ack_timeout` is marked down; its unacked batches are resealed with
//! another live collector's sequence number and re-sent there; the dead one is retried with exponential
//! backoff. Batches with nowhere to go wait in a bounded pending queue; only when that is full are records
//! dropped (and counted on the collector they were meant for). Sequence numbers continue across reconnects,
//! so a collector that stayed up never sees a number twice.
//!
//! UDP: one batch per datagram sized to the path MTU (IP_MTU of the connected socket); no acks, so loss shows
//! as sequence gaps at the collector. A send error (ICMP port unreachable) marks the collector down for a
//! backoff and the batch goes to another live collector.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wire::record::Record;

use crate::auth::{self, AckError, Session};
use crate::batch::{self, Batch, BatchBuilder, Key, HEADER_LEN, MAX_PAYLOAD, TAG_LEN};
use crate::kafka::{self, KafkaDest, KafkaSender};
use crate::tls::Stream;

/// Largest UDP payload (IPv4).
const UDP_MAX_DATAGRAM: usize = 65507;
/// Batches kept for re-sending per TCP collector (≤ 16 MiB of 64 KiB batches).
pub const DEFAULT_UNACKED: usize = 256;
/// Batches waiting for any live collector before records are dropped.
const PENDING_MAX: usize = 256;
/// Backoff between reconnects: starts here, doubles, capped at BACKOFF_MAX.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A TCP connect attempt blocks the sender at most this long.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Sent batch buffers kept for reuse by the batchers.
const POOL_MAX: usize = 64;

/// How a collector is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Batches back to back on a stream, each acked.
    Tcp,
    /// One batch per datagram, no acks.
    Udp,
}

/// One `--records` destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dest {
    /// TCP or UDP.
    pub transport: Transport,
    /// As written (`tcp://host:port`), for messages.
    pub name: String,
    /// Resolved address.
    pub addr: SocketAddr,
}

impl Dest {
    /// Parses `tcp://HOST:PORT`, `udp://HOST:PORT` or `HOST:PORT` (TCP) and resolves it.
    pub fn parse(s: &str) -> Result<Dest, ProbeError> {
        let bad = |why: &str| ProbeError::BadDest {
            dest: s.to_string(),
            why: why.to_string(),
        };
        let (transport, rest) = if let Some(r) = s.strip_prefix("tcp://") {
            (Transport::Tcp, r)
        } else if let Some(r) = s.strip_prefix("udp://") {
            (Transport::Udp, r)
        } else if s.contains("://") {
            return Err(bad("only tcp:// and udp:// are supported"));
        } else {
            (Transport::Tcp, s)
        };
        let rest = rest.trim_end_matches('/');
        if !rest.contains(':') || rest.ends_with(':') {
            return Err(bad("missing :PORT"));
        }
        let addr = rest
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve: {e}")))?
            .next()
            .ok_or_else(|| bad("name has no address"))?;
        let scheme = match transport {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        };
        Ok(Dest {
            transport,
            name: format!("{scheme}://{rest}"),
            addr,
        })
    }
}

/// How records are spread over collectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stripe {
    /// Each batch to the next live collector.
    Batch,
    /// Each flow (symmetric 5-tuple hash) to one collector.
    Flow,
}

impl std::str::FromStr for Stripe {
    type Err = ProbeError;
    fn from_str(s: &str) -> Result<Stripe, ProbeError> {
        match s {
            "batch" => Ok(Stripe::Batch),
            "flow" => Ok(Stripe::Flow),
            _ => Err(ProbeError::BadStripe(s.to_string())),
        }
    }
}

/// Errors starting a probe (bad configuration; unreachable collectors are not errors).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A destination could not be parsed or resolved.
    #[error(
        "bad --records destination '{dest}': {why} (expected tcp://HOST:PORT or udp://HOST:PORT)"
    )]
    BadDest {
        /// As given.
        dest: String,
        /// What was wrong.
        why: String,
    },
    /// Unknown `--stripe`.
    #[error("unknown --stripe '{0}' (expected batch or flow)")]
    BadStripe(String),
    /// No destination.
    #[error("--records needs at least one destination")]
    NoDest,
    /// A socket could not be created.
    #[error("cannot open a socket for {dest}: {source}")]
    Socket {
        /// The destination.
        dest: String,
        /// The error.
        source: io::Error,
    },
}

/// Probe settings.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    /// Collectors.
    pub dests: Vec<Dest>,
    /// Shared key.
    pub key: Key,
    /// Striping.
    pub stripe: Stripe,
    /// `--probe-id`.
    pub probe_id: u64,
    /// Random per start unless set (tests).
    pub stream_id: u32,
    /// A batch older than this is sent even if not full (`--records-flush`).
    pub flush: Duration,
    /// Filled batches queued for the sender before capture threads drop.
    pub queue_batches: usize,
    /// A TCP collector that has not acked the oldest batch for this long is failed over.
    pub ack_timeout: Duration,
    /// Unacked batches kept per TCP collector.
    pub unacked_max: usize,
    /// TCP batch payload bytes (≤ 65536).
    pub tcp_payload: usize,
    /// No messages on stderr.
    pub quiet: bool,
    /// TLS to TCP collectors (their certificates are checked against the host names of `dests`).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Produce to Kafka instead of sending to `dests` (which must then be empty).
    pub kafka: Option<KafkaDest>,
}

impl ProbeConfig {
    /// Defaults: batch striping, 100 ms flush, 1024 queued batches, 2 s ack timeout, 64 KiB TCP batches.
    pub fn new(dests: Vec<Dest>, key: Key) -> ProbeConfig {
        ProbeConfig {
            dests,
            key,
            stripe: Stripe::Batch,
            probe_id: 0,
            stream_id: rand::random(),
            flush: Duration::from_millis(100),
            queue_batches: 1024,
            ack_timeout: Duration::from_secs(2),
            unacked_max: DEFAULT_UNACKED,
            tcp_payload: MAX_PAYLOAD,
            quiet: false,
            tls: None,
            kafka: None,
        }
    }
}

/// Live counters of one collector (records, not batches, unless named so).
#[derive(Debug, Default)]
pub(crate) struct CollectorCounters {
    pub(crate) batches_sent: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) resent: AtomicU64,
    pub(crate) acked: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) unacked: AtomicU64,
    pub(crate) failures: AtomicU64,
    connects: AtomicU64,
    bad_acks: AtomicU64,
    handshake_failures: AtomicU64,
    pub(crate) up: AtomicBool,
}

/// Counters of one collector.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CollectorStats {
    /// `tcp://host:port`.
    pub dest: String,
    /// Batches written to it.
    pub batches_sent: u64,
    /// Records written to it (first sends and re-sends).
    pub sent: u64,
    /// Of `sent`, records re-sent here after another collector failed.
    pub resent: u64,
    /// Records it acked (TCP).
    pub acked: u64,
    /// Records meant for it that were dropped (no live collector and pending queue full, or send error).
    pub dropped: u64,
    /// Records sent but not acked (when the probe ended: may or may not be stored).
    pub unacked: u64,
    /// Times it failed (refused, reset, ack timeout, send error).
    pub failures: u64,
    /// Successful connects (handshake done).
    pub connects: u64,
    /// Acks whose tag did not verify (forged or replayed); each dropped the connection.
    pub bad_acks: u64,
    /// Connections whose handshake failed (wrong key, old collector, TLS refused, timeout).
    pub handshake_failures: u64,
    /// Connected now.
    pub up: bool,
}

/// Counters of the whole probe.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProbeStats {
    /// Records built from packets.
    pub records: u64,
    /// Records dropped because the sender's queue was full (capture threads never wait).
    pub queue_drops: u64,
    /// Batches handed to the sender.
    pub batches: u64,
    /// Records waiting for a live collector now.
    pub pending: u64,
    /// Per collector, in `--records` order.
    pub collectors: Vec<CollectorStats>,
}

impl ProbeStats {
    /// Records that reached a collector for sure: acked (TCP) or sent (UDP, delivery unknown).
    pub fn delivered(&self, dests: &[Dest]) -> u64 {
        // Kafka has no `dests`: its one entry counts delivery reports, like TCP acks.
        self.collectors
            .iter()
            .enumerate()
            .map(|(i, c)| match dests.get(i).map(|d| d.transport) {
                Some(Transport::Udp) => c.sent,
                _ => c.acked,
            })
            .sum()
    }
}

#[derive(Debug, Default)]
pub(crate) struct Shared {
    records: AtomicU64,
    queue_drops: AtomicU64,
    batches: AtomicU64,
    pub(crate) pending: AtomicU64,
    pub(crate) collectors: Vec<CollectorCounters>,
    names: Vec<String>,
    pool: Mutex<Vec<Batch>>,
}

impl Shared {
    fn snapshot(&self) -> ProbeStats {
        ProbeStats {
            records: self.records.load(Relaxed),
            queue_drops: self.queue_drops.load(Relaxed),
            batches: self.batches.load(Relaxed),
            pending: self.pending.load(Relaxed),
            collectors: self
                .collectors
                .iter()
                .zip(&self.names)
                .map(|(c, n)| CollectorStats {
                    dest: n.clone(),
                    batches_sent: c.batches_sent.load(Relaxed),
                    sent: c.sent.load(Relaxed),
                    resent: c.resent.load(Relaxed),
                    acked: c.acked.load(Relaxed),
                    dropped: c.dropped.load(Relaxed),
                    unacked: c.unacked.load(Relaxed),
                    failures: c.failures.load(Relaxed),
                    connects: c.connects.load(Relaxed),
                    bad_acks: c.bad_acks.load(Relaxed),
                    handshake_failures: c.handshake_failures.load(Relaxed),
                    up: c.up.load(Relaxed),
                })
                .collect(),
        }
    }
}

/// Reads a probe's counters (see [`Probe::stats_handle`]).
#[derive(Clone, Debug)]
pub struct StatsHandle(Arc<Shared>);

impl StatsHandle {
    /// Counters now.
    pub fn snapshot(&self) -> ProbeStats {
        self.0.snapshot()
    }
}

/// A filled batch and, with flow striping, the collector it belongs to.
pub(crate) struct Msg {
    pub(crate) batch: Batch,
    pub(crate) to: Option<usize>,
}

/// A running probe: the sender thread and its counters. Make one [`Batcher`] per capture thread.
pub struct Probe {
    tx: Option<SyncSender<Msg>>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
    capacities: Vec<usize>,
    stripe: Stripe,
    probe_id: u64,
    stream_id: u32,
    flush: Duration,
    /// Kafka: each builder (partition) is its own stream, `stream_id + i`.
    stream_per_builder: bool,
}

impl Probe {
    /// Opens the sockets that need no peer (UDP, to learn the path MTU) and starts the sender thread, which
    /// connects to TCP collectors (an unreachable one is retried, never an error here).
    pub fn start(cfg: ProbeConfig) -> Result<Probe, ProbeError> {
        if let Some(k) = cfg.kafka.clone() {
            return Probe::start_kafka(cfg, k);
        }
        if cfg.dests.is_empty() {
            return Err(ProbeError::NoDest);
        }
        let mut links = Vec::new();
        let mut capacities = Vec::new();
        for d in &cfg.dests {
            let (link, cap) = match d.transport {
                Transport::Tcp => (Link::Tcp(None), cfg.tcp_payload.min(MAX_PAYLOAD)),
                Transport::Udp => {
                    let sock = udp_socket(d).map_err(|source| ProbeError::Socket {
                        dest: d.name.clone(),
                        source,
                    })?;
                    let cap = udp_payload_capacity(&sock, d.addr);
                    (Link::Udp(sock), cap)
                }
            };
            links.push(link);
            capacities.push(cap);
        }
        let shared = Arc::new(Shared {
            collectors: cfg
                .dests
                .iter()
                .map(|_| CollectorCounters::default())
                .collect(),
            names: cfg.dests.iter().map(|d| d.name.clone()).collect(),
            ..Shared::default()
        });
        let now = Instant::now();
        let sender = Sender {
            collectors: cfg
                .dests
                .iter()
                .zip(links)
                .zip(&capacities)
                .map(|((d, link), &cap)| Collector {
                    dest: d.clone(),
                    link,
                    capacity: cap,
                    seq: 0,
                    unacked: VecDeque::new(),
                    ack_buf: [0; auth::ACK_LEN],
                    ack_fill: 0,
                    retry_at: now,
                    backoff: BACKOFF_MIN,
                    warned: false,
                })
                .collect(),
            pending: VecDeque::new(),
            next: 0,
            key: cfg.key.clone(),
            probe_id: cfg.probe_id,
            tls: cfg.tls.clone(),
            ack_timeout: cfg.ack_timeout,
            unacked_max: cfg.unacked_max.max(1),
            shared: Arc::clone(&shared),
            quiet: cfg.quiet,
        };
        let stripe = cfg.stripe;
        Probe::launch(
            &cfg,
            "ringcap-records",
            shared,
            capacities,
            stripe,
            false,
            move |rx| sender.run(rx),
        )
    }

    /// Kafka: connects now (the partition count decides the batch builders; an unreachable broker or a
    /// missing topic is an error at start, unlike a TCP collector), then starts the producing thread.
    fn start_kafka(cfg: ProbeConfig, dest: KafkaDest) -> Result<Probe, ProbeError> {
        let bad = |why: String| ProbeError::BadDest {
            dest: dest.name(),
            why,
        };
        if !cfg.dests.is_empty() {
            return Err(bad(
                "a kafka:// destination cannot be mixed with tcp:// or udp:// collectors".into(),
            ));
        }
        let rt = kafka::runtime().map_err(|e| bad(e.to_string()))?;
        let connect_timeout = cfg.ack_timeout.max(Duration::from_secs(5));
        let (parts, n) = rt
            .block_on(async {
                let (client, n) = kafka::connect(&dest, connect_timeout).await?;
                let parts = kafka::partition_clients(&client, &dest.topic, n).await?;
                Ok::<_, String>((parts, n))
            })
            .map_err(bad)?;
        let shared = Arc::new(Shared {
            collectors: vec![CollectorCounters::default()],
            names: vec![dest.name()],
            ..Shared::default()
        });
        let sender = KafkaSender {
            dest: dest.clone(),
            key: cfg.key.clone(),
            rt,
            parts,
            ack_timeout: cfg.ack_timeout,
            shared: Arc::clone(&shared),
            quiet: cfg.quiet,
        };
        // One builder per partition, each a full-size batch (the broker's default message limit is 1 MB).
        let capacities = vec![cfg.tcp_payload.min(MAX_PAYLOAD); n];
        Probe::launch(
            &cfg,
            "ringcap-kafka",
            shared,
            capacities,
            Stripe::Flow,
            true,
            move |rx| sender.run(rx),
        )
    }

    /// Starts the thread that sends what the batchers queue (`run` drains the channel) and the probe that
    /// feeds it: the same for collectors and for Kafka.
    fn launch(
        cfg: &ProbeConfig,
        thread_name: &str,
        shared: Arc<Shared>,
        capacities: Vec<usize>,
        stripe: Stripe,
        stream_per_builder: bool,
        run: impl FnOnce(mpsc::Receiver<Msg>) + Send + 'static,
    ) -> Result<Probe, ProbeError> {
        let (tx, rx) = mpsc::sync_channel(cfg.queue_batches.max(1));
        let thread = std::thread::Builder::new()
            .name(thread_name.into())
            .spawn(move || run(rx))
            .map_err(|source| ProbeError::Socket {
                dest: "sender thread".into(),
                source,
            })?;
        Ok(Probe {
            tx: Some(tx),
            thread: Some(thread),
            shared,
            capacities,
            stripe,
            probe_id: cfg.probe_id,
            stream_id: cfg.stream_id,
            flush: cfg.flush,
            stream_per_builder,
        })
    }

    /// A batcher for one capture thread.
    pub fn batcher(&self) -> Batcher {
        let builders = match self.stripe {
            // Any collector may get the batch: size it for the smallest.
            Stripe::Batch => vec![BatchBuilder::new(
                *self
                    .capacities
                    .iter()
                    .min()
                    .expect("at least one collector"),
            )],
            Stripe::Flow => self
                .capacities
                .iter()
                .map(|&c| BatchBuilder::new(c))
                .collect(),
        };
        Batcher {
            oldest: vec![None; builders.len()],
            builders,
            tx: self.tx.clone().expect("probe not finished"),
            shared: Arc::clone(&self.shared),
            probe_id: self.probe_id,
            stream_id: self.stream_id,
            flush: self.flush,
            records: 0,
            stream_per_builder: self.stream_per_builder,
        }
    }

    /// Payload bytes per batch for each collector (64 KiB for TCP, path MTU based for UDP).
    pub fn capacities(&self) -> &[usize] {
        &self.capacities
    }

    /// Counters now.
    pub fn stats(&self) -> ProbeStats {
        self.shared.snapshot()
    }

    /// A handle that reads the counters from another thread (metrics), also after the probe is moved.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(Arc::clone(&self.shared))
    }

    /// Waits for the sender to send everything queued and collect acks (up to the ack timeout), after
    /// every [`Batcher`] was dropped or finished; returns the final counters.
    pub fn finish(mut self) -> ProbeStats {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.snapshot()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Symmetric flow hash of a record: both directions of a 5-tuple give the same value.
pub fn flow_hash(r: &Record) -> u64 {
    let (a, b): ([u8; 16], [u8; 16]) = match r.ip_version {
        4 => {
            let mut a = [0u8; 16];
            let mut b = [0u8; 16];
            a[..4].copy_from_slice(&r.src_ip4);
            b[..4].copy_from_slice(&r.dst_ip4);
            (a, b)
        }
        6 => (r.src_ip6, r.dst_ip6),
        _ => {
            let mut a = [0u8; 16];
            let mut b = [0u8; 16];
            a[..6].copy_from_slice(&r.src_mac);
            b[..6].copy_from_slice(&r.dst_mac);
            (a, b)
        }
    };
    let ea = (u128::from_be_bytes(a), r.src_port);
    let eb = (u128::from_be_bytes(b), r.dst_port);
    let (lo, hi) = if ea <= eb { (ea, eb) } else { (eb, ea) };
    // Multiply-xorshift mixing (splitmix64 finaliser); not cryptographic, only spreading.
    let mut h = r.protocol as u64;
    for w in [
        lo.0 as u64,
        (lo.0 >> 64) as u64,
        hi.0 as u64,
        (hi.0 >> 64) as u64,
        ((lo.1 as u64) << 16) | hi.1 as u64,
    ] {
        h = mix(h ^ w);
    }
    h
}

#[inline]
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// Fills batches on a capture thread and hands them to the sender without ever blocking.
pub struct Batcher {
    builders: Vec<BatchBuilder>,
    /// When the first record of each builder's current batch arrived.
    oldest: Vec<Option<Instant>>,
    tx: SyncSender<Msg>,
    shared: Arc<Shared>,
    probe_id: u64,
    stream_id: u32,
    flush: Duration,
    /// Records pushed, added to the shared counter once per batch (not per packet).
    records: u64,
    stream_per_builder: bool,
}

impl Batcher {
    /// Adds one record (hot path: an encode into the current batch; a queue hand-off when it is full).
    #[inline]
    pub fn push(&mut self, r: &Record) {
        let i = if self.builders.len() == 1 {
            0
        } else {
            (flow_hash(r) % self.builders.len() as u64) as usize
        };
        self.records += 1;
        if !self.builders[i].push(r) {
            self.send(i, false);
            // An empty builder always has room for one record (capacity ≥ 80).
            let _ = self.builders[i].push(r);
        }
        if self.oldest[i].is_none() {
            // One clock read per batch, not per packet.
            self.oldest[i] = Some(Instant::now());
        }
    }

    /// Sends batches older than the flush interval; call after each ring block (or poll timeout).
    pub fn tick(&mut self, now: Instant) {
        for i in 0..self.builders.len() {
            if self.oldest[i].is_some_and(|t| now.duration_since(t) >= self.flush) {
                self.send(i, false);
            }
        }
    }

    /// Sends every non-empty batch, waiting for queue room (end of capture: nothing is dropped here).
    pub fn finish(mut self) {
        self.flush_all(true);
    }

    fn flush_all(&mut self, wait: bool) {
        for i in 0..self.builders.len() {
            self.send(i, wait);
        }
        self.shared
            .records
            .fetch_add(std::mem::take(&mut self.records), Relaxed);
    }

    fn send(&mut self, i: usize, wait: bool) {
        self.oldest[i] = None;
        if self.builders[i].is_empty() {
            return;
        }
        if let Ok(mut pool) = self.shared.pool.try_lock() {
            if let Some(b) = pool.pop() {
                self.builders[i].recycle(b);
            }
        }
        let stream_id = if self.stream_per_builder {
            self.stream_id.wrapping_add(i as u32)
        } else {
            self.stream_id
        };
        let batch = self.builders[i].take(self.probe_id, stream_id);
        let count = batch.record_count() as u64;
        self.shared
            .records
            .fetch_add(std::mem::take(&mut self.records), Relaxed);
        let to = (self.builders.len() > 1).then_some(i);
        let msg = Msg { batch, to };
        let result = if wait {
            self.tx.send(msg).map_err(|e| e.0)
        } else {
            self.tx.try_send(msg).map_err(|e| match e {
                TrySendError::Full(m) | TrySendError::Disconnected(m) => m,
            })
        };
        match result {
            Ok(()) => {
                self.shared.batches.fetch_add(1, Relaxed);
            }
            Err(m) => {
                self.shared.queue_drops.fetch_add(count, Relaxed);
                self.builders[i].recycle(m.batch);
            }
        }
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        self.flush_all(true);
    }
}

/// An authenticated TCP connection (non-blocking after the handshake).
struct Conn {
    stream: Stream,
    session: Session,
}

enum Link {
    /// Connected and authenticated stream, or none while down.
    Tcp(Option<Box<Conn>>),
    /// Connected datagram socket.
    Udp(UdpSocket),
}

struct Unacked {
    seq: u64,
    batch: Batch,
    sent_at: Instant,
}

struct Collector {
    dest: Dest,
    link: Link,
    capacity: usize,
    seq: u64,
    unacked: VecDeque<Unacked>,
    ack_buf: [u8; auth::ACK_LEN],
    ack_fill: usize,
    /// Down until then (UDP after a send error, TCP while disconnected).
    retry_at: Instant,
    backoff: Duration,
    /// Said once that it is down (until it comes back).
    warned: bool,
}

impl Collector {
    fn is_up(&self, now: Instant) -> bool {
        match &self.link {
            Link::Tcp(s) => s.is_some(),
            Link::Udp(_) => now >= self.retry_at,
        }
    }
}

/// A batch that must go somewhere: first send or re-send (with the collector it left).
struct Outgoing {
    batch: Batch,
    to: Option<usize>,
    resend_from: Option<usize>,
}

struct Sender {
    collectors: Vec<Collector>,
    /// Batches waiting for a live collector (bounded by PENDING_MAX).
    pending: VecDeque<Outgoing>,
    /// Round-robin cursor.
    next: usize,
    key: Key,
    /// Also the key id announced in the handshake.
    probe_id: u64,
    tls: Option<Arc<rustls::ClientConfig>>,
    ack_timeout: Duration,
    unacked_max: usize,
    shared: Arc<Shared>,
    quiet: bool,
}

impl Sender {
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        loop {
            self.service(Instant::now());
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(m) => self.dispatch(Outgoing {
                    batch: m.batch,
                    to: m.to,
                    resend_from: None,
                }),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        // Drain: everything handed over is sent; wait for acks (re-sending on failures) up to a deadline.
        let deadline = Instant::now() + self.ack_timeout * 2;
        while Instant::now() < deadline
            && (!self.pending.is_empty() || self.collectors.iter().any(|c| !c.unacked.is_empty()))
        {
            self.service(Instant::now());
            std::thread::sleep(Duration::from_millis(2));
        }
        for i in 0..self.collectors.len() {
            let n: u64 = self.collectors[i]
                .unacked
                .iter()
                .map(|u| u.batch.record_count() as u64)
                .sum();
            self.counters(i).unacked.store(n, Relaxed);
        }
        let stuck: Vec<Outgoing> = self.pending.drain(..).collect();
        for o in stuck {
            self.drop_batch(o);
        }
    }

    fn counters(&self, i: usize) -> &CollectorCounters {
        &self.shared.collectors[i]
    }

    /// Reconnects, reads acks, fails collectors whose oldest batch waited too long, flushes pending.
    fn service(&mut self, now: Instant) {
        for i in 0..self.collectors.len() {
            if matches!(self.collectors[i].link, Link::Tcp(None))
                && now >= self.collectors[i].retry_at
            {
                self.connect(i);
            }
            if let Err(why) = self.read_acks(i) {
                self.fail(i, &why);
                continue;
            }
            let c = &self.collectors[i];
            if c.unacked
                .front()
                .is_some_and(|u| now.duration_since(u.sent_at) > self.ack_timeout)
            {
                let why = format!("no ack within {:?}", self.ack_timeout);
                self.fail(i, &why);
            }
        }
        while !self.pending.is_empty() && self.any_up(now) {
            let o = self.pending.pop_front().expect("not empty");
            self.shared
                .pending
                .store(self.pending.len() as u64, Relaxed);
            self.dispatch(o);
        }
    }

    fn any_up(&self, now: Instant) -> bool {
        self.collectors.iter().any(|c| c.is_up(now))
    }

    fn connect(&mut self, i: usize) {
        let addr = self.collectors[i].dest.addr;
        let host = tls_host(&self.collectors[i].dest.name);
        let tls = self.tls.as_ref().map(|c| (c, host.as_str()));
        // TCP connected: an error after that is the handshake's (wrong key, old collector, TLS refused).
        let mut tcp_connected = false;
        let result = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                tcp_connected = true;
                open_conn(s, tls, &self.key, self.probe_id, self.ack_timeout)
            });
        let c = &mut self.collectors[i];
        match result {
            Ok(conn) => {
                c.link = Link::Tcp(Some(Box::new(conn)));
                c.backoff = BACKOFF_MIN;
                c.ack_fill = 0;
                if c.warned && !self.quiet {
                    log::info!("records: connected to collector {}", c.dest.name);
                }
                c.warned = false;
                self.shared.collectors[i].connects.fetch_add(1, Relaxed);
                self.shared.collectors[i].up.store(true, Relaxed);
            }
            Err(e) => {
                if tcp_connected {
                    self.shared.collectors[i]
                        .handshake_failures
                        .fetch_add(1, Relaxed);
                }
                if !c.warned && !self.quiet {
                    let what = if tcp_connected {
                        "refused the handshake"
                    } else {
                        "unreachable"
                    };
                    log::warn!(
                        "records: collector {} {what} ({e}); retrying with backoff up to {:?}, records go to the others meanwhile",
                        c.dest.name, BACKOFF_MAX
                    );
                }
                c.warned = true;
                c.retry_at = Instant::now() + c.backoff;
                c.backoff = (c.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }

    /// Reads whatever acks arrived (non-blocking) and releases acked batches. An ack whose tag does not
    /// verify releases nothing: it is counted and the connection dropped (its batches are re-sent).
    fn read_acks(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.collectors[i];
        let Link::Tcp(Some(conn)) = &mut c.link else {
            return Ok(());
        };
        loop {
            match conn.stream.read(&mut c.ack_buf[c.ack_fill..]) {
                Ok(0) => {
                    // A refusal is 8 bytes, then the collector closes.
                    if c.ack_fill >= auth::ERROR_LEN {
                        if let Some(code) = auth::parse_error(&c.ack_buf[..c.ack_fill]) {
                            return Err(format!("the collector refused: {code}"));
                        }
                    }
                    return Err("connection closed by the collector".into());
                }
                Ok(n) => {
                    c.ack_fill += n;
                    if c.ack_fill < auth::ACK_LEN {
                        continue;
                    }
                    c.ack_fill = 0;
                    let seq = match conn.session.check_ack(&c.ack_buf) {
                        Ok(seq) => seq,
                        Err(e) => {
                            if e == AckError::BadTag {
                                self.shared.collectors[i].bad_acks.fetch_add(1, Relaxed);
                            }
                            return Err(e.to_string());
                        }
                    };
                    // Acks come in order on one stream; everything up to seq is stored.
                    while c.unacked.front().is_some_and(|u| u.seq <= seq) {
                        let u = c.unacked.pop_front().expect("front exists");
                        self.shared.collectors[i]
                            .acked
                            .fetch_add(u.batch.record_count() as u64, Relaxed);
                        give_back(&self.shared, u.batch);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Marks `i` down and sends its unacked batches elsewhere.
    fn fail(&mut self, i: usize, why: &str) {
        let c = &mut self.collectors[i];
        if !c.warned && !self.quiet {
            log::warn!(
                "records: collector {} failed ({why}); {} unacked batches go to other collectors",
                c.dest.name,
                c.unacked.len()
            );
        }
        c.warned = true;
        if let Link::Tcp(s) = &mut c.link {
            *s = None;
        }
        c.retry_at = Instant::now() + c.backoff;
        c.backoff = (c.backoff * 2).min(BACKOFF_MAX);
        let moved: Vec<Unacked> = c.unacked.drain(..).collect();
        self.shared.collectors[i].failures.fetch_add(1, Relaxed);
        self.shared.collectors[i].up.store(false, Relaxed);
        for u in moved {
            self.dispatch(Outgoing {
                batch: u.batch,
                to: None,
                resend_from: Some(i),
            });
        }
    }

    /// Picks a live collector for `o` (its own with flow striping, else round robin) and sends it there;
    /// queues it when none is live; drops it when the pending queue is full.
    fn dispatch(&mut self, mut o: Outgoing) {
        loop {
            let now = Instant::now();
            let size = o.batch.header().payload_len as usize;
            let fits = |c: &Collector| c.is_up(now) && c.capacity >= size;
            let target = match o.to {
                Some(t) if o.resend_from != Some(t) && fits(&self.collectors[t]) => Some(t),
                _ => {
                    let n = self.collectors.len();
                    (0..n)
                        .map(|k| (self.next + k) % n)
                        .find(|&k| Some(k) != o.resend_from && fits(&self.collectors[k]))
                }
            };
            let Some(t) = target else {
                if self.pending.len() >= PENDING_MAX {
                    let oldest = self.pending.pop_front().expect("full");
                    self.drop_batch(oldest);
                }
                // Back to its own collector is fine once the others are down too.
                o.resend_from = None;
                self.pending.push_back(o);
                self.shared
                    .pending
                    .store(self.pending.len() as u64, Relaxed);
                return;
            };
            if o.to.is_none() {
                self.next = (t + 1) % self.collectors.len();
            }
            match self.send_to(t, o) {
                Ok(()) => return,
                Err(back) => o = back, // t failed; try another
            }
        }
    }

    /// Seals with `t`'s next seq and writes it; on failure marks `t` down and returns the batch.
    fn send_to(&mut self, t: usize, mut o: Outgoing) -> Result<(), Outgoing> {
        // TCP: room in the unacked queue first (waits for acks, bounded by the ack timeout).
        if matches!(self.collectors[t].link, Link::Tcp(_)) {
            while self.collectors[t].unacked.len() >= self.unacked_max {
                if let Err(why) = self.wait_acks(t) {
                    self.fail(t, &why);
                    return Err(o);
                }
            }
        }
        let seq = self.collectors[t].seq;
        let count = o.batch.record_count() as u64;
        // TCP batches are bound to the collector id learnt in the handshake; UDP has none (empty id).
        let collector_id: &[u8] = match &self.collectors[t].link {
            Link::Tcp(Some(c)) => c.session.collector_id(),
            _ => b"",
        };
        let bytes_len = {
            let bytes = o
                .batch
                .seal(&self.key, collector_id, seq, batch::unix_now_ns());
            bytes.len()
        };
        let result = match &self.collectors[t].link {
            Link::Udp(s) => s.send(&o.batch.bytes()[..bytes_len]).map(|_| ()),
            Link::Tcp(_) => self.write_tcp(t, &o),
        };
        match result {
            Ok(()) => {
                self.collectors[t].seq += 1;
                let cc = &self.shared.collectors[t];
                cc.batches_sent.fetch_add(1, Relaxed);
                cc.sent.fetch_add(count, Relaxed);
                if o.resend_from.is_some() {
                    cc.resent.fetch_add(count, Relaxed);
                }
                match self.collectors[t].link {
                    Link::Tcp(_) => self.collectors[t].unacked.push_back(Unacked {
                        seq,
                        batch: o.batch,
                        sent_at: Instant::now(),
                    }),
                    Link::Udp(_) => give_back(&self.shared, o.batch),
                }
                Ok(())
            }
            Err(e) => {
                if matches!(self.collectors[t].link, Link::Udp(_)) {
                    let c = &mut self.collectors[t];
                    if !c.warned && !self.quiet {
                        log::warn!(
                            "records: sending to collector {} failed ({e}); retrying in {:?}",
                            c.dest.name,
                            c.backoff
                        );
                    }
                    c.warned = true;
                    c.retry_at = Instant::now() + c.backoff;
                    c.backoff = (c.backoff * 2).min(BACKOFF_MAX);
                    self.shared.collectors[t].failures.fetch_add(1, Relaxed);
                } else {
                    self.fail(t, &e.to_string());
                }
                // A first send that failed is re-sent from here; the seq it had is not used.
                if o.resend_from.is_none() {
                    o.resend_from = Some(t);
                }
                Err(o)
            }
        }
    }

    /// Writes a sealed batch on a non-blocking stream, reading acks while the socket buffer is full (so a
    /// collector blocked on sending acks cannot deadlock us); gives up after the ack timeout.
    fn write_tcp(&mut self, t: usize, o: &Outgoing) -> io::Result<()> {
        let bytes = o.batch.bytes();
        let deadline = Instant::now() + self.ack_timeout;
        let mut at = 0;
        // The last round only flushes what TLS still buffers (a no-op on plain TCP).
        while at < bytes.len() || self.tls.is_some() {
            let Link::Tcp(Some(conn)) = &mut self.collectors[t].link else {
                return Err(io::Error::new(io::ErrorKind::NotConnected, "down"));
            };
            let s = &mut conn.stream;
            // Some(bytes written), or None once the flush is done.
            let step = if at < bytes.len() {
                s.write(&bytes[at..]).map(Some)
            } else {
                s.flush().map(|_| None)
            };
            match step {
                Ok(None) => break,
                Ok(Some(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(Some(n)) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let fd = s.as_raw_fd();
                    if Instant::now() >= deadline {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "collector not reading (send buffer full for the ack timeout)",
                        ));
                    }
                    poll(fd, libc::POLLOUT | libc::POLLIN, 20);
                    self.read_acks(t).map_err(io::Error::other)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits (≤ 20 ms) for acks on `t`; error when it failed or the oldest batch passed the ack timeout.
    fn wait_acks(&mut self, t: usize) -> Result<(), String> {
        let c = &self.collectors[t];
        let Link::Tcp(Some(conn)) = &c.link else {
            return Err("disconnected".into());
        };
        let s = &conn.stream;
        if c.unacked
            .front()
            .is_some_and(|u| u.sent_at.elapsed() > self.ack_timeout)
        {
            return Err(format!("no ack within {:?}", self.ack_timeout));
        }
        poll(s.as_raw_fd(), libc::POLLIN, 20);
        self.read_acks(t)
    }

    fn drop_batch(&mut self, o: Outgoing) {
        let who = o.to.or(o.resend_from).unwrap_or(self.next);
        self.shared.collectors[who]
            .dropped
            .fetch_add(o.batch.record_count() as u64, Relaxed);
        give_back(&self.shared, o.batch);
    }
}

/// Connects the TLS layer (if any) and runs the handshake on a blocking socket bounded by `timeout`, then
/// makes the socket non-blocking for the sender loop.
fn open_conn(
    tcp: TcpStream,
    tls: Option<(&Arc<rustls::ClientConfig>, &str)>,
    key: &Key,
    probe_id: u64,
    timeout: Duration,
) -> Result<Conn, String> {
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut stream = Stream::client(tcp, tls).map_err(|e| e.to_string())?;
    let session = auth::client_handshake(&mut stream, key, probe_id).map_err(|e| e.to_string())?;
    stream
        .tcp()
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    Ok(Conn { stream, session })
}

/// The host of `tcp://HOST:PORT` (brackets of an IPv6 literal removed): the name a TLS certificate must hold.
fn tls_host(dest_name: &str) -> String {
    let rest = dest_name.split_once("://").map_or(dest_name, |(_, r)| r);
    let host = rest.rsplit_once(':').map_or(rest, |(h, _)| h);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

pub(crate) fn give_back(shared: &Shared, b: Batch) {
    if let Ok(mut pool) = shared.pool.lock() {
        if pool.len() < POOL_MAX {
            pool.push(b);
        }
    }
}

fn poll(fd: i32, events: i16, timeout_ms: i32) {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, timeout_ms) };
}

fn udp_socket(d: &Dest) -> io::Result<UdpSocket> {
    let bind: SocketAddr = if d.addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    let s = UdpSocket::bind(bind)?;
    s.connect(d.addr)?;
    // Large batches in bursts: a bigger send buffer before the kernel says EAGAIN/ENOBUFS.
    let size: libc::c_int = 4 << 20;
    // SAFETY: setsockopt with a c_int value of the right size.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &size as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    Ok(s)
}

/// Record payload bytes per datagram: the path MTU minus IP, UDP, batch header and tag, capped so the
/// datagram stays ≤ 65507 bytes.
fn udp_payload_capacity(s: &UdpSocket, addr: SocketAddr) -> usize {
    let (level, opt, ip_hdr) = if addr.is_ipv4() {
        (libc::SOL_IP, libc::IP_MTU, 20)
    } else {
        (libc::SOL_IPV6, libc::IPV6_MTU, 40)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a c_int with its length.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            opt,
            &mut mtu as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    let mtu = if rc == 0 && mtu > 0 {
        mtu as usize
    } else {
        1500
    };
    let datagram = (mtu - ip_hdr - 8).min(UDP_MAX_DATAGRAM);
    (datagram - HEADER_LEN - TAG_LEN).min(MAX_PAYLOAD)
}

/// A probe id stable across restarts: a hash of the host name and the interface.
pub fn default_probe_id(interface: &str) -> u64 {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    // FNV-1a: stable across Rust versions (DefaultHasher is not).
    let mut h: u64 = 0xcbf29ce484222325;
    for b in host.trim().bytes().chain([b'/']).chain(interface.bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    h
}
