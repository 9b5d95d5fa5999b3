//! Every accessor of every view, on real captured frames (tests/samples). Expected values are read off
//! the hex in the sample file and agree with `tcpdump -v` on the same bytes (quoted in comments).

mod samples;

use std::net::{Ipv4Addr, Ipv6Addr};

use samples::*;
use wire::*;

fn mac(last: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 0, last])
}

const V6_1: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const V6_2: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

#[test]
fn ethernet_udp4() {
    let eth = EthernetFrame::new_checked(UDP4).unwrap();
    assert_eq!(eth.dst_addr(), mac(2));
    assert_eq!(eth.src_addr(), mac(1));
    assert_eq!(eth.ethertype(), ethertype::IPV4);
    assert_eq!(eth.payload().len(), 61 - 14);
    assert_eq!(eth.dst_addr().to_string(), "02:00:00:00:00:02");
}

#[test]
fn ipv4_udp4() {
    // tcpdump -v: IP (tos 0x0, ttl 64, id 31803, offset 0, flags [DF], proto UDP (17), length 47)
    let eth = EthernetFrame::new_checked(UDP4).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.version(), 4);
    assert_eq!(ip.header_len(), 20);
    assert_eq!(ip.dscp(), 0);
    assert_eq!(ip.ecn(), 0);
    assert_eq!(ip.total_len(), 47);
    assert_eq!(ip.ident(), 31803);
    assert!(ip.dont_frag());
    assert!(!ip.more_frags());
    assert_eq!(ip.frag_offset(), 0);
    assert!(!ip.is_fragment());
    assert_eq!(ip.ttl(), 64);
    assert_eq!(ip.protocol(), ip_proto::UDP);
    assert_eq!(ip.checksum(), 0xaa80);
    assert!(ip.verify_checksum(), "kernel-computed IPv4 header checksum");
    assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
    assert!(ip.options().is_empty());
    assert_eq!(ip.payload().len(), 27);

    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(udp.src_port(), 1234);
    assert_eq!(udp.dst_port(), 4321);
    assert_eq!(udp.len(), 27);
    // veth offload: the captured checksum is the partial (pseudo-header) sum, 0x142f in the bytes.
    assert_eq!(udp.checksum(), 0x142f);
    assert_eq!(udp.payload(), b"hello, ringcap wire");
}

#[test]
fn tcp_syn_every_field() {
    let eth = EthernetFrame::new_checked(TCP_SYN).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.protocol(), ip_proto::TCP);
    assert_eq!(ip.total_len(), 60);
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(tcp.src_port(), 40001);
    assert_eq!(tcp.dst_port(), 9000);
    assert_eq!(tcp.seq_number(), 1353121631);
    assert_eq!(tcp.ack_number(), 0);
    assert_eq!(tcp.header_len(), 40);
    assert_eq!(tcp.flags(), TcpFlags(TcpFlags::SYN));
    assert_eq!(tcp.flags().to_string(), "S");
    assert_eq!(tcp.window(), 64240);
    assert_eq!(tcp.checksum(), 0x1431);
    assert_eq!(tcp.urgent(), 0);
    assert_eq!(tcp.options().len(), 20);
    assert!(tcp.payload().is_empty());
    let opts: Vec<TcpOption> = tcp.option_iter().collect();
    assert_eq!(
        opts,
        vec![
            TcpOption::Mss(1460),
            TcpOption::SackPermitted,
            TcpOption::Timestamp {
                val: 2116704926,
                ecr: 0
            },
            TcpOption::Nop,
            TcpOption::WindowScale(10),
        ]
    );
}

#[test]
fn tcp_syn_ack_and_psh() {
    let ip = Ipv4Packet::new_checked(&TCP_SYN_ACK[14..]).unwrap();
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(tcp.flags().0, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(tcp.flags().to_string(), "S.");
    assert_eq!(tcp.seq_number(), 1108595180);
    assert_eq!(tcp.ack_number(), 1353121632);
    assert_eq!(tcp.window(), 65160);

    let ip = Ipv4Packet::new_checked(&TCP_PSH[14..]).unwrap();
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(tcp.flags().to_string(), "P.");
    assert_eq!(tcp.header_len(), 32);
    assert_eq!(tcp.payload(), b"ping");
}

#[test]
fn tcp_flags_display_in_tcpdump_order() {
    assert_eq!(TcpFlags(0).to_string(), "none");
    assert_eq!(TcpFlags(TcpFlags::FIN | TcpFlags::ACK).to_string(), "F.");
    assert_eq!(TcpFlags(TcpFlags::RST | TcpFlags::ACK).to_string(), "R.");
    assert_eq!(TcpFlags(0x1ff).to_string(), "FSRP.UEWe");
}

#[test]
fn tcp_options_malformed_stop_without_panic() {
    // mss with a length byte past the end, then garbage.
    let v: Vec<_> = TcpOptions::new(&[1, 2, 9, 5]).collect();
    assert_eq!(v, vec![TcpOption::Nop, TcpOption::Malformed { kind: 2 }]);
    let v: Vec<_> = TcpOptions::new(&[3, 1, 7]).collect();
    assert_eq!(v, vec![TcpOption::Malformed { kind: 3 }]);
    let v: Vec<_> = TcpOptions::new(&[2, 3, 7, 0, 1]).collect();
    assert_eq!(
        v,
        vec![
            TcpOption::Other {
                kind: 2,
                data: &[7]
            },
            TcpOption::EndOfList
        ]
    );
}

#[test]
fn icmp4_echo() {
    // tcpdump -v: IP (tos 0x0, ttl 64, id 42653, offset 0, flags [DF], proto ICMP (1), length 84)
    let ip = Ipv4Packet::new_checked(&ICMP4_ECHO[14..]).unwrap();
    assert_eq!(ip.ident(), 42653);
    assert!(ip.verify_checksum());
    let icmp = IcmpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(icmp.msg_type(), icmp::v4::ECHO_REQUEST);
    assert_eq!(icmp.code(), 0);
    assert_eq!(icmp.checksum(), 0x2cf6);
    assert_eq!(icmp.echo_ident(), 0x1234);
    assert_eq!(icmp.echo_seq(), 1);
    assert_eq!(icmp.rest_of_header(), 0x1234_0001);
    assert!(icmp.verify_checksum_v4());
    assert_eq!(icmp.payload().len(), 56);
    assert_eq!(icmp.payload()[0], 0x10);
}

#[test]
fn arp_request_and_reply() {
    let eth = EthernetFrame::new_checked(ARP_REQUEST).unwrap();
    assert_eq!(eth.dst_addr(), MacAddr::BROADCAST);
    assert_eq!(eth.ethertype(), ethertype::ARP);
    let arp = ArpPacket::new_checked(eth.payload()).unwrap();
    assert_eq!(arp.hw_type(), 1);
    assert_eq!(arp.proto_type(), 0x0800);
    assert_eq!(arp.hw_len(), 6);
    assert_eq!(arp.proto_len(), 4);
    assert_eq!(arp.opcode(), arp::op::REQUEST);
    assert!(arp.is_eth_ipv4());
    assert_eq!(arp.sender_mac(), Some(mac(1)));
    assert_eq!(arp.sender_ip(), Some(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(arp.target_mac(), Some(MacAddr([0; 6])));
    assert_eq!(arp.target_ip(), Some(Ipv4Addr::new(10, 0, 0, 2)));
    assert_eq!(arp.sender_hw(), &[2, 0, 0, 0, 0, 1]);
    assert_eq!(arp.sender_proto(), &[10, 0, 0, 1]);
    assert_eq!(arp.target_hw(), &[0; 6]);
    assert_eq!(arp.target_proto(), &[10, 0, 0, 2]);

    let arp = ArpPacket::new_checked(&ARP_REPLY[14..]).unwrap();
    assert_eq!(arp.opcode(), arp::op::REPLY);
    assert_eq!(arp.sender_mac(), Some(mac(2)));
    assert_eq!(arp.target_mac(), Some(mac(1)));
}

#[test]
fn arp_short_or_odd_sizes() {
    assert!(ArpPacket::new_checked(&ARP_REQUEST[14..14 + 27]).is_err());
    // hlen 255 / plen 255 claims 8 + 2 * 510 bytes.
    let mut odd = ARP_REQUEST[14..].to_vec();
    odd[4] = 255;
    odd[5] = 255;
    assert!(matches!(
        ArpPacket::new_checked(&odd[..]),
        Err(Error::Truncated { need: 1028, .. })
    ));
}

#[test]
fn vlan_single_tag() {
    let eth = EthernetFrame::new_checked(VLAN_ICMP).unwrap();
    assert_eq!(eth.ethertype(), ethertype::VLAN);
    let tag = VlanHeader::new_checked(eth.payload()).unwrap();
    assert_eq!(tag.tci(), 0x6064);
    assert_eq!(tag.pcp(), 3);
    assert!(!tag.dei());
    assert_eq!(tag.vid(), 100);
    assert_eq!(tag.ethertype(), ethertype::IPV4);
    let ip = Ipv4Packet::new_checked(tag.payload()).unwrap();
    assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 0, 100, 1));
    assert_eq!(vlan::tci(3, false, 100), 0x6064);
}

#[test]
fn vlan_stacked_qinq() {
    let eth = EthernetFrame::new_checked(QINQ_ICMP).unwrap();
    assert_eq!(eth.ethertype(), ethertype::QINQ);
    let outer = VlanHeader::new_checked(eth.payload()).unwrap();
    assert_eq!(outer.vid(), 200);
    assert_eq!(outer.ethertype(), ethertype::VLAN);
    let inner = VlanHeader::new_checked(outer.payload()).unwrap();
    assert_eq!(inner.vid(), 300);
    assert_eq!(inner.ethertype(), ethertype::IPV4);
    let ip = Ipv4Packet::new_checked(inner.payload()).unwrap();
    assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 0, 230, 2));
}

#[test]
fn ipv6_udp() {
    // tcpdump -v: IP6 (flowlabel 0xc0b72, hlim 64, next-header UDP (17) payload length: 18)
    let ip = Ipv6Packet::new_checked(&UDP6[14..]).unwrap();
    assert_eq!(ip.version(), 6);
    assert_eq!(ip.traffic_class(), 0);
    assert_eq!(ip.flow_label(), 0xc0b72);
    assert_eq!(ip.payload_len(), 18);
    assert_eq!(ip.next_header(), ip_proto::UDP);
    assert_eq!(ip.hop_limit(), 64);
    assert_eq!(ip.src_addr(), V6_1);
    assert_eq!(ip.dst_addr(), V6_2);
    assert_eq!(
        ip.upper_layer(),
        UpperLayer {
            protocol: ip_proto::UDP,
            offset: 0,
            fragment: None,
            complete: true
        }
    );
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!(
        (udp.src_port(), udp.dst_port(), udp.len()),
        (5555, 6666, 18)
    );
    assert_eq!(udp.payload(), b"v6 payload");
}

#[test]
fn ipv6_hop_by_hop_skipped() {
    // tcpdump -v: IP6 (hlim 1, next-header Options (0) payload length: 36) ... HBH (rtalert: 0x0000) (padn)
    let ip = Ipv6Packet::new_checked(&IPV6_HBH_MLD[14..]).unwrap();
    assert_eq!(ip.next_header(), ip_proto::HOPOPTS);
    assert_eq!(ip.hop_limit(), 1);
    assert_eq!(ip.payload_len(), 36);
    let ul = ip.upper_layer();
    assert_eq!(
        ul,
        UpperLayer {
            protocol: ip_proto::ICMPV6,
            offset: 8,
            fragment: None,
            complete: true
        }
    );
    let icmp = IcmpPacket::new_checked(&ip.payload()[ul.offset..]).unwrap();
    assert_eq!(icmp.msg_type(), 143);
    assert_eq!(icmp.code(), 0);
}

#[test]
fn ipv6_fragment_header() {
    // tcpdump -v: frag (0x2dce96e1:0|1448) 35451 > 7777: UDP, length 1600
    let ip = Ipv6Packet::new_checked(&FRAG6_FIRST[14..]).unwrap();
    assert_eq!(ip.next_header(), ip_proto::FRAGMENT);
    let frag = Ipv6Fragment {
        offset: 0,
        more: true,
        ident: 0x2dce96e1,
    };
    assert_eq!(
        ip.upper_layer(),
        UpperLayer {
            protocol: ip_proto::UDP,
            offset: 8,
            fragment: Some(frag),
            complete: true
        }
    );
    // frag (0x2dce96e1:1448|160)
    let ip = Ipv6Packet::new_checked(&FRAG6_LAST[14..]).unwrap();
    let frag = Ipv6Fragment {
        offset: 1448,
        more: false,
        ident: 0x2dce96e1,
    };
    assert_eq!(
        ip.upper_layer(),
        UpperLayer {
            protocol: ip_proto::UDP,
            offset: 8,
            fragment: Some(frag),
            complete: true
        }
    );
}

#[test]
fn ipv6_extension_chain_and_truncation() {
    // Hand-built payload: dest-opts(8) -> routing(16) -> AH(12+4=16) -> TCP.
    let mut p = vec![0u8; 40];
    p[0] = ip_proto::ROUTING; // dest opts: next = routing, len 0 -> 8 bytes
    p[8] = ip_proto::AH; // routing: next = AH, len 1 -> 16 bytes
    p[9] = 1;
    p[24] = ip_proto::TCP; // AH: next = TCP, payload len 2 -> (2 + 2) * 4 = 16 bytes
    p[25] = 2;
    let ul = skip_extension_headers(ip_proto::DSTOPTS, &p);
    assert_eq!(
        ul,
        UpperLayer {
            protocol: ip_proto::TCP,
            offset: 40,
            fragment: None,
            complete: true
        }
    );
    for cut in 0..40 {
        let ul = skip_extension_headers(ip_proto::DSTOPTS, &p[..cut]);
        assert!(!ul.complete, "cut at {cut}");
        assert!(ul.offset <= cut);
    }
}

#[test]
fn ipv4_fragments() {
    // tcpdump -v: id 32060, offset 0, flags [+], length 1500 (first, snaplen 64)
    let ip = Ipv4Packet::new_checked(&FRAG4_FIRST[14..]).unwrap();
    assert!(ip.more_frags());
    assert!(!ip.dont_frag());
    assert_eq!(ip.frag_offset(), 0);
    assert!(ip.is_fragment());
    assert_eq!(ip.total_len(), 1500);
    assert_eq!(
        ip.payload().len(),
        64 - 14 - 20,
        "payload is what the snap length kept"
    );
    // id 32060, offset 1480, flags [none], length 148
    let ip = Ipv4Packet::new_checked(&FRAG4_LAST[14..]).unwrap();
    assert!(!ip.more_frags());
    assert_eq!(ip.frag_offset(), 1480);
    assert!(ip.is_fragment());
    assert_eq!(ip.ident(), 32060);
    assert_eq!(ip.payload().len(), 128);
}

#[test]
fn ipv4_options_and_checks() {
    // The UDP4 header with a 4-byte option (router alert 94 04 00 00), IHL 6, checksum refilled.
    let mut b = UDP4[14..].to_vec();
    b.splice(20..20, [0x94, 0x04, 0x00, 0x00]);
    let mut ip = Ipv4Packet::new_unchecked(&mut b[..]);
    ip.set_version_and_header_len(24);
    ip.set_total_len(51);
    ip.fill_checksum();
    let ip = Ipv4Packet::new_checked(&b[..]).unwrap();
    assert_eq!(ip.header_len(), 24);
    assert_eq!(ip.options(), &[0x94, 0x04, 0, 0]);
    assert!(ip.verify_checksum());
    assert_eq!(&ip.payload()[8..], b"hello, ringcap wire");

    // Ethernet padding after the total length is not payload.
    let mut padded = UDP4[14..].to_vec();
    padded.extend_from_slice(&[0; 13]);
    assert_eq!(
        Ipv4Packet::new_checked(&padded[..])
            .unwrap()
            .payload()
            .len(),
        27
    );

    let mut bad = UDP4[14..].to_vec();
    bad[0] = 0x44;
    assert!(matches!(
        Ipv4Packet::new_checked(&bad[..]),
        Err(Error::Malformed { .. })
    ));
    bad[0] = 0x65;
    assert!(matches!(
        Ipv4Packet::new_checked(&bad[..]),
        Err(Error::Malformed { .. })
    ));
    bad[0] = 0x4f; // 60-byte header in a 47-byte buffer
    assert!(matches!(
        Ipv4Packet::new_checked(&bad[..]),
        Err(Error::Truncated {
            need: 60,
            have: 47,
            ..
        })
    ));
    bad[0] = 0x45;
    bad[2..4].copy_from_slice(&10u16.to_be_bytes());
    assert!(matches!(
        Ipv4Packet::new_checked(&bad[..]),
        Err(Error::Malformed { .. })
    ));
    assert!(Ipv4Packet::new_checked(&UDP4[14..33]).is_err());
}

#[test]
fn errors_say_what_and_what_to_do() {
    let e = EthernetFrame::new_checked(&UDP4[..10]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Ethernet header truncated: needs 14 bytes, buffer has 10 \
         (packet cut by the snap length, or not a Ethernet packet)"
    );
    let e = TcpPacket::new_checked(&[0u8; 20][..]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "malformed TCP header: data offset below 5 words"
    );
}

#[test]
fn every_view_rejects_every_short_prefix() {
    for n in 0..14 {
        assert!(EthernetFrame::new_checked(&UDP4[..n]).is_err());
    }
    for n in 0..4 {
        assert!(VlanHeader::new_checked(&VLAN_ICMP[14..14 + n]).is_err());
    }
    for n in 0..40 {
        assert!(Ipv6Packet::new_checked(&UDP6[14..14 + n]).is_err());
    }
    for n in 0..40 {
        assert!(TcpPacket::new_checked(&TCP_SYN[34..34 + n]).is_err());
    }
    for n in 0..8 {
        assert!(UdpPacket::new_checked(&UDP4[34..34 + n]).is_err());
        assert!(IcmpPacket::new_checked(&ICMP4_ECHO[34..34 + n]).is_err());
    }
}

#[test]
fn setters_round_trip() {
    let mut b = [0xa5u8; 60];
    let mut eth = EthernetFrame::new_unchecked(&mut b[..]);
    eth.set_dst_addr(mac(9));
    eth.set_src_addr(mac(8));
    eth.set_ethertype(0x88cc);
    let eth = EthernetFrame::new_checked(&b[..]).unwrap();
    assert_eq!(
        (eth.dst_addr(), eth.src_addr(), eth.ethertype()),
        (mac(9), mac(8), 0x88cc)
    );

    let mut t = [0u8; 60];
    let mut tcp = TcpPacket::new_unchecked(&mut t[..]);
    tcp.set_src_port(1);
    tcp.set_dst_port(2);
    tcp.set_seq_number(3);
    tcp.set_ack_number(4);
    tcp.set_header_len_and_flags(24, TcpFlags(TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR));
    tcp.set_window(5);
    tcp.set_checksum(6);
    tcp.set_urgent(7);
    let tcp = TcpPacket::new_checked(&t[..]).unwrap();
    assert_eq!(
        (
            tcp.src_port(),
            tcp.dst_port(),
            tcp.seq_number(),
            tcp.ack_number()
        ),
        (1, 2, 3, 4)
    );
    assert_eq!(
        (tcp.header_len(), tcp.flags().to_string()),
        (24, "SEW".to_string())
    );
    assert_eq!((tcp.window(), tcp.checksum(), tcp.urgent()), (5, 6, 7));

    let mut a = [0xa5u8; 28];
    ArpPacket::new_unchecked(&mut a[..]).emit_eth_ipv4(
        arp::op::REQUEST,
        (mac(1), Ipv4Addr::new(10, 0, 0, 1)),
        (MacAddr([0; 6]), Ipv4Addr::new(10, 0, 0, 2)),
    );
    assert_eq!(&a[..], &ARP_REQUEST[14..]);

    let mut ic = [0xa5u8; 16];
    let mut icmp = IcmpPacket::new_unchecked(&mut ic[..]);
    icmp.set_type_code(8, 0);
    icmp.set_echo(0x1234, 7);
    icmp.fill_checksum_v4();
    assert!(IcmpPacket::new_checked(&ic[..])
        .unwrap()
        .verify_checksum_v4());
}
