//! A generator run: options, the sending threads, the report.
//!
//! Each thread has its own socket (opened on the calling thread, so in the caller's network namespace), its
//! own flow (source ports shifted per thread), its own random streams derived from the seed and the thread
//! index, an equal share of the count and of the rate, and optionally its own CPU.
//!
//! **Batching and pacing.** At top speed every call carries `batch` frames. Paced runs send each frame on
//! its deadline while the sender is ahead of the schedule (one frame per call: the smoothest departures);
//! when it falls behind, which happens near its maximum rate, every frame already due goes in the next call,
//! so batches grow exactly as much as needed to hold the rate. The price of that is micro-bursts of
//! back-to-back frames, visible in the inter-departure CV of the report; the mean rate stays exact because
//! deadlines are absolute.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::dist::{seeded_rng, SizeModel, SizeSampler};
use crate::frames::{FrameBuilder, FrameOptions, FrameShared};
use crate::pace::{self, Burst, Pacer, Rate, RateBasis};
use crate::report::{Departures, GenReport, Progress, RunSpec, ThreadReport};
use crate::tx::{self, lookup_interface, Backend, MmsgTx, RingTx, SendErrors, Tx};
use sys::Interface;

/// Why a run could not start or had to end.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The options do not work (the message says what to change).
    #[error("{0}")]
    Options(String),
    /// A system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and a hint.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The capture file to replay could not be read.
    #[error("replay: {0}")]
    Replay(#[from] store::StoreError),
}

/// A source of IP packet lengths for one thread.
pub trait SizeSource: Send {
    /// The next IP packet length.
    fn next_size(&mut self) -> u16;
}

/// A size model: makes one [`SizeSource`] per thread from the seed and the thread's stream.
pub trait Sizes: Sync {
    /// The per-thread sampler.
    type Sampler: SizeSource;
    /// A sampler drawing from ChaCha8 seeded with `seed` on stream `stream`.
    fn sampler(&self, seed: u64, stream: u64) -> Self::Sampler;
    /// A name for the report.
    fn describe(&self) -> String;
}

impl SizeSource for SizeSampler {
    #[inline]
    fn next_size(&mut self) -> u16 {
        SizeSampler::next_size(self)
    }
}

impl Sizes for SizeModel {
    type Sampler = SizeSampler;
    fn sampler(&self, seed: u64, stream: u64) -> SizeSampler {
        self.sampler_stream(seed, stream)
    }
    fn describe(&self) -> String {
        format!("{} ({:?})", self.name(), self.mode())
    }
}

/// Every packet the same IP length.
#[derive(Clone, Copy, Debug)]
pub struct FixedSize(pub u16);

impl SizeSource for FixedSize {
    #[inline]
    fn next_size(&mut self) -> u16 {
        self.0
    }
}

impl Sizes for FixedSize {
    type Sampler = FixedSize;
    fn sampler(&self, _seed: u64, _stream: u64) -> FixedSize {
        *self
    }
    fn describe(&self) -> String {
        format!("fixed:{}", self.0)
    }
}

/// Purposes of the random streams of one thread; stream = thread × 8 + purpose.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
pub enum Stream {
    /// Packet sizes.
    Sizes = 0,
    /// Random addresses and ports.
    Fields = 1,
    /// Where the thread starts in the random payload pool.
    Payload = 2,
}

/// The stream that fills the shared random payload pool.
const POOL_STREAM: u64 = u64::MAX;

/// The ChaCha stream number of `purpose` for thread `thread`. Every stream is ChaCha8 seeded with
/// `seed_from_u64(seed)` ([`seeded_rng`]): portable and independent per stream, so the same seed gives the
/// same sizes, addresses, ports and payloads in the same order on every machine, per thread.
pub fn stream_id(thread: usize, purpose: Stream) -> u64 {
    thread as u64 * 8 + purpose as u64
}

fn thread_rng(seed: u64, thread: usize, purpose: Stream) -> ChaCha8Rng {
    seeded_rng(seed, stream_id(thread, purpose))
}

/// Options of a generator run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GenOptions {
    /// Interface to send on (in the calling thread's network namespace).
    pub interface: String,
    /// Frames to send in total (split over threads); `None`: until `duration` or a stop request.
    pub count: Option<u64>,
    /// Seconds to run (including burst off periods); `None`: until `count` or a stop request.
    pub duration_s: Option<f64>,
    /// Sender.
    pub backend: Backend,
    /// Sending threads, each with its own socket and flow (source ports shifted per thread).
    pub threads: usize,
    /// Pin thread i to `cpus[i % len]`; empty: no pinning.
    pub cpus: Vec<usize>,
    /// Frames per send call (sendmmsg) or per kick (TX_RING); paced runs send fewer when the rate allows.
    pub batch: usize,
    /// TX_RING frames per thread.
    pub ring_frames: usize,
    /// Socket send buffer (bytes); `None`: the system default.
    pub sndbuf: Option<usize>,
    /// Packets per second (total).
    pub pps: Option<f64>,
    /// Megabits per second (total), counted as `rate_basis` says.
    pub mbps: Option<f64>,
    /// Nanoseconds from one departure to the next (pktgen's `delay`), total.
    pub gap_ns: Option<f64>,
    /// What `mbps` counts: line rate (default) or frame bytes.
    pub rate_basis: RateBasis,
    /// On/off schedule.
    pub burst: Option<Burst>,
    /// Seed of every random choice.
    pub seed: u64,
    /// Frame shape.
    pub frame: FrameOptions,
    /// What the size model is (recorded in the report; the caller builds the sampler).
    pub sizes: String,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            interface: String::new(),
            count: None,
            duration_s: None,
            backend: Backend::default(),
            threads: 1,
            cpus: Vec::new(),
            batch: DEFAULT_BATCH,
            ring_frames: DEFAULT_RING_FRAMES,
            sndbuf: None,
            pps: None,
            mbps: None,
            gap_ns: None,
            rate_basis: RateBasis::default(),
            burst: None,
            seed: 1,
            frame: FrameOptions::default(),
            sizes: String::new(),
        }
    }
}

/// Default frames per send call.
pub const DEFAULT_BATCH: usize = 64;
/// Default TX_RING frames.
pub const DEFAULT_RING_FRAMES: usize = 1024;

fn positive(name: &str, v: Option<f64>) -> Result<(), GenError> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => Err(GenError::Options(format!(
            "{name} must be a positive number, not {x}"
        ))),
        _ => Ok(()),
    }
}

impl GenOptions {
    /// Checks the options; the error says what to change.
    pub fn validate(&self) -> Result<(), GenError> {
        let bad = |m: &str| Err(GenError::Options(m.to_string()));
        if self.interface.is_empty() {
            return bad("no interface given: name the interface to send on");
        }
        if self.threads == 0 || self.threads > 256 {
            return bad("threads must be 1-256");
        }
        if self.batch == 0 || self.batch > 1024 {
            return bad("batch must be 1-1024 frames");
        }
        if self.backend == Backend::TxRing && self.ring_frames < self.batch {
            return bad("ring_frames must be at least batch");
        }
        let rates = [
            self.pps.is_some(),
            self.mbps.is_some(),
            self.gap_ns.is_some(),
        ];
        if rates.iter().filter(|&&r| r).count() > 1 {
            return bad("give at most one of pps, mbps and gap_ns");
        }
        positive("pps", self.pps)?;
        positive("mbps", self.mbps)?;
        positive("gap_ns", self.gap_ns)?;
        positive("duration", self.duration_s)?;
        if let Some(b) = self.burst {
            if !(b.on_s > 0.0 && b.off_s >= 0.0 && b.on_s.is_finite() && b.off_s.is_finite()) {
                return bad("burst needs on > 0 and off >= 0 seconds");
            }
        }
        self.frame.validate()
    }

    /// The rate of one thread of `threads`, and the phase of thread `t` so threads interleave.
    fn thread_rate(&self, t: usize) -> (Rate, f64) {
        let n = self.threads as f64;
        let interval = self.pps.map(|p| 1e9 / p).or(self.gap_ns);
        if let Some(ns) = interval {
            return (Rate::Interval { ns: ns * n }, ns * t as f64);
        }
        if let Some(m) = self.mbps {
            return (
                Rate::Bits {
                    ns_per_byte: 8e3 / m * n,
                    basis: self.rate_basis,
                },
                0.0,
            );
        }
        (Rate::Top, 0.0)
    }

    /// Frames thread `t` sends (the count split as evenly as possible).
    fn thread_count(&self, t: usize) -> Option<u64> {
        let n = self.threads as u64;
        self.count.map(|c| c / n + u64::from((t as u64) < c % n))
    }
}

/// Caller hooks: a stop flag (e.g. set by Ctrl-C) and a progress callback.
pub struct Control<'a> {
    /// Raised by the caller to end the run early.
    pub stop: Option<&'a AtomicBool>,
    /// Called on the calling thread about every `progress_every`.
    pub progress: Option<&'a (dyn Fn(&Progress) + Sync)>,
    /// Interval of progress calls.
    pub progress_every: Duration,
}

impl Default for Control<'_> {
    fn default() -> Self {
        Control {
            stop: None,
            progress: None,
            progress_every: Duration::from_millis(200),
        }
    }
}

/// Per-thread counters the progress loop reads (written once per batch).
#[derive(Default)]
pub(crate) struct Counters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
}

/// A socket opened on the calling thread (so it lives in the caller's network namespace).
pub(crate) enum Opened {
    Mmsg(OwnedFd),
    Ring(RingTx),
}

/// Opens the socket of one thread.
pub(crate) fn open_tx(
    backend: Backend,
    ifc: &Interface,
    sndbuf: Option<usize>,
    ring_frames: usize,
    batch: usize,
    max_frame: usize,
) -> Result<Opened, GenError> {
    let fd = tx::open_socket(sndbuf)?;
    Ok(match backend {
        Backend::Sendmmsg => {
            tx::bind_socket(&fd, ifc)?;
            Opened::Mmsg(fd)
        }
        Backend::TxRing => Opened::Ring(RingTx::new(fd, ifc, ring_frames, batch, max_frame)?),
    })
}

/// Pins the calling thread to `cpu` and makes its sleeps precise (1 ns timer slack instead of 50 µs).
pub(crate) fn setup_thread(cpu: Option<usize>) -> Result<(), GenError> {
    // SAFETY: prctl with an integer argument; failure only costs sleep precision.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    if let Some(cpu) = cpu {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(GenError::Options(format!("no CPU {cpu}")));
        }
        sys::pin_thread(cpu).map_err(|source| GenError::Io {
            context: format!("cannot pin to CPU {cpu}: is it online?"),
            source,
        })?;
    }
    Ok(())
}

/// Runs `work` on one thread per socket with progress and stop handling on the calling thread; returns the
/// per-thread results in order, or the first error.
pub(crate) fn run_threads<W>(
    sockets: Vec<Opened>,
    ctl: &Control,
    total_packets: Option<u64>,
    total_s: Option<f64>,
    work: W,
) -> Result<(Vec<ThreadReport>, bool), GenError>
where
    W: Fn(
            usize,
            Opened,
            &AtomicBool,
            &Counters,
            &Barrier,
            &OnceLock<u64>,
        ) -> Result<ThreadReport, GenError>
        + Sync,
{
    let n = sockets.len();
    let abort = AtomicBool::new(false);
    let counters: Vec<Counters> = (0..n).map(|_| Counters::default()).collect();
    let barrier = Barrier::new(n);
    let start = OnceLock::new();
    let t0 = sys::monotonic_ns();
    let mut user_stopped = false;
    let results: Vec<Result<ThreadReport, GenError>> = std::thread::scope(|s| {
        let handles: Vec<_> = sockets
            .into_iter()
            .enumerate()
            .map(|(t, sock)| {
                let (abort, c, barrier, start, work) =
                    (&abort, &counters[t], &barrier, &start, &work);
                s.spawn(move || {
                    let r = work(t, sock, abort, c, barrier, start);
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let tick = ctl
            .progress_every
            .clamp(Duration::from_millis(10), Duration::from_millis(50));
        let mut last_progress = sys::monotonic_ns();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(tick);
            if ctl.stop.is_some_and(|f| f.load(Ordering::Relaxed)) {
                user_stopped = true;
                abort.store(true, Ordering::Relaxed);
            }
            if let Some(p) = ctl.progress {
                let now = sys::monotonic_ns();
                if now - last_progress >= ctl.progress_every.as_nanos() as u64 {
                    last_progress = now;
                    p(&snapshot(&counters, t0, total_packets, total_s));
                }
            }
        }
        let r = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        if let Some(p) = ctl.progress {
            p(&snapshot(&counters, t0, total_packets, total_s));
        }
        r
    });
    let mut reports = Vec::with_capacity(n);
    for r in results {
        reports.push(r?);
    }
    Ok((reports, user_stopped))
}

fn snapshot(
    counters: &[Counters],
    t0: u64,
    total_packets: Option<u64>,
    total_s: Option<f64>,
) -> Progress {
    Progress {
        packets: counters
            .iter()
            .map(|c| c.packets.load(Ordering::Relaxed))
            .sum(),
        bytes: counters
            .iter()
            .map(|c| c.bytes.load(Ordering::Relaxed))
            .sum(),
        elapsed_s: (sys::monotonic_ns() - t0) as f64 / 1e9,
        total_packets,
        total_s,
    }
}

/// Waits for all threads to be ready, then agrees on one start time (a moment from now).
pub(crate) fn common_start(barrier: &Barrier, start: &OnceLock<u64>) -> u64 {
    barrier.wait();
    *start.get_or_init(|| sys::monotonic_ns() + 200_000)
}

/// Generates traffic as `opts` say, with packet sizes drawn from `sizes` (one sampler per thread on the
/// thread's size stream). Sockets are opened on the calling thread, so call it inside the network namespace
/// of the interface.
pub fn run<Z: Sizes>(opts: &GenOptions, sizes: &Z, ctl: &Control) -> Result<GenReport, GenError> {
    opts.validate()?;
    let ifc = lookup_interface(&opts.interface)?;
    let max_ip_len = ifc.mtu.min(u16::MAX as u32) as u16;
    let shared = FrameShared::new(&opts.frame, &mut seeded_rng(opts.seed, POOL_STREAM))?;
    let max_frame = opts.frame.l2_len() + max_ip_len as usize;
    let sockets = (0..opts.threads)
        .map(|_| {
            open_tx(
                opts.backend,
                &ifc,
                opts.sndbuf,
                opts.ring_frames,
                opts.batch,
                max_frame,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cpu_of = |t: usize| (!opts.cpus.is_empty()).then(|| opts.cpus[t % opts.cpus.len()]);

    let work = |t: usize,
                sock: Opened,
                abort: &AtomicBool,
                c: &Counters,
                barrier: &Barrier,
                start: &OnceLock<u64>| {
        let setup = || -> Result<_, GenError> {
            setup_thread(cpu_of(t))?;
            let builder = FrameBuilder::new(
                &opts.frame,
                &shared,
                t,
                max_ip_len,
                thread_rng(opts.seed, t, Stream::Fields),
                thread_rng(opts.seed, t, Stream::Payload),
            )?;
            let sampler = sizes.sampler(opts.seed, stream_id(t, Stream::Sizes));
            Ok((builder, sampler))
        };
        // Every thread reaches the barrier, even after a failed setup, so none waits forever.
        let prepared = setup();
        let (mut builder, mut sampler) = match prepared {
            Ok(p) => p,
            Err(e) => {
                abort.store(true, Ordering::Relaxed);
                common_start(barrier, start);
                return Err(e);
            }
        };
        let (rate, phase) = opts.thread_rate(t);
        let job = Job {
            count: opts.thread_count(t),
            duration_s: opts.duration_s,
            rate,
            phase,
            burst: opts.burst,
        };
        let mut report = match sock {
            Opened::Mmsg(fd) => {
                let mut tx = MmsgTx::new(fd, opts.batch, max_frame);
                generate(
                    &mut tx,
                    &mut builder,
                    &mut sampler,
                    &job,
                    abort,
                    c,
                    barrier,
                    start,
                )
            }
            Opened::Ring(mut tx) => generate(
                &mut tx,
                &mut builder,
                &mut sampler,
                &job,
                abort,
                c,
                barrier,
                start,
            ),
        }?;
        report.thread = t;
        report.cpu = cpu_of(t);
        Ok(report)
    };
    let (threads, stopped) = run_threads(sockets, ctl, opts.count, opts.duration_s, work)?;
    let mut recorded = opts.clone();
    if recorded.sizes.is_empty() {
        recorded.sizes = sizes.describe();
    }
    Ok(GenReport::from_threads(
        opts.seed,
        RunSpec::Generate(Box::new(recorded)),
        opts.interface.clone(),
        opts.rate_basis,
        threads,
        stopped,
    ))
}

/// What one thread has to do.
struct Job {
    count: Option<u64>,
    duration_s: Option<f64>,
    rate: Rate,
    phase: f64,
    burst: Option<Burst>,
}

/// The sending loop of one thread.
#[allow(clippy::too_many_arguments)]
fn generate<T: Tx, S: SizeSource>(
    tx: &mut T,
    builder: &mut FrameBuilder,
    sizes: &mut S,
    job: &Job,
    stop: &AtomicBool,
    counters: &Counters,
    barrier: &Barrier,
    start: &OnceLock<u64>,
) -> Result<ThreadReport, GenError> {
    tx.prepare(&mut |slot| builder.prepare_slot(slot));
    let cap = tx.capacity();
    let mut lens = vec![0u16; cap]; // IP lengths of the batch being built (allocated once)
    let mut errors = SendErrors::default();
    let mut dep = Departures::default();
    let (mut packets, mut bytes, mut l1) = (0u64, 0u64, 0u64);

    let t0 = common_start(barrier, start);
    let mut pacer = Pacer::new(t0, job.rate, job.phase, job.burst);
    let end = job.duration_s.map(|d| t0 + (d * 1e9) as u64);
    let past_end = |t: u64| end.is_some_and(|e| t >= e);
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let remaining = job.count.map_or(u64::MAX, |c| c - packets);
        if remaining == 0 {
            break;
        }
        // When may the next batch go?
        let now = match pacer.next_deadline() {
            Some(d) => {
                if past_end(d) {
                    break;
                }
                if !pace::wait_until(d, stop) {
                    break;
                }
                sys::monotonic_ns()
            }
            None => {
                let now = sys::monotonic_ns();
                if past_end(now) {
                    break;
                }
                if let Some(on_again) = pacer.off_until(now) {
                    if past_end(on_again) {
                        break;
                    }
                    pace::wait_until(on_again, stop);
                    continue;
                }
                now
            }
        };
        // Every frame that is due goes in this batch (all of them at top speed): a late sender catches up
        // with larger batches, an early one sends single frames on their deadlines.
        let max_k = (cap as u64).min(remaining) as usize;
        let mut k = 0;
        while k < max_k {
            let ip_len = builder.clamp(sizes.next_size());
            lens[k] = ip_len;
            pacer.advance(builder.frame_len(ip_len));
            k += 1;
            match pacer.next_deadline() {
                Some(d) if d > now || past_end(d) => break,
                _ => {}
            }
        }
        let s = sys::monotonic_ns();
        for &ip_len in &lens[..k] {
            let Some(slot) = tx.slot(&mut errors, stop)? else {
                break;
            };
            let len = builder.write(ip_len, slot);
            tx.commit(len);
        }
        let n = tx.flush(&mut errors, stop)?;
        let e = sys::monotonic_ns();
        dep.batch(s, e, n);
        for &ip_len in &lens[..n] {
            let f = builder.frame_len(ip_len);
            bytes += f as u64;
            l1 += RateBasis::L1.bytes(f);
        }
        packets += n as u64;
        counters.packets.store(packets, Ordering::Relaxed);
        counters.bytes.store(bytes, Ordering::Relaxed);
        if n < k {
            break; // stopped while waiting out back-pressure
        }
    }
    tx.finish(&mut errors)?;
    Ok(ThreadReport {
        packets,
        bytes,
        l1_bytes: l1,
        duration_s: dep.first_ns.map_or(0.0, |f| (dep.last_ns - f) as f64 / 1e9),
        gap: (&dep.gaps).into(),
        errors,
        clamped_small: builder.clamped_small,
        clamped_large: builder.clamped_large,
        first_ns: dep.first_ns,
        last_ns: dep.last_ns,
        welford: dep.gaps,
        ..Default::default()
    })
}
