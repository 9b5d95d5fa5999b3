//! From a tcpdump expression's tree ([`bpf::expr`]) to a [`Prefilter`], for the subset the XDP program can
//! test: `and`/`or` (libpcap's equal precedence, left to right) and parentheses over `tcp`, `udp`, `sctp`,
//! `icmp`, `ip`, `[ip] [src|dst] host A`, `[ip] [src|dst] net A/len`, `[tcp|udp|sctp] [src|dst] port P` with
//! IPv4 literals and port numbers, and a leading `vlan [N] and ...`. Anything else (negation, Opaque terms such
//! as byte tests, `len`, names to resolve or omitted keywords as in `host A or B`, IPv6, `src and dst`, `vlan`
//! elsewhere) gives no prefilter: everything goes to user space.

use std::net::IpAddr;

use bpf::expr::{Dir, Expr, Kind, Node, Op, Prim, Proto};

use crate::prefilter::*;

/// Conjunctions, OR'ed (disjunctive normal form), while lowering.
type Dnf = Vec<Rule>;

/// Intermediate products may grow past the program's room before impossible rules fall out.
const MAX_WORKING_RULES: usize = 64;

fn and(a: Dnf, b: Dnf) -> Option<Dnf> {
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in &a {
        for y in &b {
            let mut r = x.clone();
            r.protos &= y.protos;
            r.addrs.extend(&y.addrs);
            r.ports.extend(&y.ports);
            out.push(r);
        }
    }
    (out.len() <= MAX_WORKING_RULES).then_some(out)
}

fn or(mut a: Dnf, b: Dnf) -> Option<Dnf> {
    a.extend(b);
    (a.len() <= MAX_WORKING_RULES).then_some(a)
}

/// `first op x op y ...`, left to right (the operator before the first is ignored).
fn dnf<'a>(mut operands: impl Iterator<Item = (Option<Op>, &'a Node)>) -> Option<Dnf> {
    let mut acc = term(operands.next()?.1)?;
    for (op, n) in operands {
        acc = match op? {
            Op::And => and(acc, term(n)?)?,
            Op::Or => or(acc, term(n)?)?,
        };
    }
    Some(acc)
}

fn term(n: &Node) -> Option<Dnf> {
    match &n.kind {
        Kind::Group(e) => dnf(e.operands()),
        Kind::Prim(p) => primitive(p).map(|r| vec![r]),
        Kind::Not(_) | Kind::Time(_) | Kind::Opaque => None,
    }
}

fn direction(d: Dir) -> Option<Direction> {
    match d {
        Dir::Src => Some(Direction::Src),
        Dir::Dst => Some(Direction::Dst),
        Dir::Either => Some(Direction::Either),
        Dir::Both => None,
    }
}

fn primitive(p: &Prim) -> Option<Rule> {
    let rule = |protos, addrs, ports| Rule {
        protos,
        addrs,
        ports,
    };
    // libpcap's host/net also match ARP and RARP, which the program always hands over.
    let addr = |net, prefix_len, dir| {
        let test = AddrTest {
            net,
            prefix_len,
            dir: direction(dir)?,
        };
        Some(rule(CLASS_IP, vec![test], vec![]))
    };
    match *p {
        Prim::Proto(Proto::Tcp) => Some(rule(CLASS_TCP, vec![], vec![])),
        Prim::Proto(Proto::Udp) => Some(rule(CLASS_UDP, vec![], vec![])),
        Prim::Proto(Proto::Sctp) => Some(rule(CLASS_SCTP, vec![], vec![])),
        Prim::Proto(Proto::Icmp) => Some(rule(CLASS_ICMP, vec![], vec![])),
        Prim::Proto(Proto::Ip) => Some(rule(CLASS_IP, vec![], vec![])),
        Prim::Host {
            qual: None | Some(Proto::Ip),
            dir,
            addr: IpAddr::V4(a),
        } => addr(a, 32, dir),
        Prim::Net {
            qual: None | Some(Proto::Ip),
            dir,
            addr: IpAddr::V4(a),
            prefix,
        } => addr(a, prefix, dir),
        Prim::Port { qual, dir, port } => {
            let protos = match qual {
                None => CLASS_PORTS,
                Some(Proto::Tcp) => CLASS_TCP,
                Some(Proto::Udp) => CLASS_UDP,
                Some(Proto::Sctp) => CLASS_SCTP,
                Some(_) => return None,
            };
            let test = PortTest {
                port,
                dir: direction(dir)?,
            };
            Some(rule(protos, vec![], vec![test]))
        }
        // IPv6 (the program hands every IPv6 frame over), `net ... mask` (libpcap's own arithmetic),
        // `proto N`, ranges, `vlan` not leading.
        _ => None,
    }
}

impl Prefilter {
    /// The prefilter for `expr`, or `None` when the expression is empty or outside the subset. The caller
    /// must have compiled `expr` with libpcap first (a syntax error is libpcap's to report).
    pub fn recognise(expr: &str) -> Option<Prefilter> {
        Prefilter::lower(&bpf::expr::parse(expr).ok()?)
    }

    /// The prefilter for a parsed expression, or `None` outside the subset.
    pub fn lower(tree: &Expr) -> Option<Prefilter> {
        let mut operands = tree.operands();
        let mut vlan = VlanTest::Untagged;
        if let Kind::Prim(Prim::Vlan { id, .. }) = tree.first.kind {
            operands.next();
            vlan = id.map_or(VlanTest::AnyTag, VlanTest::Id);
            if tree.rest.is_empty() {
                let any = Rule {
                    protos: CLASS_IP | CLASS_NOT_IP,
                    addrs: vec![],
                    ports: vec![],
                };
                return Some(Prefilter {
                    vlan,
                    rules: vec![any],
                });
            }
            // `vlan and A or B` is `(vlan and A) or B` with B read past the tag too: not ours.
            if tree.rest.iter().any(|(op, _)| *op == Op::Or) {
                return None;
            }
        }
        Prefilter::from_dnf(vlan, dnf(operands)?)
    }

    fn from_dnf(vlan: VlanTest, dnf: Dnf) -> Option<Prefilter> {
        let mut rules: Vec<Rule> = Vec::new();
        for mut r in dnf {
            if r.protos == 0 {
                continue; // e.g. `udp and tcp`: cannot match
            }
            // Dropping tests widens a rule, which a prefilter may always do.
            r.addrs.truncate(PREFILTER_TESTS);
            r.ports.truncate(PREFILTER_TESTS);
            if !rules.contains(&r) {
                rules.push(r);
            }
        }
        (rules.len() <= PREFILTER_RULES).then_some(Prefilter { vlan, rules })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(expr: &str) -> String {
        Prefilter::recognise(expr)
            .unwrap_or_else(|| panic!("{expr:?} not recognised"))
            .to_string()
    }

    fn refused(expr: &str) {
        assert_eq!(
            Prefilter::recognise(expr),
            None,
            "{expr:?} should be refused"
        );
    }

    #[test]
    fn protocols_ports_and_directions() {
        assert_eq!(rules("udp"), "(udp)");
        assert_eq!(rules("udp and dst port 9000"), "(udp and dst port 9000)");
        assert_eq!(rules("udp dst port 9000"), "(udp and dst port 9000)");
        assert_eq!(rules("tcp src port 80"), "(tcp and src port 80)");
        assert_eq!(rules("port 53"), "(port 53)");
        assert_eq!(rules("src or dst port 7"), "(port 7)");
        assert_eq!(rules("tcp || icmp"), "(tcp) or (icmp)");
        assert_eq!(rules("ip"), "(ip)");
    }

    #[test]
    fn hosts_and_nets_are_ipv4_literals() {
        assert_eq!(rules("host 10.0.0.1"), "(host 10.0.0.1)");
        assert_eq!(
            rules("src host 10.0.0.1 && dst port 53"),
            "(src host 10.0.0.1 and dst port 53)"
        );
        assert_eq!(rules("net 10.0.0.0/8"), "(net 10.0.0.0/8)");
        assert_eq!(
            rules("ip dst net 192.168.0.0/16"),
            "(dst net 192.168.0.0/16)"
        );
        assert_eq!(rules("net 10.1.2.3"), "(host 10.1.2.3)");
    }

    #[test]
    fn and_and_or_bind_equally_from_the_left_as_in_libpcap() {
        // pcap-filter(7): `udp or tcp and port 80` is `(udp or tcp) and port 80`.
        assert_eq!(
            rules("udp or tcp and port 80"),
            "(udp and port 80) or (tcp and port 80)"
        );
        assert_eq!(
            rules("(udp or tcp) and (port 1 or port 2)"),
            "(udp and port 1) or (udp and port 2) or (tcp and port 1) or (tcp and port 2)"
        );
        assert_eq!(rules("udp and (tcp or icmp)"), "nothing");
    }

    #[test]
    fn a_leading_vlan_moves_the_terms_and_vlan_elsewhere_is_refused() {
        let p = Prefilter::recognise("vlan 6 and udp dst port 7").unwrap();
        assert_eq!(p.vlan, VlanTest::Id(6));
        assert_eq!(p.to_string(), "vlan 6 and (udp and dst port 7)");
        assert_eq!(
            Prefilter::recognise("vlan and (udp or tcp)").unwrap().vlan,
            VlanTest::AnyTag
        );
        // `vlan` alone matches any inner protocol, IP or not.
        let any = Prefilter::recognise("vlan 100").unwrap();
        assert_eq!(any.rules[0].protos, CLASS_IP | CLASS_NOT_IP);
        refused("vlan and udp or tcp");
        refused("vlan or udp");
        refused("udp and vlan 6");
        refused("(vlan 6 and udp)");
        refused("vlan 4096 and udp");
        refused("vlan and vlan and udp");
    }

    #[test]
    fn ipv6_is_refused_in_the_expression() {
        // The program never rejects an IPv6 frame (it hands them all over), so `udp` stays sound on IPv6
        // traffic; addresses and keywords the program cannot test are refused.
        refused("host ::1");
        refused("net 2001:db8::/32");
        refused("ip6");
        refused("ip6 and udp");
        refused("icmp6");
    }

    #[test]
    fn everything_outside_the_subset_is_refused() {
        for e in [
            "",
            "udp[8] = 1",
            "len > 100",
            "greater 800",
            "not udp",
            "! udp",
            "udp and not port 53",
            "host example.com",
            "port domain",
            "port 0x50",
            "host 10.0.0.1 or 10.0.0.2",
            "port 53 or 54",
            "src and dst host 10.0.0.1",
            "net 10/8",
            "net 10.0.0.0 mask 255.0.0.0",
            "portrange 1-2",
            "udp host 10.0.0.1",
            "ip port 53",
            "ether host 00:11:22:33:44:55",
            "arp",
            "(udp",
            "udp)",
            "udp port",
            "tcp[tcpflags] & tcp-syn != 0",
            "010.0.0.1",
            "host 010.0.0.1",
        ] {
            refused(e);
        }
    }

    #[test]
    fn numbers_libpcap_reads_as_octal_or_hex_are_refused() {
        // libpcap reads `053` as 43 and `/010` as /8: taking them as decimal would make the prefilter narrower
        // than the filter, so they are libpcap's alone.
        for e in [
            "port 053",
            "net 10.0.0.0/010",
            "vlan 010 and udp",
            "port 0x35",
        ] {
            refused(e);
        }
    }

    #[test]
    fn more_rules_than_the_program_holds_is_refused() {
        refused(
            "(port 1 or port 2 or port 3) and (host 10.0.0.1 or host 10.0.0.2 or host 10.0.0.3)",
        );
        assert!(
            Prefilter::recognise("(port 1 or port 2) and (host 10.0.0.1 or host 10.0.0.2)")
                .is_some()
        );
    }

    #[test]
    fn extra_tests_widen_a_rule_and_duplicates_merge() {
        // Three addresses in one conjunction: the program tests two; the rule only gets wider.
        let p = Prefilter::recognise("host 10.0.0.1 and host 10.0.0.2 and host 10.0.0.3").unwrap();
        assert_eq!(p.rules.len(), 1);
        assert_eq!(p.rules[0].addrs.len(), PREFILTER_TESTS);
        assert_eq!(rules("udp or udp"), "(udp)");
    }
}
