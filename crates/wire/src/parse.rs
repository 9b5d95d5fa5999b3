//! One-pass summary of an untrusted frame: link header, VLAN tags, IP, transport ports/flags.
//!
//! Hot path (capture printing, header records, pcap → Parquet at > 3 Mpps): no allocation, no copy beyond
//! the fields kept, bounds checked with `get` so any byte string is safe. It reads only what it keeps,
//! and stops at the first header the frame does not hold, setting [`Headers::truncated`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bytes::{be16, get16};
use crate::ethernet::{ethertype, MacAddr};
use crate::ip_proto;
use crate::ipv6::skip_extension_headers;
use crate::tcp::TcpFlags;

/// The link-layer header type of a capture (pcap `LINKTYPE_*` / `DLT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// Ethernet (LINKTYPE_ETHERNET, 1).
    Ethernet,
    /// Raw IP, version from the first nibble (LINKTYPE_RAW 101, DLT_RAW 12).
    Raw,
    /// Raw IPv4 (228).
    Ipv4,
    /// Raw IPv6 (229).
    Ipv6,
    /// Linux cooked capture v1 (113), 16-byte header.
    LinuxSll,
    /// Linux cooked capture v2 (276), 20-byte header.
    LinuxSll2,
    /// BSD loopback (0): 4-byte address family in the capturing host's byte order.
    Null,
    /// OpenBSD loopback (108): 4-byte address family in network byte order.
    Loop,
}

impl LinkType {
    /// The link type for a pcap/pcapng link-type number, or `None` if this crate cannot decode it.
    pub const fn from_pcap(linktype: u32) -> Option<LinkType> {
        Some(match linktype {
            1 => LinkType::Ethernet,
            101 | 12 => LinkType::Raw,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            0 => LinkType::Null,
            108 => LinkType::Loop,
            _ => return None,
        })
    }

    /// The LINKTYPE_* number written to pcap/pcapng files.
    pub const fn pcap(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::Raw => 101,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
            LinkType::Null => 0,
            LinkType::Loop => 108,
        }
    }

    /// The DLT_* number libpcap compiles filters for on Linux (`pcap_open_dead` takes a DLT, not the
    /// LINKTYPE of a file: they differ only for raw IP, DLT_RAW 12 vs LINKTYPE_RAW 101).
    pub const fn dlt(self) -> u32 {
        match self {
            LinkType::Raw => 12,
            other => other.pcap(),
        }
    }

    /// The name libpcap and tcpdump print for it ("link-type EN10MB").
    pub const fn name(self) -> &'static str {
        match self {
            LinkType::Ethernet => "EN10MB",
            LinkType::Raw => "RAW",
            LinkType::Ipv4 => "IPV4",
            LinkType::Ipv6 => "IPV6",
            LinkType::LinuxSll => "LINUX_SLL",
            LinkType::LinuxSll2 => "LINUX_SLL2",
            LinkType::Null => "NULL",
            LinkType::Loop => "LOOP",
        }
    }

    /// Bytes of link header before the network layer (VLAN tags not counted).
    pub const fn header_len(self) -> usize {
        match self {
            LinkType::Ethernet => 14,
            LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => 0,
            LinkType::LinuxSll => 16,
            LinkType::LinuxSll2 => 20,
            LinkType::Null | LinkType::Loop => 4,
        }
    }
}

/// IP version of a parsed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// What [`parse`] found in one frame. Fields are `None` when the frame does not carry them (or ends first).
///
/// Addresses are kept as two `[u8; 16]` plus [`ip_version`](Self::ip_version) (IPv4 in the first 4 bytes,
/// the rest zero) rather than `IpAddr`: the parser copies them straight from the packet with no enum
/// construction, the struct has no padding holes between variants, and the header-record and Parquet
/// encoders write fixed 16-byte columns directly. [`src_addr`](Self::src_addr) gives an `IpAddr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    /// Source MAC (Ethernet; Linux SLL/SLL2 when the link address is 6 bytes).
    pub src_mac: Option<MacAddr>,
    /// Destination MAC (Ethernet only).
    pub dst_mac: Option<MacAddr>,
    /// Ethertype after any VLAN tags (`None` if the frame ends inside them); below 0x0600 an 802.3
    /// length (Ethernet) or the SLL protocol value.
    pub ethertype: Option<u16>,
    /// VLAN id of the first (outer) tag.
    pub vlan_outer: Option<u16>,
    /// VLAN id of the second tag (QinQ). Further tags are skipped.
    pub vlan_inner: Option<u16>,
    /// Set once the whole fixed IP header was read; then `src_ip`/`dst_ip`/`ttl` are valid.
    pub ip_version: Option<IpVersion>,
    /// Source address (IPv4 in bytes 0..4).
    pub src_ip: [u8; 16],
    /// Destination address (IPv4 in bytes 0..4).
    pub dst_ip: [u8; 16],
    /// IP packet length from the header (IPv4 total length; IPv6 40 + payload length).
    pub ip_len: Option<u32>,
    /// IP header length: IPv4 IHL × 4; IPv6 40 + extension headers skipped.
    pub ip_header_len: Option<u16>,
    /// TTL / hop limit.
    pub ttl: Option<u8>,
    /// Upper-layer protocol (after IPv6 extension headers; `None` if the frame ends inside them).
    pub protocol: Option<u8>,
    /// Fragment offset in bytes (IPv4 always; IPv6 only with a fragment header).
    pub frag_offset: Option<u16>,
    /// More-fragments flag.
    pub more_fragments: bool,
    /// TCP/UDP/SCTP/DCCP/UDP-Lite source port.
    pub src_port: Option<u16>,
    /// Destination port.
    pub dst_port: Option<u16>,
    /// TCP flags.
    pub tcp_flags: Option<TcpFlags>,
    /// TCP header length in bytes (options included).
    pub tcp_header_len: Option<u8>,
    /// UDP length field (header + payload).
    pub udp_len: Option<u16>,
    /// ICMP / ICMPv6 type.
    pub icmp_type: Option<u8>,
    /// ICMP / ICMPv6 code.
    pub icmp_code: Option<u8>,
    /// Offset of the network header (IP, ARP) in the frame.
    pub l3_offset: Option<u32>,
    /// Offset of the transport header in the frame (absent for non-first fragments).
    pub l4_offset: Option<u32>,
    /// The frame (or the IP length) ended inside a header this parser reads.
    pub truncated: bool,
    /// A header field held an impossible value (bad IP version, header length too small...).
    pub malformed: bool,
}

impl Headers {
    /// Source IP address, if an IP header was read.
    pub fn src_addr(&self) -> Option<IpAddr> {
        self.ip_version.map(|v| to_addr(v, &self.src_ip))
    }

    /// Destination IP address, if an IP header was read.
    pub fn dst_addr(&self) -> Option<IpAddr> {
        self.ip_version.map(|v| to_addr(v, &self.dst_ip))
    }

    /// True for an IP fragment (first or later).
    pub fn is_fragment(&self) -> bool {
        self.more_fragments || self.frag_offset.is_some_and(|o| o != 0)
    }

    /// IP payload length from the headers (after IPv6 extension headers), if known.
    pub fn ip_payload_len(&self) -> Option<u32> {
        Some(self.ip_len?.saturating_sub(self.ip_header_len? as u32))
    }
}

fn to_addr(v: IpVersion, b: &[u8; 16]) -> IpAddr {
    match v {
        IpVersion::V4 => IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
        IpVersion::V6 => IpAddr::V6(Ipv6Addr::from(*b)),
    }
}

/// Parses what it can of `frame`; never panics, never allocates.
pub fn parse(frame: &[u8], linktype: LinkType) -> Headers {
    let mut h = Headers::default();
    match linktype {
        LinkType::Ethernet => ethernet(frame, &mut h),
        LinkType::Raw => raw_ip(frame, 0, &mut h),
        LinkType::Ipv4 => ipv4(frame, 0, &mut h),
        LinkType::Ipv6 => ipv6(frame, 0, &mut h),
        LinkType::LinuxSll => sll(frame, &mut h),
        LinkType::LinuxSll2 => sll2(frame, &mut h),
        LinkType::Null | LinkType::Loop => null(frame, &mut h),
    }
    h
}

#[inline]
fn mac(f: &[u8], at: usize) -> Option<MacAddr> {
    let b = f.get(at..at + 6)?;
    Some(MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]))
}

fn ethernet(f: &[u8], h: &mut Headers) {
    h.dst_mac = mac(f, 0);
    h.src_mac = mac(f, 6);
    match get16(f, 12) {
        Some(et) => l2_payload(f, 14, et, h),
        None => h.truncated = true,
    }
}

/// Linux cooked v1: pkttype(2) hatype(2) halen(2) addr(8) protocol(2).
fn sll(f: &[u8], h: &mut Headers) {
    if f.len() < 16 {
        h.truncated = true;
        return;
    }
    if be16(f, 4) == 6 {
        h.src_mac = mac(f, 6);
    }
    l2_payload(f, 16, be16(f, 14), h);
}

/// Linux cooked v2: protocol(2) reserved(2) ifindex(4) hatype(2) pkttype(1) halen(1) addr(8).
fn sll2(f: &[u8], h: &mut Headers) {
    if f.len() < 20 {
        h.truncated = true;
        return;
    }
    if f[11] == 6 {
        h.src_mac = mac(f, 12);
    }
    l2_payload(f, 20, be16(f, 0), h);
}

/// BSD null/loop: a 4-byte address family. DLT_NULL uses the writer's byte order: families are small,
/// so two leading zero bytes mean big-endian.
fn null(f: &[u8], h: &mut Headers) {
    let Some(b) = f.get(..4) else {
        h.truncated = true;
        return;
    };
    let family = if b[0] == 0 && b[1] == 0 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    } else {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    };
    match family {
        2 => ipv4(f, 4, h),
        // AF_INET6 on Linux, NetBSD/OpenBSD, FreeBSD, macOS.
        10 | 24 | 28 | 30 => ipv6(f, 4, h),
        _ => {}
    }
}

/// Skips VLAN tags (recording the first two ids), then dispatches on the ethertype.
fn l2_payload(f: &[u8], mut off: usize, mut et: u16, h: &mut Headers) {
    let mut depth = 0u32;
    while ethertype::is_vlan(et) {
        let Some(tag) = f.get(off..off + 4) else {
            // The ethertype behind the tags is unknown.
            h.truncated = true;
            return;
        };
        let vid = u16::from_be_bytes([tag[0], tag[1]]) & 0x0fff;
        match depth {
            0 => h.vlan_outer = Some(vid),
            1 => h.vlan_inner = Some(vid),
            _ => {}
        }
        depth += 1;
        et = u16::from_be_bytes([tag[2], tag[3]]);
        off += 4;
    }
    h.ethertype = Some(et);
    match et {
        ethertype::IPV4 => ipv4(f, off, h),
        ethertype::IPV6 => ipv6(f, off, h),
        ethertype::ARP => {
            h.l3_offset = Some(off as u32);
            if f.len() < off + 8 {
                h.truncated = true;
            }
        }
        _ => {}
    }
}

fn raw_ip(f: &[u8], off: usize, h: &mut Headers) {
    match f.get(off).map(|b| b >> 4) {
        Some(4) => ipv4(f, off, h),
        Some(6) => ipv6(f, off, h),
        Some(_) => {
            h.l3_offset = Some(off as u32);
            h.malformed = true;
        }
        None => h.truncated = true,
    }
}

fn ipv4(f: &[u8], off: usize, h: &mut Headers) {
    h.l3_offset = Some(off as u32);
    let d = f.get(off..).unwrap_or(&[]);
    if d.len() < 20 {
        h.truncated = true;
        return;
    }
    if d[0] >> 4 != 4 {
        h.malformed = true;
        return;
    }
    let hl = ((d[0] & 0x0f) as usize) * 4;
    let total = be16(d, 2) as usize;
    let flags_off = be16(d, 6);
    h.ip_version = Some(IpVersion::V4);
    h.ip_len = Some(total as u32);
    h.ip_header_len = Some(hl as u16);
    h.ttl = Some(d[8]);
    h.protocol = Some(d[9]);
    h.src_ip[..4].copy_from_slice(&d[12..16]);
    h.dst_ip[..4].copy_from_slice(&d[16..20]);
    h.frag_offset = Some((flags_off & 0x1fff) << 3);
    h.more_fragments = flags_off & 0x2000 != 0;
    if hl < 20 || total < hl {
        h.malformed = true;
        return;
    }
    if d.len() < hl {
        h.truncated = true;
        return;
    }
    if flags_off & 0x1fff != 0 {
        return; // a later fragment: no transport header here
    }
    let end = total.min(d.len());
    transport(&d[hl..end], off + hl, d[9], h);
}

fn ipv6(f: &[u8], off: usize, h: &mut Headers) {
    h.l3_offset = Some(off as u32);
    let d = f.get(off..).unwrap_or(&[]);
    if d.len() < 40 {
        h.truncated = true;
        return;
    }
    if d[0] >> 4 != 6 {
        h.malformed = true;
        return;
    }
    let payload_len = be16(d, 4) as usize;
    let next = d[6];
    h.ip_version = Some(IpVersion::V6);
    h.ttl = Some(d[7]);
    h.src_ip.copy_from_slice(&d[8..24]);
    h.dst_ip.copy_from_slice(&d[24..40]);
    // Payload length 0 with a hop-by-hop header is a jumbogram (RFC 2675, Linux BIG TCP): the length is
    // in an option, so use the captured bytes and leave ip_len unknown.
    let end = if payload_len == 0 && next == ip_proto::HOPOPTS {
        d.len()
    } else {
        h.ip_len = Some(40 + payload_len as u32);
        (40 + payload_len).min(d.len())
    };
    let payload = &d[40..end];
    let ul = skip_extension_headers(next, payload);
    if let Some(frag) = ul.fragment {
        h.frag_offset = Some(frag.offset);
        h.more_fragments = frag.more;
    }
    if !ul.complete {
        // Ended inside the extension headers: protocol and header length unknown.
        h.truncated = true;
        return;
    }
    h.ip_header_len = Some((40 + ul.offset) as u16);
    h.protocol = Some(ul.protocol);
    if ul.fragment.is_some_and(|f| f.offset != 0) {
        return; // a later fragment: no transport header here
    }
    transport(&payload[ul.offset..], off + 40 + ul.offset, ul.protocol, h);
}

/// Reads ports and the few transport fields kept; `d` is bounded by the IP length.
fn transport(d: &[u8], off: usize, protocol: u8, h: &mut Headers) {
    h.l4_offset = Some(off as u32);
    match protocol {
        ip_proto::TCP => {
            ports(d, h);
            if d.len() < 20 {
                h.truncated = true;
                return;
            }
            let hl = (d[12] >> 4) * 4;
            h.tcp_header_len = Some(hl);
            h.tcp_flags = Some(TcpFlags(be16(d, 12) & 0x1ff));
            if hl < 20 {
                h.malformed = true;
            } else if d.len() < hl as usize {
                h.truncated = true;
            }
        }
        ip_proto::UDP | ip_proto::UDPLITE => {
            ports(d, h);
            h.udp_len = get16(d, 4);
            if d.len() < 8 {
                h.truncated = true;
            }
        }
        ip_proto::ICMP | ip_proto::ICMPV6 => {
            h.icmp_type = d.first().copied();
            h.icmp_code = d.get(1).copied();
            if d.len() < 8 {
                h.truncated = true;
            }
        }
        ip_proto::SCTP | ip_proto::DCCP => {
            ports(d, h);
        }
        _ => {}
    }
}

#[inline]
fn ports(d: &[u8], h: &mut Headers) {
    if let Some(p) = d.get(..4) {
        h.src_port = Some(u16::from_be_bytes([p[0], p[1]]));
        h.dst_port = Some(u16::from_be_bytes([p[2], p[3]]));
    } else {
        h.truncated = true;
    }
}
