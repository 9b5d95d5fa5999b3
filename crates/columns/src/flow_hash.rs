//! The `flow_hash` column: a symmetric 64-bit hash of (IP version, protocol, addresses, ports).
//!
//! Symmetric: A:p → B:q and B:q → A:p hash the same, so both directions of a connection group
//! together (`GROUP BY flow_hash`). The two (address, port) endpoints are put in order (smaller
//! address first, then smaller port) and hashed with a fixed-key mix (the SplitMix64 finaliser over
//! 8-byte little-endian words), so the value is the same on every machine and every run. Ports
//! count as 0 when the packet has none (ICMP, fragments). Non-IP packets have no flow hash (null).

use wire::{Headers, IpVersion};

/// SplitMix64's finaliser: a fast, well-mixed 64-bit permutation.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[inline]
fn word(b: &[u8; 16], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i * 8..i * 8 + 8]);
    u64::from_le_bytes(w)
}

/// The symmetric flow hash of a packet, `None` when it has no IP header.
#[inline]
pub fn flow_hash(h: &Headers) -> Option<u64> {
    let version: u64 = match h.ip_version? {
        IpVersion::V4 => 4,
        IpVersion::V6 => 6,
    };
    let a = (&h.src_ip, h.src_port.unwrap_or(0));
    let b = (&h.dst_ip, h.dst_port.unwrap_or(0));
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let tail = u64::from(lo.1)
        | u64::from(hi.1) << 16
        | u64::from(h.protocol.unwrap_or(0)) << 32
        | version << 40;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for w in [
        word(lo.0, 0),
        word(lo.0, 1),
        word(hi.0, 0),
        word(hi.0, 1),
        tail,
    ] {
        x = mix(x ^ w);
    }
    Some(x)
}
