//! TICKET header record v1 (seed 001 §3.2): a fixed-size, little-endian summary of one packet's headers.
//!
//! 48 bytes for IPv4 and non-IP frames, 80 for IPv6 (the 48-byte base + 32 bytes of addresses).
//! Layout (offset, size, field), all integers little-endian; `docs/records.md` has the full table:
//!
//! ```text
//!  0 8 ts_ns       8 4 wire_len    12 6 dst_mac   18 6 src_mac   24 2 ethertype  26 2 vlan (outer TCI)
//! 28 1 ip_version 29 1 ip_hdr_len  30 1 protocol  31 1 tcp_flags 32 4 src_ip4    36 4 dst_ip4
//! 40 2 ip_len     42 2 src_port    44 2 dst_port  46 2 l4_len    [48 16 src_ip6  64 16 dst_ip6]
//! ```
//!
//! The version of the format is carried by the batch header that holds the records (`records::batch`);
//! a record itself says only whether the 32-byte IPv6 extension follows (`ip_version == 6`).

use core::fmt;

use crate::parse::{parse, IpVersion, LinkType};
use crate::{ethertype, ip_proto};

/// Bytes of a record for IPv4 and non-IP frames.
pub const RECORD_LEN: usize = 48;
/// Bytes of a record for IPv6 frames (base + source and destination addresses).
pub const RECORD_V6_LEN: usize = 80;

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
                    "record has ip_version {v} (expected 0, 4 or 6): not a v1 record stream"
                )
            }
        }
    }
}

impl std::error::Error for RecordError {}

/// One header record (v1). Fields a frame does not carry are 0.
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
}

impl Record {
    /// Builds the record of one captured frame; never panics, fills what could be parsed.
    ///
    /// Hot path of the probe (one call per packet, straight from the ring slot): one pass of
    /// [`parse`], no allocation.
    #[inline]
    pub fn from_frame(ts_ns: u64, wire_len: u32, frame: &[u8], link: LinkType) -> Record {
        let h = parse(frame, link);
        let mut r = Record {
            ts_ns,
            wire_len,
            ..Record::default()
        };
        if let Some(m) = h.dst_mac {
            r.dst_mac = m.0;
        }
        if let Some(m) = h.src_mac {
            r.src_mac = m.0;
        }
        if h.vlan_outer.is_some() {
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

    /// Encoded size: [`RECORD_V6_LEN`] for IPv6, else [`RECORD_LEN`].
    #[inline]
    pub const fn encoded_len(&self) -> usize {
        if self.ip_version == 6 {
            RECORD_V6_LEN
        } else {
            RECORD_LEN
        }
    }

    /// Writes the record into `out[..encoded_len()]` and returns that length. The IPv6 addresses are written
    /// only for `ip_version == 6`.
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
        o[28] = self.ip_version;
        o[29] = self.ip_header_len;
        o[30] = self.protocol;
        o[31] = self.tcp_flags;
        o[32..36].copy_from_slice(&self.src_ip4);
        o[36..40].copy_from_slice(&self.dst_ip4);
        o[40..42].copy_from_slice(&self.ip_len.to_le_bytes());
        o[42..44].copy_from_slice(&self.src_port.to_le_bytes());
        o[44..46].copy_from_slice(&self.dst_port.to_le_bytes());
        o[46..48].copy_from_slice(&self.l4_len.to_le_bytes());
        if n == RECORD_V6_LEN {
            o[48..64].copy_from_slice(&self.src_ip6);
            o[64..80].copy_from_slice(&self.dst_ip6);
        }
        n
    }

    /// Reads one record from the start of `buf`; returns it and the bytes it took (48 or 80).
    pub fn decode(buf: &[u8]) -> Result<(Record, usize), RecordError> {
        let Some(b) = buf.get(..RECORD_LEN) else {
            return Err(RecordError::Truncated {
                need: RECORD_LEN,
                have: buf.len(),
            });
        };
        let ip_version = b[28];
        let n = match ip_version {
            0 | 4 => RECORD_LEN,
            6 => RECORD_V6_LEN,
            v => return Err(RecordError::BadIpVersion(v)),
        };
        if buf.len() < n {
            return Err(RecordError::Truncated {
                need: n,
                have: buf.len(),
            });
        }
        let u16at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        let mut r = Record {
            ts_ns: u64::from_le_bytes(arr(b, 0)),
            wire_len: u32::from_le_bytes(arr(b, 8)),
            dst_mac: arr(b, 12),
            src_mac: arr(b, 18),
            ethertype: u16at(24),
            vlan: u16at(26),
            ip_version,
            ip_header_len: b[29],
            protocol: b[30],
            tcp_flags: b[31],
            src_ip4: arr(b, 32),
            dst_ip4: arr(b, 36),
            ip_len: u16at(40),
            src_port: u16at(42),
            dst_port: u16at(44),
            l4_len: u16at(46),
            src_ip6: [0; 16],
            dst_ip6: [0; 16],
        };
        if n == RECORD_V6_LEN {
            r.src_ip6 = arr(buf, 48);
            r.dst_ip6 = arr(buf, 64);
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
mod tests {
    use super::*;
    use crate::emit::{IpPair, UdpFrameSpec};
    use crate::ethernet::MacAddr;
    use crate::icmp::IcmpPacket;
    use crate::ipv4::Ipv4Packet;
    use crate::tcp::{TcpFlags, TcpPacket};
    use crate::vlan::Vlan;

    const SRC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const DST: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    fn spec_v4(payload_len: usize) -> UdpFrameSpec {
        UdpFrameSpec {
            src_mac: SRC,
            dst_mac: DST,
            vlan: None,
            ip: IpPair::V4 {
                src: "10.77.0.1".parse().unwrap(),
                dst: "10.77.0.2".parse().unwrap(),
            },
            src_port: 40000,
            dst_port: 9,
            ttl: 64,
            payload_len,
        }
    }

    fn emit(spec: &UdpFrameSpec) -> Vec<u8> {
        let mut buf = vec![0u8; spec.frame_len()];
        spec.emit(&mut buf);
        buf
    }

    /// A UDP frame turned into TCP: protocol byte, header checksum and a TCP header over the UDP bytes.
    fn tcp_frame(flags: u16, header_len: u8, payload: usize) -> Vec<u8> {
        let spec = spec_v4(header_len as usize - 8 + payload);
        let mut f = emit(&spec);
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
        ip.set_protocol(ip_proto::TCP);
        ip.fill_checksum();
        let mut tcp = TcpPacket::new_unchecked(&mut f[34..]);
        tcp.set_src_port(40001);
        tcp.set_dst_port(443);
        tcp.set_header_len_and_flags(header_len, TcpFlags(flags));
        f
    }

    fn round_trip(r: &Record) {
        let mut buf = [0xa5u8; 100];
        let n = r.encode(&mut buf);
        assert_eq!(n, r.encoded_len());
        assert_eq!(buf[n], 0xa5, "encode wrote past its length");
        let (back, used) = Record::decode(&buf[..n]).unwrap();
        assert_eq!(used, n);
        assert_eq!(&back, r);
    }

    #[test]
    fn udp_v4_every_field() {
        let f = emit(&spec_v4(100));
        let r = Record::from_frame(
            1_700_000_000_123_456_789,
            f.len() as u32,
            &f,
            LinkType::Ethernet,
        );
        let want = Record {
            ts_ns: 1_700_000_000_123_456_789,
            wire_len: 142,
            dst_mac: DST.0,
            src_mac: SRC.0,
            ethertype: 0x0800,
            vlan: 0,
            ip_version: 4,
            ip_header_len: 20,
            protocol: 17,
            tcp_flags: 0,
            src_ip4: [10, 77, 0, 1],
            dst_ip4: [10, 77, 0, 2],
            ip_len: 128,
            src_port: 40000,
            dst_port: 9,
            l4_len: 108,
            ..Default::default()
        };
        assert_eq!(r, want);
        assert_eq!(r.encoded_len(), 48);
        round_trip(&r);
    }

    #[test]
    fn encoded_bytes_match_the_table() {
        let f = emit(&spec_v4(100));
        let r = Record::from_frame(0x0102030405060708, 142, &f, LinkType::Ethernet);
        let mut b = [0u8; 48];
        r.encode(&mut b);
        assert_eq!(&b[0..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&b[8..12], &[142, 0, 0, 0]);
        assert_eq!(&b[12..18], &DST.0);
        assert_eq!(&b[18..24], &SRC.0);
        assert_eq!(&b[24..28], &[0x00, 0x08, 0, 0]);
        assert_eq!(&b[28..32], &[4, 20, 17, 0]);
        assert_eq!(&b[32..40], &[10, 77, 0, 1, 10, 77, 0, 2]);
        assert_eq!(&b[40..48], &[128, 0, 0x40, 0x9c, 9, 0, 108, 0]);
    }

    /// The worked example of docs/records.md.
    #[test]
    fn docs_example_bytes() {
        let f = emit(&spec_v4(100));
        let r = Record::from_frame(1_763_780_000_123_456_789, 142, &f, LinkType::Ethernet);
        let mut b = [0u8; 48];
        r.encode(&mut b);
        let hex: Vec<String> = b
            .chunks(16)
            .map(|c| {
                c.iter()
                    .map(|x| format!("{x:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(
            hex,
            [
                "15 0d 4c b1 90 34 7a 18 8e 00 00 00 02 00 00 00",
                "00 02 02 00 00 00 00 01 00 08 00 00 04 14 11 00",
                "0a 4d 00 01 0a 4d 00 02 80 00 40 9c 09 00 6c 00",
            ]
        );
    }

    #[test]
    fn udp_v6_extended_record() {
        let src: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
        let dst: std::net::Ipv6Addr = "fd00::2".parse().unwrap();
        let spec = UdpFrameSpec {
            ip: IpPair::V6 { src, dst },
            ..spec_v4(10)
        };
        let f = emit(&spec);
        let r = Record::from_frame(5, f.len() as u32, &f, LinkType::Ethernet);
        assert_eq!(r.ip_version, 6);
        assert_eq!(r.ethertype, 0x86dd);
        assert_eq!((r.ip_header_len, r.protocol, r.ip_len), (40, 17, 58));
        assert_eq!((r.src_port, r.dst_port, r.l4_len), (40000, 9, 18));
        assert_eq!(r.src_ip6, src.octets());
        assert_eq!(r.dst_ip6, dst.octets());
        assert_eq!((r.src_ip4, r.dst_ip4), ([0; 4], [0; 4]));
        assert_eq!(r.encoded_len(), 80);
        assert_eq!(r.src_addr(), Some(src.into()));
        round_trip(&r);
        let mut b = [0u8; 80];
        r.encode(&mut b);
        assert_eq!(&b[48..64], &src.octets());
        assert_eq!(&b[64..80], &dst.octets());
        // The base alone is not enough for an IPv6 record.
        assert_eq!(
            Record::decode(&b[..79]),
            Err(RecordError::Truncated { need: 80, have: 79 })
        );
    }

    #[test]
    fn tcp_flags_and_header_len() {
        let f = tcp_frame(
            TcpFlags::SYN | TcpFlags::ACK | TcpFlags::CWR | TcpFlags::AE,
            32,
            5,
        );
        let r = Record::from_frame(1, f.len() as u32, &f, LinkType::Ethernet);
        assert_eq!(r.protocol, 6);
        // AE (the 9th bit) does not fit the byte; CWR..FIN do.
        assert_eq!(r.tcp_flags, 0x92);
        assert_eq!((r.src_port, r.dst_port, r.l4_len), (40001, 443, 32));
        assert_eq!(r.ip_len, 20 + 32 + 5);
        round_trip(&r);
        let fin = tcp_frame(TcpFlags::FIN | TcpFlags::PSH, 20, 0);
        assert_eq!(
            Record::from_frame(1, 54, &fin, LinkType::Ethernet).tcp_flags,
            0x09
        );
    }

    #[test]
    fn icmp_type_and_code_in_the_port_fields() {
        let mut f = emit(&spec_v4(0));
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
        ip.set_protocol(ip_proto::ICMP);
        ip.fill_checksum();
        let mut icmp = IcmpPacket::new_unchecked(&mut f[34..]);
        icmp.set_type_code(3, 4);
        icmp.fill_checksum_v4();
        let r = Record::from_frame(1, f.len() as u32, &f, LinkType::Ethernet);
        assert_eq!(
            (r.protocol, r.src_port, r.dst_port, r.l4_len, r.tcp_flags),
            (1, 3, 4, 0, 0)
        );
        round_trip(&r);
    }

    #[test]
    fn vlan_keeps_the_whole_tci() {
        let spec = UdpFrameSpec {
            vlan: Some(Vlan {
                tpid: 0x8100,
                tci: (5 << 13) | 100,
            }),
            ..spec_v4(20)
        };
        let f = emit(&spec);
        let r = Record::from_frame(1, f.len() as u32, &f, LinkType::Ethernet);
        assert_eq!(r.vlan, (5 << 13) | 100);
        assert_eq!(r.ethertype, 0x0800);
        assert_eq!((r.src_port, r.ip_len), (40000, 48));
        round_trip(&r);
    }

    #[test]
    fn non_ip_and_802_3() {
        let mut arp = emit(&spec_v4(0));
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        let r = Record::from_frame(1, 60, &arp, LinkType::Ethernet);
        assert_eq!(
            (r.ethertype, r.ip_version, r.ip_len, r.src_port),
            (0x0806, 0, 0, 0)
        );
        assert_eq!(r.src_mac, SRC.0);
        assert_eq!(r.encoded_len(), 48);
        round_trip(&r);
        let mut llc = arp.clone();
        llc[12..14].copy_from_slice(&46u16.to_be_bytes());
        let r = Record::from_frame(1, 60, &llc, LinkType::Ethernet);
        assert_eq!((r.ethertype, r.ip_version), (46, 0));
    }

    #[test]
    fn raw_ip_link_gets_the_ip_ethertype() {
        let f = emit(&spec_v4(4));
        let r = Record::from_frame(1, 32, &f[14..], LinkType::Raw);
        assert_eq!((r.ethertype, r.ip_version, r.src_port), (0x0800, 4, 40000));
        assert_eq!(r.src_mac, [0; 6]);
    }

    #[test]
    fn truncated_frames_keep_what_was_read() {
        let f = tcp_frame(TcpFlags::SYN, 20, 0);
        // Cut inside the TCP header after the ports: ports kept, flags and header length unknown.
        let r = Record::from_frame(1, 54, &f[..14 + 20 + 6], LinkType::Ethernet);
        assert_eq!((r.ip_version, r.src_port, r.dst_port), (4, 40001, 443));
        assert_eq!((r.tcp_flags, r.l4_len), (0, 0));
        assert_eq!(r.wire_len, 54);
        // Cut inside the IP header: only layer 2.
        let r = Record::from_frame(1, 54, &f[..20], LinkType::Ethernet);
        assert_eq!((r.ethertype, r.ip_version, r.src_ip4), (0x0800, 0, [0; 4]));
        assert_eq!(r.dst_mac, DST.0);
        // Every prefix and garbage: no panic, always a record that round-trips.
        for n in 0..=f.len() {
            round_trip(&Record::from_frame(1, 54, &f[..n], LinkType::Ethernet));
        }
        let mut x: u32 = 12345;
        let mut junk = [0u8; 128];
        for _ in 0..2000 {
            for b in junk.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            let n = (x % 129) as usize;
            for link in [
                LinkType::Ethernet,
                LinkType::Raw,
                LinkType::LinuxSll,
                LinkType::LinuxSll2,
            ] {
                round_trip(&Record::from_frame(1, n as u32, &junk[..n], link));
            }
        }
    }

    #[test]
    fn decode_rejects_short_and_unknown() {
        let r = Record::from_frame(1, 42, &emit(&spec_v4(0)), LinkType::Ethernet);
        let mut b = [0u8; 48];
        r.encode(&mut b);
        for n in 0..48 {
            assert_eq!(
                Record::decode(&b[..n]),
                Err(RecordError::Truncated { need: 48, have: n })
            );
        }
        b[28] = 5;
        assert_eq!(Record::decode(&b), Err(RecordError::BadIpVersion(5)));
        assert!(RecordError::BadIpVersion(5)
            .to_string()
            .contains("ip_version 5"));
    }

    #[test]
    fn records_iterator_over_mixed_stream() {
        let v4 = Record::from_frame(1, 42, &emit(&spec_v4(0)), LinkType::Ethernet);
        let v6f = emit(&UdpFrameSpec {
            ip: IpPair::V6 {
                src: "fd00::1".parse().unwrap(),
                dst: "fd00::2".parse().unwrap(),
            },
            ..spec_v4(0)
        });
        let v6 = Record::from_frame(2, 62, &v6f, LinkType::Ethernet);
        let mut buf = [0u8; 48 + 80 + 48 + 10];
        let mut at = 0;
        for r in [v4, v6, v4] {
            at += r.encode(&mut buf[at..]);
        }
        assert_eq!(at, 176);
        let got: Vec<_> = records(&buf[..at]).collect();
        assert_eq!(got, vec![Ok(v4), Ok(v6), Ok(v4)]);
        let got: Vec<_> = records(&buf[..at + 10]).collect();
        assert_eq!(got[3], Err(RecordError::Truncated { need: 48, have: 10 }));
        assert_eq!(got.len(), 4);
    }
}
