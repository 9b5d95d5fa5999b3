//! Tests of `decap` (frames built by hand here; the kernel and scapy ones are in
//! crates/ringcap/tests/decap.rs).

use super::*;

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

fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u16;
    let mut p = vec![0x60, 0, 0, 0, (len >> 8) as u8, len as u8, next, 64];
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[15] = 1;
    p.extend_from_slice(&a);
    a[15] = 2;
    p.extend_from_slice(&a);
    p.extend_from_slice(payload);
    p
}

fn udp(dp: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = Vec::new();
    for v in [51000, dp, len, 0] {
        u.extend_from_slice(&v.to_be_bytes());
    }
    u.extend_from_slice(payload);
    u
}

fn vxlan_hdr(vni: u32) -> Vec<u8> {
    let mut v = vec![0x08, 0, 0, 0];
    v.extend_from_slice(&(vni << 8).to_be_bytes());
    v
}

/// The carried frame: Ethernet / IPv4 10.1.0.3 -> 10.1.0.4 / UDP 53 with `n` bytes.
fn inner(n: usize) -> Vec<u8> {
    [
        eth(0x0800),
        ipv4(17, [10, 1, 0, 3], [10, 1, 0, 4], &udp(53, &vec![0xab; n])),
    ]
    .concat()
}

fn outer4(proto: u8, payload: &[u8]) -> Vec<u8> {
    [
        eth(0x0800),
        ipv4(proto, [192, 0, 2, 1], [192, 0, 2, 2], payload),
    ]
    .concat()
}

fn vxlan(vni: u32, port: u16, carried: &[u8]) -> Vec<u8> {
    outer4(17, &udp(port, &[vxlan_hdr(vni), carried.to_vec()].concat()))
}

fn decap(spec: &str) -> Decap {
    Decap::new(spec.parse().unwrap())
}

/// The comment text of the options (opt_comment's value).
fn comment(d: &Decap) -> String {
    let o = d.opts();
    assert_eq!(u16::from_ne_bytes([o[0], o[1]]), 1, "opt_comment first");
    let n = usize::from(u16::from_ne_bytes([o[2], o[3]]));
    assert_eq!(o.len(), 4 + n.div_ceil(4) * 4 + 4, "then only opt_endofopt");
    String::from_utf8(o[4..4 + n].to_vec()).unwrap()
}

#[test]
fn the_flag_reads_kinds_and_ports_and_refuses_the_rest() {
    let c: DecapConfig = "vxlan".parse().unwrap();
    assert_eq!(c.to_string(), "vxlan:4789");
    let c: DecapConfig = "vxlan:8472,geneve,gre,erspan".parse().unwrap();
    assert_eq!(c.to_string(), "vxlan:8472,geneve:6081,gre,erspan");
    assert_eq!(
        "GENEVE:7000".parse::<DecapConfig>().unwrap().geneve,
        Some(7000)
    );
    for (bad, says) in [
        ("foo", "not a tunnel kind"),
        ("vxlan:notaport", "PORT must be a UDP port"),
        ("vxlan:0", "PORT must be a UDP port"),
        ("vxlan:70000", "PORT must be a UDP port"),
        ("gre:5", "has no port"),
        ("vxlan,vxlan:8472", "given twice"),
        ("vxlan:6081,geneve", "cannot share UDP port 6081"),
        ("ipip", "carries IP packets"),
        ("mpls", "carries IP packets"),
        ("vxlan,", "empty tunnel kind"),
    ] {
        let e = bad.parse::<DecapConfig>().unwrap_err();
        assert!(e.contains(says), "`{bad}`: {e}");
    }
}

#[test]
fn vxlan_gives_the_carried_frame_its_wire_length_and_a_comment() {
    let mut d = decap("vxlan");
    let carried = inner(30);
    let f = vxlan(42, 4789, &carried);
    let (got, wire) = d.strip(&f, f.len() as u32, None).unwrap();
    assert_eq!(got, &carried[..]);
    assert_eq!(wire as usize, carried.len());
    assert_eq!(comment(&d), "vxlan 42 192.0.2.1 > 192.0.2.2");
    // The kernel took a VLAN tag out of the carrier: named, not written.
    let tag = Some(Vlan {
        tpid: 0x8100,
        tci: 0x2064,
    });
    let (got, _) = d.strip(&f, f.len() as u32, tag).unwrap();
    assert_eq!(got, &carried[..]);
    assert_eq!(comment(&d), "vxlan 42 192.0.2.1 > 192.0.2.2 vlan 100");
    // A tag in the frame (the slow path): the same.
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x65]);
    tagged.extend_from_slice(&f[12..]);
    let (got, _) = d.strip(&tagged, tagged.len() as u32, None).unwrap();
    assert_eq!(got, &carried[..]);
    assert_eq!(comment(&d), "vxlan 42 192.0.2.1 > 192.0.2.2 vlan 101");
    let s = d.stats();
    assert_eq!((s.decapsulated, s.kept_whole()), (3, 0));
    assert_eq!(
        s.bytes_stripped as usize,
        2 * (f.len() - carried.len()) + tagged.len() - carried.len()
    );
}

#[test]
fn snaplen_cuts_stay_cuts_and_padding_is_not_the_carried_frame() {
    let mut d = decap("vxlan,gre");
    let carried = inner(300);
    let f = vxlan(7, 4789, &carried);
    // Captured 128 bytes of it: the carried frame is cut, its wire length is whole.
    let (got, wire) = d.strip(&f[..128], f.len() as u32, None).unwrap();
    assert_eq!(got, &carried[..128 - 50]);
    assert_eq!(wire as usize, carried.len());
    // gretap with a 14-byte carried frame, the carrier padded to 60 on the wire.
    let small = eth(0x88b5);
    let mut g = vec![0, 0, 0x65, 0x58];
    g.extend_from_slice(&small);
    let mut f = outer4(47, &g);
    assert_eq!(f.len(), 52);
    f.resize(60, 0);
    let (got, wire) = d.strip(&f, 60, None).unwrap();
    assert_eq!((got, wire), (&small[..], 14));
    assert_eq!(comment(&d), "gre 192.0.2.1 > 192.0.2.2");
    // With a key.
    let mut g = vec![0x20, 0, 0x65, 0x58, 0, 0, 0, 5];
    g.extend_from_slice(&carried);
    let f = outer4(47, &g);
    let (got, _) = d.strip(&f, f.len() as u32, None).unwrap();
    assert_eq!(got, &carried[..]);
    assert_eq!(comment(&d), "gre 5 192.0.2.1 > 192.0.2.2");
}

#[test]
fn what_is_kept_whole_is_counted_by_why() {
    let mut d = decap("vxlan,geneve");
    // Not tunnelled.
    let plain = inner(10);
    assert!(d.strip(&plain, plain.len() as u32, None).is_none());
    // VXLAN on a port not asked for.
    let f = vxlan(42, 8472, &inner(10));
    assert!(d.strip(&f, f.len() as u32, None).is_none());
    // GENEVE carrying IPv4: no Ethernet frame to write.
    let mut g = vec![0, 0, 0x08, 0x00, 0, 0, 7, 0];
    g.extend_from_slice(&inner(10)[14..]);
    let f = outer4(17, &udp(6081, &g));
    assert!(d.strip(&f, f.len() as u32, None).is_none());
    // VXLAN without its I flag, and one cut inside its header.
    let mut f = vxlan(42, 4789, &inner(10));
    f[42] = 0;
    assert!(d.strip(&f, f.len() as u32, None).is_none());
    let f = vxlan(42, 4789, &inner(10));
    assert!(d.strip(&f[..46], f.len() as u32, None).is_none());
    // gretap when only vxlan and geneve are asked for.
    let mut g = vec![0, 0, 0x65, 0x58];
    g.extend_from_slice(&inner(10));
    let f = outer4(47, &g);
    assert!(d.strip(&f, f.len() as u32, None).is_none());
    let s = d.stats();
    assert_eq!(
        (s.decapsulated, s.not_tunnelled, s.not_ethernet, s.bad),
        (0, 3, 1, 2)
    );
    assert_eq!(s.kept_whole(), 6);
}

#[test]
fn the_outermost_tunnel_only_and_other_ports_and_carriers() {
    // VXLAN in VXLAN: the inner VXLAN packet is written, the outer VNI named.
    let mut d = decap("vxlan");
    let nested = vxlan(8, 4789, &inner(10));
    let f = vxlan(9, 4789, &nested);
    let (got, _) = d.strip(&f, f.len() as u32, None).unwrap();
    assert_eq!(got, &nested[..]);
    assert_eq!(comment(&d), "vxlan 9 192.0.2.1 > 192.0.2.2");
    // VXLAN on 8472, asked for.
    let mut d = decap("vxlan:8472");
    let carried = inner(10);
    let f = vxlan(42, 8472, &carried);
    assert_eq!(d.strip(&f, f.len() as u32, None).unwrap().0, &carried[..]);
    let f = vxlan(42, 4789, &carried);
    assert!(d.strip(&f, f.len() as u32, None).is_none());
    // GENEVE with options over IPv6.
    let mut d = decap("geneve");
    let mut g = vec![0x02, 0, 0x65, 0x58, 0, 0, 0x2a, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    g.extend_from_slice(&carried);
    let f = [eth(0x86dd), ipv6(17, &udp(6081, &g))].concat();
    let (got, wire) = d.strip(&f, f.len() as u32, None).unwrap();
    assert_eq!((got, wire as usize), (&carried[..], carried.len()));
    assert_eq!(comment(&d), "geneve 42 fd00::1 > fd00::2");
    // ERSPAN type II (GRE with a sequence number), session 123.
    let mut d = decap("erspan");
    let mut e = vec![
        0x10, 0, 0x88, 0xbe, 0, 0, 0, 1, 0x10, 0x01, 0x00, 0x7b, 0, 0, 0, 0,
    ];
    e.extend_from_slice(&carried);
    let f = outer4(47, &e);
    assert_eq!(d.strip(&f, f.len() as u32, None).unwrap().0, &carried[..]);
    assert_eq!(comment(&d), "erspan2 123 192.0.2.1 > 192.0.2.2");
}
