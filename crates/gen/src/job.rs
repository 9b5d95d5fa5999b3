//! What one sending thread works from: its job (count, duration, rate, burst schedule), where its
//! packet sizes come from, the counters it shares with the progress loop, and the common start.

use std::sync::atomic::AtomicU64;
use std::sync::{Barrier, OnceLock};

use crate::pace::{Burst, Pacer, Rate};

/// A source of IP packet lengths for one thread.
pub trait SizeSource: Send {
    /// The next IP packet length.
    fn next_size(&mut self) -> u16;
    /// With burst phases: the phase whose sizes come next (sources without phases ignore it).
    #[inline]
    fn set_phase(&mut self, _phase: usize) {}
}

/// What one thread has to do.
pub(crate) struct Job {
    pub(crate) count: Option<u64>,
    pub(crate) duration_s: Option<f64>,
    pub(crate) rate: Rate,
    pub(crate) phase: f64,
    pub(crate) burst: Option<Burst>,
    /// With burst phases: this thread's (rate, offset) per phase.
    pub(crate) phase_rates: Vec<(Rate, f64)>,
}

impl Job {
    /// The thread's pacer, starting at `t0`.
    pub(crate) fn pacer(&self, t0: u64) -> Pacer {
        match &self.burst {
            Some(b) if !self.phase_rates.is_empty() => {
                Pacer::phased(t0, b, self.phase_rates.clone())
            }
            b => Pacer::new(t0, self.rate, self.phase, b.as_ref()),
        }
    }

    pub(crate) fn phased(&self) -> bool {
        !self.phase_rates.is_empty()
    }
}

/// Per-thread counters the progress loop reads (written once per batch).
#[derive(Default)]
pub(crate) struct Counters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
}

/// Waits for all threads to be ready, then agrees on one start time (a moment from now).
pub(crate) fn common_start(barrier: &Barrier, start: &OnceLock<u64>) -> u64 {
    barrier.wait();
    *start.get_or_init(|| sys::monotonic_ns() + 200_000)
}
