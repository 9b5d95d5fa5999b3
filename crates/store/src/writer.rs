//! `CaptureWriter`: the capture thread's side. Packets are encoded straight into the active
//! buffer of a fixed pool (empty → active → filled, as driverdump did with N buffers); a writer
//! thread writes each filled buffer with one write(). The capture thread never blocks: with no
//! empty buffer left, the packet is a storage drop.
//!
//! In file mode ([`CaptureWriter::create_files`]) the capture thread also decides where files end
//! (`-C` size, `-G` interval, [`CaptureWriter::rotate_now`]): always between two packets, by
//! marking the last buffer of a file and starting the next file's first buffer with its header,
//! so no packet is lost or written twice across a rotation.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::sync::Mutex;

use wire::Vlan;

use crate::compress::{run_compressor, CompressMode};
use crate::error::StoreError;
use crate::files::{FilePlan, FileSink};
use crate::format::{Emit, Encoder, Format, IfStats, SliceEmit, MAX_SNAPLEN};
use crate::output::{Output, WriterThread};
use crate::pool::{OutBuf, ALIGN};
use crate::stats::{WriterCounters, WriterStats};

/// Smallest buffer accepted: must hold several maximal records so each buffer has a record boundary.
pub const MIN_BUFFER_SIZE: usize = 1 << 20;

/// How a [`CaptureWriter`] formats and buffers its output.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// pcap (µs or ns) or pcapng.
    pub format: Format,
    /// Longest captured length per packet; 0 means 262144.
    pub snaplen: u32,
    /// Link-layer type (1 = Ethernet).
    pub linktype: u32,
    /// pcapng if_name of the interface ("" to leave it out).
    pub if_name: String,
    /// Bytes per buffer (≥ 1 MiB, rounded up to 4 KiB).
    pub buffer_size: usize,
    /// Buffers in the pool (≥ 2).
    pub buffers: usize,
    /// Try O_DIRECT (falls back to the page cache where the file system refuses it).
    pub direct_io: bool,
    /// A partly filled buffer older than this is written by [`CaptureWriter::maybe_flush`]
    /// (not with O_DIRECT, which only writes whole buffers).
    pub flush_interval: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            format: Format::Pcap { nanos: false },
            snaplen: MAX_SNAPLEN,
            linktype: 1,
            if_name: String::new(),
            buffer_size: 4 << 20,
            buffers: 4,
            direct_io: true,
            flush_interval: Duration::from_millis(500),
        }
    }
}

/// Writes packets to a pcap/pcapng file, stdout or any `Write`, through a buffer pool and a
/// writer thread.
pub struct CaptureWriter {
    enc: Encoder,
    active: Option<OutBuf>,
    active_since: Instant,
    /// Stream offset where the next buffer handed to the writer starts.
    stream_end: u64,
    filled_tx: Option<Sender<OutBuf>>,
    empty_rx: Receiver<OutBuf>,
    thread: Option<JoinHandle<Result<(), StoreError>>>,
    counters: Arc<WriterCounters>,
    accepted: u64,
    bytes: u64,
    refused: u64,
    first_ts: u64,
    last_ts: u64,
    /// The output failed: refuse everything.
    dead: bool,
    flush_interval: Duration,
    /// File header, repeated at the start of every file.
    header: Vec<u8>,
    /// Records never straddle two buffers (compression: each buffer is one self-contained frame).
    no_spill: bool,
    /// Sequence number of the next buffer handed on.
    next_seq: u64,
    /// Rotation (file mode only).
    files: bool,
    max_file_bytes: Option<u64>,
    interval_ns: Option<u64>,
    /// Timestamp at which the next `-G` file begins (u64::MAX: never); checked per packet.
    rotate_at_ns: u64,
    /// Bytes of the current file in buffers already handed on.
    file_bytes: u64,
    /// `accepted` when the current file began.
    file_first: u64,
    /// Compressor threads (file mode with compression).
    helpers: Vec<JoinHandle<()>>,
}

impl CaptureWriter {
    /// Creates `path` ("-" means stdout) and starts the writer thread.
    pub fn create(path: &Path, opts: WriterOptions) -> Result<Self, StoreError> {
        let opts = validate(opts)?;
        let output = Output::open(path, opts.direct_io)?;
        let label = if path.as_os_str() == "-" {
            PathBuf::from("stdout")
        } else {
            path.to_path_buf()
        };
        Self::start(output, label, opts)
    }

    /// Writes to any `Write` (a pipe, a socket, a compressor); `label` names it in errors.
    pub fn to_stream(
        w: Box<dyn Write + Send>,
        label: &str,
        opts: WriterOptions,
    ) -> Result<Self, StoreError> {
        let opts = validate(opts)?;
        Self::start(Output::Stream(w), PathBuf::from(label), opts)
    }

    fn start(output: Output, path: PathBuf, opts: WriterOptions) -> Result<Self, StoreError> {
        let (mut w, filled_rx, empty_tx) = Self::prepare(&opts, false);
        let worker = WriterThread::new(output, path, opts.format, w.counters.clone());
        w.thread = Some(
            std::thread::Builder::new()
                .name("ringcap-writer".into())
                .spawn(move || worker.run(filled_rx, empty_tx))
                .map_err(|e| StoreError::Config(format!("cannot start the writer thread: {e}")))?,
        );
        Ok(w)
    }

    /// File mode: a series of files named `<base>-<UTC start>-<seq>.pcap[ng][.zst|.lz4]` in the
    /// plan's directories, rotated by size, time or on request, optionally compressed by a pool
    /// of threads, each written hidden as `.<name>.partial` and renamed once complete and synced.
    /// Full disks do not stop the capture: packets are counted as storage drops until space returns.
    pub fn create_files(plan: FilePlan, opts: WriterOptions) -> Result<Self, StoreError> {
        let opts = validate(opts)?;
        if plan.compression != CompressMode::None && opts.buffer_size > 4 << 20 {
            return Err(StoreError::Config(
                "compressed output needs buffers of at most 4 MiB (one lz4 block each)".into(),
            ));
        }
        if plan.rotate_secs == Some(0) || plan.rotate_bytes == Some(0) || plan.max_files == Some(0)
        {
            return Err(StoreError::Config(
                "rotation size, interval and file count must be above 0".into(),
            ));
        }
        let compress = plan.compression != CompressMode::None;
        let (mut w, filled_rx, empty_tx) = Self::prepare(&opts, compress);
        w.files = true;
        w.max_file_bytes = plan.rotate_bytes;
        w.interval_ns = plan.rotate_secs.map(|s| s.saturating_mul(1_000_000_000));
        let start = sys::now_ns();
        if let Some(mut first) = w.active.take() {
            first.new_file = Some(start);
            w.set_limit(&mut first);
            w.active = Some(first);
        }
        w.schedule_rotation(start);
        let mut sink = FileSink::new(
            plan.clone(),
            opts.format,
            opts.direct_io,
            w.counters.clone(),
        )?;
        sink.set_header(w.header.clone());
        let rx = if compress {
            w.counters.compressing.store(true, Relaxed);
            let (tx, rx) = mpsc::channel::<OutBuf>();
            let shared = Arc::new(Mutex::new(filled_rx));
            for i in 0..plan.compressors.max(1) {
                let (input, output, counters) = (shared.clone(), tx.clone(), w.counters.clone());
                let mode = plan.compression;
                let h = std::thread::Builder::new()
                    .name(format!("ringcap-zip{i}"))
                    .spawn(move || run_compressor(input, output, mode, counters))
                    .map_err(|e| StoreError::Config(format!("cannot start a compressor: {e}")))?;
                w.helpers.push(h);
            }
            rx
        } else {
            filled_rx
        };
        w.thread = Some(
            std::thread::Builder::new()
                .name("ringcap-files".into())
                .spawn(move || sink.run(rx, empty_tx, compress))
                .map_err(|e| StoreError::Config(format!("cannot start the writer thread: {e}")))?,
        );
        Ok(w)
    }

    /// The pool, the first buffer (holding the file header) and the channels.
    fn prepare(opts: &WriterOptions, no_spill: bool) -> (Self, Receiver<OutBuf>, Sender<OutBuf>) {
        let enc = Encoder {
            format: opts.format,
            snaplen: opts.snaplen,
        };
        let counters = Arc::new(WriterCounters::default());
        counters.buffers_total.store(opts.buffers as u64, Relaxed);
        let (filled_tx, filled_rx) = mpsc::channel::<OutBuf>();
        let (empty_tx, empty_rx) = mpsc::channel::<OutBuf>();
        for _ in 1..opts.buffers {
            empty_tx
                .send(OutBuf::new(opts.buffer_size))
                .expect("receiver alive");
        }
        let header = enc.file_header(opts.linktype, &opts.if_name);
        let mut first = OutBuf::new(opts.buffer_size);
        put_header(&mut first, &header);
        let w = CaptureWriter {
            enc,
            active: Some(first),
            active_since: Instant::now(),
            stream_end: 0,
            filled_tx: Some(filled_tx),
            empty_rx,
            thread: None,
            counters,
            accepted: 0,
            bytes: 0,
            refused: 0,
            first_ts: 0,
            last_ts: 0,
            dead: false,
            flush_interval: opts.flush_interval,
            header,
            no_spill,
            next_seq: 0,
            files: false,
            max_file_bytes: None,
            interval_ns: None,
            rotate_at_ns: u64::MAX,
            file_bytes: 0,
            file_first: 0,
            helpers: Vec::new(),
        };
        (w, filled_rx, empty_tx)
    }

    /// Appends one packet; `false` means it was dropped (storage drop: no free buffer, or the
    /// output failed). With `vlan`, the tag is put back after the MAC addresses (caplen and
    /// wire length grow by 4); snaplen cuts the result.
    #[inline]
    pub fn write_packet(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        data: &[u8],
        vlan: Option<Vlan>,
    ) -> bool {
        let caplen = self.enc.caplen(data.len(), vlan.is_some());
        let rec_len = self.enc.record_len(caplen);
        if let Some(buf) = self.active.as_mut() {
            // Strictly less: a record that fills the buffer exactly goes the slow way, which
            // hands the full buffer to the writer at once. The timestamp check is `-G` (always
            // false without it): one compare, no clock read.
            if rec_len < buf.remaining() && ts_ns < self.rotate_at_ns {
                let at = buf.len;
                let mut out = SliceEmit {
                    buf: &mut buf.as_mut_slice()[at..at + rec_len],
                    at: 0,
                };
                self.enc
                    .emit_packet(&mut out, ts_ns, wire_len, data, vlan, caplen, rec_len);
                buf.len += rec_len;
                buf.last_boundary = buf.len;
                buf.packets += 1;
                self.note_accepted(ts_ns, rec_len);
                return true;
            }
        }
        self.write_packet_slow(ts_ns, wire_len, data, vlan, caplen, rec_len)
    }

    #[cold]
    fn write_packet_slow(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        data: &[u8],
        vlan: Option<Vlan>,
        caplen: usize,
        rec_len: usize,
    ) -> bool {
        if ts_ns >= self.rotate_at_ns {
            // `-G`: the packet belongs to a new interval; the file is named after its start.
            let iv = self.interval_ns.unwrap_or(1).max(1);
            if !self.rotate(ts_ns / iv * iv) {
                return self.refuse();
            }
        }
        if self.active.is_none() && !self.take_empty(false) {
            return self.refuse();
        }
        let (room, physical) = {
            let b = self.active.as_ref().expect("active");
            (b.remaining(), b.capacity() - b.len)
        };
        if rec_len >= room && room < physical {
            // The soft limit (`-C`) stops us, not the buffer. A file takes at least one packet.
            let empty_file = self.accepted == self.file_first;
            if !empty_file && !self.rotate(sys::now_ns()) {
                return self.refuse();
            }
            // The new file's first buffer holds only the header: any record fits physically.
            let b = self.active.as_ref().expect("active");
            if rec_len < b.capacity() - b.len {
                self.emit_here(ts_ns, wire_len, data, vlan, caplen, rec_len);
                return true;
            }
        }
        if rec_len < room {
            self.emit_here(ts_ns, wire_len, data, vlan, caplen, rec_len);
            return true;
        }
        let Some(mut next) = self.try_empty(false) else {
            return self.refuse();
        };
        if self.no_spill {
            let full = self.active.take().expect("active");
            self.send(full);
            next.reset(self.stream_end);
            self.set_limit(&mut next);
            self.active = Some(next);
            self.emit_here(ts_ns, wire_len, data, vlan, caplen, rec_len);
            return true;
        }
        let enc = self.enc;
        self.emit_spilling(next, true, |out| {
            enc.emit_packet(out, ts_ns, wire_len, data, vlan, caplen, rec_len)
        });
        self.note_accepted(ts_ns, rec_len);
        true
    }

    /// Emits a record into the active buffer, which has physical room for it.
    fn emit_here(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        data: &[u8],
        vlan: Option<Vlan>,
        caplen: usize,
        rec_len: usize,
    ) {
        let buf = self.active.as_mut().expect("active");
        let at = buf.len;
        let mut out = SliceEmit {
            buf: &mut buf.as_mut_slice()[at..at + rec_len],
            at: 0,
        };
        self.enc
            .emit_packet(&mut out, ts_ns, wire_len, data, vlan, caplen, rec_len);
        buf.len += rec_len;
        buf.limit = buf.limit.max(buf.len);
        buf.last_boundary = buf.len;
        buf.packets += 1;
        self.note_accepted(ts_ns, rec_len);
    }

    /// Ends the current file after its last packet and starts the next one (file mode only).
    /// Needs a free buffer for the new file's header; `false` (nothing changed) without one.
    fn rotate(&mut self, start_ns: u64) -> bool {
        if !self.files {
            self.rotate_at_ns = u64::MAX;
            return true;
        }
        let Some(mut next) = self.try_empty(false) else {
            return false;
        };
        // Without an active buffer the file's last bytes are already with the writer, which
        // closes the file when it sees the next buffer's `new_file`.
        if let Some(mut cur) = self.active.take() {
            cur.ends_file = true;
            self.send(cur);
        }
        self.file_bytes = 0;
        self.file_first = self.accepted;
        next.reset(self.stream_end);
        put_header(&mut next, &self.header);
        next.new_file = Some(start_ns);
        self.set_limit(&mut next);
        self.active = Some(next);
        self.schedule_rotation(start_ns);
        true
    }

    /// Sets the `-G` deadline after a file that began at `start_ns`.
    fn schedule_rotation(&mut self, start_ns: u64) {
        if let Some(iv) = self.interval_ns {
            self.rotate_at_ns = (start_ns / iv * iv).saturating_add(iv);
        }
    }

    /// Limits a buffer to the room left in the current file (`-C`).
    fn set_limit(&self, buf: &mut OutBuf) {
        buf.limit = buf.capacity();
        if let Some(max) = self.max_file_bytes {
            let room = max.saturating_sub(self.file_bytes);
            if room < buf.limit as u64 {
                buf.limit = (room as usize).max(buf.len);
            }
        }
    }

    /// Starts a new file now (SIGHUP). Returns false when not in file mode or no buffer is free
    /// (then call again later).
    pub fn rotate_now(&mut self) -> bool {
        self.files && !self.dead && self.rotate(sys::now_ns())
    }

    /// `-G` without traffic: starts the next file once the wall clock passes the interval end.
    /// Call it about as often as [`Self::maybe_flush`].
    pub fn maybe_rotate(&mut self, wall_ns: u64) -> bool {
        // Packets decide first (their timestamps are exact); the clock only takes over after a
        // grace period, so a ring block retired just after the boundary still lands in the old file.
        const GRACE_NS: u64 = 250_000_000;
        if wall_ns < self.rotate_at_ns.saturating_add(GRACE_NS) || self.dead {
            return false;
        }
        let iv = self.interval_ns.unwrap_or(1).max(1);
        self.rotate(wall_ns / iv * iv)
    }

    #[inline(always)]
    fn note_accepted(&mut self, ts_ns: u64, rec_len: usize) {
        if self.accepted == 0 {
            self.first_ts = ts_ns;
        }
        self.last_ts = ts_ns;
        self.accepted += 1;
        self.bytes += rec_len as u64;
        // Plain stores (only this thread writes them): no locked instruction per packet.
        self.counters.accepted.store(self.accepted, Relaxed);
        self.counters.bytes.store(self.bytes, Relaxed);
    }

    fn refuse(&mut self) -> bool {
        self.refused += 1;
        self.counters.refused.store(self.refused, Relaxed);
        false
    }

    /// Takes an empty buffer from the pool (waiting for one only if `wait`), checking first that
    /// the output is still alive.
    fn try_empty(&mut self, wait: bool) -> Option<OutBuf> {
        if self.dead || self.counters.failed.load(Relaxed) {
            self.dead = true;
            return None;
        }
        let buf = if wait {
            self.empty_rx.recv().ok()
        } else {
            match self.empty_rx.try_recv() {
                Ok(b) => Some(b),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => {
                    self.dead = true;
                    None
                }
            }
        };
        if buf.is_some() {
            self.active_since = Instant::now(); // once per buffer, not per packet
        }
        buf
    }

    /// Makes an empty buffer the active one.
    fn take_empty(&mut self, wait: bool) -> bool {
        match self.try_empty(wait) {
            Some(mut b) => {
                b.reset(self.stream_end);
                self.set_limit(&mut b);
                self.active = Some(b);
                true
            }
            None => false,
        }
    }

    /// Writes a record that does not fit the active buffer: its head fills the active buffer
    /// (which goes to the writer), its tail starts `next`, which becomes active.
    fn emit_spilling(
        &mut self,
        mut next: OutBuf,
        is_packet: bool,
        emit: impl FnOnce(&mut SpillEmit),
    ) {
        let mut full = self.active.take().expect("active buffer");
        let before = full.len;
        next.reset(0);
        emit(&mut SpillEmit {
            a: &mut full,
            b: &mut next,
        });
        let packet = u64::from(is_packet);
        if next.len == 0 {
            // Exact fit: the record ends with the full buffer.
            full.last_boundary = full.len;
            full.packets += packet;
        } else {
            full.last_boundary = before;
            next.first_boundary = next.len;
            next.last_boundary = next.len;
            next.packets = packet;
            next.spill_in_packet = is_packet;
        }
        self.send(full);
        next.stream_offset = self.stream_end;
        self.set_limit(&mut next);
        self.active = Some(next);
    }

    /// Hands a buffer to the writer thread.
    fn send(&mut self, mut buf: OutBuf) {
        self.stream_end += buf.len as u64;
        self.file_bytes += buf.len as u64;
        buf.seq = self.next_seq;
        self.next_seq += 1;
        self.counters.backlog.fetch_add(1, Relaxed);
        let sent = self
            .filled_tx
            .as_ref()
            .is_some_and(|tx| tx.send(buf).is_ok());
        if !sent {
            self.counters.backlog.fetch_sub(1, Relaxed);
            self.dead = true;
        }
    }

    /// Writes a partly filled buffer once it is older than the flush interval, so a pipe reader
    /// (or `tail -f`) sees packets within about a second. Call it often (every ring block or poll
    /// timeout). Never done with O_DIRECT, which can only write whole buffers. Returns whether it wrote.
    pub fn maybe_flush(&mut self, now: Instant) -> bool {
        if self.counters.failed.load(Relaxed) {
            self.dead = true;
        }
        if self.dead || self.counters.direct_io.load(Relaxed) {
            return false;
        }
        let due = self.active.as_ref().is_some_and(|b| b.len > 0)
            && now.saturating_duration_since(self.active_since) >= self.flush_interval;
        if due {
            let buf = self.active.take().expect("checked");
            self.send(buf);
        }
        due
    }

    /// Current counters.
    pub fn stats(&self) -> WriterStats {
        self.counters.snapshot()
    }

    /// The live counters, for a stats thread; they stay valid after `finish`.
    pub fn counters(&self) -> Arc<WriterCounters> {
        self.counters.clone()
    }

    /// Writes what is buffered (and, for pcapng, an Interface Statistics Block from `final_stats`,
    /// start/end times and delivered count defaulting to what was written), syncs and closes.
    /// On a write failure the error says what happened; counters stay readable via [`Self::counters`].
    pub fn finish(mut self, final_stats: Option<IfStats>) -> Result<WriterStats, StoreError> {
        self.close(final_stats)?;
        Ok(self.counters.snapshot())
    }

    fn close(&mut self, final_stats: Option<IfStats>) -> Result<(), StoreError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        if !self.dead && self.enc.format == Format::PcapNg {
            let mut s = final_stats.unwrap_or_default();
            s.start_ns = s.start_ns.or(Some(self.first_ts));
            s.end_ns = s.end_ns.or(Some(self.last_ts));
            s.usr_deliv = s.usr_deliv.or(Some(self.accepted));
            let block = self.enc.stats_block(&s, s.end_ns.unwrap_or(0));
            self.append_blocking(&block);
        }
        if let Some(buf) = self.active.take() {
            if buf.len > 0 {
                self.send(buf);
            }
        }
        self.filled_tx = None; // compressors and the writer thread end when the channel closes
        for h in self.helpers.drain(..) {
            let _ = h.join();
        }
        let result = thread.join().unwrap_or_else(|_| {
            Err(StoreError::Config(
                "the writer thread panicked; the file may be incomplete".into(),
            ))
        });
        // Buffers come back to `empty_rx` and are freed with it.
        result
    }

    /// Appends a non-packet block at close, waiting for a buffer if needed (close may block).
    fn append_blocking(&mut self, block: &[u8]) {
        if block.is_empty() || self.dead {
            return;
        }
        if self.active.is_none() && !self.take_empty(true) {
            return;
        }
        let fits = self
            .active
            .as_ref()
            .is_some_and(|b| block.len() < b.remaining());
        if !fits && self.no_spill {
            // Keep every buffer self-contained: the block goes into a fresh buffer.
            if let Some(full) = self.active.take() {
                self.send(full);
            }
            if !self.take_empty(true) {
                return;
            }
        }
        let fits = self
            .active
            .as_ref()
            .is_some_and(|b| block.len() < b.capacity() - b.len);
        if fits {
            let buf = self.active.as_mut().expect("checked");
            let at = buf.len;
            buf.as_mut_slice()[at..at + block.len()].copy_from_slice(block);
            buf.len += block.len();
            buf.limit = buf.limit.max(buf.len);
            buf.last_boundary = buf.len;
        } else if let Some(next) = self.try_empty(true) {
            self.emit_spilling(next, false, |out| out.put(block));
        }
    }
}

impl Drop for CaptureWriter {
    /// A writer dropped without `finish` (e.g. on panic) still writes what it holds.
    fn drop(&mut self) {
        let _ = self.close(None);
    }
}

/// Emits across two buffers: fills `a` to its end, then continues in `b`.
pub(crate) struct SpillEmit<'a> {
    a: &'a mut OutBuf,
    b: &'a mut OutBuf,
}

impl Emit for SpillEmit<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.a.remaining());
        let at = self.a.len;
        self.a.as_mut_slice()[at..at + n].copy_from_slice(&bytes[..n]);
        self.a.len += n;
        let rest = &bytes[n..];
        let at = self.b.len;
        self.b.as_mut_slice()[at..at + rest.len()].copy_from_slice(rest);
        self.b.len += rest.len();
    }
}

/// Writes the file header at the start of an empty buffer.
fn put_header(buf: &mut OutBuf, header: &[u8]) {
    buf.as_mut_slice()[..header.len()].copy_from_slice(header);
    buf.len = header.len();
    buf.first_boundary = header.len();
    buf.last_boundary = header.len();
}

fn validate(mut o: WriterOptions) -> Result<WriterOptions, StoreError> {
    if o.snaplen == 0 {
        o.snaplen = MAX_SNAPLEN;
    }
    if o.snaplen > MAX_SNAPLEN {
        return Err(StoreError::Config(format!(
            "snaplen {} is larger than the maximum {MAX_SNAPLEN}: use -s {MAX_SNAPLEN} or less",
            o.snaplen
        )));
    }
    if o.buffer_size < MIN_BUFFER_SIZE {
        return Err(StoreError::Config(format!(
            "buffer size {} is below the minimum of 1 MiB: use at least 1 MiB",
            o.buffer_size
        )));
    }
    if o.buffers < 2 {
        return Err(StoreError::Config(format!(
            "{} output buffer(s) is too few: use at least 2 (one filling, one being written)",
            o.buffers
        )));
    }
    if o.format == Format::PcapNg && o.linktype > u32::from(u16::MAX) {
        return Err(StoreError::Config(format!(
            "linktype {} does not fit pcapng's 16 bits",
            o.linktype
        )));
    }
    o.buffer_size = o.buffer_size.div_ceil(ALIGN) * ALIGN;
    Ok(o)
}
