//! Running a query over capture files: time prunes files and frames, the index narrows to
//! candidate packets, libpcap's compiled filter (tcpdump's) decides every candidate. Files are
//! read by a few worker threads at low priority; results come back in time order across files
//! (file order within a file, as `tcpdump -r` gives it) through bounded channels, so memory
//! stays bounded whatever the store's size.
//!
//! This file holds the options, the public types and the preparing of a query; the parts live in
//! `merge` (the workers started and their packets merged in time order), `worker` (one file read
//! and filtered), `indexed` (reading only what the index names) and `pace` (`--max-read-rate`).

mod error;
mod feed;
mod filter;
pub use filter::{compile_query, Matcher};
mod indexed;
mod merge;
mod named;
mod pace;
mod worker;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use store::{FileLink, RecordTime};

pub use crate::priority::Priority;
pub use error::{FileError, QueryError};
pub use feed::Feed;
pub use merge::{plan, run, survey, survey_feeds, survey_ranges, Plan, Survey};

use crate::expr::Query;
use crate::file::{IndexError, IndexFile};
use crate::ranges::{RangeFile, ReadAt};
use pace::ReadPace;

/// Packets handed over per batch (and about this many bytes at most).
const BATCH_PACKETS: usize = 4096;
const BATCH_BYTES: usize = 1 << 20;

/// How a query runs.
#[derive(Clone, Debug)]
pub struct QueryOptions {
    /// Files read at once.
    pub jobs: usize,
    /// Use the indexes (off: scan everything, as a check).
    pub use_index: bool,
    /// Read at most this many file bytes per second, all workers together (`--max-read-rate`).
    pub max_read_rate: Option<u64>,
    /// Give up at this instant: [`run`] then fails with [`QueryError::TimedOut`] (a server's
    /// query-time limit).
    pub deadline: Option<std::time::Instant>,
    /// How the workers yield to a capture.
    pub priority: Priority,
    /// Counted as files are done, for a progress bar.
    pub progress: Option<Arc<Progress>>,
}

/// How far a query got: files done (merged whole) and the bytes read from them.
#[derive(Debug, Default)]
pub struct Progress {
    pub files_done: std::sync::atomic::AtomicU64,
    pub bytes_read: std::sync::atomic::AtomicU64,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            jobs: 2,
            use_index: true,
            max_read_rate: None,
            deadline: None,
            priority: Priority::Low,
            progress: None,
        }
    }
}

/// The query of an expression (tcpdump syntax with stenographer's `after`/`before` terms) and
/// optional `--after`/`--before` times; the window is the narrower of both. The filter is
/// compiled by [`plan`], for the link of each file (an expression can be valid for one link
/// type and not another, as with `tcpdump -r`).
pub fn prepare_query(
    expr: &str,
    after: Option<&str>,
    before: Option<&str>,
    now_ns: u64,
) -> Result<Query, QueryError> {
    let mut q = crate::parse_query(expr, now_ns).map_err(QueryError::Expression)?;
    let time = |t: &str| crate::parse_time(t, now_ns).map_err(QueryError::Expression);
    if let Some(t) = after.map(time).transpose()? {
        q.after_ns = Some(q.after_ns.map_or(t, |x| x.max(t)));
    }
    if let Some(t) = before.map(time).transpose()? {
        q.before_ns = Some(q.before_ns.map_or(t, |x| x.min(t)));
    }
    Ok(q)
}

/// One matching packet.
pub struct Hit<'a> {
    pub ts_ns: u64,
    /// Its record's time fields, for a copy that says what the file said.
    pub time: RecordTime,
    pub wire_len: u32,
    pub linktype: u32,
    pub data: &'a [u8],
}

/// How a file was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum How {
    /// The query stopped (`--limit`, an error, a deadline) before it got to the file.
    #[default]
    NotRead,
    /// Only the frames and records the index names.
    Index,
    /// The index had nothing in the time window: nothing read.
    IndexNothingInWindow,
    /// What the index names, then the part of the file it does not cover yet.
    IndexAndTail,
    /// Whole, as `tcpdump -r` reads it.
    Scan(ScanWhy),
    /// Found and filtered by another ringcap (a sensor's `serve`) and streamed here.
    Feed,
}

/// Why a file was read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanWhy {
    /// `--no-index`.
    Asked,
    NoIndex,
    /// Its index could not be used (another version, damaged, not this file's): what was wrong.
    IndexUnusable(String),
    /// A capture is writing it: read up to its last whole packet.
    BeingWritten,
    /// A plain file indexed in part: its records cross the edge.
    PlainIndexedInPart,
    /// A pcapng file that describes interfaces after its first packet: no piece reads alone.
    LateInterfaces,
}

impl How {
    /// Read through its index (in part or whole).
    pub fn by_index(&self) -> bool {
        matches!(
            self,
            How::Index | How::IndexNothingInWindow | How::IndexAndTail
        )
    }

    pub fn scanned(&self) -> bool {
        matches!(self, How::Scan(_))
    }
}

impl std::fmt::Display for How {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            How::NotRead => f.write_str("not read (the query stopped first)"),
            How::Index => f.write_str("index"),
            How::IndexNothingInWindow => f.write_str("index (no packet in the window)"),
            How::IndexAndTail => f.write_str("index + scan of the part not indexed"),
            How::Scan(why) => write!(f, "scan ({why})"),
            How::Feed => f.write_str("answered by the sensor"),
        }
    }
}

impl std::fmt::Display for ScanWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanWhy::Asked => f.write_str("--no-index"),
            ScanWhy::NoIndex => f.write_str("no index"),
            ScanWhy::IndexUnusable(why) => f.write_str(why),
            ScanWhy::BeingWritten => f.write_str("being written: read up to its last whole packet"),
            ScanWhy::PlainIndexedInPart => f.write_str("index covers part of a plain file"),
            ScanWhy::LateInterfaces => {
                f.write_str("interfaces described after the first packet: read whole")
            }
        }
    }
}

impl serde::Serialize for How {
    /// As its text (`--json`'s explain says what `--explain` says).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What the query did with one file (`--explain`).
#[derive(Debug, Default, serde::Serialize)]
pub struct FileReport {
    pub path: PathBuf,
    pub how: How,
    pub frames_total: u64,
    pub frames_read: u64,
    /// File bytes read (compressed, as stored).
    pub bytes_read: u64,
    /// Bytes of its index read (header, table and the chunks the look-ups needed).
    pub index_bytes_read: u64,
    /// Candidate packets the index named (None: no narrowing).
    pub candidates: Option<u64>,
    /// Packets decoded and given to the filter.
    pub packets_tested: u64,
    pub packets_matched: u64,
    /// `--name`: the flows of the file whose names matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub named_flows: Option<u64>,
    /// `--name`: the names were read from the packets (the file had no usable flow table).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub names_from_packets: bool,
    /// Why some or all of its packets are missing (None: read whole).
    #[serde(serialize_with = "as_text")]
    pub error: Option<FileError>,
}

fn as_text<S: serde::Serializer>(e: &Option<FileError>, s: S) -> Result<S::Ok, S::Error> {
    match e {
        Some(e) => s.collect_str(e),
        None => s.serialize_none(),
    }
}

impl FileReport {
    /// "PATH: what went wrong" when the file could not be read whole.
    pub fn error_line(&self) -> Option<String> {
        let path = self.path.display().to_string();
        // Most errors name the file already.
        self.error.as_ref().map(|e| {
            let e = e.to_string();
            if e.contains(&path) {
                e
            } else {
                format!("{path}: {e}")
            }
        })
    }
}

/// A file a query reads: a local path, or a capture file read by ranges (an archive's object);
/// or a feed, another ringcap's answer.
#[derive(Clone)]
enum Target {
    Path(PathBuf),
    Ranges(Arc<Remote>),
    Feed(Arc<feed::FeedTarget>),
}

/// A capture file read by ranges, and its index once the survey opened it (the worker takes it:
/// its header, table and first chunks are not fetched twice).
struct Remote {
    file: RangeFile,
    index: std::sync::Mutex<Option<IndexFile>>,
}

impl Target {
    /// What reports call it.
    fn label(&self) -> &Path {
        match self {
            Target::Path(p) => p,
            Target::Ranges(f) => &f.file.name,
            Target::Feed(f) => &f.name,
        }
    }

    /// Its bytes, to read by ranges.
    fn open(&self) -> io::Result<Arc<dyn ReadAt>> {
        match self {
            Target::Path(p) => Ok(Arc::new(std::fs::File::open(p)?)),
            Target::Ranges(f) => Ok(f.file.data.clone()),
            Target::Feed(_) => Err(io::Error::other("a feed is a stream, not read by ranges")),
        }
    }

    /// Its index, checked against it (see [`IndexFile::open`]).
    fn index(&self) -> Result<IndexFile, IndexError> {
        match self {
            Target::Path(p) => IndexFile::open(&crate::live::index_path(p), p),
            Target::Feed(f) => Err(IndexError::Io(
                f.name.display().to_string(),
                io::ErrorKind::NotFound.into(),
            )),
            Target::Ranges(r) => {
                let opened = r.index.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(ix) = opened {
                    return Ok(ix);
                }
                let f = &r.file;
                let name = f.name.display().to_string();
                let index_name = format!("{name}.idx");
                match &f.index {
                    None => Err(IndexError::Io(index_name, io::ErrorKind::NotFound.into())),
                    Some(ix) => IndexFile::open_ranges(ix.clone(), &index_name, &*f.data, &name),
                }
            }
        }
    }
}

#[derive(Default)]
struct Batch {
    meta: Vec<BatchMeta>,
    data: Vec<u8>,
}

/// One packet of a batch: its bytes are `data[start..start + len]`.
#[derive(Clone, Copy)]
struct BatchMeta {
    ts_ns: u64,
    time: RecordTime,
    wire_len: u32,
    linktype: u32,
    start: usize,
    len: usize,
}

impl Batch {
    fn full(&self) -> bool {
        self.meta.len() >= BATCH_PACKETS || self.data.len() >= BATCH_BYTES
    }
}

/// What one worker shares with the others, and its file's link as the survey found it.
struct Job {
    query: Arc<Query>,
    filters: Arc<filter::Filters>,
    link: Option<FileLink>,
    pace: Option<Arc<ReadPace>>,
    stop: Arc<AtomicBool>,
    use_index: bool,
    deadline: Option<std::time::Instant>,
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the query ran past its time limit; the result is incomplete",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{pcap_header, pcap_packets};

    #[test]
    fn a_compressed_files_first_frame_is_read_without_its_header_twice() {
        let dir = std::env::temp_dir().join(format!("ringcap-query-hdr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.pcap.zst");
        // Two zstd frames, as ringcap writes them: the first holds the file header.
        let header = pcap_header();
        let mut first = header.clone();
        first.extend(pcap_packets(0..40));
        // Streamed frames (no content size in their headers, as `zstd` writes from a pipe) and
        // one-shot frames (with it, as ringcap writes them) are read by different paths.
        type Encode = fn(&[u8]) -> Vec<u8>;
        let encodings: [(&str, Encode); 2] = [
            ("streamed", |b| zstd::encode_all(b, 1).unwrap()),
            ("one-shot", |b| zstd::bulk::compress(b, 1).unwrap()),
        ];
        for (how, encode) in encodings {
            let mut file = encode(&first);
            file.extend(encode(&pcap_packets(40..100)));
            std::fs::write(&path, &file).unwrap();
            crate::scan::index_file(&path, &std::sync::atomic::AtomicU64::new(0)).unwrap();

            let opts = QueryOptions {
                jobs: 1,
                ..Default::default()
            };
            for (expr, want) in [("", 100), ("host 10.0.0.2", 25)] {
                let q = crate::parse_query(expr, 0).unwrap();
                let mut got = 0;
                let reports = run(std::slice::from_ref(&path), &q, &opts, |_| {
                    got += 1;
                    Ok(true)
                })
                .unwrap();
                assert_eq!(reports[0].how, How::Index, "{how}: {expr}");
                assert!(reports[0].error.is_none(), "{how}: {expr}");
                assert_eq!(got, want, "{how}: {expr}: {reports:?}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
