//! The XDP prefilter, run in the kernel (BPF_PROG_TEST_RUN of the real `ringcap_xsk` program), never turns away
//! a frame libpcap's compiled filter keeps: for each expression it recognises and thousands of frames with
//! tags, IPv4 options, fragments, other protocols, IPv6, ARP and truncation, libpcap's verdict on the same
//! bytes is the reference. It must also turn away some frames, or it would be no prefilter at all.

use capture::{compile_filter, run_filter, MAX_SNAPLEN};
use wire::LinkType;
use xdp::{Prefilter, PrefilterProbe};

/// A small deterministic generator (numbers from Knuth's MMIX LCG), so a failure reproduces.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.next() as usize % v.len()]
    }
}

fn frame(r: &mut Lcg) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    for _ in 0..r.pick(&[0, 0, 0, 1, 1, 2]) {
        let tpid: u16 = r.pick(&[0x8100, 0x8100, 0x88a8, 0x9100]);
        let vid: u16 = r.pick(&[5, 6, 7, 4095]);
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&vid.to_be_bytes());
    }
    let ethertype: u16 = r.pick(&[0x0800, 0x0800, 0x0800, 0x0800, 0x86dd, 0x0806, 0x88b5]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    let addrs = [
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        [10, 1, 2, 3],
        [192, 168, 1, 1],
    ];
    let ports: [u16; 6] = [53, 80, 7, 9000, 9001, 1234];
    match ethertype {
        0x0800 => {
            let ihl = r.pick(&[5u8, 5, 5, 6, 15, 3]);
            let proto = r.pick(&[1u8, 6, 17, 17, 132, 47]);
            let frag: u16 = r.pick(&[0, 0, 0, 0x2000, 100]);
            let mut ip = vec![0x40 | ihl, 0, 0, 60, 0, 0];
            ip.extend_from_slice(&frag.to_be_bytes());
            ip.extend_from_slice(&[64, proto, 0, 0]);
            ip.extend_from_slice(&r.pick(&addrs));
            ip.extend_from_slice(&r.pick(&addrs));
            ip.resize(usize::from(ihl.max(5)) * 4, 1);
            f.extend_from_slice(&ip);
            f.extend_from_slice(&r.pick(&ports).to_be_bytes());
            f.extend_from_slice(&r.pick(&ports).to_be_bytes());
            f.resize(f.len() + 20, 0);
        }
        0x86dd => {
            let mut ip6 = vec![0x60, 0, 0, 0, 0, 20, r.pick(&[6, 17, 58, 44]), 64];
            ip6.resize(40, 0);
            ip6[23] = 1;
            ip6[39] = 2;
            f.extend_from_slice(&ip6);
            f.extend_from_slice(&r.pick(&ports).to_be_bytes());
            f.extend_from_slice(&r.pick(&ports).to_be_bytes());
            f.resize(f.len() + 16, 0);
        }
        0x0806 => {
            f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&r.pick(&addrs));
            f.extend_from_slice(&[0; 6]);
            f.extend_from_slice(&r.pick(&addrs));
        }
        _ => f.resize(f.len() + 46, 0xab),
    }
    if r.next().is_multiple_of(6) {
        let keep = 14 + r.next() as usize % (f.len() - 13);
        f.truncate(keep);
    }
    f
}

#[test]
fn the_prefilter_in_the_kernel_never_turns_away_what_libpcap_keeps() {
    if unsafe { libc::geteuid() } != 0 {
        testbed::skip("BPF_PROG_TEST_RUN needs root");
        return;
    }
    let mut r = Lcg(15);
    let frames: Vec<Vec<u8>> = (0..3000).map(|_| frame(&mut r)).collect();
    for expr in [
        "udp",
        "tcp",
        "icmp",
        "sctp",
        "ip",
        "udp and dst port 9000",
        "port 53",
        "src port 53 or dst port 80",
        "tcp port 80 or icmp",
        "udp or tcp and port 80",
        "host 10.0.0.1",
        "src host 10.0.0.1 and dst net 10.1.0.0/16",
        "net 10.0.0.0/8 and (tcp or udp)",
        "ip and dst port 9000",
        "vlan",
        "vlan 6",
        "vlan 6 and udp dst port 7",
        "vlan and host 10.0.0.1",
        "(udp or tcp) and (port 53 or port 9000)",
        "sctp and src port 7 and dst host 10.0.0.2",
    ] {
        let prefilter =
            Prefilter::recognise(expr).unwrap_or_else(|| panic!("{expr} not recognised"));
        let probe = PrefilterProbe::new(&prefilter).expect("load ringcap_xsk for test runs");
        let program = compile_filter(expr, LinkType::Ethernet, MAX_SNAPLEN).unwrap();
        let mut turned_away = 0;
        for (i, f) in frames.iter().enumerate() {
            let keeps = run_filter(&program, f, f.len() as u32) != 0;
            let may = probe.may_match(f).expect("test run");
            assert!(
                may || !keeps,
                "{expr:?} ({prefilter}): libpcap keeps frame {i} but the prefilter turns it away: {f:02x?}"
            );
            turned_away += usize::from(!may);
        }
        assert!(
            turned_away > 0,
            "{expr:?}: the prefilter turned nothing away"
        );
    }
}
