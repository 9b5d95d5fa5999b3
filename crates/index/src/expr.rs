//! Parsing of `ringcap query` expressions: a libpcap (pcap-filter) expression,
//! optionally with stenographer-style time terms `after T` / `before T`.
//!
//! libpcap decides the final answer for every candidate packet, so the
//! [`Narrow`] tree built here only has to be a *superset* of what the filter
//! accepts. Whenever the expression is not understood, it is [`Narrow::All`].

use std::net::IpAddr;

use units::time::parse_time;

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
            Narrow::And(a, b) => match (a.simplify(), b.simplify()) {
                (Narrow::All, x) | (x, Narrow::All) => x,
                (x, y) if x == y => x,
                (x, y) => Narrow::And(Box::new(x), Box::new(y)),
            },
            Narrow::Or(a, b) => match (a.simplify(), b.simplify()) {
                (Narrow::All, _) | (_, Narrow::All) => Narrow::All,
                (x, y) if x == y => x,
                (x, y) => Narrow::Or(Box::new(x), Box::new(y)),
            },
            other => other,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Word,
    Op, // `=`, `[`, `&`, `!=`, ...: only appears inside primitives
    LParen,
    RParen,
    Not,
    And,
    Or,
}

#[derive(Clone, Copy, Debug)]
struct Tok<'a> {
    kind: Kind,
    text: &'a str,
    start: usize,
    end: usize,
}

const OP_CHARS: &str = "=<>!&|[]";

/// Splits into tokens with byte spans. Keywords are lower case, as in libpcap.
fn tokenize(s: &str) -> Vec<Tok<'_>> {
    let b = s.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let two = s.get(i..i + 2).unwrap_or("");
        let (kind, len) = match (c, two) {
            (_, "&&") => (Kind::And, 2),
            (_, "||") => (Kind::Or, 2),
            (_, "!=") | (_, "==") | (_, "<=") | (_, ">=") | (_, "<<") | (_, ">>") => (Kind::Op, 2),
            ('!', _) => (Kind::Not, 1),
            ('(', _) => (Kind::LParen, 1),
            (')', _) => (Kind::RParen, 1),
            _ if OP_CHARS.contains(c) => (Kind::Op, 1),
            _ => {
                let n = s[i..]
                    .find(|ch: char| {
                        ch.is_ascii_whitespace() || "()".contains(ch) || OP_CHARS.contains(ch)
                    })
                    .unwrap_or(s.len() - i);
                let kind = match &s[i..i + n] {
                    "and" => Kind::And,
                    "or" => Kind::Or,
                    "not" => Kind::Not,
                    _ => Kind::Word,
                };
                (kind, n)
            }
        };
        toks.push(Tok {
            kind,
            text: &s[i..i + len],
            start: i,
            end: i + len,
        });
        i += len;
    }
    // `src or dst host A` / `dst and src ...`: that `or`/`and` is a qualifier,
    // not a logical operator, so make it part of the primitive.
    for i in 1..toks.len().saturating_sub(1) {
        let (p, n) = (toks[i - 1].text, toks[i + 1].text);
        let joined = matches!((p, n), ("src", "dst") | ("dst", "src"));
        if matches!(toks[i].kind, Kind::And | Kind::Or) && joined && toks[i - 1].kind == Kind::Word
        {
            toks[i].kind = Kind::Word;
        }
    }
    toks
}

const WHERE_TIME: &str = "time terms may only be joined with `and` at the end \
    (`host 10.0.0.1 and after 10m ago`) or at the start (`after 10m ago and host 10.0.0.1`), \
    not inside parentheses, after `not`, or next to `or`";

/// A time term found in the token list: `after|before VALUE [ago]`.
struct TimeTerm {
    at: usize,
    len: usize,
}

/// Finds `after`/`before` keywords where a primitive could start (so a host
/// literally named `after` in `host after` is left alone).
fn find_time_terms(toks: &[Tok]) -> Result<Vec<TimeTerm>, String> {
    let mut terms = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let prev = if i == 0 { None } else { Some(toks[i - 1].kind) };
        let at_start = matches!(
            prev,
            None | Some(Kind::And | Kind::Or | Kind::Not | Kind::LParen)
        );
        if t.kind != Kind::Word || !matches!(t.text, "after" | "before") || !at_start {
            continue;
        }
        match toks.get(i + 1) {
            Some(v) if v.kind == Kind::Word => {}
            _ => {
                return Err(format!(
                    "`{}` needs a time value, e.g. `{0} 10m ago` or `{0} 2026-11-23T14:02:00Z`",
                    t.text
                ));
            }
        }
        let ago = toks
            .get(i + 2)
            .is_some_and(|a| a.kind == Kind::Word && a.text == "ago");
        terms.push(TimeTerm {
            at: i,
            len: if ago { 3 } else { 2 },
        });
    }
    Ok(terms)
}

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
    let toks = tokenize(expr);
    let terms = find_time_terms(&toks)?;
    let term_at = |i: usize| terms.iter().find(|t| t.at == i);
    let (mut lo, mut hi) = (0, toks.len());
    let mut taken = Vec::new();
    // Strip from the end: `... and TERM`, or a term that is all that is left.
    while let Some(t) = terms
        .iter()
        .rev()
        .find(|t| t.at >= lo && t.at + t.len == hi)
    {
        if t.at == lo {
            hi = lo;
        } else if toks[t.at - 1].kind == Kind::And {
            hi = t.at - 1;
        } else {
            break;
        }
        taken.push(t);
    }
    // Strip from the start: `TERM and ...`.
    let mut from_start = false;
    while let Some(t) = term_at(lo).filter(|t| t.at + t.len < hi) {
        if toks[t.at + t.len].kind != Kind::And {
            break;
        }
        lo = t.at + t.len + 1;
        from_start = true;
        taken.push(t);
        if lo == hi {
            return Err("`and` after a time term needs an expression after it".to_string());
        }
    }
    let rest = &toks[lo..hi];
    if let Some(t) = terms.iter().find(|t| t.at >= lo && t.at < hi) {
        return Err(format!("misplaced `{}`: {}", toks[t.at].text, WHERE_TIME));
    }
    if from_start && has_top_level_or(rest) {
        return Err(
            "a time term at the start only applies to the first `or` branch \
            (libpcap reads `after T and a or b` as `(after T and a) or b`); \
            put `after`/`before` at the end, or put the rest in parentheses"
                .to_string(),
        );
    }
    let (mut after_ns, mut before_ns) = (None::<u64>, None::<u64>);
    for t in taken {
        let value = &expr[toks[t.at + 1].start..toks[t.at + t.len - 1].end];
        let ns = parse_time(value, now_ns)
            .map_err(|e| format!("bad time in `{} {}`: {}", toks[t.at].text, value, e))?;
        if toks[t.at].text == "after" {
            after_ns = Some(after_ns.map_or(ns, |a| a.max(ns)));
        } else {
            before_ns = Some(before_ns.map_or(ns, |b| b.min(ns)));
        }
    }
    let filter = match (rest.first(), rest.last()) {
        (Some(a), Some(b)) => expr[a.start..b.end].trim().to_string(),
        _ => String::new(),
    };
    // `vlan`/`mpls`/... make later primitives look inside the encapsulation,
    // so only the first such keyword can describe the outer VLAN tag.
    let encaps = ["vlan", "mpls", "pppoes", "geneve", "vxlan"];
    let outer = rest
        .iter()
        .find(|t| t.kind == Kind::Word && encaps.contains(&t.text))
        .map_or(0, |t| t.start);
    // The narrowing is a superset: an expression too deep or too long to narrow (a hostile one,
    // 16 KiB of `!` or `(`) narrows nothing, and libpcap alone decides; the parser never recurses
    // past MAX_DEPTH nor builds more than MAX_TERMS primitives.
    let primitives = rest.iter().filter(|t| matches!(t.kind, Kind::Word)).count();
    let narrow = if primitives > MAX_TERMS {
        Narrow::All
    } else {
        match parse_or_and(rest, 0, outer, 0) {
            Some((n, end)) if end == rest.len() => n.simplify(),
            _ => Narrow::All,
        }
    };
    Ok(Query {
        filter,
        after_ns,
        before_ns,
        narrow,
    })
}

fn has_top_level_or(toks: &[Tok]) -> bool {
    let mut depth = 0i32;
    toks.iter().any(|t| {
        match t.kind {
            Kind::LParen => depth += 1,
            Kind::RParen => depth -= 1,
            _ => {}
        }
        depth == 0 && t.kind == Kind::Or
    })
}

/// Nesting (`(`, `not`) the narrowing follows; deeper gives no narrowing.
const MAX_DEPTH: usize = 64;
/// Words in an expression the narrowing looks at; more gives no narrowing (a narrowing tree of
/// thousands of terms would cost more than it saves, and `port 1 or ... or port 1345` is a
/// scan anyway).
const MAX_TERMS: usize = 256;

/// `and` and `or` have equal precedence and associate left to right (libpcap).
/// `outer` is the byte offset of the only `vlan` that may narrow; `depth` the nesting so far.
fn parse_or_and(toks: &[Tok], pos: usize, outer: usize, depth: usize) -> Option<(Narrow, usize)> {
    if depth > MAX_DEPTH {
        return None;
    }
    let (mut left, mut pos) = parse_unary(toks, pos, outer, depth)?;
    while let Some(op) = toks
        .get(pos)
        .map(|t| t.kind)
        .filter(|k| matches!(k, Kind::And | Kind::Or))
    {
        let (right, next) = parse_unary(toks, pos + 1, outer, depth)?;
        let (l, r) = (Box::new(left), Box::new(right));
        left = if op == Kind::And {
            Narrow::And(l, r)
        } else {
            Narrow::Or(l, r)
        };
        pos = next;
    }
    Some((left, pos))
}

fn parse_unary(toks: &[Tok], pos: usize, outer: usize, depth: usize) -> Option<(Narrow, usize)> {
    if depth > MAX_DEPTH {
        return None;
    }
    match toks.get(pos)?.kind {
        // The index cannot narrow a negation, but the operand must still parse.
        Kind::Not => parse_unary(toks, pos + 1, outer, depth + 1).map(|(_, p)| (Narrow::All, p)),
        Kind::LParen => match parse_or_and(toks, pos + 1, outer, depth + 1)? {
            (n, p) if toks.get(p)?.kind == Kind::RParen => Some((n, p + 1)),
            _ => None,
        },
        Kind::Word | Kind::Op => {
            let n = toks[pos..]
                .iter()
                .take_while(|t| matches!(t.kind, Kind::Word | Kind::Op))
                .count();
            Some((primitive(&toks[pos..pos + n], outer), pos + n))
        }
        _ => None,
    }
}

/// Recognises one primitive; anything unknown or arithmetic gives `All`.
fn primitive(toks: &[Tok], outer: usize) -> Narrow {
    if toks.iter().any(|t| t.kind != Kind::Word) {
        return Narrow::All; // relational/arithmetic expression
    }
    let mut w: Vec<&str> = toks.iter().map(|t| t.text).collect();
    match w[..] {
        ["tcp"] => return Narrow::Proto(6),
        ["udp"] => return Narrow::Proto(17),
        ["icmp"] => return Narrow::Proto(1),
        ["icmp6"] => return Narrow::Proto(58),
        ["sctp"] => return Narrow::Proto(132),
        ["ip" | "ip6", "proto", n] | ["proto", n] => {
            return num(n, 255).map_or(Narrow::All, |n| Narrow::Proto(n as u8));
        }
        ["vlan", n] if toks[0].start == outer => {
            return num(n, 4095).map_or(Narrow::All, |n| Narrow::Vlan(n as u16));
        }
        _ => {}
    }
    // `host`/`net` accept only ip/ip6 (`arp host` is not about IP headers);
    // ports also accept tcp/udp/sctp.
    let pqual = w
        .first()
        .copied()
        .filter(|p| ["ip", "ip6", "tcp", "udp", "sctp"].contains(p));
    if pqual.is_some() {
        w.remove(0);
    }
    let ip_only = matches!(pqual, None | Some("ip" | "ip6"));
    let rest = match w[..] {
        ["src" | "dst", "or" | "and", "src" | "dst", ref r @ ..] => r,
        ["src" | "dst", ref r @ ..] => r,
        ref r => r,
    };
    match *rest {
        ["host", a] if ip_only => a.parse().map_or(Narrow::All, Narrow::Host),
        ["net", n] if ip_only => parse_net(n),
        ["net", n, "mask", m] if ip_only => parse_net_mask(n, m),
        ["port", p] => num(p, 65535).map_or(Narrow::All, |p| Narrow::Port(p as u16)),
        ["portrange", r] => match r
            .split_once('-')
            .map(|(a, b)| (num(a, 65535), num(b, 65535)))
        {
            Some((Some(a), Some(b))) => Narrow::PortRange(a.min(b) as u16, a.max(b) as u16),
            _ => Narrow::All,
        },
        _ => Narrow::All,
    }
}

/// Plain decimal number up to `max`; hex/octal spellings give None (-> All).
fn num(s: &str, max: u32) -> Option<u32> {
    let plain =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    s.parse().ok().filter(|&n| plain && n <= max)
}

fn net(addr: IpAddr, prefix: u32) -> Narrow {
    let addr = match addr {
        IpAddr::V4(a) if prefix <= 32 => {
            IpAddr::V4((u32::from(a) & u32::MAX.checked_shl(32 - prefix).unwrap_or(0)).into())
        }
        IpAddr::V6(a) if prefix <= 128 => {
            IpAddr::V6((u128::from(a) & u128::MAX.checked_shl(128 - prefix).unwrap_or(0)).into())
        }
        _ => return Narrow::All,
    };
    Narrow::Net {
        addr,
        prefix: prefix as u8,
    }
}

/// `N/len` or a full address (a /32 or /128); abbreviated `10.1` gives All.
fn parse_net(s: &str) -> Narrow {
    let (a, len) = s.split_once('/').unwrap_or((s, ""));
    match (a.parse::<IpAddr>(), len) {
        (Ok(ip @ IpAddr::V4(_)), "") => net(ip, 32),
        (Ok(ip), "") => net(ip, 128),
        (Ok(ip), l) => num(l, 128).map_or(Narrow::All, |l| net(ip, l)),
        _ => Narrow::All,
    }
}

/// `N mask M` (IPv4 only). A non-contiguous mask is widened to its leading
/// ones, which is still a superset.
fn parse_net_mask(n: &str, m: &str) -> Narrow {
    match (
        n.parse::<std::net::Ipv4Addr>(),
        m.parse::<std::net::Ipv4Addr>(),
    ) {
        (Ok(a), Ok(m)) => net(IpAddr::V4(a), u32::from(m).leading_ones()),
        _ => Narrow::All,
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
            port 1 or (; mpls and vlan 5; tcp\u{a0}and udp; ";
        for e in cases.split("; ") {
            assert_eq!(n(e), All, "{e}");
        }
        let got = n("(udp[8:2] & 0xff) = 3 and host 1.2.3.4");
        assert!(got == All || got == host("1.2.3.4"), "{got:?}");
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
