//! Tests of `record.rs`.
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
    let mut buf = [0xa5u8; RECORD_MAX_LEN + 1];
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

/// Ethernet (MACs `mac_last` 1 → 2) / IPv4 `src` → `dst` / `proto` / `payload`; no checksums
/// (nothing here reads them).
fn eth_ipv4(mac_last: u8, proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut f = vec![
        2,
        0,
        0,
        0,
        0,
        mac_last + 1,
        2,
        0,
        0,
        0,
        0,
        mac_last,
        0x08,
        0x00,
    ];
    let len = (20 + payload.len()) as u16;
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
        proto,
        0,
        0,
    ]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(payload);
    f
}

/// UDP 40000 → `dport` around `payload`.
fn udp_hdr(dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = Vec::new();
    for v in [40000, dport, len, 0] {
        u.extend_from_slice(&u16::to_be_bytes(v));
    }
    u.extend_from_slice(payload);
    u
}

/// VXLAN VNI 42 from 192.0.2.2 to 192.0.2.1 (the higher carrier address first) around an inner
/// Ethernet / 10.1.0.3 → 10.1.0.4 / UDP 40000 → 53 with 10 payload bytes.
fn vxlan_frame() -> Vec<u8> {
    let inner = eth_ipv4(
        0x10,
        17,
        [10, 1, 0, 3],
        [10, 1, 0, 4],
        &udp_hdr(53, &[0; 10]),
    );
    let mut vx = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
    vx.extend_from_slice(&inner);
    eth_ipv4(1, 17, [192, 0, 2, 2], [192, 0, 2, 1], &udp_hdr(4789, &vx))
}

#[test]
fn a_tunnelled_packet_is_described_by_what_it_carries() {
    let f = vxlan_frame();
    let r = Record::from_frame(7, f.len() as u32, &f, LinkType::Ethernet);
    // Inner: 14 + 20 + 8 + 10 = 52 bytes behind 14 + 20 + 8 + 8 outer ones.
    assert_eq!(f.len(), 102);
    assert_eq!((r.wire_len, r.ip_version, r.protocol), (102, 4, 17));
    assert_eq!((r.src_ip4, r.dst_ip4), ([10, 1, 0, 3], [10, 1, 0, 4]));
    assert_eq!(
        (r.src_port, r.dst_port, r.l4_len, r.ip_len),
        (40000, 53, 18, 38)
    );
    assert_eq!(
        (r.dst_mac, r.src_mac),
        ([2, 0, 0, 0, 0, 0x11], [2, 0, 0, 0, 0, 0x10])
    );
    assert_eq!((r.tunnel, r.tunnel_id, r.carrier_version), (1, 42, 4));
    assert_eq!(
        &r.carrier_a[..4],
        &[192, 0, 2, 1],
        "the lower carrier address first"
    );
    assert_eq!(&r.carrier_b[..4], &[192, 0, 2, 2]);
    assert_eq!(r.tunnel_problem, 0);
    assert_eq!(r.encoded_len(), 48 + 8 + 8);
    let mut b = [0u8; 64];
    r.encode(&mut b);
    assert_eq!(b[28], 0x14, "IPv4 and the tunnel flag");
    assert_eq!(&b[48..56], &[1, 4, 0, 0, 42, 0, 0, 0]);
    assert_eq!(&b[56..64], &[192, 0, 2, 1, 192, 0, 2, 2]);
    round_trip(&r);
}

#[test]
fn broken_and_nested_tunnels_keep_the_outer_headers() {
    // The VXLAN header without its I flag: malformed.
    let mut f = vxlan_frame();
    f[42] = 0;
    let r = Record::from_frame(1, f.len() as u32, &f, LinkType::Ethernet);
    assert_eq!((r.src_ip4, r.dst_port, r.tunnel), ([192, 0, 2, 2], 4789, 0));
    assert_eq!(r.tunnel_problem, TunnelProblem::Malformed.code());
    assert_eq!(r.encoded_len(), 48);
    let mut b = [0u8; 48];
    r.encode(&mut b);
    assert_eq!(b[28], 4 | 2 << 5);
    round_trip(&r);
    // Cut inside the VXLAN header: truncated.
    let r = Record::from_frame(1, 102, &vxlan_frame()[..46], LinkType::Ethernet);
    assert_eq!(
        (r.src_ip4, r.tunnel, r.tunnel_problem),
        ([192, 0, 2, 2], 0, 1)
    );
    round_trip(&r);
    // VXLAN in IP-in-IP: two tunnels, described by the outermost headers.
    let v = vxlan_frame();
    let f = eth_ipv4(1, 4, [198, 51, 100, 1], [198, 51, 100, 2], &v[14..]);
    let r = Record::from_frame(1, f.len() as u32, &f, LinkType::Ethernet);
    assert_eq!((r.src_ip4, r.protocol, r.tunnel), ([198, 51, 100, 1], 4, 0));
    assert_eq!(r.tunnel_problem, TunnelProblem::Nested.code());
    round_trip(&r);
}

#[test]
fn tunnel_fields_are_checked_when_decoded() {
    let r = Record::from_frame(1, 102, &vxlan_frame(), LinkType::Ethernet);
    let mut b = [0u8; 64];
    r.encode(&mut b);
    for n in 0..64 {
        assert!(
            matches!(Record::decode(&b[..n]), Err(RecordError::Truncated { .. })),
            "{n}"
        );
    }
    // A batch v2 record has no flags.
    assert_eq!(
        Record::len_at(&b, false),
        Err(RecordError::BadIpVersion(0x14))
    );
    assert_eq!(Record::len_at(&b, true), Ok(64));
    let bad = |i: usize, v: u8| {
        let mut c = b;
        c[i] = v;
        Record::decode(&c)
    };
    assert!(
        matches!(bad(48, 9), Err(RecordError::BadTunnel(_))),
        "kind 9"
    );
    assert!(
        matches!(bad(49, 5), Err(RecordError::BadTunnel(_))),
        "carrier v5"
    );
    assert!(
        matches!(bad(50, 1), Err(RecordError::BadTunnel(_))),
        "reserved"
    );
    assert!(
        matches!(bad(28, 0x34), Err(RecordError::BadTunnel(_))),
        "problem and tunnel"
    );
    assert!(
        matches!(bad(28, 0xc4), Err(RecordError::BadTunnel(_))),
        "problem 6"
    );
    // An IPv6 carrier: 32 bytes of addresses.
    let v6 = Record {
        carrier_version: 6,
        carrier_a: [0xfd; 16],
        carrier_b: [0xfe; 16],
        ..r
    };
    assert_eq!(v6.encoded_len(), 48 + 8 + 32);
    round_trip(&v6);
    // MPLS over Ethernet: no carrier addresses.
    let mpls = Record {
        tunnel: TunnelKind::Mpls.code(),
        carrier_version: 0,
        carrier_a: [0; 16],
        carrier_b: [0; 16],
        ..r
    };
    assert_eq!(mpls.encoded_len(), 56);
    round_trip(&mpls);
}
