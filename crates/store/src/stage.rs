//! Aligned staging for O_DIRECT, shared by both writers (one file, and file mode's series).
//!
//! O_DIRECT needs aligned lengths and file offsets, but buffers end anywhere: with several
//! producers each buffer ends at its own last record, and a rotated file's last buffer ends where
//! `-C` stopped it. Such a buffer's bytes are copied behind the unwritten tail of the previous one
//! and written in aligned pieces; the unaligned rest is carried to the next buffer, or written
//! through the page cache when the file ends ([`Stage::flush`]). Copying ~84 bytes per 60-byte
//! packet costs a few ns; falling back to the page cache cost ~160 ns per packet
//! (`--threads 2`, BENCHMARKS.md).

use std::io;

use crate::output::Output;
use crate::pool::{OutBuf, ALIGN};
use crate::stats::WriterCounters;

/// What a staged write put on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reached {
    /// Everything staged, this buffer included (the total happened to be aligned).
    All,
    /// The previously carried tail, not all of this buffer (its tail is carried now).
    Previous,
    /// Less than one aligned block in all: the previous tail and this buffer wait together.
    Nothing,
}

/// The staging area: an aligned buffer whose first [`Stage::carry`] bytes are not written yet.
#[derive(Default)]
pub(crate) struct Stage {
    buf: Option<OutBuf>,
    /// Bytes at the start of `buf` not written yet (always < ALIGN between writes).
    carry: usize,
}

impl Stage {
    /// Bytes staged and not written yet.
    pub fn carry(&self) -> usize {
        self.carry
    }

    /// Whether `len` more bytes must go through the stage to keep O_DIRECT on (or to stay behind
    /// what it carries).
    pub fn needed(&self, out: &Output, len: usize) -> bool {
        self.carry > 0 || (out.is_direct() && !len.is_multiple_of(ALIGN))
    }

    /// Copies `data` behind the carried bytes and writes the aligned part; the rest is carried.
    /// Returns whether O_DIRECT was refused (see [`Output::write_all_counted`]) and what reached
    /// the output; on error, the staged bytes are dropped (the caller cuts the file back).
    pub fn write(
        &mut self,
        out: &mut Output,
        data: &[u8],
        counters: &WriterCounters,
    ) -> Result<(bool, Reached), io::Error> {
        let need = self.carry + data.len();
        let mut stage = match self.buf.take() {
            Some(b) if b.capacity() >= need => b,
            // Made, or grown to the next power of two: a few allocations per writer at most.
            old => {
                let mut b = OutBuf::new((need + ALIGN).next_power_of_two().max(ALIGN));
                if let Some(old) = old {
                    b.as_mut_slice()[..self.carry].copy_from_slice(old.filled_to(self.carry));
                }
                b
            }
        };
        stage.as_mut_slice()[self.carry..need].copy_from_slice(data);
        let aligned = need / ALIGN * ALIGN;
        let refused = match out.write_all_counted(stage.filled_to(aligned), counters) {
            Ok(r) => r,
            Err((_, e)) => {
                self.carry = 0;
                self.buf = Some(stage);
                return Err(e);
            }
        };
        let reached = if aligned == need {
            Reached::All
        } else if aligned >= self.carry {
            Reached::Previous
        } else {
            Reached::Nothing
        };
        stage.as_mut_slice().copy_within(aligned..need, 0);
        self.carry = need - aligned;
        self.buf = Some(stage);
        Ok((refused, reached))
    }

    /// Writes the carried tail at the end of a file: unaligned, so through the page cache, as any
    /// final partial block. On error the tail is dropped.
    pub fn flush(&mut self, out: &mut Output, counters: &WriterCounters) -> Result<(), io::Error> {
        if self.carry == 0 {
            return Ok(());
        }
        let n = std::mem::take(&mut self.carry);
        let stage = self.buf.as_ref().expect("a carry lives in the stage");
        out.write_all_counted(stage.filled_to(n), counters)
            .map(|_| ())
            .map_err(|(_, e)| e)
    }

    /// Forgets the carried bytes (their file was cut back or is gone).
    pub fn discard(&mut self) {
        self.carry = 0;
    }
}
