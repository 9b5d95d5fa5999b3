//! ARP (RFC 826): fixed 8-byte header, then sender/target hardware and protocol addresses.

use std::net::Ipv4Addr;

use crate::bytes::{array, be16, put16};
use crate::error::{need, Result};
use crate::ethernet::MacAddr;

mod field {
    use crate::bytes::Field;
    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;
    pub const ADDRS: usize = 8;
}

/// Length of an Ethernet/IPv4 ARP packet (8 + 2 × (6 + 4)).
pub const ARP_ETH_IPV4_LEN: usize = 28;

/// ARP opcode values.
pub mod op {
    /// Request (who-has).
    pub const REQUEST: u16 = 1;
    /// Reply (is-at).
    pub const REPLY: u16 = 2;
}

/// A view of an ARP packet with any address sizes.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len); no accessor can panic then.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the fixed header and all four addresses (sizes from hlen/plen) are present.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need("ARP", field::ADDRS, len)?;
        need("ARP", self.addrs_end(), len)
    }

    fn addrs_end(&self) -> usize {
        field::ADDRS + 2 * (self.hw_len() as usize + self.proto_len() as usize)
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 = Ethernet).
    #[inline]
    pub fn hw_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HTYPE.start)
    }

    /// Protocol type (0x0800 = IPv4).
    #[inline]
    pub fn proto_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PTYPE.start)
    }

    /// Hardware address length.
    #[inline]
    pub fn hw_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    #[inline]
    pub fn proto_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation (1 request, 2 reply).
    #[inline]
    pub fn opcode(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPER.start)
    }

    /// True for Ethernet hardware addresses and IPv4 protocol addresses (the only kind seen on Ethernet).
    #[inline]
    pub fn is_eth_ipv4(&self) -> bool {
        self.hw_type() == 1
            && self.proto_type() == 0x0800
            && self.hw_len() == 6
            && self.proto_len() == 4
    }

    fn offsets(&self) -> [usize; 4] {
        let h = self.hw_len() as usize;
        let p = self.proto_len() as usize;
        let s = field::ADDRS;
        [s, s + h, s + h + p, s + 2 * h + p]
    }

    /// Sender MAC, when [`is_eth_ipv4`](Self::is_eth_ipv4).
    pub fn sender_mac(&self) -> Option<MacAddr> {
        self.is_eth_ipv4()
            .then(|| MacAddr(array(self.buffer.as_ref(), self.offsets()[0])))
    }

    /// Sender IPv4 address, when [`is_eth_ipv4`](Self::is_eth_ipv4).
    pub fn sender_ip(&self) -> Option<Ipv4Addr> {
        self.is_eth_ipv4()
            .then(|| Ipv4Addr::from(array::<4>(self.buffer.as_ref(), self.offsets()[1])))
    }

    /// Target MAC, when [`is_eth_ipv4`](Self::is_eth_ipv4).
    pub fn target_mac(&self) -> Option<MacAddr> {
        self.is_eth_ipv4()
            .then(|| MacAddr(array(self.buffer.as_ref(), self.offsets()[2])))
    }

    /// Target IPv4 address, when [`is_eth_ipv4`](Self::is_eth_ipv4).
    pub fn target_ip(&self) -> Option<Ipv4Addr> {
        self.is_eth_ipv4()
            .then(|| Ipv4Addr::from(array::<4>(self.buffer.as_ref(), self.offsets()[3])))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> ArpPacket<&'a T> {
    /// Sender hardware address bytes (any length).
    pub fn sender_hw(&self) -> &'a [u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[0]..o[1]]
    }

    /// Sender protocol address bytes.
    pub fn sender_proto(&self) -> &'a [u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[1]..o[2]]
    }

    /// Target hardware address bytes.
    pub fn target_hw(&self) -> &'a [u8] {
        let o = self.offsets();
        &self.buffer.as_ref()[o[2]..o[3]]
    }

    /// Target protocol address bytes.
    pub fn target_proto(&self) -> &'a [u8] {
        let o = self.offsets();
        let end = self.addrs_end();
        &self.buffer.as_ref()[o[3]..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes an Ethernet/IPv4 ARP packet (28 bytes) with the given opcode and addresses.
    pub fn emit_eth_ipv4(
        &mut self,
        opcode: u16,
        sender: (MacAddr, Ipv4Addr),
        target: (MacAddr, Ipv4Addr),
    ) {
        let b = self.buffer.as_mut();
        put16(b, field::HTYPE.start, 1);
        put16(b, field::PTYPE.start, 0x0800);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
        put16(b, field::OPER.start, opcode);
        b[8..14].copy_from_slice(&sender.0 .0);
        b[14..18].copy_from_slice(&sender.1.octets());
        b[18..24].copy_from_slice(&target.0 .0);
        b[24..28].copy_from_slice(&target.1.octets());
    }
}
