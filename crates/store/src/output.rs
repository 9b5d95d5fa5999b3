//! The writer thread: writes each filled buffer with one write(), cuts the file back to the last
//! whole record when a write fails, and returns buffers to the pool.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use crate::error::StoreError;
use crate::format::{walk_own_records, Format};
use crate::pool::{OutBuf, ALIGN};
use crate::stage::{Reached, Stage};
use crate::stats::WriterCounters;

/// Where the bytes go.
pub(crate) enum Output {
    /// A file descriptor: regular file (can be cut back on error), pipe, tty, /dev/null...
    Fd {
        file: File,
        regular: bool,
        direct: bool,
    },
    /// Any writer (no O_DIRECT, no cutting back).
    Stream(Box<dyn Write + Send>),
}

impl Output {
    /// Opens `path` ("-" is stdout), with O_DIRECT when asked and the file system accepts it.
    /// The file is readable by its owner only (capture files hold other people's traffic), or by
    /// the `--group` too (see [`sys::apply_file_group`]), and never opened through a symbolic link;
    /// `new_only` (file mode's `.partial` files) also refuses an existing file (O_EXCL), else an
    /// existing file is emptied, as tcpdump -w does. A file this call created and then could not
    /// give the group is removed: no empty file is left behind.
    pub(crate) fn open(path: &Path, direct_io: bool, new_only: bool) -> Result<Output, StoreError> {
        let create_err = |source: io::Error| {
            if source.raw_os_error() == Some(libc::ELOOP) {
                StoreError::Symlink {
                    path: path.to_path_buf(),
                }
            } else {
                StoreError::Create {
                    path: path.to_path_buf(),
                    source,
                }
            }
        };
        if path.as_os_str() == "-" {
            let fd = std::os::fd::AsFd::as_fd(&io::stdout())
                .try_clone_to_owned()
                .map_err(create_err)?;
            return Ok(Output::from_file(File::from(fd), false));
        }
        // Opened once, without O_DIRECT: O_DIRECT is switched on afterwards (fcntl), where a refusal
        // costs nothing. Opening with it first created the file and only then failed (EINVAL), so
        // the retry met its own O_EXCL file; and a FIFO's open meets the reader, so a second try
        // left a reader that had seen the writer leave (Wireshark's extcap FIFO).
        let open = |new: bool| {
            let mut o = OpenOptions::new();
            o.write(true);
            if new {
                o.create_new(true); // O_CREAT | O_EXCL: fails on any existing name, links too
            }
            o.mode(0o600) // the group and its 0640 come with sys::apply_file_group
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
        };
        let (file, created) = match open(true) {
            Ok(f) => (f, true),
            Err(e) if !new_only && e.kind() == io::ErrorKind::AlreadyExists => {
                (open(false).map_err(create_err)?, false)
            }
            Err(e) => return Err(create_err(e)),
        };
        if let Err(source) = sys::apply_file_group(&file, path) {
            drop(file);
            if created {
                let _ = std::fs::remove_file(path);
            }
            return Err(StoreError::Group {
                path: path.to_path_buf(),
                source,
            });
        }
        let regular = file.metadata().is_ok_and(|m| m.file_type().is_file());
        if !created && regular {
            // An existing file is emptied only now, once it is known to be ours to write.
            file.set_len(0).map_err(create_err)?;
        }
        let mut out = Output::from_file(file, false);
        if direct_io && regular && !in_memory_fs(&out) {
            // tmpfs accepts O_DIRECT since Linux 6.6 but still copies into page cache pages: no
            // gain, only alignment rules, so it stays buffered there. A file system that refuses
            // O_DIRECT (EINVAL) stays buffered too.
            out.set_direct();
        }
        Ok(out)
    }

    /// Switches O_DIRECT on where the file system allows it.
    fn set_direct(&mut self) {
        if let Output::Fd { file, direct, .. } = self {
            let fd = file.as_raw_fd();
            // SAFETY: fcntl on a valid, owned descriptor.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
            *direct = flags >= 0
                && unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_DIRECT) } == 0;
        }
    }

    fn from_file(file: File, direct: bool) -> Output {
        let regular = file
            .metadata()
            .map(|m| m.file_type().is_file())
            .unwrap_or(false);
        let is_fifo = file
            .metadata()
            .map(|m| m.file_type().is_fifo())
            .unwrap_or(false);
        Output::Fd {
            file,
            regular: regular && !is_fifo,
            direct: direct && regular,
        }
    }

    /// Whether writes bypass the page cache.
    pub(crate) fn is_direct(&self) -> bool {
        matches!(self, Output::Fd { direct: true, .. })
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Output::Fd { file, .. } => file.write(bytes),
            Output::Stream(w) => w.write(bytes),
        }
    }

    /// Writes all of `bytes`, counting each piece in `counters` (and in `bytes_direct` when it went
    /// with O_DIRECT). O_DIRECT needs aligned lengths and offsets: an unaligned piece (a final
    /// partial block, the rest of a short write) and a file system that refuses O_DIRECT at write
    /// time (EINVAL) go through the page cache. Returns whether O_DIRECT was given up for a
    /// refusal; on error, how many bytes got there.
    pub(crate) fn write_all_counted(
        &mut self,
        bytes: &[u8],
        counters: &WriterCounters,
    ) -> Result<bool, (usize, io::Error)> {
        let mut refused = false;
        let mut off = 0;
        while off < bytes.len() {
            if self.is_direct() && (off % ALIGN != 0 || !(bytes.len() - off).is_multiple_of(ALIGN))
            {
                self.clear_direct().map_err(|e| (off, e))?;
            }
            match self.write(&bytes[off..]) {
                Ok(0) => return Err((off, io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    off += n;
                    counters.bytes_written.fetch_add(n as u64, Relaxed);
                    if self.is_direct() {
                        counters.bytes_direct.fetch_add(n as u64, Relaxed);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && self.is_direct() => {
                    self.clear_direct().map_err(|e| (off, e))?;
                    refused = true;
                }
                Err(e) => return Err((off, e)),
            }
        }
        Ok(refused)
    }

    /// Turns O_DIRECT off (for an unaligned tail, or a file system that refuses direct writes).
    pub(crate) fn clear_direct(&mut self) -> io::Result<()> {
        if let Output::Fd { file, direct, .. } = self {
            if *direct {
                let fd = file.as_raw_fd();
                // SAFETY: fcntl on a valid, owned descriptor.
                let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
                if flags < 0
                    || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) } < 0
                {
                    return Err(io::Error::last_os_error());
                }
                *direct = false;
            }
        }
        Ok(())
    }

    /// Cuts a regular file to `len`; other outputs cannot be cut.
    pub(crate) fn truncate(&mut self, len: u64) -> io::Result<bool> {
        match self {
            Output::Fd {
                file,
                regular: true,
                ..
            } => file.set_len(len).map(|_| true),
            _ => Ok(false),
        }
    }

    pub(crate) fn sync(&mut self) -> io::Result<()> {
        match self {
            Output::Fd {
                file,
                regular: true,
                ..
            } => file.sync_data(),
            Output::Fd { .. } => Ok(()),
            Output::Stream(w) => w.flush(),
        }
    }
}

/// Whether the output lives on tmpfs or ramfs (memory, no device to bypass the cache for).
fn in_memory_fs(out: &Output) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let Output::Fd { file, .. } = out else {
        return false;
    };
    // SAFETY: fstatfs fills a plain struct for a valid descriptor.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut s) } != 0 {
        return false;
    }
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between architectures
    let t = s.f_type as i64;
    t == TMPFS_MAGIC || t == RAMFS_MAGIC
}

/// State of the writer thread.
pub(crate) struct WriterThread {
    pub output: Output,
    pub path: PathBuf,
    pub format: Format,
    pub counters: Arc<WriterCounters>,
    /// Stream offset just after the last whole record known to be on disk.
    committed_end: u64,
    /// Packets before `committed_end`.
    committed_packets: u64,
    /// Aligned staging for buffers that end unaligned (several producers' buffers end at any
    /// record), so O_DIRECT stays on.
    stage: Stage,
    /// End (after its last whole record) and packets of what `stage` holds that is not all on disk.
    pending: Option<(u64, u64)>,
    error: Option<StoreError>,
}

impl WriterThread {
    pub fn new(
        output: Output,
        path: PathBuf,
        format: Format,
        counters: Arc<WriterCounters>,
    ) -> Self {
        counters.direct_io.store(output.is_direct(), Relaxed);
        WriterThread {
            output,
            path,
            format,
            counters,
            committed_end: 0,
            committed_packets: 0,
            stage: Stage::default(),
            pending: None,
            error: None,
        }
    }

    /// Writes buffers until the capture side hangs up, then syncs. Buffers go back to `empty`.
    pub fn run(
        mut self,
        filled: Receiver<OutBuf>,
        empty: Sender<OutBuf>,
    ) -> Result<(), StoreError> {
        for mut buf in filled {
            if self.error.is_none() {
                self.write_buffer(&buf);
            } else {
                // The output is dead: whatever was accepted into this buffer is lost.
                self.counters.lost.fetch_add(buf.packets, Relaxed);
            }
            self.counters.backlog.fetch_sub(1, Relaxed);
            buf.reset(0);
            // The capture side may already be gone at close: then the buffer is simply freed.
            let _ = empty.send(buf);
        }
        if self.error.is_none() && self.stage.carry() > 0 {
            self.write_carry();
        }
        if self.error.is_none() {
            if let Err(e) = self.output.sync() {
                self.fail_after_sync(e);
            }
        }
        self.error.map_or(Ok(()), Err)
    }

    /// Writes `buf` through the stage: the aligned part with O_DIRECT, the rest is carried to the
    /// next buffer (or [`Self::write_carry`] at the end).
    fn write_staged(&mut self, buf: &OutBuf) {
        let reached = match self
            .stage
            .write(&mut self.output, buf.filled(), &self.counters)
        {
            Ok((refused, reached)) => {
                if refused {
                    self.counters.direct_io.store(false, Relaxed);
                }
                reached
            }
            Err(e) => return self.fail_staged(buf, e),
        };
        let this = (buf.stream_offset + buf.last_boundary as u64, buf.packets);
        match reached {
            Reached::All => {
                let prev = self.pending.take();
                self.commit(prev);
                self.commit(Some(this));
            }
            Reached::Previous => {
                let prev = self.pending.take();
                self.commit(prev);
                self.pending = Some(this);
            }
            Reached::Nothing => {
                let packets = self.pending.map_or(0, |p| p.1);
                self.pending = Some((this.0, packets + this.1));
            }
        }
        self.counters.buffers_written.fetch_add(1, Relaxed);
    }

    fn commit(&mut self, done: Option<(u64, u64)>) {
        if let Some((end, packets)) = done {
            self.committed_end = end;
            self.committed_packets += packets;
        }
    }

    /// The last, unaligned tail: through the page cache, as any final partial block.
    fn write_carry(&mut self) {
        if let Err(e) = self.stage.flush(&mut self.output, &self.counters) {
            return self.fail_carry(e);
        }
        let prev = self.pending.take();
        self.commit(prev);
    }

    /// A staged write failed: what was staged is not all on disk, so the file is cut back to the last
    /// record known to be whole there and everything after it is counted lost.
    fn fail_staged(&mut self, buf: &OutBuf, e: io::Error) {
        let packets = self.pending.take().map_or(0, |p| p.1) + buf.packets;
        self.fail_at_commit(packets, e);
    }

    fn fail_carry(&mut self, e: io::Error) {
        let packets = self.pending.take().map_or(0, |p| p.1);
        self.fail_at_commit(packets, e);
    }

    fn fail_at_commit(&mut self, lost: u64, e: io::Error) {
        self.stage.discard();
        self.counters.write_errors.fetch_add(1, Relaxed);
        self.counters.lost.fetch_add(lost, Relaxed);
        let reached = self.counters.bytes_written.load(Relaxed);
        let cut = self
            .output
            .truncate(self.committed_end)
            .and_then(|_| self.output.sync());
        self.error = Some(self.error_for(e, reached, self.committed_packets, cut.is_err()));
        self.counters.failed.store(true, Relaxed);
    }

    fn write_buffer(&mut self, buf: &OutBuf) {
        if self.stage.needed(&self.output, buf.len) {
            return self.write_staged(buf);
        }
        if !self.output.is_direct() && self.counters.direct_io.load(Relaxed) {
            // O_DIRECT was given up for an unaligned buffer that was not the last (several producers'
            // buffers end anywhere): say so, and let producers flush partly filled buffers again.
            self.counters.direct_io.store(false, Relaxed);
        }
        match self.output.write_all_counted(buf.filled(), &self.counters) {
            Ok(true) => self.counters.direct_io.store(false, Relaxed),
            Ok(false) => {}
            Err((off, e)) => return self.fail(buf, off, e),
        }
        self.committed_end = buf.stream_offset + buf.last_boundary as u64;
        self.committed_packets += buf.packets;
        self.counters.buffers_written.fetch_add(1, Relaxed);
    }

    /// After `written` bytes of `buf` reached the output and then `e` happened: cut the file after
    /// the last whole record, count what is lost, remember the error.
    fn fail(&mut self, buf: &OutBuf, written: usize, e: io::Error) {
        self.counters.write_errors.fetch_add(1, Relaxed);
        let (end, kept_here) = if written >= buf.first_boundary {
            let (end, walked) =
                walk_own_records(self.format, &buf.filled()[..written], buf.first_boundary);
            (
                buf.stream_offset + end as u64,
                walked + u64::from(buf.spill_in_packet),
            )
        } else {
            (self.committed_end, 0)
        };
        let kept = self.committed_packets + kept_here;
        self.counters
            .lost
            .fetch_add(buf.packets - kept_here, Relaxed);
        let reached = buf.stream_offset + written as u64;
        let cut = self.output.truncate(end).and_then(|_| self.output.sync());
        self.error = Some(self.error_for(e, reached, kept, cut.is_err()));
        self.counters.failed.store(true, Relaxed);
    }

    /// The error for a write that failed with `e` after `reached` bytes, `kept` packets left in the file.
    fn error_for(&self, e: io::Error, reached: u64, kept: u64, not_cut: bool) -> StoreError {
        let path = self.path.clone();
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => StoreError::DiskFull {
                path,
                written: reached,
                packets: kept,
            },
            _ => StoreError::Write {
                path,
                written: reached,
                packets: kept,
                hint: match (e.raw_os_error(), not_cut) {
                    (Some(libc::EPIPE), _) => ": the reader of the pipe exited; restart it or write to a file",
                    (_, true) => ": the file could not be cut back and may end in a partial record; run `ringcap repair`",
                    _ => ": check the device, then capture again",
                },
                source: e,
            },
        }
    }

    /// fsync failed at close: the data may not be on disk; nothing to cut.
    fn fail_after_sync(&mut self, e: io::Error) {
        self.counters.write_errors.fetch_add(1, Relaxed);
        self.counters.failed.store(true, Relaxed);
        let written = self.counters.bytes_written.load(Relaxed);
        self.error = Some(if e.raw_os_error() == Some(libc::ENOSPC) {
            StoreError::DiskFull {
                path: self.path.clone(),
                written,
                packets: self.committed_packets,
            }
        } else {
            StoreError::Write {
                path: self.path.clone(),
                written,
                packets: self.committed_packets,
                source: e,
                hint: ": fsync at close failed, the end of the file may be missing; run `ringcap repair`",
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A reader on a FIFO gets every byte of one writer (Wireshark's extcap FIFO): the writer must not
    /// meet the reader, leave and come back, which a refused O_DIRECT open used to do.
    #[test]
    fn a_fifo_is_opened_once_and_its_reader_gets_every_byte() {
        let dir = std::env::temp_dir().join(format!("ringcap-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pipe");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader_path = path.clone();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            File::open(&reader_path)
                .unwrap()
                .read_to_end(&mut got)
                .unwrap();
            got
        });
        let mut out = Output::open(&path, true, false).unwrap();
        assert!(!out.is_direct());
        let mut left: &[u8] = b"pcap header and packets";
        while !left.is_empty() {
            let n = out.write(left).unwrap();
            left = &left[n..];
        }
        drop(out);
        assert_eq!(reader.join().unwrap(), b"pcap header and packets");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
