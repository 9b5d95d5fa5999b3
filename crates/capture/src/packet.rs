//! The borrowed packet view every source hands out.

/// An 802.1Q/802.1ad tag the kernel moved out of the frame into metadata (VLAN offload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vlan {
    /// Tag protocol identifier: 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    pub tpid: u16,
    /// Tag control information: priority (3 bits), DEI (1), VLAN id (12).
    pub tci: u16,
}

/// Size of a VLAN tag on the wire.
pub const VLAN_TAG_LEN: usize = 4;
/// Where the tag goes back in: after destination and source MAC.
const TAG_OFFSET: usize = 12;

impl Vlan {
    /// The four bytes as they appear on the wire (TPID then TCI, big-endian).
    pub fn to_bytes(self) -> [u8; 4] {
        let [a, b] = self.tpid.to_be_bytes();
        let [c, d] = self.tci.to_be_bytes();
        [a, b, c, d]
    }

    /// VLAN id (low 12 bits of the TCI).
    pub fn id(self) -> u16 {
        self.tci & 0x0fff
    }
}

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
    /// The frame as libpcap would record it, in three zero-copy pieces: bytes before the tag, the tag
    /// (empty when there is none or too little data to hold it), bytes after.
    pub fn tagged_parts(&self) -> (&'a [u8], Option<[u8; 4]>, &'a [u8]) {
        match self.vlan {
            Some(v) if self.data.len() >= TAG_OFFSET => {
                let (head, tail) = self.data.split_at(TAG_OFFSET);
                (head, Some(v.to_bytes()), tail)
            }
            _ => (self.data, None, &[]),
        }
    }

    /// Captured length as written to a pcap file (tag included when it is re-inserted).
    pub fn record_caplen(&self) -> u32 {
        let tag = if self.tag_reinserted() {
            VLAN_TAG_LEN
        } else {
            0
        };
        (self.data.len() + tag) as u32
    }

    /// Original length as written to a pcap file (tag included when it is re-inserted).
    pub fn record_wire_len(&self) -> u32 {
        let tag = if self.tag_reinserted() {
            VLAN_TAG_LEN
        } else {
            0
        };
        self.wire_len + tag as u32
    }

    fn tag_reinserted(&self) -> bool {
        self.vlan.is_some() && self.data.len() >= TAG_OFFSET
    }
}

/// The tag the kernel reported in packet metadata, with libpcap's rules (VLAN_VALID / VLAN_TPID in
/// pcap-linux.c): a non-zero TCI counts even without the status bit; the TPID defaults to 802.1Q.
#[inline]
pub(crate) fn vlan_from_meta(status: u32, tci: u16, tpid: u16) -> Option<Vlan> {
    let valid = status & libc::TP_STATUS_VLAN_VALID != 0 || tci != 0;
    let tpid_valid = status & libc::TP_STATUS_VLAN_TPID_VALID != 0 || tpid != 0;
    valid.then_some(Vlan {
        tpid: if tpid_valid { tpid } else { 0x8100 },
        tci,
    })
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
