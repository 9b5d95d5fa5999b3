//! `CaptureWriter`: packets are encoded straight into the active buffer of a fixed pool (empty →
//! active → filled, as driverdump did with N buffers); a writer thread writes each filled buffer
//! with one write(). A capture thread never blocks: with no empty buffer left, the packet is a
//! storage drop. Each capture thread has its own [`Producer`] (encoder and active buffer); they
//! share only the pool and the hand-over point, locked once per buffer.
//!
//! In file mode ([`CaptureWriter::create_files`]) the producers also decide where files end
//! (`-C` size, `-G` interval, rotation requests): always between two packets, by marking the
//! last buffer of a file and putting the file header in front of the next file's first buffer,
//! so no packet is lost or written twice across a rotation.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::compress::{run_compressor, CompressMode, MAX_FRAME_SIZE, MIN_FRAME_SIZE};
use crate::error::StoreError;
use crate::files::{FilePlan, FileSink};
use crate::format::{Encoder, Format, IfStats, MAX_SNAPLEN};
use crate::indexing::IN_FLIGHT;
use crate::output::{Output, WriterThread};
use crate::pool::{OutBuf, ALIGN};
use crate::producer::{Hand, Producer, Shared};
use crate::stats::{WriterCounters, WriterStats};
use wire::Vlan;

/// Smallest buffer accepted: must hold several maximal records so each buffer has a record boundary.
pub const MIN_BUFFER_SIZE: usize = 1 << 20;
/// Buffers mapped when the writer starts; the others of `WriterOptions::buffers` on demand.
const EAGER_BUFFERS: usize = 2;

/// How a [`CaptureWriter`] formats and buffers its output.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// pcap (µs or ns) or pcapng.
    pub format: Format,
    /// Longest captured length per packet; 0 means 262144.
    pub snaplen: u32,
    /// Link-layer type (1 = Ethernet).
    pub linktype: u32,
    /// pcapng: one Interface Description Block per name, interface ids 0, 1, ... in this order (none: one
    /// block without a name). pcap has no place for names.
    pub if_names: Vec<String>,
    /// pcapng if_description, e.g. where the stamps come from ("" to leave it out).
    pub if_description: String,
    /// pcapng if_tsresol: 9 (ns, the default) or 6 (µs); pcap's precision is its `format`.
    pub tsresol: u8,
    /// Bytes per buffer (≥ 1 MiB, rounded up to 4 KiB).
    pub buffer_size: usize,
    /// Buffers in the pool (≥ 2).
    pub buffers: usize,
    /// Try O_DIRECT (falls back to the page cache where the file system refuses it).
    pub direct_io: bool,
    /// A partly filled buffer older than this is written by [`Producer::tick`]
    /// (not with O_DIRECT, which only writes whole buffers).
    pub flush_interval: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            format: Format::Pcap { nanos: false },
            snaplen: MAX_SNAPLEN,
            linktype: 1,
            if_names: Vec::new(),
            if_description: String::new(),
            tsresol: crate::format::TSRESOL_NS,
            buffer_size: 4 << 20,
            buffers: 4,
            direct_io: true,
            flush_interval: Duration::from_millis(500),
        }
    }
}

/// Writes packets to a pcap/pcapng file, stdout or any `Write`, through a buffer pool and a
/// writer thread. Single-threaded callers write through it directly; capture threads each take
/// a [`Producer`] ([`Self::producer`]).
pub struct CaptureWriter {
    shared: Arc<Shared>,
    /// The producer behind [`Self::write_packet`]; the first [`Self::producer`] call takes it.
    own: Option<Producer>,
    thread: Option<JoinHandle<Result<(), StoreError>>>,
    /// Compressor threads (file mode with compression).
    helpers: Vec<JoinHandle<()>>,
}

impl CaptureWriter {
    /// Creates `path` ("-" means stdout) and starts the writer thread.
    pub fn create(path: &Path, opts: WriterOptions) -> Result<Self, StoreError> {
        let opts = validate(opts)?;
        let output = Output::open(path, opts.direct_io, false)?;
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
        let (shared, filled_rx, empty_tx) = prepare(&opts, None, 0);
        let worker = WriterThread::new(output, path, opts.format, shared.counters.clone());
        let thread = std::thread::Builder::new()
            .name("ringcap-writer".into())
            .spawn(move || worker.run(filled_rx, empty_tx))
            .map_err(|e| StoreError::Config(format!("cannot start the writer thread: {e}")))?;
        Ok(Self::with(shared, thread, Vec::new()))
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
        if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&plan.frame_size) {
            return Err(StoreError::Config(format!(
                "frame size {} is outside 4 KiB..4 MiB",
                plan.frame_size
            )));
        }
        if plan.rotate_secs == Some(0) || plan.rotate_bytes == Some(0) || plan.max_files == Some(0)
        {
            return Err(StoreError::Config(
                "rotation size, interval and file count must be above 0".into(),
            ));
        }
        let compress = plan.compression != CompressMode::None;
        let (shared, filled_rx, empty_tx) = prepare(&opts, Some(&plan), sys::now_ns());
        let counters = shared.counters.clone();
        let mut sink = FileSink::new(plan.clone(), opts.format, opts.direct_io, counters.clone())?;
        sink.set_header(shared.header.clone());
        if let Some(make) = &plan.indexer {
            // The indexer holds up to IN_FLIGHT buffers: the pool may grow by that many more.
            shared.lock().unmapped += IN_FLIGHT;
            sink.attach_indexer(make(), empty_tx.clone())
                .map_err(|e| StoreError::Config(format!("cannot start the indexer thread: {e}")))?;
        }
        let mut helpers = Vec::new();
        let rx = if compress {
            counters.compressing.store(true, Relaxed);
            let (tx, rx) = mpsc::channel::<OutBuf>();
            let input = Arc::new(Mutex::new(filled_rx));
            for i in 0..plan.compressors.max(1) {
                let (input, output, counters) = (input.clone(), tx.clone(), counters.clone());
                let mode = plan.compression;
                let framing = (opts.format, plan.frame_size);
                let h = std::thread::Builder::new()
                    .name(format!("ringcap-zip{i}"))
                    .spawn(move || run_compressor(input, output, mode, framing, counters))
                    .map_err(|e| StoreError::Config(format!("cannot start a compressor: {e}")))?;
                helpers.push(h);
            }
            rx
        } else {
            filled_rx
        };
        let thread = std::thread::Builder::new()
            .name("ringcap-files".into())
            .spawn(move || sink.run(rx, empty_tx, compress))
            .map_err(|e| StoreError::Config(format!("cannot start the writer thread: {e}")))?;
        Ok(Self::with(shared, thread, helpers))
    }

    fn with(
        shared: Arc<Shared>,
        thread: JoinHandle<Result<(), StoreError>>,
        helpers: Vec<JoinHandle<()>>,
    ) -> Self {
        CaptureWriter {
            own: Some(Producer::new(shared.clone())),
            shared,
            thread: Some(thread),
            helpers,
        }
    }

    /// A producer for one capture thread. Create every thread's producer before any of them
    /// writes a packet: with more than one, buffers are made self-contained from the start. The
    /// first call hands out the writer's own producer, the one [`Self::write_packet`] uses.
    pub fn producer(&mut self) -> Producer {
        self.own
            .take()
            .unwrap_or_else(|| Producer::new(self.shared.clone()))
    }

    /// The writer's own producer (made again if [`Self::producer`] took it).
    fn own(&mut self) -> &mut Producer {
        let shared = &self.shared;
        self.own
            .get_or_insert_with(|| Producer::new(shared.clone()))
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
        self.own().write_packet(ts_ns, wire_len, data, vlan)
    }

    /// See [`Producer::wait_for_buffers`]: for writers that may wait, never a capture.
    pub fn wait_for_buffers(&mut self) {
        self.own().wait_for_buffers()
    }

    /// Starts a new file now. Returns false when not in file mode or no buffer is free (then
    /// call again later). Threads use [`Self::rotation_request`] instead.
    pub fn rotate_now(&mut self) -> bool {
        self.own().rotate_now()
    }

    /// Setting the returned flag (e.g. from a SIGHUP handler) makes the writer start a new file
    /// soon (file mode): the next [`Producer::tick`] that finds a free buffer does it.
    pub fn rotation_request(&self) -> Arc<AtomicBool> {
        self.shared.rotation.clone()
    }

    /// `-G` without traffic: starts the next file once the wall clock passes the interval end.
    /// Call it about as often as [`Self::maybe_flush`].
    pub fn maybe_rotate(&mut self, wall_ns: u64) -> bool {
        self.own().maybe_rotate(wall_ns)
    }

    /// Writes a partly filled buffer once it is older than the flush interval, so a pipe reader
    /// (or `tail -f`) sees packets within about a second. Call it often (every ring block or poll
    /// timeout). Never done with O_DIRECT, which can only write whole buffers. Returns whether it wrote.
    pub fn maybe_flush(&mut self, now: Instant) -> bool {
        self.own().maybe_flush(now)
    }

    /// Current counters.
    pub fn stats(&self) -> WriterStats {
        self.shared.counters.snapshot()
    }

    /// The live counters, for a stats thread; they stay valid after `finish`.
    pub fn counters(&self) -> Arc<WriterCounters> {
        self.shared.counters.clone()
    }

    /// Writes what is buffered (and, for pcapng, an Interface Statistics Block from `final_stats`,
    /// start/end times and delivered count defaulting to what was written), syncs and closes.
    /// Call it after every [`Producer`] has finished.
    /// On a write failure the error says what happened; counters stay readable via [`Self::counters`].
    pub fn finish(self, final_stats: Option<IfStats>) -> Result<WriterStats, StoreError> {
        self.finish_interfaces(final_stats.into_iter().collect())
    }

    /// [`Self::finish`] with one Interface Statistics Block per entry (each names its interface id);
    /// none: one block for interface 0 with the defaults.
    pub fn finish_interfaces(
        mut self,
        final_stats: Vec<IfStats>,
    ) -> Result<WriterStats, StoreError> {
        self.close(final_stats)?;
        Ok(self.shared.counters.snapshot())
    }

    fn close(&mut self, mut final_stats: Vec<IfStats>) -> Result<(), StoreError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let mut last = self
            .own
            .take()
            .unwrap_or_else(|| Producer::new(self.shared.clone()));
        if !last.is_dead() && self.shared.enc.format == Format::PcapNg {
            let (first_ts, last_ts) = self.shared.lock().times_with(&last);
            if final_stats.is_empty() {
                final_stats.push(IfStats::default());
            }
            let mut blocks = Vec::new();
            for mut s in final_stats {
                s.start_ns = s.start_ns.or(Some(first_ts));
                s.end_ns = s.end_ns.or(Some(last_ts));
                s.usr_deliv = s.usr_deliv.or(Some(self.shared.counters.accepted()));
                blocks.extend(self.shared.enc.stats_block(&s, s.end_ns.unwrap_or(0)));
            }
            last.append_blocking(&blocks);
        }
        last.close_series();
        // Compressors and the writer thread end when the channel closes.
        self.shared.lock().filled_tx = None;
        for h in self.helpers.drain(..) {
            let _ = h.join();
        }
        // Buffers come back to the pool and are freed with it.
        thread.join().unwrap_or_else(|_| {
            Err(StoreError::Config(
                "the writer thread panicked; the file may be incomplete".into(),
            ))
        })
    }
}

impl Drop for CaptureWriter {
    /// A writer dropped without `finish` (e.g. on panic) still writes what it holds.
    fn drop(&mut self) {
        let _ = self.close(Vec::new());
    }
}

/// The shared state, the pool and the channels; `plan` is file mode's, `start_ns` when its
/// first file begins.
fn prepare(
    opts: &WriterOptions,
    plan: Option<&FilePlan>,
    start_ns: u64,
) -> (Arc<Shared>, Receiver<OutBuf>, Sender<OutBuf>) {
    let enc = Encoder {
        format: opts.format,
        snaplen: opts.snaplen,
        tsresol: opts.tsresol,
        interface: 0,
    };
    let counters = Arc::new(WriterCounters::default());
    counters.buffers_total.store(opts.buffers as u64, Relaxed);
    let (filled_tx, filled_rx) = mpsc::channel::<OutBuf>();
    let (empty_tx, empty_rx) = mpsc::channel::<OutBuf>();
    // Two buffers now (one filling, one being written); the rest only when a producer finds the
    // pool empty, so a capture that keeps up never maps (and faults in) memory it does not use.
    let eager = opts.buffers.min(EAGER_BUFFERS);
    for _ in 0..eager {
        empty_tx
            .send(OutBuf::new(opts.buffer_size))
            .expect("receiver alive");
    }
    let interval_ns = plan
        .and_then(|p| p.rotate_secs)
        .map(|s| s.saturating_mul(1_000_000_000));
    let mut hand = Hand {
        filled_tx: Some(filled_tx),
        empty_rx,
        unmapped: opts.buffers - eager,
        buffer_size: opts.buffer_size,
        producers: 0,
        next_seq: 0,
        stream_end: 0,
        file: 0,
        // The first buffer handed on begins the (first) file.
        next_file: Some(start_ns),
        // The first file takes every drop from the capture's start (the meter counts from 0).
        next_mark: crate::coverage::Mark {
            wall_ns: start_ns,
            ..Default::default()
        },
        file_bytes: 0,
        file_packets: 0,
        rotate_at_ns: u64::MAX,
        first_ts: None,
        last_ts: 0,
    };
    hand.schedule_rotation(start_ns, interval_ns);
    let shared = Shared {
        hand: Mutex::new(hand),
        counters,
        rotation: Arc::new(AtomicBool::new(false)),
        enc,
        header: enc.file_header(opts.linktype, &opts.if_names, &opts.if_description),
        flush_interval: opts.flush_interval,
        compress: plan.is_some_and(|p| p.compression != CompressMode::None),
        files: plan.is_some(),
        max_file_bytes: plan.and_then(|p| p.rotate_bytes),
        interval_ns,
        meter: plan.and_then(|p| p.coverage.clone()),
    };
    (Arc::new(shared), filled_rx, empty_tx)
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
