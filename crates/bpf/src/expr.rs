//! The one front end for tcpdump (pcap-filter) expressions: a parse tree of what ringcap itself
//! can reason about, for the index's narrowing (`index`) and the XDP prefilter (`xdp`).
//!
//! libpcap remains the judge of every expression: this parser never rejects a filter for its
//! syntax. What it does not understand (byte tests, `len`, names, `ether`, arithmetic, broken
//! parentheses, an operator with no operand) becomes an [`Kind::Opaque`] node whose text span
//! is kept, and each consumer treats it as "anything". Only stenographer's time terms
//! (`after T`, `before T`), which libpcap does not know, can make it fail.
//!
//! `and` and `or` have equal precedence and associate left to right, as in libpcap, so a
//! sequence of operands is kept flat in an [`Expr`] and read from the left.
//!
//! Bounded for hostile input (serve's threads have small stacks): it nests at most
//! [`MAX_DEPTH`] levels of `(`/`not` (deeper is Opaque) and recognises no primitive at all in an
//! expression of more than [`MAX_TERMS`] words.

use std::net::{IpAddr, Ipv4Addr};

/// Nesting (`(`, `not`) the parser follows; deeper is Opaque.
pub const MAX_DEPTH: usize = 64;
/// Words (outside time terms) up to which primitives are recognised; a longer expression is
/// all Opaque (a narrowing of thousands of terms would cost more than it saves, and
/// `port 1 or ... or port 1345` is a scan anyway).
pub const MAX_TERMS: usize = 256;

/// Byte offsets into the parsed text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    /// This span's text in `text` (the string that was parsed).
    pub fn of(self, text: &str) -> &str {
        &text[self.start..self.end]
    }
}

/// `and`/`&&` or `or`/`||`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    And,
    Or,
}

/// Operands joined left to right: `first op1 x1 op2 x2` is `(first op1 x1) op2 x2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    pub first: Node,
    pub rest: Vec<(Op, Node)>,
}

impl Expr {
    /// From the first operand's start to the last one's end.
    pub fn span(&self) -> Span {
        let end = self
            .rest
            .last()
            .map_or(self.first.span, |(_, n)| n.span)
            .end;
        Span {
            start: self.first.span.start,
            end,
        }
    }

    /// The operands in order, each with the operator before it (None for the first).
    pub fn operands(&self) -> impl Iterator<Item = (Option<Op>, &Node)> {
        std::iter::once((None, &self.first)).chain(self.rest.iter().map(|(op, n)| (Some(*op), n)))
    }
}

/// One operand with its text span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub span: Span,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `( expr )`.
    Group(Box<Expr>),
    /// `not x` / `! x`.
    Not(Box<Node>),
    Prim(Prim),
    /// stenographer's `after T` / `before T`; libpcap does not know them.
    Time(Time),
    /// Anything else, for libpcap alone to decide; an operator with no operand (`tcp and`) gives
    /// an empty one.
    Opaque,
}

/// A time term: `after|before VALUE [ago]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Time {
    /// `after` (else `before`).
    pub after: bool,
    /// The value's words (`10m ago`, `2026-11-23T14:02:00Z`).
    pub value: Span,
}

/// Protocol words, alone or qualifying `host`/`net`/`port`/`portrange`/`proto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Ip,
    Ip6,
    Tcp,
    Udp,
    Sctp,
    Icmp,
    Icmp6,
}

/// Which end of a packet `host`/`net`/`port` look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Src,
    Dst,
    /// No qualifier, `src or dst`, `dst or src`.
    Either,
    /// `src and dst`, `dst and src`.
    Both,
}

/// The primitives understood, with literal values only (names are libpcap's to resolve).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    /// `tcp`, `udp`, `sctp`, `icmp`, `icmp6`, `ip`, `ip6` alone.
    Proto(Proto),
    /// `[ip|ip6] proto N`.
    IpProto { qual: Option<Proto>, number: u8 },
    /// `[ip|ip6] [dir] host A`.
    Host {
        qual: Option<Proto>,
        dir: Dir,
        addr: IpAddr,
    },
    /// `[ip|ip6] [dir] net A[/len]` (no `/len`: the whole address); `prefix` fits the family,
    /// `addr` is as written (host bits not cleared).
    Net {
        qual: Option<Proto>,
        dir: Dir,
        addr: IpAddr,
        prefix: u8,
    },
    /// `[ip|ip6] [dir] net A mask M` (IPv4).
    NetMask {
        qual: Option<Proto>,
        dir: Dir,
        addr: Ipv4Addr,
        mask: Ipv4Addr,
    },
    /// `[ip|ip6|tcp|udp|sctp] [dir] port P`.
    Port {
        qual: Option<Proto>,
        dir: Dir,
        port: u16,
    },
    /// `[ip|ip6|tcp|udp|sctp] [dir] portrange A-B`, ordered `lo <= hi` as libpcap does.
    PortRange {
        qual: Option<Proto>,
        dir: Dir,
        lo: u16,
        hi: u16,
    },
    /// `vlan [N]`. `outer`: no encapsulation keyword (`vlan`, `mpls`, `pppoes`, `geneve`,
    /// `vxlan`) comes before it, so it tests the outer tag; after one, libpcap looks inside.
    Vlan { id: Option<u16>, outer: bool },
    /// `mpls [N]`, `geneve [N]`, `vxlan [N]`, `pppoes [N]`: after one of these, libpcap's
    /// following terms (in text order, across `or` too) look inside the encapsulation.
    Encap { kind: Encap, id: Option<u32> },
}

/// An encapsulation keyword other than `vlan` (see [`Prim::Encap`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encap {
    Mpls,
    Geneve,
    Vxlan,
    Pppoes,
}

impl Encap {
    fn from_word(w: &str) -> Option<Encap> {
        Some(match w {
            "mpls" => Encap::Mpls,
            "geneve" => Encap::Geneve,
            "vxlan" => Encap::Vxlan,
            "pppoes" => Encap::Pppoes,
            _ => return None,
        })
    }

    /// The largest id: a 20-bit label, a 24-bit VNI, a 16-bit session.
    const fn max_id(self) -> u32 {
        match self {
            Encap::Mpls => (1 << 20) - 1,
            Encap::Geneve | Encap::Vxlan => (1 << 24) - 1,
            Encap::Pppoes => u16::MAX as u32,
        }
    }
}

/// Where `text` has an encapsulation keyword other than `vlan` (`mpls`, `geneve`, `vxlan`,
/// `pppoes`), as libpcap's scanner would see the word, wherever it stands: a narrowing must know
/// about every one, parsed as a primitive or not.
pub fn encapsulations(text: &str) -> Vec<Span> {
    tokenize(text)
        .iter()
        .filter(|t| t.kind == Tk::Word && Encap::from_word(t.text).is_some())
        .map(|t| Span {
            start: t.start,
            end: t.end,
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tk {
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
    kind: Tk,
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
            (_, "&&") => (Tk::And, 2),
            (_, "||") => (Tk::Or, 2),
            (_, "!=") | (_, "==") | (_, "<=") | (_, ">=") | (_, "<<") | (_, ">>") => (Tk::Op, 2),
            ('!', _) => (Tk::Not, 1),
            ('(', _) => (Tk::LParen, 1),
            (')', _) => (Tk::RParen, 1),
            _ if OP_CHARS.contains(c) => (Tk::Op, 1),
            _ => {
                let n = s[i..]
                    .find(|ch: char| {
                        ch.is_ascii_whitespace() || "()".contains(ch) || OP_CHARS.contains(ch)
                    })
                    .unwrap_or(s.len() - i);
                let kind = match &s[i..i + n] {
                    "and" => Tk::And,
                    "or" => Tk::Or,
                    "not" => Tk::Not,
                    _ => Tk::Word,
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
    // `src or dst host A` / `dst && src ...`: that `or`/`and` is a qualifier, not a logical
    // operator, so make it part of the primitive.
    for i in 1..toks.len().saturating_sub(1) {
        let (p, n) = (toks[i - 1].text, toks[i + 1].text);
        let joined = matches!((p, n), ("src", "dst") | ("dst", "src"));
        if matches!(toks[i].kind, Tk::And | Tk::Or) && joined && toks[i - 1].kind == Tk::Word {
            toks[i].kind = Tk::Word;
        }
    }
    toks
}

struct Parser<'a> {
    toks: Vec<Tok<'a>>,
    /// For each `(`, the index of its `)` if it has one.
    close: Vec<Option<usize>>,
    /// Byte offset of the first encapsulation keyword, if any.
    outer: Option<usize>,
    /// Whether primitives are recognised (false past MAX_TERMS words).
    recognise: bool,
    /// Words inside time terms, which MAX_TERMS does not count.
    time_words: usize,
}

/// Parses `text` into its tree. An empty or blank text gives one empty Opaque operand. Errors
/// only for a time term without its value or followed by more words.
pub fn parse(text: &str) -> Result<Expr, String> {
    let toks = tokenize(text);
    let mut close = vec![None; toks.len()];
    let mut open = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        match t.kind {
            Tk::LParen => open.push(i),
            Tk::RParen => {
                if let Some(o) = open.pop() {
                    close[o] = Some(i);
                }
            }
            _ => {}
        }
    }
    // libpcap's encapsulation keywords and ringcap's own tunnel terms (`gre`, `erspan`; index's
    // tunnel_term), after which terms read the packet inside: a `vlan` there is not the outer tag.
    let encaps = ["vlan", "mpls", "pppoes", "geneve", "vxlan", "gre", "erspan"];
    let outer = toks
        .iter()
        .find(|t| t.kind == Tk::Word && encaps.contains(&t.text))
        .map(|t| t.start);
    let words = toks.iter().filter(|t| t.kind == Tk::Word).count();
    let mut p = Parser {
        toks,
        close,
        outer,
        recognise: true,
        time_words: 0,
    };
    let n = p.toks.len();
    let tree = p.expr(0, n, 0)?;
    if words - p.time_words <= MAX_TERMS {
        return Ok(tree);
    }
    p.recognise = false;
    p.expr(0, n, 0)
}

impl Parser<'_> {
    /// Byte offset where token `i - 1` ends: an empty operand sits right after the operator (or `(`,
    /// `not`) that wanted it, inside its parent's span.
    fn after(&self, i: usize) -> usize {
        i.checked_sub(1).map_or(0, |p| self.toks[p].end)
    }

    /// The operands of tokens `lo..hi`, split at `and`/`or` outside parentheses.
    fn expr(&mut self, lo: usize, hi: usize, depth: usize) -> Result<Expr, String> {
        let mut pos = lo;
        let mut first = None;
        let mut rest = Vec::new();
        let mut op = None;
        loop {
            let mut end = pos;
            while end < hi && !matches!(self.toks[end].kind, Tk::And | Tk::Or) {
                end = match self.close[end] {
                    Some(c) if c < hi => c + 1,
                    _ => end + 1,
                };
            }
            let node = self.operand(pos, end, depth)?;
            match op {
                None => first = Some(node),
                Some(op) => rest.push((op, node)),
            }
            if end >= hi {
                break;
            }
            op = Some(if self.toks[end].kind == Tk::And {
                Op::And
            } else {
                Op::Or
            });
            pos = end + 1;
        }
        Ok(Expr {
            first: first.expect("the loop runs at least once"),
            rest,
        })
    }

    /// One operand: tokens `lo..hi` with no `and`/`or` outside parentheses.
    fn operand(&mut self, lo: usize, hi: usize, depth: usize) -> Result<Node, String> {
        let span = if lo == hi {
            let at = self.after(lo);
            Span { start: at, end: at }
        } else {
            Span {
                start: self.toks[lo].start,
                end: self.toks[hi - 1].end,
            }
        };
        let node = |kind| Node { span, kind };
        if lo == hi || depth > MAX_DEPTH {
            return Ok(node(Kind::Opaque));
        }
        let kind = match self.toks[lo].kind {
            Tk::Not => Kind::Not(Box::new(self.operand(lo + 1, hi, depth + 1)?)),
            Tk::LParen if self.close[lo] == Some(hi - 1) => {
                Kind::Group(Box::new(self.expr(lo + 1, hi - 1, depth + 1)?))
            }
            Tk::Word | Tk::Op => {
                let run = &self.toks[lo..hi];
                if let Some((t, words)) = time(run)? {
                    self.time_words += words;
                    Kind::Time(t)
                } else if run.iter().all(|t| t.kind == Tk::Word) && self.recognise {
                    self.prim(run).map_or(Kind::Opaque, Kind::Prim)
                } else {
                    Kind::Opaque
                }
            }
            _ => Kind::Opaque,
        };
        Ok(node(kind))
    }

    /// Recognises one primitive from its words; None for anything else.
    fn prim(&self, run: &[Tok]) -> Option<Prim> {
        let w: Vec<&str> = run.iter().map(|t| t.text).collect();
        let proto = |s: &str| {
            Some(match s {
                "ip" => Proto::Ip,
                "ip6" => Proto::Ip6,
                "tcp" => Proto::Tcp,
                "udp" => Proto::Udp,
                "sctp" => Proto::Sctp,
                "icmp" => Proto::Icmp,
                "icmp6" => Proto::Icmp6,
                _ => return None,
            })
        };
        match w[..] {
            [p] if proto(p).is_some() => return proto(p).map(Prim::Proto),
            [q @ ("ip" | "ip6"), "proto", n] | [q @ "proto", n] => {
                let number = num(n, 255)? as u8;
                return Some(Prim::IpProto {
                    qual: proto(q),
                    number,
                });
            }
            ["vlan", ref n @ ..] if n.len() <= 1 => {
                let id = match n.first() {
                    Some(n) => Some(num(n, 4095)? as u16),
                    None => None,
                };
                let outer = self.outer == Some(run[0].start);
                return Some(Prim::Vlan { id, outer });
            }
            [e, ref n @ ..] if n.len() <= 1 && Encap::from_word(e).is_some() => {
                let kind = Encap::from_word(e)?;
                let id = match n.first() {
                    Some(n) => Some(num(n, kind.max_id())?),
                    None => None,
                };
                return Some(Prim::Encap { kind, id });
            }
            _ => {}
        }
        // `host`/`net` take only ip/ip6 (`arp host` is not about IP headers); ports also
        // tcp/udp/sctp.
        let (qual, w) = match w[..] {
            [q @ ("ip" | "ip6" | "tcp" | "udp" | "sctp"), ref r @ ..] => (proto(q), r),
            ref r => (None, r),
        };
        let ip_only = matches!(qual, None | Some(Proto::Ip | Proto::Ip6));
        let (dir, w) =
            match *w {
                ["src", "or" | "||", "dst", ref r @ ..]
                | ["dst", "or" | "||", "src", ref r @ ..] => (Dir::Either, r),
                ["src", "and" | "&&", "dst", ref r @ ..]
                | ["dst", "and" | "&&", "src", ref r @ ..] => (Dir::Both, r),
                ["src", ref r @ ..] => (Dir::Src, r),
                ["dst", ref r @ ..] => (Dir::Dst, r),
                ref r => (Dir::Either, r),
            };
        match *w {
            ["host", a] if ip_only => Some(Prim::Host {
                qual,
                dir,
                addr: a.parse().ok()?,
            }),
            ["net", n] if ip_only => {
                let (a, len) = n.split_once('/').unwrap_or((n, ""));
                let addr: IpAddr = a.parse().ok()?;
                let max = if addr.is_ipv4() { 32 } else { 128 };
                let prefix = if len.is_empty() { max } else { num(len, max)? };
                Some(Prim::Net {
                    qual,
                    dir,
                    addr,
                    prefix: prefix as u8,
                })
            }
            ["net", n, "mask", m] if ip_only => Some(Prim::NetMask {
                qual,
                dir,
                addr: n.parse().ok()?,
                mask: m.parse().ok()?,
            }),
            ["port", p] => Some(Prim::Port {
                qual,
                dir,
                port: num(p, 65535)? as u16,
            }),
            ["portrange", r] => {
                let (a, b) = r.split_once('-')?;
                let (a, b) = (num(a, 65535)? as u16, num(b, 65535)? as u16);
                Some(Prim::PortRange {
                    qual,
                    dir,
                    lo: a.min(b),
                    hi: a.max(b),
                })
            }
            _ => None,
        }
    }
}

/// `after|before VALUE [ago]` as the whole operand, with its number of words.
fn time(run: &[Tok]) -> Result<Option<(Time, usize)>, String> {
    let kw = run[0];
    if kw.kind != Tk::Word || !matches!(kw.text, "after" | "before") {
        return Ok(None);
    }
    let Some(v) = run.get(1).filter(|v| v.kind == Tk::Word) else {
        return Err(format!(
            "`{}` needs a time value, e.g. `{0} 10m ago` or `{0} 2026-11-23T14:02:00Z`",
            kw.text
        ));
    };
    let len = if run.get(2).is_some_and(|a| a.text == "ago") {
        3
    } else {
        2
    };
    if run.len() > len {
        return Err(format!(
            "`{} {}` is a time term: join it to the rest with `and`",
            kw.text,
            run[1..len]
                .iter()
                .map(|t| t.text)
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    let value = Span {
        start: v.start,
        end: run[len - 1].end,
    };
    Ok(Some((
        Time {
            after: kw.text == "after",
            value,
        },
        len,
    )))
}

/// Plain decimal number up to `max`. libpcap reads `010` as octal and `0x50` as hex: those
/// spellings are left to it (None).
fn num(s: &str, max: u32) -> Option<u32> {
    let plain =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    s.parse().ok().filter(|&n| plain && n <= max)
}

#[cfg(test)]
#[path = "expr_tests.rs"]
mod tests;
