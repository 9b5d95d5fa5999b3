//! ICMP (RFC 792) and ICMPv6 (RFC 4443) header: type, code, checksum and the 4-byte rest-of-header.

use crate::bytes::{be16, be32, put16};
use crate::checksum;
use crate::error::{need, Result};

mod field {
    use crate::bytes::Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const REST: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQ: Field = 6..8;
}

/// ICMP / ICMPv6 header length (type, code, checksum, rest-of-header).
pub const ICMP_HDR: usize = 8;

/// ICMPv4 type values used by the printer.
pub mod v4 {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
}

/// ICMPv6 type values used by the printer.
pub mod v6 {
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 1;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Multicast listener report v2 (MLDv2).
    pub const MLD2_REPORT: u8 = 143;
}

/// A view of an ICMP or ICMPv6 message (the layout of the first 8 bytes is the same).
#[derive(Debug, Clone)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        IcmpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len); no accessor can panic then.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 8-byte header is present.
    pub fn check_len(&self) -> Result<()> {
        need("ICMP", ICMP_HDR, self.buffer.as_ref().len())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Message code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// The 4 bytes after the checksum (meaning depends on the type).
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        be32(self.buffer.as_ref(), field::REST.start)
    }

    /// Echo identifier (meaningful for echo request/reply).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ECHO_IDENT.start)
    }

    /// Echo sequence number (meaningful for echo request/reply).
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ECHO_SEQ.start)
    }

    /// True when the ICMPv4 checksum over the whole buffer is valid (ICMPv6 also covers a pseudo header).
    pub fn verify_checksum_v4(&self) -> bool {
        checksum::fold(checksum::ones_complement_sum(self.buffer.as_ref())) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> IcmpPacket<&'a T> {
    /// Bytes after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[ICMP_HDR..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Sets type and code.
    pub fn set_type_code(&mut self, msg_type: u8, code: u8) {
        let b = self.buffer.as_mut();
        b[field::TYPE] = msg_type;
        b[field::CODE] = code;
    }

    /// Sets echo identifier and sequence number.
    pub fn set_echo(&mut self, ident: u16, seq: u16) {
        put16(self.buffer.as_mut(), field::ECHO_IDENT.start, ident);
        put16(self.buffer.as_mut(), field::ECHO_SEQ.start, seq);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Computes and stores the ICMPv4 checksum over the whole buffer.
    pub fn fill_checksum_v4(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// tcpdump's name for an ICMPv4 type, if it has one.
pub fn v4_type_name(t: u8) -> Option<&'static str> {
    Some(match t {
        0 => "echo reply",
        3 => "unreachable",
        4 => "source quench",
        5 => "redirect",
        8 => "echo request",
        9 => "router advertisement",
        10 => "router solicitation",
        11 => "time exceeded",
        12 => "parameter problem",
        13 => "time stamp request",
        14 => "time stamp reply",
        _ => return None,
    })
}

/// tcpdump's name for an ICMPv6 type, if it has one.
pub fn v6_type_name(t: u8) -> Option<&'static str> {
    Some(match t {
        1 => "destination unreachable",
        2 => "packet too big",
        3 => "time exceeded in-transit",
        4 => "parameter problem",
        128 => "echo request",
        129 => "echo reply",
        130 => "multicast listener query",
        131 => "multicast listener report",
        132 => "multicast listener done",
        133 => "router solicitation",
        134 => "router advertisement",
        135 => "neighbor solicitation",
        136 => "neighbor advertisement",
        137 => "redirect",
        143 => "multicast listener report v2",
        _ => return None,
    })
}
