//! What a worker does with one file: reads it by its index or whole, and passes every packet in
//! the time window through the filter into batches for the merge.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use libc::sock_filter;
use wire::LinkType;

use super::indexed::by_index;
use super::pace::{Paced, ReadPace};
use super::{Batch, FileReport, Job};
use crate::file::IndexFile;

/// A worker looks at the stop flag and the deadline after this many packets tested, so a
/// query stopped while nothing matches ends within a few milliseconds, not at the file's end.
const STOP_CHECK_PACKETS: u64 = 4096;

/// Compiled filters per link type (compiled on first use).
struct Filters {
    expr: String,
    by_linktype: HashMap<u32, Vec<sock_filter>>,
}

impl Filters {
    fn accepts(&mut self, linktype: u32, data: &[u8], wire_len: u32) -> Result<bool, String> {
        if self.expr.is_empty() {
            return Ok(true);
        }
        if !self.by_linktype.contains_key(&linktype) {
            let lt = LinkType::from_pcap(linktype).ok_or_else(|| {
                format!("cannot filter packets of link type {linktype}: only Ethernet, raw IP, Linux cooked and loopback captures can be queried with a filter")
            })?;
            let insns = capture::compile_filter(&self.expr, lt, capture::MAX_SNAPLEN)
                .map_err(|e| e.to_string())?;
            self.by_linktype.insert(linktype, insns);
        }
        Ok(capture::run_filter(&self.by_linktype[&linktype], data, wire_len) != 0)
    }
}

/// The name a file being written (`.NAME.partial`) will have when complete.
fn completed_name(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let inner = name.strip_prefix('.')?.strip_suffix(".partial")?;
    Some(path.with_file_name(inner))
}

/// Reads one file and sends its matching packets; returns what it did.
pub(super) fn query_file(path: &Path, job: &Job, tx: &SyncSender<Batch>) -> FileReport {
    if let Some(done) = completed_name(path) {
        // Being written: no index yet; read up to its last whole packet. If it was completed
        // (renamed) since the listing, read the complete file instead: same bytes and more.
        let path = if path.exists() {
            path.to_path_buf()
        } else {
            done
        };
        let mut r = query_indexed(&path, job, tx);
        if r.how.starts_with("scan (no index)") && path.to_string_lossy().ends_with(".partial") {
            r.how = "scan (being written: read up to its last whole packet)".into();
        }
        return r;
    }
    query_indexed(path, job, tx)
}

fn query_indexed(path: &Path, job: &Job, tx: &SyncSender<Batch>) -> FileReport {
    let mut r = FileReport {
        path: path.to_path_buf(),
        ..Default::default()
    };
    let mut out = Out {
        tx,
        batch: Batch::default(),
        filters: Filters {
            expr: job.query.filter.clone(),
            by_linktype: HashMap::new(),
        },
        after: job.query.after_ns.unwrap_or(0),
        before: job.query.before_ns.unwrap_or(u64::MAX),
        stop: job.stop.clone(),
        deadline: job.deadline,
    };
    let result = if job.use_index {
        match IndexFile::open(&crate::live::index_path(path), path) {
            Ok(ix) => by_index(path, &ix, job, &mut out, &mut r),
            Err(e) => {
                r.how = format!("scan ({})", short_reason(&e));
                scan_file(path, &job.pace, &mut out, &mut r)
            }
        }
    } else {
        r.how = "scan (--no-index)".into();
        scan_file(path, &job.pace, &mut out, &mut r)
    };
    // The packets found before an error go out too: the report says what is missing.
    let flushed = out.flush();
    if let Err(e) = result.and(flushed) {
        if !job.stop.load(Relaxed) {
            r.error = Some(e);
        }
    }
    r
}

pub(super) fn short_reason(e: &crate::file::IndexError) -> String {
    use crate::file::IndexError::*;
    match e {
        Io(_, e) if e.kind() == io::ErrorKind::NotFound => "no index".into(),
        other => other.to_string(),
    }
}

/// Collects matching packets into batches for the merge.
pub(super) struct Out<'a> {
    tx: &'a SyncSender<Batch>,
    batch: Batch,
    filters: Filters,
    pub(super) after: u64,
    pub(super) before: u64,
    stop: Arc<AtomicBool>,
    deadline: Option<std::time::Instant>,
}

impl Out<'_> {
    fn offer(&mut self, r: &mut FileReport, p: &store::Packet<'_>) -> Result<(), String> {
        r.packets_tested += 1;
        if r.packets_tested.is_multiple_of(STOP_CHECK_PACKETS) {
            self.check_stop()?;
        }
        if p.ts_ns < self.after || p.ts_ns >= self.before {
            return Ok(());
        }
        if !self.filters.accepts(p.linktype, p.data, p.wire_len)? {
            return Ok(());
        }
        r.packets_matched += 1;
        let start = self.batch.data.len();
        self.batch.data.extend_from_slice(p.data);
        self.batch
            .meta
            .push((p.ts_ns, p.wire_len, p.linktype, start, p.data.len()));
        if self.batch.full() {
            self.flush()?;
        }
        Ok(())
    }

    /// Err once the query was stopped or ran past its deadline.
    fn check_stop(&self) -> Result<(), String> {
        if self.stop.load(Relaxed) {
            return Err("stopped".into());
        }
        if self
            .deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
        {
            return Err("the query ran past its time limit".into());
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        self.check_stop()?;
        if self.batch.meta.is_empty() {
            return Ok(());
        }
        let b = std::mem::take(&mut self.batch);
        self.tx.send(b).map_err(|_| "stopped".to_string())
    }
}

/// Reads every packet of a byte stream (the file header in front) through the filter.
pub(super) fn read_stream(
    prelude: &[u8],
    body: Box<dyn Read + Send>,
    label: &Path,
    out: &mut Out<'_>,
    r: &mut FileReport,
    capacity: usize,
) -> Result<(), String> {
    let stream = Cursor::new(prelude.to_vec()).chain(body);
    let mut reader = store::CaptureReader::from_reader_sized(Box::new(stream), label, capacity)
        .map_err(|e| e.to_string())?;
    while let Some(p) = reader.next_packet() {
        let p = p.map_err(|e| e.to_string())?;
        out.offer(r, &p)?;
    }
    note_damage(&reader, r);
    Ok(())
}

/// Puts what the reader found damaged in the report (its packets are missing from the result;
/// what it could read, before and after, was returned).
fn note_damage(reader: &store::CaptureReader, r: &mut FileReport) {
    let Some(first) = reader.issues().iter().find(|i| i.corrupt) else {
        return;
    };
    if r.error.is_some() {
        return;
    }
    let skipped = match first.skipped {
        0 => String::new(),
        n => format!(", {n} bytes skipped"),
    };
    let more = match reader.issues_total() {
        0 | 1 => String::new(),
        n => format!(" ({n} problems in all)"),
    };
    r.error = Some(format!(
        "damaged {} bytes into its packet data ({}{skipped}){more}: what lay there is missing",
        first.offset, first.reason
    ));
}

/// The whole file, as `tcpdump -r` would read it.
pub(super) fn scan_file(
    path: &Path,
    pace: &Option<Arc<ReadPace>>,
    out: &mut Out<'_>,
    r: &mut FileReport,
) -> Result<(), String> {
    r.bytes_read = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let paced = Paced {
        inner: file,
        pace: pace.clone(),
    };
    let mut reader =
        store::CaptureReader::from_reader(Box::new(paced), path).map_err(|e| e.to_string())?;
    while let Some(p) = reader.next_packet() {
        let p = p.map_err(|e| e.to_string())?;
        out.offer(r, &p)?;
    }
    // A file being written ends inside a record or a frame: that is its edge, not damage.
    if completed_name(path).is_none() {
        note_damage(&reader, r);
        let compressed = matches!(
            reader.compression(),
            store::Compression::Zstd | store::Compression::Lz4
        );
        if let (Some(e), true) = (r.error.as_mut(), compressed) {
            // The scan stops at a frame that does not decode; the index can step over it.
            e.push_str(
                "; `ringcap index` on the file leaves frames that do not decode out and indexes \
                 the rest (if its frames are cut at packets, as ringcap's are), so queries read on",
            );
        }
    }
    Ok(())
}
