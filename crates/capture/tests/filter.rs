//! Filters compiled by libpcap and run by the kernel: the thesis's 50-instruction filter (seed 000,
//! Figure 6.5) and a port filter on mixed traffic.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use capture::{
    compile_filter, dump, run_filter, CaptureError, DumpStyle, FilterError, Source, SourceConfig,
    SourceKind, MAX_SNAPLEN,
};
use common::*;
use testbed::{Side, Testbed, TestbedOptions};
use wire::LinkType;

/// Figure 6.5 with one address of the 20 `ip dst` lines given as `dst11`.
fn thesis_filter(dst11: &str) -> String {
    let mut f = String::from("ether[6:4]=0x00000000 and ether[10]=0x00 and not tcp");
    for i in 0..19u32 {
        f += &format!(" and not ip src {}.11.12.{}", (i + 1) * 10, 13 + i);
    }
    for i in 0..19u32 {
        let addr = if i == 10 {
            dst11.to_string()
        } else {
            format!("{}.99.12.{}", (i + 1) * 10, 13 + i)
        };
        f += &format!(" and not ip dst {addr}");
    }
    f
}

/// `tcpdump -d` on the same expression (independent of our wrapper), one line per instruction.
fn tcpdump_d(expr: &str) -> String {
    let out = Command::new("tcpdump")
        .args(["-d", "-i", "lo", expr])
        .output()
        .expect("run tcpdump");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn thesis_filter_as_printed_names_the_bad_address() {
    let expr = thesis_filter("990.99.12.23");
    assert!(expr.contains(
        "and not ip dst 100.99.12.22 and not ip dst 990.99.12.23 and not ip dst 120.99.12.24"
    ));
    let e = compile_filter(&expr, LinkType::Ethernet, MAX_SNAPLEN).unwrap_err();
    assert!(matches!(e, FilterError::Syntax { .. }));
    let msg = e.to_string();
    assert!(msg.starts_with("bad filter expression: "), "{msg}");
    assert!(msg.contains("invalid IPv4 address '990.99.12.23'"), "{msg}");
    assert!(msg.contains("check the addresses and syntax"), "{msg}");

    // Opening a source with it is not possible either: the error reaches the caller as CaptureError.
    let ce: CaptureError = e.into();
    assert!(ce.to_string().contains("990.99.12.23"));
}

#[test]
fn thesis_filter_compiles_like_tcpdump_and_accepts_every_generated_frame() {
    let expr = thesis_filter("110.99.12.23");
    let prog = compile_filter(&expr, LinkType::Ethernet, MAX_SNAPLEN).expect("compiles");
    // Same program as tcpdump's, instruction for instruction (the thesis counted 50 with its libpcap).
    assert_eq!(dump(&prog, DumpStyle::Asm), tcpdump_d(&expr));
    eprintln!(
        "thesis filter: {} instructions with this libpcap (thesis: 50)",
        prog.len()
    );

    for kind in [SourceKind::Ring, SourceKind::Copy] {
        let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
        let mut cfg = SourceConfig::new(&tb.rx_if);
        cfg.kind = kind;
        cfg.filter = Some(prog.clone());
        let mut src = tb.run_in(Side::Rx, || Source::open(&cfg)).expect("open");
        // Source MAC cycles 00:00:00:00:00:00..02, UDP, 10.77.0.1 -> 10.77.0.2: like the thesis's traffic.
        let specs: Vec<Spec> = (0..3_000)
            .map(|i| Spec::udp(i, 60 + (i as usize % 200)))
            .collect();
        let frames: Vec<Vec<u8>> = specs.iter().map(frame).collect();
        for f in &frames {
            assert_eq!(
                run_filter(&prog, f, f.len() as u32),
                MAX_SNAPLEN,
                "libpcap rejects a frame"
            );
        }
        tb.run_in(Side::Tx, || send_frames(&tb.tx_if, &frames));
        let got = drain(&mut src, frames.len() as u64);
        assert_eq!(src.kernel_stats().drops, 0);
        assert_eq!(
            got.len(),
            frames.len(),
            "{kind:?}: the filter rejected frames"
        );
        for (g, f) in got.iter().zip(&frames) {
            assert_eq!(&g.data, f);
        }
    }
}

#[test]
fn port_filter_on_mixed_traffic_captures_exactly_the_matching_frames() {
    let expr = "udp port 9";
    let prog = compile_filter(expr, LinkType::Ethernet, MAX_SNAPLEN).unwrap();
    assert_eq!(dump(&prog, DumpStyle::Asm), tcpdump_d(expr));
    // UDP to/from 9 (match), UDP elsewhere, TCP port 9 (no match), non-IP (no match).
    let specs: Vec<Spec> = (0..4_000u32)
        .map(|i| {
            let base = Spec::udp(i, 60 + (i as usize * 3) % 300);
            match i % 5 {
                0 => Spec { dport: 9, ..base },
                1 => Spec { sport: 9, ..base },
                2 => Spec {
                    proto: TCP,
                    dport: 9,
                    ..base
                },
                3 => Spec { proto: 0, ..base },
                _ => Spec { dport: 53, ..base },
            }
        })
        .collect();
    let frames: Vec<Vec<u8>> = specs.iter().map(frame).collect();
    let expected: BTreeSet<u32> = specs
        .iter()
        .filter(|s| s.proto == UDP && (s.sport == 9 || s.dport == 9))
        .map(|s| s.seq)
        .collect();
    // libpcap's own interpreter agrees with the construction.
    let offline: BTreeSet<u32> = specs
        .iter()
        .zip(&frames)
        .filter(|(_, f)| run_filter(&prog, f, f.len() as u32) > 0)
        .map(|(s, _)| s.seq)
        .collect();
    assert_eq!(offline, expected);

    for kind in [SourceKind::Ring, SourceKind::Copy] {
        let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
        let mut cfg = SourceConfig::new(&tb.rx_if);
        cfg.kind = kind;
        cfg.filter = Some(prog.clone());
        let mut src = tb.run_in(Side::Rx, || Source::open(&cfg)).expect("open");
        let before = tb.rx_packets();
        tb.run_in(Side::Tx, || send_frames(&tb.tx_if, &frames));
        assert_eq!(tb.rx_packets() - before, frames.len() as u64);
        let got = drain(&mut src, expected.len() as u64);
        let k = src.kernel_stats();
        assert_eq!(k.drops, 0);
        // The kernel counts only what the filter accepted.
        assert_eq!(k.packets, expected.len() as u64, "{kind:?}");
        let captured: BTreeSet<u32> = got.iter().map(|g| seq_of(&g.data)).collect();
        assert_eq!(got.len(), captured.len(), "{kind:?}: duplicates");
        assert_eq!(captured, expected, "{kind:?}");
    }
}

#[test]
fn dump_styles_match_tcpdump() {
    let expr = "tcp[tcpflags] & tcp-syn != 0 or icmp";
    let prog = compile_filter(expr, LinkType::Ethernet, MAX_SNAPLEN).unwrap();
    for (style, flag) in [
        (DumpStyle::Asm, "-d"),
        (DumpStyle::C, "-dd"),
        (DumpStyle::Decimal, "-ddd"),
    ] {
        let out = Command::new("tcpdump")
            .args([flag, "-i", "lo", expr])
            .output()
            .unwrap();
        assert_eq!(
            dump(&prog, style),
            String::from_utf8(out.stdout).unwrap(),
            "{flag}"
        );
    }
}
