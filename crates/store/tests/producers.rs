//! Several producers (one per capture thread) writing one file or one series of files: every
//! packet written exactly once, every file starting with its header, read back by our reader and
//! by tcpdump and compared with what the threads were given.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Instant;

use common::*;
use store::{CaptureWriter, CompressMode, FilePlan, Format, Producer, WriterOptions};

const THREADS: usize = 3;

fn opts(format: Format) -> WriterOptions {
    WriterOptions {
        format,
        buffer_size: 1 << 20,
        buffers: 64,
        direct_io: false,
        ..Default::default()
    }
}

/// Writes `pkts` split over `THREADS` producers on their own threads (packet i to thread
/// i % THREADS), calling `tick` every 100 packets as a capture loop does per block; `midway`
/// runs once on thread 0 halfway through. Returns the packets accepted.
fn write_threaded(
    mut w: CaptureWriter,
    pkts: &[TestPacket],
    midway: impl Fn() + Send + Sync,
) -> (Vec<TestPacket>, store::WriterStats) {
    let producers: Vec<Producer> = (0..THREADS).map(|_| w.producer()).collect();
    let accepted: Vec<TestPacket> = std::thread::scope(|s| {
        let handles: Vec<_> = producers
            .into_iter()
            .enumerate()
            .map(|(t, mut p)| {
                let midway = &midway;
                s.spawn(move || {
                    let mine: Vec<&TestPacket> = pkts.iter().skip(t).step_by(THREADS).collect();
                    let mut ok = Vec::new();
                    for (i, pk) in mine.iter().enumerate() {
                        if p.write_packet(pk.ts_ns, pk.wire_len, &pk.data, pk.vlan) {
                            ok.push((*pk).clone());
                        }
                        if i % 100 == 99 {
                            p.tick(Instant::now(), wall_ns());
                        }
                        if t == 0 && i == mine.len() / 2 {
                            midway();
                        }
                    }
                    p.finish();
                    ok
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let stats = w.finish(None).expect("finish");
    assert_eq!(stats.packets, accepted.len() as u64, "{stats:?}");
    assert_eq!(
        stats.packets + stats.storage_drops,
        pkts.len() as u64,
        "every packet is written or counted"
    );
    assert!(accepted.len() * 2 > pkts.len(), "most packets fit the pool");
    (accepted, stats)
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// The complete files of `base` in `dir`, oldest first.
fn listed(dir: &Path, base: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| Some((store::parse_name(base, p.file_name()?.to_str()?)?, p)))
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// (timestamp, wire length, bytes) of what a reader must return, sorted: the multiset.
fn expected(accepted: &[TestPacket]) -> Vec<(u64, u32, Vec<u8>)> {
    let mut v: Vec<_> = accepted
        .iter()
        .map(|p| {
            let vlan = if p.vlan.is_some() { 4 } else { 0 };
            (p.ts_ns, p.wire_len + vlan, expected_bytes(p, 262_144))
        })
        .collect();
    v.sort();
    v
}

/// Reads every file with our reader (each must begin with a valid header and be undamaged).
fn read_sorted(files: &[PathBuf]) -> Vec<(u64, u32, Vec<u8>)> {
    let mut got = Vec::new();
    for f in files {
        let (pkts, r) = read_all(f);
        assert!(!r.damaged(), "{}: {:?}", f.display(), r.issues());
        got.extend(pkts.into_iter().map(|p| (p.ts_ns, p.wire_len, p.data)));
    }
    got.sort();
    got
}

/// Timestamps (ns) of every packet according to `tcpdump -r`, sorted.
fn tcpdump_times(plain: &Path) -> Vec<u64> {
    let out = run(Command::new("tcpdump")
        .args(["-n", "-q", "-tt", "--time-stamp-precision=nano", "-r"])
        .arg(plain));
    // One line per packet, starting with `sec.nsec` (decoders may add indented lines).
    let mut v: Vec<u64> = out
        .lines()
        .filter_map(|l| {
            let (s, ns) = l.split_whitespace().next()?.split_once('.')?;
            Some(s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?)
        })
        .collect();
    v.sort();
    v
}

fn sorted_times(accepted: &[TestPacket]) -> Vec<u64> {
    let mut v: Vec<u64> = accepted.iter().map(|p| p.ts_ns).collect();
    v.sort();
    v
}

#[test]
fn several_producers_write_one_file_once_each() {
    let dir = TempDir::new("producers-one");
    let path = dir.path("x.pcap");
    let w = CaptureWriter::create(
        &path,
        WriterOptions {
            direct_io: true,
            ..opts(Format::Pcap { nanos: true })
        },
    )
    .unwrap();
    let pkts = packets(12_000, true); // ~9 MB: many buffers from every thread
    let (accepted, stats) = write_threaded(w, &pkts, || {});
    assert_eq!(
        read_sorted(std::slice::from_ref(&path)),
        expected(&accepted)
    );
    // Each producer's buffers end at its own last record, anywhere: the writer stages them so that
    // O_DIRECT stays on (it fell back to the page cache before, at ~3x the CPU per packet).
    if direct_io_works(dir.path("probe")) {
        assert!(stats.direct_io, "O_DIRECT given up: {stats:?}");
    }
    if have("tcpdump") {
        assert_eq!(tcpdump_times(&path), sorted_times(&accepted));
    }
}

#[test]
fn several_producers_rotate_plain_files_by_size_with_o_direct() {
    let dir = TempDir::new("producers-direct-files");
    let mut plan = FilePlan::new(&dir.0, "d");
    plan.rotate_bytes = Some(3_000_000);
    let w = CaptureWriter::create_files(
        plan,
        WriterOptions {
            direct_io: true,
            ..opts(Format::Pcap { nanos: true })
        },
    )
    .unwrap();
    let pkts = packets(12_000, true); // ~9 MB: three or four files of whole buffers of all threads
    let (accepted, stats) = write_threaded(w, &pkts, || {});
    let files = listed(&dir.0, "d");
    assert!((3..=5).contains(&files.len()), "{files:?}");
    assert_eq!(read_sorted(&files), expected(&accepted));
    let on_disk: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert_eq!(on_disk, stats.bytes_written, "{stats:?}");
    for f in &files {
        assert!(
            std::fs::metadata(f).unwrap().len() <= 3_000_000,
            "{}",
            f.display()
        );
    }
    // Buffers end anywhere; the stage keeps the writes aligned, so only each file's last partial
    // block goes through the page cache (it all did before, from each file's first buffer on).
    if direct_io_works(dir.path("probe")) {
        let cached = stats.bytes_written - stats.bytes_direct;
        assert!(
            cached < 4096 * files.len() as u64,
            "{cached} bytes through the page cache: {stats:?}"
        );
    }
    if have("tcpdump") {
        let mut times: Vec<u64> = files.iter().flat_map(|f| tcpdump_times(f)).collect();
        times.sort();
        assert_eq!(times, sorted_times(&accepted));
    }
}

#[test]
fn several_producers_rotate_compressed_files_by_size_and_on_request() {
    let dir = TempDir::new("producers-files");
    let mut plan = FilePlan::new(&dir.0, "p");
    plan.compression = CompressMode::Zstd(1);
    plan.rotate_bytes = Some(400_000);
    let w = CaptureWriter::create_files(plan, opts(Format::PcapNg)).unwrap();
    let request = w.rotation_request();
    let pkts = packets(12_000, true);
    let (accepted, _) = write_threaded(w, &pkts, || request.store(true, Ordering::Relaxed));
    assert!(!request.load(Ordering::Relaxed), "the request was served");
    let files = listed(&dir.0, "p");
    assert!(files.len() >= 20, "~9 MB in files of 400 kB: {files:?}");
    assert_eq!(read_sorted(&files), expected(&accepted));
    let mut times = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let plain = zstd::stream::decode_all(std::fs::File::open(f).unwrap()).unwrap();
        // The statistics block written at close may go past the limit, as with one thread.
        let last = i + 1 == files.len();
        assert!(
            last || plain.len() <= 400_000,
            "{}: {} bytes",
            f.display(),
            plain.len()
        );
        assert_eq!(
            &plain[..4],
            &0x0A0D_0D0Au32.to_le_bytes(),
            "starts with its SHB"
        );
        if have("tcpdump") {
            let p = dir.path("plain.pcapng");
            std::fs::write(&p, &plain).unwrap();
            times.extend(tcpdump_times(&p));
        }
    }
    if have("tcpdump") {
        times.sort();
        assert_eq!(times, sorted_times(&accepted));
    }
}

#[test]
fn several_producers_rotate_plain_files_by_packet_time() {
    let dir = TempDir::new("producers-time");
    let mut plan = FilePlan::new(&dir.0, "g");
    plan.rotate_secs = Some(1);
    let w = CaptureWriter::create_files(plan, opts(Format::Pcap { nanos: true })).unwrap();
    let now = wall_ns();
    let mut pkts = packets(7000, false);
    for (i, p) in pkts.iter_mut().enumerate() {
        p.ts_ns = now + i as u64 * 500_000; // 3.5 s of packets
    }
    let (accepted, _) = write_threaded(w, &pkts, || {});
    let files = listed(&dir.0, "g");
    // One file per interval reached; at buffer granularity a file may hold a few packets of
    // the previous interval from a producer that had not handed its buffer on yet.
    assert!((4..=5).contains(&files.len()), "{files:?}");
    assert_eq!(read_sorted(&files), expected(&accepted));
    if have("tcpdump") {
        let mut times: Vec<u64> = files.iter().flat_map(|f| tcpdump_times(f)).collect();
        times.sort();
        assert_eq!(times, sorted_times(&accepted));
    }
}

/// Whether this file system takes O_DIRECT writes (ext4 does; tmpfs not).
fn direct_io_works(probe: std::path::PathBuf) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let ok = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = std::fs::remove_file(probe);
    ok
}
