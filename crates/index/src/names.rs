//! Names per flow: the DNS names a flow asked for and got (questions; A, AAAA and CNAME answers),
//! the TLS ClientHello's server name, ALPN and JA4 (over TCP, joined when split over segments, or
//! in a QUIC Initial decrypted with its public keys), and the host and path of an HTTP/1 connection's first request. Read by the
//! indexer into the flow table (`flows/1.2`), and by `ringcap query --name` to pick flows.
//!
//! The parsers are `wire`'s (each fuzzed). What this module adds is the gate, which decides from a
//! few header bytes whether a packet can carry a name at all (so ordinary packets pay a few
//! compares), and the bounds: per flow at most [`MAX_DNS_NAMES`] question names,
//! [`MAX_DNS_NAMES`] CNAME targets, [`MAX_ADDRS`] addresses and [`MAX_ALPN`] ALPN values, every
//! value at most [`wire::NAME_MAX`] bytes, and per file at most [`MAX_BYTES`] of names. What does
//! not fit is counted in the flow's `names_cut`. Bounds and what is (not) read are in
//! `docs/index.md` ("Names").

use std::collections::HashMap;

use wire::dns::{self, Rdata};
use wire::http::Request;
use wire::tls::{ClientHello, Transport};
use wire::Name;

use crate::key::FlowKey;

/// Question names (and, apart, CNAME targets) kept per flow.
pub const MAX_DNS_NAMES: usize = 8;
/// A and AAAA answers kept per flow.
pub const MAX_ADDRS: usize = 16;
/// ALPN protocol names kept per flow.
pub const MAX_ALPN: usize = 8;
/// Records of one DNS message read at most (questions, then answers); a message with more counts
/// one cut name for what was not read.
pub const MAX_RECORDS: usize = 64;
/// Bytes of names (and bookkeeping: [`ENTRY_COST`] per named flow) one file's builder holds;
/// past it, new names are dropped and counted.
pub const MAX_BYTES: usize = 64 << 20;
/// What a named flow costs the budget besides its names (its key and lists).
pub const ENTRY_COST: usize = 320;
/// The DNS port (mDNS's 5353 and LLMNR's 5355 are not read: see docs/index.md).
pub const DNS_PORT: u16 = 53;
/// QUIC Initials are read on UDP to this port.
pub const QUIC_PORT: u16 = 443;
/// Largest datagram decrypted as a QUIC Initial.
const QUIC_MAX: usize = 1 << 16;
/// CRYPTO stream bytes collected from one Initial (`wire::quic::client_hello`: 4096 holds any
/// hello of one packet).
const QUIC_CRYPTO: usize = 4096;
/// TLS hellos split over TCP segments waiting for their next segment, at most (each keeps its
/// first bytes; a newcomer whose slot is taken closes the older one, counted unread).
pub const SPLIT_SLOTS: usize = 128;
/// The longest hello kept for its next segments: one record of 2^14 bytes (RFC 8446 §5.1: a
/// longer one is a record_overflow) and its header. 128 × this: at most 2 MiB held.
pub const SPLIT_MAX: usize = wire::tls::RECORD_HDR + (1 << 14);

/// The names of one flow (of one file), as the flow table stores them: text, with bytes outside
/// printable ASCII (and `\`) written `\xHH` (see [`wire::Name`]'s `Display`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowNames {
    pub dns_query: Vec<String>,
    pub dns_cname: Vec<String>,
    /// A and AAAA answers as text (IPv4 dotted, IPv6 RFC 5952).
    pub dns_addr: Vec<String>,
    /// The server name of the first ClientHello (TLS over TCP, or QUIC).
    pub tls_sni: Option<String>,
    pub tls_alpn: Vec<String>,
    pub ja4: Option<String>,
    pub http_host: Option<String>,
    /// The first request's target without its query (`wire::http::Request::path`).
    pub http_path: Option<String>,
    /// Values cut at [`wire::NAME_MAX`] bytes, left out because a list was full or the file's
    /// budget spent, and DNS names too long to read whole.
    pub cut: u32,
    /// A ClientHello was read (later ones are not).
    pub(crate) hello: bool,
    /// A request was read (later ones are not).
    pub(crate) request: bool,
}

impl FlowNames {
    /// Whether any name matches one of `patterns` (DNS question or CNAME target, SNI, Host).
    pub fn matches(&self, patterns: &[NamePattern]) -> bool {
        let host = self.http_host.as_deref().map(host_without_port);
        patterns.iter().any(|p| {
            self.dns_query
                .iter()
                .chain(&self.dns_cname)
                .map(String::as_str)
                .chain(self.tls_sni.as_deref())
                .chain(host)
                .any(|n| p.matches(n))
        })
    }
}

/// An HTTP Host value without its port (`a.example:8080`, `[2001:db8::1]:80`).
pub fn host_without_port(h: &str) -> &str {
    if let Some(rest) = h.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match h.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => h,
    }
}

/// Where a packet's transport header lies in its frame (of the packet a tunnel carries, for a
/// tunnelled one): the IP protocol, the header's offset, and the end of the IP payload within the
/// captured bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L4 {
    pub proto: u8,
    pub at: usize,
    pub end: usize,
}

/// Which parser a packet goes to, and where its payload starts in the transport segment.
#[derive(Clone, Copy, Debug)]
enum What {
    Dns(usize),
    DnsTcp(usize),
    Tls(usize),
    /// The next segment of a hello split over segments, waiting in this slot.
    TlsMore(usize, usize),
    Http(usize),
    Quic(usize),
}

/// The first four bytes of the request methods the gate lets through to the HTTP parser.
const METHODS: [&[u8; 4]; 9] = [
    b"GET ", b"POST", b"HEAD", b"PUT ", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC",
];

/// Collects the names of one file's flows.
pub struct Collector {
    /// Boxed: a flow's names are ~200 bytes, moved on every rehash and sort otherwise (the sort
    /// by flow id took ~200 ns per packet of a trace dense in names).
    flows: HashMap<FlowKey, Box<FlowNames>, ahash::RandomState>,
    /// Bytes of the budget spent (see [`MAX_BYTES`]).
    bytes: usize,
    /// Values left out because the budget was spent (also in their flows' `cut`, when the flow
    /// was already named).
    pub dropped: u64,
    /// Packets the gate passed whose message did not parse (a request continued in the next
    /// segment, a hello whose next segment did not come next, a malformed message, a datagram
    /// that is no client Initial). See [`Collector::unread`] for the whole count.
    pub unread: u64,
    /// Scratch for QUIC decryption (lent to `wire::quic`).
    plain: Vec<u8>,
    crypto: Vec<u8>,
    /// Hellos split over segments, by [`split_slot`] of the tag their next segment will have:
    /// checking a TCP packet costs one compare while any waits, none otherwise.
    split_tags: Box<[u64; SPLIT_SLOTS]>,
    splits: Vec<Option<Box<Split>>>,
    splits_held: usize,
}

/// A TLS hello's first segments, waiting for the next.
struct Split {
    key: FlowKey,
    /// The record so far, and its whole length.
    bytes: Vec<u8>,
    need: usize,
}

/// What identifies a TCP segment's place in its flow before the flow's key is known: its ports
/// and sequence number (the key is compared when they match).
fn split_tag(seg: &[u8]) -> u64 {
    u64::from_be_bytes([
        seg[0], seg[1], seg[2], seg[3], seg[4], seg[5], seg[6], seg[7],
    ])
}

fn split_slot(tag: u64) -> usize {
    (tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 57) as usize % SPLIT_SLOTS
}

/// The tag of the segment that follows `seg` (its payload `payload` bytes long).
fn next_tag(seg: &[u8], payload: usize) -> u64 {
    let seq = u32::from_be_bytes([seg[4], seg[5], seg[6], seg[7]]);
    (split_tag(seg) & !0xffff_ffff) | u64::from(seq.wrapping_add(payload as u32))
}

impl Default for Collector {
    fn default() -> Self {
        Collector {
            flows: HashMap::with_hasher(ahash::RandomState::with_seeds(5, 6, 7, 8)),
            bytes: 0,
            dropped: 0,
            unread: 0,
            plain: Vec::new(),
            crypto: Vec::new(),
            split_tags: Box::new([0; SPLIT_SLOTS]),
            splits: (0..SPLIT_SLOTS).map(|_| None).collect(),
            splits_held: 0,
        }
    }
}

impl Collector {
    /// Looks at one packet whose transport header is at `l4`: when its ports and first payload
    /// bytes say it may carry a name, parses it and files the names under `key()` (called only
    /// then). Ordinary packets cost a few compares here.
    #[inline]
    pub fn offer(&mut self, frame: &[u8], l4: L4, key: impl FnOnce() -> FlowKey) {
        let Some(seg) = frame.get(l4.at..l4.end.min(frame.len())) else {
            return;
        };
        if seg.len() < 8 {
            return;
        }
        let sp = u16::from_be_bytes([seg[0], seg[1]]);
        let dp = u16::from_be_bytes([seg[2], seg[3]]);
        let what = match l4.proto {
            17 => {
                if sp == DNS_PORT || dp == DNS_PORT {
                    What::Dns(8)
                } else if dp == QUIC_PORT && seg.len() > 8 + 5 && seg[8] & 0xc0 == 0xc0 {
                    // A long header with the fixed bit: maybe an Initial.
                    What::Quic(8)
                } else {
                    return;
                }
            }
            6 => {
                if seg.len() < 20 {
                    return;
                }
                let doff = usize::from(seg[12] >> 4) * 4;
                let Some(p) = seg.get(doff..).filter(|p| !p.is_empty()) else {
                    return;
                };
                let slot = if self.splits_held > 0 {
                    let tag = split_tag(seg);
                    let slot = split_slot(tag);
                    (self.split_tags[slot] == tag).then_some(slot)
                } else {
                    None
                };
                if let Some(slot) = slot {
                    What::TlsMore(doff, slot)
                } else if sp == DNS_PORT || dp == DNS_PORT {
                    What::DnsTcp(doff)
                } else if p[0] == 22 && p.len() > 5 && p[5] == 1 {
                    // A handshake record holding a ClientHello.
                    What::Tls(doff)
                } else if p.len() >= 4 && METHODS.iter().any(|m| p[..4] == m[..]) {
                    What::Http(doff)
                } else {
                    return;
                }
            }
            _ => return,
        };
        self.parse(seg, what, key());
    }

    /// The flows named so far.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// The names collected, by flow.
    pub fn into_flows(self) -> HashMap<FlowKey, Box<FlowNames>, ahash::RandomState> {
        self.flows
    }

    /// Packets the gate passed whose message was not read: [`Collector::unread`] and the hellos
    /// still waiting for their next segment.
    pub fn unread(&self) -> u64 {
        self.unread + self.splits_held as u64
    }

    /// Keeps a hello's first segment for the next one, in the slot of that one's tag; an older
    /// hello in the slot is given up.
    fn hold(&mut self, tag: u64, split: Box<Split>) {
        let slot = split_slot(tag);
        if self.splits[slot].replace(split).is_some() {
            // The same tag again is a retransmission of the same segment, not another hello.
            if self.split_tags[slot] != tag {
                self.unread += 1;
            }
        } else {
            self.splits_held += 1;
        }
        self.split_tags[slot] = tag;
    }

    /// The segment in `seg` (payload at `at`) continues the hello in `slot`: returns the names'
    /// hello when it is whole.
    fn continue_split(&mut self, seg: &[u8], at: usize, slot: usize, key: &FlowKey) -> Continued {
        let Some(mut split) = self.splits[slot].take() else {
            return Continued::NotOne;
        };
        self.split_tags[slot] = 0;
        self.splits_held -= 1;
        if split.key != *key {
            // Another flow's segment with the same ports and sequence number: the hello waits on.
            self.hold(split_tag(seg), split);
            return Continued::NotOne;
        }
        let payload = &seg[at..];
        let take = payload.len().min(split.need - split.bytes.len());
        split.bytes.extend_from_slice(&payload[..take]);
        if split.bytes.len() < split.need {
            self.hold(next_tag(seg, payload.len()), split);
            return Continued::Waiting;
        }
        Continued::Whole(split)
    }
}

/// What a segment that may continue a split hello did.
enum Continued {
    /// It was no continuation after all (its flow's key differs).
    NotOne,
    /// The hello waits for more.
    Waiting,
    /// The hello is whole.
    Whole(Box<Split>),
}

impl Collector {
    #[cold]
    #[inline(never)]
    fn parse(&mut self, seg: &[u8], what: What, key: FlowKey) {
        let mut joined = None;
        let mut held = None;
        let what = match what {
            What::TlsMore(at, slot) => match self.continue_split(seg, at, slot, &key) {
                Continued::Whole(split) => {
                    joined = Some(split);
                    what
                }
                // Another flow's segment with the same ports and sequence number is not read
                // (it would have to be a first hello or request to be).
                Continued::Waiting | Continued::NotOne => return,
            },
            _ => what,
        };
        let entry = match self.flows.get_mut(&key) {
            Some(e) => e,
            None => {
                if self.bytes + ENTRY_COST > MAX_BYTES {
                    self.dropped += 1;
                    return;
                }
                self.bytes += ENTRY_COST;
                self.flows.entry(key).or_default()
            }
        };
        let mut budget = Budget {
            bytes: &mut self.bytes,
            dropped: &mut self.dropped,
        };
        let read = match what {
            What::Dns(at) => dns_names(&seg[at..], entry, &mut budget),
            What::DnsTcp(at) => match dns::strip_tcp_length(&seg[at..]) {
                Ok(msg) => dns_names(msg, entry, &mut budget),
                Err(_) => false,
            },
            What::Tls(at) => {
                if entry.hello {
                    return;
                }
                match ClientHello::parse(&seg[at..]) {
                    Ok(h) => {
                        hello(&h, Transport::Tcp, entry, &mut budget);
                        true
                    }
                    // Continued in the next segment: kept for it (see `SPLIT_SLOTS`).
                    Err(wire::Error::Truncated { need, .. }) if need <= SPLIT_MAX => {
                        let payload = &seg[at..];
                        let mut bytes = Vec::with_capacity(need);
                        bytes.extend_from_slice(payload);
                        let split = Box::new(Split { key, bytes, need });
                        held = Some((next_tag(seg, payload.len()), split));
                        true
                    }
                    Err(_) => false,
                }
            }
            What::TlsMore(..) => {
                let split = joined.expect("a whole hello");
                if entry.hello {
                    return;
                }
                match ClientHello::parse(&split.bytes) {
                    Ok(h) => {
                        hello(&h, Transport::Tcp, entry, &mut budget);
                        true
                    }
                    Err(_) => false,
                }
            }
            What::Http(at) => {
                if entry.request {
                    return;
                }
                match Request::parse(&seg[at..]) {
                    Ok(r) => {
                        entry.request = true;
                        if let Some(h) = r.host() {
                            budget.set(&mut entry.http_host, h, &mut entry.cut);
                        }
                        budget.set(&mut entry.http_path, r.path(), &mut entry.cut);
                        true
                    }
                    Err(_) => false,
                }
            }
            What::Quic(at) => {
                if entry.hello {
                    return;
                }
                let d = &seg[at..];
                if d.len() > QUIC_MAX {
                    false
                } else {
                    self.plain.resize(d.len(), 0);
                    self.crypto.resize(QUIC_CRYPTO, 0);
                    match wire::quic::client_hello(d, &mut self.plain, &mut self.crypto) {
                        Ok(h) => {
                            hello(&h, Transport::Quic, entry, &mut budget);
                            true
                        }
                        Err(_) => false,
                    }
                }
            }
        };
        if let Some((tag, split)) = held {
            self.hold(tag, split);
        }
        if !read {
            self.unread += 1;
        }
    }
}

/// The file's budget, spent as values are stored.
struct Budget<'a> {
    bytes: &'a mut usize,
    dropped: &'a mut u64,
}

impl Budget<'_> {
    /// `name` as stored text, or None (counted in `cut`) when the budget is spent.
    fn text(&mut self, name: &Name, cut: &mut u32) -> Option<String> {
        if name.is_cut() {
            *cut += 1;
        }
        let t = text_of(name);
        if *self.bytes + t.len() + 24 > MAX_BYTES {
            *self.dropped += 1;
            *cut += 1;
            return None;
        }
        *self.bytes += t.len() + 24;
        Some(t)
    }

    /// Adds `name` to `list` unless it is there; counts it as cut when the list is full.
    fn push(&mut self, list: &mut Vec<String>, max: usize, name: &Name, cut: &mut u32) {
        if list.iter().any(|x| same_text(x, name)) {
            return;
        }
        if list.len() >= max {
            *cut += 1;
            return;
        }
        if let Some(t) = self.text(name, cut) {
            list.push(t);
        }
    }

    fn set(&mut self, slot: &mut Option<String>, bytes: &[u8], cut: &mut u32) {
        *slot = self.text(&Name::from_bytes(bytes), cut);
    }
}

/// A name as the table stores it: as it came when it is printable ASCII without `\` (nearly
/// always: copied at once, where `Display` writes a character at a time), else with `\xHH`
/// escapes ([`wire::Name`]'s `Display`).
fn text_of(name: &Name) -> String {
    let b = name.as_bytes();
    if plain(b) {
        // Printable ASCII is UTF-8.
        String::from_utf8(b.to_vec()).unwrap_or_default()
    } else {
        name.to_string()
    }
}

fn plain(b: &[u8]) -> bool {
    b.iter().all(|&c| (0x20..0x7f).contains(&c) && c != b'\\')
}

/// Whether stored text `t` is `name`'s (see [`text_of`]).
fn same_text(t: &str, name: &Name) -> bool {
    let b = name.as_bytes();
    if plain(b) {
        t.as_bytes() == b
    } else {
        *t == name.to_string()
    }
}

/// Files the names of a DNS message; false when it is not one.
fn dns_names(msg: &[u8], n: &mut FlowNames, b: &mut Budget<'_>) -> bool {
    let Ok(m) = dns::Message::new_checked(msg) else {
        return false;
    };
    let mut records = 0usize;
    let mut ok = true;
    for q in m.questions() {
        records += 1;
        if records > MAX_RECORDS {
            n.cut += 1;
            return ok;
        }
        match q {
            Ok(q) => b.push(&mut n.dns_query, MAX_DNS_NAMES, &q.name, &mut n.cut),
            Err(_) => {
                // A name longer than 255 bytes on the wire (or cut): keep what reads, as cut.
                if records == 1 {
                    let mut partial = Name::new();
                    if dns::read_name(msg, dns::DNS_HDR, &mut partial).is_err()
                        && !partial.is_empty()
                    {
                        b.push(&mut n.dns_query, MAX_DNS_NAMES, &partial, &mut n.cut);
                        n.cut += 1;
                        return true;
                    }
                }
                ok = false;
                break;
            }
        }
    }
    if !m.is_response() || !ok {
        return ok;
    }
    for a in m.answers() {
        records += 1;
        if records > MAX_RECORDS {
            n.cut += 1;
            break;
        }
        let Ok(a) = a else { break };
        match a.data {
            Rdata::A(ip) => push_addr(b, n, std::net::IpAddr::V4(ip)),
            Rdata::Aaaa(ip) => push_addr(b, n, std::net::IpAddr::V6(ip)),
            Rdata::Cname(t) => b.push(&mut n.dns_cname, MAX_DNS_NAMES, &t, &mut n.cut),
            Rdata::Other => {}
        }
    }
    true
}

fn push_addr(b: &mut Budget<'_>, n: &mut FlowNames, ip: std::net::IpAddr) {
    let t = ip.to_string();
    if n.dns_addr.contains(&t) {
        return;
    }
    if n.dns_addr.len() >= MAX_ADDRS {
        n.cut += 1;
        return;
    }
    b.push(
        &mut n.dns_addr,
        MAX_ADDRS,
        &Name::from_bytes(t.as_bytes()),
        &mut n.cut,
    );
}

/// Files the names of the flow's first ClientHello.
fn hello(h: &ClientHello<'_>, t: Transport, n: &mut FlowNames, b: &mut Budget<'_>) {
    n.hello = true;
    if let Some(sni) = h.sni() {
        b.set(&mut n.tls_sni, sni, &mut n.cut);
    }
    for (i, p) in h.alpn().enumerate() {
        if i >= MAX_ALPN {
            n.cut += 1;
            break;
        }
        b.push(&mut n.tls_alpn, MAX_ALPN, &Name::from_bytes(p), &mut n.cut);
    }
    let ja4 = h.ja4(t);
    b.set(&mut n.ja4, ja4.as_str().as_bytes(), &mut n.cut);
}

/// A `--name` pattern: a DNS name, case-insensitive, where `*` stands for any run of characters
/// (`*.evil.example` is every name under `evil.example`, not `evil.example` itself); a trailing
/// dot is ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamePattern {
    /// Lower case, without a trailing dot.
    glob: Vec<u8>,
}

/// Longest pattern accepted.
pub const MAX_PATTERN: usize = 1024;

impl NamePattern {
    pub fn parse(s: &str) -> Result<NamePattern, String> {
        let t = s.trim();
        let t = t.strip_suffix('.').unwrap_or(t);
        if t.is_empty() {
            return Err(format!("--name {s:?}: an empty name"));
        }
        if t.len() > MAX_PATTERN {
            return Err(format!("--name: longer than {MAX_PATTERN} bytes"));
        }
        if t.bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(format!("--name {s:?}: spaces or control characters"));
        }
        Ok(NamePattern {
            glob: t.to_ascii_lowercase().into_bytes(),
        })
    }

    /// Whether `name` (stored text) matches, ignoring ASCII case and a trailing dot.
    pub fn matches(&self, name: &str) -> bool {
        let n = name.strip_suffix('.').unwrap_or(name).as_bytes();
        glob(&self.glob, n)
    }

    /// The pattern as given (lower case, no trailing dot).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.glob).unwrap_or("")
    }
}

/// `*` matches any run of bytes; everything else one byte, ASCII case ignored. Linear in the
/// name for each star (the classic two-pointer match, which backtracks only to the last star).
fn glob(p: &[u8], n: &[u8]) -> bool {
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && p[i] == n[j].to_ascii_lowercase() {
            i += 1;
            j += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let p = NamePattern::parse("*.Evil.Example.").unwrap();
        assert!(p.matches("a.evil.example"));
        assert!(p.matches("A.B.EVIL.example."));
        assert!(!p.matches("evil.example"));
        assert!(!p.matches("notevil.example"));
        assert!(!p.matches("a.evil.example.com"));
        let exact = NamePattern::parse("evil.example").unwrap();
        assert!(exact.matches("EVIL.EXAMPLE"));
        assert!(!exact.matches("a.evil.example"));
        let mid = NamePattern::parse("cdn*.example").unwrap();
        assert!(mid.matches("cdn7.example") && mid.matches("cdn.x.example"));
        assert!(NamePattern::parse("").is_err() && NamePattern::parse("a b").is_err());
        assert_eq!(host_without_port("a.example:8080"), "a.example");
        assert_eq!(host_without_port("[2001:db8::1]:80"), "2001:db8::1");
        assert_eq!(host_without_port("2001:db8::1"), "2001:db8::1");
        assert_eq!(host_without_port("a.example"), "a.example");
    }

    /// A DNS message with one question (and optionally an A answer), as a UDP payload.
    fn dns_msg(name: &[u8], response: bool) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, if response { 0x81 } else { 0x01 }, 0x00];
        m.extend_from_slice(&[0, 1, 0, u8::from(response), 0, 0, 0, 0]);
        for label in name.split(|&b| b == b'.') {
            m.push(label.len() as u8);
            m.extend_from_slice(label);
        }
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        if response {
            m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7]);
        }
        m
    }

    /// Ethernet / IPv4 / UDP from port 40000 to `dport` around `payload`, and its L4.
    fn udp(dport: u16, payload: &[u8]) -> (Vec<u8>, L4) {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let len = (28 + payload.len()) as u16;
        f.extend_from_slice(&[
            0x45,
            0,
            (len >> 8) as u8,
            len as u8,
            0,
            0,
            0x40,
            0,
            64,
            17,
            0,
            0,
        ]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        let end = f.len();
        (
            f,
            L4 {
                proto: 17,
                at: 34,
                end,
            },
        )
    }

    #[test]
    fn dns_questions_and_answers_are_kept_bounded() {
        let mut c = Collector::default();
        let (f, l4) = udp(53, &dns_msg(b"www.example", false));
        c.offer(&f, l4, FlowKey::default);
        let (f, l4) = udp(53, &dns_msg(b"www.example", true));
        c.offer(&f, l4, FlowKey::default);
        let (f, l4) = udp(5353, &dns_msg(b"mdns.local", true));
        c.offer(&f, l4, || unreachable!("mDNS is not read"));
        let flows = c.into_flows();
        let n = &flows[&FlowKey::default()];
        assert_eq!(n.dns_query, ["www.example"]);
        assert_eq!(n.dns_addr, ["192.0.2.7"]);
        assert_eq!(n.cut, 0);

        // Hostile: NULs and markup, and more names than a flow keeps.
        let mut c = Collector::default();
        for i in 0..20u8 {
            let name = [b"<script>\x00x".as_slice(), &[b'a' + i]].concat();
            let (f, l4) = udp(53, &dns_msg(&name, false));
            c.offer(&f, l4, FlowKey::default);
        }
        let flows = c.into_flows();
        let n = &flows[&FlowKey::default()];
        assert_eq!(n.dns_query.len(), MAX_DNS_NAMES);
        assert_eq!(n.dns_query[0], "<script>\\x00xa");
        assert_eq!(n.cut, 20 - MAX_DNS_NAMES as u32);

        // A name over 255 bytes on the wire: kept cut, counted.
        let long: Vec<u8> = (0..5)
            .flat_map(|_| [[b'b'; 60].as_slice(), b"."].concat())
            .collect();
        let mut c = Collector::default();
        let (f, l4) = udp(53, &dns_msg(&long[..long.len() - 1], false));
        c.offer(&f, l4, FlowKey::default);
        let flows = c.into_flows();
        let n = &flows[&FlowKey::default()];
        assert_eq!(n.cut, 1, "{n:?}");
        assert!(n.dns_query[0].len() <= wire::NAME_MAX && n.dns_query[0].starts_with("bbb"));
    }

    /// Ethernet / IPv4 / TCP from 10.0.0.1:`sport` to 10.0.0.2:443 around `payload`, at `seq`.
    fn tcp(sport: u16, seq: u32, payload: &[u8]) -> (Vec<u8>, L4) {
        let (mut f, _) = udp(443, &[]);
        f.truncate(34);
        let len = (40 + payload.len()) as u16;
        f[16..18].copy_from_slice(&len.to_be_bytes());
        f[23] = 6;
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&443u16.to_be_bytes());
        f.extend_from_slice(&seq.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 1, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        f.extend_from_slice(payload);
        let end = f.len();
        (
            f,
            L4 {
                proto: 6,
                at: 34,
                end,
            },
        )
    }

    /// Google Chrome's hello from FoxIO's ja4 test captures (see wire's tls_tests): SNI and JA4
    /// as their reference gives them.
    const HELLO: &[u8] = include_bytes!("../../wire/testdata/ja4-tls-sni-frame1.bin");
    const HELLO_SNI: &str = "clientservices.googleapis.com";
    const HELLO_JA4: &str = "t13d1516h2_8daaf6152771_e5627efa2ab1";

    fn key(port: u16) -> FlowKey {
        FlowKey {
            port_a: port,
            ..FlowKey::default()
        }
    }

    #[test]
    fn a_hello_split_over_segments_is_read_whole() {
        let mut c = Collector::default();
        let (a, b) = (200, 450);
        let seq = 0xffff_ff00u32; // the sequence number wraps between the segments
        let (f, l4) = tcp(40000, seq, &HELLO[..a]);
        c.offer(&f, l4, || key(40000));
        // A retransmission of the first, another flow's segments, the server's answer.
        c.offer(&f, l4, || key(40000));
        let (g, gl4) = tcp(40001, 7, &HELLO[a..b]);
        c.offer(&g, gl4, || key(40001));
        let (f, l4) = tcp(40000, seq.wrapping_add(a as u32), &HELLO[a..b]);
        c.offer(&f, l4, || key(40000));
        assert_eq!(c.unread(), 1, "one hello waits for its last segment");
        let (f, l4) = tcp(40000, seq.wrapping_add(b as u32), &HELLO[b..]);
        c.offer(&f, l4, || key(40000));
        assert_eq!(c.unread(), 0);
        let flows = c.into_flows();
        let n = &flows[&key(40000)];
        assert_eq!(n.tls_sni.as_deref(), Some(HELLO_SNI));
        assert_eq!(n.ja4.as_deref(), Some(HELLO_JA4));
        assert_eq!(n.tls_alpn, ["h2", "http/1.1"]);
        assert!(!flows.contains_key(&key(40001)));

        // Cut anywhere the gate still sees a hello (its first six bytes).
        for cut in 6..HELLO.len() {
            let mut c = Collector::default();
            let (f, l4) = tcp(40000, 9, &HELLO[..cut]);
            c.offer(&f, l4, || key(40000));
            let (f, l4) = tcp(40000, 9 + cut as u32, &HELLO[cut..]);
            c.offer(&f, l4, || key(40000));
            let flows = c.into_flows();
            assert_eq!(flows[&key(40000)].ja4.as_deref(), Some(HELLO_JA4), "{cut}");
        }
    }

    #[test]
    fn a_split_hello_whose_next_segment_never_comes_is_counted_unread() {
        let mut c = Collector::default();
        let (f, l4) = tcp(40000, 1, &HELLO[..100]);
        c.offer(&f, l4, || key(40000));
        // Out of order: the third segment before the second is not joined.
        let (f, l4) = tcp(40000, 301, &HELLO[300..]);
        c.offer(&f, l4, || unreachable!("no hello waits for it"));
        // Another flow with the same ports and the awaited sequence number.
        let (f, l4) = tcp(40000, 101, &HELLO[100..]);
        c.offer(&f, l4, || key(50000));
        assert_eq!(c.unread(), 1);
        let flows = c.into_flows();
        assert_eq!(flows[&key(40000)].tls_sni, None);
        assert!(!flows.contains_key(&key(50000)));
    }

    #[test]
    fn split_hellos_are_bounded() {
        // A record that claims more than 2^14 bytes is not kept; more splits than slots give
        // the older ones up, each counted.
        let mut c = Collector::default();
        let mut big = HELLO[..100].to_vec();
        big[3..5].copy_from_slice(&0xffffu16.to_be_bytes());
        let (f, l4) = tcp(40000, 1, &big);
        c.offer(&f, l4, || key(40000));
        assert_eq!((c.unread(), c.splits_held), (1, 0));
        let flows = 4 * SPLIT_SLOTS as u16;
        for p in 0..flows {
            let (f, l4) = tcp(1000 + p, 1, &HELLO[..100]);
            c.offer(&f, l4, || key(1000 + p));
        }
        assert!(c.splits_held <= SPLIT_SLOTS);
        assert_eq!(c.unread(), 1 + u64::from(flows));
    }

    #[test]
    fn garbage_never_panics() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut c = Collector::default();
        for round in 0..50_000u32 {
            let len = (rand() % 600) as usize;
            let mut p: Vec<u8> = (0..len).map(|_| rand() as u8).collect();
            match round % 4 {
                0 if p.len() > 6 => {
                    p[0] = 22;
                    p[5] = 1;
                }
                1 if p.len() > 4 => p[..4].copy_from_slice(b"GET "),
                _ => {}
            }
            let port = [53, 443, 80, 8443][(round % 4) as usize];
            let (f, mut l4) = udp(port, &p);
            if round % 2 == 0 {
                l4.proto = 6;
            }
            l4.end = (rand() as usize) % (f.len() + 8);
            c.offer(&f, l4, FlowKey::default);
        }
    }
}
