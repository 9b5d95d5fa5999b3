//! Parsing of `ringcap query` expressions: a libpcap (pcap-filter) expression,
//! optionally with stenographer-style time terms `after T` / `before T`.
//!
//! The expression is parsed once, by [`bpf::expr`]; this module lowers its tree. libpcap decides
//! the final answer for every candidate packet, so the [`Narrow`] tree built here only has to be
//! a *superset* of what the filter accepts. Whatever the tree leaves Opaque is [`Narrow::All`].

use std::net::IpAddr;

use bpf::expr::{Encap, Expr, Kind, Node, Op, Prim, Time};
use units::time::parse_time;
use wire::TunnelKind;

use crate::tunnel_term::{self, TunnelTerm};

/// A parsed `ringcap query` expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// The filter text for libpcap: the user's text without the time terms,
    /// sliced from the original string (trimmed); empty if only time terms.
    pub filter: String,
    /// Keep packets with timestamp `>= after_ns` (ns since the Unix epoch).
    pub after_ns: Option<u64>,
    /// Keep packets with timestamp `< before_ns` (ns since the Unix epoch).
    pub before_ns: Option<u64>,
    /// Index narrowing; a superset of the packets `filter` accepts.
    pub narrow: Narrow,
    /// ringcap's `vxlan`/`gre`/`erspan` term, when `filter` has one: then libpcap compiles the
    /// term's outer and inner parts, not `filter` whole.
    pub tunnel: Option<TunnelTerm>,
    /// `--name` patterns: when there are any, only the packets of flows with a matching name
    /// (see [`crate::names`]) are returned, as the flow tables say (empty: no such restriction).
    pub names: Vec<crate::names::NamePattern>,
}

/// Index narrowing: which packets are candidates. Always a superset of the
/// packets libpcap's filter accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Narrow {
    /// Cannot narrow: every packet is a candidate.
    All,
    /// A packet whose IP source or destination is this address.
    Host(IpAddr),
    /// Source or destination inside this network (`addr` is already masked).
    Net {
        /// Network address with host bits cleared.
        addr: IpAddr,
        /// Prefix length (0-32 for IPv4, 0-128 for IPv6).
        prefix: u8,
    },
    /// TCP/UDP/SCTP source or destination port.
    Port(u16),
    /// TCP/UDP/SCTP source or destination port in this inclusive range (lo <= hi).
    PortRange(u16, u16),
    /// IP protocol number (6 tcp, 17 udp, 1 icmp, 58 icmp6, 132 sctp).
    Proto(u8),
    /// Outer 802.1Q VLAN id.
    Vlan(u16),
    /// libpcap's `geneve [VNI]` or `mpls [LABEL]`: a packet in that tunnel (of that id).
    Tunnel { kind: TunnelKind, id: Option<u32> },
    /// Terms after an encapsulation keyword: they read the packet inside the tunnel.
    Inner(Box<Narrow>),
    /// Both must hold.
    And(Box<Narrow>, Box<Narrow>),
    /// Either may hold.
    Or(Box<Narrow>, Box<Narrow>),
}

impl Narrow {
    /// Removes `All` where it carries no information:
    /// `And(All, x) = x`, `Or(All, _) = All`, and `And(x, x)` / `Or(x, x)` = `x`.
    pub fn simplify(self) -> Narrow {
        match self {
            Narrow::And(a, b) => and(a.simplify(), b.simplify()),
            Narrow::Or(a, b) => or(a.simplify(), b.simplify()),
            other => other,
        }
    }
}

/// `a and b`, simplified (both already are): building it this way never needs a recursive pass
/// over a long chain.
fn and(a: Narrow, b: Narrow) -> Narrow {
    match (a, b) {
        (Narrow::All, x) | (x, Narrow::All) => x,
        (x, y) if x == y => x,
        (x, y) => Narrow::And(Box::new(x), Box::new(y)),
    }
}

/// `a or b`, simplified (both already are).
fn or(a: Narrow, b: Narrow) -> Narrow {
    match (a, b) {
        (Narrow::All, _) | (_, Narrow::All) => Narrow::All,
        (x, y) if x == y => x,
        (x, y) => Narrow::Or(Box::new(x), Box::new(y)),
    }
}

const WHERE_TIME: &str = "time terms may only be joined with `and` at the end \
    (`host 10.0.0.1 and after 10m ago`) or at the start (`after 10m ago and host 10.0.0.1`), \
    not inside parentheses, after `not`, or next to `or`";

/// Parses a query: extracts the time terms, keeps the rest as the libpcap
/// filter text and builds a (simplified) narrowing tree for it.
///
/// Time terms are `after T` (timestamp >= T) and `before T` (timestamp < T),
/// where T is anything [`parse_time`] accepts (`10m ago` is two words). They
/// must be top-level conjuncts: at the end (`EXPR and after T [and before U]`),
/// the whole expression, or at the start (`after T and EXPR`, only when EXPR
/// has no top-level `or`). With several terms, the latest `after` and the
/// earliest `before` win.
pub fn parse_query(expr: &str, now_ns: u64) -> Result<Query, String> {
    let tree = bpf::expr::parse(expr)?;
    let ops: Vec<(Option<Op>, &Node)> = tree.operands().collect();
    let time = |i: usize| match &ops[i].1.kind {
        Kind::Time(t) => Some(t),
        _ => None,
    };
    let (mut lo, mut hi) = (0, ops.len());
    let mut taken = Vec::new();
    // Strip from the end: `... and TERM`, or a term that is all that is left.
    while let Some(t) = (hi > lo).then(|| time(hi - 1)).flatten() {
        if hi - 1 == lo {
            hi = lo;
        } else if ops[hi - 1].0 == Some(Op::And) {
            hi -= 1;
        } else {
            break;
        }
        taken.push(t);
    }
    // Strip from the start: `TERM and ...`.
    let mut from_start = false;
    while let Some(t) = time(lo).filter(|_| lo + 1 < hi) {
        if ops[lo + 1].0 != Some(Op::And) {
            break;
        }
        lo += 1;
        from_start = true;
        taken.push(t);
        if hi - lo == 1 && ops[lo].1.span.start == ops[lo].1.span.end {
            return Err("`and` after a time term needs an expression after it".to_string());
        }
    }
    let rest = &ops[lo..hi];
    if let Some(t) = rest.iter().find_map(|(_, n)| first_time(n)) {
        return Err(format!("misplaced `{}`: {WHERE_TIME}", keyword(t)));
    }
    if from_start && rest.iter().any(|(op, _)| *op == Some(Op::Or)) {
        return Err(
            "a time term at the start only applies to the first `or` branch \
            (libpcap reads `after T and a or b` as `(after T and a) or b`); \
            put `after`/`before` at the end, or put the rest in parentheses"
                .to_string(),
        );
    }
    let (mut after_ns, mut before_ns) = (None::<u64>, None::<u64>);
    for t in taken {
        let value = t.value.of(expr);
        let ns = parse_time(value, now_ns)
            .map_err(|e| format!("bad time in `{} {value}`: {e}", keyword(t)))?;
        if t.after {
            after_ns = Some(after_ns.map_or(ns, |a| a.max(ns)));
        } else {
            before_ns = Some(before_ns.map_or(ns, |b| b.min(ns)));
        }
    }
    let filter = match (rest.first(), rest.last()) {
        (Some(a), Some(b)) => expr[a.1.span.start..b.1.span.end].trim().to_string(),
        _ => String::new(),
    };
    let (narrow, tunnel) = match tunnel_term::find(expr, rest)? {
        None => (narrow_operands(expr, rest), None),
        Some((term, k)) => {
            // The outer part narrows as any expression does; the term by the tunnel's kind and
            // id; the inner part as the terms after libpcap's `geneve`.
            let outer = narrow_operands(expr, &rest[..k]);
            let tunnel = term
                .word
                .kinds()
                .iter()
                .map(|&kind| Narrow::Tunnel { kind, id: term.id })
                .reduce(or)
                .unwrap_or(Narrow::All);
            // A keyword after the term (`vxlan and geneve and …`) reads a tunnel inside the
            // carried packet, which the index does not file: no narrowing there.
            let after = &rest[k + 1..];
            let nested = after.first().is_some_and(|(_, first)| {
                bpf::expr::encapsulations(expr)
                    .iter()
                    .any(|s| s.start >= first.span.start)
            });
            let inner = match narrow_operands(expr, after) {
                _ if nested => Narrow::All,
                Narrow::All => Narrow::All,
                n => Narrow::Inner(Box::new(n)),
            };
            (and(and(outer, tunnel), inner), Some(term))
        }
    };
    Ok(Query {
        filter,
        after_ns,
        before_ns,
        narrow,
        tunnel,
        names: Vec::new(),
    })
}

fn keyword(t: &Time) -> &'static str {
    if t.after {
        "after"
    } else {
        "before"
    }
}

/// The first time term in `n`, in text order.
fn first_time(n: &Node) -> Option<&Time> {
    match &n.kind {
        Kind::Time(t) => Some(t),
        Kind::Not(x) => first_time(x),
        Kind::Group(e) => e.operands().find_map(|(_, x)| first_time(x)),
        Kind::Prim(_) | Kind::Opaque => None,
    }
}

/// The narrowing of the top-level operands of `text`. After an encapsulation keyword libpcap
/// reads the following terms inside the tunnel, in text order, across `or` and parentheses
/// too; the index files a tunnelled packet under the packet it carries. So with such a keyword
/// the terms narrow only in the one shape where "after" is clear: a single keyword, `geneve
/// [VNI]` or `mpls [LABEL]`, that is a top-level operand of a chain of `and`s. Anything else with
/// an encapsulation keyword narrows nothing.
fn narrow_operands(text: &str, rest: &[(Option<Op>, &Node)]) -> Narrow {
    let (Some(first), Some(last)) = (rest.first(), rest.last()) else {
        return Narrow::All;
    };
    let (lo, hi) = (first.1.span.start, last.1.span.end);
    let encaps: Vec<_> = bpf::expr::encapsulations(text)
        .into_iter()
        .filter(|s| s.start >= lo && s.end <= hi)
        .collect();
    if encaps.is_empty() {
        return rest
            .iter()
            .map(|(op, n)| (op, narrow(n)))
            .reduce(|(_, l), (op, r)| match op {
                Some(Op::Or) => (op, or(l, r)),
                _ => (op, and(l, r)),
            })
            .map_or(Narrow::All, |(_, n)| n);
    }
    let ([at], false) = (&encaps[..], rest.iter().any(|(op, _)| *op == Some(Op::Or))) else {
        return Narrow::All;
    };
    let keyword = rest.iter().position(|(_, n)| {
        n.span.start == at.start && matches!(n.kind, Kind::Prim(Prim::Encap { .. }))
    });
    let Some(k) = keyword else {
        return Narrow::All;
    };
    let Kind::Prim(Prim::Encap { kind, id }) = rest[k].1.kind else {
        return Narrow::All;
    };
    let kind = match kind {
        Encap::Geneve => TunnelKind::Geneve,
        Encap::Mpls => TunnelKind::Mpls,
        // This libpcap has no `vxlan`; PPPoE is not decapsulated.
        Encap::Vxlan | Encap::Pppoes => return Narrow::All,
    };
    let mut n = Narrow::All;
    for (i, (_, node)) in rest.iter().enumerate() {
        n = match i.cmp(&k) {
            std::cmp::Ordering::Less => and(n, narrow(node)),
            std::cmp::Ordering::Equal => and(n, Narrow::Tunnel { kind, id }),
            std::cmp::Ordering::Greater => match narrow(node) {
                Narrow::All => n,
                inner => and(n, Narrow::Inner(Box::new(inner))),
            },
        };
    }
    n
}

fn narrow_expr(e: &Expr) -> Narrow {
    e.rest.iter().fold(narrow(&e.first), |l, (op, r)| match op {
        Op::And => and(l, narrow(r)),
        Op::Or => or(l, narrow(r)),
    })
}

/// A superset of the packets `n` accepts.
fn narrow(n: &Node) -> Narrow {
    match &n.kind {
        Kind::Group(e) => narrow_expr(e),
        // The index cannot narrow a negation.
        Kind::Not(_) | Kind::Time(_) | Kind::Opaque => Narrow::All,
        Kind::Prim(p) => prim(p),
    }
}

fn prim(p: &Prim) -> Narrow {
    use bpf::expr::Proto;
    match *p {
        Prim::Proto(Proto::Tcp) => Narrow::Proto(6),
        Prim::Proto(Proto::Udp) => Narrow::Proto(17),
        Prim::Proto(Proto::Icmp) => Narrow::Proto(1),
        Prim::Proto(Proto::Icmp6) => Narrow::Proto(58),
        Prim::Proto(Proto::Sctp) => Narrow::Proto(132),
        // Every IP packet (and `ip6` would need the index to know the version).
        Prim::Proto(Proto::Ip | Proto::Ip6) => Narrow::All,
        // The index files an IPv6 packet under the protocol after its extension headers, while
        // libpcap's `ip6 proto 0` (or 44, 51, ...) tests the first next-header field.
        Prim::IpProto { number, .. } if wire::ipv6::is_extension_header(number) => Narrow::All,
        Prim::IpProto { number, .. } => Narrow::Proto(number),
        // Direction is not indexed: `src host A` is a subset of `host A`.
        Prim::Host { addr, .. } => Narrow::Host(addr),
        Prim::Net { addr, prefix, .. } => net(addr, u32::from(prefix)),
        // A non-contiguous mask is widened to its leading ones, which is still a superset.
        Prim::NetMask { addr, mask, .. } => net(IpAddr::V4(addr), u32::from(mask).leading_ones()),
        Prim::Port { port, .. } => Narrow::Port(port),
        Prim::PortRange { lo, hi, .. } => Narrow::PortRange(lo, hi),
        // Only the outer tag is indexed; `vlan` alone is any tag.
        Prim::Vlan {
            id: Some(id),
            outer: true,
        } => Narrow::Vlan(id),
        Prim::Vlan { .. } => Narrow::All,
        // Only reached inside parentheses or after `not`, which `narrow_operands` leaves whole.
        Prim::Encap { .. } => Narrow::All,
    }
}

/// `addr/prefix` with the host bits cleared (the tree keeps the prefix within the family).
fn net(addr: IpAddr, prefix: u32) -> Narrow {
    let addr = match addr {
        IpAddr::V4(a) => {
            IpAddr::V4((u32::from(a) & u32::MAX.checked_shl(32 - prefix).unwrap_or(0)).into())
        }
        IpAddr::V6(a) => {
            IpAddr::V6((u128::from(a) & u128::MAX.checked_shl(128 - prefix).unwrap_or(0)).into())
        }
    };
    Narrow::Net {
        addr,
        prefix: prefix as u8,
    }
}

#[cfg(test)]
mod bounded {
    use super::*;

    /// A hostile expression (16 KiB of `!`, 100 k `(`) is parsed on a small stack (serve's
    /// threads) without recursing past the bound, and narrows nothing.
    #[test]
    fn deep_or_long_expressions_do_not_overflow_the_stack_and_narrow_nothing() {
        let bangs = format!("{}tcp", "!".repeat(16_380));
        let parens = format!("{}tcp{}", "(".repeat(100_000), ")".repeat(100_000));
        let ors = (1..=1345)
            .map(|p| format!("port {p}"))
            .collect::<Vec<_>>()
            .join(" or ");
        let t = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                for e in [bangs, parens, ors] {
                    let q = parse_query(&e, 0).unwrap();
                    assert_eq!(q.narrow, Narrow::All, "{}", &e[..40]);
                }
            })
            .unwrap();
        t.join().unwrap();
        // Shallow nesting still narrows.
        let q = parse_query("((host 10.0.0.1))", 0).unwrap();
        assert_eq!(q.narrow, Narrow::Host("10.0.0.1".parse().unwrap()));
    }
}

#[cfg(test)]
mod tests {
    use super::Narrow::*;
    use super::*;

    const NOW: u64 = 1_795_392_000_000_000_000; // 2026-11-23T00:00:00Z
    const H: u64 = 3_600_000_000_000; // one hour in ns

    fn n(e: &str) -> Narrow {
        parse_query(e, NOW).unwrap().narrow
    }
    fn host(s: &str) -> Narrow {
        Host(s.parse().unwrap())
    }
    fn net(s: &str, prefix: u8) -> Narrow {
        Net {
            addr: s.parse().unwrap(),
            prefix,
        }
    }
    fn and(a: Narrow, b: Narrow) -> Narrow {
        And(Box::new(a), Box::new(b))
    }
    fn or(a: Narrow, b: Narrow) -> Narrow {
        Or(Box::new(a), Box::new(b))
    }

    #[test]
    fn narrowing() {
        let cases = [
            ("host 10.0.0.1", host("10.0.0.1")),
            (
                "src host 10.0.0.1 and dst port 53",
                and(host("10.0.0.1"), Port(53)),
            ),
            (
                "host 10.0.0.1 or host 10.0.0.2",
                or(host("10.0.0.1"), host("10.0.0.2")),
            ),
            ("src or dst host 10.0.0.1", host("10.0.0.1")),
            ("ip6 dst and src host ::1", host("::1")),
            ("net 10.0.0.0/8", net("10.0.0.0", 8)),
            ("src net 10.1.2.3/16", net("10.1.0.0", 16)),
            ("net 192.168.1.0 mask 255.255.255.0", net("192.168.1.0", 24)),
            ("net fe80::/10", net("fe80::", 10)),
            ("vlan 100 and host fe80::1", and(Vlan(100), host("fe80::1"))),
            ("portrange 1000-2000", PortRange(1000, 2000)),
            ("tcp dst portrange 2000-1000", PortRange(1000, 2000)),
            ("tcp port 80", Port(80)),
            ("udp src port 53", Port(53)),
            ("icmp", Proto(1)),
            ("ip proto 47 || icmp6", or(Proto(47), Proto(58))),
            ("tcp and not port 22", Proto(6)),
            // `and`/`or` have equal precedence, left associative.
            (
                "port 1 or port 2 and udp",
                and(or(Port(1), Port(2)), Proto(17)),
            ),
            (
                "udp and port 1 or port 2",
                or(and(Proto(17), Port(1)), Port(2)),
            ),
            (
                "udp and (port 1 or port 2)",
                and(Proto(17), or(Port(1), Port(2))),
            ),
            // The second `vlan` is the inner tag of a QinQ packet.
            ("vlan 100 and vlan 200", Vlan(100)),
            // `||` is `or`, in the direction qualifier too.
            ("src || dst port 7 and sctp", and(Port(7), Proto(132))),
            // A relation libpcap alone decides does not hide its `and` neighbours.
            (
                "(udp[0] & 1) = 1 and tcp or host 10.0.0.1",
                or(Proto(6), host("10.0.0.1")),
            ),
        ];
        for (e, want) in cases {
            assert_eq!(n(e), want, "{e}");
        }
    }

    #[test]
    fn falls_back_to_all() {
        let cases = "host 10.0.0.1 or 10.0.0.2; not host 10.0.0.1; ! tcp; udp[8:2] = 0x1234; \
            len > 100; (udp[0] & 1) = 1; host example.com; net 10; net 10.1/16; port http; \
            port 0x50; ip proto \\tcp; arp host 10.0.0.1; tcp[tcpflags] & tcp-syn != 0; \
            port 1 or (; tcp\u{a0}and udp; ";
        for e in cases.split("; ") {
            assert_eq!(n(e), All, "{e}");
        }
        let got = n("(udp[8:2] & 0xff) = 3 and host 1.2.3.4");
        assert!(got == All || got == host("1.2.3.4"), "{got:?}");
    }

    /// After `geneve`/`mpls`, libpcap reads the following terms inside the tunnel; the index
    /// files tunnelled packets under the carried packet. Only one keyword in a chain of `and`s
    /// narrows; every other shape with an encapsulation keyword narrows nothing.
    #[test]
    fn encapsulation_keywords() {
        let tunnel = |kind, id| Tunnel { kind, id };
        let inner = |n| Inner(Box::new(n));
        let cases = [
            (
                "geneve and host 10.0.0.1",
                and(tunnel(TunnelKind::Geneve, None), inner(host("10.0.0.1"))),
            ),
            (
                "host 192.0.2.1 and geneve 7 and tcp",
                and(
                    and(host("192.0.2.1"), tunnel(TunnelKind::Geneve, Some(7))),
                    inner(Proto(6)),
                ),
            ),
            (
                "mpls 1000 and (port 53 or net 10.1.0.0/16)",
                and(
                    tunnel(TunnelKind::Mpls, Some(1000)),
                    inner(or(Port(53), net("10.1.0.0", 16))),
                ),
            ),
            // An inner tag is not indexed: the tunnel alone narrows.
            ("mpls and vlan 5", tunnel(TunnelKind::Mpls, None)),
            ("geneve", tunnel(TunnelKind::Geneve, None)),
        ];
        for (e, want) in cases {
            assert_eq!(n(e), want, "{e}");
        }
        for e in [
            "geneve or host 10.0.0.1",
            "host 10.0.0.1 or geneve and tcp",
            "mpls and mpls and host 10.0.0.1",
            "not mpls and host 10.0.0.1",
            "(geneve and udp) and host 10.0.0.1",
            "geneve 0x7 and host 10.0.0.1",
            "pppoes and host 10.0.0.1",
            "host 10.0.0.1 and (tcp or mpls)",
        ] {
            assert_eq!(n(e), All, "{e}");
        }
    }

    /// ringcap's own `vxlan`/`gre`/`erspan` terms narrow as `geneve` does: outer terms, the tunnel
    /// (every ERSPAN type for `erspan`), inner terms; a tag after them is not indexed.
    #[test]
    fn tunnel_terms() {
        let tunnel = |kind, id| Tunnel { kind, id };
        let inner = |n| Inner(Box::new(n));
        let cases = [
            (
                "udp and vxlan 42 and host 10.0.0.1 and after 2026-11-23",
                and(
                    and(Proto(17), tunnel(TunnelKind::Vxlan, Some(42))),
                    inner(host("10.0.0.1")),
                ),
            ),
            ("gre 0x5 and vlan 7", tunnel(TunnelKind::Gre, Some(5))),
            (
                "erspan and port 443",
                and(
                    or(
                        or(
                            tunnel(TunnelKind::Erspan1, None),
                            tunnel(TunnelKind::Erspan2, None),
                        ),
                        tunnel(TunnelKind::Erspan3, None),
                    ),
                    inner(Port(443)),
                ),
            ),
            // libpcap's keyword after ringcap's reads the carried packet: narrows nothing there.
            (
                "vxlan and geneve and host 10.0.0.1",
                tunnel(TunnelKind::Vxlan, None),
            ),
        ];
        for (e, want) in cases {
            let q = parse_query(e, NOW).unwrap();
            assert_eq!(q.narrow, want, "{e}");
            assert!(q.tunnel.is_some(), "{e}");
        }
        let q = parse_query("vxlan 42 and host 10.0.0.1 and after 2026-11-23", NOW).unwrap();
        let term = q.tunnel.unwrap();
        assert_eq!(
            (term.outer.as_str(), term.inner.as_str()),
            ("", "host 10.0.0.1")
        );
        assert_eq!(q.filter, "vxlan 42 and host 10.0.0.1");
        assert!(parse_query("vxlan or tcp", NOW).is_err());
        assert_eq!(parse_query("ip proto gre", NOW).unwrap().tunnel, None);
    }

    #[test]
    fn time_terms() {
        let q = |e: &str| parse_query(e, NOW).unwrap();
        let got = q("host 10.0.0.1 and  port 53 and after 2026-11-23T14:02:00Z");
        assert_eq!(got.filter, "host 10.0.0.1 and  port 53");
        assert_eq!(got.after_ns, Some(NOW + 14 * H + H / 30));
        assert_eq!(got.narrow, and(host("10.0.0.1"), Port(53)));

        let got = q("after 10m ago and tcp and before now");
        assert_eq!((got.filter.as_str(), got.narrow), ("tcp", Proto(6)));
        assert_eq!(
            (got.after_ns, got.before_ns),
            (Some(NOW - H / 6), Some(NOW))
        );

        let got = q("after 1d ago && after 1h ago and before @5 and before @4");
        assert_eq!((got.filter.as_str(), got.narrow), ("", All));
        assert_eq!(
            (got.after_ns, got.before_ns),
            (Some(NOW - H), Some(4_000_000_000))
        );

        assert_eq!(
            q("after 2026-11-23 and (port 1 or port 2)").filter,
            "(port 1 or port 2)"
        );
        assert_eq!(
            q("port 1 or port 2 and after now").filter,
            "port 1 or port 2"
        );
        assert_eq!(q("host after").filter, "host after"); // a host named `after`

        let err = |e: &str| parse_query(e, NOW).unwrap_err();
        assert!(
            err("after 10m ago and port 1 or port 2").contains("put `after`/`before` at the end")
        );
        assert!(err("tcp and (port 1 and after now)").contains("time terms may only be"));
        assert!(err("tcp and after 10m").contains("write `10m ago`"));
        let bad = "(after now) and tcp; not after now; tcp or after now; after now or tcp; \
            tcp and after now and udp; after; tcp and before; after now and";
        for e in bad.split("; ") {
            assert!(parse_query(e, NOW).is_err(), "{e}");
        }
    }
}
