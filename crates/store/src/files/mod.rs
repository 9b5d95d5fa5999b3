//! File mode: a series of files `<base>-<UTC start>-<seq>.<ext>` spread over one or more
//! directories. Each file is written hidden as `.<name>.partial` and renamed into place once
//! complete and synced (stenographer's habit), so every visible file is whole. Old files are
//! deleted oldest first to honour `-W` and `--disk-budget`, and only for them: the budget never
//! deletes the newest `keep_newest` files. A full disk does not stop the capture and deletes
//! nothing by itself: the file is cut after its last whole packet and closed, the next directory
//! is tried, and with none left packets are counted as storage drops until space returns (retried
//! every second).
//!
//! `naming`: file names, their order and the listing of a store; `retention`: what gets deleted;
//! `sink`: the writer thread's loop over buffers and directories; `current`: the open file
//! (opening, aligned writes through the shared [`crate::stage::Stage`], closing and renaming).

mod current;
mod naming;
mod retention;
mod sink;

use std::path::PathBuf;
use std::sync::Arc;

use crate::compress::CompressMode;
use crate::coverage::DropMeter;
use crate::indexing::IndexerFactory;

pub use naming::{extension, flows_path, index_path, parse_name, utc_stamp};
pub use retention::{disk_use_percent, Budget, LiveRetention, RetentionRules};
pub(crate) use sink::FileSink;

/// Default of [`FilePlan::keep_newest`]: the file being written and the newest complete one.
pub const DEFAULT_KEEP_NEWEST: usize = 2;

/// Called with one line for each event a user should see (disk full, space back, rename failed).
pub type EventFn = Arc<dyn Fn(&str) + Send + Sync>;

/// Says `msg` to the user, if anyone listens.
pub(crate) fn tell(events: &Option<EventFn>, msg: &str) {
    if let Some(f) = events {
        f(msg);
    }
}

/// Where and how file mode writes.
#[derive(Clone)]
pub struct FilePlan {
    /// Output directories (at least one); new files go round robin over those not full.
    pub dirs: Vec<PathBuf>,
    /// File name stem.
    pub base: String,
    /// Start a new file before one would exceed this many (uncompressed) bytes (`-C`).
    pub rotate_bytes: Option<u64>,
    /// Start a new file at every multiple of this many seconds of wall-clock time (`-G`).
    pub rotate_secs: Option<u64>,
    /// Keep at most this many files, deleting the oldest (`-W`).
    pub max_files: Option<usize>,
    /// Per-directory space budget (`--disk-budget`).
    pub budget: Option<Budget>,
    /// The budget never deletes the newest this many files of the capture, counting the one being
    /// written (`--keep-newest`; at least 1).
    pub keep_newest: usize,
    /// Where the budget and keep_newest can be changed while the capture runs; when given it replaces
    /// the two fields above.
    pub live_retention: Option<LiveRetention>,
    /// Compression of the files.
    pub compression: CompressMode,
    /// Compressor threads.
    pub compressors: usize,
    /// Uncompressed bytes per compressed frame at most (`--frame-size`; a record larger than this
    /// is a frame alone). Frames never span two buffers.
    pub frame_size: usize,
    /// Lab throttle: write at most this many bytes per second.
    pub max_write_rate: Option<u64>,
    /// Receives user-visible events.
    pub events: Option<EventFn>,
    /// Makes the packet indexer that follows the files (off the hot path; see `indexing`).
    pub indexer: Option<IndexerFactory>,
    /// A live capture: each file it completes gets its coverage record (`NAME.coverage.json`,
    /// see [`crate::Coverage`]), the drops read from this meter at every file boundary. None for
    /// files that are not a capture's (a query's output, a conversion).
    pub coverage: Option<DropMeter>,
}

impl FilePlan {
    /// A plan writing `base` files into `dir`, no rotation, no compression.
    pub fn new(dir: impl Into<PathBuf>, base: &str) -> FilePlan {
        FilePlan {
            dirs: vec![dir.into()],
            base: base.to_string(),
            rotate_bytes: None,
            rotate_secs: None,
            max_files: None,
            budget: None,
            keep_newest: DEFAULT_KEEP_NEWEST,
            live_retention: None,
            compression: CompressMode::None,
            compressors: 2,
            frame_size: crate::compress::DEFAULT_FRAME_SIZE,
            max_write_rate: None,
            events: None,
            indexer: None,
            coverage: None,
        }
    }
}
