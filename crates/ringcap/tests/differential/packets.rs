//! Packets built by hand from a seeded RNG: IPv4/IPv6 with TCP, UDP, ICMP and GRE, fragments, IPv6
//! extension headers, ARP and other EtherTypes, then framed for a link type (Ethernet with VLAN,
//! QinQ or MPLS, Linux cooked, 802.11, PPP, …). Nothing here comes from ringcap's crates: the
//! bytes are what another tool would have written, and only tcpdump judges them.

/// splitmix64: small, seedable, the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5eed_d1ff_0000_0000)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// lo..=hi.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability pct/100.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

// Small address pools, so that host/net/port expressions match some packets and not others.
pub const V4: [[u8; 4]; 9] = [
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [10, 0, 0, 3],
    [10, 0, 0, 4],
    [10, 1, 0, 1],
    [10, 1, 7, 9],
    [192, 168, 1, 20],
    [224, 0, 0, 251],
    [255, 255, 255, 255],
];
pub const V6: [[u8; 16]; 5] = [
    [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    [0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9],
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
];
pub const MACS: [[u8; 6]; 6] = [
    [0x02, 0, 0, 0, 0, 0x01],
    [0x02, 0, 0, 0, 0, 0x02],
    [0x02, 0, 0, 0, 0, 0x03],
    [0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e],
    [0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb],
];
const PORTS: [u16; 10] = [53, 80, 443, 1000, 1003, 1007, 1010, 1011, 5000, 8080];

/// A network-layer packet and the EtherType that announces it.
#[derive(Clone)]
pub struct Net {
    pub ethertype: u16,
    pub bytes: Vec<u8>,
}

impl Net {
    pub fn is_ip(&self) -> bool {
        self.ethertype == 0x0800 || self.ethertype == 0x86dd
    }
}

fn sum16(data: &[u8], mut acc: u32) -> u32 {
    for c in data.chunks(2) {
        acc += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

fn port(rng: &mut Rng) -> u16 {
    if rng.pct(75) {
        rng.pick(&PORTS)
    } else {
        rng.range(1024, 65535) as u16
    }
}

/// Payload lengths: mostly small, some mid-sized, some near the MTU (for `greater 1000`), odd or even.
fn payload_len(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=59 => rng.below(65) as usize,
        60..=84 => rng.range(65, 600) as usize,
        _ => rng.range(900, 1440) as usize,
    }
}

fn payload(rng: &mut Rng) -> Vec<u8> {
    let n = payload_len(rng);
    let mut p = rng.bytes(n);
    // A marker for `udp[8:2] = 0x1234`-style byte tests.
    if p.len() >= 2 && rng.pct(20) {
        p[0] = 0x12;
        p[1] = 0x34;
    }
    p
}

/// A transport header and payload for `proto` between `src` and `dst` (4 or 16 bytes), with its
/// checksum (over the pseudo-header for TCP, UDP and ICMPv6).
fn transport(rng: &mut Rng, proto: u8, src: &[u8], dst: &[u8]) -> Vec<u8> {
    let data = payload(rng);
    let mut t = match proto {
        6 => {
            let opts = rng.pct(30);
            let mut h = vec![0u8; if opts { 32 } else { 20 }];
            h[0..2].copy_from_slice(&port(rng).to_be_bytes());
            h[2..4].copy_from_slice(&port(rng).to_be_bytes());
            h[4..12].copy_from_slice(&rng.bytes(8));
            h[12] = ((h.len() / 4) as u8) << 4;
            // SYN, SYN-ACK, ACK, PSH-ACK, FIN-ACK, RST, RST-ACK, URG-ACK
            h[13] = rng.pick(&[0x02, 0x12, 0x10, 0x18, 0x11, 0x04, 0x14, 0x30]);
            h[14..16].copy_from_slice(&(rng.range(0, 65535) as u16).to_be_bytes());
            if opts {
                // MSS, NOP, window scale, NOP, NOP, EOL
                h[20..32].copy_from_slice(&[2, 4, 5, 0xb4, 1, 3, 3, 7, 1, 1, 0, 0]);
            }
            h
        }
        17 => {
            let mut h = vec![0u8; 8];
            h[0..2].copy_from_slice(&port(rng).to_be_bytes());
            h[2..4].copy_from_slice(&port(rng).to_be_bytes());
            h[4..6].copy_from_slice(&((8 + data.len()) as u16).to_be_bytes());
            h
        }
        1 => {
            // echo request/reply, or port unreachable
            let ty = rng.pick(&[8u8, 0, 3]);
            vec![ty, if ty == 3 { 3 } else { 0 }, 0, 0, 0, 7, 0, 1]
        }
        58 => {
            // echo request/reply, neighbour solicitation
            let ty = rng.pick(&[128u8, 129, 135]);
            vec![ty, 0, 0, 0, 0, 0, 0, 0]
        }
        _ => Vec::new(),
    };
    t.extend_from_slice(&data);
    let at = match proto {
        6 => 16,
        17 => 6,
        1 | 58 => 2,
        _ => return t,
    };
    let mut pseudo = Vec::new();
    if proto != 1 {
        pseudo.extend_from_slice(src);
        pseudo.extend_from_slice(dst);
        if src.len() == 4 {
            pseudo.extend_from_slice(&[0, proto]);
            pseudo.extend_from_slice(&(t.len() as u16).to_be_bytes());
        } else {
            pseudo.extend_from_slice(&(t.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, proto]);
        }
    }
    let c = fold(sum16(&t, sum16(&pseudo, 0)));
    t[at..at + 2].copy_from_slice(&c.to_be_bytes());
    t
}

pub fn ipv4(rng: &mut Rng) -> Vec<u8> {
    let proto = match rng.below(100) {
        0..=39 => 6,
        40..=74 => 17,
        75..=89 => 1,
        90..=94 => 47,
        _ => 132,
    };
    let src = rng.pick(&V4[..7]);
    let dst = rng.pick(&V4);
    // Fragments: most not, some first fragments (MF, with the transport header), some later ones
    // (an offset: no transport header; tcpdump's port tests must not match them).
    let frag = rng.below(100);
    let l4 = if frag >= 95 {
        let n = rng.range(8, 300) as usize;
        rng.bytes(n)
    } else {
        transport(rng, proto, &src, &dst)
    };
    let opts = rng.pct(10);
    let ihl = if opts { 6 } else { 5 };
    let mut h = vec![0u8; ihl * 4];
    h[0] = 0x40 | ihl as u8;
    h[1] = rng.pick(&[0u8, 0x10, 0xb8]);
    let total = (h.len() + l4.len()) as u16;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&(rng.next() as u16).to_be_bytes());
    let flags_off: u16 = match frag {
        0..=84 => 0x4000,
        85..=94 => 0x2000,
        // a later fragment, the last one or not
        _ => (0x2000 * rng.below(2) as u16) | rng.range(1, 180) as u16,
    };
    h[6..8].copy_from_slice(&flags_off.to_be_bytes());
    h[8] = rng.pick(&[1u8, 32, 63, 64, 65, 128, 255]);
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    if opts {
        h[20..24].copy_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
    }
    let c = fold(sum16(&h, 0));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(&l4);
    h
}

pub fn ipv6(rng: &mut Rng) -> Vec<u8> {
    let proto = rng.pick(&[6u8, 6, 17, 17, 58]);
    let src = rng.pick(&V6[..4]);
    let dst = rng.pick(&V6);
    let l4 = transport(rng, proto, &src, &dst);
    // Extension headers: hop-by-hop (8 bytes of padding), or a fragment header.
    let (first, ext) = match rng.below(100) {
        0..=9 => (0u8, vec![proto, 0, 1, 4, 0, 0, 0, 0]),
        10..=14 => {
            let more = rng.below(2) as u8;
            (44u8, vec![proto, 0, 0, more, 0, 0, 0x12, 0x34])
        }
        _ => (proto, Vec::new()),
    };
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    h[1] = rng.below(16) as u8;
    h[4..6].copy_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
    h[6] = first;
    h[7] = rng.pick(&[1u8, 64, 255]);
    h[8..24].copy_from_slice(&src);
    h[24..40].copy_from_slice(&dst);
    h.extend_from_slice(&ext);
    h.extend_from_slice(&l4);
    h
}

pub fn arp(rng: &mut Rng) -> Vec<u8> {
    let op = rng.range(1, 2) as u16;
    let mut a = vec![0, 1, 0x08, 0x00, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&rng.pick(&MACS[..4]));
    a.extend_from_slice(&rng.pick(&V4[..7]));
    a.extend_from_slice(&if op == 1 {
        [0; 6]
    } else {
        rng.pick(&MACS[..4])
    });
    a.extend_from_slice(&rng.pick(&V4[..7]));
    a
}

/// An IP packet around `l4` of protocol `proto`: IPv4 (now and then a first fragment) or IPv6.
fn ip_around(rng: &mut Rng, proto: u8, l4: &[u8]) -> Net {
    if rng.pct(75) {
        let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0];
        h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        if rng.pct(5) {
            h[6] = 0x20; // more fragments: the carried packet goes on elsewhere
        }
        h.extend_from_slice(&rng.pick(&V4[..7]));
        h.extend_from_slice(&rng.pick(&V4[..7]));
        let c = fold(sum16(&h, 0));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h.extend_from_slice(l4);
        return Net {
            ethertype: 0x0800,
            bytes: h,
        };
    }
    let mut h = vec![0x60, 0, 0, 0, 0, 0, proto, 64];
    h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&rng.pick(&V6[..3]));
    h.extend_from_slice(&rng.pick(&V6[..3]));
    h.extend_from_slice(l4);
    Net {
        ethertype: 0x86dd,
        bytes: h,
    }
}

/// A packet in a tunnel, as cloud mirroring and switches send them: GENEVE and VXLAN (UDP
/// 6081, 4789), GRE with or without key carrying IP, Ethernet or ERSPAN II/III, IP-in-IP;
/// now and then a bad or cut tunnel header, which libpcap's `geneve` still reads through.
pub fn tunnel(rng: &mut Rng) -> Net {
    let inner = if rng.pct(70) {
        Net {
            ethertype: 0x0800,
            bytes: ipv4(rng),
        }
    } else {
        Net {
            ethertype: 0x86dd,
            bytes: ipv6(rng),
        }
    };
    let eth = |rng: &mut Rng, n: &Net| -> Vec<u8> {
        let mut f = rng.pick(&MACS[..4]).to_vec();
        f.extend_from_slice(&rng.pick(&MACS[..4]));
        if rng.pct(10) {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
        }
        f.extend_from_slice(&n.ethertype.to_be_bytes());
        f.extend_from_slice(&n.bytes);
        f
    };
    let vni = |rng: &mut Rng| (rng.pick(&[7u32, 42, 1000, 16_777_215]) << 8).to_be_bytes();
    let udp = |rng: &mut Rng, dport: u16, body: &[u8]| -> Vec<u8> {
        let mut u = port(rng).to_be_bytes().to_vec();
        u.extend_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(body);
        u
    };
    let (proto, mut l4) = match rng.below(5) {
        0 | 1 => {
            let words = rng.below(3) as u8;
            let bad = if rng.pct(5) { 0x40 } else { 0 };
            let (ptype, body) = match rng.below(10) {
                0..=5 => (0x6558u16, eth(rng, &inner)),
                6..=8 => (inner.ethertype, inner.bytes.clone()),
                _ => (0x88b5, inner.bytes.clone()),
            };
            let mut g = vec![bad | words, 0];
            g.extend_from_slice(&ptype.to_be_bytes());
            g.extend_from_slice(&vni(rng));
            g.extend_from_slice(&rng.bytes(usize::from(words) * 4));
            g.extend_from_slice(&body);
            (17, udp(rng, 6081, &g))
        }
        2 => {
            let mut v = vec![if rng.pct(95) { 0x08 } else { 0 }, 0, 0, 0];
            v.extend_from_slice(&vni(rng));
            v.extend_from_slice(&eth(rng, &inner));
            (17, udp(rng, 4789, &v))
        }
        3 => {
            let (key, seq) = (rng.pct(50), rng.pct(30));
            let (ptype, body) = match rng.below(5) {
                0 | 1 => (inner.ethertype, inner.bytes.clone()),
                2 => (0x6558u16, eth(rng, &inner)),
                3 => {
                    let mut e = vec![0x10, 100, 0, rng.pick(&[1u8, 123])];
                    e.extend_from_slice(&[0, 0, 0, 1]);
                    e.extend_from_slice(&eth(rng, &inner));
                    (0x88be, e)
                }
                _ => {
                    let mut e = vec![0x20, 100, 0, 123, 0, 0, 0, 1, 0, 0, 0, 0];
                    e.extend_from_slice(&eth(rng, &inner));
                    (0x22eb, e)
                }
            };
            let flags = u16::from(key) << 13 | u16::from(seq || ptype == 0x88be) << 12;
            let mut g = flags.to_be_bytes().to_vec();
            g.extend_from_slice(&ptype.to_be_bytes());
            if key {
                g.extend_from_slice(&rng.pick(&[5u32, 9]).to_be_bytes());
            }
            if flags & 0x1000 != 0 {
                g.extend_from_slice(&[0, 0, 0, 1]);
            }
            g.extend_from_slice(&body);
            (47, g)
        }
        _ => (
            if inner.ethertype == 0x0800 { 4 } else { 41 },
            inner.bytes.clone(),
        ),
    };
    if rng.pct(5) {
        let keep = rng.below(l4.len() as u64) as usize;
        l4.truncate(keep);
    }
    ip_around(rng, proto, &l4)
}

/// Any network-layer packet: IPv4, IPv6, a packet in a tunnel, ARP, or an experimental
/// EtherType.
pub fn net(rng: &mut Rng) -> Net {
    match rng.below(100) {
        0..=44 => Net {
            ethertype: 0x0800,
            bytes: ipv4(rng),
        },
        45..=71 => Net {
            ethertype: 0x86dd,
            bytes: ipv6(rng),
        },
        72..=79 => tunnel(rng),
        80..=91 => Net {
            ethertype: 0x0806,
            bytes: arp(rng),
        },
        _ => {
            let n = rng.range(20, 120) as usize;
            Net {
                ethertype: 0x88b5,
                bytes: rng.bytes(n),
            }
        }
    }
}

/// An Ethernet frame around `n`: untagged, 802.1Q, QinQ (802.1ad or two 802.1Q tags) or MPLS
/// (IP only), padded to 60 bytes as a NIC would on some of them.
pub fn ethernet(rng: &mut Rng, n: &Net) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&rng.pick(&MACS));
    f.extend_from_slice(&rng.pick(&MACS[..4]));
    let vid = |rng: &mut Rng| -> u16 {
        let id = rng.pick(&[100u16, 100, 200, 4094, 1]);
        id | ((rng.below(8) as u16) << 13)
    };
    match rng.below(100) {
        0..=64 => {}
        65..=79 => {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&vid(rng).to_be_bytes());
        }
        80..=84 => {
            f.extend_from_slice(&[0x88, 0xa8]);
            f.extend_from_slice(&vid(rng).to_be_bytes());
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&vid(rng).to_be_bytes());
        }
        85..=89 => {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&vid(rng).to_be_bytes());
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&vid(rng).to_be_bytes());
        }
        _ if n.is_ip() => {
            // An MPLS label stack; libpcap's `mpls` keyword then looks at the IP inside.
            f.extend_from_slice(&[0x88, 0x47]);
            let depth = rng.range(1, 3);
            for i in 0..depth {
                let label = rng.pick(&[1000u32, 16, 1000, 524_287]);
                let bos = (i == depth - 1) as u32;
                let word = (label << 12) | (bos << 8) | 64;
                f.extend_from_slice(&word.to_be_bytes());
            }
            f.extend_from_slice(&n.bytes);
            return pad(rng, f);
        }
        _ => {}
    }
    f.extend_from_slice(&n.ethertype.to_be_bytes());
    f.extend_from_slice(&n.bytes);
    pad(rng, f)
}

fn pad(rng: &mut Rng, mut f: Vec<u8>) -> Vec<u8> {
    if f.len() < 60 && rng.pct(50) {
        f.resize(60, 0);
    }
    f
}

/// One frame for link type `dlt`, or None when the link cannot carry a packet of this kind
/// (the caller draws again).
pub fn frame(rng: &mut Rng, dlt: u32) -> Vec<u8> {
    loop {
        if let Some(f) = try_frame(rng, dlt) {
            return f;
        }
    }
}

fn try_frame(rng: &mut Rng, dlt: u32) -> Option<Vec<u8>> {
    let n = net(rng);
    let mut f = Vec::new();
    match dlt {
        1 => return Some(ethernet(rng, &n)),
        // BSD loopback: the address family in the writer's byte order (little-endian here, as
        // the file header); IPv6 as the BSDs number it (24 NetBSD/OpenBSD, 28 FreeBSD, 30 macOS).
        0 | 108 => {
            let af: u32 = match n.ethertype {
                0x0800 => 2,
                0x86dd => rng.pick(&[24u32, 28, 30]),
                _ if rng.pct(30) => 7, // a family tcpdump knows nothing of
                _ => return None,
            };
            if dlt == 0 {
                f.extend_from_slice(&af.to_le_bytes());
            } else {
                f.extend_from_slice(&af.to_be_bytes());
            }
        }
        12 | 101 | 228 | 229 => {
            let ok = match dlt {
                228 => n.ethertype == 0x0800,
                229 => n.ethertype == 0x86dd,
                _ => n.is_ip(),
            };
            if !ok {
                return None;
            }
        }
        113 => {
            f.extend_from_slice(&(rng.below(5) as u16).to_be_bytes()); // packet type
            f.extend_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
            f.extend_from_slice(&6u16.to_be_bytes());
            f.extend_from_slice(&rng.pick(&MACS[..4]));
            f.extend_from_slice(&[0, 0]);
            if rng.pct(10) {
                f.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
            }
            f.extend_from_slice(&n.ethertype.to_be_bytes());
        }
        276 => {
            f.extend_from_slice(&n.ethertype.to_be_bytes());
            f.extend_from_slice(&[0, 0]);
            f.extend_from_slice(&(rng.range(1, 4) as u32).to_be_bytes()); // interface index
            f.extend_from_slice(&1u16.to_be_bytes());
            f.push(rng.below(5) as u8);
            f.push(6);
            f.extend_from_slice(&rng.pick(&MACS[..4]));
            f.extend_from_slice(&[0, 0]);
        }
        105 | 127 => {
            if dlt == 127 {
                // radiotap: no fields, or flags + rate + channel
                if rng.pct(50) {
                    f.extend_from_slice(&[0, 0, 8, 0, 0, 0, 0, 0]);
                } else {
                    f.extend_from_slice(&[0, 0, 14, 0, 0x0e, 0, 0, 0, 0, 0x6c]);
                    f.extend_from_slice(&[0x6c, 0x09, 0xa0, 0x00]); // 2412 MHz, 2 GHz + CCK
                }
            }
            match rng.below(100) {
                0..=9 => {
                    // beacon: management header, fixed parameters, an SSID
                    f.extend_from_slice(&[0x80, 0x00, 0, 0]);
                    f.extend_from_slice(&MACS[4]);
                    f.extend_from_slice(&rng.pick(&MACS[..4]));
                    f.extend_from_slice(&rng.pick(&MACS[..4]));
                    f.extend_from_slice(&[0x10, 0x00]);
                    f.extend_from_slice(&rng.bytes(8));
                    f.extend_from_slice(&[0x64, 0x00, 0x01, 0x04, 0, 4]);
                    f.extend_from_slice(b"ring");
                    return Some(f);
                }
                10..=14 => {
                    // ACK control frame: no addresses but the receiver's
                    f.extend_from_slice(&[0xd4, 0x00, 0, 0]);
                    f.extend_from_slice(&rng.pick(&MACS[..4]));
                    return Some(f);
                }
                k => {
                    let qos = k >= 70;
                    let to_ds = rng.pct(50);
                    f.push(if qos { 0x88 } else { 0x08 });
                    f.push(if to_ds { 0x01 } else { 0x02 });
                    f.extend_from_slice(&[0x2c, 0x00]);
                    // to DS: BSSID, SA, DA; from DS: DA, BSSID, SA
                    for _ in 0..3 {
                        f.extend_from_slice(&rng.pick(&MACS));
                    }
                    f.extend_from_slice(&(rng.next() as u16 & 0xfff0).to_le_bytes());
                    if qos {
                        f.extend_from_slice(&[rng.below(8) as u8, 0]);
                    }
                    f.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0]);
                    f.extend_from_slice(&n.ethertype.to_be_bytes());
                }
            }
        }
        9 | 50 => {
            let proto: u16 = match n.ethertype {
                0x0800 => 0x0021,
                0x86dd => 0x0057,
                _ if rng.pct(40) => 0xc021, // LCP
                _ => return None,
            };
            f.extend_from_slice(&[0xff, 0x03]);
            f.extend_from_slice(&proto.to_be_bytes());
        }
        104 => {
            // Cisco HDLC: unicast or broadcast address, control 0, then an EtherType.
            f.push(rng.pick(&[0x0fu8, 0x8f]));
            f.push(0);
            f.extend_from_slice(&n.ethertype.to_be_bytes());
        }
        143 => {
            // DOCSIS: a packet PDU header (FC 0, no extended header) before an Ethernet frame.
            let eth = ethernet(rng, &n);
            f.extend_from_slice(&[0x00, 0x00]);
            f.extend_from_slice(&(eth.len() as u16).to_be_bytes());
            f.extend_from_slice(&rng.bytes(2)); // HCS (not checked by anyone here)
            f.extend_from_slice(&eth);
            return Some(f);
        }
        other => panic!("no frame builder for link type {other}"),
    }
    f.extend_from_slice(&n.bytes);
    Some(f)
}

/// The link types of the matrix, with a name for reports.
pub const LINKTYPES: [(u32, &str); 15] = [
    (1, "EN10MB"),
    (0, "NULL"),
    (101, "RAW"),
    (12, "RAW(12)"),
    (113, "LINUX_SLL"),
    (276, "LINUX_SLL2"),
    (127, "IEEE802_11_RADIO"),
    (105, "IEEE802_11"),
    (9, "PPP"),
    (50, "PPP_HDLC"),
    (104, "C_HDLC"),
    (108, "LOOP"),
    (228, "IPV4"),
    (229, "IPV6"),
    (143, "DOCSIS"),
];
