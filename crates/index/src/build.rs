//! Building the index of one capture file from its packets, in file order.

use std::collections::HashMap;

use wire::LinkType;

use crate::file::{
    encode_frames, put_varint, Compression, Frame, Header, BY_B_LEN, DIR_STEP, FLOW_LEN,
};
use crate::flows::FlowStat;
use crate::key::{FlowKey, KIND_IP, TUNNEL_SHIFT};
use crate::names::{Collector, FlowNames};

mod frame_flows;
use frame_flows::{FrameFlow, FrameFlows};

/// Packets one index holds at most: with [`MAX_FLOWS`] this bounds the builder's memory
/// (while logging: 32 bytes per packet of a plain file, or 64 per flow and frame of a
/// compressed one, at most [`MAX_FRAME_FLOWS`]: 128 MiB either way; ~64 per flow in the index
/// and ~100 in the flow table: under 200 MiB). A file with more is indexed up to the frame where the limit was reached;
/// queries scan the rest.
pub const MAX_PACKETS: usize = 4 << 20;
/// (Flow, frame) entries of a compressed file's IPv4 packets one index holds at most: as many
/// bytes as [`MAX_PACKETS`] packets of a plain file.
const MAX_FRAME_FLOWS: usize = MAX_PACKETS / 2;
/// Flows one index holds at most.
pub const MAX_FLOWS: usize = 512 << 10;
/// A logged packet's place: its position (record offset or frame number) in the bits from
/// [`POS_SHIFT`] up, then whether it went from endpoint `a` to `b`, then its wire length
/// (saturated at [`LEN_MASK`]). Sorting places keeps the position order.
const POS_SHIFT: u32 = 24;
const A_TO_B: u64 = 1 << 23;
const LEN_MASK: u64 = A_TO_B - 1;
/// Positions must fit the place's 40 bits: a file whose records lie past 1 TiB is indexed up to
/// there (as if a limit were reached).
const MAX_POS: u64 = 1 << (64 - POS_SHIFT);

#[inline]
fn place(pos: u64, a_to_b: bool, wire_len: u32) -> u64 {
    pos << POS_SHIFT | if a_to_b { A_TO_B } else { 0 } | u64::from(wire_len).min(LEN_MASK)
}

/// What [`Builder::finish`] makes: the index bytes and the file's flows for the flow table.
pub struct Built {
    pub index: Vec<u8>,
    pub flows: Vec<FlowStat>,
    pub names: Names,
}

/// The names of a file's flows ([`crate::names`]), for the flow table.
#[derive(Debug, Default)]
pub struct Names {
    /// By flow: the index in [`Built::flows`], ascending.
    pub flows: Vec<(u32, Box<FlowNames>)>,
    /// Packets that looked like they carry a name but did not parse (see
    /// [`Collector::unread`]).
    pub unread: u64,
    /// Names left out because the file's budget was spent.
    pub dropped: u64,
}

/// Collects the packets of one file and writes its index.
pub struct Builder {
    prelude: Vec<u8>,
    compression: Compression,
    /// IPv4 packets (nearly all): their 128-bit flow key, place (see [`place`]) and timestamp, in
    /// file order; grouped into flows by one sort at the end. Appending is sequential: a hash
    /// table of 100 k flows took ~170 ns per packet in cache misses (37 % of `ringcap index`'s
    /// user time, perf). 32 bytes, as `(u128, u64)` was with its padding.
    /// (Plain files only: a compressed file's are counted by frame, in `frame_flows`.)
    v4_log: Vec<(u128, u64, u64)>,
    /// Compressed files: the IPv4 packets of the current frame counted by flow, and those of
    /// the frames before, one entry per flow and frame (see [`frame_flows`]).
    frame_flows: FrameFlows,
    v4_frame_flows: Vec<FrameFlow>,
    /// IPv4 packets counted in `frame_flows` and `v4_frame_flows`.
    v4_counted: usize,
    committed_v4_counted: usize,
    /// Other packets (IPv6, non-IP): flow ids by key, as the table stays small.
    flows: HashMap<FlowKey, u32, ahash::RandomState>,
    keys: Vec<FlowKey>,
    /// Per packet, in file order: its flow and its position (see [`Builder::packet`]); for
    /// packets of `flows`, also their timestamp and [`place`] (direction and length).
    log_flow: Vec<u32>,
    log_off: Vec<u64>,
    log_ts: Vec<u64>,
    log_place: Vec<u64>,
    frames: Vec<Frame>,
    /// Log lengths at the start of the current frame (what is kept if a limit is reached).
    committed: usize,
    committed_v4: usize,
    /// A limit was reached: frames from `frames.len()` on are not indexed.
    full: bool,
    /// See [`crate::file::Header::read_whole`].
    read_whole: bool,
    /// The flows' names, read from the few packets that can carry one.
    names: Collector,
}

impl Builder {
    /// `prelude`: the file's header bytes (pcap header, or pcapng SHB and IDBs) as in the
    /// uncompressed stream; `compression`: the capture file's.
    pub fn new(prelude: Vec<u8>, compression: Compression) -> Builder {
        Builder::with_capacity(prelude, compression, 0, 0)
    }

    /// As [`Self::new`], sized for `flows` and `packets` (a capture's files are alike: sizing the
    /// next one like the last saves the rehashing and regrowing).
    pub fn with_capacity(
        prelude: Vec<u8>,
        compression: Compression,
        flows: usize,
        packets: usize,
    ) -> Builder {
        let (flows, packets) = (flows.min(MAX_FLOWS), packets.min(MAX_PACKETS));
        let hasher = ahash::RandomState::with_seeds(1, 2, 3, 4);
        Builder {
            prelude,
            compression,
            v4_log: Vec::with_capacity(if compression == Compression::None {
                packets
            } else {
                0
            }),
            frame_flows: FrameFlows::default(),
            v4_frame_flows: Vec::with_capacity(if compression == Compression::None {
                0
            } else {
                packets / 4
            }),
            v4_counted: 0,
            committed_v4_counted: 0,
            flows: HashMap::with_hasher(hasher),
            keys: Vec::with_capacity(flows),
            log_flow: Vec::new(),
            log_off: Vec::new(),
            log_ts: Vec::new(),
            log_place: Vec::new(),
            frames: Vec::new(),
            committed: 0,
            committed_v4: 0,
            full: false,
            read_whole: false,
            names: Collector::default(),
        }
    }

    /// A new frame begins: its place in the file and in the uncompressed stream.
    pub fn frame(&mut self, file_off: u64, file_len: u64, raw_start: u64, raw_len: u64) {
        if self.full {
            return;
        }
        // Everything filed so far is of whole frames.
        self.frame_flows.drain_into(&mut self.v4_frame_flows);
        self.committed = self.log_off.len();
        self.committed_v4 = self.v4_log.len();
        self.committed_v4_counted = self.v4_counted;
        if self.packets() >= MAX_PACKETS || self.keys.len() >= MAX_FLOWS {
            self.full = true;
            return;
        }
        self.frames.push(Frame {
            file_off,
            file_len,
            raw_start,
            raw_len,
            rec_start: raw_start + raw_len,
            first_ts: u64::MAX,
            last_ts: 0,
            packets: 0,
        });
    }

    /// Flows and packets filed so far.
    pub fn sizes(&self) -> (usize, usize) {
        (self.keys.len(), self.packets())
    }

    fn packets(&self) -> usize {
        self.log_off.len() + self.v4_log.len() + self.v4_counted
    }

    /// File bytes covered by the frames so far.
    pub fn covered(&self) -> u64 {
        self.frames.last().map_or(0, |f| f.file_off + f.file_len)
    }

    /// Sets the frames' uncompressed lengths once they are known (indexing a file: a frame's
    /// length is known only when the next one begins).
    pub fn set_raw_lens(&mut self, lens: &[u64]) {
        for (f, &l) in self.frames.iter_mut().zip(lens) {
            if f.packets == 0 {
                f.rec_start = f.raw_start + l;
            }
            f.raw_len = l;
        }
    }

    /// Marks frame `k` (0-based, already begun) as damaged: it did not decode, so it holds no
    /// packets the index knows of (see [`Frame::is_damaged`]).
    pub fn mark_damaged(&mut self, k: usize) {
        if let Some(f) = self.frames.get_mut(k) {
            debug_assert_eq!(f.packets, 0);
            f.last_ts = u64::MAX;
        }
    }

    /// The file's pieces cannot be read alone: queries read it whole when they want any of it.
    pub fn set_read_whole(&mut self) {
        self.read_whole = true;
    }

    /// Whether a limit stopped the index before the end of the file.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// One packet of the current frame: where its record starts in the uncompressed stream, its
    /// time, its length on the wire and its captured bytes.
    #[inline]
    pub fn packet(
        &mut self,
        raw_off: u64,
        ts_ns: u64,
        wire_len: u32,
        linktype: Option<LinkType>,
        data: &[u8],
    ) {
        if self.full {
            return;
        }
        if raw_off >= MAX_POS {
            return self.stop_at_current_frame();
        }
        let Some(f) = self.frames.last_mut() else {
            return;
        };
        // The frame's first record: until then `rec_start` is its end (no record starts in it),
        // which is not yet known when a file is indexed after the fact (its length is 0 then).
        if f.packets == 0 {
            f.rec_start = raw_off;
        }
        f.first_ts = f.first_ts.min(ts_ns);
        f.last_ts = f.last_ts.max(ts_ns);
        f.packets += 1;
        // What a posting holds: the record's offset in a plain file, which a query reads alone;
        // the frame's number in a compressed one, which a query decompresses whole anyway (and a
        // frame number takes 1 byte as a delta where an offset takes 4).
        let pos = if self.compression == Compression::None {
            raw_off
        } else {
            self.frames.len() as u64 - 1
        };
        // A link type the key's parser does not know is filed with the packets that have no IP
        // header: a candidate of every query, so that libpcap decides (bytes of 802.11 or PPP
        // read as Ethernet could look like an IP header of other hosts).
        let Some(linktype) = linktype else {
            return self.log_other(FlowKey::default(), pos, ts_ns, place(0, true, wire_len));
        };
        if let Some((k, a_to_b, l4)) = FlowKey::compact_v4_l4(data, linktype) {
            self.names.offer(data, l4, || FlowKey::from_compact_v4(k));
            return self.log_v4(k, pos, a_to_b, wire_len, ts_ns);
        }
        let (key, a_to_b, l4) = FlowKey::directed_l4(data, linktype);
        if let Some(l4) = l4 {
            self.names.offer(data, l4, || key);
        }
        if let Some(k) = key.compact_v4() {
            return self.log_v4(k, pos, a_to_b, wire_len, ts_ns);
        }
        self.log_other(key, pos, ts_ns, place(0, a_to_b, wire_len));
    }

    /// Files a packet of `flows` (not an IPv4 pair).
    fn log_other(&mut self, key: FlowKey, pos: u64, ts_ns: u64, place: u64) {
        let next = self.keys.len() as u32;
        let id = *self.flows.entry(key).or_insert(next);
        if id == next {
            self.keys.push(key);
        }
        self.log_flow.push(id);
        self.log_off.push(pos);
        self.log_ts.push(ts_ns);
        self.log_place.push(place);
        // Both logs together, within a frame too: one compressed frame can hold any number of
        // packets (1 GiB of zeroed records is 67 M of them).
        if self.keys.len() > MAX_FLOWS || self.packets() >= MAX_PACKETS {
            self.stop_at_current_frame();
        }
    }

    /// Files a packet of an IPv4 pair (`pos`: as in [`Self::packet`]).
    #[inline]
    fn log_v4(&mut self, key: u128, pos: u64, a_to_b: bool, wire_len: u32, ts_ns: u64) {
        if self.compression == Compression::None {
            self.v4_log.push((key, place(pos, a_to_b, wire_len), ts_ns));
        } else {
            // A frame number (see `packet`) below 2^32: a frame is at least 64 KiB.
            self.frame_flows
                .add(key, pos as u32, ts_ns, a_to_b, wire_len);
            self.v4_counted += 1;
        }
        if self.packets() >= MAX_PACKETS
            || self.v4_frame_flows.len() + self.frame_flows.len() >= MAX_FRAME_FLOWS
        {
            self.stop_at_current_frame();
        }
    }

    /// A limit was reached inside a frame: forget that frame and everything after it.
    fn stop_at_current_frame(&mut self) {
        self.full = true;
        self.frames.pop();
        self.log_flow.truncate(self.committed);
        self.log_off.truncate(self.committed);
        self.log_ts.truncate(self.committed);
        self.log_place.truncate(self.committed);
        self.v4_log.truncate(self.committed_v4);
        self.frame_flows.forget();
        self.v4_counted = self.committed_v4_counted;
        // Flows seen only in the dropped frame keep an entry with no packets: harmless.
    }

    /// The index bytes and the flows. `identity`: the file's size and checksums (see
    /// [`crate::file::Identity`]).
    pub fn finish(mut self, identity: crate::file::Identity) -> Built {
        if self.full {
            // Keep only packets of whole frames.
            self.log_flow
                .truncate(self.committed.min(self.log_flow.len()));
            self.log_off
                .truncate(self.committed.min(self.log_off.len()));
            self.log_ts.truncate(self.committed.min(self.log_ts.len()));
            self.log_place
                .truncate(self.committed.min(self.log_place.len()));
            self.v4_log
                .truncate(self.committed_v4.min(self.v4_log.len()));
        }
        // The last frame's flows (none if a limit was reached: see `stop_at_current_frame`).
        self.frame_flows.drain_into(&mut self.v4_frame_flows);
        let packets = self.packets() as u64;
        // The flow table's counts, by flow id: first the packets of the hash table's flows.
        let mut stats: Vec<FlowStat> = self.keys.iter().map(|&k| FlowStat::new(k)).collect();
        for ((&f, &ts), &p) in self.log_flow.iter().zip(&self.log_ts).zip(&self.log_place) {
            stats[f as usize].add(ts, p & A_TO_B != 0, (p & LEN_MASK) as u32);
        }
        self.log_ts = Vec::new();
        self.log_place = Vec::new();
        // IPv4 flows: sorted by key (then position, so each flow's packets stay in file order).
        let mut v4 = std::mem::take(&mut self.v4_log);
        v4.sort_unstable();
        // A compressed file's: one entry per flow and frame, sorted by key, then frame.
        let mut counted = std::mem::take(&mut self.v4_frame_flows);
        counted.sort_unstable_by_key(|e| (e.key, e.frame));
        // Sized once: grown by doubling, these copied and faulted in ~10 MB per file.
        let v4_flows = v4.windows(2).filter(|w| w[0].0 != w[1].0).count()
            + counted.windows(2).filter(|w| w[0].key != w[1].key).count()
            + 2;
        let v4_start = self.keys.len();
        self.keys.reserve(v4_flows);
        stats.reserve(v4_flows);
        self.log_flow.reserve(v4.len() + counted.len());
        self.log_off.reserve(v4.len() + counted.len());
        for (i, &(k, p, ts)) in v4.iter().enumerate() {
            if i == 0 || v4[i - 1].0 != k {
                let key = FlowKey::from_compact_v4(k);
                self.keys.push(key);
                stats.push(FlowStat::new(key));
            }
            let last = stats.len() - 1;
            stats[last].add(ts, p & A_TO_B != 0, (p & LEN_MASK) as u32);
            self.log_flow.push(self.keys.len() as u32 - 1);
            self.log_off.push(p >> POS_SHIFT);
        }
        drop(v4);
        for (i, e) in counted.iter().enumerate() {
            if i == 0 || counted[i - 1].key != e.key {
                let key = FlowKey::from_compact_v4(e.key);
                self.keys.push(key);
                stats.push(FlowStat::new(key));
            }
            let last = stats.len() - 1;
            stats[last].add_counted(e.first_ts, e.last_ts, e.a_first, e.packets, e.bytes);
            self.log_flow.push(self.keys.len() as u32 - 1);
            self.log_off.push(u64::from(e.frame));
        }
        drop(counted);
        let names = self.names_by_flow(v4_start);
        for f in &mut self.frames {
            if f.packets == 0 {
                f.first_ts = 0;
            }
        }
        // Addresses, sorted, and each flow's endpoints as address ids.
        // As big-endian u128s, which sort as the bytes do and compare in one instruction.
        let mut addrs: Vec<u128> = self
            .keys
            .iter()
            .filter(|k| k.kind & KIND_IP != 0)
            .flat_map(|k| [u128::from_be_bytes(k.a), u128::from_be_bytes(k.b)])
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        let id_of = |a: &[u8; 16], kind: u8| -> u32 {
            if kind & KIND_IP == 0 {
                u32::MAX
            } else {
                let a = u128::from_be_bytes(*a);
                addrs.binary_search(&a).expect("listed") as u32
            }
        };
        struct Row {
            a: u32,
            b: u32,
            key: FlowKey,
            old: u32,
        }
        let mut rows: Vec<Row> = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| Row {
                a: id_of(&k.a, k.kind),
                b: id_of(&k.b, k.kind),
                key: *k,
                old: i as u32,
            })
            .collect();
        rows.sort_unstable_by_key(|r| {
            (
                r.a,
                r.b,
                r.key.port_a,
                r.key.port_b,
                r.key.proto,
                r.key.kind,
                r.key.vlan,
                r.key.tunnel,
                r.key.tunnel_id,
            )
        });
        let mut new_id = vec![0u32; rows.len()];
        for (n, r) in rows.iter().enumerate() {
            new_id[r.old as usize] = n as u32;
        }
        // Postings: each flow's positions, in file order, as varint deltas; a frame is listed
        // once however many of the flow's packets it holds.
        let mut counts = vec![0u32; rows.len()];
        for &f in &self.log_flow {
            counts[new_id[f as usize] as usize] += 1;
        }
        let mut start = vec![0usize; rows.len() + 1];
        for i in 0..rows.len() {
            start[i + 1] = start[i] + counts[i] as usize;
        }
        let mut sorted = vec![0u64; self.log_off.len()];
        let mut fill = start.clone();
        for (&f, &off) in self.log_flow.iter().zip(&self.log_off) {
            let n = new_id[f as usize] as usize;
            sorted[fill[n]] = off;
            fill[n] += 1;
        }
        let mut postings = Vec::with_capacity(self.log_off.len() * 3);
        let mut posting_at = Vec::with_capacity(rows.len());
        for i in 0..rows.len() {
            posting_at.push(postings.len() as u64);
            let mut prev = None;
            let mut entries = 0;
            for &pos in &sorted[start[i]..start[i + 1]] {
                if prev == Some(pos) {
                    continue;
                }
                put_varint(&mut postings, pos - prev.unwrap_or(0));
                prev = Some(pos);
                entries += 1;
            }
            counts[i] = entries;
        }
        let mut by_b: Vec<u32> = (0..rows.len() as u32).collect();
        by_b.sort_by_key(|&i| rows[i as usize].b);
        // Every DIR_STEP-th flow's first endpoint, and `by_b` entry's second: where a look-up
        // starts (see `IndexFile::flows_from_a`).
        let flows_dir: Vec<u32> = rows.iter().step_by(DIR_STEP).map(|r| r.a).collect();
        let by_b_dir: Vec<u32> = by_b
            .iter()
            .step_by(DIR_STEP)
            .map(|&i| rows[i as usize].b)
            .collect();

        let (first_ts, last_ts) = self
            .frames
            .iter()
            .filter(|f| f.packets > 0)
            .fold((u64::MAX, 0), |(a, b), f| {
                (a.min(f.first_ts), b.max(f.last_ts))
            });
        let mut frames = Vec::with_capacity(self.frames.len() * 12);
        encode_frames(&self.frames, &mut frames);
        let header = Header {
            identity,
            covered: self.covered(),
            complete: !self.full,
            compression: self.compression,
            first_ts: if first_ts == u64::MAX { 0 } else { first_ts },
            last_ts,
            packets,
            frames: self.frames.len() as u32,
            flows: rows.len() as u32,
            addrs: addrs.len() as u32,
            prelude_len: self.prelude.len() as u32,
            frames_len: frames.len() as u64,
            postings_len: postings.len() as u64,
            damaged: self.frames.iter().filter(|f| f.is_damaged()).count() as u32,
            read_whole: self.read_whole,
            tunnelled: rows.iter().filter(|r| r.key.tunnel != 0).count() as u32,
        };
        // The body (everything after the header), stored in chunks (see `file::assemble`).
        let mut body = Vec::with_capacity(
            self.prelude.len()
                + frames.len()
                + addrs.len() * 16
                + rows.len() * (FLOW_LEN + BY_B_LEN)
                + postings.len()
                + 8,
        );
        body.extend_from_slice(&self.prelude);
        pad8(&mut body);
        body.extend_from_slice(&frames);
        for a in &addrs {
            body.extend_from_slice(&a.to_be_bytes());
        }
        for (n, (r, &p)) in rows.iter().zip(&posting_at).enumerate() {
            body.extend_from_slice(&r.a.to_le_bytes());
            body.extend_from_slice(&r.b.to_le_bytes());
            body.extend_from_slice(&r.key.port_a.to_le_bytes());
            body.extend_from_slice(&r.key.port_b.to_le_bytes());
            body.push(r.key.proto);
            body.push(r.key.kind | r.key.tunnel << TUNNEL_SHIFT);
            body.extend_from_slice(&r.key.vlan.to_le_bytes());
            body.extend_from_slice(&counts[n].to_le_bytes());
            body.extend_from_slice(&p.to_le_bytes());
            body.extend_from_slice(&r.key.tunnel_id.to_le_bytes());
        }
        for &i in &by_b {
            body.extend_from_slice(&rows[i as usize].b.to_le_bytes());
            body.extend_from_slice(&i.to_le_bytes());
        }
        body.extend_from_slice(&postings);
        let out = crate::file::assemble(&header, &body, &flows_dir, &by_b_dir);
        Built {
            index: out,
            flows: stats,
            names,
        }
    }

    /// The names collected, by flow id (IPv4 flows are `keys[v4_start..]`, sorted by their
    /// compact key; the others are in the hash table).
    fn names_by_flow(&mut self, v4_start: usize) -> Names {
        let c = std::mem::take(&mut self.names);
        let (unread, dropped) = (c.unread(), c.dropped);
        let v4 = &self.keys[v4_start..];
        let mut flows: Vec<(u32, Box<FlowNames>)> = Vec::with_capacity(c.len());
        for (key, n) in c.into_flows() {
            let id = match key.compact_v4() {
                Some(k) => v4
                    .binary_search_by(|x| x.compact_v4().unwrap_or(0).cmp(&k))
                    .ok()
                    .map(|i| i + v4_start),
                None => self.flows.get(&key).map(|&i| i as usize),
            };
            // A flow of a frame a limit left out has no row.
            if let Some(id) = id {
                flows.push((id as u32, n));
            }
        }
        flows.sort_unstable_by_key(|f| f.0);
        Names {
            flows,
            unread,
            dropped,
        }
    }
}

fn pad8(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::Identity;
    use crate::testdata::udp_frame;

    /// An Ethernet/IPv4/UDP packet between 10.0.x.y:sport and 10.9.0.1:53.
    fn frame(host: u16, sport: u16, reply: bool) -> Vec<u8> {
        let (client, server) = ([10, 0, (host >> 8) as u8, host as u8], [10, 9, 0, 1]);
        if reply {
            udp_frame(server, client, 53, sport)
        } else {
            udp_frame(client, server, sport, 53)
        }
    }

    /// Per flow (client host, port): packets out, packets back, bytes, first and last time.
    type Expected = HashMap<(u16, u16), ([u64; 2], u64, u64, u64)>;

    /// Builds an index of 12 000 packets of 2 500 flows in 6 frames, each flow's packets spread
    /// over several frames, half the replies at the same time as their request.
    fn build(compression: Compression) -> (Built, Expected) {
        let mut b = Builder::new(vec![0; 24], compression);
        let mut expected = Expected::new();
        let mut off = 24;
        for n in 0..12_000u64 {
            if n % 2_000 == 0 {
                b.frame(off, 1 << 20, off, 1 << 20);
            }
            let flow = (n * 7919 % 2_500) as u16;
            let (host, port) = (flow / 10, 1000 + flow % 10);
            let reply = n % 3 == 1;
            let ts = 1_000_000 + n / 2 * 1000;
            let wire = 60 + (n % 5) as u32;
            b.packet(
                off,
                ts,
                wire,
                Some(LinkType::Ethernet),
                &frame(host, port, reply),
            );
            let e = expected
                .entry((host, port))
                .or_insert(([0; 2], 0, u64::MAX, 0));
            e.0[usize::from(reply)] += 1;
            e.1 += u64::from(wire);
            e.2 = e.2.min(ts);
            e.3 = e.3.max(ts);
            off += 76;
        }
        let id = Identity {
            size: off,
            head_crc: 0,
            tail_crc: 0,
        };
        (b.finish(id), expected)
    }

    #[test]
    fn a_compressed_file_of_only_new_flows_stops_at_the_entries_bound() {
        let mut b = Builder::new(vec![0; 24], Compression::Zstd);
        b.frame(24, 1 << 20, 24, 1 << 20);
        let f = frame(1, 1000, false);
        let mut n = 0u64;
        while !b.is_full() {
            // A new flow every packet: 10.0.x.y, each port of a block of 1000.
            let mut f = f.clone();
            f[28..30].copy_from_slice(&((n / 1000) as u16).to_be_bytes());
            f[34..36].copy_from_slice(&(1000 + (n % 1000) as u16).to_be_bytes());
            b.packet(24 + n * 76, n, 60, Some(LinkType::Ethernet), &f);
            n += 1;
        }
        assert_eq!(
            n as usize, MAX_FRAME_FLOWS,
            "it stops at the bound, not at MAX_PACKETS"
        );
    }

    #[test]
    fn counts_every_flow_the_same_whether_postings_are_records_or_frames() {
        for compression in [Compression::None, Compression::Zstd] {
            let (built, expected) = build(compression);
            assert_eq!(built.flows.len(), expected.len(), "{compression:?}");
            for s in &built.flows {
                let (client, port) = if s.key.port_b == 53 {
                    (&s.key.a, s.key.port_a)
                } else {
                    (&s.key.b, s.key.port_b)
                };
                let host = u16::from_be_bytes([client[14], client[15]]);
                let e = expected[&(host, port)];
                let out = usize::from(s.key.port_b != 53);
                assert_eq!(
                    (
                        [s.packets[out], s.packets[1 - out]],
                        s.bytes[0] + s.bytes[1]
                    ),
                    (e.0, e.1),
                    "{compression:?} flow {host} {port}"
                );
                assert_eq!((s.first_ts, s.last_ts), (e.2, e.3));
            }
            let index = crate::IndexFile::parse(built.index, "test").expect("an index");
            assert_eq!(index.header.packets, 12_000, "{compression:?}");
            assert_eq!(index.header.flows, 2_500, "{compression:?}");
        }
    }
}
