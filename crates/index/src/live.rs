//! The indexer that follows a capture (store's [`store::FileIndexer`]): one index per file the
//! writer completes, written hidden and renamed into place.

use std::collections::VecDeque;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use store::{CaughtUp, FileIndexer, FrameSpan};
use wire::LinkType;

use crate::build::Builder;
use crate::file::{Compression, Identity};

/// The index of `capture`: next to it, `NAME.idx`.
pub fn index_path(capture: &Path) -> PathBuf {
    store::index_path(capture)
}

/// Writes `bytes` as the index of `capture`: first hidden (`.NAME.idx.partial`), then renamed,
/// so a reader never sees half an index.
pub fn write_index(capture: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let path = index_path(capture);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.partial"));
    // Readable as the capture files are; created anew (O_EXCL) and never through a symlink: a
    // name already there (a crash's leftover, or planted) is unlinked first, never followed.
    let create = || sys::create_data_file(&tmp);
    let mut f = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fs::remove_file(&tmp)?;
            create()?
        }
        r => r?,
    };
    f.write_all(bytes)?;
    drop(f);
    fs::rename(&tmp, &path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })?;
    Ok(path)
}

/// Finishes `b`, the builder of `capture`, and writes the file's index and flow table (the flow
/// table first: an index in place means both were written). Returns the bytes of each.
pub fn write_index_and_flows(capture: &Path, b: Builder) -> Result<(u64, u64), String> {
    let err = |e: std::io::Error| format!("{}: {e}", capture.display());
    let covered = b.covered();
    let id = Identity::of(capture, covered).map_err(err)?;
    let built = b.finish(id);
    let flows = crate::flows::write_flow_table(capture, id, covered, &built.flows, &built.names)
        .map_err(err)?;
    drop(built.flows);
    write_index(capture, &built.index).map_err(err)?;
    Ok((built.index.len() as u64, flows))
}

/// Compression of a capture file from its name (ringcap's own files are named by it).
pub fn compression_of_name(path: &Path) -> Compression {
    match path.extension().and_then(|e| e.to_str()) {
        Some("zst") => Compression::Zstd,
        Some("lz4") => Compression::Lz4,
        Some("gz") => Compression::Gzip,
        _ => Compression::None,
    }
}

/// The link type a file header declares (pcap, or the first pcapng interface).
pub fn prelude_linktype(prelude: &[u8]) -> Option<u32> {
    let cursor = std::io::Cursor::new(prelude.to_vec());
    let mut r =
        store::CaptureReader::from_reader_sized(Box::new(cursor), Path::new("header"), 4096)
            .ok()?;
    while let Some(Ok(_)) = r.next_packet() {}
    r.linktype()
}

/// Follows a capture's files.
#[derive(Default)]
pub struct LiveIndexer {
    file: Option<(PathBuf, Builder, LinkType)>,
    /// The previous file's index being sorted, compressed and written on a thread of its own, so
    /// the buffers of the next file keep flowing meanwhile (finishing 100 k flows takes tens of ms,
    /// long enough for the writer to pass buffers by and leave the next file unindexed).
    finishing: Option<std::thread::JoinHandle<Result<u64, String>>>,
    /// CPU time of the finished finishing threads.
    finish_cpu_ns: u64,
    /// Flows and packets of the last file: the next builder starts that big.
    last_sizes: (usize, usize),
    /// Where the files left unindexed go to be indexed from disk; started with the first one, or
    /// at the start for the older files of the store.
    catch_up: Option<CatchUp>,
    caught_up: Option<CaughtUp>,
}

/// Files left unindexed that the catch-up thread may index later, at most this many (older ones
/// wait for `ringcap index`): a bound on its memory whatever the store's size.
pub const CATCH_UP_MAX: usize = 4096;

/// A thread that indexes the files the live indexer left behind (it fell behind, or a buffer of
/// the file did not reach it), and then the store's older files that have no current index (a
/// run killed or stopped before it caught up, or one with `--no-index`), from disk, as
/// `ringcap index` would, under SCHED_IDLE: below the live indexer (nice 19), which it must not
/// starve, and far below the capture. A capture that runs at full speed for hours thus still
/// ends up with every file indexed once the traffic leaves CPU time over, without a cron job. Reading a compressed file back costs more than
/// following its buffers (decompression: ~1.4 µs a packet against ~0.25, BENCHMARKS.md).
struct CatchUp {
    queue: Arc<(Mutex<VecDeque<PathBuf>>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl CatchUp {
    /// `older`: files found in the store at the start, newest first, checked (and indexed if
    /// they need it) whenever no file of this run is waiting.
    fn start(caught_up: CaughtUp, older: Vec<PathBuf>) -> std::io::Result<CatchUp> {
        let queue: Arc<(Mutex<VecDeque<PathBuf>>, Condvar)> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (q, halt) = (queue.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("ringcap-index-c".into())
            .spawn(move || {
                sys::sched_idle();
                let mut older = older.into_iter();
                while let Some((path, is_older)) = next_behind(&q, &halt, &mut older) {
                    let started = sys::thread_cpu_ns();
                    match catch_up_one(&path, is_older, &halt) {
                        Ok(true) => caught_up(sys::thread_cpu_ns() - started, is_older),
                        Ok(false) => {}
                        Err(e) if halt.load(Relaxed) => log::debug!("{e}"),
                        // Said at every start otherwise; `ringcap index` says it when asked.
                        Err(e) if is_older => log::info!("an older file could not be indexed: {e}"),
                        Err(e) => log::warn!("a file without an index could not be indexed: {e}"),
                    }
                }
            })?;
        Ok(CatchUp {
            queue,
            stop,
            thread: Some(thread),
        })
    }

    /// Queues `path`; false if the queue is full (the file waits for `ringcap index`).
    fn push(&self, path: PathBuf) -> bool {
        let (q, ready) = &*self.queue;
        let mut q = q.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= CATCH_UP_MAX {
            return false;
        }
        q.push_back(path);
        ready.notify_one();
        true
    }

    /// Stops at the next frame of the file being indexed (writing nothing for it) and waits.
    fn stop(&mut self) {
        self.stop.store(true, Relaxed);
        {
            // Under the lock: the thread is then either before its check of `stop` or waiting.
            let _q = self.queue.0.lock().unwrap_or_else(|e| e.into_inner());
            self.queue.1.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The next file to catch up, waiting for one, and whether it is an older one (files this run
/// left behind come first); `None` once stopped.
fn next_behind(
    queue: &(Mutex<VecDeque<PathBuf>>, Condvar),
    stop: &AtomicBool,
    older: &mut impl Iterator<Item = PathBuf>,
) -> Option<(PathBuf, bool)> {
    let (q, ready) = queue;
    let mut q = q.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if stop.load(Relaxed) {
            return None;
        }
        if let Some(p) = q.pop_front() {
            return Some((p, false));
        }
        if let Some(p) = older.next() {
            return Some((p, true));
        }
        q = ready.wait(q).unwrap_or_else(|e| e.into_inner());
    }
}

/// Indexes one file left behind (or an older one), unless it is gone (retention) or has a
/// current index already (`ringcap index` ran, or an older file was indexed by its own run).
/// An older file's flow table is checked from its footer, not read whole: a store of thousands
/// of files is checked at every start. Whether it wrote an index.
fn catch_up_one(path: &Path, older: bool, stop: &AtomicBool) -> Result<bool, String> {
    if !path.exists() {
        return Ok(false);
    }
    if crate::IndexFile::open(&index_path(path), path).is_ok()
        && if older {
            crate::flows::check_flow_table_footer(path).is_ok()
        } else {
            crate::flows::check_flow_table(path).is_ok()
        }
    {
        return Ok(false);
    }
    let done = crate::scan::index_file_unless(path, &AtomicU64::new(0), stop)?;
    if let Some(d) = done.damaged {
        log::warn!("{}: {d}", path.display());
    }
    if !path.exists() {
        // Retention took the file meanwhile: its index must not outlive it.
        let _ = fs::remove_file(index_path(path));
        let _ = fs::remove_file(crate::flows::flows_path(path));
        return Ok(false);
    }
    Ok(true)
}

impl LiveIndexer {
    /// Hands a file left unindexed to the catch-up thread.
    fn leave_behind(&mut self, path: PathBuf) {
        self.start_catch_up(Vec::new());
        if let Some(c) = &self.catch_up {
            c.push(path);
        }
    }

    /// Starts the catch-up thread unless it runs: at the start when there are `older` files,
    /// else with the first file left behind.
    fn start_catch_up(&mut self, older: Vec<PathBuf>) {
        let Some(caught_up) = self.caught_up.clone() else {
            return;
        };
        if self.catch_up.is_none() {
            match CatchUp::start(caught_up, older) {
                Ok(c) => self.catch_up = Some(c),
                Err(e) => log::warn!("no thread to index files without an index: {e}"),
            }
        }
    }

    /// Waits for the previous file's index; says so if it could not be written.
    fn wait_finishing(&mut self) -> bool {
        match self.finishing.take().map(|h| h.join()) {
            Some(Ok(Ok(cpu))) => {
                self.finish_cpu_ns += cpu;
                true
            }
            Some(Ok(Err(e))) => {
                log::warn!("an index was not written: {e} (run `ringcap index` on the store)");
                false
            }
            Some(Err(_)) => false,
            _ => true,
        }
    }
}

impl Drop for LiveIndexer {
    fn drop(&mut self) {
        self.wait_finishing();
        if let Some(c) = self.catch_up.as_mut() {
            c.stop();
        }
    }
}

impl FileIndexer for LiveIndexer {
    fn begin(&mut self, path: &Path, header: &[u8]) {
        let linktype = prelude_linktype(header)
            .and_then(LinkType::from_pcap)
            .unwrap_or(LinkType::Ethernet);
        let (flows, packets) = self.last_sizes;
        let b = Builder::with_capacity(header.to_vec(), compression_of_name(path), flows, packets);
        self.file = Some((path.to_path_buf(), b, linktype));
    }

    fn frame(&mut self, s: FrameSpan) {
        if let Some((_, b, _)) = self.file.as_mut() {
            b.frame(s.file_off, s.file_len, s.raw_start, s.raw_len);
        }
    }

    #[inline]
    fn packet(&mut self, raw_off: u64, ts_ns: u64, wire_len: u32, data: &[u8]) {
        if let Some((_, b, lt)) = self.file.as_mut() {
            b.packet(raw_off, ts_ns, wire_len, Some(*lt), data);
        }
    }

    fn start(&mut self, caught_up: CaughtUp, older: Vec<PathBuf>) {
        self.caught_up = Some(caught_up);
        if !older.is_empty() {
            self.start_catch_up(older);
        }
    }

    fn wait_all(&mut self) -> u64 {
        self.wait_finishing();
        // Files still waiting for the catch-up are left to `ringcap index`.
        if let Some(c) = self.catch_up.as_mut() {
            c.stop();
        }
        self.finish_cpu_ns
    }

    fn end(&mut self, complete: bool, placed: bool) -> Result<bool, String> {
        let Some((path, b, _)) = self.file.take() else {
            return Ok(false);
        };
        self.last_sizes = b.sizes();
        if !complete {
            drop(b);
            if placed {
                self.leave_behind(path);
            }
            return Ok(false);
        }
        // One file finishes at a time: by the time the next file ends, this one is long done.
        let previous_ok = self.wait_finishing();
        let finish = move || -> Result<u64, String> {
            sys::idle_priority();
            write_index_and_flows(&path, b)?;
            Ok(sys::thread_cpu_ns())
        };
        let h = std::thread::Builder::new()
            .name("ringcap-index-w".into())
            .spawn(finish)
            .map_err(|e| e.to_string())?;
        self.finishing = Some(h);
        if !previous_ok {
            return Err("the previous file's index was not written".into());
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{pcap_header, pcap_packets};
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn a_file_left_behind_is_indexed_later_from_disk() {
        let dir = std::env::temp_dir().join(format!("ringcap-catch-up-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let (a, b, gone) = (
            dir.join("a.pcap"),
            dir.join("b.pcap"),
            dir.join("gone.pcap"),
        );
        fs::write(&a, [pcap_header(), pcap_packets(0..700)].concat()).unwrap();
        fs::write(&b, [pcap_header(), pcap_packets(0..70)].concat()).unwrap();
        let caught = Arc::new(AtomicU64::new(0));
        let count = caught.clone();
        let mut ix = LiveIndexer::default();
        ix.start(
            Arc::new(move |_cpu, _older| {
                count.fetch_add(1, Relaxed);
            }),
            Vec::new(),
        );
        // `a` and `gone` were placed but some of their buffers never reached the indexer; `b` was
        // never placed (a capture stopped inside it).
        for (path, placed) in [(&a, true), (&gone, true), (&b, false)] {
            ix.begin(path, &pcap_header());
            assert!(!ix.end(false, placed).unwrap());
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while caught.load(Relaxed) < 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        ix.wait_all();
        assert_eq!(caught.load(Relaxed), 1);
        let idx = crate::IndexFile::open(&index_path(&a), &a).unwrap();
        idx.verify().unwrap();
        assert_eq!(idx.header.packets, 700);
        // Four sources to one destination and port.
        assert_eq!(idx.header.flows, 4);
        assert!(crate::flows::check_flow_table(&a).is_ok());
        assert!(!index_path(&b).exists() && !index_path(&gone).exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_left_behind_come_before_older_ones_and_a_stop_ends_the_wait() {
        let queue: Arc<(Mutex<VecDeque<PathBuf>>, Condvar)> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let p = |s: &str| PathBuf::from(s);
        let mut older = vec![p("old-2"), p("old-1")].into_iter();
        queue.0.lock().unwrap().push_back(p("behind-a"));
        let mut next = || next_behind(&queue, &stop, &mut older);
        assert_eq!(next(), Some((p("behind-a"), false)));
        assert_eq!(next(), Some((p("old-2"), true)));
        queue.0.lock().unwrap().push_back(p("behind-b"));
        assert_eq!(next(), Some((p("behind-b"), false)));
        assert_eq!(next(), Some((p("old-1"), true)));
        // Nothing left: it waits until a file is left behind, then until it is stopped.
        let (q, halt) = (queue.clone(), stop.clone());
        let waiter = std::thread::spawn(move || {
            let mut none = std::iter::empty();
            let first = next_behind(&q, &halt, &mut none);
            (first, next_behind(&q, &halt, &mut none))
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        {
            let mut q = queue.0.lock().unwrap();
            q.push_back(p("behind-c"));
            queue.1.notify_one();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        {
            let _q = queue.0.lock().unwrap();
            stop.store(true, Relaxed);
            queue.1.notify_one();
        }
        let (first, second) = waiter.join().unwrap();
        assert_eq!(first, Some((p("behind-c"), false)));
        assert_eq!(second, None);
    }

    #[test]
    fn an_index_is_owner_only_and_never_written_through_a_planted_symlink() {
        let dir = std::env::temp_dir().join(format!("ringcap-live-idx-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        fs::write(&victim, b"not an index").unwrap();
        symlink(&victim, dir.join(".c.pcap.idx.partial")).unwrap();
        let idx = write_index(&dir.join("c.pcap"), b"index bytes").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"not an index");
        let meta = fs::symlink_metadata(&idx).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read(&idx).unwrap(), b"index bytes");
        fs::remove_dir_all(&dir).unwrap();
    }
}
