//! Frame building: exact bytes (expected frames computed independently in Python, see comments),
//! checksums verified by tshark, incremental rewrites equal to a full rebuild, emit → parse round trip.

mod samples;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

use wire::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn spec_v4() -> UdpFrameSpec {
    UdpFrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        ip: IpPair::V4 {
            src: Ipv4Addr::new(10, 77, 0, 1),
            dst: Ipv4Addr::new(10, 77, 0, 2),
        },
        src_port: 1024,
        dst_port: 9,
        ttl: 64,
        payload_len: 18,
    }
}

fn spec_v6_vlan() -> UdpFrameSpec {
    UdpFrameSpec {
        vlan: Some(Vlan {
            tpid: ethertype::VLAN,
            tci: vlan::tci(5, false, 42),
        }),
        ip: IpPair::V6 {
            src: "2001:db8::1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
        },
        src_port: 5000,
        dst_port: 6000,
        ttl: 255,
        payload_len: 7,
        ..spec_v4()
    }
}

// Both expected frames were built by an independent Python script (struct.pack, textbook RFC 1071 sum
// over pseudo header + UDP header + payload; 0 sent as 0xffff), payload bytes 0xa5:
//   udp = pack('!HHHH', 1024, 9, 26, 0) + b'\xa5'*18
//   c = csum(src + dst + pack('!BBH', 0, 17, 26) + udp)             -> 0x1442
//   ip = pack('!BBHHHBBH4s4s', 0x45, 0, 46, 0, 0x4000, 64, 17, 0, src, dst), csum(ip) -> 0x2623
const FRAME_V4: &str =
    "02000000000202000000000108004500002e00004000401126230a4d00010a4d000204000009001a1442\
                        a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5";
//   udp = pack('!HHHH', 5000, 6000, 15, 0) + b'\xa5'*7
//   c = csum(src + dst + pack('!IxxxB', 15, 17) + udp)               -> 0xe371
const FRAME_V6_VLAN: &str =
    "0200000000020200000000018100a02a86dd60000000000f11ff20010db80000000000000000000000\
                             0120010db800000000000000000000000213881770000fe371a5a5a5a5a5a5a5";

#[test]
fn emit_v4_exact_bytes_over_a5() {
    let spec = spec_v4();
    assert_eq!(
        (spec.ip_len(), spec.frame_len(), spec.payload_offset()),
        (46, 60, 42)
    );
    let mut buf = [0xa5u8; 80];
    let n = spec.emit(&mut buf);
    assert_eq!(n, 60);
    assert_eq!(&buf[..n], &hex(FRAME_V4)[..]);
    assert!(
        buf[n..].iter().all(|&b| b == 0xa5),
        "emit wrote past the frame"
    );
}

#[test]
fn emit_v6_vlan_exact_bytes_over_a5() {
    let spec = spec_v6_vlan();
    assert_eq!(
        (
            spec.l3_offset(),
            spec.l4_offset(),
            spec.ip_len(),
            spec.frame_len()
        ),
        (18, 58, 55, 73)
    );
    let mut buf = [0xa5u8; 100];
    let n = spec.emit(&mut buf);
    assert_eq!(&buf[..n], &hex(FRAME_V6_VLAN)[..]);
    assert!(buf[n..].iter().all(|&b| b == 0xa5));
}

#[test]
fn size_convention_frame_is_ip_len_plus_14_or_18() {
    for ip_len in [28usize, 46, 64, 100, 1500, 9000] {
        let s = spec_v4().with_ip_len(ip_len).unwrap();
        assert_eq!((s.ip_len(), s.frame_len()), (ip_len, ip_len + ETH_HDR));
        assert_eq!(s.frame_len(), frame_len_for_ip_len(ip_len, 0));
        let mut buf = vec![0xa5u8; s.frame_len()];
        let n = s.emit(&mut buf);
        let h = parse(&buf[..n], LinkType::Ethernet);
        assert_eq!(h.ip_len, Some(ip_len as u32));
    }
    let s = spec_v6_vlan().with_ip_len(1500).unwrap();
    assert_eq!((s.payload_len, s.frame_len()), (1500 - 48, 1518));
    assert!(spec_v4().with_ip_len(27).is_err());
    assert!(spec_v6_vlan().with_ip_len(47).is_err());
    assert!(spec_v4().with_ip_len(65_536).is_err());
    assert!(spec_v4().with_ip_len(65_535).is_ok());
    // IPv6 counts the payload length field, not the whole packet.
    assert!(spec_v6_vlan().with_ip_len(65_535 + 40).is_ok());
    assert!(spec_v6_vlan().with_ip_len(65_536 + 40).is_err());
}

#[test]
#[should_panic(expected = "frame needs 60")]
fn emit_into_short_buffer_is_a_clear_panic() {
    spec_v4().emit(&mut [0u8; 59]);
}

#[test]
fn emit_round_trips_through_parse_and_views() {
    let spec = spec_v6_vlan();
    let mut buf = [0xa5u8; 100];
    let n = spec.emit(&mut buf);
    let h = parse(&buf[..n], LinkType::Ethernet);
    assert_eq!(
        (h.src_mac, h.dst_mac),
        (Some(spec.src_mac), Some(spec.dst_mac))
    );
    assert_eq!(
        (h.vlan_outer, h.vlan_inner, h.ethertype),
        (Some(42), None, Some(ethertype::IPV6))
    );
    assert_eq!(h.src_addr(), Some("2001:db8::1".parse().unwrap()));
    assert_eq!(h.dst_addr(), Some("2001:db8::2".parse().unwrap()));
    assert_eq!(
        (h.ttl, h.protocol, h.ip_len),
        (Some(255), Some(17), Some(55))
    );
    assert_eq!(
        (h.src_port, h.dst_port, h.udp_len),
        (Some(5000), Some(6000), Some(15))
    );
    assert_eq!((h.l3_offset, h.l4_offset), (Some(18), Some(58)));
    assert!(!h.truncated && !h.malformed);
    let udp = UdpPacket::new_checked(&buf[58..n]).unwrap();
    assert_eq!(udp.payload(), &[0xa5; 7]);
    let mut s = String::new();
    format_line(&mut s, 0, &buf[..n], n as u32, LinkType::Ethernet).unwrap();
    assert_eq!(
        s,
        "00:00:00.000000000 IP6 2001:db8::1.5000 > 2001:db8::2.6000: UDP, length 7"
    );

    let spec = spec_v4();
    let n = spec.emit(&mut buf);
    let ip = Ipv4Packet::new_checked(&buf[14..n]).unwrap();
    assert!(ip.verify_checksum());
    assert!(ip.dont_frag() && !ip.is_fragment());
}

#[test]
fn emit_with_payload_sum_equals_emit() {
    for spec in [spec_v4(), spec_v6_vlan()] {
        let mut a = vec![0u8; spec.frame_len()];
        for (i, b) in a.iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let mut b = a.clone();
        spec.emit(&mut a);
        let sum = checksum::ones_complement_sum(&b[spec.payload_offset()..]);
        spec.emit_with_payload_sum(&mut b, sum);
        assert_eq!(a, b);
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Per-packet rewrites (RFC 1624) give the same bytes as emitting the changed spec from scratch.
#[test]
fn incremental_rewrites_equal_full_emit() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for base in [spec_v4(), spec_v6_vlan()] {
        for round in 0..2000 {
            let mut spec = base;
            spec.payload_len = (rng.next() % 200) as usize;
            let mut frame = vec![0u8; spec.frame_len()];
            for b in &mut frame[spec.payload_offset()..] {
                *b = rng.next() as u8;
            }
            spec.emit(&mut frame);

            let (sp, dp) = (rng.next() as u16, rng.next() as u16);
            spec.set_ports(&mut frame, sp, dp);
            let ip = match base.ip {
                IpPair::V4 { .. } => IpPair::V4 {
                    src: Ipv4Addr::from(rng.next() as u32),
                    dst: Ipv4Addr::from(rng.next() as u32),
                },
                IpPair::V6 { .. } => IpPair::V6 {
                    src: Ipv6Addr::from(((rng.next() as u128) << 64) | rng.next() as u128),
                    dst: Ipv6Addr::from(((rng.next() as u128) << 64) | rng.next() as u128),
                },
            };
            spec.set_ip(&mut frame, ip);
            if spec.payload_len > 0 {
                let at = (rng.next() as usize) % spec.payload_len;
                let len = 1 + (rng.next() as usize) % (spec.payload_len - at).min(9);
                let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                spec.write_payload(&mut frame, at, &bytes);
            }

            let mut want = frame.clone();
            let rebuilt = UdpFrameSpec {
                src_port: sp,
                dst_port: dp,
                ip,
                ..spec
            };
            rebuilt.emit(&mut want);
            assert_eq!(frame, want, "round {round} spec {rebuilt:?}");
        }
    }
}

/// Writes a nanosecond pcap (the format is 24 + 16 bytes of header; written here so the test does not
/// depend on the `store` crate).
fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for (i, fr) in frames.iter().enumerate() {
        f.extend_from_slice(&(i as u32).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.extend_from_slice(fr);
    }
    std::fs::write(path, f).unwrap();
}

/// tshark re-computes the IPv4 and UDP checksums of emitted and rewritten frames and must call every
/// one "Good" (status 1).
#[test]
fn tshark_agrees_with_every_checksum() {
    let mut rng = Rng(42);
    let mut frames = Vec::new();
    for i in 0..200 {
        let mut spec = if i % 2 == 0 {
            spec_v4()
        } else {
            spec_v6_vlan()
        };
        spec.payload_len = i * 7 % 1400;
        if i % 3 == 0 {
            spec.vlan = None;
        }
        let mut f = vec![0u8; spec.frame_len()];
        for b in &mut f[spec.payload_offset()..] {
            *b = rng.next() as u8;
        }
        spec.emit(&mut f);
        if i % 4 == 1 {
            spec.set_ports(&mut f, rng.next() as u16, rng.next() as u16);
            if spec.payload_len > 3 {
                spec.write_payload(&mut f, 1, &[1, 2, 3]);
            }
        }
        frames.push(f);
    }
    let path = std::env::temp_dir().join(format!("wire-emit-{}.pcap", std::process::id()));
    write_pcap(&path, &frames);
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args([
            "-T",
            "fields",
            "-e",
            "ip.version",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.checksum.status",
        ])
        .output()
        .expect("tshark is needed for this test (make deps installs it)");
    std::fs::remove_file(&path).ok();
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), frames.len());
    for (i, l) in lines.iter().enumerate() {
        let cols: Vec<&str> = l.split('\t').collect();
        let want: &[&str] = if i % 2 == 0 {
            &["4", "1", "1"]
        } else {
            &["6", "", "1"]
        };
        assert_eq!(&cols[..], want, "frame {i}: {l:?}");
    }
}
