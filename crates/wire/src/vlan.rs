//! IEEE 802.1Q / 802.1ad VLAN tag.
//!
//! On the wire a tag is `TPID (2) | TCI (2)`, and the TPID sits where the ethertype would be. This view
//! starts *after* the TPID (which the enclosing header already read as its ethertype): `TCI (2) |
//! inner ethertype (2)`, so stacked tags (QinQ) chain: a tag whose [`ethertype`](VlanTag::ethertype)
//! is again a TPID is followed by another tag in its [`payload`](VlanTag::payload).

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

/// A view of one VLAN tag (TCI + inner ethertype), starting after the TPID.
#[derive(Debug, Clone)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        VlanTag { buffer }
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

impl<'a, T: AsRef<[u8]> + ?Sized> VlanTag<&'a T> {
    /// The bytes after the tag.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
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
