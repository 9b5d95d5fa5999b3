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
    let mut d = Decapsulated {
        inner: parse(frame, linktype),
        ..Decapsulated::default()
    };
    // An MPLS stack straight over the link has no IP header for `behind` to look at.
    let mut next = match link_payload(frame, linktype) {
        Some((ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST, off))
            if d.inner.ip_version.is_none() =>
        {
            mpls(frame, off, frame.len(), &d.inner)
        }
        _ => behind(frame, &d.inner),
    };
    loop {
        let (layer, at, end) = match next {
            Next::None => return d,
            Next::Bad(p) => {
                d.problem = Some(p);
                return d;
            }
            Next::Tunnel(layer, at, end) => (layer, at, end),
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
                    Some((ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST, o)) => {
                        Some(off + o)
                    }
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
            _ => behind(carried, &h),
        };
    }
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
    }
}

/// Looks behind the transport header of `h` for a tunnel.
fn behind(f: &[u8], h: &Headers) -> Next {
    if h.ip_version.is_none() {
        return Next::None;
    }
    let (Some(l3), Some(l4), Some(proto)) = (h.l3_offset, h.l4_offset, h.protocol) else {
        return Next::None;
    };
    if h.is_fragment() {
        // The first fragment of a tunnel packet: what it carries is cut.
        let tunnel = match proto {
            ip_proto::UDP => matches!(h.dst_port, Some(VXLAN_PORT | GENEVE_PORT)),
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
            Some(VXLAN_PORT) => vxlan(f, l4 + 8, ip_end, h),
            Some(GENEVE_PORT) => geneve(f, l4 + 8, ip_end, h),
            _ => Next::None,
        },
        ip_proto::GRE => gre(f, l4, ip_end, h),
        ip_proto::IPIP | ip_proto::IPV6 => Next::Tunnel(
            layer(TunnelKind::IpInIp, None, h, l4),
            At::Ip(l4),
            ip_end,
        ),
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
        ethertype::IPV4 | ethertype::IPV6 => Next::Tunnel(
            layer(TunnelKind::Gre, key, h, inner),
            At::Ip(inner),
            end,
        ),
        gre_proto::TEB => Next::Tunnel(
            layer(TunnelKind::Gre, key, h, inner),
            At::Ethernet(inner),
            end,
        ),
        ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST => Next::Tunnel(
            layer(TunnelKind::Gre, key, h, inner),
            At::Mpls(inner),
            end,
        ),
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
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn eth(et: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        f.extend_from_slice(&et.to_be_bytes());
        f
    }

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let len = (20 + payload.len()) as u16;
        let mut p = vec![0x45, 0, (len >> 8) as u8, len as u8, 0, 0, 0x40, 0, 64, proto, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(payload);
        p
    }

    fn ipv6(next: u8, src_last: u8, dst_last: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u16;
        let mut p = vec![0x60, 0, 0, 0, (len >> 8) as u8, len as u8, next, 64];
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = src_last;
        p.extend_from_slice(&a);
        a[15] = dst_last;
        p.extend_from_slice(&a);
        p.extend_from_slice(payload);
        p
    }

    fn udp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
        let len = (8 + payload.len()) as u16;
        let mut u = Vec::new();
        for v in [sp, dp, len, 0] {
            u.extend_from_slice(&v.to_be_bytes());
        }
        u.extend_from_slice(payload);
        u
    }

    fn tcp(sp: u16, dp: u16) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&sp.to_be_bytes());
        t.extend_from_slice(&dp.to_be_bytes());
        t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        t
    }

    /// The inner packet every test carries: 10.1.0.3:40000 -> 10.1.0.4:80, TCP SYN.
    fn inner_ip() -> Vec<u8> {
        ipv4(6, [10, 1, 0, 3], [10, 1, 0, 4], &tcp(40000, 80))
    }

    fn inner_eth() -> Vec<u8> {
        [eth(0x0800), inner_ip()].concat()
    }

    /// Ethernet / IPv4 192.0.2.1 -> 192.0.2.2 / `proto` carrying `payload`.
    fn outer(proto: u8, payload: &[u8]) -> Vec<u8> {
        [eth(0x0800), ipv4(proto, [192, 0, 2, 1], [192, 0, 2, 2], payload)].concat()
    }

    fn gre(flags: u16, proto: u16, key: Option<u32>, seq: bool, payload: &[u8]) -> Vec<u8> {
        let mut flags = flags;
        if key.is_some() {
            flags |= 0x2000;
        }
        if seq {
            flags |= 0x1000;
        }
        let mut g = Vec::new();
        g.extend_from_slice(&flags.to_be_bytes());
        g.extend_from_slice(&proto.to_be_bytes());
        if flags & 0x8000 != 0 {
            g.extend_from_slice(&[0; 4]);
        }
        if let Some(k) = key {
            g.extend_from_slice(&k.to_be_bytes());
        }
        if seq {
            g.extend_from_slice(&7u32.to_be_bytes());
        }
        g.extend_from_slice(payload);
        g
    }

    fn vxlan(vni: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0x08, 0, 0, 0];
        v.extend_from_slice(&(vni << 8).to_be_bytes());
        v.extend_from_slice(payload);
        udp(51000, VXLAN_PORT, &v)
    }

    fn assert_inner_tcp(d: &Decapsulated) {
        let h = &d.inner;
        assert_eq!(h.src_addr(), Some(Ipv4Addr::new(10, 1, 0, 3).into()), "{d:?}");
        assert_eq!(h.dst_addr(), Some(Ipv4Addr::new(10, 1, 0, 4).into()));
        assert_eq!((h.src_port, h.dst_port), (Some(40000), Some(80)));
        assert_eq!(h.protocol, Some(6));
        assert_eq!(d.problem, None);
    }

    fn one_layer(d: &Decapsulated, kind: TunnelKind, id: Option<u32>) -> Layer {
        assert_eq!(d.depth, 1, "{d:?}");
        let l = d.layers[0];
        assert_eq!((l.kind, l.id), (kind, id));
        l
    }

    #[test]
    fn a_packet_without_tunnel_is_what_parse_gives() {
        let f = [eth(0x0800), inner_ip()].concat();
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_eq!(d.depth, 0);
        assert_eq!(d.inner, parse(&f, LinkType::Ethernet));
        // Plain UDP to another port is not a tunnel.
        let f = outer(17, &udp(1000, 53, &[0; 12]));
        assert_eq!(decapsulate(&f, LinkType::Ethernet).depth, 0);
    }

    #[test]
    fn vxlan_gives_the_inner_five_tuple_the_vni_and_the_carrier() {
        let f = outer(17, &vxlan(42, &inner_eth()));
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_inner_tcp(&d);
        let l = one_layer(&d, TunnelKind::Vxlan, Some(42));
        assert_eq!(l.carrier_version, Some(IpVersion::V4));
        assert_eq!(&l.carrier_src[..4], &[192, 0, 2, 1]);
        assert_eq!(&l.carrier_dst[..4], &[192, 0, 2, 2]);
        // 14 + 20 + 8 + 8: the inner Ethernet header; its IP 14 further.
        assert_eq!(l.inner_offset, 50);
        assert_eq!(d.inner.l3_offset, Some(64));
        assert_eq!(d.inner.l4_offset, Some(84));
        assert_eq!(&f[84..86], &40000u16.to_be_bytes());
    }

    #[test]
    fn vxlan_without_its_i_flag_or_cut_short_keeps_the_outer_headers() {
        let mut f = outer(17, &vxlan(42, &inner_eth()));
        let outer_h = parse(&f, LinkType::Ethernet);
        f[42] = 0;
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_eq!((d.depth, d.problem), (0, Some(Problem::Malformed)));
        assert_eq!(d.inner, outer_h);
        let f = outer(17, &udp(51000, VXLAN_PORT, &[0x08, 0, 0]));
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_eq!((d.depth, d.problem), (0, Some(Problem::Truncated)));
    }

    #[test]
    fn geneve_skips_its_options_and_carries_ethernet_or_ip() {
        let mut g = vec![0x02, 0, 0x65, 0x58, 0, 0, 7, 0];
        g.extend_from_slice(&[0xab; 8]); // two option words
        g.extend_from_slice(&inner_eth());
        let d = decapsulate(&outer(17, &udp(1, GENEVE_PORT, &g)), LinkType::Ethernet);
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::Geneve, Some(7));
        let g = [vec![0, 0, 0x08, 0x00, 0, 1, 0, 0], inner_ip()].concat();
        let d = decapsulate(&outer(17, &udp(1, GENEVE_PORT, &g)), LinkType::Ethernet);
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::Geneve, Some(256));
        let g = [vec![0, 0, 0x88, 0x47, 0, 1, 0, 0], inner_ip()].concat();
        let d = decapsulate(&outer(17, &udp(1, GENEVE_PORT, &g)), LinkType::Ethernet);
        assert_eq!((d.depth, d.problem), (0, Some(Problem::Unsupported)));
    }

    #[test]
    fn gre_with_and_without_key_checksum_and_bridged_ethernet() {
        for (flags, key, seq) in [(0, None, false), (0, Some(5), false), (0x8000, Some(9), true)] {
            let f = outer(47, &gre(flags, 0x0800, key, seq, &inner_ip()));
            let d = decapsulate(&f, LinkType::Ethernet);
            assert_inner_tcp(&d);
            one_layer(&d, TunnelKind::Gre, key);
        }
        let f = outer(47, &gre(0, 0x6558, Some(77), false, &inner_eth()));
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::Gre, Some(77));
        // PPTP's enhanced GRE (version 1) is not decoded.
        let f = outer(47, &gre(1, 0x880b, None, false, &[0; 8]));
        assert_eq!(decapsulate(&f, LinkType::Ethernet).depth, 0);
    }

    #[test]
    fn erspan_types_one_two_and_three() {
        let f = outer(47, &gre(0, 0x88be, None, false, &inner_eth()));
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::Erspan1, None);
        // Type II: version 1, VLAN 0, session 123.
        let e2 = [vec![0x10, 0x00, 0x00, 123, 0, 0, 0, 1], inner_eth()].concat();
        let d = decapsulate(&outer(47, &gre(0, 0x88be, None, true, &e2)), LinkType::Ethernet);
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::Erspan2, Some(123));
        // Type III: version 2, session 0x3ff, with and without the platform sub-header.
        for o in [false, true] {
            let mut e3 = vec![0x20, 0x00, 0x03, 0xff, 0, 0, 0, 1, 0, 0, 0, u8::from(o)];
            if o {
                e3.extend_from_slice(&[0xcd; 8]);
            }
            e3.extend_from_slice(&inner_eth());
            let d = decapsulate(&outer(47, &gre(0, 0x22eb, None, true, &e3)), LinkType::Ethernet);
            assert_inner_tcp(&d);
            one_layer(&d, TunnelKind::Erspan3, Some(1023));
        }
        // A type II header claiming version 2 is malformed.
        let bad = [vec![0x20, 0, 0, 1, 0, 0, 0, 0], inner_eth()].concat();
        let d = decapsulate(&outer(47, &gre(0, 0x88be, None, true, &bad)), LinkType::Ethernet);
        assert_eq!((d.depth, d.problem), (0, Some(Problem::Malformed)));
    }

    fn label(l: u32, bottom: bool) -> [u8; 4] {
        (l << 12 | u32::from(bottom) << 8 | 64).to_be_bytes()
    }

    #[test]
    fn mpls_stacks_over_ethernet_and_gre_and_pseudowires() {
        let f = [eth(0x8847), label(100, false).to_vec(), label(200, true).to_vec(), inner_ip()]
            .concat();
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_inner_tcp(&d);
        let l = one_layer(&d, TunnelKind::Mpls, Some(100));
        assert_eq!((l.labels, l.carrier_version), (2, None));
        // An Ethernet pseudowire behind a control word.
        let f = [eth(0x8847), label(16, true).to_vec(), vec![0; 4], inner_eth()].concat();
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::Mpls, Some(16));
        // MPLS inside GRE: two layers.
        let m = [label(300, true).to_vec(), inner_ip()].concat();
        let d = decapsulate(&outer(47, &gre(0, 0x8847, None, false, &m)), LinkType::Ethernet);
        assert_inner_tcp(&d);
        assert_eq!(d.depth, 2);
        assert_eq!(d.layers[1].kind, TunnelKind::Mpls);
        assert_eq!(d.layers[1].id, Some(300));
        assert_eq!(&d.layers[1].carrier_src[..4], &[192, 0, 2, 1]);
        // More labels than MAX_LABELS.
        let deep: Vec<u8> = (0..MAX_LABELS + 1)
            .flat_map(|i| label(i as u32, false))
            .collect();
        let d = decapsulate(&[eth(0x8847), deep].concat(), LinkType::Ethernet);
        assert_eq!(d.problem, Some(Problem::TooDeep));
    }

    #[test]
    fn ip_in_ip_and_ipv6_in_ip() {
        let d = decapsulate(&outer(4, &inner_ip()), LinkType::Ethernet);
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::IpInIp, None);
        let six = ipv6(17, 1, 2, &udp(5353, 53, &[0; 4]));
        let d = decapsulate(&outer(41, &six), LinkType::Ethernet);
        one_layer(&d, TunnelKind::IpInIp, None);
        assert_eq!(d.inner.ip_version, Some(IpVersion::V6));
        assert_eq!(d.inner.dst_port, Some(53));
        // IPv4 in IPv6, on a raw-IP link.
        let d = decapsulate(&ipv6(4, 1, 2, &inner_ip()), LinkType::Raw);
        assert_inner_tcp(&d);
        assert_eq!(d.layers[0].carrier_version, Some(IpVersion::V6));
    }

    #[test]
    fn nesting_qinq_gre_vxlan_and_the_depth_bound() {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xa8, 0, 10, 0x81, 0, 0, 20];
        f.extend_from_slice(&[0x08, 0x00]);
        let in_gre = ipv4(17, [172, 16, 0, 1], [172, 16, 0, 2], &vxlan(5, &inner_eth()));
        f.extend_from_slice(&ipv4(47, [192, 0, 2, 1], [192, 0, 2, 2], &gre(0, 0x0800, Some(3), false, &in_gre)));
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_inner_tcp(&d);
        let kinds: Vec<_> = d.layers().iter().map(|l| (l.kind, l.id)).collect();
        assert_eq!(kinds, [(TunnelKind::Gre, Some(3)), (TunnelKind::Vxlan, Some(5))]);
        assert_eq!(&d.layers[1].carrier_src[..4], &[172, 16, 0, 1]);
        // Five IP-in-IP layers: four are crossed, the fifth reported.
        let mut p = inner_ip();
        for _ in 0..MAX_DEPTH + 1 {
            p = ipv4(4, [192, 0, 2, 1], [192, 0, 2, 2], &p);
        }
        let d = decapsulate(&p, LinkType::Raw);
        assert_eq!((usize::from(d.depth), d.problem), (MAX_DEPTH, Some(Problem::TooDeep)));
        assert_eq!(d.inner.protocol, Some(4));
    }

    #[test]
    fn a_bad_carried_packet_keeps_the_carrier_and_no_prefix_panics() {
        // IP-in-IP whose payload is not IP.
        let f = outer(4, &[0x55; 24]);
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_eq!((d.depth, d.problem), (0, Some(Problem::Malformed)));
        assert_eq!(d.inner, parse(&f, LinkType::Ethernet));
        // Every prefix of a nested frame decodes without panicking, never deeper than whole.
        let m = [label(300, true).to_vec(), vxlan_in_ip()].concat();
        let f = outer(47, &gre(0x8000, 0x8847, Some(1), true, &m));
        let whole = decapsulate(&f, LinkType::Ethernet);
        assert_eq!(whole.depth, 3);
        for n in 0..f.len() {
            let d = decapsulate(&f[..n], LinkType::Ethernet);
            assert!(d.depth <= whole.depth);
        }
    }

    fn vxlan_in_ip() -> Vec<u8> {
        ipv4(17, [172, 16, 0, 1], [172, 16, 0, 2], &vxlan(5, &inner_eth()))
    }
}
