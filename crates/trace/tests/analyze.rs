//! Analyses of a converted set with a known schedule: exact rates, burstiness, sizes, mix, flows.

mod common;

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use common::*;
use trace::{analyze, convert, AnalyzeOptions, ConvertOptions, Progress};

/// 2026-11-22 00:00:00 UTC.
const T0: u64 = 1_795_305_600_000_000_000;
const SEC: u64 = 1_000_000_000;

/// 120 s: one UDP packet (IP length 100) every 10 ms from A to B, plus in second 30 a burst of 50
/// TCP packets (IP length 1500) 1 µs apart from B to A, plus 10 ARP frames spread out.
fn schedule() -> Vec<Pkt> {
    let mut v = Vec::new();
    for i in 0..12_000u64 {
        v.push(Pkt::new(
            T0 + i * 10_000_000,
            udp4([10, 0, 0, 1], [10, 0, 0, 2], 4000, 53, 72, None),
        ));
    }
    for i in 0..50u64 {
        v.push(Pkt::new(
            T0 + 30 * SEC + 5_000_000 + i * 1000,
            tcp4([10, 0, 0, 2], [10, 0, 0, 1], 443, 5555, 0x10, 1460),
        ));
    }
    for i in 0..10u64 {
        v.push(Pkt::new(T0 + i * 11 * SEC + 1, arp()));
    }
    v.sort_by_key(|p| p.ts_ns);
    v
}

fn converted(dir: &Path) -> std::path::PathBuf {
    let (bytes, _) = pcap_bytes(&schedule(), 1);
    let input = write(dir, "sched.pcap", &bytes);
    let out = dir.join("set");
    let mut o = ConvertOptions::new(&out);
    o.threads = 2;
    o.rows_per_group = 1000;
    convert(&[input], &o, &Progress::default()).unwrap();
    out
}

#[test]
fn rates_bursts_sizes_mix_and_flows() {
    let dir = tempdir();
    let set = converted(dir.path());
    let report = dir.path().join("report");
    let a = analyze(
        &set,
        &report,
        &AnalyzeOptions {
            threads: 2,
            top: 5,
            ..AnalyzeOptions::default()
        },
    )
    .unwrap();
    let pk = schedule();
    assert_eq!(a.packets, pk.len() as u64);
    assert_eq!(
        a.bytes,
        pk.iter().map(|p| u64::from(p.wire_len)).sum::<u64>()
    );

    // Timeline: two minutes; the first has 6000 UDP + 50 TCP + 6 ARP (t = 0, 11, ..., 55 s).
    assert_eq!(a.timeline.len(), 2);
    assert_eq!(a.timeline[0].packets, 6000 + 50 + 6);
    assert_eq!(a.timeline[1].packets, 6000 + 4);
    assert_eq!(a.timeline[0].start_ns, T0);
    // Second 30 holds 100 UDP + 50 TCP; a second holds at least 100 UDP.
    assert_eq!(a.timeline[0].max_pps, 150.0);
    assert_eq!(a.timeline[1].min_pps, 100.0);
    assert_eq!(a.hours.len(), 1);
    assert_eq!(a.hours[0].minutes, 2);

    // Burstiness: 100 µs windows. The TCP burst spans 50 µs (one or two windows).
    let b100us = &a.burstiness[0];
    assert_eq!(b100us.window_s, 0.0001);
    assert_eq!(b100us.windows, (120 * SEC - 10_000_000) / 100_000 + 1);
    let max = *b100us.pps.last().unwrap();
    assert!(max == 50.0 / 0.0001 || max == 51.0 / 0.0001, "max {max}");
    assert_eq!(b100us.pps[4], 0.0, "most 100 µs windows are empty");
    // 1 s windows: 120 of them, median 100 UDP (+ ARP in some).
    let b1s = &a.burstiness[4];
    assert_eq!(b1s.windows, 120);
    assert_eq!(b1s.empty, 0);
    assert_eq!(b1s.pps[4], 100.0);
    assert_eq!(*b1s.pps.last().unwrap(), 150.0);

    // Sizes: IP lengths 100 (12000) and 1500 (50); ARP has none.
    assert_eq!(a.sizes.ip_packets, 12_050);
    assert_eq!(a.packets_without_ip_len, 10);
    assert_eq!((a.sizes.min, a.sizes.max, a.sizes.distinct), (100, 1500, 2));
    assert_eq!(a.sizes.heavy_hitters[0].size, 100);
    assert_eq!(a.sizes.heavy_hitters[1].cumulative_pct, 100.0);

    // Mix and flows: UDP A→B, TCP B→A, ARP.
    assert_eq!(a.flows, 3);
    let protos: Vec<(&str, u64)> = a
        .mix
        .protocols
        .iter()
        .map(|s| (s.name.as_str(), s.packets))
        .collect();
    assert_eq!(
        protos,
        [("IPv4/UDP", 12_000), ("IPv4/TCP", 50), ("ARP", 10)]
    );
    assert_eq!(a.mix.top_ports[0].name, "udp/53");
    assert_eq!(a.mix.top_ports[1].name, "tcp/5555");
    assert_eq!(a.mix.top_sources[0].name, "10.0.0.1");

    // Report files.
    for f in [
        "index.html",
        "report.json",
        "timeline.svg",
        "burstiness.svg",
        "sizes.svg",
        "sizes.dist",
        "flows.parquet",
    ] {
        assert!(report.join(f).is_file(), "{f} missing");
    }
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("burstiness.svg") && html.contains("IPv4/UDP"));
    every_plot_draws_data(&report);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["packets"], 12_060);

    // The flow table.
    let flows = read_batches(&report.join("flows.parquet"));
    let n: usize = flows.iter().map(|b| b.num_rows()).sum();
    assert_eq!(n, 3);
    let pk_col: Vec<u64> = flows
        .iter()
        .flat_map(|b| {
            b.column_by_name("packets")
                .unwrap()
                .as_primitive::<UInt64Type>()
                .values()
                .to_vec()
        })
        .collect();
    let mut sorted = pk_col.clone();
    sorted.sort();
    assert_eq!(sorted, [10, 50, 12_000]);

    // The dist file reads back as the generator's input with the same counts.
    let text = std::fs::read_to_string(report.join("sizes.dist")).unwrap();
    let mut hist = gen::sizes::Histogram::new();
    gen::sizes::read_dist(
        text.as_bytes(),
        "sizes.dist",
        &Default::default(),
        &mut hist,
    )
    .unwrap();
    assert_eq!(hist.count(100), 12_000);
    assert_eq!(hist.count(1500), 50);
    assert_eq!(hist.total(), 12_050);
}

#[test]
fn a_single_file_and_errors() {
    let dir = tempdir();
    let set = converted(dir.path());
    let one = &parquet_files(&set)[0];
    let a = analyze(one, &dir.path().join("r1"), &AnalyzeOptions::default()).unwrap();
    assert!(a.packets > 0 && a.packets < 12_060);

    let empty = dir.path().join("nothing");
    std::fs::create_dir(&empty).unwrap();
    let e = analyze(&empty, &dir.path().join("r2"), &AnalyzeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("no .parquet files"), "{e}");

    // A Parquet file that is not a packet table (the flow table) is refused by name.
    let e = analyze(
        &dir.path().join("r1/flows.parquet"),
        &dir.path().join("r3"),
        &AnalyzeOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no column"), "{e}");
}

/// Every plot of a report draws data, not only axes and a legend.
fn every_plot_draws_data(report: &Path) {
    for e in std::fs::read_dir(report).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "svg") {
            let svg = std::fs::read_to_string(&p).unwrap();
            let marks = plot::drawn_data_marks(&svg);
            assert!(
                marks.is_some_and(|n| n > 0),
                "{}: {marks:?} data marks",
                p.display()
            );
        }
    }
}

/// A 1.5 s trace (issue 14 item 6: a 2 s trace drew empty per-minute timelines): the timeline is in
/// 100 ms bins of 100 packets each (one packet a millisecond), min and max over 10 ms sub-windows.
#[test]
fn a_short_trace_gets_a_timeline_in_100_ms_bins() {
    let dir = tempdir();
    let pk: Vec<Pkt> = (0..1500u64)
        .map(|i| {
            Pkt::new(
                T0 + i * 1_000_000,
                udp4([10, 0, 0, 1], [10, 0, 0, 2], 4000, 53, 72, None),
            )
        })
        .collect();
    let (bytes, _) = pcap_bytes(&pk, 1);
    let input = write(dir.path(), "short.pcap", &bytes);
    let set = dir.path().join("set");
    convert(&[input], &ConvertOptions::new(&set), &Progress::default()).unwrap();
    let report = dir.path().join("report");
    let a = analyze(&set, &report, &AnalyzeOptions::default()).unwrap();
    assert_eq!(a.timeline.len(), 15);
    for (i, b) in a.timeline.iter().enumerate() {
        assert_eq!(b.start_ns, T0 + i as u64 * SEC / 10);
        assert_eq!((b.width_ns, b.sub_ns), (SEC / 10, SEC / 100));
        assert_eq!(b.packets, 100);
        assert_eq!((b.pps, b.min_pps, b.max_pps), (1000.0, 1000.0, 1000.0));
    }
    // The hourly table stays over minutes: one minute with all of it.
    assert_eq!(a.hours.len(), 1);
    assert_eq!(a.hours[0].minutes, 1);
    let svg = std::fs::read_to_string(report.join("timeline.svg")).unwrap();
    assert!(
        svg.contains("per 100 ms") && svg.contains("seconds"),
        "{svg}"
    );
    every_plot_draws_data(&report);
}
