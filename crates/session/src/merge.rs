//! Several interfaces in one capture (`-i a -i b`): every source's thread copies its batches into chunks
//! and one merge thread hands them on to the sinks (one lane each) in timestamp order, so a file of several
//! interfaces is one time-ordered stream, as mergecap would make it. A single interface never comes here.
//!
//! When may the merge thread hand on a packet stamped `t`? Once no source can still deliver an older one.
//! A ring delivers its packets in stamp order, and a packet waits at most one block timeout in a partly
//! filled block; so a source's *mark* is the newest stamp it delivered, or, after a wait that brought
//! nothing, the wall clock then minus `grace` (the block timeout plus a margin). Packets up to the smallest
//! mark of the sources still running go out. One that arrives older than a packet already handed on (a
//! clock step, a block held longer than `grace`) is still written, and counted as out of order.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use capture::{Batch, Packet};
use wire::Vlan;

use crate::sink::Lane;

/// How the sources of several interfaces are merged.
#[derive(Clone, Debug, Default)]
pub struct MergeConfig {
    /// The capture's interface number (index into its interface list) of each source, in source order.
    pub interface_of: Vec<u32>,
    /// How long after a wait that brought nothing a source may still deliver an older packet: the ring's
    /// block timeout plus a margin.
    pub grace: Duration,
    /// One pcap of several interfaces: Ethernet frames become Linux SLL2 (LINKTYPE 276) records carrying
    /// their interface, with these (by interface number) as ifindex and own MAC address.
    pub sll2: Option<Vec<Sll2Interface>>,
}

/// What an SLL2 header says of an interface.
#[derive(Clone, Copy, Debug)]
pub struct Sll2Interface {
    pub ifindex: u32,
    /// The interface's MAC address: tells outgoing frames and frames for this host from the others.
    pub mac: [u8; 6],
}

/// Length of the Linux SLL2 header.
pub const SLL2_HEADER_LEN: usize = 20;
const ETH_HEADER_LEN: usize = 14;

/// Bound on chunks in flight: a merge thread that falls behind blocks the capture threads (the kernel then
/// drops and counts) instead of growing without limit.
const CHANNEL_CHUNKS: usize = 4096;
/// The merge thread wakes at least this often to tick the lanes (flushes, rotation).
const MERGE_PERIOD: Duration = Duration::from_millis(50);

pub(crate) struct Pkt {
    ts_ns: u64,
    wire_len: u32,
    off: usize,
    len: usize,
    vlan: Option<Vlan>,
}

/// One batch of one source, copied.
pub(crate) struct Chunk {
    data: Vec<u8>,
    pkts: Vec<Pkt>,
}

pub(crate) enum Msg {
    Chunk(usize, Chunk),
    /// The source will deliver nothing older than this stamp.
    Mark(usize, u64),
    Done(usize),
}

/// A capture thread's lane in a merged capture: copies each batch into a chunk for the merge thread.
pub(crate) struct FeedLane {
    stream: usize,
    tx: SyncSender<Msg>,
    /// A batch came since the last tick (the tick after an empty wait sends a mark instead).
    fresh: bool,
    grace_ns: u64,
    sll2: Option<Sll2Interface>,
    at_once: bool,
}

impl Lane for FeedLane {
    fn batch(&mut self, batch: &Batch<'_>) {
        let mut c = Chunk {
            data: Vec::with_capacity(batch.len() * 128),
            pkts: Vec::with_capacity(batch.len()),
        };
        for p in batch.packets() {
            let off = c.data.len();
            let (wire_len, vlan) = match &self.sll2 {
                None => {
                    c.data.extend_from_slice(p.data);
                    (p.wire_len, p.vlan)
                }
                Some(ifc) => (push_sll2(&mut c.data, &p, ifc), None),
            };
            c.pkts.push(Pkt {
                ts_ns: p.ts_ns,
                wire_len,
                off,
                len: c.data.len() - off,
                vlan,
            });
        }
        self.fresh = true;
        if c.pkts.is_empty() {
            return;
        }
        // A ring block is in stamp order but nothing guarantees it: the merge needs it.
        if c.pkts.windows(2).any(|w| w[1].ts_ns < w[0].ts_ns) {
            c.pkts.sort_by_key(|p| p.ts_ns);
        }
        let _ = self.tx.send(Msg::Chunk(self.stream, c));
    }

    fn tick(&mut self, _now: Instant) {
        if !std::mem::take(&mut self.fresh) {
            let mark = sys::now_ns().saturating_sub(self.grace_ns);
            let _ = self.tx.send(Msg::Mark(self.stream, mark));
        }
    }

    fn stops_at_once(&self) -> bool {
        self.at_once
    }

    fn finish(self: Box<Self>) {
        let _ = self.tx.send(Msg::Done(self.stream));
    }
}

/// Appends `p` as an SLL2 record (header, then what follows the Ethernet header; a stripped VLAN tag goes
/// back in front of it as libpcap's cooked mode does); returns the record's wire length.
fn push_sll2(out: &mut Vec<u8>, p: &Packet<'_>, ifc: &Sll2Interface) -> u32 {
    let d = p.data;
    let get = |r: std::ops::Range<usize>| d.get(r).unwrap_or(&[]);
    let dst = get(0..6);
    let src = get(6..12);
    let ethertype = get(12..14);
    // Linux packet types: HOST 0, BROADCAST 1, MULTICAST 2, OTHERHOST 3, OUTGOING 4.
    let pkttype = if src == ifc.mac {
        4
    } else if dst == [0xff; 6] {
        1
    } else if dst.first().is_some_and(|b| b & 1 == 1) {
        2
    } else if dst == ifc.mac {
        0
    } else {
        3
    };
    let protocol = match p.vlan {
        Some(v) => v.tpid.to_be_bytes(),
        None => [
            ethertype.first().copied().unwrap_or(0),
            ethertype.get(1).copied().unwrap_or(0),
        ],
    };
    out.extend_from_slice(&protocol);
    out.extend_from_slice(&[0, 0]); // reserved
    out.extend_from_slice(&ifc.ifindex.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
    out.push(pkttype);
    out.push(6); // address length
    let mut addr = [0u8; 8];
    addr[..src.len()].copy_from_slice(src);
    out.extend_from_slice(&addr);
    let mut extra = SLL2_HEADER_LEN as u32;
    if let Some(v) = p.vlan {
        out.extend_from_slice(&v.tci.to_be_bytes());
        out.extend_from_slice(ethertype);
        extra += 4;
    }
    out.extend_from_slice(d.get(ETH_HEADER_LEN..).unwrap_or(&[]));
    (p.wire_len + extra).saturating_sub(ETH_HEADER_LEN as u32)
}

/// The lanes the capture threads drive in a merged capture, and the merge thread's side.
pub(crate) fn feed_lanes(cfg: &MergeConfig, at_once: bool) -> (Vec<FeedLane>, Receiver<Msg>) {
    let (tx, rx) = std::sync::mpsc::sync_channel(CHANNEL_CHUNKS);
    let lanes = cfg
        .interface_of
        .iter()
        .enumerate()
        .map(|(stream, &ifc)| FeedLane {
            stream,
            tx: tx.clone(),
            fresh: false,
            grace_ns: cfg.grace.as_nanos() as u64,
            sll2: cfg.sll2.as_ref().map(|v| v[ifc as usize]),
            at_once,
        })
        .collect();
    (lanes, rx)
}

struct Stream {
    chunks: VecDeque<Chunk>,
    /// Next packet of the front chunk.
    pos: usize,
    mark: u64,
    done: bool,
}

impl Stream {
    fn head(&self, chunk: usize, pos: usize) -> Option<&Pkt> {
        self.chunks.get(chunk).and_then(|c| c.pkts.get(pos))
    }
}

/// The merge thread: chunks from `rx` to `lanes` in stamp order until every source is done; returns the
/// packets handed on older than one before them.
pub(crate) fn merge_loop(
    rx: Receiver<Msg>,
    interface_of: &[u32],
    mut lanes: Vec<Box<dyn Lane>>,
    out_of_order: &AtomicU64,
) {
    let mut streams: Vec<Stream> = interface_of
        .iter()
        .map(|_| Stream {
            chunks: VecDeque::new(),
            pos: 0,
            mark: 0,
            done: false,
        })
        .collect();
    let mut last_ts = 0u64;
    let apply = |streams: &mut Vec<Stream>, m: Msg| match m {
        Msg::Chunk(s, c) => {
            let st = &mut streams[s];
            st.mark = st.mark.max(c.pkts.last().map_or(0, |p| p.ts_ns));
            st.chunks.push_back(c);
        }
        Msg::Mark(s, t) => streams[s].mark = streams[s].mark.max(t),
        Msg::Done(s) => streams[s].done = true,
    };
    loop {
        match rx.recv_timeout(MERGE_PERIOD) {
            Ok(m) => {
                apply(&mut streams, m);
                while let Ok(m) = rx.try_recv() {
                    apply(&mut streams, m);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => streams.iter_mut().for_each(|s| s.done = true),
        }
        let bound = streams
            .iter()
            .filter(|s| !s.done)
            .map(|s| s.mark)
            .min()
            .unwrap_or(u64::MAX);
        let late = emit(&mut streams, interface_of, bound, &mut lanes, &mut last_ts);
        if late > 0 {
            out_of_order.fetch_add(late, Relaxed);
        }
        let now = Instant::now();
        for lane in lanes.iter_mut() {
            lane.tick(now);
        }
        if streams.iter().all(|s| s.done && s.chunks.is_empty()) {
            break;
        }
    }
    for lane in lanes {
        lane.finish();
    }
}

/// Hands on every packet stamped up to `bound`, oldest first, in batches of one interface each; returns
/// how many were older than the packet handed on before them.
fn emit(
    streams: &mut [Stream],
    interface_of: &[u32],
    bound: u64,
    lanes: &mut [Box<dyn Lane>],
    last_ts: &mut u64,
) -> u64 {
    // First the order (stream, chunk, packet), then the batches borrowing the chunks, then the cursors.
    let mut cursor: Vec<(usize, usize)> = streams.iter().map(|s| (0, s.pos)).collect();
    let mut order: Vec<(usize, usize, usize)> = Vec::new();
    loop {
        let mut best: Option<(u64, usize)> = None;
        for (i, s) in streams.iter().enumerate() {
            let (c, p) = cursor[i];
            if let Some(h) = s.head(c, p) {
                if h.ts_ns <= bound && best.is_none_or(|(t, _)| h.ts_ns < t) {
                    best = Some((h.ts_ns, i));
                }
            }
        }
        let Some((_, i)) = best else { break };
        let (c, p) = cursor[i];
        order.push((i, c, p));
        cursor[i] = if p + 1 < streams[i].chunks[c].pkts.len() {
            (c, p + 1)
        } else {
            (c + 1, 0)
        };
    }
    if order.is_empty() {
        return 0;
    }
    let mut late = 0;
    {
        let mut run: Vec<Packet<'_>> = Vec::new();
        let mut run_if = interface_of[order[0].0];
        for &(i, c, p) in &order {
            let chunk = &streams[i].chunks[c];
            let k = &chunk.pkts[p];
            if k.ts_ns < *last_ts {
                late += 1;
            }
            *last_ts = (*last_ts).max(k.ts_ns);
            let ifc = interface_of[i];
            if ifc != run_if {
                hand_on(std::mem::take(&mut run), run_if, lanes);
                run_if = ifc;
            }
            run.push(Packet {
                ts_ns: k.ts_ns,
                wire_len: k.wire_len,
                data: &chunk.data[k.off..k.off + k.len],
                vlan: k.vlan,
            });
        }
        hand_on(run, run_if, lanes);
    }
    for (s, (c, p)) in streams.iter_mut().zip(cursor) {
        s.chunks.drain(..c);
        s.pos = p;
    }
    late
}

fn hand_on(run: Vec<Packet<'_>>, interface: u32, lanes: &mut [Box<dyn Lane>]) {
    if run.is_empty() {
        return;
    }
    let batch = Batch::from_packets(run).with_interface(interface);
    for lane in lanes.iter_mut() {
        lane.batch(&batch);
    }
}
