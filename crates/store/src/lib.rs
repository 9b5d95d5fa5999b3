//! store: capture files. Writing pcap (µs/ns) and pcapng from large page-aligned buffers handed
//! to a writer thread (O_DIRECT where possible, storage drops instead of blocking the capture
//! thread, files cut back to the last whole packet when the disk fills), and reading pcap/pcapng,
//! plain or gzip/zstd/lz4 compressed, tolerant of damaged input. File mode adds rotation (size,
//! wall-clock interval, on request), a compressor pool with a backlog-driven level ladder, several
//! output directories, retention and recovery from full disks.

pub mod archive_manifest;
mod compress;
pub mod container;
mod coverage;
mod error;
mod files;
mod format;
mod indexing;
mod output;
mod pool;
mod producer;
mod reader;
mod record_time;
mod repair;
mod stage;
mod stats;
mod stream;
mod writer;

pub use compress::{
    frame_cuts, zstd_stored_frame, CompressMode, Level, DEFAULT_FRAME_SIZE, INDEXED_FRAME_SIZE,
    MAX_FRAME_SIZE, MIN_FRAME_SIZE,
};
pub use container::{finished_name, Compression};
pub use coverage::{
    coverage_path, read_coverage, write_coverage, Coverage, DropMeter, Drops, COVERAGE_VERSION,
};
pub use error::StoreError;
pub use files::{
    disk_use_percent, extension, flows_path, index_path, parse_name, utc_stamp, Budget, EventFn,
    FilePlan, LiveRetention, RetentionRules, DEFAULT_KEEP_NEWEST,
};
pub use format::{
    epb_comment, own_record, Format, IfStats, OwnRecord, MAX_SNAPLEN, PCAP_MAGIC_NS, PCAP_MAGIC_US,
    TSRESOL_NS, TSRESOL_US,
};
pub use indexing::{CaughtUp, FileIndexer, FrameSpan, IndexerFactory};
pub use producer::Producer;
pub use reader::{open_capture, CaptureReader, FileLink, InputFormat, Issue, Packet};
pub use record_time::{RecordTime, MICROS, NANOS};
pub use repair::{repair, RepairOptions, RepairReport};
pub use stats::{WriterCounters, WriterStats};
pub use stream::{check_same_linktype, PacketStream, StreamHeader};
pub use writer::{CaptureWriter, WriterOptions, MIN_BUFFER_SIZE};
