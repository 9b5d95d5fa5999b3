//! Shared helpers for the kernel tests: frame builder, a raw-socket sender and a draining loop.
#![allow(dead_code)]

use std::collections::HashMap;
use std::ffi::CString;
use std::mem::{size_of, zeroed};
use std::time::{Duration, Instant};

use capture::{Packet, Source};
use wire::Vlan;

/// Non-local destination: with the capture socket promiscuous the kernel does no IP work on these.
pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const IP_SRC: [u8; 4] = [10, 77, 0, 1];
pub const IP_DST: [u8; 4] = [10, 77, 0, 2];
pub const UDP: u8 = 17;
pub const TCP: u8 = 6;

/// What goes into one test frame.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Sequence number, written at the start of the payload; identifies the frame.
    pub seq: u32,
    /// Total frame length (without a VLAN tag), at least 60.
    pub len: usize,
    /// Last byte of the source MAC 00:00:00:00:00:xx (the thesis filter wants the first five zero).
    pub src_mac_last: u8,
    /// IP protocol (UDP or TCP), or 0 for a non-IP frame (ethertype 0x88b5, local experimental).
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    /// 802.1Q/802.1ad tag to put after the MACs.
    pub vlan: Option<Vlan>,
}

impl Spec {
    pub fn udp(seq: u32, len: usize) -> Spec {
        Spec {
            seq,
            len,
            src_mac_last: (seq % 3) as u8,
            proto: UDP,
            sport: 1024,
            dport: 4000,
            vlan: None,
        }
    }
}

fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Build the frame for `s`: Ethernet (+ tag), IPv4, UDP/TCP, payload = seq (BE) then a seq-dependent pattern.
pub fn frame(s: &Spec) -> Vec<u8> {
    assert!(s.len >= 60);
    let mut f = Vec::with_capacity(s.len + 4);
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&[0, 0, 0, 0, 0, s.src_mac_last]);
    if let Some(v) = s.vlan {
        f.extend_from_slice(&v.to_bytes());
    }
    if s.proto == 0 {
        f.extend_from_slice(&0x88b5u16.to_be_bytes());
    } else {
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let ip_len = s.len - 14;
        let l4_hdr = if s.proto == TCP { 20 } else { 8 };
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&(s.seq as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = s.proto;
        ip[12..16].copy_from_slice(&IP_SRC);
        ip[16..20].copy_from_slice(&IP_DST);
        let c = csum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut l4 = vec![0u8; l4_hdr];
        l4[0..2].copy_from_slice(&s.sport.to_be_bytes());
        l4[2..4].copy_from_slice(&s.dport.to_be_bytes());
        if s.proto == TCP {
            l4[12] = 5 << 4;
            l4[13] = 0x10; // ACK
            l4[14..16].copy_from_slice(&1024u16.to_be_bytes());
        } else {
            l4[4..6].copy_from_slice(&((ip_len - 20) as u16).to_be_bytes());
        }
        f.extend_from_slice(&l4);
    }
    f.extend_from_slice(&s.seq.to_be_bytes());
    let total = s.len + if s.vlan.is_some() { 4 } else { 0 };
    let mut x = s.seq.wrapping_mul(2_654_435_761);
    while f.len() < total {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        f.push((x >> 24) as u8);
    }
    f
}

/// Sequence number of a captured frame without a tag in its bytes (after Ethernet + IPv4 + L4, or after
/// Ethernet for non-IP frames).
pub fn seq_of(data: &[u8]) -> u32 {
    let off = match data.get(12..14) {
        Some([0x08, 0x00]) => 14 + 20 + if data[23] == TCP { 20 } else { 8 },
        _ => 14,
    };
    u32::from_be_bytes(data[off..off + 4].try_into().unwrap())
}

/// Send every frame through a raw AF_PACKET socket on `ifname` (call inside the Tx namespace).
pub fn send_frames(ifname: &str, frames: &[Vec<u8>]) {
    // SAFETY: plain socket calls on buffers we own.
    unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let name = CString::new(ifname).unwrap();
        let ifindex = libc::if_nametoindex(name.as_ptr());
        assert!(ifindex > 0, "no interface {ifname}");
        let mut sll: libc::sockaddr_ll = zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&DST_MAC);
        for f in frames {
            loop {
                let r = libc::sendto(
                    fd,
                    f.as_ptr() as *const libc::c_void,
                    f.len(),
                    0,
                    &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                    size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                );
                if r == f.len() as isize {
                    break;
                }
                let e = std::io::Error::last_os_error();
                assert_eq!(e.raw_os_error(), Some(libc::ENOBUFS), "sendto: {e}");
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        libc::close(fd);
    }
}

/// A captured packet, copied out for checking.
#[derive(Clone, Debug)]
pub struct Got {
    pub ts_ns: u64,
    pub wire_len: u32,
    pub data: Vec<u8>,
    pub vlan: Option<Vlan>,
    /// The frame as a writer would record it (tag re-inserted).
    pub record: Vec<u8>,
}

impl Got {
    pub fn from(p: &Packet) -> Got {
        let (head, tag, tail) = p.tagged_parts();
        let mut record = head.to_vec();
        if let Some(t) = tag {
            record.extend_from_slice(&t);
        }
        record.extend_from_slice(tail);
        Got {
            ts_ns: p.ts_ns,
            wire_len: p.wire_len,
            data: p.data.to_vec(),
            vlan: p.vlan,
            record,
        }
    }
}

/// Drain `src` until captured + kernel drops reaches `expect` (or 10 s pass), then until it is quiet.
pub fn drain(src: &mut Source, expect: u64) -> Vec<Got> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        src.for_each_batch(Duration::from_millis(20), |p| got.push(Got::from(p)))
            .expect("capture");
        if got.len() as u64 + src.kernel_stats().drops >= expect {
            break;
        }
    }
    // Anything extra (duplicates, strays) would show up here: the block timeout is 20 ms.
    while src
        .for_each_batch(Duration::from_millis(60), |p| got.push(Got::from(p)))
        .expect("capture")
        > 0
    {}
    got
}

/// seq -> frame.
pub fn by_seq(frames: &[Vec<u8>], specs: &[Spec]) -> HashMap<u32, Vec<u8>> {
    specs
        .iter()
        .zip(frames)
        .map(|(s, f)| (s.seq, f.clone()))
        .collect()
}

/// Wall clock in ns.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}
