//! The capture session on its own: sources in memory (exact, no kernel) and a ring on a throwaway veth
//! testbed, feeding the real sinks; files checked with tcpdump.

#[path = "../../capture/tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use capture::{BatchSource, Frame, MemorySource, Source, SourceConfig};
use common::{frame, send_frames, seq_of, Spec};
use session::sinks::{CountSink, LoadSink, LoadSpec, WriterSink};
use session::{Options, Report, Session, Sink, SinkReport, Stop};
use store::{CaptureWriter, WriterOptions};
use testbed::{Side, Testbed, TestbedOptions};

/// Frames with sequence numbers `seqs`, 1 µs apart.
fn frames(seqs: std::ops::Range<u32>) -> Vec<Frame> {
    seqs.map(|seq| {
        let data = frame(&Spec::udp(seq, 60 + (seq as usize % 200)));
        Frame {
            ts_ns: 1_700_000_000_000_000_000 + u64::from(seq) * 1000,
            wire_len: data.len() as u32,
            data,
            vlan: None,
        }
    })
    .collect()
}

fn memory_sources(n: u32, per_source: u32) -> Vec<Box<dyn BatchSource>> {
    (0..n)
        .map(|i| {
            let s = MemorySource::new(frames(i * per_source..(i + 1) * per_source), 64);
            Box::new(s) as Box<dyn BatchSource>
        })
        .collect()
}

/// Runs `session` until its sources delivered `want` packets (or 20 s passed).
fn run_until(session: Session, stop: Stop, sinks: Vec<Box<dyn Sink>>, want: u64) -> Report {
    let counters = session.counters();
    let deadline = Instant::now() + Duration::from_secs(20);
    session
        .run(sinks, || {
            let got: u64 = counters.iter().map(|c| c.snapshot().packets).sum();
            if got >= want || Instant::now() > deadline {
                stop.request_stop();
            }
        })
        .expect("session")
}

fn writer(path: &Path) -> CaptureWriter {
    let opts = WriterOptions {
        direct_io: false,
        ..WriterOptions::default()
    };
    CaptureWriter::create(path, opts).expect("writer")
}

/// `tcpdump -r FILE -n` line count: the independent reading of what was written.
fn tcpdump_count(path: &Path) -> usize {
    let out = Command::new("tcpdump")
        .args(["-r", path.to_str().unwrap(), "-n"])
        .output()
        .expect("tcpdump (apt-get install tcpdump)");
    assert!(
        out.status.success(),
        "tcpdump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// Sequence numbers of every packet in a capture file, sorted.
fn seqs_in(path: &Path) -> Vec<u32> {
    let mut r = store::CaptureReader::open(path).expect("open");
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        v.push(seq_of(p.expect("packet").data));
    }
    v.sort_unstable();
    v
}

#[test]
fn two_threads_write_every_packet_once_to_one_file() {
    let dir = tempdir();
    let path = dir.join("two.pcap");
    let stop = Stop::new();
    let session = Session::new(memory_sources(2, 5000), Options::default(), stop.clone());
    let sinks: Vec<Box<dyn Sink>> = vec![
        Box::new(WriterSink::new(writer(&path))),
        Box::<CountSink>::default(),
    ];
    let r = run_until(session, stop, sinks, 10_000);
    assert!(r.thread_error.is_none() && r.sink_errors.is_empty());
    assert_eq!(r.source.packets, 10_000);
    match &r.sinks[..] {
        [SinkReport::Written { stats, .. }, SinkReport::Counted { packets }] => {
            assert_eq!(
                (stats.packets, stats.storage_drops, *packets),
                (10_000, 0, 10_000)
            );
        }
        other => panic!("unexpected reports {other:?}"),
    }
    assert_eq!(tcpdump_count(&path), 10_000);
    assert_eq!(seqs_in(&path), (0..10_000).collect::<Vec<_>>());
}

#[test]
fn count_limit_is_exact_over_threads_and_sinks() {
    let stop = Stop::new();
    let opts = Options {
        count: Some(1234),
        ..Options::default()
    };
    let session = Session::new(memory_sources(2, 5000), opts, stop.clone());
    let sinks: Vec<Box<dyn Sink>> = vec![
        Box::<CountSink>::default(),
        Box::new(LoadSink::new(LoadSpec::Memcpy(2), 2048)),
    ];
    let r = session.run(sinks, || {}).expect("session");
    assert!(stop.stopping(), "-c raises the stop flag for everyone");
    match &r.sinks[..] {
        [SinkReport::Counted { packets: c }, SinkReport::Loaded { packets: l }] => {
            assert_eq!((*c, *l), (1234, 1234));
        }
        other => panic!("unexpected reports {other:?}"),
    }
    // The sources counted whole batches: at least what was taken, at most what they held.
    assert!((1234..=10_000).contains(&r.source.packets));
}

#[test]
fn a_stopped_session_drains_what_had_arrived() {
    let stop = Stop::new();
    stop.request_stop();
    let session = Session::new(memory_sources(1, 3000), Options::default(), stop.clone());
    let r = session
        .run(vec![Box::<CountSink>::default()], || {})
        .expect("session");
    match r.sinks[..] {
        [SinkReport::Counted { packets }] => assert_eq!(packets, 3000),
        ref other => panic!("unexpected reports {other:?}"),
    }
}

#[test]
fn ring_fanout_on_a_testbed_writes_what_tcpdump_reads() {
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
    let mut cfg = SourceConfig::new(&tb.rx_if);
    cfg.ring.block_timeout = Duration::from_millis(20);
    let sources = tb
        .run_in(Side::Rx, || Source::open_group(&cfg, 2))
        .expect("open ring sources");
    let sources: Vec<Box<dyn BatchSource>> = sources
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn BatchSource>)
        .collect();
    let dir = tempdir();
    let path = dir.join("ring.pcap");
    let stop = Stop::new();
    let opts = Options {
        drain_wait: Duration::from_millis(70),
        ..Options::default()
    };
    let session = Session::new(sources, opts, stop.clone());
    let sink = WriterSink::new(writer(&path));
    let specs: Vec<Spec> = (0..4000)
        .map(|i| Spec::udp(i, 60 + (i as usize % 1400)))
        .collect();
    let sent: Vec<Vec<u8>> = specs.iter().map(frame).collect();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            tb.run_in(Side::Tx, || send_frames(&tb.tx_if, &sent));
        });
        run_until(session, stop, vec![Box::new(sink)], 4000)
    });
    assert!(r.thread_error.is_none() && r.sink_errors.is_empty());
    let SinkReport::Written { stats, .. } = &r.sinks[0] else {
        panic!("unexpected report {:?}", r.sinks);
    };
    // Every frame sent is either in the file or counted as a drop, and nothing else is in the file.
    assert_eq!(stats.packets + r.kernel.drops + stats.storage_drops, 4000);
    assert_eq!(tcpdump_count(&path) as u64, stats.packets);
    let seqs = seqs_in(&path);
    let mut dedup = seqs.clone();
    dedup.dedup();
    assert_eq!(dedup.len(), seqs.len(), "no packet twice");
    assert!(seqs.iter().all(|s| *s < 4000));
}

fn tempdir() -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "ringcap-session-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
