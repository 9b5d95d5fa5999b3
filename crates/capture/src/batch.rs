//! [`Batch`]: what a source hands over at once (a ring block, a recvmmsg batch, packets held in memory),
//! readable as often as there are sinks. [`BatchSource`]: anything that yields batches; the capture
//! session drives every kind through it.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use crate::copy::CopySource;
use crate::counters::{BatchTally, Counters};
use crate::error::CaptureError;
use crate::packet::Packet;
use crate::ring::{Block, Packets};
use crate::xdp::XdpBatch;

/// One batch of packets, borrowed from its source until dropped (a ring block goes back to the kernel then).
pub struct Batch<'a> {
    kind: Kind<'a>,
    /// Packets handed out by [`Batch::packets`] (the session's `-c` cut).
    take: usize,
    /// Which of the capture's interfaces the packets came from (0 with one interface).
    interface: u32,
}

enum Kind<'a> {
    Block(Block<'a>),
    /// The source, the message count, and what the first pass over them counted.
    Copy(&'a CopySource, usize, Cell<Option<BatchTally>>),
    Memory(Vec<Packet<'a>>),
    Xdp(XdpBatch<'a>),
}

impl<'a> Batch<'a> {
    pub(crate) fn xdp(b: XdpBatch<'a>) -> Batch<'a> {
        let take = b.len();
        Batch {
            kind: Kind::Xdp(b),
            take,
            interface: 0,
        }
    }

    pub(crate) fn block(b: Block<'a>) -> Batch<'a> {
        let take = b.len();
        Batch {
            kind: Kind::Block(b),
            take,
            interface: 0,
        }
    }

    pub(crate) fn copy(src: &'a CopySource, n: usize) -> Batch<'a> {
        Batch {
            kind: Kind::Copy(src, n, Cell::new(None)),
            take: n,
            interface: 0,
        }
    }

    /// A batch of packets that live elsewhere (a source in memory, a file read back through the sinks).
    pub fn from_packets(packets: Vec<Packet<'a>>) -> Batch<'a> {
        let take = packets.len();
        Batch {
            kind: Kind::Memory(packets),
            take,
            interface: 0,
        }
    }

    /// The same batch, said to come from interface number `id` of the capture (a merged capture of
    /// several interfaces hands out batches of one interface each).
    pub fn with_interface(mut self, id: u32) -> Batch<'a> {
        self.interface = id;
        self
    }

    /// The capture's interface number the packets came from (0 with one interface).
    pub fn interface(&self) -> u32 {
        self.interface
    }

    /// Packets the source put in this batch.
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Block(b) => b.len(),
            Kind::Copy(_, n, _) => *n,
            Kind::Memory(v) => v.len(),
            Kind::Xdp(b) => b.len(),
        }
    }

    /// True when the batch holds no packets.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hand out only the first `n` packets from now on (a packet count limit such as `-c`). The source's
    /// counters still see every packet of the batch.
    pub fn limit(&mut self, n: usize) {
        if n < self.take {
            // The first pass is what the source's counters see: make it a whole one.
            self.packets().for_each(drop);
            self.take = n;
        }
    }

    /// The packets (at most the limit), in arrival order; call it once per sink.
    #[inline]
    pub fn packets(&self) -> BatchPackets<'_> {
        let inner = match &self.kind {
            Kind::Block(b) => Inner::Block(b.packets()),
            Kind::Copy(src, n, counted) => {
                let first_pass = counted.get().is_none();
                if first_pass {
                    counted.set(Some(BatchTally::default()));
                }
                Inner::Copy {
                    src,
                    at: 0,
                    n: *n,
                    tally: BatchTally::default(),
                    sink: first_pass.then_some(counted),
                }
            }
            Kind::Memory(v) => Inner::Memory(v.iter()),
            Kind::Xdp(b) => Inner::Xdp(b, 0),
        };
        BatchPackets {
            inner,
            left: self.take,
        }
    }
}

/// Iterator over the packets of a [`Batch`].
pub struct BatchPackets<'b> {
    inner: Inner<'b>,
    left: usize,
}

enum Inner<'b> {
    Block(Packets<'b>),
    Copy {
        src: &'b CopySource,
        at: usize,
        n: usize,
        tally: BatchTally,
        /// Where the first pass leaves its count.
        sink: Option<&'b Cell<Option<BatchTally>>>,
    },
    Memory(std::slice::Iter<'b, Packet<'b>>),
    Xdp(&'b XdpBatch<'b>, usize),
}

impl<'b> Iterator for BatchPackets<'b> {
    type Item = Packet<'b>;

    #[inline]
    fn next(&mut self) -> Option<Packet<'b>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match &mut self.inner {
            Inner::Block(p) => p.next(),
            Inner::Copy {
                src, at, n, tally, ..
            } => (*at < *n).then(|| {
                let p = src.packet(*at);
                *at += 1;
                tally.packets += 1;
                tally.wire_bytes += u64::from(p.wire_len);
                tally.captured_bytes += p.data.len() as u64;
                p
            }),
            Inner::Memory(it) => it.next().copied(),
            Inner::Xdp(b, i) => (*i < b.len()).then(|| {
                let p = b.packet(*i);
                *i += 1;
                p
            }),
        }
    }

    /// `for_each` and friends: the source kind is matched once per batch, not once per packet, so a
    /// ring block's walk inlines into the sink's loop. Measured with `perf`: `next` called per packet
    /// through the enum was 14 % of a disk capture's CPU, with its result passed through the stack.
    #[inline]
    fn fold<B, F: FnMut(B, Packet<'b>) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        if let Inner::Block(p) = &mut self.inner {
            while self.left > 0 {
                let Some(packet) = p.next() else { break };
                self.left -= 1;
                acc = f(acc, packet);
            }
            return acc;
        }
        for packet in self {
            acc = f(acc, packet);
        }
        acc
    }
}

impl Drop for BatchPackets<'_> {
    fn drop(&mut self) {
        if let Inner::Copy {
            sink: Some(sink),
            tally,
            ..
        } = &self.inner
        {
            sink.set(Some(*tally));
        }
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if let Kind::Copy(src, n, counted) = &self.kind {
            if counted.get().is_none() {
                // Nobody read the batch: still count what arrived.
                self.packets().for_each(drop);
            }
            let tally = counted.get().unwrap_or_default();
            debug_assert!(tally.packets as usize <= *n);
            src.count_batch(&tally);
        }
    }
}

/// Anything that yields batches of packets: the ring, AF_XDP sockets, the copy source, a source in memory (tests).
pub trait BatchSource: Send {
    /// Wait up to `timeout` for packets; `Ok(None)` when none arrived.
    fn next_batch(&mut self, timeout: Duration) -> Result<Option<Batch<'_>>, CaptureError>;

    /// Live counters, shareable with a stats thread; final once the source is dropped.
    fn counters(&self) -> Arc<Counters>;
}

/// A frame held in memory, for [`MemorySource`].
#[derive(Clone, Debug)]
pub struct Frame {
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: u64,
    /// Length on the wire (≥ `data.len()`).
    pub wire_len: u32,
    /// The bytes, from the link-layer header on.
    pub data: Vec<u8>,
    /// A tag as the kernel would report it in metadata.
    pub vlan: Option<wire::Vlan>,
}

/// Packets from memory in batches of a fixed size: drives the session and its sinks without a kernel
/// (tests, or a file read back through the same sinks). Counted like a live source.
pub struct MemorySource {
    frames: Vec<Frame>,
    next: usize,
    batch: usize,
    counters: Arc<Counters>,
}

impl MemorySource {
    /// `frames` handed out `batch` at a time (at least one).
    pub fn new(frames: Vec<Frame>, batch: usize) -> MemorySource {
        MemorySource {
            frames,
            next: 0,
            batch: batch.max(1),
            counters: Arc::new(Counters::default()),
        }
    }

    /// True once every frame was handed out.
    pub fn is_done(&self) -> bool {
        self.next >= self.frames.len()
    }
}

impl BatchSource for MemorySource {
    fn next_batch(&mut self, timeout: Duration) -> Result<Option<Batch<'_>>, CaptureError> {
        if self.is_done() {
            // Nothing will arrive: behave like an idle interface.
            std::thread::sleep(timeout.min(Duration::from_millis(10)));
            return Ok(None);
        }
        let end = (self.next + self.batch).min(self.frames.len());
        let frames = &self.frames[self.next..end];
        self.next = end;
        let mut tally = BatchTally::default();
        let packets: Vec<Packet<'_>> = frames
            .iter()
            .map(|f| {
                tally.packets += 1;
                tally.wire_bytes += u64::from(f.wire_len);
                tally.captured_bytes += f.data.len() as u64;
                Packet {
                    ts_ns: f.ts_ns,
                    wire_len: f.wire_len,
                    data: &f.data,
                    vlan: f.vlan,
                }
            })
            .collect();
        self.counters.add_batch(&tally);
        Ok(Some(Batch::from_packets(packets)))
    }

    fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }
}
