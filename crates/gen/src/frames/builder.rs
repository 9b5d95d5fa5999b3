//! Writing frames: a builder per sending thread fills prepared slots, rewriting per packet only the
//! lengths, addresses, ports, checksums and (random payloads) payload bytes.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use wire::checksum::{fold, ones_complement_sum, udp_nonzero};
use wire::ip_proto::UDP as UDP_PROTO;
use wire::{IpPair, Ipv4Packet, Ipv6Packet, UdpFrameSpec, UdpPacket};
use wire::{IPV4_HDR, UDP_HDR};

use crate::error::GenError;

use super::options::{FrameOptions, Order, Payload};
use super::payload::{FixedPayload, PayloadFill, RandomPool, BLOCK, RANDOM_POOL_BYTES};

const TTL: u8 = 64;

/// One field (address or port) walking its range; values are offsets added to `first`.
#[derive(Clone, Debug)]
struct FieldWalk {
    first: u128,
    span: u128, // last - first
    next: u128,
    order: Order,
}

impl FieldWalk {
    fn new(first: u128, last: u128, order: Order) -> Self {
        FieldWalk {
            first,
            span: last - first,
            next: 0,
            order,
        }
    }

    #[inline]
    fn value(&mut self, rng: &mut ChaCha8Rng) -> u128 {
        if self.span == 0 {
            return self.first;
        }
        let off = match self.order {
            Order::Cycle => {
                let o = self.next;
                self.next = if o == self.span { 0 } else { o + 1 };
                o
            }
            // Ranges that fit 32 bits (all ports, IPv4, small IPv6 ranges) draw a u32: cheaper.
            Order::Random if self.span < u32::MAX as u128 => {
                rng.gen_range(0..=self.span as u32) as u128
            }
            Order::Random => rng.gen_range(0..=self.span),
        };
        self.first + off
    }
}

/// Sums 16-bit words of a u128 address (the pseudo header and IPv4 header need them).
#[inline]
fn addr_sum(a: u128, v6: bool) -> u32 {
    if v6 {
        (0..8).map(|i| ((a >> (16 * i)) & 0xffff) as u32).sum()
    } else {
        ((a >> 16) & 0xffff) as u32 + (a & 0xffff) as u32
    }
}

/// Shared inputs for the builders of all threads (built once per run).
#[derive(Clone)]
pub struct FrameShared {
    pool: Option<Arc<RandomPool>>,
    file: Option<Arc<Vec<u8>>>,
}

impl FrameShared {
    /// Loads the payload file or fills the random pool (from `pool_rng`) as the options need.
    pub fn new(opts: &FrameOptions, pool_rng: &mut ChaCha8Rng) -> Result<Self, GenError> {
        let mut shared = FrameShared {
            pool: None,
            file: None,
        };
        match &opts.payload {
            Payload::Random | Payload::Half => {
                shared.pool = Some(Arc::new(RandomPool::new(pool_rng, RANDOM_POOL_BYTES)))
            }
            Payload::File(p) => {
                let bytes = std::fs::read(p).map_err(|e| {
                    GenError::Options(format!("cannot read payload file {}: {e}", p.display()))
                })?;
                if bytes.is_empty() {
                    return Err(GenError::Options(format!(
                        "payload file {} is empty: give a file with at least one byte",
                        p.display()
                    )));
                }
                shared.file = Some(Arc::new(bytes));
            }
            Payload::Zero => {}
        }
        Ok(shared)
    }
}

/// Writes frames of one thread's flow into slots.
pub struct FrameBuilder {
    v6: bool,
    l2: usize,
    /// Constant header bytes (Ethernet [+ VLAN] + IP + UDP) with zero in every per-packet field.
    template: Vec<u8>,
    /// IPv4: sum of the header words that never change (version, TOS, flags, TTL, protocol).
    ip_const_sum: u32,
    src_ip: FieldWalk,
    dst_ip: FieldWalk,
    src_port: FieldWalk,
    dst_port: FieldWalk,
    rng: ChaCha8Rng,
    payload: PayloadFill,
    min_ip_len: u16,
    max_ip_len: u16,
    /// Sizes raised to the minimum.
    pub clamped_small: u64,
    /// Sizes lowered to `max_ip_len` (the MTU).
    pub clamped_large: u64,
}

impl FrameBuilder {
    /// A builder for thread `thread` (its source ports are shifted by `thread` range lengths, so threads
    /// have disjoint flows while threads × range length ≤ 65536); `max_ip_len` is the interface MTU. `field_rng` draws
    /// random fields, `payload_rng` picks where this thread starts in the random pool.
    pub fn new(
        opts: &FrameOptions,
        shared: &FrameShared,
        thread: usize,
        max_ip_len: u16,
        field_rng: ChaCha8Rng,
        mut payload_rng: ChaCha8Rng,
    ) -> Result<Self, GenError> {
        opts.validate()?;
        let v6 = opts.is_ipv6();
        let l2 = opts.l2_len();
        let min_ip_len = opts.min_ip_len();
        if max_ip_len < min_ip_len {
            return Err(GenError::Options(format!(
                "MTU {max_ip_len} is below the smallest UDP packet ({min_ip_len} bytes): raise the MTU"
            )));
        }
        // The constant bytes come from wire's frame emitter; the per-packet fields (length, addresses, ports,
        // checksums) are zeroed afterwards and rewritten by `write`.
        let ip = if v6 {
            IpPair::V6 {
                src: Ipv6Addr::UNSPECIFIED,
                dst: Ipv6Addr::UNSPECIFIED,
            }
        } else {
            IpPair::V4 {
                src: Ipv4Addr::UNSPECIFIED,
                dst: Ipv4Addr::UNSPECIFIED,
            }
        };
        let spec = UdpFrameSpec {
            src_mac: opts.src_mac,
            dst_mac: opts.dst_mac,
            vlan: opts.vlan,
            ip,
            src_port: 0,
            dst_port: 0,
            ttl: TTL,
            payload_len: 0,
        };
        let mut template = vec![0u8; spec.frame_len()];
        spec.emit_with_payload_sum(&mut template, 0);
        let mut ip_const_sum = 0;
        if v6 {
            Ipv6Packet::new_unchecked(&mut template[l2..]).set_payload_len(0);
        } else {
            let mut ip = Ipv4Packet::new_unchecked(&mut template[l2..]);
            ip.set_total_len(0);
            ip.set_checksum(0);
            // Length, addresses and checksum are zero now, so this is the sum of the constant words.
            ip_const_sum = ones_complement_sum(&template[l2..l2 + IPV4_HDR]);
        }
        let mut udp = UdpPacket::new_unchecked(&mut template[spec.l4_offset()..]);
        udp.set_len(0);
        udp.set_checksum(0);
        let (sa, sb) = opts.src_ip.bounds().map_err(GenError::Options)?;
        let (da, db) = opts.dst_ip.bounds().map_err(GenError::Options)?;
        // Threads get disjoint source-port ranges: thread t shifts the range by t range lengths (mod 2^16).
        let sp = opts.src_port;
        let width = (sp.last - sp.first) as u32 + 1;
        let shift = (thread as u32 * width) % 65536;
        let sp_first = (sp.first as u32 + shift) % 65536;
        let (sp_first, sp_last) = if sp_first + width - 1 <= 65535 {
            (sp_first, sp_first + width - 1)
        } else {
            // Wrapped past 65535: keep the width, start again low.
            (0, width - 1)
        };
        let payload = match (&opts.payload, &shared.pool, &shared.file) {
            (Payload::Random | Payload::Half, Some(pool), _) => {
                let blocks = (pool.len() - max_ip_len as usize).max(BLOCK) / BLOCK;
                let cursor = payload_rng.gen_range(0..blocks) * BLOCK;
                PayloadFill::Pool { pool: pool.clone(), cursor, half: opts.payload == Payload::Half }
            }
            (Payload::File(_), _, Some(file)) => {
                let n = max_ip_len as usize;
                let bytes = file.iter().copied().cycle().take(n).collect();
                PayloadFill::Fixed(FixedPayload::new(bytes))
            }
            (Payload::Zero, _, _) => PayloadFill::Fixed(FixedPayload::new(vec![0; max_ip_len as usize])),
            _ => {
                return Err(GenError::Options(
                    "frame inputs were prepared for another payload: build FrameShared from the same options".into(),
                ))
            }
        };
        Ok(FrameBuilder {
            v6,
            l2,
            template,
            ip_const_sum,
            src_ip: FieldWalk::new(sa, sb, opts.src_ip_order),
            dst_ip: FieldWalk::new(da, db, opts.dst_ip_order),
            src_port: FieldWalk::new(sp_first as u128, sp_last as u128, opts.src_port_order),
            dst_port: FieldWalk::new(
                opts.dst_port.first as u128,
                opts.dst_port.last as u128,
                opts.dst_port_order,
            ),
            rng: field_rng,
            payload,
            min_ip_len,
            max_ip_len,
            clamped_small: 0,
            clamped_large: 0,
        })
    }

    /// Link-layer header length (14 or 18).
    pub fn l2_len(&self) -> usize {
        self.l2
    }

    /// Largest frame this builder writes (slots must hold it).
    pub fn max_frame_len(&self) -> usize {
        self.l2 + self.max_ip_len as usize
    }

    /// Brings a requested IP length into [minimum, MTU], counting the changes.
    #[inline]
    pub fn clamp(&mut self, ip_len: u16) -> u16 {
        if ip_len < self.min_ip_len {
            self.clamped_small += 1;
            self.min_ip_len
        } else if ip_len > self.max_ip_len {
            self.clamped_large += 1;
            self.max_ip_len
        } else {
            ip_len
        }
    }

    /// Frame length of an (already clamped) IP length.
    #[inline]
    pub fn frame_len(&self, ip_len: u16) -> usize {
        self.l2 + ip_len as usize
    }

    /// Writes the constant bytes into a slot once; [`write`](Self::write) relies on them.
    pub fn prepare_slot(&self, slot: &mut [u8]) {
        slot[..self.template.len()].copy_from_slice(&self.template);
        if let PayloadFill::Fixed(f) = &self.payload {
            let start = self.template.len();
            let n = f.bytes.len().min(slot.len() - start);
            slot[start..start + n].copy_from_slice(&f.bytes[..n]);
        }
    }

    /// Writes the next frame of IP length `ip_len` (clamped with [`clamp`](Self::clamp)) into a prepared
    /// slot; returns the frame length.
    #[inline]
    pub fn write(&mut self, ip_len: u16, slot: &mut [u8]) -> usize {
        let p = self.write_headers(ip_len, slot);
        if let PayloadFill::Pool { pool, .. } = &self.payload {
            let n = p.random.len();
            slot[p.head..p.head + n].copy_from_slice(&pool.bytes[p.random.clone()]);
            slot[p.head + n..p.head + n + p.zeros].fill(0);
        }
        p.head + p.random.len() + p.zeros
    }

    /// Writes everything but a random payload; says where the payload comes from.
    /// Like [`write`](Self::write), but a random payload is not copied: the frame is `slot[..head]`, then
    #[inline]
    fn write_headers(&mut self, ip_len: u16, slot: &mut [u8]) -> Parts {
        let ip_len = ip_len.clamp(self.min_ip_len, self.max_ip_len);
        let hdr = self.template.len();
        let frame_len = self.l2 + ip_len as usize;
        let udp_len = ip_len - (hdr - self.l2 - UDP_HDR) as u16;
        let payload_len = udp_len as usize - UDP_HDR;

        // The draws happen in a fixed order (src, dst, sport, dport) so a seed always gives the same flow.
        let src = self.src_ip.value(&mut self.rng);
        let dst = self.dst_ip.value(&mut self.rng);
        let sport = self.src_port.value(&mut self.rng) as u16;
        let dport = self.dst_port.value(&mut self.rng) as u16;

        let (parts, payload_sum) = match &mut self.payload {
            PayloadFill::Fixed(f) => (
                Parts {
                    head: frame_len,
                    random: 0..0,
                    zeros: 0,
                },
                f.sum(payload_len),
            ),
            PayloadFill::Pool { pool, cursor, half } => {
                let random_len = if *half {
                    payload_len.div_ceil(2)
                } else {
                    payload_len
                };
                if *cursor + random_len > pool.len() {
                    *cursor = 0;
                }
                let range = *cursor..*cursor + random_len;
                let s = pool.sum(range.clone());
                // Walk on, block-aligned: consecutive payloads never repeat pool bytes until the pool wraps.
                *cursor += random_len.div_ceil(BLOCK) * BLOCK;
                let zeros = payload_len - random_len;
                (
                    Parts {
                        head: hdr,
                        random: range,
                        zeros,
                    },
                    s,
                )
            }
        };

        let addr_sums = addr_sum(src, self.v6) + addr_sum(dst, self.v6);
        let ip = &mut slot[self.l2..hdr];
        if self.v6 {
            let mut p = Ipv6Packet::new_unchecked(&mut *ip);
            p.set_payload_len(udp_len);
            p.set_src_addr(&Ipv6Addr::from(src));
            p.set_dst_addr(&Ipv6Addr::from(dst));
        } else {
            let mut p = Ipv4Packet::new_unchecked(&mut *ip);
            p.set_total_len(ip_len);
            p.set_src_addr(Ipv4Addr::from(src as u32));
            p.set_dst_addr(Ipv4Addr::from(dst as u32));
            p.set_checksum(!fold(self.ip_const_sum + ip_len as u32 + addr_sums));
        }
        let ip_hdr = hdr - self.l2 - UDP_HDR;
        let mut udp = UdpPacket::new_unchecked(&mut ip[ip_hdr..]);
        udp.set_src_port(sport);
        udp.set_dst_port(dport);
        udp.set_len(udp_len);
        // Pseudo header (addresses, protocol, length) + UDP header (ports, length) + payload.
        let sum = addr_sums
            + UDP_PROTO as u32
            + 2 * udp_len as u32
            + sport as u32
            + dport as u32
            + payload_sum;
        udp.set_checksum(udp_nonzero(!fold(sum)));
        parts
    }
}

/// Where a frame's bytes are: `head` bytes written in the slot, then `random` bytes of the pool, then zeros.
struct Parts {
    head: usize,
    random: std::ops::Range<usize>,
    zeros: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use wire::Vlan;

    fn builder(opts: &FrameOptions, seed: u64, thread: usize) -> FrameBuilder {
        let mut pool_rng = ChaCha8Rng::seed_from_u64(seed);
        let shared = FrameShared::new(opts, &mut pool_rng).unwrap();
        FrameBuilder::new(
            opts,
            &shared,
            thread,
            1500,
            ChaCha8Rng::seed_from_u64(seed + 1),
            ChaCha8Rng::seed_from_u64(seed + 2),
        )
        .unwrap()
    }

    /// Independent checks: the IP header and the UDP datagram (with its pseudo header) must sum to 0xffff.
    fn assert_checksums(frame: &[u8], l2: usize, v6: bool) {
        let ip = &frame[l2..];
        if v6 {
            let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            assert_eq!(ip.len(), 40 + plen);
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip[8..40]);
            pseudo.extend_from_slice(&(plen as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            pseudo.extend_from_slice(&ip[40..]);
            assert_eq!(
                fold(ones_complement_sum(&pseudo)),
                0xffff,
                "UDP/IPv6 checksum"
            );
        } else {
            assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, ip.len());
            assert_eq!(
                fold(ones_complement_sum(&ip[..20])),
                0xffff,
                "IPv4 header checksum"
            );
            let udp = &ip[20..];
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip[12..20]);
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
            pseudo.extend_from_slice(udp);
            assert_eq!(
                fold(ones_complement_sum(&pseudo)),
                0xffff,
                "UDP/IPv4 checksum"
            );
        }
    }

    #[test]
    fn ipv4_frame_bytes_are_exact() {
        let opts = FrameOptions::default();
        let mut b = builder(&opts, 1, 0);
        let mut slot = vec![0xa5u8; 2048];
        b.prepare_slot(&mut slot);
        let n = b.write(46, &mut slot);
        assert_eq!(n, 60);
        let expect: [u8; 60] = [
            2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
            0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0x26, 0xbd, 10, 0, 0, 1, 10, 0, 0,
            2, // IPv4
            0, 9, 0, 9, 0, 26, 0xeb, 0xa5, // UDP
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // payload
        ];
        assert_eq!(&slot[..60], &expect[..]);
        assert_checksums(&slot[..n], 14, false);
    }

    #[test]
    fn every_payload_and_family_checks_out() {
        let dir = std::env::temp_dir().join(format!("gen-frames-{}", std::process::id()));
        std::fs::write(&dir, b"hello, ringcap!").unwrap();
        for v6 in [false, true] {
            for payload in [
                Payload::Zero,
                Payload::Random,
                Payload::Half,
                Payload::File(dir.clone()),
            ] {
                for vlan in [None, Some(Vlan::dot1q(5, 42))] {
                    let mut opts = if v6 {
                        FrameOptions::ipv6()
                    } else {
                        FrameOptions::default()
                    };
                    opts.payload = payload.clone();
                    opts.vlan = vlan;
                    opts.src_ip = if v6 {
                        "fd00::1-fd00::ffff"
                    } else {
                        "10.0.0.1-10.0.3.255"
                    }
                    .parse()
                    .unwrap();
                    opts.src_ip_order = Order::Random;
                    opts.dst_port = "1000-1010".parse().unwrap();
                    let mut b = builder(&opts, 7, 1);
                    let mut slot = vec![0xa5u8; 2048];
                    b.prepare_slot(&mut slot);
                    for size in [0u16, 28, 29, 47, 48, 49, 100, 333, 1499, 1500, 9000] {
                        let ip_len = b.clamp(size);
                        let n = b.write(ip_len, &mut slot);
                        assert_eq!(n, b.l2_len() + ip_len as usize);
                        assert_checksums(&slot[..n], b.l2_len(), v6);
                        let hdr = b.l2_len() + if v6 { 48 } else { 28 };
                        let pl = &slot[hdr..n];
                        match &payload {
                            Payload::Zero => assert!(pl.iter().all(|&x| x == 0)),
                            Payload::Half => {
                                assert!(pl[pl.len().div_ceil(2)..].iter().all(|&x| x == 0))
                            }
                            Payload::File(_) => {
                                let want: Vec<u8> = b"hello, ringcap!"
                                    .iter()
                                    .copied()
                                    .cycle()
                                    .take(pl.len())
                                    .collect();
                                assert_eq!(pl, &want[..]);
                            }
                            Payload::Random => {}
                        }
                        if let Some(v) = vlan {
                            assert_eq!(&slot[12..16], &[0x81, 0x00, 0xa0, 42]);
                            assert_eq!(v.id(), 42);
                        }
                    }
                    // Below the minimum: 0 (IPv4, minimum 28); 0, 28, 29, 47 (IPv6, minimum 48).
                    assert_eq!(b.clamped_small, if v6 { 4 } else { 1 });
                    assert_eq!(b.clamped_large, 1);
                }
            }
        }
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn same_seed_same_frames_other_thread_other_ports() {
        let opts = FrameOptions {
            payload: Payload::Half,
            src_port: "1000-1003".parse().unwrap(),
            dst_ip: "10.1.0.0-10.1.255.255".parse().unwrap(),
            dst_ip_order: Order::Random,
            ..Default::default()
        };
        let frames = |seed, thread| {
            let mut b = builder(&opts, seed, thread);
            let mut slot = vec![0u8; 2048];
            b.prepare_slot(&mut slot);
            (0..50u16)
                .map(|i| {
                    let n = b.write(100 + i * 7, &mut slot);
                    slot[..n].to_vec()
                })
                .collect::<Vec<_>>()
        };
        let a = frames(5, 0);
        assert_eq!(a, frames(5, 0));
        assert_ne!(a, frames(6, 0));
        // Cycled source ports 1000..=1003 on thread 0; thread 1 gets 1004..=1007.
        let sport = |f: &Vec<u8>| u16::from_be_bytes([f[34], f[35]]);
        assert_eq!(
            a.iter().take(5).map(sport).collect::<Vec<_>>(),
            [1000, 1001, 1002, 1003, 1000]
        );
        let b = frames(5, 1);
        assert_eq!(
            b.iter().take(5).map(sport).collect::<Vec<_>>(),
            [1004, 1005, 1006, 1007, 1004]
        );
        // Random payload halves of consecutive packets differ.
        assert_ne!(a[0][42..60], a[1][42..60]);
    }
}
