//! The writer on real file systems: O_DIRECT on ext4 (/var/tmp, or a loop-mounted ext4 the test
//! makes), page cache on tmpfs, and a real disk-full on a small tmpfs this test mounts (needs
//! root; a check that cannot run fails under CI=true).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use store::{CaptureWriter, Format, StoreError, WriterOptions};
use testbed::LoopExt4;

const EXT4_SUPER_MAGIC: i64 = 0xef53;
const TMPFS_MAGIC: i64 = 0x0102_1994;

fn fs_type(p: &Path) -> i64 {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut s) }, 0);
    s.f_type as i64
}

fn opts(format: Format) -> WriterOptions {
    WriterOptions {
        format,
        buffer_size: 1 << 20,
        buffers: 4,
        ..Default::default()
    }
}

#[test]
fn real_disk_uses_o_direct_and_the_file_is_whole() {
    // On ext4 O_DIRECT must work: /var/tmp if it is ext4, else an ext4 made for the test.
    let tmp = TempDir::new("direct");
    let mut own_ext4 = None;
    let dir = if fs_type(&tmp.0) == EXT4_SUPER_MAGIC {
        tmp.0.clone()
    } else {
        match LoopExt4::new("direct", 64, &[]) {
            Ok(fs) => own_ext4.insert(fs).dir.clone(),
            Err(e) => {
                skip(&format!(
                    "/var/tmp is not ext4 and no ext4 could be made: {e}"
                ));
                return;
            }
        }
    };
    assert_eq!(fs_type(&dir), EXT4_SUPER_MAGIC);
    for format in [Format::Pcap { nanos: true }, Format::PcapNg] {
        let path = dir.join("d.cap");
        // ~5.5 MiB: several whole buffers written with O_DIRECT, then an unaligned tail.
        let pkts = packets(7000, true);
        let mut w = CaptureWriter::create(
            &path,
            WriterOptions {
                buffers: 16,
                ..opts(format)
            },
        )
        .unwrap();
        assert!(w.stats().direct_io, "O_DIRECT on ext4");
        let accepted: Vec<_> = pkts
            .iter()
            .filter(|p| w.write_packet(p.ts_ns, p.wire_len, &p.data, p.vlan))
            .cloned()
            .collect();
        let stats = w.finish(None).unwrap();
        assert!(stats.direct_io && stats.buffers_written >= 5, "{stats:?}");
        assert_eq!(stats.bytes_written, std::fs::metadata(&path).unwrap().len());
        let (read, r) = read_all(&path);
        assert_eq!(r.issues(), &[]);
        assert_eq!(read.len(), accepted.len());
        for (g, p) in read.iter().zip(&accepted) {
            assert_eq!(g.data, expected_bytes(p, 262_144));
        }
        if have("capinfos") {
            assert_eq!(capinfos_count(&path), accepted.len() as u64);
        }
    }
}

#[test]
fn tmpfs_falls_back_to_the_page_cache() {
    let dir = TempDir::new_in("/dev/shm", "shm");
    assert_eq!(fs_type(&dir.0), TMPFS_MAGIC, "/dev/shm is tmpfs");
    let path = dir.path("t.pcap");
    let pkts = packets(3000, false);
    let (accepted, stats) = write_all(&path, opts(Format::Pcap { nanos: false }), &pkts);
    assert!(!stats.direct_io);
    let (read, _) = read_all(&path);
    assert_eq!(read.len(), accepted.len());
}

/// A tmpfs of `size` mounted for the test, unmounted on drop (also on panic).
struct SmallFs {
    dir: TempDir,
}

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = TempDir::new("smallfs");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            skip("cannot mount a tmpfs (needs root): disk-full test skipped");
            return None;
        }
        Some(SmallFs { dir })
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path(name)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir.0).status();
    }
}

/// `size` either a whole number of buffers (the write that fails writes nothing: the file is cut
/// back into the previous buffer) or not (a short write: the cut is inside the failed buffer).
fn disk_full(format: Format, size: &str) {
    let Some(fs) = SmallFs::mount(size) else {
        return;
    };
    let path = fs.path("full.cap");
    let pkts = packets(20_000, true); // ~15 MiB offered to a 2 MiB file system
    let mut w = CaptureWriter::create(&path, opts(format)).unwrap();
    let counters = w.counters();
    let mut accepted = Vec::new();
    let mut offered = 0u64;
    let deadline = Instant::now() + Duration::from_secs(10);
    for p in pkts.iter().cycle() {
        offered += 1;
        if w.write_packet(p.ts_ns, p.wire_len, &p.data, p.vlan) {
            accepted.push(p.clone());
        }
        if (counters.snapshot().failed && offered > pkts.len() as u64) || Instant::now() > deadline
        {
            break;
        }
    }
    assert!(
        counters.snapshot().failed,
        "the 2 MiB file system filled up"
    );
    let err = w.finish(None).expect_err("disk full is reported");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("disk full on {}", path.display())),
        "{msg}"
    );
    assert!(msg.contains("--disk-budget"), "{msg}");
    let stats = counters.snapshot();
    let StoreError::DiskFull {
        packets, written, ..
    } = err
    else {
        panic!("{err:?}")
    };
    let short_write = written % (1 << 20) != 0;
    assert_eq!(
        short_write,
        size != "2m",
        "{size}: failed after {written} bytes"
    );
    assert_eq!(packets, stats.packets, "the error and the counters agree");
    assert_eq!(
        stats.packets + stats.storage_drops,
        offered,
        "every packet written or counted as a storage drop"
    );
    assert!(stats.storage_drops > 0 && stats.write_errors == 1);

    // The file stops after its last whole packet: every tool reads exactly stats.packets.
    let (read, r) = read_all(&path);
    assert_eq!(r.issues(), &[], "no partial record at the end");
    assert_eq!(read.len() as u64, stats.packets);
    assert!(
        stats.packets > 500,
        "about 2 MiB of packets kept: {}",
        stats.packets
    );
    for (g, p) in read.iter().zip(&accepted) {
        assert_eq!(g.data, expected_bytes(p, 262_144));
    }
    if have("capinfos") {
        assert_eq!(capinfos_count(&path), stats.packets);
    }
}

#[test]
fn disk_full_pcap_keeps_a_valid_file_and_counts_every_loss() {
    disk_full(Format::Pcap { nanos: true }, "2m");
    disk_full(Format::Pcap { nanos: false }, "1500k");
}

#[test]
fn disk_full_pcapng_keeps_a_valid_file_and_counts_every_loss() {
    disk_full(Format::PcapNg, "2m");
    disk_full(Format::PcapNg, "1500k");
}

#[test]
fn counters_are_readable_from_another_thread() {
    let dir = TempDir::new("counters");
    let mut w =
        CaptureWriter::create(&dir.path("c.pcap"), opts(Format::Pcap { nanos: true })).unwrap();
    let counters = w.counters();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (c2, s2) = (counters.clone(), stop.clone());
    let printer = std::thread::spawn(move || {
        let mut last = 0;
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            let s = c2.snapshot();
            assert!(s.packets >= last, "monotonic");
            last = s.packets;
            std::thread::sleep(Duration::from_millis(1));
        }
        last
    });
    for p in packets(5000, false) {
        w.write_packet(p.ts_ns, p.wire_len, &p.data, None);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    printer.join().unwrap();
    let s = w.finish(None).unwrap();
    assert_eq!(s.packets + s.storage_drops, 5000);
    assert_eq!(counters.snapshot(), s);
    assert_eq!(s.buffers_total, 4);
    assert_eq!(s.buffers_filled, 0, "nothing left in flight after finish");
}

#[test]
fn bad_options_and_unwritable_paths_are_clear_errors() {
    let e = CaptureWriter::create(Path::new("/nonexistent-dir/x.pcap"), opts(Format::PcapNg))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("/nonexistent-dir/x.pcap") && e.contains("directory exists"),
        "{e}"
    );
    let dir = TempDir::new("badopts");
    let p = dir.path("x");
    for (o, want) in [
        (
            WriterOptions {
                buffers: 1,
                ..opts(Format::PcapNg)
            },
            "at least 2",
        ),
        (
            WriterOptions {
                buffer_size: 4096,
                ..opts(Format::PcapNg)
            },
            "1 MiB",
        ),
        (
            WriterOptions {
                snaplen: 300_000,
                ..opts(Format::PcapNg)
            },
            "-s 262144",
        ),
    ] {
        let e = CaptureWriter::create(&p, o).err().unwrap().to_string();
        assert!(e.contains(want), "{e}");
    }
}
