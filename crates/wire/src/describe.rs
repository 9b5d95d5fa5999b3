//! How ringcap's per-packet tables (header records, `ringcap convert`'s packet table) describe a
//! packet that may sit in tunnels: the rule the index key, the flow table and the cutoff follow.
//!
//! A packet inside exactly one tunnel that was read whole and carries IP is described by the packet
//! it carries, with the tunnel (kind, id, carrier addresses); any other packet by its own (outer)
//! headers, with the reason it was not decapsulated ([`TunnelProblem`]) when there was a tunnel.

use crate::ethernet::ethertype;
use crate::ip_proto;
use crate::parse::{parse, Headers, IpVersion, LinkType};
use crate::tunnel::{decapsulate_parsed, Problem, TunnelKind, GENEVE_PORT, VXLAN_PORT};

/// Why a packet with a tunnel is described by its outer headers (the `tunnel_problem` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelProblem {
    /// A tunnel header (or the packet it carries) is cut, or the packet is an IP fragment.
    Truncated,
    /// A tunnel header holds an impossible value.
    Malformed,
    /// More tunnels or MPLS labels than [`crate::tunnel::MAX_DEPTH`] / `MAX_LABELS`.
    TooDeep,
    /// A GENEVE payload that is neither Ethernet nor IP.
    Unsupported,
    /// Two or more tunnels, all read: the tables key only single tunnels (as the index does).
    Nested,
}

impl TunnelProblem {
    /// The lowercase name in tables.
    pub const fn name(self) -> &'static str {
        match self {
            TunnelProblem::Truncated => "truncated",
            TunnelProblem::Malformed => "malformed",
            TunnelProblem::TooDeep => "too_deep",
            TunnelProblem::Unsupported => "unsupported",
            TunnelProblem::Nested => "nested",
        }
    }

    /// A number for the record format (1-5; 0 is "none").
    pub const fn code(self) -> u8 {
        match self {
            TunnelProblem::Truncated => 1,
            TunnelProblem::Malformed => 2,
            TunnelProblem::TooDeep => 3,
            TunnelProblem::Unsupported => 4,
            TunnelProblem::Nested => 5,
        }
    }

    /// The problem of a [`Self::code`]; `None` for 0 and unknown codes.
    pub const fn from_code(code: u8) -> Option<TunnelProblem> {
        Some(match code {
            1 => TunnelProblem::Truncated,
            2 => TunnelProblem::Malformed,
            3 => TunnelProblem::TooDeep,
            4 => TunnelProblem::Unsupported,
            5 => TunnelProblem::Nested,
            _ => return None,
        })
    }

    /// The problem of a [`Self::name`].
    pub fn from_name(name: &str) -> Option<TunnelProblem> {
        (1..=5)
            .filter_map(TunnelProblem::from_code)
            .find(|p| p.name() == name)
    }

    const fn of(p: Problem) -> TunnelProblem {
        match p {
            Problem::Truncated => TunnelProblem::Truncated,
            Problem::Malformed => TunnelProblem::Malformed,
            Problem::TooDeep => TunnelProblem::TooDeep,
            Problem::Unsupported => TunnelProblem::Unsupported,
        }
    }
}

impl TunnelKind {
    /// The kind of a [`Self::name`].
    pub fn from_name(name: &str) -> Option<TunnelKind> {
        (1..=8)
            .filter_map(TunnelKind::from_code)
            .find(|k| k.name() == name)
    }

    /// Kinds whose tunnel has an id (ERSPAN I and IP-in-IP have none; GRE without a key has 0).
    pub const fn has_id(self) -> bool {
        !matches!(self, TunnelKind::Erspan1 | TunnelKind::IpInIp)
    }
}

/// The tunnel a described packet came in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TunnelId {
    /// What kind of tunnel.
    pub kind: TunnelKind,
    /// VNI, GRE key (0 without one), ERSPAN session, top MPLS label; 0 for kinds without an id.
    pub id: u32,
    /// The carrier's IP version; `None` for MPLS straight over Ethernet.
    pub carrier_version: Option<IpVersion>,
    /// The carrier's addresses, the lower first (as the flow table's `tunnel_a`, `tunnel_b`);
    /// IPv4 in bytes 0..4.
    pub carrier_a: [u8; 16],
    /// See `carrier_a`.
    pub carrier_b: [u8; 16],
}

/// A packet as the tables describe it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Described {
    /// The carried packet's headers in a tunnel, else the frame's own.
    pub headers: Headers,
    /// The tunnel, when `headers` are those of the carried packet.
    pub tunnel: Option<TunnelId>,
    /// Why a tunnel there was is not decoded (then `headers` are the outer ones).
    pub problem: Option<TunnelProblem>,
    /// The frame's own first VLAN id (libpcap's `vlan`), whatever the carried packet has.
    pub outer_vlan: Option<u16>,
}

/// Describes `frame` of `linktype` by the rule of this module; never panics, never allocates.
///
/// One parse for a packet that cannot hold a tunnel (the common case, and the probe's hot path:
/// [`decapsulate`]'s result is ~300 bytes to fill and copy, which tripled a record's cost); a
/// second one, in [`decapsulate`], only for packets that may.
#[inline]
pub fn describe(frame: &[u8], linktype: LinkType) -> Described {
    let h = parse(frame, linktype);
    if !may_hold_tunnel(&h) {
        return Described {
            headers: h,
            outer_vlan: h.vlan_outer,
            ..Described::default()
        };
    }
    describe_tunnel(frame, linktype, h)
}

/// Whether [`decapsulate`] could find a tunnel behind `h` (a frame's [`parse`]): what its look
/// behind the transport header tests (UDP to VXLAN's or GENEVE's port, GRE, IP in IP), or MPLS
/// straight over the link. False: [`describe`] is `h` itself.
#[inline]
pub fn may_hold_tunnel(h: &Headers) -> bool {
    match h.ip_version {
        None => matches!(
            h.ethertype,
            Some(ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST)
        ),
        Some(_) => match h.protocol {
            Some(ip_proto::UDP) => matches!(h.dst_port, Some(VXLAN_PORT | GENEVE_PORT)),
            Some(ip_proto::GRE | ip_proto::IPIP | ip_proto::IPV6) => true,
            _ => false,
        },
    }
}

/// [`describe`] of a frame whose [`parse`] is `outer`, when [`may_hold_tunnel`] says it may hold
/// a tunnel (else it is `outer` itself).
#[inline(never)]
pub fn describe_tunnel(frame: &[u8], linktype: LinkType, outer: Headers) -> Described {
    let d = decapsulate_parsed(frame, linktype, outer);
    let mut out = Described {
        headers: d.inner,
        outer_vlan: d.outer_vlan,
        ..Described::default()
    };
    match (d.layers(), d.problem) {
        // The common case first: no tunnel at all, `inner` is the frame's own parse.
        ([], None) => {}
        ([], Some(p)) => out.problem = Some(TunnelProblem::of(p)),
        ([l], None) if d.inner.ip_version.is_some() => {
            let mut t = TunnelId {
                kind: l.kind,
                id: if l.kind.has_id() {
                    l.id.unwrap_or(0)
                } else {
                    0
                },
                carrier_version: l.carrier_version,
                ..TunnelId::default()
            };
            if l.carrier_version.is_some() {
                (t.carrier_a, t.carrier_b) = if l.carrier_src <= l.carrier_dst {
                    (l.carrier_src, l.carrier_dst)
                } else {
                    (l.carrier_dst, l.carrier_src)
                };
            }
            out.tunnel = Some(t);
        }
        // A single tunnel carrying no IP (ARP in VXLAN) is keyed by its outer headers: no problem.
        ([_], None) => out.headers = outer,
        (_, p) => {
            out.problem = Some(p.map_or(TunnelProblem::Nested, TunnelProblem::of));
            out.headers = outer;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        for c in 1..=5 {
            let p = TunnelProblem::from_code(c).unwrap();
            assert_eq!(p.code(), c);
            assert_eq!(TunnelProblem::from_name(p.name()), Some(p));
        }
        assert_eq!(TunnelProblem::from_code(0), None);
        assert_eq!(TunnelProblem::from_code(6), None);
        for c in 1..=8 {
            let k = TunnelKind::from_code(c).unwrap();
            assert_eq!(TunnelKind::from_name(k.name()), Some(k));
        }
        assert_eq!(TunnelKind::from_name("nvgre"), None);
    }

    /// The one-parse path gives what decapsulating every packet gives, on frames made to reach
    /// every branch: IPv4/IPv6/MPLS/VLAN, tunnel protocols and ports, random rest (cut anywhere).
    #[test]
    fn the_fast_path_equals_decapsulating_everything() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut tunnelled = 0;
        for _ in 0..50_000 {
            let mut f: Vec<u8> = (0..160).map(|_| next() as u8).collect();
            let et: u16 = [0x0800, 0x86dd, 0x8847, 0x8100, 0x0806][(next() % 5) as usize];
            f[12..14].copy_from_slice(&et.to_be_bytes());
            let l3 = if et == 0x8100 {
                f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
                18
            } else {
                14
            };
            let proto = [17u8, 47, 4, 41, 6][(next() % 5) as usize];
            if next() % 4 != 0 {
                // A plausible IPv4 header: IHL 5, no fragment, a length that fits or not.
                f[l3] = 0x45;
                f[l3 + 2..l3 + 4].copy_from_slice(&(100 + (next() % 60) as u16).to_be_bytes());
                f[l3 + 6] = 0;
                f[l3 + 7] = 0;
                f[l3 + 9] = proto;
                let port: u16 = [4789, 6081, 53][(next() % 3) as usize];
                f[l3 + 22..l3 + 24].copy_from_slice(&port.to_be_bytes());
                f[l3 + 28] = 0x08;
            }
            let n = (next() % 161) as usize;
            let frame = &f[..n];
            for lt in [LinkType::Ethernet, LinkType::Raw] {
                let fast = describe(frame, lt);
                let all = describe_tunnel(frame, lt, parse(frame, lt));
                assert_eq!(fast, all, "{frame:02x?}");
                // ... and what decapsulating from scratch gives.
                let d = crate::tunnel::decapsulate(frame, lt);
                assert_eq!(fast.outer_vlan, d.outer_vlan);
                if fast.tunnel.is_some() {
                    assert_eq!(fast.headers, d.inner);
                }
                tunnelled += usize::from(fast.tunnel.is_some());
            }
        }
        assert!(tunnelled > 1000, "{tunnelled}");
    }
}
