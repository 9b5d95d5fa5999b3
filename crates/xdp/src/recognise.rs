//! From a tcpdump expression to a [`Prefilter`], for the subset the XDP program can test: `and`/`or` (libpcap's
//! equal precedence, left to right) and parentheses over `tcp`, `udp`, `sctp`, `icmp`, `ip`, `[src|dst] host A`,
//! `[src|dst] net A/len`, `[tcp|udp|sctp] [src|dst] port P` with IPv4 literals and port numbers, and a
//! leading `vlan [N] and ...`. Anything else (negation, byte tests, `len`, names to resolve, IPv6 addresses,
//! omitted keywords as in `host A or B`, `vlan` elsewhere) gives no prefilter: everything goes to user space.

use std::net::Ipv4Addr;

use crate::prefilter::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token<'a> {
    Open,
    Close,
    And,
    Or,
    /// `not`/`!`: outside the subset, kept only to refuse it.
    Not,
    Word(&'a str),
}

fn tokens(expr: &str) -> Vec<Token<'_>> {
    let mut v = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'(' || c == b')' {
            v.push(if c == b'(' { Token::Open } else { Token::Close });
            i += 1;
        } else if expr[i..].starts_with("&&") || expr[i..].starts_with("||") {
            v.push(if c == b'&' { Token::And } else { Token::Or });
            i += 2;
        } else if c == b'!' {
            v.push(Token::Not);
            i += 1;
        } else {
            let start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() && !b"()!&|".contains(&b[i]) {
                i += 1;
            }
            if i == start {
                // A lone '&' or '|': not ours.
                v.push(Token::Not);
                i += 1;
                continue;
            }
            v.push(match &expr[start..i] {
                "and" => Token::And,
                "or" => Token::Or,
                "not" => Token::Not,
                w => Token::Word(w),
            });
        }
    }
    v
}

/// Conjunctions, OR'ed (disjunctive normal form), while parsing.
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

struct Parser<'a> {
    toks: Vec<Token<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<Token<'a>> {
        self.toks.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<Token<'a>> {
        let t = self.peek();
        self.pos += 1;
        t
    }

    fn peek_word(&self, w: &str) -> bool {
        self.peek() == Some(Token::Word(w))
    }

    /// `term (op term)*`, left to right; also says whether an `or` joined terms at this level.
    fn expr(&mut self) -> Option<(Dnf, bool)> {
        let mut acc = self.term()?;
        let mut saw_or = false;
        loop {
            match self.peek() {
                Some(Token::And) => {
                    self.pos += 1;
                    acc = and(acc, self.term()?)?;
                }
                Some(Token::Or) => {
                    self.pos += 1;
                    saw_or = true;
                    acc = or(acc, self.term()?)?;
                }
                None | Some(Token::Close) => return Some((acc, saw_or)),
                _ => return None,
            }
        }
    }

    fn term(&mut self) -> Option<Dnf> {
        match self.next()? {
            Token::Open => {
                let (d, _) = self.expr()?;
                (self.next()? == Token::Close).then_some(d)
            }
            Token::Word(w) => self.primitive(w).map(|r| vec![r]),
            _ => None,
        }
    }

    fn primitive(&mut self, w: &str) -> Option<Rule> {
        let bare = |protos| Rule {
            protos,
            addrs: vec![],
            ports: vec![],
        };
        match w {
            "tcp" | "udp" | "sctp" => {
                let protos = match w {
                    "tcp" => CLASS_TCP,
                    "udp" => CLASS_UDP,
                    _ => CLASS_SCTP,
                };
                if self.qualifier_follows() {
                    let r = self.qualified()?;
                    // Under a transport protocol only `port` is ours.
                    (!r.ports.is_empty()).then_some(Rule { protos, ..r })
                } else {
                    Some(bare(protos))
                }
            }
            "icmp" => Some(bare(CLASS_ICMP)),
            "ip" => {
                if self.qualifier_follows() {
                    let r = self.qualified()?;
                    (!r.addrs.is_empty()).then_some(r)
                } else {
                    Some(bare(CLASS_IP))
                }
            }
            "src" | "dst" | "host" | "net" | "port" => {
                self.pos -= 1;
                self.qualified()
            }
            _ => None,
        }
    }

    fn qualifier_follows(&self) -> bool {
        ["src", "dst", "host", "net", "port"]
            .iter()
            .any(|w| self.peek_word(w))
    }

    /// `[src|dst|src or dst] (host A | net A[/len] | port P)`.
    fn qualified(&mut self) -> Option<Rule> {
        let mut dir = Direction::Either;
        for (w, d, other) in [
            ("src", Direction::Src, "dst"),
            ("dst", Direction::Dst, "src"),
        ] {
            if self.peek_word(w) {
                self.pos += 1;
                dir = d;
                if self.peek() == Some(Token::Or)
                    && self.toks.get(self.pos + 1) == Some(&Token::Word(other))
                {
                    self.pos += 2;
                    dir = Direction::Either;
                }
                break;
            }
        }
        let Some(Token::Word(kind)) = self.next() else {
            return None;
        };
        let Some(Token::Word(value)) = self.next() else {
            return None;
        };
        let addr = |net: Ipv4Addr, prefix_len| Rule {
            // libpcap's host/net also match ARP and RARP, which the program always hands over.
            protos: CLASS_IP,
            addrs: vec![AddrTest {
                net,
                prefix_len,
                dir,
            }],
            ports: vec![],
        };
        match kind {
            "host" => Some(addr(value.parse().ok()?, 32)),
            "net" => {
                let (a, len) = match value.split_once('/') {
                    Some((a, len)) if len.bytes().all(|c| c.is_ascii_digit()) => {
                        (a, len.parse::<u8>().ok()?)
                    }
                    Some(_) => return None,
                    None => (value, 32),
                };
                // Short forms (`net 10`, `net 10.1/16`) and `mask` are libpcap's own arithmetic: not ours.
                (len <= 32 && !self.peek_word("mask")).then_some(())?;
                Some(addr(a.parse().ok()?, len))
            }
            "port" if value.bytes().all(|c| c.is_ascii_digit()) => Some(Rule {
                protos: CLASS_PORTS,
                addrs: vec![],
                ports: vec![PortTest {
                    port: value.parse().ok()?,
                    dir,
                }],
            }),
            _ => None,
        }
    }
}

impl Prefilter {
    /// The prefilter for `expr`, or `None` when the expression is empty or outside the subset. The caller
    /// must have compiled `expr` with libpcap first (a syntax error is libpcap's to report).
    pub fn recognise(expr: &str) -> Option<Prefilter> {
        let mut p = Parser {
            toks: tokens(expr),
            pos: 0,
        };
        if p.toks.is_empty() {
            return None;
        }
        let mut vlan = VlanTest::Untagged;
        if p.peek_word("vlan") {
            p.pos += 1;
            vlan = VlanTest::AnyTag;
            if let Some(Token::Word(n)) = p.peek() {
                if !n.bytes().all(|c| c.is_ascii_digit()) {
                    return None;
                }
                let id: u16 = n.parse().ok()?;
                if id > 4095 {
                    return None;
                }
                vlan = VlanTest::Id(id);
                p.pos += 1;
            }
            match p.next() {
                None => {
                    return Some(Prefilter {
                        vlan,
                        rules: vec![Rule {
                            protos: CLASS_IP | CLASS_NOT_IP,
                            addrs: vec![],
                            ports: vec![],
                        }],
                    })
                }
                // `vlan and A or B` is `(vlan and A) or B` with B read past the tag too: not ours.
                Some(Token::And) => {}
                _ => return None,
            }
        }
        let (dnf, saw_or) = p.expr()?;
        if p.pos != p.toks.len() || (vlan != VlanTest::Untagged && saw_or) {
            return None;
        }
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
