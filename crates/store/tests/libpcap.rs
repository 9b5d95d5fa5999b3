//! ringcap's reader against libpcap itself: a small C program linked with libpcap prints every
//! packet it reads (nanosecond timestamp, caplen, wire length, bytes); ringcap's reader must give
//! the same, over a set of odd but legal files made here (caplen 0, every link type value, both
//! byte orders, µs and ns, snaplen smaller than the records, pcapng with several interfaces and
//! timestamp resolutions, cut tails) and over mutated copies of them (where libpcap stops at
//! damage, what it read must be what ringcap read first).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use store::CaptureReader;

const LIBPCAP_READER: &str = r#"
/* Prints every packet libpcap reads: "ns caplen len hex", then "end" or "error: ...". */
#include <pcap/pcap.h>
#include <stdio.h>
int main(int argc, char **argv) {
    char err[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_open_offline_with_tstamp_precision(argv[1], PCAP_TSTAMP_PRECISION_NANO, err);
    if (!p) { printf("open error: %s\n", err); return 0; }
    struct pcap_pkthdr *h; const u_char *d; int r;
    while ((r = pcap_next_ex(p, &h, &d)) == 1) {
        /* Nanoseconds since the epoch in 64 bits, saturated as ringcap's u64 is (year 2554). */
        /* libpcap 1.10 reads pcap's 32-bit seconds as signed (negative after 2038); the format
           says unsigned, as ringcap reads them. */
        long long sec = h->ts.tv_sec < 0 ? h->ts.tv_sec + (1LL << 32) : h->ts.tv_sec;
        unsigned long long s = (unsigned long long)sec, ns = (unsigned long long)h->ts.tv_usec;
        unsigned long long t = s > (~0ull - ns) / 1000000000ull ? ~0ull : s * 1000000000ull + ns;
        /* A fraction of a second out of range (damaged input) is passed on as is: no time. */
        if (h->ts.tv_usec < 0 || h->ts.tv_usec >= 1000000000) printf("? %u %u ", h->caplen, h->len);
        else printf("%llu %u %u ", t, h->caplen, h->len);
        for (unsigned i = 0; i < h->caplen; i++) printf("%02x", d[i]);
        printf("\n");
    }
    if (r == -1) printf("error: %s\n", pcap_geterr(p)); else printf("end\n");
    return 0;
}
"#;

/// Compiles the libpcap reader into `dir` (needs cc and libpcap-dev).
fn libpcap_reader(dir: &Path) -> Option<PathBuf> {
    if !have("cc") {
        return None;
    }
    let src = dir.join("lp.c");
    let bin = dir.join("lp");
    std::fs::write(&src, LIBPCAP_READER).unwrap();
    let out = Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .arg("-lpcap")
        .output()
        .unwrap();
    if !out.status.success() {
        skip(&format!(
            "cannot build the libpcap reader (apt-get install libpcap-dev): {}",
            String::from_utf8_lossy(&out.stderr)
        ));
        return None;
    }
    Some(bin)
}

/// What libpcap read: packet lines, and how it ended ("end", "error: ...", "open error: ...").
fn libpcap(bin: &Path, file: &Path) -> (Vec<String>, String) {
    let out = run(Command::new(bin).arg(file));
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    let end = lines.pop().expect("an end line");
    (lines, end)
}

/// What ringcap's reader read, in the same form; `None` if it refused to open the file.
fn ours(file: &Path) -> Option<Vec<String>> {
    let mut r = CaptureReader::open(file).ok()?;
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("read");
        let hex: String = p.data.iter().map(|b| format!("{b:02x}")).collect();
        v.push(format!("{} {} {} {hex}", p.ts_ns, p.data.len(), p.wire_len));
    }
    Some(v)
}

/// Bytes in a chosen byte order.
struct Out {
    be: bool,
    b: Vec<u8>,
}

impl Out {
    fn new(be: bool) -> Out {
        Out { be, b: Vec::new() }
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        let x = if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.b.extend_from_slice(&x);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        let x = if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.b.extend_from_slice(&x);
        self
    }
    fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.b.extend_from_slice(v);
        self
    }
}

/// A deterministic pseudo-random byte source.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// One pcap record: seconds, fraction, caplen as written, wire length, data (its length may
/// differ from caplen only to make a file wrong on purpose).
type Rec = (u32, u32, u32, u32, Vec<u8>);

fn pcap(be: bool, nanos: bool, snaplen: u32, linktype: u32, recs: &[Rec]) -> Vec<u8> {
    let mut o = Out::new(be);
    o.u32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 })
        .u16(2)
        .u16(4)
        .u32(0)
        .u32(0)
        .u32(snaplen)
        .u32(linktype);
    for (sec, frac, caplen, wire, data) in recs {
        o.u32(*sec).u32(*frac).u32(*caplen).u32(*wire).bytes(data);
    }
    o.b
}

/// Records of many sizes, caplen 0 among them (with and without a wire length, an all-zero
/// header too), some shorter than on the wire.
fn records(rng: &mut Rng, n: usize, nanos: bool, max: u32) -> Vec<Rec> {
    let unit = if nanos { 1_000_000_000 } else { 1_000_000 };
    (0..n)
        .map(|i| {
            let caplen = match i % 7 {
                0 => 0,
                1 => 1,
                2 => max,
                _ => rng.below(u64::from(max) + 1) as u32,
            };
            let wire = match i % 5 {
                0 => caplen,
                1 if caplen == 0 => 0,
                _ => caplen + rng.below(100) as u32,
            };
            let (sec, frac) = if i == 3 {
                (0, 0) // with caplen 0 below: a record header of zeros only
            } else {
                (1_700_000_000 + i as u32, rng.below(unit) as u32)
            };
            let caplen = if i == 3 { 0 } else { caplen };
            let wire = if i == 3 { 0 } else { wire };
            (sec, frac, caplen, wire, rng.bytes(caplen as usize))
        })
        .collect()
}

/// An option (code, value) of a pcapng block, padded to 4 bytes.
fn opt(o: &mut Out, code: u16, v: &[u8]) {
    o.u16(code).u16(v.len() as u16).bytes(v);
    o.bytes(&vec![0; v.len().next_multiple_of(4) - v.len()]);
}

/// A pcapng block of type `ty` with body `body` (lengths at both ends).
fn block(o: &mut Out, ty: u32, body: &[u8]) {
    let len = 12 + body.len() as u32;
    o.u32(ty).u32(len).bytes(body).u32(len);
}

fn body(be: bool, f: impl FnOnce(&mut Out)) -> Vec<u8> {
    let mut o = Out::new(be);
    f(&mut o);
    o.b
}

fn padded(o: &mut Out, data: &[u8]) {
    o.bytes(data);
    o.bytes(&vec![0; data.len().next_multiple_of(4) - data.len()]);
}

/// A pcapng section: interfaces with their own snaplen, timestamp resolution and offset, EPBs
/// on each (caplen 0 among them), an obsolete packet block, name-resolution, statistics and
/// unknown blocks, with `spb` a simple packet block (only with a single interface).
fn pcapng(
    be: bool,
    rng: &mut Rng,
    ifaces: &[(u32, Option<u8>, Option<i64>)],
    linktype: u16,
    spb: bool,
) -> Vec<u8> {
    let mut o = Out::new(be);
    let shb = body(be, |b| {
        b.u32(0x1a2b_3c4d)
            .u16(1)
            .u16(0)
            .u32(0xffff_ffff)
            .u32(0xffff_ffff);
    });
    block(&mut o, 0x0a0d_0d0a, &shb);
    for (snaplen, tsresol, tsoffset) in ifaces {
        let idb = body(be, |b| {
            b.u16(linktype).u16(0).u32(*snaplen);
            if let Some(r) = tsresol {
                opt(b, 9, &[*r]);
            }
            if let Some(off) = tsoffset {
                let v = if be {
                    off.to_be_bytes()
                } else {
                    off.to_le_bytes()
                };
                opt(b, 14, &v);
            }
            b.u32(0); // opt_endofopt
        });
        block(&mut o, 1, &idb);
    }
    let nrb = body(be, |b| {
        b.u16(1)
            .u16(8)
            .bytes(&[10, 0, 0, 1, b'a', b'.', b'b', 0])
            .u32(0);
    });
    block(&mut o, 4, &nrb);
    for i in 0..60u32 {
        let iface = i % ifaces.len() as u32;
        let snap = ifaces[iface as usize].0;
        let limit = if snap == 0 { 2000 } else { snap.min(2000) };
        let caplen = if i % 9 == 0 {
            0
        } else {
            rng.below(u64::from(limit) + 1) as u32
        };
        let wire = caplen + (i % 3) * 10;
        // Around 2023 in the interface's units (10^-n or 2^-n s).
        let per_sec = match ifaces[iface as usize].1.unwrap_or(6) {
            r if r & 0x80 != 0 => 1u64 << (r & 0x7f),
            r => 10u64.pow(u32::from(r)),
        };
        // Wrapping, as the release build computes it: a resolution of 2^-64 s overflows on purpose
        // (the file then holds whatever the stamp wraps to, and libpcap is the judge).
        let ts = (1_700_000_000 + u64::from(i))
            .wrapping_mul(per_sec)
            .wrapping_add(rng.below(per_sec));
        let data = rng.bytes(caplen as usize);
        let epb = body(be, |b| {
            b.u32(iface)
                .u32((ts >> 32) as u32)
                .u32(ts as u32)
                .u32(caplen)
                .u32(wire);
            padded(b, &data);
            if i % 4 == 0 {
                opt(b, 2, &[0, 0, 0, 1]); // epb_flags
                b.u32(0);
            }
        });
        block(&mut o, 6, &epb);
        if i == 20 {
            let isb = body(be, |b| {
                b.u32(iface).u32(0).u32(0);
            });
            block(&mut o, 5, &isb);
            block(&mut o, 0x0000_0bad, &[1, 2, 3, 4]); // custom block, copied as is
        }
        if i == 30 {
            let data = rng.bytes(40);
            let pb = body(be, |b| {
                b.u16(iface as u16).u16(0).u32(0).u32(12345).u32(40).u32(60);
                padded(b, &data);
            });
            block(&mut o, 2, &pb);
        }
        if spb && i % 10 == 5 {
            let data = rng.bytes(33);
            let s = body(be, |b| {
                b.u32(33);
                padded(b, &data);
            });
            block(&mut o, 3, &s);
        }
    }
    o.b
}

/// The odd but legal files, by name.
fn odd_files() -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut v = Vec::new();
    for be in [false, true] {
        for nanos in [false, true] {
            let tag = format!(
                "{}-{}",
                if be { "be" } else { "le" },
                if nanos { "ns" } else { "us" }
            );
            let recs = records(&mut rng, 50, nanos, 1500);
            v.push((format!("pcap-{tag}"), pcap(be, nanos, 65_535, 1, &recs)));
            // snaplen 0 means "the largest" to libpcap.
            v.push((format!("pcap-{tag}-snap0"), pcap(be, nanos, 0, 1, &recs)));
            // Records longer than the file's snaplen: libpcap returns the first snaplen bytes.
            v.push((
                format!("pcap-{tag}-snap100"),
                pcap(be, nanos, 100, 1, &recs),
            ));
            // A cut tail, inside a record header and inside a record's data.
            let whole = pcap(be, nanos, 65_535, 1, &recs);
            let last = 16 + recs.last().unwrap().4.len();
            v.push((
                format!("pcap-{tag}-cut-header"),
                whole[..whole.len() - last + 7].to_vec(),
            ));
            v.push((
                format!("pcap-{tag}-cut-data"),
                whole[..whole.len() - 1].to_vec(),
            ));
            // The largest record libpcap accepts.
            let big = vec![(1_700_000_000, 5, 262_144, 262_144, rng.bytes(262_144))];
            v.push((
                format!("pcap-{tag}-262144"),
                pcap(be, nanos, 262_144, 1, &big),
            ));
            // Larger, as D-Bus allows.
            let dbus = vec![(1_700_000_000, 5, 300_000, 300_000, rng.bytes(300_000))];
            v.push((format!("pcap-{tag}-dbus"), pcap(be, nanos, 0, 231, &dbus)));
            // Versions 2.2 (caplen and len swapped) and 2.3 (swapped where caplen > len).
            let swapped: Vec<Rec> = recs[..10]
                .iter()
                .map(|(s, f, c, w, d)| (*s, *f, *w, *c, d.clone()))
                .collect();
            for minor in [2u8, 3] {
                let mut old = pcap(be, nanos, 65_535, 1, &swapped);
                old[if be { 7 } else { 6 }] = minor;
                v.push((format!("pcap-{tag}-v2.{minor}"), old));
            }
        }
    }
    // Every link type value (and the FCS bits above them).
    let recs = records(&mut rng, 8, false, 200);
    for lt in (0..=300).chain([
        1 | 0x1000_0000,
        1 | 0x0400_0000 | 0x0800_0000,
        0xffff,
        0x03ff_ffff,
    ]) {
        v.push((
            format!("pcap-linktype-{lt:#x}"),
            pcap(false, false, 65_535, lt, &recs),
        ));
    }
    for be in [false, true] {
        let tag = if be { "be" } else { "le" };
        // Several interfaces (libpcap wants one link type and snaplen for all): µs (default),
        // ns, ms, 2^-20 s, ps; one with an offset in seconds.
        let ifaces = [
            (65_535, None, None),
            (65_535, Some(9), None),
            (65_535, Some(3), Some(1_000)),
            (65_535, Some(0x80 | 20), None),
            (65_535, Some(12), None),
        ];
        v.push((
            format!("pcapng-{tag}-ifaces"),
            pcapng(be, &mut rng, &ifaces, 1, false),
        ));
        let one = pcapng(be, &mut rng, &[(65_535, Some(6), None)], 1, true);
        v.push((format!("pcapng-{tag}-spb"), one.clone()));
        v.push((format!("pcapng-{tag}-cut"), one[..one.len() - 5].to_vec()));
        // Packets longer than the interface's snaplen; snaplen 0.
        v.push((
            format!("pcapng-{tag}-snap300"),
            pcapng(be, &mut rng, &[(300, None, None)], 1, false),
        ));
        v.push((
            format!("pcapng-{tag}-snap0"),
            pcapng(be, &mut rng, &[(0, None, None); 2], 1, false),
        ));
        v.push((
            format!("pcapng-{tag}-linktype-228"),
            pcapng(be, &mut rng, &[(0, None, None)], 228, false),
        ));
    }
    v
}

#[test]
fn reader_agrees_with_libpcap_on_odd_files() {
    let dir = TempDir::new("libpcap");
    let Some(lp) = libpcap_reader(&dir.0) else {
        return;
    };
    let files = odd_files();
    let mut packets = 0;
    for (name, bytes) in &files {
        let path = dir.path(name);
        std::fs::write(&path, bytes).unwrap();
        let (theirs, end) = libpcap(&lp, &path);
        assert!(
            end == "end" || end.contains("truncated"),
            "{name}: libpcap ended with {end}"
        );
        let ours = ours(&path).unwrap_or_else(|| panic!("{name}: ringcap could not open it"));
        assert_eq!(
            ours.len(),
            theirs.len(),
            "{name}: packet count (libpcap: {end})"
        );
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(
                a, b,
                "{name}: packet {i} (ts_ns caplen len bytes) differs from libpcap's"
            );
        }
        packets += theirs.len();
    }
    assert!(
        files.len() > 300 && packets > 3000,
        "{} files, {packets} packets",
        files.len()
    );
}

#[test]
fn reader_agrees_with_libpcap_up_to_where_libpcap_stops_on_mutated_files() {
    let dir = TempDir::new("libpcap-fuzz");
    let Some(lp) = libpcap_reader(&dir.0) else {
        return;
    };
    let seeds: Vec<(String, Vec<u8>)> = odd_files()
        .into_iter()
        .filter(|(n, _)| !n.contains("linktype") || n.ends_with("0x1"))
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut compared = 0;
    for round in 0..400 {
        let (name, seed) = &seeds[round % seeds.len()];
        let mut b = seed.clone();
        // Past the file header (pcap) or section header block (pcapng): ringcap refuses a file
        // whose first block is damaged, where libpcap does not check the SHB's trailing length.
        let head = if name.starts_with("pcapng") { 28 } else { 24 };
        // A few changed bytes, sometimes a cut.
        for _ in 0..1 + rng.below(4) {
            let at = head + rng.below((b.len() - head) as u64) as usize;
            b[at] = rng.next() as u8;
        }
        if rng.below(4) == 0 {
            b.truncate(head + rng.below((b.len() - head) as u64) as usize);
        }
        let path = dir.path(&format!("m{round}"));
        std::fs::write(&path, &b).unwrap();
        let (theirs, end) = libpcap(&lp, &path);
        if end.starts_with("open error") {
            continue;
        }
        let ours = ours(&path)
            .unwrap_or_else(|| panic!("m{round} (from {name}): ringcap could not open it"));
        // Where libpcap stopped at damage, ringcap may go on past it, but agrees before.
        let n = if end == "end" {
            ours.len().max(theirs.len())
        } else {
            theirs.len()
        };
        // "?": libpcap's time for that packet is not a time (see the C program).
        let same = |a: Option<&String>, b: Option<&String>| match (a, b) {
            (Some(a), Some(b)) if b.starts_with("? ") => {
                a.split_once(' ').map(|x| x.1) == Some(&b[2..])
            }
            _ => a == b,
        };
        if let Some(i) = (0..n).find(|&i| !same(ours.get(i), theirs.get(i))) {
            panic!(
                "m{round} (from {name}), packet {i} of {} (libpcap: {end}):\nringcap {:?}\nlibpcap {:?}",
                theirs.len(),
                ours.get(i).map(|s| &s[..s.len().min(120)]),
                theirs.get(i).map(|s| &s[..s.len().min(120)]),
            );
        }
        std::fs::remove_file(&path).unwrap();
        compared += 1;
    }
    assert!(compared > 300, "{compared} mutated files compared");
}
