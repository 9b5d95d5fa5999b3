//! Running a query over capture files: time prunes files and frames, the index narrows to
//! candidate packets, libpcap's compiled filter (tcpdump's) decides every candidate. Files are
//! read by a few worker threads at low priority; results come back in time order across files
//! (file order within a file, as `tcpdump -r` gives it) through bounded channels, so memory
//! stays bounded whatever the store's size.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Cursor, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use libc::sock_filter;

pub use crate::priority::Priority;
use wire::LinkType;

use crate::expr::Query;
use crate::file::{Compression, Frame, IndexFile};
use crate::scan::decoder;

/// Packets handed over per batch (and about this many bytes at most).
const BATCH_PACKETS: usize = 4096;
const BATCH_BYTES: usize = 1 << 20;
/// Batches buffered per file between a worker and the merge.
const BATCHES_AHEAD: usize = 2;
/// Candidate records closer than this are read with one read.
const COALESCE: u64 = 64 << 10;
/// A worker looks at the stop flag and the deadline after this many packets tested, so a
/// query stopped while nothing matches ends within a few milliseconds, not at the file's end.
const STOP_CHECK_PACKETS: u64 = 4096;

/// How a query runs.
#[derive(Clone, Debug)]
pub struct QueryOptions {
    /// Files read at once.
    pub jobs: usize,
    /// Use the indexes (off: scan everything, as a check).
    pub use_index: bool,
    /// Read at most this many file bytes per second, all workers together (`--max-read-rate`).
    pub max_read_rate: Option<u64>,
    /// Give up at this instant: [`run`] then fails with `ErrorKind::TimedOut` (a server's
    /// query-time limit).
    pub deadline: Option<std::time::Instant>,
    /// How the workers yield to a capture.
    pub priority: Priority,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            jobs: 2,
            use_index: true,
            max_read_rate: None,
            deadline: None,
            priority: Priority::Low,
        }
    }
}

/// The query of an expression (tcpdump syntax with stenographer's `after`/`before` terms) and
/// optional `--after`/`--before` times, its filter compiled once so that a typo is reported
/// (with libpcap's words) before any file is read. The window is the narrower of both.
pub fn prepare_query(
    expr: &str,
    after: Option<&str>,
    before: Option<&str>,
    now_ns: u64,
) -> Result<Query, String> {
    let mut q = crate::parse_query(expr, now_ns)?;
    if let Some(t) = after.map(|t| crate::parse_time(t, now_ns)).transpose()? {
        q.after_ns = Some(q.after_ns.map_or(t, |x| x.max(t)));
    }
    if let Some(t) = before.map(|t| crate::parse_time(t, now_ns)).transpose()? {
        q.before_ns = Some(q.before_ns.map_or(t, |x| x.min(t)));
    }
    check_filter(&q.filter)?;
    Ok(q)
}

/// Paces the file bytes all workers read (a shared token bucket with 100 ms of credit), so a
/// query can be kept from competing with a capture for the disk.
struct ReadPace {
    rate: u64,
    next: std::sync::Mutex<std::time::Instant>,
    /// The query's deadline: a wait that would pass it ends there, with an error.
    deadline: Option<std::time::Instant>,
}

impl ReadPace {
    fn take(&self, n: u64) -> io::Result<()> {
        let now = std::time::Instant::now();
        let until = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let floor = now
                .checked_sub(std::time::Duration::from_millis(100))
                .unwrap_or(now);
            *next = (*next).max(floor)
                + std::time::Duration::from_secs_f64(n as f64 / self.rate as f64);
            *next
        };
        if let Some(d) = self.deadline.filter(|d| until > *d) {
            std::thread::sleep(d.saturating_duration_since(now));
            return Err(timed_out());
        }
        if until > now {
            std::thread::sleep(until - now);
        }
        Ok(())
    }
}

/// A reader whose bytes go through the pace.
struct Paced<R> {
    inner: R,
    pace: Option<Arc<ReadPace>>,
}

impl<R: Read> Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(p) = &self.pace {
            p.take(n as u64)?;
        }
        Ok(n)
    }
}

/// One matching packet.
pub struct Hit<'a> {
    pub ts_ns: u64,
    pub wire_len: u32,
    pub linktype: u32,
    pub data: &'a [u8],
}

/// What the query did with one file (`--explain`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FileReport {
    pub path: PathBuf,
    /// "index", "scan" or "skipped", and why.
    pub how: String,
    pub frames_total: u64,
    pub frames_read: u64,
    /// File bytes read (compressed, as stored).
    pub bytes_read: u64,
    /// Candidate packets the index named (None: no narrowing).
    pub candidates: Option<u64>,
    /// Packets decoded and given to the filter.
    pub packets_tested: u64,
    pub packets_matched: u64,
    pub error: Option<String>,
}

impl FileReport {
    /// "PATH: what went wrong" when the file could not be read whole.
    pub fn error_line(&self) -> Option<String> {
        let path = self.path.display().to_string();
        // Most errors name the file already.
        self.error.as_ref().map(|e| {
            if e.contains(&path) {
                e.clone()
            } else {
                format!("{path}: {e}")
            }
        })
    }
}

#[derive(Default)]
struct Batch {
    /// (ts, wire_len, linktype, start, len) into `data`.
    meta: Vec<(u64, u32, u32, usize, usize)>,
    data: Vec<u8>,
}

impl Batch {
    fn full(&self) -> bool {
        self.meta.len() >= BATCH_PACKETS || self.data.len() >= BATCH_BYTES
    }
}

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

/// Checks the filter compiles (for Ethernet) before any file is read: a typo is reported at once.
pub fn check_filter(expr: &str) -> Result<(), String> {
    if expr.is_empty() {
        return Ok(());
    }
    capture::compile_filter(expr, LinkType::Ethernet, capture::MAX_SNAPLEN)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// What one worker shares with the others.
struct Job {
    query: Arc<Query>,
    pace: Option<Arc<ReadPace>>,
    stop: Arc<AtomicBool>,
    use_index: bool,
    deadline: Option<std::time::Instant>,
}

struct Stream {
    rx: Receiver<Batch>,
    batch: Batch,
    at: usize,
    order: usize,
    handle: Option<JoinHandle<FileReport>>,
}

impl Stream {
    /// The head packet's time; refills from the worker; None at the end.
    fn head(&mut self) -> Option<u64> {
        while self.at >= self.batch.meta.len() {
            self.batch = self.rx.recv().ok()?;
            self.at = 0;
        }
        Some(self.batch.meta[self.at].0)
    }
}

/// Runs `query` over `files`, calling `emit` for each matching packet in time order across files
/// (within a file, in file order); `emit` returns false to stop (`--limit`). Returns what was
/// done per file, in the order files were given.
pub fn run(
    files: &[PathBuf],
    query: &Query,
    opts: &QueryOptions,
    mut emit: impl FnMut(&Hit<'_>) -> io::Result<bool>,
) -> io::Result<Vec<FileReport>> {
    let stop = Arc::new(AtomicBool::new(false));
    let pace = opts.max_read_rate.map(|rate| {
        Arc::new(ReadPace {
            rate: rate.max(1),
            next: std::sync::Mutex::new(std::time::Instant::now()),
            deadline: opts.deadline,
        })
    });
    let job = |_: usize| Job {
        query: Arc::new(query.clone()),
        pace: pace.clone(),
        stop: stop.clone(),
        use_index: opts.use_index,
        deadline: opts.deadline,
    };
    let past_deadline = || {
        opts.deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
    };
    // Order files by their first packet (from the index, or by peeking).
    let mut order: Vec<(u64, usize)> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (first_ts(f), i))
        .collect();
    order.sort();
    let jobs = opts.jobs.max(1);
    let mut reports: Vec<Option<FileReport>> = vec![None; files.len()];
    let mut next = 0usize; // next file (in `order`) to start
    let mut streams: Vec<Stream> = Vec::new();
    let start = |k: usize| -> Stream {
        let i = order[k].1;
        let (tx, rx) = sync_channel(BATCHES_AHEAD);
        let path = files[i].clone();
        let j = job(i);
        let priority = opts.priority;
        let handle = std::thread::Builder::new()
            .name("ringcap-query".into())
            .spawn(move || {
                priority.apply();
                query_file(&path, &j, &tx)
            })
            .expect("spawn a query worker");
        Stream {
            rx,
            batch: Batch::default(),
            at: 0,
            order: i,
            handle: Some(handle),
        }
    };
    // `live`: streams being merged; `ahead`: started, not merged yet (read in parallel).
    let mut ahead: std::collections::VecDeque<(u64, Stream)> = Default::default();
    let mut stopped = false;
    let mut failed: Option<io::Error> = None;
    loop {
        while ahead.len() + streams.len() < jobs && next < order.len() {
            ahead.push_back((order[next].0, start(next)));
            next += 1;
        }
        // Merge in the next file when nothing is live or it may start before the live heads.
        let min_head = streams.iter_mut().filter_map(|s| s.head()).min();
        if let Some((t, _)) = ahead.front() {
            if min_head.is_none_or(|m| *t <= m) {
                let (_, s) = ahead.pop_front().expect("front");
                streams.push(s);
                continue;
            }
        }
        // Drop finished streams, keeping their reports.
        let mut i = 0;
        while i < streams.len() {
            if streams[i].head().is_none() {
                let mut s = streams.remove(i);
                if let Some(h) = s.handle.take() {
                    reports[s.order] = Some(h.join().unwrap_or_default());
                }
            } else {
                i += 1;
            }
        }
        let Some(best) = (0..streams.len()).min_by_key(|&i| (streams[i].head(), streams[i].order))
        else {
            if ahead.is_empty() && next >= order.len() {
                break;
            }
            continue;
        };
        if stopped {
            break;
        }
        if past_deadline() {
            failed = Some(timed_out());
            break;
        }
        let s = &mut streams[best];
        let (ts, wire_len, linktype, at, len) = s.batch.meta[s.at];
        s.at += 1;
        let hit = Hit {
            ts_ns: ts,
            wire_len,
            linktype,
            data: &s.batch.data[at..at + len],
        };
        match emit(&hit) {
            Ok(true) => {}
            Ok(false) => stopped = true,
            // The reader went away: stop the workers before saying so.
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    // Stop the workers still running and collect what they did.
    stop.store(true, Relaxed);
    for mut s in streams.into_iter().chain(ahead.into_iter().map(|(_, s)| s)) {
        drop(std::mem::replace(&mut s.rx, sync_channel(0).1));
        if let Some(h) = s.handle.take() {
            reports[s.order] = Some(h.join().unwrap_or_default());
        }
    }
    if failed.is_none() && past_deadline() && reports.iter().flatten().any(|r| r.error.is_some()) {
        // A worker gave up at the deadline (its file's report says so).
        failed = Some(timed_out());
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(files
        .iter()
        .zip(reports)
        .map(|(f, r)| {
            r.unwrap_or_else(|| FileReport {
                path: f.clone(),
                how: "not read (the query stopped first)".into(),
                ..Default::default()
            })
        })
        .collect())
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the query ran past its time limit; the result is incomplete",
    )
}

/// The time of a file's first packet: from its index, else by reading it (0 if unreadable).
fn first_ts(path: &Path) -> u64 {
    if let Some(h) = IndexFile::peek_header(&crate::live::index_path(path)) {
        return h.first_ts;
    }
    store::CaptureReader::open(path)
        .ok()
        .and_then(|mut r| r.next_packet().and_then(|p| p.ok()).map(|p| p.ts_ns))
        .unwrap_or(0)
}

/// The name a file being written (`.NAME.partial`) will have when complete.
fn completed_name(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let inner = name.strip_prefix('.')?.strip_suffix(".partial")?;
    Some(path.with_file_name(inner))
}

/// Reads one file and sends its matching packets; returns what it did.
fn query_file(path: &Path, job: &Job, tx: &SyncSender<Batch>) -> FileReport {
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
    if let Err(e) = result.and_then(|_| out.flush()) {
        if !job.stop.load(Relaxed) {
            r.error = Some(e);
        }
    }
    r
}

fn short_reason(e: &crate::file::IndexError) -> String {
    use crate::file::IndexError::*;
    match e {
        Io(_, e) if e.kind() == io::ErrorKind::NotFound => "no index".into(),
        other => other.to_string(),
    }
}

/// Collects matching packets into batches for the merge.
struct Out<'a> {
    tx: &'a SyncSender<Batch>,
    batch: Batch,
    filters: Filters,
    after: u64,
    before: u64,
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
fn read_stream(
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
    Ok(())
}

/// The whole file, as `tcpdump -r` would read it.
fn scan_file(
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
    Ok(())
}

/// A piece of a file, decompressed frame by frame.
struct Frames {
    file: File,
    pace: Option<Arc<ReadPace>>,
    pieces: std::vec::IntoIter<(u64, u64)>,
    compression: u8,
    cur: Option<Box<dyn Read + Send>>,
}

impl Read for Frames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.cur.is_none() {
                let Some((off, len)) = self.pieces.next() else {
                    return Ok(0);
                };
                let mut f = self.file.try_clone()?;
                f.seek(SeekFrom::Start(off))?;
                let paced = Paced {
                    inner: f.take(len),
                    pace: self.pace.clone(),
                };
                self.cur = Some(decoder(paced, self.compression)?);
            }
            let n = self.cur.as_mut().expect("set").read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            self.cur = None;
        }
    }
}

fn by_index(
    path: &Path,
    ix: &IndexFile,
    job: &Job,
    out: &mut Out<'_>,
    r: &mut FileReport,
) -> Result<(), String> {
    let h = ix.header;
    let compressed = h.compression != Compression::NONE;
    if !compressed && !h.complete {
        // A plain file indexed only in part: records cross the edge; read it whole.
        r.how = "scan (index covers part of a plain file)".into();
        return scan_file(path, &job.pace, out, r);
    }
    r.how = "index".into();
    r.frames_total = u64::from(h.frames);
    let frames: Vec<Frame> = ix.frames().collect();
    let in_time: Vec<bool> = frames
        .iter()
        .map(|f| f.overlaps(out.after, out.before))
        .collect();
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let prelude = ix.prelude();
    // Which frames to read, and (plain files) which records.
    let mut wanted = vec![false; frames.len()];
    let mut records: Vec<u64> = Vec::new();
    match ix.candidates(&job.query.narrow) {
        None => wanted.clone_from(&in_time),
        Some(flows) => {
            let mut offs = Vec::new();
            ix.postings(&flows, &mut offs).map_err(|e| e.to_string())?;
            if ix.postings_are_frames() {
                // Every packet of a candidate frame goes through the filter.
                offs.retain(|&k| in_time.get(k as usize) == Some(&true));
                offs.sort_unstable();
                offs.dedup();
                r.candidates = Some(offs.iter().map(|&k| frames[k as usize].packets).sum());
                for k in offs {
                    wanted[k as usize] = true;
                }
                offs = Vec::new();
            } else {
                r.candidates = Some(offs.len() as u64);
            }
            offs.sort_unstable();
            for off in offs {
                let k = frames
                    .partition_point(|f| f.rec_start <= off)
                    .saturating_sub(1);
                if in_time.get(k) == Some(&true) {
                    wanted[k] = true;
                    records.push(off);
                }
            }
        }
    }
    if compressed || r.candidates.is_none() {
        // Runs of wanted frames, each read as one piece.
        let mut k = 0;
        while k < frames.len() {
            if !wanted[k] {
                k += 1;
                continue;
            }
            let first = k;
            while k < frames.len() && wanted[k] {
                k += 1;
            }
            r.frames_read += (k - first) as u64;
            if compressed {
                let pieces: Vec<(u64, u64)> = frames[first..k]
                    .iter()
                    .map(|f| (f.file_off, f.file_len))
                    .collect();
                r.bytes_read += pieces.iter().map(|p| p.1).sum::<u64>();
                let body = Frames {
                    file: file.try_clone().map_err(|e| e.to_string())?,
                    pace: job.pace.clone(),
                    pieces: pieces.into_iter(),
                    compression: h.compression,
                    cur: None,
                };
                let body = past_header(Box::new(body), frames[first].raw_start, prelude, path)?;
                read_stream(prelude, body, path, out, r, 1 << 20)?;
            } else {
                let from = frames[first].rec_start;
                let to = frames.get(k).map_or(h.covered, |f| f.rec_start);
                r.bytes_read += to - from;
                let mut f = file.try_clone().map_err(|e| e.to_string())?;
                f.seek(SeekFrom::Start(from)).map_err(|e| e.to_string())?;
                let paced = Paced {
                    inner: f.take(to - from),
                    pace: job.pace.clone(),
                };
                read_stream(prelude, Box::new(paced), path, out, r, 1 << 20)?;
            }
        }
    } else {
        plain_records(&file, prelude, &records, path, &job.pace, out, r)?;
        r.frames_read = wanted.iter().filter(|&&w| w).count() as u64;
    }
    if !h.complete {
        // What the index does not cover (compressed: whole frames from `covered` on).
        let size = file.metadata().map(|m| m.len()).unwrap_or(h.covered);
        r.how = "index + scan of the part not indexed".into();
        r.bytes_read += size - h.covered;
        let body = Frames {
            file: file.try_clone().map_err(|e| e.to_string())?,
            pace: job.pace.clone(),
            pieces: vec![(h.covered, size - h.covered)].into_iter(),
            compression: h.compression,
            cur: None,
        };
        let raw_start = frames.last().map_or(0, |f| f.raw_start + f.raw_len);
        let body = past_header(Box::new(body), raw_start, prelude, path)?;
        read_stream(prelude, body, path, out, r, 1 << 20)?;
    }
    Ok(())
}

/// The uncompressed stream of a file from `raw_start` on, less the part of the file header
/// (`prelude`, which [`read_stream`] puts in front of every stream) that it holds: a compressed
/// file's first frame begins with the header. Read twice, a pcap header is a zero-length packet
/// (libpcap reads it so) followed by garbage, and the packets after it are lost as damage.
fn past_header(
    mut body: Box<dyn Read + Send>,
    raw_start: u64,
    prelude: &[u8],
    path: &Path,
) -> Result<Box<dyn Read + Send>, String> {
    let skip = (prelude.len() as u64).saturating_sub(raw_start);
    if skip > 0 {
        io::copy(&mut body.by_ref().take(skip), &mut io::sink())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(body)
}

/// Reads the candidate records of a plain file, nearby ones together.
fn plain_records(
    file: &File,
    prelude: &[u8],
    offs: &[u64],
    path: &Path,
    pace: &Option<Arc<ReadPace>>,
    out: &mut Out<'_>,
    r: &mut FileReport,
) -> Result<(), String> {
    let layout = Layout::of(prelude)?;
    let mut i = 0;
    let mut buf = Vec::new();
    while i < offs.len() {
        let first = offs[i];
        let mut last = first;
        i += 1;
        while i < offs.len() && offs[i] - last <= COALESCE {
            last = offs[i];
            i += 1;
        }
        let head = read_exact_at(file, last, layout.header_len())?;
        let end = last + layout.record_len(&head)?;
        buf.resize((end - first) as usize, 0);
        file.read_exact_at(&mut buf, first)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        r.bytes_read += end - first;
        if let Some(p) = pace {
            p.take(end - first).map_err(|e| e.to_string())?;
        }
        let cap = prelude.len() + buf.len() + 64;
        read_stream(
            prelude,
            Box::new(Cursor::new(std::mem::take(&mut buf))),
            path,
            out,
            r,
            cap,
        )?;
    }
    Ok(())
}

fn read_exact_at(file: &File, off: u64, n: usize) -> Result<Vec<u8>, String> {
    let mut b = vec![0; n];
    file.read_exact_at(&mut b, off)
        .map_err(|e| format!("reading a record at {off}: {e}"))?;
    Ok(b)
}

/// How to find a record's length in a plain file.
struct Layout {
    pcapng: bool,
    big_endian: bool,
}

impl Layout {
    fn of(prelude: &[u8]) -> Result<Layout, String> {
        let m = prelude.get(..4).ok_or("the index holds no file header")?;
        let le = u32::from_le_bytes(m.try_into().unwrap());
        let be = u32::from_be_bytes(m.try_into().unwrap());
        let pcap = [store::PCAP_MAGIC_US, store::PCAP_MAGIC_NS];
        if pcap.contains(&le) || pcap.contains(&be) {
            return Ok(Layout {
                pcapng: false,
                big_endian: !pcap.contains(&le),
            });
        }
        let bom = prelude.get(8..12).ok_or("short pcapng header")?;
        Ok(Layout {
            pcapng: true,
            big_endian: bom == [0x1a, 0x2b, 0x3c, 0x4d],
        })
    }

    fn header_len(&self) -> usize {
        if self.pcapng {
            8
        } else {
            16
        }
    }

    fn record_len(&self, head: &[u8]) -> Result<u64, String> {
        let at = if self.pcapng { 4 } else { 8 };
        let b: [u8; 4] = head[at..at + 4].try_into().unwrap();
        let v = if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        };
        let len = if self.pcapng { v } else { v + 16 };
        if v > 1 << 24 {
            return Err(format!("an impossible record length {v}: the index does not match the file; run `ringcap index`"));
        }
        Ok(u64::from(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pcap stream (µs) of `n` Ethernet/IPv4/UDP packets from 10.0.0.(i % 4 + 1).
    fn pcap_packets(range: std::ops::Range<u32>) -> Vec<u8> {
        let mut v = Vec::new();
        for i in range {
            let mut f = vec![0u8; 60];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&46u16.to_be_bytes());
            f[22] = 64;
            f[23] = 17;
            f[26..30].copy_from_slice(&[10, 0, 0, (i % 4 + 1) as u8]);
            f[30..34].copy_from_slice(&[10, 1, 0, 1]);
            f[34..36].copy_from_slice(&1000u16.to_be_bytes());
            f[36..38].copy_from_slice(&53u16.to_be_bytes());
            f[38..40].copy_from_slice(&26u16.to_be_bytes());
            for x in [1_700_000_000 + i, i, 60, 60] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.extend_from_slice(&f);
        }
        v
    }

    #[test]
    fn a_compressed_files_first_frame_is_read_without_its_header_twice() {
        let dir = std::env::temp_dir().join(format!("ringcap-query-hdr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.pcap.zst");
        // Two zstd frames, as ringcap writes them: the first holds the file header.
        let mut header = Vec::new();
        for x in [store::PCAP_MAGIC_US, 0x0004_0002, 0, 0, 65535, 1] {
            header.extend_from_slice(&x.to_le_bytes());
        }
        let mut first = header.clone();
        first.extend(pcap_packets(0..40));
        let mut file = zstd::encode_all(&first[..], 1).unwrap();
        file.extend(zstd::encode_all(&pcap_packets(40..100)[..], 1).unwrap());
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
            assert_eq!(reports[0].how, "index", "{expr}");
            assert_eq!(reports[0].error, None, "{expr}");
            assert_eq!(got, want, "{expr}: {reports:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
