//! The flow key of a packet: what the index files packets under.

use wire::{IpVersion, LinkType};

/// The key has IP addresses.
pub const KIND_IP: u8 = 1;
/// The key has transport ports.
pub const KIND_PORTS: u8 = 2;
/// The packet carried an 802.1Q tag (the outer id is in `vlan`).
pub const KIND_VLAN: u8 = 4;

/// A flow, both directions in one key: the endpoint that sorts first is `a`. Packets without an IP
/// header (ARP, other ethertypes, unparsable frames) share the key with `kind` 0 and are a
/// candidate of every query, so narrowing stays a superset of what libpcap accepts (its `host X`
/// also matches ARP).
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
        }
    }

    /// The key in 128 bits when both addresses are IPv4 (nearly always): what the builder logs
    /// per packet and sorts.
    #[inline]
    pub fn compact_v4(&self) -> Option<u128> {
        const V4: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
        if self.a[..12] != V4 || self.b[..12] != V4 {
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

    /// The key of one frame (the outer IP header, as libpcap's `host`/`port` read it).
    pub fn of(frame: &[u8], linktype: LinkType) -> FlowKey {
        let h = wire::parse(frame, linktype);
        let Some(v) = h.ip_version else {
            return FlowKey::default();
        };
        let (src, dst) = match v {
            IpVersion::V4 => (
                mapped_v4(h.src_ip[..4].try_into().unwrap()),
                mapped_v4(h.dst_ip[..4].try_into().unwrap()),
            ),
            IpVersion::V6 => (h.src_ip, h.dst_ip),
        };
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
        let ((a, port_a), (b, port_b)) = if (src, sp) <= (dst, dp) {
            ((src, sp), (dst, dp))
        } else {
            ((dst, dp), (src, sp))
        };
        FlowKey {
            a,
            b,
            port_a,
            port_b,
            proto: h.protocol.unwrap_or(0),
            kind,
            vlan,
        }
    }
}
