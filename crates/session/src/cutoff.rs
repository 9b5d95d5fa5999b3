//! `--cutoff SIZE`: keep the first SIZE bytes of each connection (both directions together) and cut the
//! rest, as the Zeek (Bro) Time Machine's "cutoff" does: most bytes of a link belong to a few long
//! connections, whose beginnings (handshakes, requests, headers) are worth far more per byte than their bulk.
//!
//! A [`Cutoff`] belongs to one capture thread's writer lane: no locks, no allocation after
//! [`Cutoff::new`]. With several threads, PACKET_FANOUT_HASH (`--fanout hash`, the default) spreads packets
//! by the kernel's symmetric flow hash, so both directions of a connection reach the same thread and its
//! count is exact. With `--fanout lb` or `cpu` the count is per thread: a connection may keep up to SIZE on
//! each thread it reaches.
//!
//! **Connection key**: (VLAN id, IP protocol, the two (address, port) endpoints in a fixed order), so both
//! directions give the same key. The VLAN id is the tag the kernel stripped into the ring metadata when
//! there is one, else the frame's outer tag. Packets without a readable IP header (ARP, other ethertypes,
//! truncated frames) are never cut and not counted. Later IP fragments carry no ports: they count under
//! the key with ports 0.
//!
//! **Table**: a fixed number of entries (a power of two, at least 4), 4-way set associative: the key's
//! 64-bit hash picks a set and is stored as the entry's tag, with the bytes seen so far and the time last
//! seen. A new connection whose set is full evicts the entry of that set seen least recently (counted as an
//! eviction). **An evicted connection that comes back counts from 0 again**, so it may keep more than
//! SIZE: the table errs towards keeping packets and never cuts a connection early. (Two connections with
//! the same 64-bit hash would share an entry; with a per-process random key that is a 2^-64 chance per pair.)
//!
//! **Decision**: a packet is kept when its connection's byte count *before* it is below SIZE; then its wire
//! length is added. Each connection thus keeps min(total, SIZE) bytes, rounded up to the end of a packet.
//!
//! **Hash**: a hand-written folded multiply (the 128-bit product's halves xored, as foldhash and wyhash do)
//! over five 64-bit words of the key, keyed with four random words drawn once per process from std's
//! `RandomState`, then MurmurHash3's finalizer (the set index uses the low bits). It costs a few ns per packet; SipHash (std's `DefaultHasher`) would cost several times
//! that at line rate. The random key keeps a sender from choosing two connections that collide on
//! purpose (merging a connection into another to have it cut early); it is not a cryptographic guarantee.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use wire::{IpVersion, LinkType, Vlan};

/// Default number of table entries per capture thread (`--cutoff-flows`).
pub const DEFAULT_FLOWS: usize = 262_144;

/// Ways per set.
const WAYS: usize = 4;

/// What a [`Cutoff`] is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutoffConfig {
    /// Bytes kept per connection (wire lengths, both directions); above 0.
    pub size: u64,
    /// Table entries per capture thread, rounded up to a power of two (at least 4).
    pub flows: usize,
}

/// What the cutoff did, per lane; [`CutoffStats::add`] sums the lanes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutoffStats {
    /// The configured SIZE.
    pub size: u64,
    /// Packets the cutoff saw (all of them, also those without an IP header).
    pub packets: u64,
    /// Their wire bytes.
    pub bytes: u64,
    /// Packets cut (not written).
    pub packets_cut: u64,
    /// Their wire bytes.
    pub bytes_cut: u64,
    /// Table entries made for a connection not in the table (a connection evicted and seen again counts again).
    pub connections: u64,
    /// Entries evicted to make room.
    pub evictions: u64,
}

impl CutoffStats {
    /// Adds another lane's counters (the size stays).
    pub fn add(&mut self, o: &CutoffStats) {
        self.size = self.size.max(o.size);
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.packets_cut += o.packets_cut;
        self.bytes_cut += o.bytes_cut;
        self.connections += o.connections;
        self.evictions += o.evictions;
    }
}

/// A connection key: both directions of a connection give the same one ([`FlowKey::new`] orders the ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey {
    /// The tunnel the packet came in ([`wire::TunnelKind::code`] << 32 | its id; 0 outside one):
    /// two tenants of a cloud may use the same inner addresses.
    pub tunnel: u64,
    pub vlan: u16,
    pub v6: bool,
    pub protocol: u8,
    /// The lower (address, port) end.
    pub a: ([u8; 16], u16),
    /// The higher (address, port) end.
    pub b: ([u8; 16], u16),
}

impl FlowKey {
    /// The key of a connection between two ends, in either direction.
    pub fn new(
        vlan: u16,
        v6: bool,
        protocol: u8,
        src: ([u8; 16], u16),
        dst: ([u8; 16], u16),
    ) -> FlowKey {
        let (a, b) = if src <= dst { (src, dst) } else { (dst, src) };
        FlowKey {
            tunnel: 0,
            vlan,
            v6,
            protocol,
            a,
            b,
        }
    }

    /// The key of a frame of `linktype`, with the tag the kernel stripped (`vlan`); None without an IP header.
    /// A packet in one tunnel is keyed by the packet it carries and the tunnel (mirrored traffic
    /// is one outer flow per mirror session: keyed by it, the cutoff would cut whole sessions).
    pub fn of_frame(frame: &[u8], linktype: LinkType, vlan: Option<Vlan>) -> Option<FlowKey> {
        let d = wire::decapsulate(frame, linktype);
        let single = d.depth == 1 && d.problem.is_none() && d.inner.ip_version.is_some();
        let (h, tunnel) = match d.innermost() {
            Some(l) if single => (
                d.inner,
                u64::from(l.kind.code()) << 32 | u64::from(l.id.unwrap_or(0)),
            ),
            // Deeper or broken tunnels keep their outer key, as before decapsulation.
            _ if d.depth > 0 || d.problem.is_some() => (wire::parse(frame, linktype), 0),
            _ => (d.inner, 0),
        };
        let v6 = match h.ip_version? {
            IpVersion::V4 => false,
            IpVersion::V6 => true,
        };
        // The outer tag: that of the frame (inner tags are the tenant's, kept in the tunnel).
        let outer_tag = if tunnel != 0 {
            d.outer_vlan
        } else {
            h.vlan_outer
        };
        let vid = vlan.map(Vlan::id).or(outer_tag).unwrap_or(0);
        let mut key = FlowKey::new(
            vid,
            v6,
            h.protocol.unwrap_or(255),
            (h.src_ip, h.src_port.unwrap_or(0)),
            (h.dst_ip, h.dst_port.unwrap_or(0)),
        );
        key.tunnel = tunnel;
        Some(key)
    }

    /// 64 bits, never 0 (0 marks a free entry).
    fn hash(&self) -> u64 {
        let k = keys();
        let w = |b: &[u8; 16], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let misc = u64::from(self.a.1) << 48
            | u64::from(self.b.1) << 32
            | u64::from(self.vlan) << 16
            | u64::from(self.protocol) << 8
            | u64::from(self.v6);
        let h = fold(w(&self.a.0, 0) ^ k[0], w(&self.a.0, 8) ^ k[1])
            ^ fold(w(&self.b.0, 0) ^ k[2], w(&self.b.0, 8) ^ k[3]).rotate_left(23);
        let h = fold(h ^ misc ^ k[1], k[2] ^ self.tunnel ^ 0x9e37_79b9_7f4a_7c15);
        fmix64(h).max(1)
    }
}

/// The 128-bit product's two halves xored: every input bit reaches every output bit.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// MurmurHash3's 64-bit finalizer: full avalanche, so the low bits that pick the set are as good as the high.
#[inline(always)]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ h >> 33
}

/// Four random words, drawn once per process.
fn keys() -> &'static [u64; 4] {
    static KEYS: OnceLock<[u64; 4]> = OnceLock::new();
    KEYS.get_or_init(|| {
        let s = std::hash::RandomState::new();
        std::array::from_fn(|i| {
            let mut h = s.build_hasher();
            h.write_usize(i);
            // Odd and with high bits set: a multiplier of 0 would lose a word.
            h.finish() | 1 << 63 | 1
        })
    })
}

#[derive(Clone, Copy, Default)]
struct Entry {
    /// The key's hash; 0: free.
    hash: u64,
    /// Wire bytes seen so far.
    bytes: u64,
    /// Timestamp of the last packet, ns.
    last_ns: u64,
}

/// The per-thread cutoff: a bounded table of connections and the counters (see the module doc).
pub struct Cutoff {
    size: u64,
    linktype: LinkType,
    table: Box<[Entry]>,
    /// Sets − 1 (the set count is a power of two).
    set_mask: usize,
    stats: CutoffStats,
}

impl Cutoff {
    /// A table of `cfg.flows` entries (rounded up to a power of two, at least 4), allocated now, for
    /// frames of `linktype`.
    pub fn new(cfg: CutoffConfig, linktype: LinkType) -> Cutoff {
        let n = cfg.flows.max(WAYS).next_power_of_two();
        Cutoff {
            size: cfg.size,
            linktype,
            table: vec![Entry::default(); n].into_boxed_slice(),
            set_mask: n / WAYS - 1,
            stats: CutoffStats {
                size: cfg.size,
                ..CutoffStats::default()
            },
        }
    }

    /// Table entries (after rounding).
    pub fn entries(&self) -> usize {
        self.table.len()
    }

    /// Whether to write this packet: `data` as captured, `vlan` the tag the kernel stripped, `wire_len`
    /// the length as written (tag included), `ts_ns` its time.
    #[inline]
    pub fn keep(&mut self, data: &[u8], vlan: Option<Vlan>, wire_len: u32, ts_ns: u64) -> bool {
        self.stats.packets += 1;
        self.stats.bytes += u64::from(wire_len);
        match FlowKey::of_frame(data, self.linktype, vlan) {
            Some(k) => self.account(&k, wire_len, ts_ns),
            None => true,
        }
    }

    /// The decision for a packet of connection `k` (counted in [`Self::stats`] except the packet totals,
    /// which [`Self::keep`] adds).
    pub fn keep_flow(&mut self, k: &FlowKey, wire_len: u32, ts_ns: u64) -> bool {
        self.account(k, wire_len, ts_ns)
    }

    #[inline]
    fn account(&mut self, k: &FlowKey, wire_len: u32, ts_ns: u64) -> bool {
        let hash = k.hash();
        let set = (hash as usize & self.set_mask) * WAYS;
        let ways = &mut self.table[set..set + WAYS];
        let e = match ways.iter().position(|e| e.hash == hash) {
            Some(i) => &mut ways[i],
            None => {
                // A free way, else the one seen least recently (the first of equals).
                let mut victim = 0;
                for i in 0..WAYS {
                    if ways[i].hash == 0 {
                        victim = i;
                        break;
                    }
                    if ways[i].last_ns < ways[victim].last_ns {
                        victim = i;
                    }
                }
                if ways[victim].hash != 0 {
                    self.stats.evictions += 1;
                }
                self.stats.connections += 1;
                ways[victim] = Entry {
                    hash,
                    bytes: 0,
                    last_ns: ts_ns,
                };
                &mut ways[victim]
            }
        };
        let keep = e.bytes < self.size;
        e.bytes = e.bytes.saturating_add(u64::from(wire_len));
        e.last_ns = e.last_ns.max(ts_ns);
        if !keep {
            self.stats.packets_cut += 1;
            self.stats.bytes_cut += u64::from(wire_len);
        }
        keep
    }

    /// The counters so far.
    pub fn stats(&self) -> CutoffStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(i: u8) -> FlowKey {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[10, 0, 0, 1]);
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&[10, 0, 0, 2]);
        FlowKey::new(0, false, 6, (a, 40000 + u16::from(i)), (b, 80))
    }

    #[test]
    fn both_directions_are_one_key_and_a_connection_keeps_size_rounded_up_to_a_packet() {
        let k = conn(1);
        let back = FlowKey::new(0, false, 6, k.b, k.a);
        assert_eq!(k, back);
        let mut c = Cutoff::new(
            CutoffConfig {
                size: 2500,
                flows: 64,
            },
            LinkType::Ethernet,
        );
        // 1000 + 1000 (2000 < 2500) + 1000 (kept: 2000 before it) then cut.
        let kept: Vec<bool> = (0..5)
            .map(|t| c.keep_flow(if t % 2 == 0 { &k } else { &back }, 1000, t))
            .collect();
        assert_eq!(kept, [true, true, true, false, false]);
        let s = c.stats();
        assert_eq!(
            (s.packets_cut, s.bytes_cut, s.connections, s.evictions),
            (2, 2000, 1, 0)
        );
    }

    /// 4 entries = one set of 4 ways: every connection competes for it. Size 150, packets of 100 bytes
    /// (so a connection keeps two packets), timestamps = the step number.
    #[test]
    fn a_full_set_evicts_the_least_recently_seen_and_an_evicted_connection_starts_from_zero() {
        let mut c = Cutoff::new(
            CutoffConfig {
                size: 150,
                flows: 3,
            },
            LinkType::Ethernet,
        );
        assert_eq!(c.entries(), 4);
        let mut t = 0u64;
        let mut step = |c: &mut Cutoff, i: u8| {
            t += 1;
            c.keep_flow(&conn(i), 100, t)
        };
        // Connections 0..3 fill the set, two packets each (both kept): bytes 200, last seen t=2,4,6,8.
        for i in 0..4 {
            assert!(step(&mut c, i));
            assert!(step(&mut c, i));
        }
        // A third packet of 0 is cut (200 ≥ 150); 0 is now the most recent (t=9).
        assert!(!step(&mut c, 0));
        assert_eq!(c.stats().evictions, 0);
        // Connections 4..8 (five new ones): each evicts the least recently seen entry.
        // 4 evicts 1 (t=4), 5 evicts 2 (t=6), 6 evicts 3 (t=8), 7 evicts 0 (t=9), 8 evicts 4 (t=10).
        for i in 4..9 {
            assert!(step(&mut c, i), "first packet of connection {i}");
        }
        assert_eq!(c.stats().evictions, 5);
        assert_eq!(c.stats().connections, 9);
        // In the table now: 5 (t=11, 100 B), 6, 7, 8. Connection 5's second packet is kept (100 < 150), its
        // third cut (200).
        assert!(step(&mut c, 5));
        assert!(!step(&mut c, 5));
        // Connection 0 had 300 bytes and was cut; evicted, it comes back from 0: kept again (it evicts 6,
        // the least recent at t=12).
        assert!(step(&mut c, 0));
        assert!(step(&mut c, 0));
        assert!(!step(&mut c, 0));
        let s = c.stats();
        assert_eq!(s.evictions, 6);
        assert_eq!(s.connections, 10);
        assert_eq!((s.packets_cut, s.bytes_cut), (3, 300));
        // 6 is gone (evicted), 7 and 8 are still there: 7's second packet is kept, and no new eviction.
        assert!(step(&mut c, 7));
        assert_eq!(c.stats().evictions, 6);
    }

    #[test]
    fn frames_without_ip_are_never_cut_and_the_stripped_tag_is_the_vlan() {
        let mut c = Cutoff::new(CutoffConfig { size: 1, flows: 16 }, LinkType::Ethernet);
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        for t in 0..3 {
            assert!(c.keep(&arp, None, 60, t));
        }
        let s = c.stats();
        assert_eq!(
            (s.packets, s.bytes, s.packets_cut, s.connections),
            (3, 180, 0, 0)
        );

        let mut udp = vec![0u8; 60];
        udp[12..14].copy_from_slice(&[0x08, 0x00]);
        udp[14] = 0x45;
        udp[16..18].copy_from_slice(&46u16.to_be_bytes());
        udp[23] = 17;
        udp[26..30].copy_from_slice(&[10, 0, 0, 1]);
        udp[30..34].copy_from_slice(&[10, 0, 0, 2]);
        udp[34..36].copy_from_slice(&1000u16.to_be_bytes());
        udp[36..38].copy_from_slice(&53u16.to_be_bytes());
        let k = FlowKey::of_frame(&udp, LinkType::Ethernet, Some(Vlan::dot1q(0, 7))).unwrap();
        assert_eq!((k.vlan, k.protocol, k.a.1, k.b.1), (7, 17, 1000, 53));
        // Size 1: the first packet of a connection is kept, the rest cut; each VLAN is its own connection.
        assert!(c.keep(&udp, Some(Vlan::dot1q(0, 7)), 64, 10));
        assert!(!c.keep(&udp, Some(Vlan::dot1q(0, 7)), 64, 11));
        assert!(c.keep(&udp, None, 60, 12));
        assert_eq!(c.stats().connections, 2);
        assert_eq!(c.stats().packets_cut, 1);
    }

    /// Ethernet / IPv4 192.0.2.1 -> 192.0.2.2 / UDP 4789 / VXLAN `vni` / Ethernet / IPv4
    /// 10.1.0.1 -> 10.1.0.`host` / UDP 5000 -> 53.
    fn mirrored(vni: u32, host: u8) -> Vec<u8> {
        let mut inner = vec![0u8; 12];
        inner.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        inner.extend_from_slice(&[10, 1, 0, 1, 10, 1, 0, host]);
        inner.extend_from_slice(&[0x13, 0x88, 0, 53, 0, 8, 0, 0]);
        let mut vx = vec![0x08, 0, 0, 0];
        vx.extend_from_slice(&(vni << 8).to_be_bytes());
        vx.extend_from_slice(&inner);
        let mut f = vec![0u8; 12];
        let ip_len = (28 + vx.len()) as u16;
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&ip_len.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2]);
        f.extend_from_slice(&[0xc3, 0x50, 0x12, 0xb5]);
        f.extend_from_slice(&((8 + vx.len()) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&vx);
        f
    }

    #[test]
    fn mirrored_traffic_is_cut_per_inner_connection_and_tunnel() {
        let k = FlowKey::of_frame(&mirrored(42, 2), LinkType::Ethernet, None).unwrap();
        assert_eq!((k.protocol, k.a.1, k.b.1), (17, 5000, 53));
        assert_eq!(
            (&k.a.0[..4], &k.b.0[..4]),
            (&[10, 1, 0, 1][..], &[10, 1, 0, 2][..])
        );
        assert_eq!(
            k.tunnel,
            u64::from(wire::TunnelKind::Vxlan.code()) << 32 | 42
        );
        // Size 1: each inner connection keeps its first packet, in each VNI (tenants may share
        // addresses); keyed by the outer header the mirror session would be one connection.
        let mut c = Cutoff::new(CutoffConfig { size: 1, flows: 16 }, LinkType::Ethernet);
        for (vni, host) in [(42, 2), (42, 3), (43, 2)] {
            assert!(c.keep(&mirrored(vni, host), None, 100, 1), "{vni} {host}");
            assert!(!c.keep(&mirrored(vni, host), None, 100, 2), "{vni} {host}");
        }
        assert_eq!(c.stats().connections, 3);
    }
}
