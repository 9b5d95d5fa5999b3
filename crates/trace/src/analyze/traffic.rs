//! What the traffic is made of: IP packet sizes (seed 000 Figures 4.1–4.2), the flow table
//! (directional 5-tuples), and from it the protocol mix, top talkers and top ports.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

/// Largest IP length counted individually; longer ones (IPv6 jumbograms) count here.
pub const MAX_IP_LEN: usize = 65_535;

/// A fast, non-keyed hasher for flow keys (FxHash's multiply-rotate). The keys come from our own
/// files, so a keyed hash against collision attacks buys nothing and would cost ~3x per packet.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

type Fx = BuildHasherDefault<FxHasher>;

/// Directional 5-tuple (IP version 0 = not IP: then `proto` is unused and `src_port` holds the ethertype),
/// and the tunnel it came in: a packet in one tunnel is keyed by the packet it carried (the packet
/// table's rule, `wire::describe`), as the index's flow table keys it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub version: u8,
    pub proto: u8,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    pub tunnel: Option<TunnelKey>,
}

/// The tunnel of a flow: its kind, id and carrier addresses (the lower first), as the packet
/// table's `tunnel`, `tunnel_id`, `tunnel_a`, `tunnel_b` give them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TunnelKey {
    /// `wire::TunnelKind::code`.
    pub kind: u8,
    /// None for kinds without an id.
    pub id: Option<u32>,
    pub a: Option<IpAddr>,
    pub b: Option<IpAddr>,
}

impl FlowKey {
    /// Source address, if IP.
    pub fn src_addr(&self) -> Option<IpAddr> {
        addr(self.version, &self.src)
    }
    /// Destination address, if IP.
    pub fn dst_addr(&self) -> Option<IpAddr> {
        addr(self.version, &self.dst)
    }
}

fn addr(version: u8, b: &[u8; 16]) -> Option<IpAddr> {
    match version {
        4 => Some(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        6 => Some(IpAddr::V6(Ipv6Addr::from(*b))),
        _ => None,
    }
}

/// Counters of one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowStats {
    pub first_ns: i64,
    pub last_ns: i64,
    pub packets: u64,
    pub bytes: u64,
}

/// Partial results of one or more files, merged with [`Traffic::merge`].
pub struct Traffic {
    /// Packets per IP length (index = ip_len, clipped at [`MAX_IP_LEN`]).
    pub sizes: Vec<u64>,
    pub packets: u64,
    pub bytes: u64,
    pub flows: HashMap<FlowKey, FlowStats, Fx>,
    /// Packets whose tunnel was not decoded, by `wire::TunnelProblem` name.
    pub tunnel_problems: std::collections::BTreeMap<String, u64>,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            sizes: vec![0; MAX_IP_LEN + 1],
            packets: 0,
            bytes: 0,
            flows: HashMap::default(),
            tunnel_problems: Default::default(),
        }
    }
}

impl Traffic {
    /// Counts one packet.
    #[inline]
    pub fn add(&mut self, ts: i64, wire_len: u32, ip_len: Option<u32>, key: FlowKey) {
        self.packets += 1;
        self.bytes += u64::from(wire_len);
        if let Some(l) = ip_len {
            self.sizes[(l as usize).min(MAX_IP_LEN)] += 1;
        }
        let f = self.flows.entry(key).or_insert(FlowStats {
            first_ns: ts,
            last_ns: ts,
            packets: 0,
            bytes: 0,
        });
        f.first_ns = f.first_ns.min(ts);
        f.last_ns = f.last_ns.max(ts);
        f.packets += 1;
        f.bytes += u64::from(wire_len);
    }

    /// Adds another partial result into this one.
    pub fn merge(mut self, other: Traffic) -> Traffic {
        let (mut big, small) = if self.flows.len() >= other.flows.len() {
            (std::mem::take(&mut self.flows), other.flows)
        } else {
            (other.flows, std::mem::take(&mut self.flows))
        };
        for (k, s) in small {
            big.entry(k)
                .and_modify(|f| {
                    f.first_ns = f.first_ns.min(s.first_ns);
                    f.last_ns = f.last_ns.max(s.last_ns);
                    f.packets += s.packets;
                    f.bytes += s.bytes;
                })
                .or_insert(s);
        }
        for (a, b) in self.sizes.iter_mut().zip(&other.sizes) {
            *a += b;
        }
        let mut tunnel_problems = self.tunnel_problems;
        for (k, n) in other.tunnel_problems {
            *tunnel_problems.entry(k).or_default() += n;
        }
        Traffic {
            sizes: self.sizes,
            packets: self.packets + other.packets,
            bytes: self.bytes + other.bytes,
            flows: big,
            tunnel_problems,
        }
    }
}

/// A row of a count table with its share of the whole.
#[derive(Clone, Debug, Serialize)]
pub struct Share {
    pub name: String,
    pub packets: u64,
    pub bytes: u64,
    /// Share of all packets, percent.
    pub packets_pct: f64,
    /// Share of all bytes, percent.
    pub bytes_pct: f64,
}

/// One IP length among the most frequent.
#[derive(Clone, Debug, Serialize)]
pub struct HeavySize {
    pub size: u32,
    pub packets: u64,
    /// Percent of IP packets.
    pub share_pct: f64,
    /// Percent of IP packets covered by this and all more frequent sizes.
    pub cumulative_pct: f64,
}

/// The size distribution summary.
#[derive(Clone, Debug, Serialize)]
pub struct Sizes {
    /// IP packets counted.
    pub ip_packets: u64,
    /// Distinct IP lengths.
    pub distinct: usize,
    pub min: u32,
    pub max: u32,
    pub mean: f64,
    /// The most frequent lengths with cumulative share.
    pub heavy_hitters: Vec<HeavySize>,
    /// Distinct lengths needed to cover 50 %, 90 % and 99 % of IP packets.
    pub sizes_for_50_90_99_pct: [usize; 3],
}

/// Summary of the IP length histogram.
pub fn size_summary(hist: &[u64], top: usize) -> Sizes {
    let total: u64 = hist.iter().sum();
    let mut nz: Vec<(u32, u64)> = hist
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(s, &c)| (s as u32, c))
        .collect();
    let (min, max) = (nz.first().map_or(0, |x| x.0), nz.last().map_or(0, |x| x.0));
    let mean = if total == 0 {
        0.0
    } else {
        nz.iter().map(|&(s, c)| s as f64 * c as f64).sum::<f64>() / total as f64
    };
    nz.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let pct = |c: u64| {
        if total == 0 {
            0.0
        } else {
            c as f64 * 100.0 / total as f64
        }
    };
    let mut cum = 0u64;
    let mut cover = [0usize; 3];
    let mut heavy = Vec::new();
    for (i, &(s, c)) in nz.iter().enumerate() {
        cum += c;
        for (j, goal) in [50.0, 90.0, 99.0].iter().enumerate() {
            if cover[j] == 0 && pct(cum) >= *goal {
                cover[j] = i + 1;
            }
        }
        if i < top {
            heavy.push(HeavySize {
                size: s,
                packets: c,
                share_pct: pct(c),
                cumulative_pct: pct(cum),
            });
        }
    }
    Sizes {
        ip_packets: total,
        distinct: nz.len(),
        min,
        max,
        mean,
        heavy_hitters: heavy,
        sizes_for_50_90_99_pct: cover,
    }
}

/// Protocol mix, top talkers and top ports, all from the flow table.
#[derive(Clone, Debug, Serialize)]
pub struct Mix {
    pub protocols: Vec<Share>,
    /// Sources with the most bytes.
    pub top_sources: Vec<Share>,
    /// Destinations with the most bytes.
    pub top_destinations: Vec<Share>,
    /// Destination ports (`tcp/443`, `udp/53`) with the most packets.
    pub top_ports: Vec<Share>,
}

/// Name of an IP protocol number.
pub fn proto_name(version: u8, proto: u8) -> String {
    let v = if version == 6 { "IPv6" } else { "IPv4" };
    let p = match proto {
        1 => "ICMP".to_string(),
        2 => "IGMP".to_string(),
        6 => "TCP".to_string(),
        17 => "UDP".to_string(),
        47 => "GRE".to_string(),
        50 => "ESP".to_string(),
        58 => "ICMPv6".to_string(),
        132 => "SCTP".to_string(),
        n => format!("proto {n}"),
    };
    format!("{v}/{p}")
}

fn ethertype_name(et: u16) -> String {
    match et {
        0x0806 => "ARP".into(),
        0x88cc => "LLDP".into(),
        0x8100 | 0x88a8 => "VLAN (cut)".into(),
        0xffff => "unknown link / no ethertype".into(),
        e if e < 0x0600 => "802.3 / LLC".into(),
        e => format!("ethertype 0x{e:04x}"),
    }
}

/// The `n` largest entries of `map` (by bytes or by packets), named only then: formatting every
/// address of a million-flow table would cost more than the whole pass.
fn top<K: Ord + Copy>(
    map: HashMap<K, (u64, u64), Fx>,
    n: usize,
    total: (u64, u64),
    by_bytes: bool,
    name: impl Fn(K) -> String,
) -> Vec<Share> {
    let mut v: Vec<(K, (u64, u64))> = map.into_iter().collect();
    let key = |x: &(K, (u64, u64))| if by_bytes { (x.1 .1, x.1 .0) } else { x.1 };
    v.sort_unstable_by(|a, b| key(b).cmp(&key(a)).then(a.0.cmp(&b.0)));
    v.truncate(n);
    let pct = |a: u64, t: u64| {
        if t == 0 {
            0.0
        } else {
            a as f64 * 100.0 / t as f64
        }
    };
    v.into_iter()
        .map(|(k, (p, b))| Share {
            name: name(k),
            packets: p,
            bytes: b,
            packets_pct: pct(p, total.0),
            bytes_pct: pct(b, total.1),
        })
        .collect()
}

/// Protocol mix, top talkers and ports from the merged flow table.
pub fn mix(flows: &HashMap<FlowKey, FlowStats, Fx>, n: usize) -> Mix {
    // Keys: (version, protocol or ethertype), (version, address), (protocol, port).
    let mut protos: HashMap<(u8, u16), (u64, u64), Fx> = HashMap::default();
    let mut srcs: HashMap<(u8, [u8; 16]), (u64, u64), Fx> = HashMap::default();
    let mut dsts: HashMap<(u8, [u8; 16]), (u64, u64), Fx> = HashMap::default();
    let mut ports: HashMap<(u8, u16), (u64, u64), Fx> = HashMap::default();
    let mut total = (0u64, 0u64);
    fn add<K: std::hash::Hash + Eq>(m: &mut HashMap<K, (u64, u64), Fx>, k: K, s: &FlowStats) {
        let e = m.entry(k).or_default();
        e.0 += s.packets;
        e.1 += s.bytes;
    }
    for (k, s) in flows {
        total.0 += s.packets;
        total.1 += s.bytes;
        if k.version == 0 {
            add(&mut protos, (0, k.src_port), s);
            continue;
        }
        add(&mut protos, (k.version, u16::from(k.proto)), s);
        add(&mut srcs, (k.version, k.src), s);
        add(&mut dsts, (k.version, k.dst), s);
        if matches!(k.proto, 6 | 17 | 132) {
            add(&mut ports, (k.proto, k.dst_port), s);
        }
    }
    let proto = |(v, p): (u8, u16)| {
        if v == 0 {
            ethertype_name(p)
        } else {
            proto_name(v, p as u8)
        }
    };
    let address = |(v, a): (u8, [u8; 16])| addr(v, &a).map_or_else(String::new, |a| a.to_string());
    let port = |(p, port): (u8, u16)| {
        let name = match p {
            6 => "tcp",
            17 => "udp",
            _ => "sctp",
        };
        format!("{name}/{port}")
    };
    Mix {
        protocols: top(protos, usize::MAX, total, false, proto),
        top_sources: top(srcs, n, total, true, address),
        top_destinations: top(dsts, n, total, true, address),
        top_ports: top(ports, n, total, false, port),
    }
}
