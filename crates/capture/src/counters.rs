//! Counters a source updates once per batch (block or recvmmsg call), read by a stats thread.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::sys;

/// The kernel's view of one socket (PACKET_STATISTICS), accumulated since the socket was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Packets that passed the filter and reached the socket, dropped ones included.
    pub packets: u64,
    /// Packets that passed the filter but found no room (ring full / receive buffer full).
    pub drops: u64,
    /// Times the ring was found full and the queue frozen (TPACKET_V3 only).
    pub freeze_q_cnt: u64,
    /// AF_XDP sockets (`--source xdp`) only, each also in `drops`: the rx ring was full (ringcap fell
    /// behind), the fill ring was empty (no free frame to receive into), or another reason.
    pub xsk_ring_full: u64,
    pub xsk_fill_empty: u64,
    pub xsk_other: u64,
    /// AF_XDP sockets only: descriptors the kernel rejected on the socket's rings (XDP_STATISTICS rx and tx
    /// invalid descs). Not packets and not in `drops`: anything but 0 is a bug in ringcap's ring handling.
    pub xsk_invalid_descs: u64,
}

impl KernelStats {
    /// Field-wise sum, for totals over fanout sockets.
    pub fn add(&mut self, o: &KernelStats) {
        self.packets += o.packets;
        self.drops += o.drops;
        self.freeze_q_cnt += o.freeze_q_cnt;
        self.xsk_ring_full += o.xsk_ring_full;
        self.xsk_fill_empty += o.xsk_fill_empty;
        self.xsk_other += o.xsk_other;
        self.xsk_invalid_descs += o.xsk_invalid_descs;
    }
}

/// A consistent-enough copy of one source's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// Packets handed to the caller.
    pub packets: u64,
    /// Their lengths on the wire (as the kernel saw them, a stripped VLAN tag not included).
    pub wire_bytes: u64,
    /// Bytes handed out (after snaplen).
    pub captured_bytes: u64,
    /// Ring blocks consumed (ring source) or non-empty recvmmsg batches (copy source).
    pub batches: u64,
    /// Ring blocks the kernel closed because the block timeout expired, not because they were full.
    pub blocks_timed_out: u64,
    /// Ring blocks the kernel marked TP_STATUS_LOSING (drops happened while it was filled).
    pub blocks_losing: u64,
    /// Most packets seen in one batch.
    pub max_batch_packets: u64,
    /// Times the source had to wait in poll() (i.e. it had caught up with the kernel).
    pub polls: u64,
    /// Packets lost because their block's headers pointed outside the block (the "ring" drop stage;
    /// should stay 0).
    pub corrupt: u64,
    /// Packets the ring says carry the kernel's software stamp (tp_status TP_STATUS_TS_SOFTWARE).
    pub ts_software: u64,
    /// Packets carrying the NIC's hardware stamp (TP_STATUS_TS_RAW_HARDWARE).
    pub ts_hardware: u64,
    /// Packets with neither bit: the kernel stamped them with its software clock as it put them in the
    /// ring (receive stamps are off while no socket asks for them). The copy source does not look, so
    /// all three stay 0 there.
    pub ts_none: u64,
    /// Packets the filter rejected in user space (`--source xdp`; the other sources filter in the kernel,
    /// which cannot count them).
    pub filtered_out: u64,
}

impl CounterSnapshot {
    /// Field-wise sum (the largest batch: the larger one), for totals over fanout sockets.
    pub fn add(&mut self, o: &CounterSnapshot) {
        self.packets += o.packets;
        self.wire_bytes += o.wire_bytes;
        self.captured_bytes += o.captured_bytes;
        self.batches += o.batches;
        self.blocks_timed_out += o.blocks_timed_out;
        self.blocks_losing += o.blocks_losing;
        self.max_batch_packets = self.max_batch_packets.max(o.max_batch_packets);
        self.polls += o.polls;
        self.corrupt += o.corrupt;
        self.ts_software += o.ts_software;
        self.ts_hardware += o.ts_hardware;
        self.ts_none += o.ts_none;
        self.filtered_out += o.filtered_out;
    }
}

/// Live counters of one source; share with `Arc` (see `Source::counters`).
///
/// Packets rejected by the filter are not counted anywhere: the kernel runs the filter before its own
/// counters, so a packet socket cannot know them (estimate from interface counters if needed).
#[derive(Debug, Default)]
pub struct Counters {
    packets: AtomicU64,
    wire_bytes: AtomicU64,
    captured_bytes: AtomicU64,
    batches: AtomicU64,
    blocks_timed_out: AtomicU64,
    blocks_losing: AtomicU64,
    max_batch_packets: AtomicU64,
    polls: AtomicU64,
    corrupt: AtomicU64,
    /// Indexed like [`BatchTally::ts`].
    ts: [AtomicU64; 3],
    filtered: AtomicU64,
    kernel: Mutex<KernelSide>,
}

#[derive(Debug)]
struct KernelSide {
    fd: RawFd, // -1 once the socket is closed
    /// An AF_XDP socket: its counters are XDP_STATISTICS, which the kernel never resets.
    xsk: bool,
    total: KernelStats,
}

impl KernelSide {
    fn refresh(&mut self) {
        if self.fd >= 0 && self.xsk {
            if let Ok(s) = xdp::XskSocket::stats_of(self.fd) {
                self.total.xsk_ring_full = s.rx_ring_full;
                self.total.xsk_fill_empty = s.rx_fill_ring_empty;
                self.total.xsk_other = s.rx_dropped;
                self.total.xsk_invalid_descs = s.invalid_descs;
                self.total.drops = s.lost();
            }
        } else if self.fd >= 0 {
            if let Ok((p, d, f)) = sys::packet_statistics(self.fd) {
                self.total.packets += p as u64;
                self.total.drops += d as u64;
                self.total.freeze_q_cnt += f as u64;
            }
        }
    }
}

impl Default for KernelSide {
    fn default() -> Self {
        KernelSide {
            fd: -1,
            xsk: false,
            total: KernelStats::default(),
        }
    }
}

/// What one batch contributed; added to [`Counters`] with a handful of relaxed atomics.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BatchTally {
    pub packets: u64,
    pub wire_bytes: u64,
    pub captured_bytes: u64,
    pub timed_out: bool,
    pub losing: bool,
    pub corrupt: u64,
    /// Packets by stamp source: [none, software, hardware] (see [`ts_slot`]).
    pub ts: [u64; 3],
    /// Packets a user-space filter rejected (not in `packets`).
    pub filtered: u64,
}

/// The slot of [`BatchTally::ts`] a packet's tp_status counts in, without a branch: 2 for a hardware
/// stamp, 1 for software, 0 for neither.
#[inline(always)]
pub(crate) fn ts_slot(status: u32) -> usize {
    use crate::tstamp::{TP_STATUS_TS_RAW_HARDWARE as HW, TP_STATUS_TS_SOFTWARE as SW};
    let hw = (status & HW != 0) as usize;
    let sw = (status & SW != 0) as usize;
    (hw << 1) | (sw & !hw)
}

impl Counters {
    pub(crate) fn new(fd: RawFd) -> Counters {
        let c = Counters::default();
        c.kernel.lock().unwrap_or_else(|p| p.into_inner()).fd = fd;
        c
    }

    /// Counters of an AF_XDP socket; its kernel side reads XDP_STATISTICS.
    pub(crate) fn for_xsk(fd: RawFd) -> Counters {
        let c = Counters::new(fd);
        c.kernel.lock().unwrap_or_else(|p| p.into_inner()).xsk = true;
        c
    }

    pub(crate) fn add_batch(&self, t: &BatchTally) {
        // Each source has its own Counters, so these never contend; Relaxed is enough for statistics.
        self.packets.fetch_add(t.packets, Relaxed);
        self.wire_bytes.fetch_add(t.wire_bytes, Relaxed);
        self.captured_bytes.fetch_add(t.captured_bytes, Relaxed);
        self.batches.fetch_add(1, Relaxed);
        self.max_batch_packets.fetch_max(t.packets, Relaxed);
        if t.timed_out {
            self.blocks_timed_out.fetch_add(1, Relaxed);
        }
        if t.losing {
            self.blocks_losing.fetch_add(1, Relaxed);
        }
        if t.corrupt != 0 {
            self.corrupt.fetch_add(t.corrupt, Relaxed);
        }
        if t.filtered != 0 {
            self.filtered.fetch_add(t.filtered, Relaxed);
        }
        for (c, n) in self.ts.iter().zip(t.ts) {
            if n != 0 {
                c.fetch_add(n, Relaxed);
            }
        }
    }

    pub(crate) fn add_poll(&self) {
        self.polls.fetch_add(1, Relaxed);
    }

    /// Current values.
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            packets: self.packets.load(Relaxed),
            wire_bytes: self.wire_bytes.load(Relaxed),
            captured_bytes: self.captured_bytes.load(Relaxed),
            batches: self.batches.load(Relaxed),
            blocks_timed_out: self.blocks_timed_out.load(Relaxed),
            blocks_losing: self.blocks_losing.load(Relaxed),
            max_batch_packets: self.max_batch_packets.load(Relaxed),
            polls: self.polls.load(Relaxed),
            corrupt: self.corrupt.load(Relaxed),
            ts_none: self.ts[0].load(Relaxed),
            ts_software: self.ts[1].load(Relaxed),
            ts_hardware: self.ts[2].load(Relaxed),
            filtered_out: self.filtered.load(Relaxed),
        }
    }

    /// The kernel's counters since the socket opened. Asks the kernel (one getsockopt) while the socket is
    /// open; the kernel resets its counters on every read, so they are accumulated here. After the source
    /// is dropped this returns the final totals.
    pub fn kernel_stats(&self) -> KernelStats {
        let mut k = self.kernel.lock().unwrap_or_else(|p| p.into_inner());
        k.refresh();
        let mut total = k.total;
        if k.xsk {
            // The socket sees every packet before the user-space filter: delivered ones plus its drops.
            total.packets = self.packets.load(Relaxed) + self.filtered.load(Relaxed) + total.drops;
        }
        total
    }

    /// Take the last kernel counters and forget the descriptor (called by the source before it closes it).
    pub(crate) fn close(&self) {
        let mut k = self.kernel.lock().unwrap_or_else(|p| p.into_inner());
        k.refresh();
        k.fd = -1;
    }
}
