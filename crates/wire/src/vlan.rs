//! IEEE 802.1Q / 802.1ad VLAN tag: the value [`Vlan`], the view [`VlanHeader`], and libpcap's rules for a
//! tag the kernel stripped into packet metadata.
//!
//! On the wire a tag is `TPID (2) | TCI (2)`, and the TPID sits where the ethertype would be. This view
//! starts *after* the TPID (which the enclosing header already read as its ethertype): `TCI (2) |
//! inner ethertype (2)`, so stacked tags (QinQ) chain: a tag whose [`ethertype`](VlanHeader::ethertype)
//! is again a TPID is followed by another tag in its [`payload`](VlanHeader::payload).

use crate::bytes::{be16, put16};
use crate::error::{need, Result};

mod field {
    use crate::bytes::Field;
    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
    pub const PAYLOAD: usize = 4;
}

/// Bytes one VLAN tag adds to a frame.
pub const VLAN_TAG_LEN: usize = 4;

/// Where a stripped tag goes back into a frame: after destination and source MAC.
const MACS_LEN: usize = 12;

/// `TP_STATUS_VLAN_VALID` (linux/if_packet.h): the metadata TCI is a tag.
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `TP_STATUS_VLAN_TPID_VALID` (linux/if_packet.h): the metadata TPID is set.
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// One VLAN tag as a value: what a frame carries after the MACs, or what the kernel reports in packet
/// metadata when it stripped the tag (VLAN offload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Vlan {
    /// Tag protocol identifier: 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    pub tpid: u16,
    /// Tag control information: priority (3 bits), DEI (1), VLAN id (12); see [`tci`].
    pub tci: u16,
}

impl Vlan {
    /// An 802.1Q tag (TPID 0x8100) with priority `pcp` and VLAN id `vid` (extra bits are masked off).
    pub const fn dot1q(pcp: u8, vid: u16) -> Vlan {
        Vlan {
            tpid: crate::ethertype::VLAN,
            tci: tci(pcp, false, vid),
        }
    }

    /// The four bytes as they appear on the wire (TPID then TCI, big-endian).
    pub const fn to_bytes(self) -> [u8; 4] {
        let [a, b] = self.tpid.to_be_bytes();
        let [c, d] = self.tci.to_be_bytes();
        [a, b, c, d]
    }

    /// VLAN identifier (low 12 bits of the TCI).
    pub const fn id(self) -> u16 {
        self.tci & 0x0fff
    }

    /// Priority code point (0..=7).
    pub const fn pcp(self) -> u8 {
        (self.tci >> 13) as u8
    }

    /// The tag the kernel reported in packet metadata (`tp_status`, `tp_vlan_tci`, `tp_vlan_tpid`), with
    /// libpcap's rules (VLAN_VALID / VLAN_TPID in pcap-linux.c): a non-zero TCI counts even without the
    /// status bit; the TPID defaults to 802.1Q.
    #[inline]
    pub const fn from_meta(status: u32, tci: u16, tpid: u16) -> Option<Vlan> {
        if status & TP_STATUS_VLAN_VALID == 0 && tci == 0 {
            return None;
        }
        let tpid_valid = status & TP_STATUS_VLAN_TPID_VALID != 0 || tpid != 0;
        Some(Vlan {
            tpid: if tpid_valid {
                tpid
            } else {
                crate::ethertype::VLAN
            },
            tci,
        })
    }
}

/// A captured frame with a stripped tag put back as libpcap records it, in three zero-copy pieces: bytes
/// before the tag, the tag, bytes after. The tag goes after the two MAC addresses; a capture too short to
/// hold them stays untagged (`None`, everything in the first piece).
#[inline]
pub fn reinsert_tag(data: &[u8], vlan: Option<Vlan>) -> (&[u8], Option<[u8; 4]>, &[u8]) {
    match vlan {
        Some(v) if data.len() >= MACS_LEN => {
            let (head, tail) = data.split_at(MACS_LEN);
            (head, Some(v.to_bytes()), tail)
        }
        _ => (data, None, &[]),
    }
}

/// Bytes [`reinsert_tag`] adds to a `data_len`-byte capture, and so to its captured and original lengths
/// in a capture file: [`VLAN_TAG_LEN`], or 0 without a tag or when the capture does not hold both MACs.
#[inline]
pub const fn reinsert_tag_len(data_len: usize, tagged: bool) -> usize {
    if tagged && data_len >= MACS_LEN {
        VLAN_TAG_LEN
    } else {
        0
    }
}

/// A view of one VLAN tag in a frame (TCI + inner ethertype), starting after the TPID.
#[derive(Debug, Clone)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanHeader { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len); no accessor can panic then.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let v = Self::new_unchecked(buffer);
        v.check_len()?;
        Ok(v)
    }

    /// Checks the buffer holds TCI and inner ethertype (4 bytes).
    pub fn check_len(&self) -> Result<()> {
        need("VLAN", VLAN_TAG_LEN, self.buffer.as_ref().len())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Tag control information (PCP, DEI, VID).
    #[inline]
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TCI.start)
    }

    /// Priority code point (0..=7).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (0..=4095).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// Ethertype of what follows (another TPID when tags are stacked).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> VlanHeader<&'a T> {
    /// The bytes after the tag.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    /// Sets the whole TCI.
    pub fn set_tci(&mut self, tci: u16) {
        put16(self.buffer.as_mut(), field::TCI.start, tci);
    }

    /// Sets the inner ethertype.
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buffer.as_mut(), field::ETHERTYPE.start, t);
    }
}

/// Builds a TCI from priority, drop-eligible bit and VLAN id (extra bits are masked off).
pub const fn tci(pcp: u8, dei: bool, vid: u16) -> u16 {
    ((pcp as u16 & 7) << 13) | ((dei as u16) << 12) | (vid & 0x0fff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_goes_back_after_the_macs() {
        let frame: Vec<u8> = (0u8..20).collect();
        let tag = Vlan {
            tpid: 0x8100,
            tci: tci(1, false, 0x064),
        };
        let (head, bytes, tail) = reinsert_tag(&frame, Some(tag));
        assert_eq!(
            (head, bytes, tail),
            (&frame[..12], Some([0x81, 0x00, 0x20, 0x64]), &frame[12..])
        );
        assert_eq!(reinsert_tag_len(frame.len(), true), 4);
        assert_eq!((tag.id(), tag.pcp()), (0x064, 1));
    }

    #[test]
    fn short_capture_keeps_no_tag() {
        let frame = [0u8; 11];
        let tag = Some(Vlan {
            tpid: 0x8100,
            tci: 1,
        });
        assert_eq!(reinsert_tag(&frame, tag), (&frame[..], None, &[][..]));
        assert_eq!(reinsert_tag_len(11, true), 0);
        assert_eq!(reinsert_tag_len(12, false), 0);
    }

    #[test]
    fn metadata_rules_follow_libpcap() {
        assert_eq!(Vlan::from_meta(0, 0, 0x88a8), None);
        assert_eq!(
            Vlan::from_meta(TP_STATUS_VLAN_VALID, 0, 0),
            Some(Vlan {
                tpid: 0x8100,
                tci: 0
            })
        );
        assert_eq!(
            Vlan::from_meta(0, 0x0abc, 0),
            Some(Vlan {
                tpid: 0x8100,
                tci: 0x0abc
            })
        );
        assert_eq!(
            Vlan::from_meta(TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID, 5, 0x88a8),
            Some(Vlan {
                tpid: 0x88a8,
                tci: 5
            })
        );
    }
}
