//! UDP frames over IPv4 or IPv6 built from prebuilt templates.
//!
//! A sending slot (a sendmmsg buffer or a TX_RING frame) is prepared once with the constant bytes (MACs,
//! VLAN tag, version, TTL, protocol and, for `zero` and `file` payloads, the payload itself). Per packet
//! [`FrameBuilder::write`] rewrites only what changes: lengths, addresses, ports, the two checksums and,
//! for `random` and `half` payloads, the payload bytes. Checksums are sums of precomputed parts: the
//! payload's sum comes from prefix sums (O(1) per packet), never from a pass over the payload.
//!
//! Sizes are IP packet lengths; the frame adds 14 bytes (18 with a VLAN tag). The smallest packets are
//! IPv4 28 (20 + 8 UDP) and IPv6 48 (40 + 8): a size model asking for less is raised to the minimum, one
//! asking for more than the interface MTU is lowered to it, and both are counted
//! ([`FrameBuilder::clamped_small`], [`FrameBuilder::clamped_large`]).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use rand::Rng;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use wire::checksum::{fold, ones_complement_sum, udp_nonzero};
use wire::ip_proto::UDP as UDP_PROTO;
use wire::{IpPair, Ipv4Packet, Ipv6Packet, MacAddr, UdpFrameSpec, UdpPacket, Vlan};
use wire::{ETH_HDR, IPV4_HDR, IPV6_HDR, UDP_HDR, VLAN_TAG_LEN};

use crate::error::GenError;

const TTL: u8 = 64;

/// An inclusive range of IP addresses (`10.0.0.1` or `10.0.0.1-10.0.0.254`; both ends of one family).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AddrRange {
    /// First address.
    pub first: IpAddr,
    /// Last address (inclusive).
    pub last: IpAddr,
}

impl AddrRange {
    /// A range holding one address.
    pub fn single(a: IpAddr) -> Self {
        AddrRange { first: a, last: a }
    }

    fn bounds(&self) -> Result<(u128, u128), String> {
        let (a, b) = match (self.first, self.last) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
            _ => {
                return Err(format!(
                    "address range {self} mixes IPv4 and IPv6: use one family"
                ))
            }
        };
        if a > b {
            return Err(format!(
                "address range {self} runs backwards: write the lower address first"
            ));
        }
        Ok((a, b))
    }
}

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for AddrRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let addr = |t: &str| {
            t.trim().parse::<IpAddr>().map_err(|_| {
                format!("bad address {t:?} in {s:?}: write A or A-B, e.g. 10.0.0.1-10.0.0.9")
            })
        };
        let r = match s.split_once('-') {
            Some((a, b)) => AddrRange {
                first: addr(a)?,
                last: addr(b)?,
            },
            None => AddrRange::single(addr(s)?),
        };
        r.bounds()?;
        Ok(r)
    }
}

impl TryFrom<String> for AddrRange {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<AddrRange> for String {
    fn from(r: AddrRange) -> String {
        r.to_string()
    }
}

/// An inclusive range of UDP ports (`9` or `1024-65535`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port (inclusive).
    pub last: u16,
}

impl PortRange {
    /// A range holding one port.
    pub const fn single(p: u16) -> Self {
        PortRange { first: p, last: p }
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for PortRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .map_err(|_| format!("bad port {t:?} in {s:?}: write P or A-B with ports 0-65535"))
        };
        let r = match s.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => PortRange::single(port(s)?),
        };
        if r.first > r.last {
            return Err(format!(
                "port range {s:?} runs backwards: write the lower port first"
            ));
        }
        Ok(r)
    }
}

impl TryFrom<String> for PortRange {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<PortRange> for String {
    fn from(r: PortRange) -> String {
        r.to_string()
    }
}

/// How a field walks its range (Linux pktgen: without a `*_RND` flag it counts up, with it it draws).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Each packet takes the next value, wrapping at the end of the range.
    #[default]
    Cycle,
    /// Each packet draws a value uniformly from the range (seeded).
    Random,
}

impl FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cycle" | "seq" => Ok(Order::Cycle),
            "random" | "rnd" => Ok(Order::Random),
            _ => Err(format!("bad order {s:?}: use cycle or random")),
        }
    }
}

/// What fills the UDP payload.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Payload {
    /// All zero bytes (compresses absurdly well).
    #[default]
    Zero,
    /// Seeded random bytes (incompressible).
    Random,
    /// First half random, second half zero: about 50 % compressible, as seed 002 generated.
    Half,
    /// The bytes of a file, repeated from its start to fill each payload.
    File(PathBuf),
}

impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Zero => f.write_str("zero"),
            Payload::Random => f.write_str("random"),
            Payload::Half => f.write_str("half"),
            Payload::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

impl FromStr for Payload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "zero" => Ok(Payload::Zero),
            "random" => Ok(Payload::Random),
            "half" => Ok(Payload::Half),
            _ => match s.strip_prefix("file:") {
                Some(p) if !p.is_empty() => Ok(Payload::File(PathBuf::from(p))),
                _ => Err(format!(
                    "bad payload {s:?}: use zero, random, half or file:PATH"
                )),
            },
        }
    }
}

/// Everything that shapes the frames (the sizes come from the size model).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FrameOptions {
    /// Source MAC. The default 00:00:00:00:00:01 passes the thesis filter (seed 000 Fig. 6.5:
    /// `ether[6:4]=0 and ether[10]=0`).
    pub src_mac: MacAddr,
    /// Destination MAC; the default 02:00:00:00:00:02 is locally administered and belongs to no one, so the
    /// receiver does no IP work on the frames.
    pub dst_mac: MacAddr,
    /// Source addresses; their family (with `dst_ip`'s) decides IPv4 or IPv6.
    pub src_ip: AddrRange,
    /// Destination addresses.
    pub dst_ip: AddrRange,
    /// Source ports. Thread `t` of `n` uses this range shifted by `t` range lengths, so threads never
    /// share a flow.
    pub src_port: PortRange,
    /// Destination ports.
    pub dst_port: PortRange,
    /// How `src_ip` is walked.
    pub src_ip_order: Order,
    /// How `dst_ip` is walked.
    pub dst_ip_order: Order,
    /// How `src_port` is walked.
    pub src_port_order: Order,
    /// How `dst_port` is walked.
    pub dst_port_order: Order,
    /// Payload content.
    pub payload: Payload,
    /// Optional 802.1Q tag.
    pub vlan: Option<Vlan>,
}

impl Default for FrameOptions {
    fn default() -> Self {
        FrameOptions {
            src_mac: MacAddr([0, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: AddrRange::single(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
            dst_ip: AddrRange::single(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))),
            src_port: PortRange::single(9),
            dst_port: PortRange::single(9),
            src_ip_order: Order::Cycle,
            dst_ip_order: Order::Cycle,
            src_port_order: Order::Cycle,
            dst_port_order: Order::Cycle,
            payload: Payload::Zero,
            vlan: None,
        }
    }
}

impl FrameOptions {
    /// The defaults with IPv6 addresses fd00::1 → fd00::2.
    pub fn ipv6() -> Self {
        FrameOptions {
            src_ip: AddrRange::single(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1))),
            dst_ip: AddrRange::single(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2))),
            ..Default::default()
        }
    }

    /// True when the addresses are IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.src_ip.first.is_ipv6()
    }

    /// Link-layer header length: 14, or 18 with a VLAN tag.
    pub fn l2_len(&self) -> usize {
        ETH_HDR + if self.vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }

    /// Smallest IP packet length that holds the headers: 28 (IPv4) or 48 (IPv6).
    pub fn min_ip_len(&self) -> u16 {
        (self.ip_hdr_len() + UDP_HDR) as u16
    }

    fn ip_hdr_len(&self) -> usize {
        if self.is_ipv6() {
            IPV6_HDR
        } else {
            IPV4_HDR
        }
    }

    /// Checks the options make sense together; the error says what to change.
    pub fn validate(&self) -> Result<(), GenError> {
        let bad = |m: String| Err(GenError::Options(m));
        let (s, d) = (self.src_ip.bounds(), self.dst_ip.bounds());
        if let Err(m) = s.and(d) {
            return bad(m);
        }
        if self.src_ip.first.is_ipv6() != self.dst_ip.first.is_ipv6() {
            return bad(format!(
                "source {} and destination {} are of different IP families: use IPv4 or IPv6 for both",
                self.src_ip, self.dst_ip
            ));
        }
        Ok(())
    }
}

/// One field (address or port) walking its range; values are offsets added to `first`.
#[derive(Clone, Debug)]
struct FieldWalk {
    first: u128,
    span: u128, // last - first
    next: u128,
    order: Order,
}

impl FieldWalk {
    fn new(first: u128, last: u128, order: Order) -> Self {
        FieldWalk {
            first,
            span: last - first,
            next: 0,
            order,
        }
    }

    #[inline]
    fn value(&mut self, rng: &mut ChaCha8Rng) -> u128 {
        if self.span == 0 {
            return self.first;
        }
        let off = match self.order {
            Order::Cycle => {
                let o = self.next;
                self.next = if o == self.span { 0 } else { o + 1 };
                o
            }
            // Ranges that fit 32 bits (all ports, IPv4, small IPv6 ranges) draw a u32: cheaper.
            Order::Random if self.span < u32::MAX as u128 => {
                rng.gen_range(0..=self.span as u32) as u128
            }
            Order::Random => rng.gen_range(0..=self.span),
        };
        self.first + off
    }
}

/// Sums 16-bit words of a u128 address (the pseudo header and IPv4 header need them).
#[inline]
fn addr_sum(a: u128, v6: bool) -> u32 {
    if v6 {
        (0..8).map(|i| ((a >> (16 * i)) & 0xffff) as u32).sum()
    } else {
        ((a >> 16) & 0xffff) as u32 + (a & 0xffff) as u32
    }
}

/// Folds a 64-bit sum of 16-bit words to 16 bits.
#[inline]
fn fold64(mut s: u64) -> u32 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u32
}

/// Size of the shared random pool. Payloads walk it sequentially, so a compressor sees repeated bytes only
/// after this much payload: larger than the windows of gzip (32 KiB), lz4 (64 KiB) and zstd up to level 19
/// (8 MiB), so `random` stays incompressible and `half` about 50 %.
pub const RANDOM_POOL_BYTES: usize = 16 << 20;
const BLOCK: usize = 64;

/// Seeded random bytes shared by all threads, with per-64-byte-block prefix sums so the checksum of any
/// block-aligned slice costs one subtraction plus at most 63 bytes.
pub struct RandomPool {
    bytes: Vec<u8>,
    /// `prefix[i]` = sum of the 16-bit big-endian words of `bytes[..64 * i]`.
    prefix: Vec<u64>,
}

impl RandomPool {
    /// Fills `len` bytes (rounded up to 64) from `rng`.
    pub fn new(rng: &mut ChaCha8Rng, len: usize) -> Self {
        let len = len.div_ceil(BLOCK).max(1) * BLOCK;
        let mut bytes = vec![0u8; len];
        rng.fill_bytes(&mut bytes);
        let mut prefix = Vec::with_capacity(len / BLOCK + 1);
        let mut acc = 0u64;
        prefix.push(0);
        for b in bytes.chunks_exact(BLOCK) {
            acc += ones_complement_sum(b) as u64;
            prefix.push(acc);
        }
        RandomPool { bytes, prefix }
    }

    /// Pool length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false (a pool has at least one block).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Folded sum of `bytes[range]`; `range.start` must be a multiple of 64.
    #[inline]
    fn sum(&self, range: std::ops::Range<usize>) -> u32 {
        let start = range.start;
        debug_assert_eq!(start % BLOCK, 0);
        let n = range.len();
        let src = &self.bytes[range];
        let whole = n / BLOCK;
        let blocks = self.prefix[start / BLOCK + whole] - self.prefix[start / BLOCK];
        let tail = ones_complement_sum(&src[whole * BLOCK..]) as u64;
        fold64(blocks + tail)
    }
}

/// Constant payload bytes (zero or a repeated file) with the sum of every prefix length.
struct FixedPayload {
    bytes: Vec<u8>,
    /// `word_prefix[i]` = sum of the first `i` 16-bit words.
    word_prefix: Vec<u32>,
}

impl FixedPayload {
    fn new(bytes: Vec<u8>) -> Self {
        let mut word_prefix = Vec::with_capacity(bytes.len() / 2 + 1);
        let mut acc = 0u32;
        word_prefix.push(0);
        for w in bytes.chunks_exact(2) {
            acc += u16::from_be_bytes([w[0], w[1]]) as u32;
            word_prefix.push(acc);
        }
        FixedPayload { bytes, word_prefix }
    }

    /// Sum of the first `n` bytes (an odd last byte is the high half of its word).
    #[inline]
    fn sum(&self, n: usize) -> u32 {
        let s = self.word_prefix[n / 2]
            + if n % 2 == 1 {
                (self.bytes[n - 1] as u32) << 8
            } else {
                0
            };
        fold(s) as u32
    }
}

enum PayloadFill {
    /// Constant bytes already in every prepared slot.
    Fixed(FixedPayload),
    /// Bytes copied from the pool per packet: all of them (`half == false`) or the first half.
    Pool {
        pool: Arc<RandomPool>,
        cursor: usize,
        half: bool,
    },
}

/// Shared inputs for the builders of all threads (built once per run).
#[derive(Clone)]
pub struct FrameShared {
    pool: Option<Arc<RandomPool>>,
    file: Option<Arc<Vec<u8>>>,
}

impl FrameShared {
    /// Loads the payload file or fills the random pool (from `pool_rng`) as the options need.
    pub fn new(opts: &FrameOptions, pool_rng: &mut ChaCha8Rng) -> Result<Self, GenError> {
        let mut shared = FrameShared {
            pool: None,
            file: None,
        };
        match &opts.payload {
            Payload::Random | Payload::Half => {
                shared.pool = Some(Arc::new(RandomPool::new(pool_rng, RANDOM_POOL_BYTES)))
            }
            Payload::File(p) => {
                let bytes = std::fs::read(p).map_err(|e| {
                    GenError::Options(format!("cannot read payload file {}: {e}", p.display()))
                })?;
                if bytes.is_empty() {
                    return Err(GenError::Options(format!(
                        "payload file {} is empty: give a file with at least one byte",
                        p.display()
                    )));
                }
                shared.file = Some(Arc::new(bytes));
            }
            Payload::Zero => {}
        }
        Ok(shared)
    }
}

/// Writes frames of one thread's flow into slots.
pub struct FrameBuilder {
    v6: bool,
    l2: usize,
    /// Constant header bytes (Ethernet [+ VLAN] + IP + UDP) with zero in every per-packet field.
    template: Vec<u8>,
    /// IPv4: sum of the header words that never change (version, TOS, flags, TTL, protocol).
    ip_const_sum: u32,
    src_ip: FieldWalk,
    dst_ip: FieldWalk,
    src_port: FieldWalk,
    dst_port: FieldWalk,
    rng: ChaCha8Rng,
    payload: PayloadFill,
    min_ip_len: u16,
    max_ip_len: u16,
    /// Sizes raised to the minimum.
    pub clamped_small: u64,
    /// Sizes lowered to `max_ip_len` (the MTU).
    pub clamped_large: u64,
}

impl FrameBuilder {
    /// A builder for thread `thread` (its source ports are shifted by `thread` range lengths, so threads
    /// have disjoint flows while threads × range length ≤ 65536); `max_ip_len` is the interface MTU. `field_rng` draws
    /// random fields, `payload_rng` picks where this thread starts in the random pool.
    pub fn new(
        opts: &FrameOptions,
        shared: &FrameShared,
        thread: usize,
        max_ip_len: u16,
        field_rng: ChaCha8Rng,
        mut payload_rng: ChaCha8Rng,
    ) -> Result<Self, GenError> {
        opts.validate()?;
        let v6 = opts.is_ipv6();
        let l2 = opts.l2_len();
        let min_ip_len = opts.min_ip_len();
        if max_ip_len < min_ip_len {
            return Err(GenError::Options(format!(
                "MTU {max_ip_len} is below the smallest UDP packet ({min_ip_len} bytes): raise the MTU"
            )));
        }
        // The constant bytes come from wire's frame emitter; the per-packet fields (length, addresses, ports,
        // checksums) are zeroed afterwards and rewritten by `write`.
        let ip = if v6 {
            IpPair::V6 {
                src: Ipv6Addr::UNSPECIFIED,
                dst: Ipv6Addr::UNSPECIFIED,
            }
        } else {
            IpPair::V4 {
                src: Ipv4Addr::UNSPECIFIED,
                dst: Ipv4Addr::UNSPECIFIED,
            }
        };
        let spec = UdpFrameSpec {
            src_mac: opts.src_mac,
            dst_mac: opts.dst_mac,
            vlan: opts.vlan,
            ip,
            src_port: 0,
            dst_port: 0,
            ttl: TTL,
            payload_len: 0,
        };
        let mut template = vec![0u8; spec.frame_len()];
        spec.emit_with_payload_sum(&mut template, 0);
        let mut ip_const_sum = 0;
        if v6 {
            Ipv6Packet::new_unchecked(&mut template[l2..]).set_payload_len(0);
        } else {
            let mut ip = Ipv4Packet::new_unchecked(&mut template[l2..]);
            ip.set_total_len(0);
            ip.set_checksum(0);
            // Length, addresses and checksum are zero now, so this is the sum of the constant words.
            ip_const_sum = ones_complement_sum(&template[l2..l2 + IPV4_HDR]);
        }
        let mut udp = UdpPacket::new_unchecked(&mut template[spec.l4_offset()..]);
        udp.set_len(0);
        udp.set_checksum(0);
        let (sa, sb) = opts.src_ip.bounds().map_err(GenError::Options)?;
        let (da, db) = opts.dst_ip.bounds().map_err(GenError::Options)?;
        // Threads get disjoint source-port ranges: thread t shifts the range by t range lengths (mod 2^16).
        let sp = opts.src_port;
        let width = (sp.last - sp.first) as u32 + 1;
        let shift = (thread as u32 * width) % 65536;
        let sp_first = (sp.first as u32 + shift) % 65536;
        let (sp_first, sp_last) = if sp_first + width - 1 <= 65535 {
            (sp_first, sp_first + width - 1)
        } else {
            // Wrapped past 65535: keep the width, start again low.
            (0, width - 1)
        };
        let payload = match (&opts.payload, &shared.pool, &shared.file) {
            (Payload::Random | Payload::Half, Some(pool), _) => {
                let blocks = (pool.len() - max_ip_len as usize).max(BLOCK) / BLOCK;
                let cursor = payload_rng.gen_range(0..blocks) * BLOCK;
                PayloadFill::Pool { pool: pool.clone(), cursor, half: opts.payload == Payload::Half }
            }
            (Payload::File(_), _, Some(file)) => {
                let n = max_ip_len as usize;
                let bytes = file.iter().copied().cycle().take(n).collect();
                PayloadFill::Fixed(FixedPayload::new(bytes))
            }
            (Payload::Zero, _, _) => PayloadFill::Fixed(FixedPayload::new(vec![0; max_ip_len as usize])),
            _ => {
                return Err(GenError::Options(
                    "frame inputs were prepared for another payload: build FrameShared from the same options".into(),
                ))
            }
        };
        Ok(FrameBuilder {
            v6,
            l2,
            template,
            ip_const_sum,
            src_ip: FieldWalk::new(sa, sb, opts.src_ip_order),
            dst_ip: FieldWalk::new(da, db, opts.dst_ip_order),
            src_port: FieldWalk::new(sp_first as u128, sp_last as u128, opts.src_port_order),
            dst_port: FieldWalk::new(
                opts.dst_port.first as u128,
                opts.dst_port.last as u128,
                opts.dst_port_order,
            ),
            rng: field_rng,
            payload,
            min_ip_len,
            max_ip_len,
            clamped_small: 0,
            clamped_large: 0,
        })
    }

    /// Link-layer header length (14 or 18).
    pub fn l2_len(&self) -> usize {
        self.l2
    }

    /// Largest frame this builder writes (slots must hold it).
    pub fn max_frame_len(&self) -> usize {
        self.l2 + self.max_ip_len as usize
    }

    /// Brings a requested IP length into [minimum, MTU], counting the changes.
    #[inline]
    pub fn clamp(&mut self, ip_len: u16) -> u16 {
        if ip_len < self.min_ip_len {
            self.clamped_small += 1;
            self.min_ip_len
        } else if ip_len > self.max_ip_len {
            self.clamped_large += 1;
            self.max_ip_len
        } else {
            ip_len
        }
    }

    /// Frame length of an (already clamped) IP length.
    #[inline]
    pub fn frame_len(&self, ip_len: u16) -> usize {
        self.l2 + ip_len as usize
    }

    /// Writes the constant bytes into a slot once; [`write`](Self::write) relies on them.
    pub fn prepare_slot(&self, slot: &mut [u8]) {
        slot[..self.template.len()].copy_from_slice(&self.template);
        if let PayloadFill::Fixed(f) = &self.payload {
            let start = self.template.len();
            let n = f.bytes.len().min(slot.len() - start);
            slot[start..start + n].copy_from_slice(&f.bytes[..n]);
        }
    }

    /// Writes the next frame of IP length `ip_len` (clamped with [`clamp`](Self::clamp)) into a prepared
    /// slot; returns the frame length.
    #[inline]
    pub fn write(&mut self, ip_len: u16, slot: &mut [u8]) -> usize {
        let p = self.write_headers(ip_len, slot);
        if let PayloadFill::Pool { pool, .. } = &self.payload {
            let n = p.random.len();
            slot[p.head..p.head + n].copy_from_slice(&pool.bytes[p.random.clone()]);
            slot[p.head + n..p.head + n + p.zeros].fill(0);
        }
        p.head + p.random.len() + p.zeros
    }

    /// Writes everything but a random payload; says where the payload comes from.
    /// Like [`write`](Self::write), but a random payload is not copied: the frame is `slot[..head]`, then
    #[inline]
    fn write_headers(&mut self, ip_len: u16, slot: &mut [u8]) -> Parts {
        let ip_len = ip_len.clamp(self.min_ip_len, self.max_ip_len);
        let hdr = self.template.len();
        let frame_len = self.l2 + ip_len as usize;
        let udp_len = ip_len - (hdr - self.l2 - UDP_HDR) as u16;
        let payload_len = udp_len as usize - UDP_HDR;

        // The draws happen in a fixed order (src, dst, sport, dport) so a seed always gives the same flow.
        let src = self.src_ip.value(&mut self.rng);
        let dst = self.dst_ip.value(&mut self.rng);
        let sport = self.src_port.value(&mut self.rng) as u16;
        let dport = self.dst_port.value(&mut self.rng) as u16;

        let (parts, payload_sum) = match &mut self.payload {
            PayloadFill::Fixed(f) => (
                Parts {
                    head: frame_len,
                    random: 0..0,
                    zeros: 0,
                },
                f.sum(payload_len),
            ),
            PayloadFill::Pool { pool, cursor, half } => {
                let random_len = if *half {
                    payload_len.div_ceil(2)
                } else {
                    payload_len
                };
                if *cursor + random_len > pool.len() {
                    *cursor = 0;
                }
                let range = *cursor..*cursor + random_len;
                let s = pool.sum(range.clone());
                // Walk on, block-aligned: consecutive payloads never repeat pool bytes until the pool wraps.
                *cursor += random_len.div_ceil(BLOCK) * BLOCK;
                let zeros = payload_len - random_len;
                (
                    Parts {
                        head: hdr,
                        random: range,
                        zeros,
                    },
                    s,
                )
            }
        };

        let addr_sums = addr_sum(src, self.v6) + addr_sum(dst, self.v6);
        let ip = &mut slot[self.l2..hdr];
        if self.v6 {
            let mut p = Ipv6Packet::new_unchecked(&mut *ip);
            p.set_payload_len(udp_len);
            p.set_src_addr(&Ipv6Addr::from(src));
            p.set_dst_addr(&Ipv6Addr::from(dst));
        } else {
            let mut p = Ipv4Packet::new_unchecked(&mut *ip);
            p.set_total_len(ip_len);
            p.set_src_addr(Ipv4Addr::from(src as u32));
            p.set_dst_addr(Ipv4Addr::from(dst as u32));
            p.set_checksum(!fold(self.ip_const_sum + ip_len as u32 + addr_sums));
        }
        let ip_hdr = hdr - self.l2 - UDP_HDR;
        let mut udp = UdpPacket::new_unchecked(&mut ip[ip_hdr..]);
        udp.set_src_port(sport);
        udp.set_dst_port(dport);
        udp.set_len(udp_len);
        // Pseudo header (addresses, protocol, length) + UDP header (ports, length) + payload.
        let sum = addr_sums
            + UDP_PROTO as u32
            + 2 * udp_len as u32
            + sport as u32
            + dport as u32
            + payload_sum;
        udp.set_checksum(udp_nonzero(!fold(sum)));
        parts
    }
}

/// Where a frame's bytes are: `head` bytes written in the slot, then `random` bytes of the pool, then zeros.
struct Parts {
    head: usize,
    random: std::ops::Range<usize>,
    zeros: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn builder(opts: &FrameOptions, seed: u64, thread: usize) -> FrameBuilder {
        let mut pool_rng = ChaCha8Rng::seed_from_u64(seed);
        let shared = FrameShared::new(opts, &mut pool_rng).unwrap();
        FrameBuilder::new(
            opts,
            &shared,
            thread,
            1500,
            ChaCha8Rng::seed_from_u64(seed + 1),
            ChaCha8Rng::seed_from_u64(seed + 2),
        )
        .unwrap()
    }

    /// Independent checks: the IP header and the UDP datagram (with its pseudo header) must sum to 0xffff.
    fn assert_checksums(frame: &[u8], l2: usize, v6: bool) {
        let ip = &frame[l2..];
        if v6 {
            let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            assert_eq!(ip.len(), 40 + plen);
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip[8..40]);
            pseudo.extend_from_slice(&(plen as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            pseudo.extend_from_slice(&ip[40..]);
            assert_eq!(
                fold(ones_complement_sum(&pseudo)),
                0xffff,
                "UDP/IPv6 checksum"
            );
        } else {
            assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, ip.len());
            assert_eq!(
                fold(ones_complement_sum(&ip[..20])),
                0xffff,
                "IPv4 header checksum"
            );
            let udp = &ip[20..];
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip[12..20]);
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
            pseudo.extend_from_slice(udp);
            assert_eq!(
                fold(ones_complement_sum(&pseudo)),
                0xffff,
                "UDP/IPv4 checksum"
            );
        }
    }

    #[test]
    fn ipv4_frame_bytes_are_exact() {
        let opts = FrameOptions::default();
        let mut b = builder(&opts, 1, 0);
        let mut slot = vec![0xa5u8; 2048];
        b.prepare_slot(&mut slot);
        let n = b.write(46, &mut slot);
        assert_eq!(n, 60);
        let expect: [u8; 60] = [
            2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
            0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0x26, 0xbd, 10, 0, 0, 1, 10, 0, 0,
            2, // IPv4
            0, 9, 0, 9, 0, 26, 0xeb, 0xa5, // UDP
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // payload
        ];
        assert_eq!(&slot[..60], &expect[..]);
        assert_checksums(&slot[..n], 14, false);
    }

    #[test]
    fn every_payload_and_family_checks_out() {
        let dir = std::env::temp_dir().join(format!("gen-frames-{}", std::process::id()));
        std::fs::write(&dir, b"hello, ringcap!").unwrap();
        for v6 in [false, true] {
            for payload in [
                Payload::Zero,
                Payload::Random,
                Payload::Half,
                Payload::File(dir.clone()),
            ] {
                for vlan in [None, Some(Vlan::dot1q(5, 42))] {
                    let mut opts = if v6 {
                        FrameOptions::ipv6()
                    } else {
                        FrameOptions::default()
                    };
                    opts.payload = payload.clone();
                    opts.vlan = vlan;
                    opts.src_ip = if v6 {
                        "fd00::1-fd00::ffff"
                    } else {
                        "10.0.0.1-10.0.3.255"
                    }
                    .parse()
                    .unwrap();
                    opts.src_ip_order = Order::Random;
                    opts.dst_port = "1000-1010".parse().unwrap();
                    let mut b = builder(&opts, 7, 1);
                    let mut slot = vec![0xa5u8; 2048];
                    b.prepare_slot(&mut slot);
                    for size in [0u16, 28, 29, 47, 48, 49, 100, 333, 1499, 1500, 9000] {
                        let ip_len = b.clamp(size);
                        let n = b.write(ip_len, &mut slot);
                        assert_eq!(n, b.l2_len() + ip_len as usize);
                        assert_checksums(&slot[..n], b.l2_len(), v6);
                        let hdr = b.l2_len() + if v6 { 48 } else { 28 };
                        let pl = &slot[hdr..n];
                        match &payload {
                            Payload::Zero => assert!(pl.iter().all(|&x| x == 0)),
                            Payload::Half => {
                                assert!(pl[pl.len().div_ceil(2)..].iter().all(|&x| x == 0))
                            }
                            Payload::File(_) => {
                                let want: Vec<u8> = b"hello, ringcap!"
                                    .iter()
                                    .copied()
                                    .cycle()
                                    .take(pl.len())
                                    .collect();
                                assert_eq!(pl, &want[..]);
                            }
                            Payload::Random => {}
                        }
                        if let Some(v) = vlan {
                            assert_eq!(&slot[12..16], &[0x81, 0x00, 0xa0, 42]);
                            assert_eq!(v.id(), 42);
                        }
                    }
                    // Below the minimum: 0 (IPv4, minimum 28); 0, 28, 29, 47 (IPv6, minimum 48).
                    assert_eq!(b.clamped_small, if v6 { 4 } else { 1 });
                    assert_eq!(b.clamped_large, 1);
                }
            }
        }
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn same_seed_same_frames_other_thread_other_ports() {
        let opts = FrameOptions {
            payload: Payload::Half,
            src_port: "1000-1003".parse().unwrap(),
            dst_ip: "10.1.0.0-10.1.255.255".parse().unwrap(),
            dst_ip_order: Order::Random,
            ..Default::default()
        };
        let frames = |seed, thread| {
            let mut b = builder(&opts, seed, thread);
            let mut slot = vec![0u8; 2048];
            b.prepare_slot(&mut slot);
            (0..50u16)
                .map(|i| {
                    let n = b.write(100 + i * 7, &mut slot);
                    slot[..n].to_vec()
                })
                .collect::<Vec<_>>()
        };
        let a = frames(5, 0);
        assert_eq!(a, frames(5, 0));
        assert_ne!(a, frames(6, 0));
        // Cycled source ports 1000..=1003 on thread 0; thread 1 gets 1004..=1007.
        let sport = |f: &Vec<u8>| u16::from_be_bytes([f[34], f[35]]);
        assert_eq!(
            a.iter().take(5).map(sport).collect::<Vec<_>>(),
            [1000, 1001, 1002, 1003, 1000]
        );
        let b = frames(5, 1);
        assert_eq!(
            b.iter().take(5).map(sport).collect::<Vec<_>>(),
            [1004, 1005, 1006, 1007, 1004]
        );
        // Random payload halves of consecutive packets differ.
        assert_ne!(a[0][42..60], a[1][42..60]);
    }

    #[test]
    fn options_parse_and_reject_clearly() {
        assert_eq!(
            "02:00:00:00:00:0a".parse::<MacAddr>().unwrap(),
            MacAddr([2, 0, 0, 0, 0, 10])
        );
        assert!("02:00:00:00:00".parse::<MacAddr>().is_err());
        assert!("10.0.0.9-10.0.0.1"
            .parse::<AddrRange>()
            .unwrap_err()
            .contains("backwards"));
        assert!("10.0.0.1-fd00::1"
            .parse::<AddrRange>()
            .unwrap_err()
            .contains("mixes"));
        assert_eq!(
            "1-2".parse::<PortRange>().unwrap(),
            PortRange { first: 1, last: 2 }
        );
        assert!("70000".parse::<PortRange>().is_err());
        assert_eq!(
            "file:/x".parse::<Payload>().unwrap(),
            Payload::File("/x".into())
        );
        assert!("ones".parse::<Payload>().is_err());
        let json = serde_json::to_string(&FrameOptions::default()).unwrap();
        assert!(json.contains("\"src_mac\":\"00:00:00:00:00:01\""), "{json}");
        let back: FrameOptions = serde_json::from_str(&json).unwrap();
        assert_eq!(back, FrameOptions::default());
    }
}
