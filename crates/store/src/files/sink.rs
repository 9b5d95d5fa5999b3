//! File mode's writer thread: takes buffers in stream order, writes each into the open file,
//! moves to the next directory when a disk is full, and keeps the retention rules.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::current::{OpenFile, PutError};
use super::naming::{extension, list_done};
use super::retention::{LiveRetention, Retention, RetentionRules};
use super::{tell, EventFn, FilePlan};
use crate::compress::{zstd_stored_frame, CompressMode};
use crate::coverage::{DropMeter, Mark};
use crate::error::StoreError;
use crate::format::{walk_own_records, Format};
use crate::indexing::{Feed, FileIndexer};
use crate::pool::OutBuf;
use crate::stage::Stage;
use crate::stats::WriterCounters;

/// How long a full directory is left alone before writing to it is tried again.
const FULL_RETRY: Duration = Duration::from_secs(1);

pub(super) struct DirState {
    pub path: PathBuf,
    /// When the directory was last found full (`None`: usable).
    pub full_since: Option<Instant>,
}

/// The writer thread of file mode.
pub(crate) struct FileSink {
    pub(super) base: String,
    pub(super) ext: String,
    pub(super) format: Format,
    pub(super) compressed: bool,
    pub(super) direct_io: bool,
    pub(super) header: Vec<u8>,
    /// The header as one frame of its own, for a compressed file begun mid-stream.
    header_frame: Vec<u8>,
    pub(super) counters: Arc<WriterCounters>,
    pub(super) dirs: Vec<DirState>,
    pub(super) next_dir: usize,
    pub(super) seq: u64,
    pub(super) cur: Option<OpenFile>,
    /// Aligned staging of the open file's writes (O_DIRECT whatever the buffers' lengths).
    pub(super) stage: Stage,
    pub(super) retention: Retention,
    max_write_rate: Option<u64>,
    pub(super) written: u64,
    /// Lab throttle: when the bytes written so far may be done at the allowed rate.
    pace: Instant,
    pub(super) events: Option<EventFn>,
    /// A failure that is not about space: ends the output.
    pub(super) error: Option<StoreError>,
    /// The packet indexer, when on.
    pub(super) feed: Option<Feed>,
    /// Where the last buffer went whole: (first byte written, file offset, bytes in the file,
    /// file header bytes at the start of the written part).
    placed: Option<(usize, u64, u64, usize)>,
    /// This base's complete files found in the directories at start, newest first: handed to
    /// the indexer, which indexes those without a current index (see `FileIndexer::start`).
    older: Vec<PathBuf>,
    /// A live capture's drop meter: each file placed gets its coverage record.
    pub(super) coverage: Option<DropMeter>,
    /// The counters at the latest file boundary seen, and those up to which drops are in a
    /// record written (a file that is never placed passes its drops on to the next one).
    pub(super) mark: Mark,
    pub(super) attributed: Mark,
    /// `counters.lost` (the writer's own storage drops) up to which they are in a record.
    pub(super) lost_attributed: u64,
    /// The wall clock of the boundary that closes the open file (None: closed now, e.g. a full disk).
    pub(super) closing_at: Option<u64>,
}

/// Creates and removes a hidden file in `dir` as the capture's files will be created (this process,
/// its privileges as they are now, the shared group), so a directory it cannot write or a group it
/// cannot give is a clear error at start, not a run of storage drops and an empty `.partial`. A full
/// disk is not an error here: the capture starts and waits for space, as it does later on.
fn check_dir(dir: &Path, base: &str) -> Result<(), StoreError> {
    let probe = dir.join(format!(".{base}.ringcap-check-{}", std::process::id()));
    let f = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&probe)
    {
        Ok(f) => f,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) => {
            return Ok(())
        }
        Err(source) => {
            return Err(StoreError::DirNotWritable {
                dir: dir.to_path_buf(),
                source,
            })
        }
    };
    let given = sys::apply_file_group(&f, &dir.join(base));
    drop(f);
    let _ = std::fs::remove_file(&probe);
    given.map_err(|source| StoreError::Group {
        path: dir.join(base),
        source,
    })
}

/// Older files handed to the indexer at most (the newest ones): a bound on what it holds.
const OLDER_MAX: usize = 1 << 16;

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
        let (done, seq) = list_done(&plan.dirs, &plan.base)?;
        for d in &plan.dirs {
            check_dir(d, &plan.base)?;
        }
        let older = done
            .values()
            .rev()
            .take(OLDER_MAX)
            .map(|f| f.path.clone())
            .collect();
        let retention = Retention::new(
            plan.dirs.clone(),
            done,
            plan.max_files,
            plan.live_retention.clone().unwrap_or_else(|| {
                LiveRetention::new(RetentionRules {
                    budget: plan.budget,
                    keep_newest: plan.keep_newest,
                })
            }),
            counters.clone(),
            plan.events.clone(),
        );
        Ok(FileSink {
            ext: extension(format, plan.compression),
            base: plan.base,
            format,
            compressed: plan.compression != CompressMode::None,
            direct_io,
            header: Vec::new(),
            header_frame: Vec::new(),
            counters,
            dirs: plan
                .dirs
                .into_iter()
                .map(|path| DirState {
                    path,
                    full_since: None,
                })
                .collect(),
            next_dir: 0,
            seq,
            cur: None,
            stage: Stage::default(),
            retention,
            max_write_rate: plan.max_write_rate,
            written: 0,
            pace: Instant::now(),
            events: plan.events,
            error: None,
            feed: None,
            placed: None,
            older,
            coverage: plan.coverage,
            mark: Mark::default(),
            attributed: Mark::default(),
            lost_attributed: 0,
            closing_at: None,
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
        let older = std::mem::take(&mut self.older);
        let feed = Feed::start(indexer, older, self.format, empty, self.counters.clone())?;
        self.feed = Some(feed);
        Ok(())
    }

    pub(super) fn event(&self, msg: &str) {
        tell(&self.events, msg);
    }

    /// Writes buffers in stream order (restored after parallel compression when `ordered`)
    /// until the capture side hangs up, then closes the last file.
    pub fn run(
        mut self,
        filled: Receiver<OutBuf>,
        empty: Sender<OutBuf>,
        ordered: bool,
    ) -> Result<(), StoreError> {
        // Taken by the indexer if there is one; not held for the whole run otherwise.
        self.older = Vec::new();
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
        if let Some(meter) = &self.coverage {
            // Every producer and source is done: the counters are final, and the last file takes
            // what the earlier ones did not.
            let d = meter();
            self.boundary(Mark {
                wall_ns: sys::now_ns(),
                kernel: d.kernel,
                interface: d.interface,
                refused: self.counters.refused(),
            });
        }
        self.close_file(false);
        if let Some(f) = self.feed.as_mut() {
            f.finish(); // every index written before the capture reports
        }
        self.error.map_or(Ok(()), Err)
    }

    /// A file boundary the producers decided: the file open now ends there.
    fn boundary(&mut self, m: Mark) {
        self.mark = m;
        self.closing_at = Some(m.wall_ns);
    }

    fn handle(&mut self, mut buf: OutBuf, empty: &Sender<OutBuf>) {
        if buf.new_file.is_some() {
            if let Some(m) = buf.start_mark.as_deref() {
                self.boundary(*m);
            }
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
        let (ends, end_mark) = (buf.ends_file, buf.end_mark.take());
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
            if let Some(m) = end_mark {
                self.boundary(*m);
            }
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
    /// of this buffer that reached a file whole (or wait in the stage for the file's next write).
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
                if let (true, Some(m)) = (fresh, buf.start_mark.as_deref()) {
                    // Named after the wall clock; covered from the producers' boundary.
                    self.cur.as_mut().expect("open").opened_ns = m.wall_ns;
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
                    let r = self.put(&h);
                    if self.compressed {
                        self.header_frame = h;
                    } else {
                        self.header = h;
                    }
                    match r {
                        Ok(reached) => {
                            let cur = self.cur.as_mut().expect("open");
                            cur.reached(reached, cur.len, 0);
                        }
                        Err(e) => {
                            self.close_file(true);
                            if !self.on_error(e.error) {
                                return kept;
                            }
                            continue;
                        }
                    }
                }
            }
            let start = from;
            let len_before = self.cur.as_ref().map_or(0, |c| c.len);
            match self.put(&data[start..]) {
                Ok(reached) => {
                    let here = if self.compressed || start == 0 {
                        buf.packets
                    } else {
                        walk_own_records(self.format, data, start).1
                    };
                    kept += here;
                    let cur = self.cur.as_mut().expect("open");
                    cur.packets += here;
                    if here > 0 {
                        cur.note_times(buf.first_ts, buf.last_ts);
                    }
                    let end = if self.compressed {
                        cur.len
                    } else {
                        len_before + (buf.last_boundary.max(start) - start) as u64
                    };
                    cur.reached(reached, end, here);
                    if attempt == 0 {
                        let skip = if start == 0 { header_len } else { 0 };
                        self.placed = Some((start, len_before, (data.len() - start) as u64, skip));
                    }
                    self.after_write(data.len() - start);
                    return kept;
                }
                Err(PutError { written, error }) => {
                    self.counters.write_errors.fetch_add(1, Relaxed);
                    // Cut the file after its last whole record.
                    let cut = match written {
                        // The partial frame goes; the buffer is retried whole.
                        Some(_) if self.compressed => len_before,
                        Some(written) if start + written >= start.max(buf.first_boundary) => {
                            let (reach, scan) = (start + written, start.max(buf.first_boundary));
                            let (end, walked) = walk_own_records(self.format, &data[..reach], scan);
                            let spill_kept = u64::from(start == 0 && buf.spill_in_packet);
                            kept += walked + spill_kept;
                            let cur = self.cur.as_mut().expect("open");
                            cur.packets += walked + spill_kept;
                            if walked + spill_kept > 0 {
                                // The buffer's times: at most its last packet too late.
                                cur.note_times(buf.first_ts, buf.last_ts);
                            }
                            from = end;
                            len_before + (end - start) as u64
                        }
                        // A staged write: what the stage held is not all on disk. The file is
                        // cut back to the last record known there; the records of earlier
                        // buffers after it are lost (counted now), this buffer's are retried.
                        _ => {
                            if !self.compressed {
                                from = start.max(buf.first_boundary);
                            }
                            self.cut_pending()
                        }
                    };
                    if let Some(c) = self.cur.as_mut() {
                        let _ = c.out.truncate(cut);
                        c.len = cut;
                    }
                    self.close_file(true);
                    if !self.on_error(error) {
                        return kept;
                    }
                }
            }
        }
        kept
    }

    /// After a write error: a full disk marks its directory full (the caller then tries the
    /// next one); anything else ends the output. Returns whether to try again.
    pub(super) fn on_error(&mut self, e: io::Error) -> bool {
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
        if self.retention.on_disk_full(d) {
            return true;
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

    pub(super) fn last_dir(&self) -> usize {
        (self.next_dir + self.dirs.len() - 1) % self.dirs.len()
    }

    pub(super) fn usable(&self, i: usize) -> bool {
        self.dirs[i]
            .full_since
            .is_none_or(|t| t.elapsed() >= FULL_RETRY)
    }

    /// Bookkeeping after a successful write: the directory is usable again, the budget holds,
    /// the lab throttle paces.
    fn after_write(&mut self, n: usize) {
        self.counters.buffers_written.fetch_add(1, Relaxed);
        let (d, open_bytes) = self.cur.as_ref().map_or((0, 0), |c| (c.dir, c.len));
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
        self.retention.enforce(d, open_bytes);
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
}
