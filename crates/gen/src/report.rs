//! What a run reports: counts, rates, inter-departure statistics, waited-out errors.

use serde::{Deserialize, Serialize};

use crate::options::{GenOptions, ReplayOptions};
use crate::pace::RateBasis;
use crate::tx::SendErrors;

/// Running mean and variance (Welford), mergeable (Chan et al.), with O(1) insertion of a run of equal values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Welford {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Welford {
    /// Adds one value.
    #[inline]
    pub fn add(&mut self, x: f64) {
        self.add_repeated(x, 1);
    }

    /// Adds `k` copies of `x` in O(1) (a batch's evenly spread departures).
    #[inline]
    pub fn add_repeated(&mut self, x: f64, k: u64) {
        if k > 0 {
            self.merge(&Welford {
                n: k,
                mean: x,
                m2: 0.0,
            });
        }
    }

    /// Combines two summaries as if all values had been added to one.
    pub fn merge(&mut self, o: &Welford) {
        if o.n == 0 {
            return;
        }
        let n = self.n + o.n;
        let d = o.mean - self.mean;
        self.mean += d * o.n as f64 / n as f64;
        self.m2 += o.m2 + d * d * self.n as f64 * o.n as f64 / n as f64;
        self.n = n;
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean (0 without values).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Population standard deviation.
    pub fn stddev(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            (self.m2 / self.n as f64).sqrt()
        }
    }
}

/// Inter-departure times.
///
/// Measured from the send calls' timestamps: a batch's frames are taken to leave evenly spread over its
/// call (from its start to its end), so a batch of k frames adds one gap from the previous departure and k−1
/// equal gaps. With several threads, gaps are within each thread's stream, merged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GapStats {
    /// Number of gaps.
    pub samples: u64,
    /// Mean gap (ns).
    pub mean_ns: f64,
    /// Standard deviation (ns).
    pub stddev_ns: f64,
    /// Coefficient of variation (stddev / mean).
    pub cv: f64,
}

impl From<&Welford> for GapStats {
    fn from(w: &Welford) -> Self {
        let mean = w.mean();
        let sd = w.stddev();
        GapStats {
            samples: w.count(),
            mean_ns: mean,
            stddev_ns: sd,
            cv: if mean > 0.0 { sd / mean } else { 0.0 },
        }
    }
}

/// Departure bookkeeping of one thread.
#[derive(Clone, Debug, Default)]
pub(crate) struct Departures {
    pub gaps: Welford,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
}

impl Departures {
    /// Records a send call from `start` to `end` (ns) that sent `k` frames.
    #[inline]
    pub fn batch(&mut self, start: u64, end: u64, k: usize) {
        if k == 0 {
            return;
        }
        let step = end.saturating_sub(start) as f64 / k as f64;
        match self.first_ns {
            None => self.first_ns = Some(start),
            Some(_) => self.gaps.add(start as f64 + step - self.last_ns as f64),
        }
        self.gaps.add_repeated(step, k as u64 - 1);
        self.last_ns = end;
    }
}

/// One sending thread's share.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    /// Thread index.
    pub thread: usize,
    /// CPU it was pinned to.
    pub cpu: Option<usize>,
    /// Frames sent.
    pub packets: u64,
    /// Frame bytes sent (without FCS).
    pub bytes: u64,
    /// Seconds from its first send call's start to its last one's end.
    pub duration_s: f64,
    /// Inter-departure times.
    pub gap: GapStats,
    /// Waited-out send errors.
    pub errors: SendErrors,
    /// Sizes raised to the minimum IP length (28 IPv4, 48 IPv6).
    pub clamped_small: u64,
    /// Sizes lowered to the MTU.
    pub clamped_large: u64,
    #[serde(skip)]
    pub(crate) first_ns: Option<u64>,
    #[serde(skip)]
    pub(crate) last_ns: u64,
    #[serde(skip)]
    pub(crate) welford: Welford,
    /// Bytes counted at line rate (frame padded to 60 + 24).
    pub l1_bytes: u64,
}

/// What the replay read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayStats {
    /// Packets read from the file (all loops).
    pub read: u64,
    /// Loops completed.
    pub loops_done: u64,
    /// Skipped: link type not Ethernet.
    pub skipped_linktype: u64,
    /// Skipped: shorter than an Ethernet header.
    pub skipped_short: u64,
    /// Skipped: longer than the interface MTU allows.
    pub skipped_oversize: u64,
    /// Sent although cut short by the capture's snap length (caplen < wire length).
    pub truncated: u64,
    /// Damaged regions the reader skipped (first loop).
    pub file_issues: u64,
}

/// What was run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum RunSpec {
    /// Generated traffic.
    Generate(Box<GenOptions>),
    /// A replayed capture file.
    Replay(Box<ReplayOptions>),
}

/// The result of a run (serializable for `--json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenReport {
    /// Seed of every random choice (sizes, addresses, ports, payloads).
    pub seed: u64,
    /// Options as given.
    pub spec: RunSpec,
    /// Interface sent on.
    pub interface: String,
    /// Frames that left (handed to the device and not dropped by it).
    pub packets: u64,
    /// Their frame bytes (as captured: no FCS).
    pub bytes: u64,
    /// Seconds from the first send call's start to the last one's end (all threads).
    pub duration_s: f64,
    /// packets / duration.
    pub pps: f64,
    /// Frame bits per second / 1e6.
    pub mbps: f64,
    /// Line-rate bits (frame padded to 60 + FCS 4 + preamble 8 + gap 12 bytes) per second / 1e6.
    pub mbps_l1: f64,
    /// Which of the two the pacing used.
    pub rate_basis: RateBasis,
    /// Inter-departure times.
    pub gap: GapStats,
    /// Waited-out send errors by kind.
    pub errors: SendErrors,
    /// Sizes raised to the minimum IP length.
    pub clamped_small: u64,
    /// Sizes lowered to the MTU.
    pub clamped_large: u64,
    /// True if a stop request ended the run early.
    pub stopped: bool,
    /// Per thread.
    pub threads: Vec<ThreadReport>,
    /// Replay only: what was read from the file.
    pub replay: Option<ReplayStats>,
}

impl GenReport {
    /// Sums thread reports.
    pub(crate) fn from_threads(
        seed: u64,
        spec: RunSpec,
        interface: String,
        rate_basis: RateBasis,
        threads: Vec<ThreadReport>,
        stopped: bool,
    ) -> GenReport {
        let mut errors = SendErrors::default();
        let mut w = Welford::default();
        let (mut packets, mut bytes, mut l1, mut cs, mut cl) = (0, 0, 0, 0, 0);
        let mut first: Option<u64> = None;
        let mut last = 0;
        for t in &threads {
            packets += t.packets;
            bytes += t.bytes;
            l1 += t.l1_bytes;
            cs += t.clamped_small;
            cl += t.clamped_large;
            errors.add(&t.errors);
            w.merge(&t.welford);
            if let Some(f) = t.first_ns {
                first = Some(first.map_or(f, |x| x.min(f)));
                last = last.max(t.last_ns);
            }
        }
        let duration_s = first.map_or(0.0, |f| last.saturating_sub(f) as f64 / 1e9);
        let per_s = |x: u64| {
            if duration_s > 0.0 {
                x as f64 / duration_s
            } else {
                0.0
            }
        };
        GenReport {
            seed,
            spec,
            interface,
            packets,
            bytes,
            duration_s,
            pps: per_s(packets),
            mbps: per_s(bytes) * 8.0 / 1e6,
            mbps_l1: per_s(l1) * 8.0 / 1e6,
            rate_basis,
            gap: GapStats::from(&w),
            errors,
            clamped_small: cs,
            clamped_large: cl,
            stopped,
            threads,
            replay: None,
        }
    }
}

/// A progress snapshot for the caller's progress bar.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Progress {
    /// Frames sent so far.
    pub packets: u64,
    /// Frame bytes sent so far.
    pub bytes: u64,
    /// Seconds since the run started.
    pub elapsed_s: f64,
    /// Frames the run will send, if it is bounded by a count.
    pub total_packets: Option<u64>,
    /// Seconds the run will last, if it is bounded by a duration.
    pub total_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welford_merges_like_one_pass() {
        let xs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 5.0];
        let mut one = Welford::default();
        xs.iter().for_each(|&x| one.add(x));
        let mut a = Welford::default();
        let mut b = Welford::default();
        xs[..4].iter().for_each(|&x| a.add(x));
        xs[4..7].iter().for_each(|&x| b.add(x));
        b.add_repeated(5.0, 0);
        a.merge(&b);
        a.add(6.0);
        a.add_repeated(5.0, 2);
        assert_eq!(a.count(), 10);
        assert!((a.mean() - 4.1).abs() < 1e-12);
        // Population variance of xs: sum((x - 4.1)^2) / 10 = 54.9 / 10.
        assert!((a.stddev() - (5.49f64).sqrt()).abs() < 1e-12);
        assert!((one.stddev() - a.stddev()).abs() < 1e-12);
    }

    #[test]
    fn batches_spread_departures_evenly() {
        let mut d = Departures::default();
        d.batch(1000, 1400, 4); // departures 1100, 1200, 1300, 1400
        d.batch(2000, 2100, 1); // departure 2100: gap 700
        let g = GapStats::from(&d.gaps);
        assert_eq!(g.samples, 4);
        assert!((g.mean_ns - (100.0 * 3.0 + 700.0) / 4.0).abs() < 1e-9);
        assert_eq!(d.first_ns, Some(1000));
        assert_eq!(d.last_ns, 2100);
    }
}
