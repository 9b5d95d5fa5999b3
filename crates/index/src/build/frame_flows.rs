//! The IPv4 flows of one compressed frame, counted as its packets come.
//!
//! A compressed file's postings name frames, not packets, so a flow needs one entry per frame it
//! is in, whatever its number of packets there. Counting each frame's packets by flow in a table
//! that stays in the L2 cache (a frame of 1 MiB holds ~4 000 packets of ordinary traffic and
//! ~700 flows) leaves the end of the file one entry per flow and frame to sort instead of one per
//! packet: 6 × fewer on `ringcap synth` traffic, where sorting the packets was the largest part
//! of the indexer's cost (`examples/indexer_cost.rs`, BENCHMARKS.md). A table for the whole file
//! instead (~50 k flows, 2 MB) missed the cache on every packet and cost as much as the sort.

/// One flow's packets in one frame.
#[derive(Clone, Copy, Debug)]
pub(super) struct FrameFlow {
    /// The flow's [`crate::key::FlowKey::compact_v4`].
    pub key: u128,
    /// The frame's number in the file.
    pub frame: u32,
    /// Whether the earliest of these packets went from `a` to `b`.
    pub a_first: bool,
    /// Packets from `a` to `b` (`[0]`) and back (`[1]`).
    pub packets: [u32; 2],
    pub bytes: [u64; 2],
    pub first_ts: u64,
    pub last_ts: u64,
}

/// The current frame's flows: an open-addressing table of entry numbers (0: free) over the
/// entries, grown when half full; emptied when the frame ends.
pub(super) struct FrameFlows {
    slots: Vec<u32>,
    entries: Vec<FrameFlow>,
}

/// Slots to start with: a frame of ordinary traffic fills a sixth of them.
const FIRST_SLOTS: usize = 1 << 12;

impl Default for FrameFlows {
    fn default() -> FrameFlows {
        FrameFlows {
            slots: vec![0; FIRST_SLOTS],
            entries: Vec::with_capacity(FIRST_SLOTS / 2),
        }
    }
}

#[inline]
fn slot_of(key: u128, slots: usize) -> usize {
    // Multiplicative hashing of both halves folded: the addresses are in the high half, the
    // ports and the protocol in the low one.
    let x = (key as u64 ^ (key >> 64) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> (64 - slots.trailing_zeros())) as usize
}

impl FrameFlows {
    /// Counts one packet of `key` in frame `frame`.
    #[inline]
    pub fn add(&mut self, key: u128, frame: u32, ts_ns: u64, a_to_b: bool, wire_len: u32) {
        let mask = self.slots.len() - 1;
        let mut at = slot_of(key, self.slots.len());
        let d = usize::from(!a_to_b);
        loop {
            let n = self.slots[at] as usize;
            if n == 0 {
                break;
            }
            let e = &mut self.entries[n - 1];
            if e.key == key {
                if ts_ns < e.first_ts {
                    e.first_ts = ts_ns;
                    e.a_first = a_to_b;
                }
                e.last_ts = e.last_ts.max(ts_ns);
                e.packets[d] += 1;
                e.bytes[d] += u64::from(wire_len);
                return;
            }
            at = (at + 1) & mask;
        }
        let mut e = FrameFlow {
            key,
            frame,
            a_first: a_to_b,
            packets: [0; 2],
            bytes: [0; 2],
            first_ts: ts_ns,
            last_ts: ts_ns,
        };
        e.packets[d] = 1;
        e.bytes[d] = u64::from(wire_len);
        self.entries.push(e);
        self.slots[at] = self.entries.len() as u32;
        if self.entries.len() * 2 > self.slots.len() {
            self.grow();
        }
    }

    #[cold]
    fn grow(&mut self) {
        let len = self.slots.len() * 2;
        self.slots = vec![0; len];
        for (n, e) in self.entries.iter().enumerate() {
            let mut at = slot_of(e.key, len);
            while self.slots[at] != 0 {
                at = (at + 1) & (len - 1);
            }
            self.slots[at] = n as u32 + 1;
        }
    }

    /// Flows of the current frame.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Moves the frame's flows to `out` and empties the table for the next frame.
    pub fn drain_into(&mut self, out: &mut Vec<FrameFlow>) {
        // Each entry clears from its home slot to the next free one: every run of taken slots
        // starts at the home of the entry in its first slot, so every run is cleared whole.
        for e in &self.entries {
            let mut at = slot_of(e.key, self.slots.len());
            while self.slots[at] != 0 {
                self.slots[at] = 0;
                at = (at + 1) & (self.slots.len() - 1);
            }
        }
        out.extend_from_slice(&self.entries);
        self.entries.clear();
    }

    /// Forgets the frame's flows (a limit was reached inside it).
    pub fn forget(&mut self) {
        self.slots.fill(0);
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> u128 {
        // 10.0.x.y:n -> 192.0.2.1:443, TCP: as FlowKey::compact_v4 lays it out.
        (u128::from(0x0a00_0000 | n) << 96)
            | (u128::from(0xc000_0201u32) << 64)
            | (443 << 32)
            | (6 << 24)
    }

    #[test]
    fn counts_each_flow_of_a_frame_once_and_starts_the_next_frame_empty() {
        let mut t = FrameFlows::default();
        let mut out = Vec::new();
        // More flows than the first table holds: it grows twice.
        let n = FIRST_SLOTS as u32 * 2;
        for round in 0..3u64 {
            for i in 0..n {
                t.add(key(i), 0, 1000 - round, round == 1, 100 + i);
            }
        }
        t.drain_into(&mut out);
        assert_eq!(out.len(), n as usize);
        for (i, e) in out.iter().enumerate() {
            assert_eq!(e.key, key(i as u32));
            assert_eq!(e.packets, [1, 2], "one packet a to b, two back");
            assert_eq!(e.bytes[0] + e.bytes[1], 3 * (100 + i as u64));
            // The earliest packet (ts 998, the third round's) went back from b.
            assert_eq!((e.first_ts, e.last_ts, e.a_first), (998, 1000, false));
        }
        // No slot of the first frame is left taken.
        assert!(t.slots.iter().all(|&s| s == 0));
        t.add(key(7), 1, 5, true, 60);
        t.add(key(7), 1, 5, false, 60);
        out.clear();
        t.drain_into(&mut out);
        assert_eq!(out.len(), 1);
        // Of two packets at the same time the first one counts.
        assert_eq!(
            (out[0].frame, out[0].packets, out[0].a_first),
            (1, [1, 1], true)
        );
    }

    #[test]
    fn forgets_a_frame() {
        let mut t = FrameFlows::default();
        t.add(key(1), 0, 1, true, 60);
        t.forget();
        let mut out = Vec::new();
        t.drain_into(&mut out);
        assert!(out.is_empty());
    }
}
