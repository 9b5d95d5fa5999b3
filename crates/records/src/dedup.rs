//! Merging the outputs of overlapping probes (seed 001 §2.2): "post-processing of the collected traffic can
//! remove duplicates based on the collected headers and accurate timestamps".
//!
//! Two rows are copies of one packet when every header field of the record is equal and their timestamps
//! differ by at most the tolerance. Two probes stamp the same packet with different clocks, hence the
//! tolerance; one probe stamps it once, so rows of the *same* probe must have equal timestamps (a batch
//! stored twice after a lost TCP ack) — two real packets with identical headers from one probe, even
//! nanoseconds apart, are both kept. A row absorbs at most one copy per other probe.
//!
//! All rows are held in memory (about 100 bytes each) and sorted by time; the scan is linear in the rows
//! plus the rows inside each tolerance window.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use wire::record::Record;

use crate::parquet_out::{read_records, writer_properties, RecordFileWriter, StoredRecord};

/// Default tolerance: 1 µs.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_micros(1);

/// Rows per output file.
pub const ROWS_PER_FILE: u64 = 16 << 20;

/// What a merge did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DedupReport {
    /// Parquet files read.
    pub inputs: Vec<PathBuf>,
    /// Rows read.
    pub read: u64,
    /// Rows written.
    pub kept: u64,
    /// Rows removed as copies.
    pub removed: u64,
    /// Of `removed`: copies from the same probe (equal timestamps: a batch stored twice).
    pub removed_same_probe: u64,
    /// Files written.
    pub outputs: Vec<PathBuf>,
}

/// The records files in `dir` (`*.parquet`, not hidden), sorted by name.
pub fn records_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut v = Vec::new();
    let rd = fs::read_dir(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot read directory {}: {e}", dir.display()),
        )
    })?;
    for e in rd {
        let e = e?;
        let n = e.file_name().to_string_lossy().into_owned();
        if n.ends_with(".parquet") && !n.starts_with('.') && e.file_type()?.is_file() {
            v.push(e.path());
        }
    }
    v.sort();
    Ok(v)
}

/// The record without its timestamp: what two copies of one packet share.
#[inline]
fn header_key(r: &Record) -> Record {
    Record { ts_ns: 0, ..*r }
}

/// Marks copies in `rows` (sorted by ts); returns (keep flags, removed from the same probe).
///
/// A kept row absorbs at most one row of each other probe (the first in time order), so a run of identical
/// packets closer together than the tolerance, seen by two probes, stays whole.
pub fn find_duplicates(rows: &[StoredRecord], tolerance: Duration) -> (Vec<bool>, u64) {
    let tol = tolerance.as_nanos().min(u64::MAX as u128) as u64;
    let mut keep = vec![true; rows.len()];
    let mut same_probe = 0u64;
    // Probes whose copy the current row already absorbed (reused: no allocation per row).
    let mut absorbed: Vec<u64> = Vec::new();
    for i in 0..rows.len() {
        if !keep[i] {
            continue;
        }
        let a = &rows[i];
        let ka = header_key(&a.record);
        absorbed.clear();
        let mut j = i + 1;
        while j < rows.len() && rows[j].record.ts_ns - a.record.ts_ns <= tol {
            let b = &rows[j];
            if keep[j] && header_key(&b.record) == ka {
                if b.probe_id != a.probe_id {
                    if !absorbed.contains(&b.probe_id) {
                        absorbed.push(b.probe_id);
                        keep[j] = false;
                    }
                } else if b.record.ts_ns == a.record.ts_ns {
                    keep[j] = false;
                    same_probe += 1;
                }
            }
            j += 1;
        }
    }
    (keep, same_probe)
}

/// Reads every records file of `dirs`, removes copies, writes `out/records-dedup-NNNNN.parquet` sorted by
/// time. Refuses an output directory that already holds records files (mixing would double count).
pub fn dedup_dirs(dirs: &[PathBuf], out: &Path, tolerance: Duration) -> io::Result<DedupReport> {
    let mut rep = DedupReport::default();
    for d in dirs {
        rep.inputs.extend(records_files(d)?);
    }
    if rep.inputs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no .parquet files in {}: give the -o directories of `ringcap collect`",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    fs::create_dir_all(out)?;
    if let Some(f) = records_files(out)?.first() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} already holds {}: choose an empty output directory",
                out.display(),
                f.display()
            ),
        ));
    }
    let mut rows = Vec::new();
    for f in &rep.inputs {
        rep.read += read_records(f, &mut rows)?;
    }
    // Ties broken by the other fields so the output does not depend on the order of the inputs.
    rows.sort_unstable_by(|a, b| {
        (
            a.record.ts_ns,
            header_key(&a.record).encode_key(),
            a.probe_id,
            a.stream_id,
        )
            .cmp(&(
                b.record.ts_ns,
                header_key(&b.record).encode_key(),
                b.probe_id,
                b.stream_id,
            ))
    });
    let (keep, same_probe) = find_duplicates(&rows, tolerance);
    rep.removed_same_probe = same_probe;
    let inputs_json: Vec<String> = rep.inputs.iter().map(|p| p.display().to_string()).collect();
    let props = writer_properties(&[
        (
            "dedup.inputs",
            serde_json::to_string(&inputs_json).unwrap_or_default(),
        ),
        ("dedup.tolerance_ns", tolerance.as_nanos().to_string()),
    ]);
    let mut w: Option<RecordFileWriter> = None;
    for (r, _) in rows.iter().zip(&keep).filter(|(_, k)| **k) {
        if w.as_ref().is_some_and(|w| w.rows() >= ROWS_PER_FILE) {
            let (p, _, _) = w.take().expect("checked").finish()?;
            rep.outputs.push(p);
        }
        if w.is_none() {
            let name = format!("records-dedup-{:05}.parquet", rep.outputs.len());
            w = Some(RecordFileWriter::create(&out.join(name), props.clone())?);
        }
        w.as_mut().expect("created").push(r)?;
        rep.kept += 1;
    }
    if let Some(w) = w {
        rep.outputs.push(w.finish()?.0);
    }
    rep.removed = rep.read - rep.kept;
    Ok(rep)
}

/// Total order on the non-timestamp fields (for a deterministic sort).
trait EncodeKey {
    fn encode_key(&self) -> [u8; 80];
}

impl EncodeKey for Record {
    fn encode_key(&self) -> [u8; 80] {
        let mut b = [0u8; 80];
        self.encode(&mut b);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet_out::writer_properties;
    use rand::{Rng, SeedableRng};

    fn rec(ts: u64, port: u16) -> Record {
        Record {
            ts_ns: ts,
            wire_len: 650,
            ethertype: 0x0800,
            ip_version: 4,
            ip_header_len: 20,
            protocol: 17,
            src_ip4: [10, 0, 0, 1],
            dst_ip4: [10, 0, 0, 2],
            src_port: port,
            dst_port: 53,
            l4_len: 616,
            ip_len: 636,
            ..Record::default()
        }
    }

    fn write(dir: &Path, name: &str, rows: &[StoredRecord]) {
        fs::create_dir_all(dir).unwrap();
        let mut w = RecordFileWriter::create(&dir.join(name), writer_properties(&[])).unwrap();
        for r in rows {
            w.push(r).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn overlapping_probes_lose_exactly_the_injected_copies() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Probe 1 saw 5000 packets, 2 µs apart (so distinct packets never fall within the tolerance of
        // each other), with ports cycling over 4 values (identical headers recur).
        let seen1: Vec<StoredRecord> = (0..5000u64)
            .map(|i| StoredRecord {
                record: rec(1_000_000 + i * 2000, (i % 4) as u16),
                probe_id: 1,
                stream_id: 10,
            })
            .collect();
        // Probe 2 saw 1234 of them, with a clock off by up to ±900 ns, plus 300 of its own.
        let mut seen2 = Vec::new();
        let mut injected = 0;
        for (i, s) in seen1.iter().enumerate() {
            if i % 4 == 1 && injected < 1234 {
                let skew = rng.gen_range(0..=1800) as i64 - 900;
                let mut r = s.record;
                r.ts_ns = (r.ts_ns as i64 + skew) as u64;
                seen2.push(StoredRecord {
                    record: r,
                    probe_id: 2,
                    stream_id: 20,
                });
                injected += 1;
            }
        }
        for i in 0..300u64 {
            seen2.push(StoredRecord {
                record: rec(1_000_000 + i * 2000 + 1000, 9),
                probe_id: 2,
                stream_id: 20,
            });
        }
        // And probe 1 stored 50 rows twice (a batch whose ack was lost): same probe, same ts; rows probe 2
        // did not see, so the count by kind is exact.
        let again: Vec<StoredRecord> = seen1[2000..2200].iter().step_by(4).copied().collect();
        let tmp = tempfile::tempdir().unwrap();
        let (d1, d2, out) = (
            tmp.path().join("c1"),
            tmp.path().join("c2"),
            tmp.path().join("out"),
        );
        write(&d1, "records-a.parquet", &seen1);
        write(&d1, "records-b.parquet", &again);
        write(&d2, "records-a.parquet", &seen2);
        let rep = dedup_dirs(&[d1, d2], &out, DEFAULT_TOLERANCE).unwrap();
        assert_eq!(rep.read, 5000 + 50 + 1234 + 300);
        assert_eq!(rep.removed, 1234 + 50);
        assert_eq!(rep.removed_same_probe, 50);
        assert_eq!(rep.kept, 5300);
        let mut back = Vec::new();
        read_records(&rep.outputs[0], &mut back).unwrap();
        assert_eq!(back.len(), 5300);
        assert!(back
            .windows(2)
            .all(|w| w[0].record.ts_ns <= w[1].record.ts_ns));
        // Each packet is there once: probe 1's 5000 (whichever copy came first), probe 2's own 300.
        assert_eq!(back.iter().filter(|r| r.record.src_port < 4).count(), 5000);
        assert_eq!(back.iter().filter(|r| r.record.src_port == 9).count(), 300);
        for (i, r) in back.iter().filter(|r| r.record.src_port < 4).enumerate() {
            let t = 1_000_000 + i as u64 * 2000;
            assert!(
                r.record.ts_ns.abs_diff(t) <= 900,
                "row {i} at {}",
                r.record.ts_ns
            );
        }
        // Running it into the same directory again is refused.
        let e = dedup_dirs(&[tmp.path().join("c1")], &out, DEFAULT_TOLERANCE).unwrap_err();
        assert!(e.to_string().contains("already holds"), "{e}");
    }

    #[test]
    fn same_probe_packets_nanoseconds_apart_are_kept() {
        let rows: Vec<StoredRecord> = [0u64, 1, 500]
            .iter()
            .map(|&t| StoredRecord {
                record: rec(t, 1),
                probe_id: 1,
                stream_id: 1,
            })
            .collect();
        let (keep, same) = find_duplicates(&rows, DEFAULT_TOLERANCE);
        assert_eq!(keep, vec![true, true, true]);
        assert_eq!(same, 0);
        // A different header within the tolerance from another probe is kept too.
        let two = [
            StoredRecord {
                record: rec(0, 1),
                probe_id: 1,
                stream_id: 1,
            },
            StoredRecord {
                record: rec(10, 2),
                probe_id: 2,
                stream_id: 1,
            },
            StoredRecord {
                record: rec(1001, 1),
                probe_id: 2,
                stream_id: 1,
            },
        ];
        assert_eq!(
            find_duplicates(&two, DEFAULT_TOLERANCE).0,
            vec![true, true, true]
        );
    }
}
