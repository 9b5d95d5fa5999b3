//! The index's look-ups against a brute-force answer, on a file big enough that its body spans
//! many chunks and its directories many steps: for a host, a network, a port and a 5-tuple, the
//! frames the index names are exactly the frames holding a matching packet. And damaged chunks
//! give errors, never a panic or a wrong answer.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use index::file::{Compression, Identity};
use index::{Builder, IndexError, IndexFile, Narrow};
use wire::LinkType;

/// One generated packet: source and destination address and port.
#[derive(Clone, Copy)]
struct Pkt {
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
}

/// Ethernet + IPv4 + UDP, 8 bytes of payload.
fn frame(p: &Pkt) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0, 0, 36, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&p.src.to_be_bytes());
    f.extend_from_slice(&p.dst.to_be_bytes());
    f.extend_from_slice(&p.sport.to_be_bytes());
    f.extend_from_slice(&p.dport.to_be_bytes());
    f.extend_from_slice(&[0, 16, 0, 0]);
    f.extend_from_slice(&[0u8; 8]);
    f
}

const PACKETS_PER_FRAME: usize = 50;

/// 60 000 packets over ~40 000 flows (3 000 hosts, a few hundred ports, both directions), in
/// frames of 50: the flows take ~1.1 MB of the body, many 64 KiB chunks and ~40 directory steps.
fn packets() -> Vec<Pkt> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..60_000)
        .map(|_| {
            let host = 0x0a00_0000 | (rand() % 3000) as u32;
            let server = 0x0a09_0000 | (rand() % 20) as u32;
            let cport = 1024 + (rand() % 400) as u16;
            let sport = [53u16, 80, 443, 5001][(rand() % 4) as usize];
            if rand() % 3 == 0 {
                Pkt {
                    src: server,
                    dst: host,
                    sport,
                    dport: cport,
                }
            } else {
                Pkt {
                    src: host,
                    dst: server,
                    sport: cport,
                    dport: sport,
                }
            }
        })
        .collect()
}

fn build(pkts: &[Pkt]) -> Vec<u8> {
    let mut b = Builder::new(vec![0; 24], Compression::Zstd);
    for (i, p) in pkts.iter().enumerate() {
        if i % PACKETS_PER_FRAME == 0 {
            let k = (i / PACKETS_PER_FRAME) as u64;
            b.frame(k * 1000, 1000, k * 4000, 4000);
        }
        let f = frame(p);
        b.packet(
            24 + i as u64 * 60,
            1_000 + i as u64,
            f.len() as u32,
            Some(LinkType::Ethernet),
            &f,
        );
    }
    b.finish(Identity::default()).index
}

/// Frames the index names for `n`.
fn named(ix: &IndexFile, n: &Narrow) -> Result<BTreeSet<u64>, IndexError> {
    let flows = ix.candidates(n)?.expect("a narrowing");
    let mut out = Vec::new();
    ix.postings(&flows, &mut out)?;
    Ok(out.into_iter().collect())
}

/// Frames holding a packet for which `m` holds.
fn holding(pkts: &[Pkt], m: impl Fn(&Pkt) -> bool) -> BTreeSet<u64> {
    pkts.iter()
        .enumerate()
        .filter(|(_, p)| m(p))
        .map(|(i, _)| (i / PACKETS_PER_FRAME) as u64)
        .collect()
}

fn ip(a: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

#[test]
fn look_ups_name_exactly_the_frames_with_matching_packets() {
    let pkts = packets();
    let bytes = build(&pkts);
    let ix = IndexFile::parse(bytes, "test").unwrap();
    assert!(ix.header.flows > 30_000, "{} flows", ix.header.flows);
    // Hosts at the start, middle and end of the address order, servers (the second endpoint of
    // most flows) and an address that never occurs.
    for h in [
        0x0a00_0000u32,
        0x0a00_0001,
        1500 | 0x0a00_0000,
        0x0a00_0bb7,
        0x0a09_0000,
        0x0a09_0013,
        0x0b00_0000,
    ] {
        let want = holding(&pkts, |p| p.src == h || p.dst == h);
        assert_eq!(
            named(&ix, &Narrow::Host(ip(h))).unwrap(),
            want,
            "host {}",
            ip(h)
        );
    }
    let net = Narrow::Net {
        addr: ip(0x0a00_0400),
        prefix: 22,
    };
    let want = holding(&pkts, |p| {
        [p.src, p.dst]
            .iter()
            .any(|a| a & 0xffff_fc00 == 0x0a00_0400)
    });
    assert_eq!(named(&ix, &net).unwrap(), want);
    for port in [53u16, 1024, 1423, 9999] {
        let want = holding(&pkts, |p| p.sport == port || p.dport == port);
        assert_eq!(
            named(&ix, &Narrow::Port(port)).unwrap(),
            want,
            "port {port}"
        );
    }
    // A 5-tuple, as `src host A and src port P and dst host B and dst port Q` narrows it.
    let p = pkts[31_337];
    let five = Narrow::And(
        Box::new(Narrow::And(
            Box::new(Narrow::Host(ip(p.src))),
            Box::new(Narrow::Port(p.sport)),
        )),
        Box::new(Narrow::And(
            Box::new(Narrow::Host(ip(p.dst))),
            Box::new(Narrow::Port(p.dport)),
        )),
    );
    let same_flow = |q: &Pkt| {
        (q.src, q.sport, q.dst, q.dport) == (p.src, p.sport, p.dst, p.dport)
            || (q.src, q.sport, q.dst, q.dport) == (p.dst, p.dport, p.src, p.sport)
    };
    assert_eq!(named(&ix, &five).unwrap(), holding(&pkts, same_flow));
    // A narrow term and broad ones, in either order: a client host, a server that is in a
    // twentieth of the flows, and every udp flow.
    let (client, server) = (0x0a00_0123u32, 0x0a09_0007u32);
    let both = |p: &Pkt| [p.src, p.dst].contains(&client) && [p.src, p.dst].contains(&server);
    let narrow = || Box::new(Narrow::Host(ip(client)));
    let broad = || {
        Box::new(Narrow::And(
            Box::new(Narrow::Proto(17)),
            Box::new(Narrow::Host(ip(server))),
        ))
    };
    for n in [
        Narrow::And(narrow(), broad()),
        Narrow::And(broad(), narrow()),
    ] {
        assert_eq!(named(&ix, &n).unwrap(), holding(&pkts, both), "{n:?}");
    }
    ix.verify().unwrap();
}

/// The file's checksum covers its header and table: damage there stops it from opening. Each
/// chunk carries its own: a flipped bit in a chunk is found when that chunk is read (or by
/// `verify`), as an error.
#[test]
fn damaged_chunks_are_errors_not_panics() {
    let pkts = packets();
    let bytes = build(&pkts);
    for at in [20, 100, bytes.len() - 20] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x55;
        let r = IndexFile::parse(flipped, "t");
        assert!(matches!(r, Err(IndexError::Corrupt(_))), "{at}");
    }
    let mut x = 1u64;
    let (mut parsed, mut answered) = (0, 0);
    for round in 0..200 {
        let mut b = bytes.clone();
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Somewhere in the chunks: after the 128-byte header, before the table (a few hundred
        // bytes here) and the trailer, which the file's checksum covers.
        let at = 128 + (x >> 33) as usize % (bytes.len() - 128 - 2048);
        b[at] ^= 1 << (round % 8);
        let Ok(ix) = IndexFile::parse(b, "t") else {
            continue;
        };
        parsed += 1;
        let h = ip(pkts[round * 7].src);
        match named(&ix, &Narrow::Host(h)) {
            Ok(got) => {
                answered += 1;
                // A look-up that succeeds read only undamaged chunks: its answer is right.
                let want = holding(&pkts, |p| ip(p.src) == h || ip(p.dst) == h);
                assert_eq!(got, want, "round {round}");
            }
            Err(e) => assert!(matches!(e, IndexError::Corrupt(_)), "{e}"),
        }
        assert!(
            ix.verify().is_err(),
            "round {round}: verify missed a flipped bit at {at}"
        );
    }
    // Damage in the chunks passes the file's checks, and most look-ups read only undamaged
    // chunks: both paths were taken.
    assert!(
        parsed > 150 && answered > 50 && answered < parsed,
        "{parsed} parsed, {answered} answered"
    );
}
