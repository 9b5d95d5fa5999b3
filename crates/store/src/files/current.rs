//! The open file of file mode: opened hidden as `.<name>.partial` in the next usable directory,
//! written through the shared aligned [`Stage`] (O_DIRECT whatever the buffers' lengths, the
//! unaligned tail written when the file ends), then synced and renamed into place.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::naming::{age, file_name, parse_name, DoneFile};
use super::sink::FileSink;
use crate::coverage::{coverage_path, write_coverage, Coverage, Drops, Mark, COVERAGE_VERSION};
use crate::error::StoreError;
use crate::output::Output;
use crate::stage::Reached;

#[cfg(doc)]
use crate::stage::Stage;

pub(super) struct OpenFile {
    pub out: Output,
    pub partial: PathBuf,
    pub final_path: PathBuf,
    pub dir: usize,
    /// Bytes in the file, counting those still in the stage.
    pub len: u64,
    /// File offset just after the last whole record known to be on disk.
    pub committed: u64,
    /// End (after its last whole record) and packets of the buffers whose bytes are not all on
    /// disk yet (part of them waits in the stage).
    pub pending: Option<(u64, u64)>,
    pub packets: u64,
    /// When the capture began the file (its boundary's wall clock), ns since the epoch.
    pub opened_ns: u64,
    /// Earliest first and latest last packet time of the buffers written into it.
    pub times: Option<(u64, u64)>,
}

impl OpenFile {
    /// Folds in the times of a buffer whose packets went into this file.
    pub fn note_times(&mut self, first: u64, last: u64) {
        self.times = Some(match self.times {
            None => (first, last),
            Some((f, l)) => (f.min(first), l.max(last)),
        });
    }

    /// Bookkeeping after a write of records ending at `end` (`packets` of them) reached `r`.
    pub fn reached(&mut self, r: Reached, end: u64, packets: u64) {
        match r {
            Reached::All => {
                self.pending = None;
                self.committed = end;
            }
            Reached::Previous => {
                if let Some((prev, _)) = self.pending.take() {
                    self.committed = prev;
                }
                self.pending = Some((end, packets));
            }
            Reached::Nothing => {
                let before = self.pending.map_or(0, |p| p.1);
                self.pending = Some((end, before + packets));
            }
        }
    }
}

/// A failed write: how many of the bytes reached the file (`None`: a staged write, where what
/// reached it is not known record by record), and why it failed.
pub(super) struct PutError {
    pub written: Option<usize>,
    pub error: io::Error,
}

impl FileSink {
    /// Opens the next file in the next usable directory (round robin).
    pub(super) fn open_file(&mut self, start_ns: u64) -> bool {
        let n = self.dirs.len();
        let Some(d) = (0..n)
            .map(|i| (self.next_dir + i) % n)
            .find(|&i| self.usable(i))
        else {
            return false;
        };
        self.next_dir = (d + 1) % n;
        self.retention.make_room_for_one();
        // A name already taken (a `.partial` left by a crash, or anything planted there) is
        // never opened: the next sequence number is tried.
        let mut tries = 0;
        let (opened, final_path, partial) = loop {
            let name = file_name(&self.base, start_ns, self.seq, &self.ext);
            self.seq += 1;
            let dir = self.dirs[d].path.clone();
            let partial = crate::container::partial_name(&dir.join(&name));
            // Compressed files too: their buffers end anywhere, so they go through the stage. In
            // the page cache they starved the writer once the cache was full (a 20 GB store on
            // a 24 GB machine: storage drops, BENCHMARKS.md "Compressed files with O_DIRECT").
            let r = Output::open(&partial, self.direct_io, true);
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
                    pending: None,
                    packets: 0,
                    opened_ns: start_ns,
                    times: None,
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

    /// Writes all of `bytes` to the open file: through the stage while O_DIRECT is on and they
    /// would not keep the file's writes aligned, else straight.
    pub(super) fn put(&mut self, bytes: &[u8]) -> Result<Reached, PutError> {
        let cur = self.cur.as_mut().expect("open file");
        let reached = if self.stage.needed(&cur.out, bytes.len()) {
            let (refused, reached) = self
                .stage
                .write(&mut cur.out, bytes, &self.counters)
                .map_err(|error| PutError {
                    written: None,
                    error,
                })?;
            if refused {
                self.counters.direct_io.store(false, Relaxed);
            }
            reached
        } else {
            match cur.out.write_all_counted(bytes, &self.counters) {
                Ok(refused) => {
                    if refused {
                        self.counters.direct_io.store(false, Relaxed);
                    }
                    Reached::All
                }
                Err((off, error)) => {
                    cur.len += off as u64;
                    self.written += off as u64;
                    return Err(PutError {
                        written: Some(off),
                        error,
                    });
                }
            }
        };
        cur.len += bytes.len() as u64;
        self.written += bytes.len() as u64;
        Ok(reached)
    }

    /// A staged write failed: forgets the stage and counts as lost the records of earlier buffers
    /// that are not all on disk. Returns where to cut the file: after the last record known there.
    pub(super) fn cut_pending(&mut self) -> u64 {
        self.stage.discard();
        let cur = self.cur.as_mut().expect("open file");
        if let Some((_, packets)) = cur.pending.take() {
            cur.packets -= packets;
            self.counters.lost.fetch_add(packets, Relaxed);
            if let Some(f) = self.feed.as_mut() {
                f.gap(); // the indexer saw records that are cut now
            }
        }
        cur.committed
    }

    /// Syncs, closes and renames the open file into place. After a failure (`failed`) a file
    /// without a single packet is removed instead: it would only be noise.
    pub(super) fn close_file(&mut self, failed: bool) {
        let closed_ns = self.closing_at.take().unwrap_or_else(sys::now_ns);
        let Some(mut c) = self.cur.take() else {
            return;
        };
        let mut failed = failed;
        if failed {
            self.stage.discard();
        } else if let Err(e) = self.stage.flush(&mut c.out, &self.counters) {
            // The file's unaligned tail did not make it: cut it after its last record on disk.
            self.counters.write_errors.fetch_add(1, Relaxed);
            self.cur = Some(c);
            let cut = self.cut_pending();
            let mut c = self.cur.take().expect("just put back");
            let _ = c.out.truncate(cut);
            c.len = cut;
            failed = true;
            let placed = self.place(c, failed, closed_ns);
            if let Some(f) = self.feed.as_mut() {
                f.end(placed);
            }
            self.on_error(e);
            return;
        }
        let placed = self.place(c, failed, closed_ns);
        if let Some(f) = self.feed.as_mut() {
            f.end(placed);
        }
    }

    /// The coverage of `c` (closed at `closed_ns`): the drops counted since the last record
    /// written, up to the latest boundary; with the counters it was made from.
    fn coverage_of(&self, c: &OpenFile, size: u64, closed_ns: u64) -> (Coverage, Mark, u64) {
        let (m, a) = (self.mark, self.attributed);
        let lost = self.counters.lost.load(Relaxed);
        let name = c.final_path.file_name().and_then(|n| n.to_str());
        // A ring may hold packets from before the file was begun (the sockets open before the
        // writer): the capture covered at least its packets' span.
        let (first, last) = (c.times.map(|t| t.0), c.times.map(|t| t.1));
        let cov = Coverage {
            version: COVERAGE_VERSION,
            file: name.unwrap_or_default().to_string(),
            size,
            packets: c.packets,
            first_ns: first,
            last_ns: last,
            opened_ns: first.map_or(c.opened_ns, |f| f.min(c.opened_ns)),
            closed_ns: last.map_or(closed_ns, |l| l.max(closed_ns)),
            drops: Drops {
                kernel: m.kernel.saturating_sub(a.kernel),
                interface: m.interface.saturating_sub(a.interface),
                storage: m.refused.saturating_sub(a.refused)
                    + lost.saturating_sub(self.lost_attributed),
            },
        };
        (cov, m, lost)
    }

    /// Closes `c` and renames it into place; whether it is there now.
    fn place(&mut self, mut c: OpenFile, failed: bool, closed_ns: u64) -> bool {
        if failed && c.packets == 0 {
            drop(c.out);
            let _ = fs::remove_file(&c.partial);
            return false;
        }
        if let Err(e) = c.out.sync() {
            self.event(&format!("fsync of {} failed: {e}", c.partial.display()));
        }
        let record = self.coverage.is_some().then(|| {
            let size = fs::metadata(&c.partial).map_or(c.len, |m| m.len());
            self.coverage_of(&c, size, closed_ns)
        });
        drop(c.out);
        // The record goes first: whoever sees the file sees its coverage.
        let mut covered = None;
        if let Some((cov, mark, lost)) = record {
            match write_coverage(&c.final_path, &cov) {
                Ok(()) => covered = Some((mark, lost)),
                Err(e) => self.event(&format!(
                    "cannot write the coverage of {}: {e}",
                    c.final_path.display()
                )),
            }
        }
        if let Err(e) = fs::rename(&c.partial, &c.final_path) {
            self.event(&format!(
                "cannot rename {} into place: {e} (run `ringcap repair` on it)",
                c.partial.display()
            ));
            if covered.is_some() {
                let _ = fs::remove_file(coverage_path(&c.final_path));
            }
            return false;
        }
        if let Some((mark, lost)) = covered {
            self.attributed = mark;
            self.lost_attributed = lost;
        }
        sync_dir(&self.dirs[c.dir].path);
        self.counters.files_done.fetch_add(1, Relaxed);
        let name = c
            .final_path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        if let Some(key) = parse_name(&self.base, name) {
            self.retention.add(DoneFile {
                key: age(&key),
                path: c.final_path,
                dir: c.dir,
                bytes: c.len,
            });
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
