//! The merge: starts a worker per file (a few at a time) and hands their matching packets over in
//! time order across files.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::filter::Filters;
use super::pace::ReadPace;
use super::worker::query_file;
use super::{Batch, FileReport, Hit, Job, QueryError, QueryOptions, Remote, Target, BATCH_PACKETS};
use crate::expr::Query;
use crate::ranges::RangeFile;
use store::{FileLink, StreamHeader};

/// Batches buffered per file between a worker and the merge.
const BATCHES_AHEAD: usize = 2;
/// Files read ahead of the merge, besides the `jobs` being read: a worker that finished its file
/// (a narrow query's few packets wait in its channel) is replaced at once instead of when the
/// merge gets to its file. With two files at a time a one-host query over 157 files used 1.1
/// CPUs of 2 (each worker waited for the file before it). Memory: their batches (2 each).
const FILES_AHEAD: usize = 8;
/// How long the merge waits for a file's next batch before it looks for workers to replace.
const POLL: Duration = Duration::from_millis(2);

/// A file's next packet, as far as the merge can tell without waiting long.
enum Head {
    Ready,
    Pending,
    Done,
}

struct Stream {
    rx: Receiver<Batch>,
    batch: Batch,
    at: usize,
    order: usize,
    handle: Option<JoinHandle<FileReport>>,
}

impl Stream {
    /// Whether the file's next packet is there, waiting up to `wait` for the worker.
    fn poll(&mut self, wait: Duration) -> Head {
        while self.at >= self.batch.meta.len() {
            match self.rx.recv_timeout(wait) {
                Ok(b) => {
                    self.batch = b;
                    self.at = 0;
                }
                Err(RecvTimeoutError::Timeout) => return Head::Pending,
                Err(RecvTimeoutError::Disconnected) => return Head::Done,
            }
        }
        Head::Ready
    }

    /// Its worker is still reading the file.
    fn running(&self) -> bool {
        self.handle.as_ref().is_some_and(|h| !h.is_finished())
    }

    /// The head packet's time; refills from the worker; None at the end.
    fn head(&mut self) -> Option<u64> {
        while self.at >= self.batch.meta.len() {
            self.batch = self.rx.recv().ok()?;
            self.at = 0;
        }
        Some(self.batch.meta[self.at].ts_ns)
    }
}

/// A query ready to run over its files: each file's first time and link surveyed, the filter
/// compiled for every link among them (so that an expression libpcap refuses for one of them is
/// refused before any packet, as `tcpdump -r` refuses it), and the header a result should have.
pub struct Plan {
    files: Vec<Target>,
    query: Query,
    /// (first packet's time, file) in the order the merge takes them.
    order: Vec<(u64, usize)>,
    links: Vec<Option<FileLink>>,
    filters: Arc<Filters>,
    /// What a result's file header says: the link type and snaplen of the first file (as
    /// `tcpdump -r FILE -w OUT` writes them, from libpcap), nanoseconds if any file has finer
    /// times than microseconds.
    pub header: StreamHeader,
}

/// Each file's first packet's time and link, read as tcpdump reads the file: what a plan needs,
/// and what a caller may check a filter against before compiling it (serve's bounded check).
pub struct Survey {
    files: Vec<Target>,
    firsts: Vec<u64>,
    links: Vec<Option<FileLink>>,
}

/// Surveys `files` (one small read at the start of each).
pub fn survey(files: &[PathBuf]) -> Survey {
    surveyed(files.iter().cloned().map(Target::Path).collect())
}

/// Surveys capture files read by ranges (an archive's objects): one small range of each.
pub fn survey_ranges(files: Vec<RangeFile>) -> Survey {
    let remote = |file| {
        Target::Ranges(Arc::new(Remote {
            file,
            index: Default::default(),
        }))
    };
    surveyed(files.into_iter().map(remote).collect())
}

/// Surveys feeds (other ringcaps' answers): each is asked at once, all in parallel, and its
/// stream's header read; the merge takes their packets with the files'.
pub fn survey_feeds(feeds: Vec<Arc<dyn super::Feed>>) -> Survey {
    let targets: Vec<Target> = feeds
        .into_iter()
        .map(|f| Target::Feed(Arc::new(super::feed::FeedTarget::new(f))))
        .collect();
    // A sensor answers after its own check and survey: asked one after another, a fleet's
    // first packet would wait for the sum of theirs.
    let found: Vec<(u64, Option<FileLink>)> = std::thread::scope(|s| {
        let asked: Vec<_> = targets.iter().map(|t| s.spawn(|| survey_file(t))).collect();
        asked
            .into_iter()
            .map(|h| h.join().unwrap_or((0, None)))
            .collect()
    });
    let (firsts, links) = found.into_iter().unzip();
    Survey {
        files: targets,
        firsts,
        links,
    }
}

fn surveyed(files: Vec<Target>) -> Survey {
    let (firsts, links) = files.iter().map(survey_file).unzip();
    Survey {
        files,
        firsts,
        links,
    }
}

impl Survey {
    /// One survey of both: a query over several stores, archives and sensors at once.
    pub fn join(mut self, other: Survey) -> Survey {
        self.files.extend(other.files);
        self.firsts.extend(other.firsts);
        self.links.extend(other.links);
        self
    }

    /// How many files and feeds it holds.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The distinct links among the files (by link type and byte order, which is what a filter
    /// is compiled for), in the order first seen.
    pub fn links(&self) -> Vec<FileLink> {
        let mut seen = Vec::new();
        for l in self.links.iter().flatten() {
            if !seen
                .iter()
                .any(|s: &FileLink| (s.linktype, s.swapped) == (l.linktype, l.swapped))
            {
                seen.push(*l);
            }
        }
        seen
    }

    /// Compiles the query's filter for the files' links. [`QueryError::Filter`], with libpcap's
    /// words, when it does not compile for one of them.
    pub fn plan(self, query: &Query) -> Result<Plan, QueryError> {
        let filters = Arc::new(Filters::new(query));
        let mut order: Vec<(u64, usize)> = self
            .firsts
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, i))
            .collect();
        order.sort();
        let refused = QueryError::Filter;
        for link in self.links() {
            filters.for_link(link).map_err(refused)?;
        }
        if !query.filter.is_empty() && self.links.iter().all(Option::is_none) {
            // Nothing to compile for: a typo is still said (as tcpdump says it on any file).
            filters.for_link(ETHERNET).map_err(refused)?;
        }
        let nanos = self.links.iter().flatten().any(|l| l.nanos);
        let first = order.iter().find_map(|&(_, i)| self.links[i]);
        let header = match first {
            Some(link) => tcpdump_header(link, nanos),
            None => StreamHeader::default(),
        };
        Ok(Plan {
            files: self.files,
            query: query.clone(),
            order,
            links: self.links,
            filters,
            header,
        })
    }
}

/// Surveys `files` and compiles the query's filter for their links (see [`Survey::plan`]).
pub fn plan(files: &[PathBuf], query: &Query) -> Result<Plan, QueryError> {
    survey(files).plan(query)
}

/// A file of no known link: what an empty Ethernet capture says.
const ETHERNET: FileLink = FileLink {
    linktype: 1,
    snaplen: store::MAX_SNAPLEN,
    swapped: false,
    nanos: false,
};

/// The header libpcap writes for a copy of a file of this link (its link type mapped there and
/// back, its snaplen adjusted), at the result's precision.
fn tcpdump_header(link: FileLink, nanos: bool) -> StreamHeader {
    let savefile = bpf::SavefileLink {
        linktype: link.linktype,
        snaplen: link.snaplen,
        swapped: link.swapped,
    };
    match bpf::tcpdump_file_header(savefile, nanos) {
        Ok(h) => StreamHeader {
            linktype: u32::from_ne_bytes(h[20..24].try_into().expect("4 bytes")),
            snaplen: u32::from_ne_bytes(h[16..20].try_into().expect("4 bytes")),
            nanos,
        },
        // libpcap opens every link type; if it did not, the file's own fields are the best guess.
        Err(_) => StreamHeader {
            linktype: link.linktype,
            snaplen: link.snaplen,
            nanos,
        },
    }
}

/// Runs `query` over `files` (see [`Plan::run`]).
pub fn run(
    files: &[PathBuf],
    query: &Query,
    opts: &QueryOptions,
    emit: impl FnMut(&Hit<'_>) -> io::Result<bool>,
) -> Result<Vec<FileReport>, QueryError> {
    plan(files, query)?.run(opts, emit)
}

impl Plan {
    /// The query's time window: its `after` and `before` terms (ns since the epoch; None: open).
    pub fn window(&self) -> (Option<u64>, Option<u64>) {
        (self.query.after_ns, self.query.before_ns)
    }

    /// Runs the query, calling `emit` for each matching packet in time order across files
    /// (within a file, in file order); `emit` returns false to stop (`--limit`). Returns what was
    /// done per file, in the order files were given.
    pub fn run(
        &self,
        opts: &QueryOptions,
        emit: impl FnMut(&Hit<'_>) -> io::Result<bool>,
    ) -> Result<Vec<FileReport>, QueryError> {
        merge(self, opts, emit)
    }
}

fn merge(
    plan: &Plan,
    opts: &QueryOptions,
    mut emit: impl FnMut(&Hit<'_>) -> io::Result<bool>,
) -> Result<Vec<FileReport>, QueryError> {
    let (files, query, order) = (&plan.files, &plan.query, &plan.order);
    let stop = Arc::new(AtomicBool::new(false));
    let pace = opts.max_read_rate.map(|rate| {
        Arc::new(ReadPace {
            rate: rate.max(1),
            next: std::sync::Mutex::new(std::time::Instant::now()),
            deadline: opts.deadline,
        })
    });
    let shared_query = Arc::new(query.clone());
    let job = |i: usize| Job {
        query: shared_query.clone(),
        filters: plan.filters.clone(),
        link: plan.links[i],
        pace: pace.clone(),
        stop: stop.clone(),
        use_index: opts.use_index,
        deadline: opts.deadline,
    };
    let past_deadline = || {
        opts.deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
    };
    // Feeds read a stream the sensor fills: they take no reading slot (`jobs`), and all run
    // from the start (the merge waits for each one's first packet anyway).
    let feeds = files
        .iter()
        .filter(|t| matches!(t, Target::Feed(_)))
        .count();
    let jobs = opts.jobs.max(1) + feeds;
    let mut reports: Vec<Option<FileReport>> = files.iter().map(|_| None).collect();
    let mut next = 0usize; // next file (in `order`) to start
    let mut streams: Vec<Stream> = Vec::new();
    let start = |k: usize| -> Stream {
        let i = order[k].1;
        let (tx, rx) = sync_channel(BATCHES_AHEAD);
        let target = files[i].clone();
        let j = job(i);
        let priority = opts.priority;
        let handle = std::thread::Builder::new()
            .name("ringcap-query".into())
            .spawn(move || {
                priority.apply();
                query_file(&target, &j, &tx)
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
    let mut failed: Option<QueryError> = None;
    // Packets merged since the workers were last counted.
    let mut since_check = 0u32;
    loop {
        // Counted between batches, not per packet.
        if since_check == 0 || since_check >= BATCH_PACKETS as u32 {
            since_check = 1;
            let mut running = streams.iter().filter(|s| s.running()).count()
                + ahead.iter().filter(|(_, s)| s.running()).count();
            while running < jobs
                && ahead.len() + streams.len() < jobs + FILES_AHEAD
                && next < order.len()
            {
                ahead.push_back((order[next].0, start(next)));
                next += 1;
                running += 1;
            }
        }
        // Wait for the live files' next packets a little at a time, so that a worker that
        // finished meanwhile is replaced.
        if streams
            .iter_mut()
            .any(|s| matches!(s.poll(POLL), Head::Pending))
        {
            since_check = 0;
            continue;
        }

        // Merge in the next file when nothing is live or it may start before the live heads.
        let min_head = streams.iter_mut().filter_map(|s| s.head()).min();
        // A file not started yet (all `jobs` workers busy) whose first packet is not later than
        // the live heads must be merged in before them: start it now, past the limit (waiting
        // for a worker could wait for ever: theirs wait for the merge to take their batches).
        if ahead.is_empty() && next < order.len() && min_head.is_some_and(|m| order[next].0 <= m) {
            ahead.push_back((order[next].0, start(next)));
            next += 1;
            continue;
        }
        if let Some((t, _)) = ahead.front() {
            if min_head.is_none_or(|m| *t <= m) {
                let (_, s) = ahead.pop_front().expect("front");
                streams.push(s);
                since_check = 0;
                continue;
            }
        }
        // Drop finished streams, keeping their reports.
        let mut i = 0;
        while i < streams.len() {
            if streams[i].head().is_none() {
                let mut s = streams.remove(i);
                since_check = 0;
                if let Some(h) = s.handle.take() {
                    let r = h.join().unwrap_or_default();
                    if let Some(p) = &opts.progress {
                        p.files_done.fetch_add(1, Relaxed);
                        p.bytes_read.fetch_add(r.bytes_read, Relaxed);
                    }
                    reports[s.order] = Some(r);
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
            failed = Some(QueryError::TimedOut);
            break;
        }
        since_check += 1;
        let s = &mut streams[best];
        let m = s.batch.meta[s.at];
        s.at += 1;
        let hit = Hit {
            ts_ns: m.ts_ns,
            time: m.time,
            wire_len: m.wire_len,
            linktype: m.linktype,
            data: &s.batch.data[m.start..m.start + m.len],
        };
        match emit(&hit) {
            Ok(true) => {}
            Ok(false) => stopped = true,
            // The reader went away: stop the workers before saying so.
            Err(e) => {
                failed = Some(QueryError::Sink(e));
                break;
            }
        }
    }
    // Stop the workers still running and collect what they did.
    stop.store(true, Relaxed);
    for mut s in streams.into_iter().chain(ahead.into_iter().map(|(_, s)| s)) {
        drop(std::mem::replace(&mut s.rx, sync_channel(0).1));
        if let Some(h) = s.handle.take() {
            // A feed's worker may wait on its sensor (up to its idle timeout) before it sees the
            // stop: not waited for (`--limit` over a fleet ends at once); its connection closes
            // when it wakes or the process ends.
            if matches!(files[s.order], Target::Feed(_)) && !h.is_finished() {
                reports[s.order] = Some(FileReport {
                    path: files[s.order].label().to_path_buf(),
                    how: super::How::Feed,
                    ..Default::default()
                });
                continue;
            }
            reports[s.order] = Some(h.join().unwrap_or_default());
        }
    }
    if failed.is_none() && past_deadline() && reports.iter().flatten().any(|r| r.error.is_some()) {
        // A worker gave up at the deadline (its file's report says so).
        failed = Some(QueryError::TimedOut);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(files
        .iter()
        .zip(reports)
        .map(|(f, r)| {
            r.unwrap_or_else(|| FileReport {
                path: f.label().to_path_buf(),
                how: super::How::NotRead,
                ..Default::default()
            })
        })
        .collect())
}

/// A file's first packet's time and its link, read as tcpdump reads it (from its first packet;
/// 0 and None if it cannot be read: its worker says why).
fn survey_file(t: &Target) -> (u64, Option<FileLink>) {
    let body: Box<dyn std::io::Read + Send> = match t {
        Target::Feed(f) => return f.survey(),
        Target::Path(path) => match std::fs::File::open(path) {
            Ok(f) => Box::new(f),
            Err(_) => return (0, None),
        },
        Target::Ranges(r) => {
            if let Some(found) = survey_by_index(t, r) {
                return found;
            }
            let data = &r.file.data;
            match data
                .len()
                .and_then(|len| crate::ranges::stream_of(data.clone(), 0..len))
            {
                Ok(s) => s,
                Err(_) => return (0, None),
            }
        }
    };
    let path = t.label();
    let Ok(mut r) = store::CaptureReader::strict_from_reader(body, path, 64 << 10) else {
        return (0, None);
    };
    let link = r.link();
    let first = r.next_packet().and_then(|p| p.ok()).map(|p| p.ts_ns);
    (first.unwrap_or(0), link)
}

/// A remote file's first time and link from its index, kept for its worker: what it needs of
/// the index anyway, instead of a range of the capture file. The time is the first frame's
/// earliest packet: never later than the first packet, so the merge takes the file in no later
/// than a survey of the file would. None (survey the file itself) without a usable index, or
/// when the first frame did not decode or the file reads only whole.
fn survey_by_index(t: &Target, r: &Remote) -> Option<(u64, Option<FileLink>)> {
    let ix = t.index().ok()?;
    let h = ix.header;
    if h.read_whole || h.packets == 0 {
        return None;
    }
    let frames = ix.frames().ok()?;
    let first = frames.iter().find(|f| f.packets > 0 || f.is_damaged())?;
    if first.is_damaged() {
        return None;
    }
    let prelude = ix.prelude().ok()?.to_vec();
    let mut reader = store::CaptureReader::strict_from_reader(
        Box::new(std::io::Cursor::new(prelude)),
        t.label(),
        64 << 10,
    )
    .ok()?;
    let link = match reader.link() {
        Some(l) => l,
        // A pcapng prelude describes its interfaces after the section header.
        None => {
            let _ = reader.next_packet();
            reader.link()?
        }
    };
    let at = first.first_ts;
    *r.index.lock().unwrap_or_else(|e| e.into_inner()) = Some(ix);
    Some((at, Some(link)))
}
