//! Packet and bit rates over time: the timeline (per minute, or finer for short traces) with hourly min/avg/max (seed 002
//! Figure 1) and burstiness, the distribution of rates over windows from 100 µs to 1 s (Figure 2).
//!
//! One pass keeps, per 100 µs window that saw traffic, the packets and bytes in it ("runs"; rows
//! arrive in capture order, so consecutive packets mostly share a window and a run costs one
//! compare per packet). Coarser windows and minutes are sums of runs. Windows without traffic
//! between the first and the last packet count as rate 0.

use serde::Serialize;

/// The finest window: 100 µs.
pub const BASE_NS: u64 = 100_000;
/// Window sizes reported, as multiples of [`BASE_NS`]: 100 µs, 1 ms, 10 ms, 100 ms, 1 s.
pub const WINDOWS: [u64; 5] = [1, 10, 100, 1_000, 10_000];
/// Percentiles reported for each window size.
pub const PERCENTILES: [f64; 10] = [0.0, 1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0, 99.9, 100.0];

/// Packets and bytes seen in one base window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Window index (ts / BASE_NS).
    pub window: u64,
    pub packets: u64,
    pub bytes: u64,
}

/// Collects runs from rows in (mostly) time order.
#[derive(Default)]
pub struct RunBuilder {
    pub runs: Vec<Run>,
}

impl RunBuilder {
    /// Adds a batch of timestamps (ns) and wire lengths.
    #[inline]
    pub fn add(&mut self, ts: &[i64], len: &[u32]) {
        let mut cur = self.runs.pop().unwrap_or(Run {
            window: u64::MAX,
            packets: 0,
            bytes: 0,
        });
        for (&t, &l) in ts.iter().zip(len) {
            let w = t.max(0) as u64 / BASE_NS;
            if w != cur.window {
                if cur.packets > 0 {
                    self.runs.push(cur);
                }
                cur = Run {
                    window: w,
                    packets: 0,
                    bytes: 0,
                };
            }
            cur.packets += 1;
            cur.bytes += u64::from(l);
        }
        if cur.packets > 0 {
            self.runs.push(cur);
        }
    }

    /// Merges several builders' runs into one sorted list with one entry per window.
    pub fn merge(parts: Vec<Vec<Run>>) -> Vec<Run> {
        let mut all: Vec<Run> = parts.into_iter().flatten().collect();
        all.sort_unstable_by_key(|r| r.window);
        coalesce(all, 1)
    }
}

/// Sums sorted runs into windows of `k` base windows (window index divided by k).
pub fn coalesce(sorted: Vec<Run>, k: u64) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::with_capacity(if k == 1 {
        sorted.len()
    } else {
        sorted.len() / 4 + 1
    });
    for r in sorted {
        let w = r.window / k;
        match out.last_mut() {
            Some(last) if last.window == w => {
                last.packets += r.packets;
                last.bytes += r.bytes;
            }
            _ => out.push(Run { window: w, ..r }),
        }
    }
    out
}

/// Rate percentiles over one window size.
#[derive(Clone, Debug, Serialize)]
pub struct Burstiness {
    /// Window length in seconds.
    pub window_s: f64,
    /// Windows between the first and the last packet (empty ones included).
    pub windows: u64,
    /// Windows without any packet.
    pub empty: u64,
    /// `PERCENTILES`.
    pub percentiles: Vec<f64>,
    /// Packets per second at each percentile.
    pub pps: Vec<f64>,
    /// Megabits per second at each percentile.
    pub mbps: Vec<f64>,
    /// Mean packets per second.
    pub mean_pps: f64,
    /// Mean megabits per second.
    pub mean_mbps: f64,
}

/// Percentile by nearest rank of `sorted` values plus `zeros` leading zero values.
fn percentile(sorted: &[u64], zeros: u64, p: f64) -> u64 {
    let n = sorted.len() as u64 + zeros;
    if n == 0 {
        return 0;
    }
    let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as u64 - 1;
    if rank < zeros {
        0
    } else {
        sorted[((rank - zeros) as usize).min(sorted.len() - 1)]
    }
}

/// Burstiness at every window size of `windows` (multiples of [`BASE_NS`]) from merged base runs.
pub fn burstiness(base: &[Run], windows: &[u64]) -> Vec<Burstiness> {
    let (Some(first), Some(last)) = (base.first(), base.last()) else {
        return Vec::new();
    };
    windows
        .iter()
        .map(|&k| {
            let runs = coalesce(base.to_vec(), k);
            let windows = last.window / k - first.window / k + 1;
            let empty = windows - runs.len() as u64;
            // Rates as count × 1e9 / window_ns: exact for whole results (no 1e-4 rounding).
            let wns = (k * BASE_NS) as f64;
            let secs = wns / 1e9;
            let mut pk: Vec<u64> = runs.iter().map(|r| r.packets).collect();
            let mut by: Vec<u64> = runs.iter().map(|r| r.bytes).collect();
            pk.sort_unstable();
            by.sort_unstable();
            let total_p: u64 = pk.iter().sum();
            let total_b: u64 = by.iter().sum();
            Burstiness {
                window_s: secs,
                windows,
                empty,
                percentiles: PERCENTILES.to_vec(),
                pps: PERCENTILES
                    .iter()
                    .map(|&p| percentile(&pk, empty, p) as f64 * 1e9 / wns)
                    .collect(),
                mbps: PERCENTILES
                    .iter()
                    .map(|&p| percentile(&by, empty, p) as f64 * 8e3 / wns)
                    .collect(),
                mean_pps: total_p as f64 * 1e9 / windows as f64 / wns,
                mean_mbps: total_b as f64 * 8e3 / windows as f64 / wns,
            }
        })
        .collect()
}

/// One bin of the rate timeline: a minute for traces over a minute long (seed 002 Figure 1), a
/// second or 100 ms for shorter ones, so a short trace still draws a line.
#[derive(Clone, Debug, Serialize)]
pub struct Bin {
    /// Start of the bin, ns since the epoch.
    pub start_ns: u64,
    /// Length of the bin, ns.
    pub width_ns: u64,
    /// Packets in the bin.
    pub packets: u64,
    /// Bytes (wire lengths) in the bin.
    pub bytes: u64,
    /// Average packets per second over the bin.
    pub pps: f64,
    /// Average megabits per second over the bin.
    pub mbps: f64,
    /// Lowest and highest packet rate over the bin's sub-windows of `sub_ns` (1 s in a minute;
    /// sub-windows before the first or after the last packet of the trace are not counted).
    pub min_pps: f64,
    pub max_pps: f64,
    pub sub_ns: u64,
}

/// Min/avg/max of the per-minute rates in one hour.
#[derive(Clone, Debug, Serialize)]
pub struct Hour {
    /// Start of the hour, ns since the epoch.
    pub start_ns: u64,
    /// Minutes with data in the hour.
    pub minutes: usize,
    pub min_pps: f64,
    pub avg_pps: f64,
    pub max_pps: f64,
    pub min_mbps: f64,
    pub avg_mbps: f64,
    pub max_mbps: f64,
}

/// A second and a minute in base windows.
pub const SEC: u64 = 1_000_000_000 / BASE_NS;
pub const MIN: u64 = 60 * SEC;
/// The step that bounds a minute's rate for the hourly table: a minute partly covered counts in 100 ms steps.
pub const HOUR_SUB: u64 = SEC / 10;
const HOUR: u64 = 60 * MIN;

/// Bin and sub-window (in base windows) that suit a trace: minutes of seconds when it lasts over a
/// minute, seconds of 100 ms over 2 s, else 100 ms of 10 ms.
pub fn bin_for(base: &[Run]) -> (u64, u64) {
    let span = match (base.first(), base.last()) {
        (Some(f), Some(l)) => l.window - f.window,
        _ => 0,
    };
    if span > MIN {
        (MIN, SEC)
    } else if span > 2 * SEC {
        (SEC, SEC / 10)
    } else {
        (SEC / 10, SEC / 100)
    }
}

/// The timeline in bins of `width` base windows, each with the min and max rate over its
/// sub-windows of `sub` (`width` a multiple of `sub`). A bin's average is over the part of the bin
/// inside the trace, so a trace that starts or ends mid-bin is not diluted.
pub fn timeline(base: &[Run], width: u64, sub: u64) -> Vec<Bin> {
    let (Some(first), Some(last)) = (base.first(), base.last()) else {
        return Vec::new();
    };
    let per_bin = width / sub;
    let (t0, t1) = (first.window / sub, last.window / sub); // first and last sub-window
    let subs = coalesce(base.to_vec(), sub);
    let sub_s = sub as f64 * BASE_NS as f64 / 1e9;
    let mut out: Vec<Bin> = Vec::new();
    let mut i = 0;
    for m in t0 / per_bin..=t1 / per_bin {
        let (s_lo, s_hi) = ((m * per_bin).max(t0), (m * per_bin + per_bin - 1).min(t1));
        let span_s = (s_hi - s_lo + 1) as f64 * sub_s;
        let (mut p, mut b, mut lo, mut hi, mut seen) = (0u64, 0u64, u64::MAX, 0u64, 0u64);
        while i < subs.len() && subs[i].window <= s_hi {
            let r = subs[i];
            p += r.packets;
            b += r.bytes;
            lo = lo.min(r.packets);
            hi = hi.max(r.packets);
            seen += 1;
            i += 1;
        }
        if seen < (s_hi - s_lo + 1) {
            lo = 0; // a sub-window without packets
        }
        if p == 0 {
            continue;
        }
        out.push(Bin {
            start_ns: m * width * BASE_NS,
            width_ns: width * BASE_NS,
            packets: p,
            bytes: b,
            pps: p as f64 / span_s,
            mbps: b as f64 * 8.0 / span_s / 1e6,
            min_pps: lo as f64 / sub_s,
            max_pps: hi as f64 / sub_s,
            sub_ns: sub * BASE_NS,
        });
    }
    out
}

/// Hourly min/avg/max of the minute rates (`minutes`: a timeline in bins of a minute).
pub fn hours(minutes: &[Bin]) -> Vec<Hour> {
    let mut out: Vec<Hour> = Vec::new();
    for chunk in
        minutes.chunk_by(|a, b| a.start_ns / (HOUR * BASE_NS) == b.start_ns / (HOUR * BASE_NS))
    {
        let n = chunk.len() as f64;
        let fold = |f: fn(&Bin) -> f64| {
            let v: Vec<f64> = chunk.iter().map(f).collect();
            (
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().sum::<f64>() / n,
                v.iter().copied().fold(0.0, f64::max),
            )
        };
        let (min_pps, avg_pps, max_pps) = fold(|m| m.pps);
        let (min_mbps, avg_mbps, max_mbps) = fold(|m| m.mbps);
        out.push(Hour {
            start_ns: chunk[0].start_ns / (HOUR * BASE_NS) * (HOUR * BASE_NS),
            minutes: chunk.len(),
            min_pps,
            avg_pps,
            max_pps,
            min_mbps,
            avg_mbps,
            max_mbps,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partly_covered_minute_averages_over_its_100_ms_steps() {
        // One packet at 0 and one 8.1919 s later: 82 steps of 100 ms with traffic, not 9 whole seconds.
        let mut b = RunBuilder::default();
        b.add(&[0, 8_191_900_000], &[100, 100]);
        let base = RunBuilder::merge(vec![b.runs]);
        let hours = hours(&timeline(&base, MIN, HOUR_SUB));
        assert_eq!(hours.len(), 1);
        assert!(
            (hours[0].avg_pps - 2.0 / 8.2).abs() < 1e-12,
            "{}",
            hours[0].avg_pps
        );
    }

    #[test]
    fn runs_and_percentiles() {
        // 3 packets in window 0, none in 1..=8, 1 in window 9.
        let mut b = RunBuilder::default();
        b.add(&[0, 10, 99_999, 950_000], &[100, 100, 100, 1000]);
        let base = RunBuilder::merge(vec![b.runs]);
        assert_eq!(base.len(), 2);
        let bu = burstiness(&base, &WINDOWS);
        assert_eq!(bu[0].windows, 10);
        assert_eq!(bu[0].empty, 8);
        // Median window is empty; max is 3 packets in 100 µs = 30 000 pps.
        assert_eq!(bu[0].pps[4], 0.0);
        assert_eq!(*bu[0].pps.last().unwrap(), 30_000.0);
        // One 1 ms window holds all 4 packets.
        assert_eq!(bu[1].windows, 1);
        assert_eq!(bu[1].pps[0], 4000.0);
    }
}
