//! Pacing the file bytes a query reads (`--max-read-rate`).

use std::io::{self, Read};
use std::sync::Arc;

use super::timed_out;

/// Paces the file bytes all workers read (a shared token bucket with 100 ms of credit), so a
/// query can be kept from competing with a capture for the disk.
pub(super) struct ReadPace {
    pub(super) rate: u64,
    pub(super) next: std::sync::Mutex<std::time::Instant>,
    /// The query's deadline: a wait that would pass it ends there, with an error.
    pub(super) deadline: Option<std::time::Instant>,
}

impl ReadPace {
    pub(super) fn take(&self, n: u64) -> io::Result<()> {
        let now = std::time::Instant::now();
        let until = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let floor = now
                .checked_sub(std::time::Duration::from_millis(100))
                .unwrap_or(now);
            *next = (*next).max(floor)
                + std::time::Duration::from_secs_f64(n as f64 / self.rate as f64);
            *next
        };
        if let Some(d) = self.deadline.filter(|d| until > *d) {
            std::thread::sleep(d.saturating_duration_since(now));
            return Err(timed_out());
        }
        if until > now {
            std::thread::sleep(until - now);
        }
        Ok(())
    }
}

/// A reader whose bytes go through the pace.
pub(super) struct Paced<R> {
    pub(super) inner: R,
    pub(super) pace: Option<Arc<ReadPace>>,
}

impl<R: Read> Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(p) = &self.pace {
            p.take(n as u64)?;
        }
        Ok(n)
    }
}
