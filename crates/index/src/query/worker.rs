//! What a worker does with one file: reads it by its index or whole, and passes every packet in
//! the time window through the filter into batches for the merge.

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use super::filter::Matcher;
use super::indexed::by_index;
use super::pace::{Paced, ReadPace};
use super::{Batch, BatchMeta, FileError, FileReport, How, Job, ScanWhy, Target};

/// A worker looks at the stop flag and the deadline after this many packets tested, so a
/// query stopped while nothing matches ends within a few milliseconds, not at the file's end.
pub(super) const STOP_CHECK_PACKETS: u64 = 4096;

/// The filter of one file, compiled for its link as `tcpdump -r` compiles it (see
/// [`super::filter::Filters`]): decided when the file's first reader knows its link.
enum FileFilter {
    /// No expression: every packet.
    All,
    Matcher(Arc<Matcher>),
    /// Not compiled yet (the survey did not see the file's link).
    Pending,
}

/// Reads one file and sends its matching packets; returns what it did.
pub(super) fn query_file(t: &Target, job: &Job, tx: &SyncSender<Batch>) -> FileReport {
    let path = match t {
        Target::Path(p) => p,
        // Archived files are complete.
        Target::Ranges(_) => return query_indexed(t, job, tx),
        Target::Feed(f) => {
            let mut out = Out {
                tx,
                batch: Batch::default(),
                filter: FileFilter::All,
                job,
                after: job.query.after_ns.unwrap_or(0),
                before: job.query.before_ns,
                named: None,
            };
            return f.run(&mut out);
        }
    };
    if let Some(done) = store::container::finished_name(path) {
        // Being written: no index yet; read up to its last whole packet. If it was completed
        // (renamed) since the listing, read the complete file instead: same bytes and more.
        let path = if path.exists() {
            path.to_path_buf()
        } else {
            done
        };
        let mut r = query_indexed(&Target::Path(path.clone()), job, tx);
        if r.how == How::Scan(ScanWhy::NoIndex) && store::container::is_partial(&path) {
            r.how = How::Scan(ScanWhy::BeingWritten);
        }
        return r;
    }
    query_indexed(t, job, tx)
}

fn query_indexed(t: &Target, job: &Job, tx: &SyncSender<Batch>) -> FileReport {
    let mut r = FileReport {
        path: t.label().to_path_buf(),
        ..Default::default()
    };
    let filter = match job.link.map(|l| job.filters.for_link(l)) {
        None => FileFilter::Pending,
        Some(Ok(None)) => FileFilter::All,
        Some(Ok(Some(m))) => FileFilter::Matcher(m),
        Some(Err(e)) => {
            r.error = Some(FileError::Filter(e));
            return r;
        }
    };
    let named = if job.query.names.is_empty() {
        None
    } else {
        match super::named::flows_named(t, job, &mut r) {
            Ok(set) => Some(set),
            Err(e) => {
                r.error = Some(e);
                return r;
            }
        }
    };
    let mut out = Out {
        tx,
        batch: Batch::default(),
        filter,
        job,
        after: job.query.after_ns.unwrap_or(0),
        before: job.query.before_ns,
        named,
    };
    let result = if job.use_index {
        match t.index() {
            Ok(ix) => {
                let done = by_index(t, &ix, job, &mut out, &mut r);
                r.index_bytes_read = ix.bytes_read();
                done
            }
            Err(e) => {
                r.how = How::Scan(scan_why(&e));
                scan_file(t, &job.pace, &mut out, &mut r)
            }
        }
    } else {
        r.how = How::Scan(ScanWhy::Asked);
        scan_file(t, &job.pace, &mut out, &mut r)
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

/// Why a file's index could not be used.
pub(super) fn scan_why(e: &crate::file::IndexError) -> ScanWhy {
    use crate::file::IndexError::*;
    match e {
        Io(_, e) if e.kind() == io::ErrorKind::NotFound => ScanWhy::NoIndex,
        other => ScanWhy::IndexUnusable(other.to_string()),
    }
}

/// Collects matching packets into batches for the merge.
pub(super) struct Out<'a> {
    tx: &'a SyncSender<Batch>,
    batch: Batch,
    filter: FileFilter,
    job: &'a Job,
    /// The window: at or after `after`, strictly before `before` (None: no end; a time past
    /// 2^64 ns is still a time).
    pub(super) after: u64,
    pub(super) before: Option<u64>,
    /// `--name`: only packets of these flows.
    pub(super) named: Option<super::named::FlowSet>,
}

impl Out<'_> {
    /// The reader's link decides the filter when the survey did not.
    fn learn_link(&mut self, reader: &store::CaptureReader) -> Result<(), FileError> {
        if let (FileFilter::Pending, Some(link)) = (&self.filter, reader.link()) {
            self.filter = match self.job.filters.for_link(link).map_err(FileError::Filter)? {
                None => FileFilter::All,
                Some(m) => FileFilter::Matcher(m),
            };
        }
        Ok(())
    }

    /// A packet another ringcap matched already (a feed's): kept if in the window.
    pub(super) fn offer_unfiltered(
        &mut self,
        r: &mut FileReport,
        p: &store::Packet<'_>,
    ) -> Result<(), FileError> {
        debug_assert!(matches!(self.filter, FileFilter::All));
        self.offer(r, p)
    }

    fn offer(&mut self, r: &mut FileReport, p: &store::Packet<'_>) -> Result<(), FileError> {
        r.packets_tested += 1;
        if r.packets_tested.is_multiple_of(STOP_CHECK_PACKETS) {
            self.check_stop()?;
        }
        if p.ts_ns < self.after || self.before.is_some_and(|b| p.ts_ns >= b) {
            return Ok(());
        }
        if self
            .named
            .as_ref()
            .is_some_and(|n| !n.contains(p.data, p.linktype))
        {
            return Ok(());
        }
        let accept = match &self.filter {
            FileFilter::All => true,
            FileFilter::Matcher(m) => m.accepts(p.data, p.wire_len),
            FileFilter::Pending => return Err(FileError::LinkUnknown),
        };
        if !accept {
            return Ok(());
        }
        r.packets_matched += 1;
        let start = self.batch.data.len();
        self.batch.data.extend_from_slice(p.data);
        self.batch.meta.push(BatchMeta {
            ts_ns: p.ts_ns,
            time: p.time,
            wire_len: p.wire_len,
            linktype: p.linktype,
            start,
            len: p.data.len(),
        });
        if self.batch.full() {
            self.flush()?;
        }
        Ok(())
    }

    /// Err once the query was stopped or ran past its deadline.
    fn check_stop(&self) -> Result<(), FileError> {
        if self.job.stop.load(Relaxed) {
            return Err(FileError::Stopped);
        }
        if self
            .job
            .deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
        {
            return Err(FileError::TimedOut);
        }
        Ok(())
    }

    pub(super) fn flush(&mut self) -> Result<(), FileError> {
        self.check_stop()?;
        if self.batch.meta.is_empty() {
            return Ok(());
        }
        let b = std::mem::take(&mut self.batch);
        self.tx.send(b).map_err(|_| FileError::Stopped)
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
) -> Result<(), FileError> {
    let stream = Cursor::new(prelude.to_vec()).chain(body);
    let mut reader = store::CaptureReader::strict_from_reader(Box::new(stream), label, capacity)?;
    out.learn_link(&reader)?;
    while let Some(p) = reader.next_packet() {
        let p = p?;
        out.offer(r, &p)?;
    }
    note_damage(&reader, r, false);
    Ok(())
}

/// Puts what the reader found damaged in the report (its packets are missing from the result;
/// what it could read, before and after, was returned).
fn note_damage(reader: &store::CaptureReader, r: &mut FileReport, compressed: bool) {
    let Some(first) = reader.issues().iter().find(|i| i.corrupt) else {
        return;
    };
    if r.error.is_some() {
        return;
    }
    r.error = Some(FileError::Damaged {
        offset: first.offset,
        reason: first.reason.clone(),
        skipped: first.skipped,
        problems: reader.issues_total(),
        compressed,
    });
}

/// The whole file, as `tcpdump -r` would read it.
pub(super) fn scan_file(
    t: &Target,
    pace: &Option<Arc<ReadPace>>,
    out: &mut Out<'_>,
    r: &mut FileReport,
) -> Result<(), FileError> {
    let path = t.label();
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let paced: Box<dyn Read + Send> = match t {
        Target::Path(path) => {
            r.bytes_read = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            let file = File::open(path).map_err(io)?;
            Box::new(Paced {
                inner: file,
                pace: pace.clone(),
            })
        }
        Target::Feed(_) => return Err(io(std::io::Error::other("a feed is not scanned"))),
        Target::Ranges(f) => {
            let len = f.file.data.len().map_err(io)?;
            r.bytes_read = len;
            Box::new(Paced {
                inner: crate::ranges::stream_of(f.file.data.clone(), 0..len).map_err(io)?,
                pace: pace.clone(),
            })
        }
    };
    // Read as tcpdump reads it: the first damage ends the file (what follows is not returned).
    let mut reader = store::CaptureReader::strict_from_reader(paced, path, 1 << 20)?;
    out.learn_link(&reader)?;
    while let Some(p) = reader.next_packet() {
        out.offer(r, &p?)?;
    }
    // A file being written ends inside a record or a frame: that is its edge, not damage.
    if store::container::finished_name(path).is_none() {
        // The scan stops at a frame that does not decode; the index can step over it.
        let compressed = matches!(
            reader.compression(),
            store::Compression::Zstd | store::Compression::Lz4
        );
        note_damage(&reader, r, compressed);
    }
    Ok(())
}
