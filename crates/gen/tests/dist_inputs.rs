//! Inputs: sizes and dist text files (real files on disk), several concatenated, bad input.

use std::io::Write;
use std::path::PathBuf;
use wire::LinkType;

use gen::sizes::{
    count_frame, frame_ip_size, read_files, write_dist, DistError, FrameSize, Histogram, InputKind,
    ReadOptions, TraceStats,
};

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("ringcap-dist-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn file(&self, name: &str, body: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::File::create(&p)
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        p
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn parse_error(e: DistError) -> (String, usize, String) {
    match e {
        DistError::Parse { file, line, msg } => (file, line, msg),
        other => panic!("expected a parse error, got {other}"),
    }
}

#[test]
fn sizes_and_dist_files_concatenate() {
    let d = TempDir::new("concat");
    let a = d.file("a.sizes", "40\n1500\n\n# comment\n40\n  576  \n");
    let b = d.file("b.sizes", "40\n");
    let (h, rep) = read_files(InputKind::Sizes, &[a, b], &ReadOptions::default()).unwrap();
    assert_eq!(h, Histogram::from_pairs([(40, 3), (576, 1), (1500, 1)]));
    assert_eq!((rep.files, rep.records), (2, 5));

    let c = d.file("c.dist", "40 7\n576\t4\n1500    1\n");
    let e = d.file("e.dist", "40 1\n");
    let (h, rep) = read_files(InputKind::Dist, &[c, e], &ReadOptions::default()).unwrap();
    assert_eq!(h, Histogram::from_pairs([(40, 8), (576, 4), (1500, 1)]));
    assert_eq!((rep.files, rep.records), (2, 4));
}

#[test]
fn dist_field_separator() {
    let d = TempDir::new("fs");
    let f = d.file("x.csv", "40,7\n 576 , 4\n");
    let opts = ReadOptions {
        field_sep: Some(','),
        ..ReadOptions::default()
    };
    let (h, _) = read_files(InputKind::Dist, &[&f], &opts).unwrap();
    assert_eq!(h, Histogram::from_pairs([(40, 7), (576, 4)]));
    // Read with the default separator, the same file is an error on line 1.
    let (file, line, msg) =
        parse_error(read_files(InputKind::Dist, &[&f], &ReadOptions::default()).unwrap_err());
    assert!(file.ends_with("x.csv"));
    assert_eq!(line, 1);
    assert!(msg.contains("field separator"), "{msg}");
}

#[test]
fn dist_round_trips_through_write_dist() {
    let d = TempDir::new("rt");
    let h = Histogram::from_pairs([(40, 7), (576, 4), (1500, 1)]);
    let mut out = Vec::new();
    write_dist(&h, &mut out, ' ').unwrap();
    assert_eq!(
        String::from_utf8(out.clone()).unwrap(),
        "40 7\n576 4\n1500 1\n"
    );
    let f = d.file("rt.dist", std::str::from_utf8(&out).unwrap());
    let (back, _) = read_files(InputKind::Dist, &[f], &ReadOptions::default()).unwrap();
    assert_eq!(back, h);
}

#[test]
fn bad_sizes_name_file_and_line() {
    let d = TempDir::new("bad");
    let cases: &[(&str, usize, &str)] = &[
        ("40\n-5\n", 2, "negative"),
        ("40\n\n0\n", 3, "packet size 0"),
        ("1501\n", 1, "above the maximum size 1500"),
        ("40\n# c\nforty\n", 3, "not a whole number"),
        ("40 7\n", 1, "one packet size per line"),
        ("12.5\n", 1, "not a whole number"),
        ("99999999999999999999999\n", 1, "above the maximum"),
    ];
    for (i, &(body, line, what)) in cases.iter().enumerate() {
        let f = d.file(&format!("s{i}.sizes"), body);
        let (file, l, msg) =
            parse_error(read_files(InputKind::Sizes, &[&f], &ReadOptions::default()).unwrap_err());
        assert!(file.ends_with(&format!("s{i}.sizes")), "{file}");
        assert_eq!(l, line, "{body:?}: {msg}");
        assert!(msg.contains(what), "{body:?}: {msg}");
    }
    // The second file's error names the second file.
    let ok = d.file("ok.sizes", "40\n");
    let bad = d.file("bad.sizes", "40\n40\nx\n");
    let (file, l, _) =
        parse_error(read_files(InputKind::Sizes, &[ok, bad], &ReadOptions::default()).unwrap_err());
    assert!(file.ends_with("bad.sizes"));
    assert_eq!(l, 3);
}

#[test]
fn bad_dist_lines() {
    let d = TempDir::new("baddist");
    let cases: &[(&str, usize, &str)] = &[
        ("40 7\n-40 1\n", 2, "negative"),
        ("40 -7\n", 1, "count -7 is negative"),
        ("40 seven\n", 1, "not a whole number"),
        ("40 7 9\n", 1, "expected \"<size> <count>\""),
        ("40\n", 1, "expected \"<size> <count>\""),
        ("9000 1\n", 1, "above the maximum size 1500"),
        ("40 18446744073709551615\n41 1\n", 2, "overflows"),
    ];
    for (i, &(body, line, what)) in cases.iter().enumerate() {
        let f = d.file(&format!("d{i}.dist"), body);
        let (_, l, msg) =
            parse_error(read_files(InputKind::Dist, &[&f], &ReadOptions::default()).unwrap_err());
        assert_eq!(l, line, "{body:?}: {msg}");
        assert!(msg.contains(what), "{body:?}: {msg}");
    }
    // A larger N_ps accepts jumbo sizes.
    let f = d.file("jumbo.dist", "9000 1\n");
    let opts = ReadOptions {
        max_size: 9000,
        ..ReadOptions::default()
    };
    assert_eq!(
        read_files(InputKind::Dist, &[f], &opts)
            .unwrap()
            .0
            .count(9000),
        1
    );
}

#[test]
fn empty_and_unreadable_inputs() {
    let d = TempDir::new("empty");
    for (name, body) in [("e1", ""), ("e2", "\n\n"), ("e3", "# only a comment\n")] {
        let f = d.file(name, body);
        for kind in [InputKind::Sizes, InputKind::Dist] {
            match read_files(kind, &[&f], &ReadOptions::default()).unwrap_err() {
                DistError::Empty { file } => assert!(file.ends_with(name)),
                other => panic!("{name}: {other}"),
            }
        }
    }
    let bin = d.0.join("binary");
    std::fs::write(&bin, [0xd4, 0xc3, 0xb2, 0xa1, 0xff, 0xfe, b'\n']).unwrap();
    let (_, l, msg) =
        parse_error(read_files(InputKind::Sizes, &[&bin], &ReadOptions::default()).unwrap_err());
    assert_eq!(l, 1);
    assert!(msg.contains("not UTF-8"), "{msg}");
    let missing = d.0.join("missing");
    let e = read_files(InputKind::Sizes, &[&missing], &ReadOptions::default()).unwrap_err();
    assert!(matches!(e, DistError::Io { .. }), "{e}");
    assert!(e.to_string().contains("missing"));
}

/// An Ethernet/IPv4 frame whose IP total length field says `ip_len`.
fn eth_ipv4(ip_len: u16, vlan: bool) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if vlan {
        f.extend([0x81, 0x00, 0x00, 0x05]);
    }
    f.extend([0x08, 0x00]);
    f.extend([0x45, 0, (ip_len >> 8) as u8, ip_len as u8]);
    f.extend([0u8; 16]);
    f
}

#[test]
fn frame_sizes_as_createdist_counts_them() {
    assert_eq!(
        frame_ip_size(LinkType::Ethernet.pcap(), &eth_ipv4(46, false)),
        Some(FrameSize::Ip(46))
    );
    // The length comes from the IP header, so a short snap length does not change it.
    assert_eq!(
        frame_ip_size(LinkType::Ethernet.pcap(), &eth_ipv4(1500, false)[..20]),
        Some(FrameSize::Ip(1500))
    );
    assert_eq!(
        frame_ip_size(LinkType::Ethernet.pcap(), &eth_ipv4(100, true)),
        Some(FrameSize::Ip(100))
    );
    // ARP is not IP.
    let mut arp = eth_ipv4(0, false);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(
        frame_ip_size(LinkType::Ethernet.pcap(), &arp),
        Some(FrameSize::NonIp)
    );
    // IPv6: payload length 60 → 100 bytes.
    let mut v6 = vec![0u8; 12];
    v6.extend([0x86, 0xdd, 0x60, 0, 0, 0, 0, 60, 17, 64]);
    assert_eq!(
        frame_ip_size(LinkType::Ethernet.pcap(), &v6),
        Some(FrameSize::Ip(100))
    );
    // Malformed: total length below the header length; truncated before the length.
    assert_eq!(
        frame_ip_size(LinkType::Ethernet.pcap(), &eth_ipv4(10, false)),
        Some(FrameSize::BadIp)
    );
    assert_eq!(
        frame_ip_size(LinkType::Ethernet.pcap(), &eth_ipv4(46, false)[..15]),
        Some(FrameSize::BadIp)
    );
    assert_eq!(
        frame_ip_size(LinkType::Ethernet.pcap(), &[1, 2, 3]),
        Some(FrameSize::NonIp)
    );
    // Raw IP and an unknown link type.
    assert_eq!(
        frame_ip_size(LinkType::Raw.pcap(), &eth_ipv4(77, false)[14..]),
        Some(FrameSize::Ip(77))
    );
    assert_eq!(frame_ip_size(147, &[0u8; 40]), None);

    let mut h = Histogram::new();
    let mut st = TraceStats::default();
    for f in [
        eth_ipv4(46, false),
        eth_ipv4(1500, false),
        eth_ipv4(2000, false),
        arp.clone(),
    ] {
        count_frame(LinkType::Ethernet.pcap(), &f, 1500, &mut h, &mut st).unwrap();
    }
    assert_eq!(h, Histogram::from_pairs([(46, 1), (1500, 1)]));
    assert_eq!(
        st,
        TraceStats {
            packets: 4,
            ip: 2,
            non_ip: 1,
            bad_ip: 0,
            oversize: 1,
            reader_issues: 0,
        }
    );
}
