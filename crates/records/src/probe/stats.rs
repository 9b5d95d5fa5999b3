//! The probe's counters: live atomics shared by the batchers and the sender thread, their snapshots
//! ([`ProbeStats`]), and the pool of sent batch buffers handed back to the batchers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::{Dest, Transport};
use crate::batch::Batch;

/// Sent batch buffers kept for reuse by the batchers.
const POOL_MAX: usize = 64;

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
    pub(super) connects: AtomicU64,
    pub(super) bad_acks: AtomicU64,
    pub(super) handshake_failures: AtomicU64,
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

/// Slots of the tunnel counters: decapsulated, then one per `wire::TunnelProblem` code (1-5).
pub(crate) const TUNNEL_COUNTS: usize = 6;

/// Records of packets with tunnels (`wire::describe`): described by the packet they carried, or by
/// their outer headers and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TunnelStats {
    /// In one tunnel, read whole: the record describes the carried packet.
    pub decapsulated: u64,
    /// A tunnel header or the carried packet was cut (or an IP fragment of a tunnel packet).
    pub truncated: u64,
    /// A tunnel header held an impossible value.
    pub malformed: u64,
    /// Deeper than the decapsulation's bound.
    pub too_deep: u64,
    /// A GENEVE payload neither Ethernet nor IP.
    pub unsupported: u64,
    /// In two or more tunnels.
    pub nested: u64,
}

impl TunnelStats {
    fn of(c: [u64; TUNNEL_COUNTS]) -> TunnelStats {
        let [decapsulated, truncated, malformed, too_deep, unsupported, nested] = c;
        TunnelStats {
            decapsulated,
            truncated,
            malformed,
            too_deep,
            unsupported,
            nested,
        }
    }

    /// Records described by their outer headers although they had a tunnel.
    pub fn undecoded(&self) -> u64 {
        self.truncated + self.malformed + self.too_deep + self.unsupported + self.nested
    }
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
    /// Records of tunnelled packets.
    pub tunnels: TunnelStats,
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

/// What the batchers, the sender thread and the stats handles share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(super) records: AtomicU64,
    pub(super) tunnels: [AtomicU64; TUNNEL_COUNTS],
    pub(super) queue_drops: AtomicU64,
    pub(super) batches: AtomicU64,
    pub(crate) pending: AtomicU64,
    pub(crate) collectors: Vec<CollectorCounters>,
    pub(super) names: Vec<String>,
    pub(super) pool: Mutex<Vec<Batch>>,
}

impl Shared {
    pub(super) fn snapshot(&self) -> ProbeStats {
        ProbeStats {
            records: self.records.load(Relaxed),
            queue_drops: self.queue_drops.load(Relaxed),
            batches: self.batches.load(Relaxed),
            pending: self.pending.load(Relaxed),
            tunnels: TunnelStats::of(self.tunnels.each_ref().map(|c| c.load(Relaxed))),
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
pub struct StatsHandle(pub(super) Arc<Shared>);

impl StatsHandle {
    /// Counters now.
    pub fn snapshot(&self) -> ProbeStats {
        self.0.snapshot()
    }
}

/// Returns a sent batch's buffer to the pool the batchers take from (dropped when the pool is full).
pub(crate) fn give_back(shared: &Shared, b: Batch) {
    if let Ok(mut pool) = shared.pool.lock() {
        if pool.len() < POOL_MAX {
            pool.push(b);
        }
    }
}
