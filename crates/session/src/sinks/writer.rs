//! The capture file or file series: each capture thread encodes into its own buffers (a
//! [`store::Producer`]); the store's writer thread writes them. Flushing, rotation (`-C`, `-G`, SIGHUP)
//! and retention are the store's business: the lane only ticks it.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use capture::Batch;
use store::{CaptureWriter, IfStats, Producer, WriterCounters};

use crate::sink::{Lane, Sink, SinkReport, Totals};

/// A [`CaptureWriter`] as a sink.
pub struct WriterSink {
    writer: CaptureWriter,
    counters: Arc<WriterCounters>,
}

impl WriterSink {
    pub fn new(writer: CaptureWriter) -> WriterSink {
        let counters = writer.counters();
        WriterSink { writer, counters }
    }

    /// Start a new file on SIGHUP (file mode), as with logs; pending while no buffer is free.
    pub fn rotate_on_sighup(&self) -> std::io::Result<()> {
        let flag: Arc<AtomicBool> = self.writer.rotation_request();
        signal_hook::flag::register(signal_hook::consts::SIGHUP, flag).map(drop)
    }

    /// The writer's live counters (packets, storage drops, backlog, compression), for a stats printer.
    pub fn counters(&self) -> Arc<WriterCounters> {
        Arc::clone(&self.counters)
    }
}

struct WriterLane(Producer);

impl Sink for WriterSink {
    fn lane(&mut self) -> anyhow::Result<Box<dyn Lane>> {
        Ok(Box::new(WriterLane(self.writer.producer())))
    }

    fn failed(&self) -> bool {
        self.counters.snapshot().failed
    }

    fn finish(self: Box<Self>, t: &Totals) -> (SinkReport, Option<anyhow::Error>) {
        let if_stats = IfStats {
            ifrecv: Some(t.kernel.packets),
            ifdrop: Some(t.kernel.drops),
            filter_accept: Some(t.kernel.packets),
            os_drop: Some(t.kernel.drops),
            usr_deliv: Some(t.delivered),
            start_ns: Some(t.start_ns),
            end_ns: Some(t.end_ns),
        };
        let levels = self.counters.level_histogram();
        let (stats, err) = match self.writer.finish(Some(if_stats)) {
            Ok(s) => (s, None),
            Err(e) => (self.counters.snapshot(), Some(anyhow::Error::new(e))),
        };
        (SinkReport::Written { stats, levels }, err)
    }
}

impl Lane for WriterLane {
    #[inline]
    fn batch(&mut self, batch: &Batch<'_>) {
        for p in batch.packets() {
            self.0.write_packet(p.ts_ns, p.wire_len, p.data, p.vlan);
        }
    }

    fn tick(&mut self, now: Instant) {
        self.0.tick(now, sys::now_ns());
    }

    fn finish(self: Box<Self>) {
        self.0.finish();
    }
}
