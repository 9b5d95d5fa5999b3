//! `ringcap collect` and `ringcap dedup` end to end: the real binary on loopback sockets, batches sealed
//! here with `records::batch` and sent after the handshake of `records::auth` (as a probe does), output read
//! back with DuckDB and pyarrow. Collectors started here are given the id [`TEST_ID`] (the tag of every TCP
//! batch covers it); UDP batches are sealed for no collector (`sealed_udp`).

mod common;
use common::collector::*;
use common::*;

use records::auth;
use records::batch::Key;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wire::record::Record;
use wire::LinkType;

#[test]
fn exact_counts_over_tcp_and_udp_to_two_collectors() {
    let dir = temp_dir("collect-two");
    let k = key_file(&dir);
    let (da, db) = (dir.join("a"), dir.join("b"));
    let (a, b) = (start(&da, &k), start(&db, &k));
    let key = key();
    let t0 = 1_700_000_000_000_000_000;
    // Probe 1 stripes: TCP to A (20 batches of 500), UDP to B (seqs 0..=30 without 7, 13 before 12).
    let tcp: Vec<(u64, Vec<u8>)> = (0..20u64)
        .map(|s| {
            (
                s,
                sealed(
                    &key,
                    1,
                    0x11,
                    s,
                    &make_records(t0, s as u32 * 500, 500),
                    now(),
                ),
            )
        })
        .collect();
    send_tcp_acked(a.tcp.unwrap(), &tcp);
    let mut order: Vec<u64> = (0..=30).filter(|&s| s != 7).collect();
    order.swap(11, 12); // ..., 11, 13, 12, 14, ... (7 is missing, so 12 sits at index 11)
    assert_eq!(&order[10..13], &[11, 13, 12]);
    let udp: Vec<Vec<u8>> = order
        .iter()
        .map(|&s| {
            sealed_udp(
                &key,
                1,
                0x11,
                s,
                &make_records(t0, 10_000 + s as u32 * 100, 100),
                now(),
            )
        })
        .collect();
    send_udp(b.udp.unwrap(), &udp);
    // Probe 2 sends UDP to A: 10 batches of 50.
    let udp2: Vec<Vec<u8>> = (0..10u64)
        .map(|s| {
            sealed_udp(
                &key,
                2,
                0x22,
                s,
                &make_records(t0, 50_000 + s as u32 * 50, 50),
                now(),
            )
        })
        .collect();
    send_udp(a.udp.unwrap(), &udp2);
    std::thread::sleep(Duration::from_millis(300));

    let (ja, _) = stop_json(a);
    let (jb, errb) = stop_json(b);
    assert_eq!(ja["records_stored"], 20 * 500 + 10 * 50, "{ja}");
    assert_eq!(ja["batches"], 30);
    assert_eq!(ja["record_bytes"], 10_500 * 48);
    assert_eq!(stream(&ja, 1)["seq_loss"], 0);
    assert_eq!(stream(&ja, 2)["seq_loss"], 0);
    assert_eq!(stream(&ja, 2)["records"], 500);
    assert_eq!(ja["rejected_total"], 0);
    assert_eq!(jb["records_stored"], 30 * 100, "{jb}");
    let s = stream(&jb, 1);
    assert_eq!(
        (s["batches"].as_u64(), s["seq_loss"].as_u64()),
        (Some(30), Some(1)),
        "{s}"
    );
    assert_eq!(
        (s["reordered"].as_u64(), s["duplicates"].as_u64()),
        (Some(1), Some(0))
    );
    assert!(errb.contains("seq loss 1 batches"), "{errb}");
    assert_eq!(duckdb_rows(&da), 10_500);
    assert_eq!(duckdb_rows(&db), 3000);
    // No spool or partial file is left after a clean stop.
    for d in [&da, &db] {
        let hidden: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "{hidden:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn garbage_truncated_replayed_wrongly_keyed_and_stale_batches_are_refused() {
    let dir = temp_dir("collect-bad");
    let k = key_file(&dir);
    let out = dir.join("out");
    let c = start(&out, &k);
    let (tcp, udp) = (c.tcp.unwrap(), c.udp.unwrap());
    let key = key();
    let wrong = Key::from_bytes(b"another-key-of-enough-length").unwrap();
    let t0 = 1_700_000_000_000_000_000;
    let good = sealed(&key, 1, 1, 0, &make_records(t0, 0, 100), now());
    send_tcp_acked(tcp, &[(0, good.clone())]);
    // TCP: the same batch again (replay), garbage, a wrongly keyed batch, half a batch, a stale batch.
    assert!(tcp_refused(tcp, &good, false), "replay was acked");
    assert!(tcp_refused(tcp, &[0x41; 200], false), "garbage was acked");
    let wrongly = sealed(&wrong, 1, 1, 1, &make_records(t0, 100, 100), now());
    assert!(tcp_refused(tcp, &wrongly, false), "wrong key was acked");
    let next = sealed(&key, 1, 1, 1, &make_records(t0, 100, 100), now());
    assert!(
        tcp_refused(tcp, &next[..next.len() / 2], true),
        "half a batch was acked"
    );
    let stale = sealed(
        &key,
        1,
        1,
        2,
        &make_records(t0, 200, 100),
        now() - 3_600_000_000_000,
    );
    assert!(
        tcp_refused(tcp, &stale, false),
        "an hour-old batch was acked"
    );
    // UDP: one good batch of probe 2, then it again, garbage, wrong key, a truncated datagram.
    let good2 = sealed_udp(&key, 2, 9, 0, &make_records(t0, 1000, 100), now());
    let wrong2 = sealed_udp(&wrong, 2, 9, 1, &make_records(t0, 1100, 100), now());
    let cut = sealed_udp(&key, 2, 9, 1, &make_records(t0, 1100, 100), now());
    send_udp(
        udp,
        &[
            good2.clone(),
            good2,
            vec![0u8; 1000],
            wrong2,
            cut[..cut.len() - 1].to_vec(),
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let (v, err) = stop_json(c);
    assert_eq!(v["records_stored"], 200, "{v}");
    let rej = &v["rejected"];
    assert_eq!(rej["replay"], 2, "{v}");
    assert_eq!(rej["bad_magic"], 2, "{v}");
    assert_eq!(rej["bad_tag"], 2, "{v}");
    assert_eq!(rej["truncated"], 2, "{v}");
    assert_eq!(rej["skew"], 1, "{v}");
    assert_eq!(v["rejected_total"], 9);
    assert_eq!(stream(&v, 1)["duplicates"], 1);
    assert_eq!(stream(&v, 2)["duplicates"], 1);
    assert!(err.contains("rejected tcp input from 127.0.0.1:"), "{err}");
    assert!(err.contains("rejected udp input from 127.0.0.1:"), "{err}");
    // Nothing of the refused input reached the files.
    assert_eq!(duckdb_rows(&out), 200);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn collector_killed_mid_run_recovers_its_spool_at_restart() {
    let dir = temp_dir("collect-kill");
    let k = key_file(&dir);
    let out = dir.join("out");
    let c = start(&out, &k);
    let addr = c.tcp.unwrap();
    // A sender that keeps going until the collector dies, counting acked batches of 300 records.
    let acked = Arc::new(Mutex::new(0u64));
    let acked2 = Arc::clone(&acked);
    let sender = std::thread::spawn(move || {
        let key = key();
        let (mut s, session) = connect(addr, &key, 5);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for seq in 0.. {
            let b = sealed(
                &key,
                5,
                5,
                seq,
                &make_records(0, seq as u32 * 300, 300),
                now(),
            );
            let mut ack = [0u8; auth::ACK_LEN];
            if s.write_all(&b).is_err() || s.read_exact(&mut ack).is_err() {
                break;
            }
            assert_eq!(session.check_ack(&ack), Ok(seq));
            *acked2.lock().unwrap() += 1;
        }
    });
    while *acked.lock().unwrap() < 50 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let killed = c.stop(libc::SIGKILL);
    assert!(!killed.status.success());
    sender.join().unwrap();
    let acked = *acked.lock().unwrap();
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.starts_with(".spool-")), "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with(".parquet")), "{names:?}");

    let c2 = start(&out, &k);
    let (v, err) = stop_json(c2);
    let recovered = v["recovered"][0]["records"].as_u64().unwrap();
    // Every acked batch is there; at most one more (stored, its ack lost in the kill).
    assert!(
        recovered == acked * 300 || recovered == (acked + 1) * 300,
        "recovered {recovered}, acked {acked} batches of 300"
    );
    assert!(
        err.contains(&format!("recovered {recovered} records from")),
        "{err}"
    );
    assert_eq!(duckdb_rows(&out), recovered);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A nanosecond pcap of `frames` with timestamps t0 + i µs.
fn write_pcap(path: &Path, frames: &[Vec<u8>], t0: u64) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b23c4du32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let ts = t0 + i as u64 * 1000;
        b.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn records_read_back_like_convert_of_the_same_packets_and_dedup_merges_two_probes() {
    let dir = temp_dir("collect-convert");
    let k = key_file(&dir);
    let t0 = 1_700_000_000_000_000_000u64;
    let frames: Vec<Vec<u8>> = varied_frames(0, 3000, 50);
    let pcap = dir.join("p.pcap");
    write_pcap(&pcap, &frames, t0);
    let conv = dir.join("conv");
    let o = Command::new(ringcap())
        .args([
            "convert",
            pcap.to_str().unwrap(),
            "-o",
            conv.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_text(&o));

    // Probe 1 sends every packet to collector A; probe 2 saw packets 1000..2000 too, 400 ns later.
    let (da, db) = (dir.join("a"), dir.join("b"));
    let (a, b) = (start(&da, &k), start(&db, &k));
    let key = key();
    let recs: Vec<Record> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            Record::from_frame(t0 + i as u64 * 1000, f.len() as u32, f, LinkType::Ethernet)
        })
        .collect();
    let batches: Vec<(u64, Vec<u8>)> = recs
        .chunks(1000)
        .enumerate()
        .map(|(s, c)| (s as u64, sealed(&key, 1, 1, s as u64, c, now())))
        .collect();
    send_tcp_acked(a.tcp.unwrap(), &batches);
    let later: Vec<Record> = recs[1000..2000]
        .iter()
        .map(|r| Record {
            ts_ns: r.ts_ns + 400,
            ..*r
        })
        .collect();
    send_tcp_acked(b.tcp.unwrap(), &[(0, sealed(&key, 2, 1, 0, &later, now()))]);
    stop_json(a);
    stop_json(b);

    // Same column names and types as convert where they overlap, and the same values for every packet.
    let check = python(&format!(
        "import duckdb, pyarrow.dataset as ds\n\
         r = ds.dataset('{a}', format='parquet').schema\n\
         c = ds.dataset('{conv}', format='parquet', partitioning='hive').schema\n\
         common = [f.name for f in r if f.name in c.names]\n\
         assert all(r.field(n).type == c.field(n).type for n in common), [(n, r.field(n).type, c.field(n).type) for n in common]\n\
         cols = ['wire_len','src_mac','dst_mac','ethertype','ip_version','src_ip4','dst_ip4','ip_len','protocol','src_port','dst_port','udp_len']\n\
         assert all(x in common for x in cols), common\n\
         eq = ' AND '.join(f'r.{{x}} IS NOT DISTINCT FROM c.{{x}}' for x in cols)\n\
         q = f\"SELECT count(*), count(*) FILTER (WHERE {{eq}}) FROM read_parquet('{a}/*.parquet') r JOIN read_parquet('{conv}/**/*.parquet') c USING (ts)\"\n\
         print(len(common), *duckdb.sql(q).fetchall()[0])",
        a = da.display(),
        conv = conv.display()
    ));
    let f: Vec<u64> = check
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(f[0] >= 18, "only {} common columns", f[0]);
    assert_eq!(
        &f[1..],
        &[3000, 3000],
        "joined rows, rows with equal headers"
    );

    let merged = dir.join("merged");
    let o = Command::new(ringcap())
        .args([
            "dedup",
            da.to_str().unwrap(),
            db.to_str().unwrap(),
            "-o",
            merged.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (
            v["read"].as_u64(),
            v["removed"].as_u64(),
            v["kept"].as_u64()
        ),
        (Some(4000), Some(1000), Some(3000)),
        "{v}"
    );
    assert_eq!(duckdb_rows(&merged), 3000);
    // With a tolerance below the 400 ns offset nothing matches.
    let o = Command::new(ringcap())
        .args([
            "dedup",
            da.to_str().unwrap(),
            db.to_str().unwrap(),
            "-o",
            dir.join("m2").to_str().unwrap(),
            "--json",
            "--tolerance",
            "300ns",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["removed"], 0, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `ringcap collect --listen LISTEN -o OUT --key KEY` to its end (for the usage errors, which exit
/// before listening).
fn collect_output(listen: &str, out: &Path, key: &Path) -> Output {
    Command::new(ringcap())
        .args(["collect", "--listen", listen, "-o"])
        .arg(out)
        .arg("--key")
        .arg(key)
        .output()
        .unwrap()
}

#[test]
fn usage_errors_exit_2() {
    let dir = temp_dir("collect-usage");
    std::fs::write(dir.join("short"), b"tiny").unwrap();
    std::fs::set_permissions(
        dir.join("short"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    // A key others can read is refused, as ssh refuses such private keys.
    let open = dir.join("open-key");
    std::fs::write(&open, KEY).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let o = collect_output("tcp://127.0.0.1:0", &dir.join("o"), &open);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_text(&o));
    assert!(
        stderr_text(&o).contains(&format!("chmod 600 {}", open.display())),
        "{}",
        stderr_text(&o)
    );
    let o = collect_output("tcp://127.0.0.1:0", &dir.join("o"), &dir.join("short"));
    assert_eq!(o.status.code(), Some(2), "{}", stderr_text(&o));
    assert!(
        stderr_text(&o).contains("at least 16"),
        "{}",
        stderr_text(&o)
    );
    let o = collect_output("sctp://127.0.0.1:1", Path::new("x"), Path::new("k"));
    assert_eq!(o.status.code(), Some(2));
    let o = Command::new(ringcap())
        .args(["dedup", dir.to_str().unwrap(), "-o"])
        .arg(dir.join("m"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr_text(&o));
    assert!(
        stderr_text(&o).contains("no .parquet files"),
        "{}",
        stderr_text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn probe_on_the_testbed_stripes_to_two_collectors_and_every_packet_is_stored_once() {
    let tb = testbed();
    let dir = temp_dir("collect-probe");
    let k = key_file(&dir);
    let lo = tb
        .command(testbed::Side::Rx, "ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(lo.success());
    let rx = |_| tb.command(testbed::Side::Rx, ringcap().to_str().unwrap());
    let (da, db) = (dir.join("a"), dir.join("b"));
    let (a, b) = (
        start_with(rx(0), &da, &k, &[]),
        start_with(rx(1), &db, &k, &[]),
    );
    let dests = format!("tcp://{},udp://{}", a.tcp.unwrap(), b.udp.unwrap());
    let probe = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--records",
            &dests,
            "--key",
            k.to_str().unwrap(),
            "-q",
        ],
    );
    let frames: Vec<Vec<u8>> = varied_frames(0, 5000, 300);
    send(&tb, &frames);
    std::thread::sleep(Duration::from_millis(500));
    let p = stop(probe, libc::SIGINT);
    assert!(p.status.success(), "probe: {}", stderr_text(&p));
    let (ja, _) = stop_json(a);
    let (jb, _) = stop_json(b);
    let stored = ja["records_stored"].as_u64().unwrap() + jb["records_stored"].as_u64().unwrap();
    assert_eq!(stored, 5000, "A {ja}\nB {jb}\nprobe: {}", stderr_text(&p));
    // Striped per batch: both got some, no batch lost or refused.
    assert!(
        ja["records_stored"].as_u64().unwrap() > 0 && jb["records_stored"].as_u64().unwrap() > 0
    );
    assert_eq!(ja["rejected_total"], 0);
    assert_eq!(jb["rejected_total"], 0);
    assert_eq!(jb["streams"][0]["seq_loss"], 0);
    // The stored headers are those of the frames sent: compare (wire_len, ports, udp_len) as multisets.
    let mut rows = Vec::new();
    for d in [&da, &db] {
        for f in records::dedup::records_files(d).unwrap() {
            records::parquet_out::read_records(&f, &mut rows).unwrap();
        }
    }
    let mut got: Vec<(u32, u16, u16, u16, [u8; 4])> = rows
        .iter()
        .map(|r| {
            let r = r.record;
            (r.wire_len, r.src_port, r.dst_port, r.l4_len, r.dst_ip4)
        })
        .collect();
    let mut want: Vec<(u32, u16, u16, u16, [u8; 4])> = frames
        .iter()
        .map(|f| {
            let len = f.len() as u32;
            let p = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
            (len, p(34), p(36), p(38), [10, 77, 0, 2])
        })
        .collect();
    got.sort_unstable();
    want.sort_unstable();
    assert!(got == want, "stored headers differ from the frames sent");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rotation_by_size_and_sigterm() {
    let dir = temp_dir("collect-rotate");
    let k = key_file(&dir);
    let out = dir.join("out");
    let c = start_with(
        Command::new(ringcap()),
        &out,
        &k,
        &["--rotate-size", "20KiB"],
    );
    let key = key();
    // 100 records = 4800 payload bytes + a 24-byte spool frame header: the 5th batch passes 20 KiB.
    let batches: Vec<(u64, Vec<u8>)> = (0..10u64)
        .map(|s| {
            (
                s,
                sealed(&key, 1, 1, s, &make_records(0, s as u32 * 100, 100), now()),
            )
        })
        .collect();
    send_tcp_acked(c.tcp.unwrap(), &batches);
    let o = c.stop(libc::SIGTERM);
    assert!(o.status.success(), "{}", stderr_text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows: Vec<u64> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["records"].as_u64().unwrap())
        .collect();
    assert_eq!(rows, vec![500, 500], "{v}");
    assert_eq!(records::dedup::records_files(&out).unwrap().len(), 2);
    assert_eq!(duckdb_rows(&out), 1000);
    let _ = std::fs::remove_dir_all(&dir);
}

/// (rows, distinct ts, min ts, max ts) of every records file in `dir`, read by DuckDB.
fn duckdb_ts_summary(dir: &Path) -> (u64, u64, u64, u64) {
    let out = python(&format!(
        "import duckdb; r = duckdb.sql(\"SELECT count(*), count(DISTINCT epoch_ns(ts)), min(epoch_ns(ts)), \
         max(epoch_ns(ts)) FROM read_parquet('{}/*.parquet')\").fetchall()[0]; print(*r)",
        dir.display()
    ));
    let v: Vec<u64> = out
        .split_whitespace()
        .map(|w| w.parse().unwrap_or_else(|_| panic!("duckdb said {out}")))
        .collect();
    (v[0], v[1], v[2], v[3])
}

/// Fills the file system of `dir` with one file until a write fails; returns the file.
fn fill_disk(dir: &Path) -> PathBuf {
    let p = dir.join("filler");
    let mut f = std::fs::File::create(&p).unwrap();
    let chunk = vec![0xa5u8; 4096];
    loop {
        if let Err(e) = f.write_all(&chunk) {
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
            return p;
        }
    }
}

#[test]
fn full_disk_mid_run_loses_no_acked_record() {
    use records::probe::{Dest, Probe, ProbeConfig, Transport};
    let dir = temp_dir("collect-full");
    let k = key_file(&dir);
    let mnt = match testbed::Tmpfs::mount(&dir.join("out"), "4m") {
        Ok(m) => m,
        Err(e) => return testbed::skip(&e.to_string()),
    };
    let out = mnt.path.clone();
    // Small spools: conversions to Parquet run (and fail) while the disk is full too.
    let c = start_with(
        Command::new(ringcap()),
        &out,
        &k,
        &["--rotate-size", "256KiB"],
    );
    let mut cfg = ProbeConfig::new(
        vec![Dest {
            transport: Transport::Tcp,
            name: "tcp".into(),
            addr: c.tcp.unwrap(),
        }],
        key(),
    );
    cfg.quiet = true;
    cfg.flush = Duration::from_millis(20);
    let probe = Probe::start(cfg).unwrap();
    let t0 = 1_700_000_000_000_000_000u64;
    let mut next = 0u64;
    // 500 distinct records per 50 ms (480 KB/s), each with its own timestamp.
    let mut push_for = |probe: &Probe, d: Duration| {
        let mut b = probe.batcher();
        let end = Instant::now() + d;
        while Instant::now() < end {
            for _ in 0..500 {
                b.push(&Record {
                    ts_ns: t0 + next,
                    wire_len: 100,
                    ethertype: 0x0800,
                    ip_version: 4,
                    ip_header_len: 20,
                    protocol: 17,
                    src_port: 1000,
                    dst_port: 2000,
                    l4_len: 80,
                    ..Record::default()
                });
                next += 1;
            }
            b.tick(Instant::now());
            std::thread::sleep(Duration::from_millis(50));
        }
        b.finish();
    };
    push_for(&probe, Duration::from_millis(1000));
    let filler = fill_disk(&out);
    // Keep sending into the full disk until the collector has refused batches for it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c
        .stderr
        .lock()
        .unwrap()
        .contains("could not write the spool")
    {
        assert!(Instant::now() < deadline, "no storage refusal in 30 s");
        push_for(&probe, Duration::from_millis(200));
    }
    push_for(&probe, Duration::from_millis(1000));
    std::fs::remove_file(&filler).unwrap();
    push_for(&probe, Duration::from_millis(1500));
    let ps = probe.finish();
    let (v, err) = stop_json(c);
    let pc = &ps.collectors[0];
    // Everything built was acked in the end (re-sent after each refusal), nothing dropped or left.
    assert_eq!(ps.records, next, "{ps:?}");
    assert_eq!(
        (pc.acked, pc.unacked, pc.dropped, ps.queue_drops),
        (next, 0, 0, 0),
        "{ps:?}\n{err}"
    );
    assert!(pc.failures >= 1, "the collector never refused: {ps:?}");
    assert!(err.contains("could not write the spool"), "{err}");
    assert_eq!(v["errors"].as_array().map_or(0, |e| e.len()), 0, "{v}");
    // Every acked record is in the Parquet files, exactly once.
    assert_eq!(
        duckdb_ts_summary(&out),
        (next, next, t0, t0 + next - 1),
        "{err}"
    );
    drop(mnt);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stream_quiet_longer_than_the_idle_limit_resumes_without_false_loss() {
    let dir = temp_dir("collect-quiet");
    let k = key_file(&dir);
    let out = dir.join("out");
    // --max-skew 1s: idle streams are evicted after 2 s (2 × skew) instead of 240 s.
    let c = start_with(Command::new(ringcap()), &out, &k, &["--max-skew", "1s"]);
    let tcp = c.tcp.unwrap();
    let key = key();
    let t0 = 1_700_000_000_000_000_000;
    let batch = |seq: u64| {
        let recs = make_records(t0, seq as u32 * 10, 10);
        (seq, sealed(&key, 5, 77, seq, &recs, now()))
    };
    send_tcp_acked(tcp, &(0..5).map(batch).collect::<Vec<_>>());
    std::thread::sleep(Duration::from_millis(3500));
    send_tcp_acked(tcp, &(5..10).map(batch).collect::<Vec<_>>());
    // A real gap after the pause is still loss: seq 10 and 11 never sent.
    send_tcp_acked(tcp, &[batch(12)]);
    let (v, err) = stop_json(c);
    let s = stream(&v, 5);
    assert_eq!(s["batches"], 11, "{v}\n{err}");
    assert_eq!(s["seq_loss"], 2, "{v}\n{err}");
    assert_eq!(v["records_stored"], 110, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The UTC hour as `date -u` spells the partition: `date=YYYY-MM-DD/hour=HH`.
fn date_hour_now() -> String {
    let o = Command::new("date")
        .args(["-u", "+date=%Y-%m-%d/hour=%H"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `--sensor`: files in the dataset layout (the UTC hour the records arrived in), owner-only, with
/// the schema version in their footers; DuckDB reads the tree with Hive partitions and counts what
/// was sent.
#[test]
fn sensor_writes_the_partitioned_dataset_layout() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("collect-sensor");
    let k = key_file(&dir);
    let out = dir.join("o");
    let before = date_hour_now();
    let c = start_with(Command::new(ringcap()), &out, &k, &["--sensor", "edge-1"]);
    let key = key();
    let t0 = 1_700_000_000_000_000_000;
    let batches: Vec<(u64, Vec<u8>)> = (0..5u64)
        .map(|s| {
            let recs = make_records(t0, s as u32 * 200, 200);
            (s, sealed(&key, 3, 0x33, s, &recs, now()))
        })
        .collect();
    send_tcp_acked(c.tcp.unwrap(), &batches);
    let (j, err) = stop_json(c);
    let after = date_hour_now();
    assert_eq!(j["records_stored"], 1000, "{err}");
    let rows = python(&format!(
        "import duckdb\nfor r in duckdb.sql(\"SELECT sensor, strftime(date, '%Y-%m-%d'), hour, count(*) \
         FROM read_parquet('{}/sensor=*/date=*/hour=*/*.parquet', hive_partitioning = true) \
         GROUP BY ALL ORDER BY ALL\").fetchall(): print('edge-1' == r[0], f'date={{r[1]}}/hour={{r[2]:02}}', r[3])",
        out.display()
    ));
    let mut total = 0;
    for line in rows.lines() {
        let v: Vec<&str> = line.split(' ').collect();
        assert_eq!(v[0], "True", "{rows}");
        assert!(
            v[1] == before || v[1] == after,
            "{rows} (hours {before}, {after})"
        );
        total += v[2].parse::<u64>().unwrap();
    }
    assert_eq!(total, 1000, "{rows}");
    let versions = python(&format!(
        "import duckdb\nprint(sorted(set(r[0] for r in duckdb.sql(\"SELECT decode(value) FROM \
         parquet_kv_metadata('{}/sensor=*/date=*/hour=*/*.parquet') WHERE decode(key) = 'ringcap.schema'\").fetchall())))",
        out.display()
    ));
    assert_eq!(versions, "['records/1.1']");
    // Owner-only: the partition directories 0700, the files 0600; nothing hidden left behind.
    let part = out.join("sensor=edge-1").join(&before);
    let part = if part.is_dir() {
        part
    } else {
        out.join("sensor=edge-1").join(&after)
    };
    for d in [
        out.join("sensor=edge-1"),
        part.parent().unwrap().to_path_buf(),
        part.clone(),
    ] {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
    for e in std::fs::read_dir(&part).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        assert!(
            name.starts_with("records-") && name.ends_with(".parquet"),
            "{name}"
        );
        assert_eq!(
            e.metadata().unwrap().permissions().mode() & 0o777,
            0o600,
            "{name}"
        );
    }
    let o = collect_output_with(
        "tcp://127.0.0.1:0",
        &dir.join("x"),
        &k,
        &["--sensor", "a/b"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr_text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

fn collect_output_with(listen: &str, out: &Path, key: &Path, extra: &[&str]) -> Output {
    Command::new(ringcap())
        .args(["collect", "--listen", listen, "-o"])
        .arg(out)
        .arg("--key")
        .arg(key)
        .args(extra)
        .output()
        .unwrap()
}
