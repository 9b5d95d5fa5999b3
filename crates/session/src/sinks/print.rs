//! One `tcpdump -n` style line per packet on stdout.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capture::Batch;
use wire::LinkType;

use crate::sink::{Lane, Sink, SinkReport, Totals};
use crate::stop::Stop;

/// How long printed lines may wait in stdout's buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// Prints every packet; a closed pipe (`ringcap ... | head`) stops the session, as it stops tcpdump. Any
/// other output error (a closed SSH session gives EIO, a full disk ENOSPC) stops it too and is the
/// session's error: a capture nobody can see must not run on in promiscuous mode.
pub struct PrintSink {
    linktype: LinkType,
    stop: Stop,
    lines: Vec<Arc<AtomicU64>>,
    error: Arc<Mutex<Option<std::io::Error>>>,
}

impl PrintSink {
    /// Lines for frames of `linktype`; `stop` is raised when stdout is closed.
    pub fn new(linktype: LinkType, stop: Stop) -> PrintSink {
        PrintSink {
            linktype,
            stop,
            lines: Vec::new(),
            error: Arc::default(),
        }
    }
}

struct PrintLane {
    linktype: LinkType,
    stop: Stop,
    line: String,
    flush_at: Instant,
    lines: Arc<AtomicU64>,
    error: Arc<Mutex<Option<std::io::Error>>>,
}

impl PrintLane {
    /// Stops the session on an output error; the first one other than a closed pipe is reported.
    fn failed(&self, e: std::io::Error) {
        self.stop.request_stop();
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let mut first = self.error.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(e);
        }
    }
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
            error: Arc::clone(&self.error),
        }))
    }

    fn finish(self: Box<Self>, _: &Totals) -> (SinkReport, Option<anyhow::Error>) {
        let flushed = std::io::stdout().flush();
        let lines = self.lines.iter().map(|n| n.load(Relaxed)).sum();
        let mut first = self.error.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Err(e) = flushed {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                first.get_or_insert(e);
            }
        }
        let error = first.map(|e| {
            anyhow::anyhow!("cannot write packet lines to standard output ({e}): stopped capturing")
        });
        (SinkReport::Printed { lines }, error)
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
            if let Err(e) = out.write_all(self.line.as_bytes()) {
                self.failed(e);
                break;
            }
            n += 1;
        }
        self.lines.store(self.lines.load(Relaxed) + n, Relaxed);
    }

    fn tick(&mut self, now: Instant) {
        if now >= self.flush_at {
            if let Err(e) = std::io::stdout().flush() {
                self.failed(e);
            }
            self.flush_at = now + FLUSH_EVERY;
        }
    }

    fn stops_at_once(&self) -> bool {
        true
    }
}
