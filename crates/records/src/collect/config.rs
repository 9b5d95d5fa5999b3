//! What a collector is told: where to listen (`tcp://`, `udp://`), its keys, id, limits and timeouts.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::antireplay::DEFAULT_MAX_SKEW;
use crate::archive::{ArchiveConfig, Events};
use crate::auth::KeySet;
use crate::batch::MAX_COLLECTOR_ID;

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
    /// The probes' keys: one shared key or one per probe id.
    pub keys: KeySet,
    /// This collector's id, covered by every batch tag and ack (None: `HOST:PORT` of the first TCP listener,
    /// the host name standing for an unspecified address).
    pub collector_id: Option<String>,
    /// A TCP connection must finish the handshake (and TLS) within this time.
    pub auth_timeout: Duration,
    /// Once a message's first byte arrived, the whole message must arrive within this time.
    pub message_timeout: Duration,
    /// Connections open at once from one IP address.
    pub max_per_address: usize,
    /// Mutual TLS on the TCP listeners.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Allowed difference between a batch's sent time and our clock (replay freshness).
    pub max_skew: Duration,
    /// Probe streams tracked by the replay guard at once.
    pub max_streams: usize,
    /// Authenticated TCP connections served at once (more are closed after their handshake); as many
    /// connections may be handshaking at once (then the oldest handshake is closed for a new one).
    pub max_connections: usize,
    /// An authenticated TCP connection that sends nothing for this long is closed (frees its slot).
    pub idle_timeout: Duration,
    /// Socket receive buffer asked for each UDP socket (absorbs bursts while the spool is written).
    pub udp_rcvbuf: usize,
    /// Event lines (recovery, rotation, rejected input).
    pub events: Events,
    /// Kafka topics to consume (`--listen kafka://BROKER/TOPIC`).
    pub kafka: Vec<crate::kafka::KafkaDest>,
}

impl CollectorConfig {
    /// Defaults: 120 s skew, 4096 streams, 64 connections (16 per address), 5 s to authenticate, 10 s
    /// per message, 10 min idle, 8 MiB UDP buffers, no TLS.
    pub fn new(
        listen: Vec<Listen>,
        archive: ArchiveConfig,
        keys: impl Into<KeySet>,
        events: Events,
    ) -> Self {
        CollectorConfig {
            listen,
            archive,
            keys: keys.into(),
            collector_id: None,
            auth_timeout: Duration::from_secs(5),
            message_timeout: Duration::from_secs(10),
            max_per_address: 16,
            tls: None,
            max_skew: DEFAULT_MAX_SKEW,
            max_streams: 4096,
            max_connections: 64,
            idle_timeout: Duration::from_secs(600),
            udp_rcvbuf: 8 << 20,
            events,
            kafka: Vec::new(),
        }
    }
}

/// A given collector id, checked: 1 to 255 bytes of printable ASCII.
pub(super) fn check_collector_id(id: &str) -> io::Result<String> {
    if id.is_empty() || id.len() > MAX_COLLECTOR_ID || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("collector id `{id}`: use 1 to {MAX_COLLECTOR_ID} printable characters without spaces"),
        ));
    }
    Ok(id.to_string())
}

/// `HOST:PORT` of the first TCP listener (else the first listener), the host name standing for an
/// unspecified address: two collectors on one host differ by port, on two hosts by name.
pub(super) fn default_collector_id(local: &[Listen]) -> String {
    let addr = local
        .iter()
        .find_map(|l| match l {
            Listen::Tcp(a) => Some(*a),
            Listen::Udp(_) => None,
        })
        .or_else(|| {
            local.first().map(|l| match l {
                Listen::Tcp(a) | Listen::Udp(a) => *a,
            })
        });
    let Some(addr) = addr else {
        return "collector".into();
    };
    let host = if addr.ip().is_unspecified() {
        let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let h = h.trim();
        if h.is_empty() {
            "collector".to_string()
        } else {
            h.to_string()
        }
    } else {
        addr.ip().to_string()
    };
    let mut id: String = format!("{host}:{}", addr.port())
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .collect();
    id.truncate(MAX_COLLECTOR_ID);
    id
}
