//! One `tcpdump -n` style line per packet on stdout.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capture::Batch;
use wire::LinkType;

use crate::sink::{Lane, Sink, SinkReport, Totals};
use crate::stop::Stop;

/// How long printed lines may wait in stdout's buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// Prints every packet; a closed pipe (`ringcap ... | head`) stops the session, as it stops tcpdump.
pub struct PrintSink {
    linktype: LinkType,
    stop: Stop,
    lines: Vec<Arc<AtomicU64>>,
}

impl PrintSink {
    /// Lines for frames of `linktype`; `stop` is raised when stdout is closed.
    pub fn new(linktype: LinkType, stop: Stop) -> PrintSink {
        PrintSink {
            linktype,
            stop,
            lines: Vec::new(),
        }
    }
}

struct PrintLane {
    linktype: LinkType,
    stop: Stop,
    line: String,
    flush_at: Instant,
    lines: Arc<AtomicU64>,
}

impl Sink for PrintSink {
    fn lane(&mut self) -> anyhow::Result<Box<dyn Lane>> {
        let lines = Arc::new(AtomicU64::new(0));
        self.lines.push(Arc::clone(&lines));
        Ok(Box::new(PrintLane {
            linktype: self.linktype,
            stop: self.stop.clone(),
            line: String::with_capacity(256),
            flush_at: Instant::now() + FLUSH_EVERY,
            lines,
        }))
    }

    fn finish(self: Box<Self>, _: &Totals) -> (SinkReport, Option<anyhow::Error>) {
        let _ = std::io::stdout().flush();
        let lines = self.lines.iter().map(|n| n.load(Relaxed)).sum();
        (SinkReport::Printed { lines }, None)
    }
}

impl Lane for PrintLane {
    fn batch(&mut self, batch: &Batch<'_>) {
        let mut out = std::io::stdout().lock();
        let mut n = 0;
        for p in batch.packets() {
            self.line.clear();
            let _ = wire::format_line(
                &mut self.line,
                p.ts_ns,
                p.data,
                p.record_wire_len(),
                self.linktype,
            );
            self.line.push('\n');
            n += 1;
            if let Err(e) = out.write_all(self.line.as_bytes()) {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    self.stop.request_stop();
                }
            }
        }
        self.lines.store(self.lines.load(Relaxed) + n, Relaxed);
    }

    fn tick(&mut self, now: Instant) {
        if now >= self.flush_at {
            let _ = std::io::stdout().flush();
            self.flush_at = now + FLUSH_EVERY;
        }
    }

    fn stops_at_once(&self) -> bool {
        true
    }
}
