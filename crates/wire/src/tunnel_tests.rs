//! Tests of `tunnel` (kept apart: the module stays under 800 lines).

use super::*;
use std::net::Ipv4Addr;

fn eth(et: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    f.extend_from_slice(&et.to_be_bytes());
    f
}

fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let len = (20 + payload.len()) as u16;
    let mut p = vec![
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
    ];
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(payload);
    p
}

fn ipv6(next: u8, src_last: u8, dst_last: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u16;
    let mut p = vec![0x60, 0, 0, 0, (len >> 8) as u8, len as u8, next, 64];
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[15] = src_last;
    p.extend_from_slice(&a);
    a[15] = dst_last;
    p.extend_from_slice(&a);
    p.extend_from_slice(payload);
    p
}

fn udp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = Vec::new();
    for v in [sp, dp, len, 0] {
        u.extend_from_slice(&v.to_be_bytes());
    }
    u.extend_from_slice(payload);
    u
}

fn tcp(sp: u16, dp: u16) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    t
}

/// The inner packet every test carries: 10.1.0.3:40000 -> 10.1.0.4:80, TCP SYN.
fn inner_ip() -> Vec<u8> {
    ipv4(6, [10, 1, 0, 3], [10, 1, 0, 4], &tcp(40000, 80))
}

fn inner_eth() -> Vec<u8> {
    [eth(0x0800), inner_ip()].concat()
}

/// Ethernet / IPv4 192.0.2.1 -> 192.0.2.2 / `proto` carrying `payload`.
fn outer(proto: u8, payload: &[u8]) -> Vec<u8> {
    [
        eth(0x0800),
        ipv4(proto, [192, 0, 2, 1], [192, 0, 2, 2], payload),
    ]
    .concat()
}

fn gre(flags: u16, proto: u16, key: Option<u32>, seq: bool, payload: &[u8]) -> Vec<u8> {
    let mut flags = flags;
    if key.is_some() {
        flags |= 0x2000;
    }
    if seq {
        flags |= 0x1000;
    }
    let mut g = Vec::new();
    g.extend_from_slice(&flags.to_be_bytes());
    g.extend_from_slice(&proto.to_be_bytes());
    if flags & 0x8000 != 0 {
        g.extend_from_slice(&[0; 4]);
    }
    if let Some(k) = key {
        g.extend_from_slice(&k.to_be_bytes());
    }
    if seq {
        g.extend_from_slice(&7u32.to_be_bytes());
    }
    g.extend_from_slice(payload);
    g
}

fn vxlan(vni: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x08, 0, 0, 0];
    v.extend_from_slice(&(vni << 8).to_be_bytes());
    v.extend_from_slice(payload);
    udp(51000, VXLAN_PORT, &v)
}

fn assert_inner_tcp(d: &Decapsulated) {
    let h = &d.inner;
    assert_eq!(
        h.src_addr(),
        Some(Ipv4Addr::new(10, 1, 0, 3).into()),
        "{d:?}"
    );
    assert_eq!(h.dst_addr(), Some(Ipv4Addr::new(10, 1, 0, 4).into()));
    assert_eq!((h.src_port, h.dst_port), (Some(40000), Some(80)));
    assert_eq!(h.protocol, Some(6));
    assert_eq!(d.problem, None);
}

fn one_layer(d: &Decapsulated, kind: TunnelKind, id: Option<u32>) -> Layer {
    assert_eq!(d.depth, 1, "{d:?}");
    let l = d.layers[0];
    assert_eq!((l.kind, l.id), (kind, id));
    l
}

#[test]
fn a_packet_without_tunnel_is_what_parse_gives() {
    let f = [eth(0x0800), inner_ip()].concat();
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_eq!(d.depth, 0);
    assert_eq!(d.inner, parse(&f, LinkType::Ethernet));
    // Plain UDP to another port is not a tunnel.
    let f = outer(17, &udp(1000, 53, &[0; 12]));
    assert_eq!(decapsulate(&f, LinkType::Ethernet).depth, 0);
}

#[test]
fn vxlan_gives_the_inner_five_tuple_the_vni_and_the_carrier() {
    let f = outer(17, &vxlan(42, &inner_eth()));
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_inner_tcp(&d);
    let l = one_layer(&d, TunnelKind::Vxlan, Some(42));
    assert_eq!(l.carrier_version, Some(IpVersion::V4));
    assert_eq!(&l.carrier_src[..4], &[192, 0, 2, 1]);
    assert_eq!(&l.carrier_dst[..4], &[192, 0, 2, 2]);
    // 14 + 20 + 8 + 8: the inner Ethernet header; its IP 14 further.
    assert_eq!(l.inner_offset, 50);
    assert_eq!(d.inner.l3_offset, Some(64));
    assert_eq!(d.inner.l4_offset, Some(84));
    assert_eq!(&f[84..86], &40000u16.to_be_bytes());
}

#[test]
fn vxlan_without_its_i_flag_or_cut_short_keeps_the_outer_headers() {
    let mut f = outer(17, &vxlan(42, &inner_eth()));
    let outer_h = parse(&f, LinkType::Ethernet);
    f[42] = 0;
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_eq!((d.depth, d.problem), (0, Some(Problem::Malformed)));
    assert_eq!(d.inner, outer_h);
    let f = outer(17, &udp(51000, VXLAN_PORT, &[0x08, 0, 0]));
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_eq!((d.depth, d.problem), (0, Some(Problem::Truncated)));
}

/// The fast path says what `decapsulate` says, or nothing: for the plain VXLAN frame, each of its
/// bytes changed and every length it can be cut to.
#[test]
fn vxlan_fast_path_agrees_with_decapsulate() {
    let f = outer(17, &vxlan(42, &inner_eth()));
    assert_eq!(vxlan_fast(&f, LinkType::Ethernet), Some((42, 50)));
    assert_eq!(vxlan_fast(&f, LinkType::Raw), None);
    let mut said = 0;
    let mut check = |g: &[u8]| {
        if let Some((vni, off)) = vxlan_fast(g, LinkType::Ethernet) {
            let d = decapsulate(g, LinkType::Ethernet);
            let l = d.layers().first().copied();
            assert_eq!(
                l.map(|l| (l.kind, l.id, l.inner_offset, l.payload)),
                Some((TunnelKind::Vxlan, Some(vni), off, Payload::Ethernet)),
                "{g:02x?}"
            );
            said += 1;
        }
    };
    for cut in 0..=f.len() {
        check(&f[..cut]);
    }
    for i in 0..f.len() {
        for v in [0x00, 0x01, 0x08, 0x11, 0x45, 0x81, 0xff] {
            let mut g = f.clone();
            g[i] = v;
            check(&g);
        }
    }
    assert!(said > 300, "{said}");
}

#[test]
fn geneve_skips_its_options_and_carries_ethernet_or_ip() {
    let mut g = vec![0x02, 0, 0x65, 0x58, 0, 0, 7, 0];
    g.extend_from_slice(&[0xab; 8]); // two option words
    g.extend_from_slice(&inner_eth());
    let d = decapsulate(&outer(17, &udp(1, GENEVE_PORT, &g)), LinkType::Ethernet);
    assert_inner_tcp(&d);
    one_layer(&d, TunnelKind::Geneve, Some(7));
    let g = [vec![0, 0, 0x08, 0x00, 0, 1, 0, 0], inner_ip()].concat();
    let d = decapsulate(&outer(17, &udp(1, GENEVE_PORT, &g)), LinkType::Ethernet);
    assert_inner_tcp(&d);
    one_layer(&d, TunnelKind::Geneve, Some(256));
    let g = [vec![0, 0, 0x88, 0x47, 0, 1, 0, 0], inner_ip()].concat();
    let d = decapsulate(&outer(17, &udp(1, GENEVE_PORT, &g)), LinkType::Ethernet);
    assert_eq!((d.depth, d.problem), (0, Some(Problem::Unsupported)));
}

#[test]
fn gre_with_and_without_key_checksum_and_bridged_ethernet() {
    for (flags, key, seq) in [
        (0, None, false),
        (0, Some(5), false),
        (0x8000, Some(9), true),
    ] {
        let f = outer(47, &gre(flags, 0x0800, key, seq, &inner_ip()));
        let d = decapsulate(&f, LinkType::Ethernet);
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::Gre, key);
    }
    let f = outer(47, &gre(0, 0x6558, Some(77), false, &inner_eth()));
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_inner_tcp(&d);
    one_layer(&d, TunnelKind::Gre, Some(77));
    // PPTP's enhanced GRE (version 1) is not decoded.
    let f = outer(47, &gre(1, 0x880b, None, false, &[0; 8]));
    assert_eq!(decapsulate(&f, LinkType::Ethernet).depth, 0);
}

#[test]
fn erspan_types_one_two_and_three() {
    let f = outer(47, &gre(0, 0x88be, None, false, &inner_eth()));
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_inner_tcp(&d);
    one_layer(&d, TunnelKind::Erspan1, None);
    // Type II: version 1, VLAN 0, session 123.
    let e2 = [vec![0x10, 0x00, 0x00, 123, 0, 0, 0, 1], inner_eth()].concat();
    let d = decapsulate(
        &outer(47, &gre(0, 0x88be, None, true, &e2)),
        LinkType::Ethernet,
    );
    assert_inner_tcp(&d);
    one_layer(&d, TunnelKind::Erspan2, Some(123));
    // Type III: version 2, session 0x3ff, with and without the platform sub-header.
    for o in [false, true] {
        let mut e3 = vec![0x20, 0x00, 0x03, 0xff, 0, 0, 0, 1, 0, 0, 0, u8::from(o)];
        if o {
            e3.extend_from_slice(&[0xcd; 8]);
        }
        e3.extend_from_slice(&inner_eth());
        let d = decapsulate(
            &outer(47, &gre(0, 0x22eb, None, true, &e3)),
            LinkType::Ethernet,
        );
        assert_inner_tcp(&d);
        one_layer(&d, TunnelKind::Erspan3, Some(1023));
    }
    // A type II header claiming version 2 is malformed.
    let bad = [vec![0x20, 0, 0, 1, 0, 0, 0, 0], inner_eth()].concat();
    let d = decapsulate(
        &outer(47, &gre(0, 0x88be, None, true, &bad)),
        LinkType::Ethernet,
    );
    assert_eq!((d.depth, d.problem), (0, Some(Problem::Malformed)));
}

fn label(l: u32, bottom: bool) -> [u8; 4] {
    (l << 12 | u32::from(bottom) << 8 | 64).to_be_bytes()
}

#[test]
fn mpls_stacks_over_ethernet_and_gre_and_pseudowires() {
    let f = [
        eth(0x8847),
        label(100, false).to_vec(),
        label(200, true).to_vec(),
        inner_ip(),
    ]
    .concat();
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_inner_tcp(&d);
    let l = one_layer(&d, TunnelKind::Mpls, Some(100));
    assert_eq!((l.labels, l.carrier_version), (2, None));
    // An Ethernet pseudowire behind a control word.
    let f = [
        eth(0x8847),
        label(16, true).to_vec(),
        vec![0; 4],
        inner_eth(),
    ]
    .concat();
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_inner_tcp(&d);
    one_layer(&d, TunnelKind::Mpls, Some(16));
    // MPLS inside GRE: two layers.
    let m = [label(300, true).to_vec(), inner_ip()].concat();
    let d = decapsulate(
        &outer(47, &gre(0, 0x8847, None, false, &m)),
        LinkType::Ethernet,
    );
    assert_inner_tcp(&d);
    assert_eq!(d.depth, 2);
    assert_eq!(d.layers[1].kind, TunnelKind::Mpls);
    assert_eq!(d.layers[1].id, Some(300));
    assert_eq!(&d.layers[1].carrier_src[..4], &[192, 0, 2, 1]);
    // More labels than MAX_LABELS.
    let deep: Vec<u8> = (0..MAX_LABELS + 1)
        .flat_map(|i| label(i as u32, false))
        .collect();
    let d = decapsulate(&[eth(0x8847), deep].concat(), LinkType::Ethernet);
    assert_eq!(d.problem, Some(Problem::TooDeep));
}

#[test]
fn ip_in_ip_and_ipv6_in_ip() {
    let d = decapsulate(&outer(4, &inner_ip()), LinkType::Ethernet);
    assert_inner_tcp(&d);
    one_layer(&d, TunnelKind::IpInIp, None);
    let six = ipv6(17, 1, 2, &udp(5353, 53, &[0; 4]));
    let d = decapsulate(&outer(41, &six), LinkType::Ethernet);
    one_layer(&d, TunnelKind::IpInIp, None);
    assert_eq!(d.inner.ip_version, Some(IpVersion::V6));
    assert_eq!(d.inner.dst_port, Some(53));
    // IPv4 in IPv6, on a raw-IP link.
    let d = decapsulate(&ipv6(4, 1, 2, &inner_ip()), LinkType::Raw);
    assert_inner_tcp(&d);
    assert_eq!(d.layers[0].carrier_version, Some(IpVersion::V6));
}

#[test]
fn nesting_qinq_gre_vxlan_and_the_depth_bound() {
    let mut f = vec![
        2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xa8, 0, 10, 0x81, 0, 0, 20,
    ];
    f.extend_from_slice(&[0x08, 0x00]);
    let in_gre = ipv4(
        17,
        [172, 16, 0, 1],
        [172, 16, 0, 2],
        &vxlan(5, &inner_eth()),
    );
    f.extend_from_slice(&ipv4(
        47,
        [192, 0, 2, 1],
        [192, 0, 2, 2],
        &gre(0, 0x0800, Some(3), false, &in_gre),
    ));
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_inner_tcp(&d);
    let kinds: Vec<_> = d.layers().iter().map(|l| (l.kind, l.id)).collect();
    assert_eq!(
        kinds,
        [(TunnelKind::Gre, Some(3)), (TunnelKind::Vxlan, Some(5))]
    );
    assert_eq!(&d.layers[1].carrier_src[..4], &[172, 16, 0, 1]);
    // Five IP-in-IP layers: four are crossed, the fifth reported.
    let mut p = inner_ip();
    for _ in 0..MAX_DEPTH + 1 {
        p = ipv4(4, [192, 0, 2, 1], [192, 0, 2, 2], &p);
    }
    let d = decapsulate(&p, LinkType::Raw);
    assert_eq!(
        (usize::from(d.depth), d.problem),
        (MAX_DEPTH, Some(Problem::TooDeep))
    );
    assert_eq!(d.inner.protocol, Some(4));
}

#[test]
fn a_bad_carried_packet_keeps_the_carrier_and_no_prefix_panics() {
    // IP-in-IP whose payload is not IP.
    let f = outer(4, &[0x55; 24]);
    let d = decapsulate(&f, LinkType::Ethernet);
    assert_eq!((d.depth, d.problem), (0, Some(Problem::Malformed)));
    assert_eq!(d.inner, parse(&f, LinkType::Ethernet));
    // Every prefix of a nested frame decodes without panicking, never deeper than whole.
    let m = [label(300, true).to_vec(), vxlan_in_ip()].concat();
    let f = outer(47, &gre(0x8000, 0x8847, Some(1), true, &m));
    let whole = decapsulate(&f, LinkType::Ethernet);
    assert_eq!(whole.depth, 3);
    for n in 0..f.len() {
        let d = decapsulate(&f[..n], LinkType::Ethernet);
        assert!(d.depth <= whole.depth);
    }
}

fn vxlan_in_ip() -> Vec<u8> {
    ipv4(
        17,
        [172, 16, 0, 1],
        [172, 16, 0, 2],
        &vxlan(5, &inner_eth()),
    )
}

#[test]
fn vxlan_and_geneve_at_other_ports() {
    // VXLAN to Linux's old default port 8472: a tunnel only where that port is named.
    let mut v = vec![0x08, 0, 0, 0];
    v.extend_from_slice(&(42u32 << 8).to_be_bytes());
    v.extend_from_slice(&inner_eth());
    let f = outer(17, &udp(51000, 8472, &v));
    assert_eq!(decapsulate(&f, LinkType::Ethernet).depth, 0);
    assert_eq!(vxlan_fast(&f, LinkType::Ethernet), None);
    let ports = Ports {
        vxlan: 8472,
        geneve: GENEVE_PORT,
    };
    let d = decapsulate_parsed_ports(&f, LinkType::Ethernet, parse(&f, LinkType::Ethernet), ports);
    let l = one_layer(&d, TunnelKind::Vxlan, Some(42));
    assert_inner_tcp(&d);
    assert_eq!(
        vxlan_fast_port(&f, LinkType::Ethernet, 8472),
        Some((42, l.inner_offset))
    );
    // And 4789 is then not VXLAN.
    let std = outer(17, &vxlan(42, &inner_eth()));
    let d = decapsulate_parsed_ports(
        &std,
        LinkType::Ethernet,
        parse(&std, LinkType::Ethernet),
        ports,
    );
    assert_eq!(d.depth, 0);
    // GENEVE (Ethernet payload) on 6082.
    let mut g = vec![0, 0];
    g.extend_from_slice(&0x6558u16.to_be_bytes());
    g.extend_from_slice(&(7u32 << 8).to_be_bytes());
    g.extend_from_slice(&inner_eth());
    let f = outer(17, &udp(51000, 6082, &g));
    let ports = Ports {
        vxlan: VXLAN_PORT,
        geneve: 6082,
    };
    let d = decapsulate_parsed_ports(&f, LinkType::Ethernet, parse(&f, LinkType::Ethernet), ports);
    one_layer(&d, TunnelKind::Geneve, Some(7));
    assert_inner_tcp(&d);
}
