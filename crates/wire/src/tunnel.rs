//! Decapsulation: the packet carried inside VXLAN, GENEVE, GRE (with or without key, transparent
//! Ethernet bridging), ERSPAN I/II/III, MPLS and IP-in-IP / IPv6-in-IP, found in one pass after
//! [`parse`](crate::parse()).
//!
//! Cloud traffic mirroring (AWS VPC Traffic Mirroring and Azure vTAP: VXLAN; GCP and appliances:
//! GENEVE; switches: ERSPAN over GRE) delivers every packet wrapped: the 5-tuple an analyst looks
//! for is the inner one. [`decapsulate`] returns the innermost headers it could read and, per
//! tunnel crossed, its kind, its identity (VNI, GRE key, ERSPAN session, MPLS label) and the
//! carrier's addresses. VLAN tags (QinQ included) are read by [`parse`](crate::parse()) at every
//! level and are not layers.
//!
//! How a tunnel is recognised (as Wireshark does by default): VXLAN by UDP destination port 4789,
//! GENEVE by 6081, GRE by IP protocol 47, IP-in-IP by protocol 4 and 41, MPLS by ethertype
//! 0x8847/0x8848 or GRE protocol 0x8847. After the bottom MPLS label the payload is IPv4 or IPv6
//! by its first nibble, or an Ethernet pseudowire behind a control word when the nibble is 0;
//! anything else stays undecoded. IP fragments are not decapsulated (the inner header may be in
//! another fragment): they keep the outer headers, the first one with [`Problem::Truncated`].
//!
//! Bounds: at most [`MAX_DEPTH`] tunnels are crossed and [`MAX_LABELS`] MPLS labels read; a
//! deeper packet keeps the headers reached so far and reports [`Problem::TooDeep`]. A truncated
//! or impossible tunnel header keeps the headers outside it and reports [`Problem::Truncated`] or
//! [`Problem::Malformed`], so a hostile packet costs at most a few header reads and is indexed by
//! what could be read.

use crate::bytes::{be16, be32};
use crate::ethernet::ethertype;
use crate::parse::{parse, Headers, IpVersion, LinkType};
use crate::{ip_proto, VLAN_TAG_LEN};

/// Tunnels crossed at most: e.g. VXLAN in GRE in MPLS is 3.
pub const MAX_DEPTH: usize = 4;
/// MPLS labels read at most in one stack.
pub const MAX_LABELS: usize = 8;

/// UDP destination port of VXLAN (RFC 7348).
pub const VXLAN_PORT: u16 = 4789;
/// UDP destination port of GENEVE (RFC 8926).
pub const GENEVE_PORT: u16 = 6081;

/// The UDP destination ports VXLAN and GENEVE are recognised by: [`Ports::DEFAULT`] (4789, 6081,
/// as Wireshark decodes them) everywhere but `capture --decap vxlan:PORT`, which names another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// UDP destination port of VXLAN.
    pub vxlan: u16,
    /// UDP destination port of GENEVE.
    pub geneve: u16,
}

impl Ports {
    /// The IANA ports: VXLAN 4789, GENEVE 6081.
    pub const DEFAULT: Ports = Ports {
        vxlan: VXLAN_PORT,
        geneve: GENEVE_PORT,
    };
}

impl Default for Ports {
    fn default() -> Ports {
        Ports::DEFAULT
    }
}

/// GRE protocol types beyond the IP ones.
mod gre_proto {
    /// Transparent Ethernet bridging (gretap, GENEVE's Ethernet payload).
    pub const TEB: u16 = 0x6558;
    /// ERSPAN type I (no ERSPAN header) and II.
    pub const ERSPAN_2: u16 = 0x88be;
    /// ERSPAN type III.
    pub const ERSPAN_3: u16 = 0x22eb;
}

/// The kind of one tunnel layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN; the id is the VNI.
    #[default]
    Vxlan,
    /// GENEVE; the id is the VNI.
    Geneve,
    /// GRE carrying IP or Ethernet (gretap); the id is the key, if present.
    Gre,
    /// ERSPAN type I (GRE 0x88be without sequence number, no ERSPAN header): no id.
    Erspan1,
    /// ERSPAN type II; the id is the session id.
    Erspan2,
    /// ERSPAN type III; the id is the session id.
    Erspan3,
    /// An MPLS label stack; the id is the top label.
    Mpls,
    /// IPv4 or IPv6 directly inside IP (protocol 4 or 41): no id.
    IpInIp,
}

impl TunnelKind {
    /// The lowercase name used in flow tables and query terms.
    pub const fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
            TunnelKind::Gre => "gre",
            TunnelKind::Erspan1 => "erspan1",
            TunnelKind::Erspan2 => "erspan2",
            TunnelKind::Erspan3 => "erspan3",
            TunnelKind::Mpls => "mpls",
            TunnelKind::IpInIp => "ipip",
        }
    }

    /// A small number for keys and index rows (1-8; 0 is left for "no tunnel").
    pub const fn code(self) -> u8 {
        match self {
            TunnelKind::Vxlan => 1,
            TunnelKind::Geneve => 2,
            TunnelKind::Gre => 3,
            TunnelKind::Erspan1 => 4,
            TunnelKind::Erspan2 => 5,
            TunnelKind::Erspan3 => 6,
            TunnelKind::Mpls => 7,
            TunnelKind::IpInIp => 8,
        }
    }

    /// The kind of a [`Self::code`]; `None` for 0 and unknown codes.
    pub const fn from_code(code: u8) -> Option<TunnelKind> {
        Some(match code {
            1 => TunnelKind::Vxlan,
            2 => TunnelKind::Geneve,
            3 => TunnelKind::Gre,
            4 => TunnelKind::Erspan1,
            5 => TunnelKind::Erspan2,
            6 => TunnelKind::Erspan3,
            7 => TunnelKind::Mpls,
            8 => TunnelKind::IpInIp,
            _ => return None,
        })
    }

    /// ERSPAN of any type.
    pub const fn is_erspan(self) -> bool {
        matches!(
            self,
            TunnelKind::Erspan1 | TunnelKind::Erspan2 | TunnelKind::Erspan3
        )
    }
}

/// One tunnel crossed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layer {
    /// What kind of tunnel.
    pub kind: TunnelKind,
    /// VNI, GRE key, ERSPAN session id or top MPLS label (see [`TunnelKind`]).
    pub id: Option<u32>,
    /// MPLS: labels in the stack (1 for the other kinds).
    pub labels: u8,
    /// IP version of the carrier (the IP header the tunnel rides in); `None` for MPLS straight
    /// over Ethernet.
    pub carrier_version: Option<IpVersion>,
    /// Carrier source address (IPv4 in bytes 0..4).
    pub carrier_src: [u8; 16],
    /// Carrier destination address.
    pub carrier_dst: [u8; 16],
    /// Offset of the carried packet in the frame.
    pub inner_offset: u32,
    /// What starts at `inner_offset`.
    pub payload: Payload,
}

/// What a tunnel carries: the link type its packet would have in a capture file of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Payload {
    /// An Ethernet frame (VXLAN, gretap, ERSPAN, GENEVE 0x6558, an MPLS pseudowire).
    #[default]
    Ethernet,
    /// An IPv4 or IPv6 packet, version in its first nibble.
    Ip,
    /// An MPLS label stack (GRE 0x8847): the next layer says what the stack carries.
    Mpls,
}

/// Why decapsulation stopped before the innermost packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The frame ends inside a tunnel header, or right after it; or it is the first IP fragment
    /// of a tunnel packet (the carried packet continues in the next fragment).
    Truncated,
    /// A tunnel header holds an impossible value (VXLAN without its I flag, wrong ERSPAN
    /// version, GENEVE version ≠ 0, MPLS payload that is neither IP nor a pseudowire).
    Malformed,
    /// More than [`MAX_DEPTH`] tunnels or [`MAX_LABELS`] MPLS labels.
    TooDeep,
    /// A GENEVE payload of a protocol type other than Ethernet, IPv4 or IPv6: a GENEVE packet
    /// (as libpcap's `geneve` sees it) whose content this module does not decode.
    Unsupported,
}

/// What [`decapsulate`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decapsulated {
    /// The innermost headers read, offsets counted from the start of the frame. Equal to
    /// [`parse`](crate::parse())'s result for a packet without tunnel.
    pub inner: Headers,
    /// The tunnels crossed, outermost first; `layers[..depth]` are valid.
    pub layers: [Layer; MAX_DEPTH],
    /// Tunnels crossed.
    pub depth: u8,
    /// The first VLAN id of the frame itself (libpcap's `vlan`), whatever the inner packet has.
    pub outer_vlan: Option<u16>,
    /// Why it stopped early, if it did: then `inner` is the last level read whole and the
    /// tunnel that could not be read is not among the layers.
    pub problem: Option<Problem>,
}

impl Decapsulated {
    /// The tunnels crossed, outermost first.
    pub fn layers(&self) -> &[Layer] {
        &self.layers[..usize::from(self.depth)]
    }

    fn push(&mut self, layer: Layer) {
        self.layers[usize::from(self.depth)] = layer;
        self.depth += 1;
    }

    /// The innermost tunnel, if any.
    pub fn innermost(&self) -> Option<&Layer> {
        self.layers().last()
    }
}

/// What sits at an offset of the frame.
#[derive(Clone, Copy)]
enum At {
    Ethernet(usize),
    Ip(usize),
    Mpls(usize),
}

/// Outcome of looking behind one level of headers.
enum Next {
    /// No tunnel (or one this module does not decode): the headers are the innermost.
    None,
    /// A tunnel: its layer and what it carries, ending at `end`.
    Tunnel(Layer, At, usize),
    Bad(Problem),
}

/// Decapsulates `frame` of link type `linktype`; never panics, never allocates.
pub fn decapsulate(frame: &[u8], linktype: LinkType) -> Decapsulated {
    decapsulate_parsed(frame, linktype, parse(frame, linktype))
}

/// [`decapsulate`] of a frame whose [`parse`] is `outer` (a caller that parsed it already saves
/// the second parse).
pub fn decapsulate_parsed(frame: &[u8], linktype: LinkType, outer: Headers) -> Decapsulated {
    decapsulate_parsed_ports(frame, linktype, outer, Ports::DEFAULT)
}

/// [`decapsulate_parsed`] with VXLAN and GENEVE recognised at `ports` instead of 4789 and 6081.
pub fn decapsulate_parsed_ports(
    frame: &[u8],
    linktype: LinkType,
    outer: Headers,
    ports: Ports,
) -> Decapsulated {
    let mut d = Decapsulated {
        inner: outer,
        outer_vlan: outer.vlan_outer,
        ..Decapsulated::default()
    };
    // An MPLS stack straight over the link has no IP header for `behind` to look at.
    let mut next = match link_payload(frame, linktype) {
        Some((ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST, off))
            if d.inner.ip_version.is_none() =>
        {
            mpls(frame, off, frame.len(), &d.inner)
        }
        _ => behind(frame, &d.inner, ports),
    };
    loop {
        let (layer, at, end) = match next {
            Next::None => return d,
            Next::Bad(p) => {
                d.problem = Some(p);
                return d;
            }
            Next::Tunnel(mut layer, at, end) => {
                layer.payload = match at {
                    At::Ethernet(_) => Payload::Ethernet,
                    At::Ip(_) => Payload::Ip,
                    At::Mpls(_) => Payload::Mpls,
                };
                (layer, at, end)
            }
        };
        if usize::from(d.depth) == MAX_DEPTH {
            d.problem = Some(Problem::TooDeep);
            return d;
        }
        let start = match at {
            At::Ethernet(o) | At::Ip(o) | At::Mpls(o) => o,
        };
        if start > end || end > frame.len() {
            d.problem = Some(Problem::Truncated);
            return d;
        }
        let carried = &frame[..end];
        let (h, mpls_at) = match at {
            At::Ethernet(off) => {
                let h = shifted(parse(&carried[off..], LinkType::Ethernet), off);
                let mpls_at = match link_payload(&carried[off..], LinkType::Ethernet) {
                    Some((ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST, o)) => Some(off + o),
                    _ => None,
                };
                (h, mpls_at)
            }
            At::Ip(off) => (shifted(parse(&carried[off..], LinkType::Raw), off), None),
            At::Mpls(off) => {
                // The carrier's headers stay the innermost until the stack is read.
                d.push(layer);
                next = mpls(frame, off, end, &d.inner);
                continue;
            }
        };
        if h.ip_version.is_none() && h.ethertype.is_none() {
            // Nothing of the carried packet could be read: keep the carrier's headers.
            d.problem = Some(if h.truncated {
                Problem::Truncated
            } else {
                Problem::Malformed
            });
            return d;
        }
        d.push(layer);
        d.inner = h;
        next = match mpls_at {
            Some(off) if h.ip_version.is_none() => mpls(frame, off, end, &h),
            _ => behind(carried, &h, ports),
        };
    }
}

/// The common VXLAN frame read in a few loads, for a query testing every packet of a mirror
/// store (README: `vxlan 42 and host …`; [`decapsulate`] costs ~70 ns a packet there, which made
/// that query 1.45 × the same query on the unwrapped packets, BENCHMARKS.md): Ethernet without
/// VLAN tag, IPv4 that is no fragment, UDP to 4789, the VXLAN I flag, and an inner Ethernet
/// header without tag, all whole inside the IP packet. Then `Some((vni, inner_offset))`, exactly
/// what [`decapsulate`] gives as its outermost layer (tests and the `tunnel_decap` fuzz target
/// check it). `None` says nothing: ask [`decapsulate`].
pub fn vxlan_fast(frame: &[u8], linktype: LinkType) -> Option<(u32, u32)> {
    vxlan_fast_port(frame, linktype, VXLAN_PORT)
}

/// [`vxlan_fast`] with VXLAN on UDP port `port` ([`decapsulate_parsed_ports`]'s outermost layer).
#[inline]
pub fn vxlan_fast_port(frame: &[u8], linktype: LinkType, port: u16) -> Option<(u32, u32)> {
    const ETH: usize = 14;
    if linktype != LinkType::Ethernet || be16_at(frame, 12)? != ethertype::IPV4 {
        return None;
    }
    let ip = frame.get(ETH..ETH + 20)?;
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(be16(ip, 2));
    let fragment = be16(ip, 6) & 0x3fff != 0;
    if ip[0] >> 4 != 4 || ihl < 20 || fragment || ip[9] != ip_proto::UDP {
        return None;
    }
    let udp = ETH + ihl;
    let inner = udp + 8 + 8;
    // The IP packet ends at its length: Ethernet padding is not payload.
    let end = (ETH + total).min(frame.len());
    if inner + ETH > end || be16_at(frame, udp + 2)? != port || frame[udp + 8] & 0x08 == 0 {
        return None;
    }
    if ethertype::is_vlan(be16_at(frame, inner + 12)?) {
        return None;
    }
    Some((be32(frame, udp + 12) >> 8, inner as u32))
}

/// Offsets of `h`, parsed from `frame[off..]`, counted from the frame's start.
fn shifted(mut h: Headers, off: usize) -> Headers {
    let add = |o: Option<u32>| o.map(|o| o + off as u32);
    h.l3_offset = add(h.l3_offset);
    h.l4_offset = add(h.l4_offset);
    h
}

/// The ethertype after the link header and any VLAN tags, and where its payload starts.
fn link_payload(f: &[u8], linktype: LinkType) -> Option<(u16, usize)> {
    let (mut et, mut off) = match linktype {
        LinkType::Ethernet => (be16_at(f, 12)?, 14),
        LinkType::LinuxSll => (be16_at(f, 14)?, 16),
        LinkType::LinuxSll2 => (be16_at(f, 0)?, 20),
        _ => return None,
    };
    while ethertype::is_vlan(et) {
        et = be16_at(f, off + 2)?;
        off += VLAN_TAG_LEN;
    }
    Some((et, off))
}

fn be16_at(f: &[u8], at: usize) -> Option<u16> {
    f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

/// A layer whose carrier is the IP header of `h`.
fn layer(kind: TunnelKind, id: Option<u32>, h: &Headers, inner_offset: usize) -> Layer {
    Layer {
        kind,
        id,
        labels: 1,
        carrier_version: h.ip_version,
        carrier_src: h.src_ip,
        carrier_dst: h.dst_ip,
        inner_offset: inner_offset as u32,
        payload: Payload::Ethernet,
    }
}

/// Looks behind the transport header of `h` for a tunnel.
fn behind(f: &[u8], h: &Headers, ports: Ports) -> Next {
    if h.ip_version.is_none() {
        return Next::None;
    }
    let (Some(l3), Some(l4), Some(proto)) = (h.l3_offset, h.l4_offset, h.protocol) else {
        return Next::None;
    };
    if h.is_fragment() {
        // The first fragment of a tunnel packet: what it carries is cut.
        let tunnel = match proto {
            ip_proto::UDP => h
                .dst_port
                .is_some_and(|p| p == ports.vxlan || p == ports.geneve),
            ip_proto::GRE | ip_proto::IPIP | ip_proto::IPV6 => true,
            _ => false,
        };
        return if tunnel {
            Next::Bad(Problem::Truncated)
        } else {
            Next::None
        };
    }
    // The IP packet ends at its length (Ethernet padding is not payload).
    let ip_end = match h.ip_len {
        Some(len) => (l3 as usize + len as usize).min(f.len()),
        None => f.len(),
    };
    let l4 = l4 as usize;
    if l4 > ip_end {
        return Next::None;
    }
    match proto {
        ip_proto::UDP => match h.dst_port {
            Some(p) if p == ports.vxlan => vxlan(f, l4 + 8, ip_end, h),
            Some(p) if p == ports.geneve => geneve(f, l4 + 8, ip_end, h),
            _ => Next::None,
        },
        ip_proto::GRE => gre(f, l4, ip_end, h),
        ip_proto::IPIP | ip_proto::IPV6 => {
            Next::Tunnel(layer(TunnelKind::IpInIp, None, h, l4), At::Ip(l4), ip_end)
        }
        _ => Next::None,
    }
}

/// VXLAN (RFC 7348): flags (I = 0x08: the VNI is valid), 3 reserved, VNI (24 bits), 1
/// reserved; then an Ethernet frame.
fn vxlan(f: &[u8], at: usize, end: usize, h: &Headers) -> Next {
    let Some(v) = f.get(at..at + 8).filter(|_| at + 8 <= end) else {
        return Next::Bad(Problem::Truncated);
    };
    if v[0] & 0x08 == 0 {
        return Next::Bad(Problem::Malformed);
    }
    let vni = be32(v, 4) >> 8;
    Next::Tunnel(
        layer(TunnelKind::Vxlan, Some(vni), h, at + 8),
        At::Ethernet(at + 8),
        end,
    )
}

/// GENEVE (RFC 8926): version (2 bits, 0) and options length (6 bits, in 4-byte words), flags,
/// protocol type, VNI (24 bits), reserved; then the options and the payload.
fn geneve(f: &[u8], at: usize, end: usize, h: &Headers) -> Next {
    let Some(g) = f.get(at..at + 8).filter(|_| at + 8 <= end) else {
        return Next::Bad(Problem::Truncated);
    };
    if g[0] >> 6 != 0 {
        return Next::Bad(Problem::Malformed);
    }
    let inner = at + 8 + usize::from(g[0] & 0x3f) * 4;
    let vni = be32(g, 4) >> 8;
    let carried = match be16(g, 2) {
        gre_proto::TEB => At::Ethernet(inner),
        ethertype::IPV4 | ethertype::IPV6 => At::Ip(inner),
        _ => return Next::Bad(Problem::Unsupported),
    };
    if inner > end {
        return Next::Bad(Problem::Truncated);
    }
    Next::Tunnel(layer(TunnelKind::Geneve, Some(vni), h, inner), carried, end)
}

/// GRE (RFC 2784/2890): C, R, K, S flags and version 0; checksum, key and sequence number when
/// flagged. ERSPAN rides in it (types II and III have a header of their own).
fn gre(f: &[u8], at: usize, end: usize, h: &Headers) -> Next {
    let Some(g) = f.get(at..at + 4).filter(|_| at + 4 <= end) else {
        return Next::Bad(Problem::Truncated);
    };
    let flags = be16(g, 0);
    let (checksum, routing, has_key, has_seq) = (
        flags & 0x8000 != 0,
        flags & 0x4000 != 0,
        flags & 0x2000 != 0,
        flags & 0x1000 != 0,
    );
    if flags & 0x7 != 0 || routing {
        // Version 1 is PPTP's enhanced GRE; source routing (RFC 1701) is obsolete.
        return Next::None;
    }
    let key_at = at + 4 + if checksum { 4 } else { 0 };
    let len = key_at - at + if has_key { 4 } else { 0 } + if has_seq { 4 } else { 0 };
    if at + len > end || f.len() < at + len {
        return Next::Bad(Problem::Truncated);
    }
    let key = has_key.then(|| be32(f, key_at));
    let inner = at + len;
    match be16(g, 2) {
        ethertype::IPV4 | ethertype::IPV6 => {
            Next::Tunnel(layer(TunnelKind::Gre, key, h, inner), At::Ip(inner), end)
        }
        gre_proto::TEB => Next::Tunnel(
            layer(TunnelKind::Gre, key, h, inner),
            At::Ethernet(inner),
            end,
        ),
        ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST => {
            Next::Tunnel(layer(TunnelKind::Gre, key, h, inner), At::Mpls(inner), end)
        }
        gre_proto::ERSPAN_2 if !has_seq => Next::Tunnel(
            layer(TunnelKind::Erspan1, None, h, inner),
            At::Ethernet(inner),
            end,
        ),
        gre_proto::ERSPAN_2 => erspan2(f, inner, end, h),
        gre_proto::ERSPAN_3 => erspan3(f, inner, end, h),
        _ => Next::None,
    }
}

/// ERSPAN type II: version (4 bits, 1), VLAN (12), COS, encapsulation type, truncated flag,
/// session id (10 bits), reserved, index; 8 bytes, then the mirrored Ethernet frame.
fn erspan2(f: &[u8], at: usize, end: usize, h: &Headers) -> Next {
    let Some(e) = f.get(at..at + 8).filter(|_| at + 8 <= end) else {
        return Next::Bad(Problem::Truncated);
    };
    if e[0] >> 4 != 1 {
        return Next::Bad(Problem::Malformed);
    }
    let session = u32::from(be16(e, 2) & 0x03ff);
    Next::Tunnel(
        layer(TunnelKind::Erspan2, Some(session), h, at + 8),
        At::Ethernet(at + 8),
        end,
    )
}

/// ERSPAN type III: version (4 bits, 2), VLAN, COS, BSO, T, session id (10 bits), timestamp,
/// SGT, P, frame type (5 bits: 0 Ethernet, 2 IP), hardware id, direction, granularity and O:
/// 12 bytes, 8 more for the platform sub-header when O is set.
fn erspan3(f: &[u8], at: usize, end: usize, h: &Headers) -> Next {
    let Some(e) = f.get(at..at + 12).filter(|_| at + 12 <= end) else {
        return Next::Bad(Problem::Truncated);
    };
    if e[0] >> 4 != 2 {
        return Next::Bad(Problem::Malformed);
    }
    let session = u32::from(be16(e, 2) & 0x03ff);
    let frame_type = (e[10] >> 2) & 0x1f;
    let inner = at + 12 + if e[11] & 0x01 != 0 { 8 } else { 0 };
    if inner > end {
        return Next::Bad(Problem::Truncated);
    }
    let carried = match frame_type {
        0 => At::Ethernet(inner),
        2 => At::Ip(inner),
        _ => return Next::Bad(Problem::Malformed),
    };
    Next::Tunnel(
        layer(TunnelKind::Erspan3, Some(session), h, inner),
        carried,
        end,
    )
}

/// An MPLS label stack at `at` (label 20 bits, TC 3, bottom-of-stack 1, TTL 8 per entry), then
/// IPv4/IPv6 by the first nibble, or a pseudowire control word (first nibble 0) and Ethernet.
/// The layer's carrier is `h`'s IP header, when it has one (MPLS over GRE).
fn mpls(f: &[u8], at: usize, end: usize, h: &Headers) -> Next {
    let mut off = at;
    let mut top = None;
    for n in 1..=MAX_LABELS {
        let Some(e) = f.get(off..off + 4).filter(|_| off + 4 <= end) else {
            return Next::Bad(Problem::Truncated);
        };
        let entry = be32(e, 0);
        top.get_or_insert(entry >> 12);
        off += 4;
        if entry & 0x100 != 0 {
            let mut l = layer(TunnelKind::Mpls, top, h, off);
            l.labels = n as u8;
            let carried = match f.get(off).filter(|_| off < end).map(|b| b >> 4) {
                Some(4 | 6) => At::Ip(off),
                Some(0) => At::Ethernet(off + 4),
                Some(_) => return Next::Bad(Problem::Malformed),
                None => return Next::Bad(Problem::Truncated),
            };
            if let At::Ethernet(inner) = carried {
                l.inner_offset = inner as u32;
            }
            return Next::Tunnel(l, carried, end);
        }
    }
    Next::Bad(Problem::TooDeep)
}

#[cfg(test)]
#[path = "tunnel_tests.rs"]
mod tests;
