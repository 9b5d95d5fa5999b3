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
//!
//! This file holds the configuration and the [`Probe`] that starts the sender thread; the parts live in
//! `batcher` (capture side, flow hash), `sender` (the collectors' sender thread), `link` (opening TCP/TLS
//! connections and UDP sockets), `kafka` (starting the Kafka producer instead) and `stats` (counters).

mod batcher;
mod kafka;
mod link;
mod sender;
mod stats;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) use batcher::Msg;
pub use batcher::{flow_hash, Batcher};
pub(crate) use stats::{give_back, Shared};
pub use stats::{CollectorStats, ProbeStats, StatsHandle, TunnelStats};

use crate::batch::{Key, MAX_PAYLOAD};
use crate::kafka::KafkaDest;

/// Batches kept for re-sending per TCP collector (≤ 16 MiB of 64 KiB batches).
pub const DEFAULT_UNACKED: usize = 256;

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
        match cfg.kafka.clone() {
            Some(k) => Probe::start_kafka(cfg, k),
            None => Probe::start_collectors(cfg),
        }
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
