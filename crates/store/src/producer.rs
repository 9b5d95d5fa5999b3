//! [`Producer`]: one capture thread's side of a [`crate::CaptureWriter`]. Each producer encodes
//! into its own active buffer without any lock; the shared state ([`Hand`]) is locked only to
//! take an empty buffer or hand a filled one on, once per buffer.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::coverage::{DropMeter, Mark};
use crate::format::{Emit, Encoder, SliceEmit};
use crate::pool::OutBuf;
use crate::stats::{ProducerCounters, WriterCounters};
use wire::Vlan;

/// What every producer of one writer shares.
pub(crate) struct Shared {
    pub hand: Mutex<Hand>,
    pub counters: Arc<WriterCounters>,
    /// Set from outside (SIGHUP): start a new file soon.
    pub rotation: Arc<AtomicBool>,
    pub enc: Encoder,
    /// File header, at the start of every file.
    pub header: Vec<u8>,
    pub flush_interval: Duration,
    /// Compression: each buffer becomes one self-contained frame, so records never spill.
    pub compress: bool,
    /// File mode: rotation by `max_file_bytes` (`-C`), `interval_ns` (`-G`) and on request.
    pub files: bool,
    pub max_file_bytes: Option<u64>,
    pub interval_ns: Option<u64>,
    /// A live capture's drop counters, read at each file boundary for the files' coverage.
    pub meter: Option<DropMeter>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Hand> {
        self.hand.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The drop counters at a file boundary at `wall_ns` (only the time without coverage: nothing
    /// reads the rest). Called under the hand lock, so marks follow the order of the files.
    pub fn mark(&self, wall_ns: u64) -> Mark {
        let Some(meter) = &self.meter else {
            return Mark {
                wall_ns,
                ..Mark::default()
            };
        };
        let d = meter();
        Mark {
            wall_ns,
            kernel: d.kernel,
            interface: d.interface,
            refused: self.counters.refused(),
        }
    }
}

/// The hand-over point, locked once per buffer: everything decided in the order buffers reach
/// the output (sequence numbers, stream offsets, which file a buffer goes to).
pub(crate) struct Hand {
    pub filled_tx: Option<Sender<OutBuf>>,
    pub empty_rx: Receiver<OutBuf>,
    /// Buffers of the pool not mapped yet: a producer that finds no empty buffer maps one.
    pub unmapped: usize,
    /// Size of every buffer of the pool.
    pub buffer_size: usize,
    /// Producers created so far; with more than one, buffers are self-contained.
    pub producers: usize,
    /// Sequence number of the next buffer handed on.
    pub next_seq: u64,
    /// Stream offset where the next buffer handed on starts.
    pub stream_end: u64,
    /// Files begun or pending so far: a producer compares it with its own view.
    pub file: u64,
    /// The next buffer handed on begins a new file (header put in front of it) started at this time.
    pub next_file: Option<u64>,
    /// The drop counters where that file begins.
    pub next_mark: Mark,
    /// Bytes and packets of the current file in buffers already handed on.
    pub file_bytes: u64,
    pub file_packets: u64,
    /// Timestamp at which the next `-G` file begins (u64::MAX: never).
    pub rotate_at_ns: u64,
    /// First and last packet times of finished producers (pcapng statistics).
    pub first_ts: Option<u64>,
    pub last_ts: u64,
}

impl Hand {
    /// Sets the `-G` deadline after a file that began at `start_ns`.
    pub fn schedule_rotation(&mut self, start_ns: u64, interval_ns: Option<u64>) {
        if let Some(iv) = interval_ns {
            self.rotate_at_ns = (start_ns / iv * iv).saturating_add(iv);
        }
    }

    /// Folds a producer's packet times into the writer's.
    fn merge_times(&mut self, first: u64, last: u64) {
        self.first_ts = Some(self.first_ts.map_or(first, |f| f.min(first)));
        self.last_ts = self.last_ts.max(last);
    }

    /// The first and last packet times so far, counting a producer not yet finished.
    pub fn times_with(&self, p: &Producer) -> (u64, u64) {
        let mut first = self.first_ts;
        let mut last = self.last_ts;
        if p.accepted > 0 {
            first = Some(first.map_or(p.first_ts, |f| f.min(p.first_ts)));
            last = last.max(p.last_ts);
        }
        (first.unwrap_or(0), last)
    }
}

/// One capture thread's writer: its own encoder and active buffer. Create one per thread with
/// [`crate::CaptureWriter::producer`] before packets flow, call [`Producer::tick`] after every ring
/// block or poll timeout, and [`Producer::finish`] (or drop it) before
/// [`crate::CaptureWriter::finish`].
///
/// No lock and no atomic read-modify-write per packet: the shared state is locked once per
/// buffer, to take an empty one or hand a filled one on. Buffers reach the output in the order
/// they are handed on, which also gives their sequence numbers and stream offsets.
///
/// With one producer the output is exactly that of a single-threaded writer: records may spill
/// from one buffer into the next, `-G` cuts files at the first packet of a new interval and `-C`
/// before the packet that would overflow the file. With several producers every buffer is
/// self-contained (buffers of different producers interleave in the file), a file boundary
/// falls between buffers (`-C`, `-G`, rotation requests and the wall clock all start the new
/// file with the next buffer handed on, whichever producer it comes from), so a file may hold a
/// few packets of a neighbouring interval, and packets of different producers are not sorted by
/// time across buffers (readers such as tcpdump accept that). Self-contained buffers end
/// anywhere: both writers stage them ([`crate::stage::Stage`]) so that O_DIRECT stays on.
pub struct Producer {
    shared: Arc<Shared>,
    enc: Encoder,
    active: Option<OutBuf>,
    active_since: Instant,
    /// Bytes kept free at the end of the active buffer for a file header put in front at hand-on.
    reserve: usize,
    /// Records never straddle two buffers (compression, or several producers).
    no_spill: bool,
    /// `Hand::file` when the active buffer was configured: this producer's view of the current file.
    file: u64,
    /// `accepted` when this producer's view of the current file began.
    file_first: u64,
    /// Copy of `Hand::rotate_at_ns`, checked per packet (`-G`).
    rotate_at_ns: u64,
    counts: Arc<ProducerCounters>,
    accepted: u64,
    bytes: u64,
    refused: u64,
    first_ts: u64,
    last_ts: u64,
    /// The output failed: refuse everything.
    dead: bool,
    /// Wait for a free buffer instead of refusing the packet ([`Self::wait_for_buffers`]).
    waits: bool,
}

impl Producer {
    /// A new producer of `shared`'s output; it takes its first buffer with its first packet.
    pub(crate) fn new(shared: Arc<Shared>) -> Producer {
        let counts = Arc::new(ProducerCounters::default());
        shared.counters.add_producer(counts.clone());
        let (file, rotate_at_ns, producers) = {
            let mut h = shared.lock();
            h.producers += 1;
            (h.file, h.rotate_at_ns, h.producers)
        };
        Producer {
            enc: shared.enc,
            active: None,
            active_since: Instant::now(),
            reserve: 0,
            no_spill: shared.compress || producers > 1,
            file,
            file_first: 0,
            rotate_at_ns,
            counts,
            accepted: 0,
            bytes: 0,
            refused: 0,
            first_ts: 0,
            last_ts: 0,
            dead: false,
            waits: false,
            shared,
        }
    }

    /// Appends one packet; `false` means it was dropped (storage drop: no free buffer, or the
    /// output failed). With `vlan`, the tag is put back after the MAC addresses (caplen and
    /// wire length grow by 4); snaplen cuts the result. Inlined always: the fast path is a few
    /// compares and a copy, and a call per packet showed in the profile of a disk capture.
    #[inline(always)]
    pub fn write_packet(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        data: &[u8],
        vlan: Option<Vlan>,
    ) -> bool {
        self.write_packet_opts(ts_ns, wire_len, data, vlan, &[])
    }

    /// [`Self::write_packet`] with pcapng options in the packet block (`opts` as
    /// [`crate::epb_comment`] makes them, e.g. the tunnel `capture --decap` stripped); a pcap file
    /// leaves them out.
    #[inline(always)]
    pub fn write_packet_opts(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        data: &[u8],
        vlan: Option<Vlan>,
        opts: &[u8],
    ) -> bool {
        let caplen = self.enc.caplen(data.len(), vlan.is_some());
        let rec_len = self.enc.record_len_opts(caplen, opts.len());
        if let Some(buf) = self.active.as_mut() {
            // Strictly less: a record that fills the buffer exactly goes the slow way, which
            // hands the full buffer on at once. The timestamp check is `-G` (always false
            // without it): one compare, no clock read.
            if rec_len < buf.remaining() && ts_ns < self.rotate_at_ns {
                let at = buf.len;
                let mut out = SliceEmit {
                    buf: &mut buf.as_mut_slice()[at..at + rec_len],
                    at: 0,
                };
                self.enc
                    .emit_packet_opts(&mut out, ts_ns, wire_len, data, vlan, caplen, rec_len, opts);
                buf.len += rec_len;
                buf.last_boundary = buf.len;
                buf.packets += 1;
                self.note_accepted(ts_ns, rec_len);
                return true;
            }
        }
        let rec = Rec {
            ts_ns,
            wire_len,
            data,
            vlan,
            caplen,
            rec_len,
            opts,
        };
        self.write_packet_slow(&rec)
    }

    #[cold]
    fn write_packet_slow(&mut self, r: &Rec) -> bool {
        let (ts_ns, rec_len) = (r.ts_ns, r.rec_len);
        if ts_ns >= self.rotate_at_ns {
            // `-G`: the packet belongs to a new interval; the file is named after its start.
            let iv = self.shared.interval_ns.unwrap_or(1).max(1);
            if !self.rotate(ts_ns / iv * iv, |h, _| ts_ns >= h.rotate_at_ns) {
                return self.refuse();
            }
        }
        if self.active.is_none() && !self.take_empty(self.waits) {
            return self.refuse();
        }
        let (room, physical) = self.room();
        if rec_len >= room && room < physical {
            // The soft limit (`-C`) stops us, not the buffer. A file takes at least one packet.
            let empty_file = self.accepted == self.file_first;
            // The file is named after the wall clock; its coverage ends at this packet's stamp,
            // which is the next file's first: no overlap, no gap.
            let now = sys::now_ns();
            let at = self.enc.stored_ns(ts_ns).min(now);
            if !empty_file && !self.rotate_at(now, at, |h, mine| h.file == mine) {
                return self.refuse();
            }
            // A new file's first buffer is empty: any record fits physically.
            if rec_len < self.room().1 {
                self.emit_here(r);
                return true;
            }
        }
        let room = self.room().0;
        if rec_len < room {
            self.emit_here(r);
            return true;
        }
        let Some(mut next) = self.try_empty(self.waits) else {
            return self.refuse();
        };
        if self.no_spill {
            let full = self.active.take().expect("active");
            next.reset(0);
            let shared = self.shared.clone();
            let mut h = shared.lock();
            self.hand_on(&mut h, full);
            self.configure(&h, &mut next);
            drop(h);
            self.active = Some(next);
            self.emit_here(r);
            return true;
        }
        let enc = self.enc;
        self.emit_spilling(next, true, |out| {
            enc.emit_packet_opts(
                out, r.ts_ns, r.wire_len, r.data, r.vlan, r.caplen, r.rec_len, r.opts,
            )
        });
        self.note_accepted(ts_ns, rec_len);
        true
    }

    /// Room left in the active buffer: before its soft limit, and physically (keeping the reserve).
    fn room(&self) -> (usize, usize) {
        let b = self.active.as_ref().expect("active");
        (b.remaining(), b.capacity() - self.reserve - b.len)
    }

    /// Emits a record into the active buffer, which has physical room for it.
    fn emit_here(&mut self, r: &Rec) {
        let buf = self.active.as_mut().expect("active");
        let at = buf.len;
        let mut out = SliceEmit {
            buf: &mut buf.as_mut_slice()[at..at + r.rec_len],
            at: 0,
        };
        self.enc.emit_packet_opts(
            &mut out, r.ts_ns, r.wire_len, r.data, r.vlan, r.caplen, r.rec_len, r.opts,
        );
        buf.len += r.rec_len;
        buf.limit = buf.limit.max(buf.len);
        buf.last_boundary = buf.len;
        buf.packets += 1;
        self.note_accepted(r.ts_ns, r.rec_len);
    }

    /// Ends the current file and starts the next one (file mode only), if `due` still holds
    /// under the lock (given the shared state and this producer's view of the current file):
    /// the active buffer, marked as the file's last, is handed on, and the next buffer handed on
    /// (by any producer) begins the new file. When no longer due (another producer rotated
    /// first), the active buffer is handed on as usual. Needs a free buffer; `false` (nothing
    /// changed) without one.
    fn rotate(&mut self, start_ns: u64, due: impl FnOnce(&Hand, u64) -> bool) -> bool {
        self.rotate_at(start_ns, start_ns, due)
    }

    /// [`Self::rotate`], the files' coverage meeting at `boundary_ns` rather than at `start_ns`.
    fn rotate_at(
        &mut self,
        start_ns: u64,
        boundary_ns: u64,
        due: impl FnOnce(&Hand, u64) -> bool,
    ) -> bool {
        let shared = self.shared.clone();
        let mut h = shared.lock();
        let due = shared.files && due(&h, self.file);
        // Once per rotation: the counters where one file ends and the next begins.
        let mark = if due {
            shared.mark(boundary_ns)
        } else {
            Mark::default()
        };
        let keep = !due && self.active.as_ref().is_some_and(|b| b.len == 0);
        let next = if keep {
            self.active.take()
        } else {
            let Some(mut next) = self.try_empty_locked(&mut h, false) else {
                return false;
            };
            match self.active.take() {
                Some(mut cur) => {
                    // An empty buffer still carries the end of the file (the writer closes it).
                    cur.ends_file = due;
                    cur.end_mark = due.then(|| Box::new(mark));
                    self.hand_on(&mut h, cur);
                    Some(next)
                }
                // A file still waiting for its first buffer (an idle interval) gets an empty
                // one, so it exists with its header; the next packet takes a new buffer.
                None if due && h.next_file.is_some() => {
                    next.reset(0);
                    next.ends_file = true;
                    next.end_mark = Some(Box::new(mark));
                    self.hand_on(&mut h, next);
                    None
                }
                None => Some(next),
            }
        };
        if due {
            h.next_file = Some(start_ns);
            h.next_mark = mark;
            h.file += 1;
            h.schedule_rotation(start_ns, self.shared.interval_ns);
        }
        if let Some(mut next) = next {
            next.reset(0);
            self.configure(&h, &mut next);
            self.active = Some(next);
        } else {
            self.rotate_at_ns = h.rotate_at_ns;
        }
        true
    }

    /// Starts a new file now (a rotation request). False when not in file mode or no buffer is
    /// free (then call again later).
    pub(crate) fn rotate_now(&mut self) -> bool {
        self.shared.files && !self.dead && self.rotate(sys::now_ns(), |_, _| true)
    }

    /// `-G` without traffic: starts the next file once the wall clock passes the interval end.
    pub(crate) fn maybe_rotate(&mut self, wall_ns: u64) -> bool {
        // Packets decide first (their timestamps are exact); the clock only takes over after a
        // grace period, so a ring block retired just after the boundary still lands in the old file.
        const GRACE_NS: u64 = 250_000_000;
        if wall_ns < self.rotate_at_ns.saturating_add(GRACE_NS) || self.dead {
            return false;
        }
        let iv = self.shared.interval_ns.unwrap_or(1).max(1);
        self.rotate(wall_ns / iv * iv, |h, _| {
            wall_ns >= h.rotate_at_ns.saturating_add(GRACE_NS)
        })
    }

    /// Hands a partly filled buffer on once it is older than the flush interval, so a pipe
    /// reader, `tail -f` or a query sees packets within about a second. Not for plain files
    /// with O_DIRECT, which write whole buffers (an unaligned end would send every later buffer
    /// through the stage); compressed buffers end anywhere and are staged anyway. Returns
    /// whether it handed one on.
    pub(crate) fn maybe_flush(&mut self, now: Instant) -> bool {
        let c = &self.shared.counters;
        if c.failed.load(Relaxed) {
            self.dead = true;
        }
        if self.dead || (c.direct_io.load(Relaxed) && !self.shared.compress) {
            return false;
        }
        let due = self.active.as_ref().is_some_and(|b| b.len > 0)
            && now.saturating_duration_since(self.active_since) >= self.shared.flush_interval;
        if due {
            let buf = self.active.take().expect("checked");
            let shared = self.shared.clone();
            self.hand_on(&mut shared.lock(), buf);
        }
        due
    }

    /// pcapng: the interface id the following packets are written with (an index into the writer's
    /// `if_names`); pcap ignores it. Set per batch, not per packet.
    #[inline]
    pub fn set_interface(&mut self, id: u32) {
        self.enc.interface = id;
    }

    /// The file policy, called after every ring block or poll timeout: hands on a partly filled
    /// buffer when due, starts the next `-G` file by the wall clock (`wall_ns`, ns since the
    /// epoch) when no packet did, and serves a pending rotation request (which stays pending
    /// while no buffer is free).
    pub fn tick(&mut self, now: Instant, wall_ns: u64) {
        self.maybe_flush(now);
        self.maybe_rotate(wall_ns);
        let req = &self.shared.rotation;
        if self.shared.files && req.load(Relaxed) && req.swap(false, Relaxed) && !self.rotate_now()
        {
            self.shared.rotation.store(true, Relaxed);
        }
    }

    /// Hands the active buffer on; the writer's `finish` writes it. Dropping does the same.
    pub fn finish(self) {}

    /// At close: hands the active buffer on, and an empty one if the current file has none
    /// yet (so even a capture without packets leaves a file with its header).
    pub(crate) fn close_series(mut self) {
        let shared = self.shared.clone();
        let mut h = shared.lock();
        if let Some(buf) = self.active.take() {
            if buf.len > 0 {
                self.hand_on(&mut h, buf);
            }
        }
        if h.next_file.is_some() {
            if let Some(mut b) = self.try_empty_locked(&mut h, true) {
                b.reset(0);
                self.hand_on(&mut h, b);
            }
        }
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
        self.counts.accepted.store(self.accepted, Relaxed);
        self.counts.bytes.store(self.bytes, Relaxed);
    }

    /// Offline writers (a query's output, a synthetic trace) wait for a free buffer instead of refusing the
    /// packet, so `write_packet` fails only once the output has failed. A capture must never wait.
    pub fn wait_for_buffers(&mut self) {
        self.waits = true;
    }

    fn refuse(&mut self) -> bool {
        self.refused += 1;
        self.counts.refused.store(self.refused, Relaxed);
        false
    }

    /// Takes an empty buffer from the pool (waiting for one only if `wait`).
    pub(crate) fn try_empty(&mut self, wait: bool) -> Option<OutBuf> {
        let shared = self.shared.clone();
        let mut h = shared.lock();
        self.try_empty_locked(&mut h, wait)
    }

    /// As [`Self::try_empty`], with the lock held; checks first that the output is still alive.
    fn try_empty_locked(&mut self, h: &mut Hand, wait: bool) -> Option<OutBuf> {
        if self.dead || self.shared.counters.failed.load(Relaxed) {
            self.dead = true;
            return None;
        }
        let buf = match h.empty_rx.try_recv() {
            Ok(b) => Some(b),
            Err(TryRecvError::Disconnected) => {
                self.dead = true;
                None
            }
            Err(TryRecvError::Empty) if h.unmapped > 0 => {
                h.unmapped -= 1;
                Some(OutBuf::new(h.buffer_size))
            }
            Err(TryRecvError::Empty) if wait => h.empty_rx.recv().ok(),
            Err(TryRecvError::Empty) => None,
        };
        if buf.is_some() {
            self.active_since = Instant::now(); // once per buffer, not per packet
        }
        buf
    }

    /// Makes an empty buffer the active one.
    pub(crate) fn take_empty(&mut self, wait: bool) -> bool {
        let shared = self.shared.clone();
        let mut h = shared.lock();
        match self.try_empty_locked(&mut h, wait) {
            Some(mut b) => {
                b.reset(0);
                self.configure(&h, &mut b);
                self.active = Some(b);
                true
            }
            None => false,
        }
    }

    /// Sets the soft limit of a buffer about to be filled and refreshes this producer's view of
    /// the shared state. A buffer that may begin a file keeps room for the header; `-C` limits a
    /// buffer to the room left in the file it will most likely join.
    fn configure(&mut self, h: &Hand, buf: &mut OutBuf) {
        let several = h.producers > 1;
        let header = self.shared.header.len();
        let starts_file = h.next_file.is_some();
        // With several producers any buffer may begin a file (another one rotated meanwhile).
        self.reserve = if starts_file || (several && self.shared.files) {
            header
        } else {
            0
        };
        let used = if starts_file {
            header as u64
        } else {
            h.file_bytes
        };
        let physical = buf.capacity() - self.reserve;
        buf.limit = physical;
        if let Some(max) = self.shared.max_file_bytes {
            let room = max.saturating_sub(used);
            if room < physical as u64 {
                buf.limit = (room as usize).max(buf.len);
            }
        }
        self.no_spill = self.shared.compress || several;
        if self.file != h.file {
            self.file = h.file;
            self.file_first = self.accepted;
        }
        self.rotate_at_ns = h.rotate_at_ns;
    }

    /// Writes a record that does not fit the active buffer: its head fills the active buffer
    /// (which is handed on), its tail starts `next`, which becomes active.
    pub(crate) fn emit_spilling(
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
        let shared = self.shared.clone();
        let mut h = shared.lock();
        self.hand_on(&mut h, full);
        self.configure(&h, &mut next);
        drop(h);
        self.active = Some(next);
    }

    /// Hands a buffer on to the writer (through the compressors): decides its file, puts the
    /// header in front when it begins one, numbers it and places it in the stream.
    pub(crate) fn hand_on(&mut self, h: &mut Hand, mut buf: OutBuf) {
        if let Some(max) = self.shared.max_file_bytes {
            // Several producers: a buffer that would overflow the file begins the next one.
            let overflow = h.file_bytes + buf.len as u64 > max;
            if h.producers > 1
                && h.next_file.is_none()
                && overflow
                && buf.packets > 0
                && h.file_packets > 0
            {
                let now = sys::now_ns();
                h.next_file = Some(now);
                h.next_mark = self.shared.mark(now);
                h.file += 1;
            }
        }
        if let Some(start) = h.next_file.take() {
            put_header_in_front(&mut buf, &self.shared.header);
            buf.new_file = Some(start);
            buf.start_mark = Some(Box::new(h.next_mark));
            h.file_bytes = 0;
            h.file_packets = 0;
        }
        if buf.packets > 0 {
            self.stamp_times(&mut buf);
        }
        buf.seq = h.next_seq;
        h.next_seq += 1;
        buf.stream_offset = h.stream_end;
        h.stream_end += buf.len as u64;
        h.file_bytes += buf.len as u64;
        h.file_packets += buf.packets;
        self.shared.counters.backlog.fetch_add(1, Relaxed);
        let sent = h.filled_tx.as_ref().is_some_and(|tx| tx.send(buf).is_ok());
        if !sent {
            self.shared.counters.backlog.fetch_sub(1, Relaxed);
            self.dead = true;
        }
    }

    /// The buffer's first and last packet times as the file records them, once per buffer (the
    /// packets themselves are not looked at again): the first whole record after the spilled-in
    /// tail, read back, and this producer's last packet, which is the buffer's last (a record
    /// spilling on to the next buffer is counted there, after this hand-on).
    fn stamp_times(&self, buf: &mut OutBuf) {
        let last = self.enc.stored_ns(self.last_ts);
        let (from, to) = (buf.first_boundary, buf.last_boundary);
        buf.last_ts = last;
        buf.first_ts = if from < to {
            self.enc.record_ns(&buf.filled()[from..to]).unwrap_or(last)
        } else {
            last
        };
    }

    /// Appends a non-packet block at close, waiting for a buffer if needed (close may block).
    pub(crate) fn append_blocking(&mut self, block: &[u8]) {
        if block.is_empty() || self.dead {
            return;
        }
        if self.active.is_none() && !self.take_empty(true) {
            return;
        }
        let started = self.active.as_ref().is_some_and(|b| b.len > 0);
        if block.len() >= self.room().0 && self.no_spill && started {
            // Keep every buffer self-contained: the block goes into a fresh buffer.
            let full = self.active.take().expect("active");
            let shared = self.shared.clone();
            self.hand_on(&mut shared.lock(), full);
            if !self.take_empty(true) {
                return;
            }
        }
        if block.len() < self.room().1 {
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

    pub(crate) fn is_dead(&self) -> bool {
        self.dead || self.shared.counters.failed.load(Relaxed)
    }
}

impl Drop for Producer {
    /// Hands the active buffer on (also on panic) and leaves this producer's packet times.
    fn drop(&mut self) {
        let shared = self.shared.clone();
        let mut h = shared.lock();
        if let Some(buf) = self.active.take() {
            if buf.len > 0 {
                self.hand_on(&mut h, buf);
            }
        }
        if self.accepted > 0 {
            h.merge_times(self.first_ts, self.last_ts);
        }
    }
}

/// One packet record the slow path writes: what [`Producer::write_packet_opts`] was given and
/// the lengths it worked out.
struct Rec<'a> {
    ts_ns: u64,
    wire_len: u32,
    data: &'a [u8],
    vlan: Option<Vlan>,
    caplen: usize,
    rec_len: usize,
    opts: &'a [u8],
}

/// Emits across two buffers: fills `a` to its soft limit, then continues in `b`.
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

/// Puts the file header in front of a buffer's records (the buffer kept room for it).
fn put_header_in_front(buf: &mut OutBuf, header: &[u8]) {
    let (len, h) = (buf.len, header.len());
    let s = buf.as_mut_slice();
    s.copy_within(..len, h);
    s[..h].copy_from_slice(header);
    buf.len += h;
    buf.limit = buf.limit.max(buf.len);
    buf.first_boundary += h;
    buf.last_boundary += h;
}
