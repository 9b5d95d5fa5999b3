//! Building UDP frames for the generator, and rewriting them in place with incremental checksums.
//!
//! The generator builds one frame per template with [`UdpFrameSpec::emit`], then per packet changes ports,
//! addresses or a few payload bytes with [`UdpFrameSpec::set_ports`], [`UdpFrameSpec::set_ip`] and
//! [`UdpFrameSpec::write_payload`], which patch the checksums by RFC 1624 instead of re-summing the payload.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::bytes::{be16, put16};
use crate::checksum::{
    self, fold, ones_complement_sum, ones_complement_sum_at, udp_nonzero, update_sum,
};
use crate::error::{Error, Result};
use crate::ethernet::{ethertype, EthernetFrame, MacAddr, ETH_HDR};
use crate::ip_proto;
use crate::ipv4::{Ipv4Packet, IPV4_HDR};
use crate::ipv6::{Ipv6Packet, IPV6_HDR};
use crate::tcp::{TcpFlags, TcpPacket, TCP_HDR};
use crate::udp::{UdpPacket, UDP_HDR};
use crate::vlan::{Vlan, VlanHeader, VLAN_TAG_LEN};

/// Source and destination of one IP family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpPair {
    /// IPv4 addresses.
    V4 {
        /// Source.
        src: Ipv4Addr,
        /// Destination.
        dst: Ipv4Addr,
    },
    /// IPv6 addresses.
    V6 {
        /// Source.
        src: Ipv6Addr,
        /// Destination.
        dst: Ipv6Addr,
    },
}

impl IpPair {
    /// IP header length of this family (20 or 40).
    pub const fn header_len(&self) -> usize {
        match self {
            IpPair::V4 { .. } => IPV4_HDR,
            IpPair::V6 { .. } => IPV6_HDR,
        }
    }
}

/// The Ethernet [+ VLAN] and IP headers both frame kinds share.
struct Link {
    src_mac: MacAddr,
    dst_mac: MacAddr,
    vlan: Option<Vlan>,
    ip: IpPair,
    ttl: u8,
}

impl Link {
    fn l3_offset(&self) -> usize {
        ETH_HDR + if self.vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }

    /// Writes Ethernet [+ VLAN] + IP headers for an upper layer of `l4_len` bytes and returns the
    /// pseudo-header sum of the upper layer's checksum.
    fn emit(&self, buf: &mut [u8], protocol: u8, l4_len: u16) -> u32 {
        let ip_type = match self.ip {
            IpPair::V4 { .. } => ethertype::IPV4,
            IpPair::V6 { .. } => ethertype::IPV6,
        };
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.set_dst_addr(self.dst_mac);
        eth.set_src_addr(self.src_mac);
        match self.vlan {
            Some(v) => {
                eth.set_ethertype(v.tpid);
                let mut tag = VlanHeader::new_unchecked(&mut buf[ETH_HDR..ETH_HDR + VLAN_TAG_LEN]);
                tag.set_tci(v.tci);
                tag.set_ethertype(ip_type);
            }
            None => eth.set_ethertype(ip_type),
        }
        let l3 = self.l3_offset();
        let l4 = l3 + self.ip.header_len();
        match self.ip {
            IpPair::V4 { src, dst } => {
                let mut ip = Ipv4Packet::new_unchecked(&mut buf[l3..l4]);
                ip.set_version_and_header_len(IPV4_HDR as u8);
                ip.set_dscp_ecn(0, 0);
                ip.set_total_len(IPV4_HDR as u16 + l4_len);
                ip.set_ident(0);
                ip.set_frag(true, false, 0);
                ip.set_ttl(self.ttl);
                ip.set_protocol(protocol);
                ip.set_src_addr(src);
                ip.set_dst_addr(dst);
                ip.fill_checksum();
                checksum::pseudo_header_v4(src, dst, protocol, l4_len)
            }
            IpPair::V6 { src, dst } => {
                let mut ip = Ipv6Packet::new_unchecked(&mut buf[l3..l4]);
                ip.set_version_tc_flow(0, 0);
                ip.set_payload_len(l4_len);
                ip.set_next_header(protocol);
                ip.set_hop_limit(self.ttl);
                ip.set_src_addr(&src);
                ip.set_dst_addr(&dst);
                checksum::pseudo_header_v6(&src, &dst, protocol, l4_len as u32)
            }
        }
    }
}

/// An Ethernet [+ VLAN] + IPv4/IPv6 + UDP frame description.
///
/// IPv4 headers get no options, DSCP 0, identification 0 and don't-fragment; IPv6 headers traffic class
/// and flow label 0. The UDP checksum is always computed (mandatory for IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpFrameSpec {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Optional VLAN tag.
    pub vlan: Option<Vlan>,
    /// Addresses (decides IPv4 or IPv6).
    pub ip: IpPair,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// UDP payload bytes.
    pub payload_len: usize,
}

impl UdpFrameSpec {
    /// Offset of the IP header (14, or 18 with a VLAN tag).
    pub const fn l3_offset(&self) -> usize {
        ETH_HDR + if self.vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }

    /// Offset of the UDP header.
    pub const fn l4_offset(&self) -> usize {
        self.l3_offset() + self.ip.header_len()
    }

    /// Offset of the UDP payload.
    pub const fn payload_offset(&self) -> usize {
        self.l4_offset() + UDP_HDR
    }

    /// UDP length (8 + payload).
    pub const fn udp_len(&self) -> usize {
        UDP_HDR + self.payload_len
    }

    /// IP packet length: the size the generator counts.
    pub const fn ip_len(&self) -> usize {
        self.ip.header_len() + self.udp_len()
    }

    /// Frame length without FCS (IP length + 14, + 4 with VLAN).
    pub const fn frame_len(&self) -> usize {
        self.l3_offset() + self.ip_len()
    }

    /// The same spec with the payload sized so the IP packet is `ip_len` bytes.
    pub fn with_ip_len(mut self, ip_len: usize) -> Result<Self> {
        let min = self.ip.header_len() + UDP_HDR;
        if ip_len < min {
            return Err(Error::Malformed {
                header: "UDP frame",
                what: "IP length below IP + UDP headers (28 for IPv4, 48 for IPv6)",
            });
        }
        self.payload_len = ip_len - min;
        self.check()?;
        Ok(self)
    }

    /// Checks the lengths fit their 16-bit fields.
    pub fn check(&self) -> Result<()> {
        let too_long = match self.ip {
            IpPair::V4 { .. } => self.ip_len() > u16::MAX as usize,
            IpPair::V6 { .. } => self.udp_len() > u16::MAX as usize,
        };
        if too_long {
            return Err(Error::Malformed {
                header: "UDP frame",
                what: "payload too long for the 16-bit length fields (IPv4 packet max 65535 bytes)",
            });
        }
        Ok(())
    }

    /// Writes all headers into `buf[..frame_len()]` and computes the UDP checksum over the payload already
    /// in `buf[payload_offset()..frame_len()]`. Returns the frame length.
    ///
    /// Panics if `buf` is shorter than [`frame_len`](Self::frame_len) or [`check`](Self::check) fails
    /// (both are programming errors in the caller, not bad input).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let n = self.frame_len();
        assert!(
            buf.len() >= n,
            "UdpFrameSpec::emit: buffer holds {} bytes, frame needs {n}",
            buf.len()
        );
        let payload_sum = ones_complement_sum(&buf[self.payload_offset()..n]);
        self.emit_with_payload_sum(buf, payload_sum)
    }

    /// Like [`emit`](Self::emit) with the payload's [`ones_complement_sum`] given (e.g. 0 for a zero payload),
    /// so the payload is not read.
    pub fn emit_with_payload_sum(&self, buf: &mut [u8], payload_sum: u32) -> usize {
        if let Err(e) = self.check() {
            panic!("UdpFrameSpec::emit: {e}");
        }
        let n = self.frame_len();
        assert!(
            buf.len() >= n,
            "UdpFrameSpec::emit: buffer holds {} bytes, frame needs {n}",
            buf.len()
        );
        let buf = &mut buf[..n];
        let l4 = self.l4_offset();
        let udp_len = self.udp_len() as u16;
        let link = Link {
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            vlan: self.vlan,
            ip: self.ip,
            ttl: self.ttl,
        };
        let pseudo = link.emit(buf, ip_proto::UDP, udp_len);

        let mut udp = UdpPacket::new_unchecked(&mut buf[l4..l4 + UDP_HDR]);
        udp.set_src_port(self.src_port);
        udp.set_dst_port(self.dst_port);
        udp.set_len(udp_len);
        let sum = pseudo
            + self.src_port as u32
            + self.dst_port as u32
            + udp_len as u32
            + fold(payload_sum) as u32;
        udp.set_checksum(udp_nonzero(!fold(sum)));
        n
    }

    /// Rewrites the UDP ports of a frame emitted by this spec, patching the UDP checksum.
    pub fn set_ports(&self, frame: &mut [u8], src_port: u16, dst_port: u16) {
        let l4 = self.l4_offset();
        let old = be16(frame, l4) as u32 + be16(frame, l4 + 2) as u32;
        put16(frame, l4, src_port);
        put16(frame, l4 + 2, dst_port);
        self.patch_udp_checksum(frame, old, src_port as u32 + dst_port as u32);
    }

    /// Rewrites the addresses of a frame emitted by this spec (same family), patching the IPv4 header
    /// checksum and the UDP checksum (whose pseudo header covers them). Panics on a family change.
    pub fn set_ip(&self, frame: &mut [u8], ip: IpPair) {
        let l3 = self.l3_offset();
        let mut new = [0u8; 32];
        let (range, is_v4) = match (self.ip, ip) {
            (IpPair::V4 { .. }, IpPair::V4 { src, dst }) => {
                new[..4].copy_from_slice(&src.octets());
                new[4..8].copy_from_slice(&dst.octets());
                (l3 + 12..l3 + 20, true)
            }
            (IpPair::V6 { .. }, IpPair::V6 { src, dst }) => {
                new[..16].copy_from_slice(&src.octets());
                new[16..].copy_from_slice(&dst.octets());
                (l3 + 8..l3 + 40, false)
            }
            _ => panic!("UdpFrameSpec::set_ip: address family differs from the spec's"),
        };
        let new = &new[..range.len()];
        let old_sum = ones_complement_sum(&frame[range.clone()]);
        let new_sum = ones_complement_sum(new);
        frame[range].copy_from_slice(new);
        if is_v4 {
            let at = l3 + 10;
            put16(frame, at, update_sum(be16(frame, at), old_sum, new_sum));
        }
        self.patch_udp_checksum(frame, old_sum, new_sum);
    }

    /// Overwrites payload bytes at `offset` (from the payload start), patching the UDP checksum.
    pub fn write_payload(&self, frame: &mut [u8], offset: usize, bytes: &[u8]) {
        let start = self.payload_offset() + offset;
        let region = &mut frame[start..start + bytes.len()];
        let old = ones_complement_sum_at(region, offset);
        region.copy_from_slice(bytes);
        let new = ones_complement_sum_at(bytes, offset);
        self.patch_udp_checksum(frame, old, new);
    }

    /// RFC 1624 on the UDP checksum; a zero checksum (disabled, IPv4 only) stays zero.
    fn patch_udp_checksum(&self, frame: &mut [u8], old_sum: u32, new_sum: u32) {
        let at = self.l4_offset() + 6;
        let c = be16(frame, at);
        if c != 0 {
            put16(frame, at, udp_nonzero(update_sum(c, old_sum, new_sum)));
        }
    }
}

/// An Ethernet [+ VLAN] + IPv4/IPv6 + TCP segment description (no TCP options), for traces built from a
/// model rather than sent at top speed: every call writes the whole header set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpFrameSpec {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Optional VLAN tag.
    pub vlan: Option<Vlan>,
    /// Addresses (decides IPv4 or IPv6).
    pub ip: IpPair,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// TCP source port.
    pub src_port: u16,
    /// TCP destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (sent as is; meaningful with ACK in `flags`).
    pub ack: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Receive window.
    pub window: u16,
    /// TCP payload bytes.
    pub payload_len: usize,
}

impl TcpFrameSpec {
    fn link(&self) -> Link {
        Link {
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            vlan: self.vlan,
            ip: self.ip,
            ttl: self.ttl,
        }
    }

    /// Offset of the TCP header.
    pub fn l4_offset(&self) -> usize {
        self.link().l3_offset() + self.ip.header_len()
    }

    /// Frame length without FCS.
    pub fn frame_len(&self) -> usize {
        self.l4_offset() + TCP_HDR + self.payload_len
    }

    /// Writes all headers into `buf[..frame_len()]` and the TCP checksum over the payload already in place.
    /// Returns the frame length. Panics if `buf` is too short or the segment does not fit IP's 16-bit length
    /// (programming errors in the caller).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let n = self.frame_len();
        assert!(
            buf.len() >= n,
            "TcpFrameSpec::emit: buffer holds {} bytes, frame needs {n}",
            buf.len()
        );
        let payload_sum = ones_complement_sum(&buf[self.l4_offset() + TCP_HDR..n]);
        self.emit_with_payload_sum(buf, payload_sum)
    }

    /// Like [`emit`](Self::emit) with the payload's [`ones_complement_sum`] given (0 for a zero payload), so
    /// the payload is not read.
    pub fn emit_with_payload_sum(&self, buf: &mut [u8], payload_sum: u32) -> usize {
        let n = self.frame_len();
        let tcp_len = TCP_HDR + self.payload_len;
        assert!(
            tcp_len + IPV4_HDR <= u16::MAX as usize,
            "TcpFrameSpec::emit: segment of {tcp_len} bytes does not fit an IP packet"
        );
        assert!(
            buf.len() >= n,
            "TcpFrameSpec::emit: buffer holds {} bytes, frame needs {n}",
            buf.len()
        );
        let buf = &mut buf[..n];
        let l4 = self.l4_offset();
        let pseudo = self.link().emit(buf, ip_proto::TCP, tcp_len as u16);
        let mut tcp = TcpPacket::new_unchecked(&mut buf[l4..]);
        tcp.set_src_port(self.src_port);
        tcp.set_dst_port(self.dst_port);
        tcp.set_seq_number(self.seq);
        tcp.set_ack_number(self.ack);
        tcp.set_header_len_and_flags(TCP_HDR as u8, self.flags);
        tcp.set_window(self.window);
        tcp.set_checksum(0);
        tcp.set_urgent(0);
        let sum = pseudo + ones_complement_sum(&buf[l4..l4 + TCP_HDR]) + fold(payload_sum) as u32;
        put16(buf, l4 + 16, !fold(sum));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse, LinkType};

    #[test]
    fn tcp_segment_parses_back_and_its_checksum_verifies() {
        let spec = TcpFrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            vlan: None,
            ip: IpPair::V4 {
                src: Ipv4Addr::new(10, 1, 2, 3),
                dst: Ipv4Addr::new(10, 2, 0, 9),
            },
            ttl: 64,
            src_port: 40000,
            dst_port: 443,
            seq: 0xfffffff0,
            ack: 77,
            flags: TcpFlags(TcpFlags::PSH | TcpFlags::ACK),
            window: 64240,
            payload_len: 33,
        };
        let mut buf = vec![0u8; 200];
        buf[spec.l4_offset() + TCP_HDR..spec.frame_len()].fill(0xab);
        let n = spec.emit(&mut buf);
        assert_eq!(n, 14 + 20 + 20 + 33);
        let h = parse(&buf[..n], LinkType::Ethernet);
        assert_eq!((h.src_port, h.dst_port), (Some(40000), Some(443)));
        let tcp = TcpPacket::new_checked(&buf[34..n]).unwrap();
        assert_eq!((tcp.seq_number(), tcp.ack_number()), (0xfffffff0, 77));
        assert_eq!(tcp.flags().to_string(), "P.");
        // RFC 9293 §3.1: the sum over pseudo header and segment, checksum included, is all ones.
        let pseudo = checksum::pseudo_header_v4(
            Ipv4Addr::new(10, 1, 2, 3),
            Ipv4Addr::new(10, 2, 0, 9),
            ip_proto::TCP,
            (n - 34) as u16,
        );
        assert_eq!(fold(pseudo + ones_complement_sum(&buf[34..n])), 0xffff);
        let ip = Ipv4Packet::new_checked(&buf[14..n]).unwrap();
        assert_eq!(ip.total_len() as usize, n - 14);
        assert!(ip.verify_checksum());
    }
}
