//! Coverage records of file mode: a fake drop meter counts a drop every 100 packets while a
//! size-rotated series is written; each file's record must hold exactly the drops counted while it
//! was the file being written, its packets and first/last times as read back from the file, and
//! one file's end must be the next one's start.

mod common;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use common::*;
use store::{CaptureWriter, FilePlan, Format, WriterOptions};

#[test]
fn drops_land_in_the_file_open_when_they_were_counted_and_times_match_the_file() {
    let dir = TempDir::new("coverage-marks");
    let kernel = Arc::new(AtomicU64::new(0));
    let k = Arc::clone(&kernel);
    let mut plan = FilePlan::new(&dir.0, "c");
    plan.rotate_bytes = Some(300_000);
    plan.coverage = Some(Arc::new(move || store::Drops {
        kernel: k.load(Relaxed),
        ..Default::default()
    }));
    let opts = WriterOptions {
        format: Format::Pcap { nanos: false },
        buffer_size: 1 << 20,
        buffers: 64,
        direct_io: false,
        ..Default::default()
    };
    let pkts = packets(4000, false);
    let mut w = CaptureWriter::create_files(plan, opts).unwrap();
    // A drop counted before packet i (every 100th) happened while packet i-1's file was open.
    let mut dropped_after = Vec::new();
    for (i, p) in pkts.iter().enumerate() {
        if i > 0 && i % 100 == 0 {
            kernel.fetch_add(1, Relaxed);
            dropped_after.push(i - 1);
        }
        assert!(w.write_packet(p.ts_ns, p.wire_len, &p.data, p.vlan));
    }
    kernel.fetch_add(2, Relaxed); // after the last packet: the last file's
    w.finish(None).unwrap();

    let mut files: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| store::parse_name("c", p.file_name().unwrap().to_str().unwrap()).is_some())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let (mut first_packet, mut total) = (0usize, 0);
    let mut prev_closed = None;
    for (n, f) in files.iter().enumerate() {
        let c = store::read_coverage(f).unwrap().expect("a record");
        let (read, _) = read_all(f);
        let range = first_packet..first_packet + read.len();
        first_packet = range.end;
        let mut want = dropped_after.iter().filter(|i| range.contains(i)).count() as u64;
        if n == files.len() - 1 {
            want += 2;
        }
        assert_eq!(c.drops.kernel, want, "{}", f.display());
        assert_eq!(c.drops.storage, 0);
        total += c.drops.kernel;
        assert_eq!(c.packets, read.len() as u64);
        // µs pcap: the times as the file holds them.
        assert_eq!(c.first_ns, Some(read[0].ts_ns));
        assert_eq!(c.last_ns, Some(read.last().unwrap().ts_ns));
        assert!(c.opened_ns <= read[0].ts_ns && c.closed_ns >= read.last().unwrap().ts_ns);
        if let Some(p) = prev_closed {
            assert_eq!(
                c.opened_ns,
                p,
                "{} does not begin where its predecessor ended",
                f.display()
            );
        }
        prev_closed = Some(c.closed_ns);
    }
    assert_eq!(first_packet, pkts.len());
    assert_eq!(total, kernel.load(Relaxed));
}
