//! Writer counters: plain atomics shared with a stats printer thread.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::compress::{Level, LEVEL_CODES};

/// Live counters of one [`crate::CaptureWriter`]; clone the `Arc` from
/// [`crate::CaptureWriter::counters`] and call [`WriterCounters::snapshot`] from any thread.
#[derive(Debug, Default)]
pub struct WriterCounters {
    /// One set per producer (capture thread), summed when read.
    producers: Mutex<Vec<Arc<ProducerCounters>>>,
    // Written only by the writer thread.
    pub(crate) lost: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) bytes_direct: AtomicU64,
    pub(crate) buffers_written: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) direct_io: AtomicBool,
    pub(crate) failed: AtomicBool,
    // Both threads (once per buffer).
    pub(crate) backlog: AtomicU64,
    pub(crate) buffers_total: AtomicU64,
    // Compressor threads (once per buffer).
    pub(crate) level_buffers: [AtomicU64; LEVEL_CODES],
    pub(crate) level_now: AtomicU8,
    pub(crate) compressed_in: AtomicU64,
    pub(crate) compressed_out: AtomicU64,
    pub(crate) compressing: AtomicBool,
    // File writer thread (once per file or event).
    pub(crate) files_done: AtomicU64,
    pub(crate) files_deleted: AtomicU64,
    pub(crate) bytes_deleted: AtomicU64,
    pub(crate) disk_full_events: AtomicU64,
    pub(crate) dirs_full: AtomicU64,
    // Indexer thread (once per file) and file writer (once per buffer it could not hand on).
    pub(crate) indexing: AtomicBool,
    pub(crate) files_indexed: AtomicU64,
    pub(crate) files_unindexed: AtomicU64,
    pub(crate) index_skipped: AtomicU64,
    pub(crate) index_packets: AtomicU64,
    pub(crate) index_cpu_ns: AtomicU64,
    // The indexer's catch-up thread (once per file).
    pub(crate) files_caught_up: AtomicU64,
    pub(crate) older_files_indexed: AtomicU64,
    pub(crate) catch_up_cpu_ns: AtomicU64,
}

/// Counters of one [`crate::Producer`], written only by its thread (plain stores of its local
/// counts: no read-modify-write per packet).
#[derive(Debug, Default)]
pub(crate) struct ProducerCounters {
    pub accepted: AtomicU64,
    pub bytes: AtomicU64,
    pub refused: AtomicU64,
}

impl WriterCounters {
    pub(crate) fn add_producer(&self, c: Arc<ProducerCounters>) {
        self.producers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(c);
    }

    /// Sums one counter over the producers.
    fn sum(&self, f: impl Fn(&ProducerCounters) -> &AtomicU64) -> u64 {
        let producers = self.producers.lock().unwrap_or_else(|p| p.into_inner());
        producers.iter().map(|c| f(c).load(Relaxed)).sum()
    }

    /// Packets the producers refused (no free buffer, or the output had failed).
    pub(crate) fn refused(&self) -> u64 {
        self.sum(|c| &c.refused)
    }

    /// Packets accepted into buffers by all producers.
    pub(crate) fn accepted(&self) -> u64 {
        self.sum(|c| &c.accepted)
    }

    /// Records the level a compressor used for one buffer of `input` bytes giving `output`.
    pub(crate) fn note_level(&self, code: u8, input: u64, output: u64) {
        self.level_buffers[usize::from(code).min(LEVEL_CODES - 1)].fetch_add(1, Relaxed);
        self.level_now.store(code, Relaxed);
        self.compressed_in.fetch_add(input, Relaxed);
        self.compressed_out.fetch_add(output, Relaxed);
    }

    /// Buffers compressed at each level so far, strongest first; only levels used.
    pub fn level_histogram(&self) -> Vec<(Level, u64)> {
        let mut v: Vec<(Level, u64)> = (0..LEVEL_CODES)
            .map(|c| {
                (
                    Level::from_code(c as u8),
                    self.level_buffers[c].load(Relaxed),
                )
            })
            .filter(|&(_, n)| n > 0)
            .collect();
        v.sort_by_key(|&(l, _)| std::cmp::Reverse(strength(l)));
        v
    }
}

/// Orders levels for display: zstd by level, then lz4, then stored.
fn strength(l: Level) -> i32 {
    match l {
        Level::Stored => -101,
        Level::Lz4 => -100,
        Level::Zstd(n) => n,
    }
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
    /// Of those, bytes written with O_DIRECT (past the page cache): in file mode `direct_io` only
    /// says how the last file was opened, this says how the bytes went.
    pub bytes_direct: u64,
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
    /// Compression is on.
    pub compressing: bool,
    /// Level used for the most recent buffer.
    pub level: Level,
    /// Bytes given to the compressors and the frames they produced (ratio = in / out).
    pub compressed_in: u64,
    pub compressed_out: u64,
    /// Files completed (closed, synced and renamed into place).
    pub files_done: u64,
    /// Old files deleted by retention (`-W`, `--disk-budget`) and their bytes.
    pub files_deleted: u64,
    pub bytes_deleted: u64,
    /// Times an output directory was found full; directories full right now.
    pub disk_full_events: u64,
    pub dirs_full: u64,
    /// A packet indexer follows the files (file mode with an index).
    pub indexing: bool,
    /// Files whose index was written; files left without one (the indexer fell behind or a
    /// write failed: `ringcap index` catches up).
    pub files_indexed: u64,
    pub files_unindexed: u64,
    /// Buffers written while the indexer was busy (their file is left unindexed).
    pub index_skipped: u64,
    /// Packets handed to the indexer, and its thread's CPU time (set when it ends).
    pub index_packets: u64,
    pub index_cpu_ns: u64,
    /// Files left unindexed that the capture indexed later from disk, when the CPU was idle
    /// (counted in `files_unindexed` too), and the CPU time that took.
    pub files_caught_up: u64,
    /// Complete files of this capture found without a current index when it started (an
    /// earlier run stopped before it caught up, was killed or ran with `--no-index`) and
    /// indexed by it from disk, when the CPU was idle. The CPU time is in `catch_up_cpu_ns`.
    pub older_files_indexed: u64,
    pub catch_up_cpu_ns: u64,
}

impl WriterStats {
    /// Compression ratio so far (uncompressed / compressed), 1.0 before any data.
    pub fn ratio(&self) -> f64 {
        if self.compressed_out == 0 {
            1.0
        } else {
            self.compressed_in as f64 / self.compressed_out as f64
        }
    }
}

impl WriterCounters {
    /// Reads all counters.
    pub fn snapshot(&self) -> WriterStats {
        let accepted = self.accepted();
        let lost = self.lost.load(Relaxed);
        WriterStats {
            packets: accepted.saturating_sub(lost),
            bytes: self.sum(|c| &c.bytes),
            bytes_written: self.bytes_written.load(Relaxed),
            bytes_direct: self.bytes_direct.load(Relaxed),
            storage_drops: self.sum(|c| &c.refused) + lost,
            buffers_filled: self.backlog.load(Relaxed),
            buffers_total: self.buffers_total.load(Relaxed),
            buffers_written: self.buffers_written.load(Relaxed),
            direct_io: self.direct_io.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            failed: self.failed.load(Relaxed),
            compressing: self.compressing.load(Relaxed),
            level: Level::from_code(self.level_now.load(Relaxed)),
            compressed_in: self.compressed_in.load(Relaxed),
            compressed_out: self.compressed_out.load(Relaxed),
            files_done: self.files_done.load(Relaxed),
            files_deleted: self.files_deleted.load(Relaxed),
            bytes_deleted: self.bytes_deleted.load(Relaxed),
            disk_full_events: self.disk_full_events.load(Relaxed),
            dirs_full: self.dirs_full.load(Relaxed),
            indexing: self.indexing.load(Relaxed),
            files_indexed: self.files_indexed.load(Relaxed),
            files_unindexed: self.files_unindexed.load(Relaxed),
            index_skipped: self.index_skipped.load(Relaxed),
            index_packets: self.index_packets.load(Relaxed),
            index_cpu_ns: self.index_cpu_ns.load(Relaxed),
            files_caught_up: self.files_caught_up.load(Relaxed),
            older_files_indexed: self.older_files_indexed.load(Relaxed),
            catch_up_cpu_ns: self.catch_up_cpu_ns.load(Relaxed),
        }
    }
}
