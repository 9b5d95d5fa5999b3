//! store: capture files. Writing pcap (µs/ns) and pcapng from large page-aligned buffers handed
//! to a writer thread (O_DIRECT where possible, storage drops instead of blocking the capture
//! thread, files cut back to the last whole packet when the disk fills), and reading pcap/pcapng,
//! plain or zstd/lz4 compressed, tolerant of damaged input.

mod error;
mod format;
mod output;
mod pool;
mod reader;
mod repair;
mod stats;
mod writer;

pub use error::{human_bytes, StoreError};
pub use format::{Format, IfStats, VlanTag, MAX_SNAPLEN, PCAP_MAGIC_NS, PCAP_MAGIC_US};
pub use reader::{open_capture, CaptureReader, Compression, InputFormat, Issue, Packet};
pub use repair::{repair_truncate, RepairReport};
pub use stats::{WriterCounters, WriterStats};
pub use writer::{CaptureWriter, WriterOptions, MIN_BUFFER_SIZE};
