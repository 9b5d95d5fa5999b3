//! A large read buffer from which records are borrowed in place (no per-packet allocation).

use std::io::{self, Read};

/// Buffered input with absolute stream offsets.
pub(crate) struct Source {
    inner: Box<dyn Read + Send>,
    pub buf: Vec<u8>,
    pub pos: usize,
    end: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    pub eof: bool,
}

impl Source {
    pub fn new(inner: Box<dyn Read + Send>, capacity: usize) -> Source {
        Source {
            inner,
            buf: vec![0; capacity],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
        }
    }

    /// Bytes available without reading.
    #[inline]
    pub fn avail(&self) -> usize {
        self.end - self.pos
    }

    /// Stream offset of the next unread byte.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Stream offset of `buf[idx]` (until the next `fill` moves the buffer).
    #[inline]
    pub fn offset_of(&self, idx: usize) -> u64 {
        self.base + idx as u64
    }

    /// The next `n` buffered bytes (callers make sure `n <= avail()`).
    #[inline]
    pub fn peek(&self, n: usize) -> &[u8] {
        &self.buf[self.pos..self.pos + n]
    }

    #[inline]
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.avail());
        self.pos += n;
    }

    /// Makes at least `need` bytes available; `Ok(false)` at end of input.
    #[inline]
    pub fn fill(&mut self, need: usize) -> io::Result<bool> {
        if self.avail() >= need {
            return Ok(true);
        }
        self.fill_slow(need)
    }

    #[cold]
    fn fill_slow(&mut self, need: usize) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos + need > self.buf.len() {
            // Move the unread tail to the front; grow so that compaction stays rare even when
            // `need` is close to the buffer size (resync scans advance one byte at a time).
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
            if need > self.buf.len() / 2 {
                self.buf.resize(need * 2, 0);
            }
        }
        while self.avail() < need {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.eof = true;
                    return Err(e);
                }
            }
        }
        Ok(true)
    }

    /// Reads and drops everything that is left; returns how many bytes that was.
    pub fn drain(&mut self) -> io::Result<u64> {
        let mut n = self.avail() as u64;
        self.pos = self.end;
        while self.fill(1)? {
            n += self.avail() as u64;
            self.pos = self.end;
        }
        Ok(n)
    }
}
