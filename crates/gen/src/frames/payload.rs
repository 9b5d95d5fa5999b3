//! Payload bytes and their checksums: the shared random pool with prefix sums, constant payloads
//! (`zero`, `file`) with their sum computed once.

use std::sync::Arc;

use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use wire::checksum::{fold, ones_complement_sum};

/// Size of the shared random pool. Payloads walk it sequentially, so a compressor sees repeated bytes only
/// after this much payload: larger than the windows of gzip (32 KiB), lz4 (64 KiB) and zstd up to level 19
/// (8 MiB), so `random` stays incompressible and `half` about 50 %.
pub const RANDOM_POOL_BYTES: usize = 16 << 20;
pub(super) const BLOCK: usize = 64;

/// Seeded random bytes shared by all threads, with per-64-byte-block prefix sums so the checksum of any
/// block-aligned slice costs one subtraction plus at most 63 bytes.
pub struct RandomPool {
    pub(super) bytes: Vec<u8>,
    /// `prefix[i]` = sum of the 16-bit big-endian words of `bytes[..64 * i]`.
    prefix: Vec<u64>,
}

impl RandomPool {
    /// Fills `len` bytes (rounded up to 64) from `rng`.
    pub fn new(rng: &mut ChaCha8Rng, len: usize) -> Self {
        let len = len.div_ceil(BLOCK).max(1) * BLOCK;
        let mut bytes = vec![0u8; len];
        rng.fill_bytes(&mut bytes);
        let mut prefix = Vec::with_capacity(len / BLOCK + 1);
        let mut acc = 0u64;
        prefix.push(0);
        for b in bytes.chunks_exact(BLOCK) {
            acc += ones_complement_sum(b) as u64;
            prefix.push(acc);
        }
        RandomPool { bytes, prefix }
    }

    /// Pool length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false (a pool has at least one block).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Folded sum of `bytes[range]`; `range.start` must be a multiple of 64.
    #[inline]
    pub(super) fn sum(&self, range: std::ops::Range<usize>) -> u32 {
        let start = range.start;
        debug_assert_eq!(start % BLOCK, 0);
        let n = range.len();
        let src = &self.bytes[range];
        let whole = n / BLOCK;
        let blocks = self.prefix[start / BLOCK + whole] - self.prefix[start / BLOCK];
        let tail = ones_complement_sum(&src[whole * BLOCK..]) as u64;
        fold64(blocks + tail)
    }
}

/// Constant payload bytes (zero or a repeated file) with the sum of every prefix length.
pub(super) struct FixedPayload {
    pub(super) bytes: Vec<u8>,
    /// `word_prefix[i]` = sum of the first `i` 16-bit words.
    word_prefix: Vec<u32>,
}

impl FixedPayload {
    pub(super) fn new(bytes: Vec<u8>) -> Self {
        let mut word_prefix = Vec::with_capacity(bytes.len() / 2 + 1);
        let mut acc = 0u32;
        word_prefix.push(0);
        for w in bytes.chunks_exact(2) {
            acc += u16::from_be_bytes([w[0], w[1]]) as u32;
            word_prefix.push(acc);
        }
        FixedPayload { bytes, word_prefix }
    }

    /// Sum of the first `n` bytes (an odd last byte is the high half of its word).
    #[inline]
    pub(super) fn sum(&self, n: usize) -> u32 {
        let s = self.word_prefix[n / 2]
            + if n % 2 == 1 {
                (self.bytes[n - 1] as u32) << 8
            } else {
                0
            };
        fold(s) as u32
    }
}

pub(super) enum PayloadFill {
    /// Constant bytes already in every prepared slot.
    Fixed(FixedPayload),
    /// Bytes copied from the pool per packet: all of them (`half == false`) or the first half.
    Pool {
        pool: Arc<RandomPool>,
        cursor: usize,
        half: bool,
    },
}

/// Folds a 64-bit sum of 16-bit words to 16 bits.
#[inline]
pub(super) fn fold64(mut s: u64) -> u32 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u32
}
