//! Per-packet size drawing: seeded, portable, no allocation.

use std::sync::Arc;

use rand::distributions::{Distribution as _, Uniform};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::WeightedAliasIndex;

/// The random generator of every size draw: ChaCha8 (portable: the same seed gives the same
/// stream on every machine and rand_chacha 0.3 version, unlike `StdRng`).
pub type SizeRng = ChaCha8Rng;

/// Makes the generator for `seed` and `stream`: `seed_from_u64` (rand_core's documented
/// PCG32 expansion) then ChaCha's stream number, so threads can share a seed and still
/// draw independent, reproducible sequences.
pub fn seeded_rng(seed: u64, stream: u64) -> SizeRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// The createDist arrays prepared for drawing (Figure 4.3).
#[derive(Debug)]
pub(crate) struct Arrays {
    pub outliers: Vec<i32>,
    pub bins: Vec<u16>,
    pub pick_outlier: Uniform<u32>,
    /// Only used after a −1, which exists only if `bins` is not empty.
    pub pick_bin: Uniform<u32>,
    pub jitter: Uniform<u16>,
}

impl Arrays {
    pub(crate) fn new(outliers: Vec<i32>, bins: Vec<u16>, bin_width: u16) -> Arrays {
        Arrays {
            pick_outlier: Uniform::new(0, outliers.len() as u32),
            pick_bin: Uniform::new(0, bins.len().max(1) as u32),
            jitter: Uniform::new(0, bin_width),
            outliers,
            bins,
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    /// One size: no randomness needed.
    Fixed(u16),
    /// Walker/Vose alias table over the sizes of the histogram.
    Alias {
        sizes: Arc<[u16]>,
        alias: Arc<WeightedAliasIndex<u64>>,
    },
    /// The createDist arrays.
    Arrays(Arc<Arrays>),
    /// A fixed repeating order (an RFC 6985 genome).
    Cycle { sizes: Arc<[u16]>, next: usize },
}

/// Draws packet sizes from a model; make one per sending thread with its own stream.
#[derive(Clone, Debug)]
pub struct SizeSampler {
    rng: SizeRng,
    kind: Kind,
}

impl SizeSampler {
    pub(crate) fn new(kind: Kind, rng: SizeRng) -> SizeSampler {
        SizeSampler { rng, kind }
    }

    /// The next packet size (IP length in bytes). Allocation-free; a few ns per call.
    #[inline]
    pub fn next_size(&mut self) -> u16 {
        match &mut self.kind {
            Kind::Fixed(size) => *size,
            Kind::Alias { sizes, alias } => sizes[alias.sample(&mut self.rng)],
            Kind::Arrays(a) => {
                // Figure 4.3: a cell of the outliers array; −1 → a bin cell plus jitter.
                let cell = a.outliers[a.pick_outlier.sample(&mut self.rng) as usize];
                if cell >= 0 {
                    cell as u16
                } else {
                    let bin = a.bins[a.pick_bin.sample(&mut self.rng) as usize];
                    bin + a.jitter.sample(&mut self.rng)
                }
            }
            Kind::Cycle { sizes, next } => {
                let s = sizes[*next];
                *next += 1;
                if *next == sizes.len() {
                    *next = 0;
                }
                s
            }
        }
    }

    /// Fills `out` with sizes (same sequence as calling [`SizeSampler::next_size`] repeatedly).
    pub fn fill(&mut self, out: &mut [u16]) {
        for s in out {
            *s = self.next_size();
        }
    }
}

impl Iterator for SizeSampler {
    type Item = u16;
    fn next(&mut self) -> Option<u16> {
        Some(self.next_size())
    }
}
