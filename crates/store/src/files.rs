//! File mode's writer thread: a series of files `<base>-<UTC start>-<seq>.<ext>` spread over one
//! or more directories. Each file is written hidden as `.<name>.partial` and renamed into place
//! once complete and synced (stenographer's habit), so every visible file is whole. Old files are
//! deleted oldest first to honour `-W` and `--disk-budget`, and only for them: the budget never
//! deletes the newest `keep_newest` files. A full disk does not stop the capture and deletes
//! nothing by itself: the file is cut after its last whole packet and closed, the next directory
//! is tried, and with none left packets are counted as storage drops until space returns (retried
//! every second).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::compress::{zstd_stored_frame, CompressMode};
use crate::error::StoreError;
use crate::format::{walk_own_records, Format};
use crate::indexing::{Feed, FileIndexer, IndexerFactory};
use crate::output::Output;
use crate::pool::OutBuf;
use crate::stats::WriterCounters;

/// How long a full directory is left alone before writing to it is tried again.
const FULL_RETRY: Duration = Duration::from_secs(1);

/// How much space the files of one directory may use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// At most this many bytes of this capture's files (complete ones plus the one being written).
    Bytes(u64),
    /// Delete old files while the file system is fuller than this percentage, as `df` shows it.
    Percent(f64),
}

/// Default of [`FilePlan::keep_newest`]: the file being written and the newest complete one.
pub const DEFAULT_KEEP_NEWEST: usize = 2;

impl Budget {
    /// Parses `100MB`-style sizes (with `parse_size`) or `80%`.
    pub fn parse(
        s: &str,
        parse_size: impl Fn(&str) -> Result<u64, String>,
    ) -> Result<Self, String> {
        if let Some(p) = s.trim().strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("`{s}` is not a percentage: write e.g. 80%"))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(format!(
                    "`{s}`: a disk budget percentage must be in (0, 100]"
                ));
            }
            return Ok(Budget::Percent(v));
        }
        match parse_size(s)? {
            0 => Err(format!("`{s}`: a disk budget must be above 0")),
            n => Ok(Budget::Bytes(n)),
        }
    }
}

/// Called with one line for each event a user should see (disk full, space back, rename failed).
pub type EventFn = Arc<dyn Fn(&str) + Send + Sync>;

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
            compression: CompressMode::None,
            compressors: 2,
            frame_size: crate::compress::DEFAULT_FRAME_SIZE,
            max_write_rate: None,
            events: None,
            indexer: None,
        }
    }
}

/// File name extension for a format and compression: `.pcap`, `.pcapng.zst`...
pub fn extension(format: Format, compression: CompressMode) -> String {
    let f = match format {
        Format::Pcap { .. } => ".pcap",
        Format::PcapNg => ".pcapng",
    };
    format!("{f}{}", compression.extension())
}

/// `YYYYmmddTHHMMSS` in UTC.
pub fn utc_stamp(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let rem = secs % 86_400;
    let (y, m, d) = units::civil_from_days((secs / 86_400) as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// What a capture file's name says: (start stamp, sequence number).
type FileKey = (String, u64);

/// Age order of complete files: the sequence number first (a capture continues after the highest
/// one it finds, so it only grows), the stamp only between equal numbers. Stamps come from the
/// wall clock, which can step back: ordered by stamp first, a budget once deleted a newer file
/// and kept an older one.
type AgeKey = (u64, String);

fn age(k: &FileKey) -> AgeKey {
    (k.1, k.0.clone())
}

/// Where the packet index of a capture file lives: next to it, the name plus `.idx`.
pub fn index_path(capture: &Path) -> PathBuf {
    let mut name = capture.file_name().unwrap_or_default().to_os_string();
    name.push(".idx");
    capture.with_file_name(name)
}

/// Parses `<base>-<stamp>-<seq><ext>` for a known ringcap extension.
pub fn parse_name(base: &str, name: &str) -> Option<FileKey> {
    let rest = name.strip_prefix(base)?.strip_prefix('-')?;
    let (stamp, rest) = (rest.get(..15)?, rest.get(15..)?);
    let ok_stamp = stamp.bytes().enumerate().all(|(i, b)| {
        if i == 8 {
            b == b'T'
        } else {
            b.is_ascii_digit()
        }
    });
    let rest = rest.strip_prefix('-')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (seq, ext) = rest.split_at(digits);
    let known = [".pcap", ".pcapng"]
        .iter()
        .flat_map(|f| ["", ".zst", ".lz4"].map(move |c| format!("{f}{c}")))
        .any(|e| e == ext);
    if !(ok_stamp && digits > 0 && known) {
        return None;
    }
    Some((stamp.to_string(), seq.parse().ok()?))
}

struct DirState {
    path: PathBuf,
    /// When the directory was last found full (`None`: usable).
    full_since: Option<Instant>,
    /// Bytes of complete files of this capture in it.
    done_bytes: u64,
}

struct OpenFile {
    out: Output,
    partial: PathBuf,
    final_path: PathBuf,
    dir: usize,
    /// Bytes in the file.
    len: u64,
    /// File offset just after the last whole record.
    committed: u64,
    packets: u64,
}

struct DoneFile {
    key: AgeKey,
    path: PathBuf,
    dir: usize,
    bytes: u64,
}

/// The writer thread of file mode.
pub(crate) struct FileSink {
    base: String,
    ext: String,
    format: Format,
    compressed: bool,
    direct_io: bool,
    header: Vec<u8>,
    /// The header as one frame of its own, for a compressed file begun mid-stream.
    header_frame: Vec<u8>,
    counters: Arc<WriterCounters>,
    dirs: Vec<DirState>,
    next_dir: usize,
    seq: u64,
    cur: Option<OpenFile>,
    /// Complete files of this base in all directories, oldest first.
    done: BTreeMap<AgeKey, DoneFile>,
    max_files: Option<usize>,
    budget: Option<Budget>,
    keep_newest: usize,
    /// The budget is exceeded but only protected files are left (said once until it holds again).
    budget_stuck: bool,
    max_write_rate: Option<u64>,
    written: u64,
    /// Lab throttle: when the bytes written so far may be done at the allowed rate.
    pace: Instant,
    events: Option<EventFn>,
    /// A failure that is not about space: ends the output.
    error: Option<StoreError>,
    /// The packet indexer, when on.
    feed: Option<Feed>,
    /// Where the last buffer went whole: (first byte written, file offset, bytes in the file,
    /// file header bytes at the start of the written part).
    placed: Option<(usize, u64, u64, usize)>,
}

impl FileSink {
    /// Checks the directories and lists the complete files of `base` already in them.
    pub fn new(
        plan: FilePlan,
        format: Format,
        direct_io: bool,
        counters: Arc<WriterCounters>,
    ) -> Result<Self, StoreError> {
        if plan.dirs.is_empty() {
            return Err(StoreError::Config("no output directory".into()));
        }
        if plan.base.is_empty() || plan.base.contains('/') {
            return Err(StoreError::Config(format!(
                "`{}` is not a file name stem: use e.g. -w /data/cap",
                plan.base
            )));
        }
        let ext = extension(format, plan.compression);
        let mut dirs = Vec::new();
        let mut done = BTreeMap::new();
        let mut seq = 0;
        for (i, d) in plan.dirs.iter().enumerate() {
            let entries = fs::read_dir(d).map_err(|source| StoreError::Create {
                path: d.clone(),
                source,
            })?;
            let mut done_bytes = 0;
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(key) = name.to_str().and_then(|n| parse_name(&plan.base, n)) else {
                    continue;
                };
                let bytes = e.metadata().map_or(0, |m| m.len());
                seq = seq.max(key.1 + 1);
                done_bytes += bytes;
                let path = e.path();
                done.insert(
                    age(&key),
                    DoneFile {
                        key: age(&key),
                        path,
                        dir: i,
                        bytes,
                    },
                );
            }
            dirs.push(DirState {
                path: d.clone(),
                full_since: None,
                done_bytes,
            });
        }
        Ok(FileSink {
            base: plan.base,
            ext,
            format,
            compressed: plan.compression != CompressMode::None,
            direct_io,
            header: Vec::new(),
            header_frame: Vec::new(),
            counters,
            dirs,
            next_dir: 0,
            seq,
            cur: None,
            done,
            max_files: plan.max_files,
            budget: plan.budget,
            keep_newest: plan.keep_newest.max(1),
            budget_stuck: false,
            max_write_rate: plan.max_write_rate,
            written: 0,
            pace: Instant::now(),
            events: plan.events,
            error: None,
            feed: None,
            placed: None,
        })
    }

    /// The file header (and its frame form for compressed files).
    pub fn set_header(&mut self, header: Vec<u8>) {
        let mut frame = vec![0; crate::compress::frame_bound(header.len())];
        let n = if self.ext.ends_with(".lz4") {
            crate::compress::lz4_frame(&header, &mut frame, true)
        } else {
            zstd_stored_frame(&header, &mut frame)
        };
        frame.truncate(n);
        self.header_frame = frame;
        self.header = header;
    }

    /// Hands every buffer written whole to `indexer` on its own thread, which returns the buffers
    /// to `empty`.
    pub fn attach_indexer(
        &mut self,
        indexer: Box<dyn FileIndexer>,
        empty: Sender<OutBuf>,
    ) -> io::Result<()> {
        let feed = Feed::start(indexer, self.format, empty, self.counters.clone())?;
        self.feed = Some(feed);
        Ok(())
    }

    fn event(&self, msg: &str) {
        if let Some(f) = &self.events {
            f(msg);
        }
    }

    /// Writes buffers in stream order (restored after parallel compression when `ordered`)
    /// until the capture side hangs up, then closes the last file.
    pub fn run(
        mut self,
        filled: Receiver<OutBuf>,
        empty: Sender<OutBuf>,
        ordered: bool,
    ) -> Result<(), StoreError> {
        let mut waiting: BTreeMap<u64, OutBuf> = BTreeMap::new();
        let mut next = 0u64;
        for buf in filled {
            if !ordered {
                self.handle(buf, &empty);
                continue;
            }
            waiting.insert(buf.seq, buf);
            while let Some(b) = waiting.remove(&next) {
                next += 1;
                self.handle(b, &empty);
            }
        }
        for (_, b) in std::mem::take(&mut waiting) {
            self.handle(b, &empty); // only if a compressor died; keep what we have
        }
        self.close_file(false);
        if let Some(f) = self.feed.as_mut() {
            f.finish(); // every index written before the capture reports
        }
        self.error.map_or(Ok(()), Err)
    }

    fn handle(&mut self, buf: OutBuf, empty: &Sender<OutBuf>) {
        if buf.new_file.is_some() {
            self.close_file(false);
        }
        let kept = if self.error.is_some() {
            0
        } else {
            self.write(&buf)
        };
        self.counters
            .lost
            .fetch_add(buf.packets.saturating_sub(kept), Relaxed);
        let ends = buf.ends_file;
        let placed = self.placed.take();
        let back = match (self.feed.as_mut(), placed) {
            (Some(feed), Some((from, off, len, skip))) => {
                feed.offer(buf, from, off, len, self.compressed, skip)
            }
            (Some(feed), None) => {
                feed.gap();
                Some(buf)
            }
            (None, _) => Some(buf),
        };
        if ends {
            self.close_file(false);
        }
        self.counters.backlog.fetch_sub(1, Relaxed);
        if let Some(mut buf) = back {
            if self.feed.is_some() {
                self.counters.index_skipped.fetch_add(1, Relaxed);
            }
            buf.reset(0);
            let _ = empty.send(buf);
        }
    }

    /// Writes one buffer, moving to another directory when a disk is full. Returns the packets
    /// of this buffer that reached a file whole.
    fn write(&mut self, buf: &OutBuf) -> u64 {
        let data = if self.compressed {
            buf.payload()
        } else {
            buf.filled()
        };
        // `from`: where the bytes still to write begin (always a record boundary, except 0 of
        // a plain buffer that continues the open file).
        let mut from = 0usize;
        let mut kept = 0u64;
        // The header sits at the start of a buffer that begins a file (in its frame when compressed).
        let header_len = if buf.new_file.is_some() {
            self.header.len()
        } else {
            0
        };
        for attempt in 0..=self.dirs.len() {
            if self.cur.is_none() {
                // A buffer starting a file carries the header (plain: at 0; compressed: in its frame).
                let fresh = buf.new_file.is_some() && from == 0;
                if !self.compressed && !fresh {
                    from = from.max(buf.first_boundary); // a record's tail cannot begin a file
                }
                if !self.open_file(buf.new_file.filter(|_| fresh).unwrap_or_else(sys::now_ns)) {
                    return kept;
                }
                if !fresh {
                    if let Some(f) = self.feed.as_mut() {
                        f.gap(); // a header written apart from the records: not worth following
                    }
                    let h = if self.compressed {
                        std::mem::take(&mut self.header_frame)
                    } else {
                        std::mem::take(&mut self.header)
                    };
                    let r = self.write_all(&h);
                    if self.compressed {
                        self.header_frame = h;
                    } else {
                        self.header = h;
                    }
                    match r {
                        Ok(()) => self.commit_len(),
                        Err((_, e)) => {
                            self.close_file(true);
                            if !self.on_error(e) {
                                return kept;
                            }
                            continue;
                        }
                    }
                }
            }
            let start = from;
            let len_before = self.cur.as_ref().map_or(0, |c| c.len);
            match self.write_all(&data[start..]) {
                Ok(()) => {
                    let here = if self.compressed || start == 0 {
                        buf.packets
                    } else {
                        walk_own_records(self.format, data, start).1
                    };
                    kept += here;
                    let cur = self.cur.as_mut().expect("open");
                    cur.packets += here;
                    cur.committed = if self.compressed {
                        cur.len
                    } else {
                        len_before + (buf.last_boundary.max(start) - start) as u64
                    };
                    if attempt == 0 {
                        let file_off = len_before;
                        let skip = if start == 0 { header_len } else { 0 };
                        self.placed = Some((start, file_off, (data.len() - start) as u64, skip));
                    }
                    self.after_write(data.len() - start);
                    return kept;
                }
                Err((written, e)) => {
                    self.counters.write_errors.fetch_add(1, Relaxed);
                    // Cut the file after its last whole record.
                    let cut = if self.compressed {
                        len_before // the partial frame goes; the buffer is retried whole
                    } else {
                        let reach = start + written;
                        let scan = start.max(buf.first_boundary);
                        if reach >= scan {
                            let (end, walked) = walk_own_records(self.format, &data[..reach], scan);
                            let spill_kept = start == 0 && buf.spill_in_packet;
                            kept += walked + u64::from(spill_kept);
                            self.cur.as_mut().expect("open").packets +=
                                walked + u64::from(spill_kept);
                            from = end;
                            len_before + (end - start) as u64
                        } else {
                            from = scan;
                            self.cur.as_ref().expect("open").committed
                        }
                    };
                    if let Some(c) = self.cur.as_mut() {
                        let _ = c.out.truncate(cut);
                        c.len = cut;
                    }
                    self.close_file(true);
                    if !self.on_error(e) {
                        return kept;
                    }
                }
            }
        }
        kept
    }

    /// After a write error: a full disk marks its directory full (the caller then tries the
    /// next one); anything else ends the output. Returns whether to try again.
    fn on_error(&mut self, e: io::Error) -> bool {
        let space = matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT));
        if !space {
            self.event(&format!("write error, output stopped: {e}"));
            self.error = Some(StoreError::Write {
                path: self.dirs[self.last_dir()].path.clone(),
                written: self.written,
                packets: self.counters.accepted(),
                source: e,
                hint: ": check the device, then capture again",
            });
            self.counters.failed.store(true, Relaxed);
            return false;
        }
        let d = self.last_dir();
        // A full disk deletes only what a percentage budget asks for (the file system is over it
        // now); a size budget is about this capture's bytes, which a full disk does not change.
        if matches!(self.budget, Some(Budget::Percent(_))) && self.over_budget(d) {
            if self.delete_oldest(Some(d), self.keep_newest - 1) {
                return true;
            }
            self.budget_cannot_hold(d);
        }
        if self.dirs[d].full_since.is_none() {
            self.counters.dirs_full.fetch_add(1, Relaxed);
        }
        self.dirs[d].full_since = Some(Instant::now());
        self.counters.disk_full_events.fetch_add(1, Relaxed);
        let others = (0..self.dirs.len()).any(|i| self.usable(i));
        self.event(&format!(
            "DISK FULL in {}: file closed after its last whole packet; {}",
            self.dirs[d].path.display(),
            if others {
                "moving to the next directory"
            } else {
                "no other directory: DROPPING PACKETS (storage drops) until space returns, retrying every second"
            }
        ));
        others
    }

    fn last_dir(&self) -> usize {
        (self.next_dir + self.dirs.len() - 1) % self.dirs.len()
    }

    fn usable(&self, i: usize) -> bool {
        self.dirs[i]
            .full_since
            .is_none_or(|t| t.elapsed() >= FULL_RETRY)
    }

    /// Opens the next file in the next usable directory (round robin).
    fn open_file(&mut self, start_ns: u64) -> bool {
        let n = self.dirs.len();
        let Some(d) = (0..n)
            .map(|i| (self.next_dir + i) % n)
            .find(|&i| self.usable(i))
        else {
            return false;
        };
        self.next_dir = (d + 1) % n;
        if let Some(max) = self.max_files {
            while self.done.len() + 1 > max && self.delete_oldest(None, 0) {}
        }
        // A name already taken (a `.partial` left by a crash, or anything planted there) is
        // never opened: the next sequence number is tried.
        let mut tries = 0;
        let (opened, final_path, partial) = loop {
            let name = format!(
                "{}-{}-{:06}{}",
                self.base,
                utc_stamp(start_ns),
                self.seq,
                self.ext
            );
            self.seq += 1;
            let dir = self.dirs[d].path.clone();
            let partial = dir.join(format!(".{name}.partial"));
            // Compressed frames have any length: O_DIRECT could not write them.
            let r = Output::open(&partial, self.direct_io && !self.compressed, true);
            let taken = matches!(&r, Err(StoreError::Create { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists);
            tries += 1;
            if taken && tries < 100 {
                self.event(&format!(
                    "{} exists already (left by a crash? `ringcap repair` it): not touched, using the next name",
                    partial.display()
                ));
                continue;
            }
            break (r, dir.join(&name), partial);
        };
        match opened {
            Ok(out) => {
                self.counters.direct_io.store(out.is_direct(), Relaxed);
                if let Some(f) = self.feed.as_mut() {
                    f.begin(&final_path, Arc::new(self.header.clone()));
                }
                self.cur = Some(OpenFile {
                    out,
                    partial,
                    final_path,
                    dir: d,
                    len: 0,
                    committed: 0,
                    packets: 0,
                });
                true
            }
            Err(e) => {
                let full = matches!(&e, StoreError::Create { source, .. }
                    if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)));
                if full {
                    // The directory cannot even hold a new inode: treat it as full, try the next.
                    return self.on_error(io::Error::from_raw_os_error(libc::ENOSPC))
                        && self.open_file(start_ns);
                }
                self.event(&format!("{e}"));
                self.error = Some(e);
                self.counters.failed.store(true, Relaxed);
                false
            }
        }
    }

    fn commit_len(&mut self) {
        if let Some(c) = self.cur.as_mut() {
            c.committed = c.len;
        }
    }

    /// Writes all of `bytes` to the open file; on error, how many bytes got there.
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), (usize, io::Error)> {
        let cur = self.cur.as_mut().expect("open file");
        let mut off = 0;
        while off < bytes.len() {
            if cur.out.is_direct()
                && (off % crate::pool::ALIGN != 0
                    || !(bytes.len() - off).is_multiple_of(crate::pool::ALIGN))
            {
                cur.out.clear_direct().map_err(|e| (off, e))?;
            }
            match cur.out.write(&bytes[off..]) {
                Ok(0) => return Err((off, io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    off += n;
                    cur.len += n as u64;
                    self.counters.bytes_written.fetch_add(n as u64, Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && cur.out.is_direct() => {
                    cur.out.clear_direct().map_err(|e| (off, e))?;
                }
                Err(e) => return Err((off, e)),
            }
        }
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Bookkeeping after a successful write: the directory is usable again, the budget holds,
    /// the lab throttle paces.
    fn after_write(&mut self, n: usize) {
        self.counters.buffers_written.fetch_add(1, Relaxed);
        let d = self.cur.as_ref().map_or(0, |c| c.dir);
        if self.dirs[d].full_since.take().is_some() {
            self.counters.dirs_full.fetch_sub(1, Relaxed);
            let name = self
                .cur
                .as_ref()
                .map(|c| c.final_path.display().to_string());
            self.event(&format!(
                "space is back in {}: writing again ({})",
                self.dirs[d].path.display(),
                name.unwrap_or_default()
            ));
        }
        self.enforce_budget(d);
        if let Some(rate) = self.max_write_rate {
            // Lab throttle, a slow disk: each write takes n / rate seconds (bursts after idle
            // time get at most 100 ms of credit).
            let now = Instant::now();
            let floor = now.checked_sub(Duration::from_millis(100)).unwrap_or(now);
            self.pace =
                self.pace.max(floor) + Duration::from_secs_f64(n as f64 / rate.max(1) as f64);
            if self.pace > now {
                std::thread::sleep(self.pace - now);
            }
        }
    }

    /// Deletes the oldest complete files of directory `d` while it is over its budget; never the
    /// open file nor the newest `keep_newest - 1` complete ones, and no more than needed.
    fn enforce_budget(&mut self, d: usize) {
        while self.over_budget(d) {
            if !self.delete_oldest(Some(d), self.keep_newest - 1) {
                self.budget_cannot_hold(d);
                return;
            }
        }
        self.budget_stuck = false;
    }

    /// Whether directory `d` is over the budget: this capture's bytes there (complete files and
    /// the open one) above SIZE, or the file system's use as `df` shows it above P %.
    fn over_budget(&self, d: usize) -> bool {
        match self.budget {
            None => false,
            Some(Budget::Bytes(max)) => {
                let open = self
                    .cur
                    .as_ref()
                    .filter(|c| c.dir == d)
                    .map_or(0, |c| c.len);
                self.dirs[d].done_bytes + open > max
            }
            Some(Budget::Percent(p)) => disk_use_percent(&self.dirs[d].path).is_ok_and(|u| u > p),
        }
    }

    /// Says once (until the budget holds again) that only protected files are left.
    fn budget_cannot_hold(&mut self, d: usize) {
        if std::mem::replace(&mut self.budget_stuck, true) {
            return;
        }
        let state = match (self.budget, disk_use_percent(&self.dirs[d].path)) {
            (Some(Budget::Percent(p)), Ok(u)) => {
                format!("the file system is {u:.1}% full (budget {p}%) with other data")
            }
            _ => "this capture's newest files alone exceed it".to_string(),
        };
        self.event(&format!(
            "disk budget cannot hold in {}: {state}; keeping the newest {} files of this capture \
             (--keep-newest)",
            self.dirs[d].path.display(),
            self.keep_newest
        ));
    }

    /// Deletes the oldest complete file (of directory `d`, or of any), never one of the newest
    /// `protect` complete files; false if there is none to delete.
    fn delete_oldest(&mut self, d: Option<usize>, protect: usize) -> bool {
        let deletable = self.done.len().saturating_sub(protect);
        let Some(key) = self
            .done
            .values()
            .take(deletable)
            .find(|f| d.is_none_or(|d| f.dir == d))
            .map(|f| f.key.clone())
        else {
            return false;
        };
        let f = self.done.remove(&key).expect("listed");
        match fs::remove_file(&f.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => self.event(&format!("cannot delete {}: {e}", f.path.display())),
        }
        // Its index goes with it (absent when the file was never indexed).
        let _ = fs::remove_file(index_path(&f.path));
        self.dirs[f.dir].done_bytes = self.dirs[f.dir].done_bytes.saturating_sub(f.bytes);
        self.counters.files_deleted.fetch_add(1, Relaxed);
        self.counters.bytes_deleted.fetch_add(f.bytes, Relaxed);
        true
    }

    /// Syncs, closes and renames the open file into place. After a failure (`failed`) a file
    /// without a single packet is removed instead: it would only be noise.
    fn close_file(&mut self, failed: bool) {
        let Some(c) = self.cur.take() else {
            return;
        };
        let placed = self.place(c, failed);
        if let Some(f) = self.feed.as_mut() {
            f.end(placed);
        }
    }

    /// Closes `c` and renames it into place; whether it is there now.
    fn place(&mut self, mut c: OpenFile, failed: bool) -> bool {
        if failed && c.packets == 0 {
            drop(c.out);
            let _ = fs::remove_file(&c.partial);
            return false;
        }
        if let Err(e) = c.out.sync() {
            self.event(&format!("fsync of {} failed: {e}", c.partial.display()));
        }
        drop(c.out);
        if let Err(e) = fs::rename(&c.partial, &c.final_path) {
            self.event(&format!(
                "cannot rename {} into place: {e} (run `ringcap repair` on it)",
                c.partial.display()
            ));
            return false;
        }
        sync_dir(&self.dirs[c.dir].path);
        self.counters.files_done.fetch_add(1, Relaxed);
        let name = c
            .final_path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        if let Some(key) = parse_name(&self.base, name) {
            self.dirs[c.dir].done_bytes += c.len;
            self.done.insert(
                age(&key),
                DoneFile {
                    key: age(&key),
                    path: c.final_path,
                    dir: c.dir,
                    bytes: c.len,
                },
            );
        }
        true
    }
}

/// fsync on a directory makes a rename durable.
fn sync_dir(dir: &Path) {
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Use of the file system holding `dir` in percent, computed as `df` does: used blocks
/// (`f_blocks - f_bfree`) over the blocks a user can have (used + `f_bavail`), so blocks reserved
/// for root count as neither. `df` rounds this up: `Use%` is its ceiling.
pub fn disk_use_percent(dir: &Path) -> io::Result<f64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs fills a plain struct for a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let used = s.f_blocks.saturating_sub(s.f_bfree) as f64;
    let usable = used + s.f_bavail as f64;
    Ok(if usable == 0.0 {
        0.0
    } else {
        100.0 * used / usable
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_is_the_sequence_number_before_the_stamp() {
        // File 5 was opened after the wall clock stepped back a second: still the newer one.
        let four = age(&("20261124T100000".to_string(), 4));
        let five = age(&("20261124T095959".to_string(), 5));
        assert!(four < five);
    }

    #[test]
    fn stamps_are_utc_civil_time() {
        assert_eq!(utc_stamp(0), "19700101T000000");
        // 2026-11-22 01:02:03 UTC
        assert_eq!(utc_stamp(1_795_309_323_000_000_000), "20261122T010203");
        assert_eq!(utc_stamp(951_782_400_000_000_000), "20000229T000000");
    }

    #[test]
    fn names_parse_back_only_for_this_base() {
        let n = format!("cap-{}-000042.pcap.zst", utc_stamp(0));
        assert_eq!(parse_name("cap", &n), Some(("19700101T000000".into(), 42)));
        assert_eq!(parse_name("ca", &n), None);
        assert_eq!(parse_name("cap", "cap-19700101T000000-000001.txt"), None);
        assert_eq!(
            parse_name("cap", ".cap-19700101T000000-000001.pcap.partial"),
            None
        );
    }

    #[test]
    fn budgets_parse_sizes_and_percentages() {
        let size = |s: &str| s.parse::<u64>().map_err(|e| e.to_string());
        assert_eq!(Budget::parse("80%", size), Ok(Budget::Percent(80.0)));
        assert_eq!(Budget::parse("1000", size), Ok(Budget::Bytes(1000)));
        assert!(Budget::parse("150%", size).is_err());
        assert!(Budget::parse("0", size).is_err());
    }
}
