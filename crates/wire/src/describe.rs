//! How ringcap's per-packet tables (header records, `ringcap convert`'s packet table) describe a
//! packet that may sit in tunnels: the rule the index key, the flow table and the cutoff follow.
//!
//! A packet inside exactly one tunnel that was read whole and carries IP is described by the packet
//! it carries, with the tunnel (kind, id, carrier addresses); any other packet by its own (outer)
//! headers, with the reason it was not decapsulated ([`TunnelProblem`]) when there was a tunnel.

use crate::parse::{parse, Headers, IpVersion, LinkType};
use crate::tunnel::{decapsulate, Problem, TunnelKind};

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
pub fn describe(frame: &[u8], linktype: LinkType) -> Described {
    let d = decapsulate(frame, linktype);
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
        ([_], None) => out.headers = parse(frame, linktype),
        (_, p) => {
            out.problem = Some(p.map_or(TunnelProblem::Nested, TunnelProblem::of));
            out.headers = parse(frame, linktype);
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
}
