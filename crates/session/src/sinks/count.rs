//! `--drop-all`: count every packet and drop it (seed 002's offered-rate oracle in user space).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use capture::Batch;

use crate::sink::{Lane, Sink, SinkReport, Totals};

/// Counts packets; nothing is kept.
#[derive(Default)]
pub struct CountSink {
    lanes: Vec<Arc<AtomicU64>>,
}

struct CountLane(Arc<AtomicU64>);

impl Sink for CountSink {
    fn lane(&mut self) -> anyhow::Result<Box<dyn Lane>> {
        let n = Arc::new(AtomicU64::new(0));
        self.lanes.push(Arc::clone(&n));
        Ok(Box::new(CountLane(n)))
    }

    fn finish(self: Box<Self>, _: &Totals) -> (SinkReport, Option<anyhow::Error>) {
        let packets = self.lanes.iter().map(|n| n.load(Relaxed)).sum();
        (SinkReport::Counted { packets }, None)
    }
}

impl Lane for CountLane {
    fn batch(&mut self, batch: &Batch<'_>) {
        // One store per batch; only this lane writes it.
        let n = batch.packets().count() as u64;
        self.0.store(self.0.load(Relaxed) + n, Relaxed);
    }
}
