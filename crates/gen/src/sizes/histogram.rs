//! Packet-size histogram: size (IP packet length in bytes) → number of packets.

/// Number of possible sizes: IP total lengths are 16-bit (0..=65535).
pub const SIZE_SLOTS: usize = 1 << 16;

/// Counts of packets by size; sizes are IP packet lengths in bytes.
///
/// Dense (one counter per possible size, 512 KiB) so that counting a trace is one
/// indexed increment per packet, and so that comparisons walk two arrays in step.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; SIZE_SLOTS],
            total: 0,
        }
    }

    /// A histogram from `(size, count)` pairs; counts of repeated sizes add up.
    ///
    /// Panics if the total overflows u64 (only reachable with made-up counts).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u16, u64)>) -> Self {
        let mut h = Histogram::new();
        for (size, count) in pairs {
            h.try_add(size, count)
                .expect("histogram total overflows u64");
        }
        h
    }

    /// Adds `count` packets of `size`; `None` if the total would overflow u64.
    #[must_use]
    pub fn try_add(&mut self, size: u16, count: u64) -> Option<()> {
        let total = self.total.checked_add(count)?;
        // Cannot overflow when the total did not.
        self.counts[size as usize] += count;
        self.total = total;
        Some(())
    }

    /// Adds one packet of `size` (counting a trace: saturates instead of failing).
    #[inline]
    pub fn add_one(&mut self, size: u16) {
        if self.total != u64::MAX {
            self.counts[size as usize] += 1;
            self.total += 1;
        }
    }

    /// Adds every count of `other`; `None` if the total would overflow u64.
    #[must_use]
    pub fn try_merge(&mut self, other: &Histogram) -> Option<()> {
        self.total.checked_add(other.total)?;
        for (size, count) in other.iter() {
            self.try_add(size, count)?;
        }
        Some(())
    }

    /// Number of packets of `size`.
    pub fn count(&self, size: u16) -> u64 {
        self.counts[size as usize]
    }

    /// Total number of packets (c_all of equation 4.1 when nothing is above N_ps).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// True when no packet was counted.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The dense counters, indexed by size (length 65 536).
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// `(size, count)` of every size with a non-zero count, smallest size first.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c != 0)
            .map(|(s, &c)| (s as u16, c))
    }

    /// Number of different sizes seen.
    pub fn distinct(&self) -> usize {
        self.counts.iter().filter(|&&c| c != 0).count()
    }

    /// Smallest size seen.
    pub fn min_size(&self) -> Option<u16> {
        self.iter().next().map(|(s, _)| s)
    }

    /// Largest size seen.
    pub fn max_size(&self) -> Option<u16> {
        self.counts.iter().rposition(|&c| c != 0).map(|s| s as u16)
    }

    /// Mean size in bytes (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let sum: u128 = self.iter().map(|(s, c)| s as u128 * c as u128).sum();
        sum as f64 / self.total as f64
    }

    /// Packets of sizes above `max` (those N_ps leaves out).
    pub fn count_above(&self, max: u16) -> u64 {
        self.counts[max as usize + 1..].iter().sum()
    }

    /// Share of each size, dense and indexed by size (p_i of equation 4.1 over all packets).
    pub fn probabilities(&self) -> Vec<f64> {
        let mut p = vec![0.0; SIZE_SLOTS];
        if self.total > 0 {
            let all = self.total as f64;
            for (s, c) in self.iter() {
                p[s as usize] = c as f64 / all;
            }
        }
        p
    }
}
