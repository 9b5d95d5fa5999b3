//! Writer counters: plain atomics shared with a stats printer thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Live counters of one [`crate::CaptureWriter`]; clone the `Arc` from
/// [`crate::CaptureWriter::counters`] and call [`WriterCounters::snapshot`] from any thread.
#[derive(Debug, Default)]
pub struct WriterCounters {
    // Written only by the capture thread (plain stores of its local counts: no RMW per packet).
    pub(crate) accepted: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) refused: AtomicU64,
    // Written only by the writer thread.
    pub(crate) lost: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) buffers_written: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) direct_io: AtomicBool,
    pub(crate) failed: AtomicBool,
    // Both threads (once per buffer).
    pub(crate) backlog: AtomicU64,
    pub(crate) buffers_total: AtomicU64,
}

/// A consistent-enough copy of the writer counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Packets in the output (accepted, minus those lost to a write error).
    pub packets: u64,
    /// Record bytes accepted into buffers (headers + captured data).
    pub bytes: u64,
    /// Bytes that reached the file descriptor.
    pub bytes_written: u64,
    /// Packets dropped because no buffer was free or the output had failed (storage drops).
    pub storage_drops: u64,
    /// Filled buffers waiting for (or in) the writer thread: the backlog.
    pub buffers_filled: u64,
    /// Buffers in the pool.
    pub buffers_total: u64,
    /// Buffers written so far.
    pub buffers_written: u64,
    /// Whether the output is written with O_DIRECT (false on tmpfs, pipes, stdout).
    pub direct_io: bool,
    /// Write errors seen (the first one stops the output).
    pub write_errors: u64,
    /// The output failed (disk full, broken pipe...); `finish` returns the error.
    pub failed: bool,
}

impl WriterCounters {
    /// Reads all counters.
    pub fn snapshot(&self) -> WriterStats {
        let accepted = self.accepted.load(Relaxed);
        let lost = self.lost.load(Relaxed);
        WriterStats {
            packets: accepted.saturating_sub(lost),
            bytes: self.bytes.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            storage_drops: self.refused.load(Relaxed) + lost,
            buffers_filled: self.backlog.load(Relaxed),
            buffers_total: self.buffers_total.load(Relaxed),
            buffers_written: self.buffers_written.load(Relaxed),
            direct_io: self.direct_io.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            failed: self.failed.load(Relaxed),
        }
    }
}
