//! Fanout groups: two sockets, two threads; together they capture every frame exactly once.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use capture::{Fanout, FanoutMode, Source, SourceConfig, SourceKind};
use common::*;
use testbed::{Side, Testbed, TestbedOptions};

const N: u32 = 6_000;

fn fanout_union_is_exact(kind: SourceKind, fanout: Fanout) {
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
    let mut cfg = SourceConfig::new(&tb.rx_if);
    cfg.kind = kind;
    cfg.fanout = Some(fanout);
    let sources = tb
        .run_in(Side::Rx, || Source::open_group(&cfg, 2))
        .expect("open group");
    // 32 flows (source ports) so the hash has something to spread.
    let specs: Vec<Spec> = (0..N)
        .map(|i| Spec {
            sport: 5000 + (i % 32) as u16,
            ..Spec::udp(i, 60 + (i as usize * 13) % 600)
        })
        .collect();
    let frames: Vec<Vec<u8>> = specs.iter().map(frame).collect();
    let sent = by_seq(&frames, &specs);

    let total = AtomicU64::new(0);
    let before = tb.rx_packets();
    let per_thread: Vec<Vec<Got>> = std::thread::scope(|s| {
        let handles: Vec<_> = sources
            .into_iter()
            .map(|mut src| {
                let total = &total;
                s.spawn(move || {
                    let mut got = Vec::new();
                    let deadline = Instant::now() + Duration::from_secs(10);
                    // Each thread drains its own socket until the group as a whole has everything.
                    while Instant::now() < deadline && total.load(Ordering::Relaxed) < N as u64 {
                        let n = src
                            .for_each_batch(Duration::from_millis(20), |p| got.push(Got::from(p)))
                            .expect("capture");
                        total.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    while src
                        .for_each_batch(Duration::from_millis(60), |p| got.push(Got::from(p)))
                        .expect("capture")
                        > 0
                    {}
                    assert_eq!(src.kernel_stats().drops, 0);
                    got
                })
            })
            .collect();
        tb.run_in(Side::Tx, || send_frames(&tb.tx_if, &frames));
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let offered = tb.rx_packets() - before;
    assert_eq!(offered, N as u64);

    let mut seen = HashSet::new();
    for (t, got) in per_thread.iter().enumerate() {
        assert!(
            !got.is_empty(),
            "{kind:?} {fanout:?}: thread {t} got nothing"
        );
        for g in got {
            let seq = seq_of(&g.data);
            assert!(
                seen.insert(seq),
                "{kind:?} {fanout:?}: seq {seq} captured twice"
            );
            assert_eq!(g.data, sent[&seq]);
        }
    }
    assert_eq!(
        seen.len(),
        N as usize,
        "{kind:?} {fanout:?}: frames missing"
    );
    if fanout.mode == FanoutMode::Hash {
        // A flow never splits across sockets.
        let flow_of = |g: &Got| u16::from_be_bytes([g.data[34], g.data[35]]);
        let a: HashSet<u16> = per_thread[0].iter().map(flow_of).collect();
        let b: HashSet<u16> = per_thread[1].iter().map(flow_of).collect();
        assert!(a.is_disjoint(&b), "flows split: {a:?} vs {b:?}");
    }
    let sizes: Vec<usize> = per_thread.iter().map(Vec::len).collect();
    eprintln!("{kind:?} {fanout:?}: per thread {sizes:?}");
}

#[test]
fn ring_fanout_hash_defrag() {
    fanout_union_is_exact(
        SourceKind::Ring,
        Fanout {
            mode: FanoutMode::Hash,
            rollover: false,
            defrag: true,
        },
    );
}

#[test]
fn ring_fanout_lb_rollover() {
    fanout_union_is_exact(
        SourceKind::Ring,
        Fanout {
            mode: FanoutMode::Lb,
            rollover: true,
            defrag: false,
        },
    );
}

#[test]
fn copy_fanout_hash() {
    fanout_union_is_exact(SourceKind::Copy, Fanout::default());
}

#[test]
fn copy_fanout_lb() {
    fanout_union_is_exact(
        SourceKind::Copy,
        Fanout {
            mode: FanoutMode::Lb,
            ..Fanout::default()
        },
    );
}

/// Two groups on one interface in one process get different ids (PACKET_FANOUT_FLAG_UNIQUEID), so each
/// group sees every frame; with a shared id the four sockets would split the traffic instead.
#[test]
fn two_groups_in_one_process_do_not_merge() {
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
    let cfg = SourceConfig::new(&tb.rx_if);
    let (mut a, mut b) = tb.run_in(Side::Rx, || {
        (
            Source::open_group(&cfg, 2).expect("group a"),
            Source::open_group(&cfg, 2).expect("group b"),
        )
    });
    let specs: Vec<Spec> = (0..1_000)
        .map(|i| Spec {
            sport: 5000 + (i % 8) as u16,
            ..Spec::udp(i, 100)
        })
        .collect();
    let frames: Vec<Vec<u8>> = specs.iter().map(frame).collect();
    tb.run_in(Side::Tx, || send_frames(&tb.tx_if, &frames));
    for group in [&mut a, &mut b] {
        let mut seqs = HashSet::new();
        for src in group.iter_mut() {
            while src
                .for_each_batch(Duration::from_millis(60), |p| {
                    assert!(seqs.insert(seq_of(p.data)));
                })
                .expect("capture")
                > 0
            {}
        }
        assert_eq!(seqs.len(), 1_000);
    }
}
