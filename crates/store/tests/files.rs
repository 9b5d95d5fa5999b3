//! File mode of the writer on real files: rotation by size and by packet time, the `-W` ring,
//! compressed output (standard zstd/lz4 frames), cut files and `repair`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use store::{CaptureWriter, CompressMode, FilePlan, Format, WriterOptions};

fn opts(format: Format) -> WriterOptions {
    WriterOptions {
        format,
        buffer_size: 1 << 20,
        buffers: 64,
        direct_io: false,
        ..Default::default()
    }
}

/// The complete files of `base` in `dir`, oldest first.
fn listed(dir: &Path, base: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let key = store::parse_name(base, p.file_name()?.to_str()?)?;
            Some((key, p))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// Writes `pkts` through file mode; returns the packets accepted.
fn write_files(plan: FilePlan, o: WriterOptions, pkts: &[TestPacket]) -> Vec<TestPacket> {
    let mut w = CaptureWriter::create_files(plan, o).expect("create_files");
    let accepted: Vec<_> = pkts
        .iter()
        .filter(|p| w.write_packet(p.ts_ns, p.wire_len, &p.data, p.vlan))
        .cloned()
        .collect();
    let stats = w.finish(None).expect("finish");
    assert_eq!(stats.packets, accepted.len() as u64);
    accepted
}

fn assert_same(files: &[PathBuf], accepted: &[TestPacket]) {
    let mut got = Vec::new();
    for f in files {
        let (pkts, r) = read_all(f);
        assert!(!r.damaged(), "{}: {:?}", f.display(), r.issues());
        got.extend(pkts);
    }
    assert_eq!(got.len(), accepted.len());
    for (g, p) in got.iter().zip(accepted) {
        let vlan = if p.vlan.is_some() { 4 } else { 0 };
        assert_eq!((g.ts_ns, g.wire_len), (p.ts_ns, p.wire_len + vlan));
        assert_eq!(g.data, expected_bytes(p, 262_144));
    }
}

#[test]
fn size_rotation_keeps_every_packet_once_in_order() {
    let dir = TempDir::new("files-size");
    let mut plan = FilePlan::new(&dir.0, "s");
    plan.rotate_bytes = Some(300_000);
    let pkts = packets(4000, true);
    let accepted = write_files(plan, opts(Format::Pcap { nanos: true }), &pkts);
    let files = listed(&dir.0, "s");
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .collect();
    assert!(files.len() as u64 >= total.div_ceil(300_000), "{sizes:?}");
    assert!(files.len() >= 5, "{files:?}");
    for f in &files {
        assert!(
            std::fs::metadata(f).unwrap().len() <= 300_000,
            "{}",
            f.display()
        );
    }
    assert_same(&files, &accepted);
}

#[test]
fn time_rotation_cuts_at_whole_intervals_of_packet_time() {
    let dir = TempDir::new("files-time");
    let mut plan = FilePlan::new(&dir.0, "g");
    plan.rotate_secs = Some(1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut pkts = packets(3500, false);
    for (i, p) in pkts.iter_mut().enumerate() {
        p.ts_ns = now + i as u64 * 1_000_000; // 3.5 s of packets
    }
    let accepted = write_files(plan, opts(Format::PcapNg), &pkts);
    let files = listed(&dir.0, "g");
    assert!((4..=5).contains(&files.len()), "{files:?}");
    for f in &files {
        let (stamp, _) = store::parse_name("g", f.file_name().unwrap().to_str().unwrap()).unwrap();
        let (pk, _) = read_all(f);
        for p in &pk {
            assert_eq!(
                store::utc_stamp(p.ts_ns / 1_000_000_000 * 1_000_000_000),
                stamp
            );
        }
    }
    assert_same(&files, &accepted);
}

#[test]
fn file_count_keeps_a_ring_of_the_newest_files() {
    let dir = TempDir::new("files-ring");
    let mut plan = FilePlan::new(&dir.0, "w");
    plan.rotate_bytes = Some(200_000);
    plan.max_files = Some(3);
    let pkts = packets(4000, false);
    let accepted = write_files(plan, opts(Format::Pcap { nanos: false }), &pkts);
    let files = listed(&dir.0, "w");
    assert_eq!(files.len(), 3, "{files:?}");
    let (last, _) = read_all(files.last().unwrap());
    // µs pcap: compare at µs.
    assert_eq!(
        last.last().unwrap().ts_ns,
        accepted.last().unwrap().ts_ns / 1000 * 1000
    );
}

#[test]
fn compressed_files_are_standard_frames_and_survive_a_cut() {
    for (mode, tool) in [
        (CompressMode::Zstd(3), "zstd"),
        (CompressMode::Auto, "zstd"),
        (CompressMode::Lz4, "lz4"),
    ] {
        let dir = TempDir::new("files-zip");
        let mut plan = FilePlan::new(&dir.0, "c");
        plan.compression = mode;
        let pkts = packets(6000, true); // ~4.5 MB: several 1 MiB frames
        let accepted = write_files(plan, opts(Format::Pcap { nanos: true }), &pkts);
        let files = listed(&dir.0, "c");
        assert_eq!(files.len(), 1);
        assert_same(&files, &accepted);
        let f = &files[0];
        if have(tool) && have("capinfos") {
            let plain = dir.path("plain.pcap");
            let out = std::fs::File::create(&plain).unwrap();
            assert!(Command::new(tool)
                .arg("-dc")
                .arg(f)
                .stdout(out)
                .status()
                .unwrap()
                .success());
            assert_eq!(capinfos_count(&plain), accepted.len() as u64);
        }
        // Cut inside the last frame (as kill -9 would): readable up to the last whole frame,
        // and repair cuts it there, after a whole packet.
        let len = std::fs::metadata(f).unwrap().len();
        let cut = dir.path(".c-cut.pcap.partial");
        std::fs::copy(f, &cut).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&cut)
            .unwrap()
            .set_len(len - 1000)
            .unwrap();
        let rep = store::repair(&cut, store::RepairOptions::default()).unwrap();
        let fixed = rep.renamed_to.clone().expect("renamed");
        assert_eq!(fixed, dir.path("c-cut.pcap"));
        assert!(!rep.rewritten && rep.changed(), "{rep:?}");
        let (kept, r) = read_all(&fixed);
        assert!(!r.damaged(), "{:?}", r.issues());
        assert!(
            kept.len() > 3000 && kept.len() < accepted.len(),
            "{}",
            kept.len()
        );
        assert_eq!(kept.len() as u64, rep.packets);
        for (g, p) in kept.iter().zip(&accepted) {
            assert_eq!(g.data, expected_bytes(p, 262_144));
        }
    }
}

#[test]
fn files_are_owner_only_and_never_written_through_a_symlink() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let dir = TempDir::new("files-modes");
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    let victim = dir.path("victim");
    std::fs::write(&victim, b"not a capture").unwrap();

    // -w FILE: created 0600; a symlink there is refused, its target untouched.
    let plain = dir.path("plain.pcap");
    write_all(
        &plain,
        opts(Format::Pcap { nanos: true }),
        &packets(10, false),
    );
    assert_eq!(mode(&plain), 0o600);
    let link = dir.path("link.pcap");
    symlink(&victim, &link).unwrap();
    let err = CaptureWriter::create(&link, opts(Format::Pcap { nanos: true }))
        .err()
        .expect("a symlink is refused");
    assert!(err.to_string().contains("is a symbolic link"), "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"not a capture");

    // File mode: symlinks planted at every `.partial` name the first file could get (its stamp
    // is the wall clock or the first packet's time) are not followed; the capture goes on.
    let pkts = packets(3000, false);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let first_s = pkts[0].ts_ns / 1_000_000_000;
    for s in (now_s - 2..now_s + 30).chain([first_s]) {
        let stamp = store::utc_stamp(s * 1_000_000_000);
        let _ = symlink(
            &victim,
            dir.path(&format!(".m-{stamp}-000000.pcap.partial")),
        );
    }
    let mut plan = FilePlan::new(&dir.0, "m");
    plan.rotate_bytes = Some(300_000);
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = events.clone();
    plan.events = Some(std::sync::Arc::new(move |m: &str| {
        sink.lock().unwrap().push(m.to_string())
    }));
    plan.indexer = None;
    let accepted = write_files(plan, opts(Format::Pcap { nanos: true }), &pkts);
    assert_eq!(std::fs::read(&victim).unwrap(), b"not a capture");
    let files = listed(&dir.0, "m");
    assert!(files.len() > 3);
    assert_same(&files, &accepted);
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    let ev = events.lock().unwrap();
    assert!(
        ev.iter().any(|e| e.contains("exists already")),
        "the planted name was skipped, and said so: {ev:?}"
    );
}
