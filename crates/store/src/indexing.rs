//! Hands written buffers to a packet indexer, off the hot path.
//!
//! The file writer passes each buffer it wrote whole, with where it landed in the file, to one
//! indexer thread at idle CPU and I/O priority, which reads its records and gives every packet
//! to a [`FileIndexer`] (the `index` crate's), then returns the buffer to the pool. At most
//! [`IN_FLIGHT`] buffers are with the indexer (the pool has that many extra buffers): when the
//! indexer is behind, the writer returns the buffer itself and that file is left unindexed
//! (counted; `ringcap index` catches up). So the indexer never holds back the capture.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::format::{own_header_len, own_record, Format};
use crate::pool::OutBuf;
use crate::stats::WriterCounters;

/// Buffers the indexer may hold at once (added to the pool when indexing is on).
pub const IN_FLIGHT: usize = 16;

/// Where one written buffer lies: in the file, and in the file's uncompressed byte stream.
/// For plain files both are the same; a compressed buffer is one or more independent frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSpan {
    pub file_off: u64,
    pub file_len: u64,
    pub raw_start: u64,
    pub raw_len: u64,
}

/// Receives the packets of the files a writer completes. Called from the indexer thread only.
pub trait FileIndexer: Send {
    /// A file begins; it will be at `path` once complete. `header` is its file header.
    fn begin(&mut self, path: &Path, header: &[u8]);
    /// The next frame of the file (in order); its packets follow.
    fn frame(&mut self, span: FrameSpan);
    /// A packet: its record's offset in the uncompressed stream, time, wire length, bytes.
    fn packet(&mut self, raw_off: u64, ts_ns: u64, wire_len: u32, data: &[u8]);
    /// The file is complete and in place (`complete`), or some of it was not seen: then nothing
    /// may be written from what was seen; `placed`: the file is in place under its name all the
    /// same (an indexer may index it from disk later, see [`FileIndexer::start`]). Returns
    /// whether an index was written.
    fn end(&mut self, complete: bool, placed: bool) -> Result<bool, String>;
    /// Called once, on the indexer thread, before anything else: `caught_up` is to be called
    /// for each file indexed later from disk (see [`CaughtUp`]); `older`: the complete files of
    /// this capture that were in its directories when it started, newest first, which an
    /// indexer may index from disk when they have no current index (an earlier run stopped
    /// before it caught up, was killed, or ran with `--no-index`).
    fn start(&mut self, _caught_up: CaughtUp, _older: Vec<PathBuf>) {}
    /// Waits for work done on other threads; returns the CPU time it took (ns).
    fn wait_all(&mut self) -> u64 {
        0
    }
}

/// Counts a file indexed later from disk, with the CPU time (ns) that took and whether it was
/// one of the older files (see [`FileIndexer::start`]) rather than one this capture left behind.
pub type CaughtUp = Arc<dyn Fn(u64, bool) + Send + Sync>;

/// Makes the indexer when the writer starts.
pub type IndexerFactory = Arc<dyn Fn() -> Box<dyn FileIndexer> + Send + Sync>;

// Nearly every message is a Frame: boxing it would allocate once per buffer for nothing.
#[allow(clippy::large_enum_variant)]
enum Msg {
    Begin(PathBuf, Arc<Vec<u8>>),
    Frame {
        buf: OutBuf,
        /// The buffer's frames (one for a plain file), in order.
        parts: Vec<Part>,
        /// Bytes after the first part's start that are the file header, not records.
        skip: usize,
    },
    End {
        complete: bool,
        placed: bool,
    },
}

/// The file writer's end of the indexer.
pub(crate) struct Feed {
    tx: Option<Sender<Msg>>,
    in_flight: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
    /// Something of the open file was not handed on.
    gap: bool,
    /// Uncompressed bytes of the open file handed on so far.
    raw_pos: u64,
}

impl Feed {
    /// Starts the indexer thread; it returns buffers to `empty`. `older`: see
    /// [`FileIndexer::start`].
    pub fn start(
        indexer: Box<dyn FileIndexer>,
        older: Vec<PathBuf>,
        format: Format,
        empty: Sender<OutBuf>,
        counters: Arc<WriterCounters>,
    ) -> std::io::Result<Feed> {
        let (tx, rx) = mpsc::channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let flight = in_flight.clone();
        counters.indexing.store(true, Relaxed);
        let thread = std::thread::Builder::new()
            .name("ringcap-index".into())
            .spawn(move || {
                sys::idle_priority();
                run(indexer, older, format, rx, empty, flight, counters)
            })?;
        Ok(Feed {
            tx: Some(tx),
            in_flight,
            thread: Some(thread),
            gap: false,
            raw_pos: 0,
        })
    }

    fn send(&mut self, m: Msg) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(m);
        }
    }

    pub fn begin(&mut self, path: &Path, header: Arc<Vec<u8>>) {
        self.gap = false;
        self.raw_pos = 0;
        self.send(Msg::Begin(path.to_path_buf(), header));
    }

    /// Something of the open file will not reach the indexer.
    pub fn gap(&mut self) {
        self.gap = true;
    }

    /// Offers a buffer whose bytes `from..` were written at `file_off` (`file_len` bytes in the
    /// file). Gives the buffer back if the indexer is busy (the file is then left unindexed);
    /// `None` when the indexer took it.
    pub fn offer(
        &mut self,
        buf: OutBuf,
        from: usize,
        file_off: u64,
        file_len: u64,
        compressed: bool,
        skip: usize,
    ) -> Option<OutBuf> {
        let raw_len = (buf.len - from) as u64;
        // Plain files: the stream is the file; compressed: raw bytes count up frame by frame.
        let raw_start = if compressed { self.raw_pos } else { file_off };
        self.raw_pos = raw_start + raw_len;
        if self.gap || self.in_flight.load(Relaxed) >= IN_FLIGHT || self.tx.is_none() {
            self.gap = true;
            return Some(buf);
        }
        self.in_flight.fetch_add(1, Relaxed);
        let parts = if compressed && !buf.frame_ends.is_empty() {
            // `from` is 0: a compressed buffer is written whole.
            let (mut raw_from, mut out_from) = (0, 0);
            buf.cuts
                .iter()
                .zip(&buf.frame_ends)
                .map(|(&raw_to, &out_to)| {
                    let p = Part {
                        span: FrameSpan {
                            file_off: file_off + out_from as u64,
                            file_len: (out_to - out_from) as u64,
                            raw_start: raw_start + raw_from as u64,
                            raw_len: (raw_to - raw_from) as u64,
                        },
                        raw_from,
                        raw_to,
                    };
                    (raw_from, out_from) = (raw_to, out_to);
                    p
                })
                .collect()
        } else {
            let span = FrameSpan {
                file_off,
                file_len,
                raw_start,
                raw_len,
            };
            vec![Part {
                span,
                raw_from: from,
                raw_to: buf.len,
            }]
        };
        self.send(Msg::Frame { buf, parts, skip });
        None
    }

    /// The open file is closed: `placed` when it was renamed into place.
    pub fn end(&mut self, placed: bool) {
        let complete = placed && !self.gap;
        self.send(Msg::End { complete, placed });
    }

    /// Waits until every index is written.
    pub fn finish(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The indexer thread: reads the records of each buffer, including a plain file's record that
/// spills from one buffer into the next.
fn run(
    mut ix: Box<dyn FileIndexer>,
    older: Vec<PathBuf>,
    format: Format,
    rx: Receiver<Msg>,
    empty: Sender<OutBuf>,
    in_flight: Arc<AtomicUsize>,
    counters: Arc<WriterCounters>,
) {
    let mut open = false;
    let mut broken = false;
    // The start of a record cut by the end of the previous buffer, and its stream offset.
    let mut carry: Vec<u8> = Vec::new();
    let mut carry_off = 0u64;
    let c = counters.clone();
    ix.start(
        Arc::new(move |cpu_ns, older| {
            let files = if older {
                &c.older_files_indexed
            } else {
                &c.files_caught_up
            };
            files.fetch_add(1, Relaxed);
            c.catch_up_cpu_ns.fetch_add(cpu_ns, Relaxed);
        }),
        older,
    );
    for m in rx {
        match m {
            Msg::Begin(path, header) => {
                if open {
                    let _ = ix.end(false, false);
                    counters.files_unindexed.fetch_add(1, Relaxed);
                }
                ix.begin(&path, &header);
                (open, broken) = (true, false);
                carry.clear();
            }
            Msg::Frame {
                mut buf,
                parts,
                mut skip,
            } => {
                if open && !broken {
                    counters.index_packets.fetch_add(buf.packets, Relaxed);
                    for p in parts {
                        ix.frame(p.span);
                        let at = Walk {
                            from: p.raw_from,
                            to: p.raw_to,
                            skip: std::mem::take(&mut skip),
                            span: p.span,
                        };
                        broken = !walk(&mut *ix, format, &buf, at, &mut carry, &mut carry_off);
                        if broken {
                            break;
                        }
                    }
                }
                buf.reset(0);
                let _ = empty.send(buf);
                in_flight.fetch_sub(1, Relaxed);
            }
            Msg::End { complete, placed } => {
                if !open {
                    continue;
                }
                open = false;
                let ok = complete && !broken && carry.is_empty();
                match ix.end(ok, placed) {
                    Ok(true) => counters.files_indexed.fetch_add(1, Relaxed),
                    _ => counters.files_unindexed.fetch_add(1, Relaxed),
                };
            }
        }
    }
    if open {
        let _ = ix.end(false, false);
        counters.files_unindexed.fetch_add(1, Relaxed);
    }
    let elsewhere = ix.wait_all();
    counters
        .index_cpu_ns
        .store(sys::thread_cpu_ns() + elsewhere, Relaxed);
}

/// One frame of a buffer: where it lies, and which bytes of the buffer it holds.
struct Part {
    span: FrameSpan,
    raw_from: usize,
    raw_to: usize,
}

/// Which part of a buffer holds records, and where it lies.
struct Walk {
    from: usize,
    to: usize,
    skip: usize,
    span: FrameSpan,
}

/// Gives the packets of `buf[from + skip..to]` to the indexer; false if the records do not line up.
fn walk(
    ix: &mut dyn FileIndexer,
    format: Format,
    buf: &OutBuf,
    w: Walk,
    carry: &mut Vec<u8>,
    carry_off: &mut u64,
) -> bool {
    let span = w.span;
    let data = &buf.filled()[w.from..w.to];
    let mut at = w.skip;
    if !carry.is_empty() {
        if *carry_off + carry.len() as u64 != span.raw_start {
            return false;
        }
        // Complete the record begun in the previous buffer: first its header, then the rest.
        let need_header = own_header_len(format).saturating_sub(carry.len());
        let take = need_header.min(data.len());
        carry.extend_from_slice(&data[..take]);
        at = take;
        if carry.len() < own_header_len(format) {
            return true;
        }
        let total = match format {
            Format::Pcap { .. } => {
                16 + u32::from_ne_bytes(carry[8..12].try_into().unwrap()) as usize
            }
            Format::PcapNg => u32::from_ne_bytes(carry[4..8].try_into().unwrap()) as usize,
        };
        let more = total.saturating_sub(carry.len()).min(data.len() - at);
        carry.extend_from_slice(&data[at..at + more]);
        at += more;
        if carry.len() < total {
            return true;
        }
        match own_record(format, carry) {
            Some(r) => {
                if let Some((ts, wire, range)) = r.packet {
                    ix.packet(*carry_off, ts, wire, &carry[range]);
                }
            }
            None => return false,
        }
        carry.clear();
    }
    while at < data.len() {
        match own_record(format, &data[at..]) {
            Some(r) => {
                if let Some((ts, wire, range)) = r.packet {
                    let rec = &data[at..at + r.len];
                    ix.packet(span.raw_start + at as u64, ts, wire, &rec[range]);
                }
                at += r.len;
            }
            None => {
                // Only a plain file's records spill into the next buffer.
                carry.extend_from_slice(&data[at..]);
                *carry_off = span.raw_start + at as u64;
                break;
            }
        }
    }
    true
}
