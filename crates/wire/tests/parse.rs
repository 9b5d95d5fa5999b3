//! The summary parser on real frames (every field), on every prefix of them, and on random bytes.

mod samples;

use samples::*;
use wire::*;

fn v4(a: [u8; 4]) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&a);
    b
}

fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

fn mac(last: u8) -> Option<MacAddr> {
    Some(MacAddr([2, 0, 0, 0, 0, last]))
}

#[test]
fn udp4_all_fields() {
    let h = parse(UDP4, LinkType::Ethernet);
    let want = Headers {
        src_mac: mac(1),
        dst_mac: mac(2),
        ethertype: Some(0x0800),
        ip_version: Some(IpVersion::V4),
        src_ip: v4([10, 0, 0, 1]),
        dst_ip: v4([10, 0, 0, 2]),
        ip_len: Some(47),
        ip_header_len: Some(20),
        ttl: Some(64),
        protocol: Some(17),
        frag_offset: Some(0),
        src_port: Some(1234),
        dst_port: Some(4321),
        udp_len: Some(27),
        l3_offset: Some(14),
        l4_offset: Some(34),
        ..Default::default()
    };
    assert_eq!(h, want);
    assert_eq!(h.src_addr(), Some("10.0.0.1".parse().unwrap()));
    assert_eq!(h.dst_addr(), Some("10.0.0.2".parse().unwrap()));
    assert!(!h.is_fragment());
    assert_eq!(h.ip_payload_len(), Some(27));
}

#[test]
fn tcp_syn_all_fields() {
    let h = parse(TCP_SYN, LinkType::Ethernet);
    let want = Headers {
        src_mac: mac(1),
        dst_mac: mac(2),
        ethertype: Some(0x0800),
        ip_version: Some(IpVersion::V4),
        src_ip: v4([10, 0, 0, 1]),
        dst_ip: v4([10, 0, 0, 2]),
        ip_len: Some(60),
        ip_header_len: Some(20),
        ttl: Some(64),
        protocol: Some(6),
        frag_offset: Some(0),
        src_port: Some(40001),
        dst_port: Some(9000),
        tcp_flags: Some(TcpFlags(TcpFlags::SYN)),
        tcp_header_len: Some(40),
        l3_offset: Some(14),
        l4_offset: Some(34),
        ..Default::default()
    };
    assert_eq!(h, want);
    let h = parse(TCP_PSH, LinkType::Ethernet);
    assert_eq!(h.tcp_flags, Some(TcpFlags(TcpFlags::PSH | TcpFlags::ACK)));
    assert_eq!(h.tcp_header_len, Some(32));
}

#[test]
fn icmp4_and_arp() {
    let h = parse(ICMP4_ECHO, LinkType::Ethernet);
    assert_eq!((h.icmp_type, h.icmp_code), (Some(8), Some(0)));
    assert_eq!(
        (h.src_port, h.dst_port, h.tcp_flags, h.udp_len),
        (None, None, None, None)
    );
    assert_eq!(
        (h.ip_len, h.l4_offset, h.truncated),
        (Some(84), Some(34), false)
    );

    let h = parse(ARP_REQUEST, LinkType::Ethernet);
    let want = Headers {
        src_mac: mac(1),
        dst_mac: Some(MacAddr::BROADCAST),
        ethertype: Some(0x0806),
        l3_offset: Some(14),
        ..Default::default()
    };
    assert_eq!(h, want);
}

#[test]
fn vlan_and_qinq() {
    let h = parse(VLAN_ICMP, LinkType::Ethernet);
    assert_eq!((h.vlan_outer, h.vlan_inner), (Some(100), None));
    assert_eq!(h.ethertype, Some(0x0800));
    assert_eq!((h.l3_offset, h.l4_offset), (Some(18), Some(38)));
    assert_eq!(h.src_ip, v4([10, 0, 100, 1]));
    assert_eq!(h.icmp_type, Some(8));

    let h = parse(QINQ_ICMP, LinkType::Ethernet);
    assert_eq!((h.vlan_outer, h.vlan_inner), (Some(200), Some(300)));
    assert_eq!(h.ethertype, Some(0x0800));
    assert_eq!((h.l3_offset, h.l4_offset), (Some(22), Some(42)));
    assert_eq!(h.dst_ip, v4([10, 0, 230, 2]));

    // A third tag is skipped; ids of the first two are kept.
    let mut f = QINQ_ICMP[..14].to_vec();
    f.extend_from_slice(&[
        0x00, 0xc8, 0x81, 0x00, 0x01, 0x2c, 0x81, 0x00, 0x00, 0x07, 0x08, 0x00,
    ]);
    f.extend_from_slice(&QINQ_ICMP[22..]);
    let h = parse(&f, LinkType::Ethernet);
    assert_eq!(
        (h.vlan_outer, h.vlan_inner, h.l3_offset),
        (Some(200), Some(300), Some(26))
    );
    assert_eq!(h.icmp_type, Some(8));
}

#[test]
fn ipv6_udp_hbh_and_icmp6() {
    let h = parse(UDP6, LinkType::Ethernet);
    let want = Headers {
        src_mac: mac(1),
        dst_mac: mac(2),
        ethertype: Some(0x86dd),
        ip_version: Some(IpVersion::V6),
        src_ip: v6("2001:db8::1"),
        dst_ip: v6("2001:db8::2"),
        ip_len: Some(58),
        ip_header_len: Some(40),
        ttl: Some(64),
        protocol: Some(17),
        src_port: Some(5555),
        dst_port: Some(6666),
        udp_len: Some(18),
        l3_offset: Some(14),
        l4_offset: Some(54),
        ..Default::default()
    };
    assert_eq!(h, want);

    let h = parse(IPV6_HBH_MLD, LinkType::Ethernet);
    assert_eq!(h.protocol, Some(ip_proto::ICMPV6));
    assert_eq!(h.ip_header_len, Some(48));
    assert_eq!(
        (h.l4_offset, h.icmp_type, h.icmp_code),
        (Some(62), Some(143), Some(0))
    );
    assert_eq!(
        (h.ttl, h.ip_len, h.ip_payload_len()),
        (Some(1), Some(76), Some(28))
    );
    assert_eq!(h.dst_mac, Some(MacAddr([0x33, 0x33, 0, 0, 0, 0x16])));

    let h = parse(ICMP6_ECHO, LinkType::Ethernet);
    assert_eq!(
        (h.icmp_type, h.icmp_code, h.frag_offset),
        (Some(128), Some(0), None)
    );
}

#[test]
fn fragments() {
    let h = parse(FRAG4_FIRST, LinkType::Ethernet);
    assert!(h.is_fragment());
    assert_eq!((h.frag_offset, h.more_fragments), (Some(0), true));
    assert_eq!(
        (h.src_port, h.dst_port, h.udp_len),
        (Some(48074), Some(7777), Some(1608))
    );
    assert_eq!(
        (h.ip_len, h.truncated),
        (Some(1500), false),
        "snap length cut only payload"
    );

    let h = parse(FRAG4_LAST, LinkType::Ethernet);
    assert_eq!((h.frag_offset, h.more_fragments), (Some(1480), false));
    assert_eq!(
        (h.protocol, h.l4_offset, h.src_port, h.truncated),
        (Some(17), None, None, false)
    );

    let h = parse(FRAG6_FIRST, LinkType::Ethernet);
    assert_eq!((h.frag_offset, h.more_fragments), (Some(0), true));
    assert_eq!(
        (h.protocol, h.ip_header_len, h.l4_offset),
        (Some(17), Some(48), Some(62))
    );
    assert_eq!(
        (h.src_port, h.dst_port, h.udp_len),
        (Some(35451), Some(7777), Some(1608))
    );

    let h = parse(FRAG6_LAST, LinkType::Ethernet);
    assert_eq!((h.frag_offset, h.more_fragments), (Some(1448), false));
    assert_eq!(
        (h.protocol, h.l4_offset, h.src_port),
        (Some(17), None, None)
    );
    assert!(h.is_fragment());
}

#[test]
fn cooked_linux_captures() {
    let eth = parse(UDP4, LinkType::Ethernet);
    let h = parse(SLL_UDP4, LinkType::LinuxSll);
    assert_eq!(h.src_mac, mac(1));
    assert_eq!(h.dst_mac, None);
    assert_eq!((h.l3_offset, h.l4_offset), (Some(16), Some(36)));
    assert_eq!(
        (h.src_ip, h.dst_ip, h.ip_len),
        (eth.src_ip, eth.dst_ip, eth.ip_len)
    );
    assert_eq!(
        (h.src_port, h.dst_port, h.udp_len),
        (eth.src_port, eth.dst_port, eth.udp_len)
    );

    let h = parse(SLL2_UDP4, LinkType::LinuxSll2);
    assert_eq!(h.src_mac, mac(1));
    assert_eq!(
        (h.l3_offset, h.l4_offset, h.ethertype),
        (Some(20), Some(40), Some(0x0800))
    );
    assert_eq!(
        (h.src_port, h.dst_port, h.udp_len),
        (eth.src_port, eth.dst_port, eth.udp_len)
    );

    let h = parse(SLL_VLAN_ICMP, LinkType::LinuxSll);
    assert_eq!(
        (h.vlan_outer, h.ethertype, h.l3_offset),
        (Some(100), Some(0x0800), Some(20))
    );
    assert_eq!(h.icmp_type, Some(8));
}

#[test]
fn raw_and_loopback_link_types() {
    let ip4 = &UDP4[14..];
    let ip6 = &UDP6[14..];
    let full4 = parse(UDP4, LinkType::Ethernet);
    let full6 = parse(UDP6, LinkType::Ethernet);
    for (lt, f) in [(LinkType::Raw, ip4), (LinkType::Ipv4, ip4)] {
        let h = parse(f, lt);
        assert_eq!((h.l3_offset, h.l4_offset), (Some(0), Some(20)));
        assert_eq!(
            (h.src_ip, h.src_port, h.src_mac, h.ethertype),
            (full4.src_ip, Some(1234), None, None)
        );
    }
    for (lt, f) in [(LinkType::Raw, ip6), (LinkType::Ipv6, ip6)] {
        let h = parse(f, lt);
        assert_eq!((h.dst_ip, h.dst_port), (full6.dst_ip, Some(6666)));
    }
    // Raw IPv4 link type given IPv6 bytes: malformed, not misparsed.
    let h = parse(ip6, LinkType::Ipv4);
    assert!(h.malformed && h.ip_version.is_none());

    // DLT_NULL in either byte order, DLT_LOOP in network order; AF_INET6 values of several OSes.
    let cases: [([u8; 4], &[u8], Option<IpVersion>); 6] = [
        ([2, 0, 0, 0], ip4, Some(IpVersion::V4)),
        ([0, 0, 0, 2], ip4, Some(IpVersion::V4)),
        ([10, 0, 0, 0], ip6, Some(IpVersion::V6)),
        ([0, 0, 0, 24], ip6, Some(IpVersion::V6)),
        ([30, 0, 0, 0], ip6, Some(IpVersion::V6)),
        ([0, 0, 0, 99], ip4, None),
    ];
    for (fam, ip, want) in cases {
        let mut f = fam.to_vec();
        f.extend_from_slice(ip);
        for lt in [LinkType::Null, LinkType::Loop] {
            let h = parse(&f, lt);
            assert_eq!(h.ip_version, want, "family {fam:?}");
            if want.is_some() {
                assert_eq!(h.l3_offset, Some(4));
            }
        }
    }
}

#[test]
fn link_type_numbers() {
    for (dlt, lt) in [
        (1, LinkType::Ethernet),
        (101, LinkType::Raw),
        (12, LinkType::Raw),
        (228, LinkType::Ipv4),
        (229, LinkType::Ipv6),
        (113, LinkType::LinuxSll),
        (276, LinkType::LinuxSll2),
        (0, LinkType::Null),
        (108, LinkType::Loop),
    ] {
        assert_eq!(LinkType::from_pcap(dlt), Some(lt));
        if dlt != 12 {
            assert_eq!(lt.pcap(), dlt);
        }
    }
    assert_eq!(LinkType::from_pcap(105), None); // 802.11
    assert_eq!(LinkType::from_pcap(u32::MAX), None);
}

#[test]
fn ethertype_fallbacks() {
    // LLDP (0x88cc) and an 802.3 length field: link fields only.
    let mut f = UDP4.to_vec();
    f[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
    let h = parse(&f, LinkType::Ethernet);
    assert_eq!(
        (h.ethertype, h.l3_offset, h.ip_version, h.truncated),
        (Some(0x88cc), None, None, false)
    );
    f[12..14].copy_from_slice(&46u16.to_be_bytes());
    assert_eq!(parse(&f, LinkType::Ethernet).ethertype, Some(46));
}

#[test]
fn malformed_headers_flagged() {
    let mut f = TCP_SYN.to_vec();
    f[14 + 32] = 0x30; // TCP data offset 3 words
    let h = parse(&f, LinkType::Ethernet);
    assert!(h.malformed);
    assert_eq!((h.src_port, h.tcp_header_len), (Some(40001), Some(12)));

    let mut f = UDP4.to_vec();
    f[14] = 0x43; // IHL 3
    let h = parse(&f, LinkType::Ethernet);
    assert!(h.malformed && h.l4_offset.is_none());
    // IP total length shorter than the UDP header: truncated by the IP length, fields inside it still read.
    let mut f = UDP4.to_vec();
    f[16..18].copy_from_slice(&26u16.to_be_bytes());
    let h = parse(&f, LinkType::Ethernet);
    assert!(h.truncated);
    assert_eq!((h.src_port, h.udp_len), (Some(1234), Some(27)));
    f[16..18].copy_from_slice(&25u16.to_be_bytes());
    let h = parse(&f, LinkType::Ethernet);
    assert_eq!(
        (h.src_port, h.udp_len, h.truncated),
        (Some(1234), None, true)
    );
}

/// Fields a prefix yields must equal the full frame's; a short prefix is flagged truncated.
#[test]
fn every_prefix_of_every_sample() {
    for &(name, frame, _, lt) in ALL {
        let full = parse(frame, lt);
        assert!(!full.truncated && !full.malformed, "{name}");
        let end_of_headers = full.l4_offset.map(|o| o as usize + 8).unwrap_or(0);
        for n in 0..frame.len() {
            let h = parse(&frame[..n], lt);
            macro_rules! same {
                ($($f:ident),*) => {$(
                    if h.$f.is_some() {
                        assert_eq!(h.$f, full.$f, "{name} prefix {n} field {}", stringify!($f));
                    }
                )*};
            }
            same!(
                src_mac,
                dst_mac,
                ethertype,
                vlan_outer,
                vlan_inner,
                ip_version,
                ip_len,
                ip_header_len
            );
            same!(
                ttl,
                protocol,
                frag_offset,
                src_port,
                dst_port,
                tcp_flags,
                tcp_header_len,
                udp_len
            );
            same!(icmp_type, icmp_code, l3_offset, l4_offset);
            if h.ip_version.is_some() {
                assert_eq!(
                    (h.src_ip, h.dst_ip),
                    (full.src_ip, full.dst_ip),
                    "{name} prefix {n}"
                );
            }
            if n < end_of_headers {
                assert!(h.truncated, "{name} prefix {n} not flagged truncated");
            }
            assert!(!h.malformed, "{name} prefix {n}");
        }
    }
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

const LINK_TYPES: [LinkType; 8] = [
    LinkType::Ethernet,
    LinkType::Raw,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Null,
    LinkType::Loop,
];

#[test]
fn random_bytes_and_mutated_samples_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = [0u8; 256];
    let mut line = String::with_capacity(512);
    for i in 0..200_000 {
        let n = (rng.next() % 256) as usize;
        for b in &mut buf[..n] {
            *b = rng.next() as u8;
        }
        let lt = LINK_TYPES[i % LINK_TYPES.len()];
        let h = parse(&buf[..n], lt);
        if let Some(o) = h.l4_offset {
            assert!(o as usize <= n);
        }
        line.clear();
        format_line(&mut line, rng.next(), &buf[..n], n as u32, lt).unwrap();
    }
    // Flip a few bytes of real frames: reaches deep paths random bytes rarely do.
    for i in 0..200_000 {
        let &(_, frame, wire, lt) = &ALL[i % ALL.len()];
        let f = &mut buf[..frame.len().min(256)];
        f.copy_from_slice(&frame[..f.len()]);
        for _ in 0..1 + rng.next() % 4 {
            let at = (rng.next() as usize) % f.len();
            f[at] = rng.next() as u8;
        }
        let cut = (rng.next() as usize) % (f.len() + 1);
        let h = parse(&f[..cut], lt);
        if let Some(o) = h.l3_offset {
            assert!(o as usize <= cut);
        }
        line.clear();
        format_line(&mut line, 0, &f[..cut], wire, lt).unwrap();
    }
}
