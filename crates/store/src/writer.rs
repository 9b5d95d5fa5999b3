//! `CaptureWriter`: the capture thread's side. Packets are encoded straight into the active
//! buffer of a fixed pool (empty → active → filled, as driverdump did with N buffers); a writer
//! thread writes each filled buffer with one write(). The capture thread never blocks: with no
//! empty buffer left, the packet is a storage drop.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::StoreError;
use crate::format::{Emit, Encoder, Format, IfStats, SliceEmit, VlanTag, MAX_SNAPLEN};
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
        let mut first = OutBuf::new(opts.buffer_size);
        let header = enc.file_header(opts.linktype, &opts.if_name);
        first.as_mut_slice()[..header.len()].copy_from_slice(&header);
        first.len = header.len();
        first.first_boundary = header.len();
        first.last_boundary = header.len();

        let worker = WriterThread::new(output, path, opts.format, counters.clone());
        let thread = std::thread::Builder::new()
            .name("ringcap-writer".into())
            .spawn(move || worker.run(filled_rx, empty_tx))
            .map_err(|e| StoreError::Config(format!("cannot start the writer thread: {e}")))?;
        Ok(CaptureWriter {
            enc,
            active: Some(first),
            active_since: Instant::now(),
            stream_end: 0,
            filled_tx: Some(filled_tx),
            empty_rx,
            thread: Some(thread),
            counters,
            accepted: 0,
            bytes: 0,
            refused: 0,
            first_ts: 0,
            last_ts: 0,
            dead: false,
            flush_interval: opts.flush_interval,
        })
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
        vlan: Option<VlanTag>,
    ) -> bool {
        let caplen = self.enc.caplen(data.len(), vlan.is_some());
        let rec_len = self.enc.record_len(caplen);
        if let Some(buf) = self.active.as_mut() {
            // Strictly less: a record that fills the buffer exactly goes the slow way, which
            // hands the full buffer to the writer at once.
            if rec_len < buf.remaining() {
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
        vlan: Option<VlanTag>,
        caplen: usize,
        rec_len: usize,
    ) -> bool {
        if self.active.is_none() && !self.take_empty(false) {
            return self.refuse();
        }
        let fits = self
            .active
            .as_ref()
            .is_some_and(|b| rec_len < b.remaining());
        if fits {
            return self.write_packet(ts_ns, wire_len, data, vlan);
        }
        let Some(next) = self.try_empty(false) else {
            return self.refuse();
        };
        let enc = self.enc;
        self.emit_spilling(next, true, |out| {
            enc.emit_packet(out, ts_ns, wire_len, data, vlan, caplen, rec_len)
        });
        self.note_accepted(ts_ns, rec_len);
        true
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
        self.active = Some(next);
    }

    /// Hands a buffer to the writer thread.
    fn send(&mut self, buf: OutBuf) {
        self.stream_end += buf.len as u64;
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
        self.filled_tx = None; // the writer thread ends when the channel closes
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
        if fits {
            let buf = self.active.as_mut().expect("checked");
            let at = buf.len;
            buf.as_mut_slice()[at..at + block.len()].copy_from_slice(block);
            buf.len += block.len();
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
