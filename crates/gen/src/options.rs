//! What a run is asked to do: the options of a generator run and of a replay, and their checks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::GenError;
use crate::frames::FrameOptions;
use crate::pace::{Burst, Rate, RateBasis};
use crate::phases::PhaseRate;
use crate::tx::Backend;

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
    /// `xdp-live`: copies of one frame per BPF_PROG_TEST_RUN call at top speed (paced runs send fewer).
    pub live_repeat: u32,
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
            live_repeat: DEFAULT_LIVE_REPEAT,
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
/// Default `xdp-live` frames per call: large enough that the kernel's ~20 ms per call (swapping the program
/// into its XDP dispatcher) is amortised, small enough that a stop request is seen within a fraction of a
/// second.
pub const DEFAULT_LIVE_REPEAT: u32 = 1 << 20;
/// Why replay has no `xdp-live`.
pub(crate) const LIVE_REPLAY: &str =
    "--backend xdp-live repeats one frame per kernel call, and a replay sends every frame once: use \
     --backend xdp or sendmmsg";

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
        if self.backend == Backend::XdpLive && self.batch > xdp::LIVE_MAX_BATCH as usize {
            return bad("--backend xdp-live takes batch 1-256 (the kernel's largest batch)");
        }
        if self.live_repeat == 0 {
            return bad("live_repeat must be at least 1");
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
        if let Some(b) = &self.burst {
            if !(b.on_s > 0.0 && b.off_s >= 0.0 && b.on_s.is_finite() && b.off_s.is_finite()) {
                return bad("burst needs on > 0 and off >= 0 seconds");
            }
            if !b.phases.is_empty() && self.backend == Backend::XdpLive {
                return bad(
                    "burst phases change sizes and rates per on-period, and --backend xdp-live sends one \
                     frame per kernel call: use --backend sendmmsg, tx-ring or xdp",
                );
            }
        }
        self.frame.validate()
    }

    /// The rate of one thread of `threads`, and the phase of thread `t` so threads interleave.
    pub(crate) fn thread_rate(&self, t: usize) -> (Rate, f64) {
        self.split_rate(self.pps, self.mbps, self.gap_ns, t)
    }

    /// Per burst phase (with phases): thread `t`'s rate and offset; a phase without a rate has the run's.
    pub(crate) fn thread_phase_rates(&self, t: usize) -> Vec<(Rate, f64)> {
        let phases = self.burst.as_ref().map_or(&[][..], |b| &b.phases[..]);
        phases
            .iter()
            .map(|p| match p.rate {
                None => self.thread_rate(t),
                Some(PhaseRate::Max) => (Rate::Top, 0.0),
                Some(PhaseRate::Pps(v)) => self.split_rate(Some(v), None, None, t),
                Some(PhaseRate::Mbps(v)) => self.split_rate(None, Some(v), None, t),
                Some(PhaseRate::Gap(v)) => self.split_rate(None, None, Some(v), t),
            })
            .collect()
    }

    /// A total rate (at most one of pps, mbps and gap) split over the threads: thread `t`'s share and
    /// offset.
    fn split_rate(
        &self,
        pps: Option<f64>,
        mbps: Option<f64>,
        gap_ns: Option<f64>,
        t: usize,
    ) -> (Rate, f64) {
        let n = self.threads as f64;
        let interval = pps.map(|p| 1e9 / p).or(gap_ns);
        if let Some(ns) = interval {
            return (Rate::Interval { ns: ns * n }, ns * t as f64);
        }
        if let Some(m) = mbps {
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
    pub(crate) fn thread_count(&self, t: usize) -> Option<u64> {
        let n = self.threads as u64;
        self.count.map(|c| c / n + u64::from((t as u64) < c % n))
    }
}

/// Options of a replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplayOptions {
    /// Interface to send on.
    pub interface: String,
    /// Capture file.
    pub file: PathBuf,
    /// Timing factor: 2.0 replays twice as fast as recorded.
    pub speed: f64,
    /// Ignore the timestamps: send as fast as possible.
    pub topspeed: bool,
    /// How many times to play the file; 0: until a stop request.
    pub loops: u64,
    /// Sender.
    pub backend: Backend,
    /// Frames per send call at most.
    pub batch: usize,
    /// TX_RING frames.
    pub ring_frames: usize,
    /// Socket send buffer (bytes).
    pub sndbuf: Option<usize>,
    /// CPU to pin the sending thread to.
    pub cpu: Option<usize>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            interface: String::new(),
            file: PathBuf::new(),
            speed: 1.0,
            topspeed: false,
            loops: 1,
            backend: Backend::default(),
            batch: DEFAULT_BATCH,
            ring_frames: DEFAULT_RING_FRAMES,
            sndbuf: None,
            cpu: None,
        }
    }
}

impl ReplayOptions {
    pub(crate) fn validate(&self) -> Result<(), GenError> {
        let bad = |m: &str| Err(GenError::Options(m.to_string()));
        if self.interface.is_empty() {
            return bad("no interface given: name the interface to send on");
        }
        if !(self.speed.is_finite() && self.speed > 0.0) {
            return bad("speed must be a positive number (1 = as recorded)");
        }
        if self.batch == 0 || self.batch > 1024 {
            return bad("batch must be 1-1024 frames");
        }
        if self.backend == Backend::TxRing && self.ring_frames < self.batch {
            return bad("ring_frames must be at least batch");
        }
        if self.backend == Backend::XdpLive {
            return bad(LIVE_REPLAY);
        }
        Ok(())
    }
}
