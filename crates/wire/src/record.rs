//! TICKET header record (seed 001 §3.2): a little-endian summary of one packet's headers.
//!
//! 48 bytes for IPv4 and non-IP frames, 80 for IPv6 (the 48-byte base + 32 bytes of addresses),
//! and, for a packet described by the packet it carries in a tunnel ([`crate::describe`]), a
//! tunnel extension of 16 bytes (IPv4 carrier) or 40 (IPv6 carrier) or 8 (MPLS over Ethernet).
//! Layout (offset, size, field), all integers little-endian; `docs/records.md` has the full table:
//!
//! ```text
//!  0 8 ts_ns       8 4 wire_len    12 6 dst_mac   18 6 src_mac   24 2 ethertype  26 2 vlan (outer TCI)
//! 28 1 ip_version | flags          29 1 ip_hdr_len  30 1 protocol  31 1 tcp_flags 32 4 src_ip4  36 4 dst_ip4
//! 40 2 ip_len     42 2 src_port    44 2 dst_port  46 2 l4_len    [48 16 src_ip6  64 16 dst_ip6]
//! then, when flag 0x10 is set: 0 1 tunnel kind  1 1 carrier version  2 2 reserved  4 4 tunnel_id
//!                              8 4|16 carrier_a  then 4|16 carrier_b
//! ```
//!
//! Byte 28 holds the IP version (0, 4, 6) in its low nibble; bit 4 says the tunnel extension
//! follows, bits 5-7 hold a [`TunnelProblem`] code. The version of the format is carried by the
//! batch header that holds the records (`records::batch`): batch v2 records have no flags (byte 28
//! is the bare IP version), batch v3 records may have them; a v2 record is a valid v3 record.

use core::fmt;

use crate::describe::{describe_tunnel, may_hold_tunnel, TunnelId, TunnelProblem};
use crate::parse::{parse, IpVersion, LinkType};
use crate::tunnel::TunnelKind;
use crate::{ethertype, ip_proto};

/// Bytes of a record for IPv4 and non-IP frames.
pub const RECORD_LEN: usize = 48;
/// Bytes of a record for IPv6 frames (base + source and destination addresses).
pub const RECORD_V6_LEN: usize = 80;
/// Bytes of the tunnel extension before the carrier addresses.
pub const TUNNEL_EXT_LEN: usize = 8;
/// Bytes of the longest record: IPv6 in a tunnel with an IPv6 carrier.
pub const RECORD_MAX_LEN: usize = RECORD_V6_LEN + TUNNEL_EXT_LEN + 32;
/// Byte 28's flag: the tunnel extension follows.
const TUNNEL_FOLLOWS: u8 = 0x10;
/// Byte 28's bits 5-7: a [`TunnelProblem`] code.
const PROBLEM_SHIFT: u32 = 5;

/// Why [`Record::decode`] refused a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// The buffer ends before the record does.
    Truncated {
        /// Bytes the record needs.
        need: usize,
        /// Bytes the buffer holds.
        have: usize,
    },
    /// `ip_version` is not 0, 4 or 6, so the record's length is unknown.
    BadIpVersion(u8),
    /// Byte 28's flags or the tunnel extension hold an impossible value.
    BadTunnel(&'static str),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Truncated { need, have } => {
                write!(f, "record truncated: needs {need} bytes, {have} left")
            }
            RecordError::BadIpVersion(v) => {
                write!(
                    f,
                    "record has ip_version {v} (expected 0, 4 or 6): not a record stream"
                )
            }
            RecordError::BadTunnel(what) => write!(f, "record's tunnel fields: {what}"),
        }
    }
}

impl std::error::Error for RecordError {}

/// One header record. Fields a frame does not carry are 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Record {
    /// Capture time, Unix ns.
    pub ts_ns: u64,
    /// Original length on the wire (no FCS).
    pub wire_len: u32,
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Ethertype after VLAN tags (an 802.3 length below 0x0600 as is); for raw-IP links the IP ethertype.
    pub ethertype: u16,
    /// Outer VLAN TCI (PCP, DEI, VID); 0 when untagged.
    pub vlan: u16,
    /// 0 (not IP or IP header not complete), 4 or 6.
    pub ip_version: u8,
    /// IP header length in bytes (IPv6: 40 + extension headers), saturated at 255.
    pub ip_header_len: u8,
    /// IPv4 protocol / IPv6 final next header.
    pub protocol: u8,
    /// Low 8 TCP flag bits (CWR..FIN); 0 for other protocols.
    pub tcp_flags: u8,
    /// IPv4 source in network byte order; 0 for IPv6.
    pub src_ip4: [u8; 4],
    /// IPv4 destination in network byte order; 0 for IPv6.
    pub dst_ip4: [u8; 4],
    /// IPv4 total length / IPv6 40 + payload length (saturated at 65535; 0 for jumbograms).
    pub ip_len: u16,
    /// TCP/UDP/SCTP/DCCP source port; ICMP type.
    pub src_port: u16,
    /// TCP/UDP/SCTP/DCCP destination port; ICMP code.
    pub dst_port: u16,
    /// TCP header length in bytes, or the UDP length field; 0 otherwise.
    pub l4_len: u16,
    /// IPv6 source (only when `ip_version == 6`).
    pub src_ip6: [u8; 16],
    /// IPv6 destination (only when `ip_version == 6`).
    pub dst_ip6: [u8; 16],
    /// The tunnel the packet came in ([`TunnelKind::code`]; 0: none). When set, the fields above
    /// but `ts_ns`, `wire_len` and `vlan` (the frame's) describe the carried packet; its MACs are
    /// 0 when it has no Ethernet header (IP in GRE, IP-in-IP, MPLS).
    pub tunnel: u8,
    /// VNI, GRE key (0 without one), ERSPAN session, top MPLS label; 0 for ERSPAN I and IP-in-IP.
    pub tunnel_id: u32,
    /// The carrier's IP version: 4, 6, or 0 (MPLS over Ethernet).
    pub carrier_version: u8,
    /// The carrier's addresses, the lower first; IPv4 in bytes 0..4.
    pub carrier_a: [u8; 16],
    /// See `carrier_a`.
    pub carrier_b: [u8; 16],
    /// Why a tunnel was not decoded ([`TunnelProblem::code`]; 0: none): the fields describe the
    /// outer packet.
    pub tunnel_problem: u8,
}

impl Record {
    /// Builds the record of one captured frame; never panics, fills what could be parsed.
    ///
    /// Hot path of the probe (one call per packet, straight from the ring slot): one [`parse`],
    /// and the look behind it ([`crate::describe()`]) only for a packet that may hold a tunnel; no
    /// allocation.
    #[inline]
    pub fn from_frame(ts_ns: u64, wire_len: u32, frame: &[u8], link: LinkType) -> Record {
        let mut r = Record {
            ts_ns,
            wire_len,
            ..Record::default()
        };
        // Parsed here, not through `describe`: handing its ~150-byte result back and forth took
        // 30 ns per packet (perf: copies and store-forwarding stalls), as much as the parse.
        let outer = parse(frame, link);
        let described;
        let (h, outer_vlan) = if may_hold_tunnel(&outer) {
            described = describe_tunnel(frame, link, outer);
            r.tunnel_problem = described.problem.map_or(0, TunnelProblem::code);
            if let Some(t) = &described.tunnel {
                r.set_tunnel(t);
            }
            (&described.headers, described.outer_vlan)
        } else {
            (&outer, outer.vlan_outer)
        };
        if let Some(m) = h.dst_mac {
            r.dst_mac = m.0;
        }
        if let Some(m) = h.src_mac {
            r.src_mac = m.0;
        }
        if outer_vlan.is_some() {
            // The parser keeps the VID only; the record keeps the whole TCI (priority bits too). The first
            // tag always sits right after the link header.
            let at = link.header_len();
            if let Some(b) = frame.get(at..at + 2) {
                r.vlan = u16::from_be_bytes([b[0], b[1]]);
            }
        }
        r.ip_version = match h.ip_version {
            Some(IpVersion::V4) => 4,
            Some(IpVersion::V6) => 6,
            None => 0,
        };
        r.ethertype = match (h.ethertype, r.ip_version) {
            (Some(et), _) => et,
            (None, 4) => ethertype::IPV4,
            (None, 6) => ethertype::IPV6,
            (None, _) => 0,
        };
        r.ip_header_len = h.ip_header_len.map_or(0, |l| l.min(255) as u8);
        r.ip_len = h.ip_len.map_or(0, |l| l.min(u16::MAX as u32) as u16);
        match r.ip_version {
            4 => {
                r.src_ip4.copy_from_slice(&h.src_ip[..4]);
                r.dst_ip4.copy_from_slice(&h.dst_ip[..4]);
            }
            6 => {
                r.src_ip6 = h.src_ip;
                r.dst_ip6 = h.dst_ip;
            }
            _ => {}
        }
        let protocol = h.protocol.unwrap_or(0);
        r.protocol = protocol;
        match protocol {
            ip_proto::ICMP | ip_proto::ICMPV6 => {
                r.src_port = h.icmp_type.unwrap_or(0) as u16;
                r.dst_port = h.icmp_code.unwrap_or(0) as u16;
            }
            _ => {
                r.src_port = h.src_port.unwrap_or(0);
                r.dst_port = h.dst_port.unwrap_or(0);
            }
        }
        if let Some(f) = h.tcp_flags {
            r.tcp_flags = f.0 as u8;
        }
        r.l4_len = match (h.tcp_header_len, h.udp_len) {
            (Some(t), _) => t as u16,
            (None, Some(u)) => u,
            _ => 0,
        };
        r
    }

    fn set_tunnel(&mut self, t: &TunnelId) {
        self.tunnel = t.kind.code();
        self.tunnel_id = t.id;
        self.carrier_version = match t.carrier_version {
            Some(IpVersion::V4) => 4,
            Some(IpVersion::V6) => 6,
            None => 0,
        };
        self.carrier_a = t.carrier_a;
        self.carrier_b = t.carrier_b;
    }

    /// The tunnel, when the record describes the packet it carried.
    pub fn tunnel(&self) -> Option<TunnelId> {
        Some(TunnelId {
            kind: TunnelKind::from_code(self.tunnel)?,
            id: self.tunnel_id,
            carrier_version: match self.carrier_version {
                4 => Some(IpVersion::V4),
                6 => Some(IpVersion::V6),
                _ => None,
            },
            carrier_a: self.carrier_a,
            carrier_b: self.carrier_b,
        })
    }

    /// Bytes of the carrier addresses in the tunnel extension (both).
    const fn carrier_len(carrier_version: u8) -> usize {
        match carrier_version {
            4 => 8,
            6 => 32,
            _ => 0,
        }
    }

    /// Encoded size: [`RECORD_V6_LEN`] for IPv6, else [`RECORD_LEN`]; plus the tunnel extension.
    #[inline]
    pub const fn encoded_len(&self) -> usize {
        let base = if self.ip_version == 6 {
            RECORD_V6_LEN
        } else {
            RECORD_LEN
        };
        if self.tunnel == 0 {
            base
        } else {
            base + TUNNEL_EXT_LEN + Self::carrier_len(self.carrier_version)
        }
    }

    /// Writes the record into `out[..encoded_len()]` and returns that length. The IPv6 addresses are written
    /// only for `ip_version == 6`, the tunnel extension only for a tunnel.
    ///
    /// Panics if `out` is shorter than [`encoded_len`](Self::encoded_len) (a bug in the caller, which sizes
    /// its buffer; batches check their room first).
    #[inline]
    pub fn encode(&self, out: &mut [u8]) -> usize {
        let n = self.encoded_len();
        // One bounds check up front; the fixed ranges below are then provably in range.
        let o = &mut out[..n];
        o[0..8].copy_from_slice(&self.ts_ns.to_le_bytes());
        o[8..12].copy_from_slice(&self.wire_len.to_le_bytes());
        o[12..18].copy_from_slice(&self.dst_mac);
        o[18..24].copy_from_slice(&self.src_mac);
        o[24..26].copy_from_slice(&self.ethertype.to_le_bytes());
        o[26..28].copy_from_slice(&self.vlan.to_le_bytes());
        let follows = if self.tunnel != 0 { TUNNEL_FOLLOWS } else { 0 };
        o[28] = self.ip_version | follows | self.tunnel_problem << PROBLEM_SHIFT;
        o[29] = self.ip_header_len;
        o[30] = self.protocol;
        o[31] = self.tcp_flags;
        o[32..36].copy_from_slice(&self.src_ip4);
        o[36..40].copy_from_slice(&self.dst_ip4);
        o[40..42].copy_from_slice(&self.ip_len.to_le_bytes());
        o[42..44].copy_from_slice(&self.src_port.to_le_bytes());
        o[44..46].copy_from_slice(&self.dst_port.to_le_bytes());
        o[46..48].copy_from_slice(&self.l4_len.to_le_bytes());
        let mut at = RECORD_LEN;
        if self.ip_version == 6 {
            o[48..64].copy_from_slice(&self.src_ip6);
            o[64..80].copy_from_slice(&self.dst_ip6);
            at = RECORD_V6_LEN;
        }
        if self.tunnel != 0 {
            let e = &mut o[at..];
            e[0] = self.tunnel;
            e[1] = self.carrier_version;
            e[2..4].fill(0);
            e[4..8].copy_from_slice(&self.tunnel_id.to_le_bytes());
            let half = Self::carrier_len(self.carrier_version) / 2;
            e[8..8 + half].copy_from_slice(&self.carrier_a[..half]);
            e[8 + half..8 + 2 * half].copy_from_slice(&self.carrier_b[..half]);
        }
        n
    }

    /// The length of the record at the start of `buf` (48 to [`RECORD_MAX_LEN`]), after checking
    /// byte 28 and the tunnel extension's kind and carrier version: what a batch's framing check
    /// walks. `flags` false refuses byte-28 flags (a batch v2 record has none).
    pub fn len_at(buf: &[u8], flags: bool) -> Result<usize, RecordError> {
        let Some(&b28) = buf.get(28) else {
            return Err(RecordError::Truncated {
                need: RECORD_LEN,
                have: buf.len(),
            });
        };
        let (ip_version, follows, problem) =
            (b28 & 0x0f, b28 & TUNNEL_FOLLOWS != 0, b28 >> PROBLEM_SHIFT);
        let base = match ip_version {
            _ if !flags && b28 >> 4 != 0 => return Err(RecordError::BadIpVersion(b28)),
            0 | 4 => RECORD_LEN,
            6 => RECORD_V6_LEN,
            _ => return Err(RecordError::BadIpVersion(b28)),
        };
        if problem != 0 && (follows || TunnelProblem::from_code(problem).is_none()) {
            return Err(RecordError::BadTunnel(
                "unknown problem code, or a problem with a tunnel",
            ));
        }
        if !follows {
            return Ok(base);
        }
        let Some(e) = buf.get(base..base + TUNNEL_EXT_LEN) else {
            return Err(RecordError::Truncated {
                need: base + TUNNEL_EXT_LEN,
                have: buf.len(),
            });
        };
        if TunnelKind::from_code(e[0]).is_none() {
            return Err(RecordError::BadTunnel("unknown tunnel kind"));
        }
        if !matches!(e[1], 0 | 4 | 6) || e[2] != 0 || e[3] != 0 {
            return Err(RecordError::BadTunnel(
                "carrier version not 0, 4 or 6, or reserved bytes set",
            ));
        }
        Ok(base + TUNNEL_EXT_LEN + Self::carrier_len(e[1]))
    }

    /// Reads one record from the start of `buf`; returns it and the bytes it took (48 to
    /// [`RECORD_MAX_LEN`]).
    pub fn decode(buf: &[u8]) -> Result<(Record, usize), RecordError> {
        let n = Self::len_at(buf, true)?;
        if buf.len() < n {
            return Err(RecordError::Truncated {
                need: n,
                have: buf.len(),
            });
        }
        let b = &buf[..n];
        let u16at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        let mut r = Record {
            ts_ns: u64::from_le_bytes(arr(b, 0)),
            wire_len: u32::from_le_bytes(arr(b, 8)),
            dst_mac: arr(b, 12),
            src_mac: arr(b, 18),
            ethertype: u16at(24),
            vlan: u16at(26),
            ip_version: b[28] & 0x0f,
            ip_header_len: b[29],
            protocol: b[30],
            tcp_flags: b[31],
            src_ip4: arr(b, 32),
            dst_ip4: arr(b, 36),
            ip_len: u16at(40),
            src_port: u16at(42),
            dst_port: u16at(44),
            l4_len: u16at(46),
            tunnel_problem: b[28] >> PROBLEM_SHIFT,
            ..Record::default()
        };
        let mut at = RECORD_LEN;
        if r.ip_version == 6 {
            r.src_ip6 = arr(b, 48);
            r.dst_ip6 = arr(b, 64);
            at = RECORD_V6_LEN;
        }
        if b[28] & TUNNEL_FOLLOWS != 0 {
            let e = &b[at..];
            r.tunnel = e[0];
            r.carrier_version = e[1];
            r.tunnel_id = u32::from_le_bytes(arr(e, 4));
            let half = Self::carrier_len(r.carrier_version) / 2;
            r.carrier_a[..half].copy_from_slice(&e[8..8 + half]);
            r.carrier_b[..half].copy_from_slice(&e[8 + half..8 + 2 * half]);
        }
        Ok((r, n))
    }

    /// Source address as an `IpAddr`, if the record is IP.
    pub fn src_addr(&self) -> Option<std::net::IpAddr> {
        match self.ip_version {
            4 => Some(std::net::Ipv4Addr::from(self.src_ip4).into()),
            6 => Some(std::net::Ipv6Addr::from(self.src_ip6).into()),
            _ => None,
        }
    }

    /// Destination address as an `IpAddr`, if the record is IP.
    pub fn dst_addr(&self) -> Option<std::net::IpAddr> {
        match self.ip_version {
            4 => Some(std::net::Ipv4Addr::from(self.dst_ip4).into()),
            6 => Some(std::net::Ipv6Addr::from(self.dst_ip6).into()),
            _ => None,
        }
    }
}

/// Copies `N` bytes at `at` (callers checked the length).
#[inline(always)]
fn arr<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[at..at + N]);
    out
}

/// Iterates the records packed back to back in `buf`; stops at the first error (yielded once).
pub fn records(buf: &[u8]) -> Records<'_> {
    Records { buf, done: false }
}

/// Iterator returned by [`records`].
#[derive(Clone, Debug)]
pub struct Records<'a> {
    buf: &'a [u8],
    done: bool,
}

impl Iterator for Records<'_> {
    type Item = Result<Record, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.buf.is_empty() {
            return None;
        }
        match Record::decode(self.buf) {
            Ok((r, n)) => {
                self.buf = &self.buf[n..];
                Some(Ok(r))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
