//! The seam every destination of packets plugs into.

use std::time::Instant;

use capture::{Batch, KernelStats};

/// A destination of captured packets (a file series, collectors, the terminal, ...). Made before the
/// session starts; gives each capture thread its own [`Lane`]; finished once after every thread ended.
pub trait Sink: Send {
    /// The part of this sink one capture thread drives (its own buffers: no lock per block).
    fn lane(&mut self) -> anyhow::Result<Box<dyn Lane>>;

    /// True when the sink can take no more (e.g. the output failed): the session stops.
    fn failed(&self) -> bool {
        false
    }

    /// Every lane has finished: write what is left, close, and say what happened. An error comes with the
    /// report of what was done before it.
    fn finish(self: Box<Self>, totals: &Totals) -> (SinkReport, Option<anyhow::Error>);
}

/// One capture thread's share of a [`Sink`].
pub trait Lane: Send {
    /// Every packet of one batch (read it with `batch.packets()`; other lanes read it too).
    fn batch(&mut self, batch: &Batch<'_>);

    /// After every batch and every empty wait: time-driven work (flushes, rotation, record batches).
    fn tick(&mut self, _now: Instant) {}

    /// A lane that ends at once on a stop instead of draining what the kernel already delivered (a
    /// terminal: tcpdump stops printing at Ctrl-C too).
    fn stops_at_once(&self) -> bool {
        false
    }

    /// The thread is done: hand on what is buffered.
    fn finish(self: Box<Self>) {}
}

/// What the sources saw over the whole session, for sinks that record it (pcapng statistics).
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// The kernel's counters summed over every socket (final: the sources are closed).
    pub kernel: KernelStats,
    /// Packets the sources handed out.
    pub delivered: u64,
    /// Wall clock at the start and the end of the session, ns since the Unix epoch.
    pub start_ns: u64,
    pub end_ns: u64,
    /// A merged capture of several interfaces: each one's share, by interface number (empty with one).
    pub interfaces: Vec<InterfaceTotals>,
}

/// One interface's share of a capture: its sources' counters summed.
#[derive(Clone, Copy, Debug, Default)]
pub struct InterfaceTotals {
    /// The kernel's counters over the interface's sockets.
    pub kernel: KernelStats,
    /// Packets its sources handed out.
    pub delivered: u64,
}

/// What one sink did, for the summary.
#[derive(Debug)]
// One report per sink per capture: its size does not matter, boxing would only add noise.
#[allow(clippy::large_enum_variant)]
pub enum SinkReport {
    /// A capture file or file series: the writer's counters, the buffers compressed at each level, and
    /// with `--cutoff` what the cutoff cut (summed over the lanes).
    Written {
        stats: store::WriterStats,
        levels: Vec<(store::Level, u64)>,
        cutoff: Option<crate::cutoff::CutoffStats>,
        /// A merged capture of several interfaces: packets written of each, by interface number.
        interfaces: Vec<u64>,
        /// `--decap`: the tunnels asked for, and what was decapsulated or kept whole (all lanes).
        decap: Option<(crate::decap::DecapConfig, crate::decap::DecapStats)>,
    },
    /// Header records sent to collectors.
    Records(records::probe::ProbeStats),
    /// Lines printed on stdout.
    Printed { lines: u64 },
    /// Packets counted and dropped (`--drop-all`).
    Counted { packets: u64 },
    /// Per-packet work done (`--load`).
    Loaded { packets: u64 },
}
