use super::*;

fn tree(e: &str) -> Expr {
    parse(e).unwrap_or_else(|err| panic!("{e:?}: {err}"))
}

/// The only operand of `e`.
fn one(e: &str) -> Kind {
    let t = tree(e);
    assert!(t.rest.is_empty(), "{e:?} has more than one operand");
    t.first.kind
}

fn prim(e: &str) -> Prim {
    match one(e) {
        Kind::Prim(p) => p,
        k => panic!("{e:?} is {k:?}, not a primitive"),
    }
}

/// Each operand of the top level: its operator and its text.
fn shape<'a>(e: &'a str, t: &Expr) -> Vec<(Option<Op>, &'a str)> {
    t.operands().map(|(op, n)| (op, n.span.of(e))).collect()
}

#[test]
fn and_and_or_are_one_flat_sequence_read_from_the_left() {
    // pcap-filter(7): `udp or tcp and port 80` is `(udp or tcp) and port 80`; the tree keeps
    // the operands in order with their operators, so no precedence is invented.
    let e = "udp or tcp && port 80 || icmp";
    assert_eq!(
        shape(e, &tree(e)),
        [
            (None, "udp"),
            (Some(Op::Or), "tcp"),
            (Some(Op::And), "port 80"),
            (Some(Op::Or), "icmp"),
        ]
    );
}

#[test]
fn parentheses_and_not_nest() {
    let e = "udp and (port 1 or ! port 2)";
    let t = tree(e);
    assert_eq!(
        shape(e, &t),
        [(None, "udp"), (Some(Op::And), "(port 1 or ! port 2)")]
    );
    let Kind::Group(g) = &t.rest[0].1.kind else {
        panic!("{:?}", t.rest[0].1)
    };
    assert_eq!(shape(e, g), [(None, "port 1"), (Some(Op::Or), "! port 2")]);
    let Kind::Not(n) = &g.rest[0].1.kind else {
        panic!("{:?}", g.rest[0].1)
    };
    assert_eq!(n.span.of(e), "port 2");
    // `not` takes one operand, not the rest of the sequence.
    let e = "not tcp and udp";
    assert_eq!(
        shape(e, &tree(e)),
        [(None, "not tcp"), (Some(Op::And), "udp")]
    );
}

#[test]
fn primitives_with_their_qualifiers() {
    let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(prim("tcp"), Prim::Proto(Proto::Tcp));
    assert_eq!(prim("icmp6"), Prim::Proto(Proto::Icmp6));
    assert_eq!(prim("ip6"), Prim::Proto(Proto::Ip6));
    assert_eq!(
        prim("ip proto 47"),
        Prim::IpProto {
            qual: Some(Proto::Ip),
            number: 47
        }
    );
    assert_eq!(
        prim("proto 6"),
        Prim::IpProto {
            qual: None,
            number: 6
        }
    );
    let host = |qual, dir, a: &str| Prim::Host {
        qual,
        dir,
        addr: ip(a),
    };
    assert_eq!(prim("host 10.0.0.1"), host(None, Dir::Either, "10.0.0.1"));
    assert_eq!(prim("src host ::1"), host(None, Dir::Src, "::1"));
    assert_eq!(
        prim("ip6 dst and src host ::1"),
        host(Some(Proto::Ip6), Dir::Both, "::1")
    );
    assert_eq!(
        prim("src or dst host 1.2.3.4"),
        host(None, Dir::Either, "1.2.3.4")
    );
    assert_eq!(
        prim("dst || src host 1.2.3.4"),
        host(None, Dir::Either, "1.2.3.4")
    );
    // The address as written; a missing length is the whole address.
    assert_eq!(
        prim("net 10.1.2.3/16"),
        Prim::Net {
            qual: None,
            dir: Dir::Either,
            addr: ip("10.1.2.3"),
            prefix: 16
        }
    );
    assert!(matches!(prim("net fe80::1"), Prim::Net { prefix: 128, .. }));
    assert_eq!(
        prim("ip dst net 192.168.1.0 mask 255.255.255.0"),
        Prim::NetMask {
            qual: Some(Proto::Ip),
            dir: Dir::Dst,
            addr: v4("192.168.1.0"),
            mask: v4("255.255.255.0")
        }
    );
    assert_eq!(
        prim("udp src port 53"),
        Prim::Port {
            qual: Some(Proto::Udp),
            dir: Dir::Src,
            port: 53
        }
    );
    // libpcap swaps a range given high-low.
    assert_eq!(
        prim("tcp dst portrange 2000-1000"),
        Prim::PortRange {
            qual: Some(Proto::Tcp),
            dir: Dir::Dst,
            lo: 1000,
            hi: 2000
        }
    );
    assert_eq!(
        prim("vlan"),
        Prim::Vlan {
            id: None,
            outer: true
        }
    );
    assert_eq!(
        prim("vlan 4095"),
        Prim::Vlan {
            id: Some(4095),
            outer: true
        }
    );
}

#[test]
fn only_the_first_encapsulation_keyword_is_outer() {
    let vlans = |e: &str| -> Vec<Option<bool>> {
        tree(e)
            .operands()
            .map(|(_, n)| match n.kind {
                Kind::Prim(Prim::Vlan { outer, .. }) => Some(outer),
                _ => None,
            })
            .collect()
    };
    assert_eq!(vlans("vlan 100 and vlan 200"), [Some(true), Some(false)]);
    assert_eq!(vlans("mpls and vlan 5"), [None, Some(false)]);
    assert_eq!(vlans("udp and vlan 5"), [None, Some(true)]);
}

/// The text of each Opaque operand at the top level.
fn opaque(e: &str) -> Vec<&str> {
    let t = parse(e).unwrap();
    t.operands()
        .filter(|(_, n)| n.kind == Kind::Opaque)
        .map(|(_, n)| n.span.of(e))
        .collect()
}

#[test]
fn what_is_not_understood_is_opaque_with_its_text() {
    assert_eq!(
        opaque("udp[8:2] = 0x1234 and host 1.2.3.4"),
        ["udp[8:2] = 0x1234"]
    );
    assert_eq!(opaque("(udp[0] & 1) = 1 or tcp"), ["(udp[0] & 1) = 1"]);
    // libpcap's omitted keyword (`host A or B`) is not followed: `10.0.0.2` alone is libpcap's.
    assert_eq!(opaque("host 10.0.0.1 or 10.0.0.2"), ["10.0.0.2"]);
    for e in [
        "host example.com",
        "port http",
        "port 053", // octal for libpcap
        "port 0x50",
        "net 10",
        "net 10.1/16",
        "net 10.0.0.0/33",
        "net 10.0.0.0/08",
        "udp host 10.0.0.1",
        "arp host 10.0.0.1",
        "vlan 4096",
        "ether host 00:11:22:33:44:55",
        "len > 100",
        "(udp",
        "udp)",
        "tcp\u{a0}and udp",
    ] {
        assert_eq!(opaque(e), [e], "{e:?}");
    }
    // An operator without an operand gives an empty one right after the operator.
    let e = "tcp and  ";
    let t = tree(e);
    assert_eq!(t.rest[0].1.kind, Kind::Opaque);
    assert_eq!(t.rest[0].1.span, Span { start: 7, end: 7 });
    let Kind::Not(x) = one("! ") else {
        panic!("`!` is a negation")
    };
    assert_eq!((x.kind, x.span), (Kind::Opaque, Span { start: 1, end: 1 }));
    assert_eq!(one(""), Kind::Opaque);
}

#[test]
fn time_terms_are_their_own_nodes() {
    let e = "tcp and after 10m ago";
    let t = tree(e);
    let n = &t.rest[0].1;
    assert_eq!(n.span.of(e), "after 10m ago");
    let Kind::Time(time) = n.kind else {
        panic!("{n:?}")
    };
    assert!(time.after);
    assert_eq!(time.value.of(e), "10m ago");
    assert!(matches!(one("(before now)"), Kind::Group(_)));
    // Only where a primitive starts: a host named `after` is a host.
    assert_eq!(one("host after"), Kind::Opaque);
    assert!(parse("tcp and after")
        .unwrap_err()
        .contains("needs a time value"));
    assert!(parse("after ( now )")
        .unwrap_err()
        .contains("needs a time value"));
    assert!(parse("after now tcp").is_err());
}

/// The depth at which `e` holds its first primitive, or None if it holds none.
fn prim_depth(e: &Expr) -> Option<usize> {
    let mut node = &e.first;
    let mut depth = 0;
    loop {
        node = match &node.kind {
            Kind::Group(g) => &g.first,
            Kind::Not(n) => n,
            Kind::Prim(_) => return Some(depth),
            _ => return None,
        };
        depth += 1;
    }
}

#[test]
fn nesting_is_followed_to_max_depth_and_words_to_max_terms() {
    let parens = |n| format!("{}tcp{}", "(".repeat(n), ")".repeat(n));
    let bangs = |n| format!("{}tcp", "!".repeat(n));
    assert_eq!(prim_depth(&tree(&parens(MAX_DEPTH))), Some(MAX_DEPTH));
    assert_eq!(prim_depth(&tree(&parens(MAX_DEPTH + 1))), None);
    assert_eq!(prim_depth(&tree(&bangs(MAX_DEPTH))), Some(MAX_DEPTH));
    assert_eq!(prim_depth(&tree(&bangs(MAX_DEPTH + 1))), None);

    // `port N` is two words; time terms do not count.
    let ports = |n: usize| {
        (1..=n)
            .map(|p| format!("port {p}"))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let prims = |e: &str| {
        tree(e)
            .operands()
            .filter(|(_, n)| matches!(n.kind, Kind::Prim(_)))
            .count()
    };
    let at_limit = ports(MAX_TERMS / 2);
    assert_eq!(prims(&at_limit), MAX_TERMS / 2);
    assert_eq!(
        prims(&format!("{at_limit} and after 10m ago")),
        MAX_TERMS / 2
    );
    let over = format!("{at_limit} or tcp");
    assert_eq!(prims(&over), 0);
    assert_eq!(
        tree(&over).rest.len(),
        MAX_TERMS / 2,
        "the operands are kept, as Opaque"
    );
}

/// A hostile expression (16 KiB of `!`, 100 k `(`) is parsed on a small stack (serve's threads)
/// without recursing past the bound.
#[test]
fn deep_or_long_expressions_do_not_overflow_the_stack() {
    let t = std::thread::Builder::new()
        .stack_size(64 << 10)
        .spawn(|| {
            for e in [
                format!("{}tcp", "!".repeat(16_380)),
                format!("{}tcp{}", "(".repeat(100_000), ")".repeat(100_000)),
                format!("{}tcp", "(".repeat(100_000)),
                format!("{}tcp", "not ".repeat(10_000)),
            ] {
                let t = parse(&e).unwrap();
                assert_eq!(prim_depth(&t), None, "{}", &e[..40]);
            }
        })
        .unwrap();
    t.join().unwrap();
}
