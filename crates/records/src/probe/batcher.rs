//! The capture side: each capture thread's [`Batcher`] fills batches (one builder, or one per collector
//! with flow striping by [`flow_hash`]) and hands them to the sender's bounded queue without blocking.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wire::record::Record;

use super::stats::{Shared, TUNNEL_COUNTS};
use super::{Probe, Stripe};
use crate::batch::{Batch, BatchBuilder};

/// A filled batch and, with flow striping, the collector it belongs to.
pub(crate) struct Msg {
    pub(crate) batch: Batch,
    pub(crate) to: Option<usize>,
}

impl Probe {
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
            tunnels: [0; TUNNEL_COUNTS],
            stream_per_builder: self.stream_per_builder,
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
    /// Records in a tunnel (0) and per tunnel problem code (1-5), added with `records`.
    tunnels: [u64; TUNNEL_COUNTS],
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
        if r.tunnel != 0 || r.tunnel_problem != 0 {
            // Problem codes are 1-5 (Record::from_frame); 0 with a tunnel: decapsulated.
            self.tunnels[usize::from(r.tunnel_problem).min(TUNNEL_COUNTS - 1)] += 1;
        }
        if !self.builders[i].push(r) {
            self.send(i, false);
            // An empty builder always has room for one record (capacity ≥ RECORD_MAX_LEN).
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
        self.add_counts();
    }

    fn add_counts(&mut self) {
        self.shared
            .records
            .fetch_add(std::mem::take(&mut self.records), Relaxed);
        for (shared, n) in self.shared.tunnels.iter().zip(&mut self.tunnels) {
            if *n != 0 {
                shared.fetch_add(std::mem::take(n), Relaxed);
            }
        }
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
        self.add_counts();
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
