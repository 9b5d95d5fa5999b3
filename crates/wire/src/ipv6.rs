//! IPv6 header (RFC 8200) and the walk over extension headers to the upper-layer protocol.

use std::net::Ipv6Addr;

use crate::bytes::{array, be16, be32, put16, put32};
use crate::error::{need, Error, Result};
use crate::ip_proto;

mod field {
    use crate::bytes::Field;
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the fixed IPv6 header.
pub const IPV6_HDR: usize = 40;

/// A view of an IPv6 packet.
///
/// As for IPv4, a buffer shorter than the payload length is accepted (snap length); `payload` returns
/// the bytes present, never past the payload length (so Ethernet padding is dropped).
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len); no accessor can panic then.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the 40-byte header is present and the version is 6.
    pub fn check_len(&self) -> Result<()> {
        need("IPv6", IPV6_HDR, self.buffer.as_ref().len())?;
        if self.version() != 6 {
            return Err(Error::Malformed {
                header: "IPv6",
                what: "version is not 6",
            });
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// IP version (6 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (be16(self.buffer.as_ref(), 0) >> 4) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW.start) & 0x000f_ffff
    }

    /// Payload length field (bytes after the 40-byte header, extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Next header of the fixed header (may be an extension header, see [`upper_layer`](Self::upper_layer)).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.buffer.as_ref(), field::SRC_ADDR.start))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.buffer.as_ref(), field::DST_ADDR.start))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// Bytes after the fixed header, up to the payload length or the buffer end.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        let end = (IPV6_HDR + self.payload_len() as usize).min(data.len());
        &data[IPV6_HDR..end]
    }

    /// Skips hop-by-hop, routing, fragment, destination options (and AH, mobility, HIP, shim6) headers.
    pub fn upper_layer(&self) -> UpperLayer {
        skip_extension_headers(self.next_header(), self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, traffic class and flow label.
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let v = (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & 0x000f_ffff);
        put32(self.buffer.as_mut(), field::VER_TC_FLOW.start, v);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH.start, v);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: &Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: &Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }
}

/// Fragment header contents (RFC 8200 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Fragment {
    /// Fragment offset in bytes.
    pub offset: u16,
    /// More-fragments flag.
    pub more: bool,
    /// Identification.
    pub ident: u32,
}

/// Where the extension-header walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpperLayer {
    /// The upper-layer protocol; when `complete` is false, the extension header that could not be read.
    pub protocol: u8,
    /// Offset of the upper-layer header from the start of the IPv6 payload (bytes skipped).
    pub offset: usize,
    /// The fragment header, if one was crossed. With a non-zero offset no upper-layer header follows.
    pub fragment: Option<Ipv6Fragment>,
    /// False when the buffer ended inside an extension header.
    pub complete: bool,
}

/// True for next-header values this crate skips as IPv6 extension headers.
#[inline]
pub const fn is_extension_header(nh: u8) -> bool {
    matches!(
        nh,
        ip_proto::HOPOPTS
            | ip_proto::ROUTING
            | ip_proto::FRAGMENT
            | ip_proto::DSTOPTS
            | ip_proto::AH
            | ip_proto::MOBILITY
            | ip_proto::HIP
            | ip_proto::SHIM6
    )
}

/// Walks extension headers starting with `next_header` over `payload` (the bytes after the fixed
/// IPv6 header). Never panics; stops at a non-first fragment, since its upper header is elsewhere.
pub fn skip_extension_headers(mut next_header: u8, payload: &[u8]) -> UpperLayer {
    let mut offset = 0usize;
    let mut fragment = None;
    // Every header is at least 8 bytes, so the loop ends within payload.len() / 8 steps.
    while is_extension_header(next_header) {
        let (nh, len_field) = match payload.get(offset..offset + 2) {
            Some(b) => (b[0], b[1]),
            None => {
                return UpperLayer {
                    protocol: next_header,
                    offset,
                    fragment,
                    complete: false,
                }
            }
        };
        let len = match next_header {
            ip_proto::FRAGMENT => 8,
            ip_proto::AH => (len_field as usize + 2) * 4,
            _ => (len_field as usize + 1) * 8,
        };
        if next_header == ip_proto::FRAGMENT {
            let Some(f) = payload.get(offset..offset + 8) else {
                return UpperLayer {
                    protocol: next_header,
                    offset,
                    fragment,
                    complete: false,
                };
            };
            let off_m = u16::from_be_bytes([f[2], f[3]]);
            let frag = Ipv6Fragment {
                offset: off_m & 0xfff8,
                more: off_m & 1 != 0,
                ident: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
            };
            fragment = Some(frag);
            if frag.offset != 0 {
                return UpperLayer {
                    protocol: nh,
                    offset: offset + 8,
                    fragment,
                    complete: true,
                };
            }
        }
        if payload.len() < offset + len {
            return UpperLayer {
                protocol: next_header,
                offset,
                fragment,
                complete: false,
            };
        }
        offset += len;
        next_header = nh;
    }
    UpperLayer {
        protocol: next_header,
        offset,
        fragment,
        complete: true,
    }
}
