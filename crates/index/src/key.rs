//! The flow key of a packet: what the index files packets under.

use wire::{IpVersion, LinkType};

pub use crate::names::L4;

/// The key has IP addresses.
pub const KIND_IP: u8 = 1;
/// The key has transport ports.
pub const KIND_PORTS: u8 = 2;
/// The packet carried an 802.1Q tag (the outer id is in `vlan`).
pub const KIND_VLAN: u8 = 4;
/// Where an index row keeps the tunnel's code ([`wire::TunnelKind::code`]) in its kind byte: bits 3-6.
pub const TUNNEL_SHIFT: u32 = 3;

/// A flow, both directions in one key: the endpoint that sorts first is `a`. Packets without an IP
/// header (ARP, other ethertypes, unparsable frames) share the key with `kind` 0 and are a
/// candidate of every query, so narrowing stays a superset of what libpcap accepts (its `host X`
/// also matches ARP).
///
/// A packet inside one tunnel ([`wire::decapsulate`]) is keyed by the packet it carries, with the
/// tunnel's code, id and carrier addresses; one inside two or more, or whose tunnel header could
/// not be read whole, shares the key of packets without IP (libpcap's `geneve` or `mpls` may
/// still look inside it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// IPv6 address, or IPv4 as `::ffff:a.b.c.d`.
    pub a: [u8; 16],
    pub b: [u8; 16],
    pub port_a: u16,
    pub port_b: u16,
    pub proto: u8,
    pub kind: u8,
    pub vlan: u16,
    /// The tunnel the packet came in ([`wire::TunnelKind::code`]; 0: none).
    pub tunnel: u8,
    /// Its VNI, GRE key, ERSPAN session or top MPLS label (0 when it has none).
    pub tunnel_id: u32,
    /// The tunnel's carrier addresses (the outer IP header), the lower first; zero without.
    pub carrier_a: [u8; 16],
    pub carrier_b: [u8; 16],
}

/// An IPv4 address in the index's 16-byte form.
pub fn mapped_v4(o: [u8; 4]) -> [u8; 16] {
    let mut m = [0u8; 16];
    m[10] = 0xff;
    m[11] = 0xff;
    m[12..].copy_from_slice(&o);
    m
}

/// Any address in the index's 16-byte form.
pub fn addr16(ip: std::net::IpAddr) -> [u8; 16] {
    match ip {
        std::net::IpAddr::V4(v) => mapped_v4(v.octets()),
        std::net::IpAddr::V6(v) => v.octets(),
    }
}

impl FlowKey {
    /// The key back from [`Self::compact_v4`].
    pub fn from_compact_v4(k: u128) -> FlowKey {
        FlowKey {
            a: mapped_v4(((k >> 96) as u32).to_be_bytes()),
            b: mapped_v4(((k >> 64) as u32).to_be_bytes()),
            port_a: (k >> 48) as u16,
            port_b: (k >> 32) as u16,
            proto: (k >> 24) as u8,
            kind: (k >> 16) as u8,
            vlan: k as u16,
            ..FlowKey::default()
        }
    }

    /// The key in 128 bits when both addresses are IPv4 (nearly always): what the builder logs
    /// per packet and sorts.
    #[inline]
    pub fn compact_v4(&self) -> Option<u128> {
        const V4: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
        if self.a[..12] != V4 || self.b[..12] != V4 || self.tunnel != 0 {
            return None;
        }
        let a = u32::from_be_bytes(self.a[12..].try_into().unwrap());
        let b = u32::from_be_bytes(self.b[12..].try_into().unwrap());
        Some(
            u128::from(a) << 96
                | u128::from(b) << 64
                | u128::from(self.port_a) << 48
                | u128::from(self.port_b) << 32
                | u128::from(self.proto) << 24
                | u128::from(self.kind) << 16
                | u128::from(self.vlan),
        )
    }

    /// [`Self::compact_v4`] of [`Self::of`] for the common frame, read straight from the bytes, and
    /// whether the packet goes from endpoint `a` to `b` (the flow table counts each direction):
    /// Ethernet, at most one 802.1Q tag, IPv4 without options or fragmentation, TCP or UDP with
    /// both ports captured. `None` for anything else (the caller then takes [`Self::of`]). The
    /// live indexer files every packet: the general parser fills ~30 fields it does not need
    /// (about half the cost of filing a packet, `examples/indexer_cost.rs`).
    #[inline]
    pub fn compact_v4_of(frame: &[u8], linktype: LinkType) -> Option<(u128, bool)> {
        Self::compact_v4_l4(frame, linktype).map(|(k, a_to_b, _)| (k, a_to_b))
    }

    /// [`Self::compact_v4_of`], and where the transport header lies (for the names' gate).
    #[inline]
    pub fn compact_v4_l4(frame: &[u8], linktype: LinkType) -> Option<(u128, bool, L4)> {
        if linktype != LinkType::Ethernet {
            return None;
        }
        let be16 = |at: usize| {
            frame
                .get(at..at + 2)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
        };
        let (off, vlan, kind) = match be16(12)? {
            0x0800 => (14, 0, KIND_IP | KIND_PORTS),
            0x8100 if be16(16)? == 0x0800 => {
                (18, be16(14)? & 0x0fff, KIND_IP | KIND_PORTS | KIND_VLAN)
            }
            _ => return None,
        };
        let ip = frame.get(off..off + 20)?;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
        let proto = ip[9];
        // The ports must lie inside both the IP length and the captured bytes.
        let l4_end = total.min(frame.len() - off);
        if ip[0] != 0x45
            || total < 20
            || fragment != 0
            || !(proto == 6 || proto == 17)
            || l4_end < 24
        {
            return None;
        }
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        let (sp, dp) = (be16(off + 20)?, be16(off + 22)?);
        if proto == 17 && matches!(dp, wire::tunnel::VXLAN_PORT | wire::tunnel::GENEVE_PORT) {
            return None; // a tunnel: keyed by what it carries
        }
        let a_to_b = (src, sp) <= (dst, dp);
        let ((a, port_a), (b, port_b)) = if a_to_b {
            ((src, sp), (dst, dp))
        } else {
            ((dst, dp), (src, sp))
        };
        let key = u128::from(a) << 96
            | u128::from(b) << 64
            | u128::from(port_a) << 48
            | u128::from(port_b) << 32
            | u128::from(proto) << 24
            | u128::from(kind) << 16
            | u128::from(vlan);
        let l4 = L4 {
            proto,
            at: off + 20,
            end: off + l4_end,
        };
        Some((key, a_to_b, l4))
    }

    /// The key of one frame: its IP header's, or the carried packet's for a packet in a tunnel.
    pub fn of(frame: &[u8], linktype: LinkType) -> FlowKey {
        Self::directed_of(frame, linktype).0
    }

    /// [`Self::of`], and whether the packet goes from endpoint `a` to `b` (true for packets
    /// without an IP header).
    pub fn directed_of(frame: &[u8], linktype: LinkType) -> (FlowKey, bool) {
        let (key, a_to_b, _) = Self::directed_l4(frame, linktype);
        (key, a_to_b)
    }

    /// [`Self::directed_of`], and where the (carried) packet's TCP or UDP header lies when it
    /// has both ports and is not a later fragment.
    pub fn directed_l4(frame: &[u8], linktype: LinkType) -> (FlowKey, bool, Option<L4>) {
        let d = wire::decapsulate(frame, linktype);
        if d.depth > 1 || d.problem.is_some() {
            return (FlowKey::default(), true, None);
        }
        let (key, a_to_b) = Self::of_decapsulated(&d);
        let h = &d.inner;
        let l4 = match (h.protocol, h.l4_offset, h.l3_offset, h.ip_len) {
            (Some(proto @ (6 | 17)), Some(at), Some(l3), Some(len))
                if key.kind & KIND_PORTS != 0 && h.frag_offset.unwrap_or(0) == 0 =>
            {
                Some(L4 {
                    proto,
                    at: at as usize,
                    end: (l3 as usize + len as usize).min(frame.len()),
                })
            }
            _ => None,
        };
        (key, a_to_b, l4)
    }

    fn of_decapsulated(d: &wire::Decapsulated) -> (FlowKey, bool) {
        let (mut key, a_to_b) = Self::of_headers(&d.inner);
        if let (Some(l), true) = (d.innermost(), key.kind & KIND_IP != 0) {
            key.tunnel = l.kind.code();
            key.tunnel_id = l.id.unwrap_or(0);
            if let Some(v) = l.carrier_version {
                let (x, y) = (addr_of(v, &l.carrier_src), addr_of(v, &l.carrier_dst));
                (key.carrier_a, key.carrier_b) = if x <= y { (x, y) } else { (y, x) };
            }
            // The outer VLAN tag is libpcap's `vlan` (the inner one is not indexed).
            key.vlan = 0;
            key.kind &= !KIND_VLAN;
            if let Some(vid) = d.outer_vlan {
                key.vlan = vid;
                key.kind |= KIND_VLAN;
            }
        } else if d.depth == 1 {
            // A tunnel carrying no IP (ARP inside VXLAN): a candidate of every query.
            return (FlowKey::default(), true);
        }
        (key, a_to_b)
    }

    fn of_headers(h: &wire::Headers) -> (FlowKey, bool) {
        let Some(v) = h.ip_version else {
            return (FlowKey::default(), true);
        };
        let (src, dst) = (addr_of(v, &h.src_ip), addr_of(v, &h.dst_ip));
        let mut kind = KIND_IP;
        let (sp, dp) = match (h.src_port, h.dst_port) {
            (Some(s), Some(d)) => {
                kind |= KIND_PORTS;
                (s, d)
            }
            _ => (0, 0),
        };
        let vlan = match h.vlan_outer {
            Some(v) => {
                kind |= KIND_VLAN;
                v
            }
            None => 0,
        };
        let a_to_b = (src, sp) <= (dst, dp);
        let ((a, port_a), (b, port_b)) = if a_to_b {
            ((src, sp), (dst, dp))
        } else {
            ((dst, dp), (src, sp))
        };
        let key = FlowKey {
            a,
            b,
            port_a,
            port_b,
            proto: h.protocol.unwrap_or(0),
            kind,
            vlan,
            ..FlowKey::default()
        };
        (key, a_to_b)
    }
}

/// An address of a parsed header in the index's 16-byte form.
fn addr_of(v: IpVersion, b: &[u8; 16]) -> [u8; 16] {
    match v {
        IpVersion::V4 => mapped_v4(b[..4].try_into().unwrap()),
        IpVersion::V6 => *b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::TunnelKind;

    /// Ethernet [802.1Q] IPv4 UDP/TCP, 64 bytes of payload.
    fn template(vlan: bool, proto: u8) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x20, 0x07]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let ip_len = 20 + 20 + 64u16;
        f.extend_from_slice(&[
            0x45,
            0,
            (ip_len >> 8) as u8,
            ip_len as u8,
            0,
            0,
            0x40,
            0,
            64,
            proto,
            0,
            0,
        ]);
        f.extend_from_slice(&[10, 0, 1, 2, 10, 9, 0, 1]);
        f.extend_from_slice(&[0x13, 0x89, 0x04, 0x00]);
        f.resize(f.len() + 16 + 64, 0);
        f
    }

    /// Whenever the fast path answers, it is the general parser's key: checked on frames with
    /// random header bytes and random capture lengths around the template's.
    #[test]
    fn the_fast_key_is_the_general_key() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut answered = 0;
        for round in 0..200_000 {
            let mut f = template(round % 2 == 0, if round % 3 == 0 { 6 } else { 17 });
            if round % 4 != 0 {
                // Change 1-3 bytes of the headers.
                for _ in 0..1 + rand() % 3 {
                    let at = (rand() % 50) as usize;
                    f[at] = rand() as u8;
                }
            }
            if round % 5 == 0 {
                f.truncate((rand() % f.len() as u64) as usize);
            }
            let fast = FlowKey::compact_v4_of(&f, LinkType::Ethernet);
            if let Some((k, a_to_b)) = fast {
                answered += 1;
                let (slow, slow_a_to_b) = FlowKey::directed_of(&f, LinkType::Ethernet);
                assert_eq!(Some(k), slow.compact_v4(), "{f:02x?}");
                assert_eq!(a_to_b, slow_a_to_b, "{f:02x?}");
                // The names' gate reads the same transport header either way.
                let fast_l4 = FlowKey::compact_v4_l4(&f, LinkType::Ethernet).map(|x| x.2);
                assert_eq!(
                    fast_l4,
                    FlowKey::directed_l4(&f, LinkType::Ethernet).2,
                    "{f:02x?}"
                );
            }
        }
        // The unchanged templates (a quarter, less the cut ones) must take the fast path.
        assert!(answered > 40_000, "{answered}");
        for lt in [LinkType::Raw, LinkType::LinuxSll] {
            assert_eq!(FlowKey::compact_v4_of(&template(false, 17), lt), None);
        }
    }

    /// Ethernet / IPv4 192.0.2.1 -> 192.0.2.2 / UDP to `dport` / `body`.
    fn udp_carrier(dport: u16, body: &[u8], flags: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let len = (28 + body.len()) as u16;
        f.extend_from_slice(&[0x45, 0, (len >> 8) as u8, len as u8, 0, 0]);
        f.extend_from_slice(&flags.to_be_bytes());
        f.extend_from_slice(&[64, 17, 0, 0, 192, 0, 2, 2, 192, 0, 2, 1]);
        f.extend_from_slice(&[0xc3, 0x50]);
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn a_tunnelled_packet_is_keyed_by_what_it_carries() {
        // VXLAN VNI 42 around the template's TCP packet (10.0.1.2:5001 -> 10.9.0.1:1024).
        let mut vx = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
        vx.extend_from_slice(&template(false, 6));
        let f = udp_carrier(4789, &vx, 0x4000);
        assert_eq!(FlowKey::compact_v4_of(&f, LinkType::Ethernet), None);
        let (k, a_to_b) = FlowKey::directed_of(&f, LinkType::Ethernet);
        assert_eq!(k.a, mapped_v4([10, 0, 1, 2]));
        assert_eq!(k.b, mapped_v4([10, 9, 0, 1]));
        assert_eq!((k.port_a, k.port_b, k.proto), (5001, 1024, 6));
        assert!(a_to_b);
        assert_eq!((k.tunnel, k.tunnel_id), (TunnelKind::Vxlan.code(), 42));
        assert_eq!(k.carrier_a, mapped_v4([192, 0, 2, 1]));
        assert_eq!(k.carrier_b, mapped_v4([192, 0, 2, 2]));
        assert_eq!(k.compact_v4(), None);
        // The first fragment of a tunnel packet, and a VXLAN header without its I flag: the key
        // of packets without IP, a candidate of every query (libpcap may read inside them).
        let frag = udp_carrier(4789, &vx, 0x2000);
        assert_eq!(FlowKey::of(&frag, LinkType::Ethernet), FlowKey::default());
        vx[0] = 0;
        let bad = udp_carrier(4789, &vx, 0x4000);
        assert_eq!(FlowKey::of(&bad, LinkType::Ethernet), FlowKey::default());
        for code in 1..=8 {
            assert_eq!(
                TunnelKind::from_code(code).map(TunnelKind::code),
                Some(code)
            );
        }
        assert_eq!(TunnelKind::from_code(0), None);
    }
}
