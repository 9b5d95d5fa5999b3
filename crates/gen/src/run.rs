//! A generator run: size sources, the per-thread random streams and the sending loop.
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, OnceLock};

use rand_chacha::ChaCha8Rng;

use crate::error::GenError;
use crate::frames::{FrameBuilder, FrameShared};
use crate::job::{common_start, Counters, Job, SizeSource};
use crate::live_tx::{generate_live, DropLedger};
use crate::options::GenOptions;
use crate::pace::{self, Departure, RateBasis};
use crate::phases::PhasedSizes;
use crate::report::{Departures, GenReport, RunSpec, ThreadReport};
use crate::sizes::{seeded_rng, Distribution, Mode, Params, SizeModel, SizeSampler};
use crate::threads::{open_tx, run_threads, setup_thread, Control, Opened, TxSizes};
use crate::tx::{lookup_interface, Backend, MmsgTx, SendErrors, Tx};

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

/// The ChaCha stream of burst phase `phase`'s sizes in thread `thread`: above every per-thread stream
/// (threads ≤ 256, so those are below 2^11), one block of 2^32 per phase.
pub fn phase_stream_id(thread: usize, phase: usize) -> u64 {
    ((phase as u64 + 1) << 32) + stream_id(thread, Stream::Sizes)
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

/// Generates traffic as `opts` say, with packet sizes drawn from `sizes` (one sampler per thread on the
/// thread's size stream). Sockets are opened on the calling thread, so call it inside the network namespace
/// of the interface.
pub fn run<Z: Sizes>(opts: &GenOptions, sizes: &Z, ctl: &Control) -> Result<GenReport, GenError> {
    opts.validate()?;
    let ifc = lookup_interface(&opts.interface)?;
    let max_ip_len = ifc.mtu.min(u16::MAX as u32) as u16;
    let shared = FrameShared::new(&opts.frame, &mut seeded_rng(opts.seed, POOL_STREAM))?;
    let max_frame = opts.frame.l2_len() + max_ip_len as usize;
    let tx_sizes = TxSizes {
        sndbuf: opts.sndbuf,
        ring_frames: opts.ring_frames,
        batch: opts.batch,
        max_frame,
        live_repeat: opts.live_repeat,
    };
    let sockets = (0..opts.threads)
        .map(|t| open_tx(t, opts.backend, &ifc, &tx_sizes))
        .collect::<Result<Vec<_>, _>>()?;
    let ledger = match opts.backend {
        Backend::XdpLive => Some(DropLedger::new(&ifc)?),
        _ => None,
    };
    let cpu_of = |t: usize| (!opts.cpus.is_empty()).then(|| opts.cpus[t % opts.cpus.len()]);
    // Burst phases' size models, built once and shared (exact sampling; an RFC 6985 genome or a mix is
    // replayed in order).
    let phase_models = opts
        .burst
        .iter()
        .flat_map(|b| &b.phases)
        .enumerate()
        .map(|(i, p)| {
            let bad = |e: String| GenError::Options(format!("burst phase {}: {e}", i + 1));
            let dist = Distribution::from_spec(&p.dist).map_err(|e| bad(e.to_string()))?;
            SizeModel::build(&dist, Mode::Exact, Params::default()).map_err(|e| bad(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;

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
            let phases = phase_models
                .iter()
                .enumerate()
                .map(|(p, m)| m.sampler_stream(opts.seed, phase_stream_id(t, p)))
                .collect();
            let sampler = PhasedSizes::new(
                sizes.sampler(opts.seed, stream_id(t, Stream::Sizes)),
                phases,
            );
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
            burst: opts.burst.clone(),
            phase_rates: opts.thread_phase_rates(t),
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
            Opened::Xdp(mut tx) => generate(
                &mut *tx,
                &mut builder,
                &mut sampler,
                &job,
                abort,
                c,
                barrier,
                start,
            ),
            Opened::Live(tx) => generate_live(
                &tx,
                ledger.as_ref().expect("a ledger for xdp-live"),
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
    let mut pacer = job.pacer(t0);
    let end = job.duration_s.map(|d| t0 + (d * 1e9) as u64);
    let past_end = |t: u64| end.is_some_and(|e| t >= e);
    let phased = job.phased();
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if phased {
            pacer.catch_up(sys::monotonic_ns());
        }
        let remaining = job.count.map_or(u64::MAX, |c| c - packets);
        if remaining == 0 {
            break;
        }
        // When may the next batch go?
        let now = match pace::next_departure(&pacer, end, stop) {
            Departure::Stop => break,
            Departure::Again => continue,
            Departure::Go { now, .. } => now,
        };
        sizes.set_phase(pacer.phase());
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
