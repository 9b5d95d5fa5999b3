//! Replay protection and exact loss counting for authenticated batches, per (probe, stream).
//!
//! Each stream keeps its highest seq and a 4096-bit window of the seqs below it that arrived. A seq seen
//! before, or older than the window, is rejected; a batch whose sent time is more than `max_skew` away from
//! the collector's clock is rejected (a recording replayed later is stale). Loss per stream is kept exact
//! through reordering: `lost = max_seq + 1 - distinct seqs accepted`, updated by each [`Gap`].
//!
//! Memory is bounded: at most `max_streams` streams; a stream idle for more than 2 × `max_skew` is evicted
//! when room is needed. Twice, not once: a batch accepted at time T had a sent time ≥ T − skew, so a replay
//! of it passes the freshness check until T + 2 × skew; only after that can the stream's window be forgotten.
//! The counters of an evicted stream (highest seq, distinct seqs) are kept in a bounded table
//! (4 × `max_streams`, oldest forgotten first): a stream that resumes after a quiet period continues its loss
//! count instead of counting its whole past as lost, and its seqs up to the old highest stay refused.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Seqs remembered below the highest one.
pub const WINDOW: u64 = 4096;
/// Default allowed clock difference between probe and collector.
pub const DEFAULT_MAX_SKEW: Duration = Duration::from_secs(120);

const WORDS: usize = (WINDOW / 64) as usize;

/// What an accepted batch changed in its stream's loss count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gap {
    /// First batch of this (probe, stream) seen (since it was last evicted).
    pub new_stream: bool,
    /// Seqs skipped by this batch (it jumped past `max_seq + 1`; for a new stream: its seq).
    pub skipped: u64,
    /// The batch filled an earlier hole (arrived out of order): one fewer lost.
    pub late_fill: bool,
}

impl Gap {
    /// Change of the stream's lost count: `skipped`, minus one for a late fill.
    pub fn loss_delta(&self) -> i64 {
        self.skipped as i64 - self.late_fill as i64
    }
}

/// Why a batch was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// This seq was accepted before.
    #[error("replayed batch: seq {seq} already received")]
    Duplicate {
        /// The seq.
        seq: u64,
    },
    /// Older than the window below the highest seq: cannot tell a replay from a late batch.
    #[error("batch seq {seq} too old (highest {max_seq}, window 4096)")]
    TooOld {
        /// The seq.
        seq: u64,
        /// Highest seq of the stream.
        max_seq: u64,
    },
    /// Sent time too far from the collector's clock.
    #[error("batch sent {ahead_ms} ms from the collector's clock (allowed ±{max_skew_ms} ms): stale replay or unsynchronised clocks")]
    Skew {
        /// Sent time minus now, ms (negative: in the past).
        ahead_ms: i64,
        /// The allowed skew, ms.
        max_skew_ms: u64,
    },
    /// The stream table is full of recently active streams.
    #[error("too many active probe streams ({0}); batch of a new stream refused")]
    TooManyStreams(usize),
}

impl Rejected {
    /// A short fixed name for counters and logs.
    pub const fn reason(&self) -> &'static str {
        match self {
            Rejected::Duplicate { .. } => "replay",
            Rejected::TooOld { .. } => "too_old",
            Rejected::Skew { .. } => "skew",
            Rejected::TooManyStreams(_) => "too_many_streams",
        }
    }
}

/// Per-stream counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Highest seq accepted.
    pub max_seq: u64,
    /// Distinct seqs accepted.
    pub distinct: u64,
}

impl StreamStats {
    /// Batches missing so far: `max_seq + 1 - distinct`.
    pub fn lost(&self) -> u64 {
        self.max_seq + 1 - self.distinct
    }
}

#[derive(Clone, Debug)]
struct Stream {
    stats: StreamStats,
    /// Seqs up to this were accepted before the stream was evicted for idleness: refused (too old).
    floor: Option<u64>,
    /// Bit (seq % WINDOW) set when seq in (max_seq - WINDOW, max_seq] was accepted.
    seen: [u64; WORDS],
    last_active_ns: u64,
}

impl Stream {
    fn bit(&self, seq: u64) -> bool {
        let i = (seq % WINDOW) as usize;
        self.seen[i / 64] & (1 << (i % 64)) != 0
    }
    fn set(&mut self, seq: u64) {
        let i = (seq % WINDOW) as usize;
        self.seen[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, seq: u64) {
        let i = (seq % WINDOW) as usize;
        self.seen[i / 64] &= !(1 << (i % 64));
    }
}

/// Sliding-window replay check for all (probe, stream) pairs of one collector.
#[derive(Debug)]
pub struct ReplayGuard {
    max_skew_ns: u64,
    max_streams: usize,
    streams: HashMap<(u64, u32), Stream>,
    /// Counters of streams evicted for idleness, so one that resumes is not counted as having lost its
    /// whole past; bounded (oldest forgotten first, in `evicted_order`).
    evicted: HashMap<(u64, u32), StreamStats>,
    evicted_order: VecDeque<(u64, u32)>,
}

/// Evicted streams remembered per tracked stream (16 bytes of counters each).
const EVICTED_PER_STREAM: usize = 4;

impl ReplayGuard {
    /// A guard allowing `max_skew` clock difference and at most `max_streams` streams.
    pub fn new(max_skew: Duration, max_streams: usize) -> ReplayGuard {
        ReplayGuard {
            max_skew_ns: max_skew.as_nanos().min(u64::MAX as u128) as u64,
            max_streams: max_streams.max(1),
            streams: HashMap::new(),
            evicted: HashMap::new(),
            evicted_order: VecDeque::new(),
        }
    }

    /// Accepts or rejects batch `seq` of (probe, stream); call only for batches whose tag verified.
    pub fn check(
        &mut self,
        probe_id: u64,
        stream_id: u32,
        seq: u64,
        sent_unix_ns: u64,
        now_unix_ns: u64,
    ) -> Result<Gap, Rejected> {
        let ahead = sent_unix_ns as i128 - now_unix_ns as i128;
        if ahead.unsigned_abs() > self.max_skew_ns as u128 {
            return Err(Rejected::Skew {
                ahead_ms: (ahead / 1_000_000).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
                max_skew_ms: self.max_skew_ns / 1_000_000,
            });
        }
        let key = (probe_id, stream_id);
        if !self.streams.contains_key(&key) {
            if self.streams.len() >= self.max_streams {
                self.evict_idle(now_unix_ns);
                if self.streams.len() >= self.max_streams {
                    return Err(Rejected::TooManyStreams(self.streams.len()));
                }
            }
            // A stream evicted while idle resumes where it was; its old seqs stay refused.
            let before = self.evicted.get(&key).copied();
            if let Some(old) = before {
                if seq <= old.max_seq {
                    return Err(Rejected::TooOld {
                        seq,
                        max_seq: old.max_seq,
                    });
                }
                self.evicted.remove(&key);
            }
            let mut s = Stream {
                stats: StreamStats {
                    max_seq: seq,
                    distinct: before.map_or(0, |o| o.distinct) + 1,
                },
                floor: before.map(|o| o.max_seq),
                seen: [0; WORDS],
                last_active_ns: now_unix_ns,
            };
            s.set(seq);
            self.streams.insert(key, s);
            return Ok(match before {
                Some(old) => Gap {
                    new_stream: false,
                    skipped: seq - old.max_seq - 1,
                    late_fill: false,
                },
                None => Gap {
                    new_stream: true,
                    skipped: seq,
                    late_fill: false,
                },
            });
        }
        let s = self.streams.get_mut(&key).expect("checked above");
        let max = s.stats.max_seq;
        let gap = if seq > max {
            // Forget the window slots the advance reuses (at most all of them).
            let advance = seq - max;
            if advance >= WINDOW {
                s.seen = [0; WORDS];
            } else {
                for q in max + 1..seq {
                    s.clear(q);
                }
            }
            s.set(seq);
            s.stats.max_seq = seq;
            Gap {
                new_stream: false,
                skipped: advance - 1,
                late_fill: false,
            }
        } else {
            if max - seq >= WINDOW || s.floor.is_some_and(|f| seq <= f) {
                return Err(Rejected::TooOld { seq, max_seq: max });
            }
            if s.bit(seq) {
                return Err(Rejected::Duplicate { seq });
            }
            s.set(seq);
            Gap {
                new_stream: false,
                skipped: 0,
                late_fill: true,
            }
        };
        s.stats.distinct += 1;
        s.last_active_ns = now_unix_ns;
        Ok(gap)
    }

    /// Drops streams idle for more than 2 × max_skew (safe: their batches can no longer pass the
    /// freshness check). Returns how many were dropped.
    /// Their counters are remembered (bounded) so a stream that resumes is not counted as new.
    pub fn evict_idle(&mut self, now_unix_ns: u64) -> usize {
        let limit = self.max_skew_ns.saturating_mul(2);
        let idle: Vec<(u64, u32)> = self
            .streams
            .iter()
            .filter(|(_, s)| now_unix_ns.saturating_sub(s.last_active_ns) > limit)
            .map(|(k, _)| *k)
            .collect();
        for key in &idle {
            let s = self.streams.remove(key).expect("listed above");
            self.remember_evicted(*key, s.stats);
        }
        idle.len()
    }

    fn remember_evicted(&mut self, key: (u64, u32), stats: StreamStats) {
        let bound = self.max_streams.saturating_mul(EVICTED_PER_STREAM);
        while self.evicted.len() >= bound {
            let Some(oldest) = self.evicted_order.pop_front() else {
                break;
            };
            self.evicted.remove(&oldest);
        }
        if self.evicted.insert(key, stats).is_none() {
            self.evicted_order.push_back(key);
        }
        // Keys that resumed were removed from the map only: drop them from the order when it grows.
        if self.evicted_order.len() > 2 * bound {
            let evicted = &self.evicted;
            self.evicted_order.retain(|k| evicted.contains_key(k));
        }
    }

    /// Evicted streams remembered now (never above 4 × `max_streams`).
    pub fn evicted_len(&self) -> usize {
        self.evicted.len()
    }

    /// Counters of one stream, if it is tracked.
    pub fn stream(&self, probe_id: u64, stream_id: u32) -> Option<StreamStats> {
        self.streams.get(&(probe_id, stream_id)).map(|s| s.stats)
    }

    /// All tracked streams: ((probe, stream), stats).
    pub fn streams(&self) -> impl Iterator<Item = ((u64, u32), StreamStats)> + '_ {
        self.streams.iter().map(|(k, s)| (*k, s.stats))
    }

    /// Streams tracked now (never above `max_streams`).
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// True when no stream is tracked.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}

impl Default for ReplayGuard {
    /// ±120 s skew, 4096 streams (≈ 2.3 MB at most).
    fn default() -> Self {
        ReplayGuard::new(DEFAULT_MAX_SKEW, 4096)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000_000_000;
    const SEC: u64 = 1_000_000_000;

    fn guard() -> ReplayGuard {
        ReplayGuard::new(Duration::from_secs(120), 16)
    }

    #[test]
    fn in_order_then_duplicate() {
        let mut g = guard();
        let first = g.check(1, 1, 0, NOW, NOW).unwrap();
        assert_eq!(
            first,
            Gap {
                new_stream: true,
                skipped: 0,
                late_fill: false
            }
        );
        for seq in 1..10 {
            assert_eq!(g.check(1, 1, seq, NOW, NOW), Ok(Gap::default()));
        }
        assert_eq!(
            g.check(1, 1, 4, NOW, NOW),
            Err(Rejected::Duplicate { seq: 4 })
        );
        assert_eq!(
            g.check(1, 1, 9, NOW, NOW),
            Err(Rejected::Duplicate { seq: 9 })
        );
        assert_eq!(
            g.stream(1, 1),
            Some(StreamStats {
                max_seq: 9,
                distinct: 10
            })
        );
        // Same seq on another stream or probe is a different batch.
        assert!(g.check(1, 2, 4, NOW, NOW).unwrap().new_stream);
        assert!(g.check(2, 1, 4, NOW, NOW).unwrap().new_stream);
    }

    #[test]
    fn gaps_and_late_fills_count_loss_exactly() {
        let mut g = guard();
        // Arrival order with holes and reordering; 20 seqs 0..=19 of which 3, 7, 8, 15 never arrive.
        let order = [0, 1, 2, 5, 4, 6, 9, 10, 12, 11, 13, 14, 16, 17, 19, 18];
        let mut lost: i64 = 0;
        for &q in &order {
            let gap = g.check(5, 5, q, NOW, NOW).unwrap();
            lost += gap.loss_delta();
        }
        let st = g.stream(5, 5).unwrap();
        assert_eq!((st.max_seq, st.distinct), (19, 16));
        assert_eq!(st.lost(), 4);
        assert_eq!(lost, 4, "running deltas agree with max+1-distinct");
        // A late arrival of a missing one is accepted and reduces loss; again is a replay.
        assert!(g.check(5, 5, 7, NOW, NOW).unwrap().late_fill);
        assert_eq!(g.stream(5, 5).unwrap().lost(), 3);
        assert_eq!(
            g.check(5, 5, 7, NOW, NOW),
            Err(Rejected::Duplicate { seq: 7 })
        );
    }

    #[test]
    fn stream_starting_late_counts_the_missing_start() {
        let mut g = guard();
        let gap = g.check(1, 1, 3, NOW, NOW).unwrap();
        assert_eq!((gap.new_stream, gap.skipped), (true, 3));
        assert!(g.check(1, 1, 1, NOW, NOW).unwrap().late_fill);
        assert_eq!(g.stream(1, 1).unwrap().lost(), 2);
    }

    #[test]
    fn window_edges() {
        let mut g = guard();
        g.check(1, 1, 0, NOW, NOW).unwrap();
        g.check(1, 1, 5000, NOW, NOW).unwrap();
        // 5000 - 904 = 4096: outside; 905 is the oldest seq inside (and was never seen).
        assert_eq!(
            g.check(1, 1, 904, NOW, NOW),
            Err(Rejected::TooOld {
                seq: 904,
                max_seq: 5000
            })
        );
        assert!(g.check(1, 1, 905, NOW, NOW).unwrap().late_fill);
        assert_eq!(
            g.check(1, 1, 0, NOW, NOW),
            Err(Rejected::TooOld {
                seq: 0,
                max_seq: 5000
            })
        );
        // Slots reused by a small advance were cleared: 5000+4096 maps where 5000 was.
        let gap = g.check(1, 1, 5000 + 4096, NOW, NOW).unwrap();
        assert_eq!(gap.skipped, 4095);
        assert!(g.check(1, 1, 5001, NOW, NOW).unwrap().late_fill);
        assert_eq!(
            g.check(1, 1, 5000, NOW, NOW),
            Err(Rejected::TooOld {
                seq: 5000,
                max_seq: 9096
            })
        );
        let st = g.stream(1, 1).unwrap();
        assert_eq!(st.lost(), 9097 - st.distinct);
        assert_eq!(st.distinct, 5);
    }

    #[test]
    fn skew_both_ways() {
        let mut g = guard();
        assert!(g.check(1, 1, 0, NOW - 120 * SEC, NOW).is_ok());
        assert!(g.check(1, 1, 1, NOW + 120 * SEC, NOW).is_ok());
        assert_eq!(
            g.check(1, 1, 2, NOW - 121 * SEC, NOW),
            Err(Rejected::Skew {
                ahead_ms: -121_000,
                max_skew_ms: 120_000
            })
        );
        assert!(matches!(
            g.check(1, 1, 2, NOW + 121 * SEC, NOW),
            Err(Rejected::Skew {
                ahead_ms: 121_000,
                ..
            })
        ));
        // A rejected batch changes nothing.
        assert_eq!(g.stream(1, 1).unwrap().distinct, 2);
        assert_eq!(g.check(1, 1, 2, 0, NOW).unwrap_err().reason(), "skew");
    }

    #[test]
    fn bounded_streams_and_eviction() {
        let mut g = ReplayGuard::new(Duration::from_secs(10), 4);
        for s in 0..4 {
            g.check(1, s, 0, NOW, NOW).unwrap();
        }
        assert_eq!(
            g.check(1, 99, 0, NOW, NOW),
            Err(Rejected::TooManyStreams(4))
        );
        // Stream 0 stays active; the others go idle for more than 2 × skew.
        let later = NOW + 21 * SEC;
        g.check(1, 0, 1, later - 5 * SEC, later - 5 * SEC).unwrap();
        assert!(g.check(1, 99, 0, later, later).unwrap().new_stream);
        assert_eq!(g.len(), 2);
        assert!(g.stream(1, 0).is_some() && g.stream(1, 1).is_none());
        // Many more streams than the bound over time: never above it.
        for i in 0..1000u32 {
            let t = later + i as u64 * 30 * SEC;
            g.check(2, i, 0, t, t).unwrap();
            assert!(g.len() <= 4);
        }
    }

    #[test]
    fn a_stream_resuming_after_eviction_counts_no_false_loss() {
        let mut g = ReplayGuard::new(Duration::from_secs(10), 4);
        let mut lost = 0i64;
        for seq in 0..100 {
            lost += g.check(1, 1, seq, NOW, NOW).unwrap().loss_delta();
        }
        // Quiet for longer than 2 × skew: evicted, counters remembered.
        let later = NOW + 25 * SEC;
        assert_eq!(g.evict_idle(later), 1);
        assert!(g.stream(1, 1).is_none());
        let gap = g.check(1, 1, 100, later, later).unwrap();
        assert_eq!(gap, Gap::default(), "resumes where it was, no loss");
        // A real gap after the pause still counts; old seqs stay refused.
        lost += gap.loss_delta() + g.check(1, 1, 103, later, later).unwrap().loss_delta();
        assert_eq!(lost, 2);
        assert_eq!(g.stream(1, 1).unwrap().lost(), 2);
        assert!(matches!(
            g.check(1, 1, 99, later, later),
            Err(Rejected::TooOld { seq: 99, .. })
        ));
        assert!(g.check(1, 1, 101, later, later).unwrap().late_fill);
        // Resumed past the old max before its eviction too: seqs at or below it are refused.
        let much_later = later + 25 * SEC;
        g.evict_idle(much_later);
        assert!(matches!(
            g.check(1, 1, 50, much_later, much_later),
            Err(Rejected::TooOld { .. })
        ));
    }

    #[test]
    fn remembered_evictions_are_bounded() {
        let mut g = ReplayGuard::new(Duration::from_secs(10), 4);
        for i in 0..1000u32 {
            let t = NOW + i as u64 * 30 * SEC;
            g.evict_idle(t);
            g.check(7, i, 5, t, t).unwrap();
            assert!(g.len() <= 4 && g.evicted_len() <= 16, "{}", g.evicted_len());
        }
        assert_eq!(g.evicted_len(), 16);
    }

    #[test]
    fn random_reordering_agrees_with_a_set() {
        // A deterministic shuffle within a bounded distance and drops, checked against a HashSet model.
        let mut g = ReplayGuard::new(Duration::from_secs(120), 4);
        let mut x: u64 = 88172645463325252;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut seqs: Vec<u64> = (0..20000).filter(|_| rnd() % 10 != 0).collect();
        for i in 0..seqs.len() {
            let j = (i + (rnd() % 50) as usize).min(seqs.len() - 1);
            seqs.swap(i, j);
        }
        let mut seen = std::collections::HashSet::new();
        let mut delta = 0i64;
        for &q in &seqs {
            delta += g.check(3, 3, q, NOW, NOW).unwrap().loss_delta();
            seen.insert(q);
            // Replays of anything recent are refused.
            let back = q.saturating_sub(rnd() % 40);
            if seen.contains(&back) {
                assert!(g.check(3, 3, back, NOW, NOW).is_err());
            }
        }
        let st = g.stream(3, 3).unwrap();
        let max = *seen.iter().max().unwrap();
        assert_eq!(st.max_seq, max);
        assert_eq!(st.distinct, seen.len() as u64);
        assert_eq!(delta as u64, max + 1 - seen.len() as u64);
    }
}
