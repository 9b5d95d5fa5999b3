//! The borrowed packet view every source hands out.

use wire::{reinsert_tag, reinsert_tag_len, Vlan, VLAN_TAG_LEN};

/// One captured packet, borrowed from the source's buffer (a ring block or a recvmmsg buffer).
///
/// Invariant: `data.len() + 4 <= snaplen` when the tag will be re-inserted (see [`Packet::tagged_parts`]),
/// otherwise `data.len() <= snaplen`, so a writer never has to cut again.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Length of the frame as the kernel received it (without a tag that was moved into `vlan`).
    pub wire_len: u32,
    /// The captured bytes, starting at the Ethernet header (a stripped VLAN tag is not in here).
    pub data: &'a [u8],
    /// A VLAN tag the kernel stripped; libpcap puts it back after the MAC addresses, and so should writers.
    pub vlan: Option<Vlan>,
}

impl<'a> Packet<'a> {
    /// The frame as libpcap would record it, in three zero-copy pieces (see [`wire::reinsert_tag`]).
    pub fn tagged_parts(&self) -> (&'a [u8], Option<[u8; 4]>, &'a [u8]) {
        reinsert_tag(self.data, self.vlan)
    }

    /// Captured length as written to a pcap file (tag included when it is re-inserted).
    pub fn record_caplen(&self) -> u32 {
        (self.data.len() + self.tag_len()) as u32
    }

    /// Original length as written to a pcap file (tag included when it is re-inserted).
    pub fn record_wire_len(&self) -> u32 {
        self.wire_len + self.tag_len() as u32
    }

    fn tag_len(&self) -> usize {
        reinsert_tag_len(self.data.len(), self.vlan.is_some())
    }
}

/// How many bytes of a `len`-byte frame to hand out under `snaplen`, leaving room for a tag to re-insert.
#[inline]
pub(crate) fn clip_len(len: usize, snaplen: u32, tagged: bool) -> usize {
    let room = if tagged {
        (snaplen as usize).saturating_sub(VLAN_TAG_LEN)
    } else {
        snaplen as usize
    };
    len.min(room)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_goes_back_after_the_macs() {
        let frame: Vec<u8> = (0u8..20).collect();
        let p = Packet {
            ts_ns: 0,
            wire_len: 20,
            data: &frame,
            vlan: Some(Vlan {
                tpid: 0x8100,
                tci: 0x2064,
            }),
        };
        let (head, tag, tail) = p.tagged_parts();
        let mut rebuilt = head.to_vec();
        rebuilt.extend_from_slice(&tag.unwrap());
        rebuilt.extend_from_slice(tail);
        assert_eq!(&rebuilt[..12], &frame[..12]);
        assert_eq!(&rebuilt[12..16], &[0x81, 0x00, 0x20, 0x64]);
        assert_eq!(&rebuilt[16..], &frame[12..]);
        assert_eq!((p.record_caplen(), p.record_wire_len()), (24, 24));
        assert_eq!(p.vlan.unwrap().id(), 0x064);
    }

    #[test]
    fn tiny_capture_keeps_no_tag() {
        let frame = [0u8; 8];
        let p = Packet {
            ts_ns: 0,
            wire_len: 60,
            data: &frame,
            vlan: Some(Vlan {
                tpid: 0x8100,
                tci: 1,
            }),
        };
        assert_eq!(p.tagged_parts(), (&frame[..], None, &[][..]));
        assert_eq!((p.record_caplen(), p.record_wire_len()), (8, 60));
    }

    #[test]
    fn clip_leaves_room_for_the_tag() {
        assert_eq!(clip_len(1500, 96, false), 96);
        assert_eq!(clip_len(1500, 96, true), 92);
        assert_eq!(clip_len(60, 96, true), 60);
        assert_eq!(clip_len(60, 2, true), 0);
    }
}
