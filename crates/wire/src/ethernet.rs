//! Ethernet II / 802.3 frame header (14 bytes, no FCS).

use core::fmt;

use crate::bytes::{array, be16, put16};
use crate::error::{need, Result};

/// Ethertype values this crate decodes.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// IEEE 802.1ad service VLAN tag (QinQ outer tag).
    pub const QINQ: u16 = 0x88a8;
    /// MPLS unicast.
    pub const MPLS_UNICAST: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MULTICAST: u16 = 0x8848;
    /// Pre-standard QinQ outer tag still seen in the wild.
    pub const QINQ_OLD: u16 = 0x9100;
    /// Values below this are an 802.3 length, not an ethertype.
    pub const MIN_ETHERTYPE: u16 = 0x0600;

    /// True for the TPIDs that start a VLAN tag (802.1Q, 802.1ad, 0x9100).
    #[inline]
    pub const fn is_vlan(t: u16) -> bool {
        matches!(t, VLAN | QINQ | QINQ_OLD)
    }
}

/// A 48-bit MAC address; prints as `02:00:00:00:00:01` and parses from that (or `02-00-...`, one or two
/// hex digits an octet); with the `serde` feature it is that string in a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "String", into = "String")
)]
#[repr(transparent)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// The six bytes.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// True when all bytes are zero.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 6]
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl core::str::FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> core::result::Result<Self, String> {
        let bad = || format!("bad MAC address {s:?}: write six hex octets like 02:00:00:00:00:02");
        let mut mac = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for b in mac.iter_mut() {
            let p = parts.next().ok_or_else(bad)?;
            if p.is_empty() || p.len() > 2 {
                return Err(bad());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(mac))
    }
}

impl TryFrom<String> for MacAddr {
    type Error = String;
    fn try_from(s: String) -> core::result::Result<Self, String> {
        s.parse()
    }
}

impl From<MacAddr> for String {
    fn from(m: MacAddr) -> String {
        m.to_string()
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> Self {
        MacAddr(b)
    }
}

mod field {
    use crate::bytes::Field;
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const PAYLOAD: usize = 14;
}

/// Ethernet header length (destination, source, ethertype).
pub const ETH_HDR: usize = field::PAYLOAD;

/// A view of an Ethernet frame (starting at the destination MAC, without FCS).
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length (accessors may panic on short buffers).
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len); no accessor can panic then.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks the buffer holds the 14-byte header.
    pub fn check_len(&self) -> Result<()> {
        need("Ethernet", ETH_HDR, self.buffer.as_ref().len())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (always 14).
    pub const fn header_len() -> usize {
        ETH_HDR
    }

    /// Destination MAC.
    #[inline]
    pub fn dst_addr(&self) -> MacAddr {
        MacAddr(array(self.buffer.as_ref(), field::DESTINATION.start))
    }

    /// Source MAC.
    #[inline]
    pub fn src_addr(&self) -> MacAddr {
        MacAddr(array(self.buffer.as_ref(), field::SOURCE.start))
    }

    /// Ethertype, or the 802.3 length when below 0x0600.
    #[inline]
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE.start)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// The bytes after the header (borrowed from the buffer, not the view).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC.
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a.0);
    }

    /// Sets the source MAC.
    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a.0);
    }

    /// Sets the ethertype (or 802.3 length).
    pub fn set_ethertype(&mut self, t: u16) {
        put16(self.buffer.as_mut(), field::ETHERTYPE.start, t);
    }

    /// The bytes after the header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}
