//! Internet checksum (RFC 1071) and incremental update (RFC 1624).
//!
//! A *sum* here is a one's complement sum of big-endian 16-bit words, kept in a `u32` so several sums can
//! be added with plain `+` (each function returns at most 0xffff, so adding up to 65 536 of them cannot
//! overflow) and folded once with [`fold`]. The checksum written into a header is `!fold(sum)`.

use std::net::{Ipv4Addr, Ipv6Addr};

/// One's complement sum of `data` as big-endian 16-bit words (an odd last byte is padded with zero),
/// folded to at most 0xffff.
///
/// Hand-written fast path: reads 8 bytes at a time in native order and adds the two 32-bit halves into a
/// 64-bit accumulator (no carry handling per word); the sum of native-order words is the byte-swapped
/// sum of big-endian words (RFC 1071 §2(B)), so one swap at the end fixes the order.
#[inline]
pub fn ones_complement_sum(data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w & 0xffff_ffff) + (w >> 32);
    }
    let mut pairs = chunks.remainder().chunks_exact(2);
    for p in &mut pairs {
        acc += u16::from_ne_bytes([p[0], p[1]]) as u64;
    }
    if let [last] = pairs.remainder() {
        acc += u16::from_ne_bytes([*last, 0]) as u64;
    }
    let mut s = (acc & 0xffff_ffff) + (acc >> 32);
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    // Native-order words summed; convert the folded result to big-endian order.
    u16::from_be(s as u16) as u32
}

/// Sum of `data` as it contributes when it starts at byte `offset` of the checksummed region (bytes at an
/// odd offset sit in the low half of their words, which byte-swaps their sum).
#[inline]
pub fn ones_complement_sum_at(data: &[u8], offset: usize) -> u32 {
    let s = ones_complement_sum(data) as u16;
    if offset % 2 == 1 {
        s.swap_bytes() as u32
    } else {
        s as u32
    }
}

/// Folds the carries of a sum into 16 bits (not complemented).
#[inline]
pub fn fold(mut sum: u32) -> u16 {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// The Internet checksum of `data` (the value stored in a header whose checksum field was zero).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(ones_complement_sum(data))
}

/// Sum of the IPv4 pseudo header (RFC 768 / RFC 793): addresses, protocol, upper-layer length.
#[inline]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u32 {
    let s = src.octets();
    let d = dst.octets();
    let w = |b: [u8; 2]| u16::from_be_bytes(b) as u32;
    w([s[0], s[1]])
        + w([s[2], s[3]])
        + w([d[0], d[1]])
        + w([d[2], d[3]])
        + protocol as u32
        + len as u32
}

/// Sum of the IPv6 pseudo header (RFC 8200 §8.1): addresses, upper-layer length, next header.
#[inline]
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, protocol: u8, len: u32) -> u32 {
    ones_complement_sum(&src.octets())
        + ones_complement_sum(&dst.octets())
        + (len >> 16)
        + (len & 0xffff)
        + protocol as u32
}

/// RFC 1624 eqn. 3 on sums: the new checksum after data summing to `old_sum` is replaced by data
/// summing to `new_sum` (both sums as placed in the checksummed region, see [`ones_complement_sum_at`]).
#[inline]
pub fn update_sum(checksum: u16, old_sum: u32, new_sum: u32) -> u16 {
    // HC' = ~(~HC + ~m + m')
    !fold((!checksum) as u32 + (!fold(old_sum)) as u32 + fold(new_sum) as u32)
}

/// New checksum after one 16-bit word changed from `old` to `new` (RFC 1624).
#[inline]
pub fn update_word(checksum: u16, old: u16, new: u16) -> u16 {
    update_sum(checksum, old as u32, new as u32)
}

/// New checksum after the bytes `old` were replaced by `new` at the same even offset (e.g. an address).
#[inline]
pub fn update(checksum: u16, old: &[u8], new: &[u8]) -> u16 {
    update_sum(checksum, ones_complement_sum(old), ones_complement_sum(new))
}

/// UDP sends a computed checksum of 0 as 0xffff (0 means "no checksum", RFC 768).
#[inline]
pub const fn udp_nonzero(c: u16) -> u16 {
    if c == 0 {
        0xffff
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Textbook definition: big-endian words, end-around carry after every add.
    fn naive_sum(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                (c[0] as u16) << 8
            };
            s += w as u32;
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2, so the checksum is 220d.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(ones_complement_sum(&d)), 0xddf2);
        assert_eq!(checksum(&d), 0x220d);
    }

    #[test]
    fn fast_sum_equals_textbook_sum() {
        let mut x: u32 = 1;
        let data: Vec<u8> = (0..4099)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        for start in 0..3 {
            for len in (0..300).chain([1499, 1500, 4096]) {
                let d = &data[start..start + len];
                assert_eq!(
                    fold(ones_complement_sum(d)),
                    naive_sum(d),
                    "start {start} len {len}"
                );
            }
        }
        // All 0xff: the sum is 0xffff ("negative zero") and must not fold to 0.
        assert_eq!(fold(ones_complement_sum(&[0xff; 1000])), 0xffff);
    }

    #[test]
    fn kernel_computed_checksums_verify() {
        // IPv4 header of a real UDP packet; the kernel wrote 0xaa80 into bytes 10..12.
        let mut ip = [
            0x45, 0x00, 0x00, 0x2f, 0x7c, 0x3b, 0x40, 0x00, 0x40, 0x11, 0xaa, 0x80, 0x0a, 0x00,
            0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
        ];
        assert_eq!(fold(ones_complement_sum(&ip)), 0xffff);
        ip[10] = 0;
        ip[11] = 0;
        assert_eq!(checksum(&ip), 0xaa80);
    }

    #[test]
    fn pseudo_headers() {
        // 10.0.0.1 > 10.0.0.2, UDP, 27 bytes: 0a00+0001+0a00+0002+0011+001b.
        let s = pseudo_header_v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            27,
        );
        assert_eq!(fold(s), 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 0x11 + 27);
        let a: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let s = pseudo_header_v6(&a, &b, 17, 0x1_0002);
        assert_eq!(
            fold(s),
            naive_sum(&[
                0x20, 0x01, 0x0d, 0xb8, 0, 1, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 1, 0, 2, 0, 17
            ])
        );
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut x: u64 = 7;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..10_000 {
            let mut d = [0u8; 20];
            for b in &mut d {
                *b = rnd() as u8;
            }
            d[10] = 0;
            d[11] = 0;
            let c = checksum(&d);
            // Change one word, then 4 bytes at an even offset, then 3 bytes at an odd offset.
            let at = (rnd() % 5) as usize * 2;
            let at = if at == 10 { 12 } else { at };
            let new = rnd() as u16;
            let old = u16::from_be_bytes([d[at], d[at + 1]]);
            d[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let c1 = update_word(c, old, new);
            assert_eq!(c1, checksum(&d), "word at {at}");
            let old4 = [d[12], d[13], d[14], d[15]];
            let new4 = (rnd() as u32).to_be_bytes();
            d[12..16].copy_from_slice(&new4);
            let c2 = update(c1, &old4, &new4);
            assert_eq!(c2, checksum(&d));
            let old3 = [d[15], d[16], d[17]];
            let new3 = [rnd() as u8, rnd() as u8, rnd() as u8];
            d[15..18].copy_from_slice(&new3);
            let c3 = update_sum(
                c2,
                ones_complement_sum_at(&old3, 15),
                ones_complement_sum_at(&new3, 15),
            );
            assert_eq!(c3, checksum(&d));
        }
    }
}
