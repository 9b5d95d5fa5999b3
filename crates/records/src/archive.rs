//! The collector's storage: accepted batches go to a spool file (`DIR/.spool-<start>-<n>.rcr`); on rotation
//! (time or size) or close the spool is handed to a converter thread that writes
//! `DIR/records-<start>-<n>.parquet` (as `.partial`, synced, renamed) and then removes the spool. At open,
//! spools left behind by a crashed run are converted first.
//!
//! Durability: [`Archive::append`] numbers each batch (1, 2, ... in this run); [`Archive::sync`] makes every
//! batch up to a number durable (one fdatasync covers all batches appended since the last one, so the
//! collector acks a run of batches per sync). A spool whose write or sync failed is closed (its whole
//! frames are converted) and the next batch opens a new one; the batches it could not make durable are
//! refused, never acked, so the probe re-sends them.
//!
//! The converter runs beside the receivers so a rotation never stalls them; at most [`CONVERT_QUEUE`] closed
//! spools wait for it, after that a rotation waits (back pressure instead of unbounded disk use).

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wire::record::records;

use crate::parquet_out::{writer_properties, RecordFileWriter, StoredRecord};
use crate::spool::{SpoolReader, SpoolTail, SpoolWriter};

/// Closed spools that may wait for the converter.
pub const CONVERT_QUEUE: usize = 2;

/// Where and when to rotate.
#[derive(Clone, Debug)]
pub struct ArchiveConfig {
    /// Output directory (created if missing).
    pub dir: PathBuf,
    /// Rotate a spool this long after its first batch.
    pub rotate_after: Duration,
    /// Rotate a spool once it holds this many bytes.
    pub rotate_bytes: u64,
    /// This sensor's name: spools (and so their Parquet files) go to `dir/sensor=NAME/date=…/hour=…/`
    /// of the UTC hour they are opened in, and rotate when the hour ends (`partition`).
    pub sensor: Option<String>,
}

/// One spool converted to Parquet.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ConvertedFile {
    /// The spool it came from (now removed).
    pub spool: PathBuf,
    /// The Parquet file written.
    pub path: PathBuf,
    /// Rows written.
    pub records: u64,
    /// Parquet file size.
    pub bytes: u64,
    /// How the spool ended (a crashed writer leaves a torn last frame).
    pub tail: SpoolTail,
    /// Damaged bytes skipped in the middle of the spool (the frames after them were read).
    pub skipped_bytes: u64,
    /// Records that did not decode (never expected: batches are checked before they are spooled).
    pub bad_records: u64,
}

/// Called with one line for each noteworthy event (recovery, conversion, errors).
pub type Events = Arc<dyn Fn(&str) + Send + Sync>;

/// The Parquet name for a spool name: `.spool-X.rcr` → `records-X.parquet`.
fn parquet_name_for(spool: &Path) -> Option<PathBuf> {
    let name = spool.file_name()?.to_str()?;
    let stem = name.strip_prefix(".spool-")?.strip_suffix(".rcr")?;
    Some(spool.with_file_name(format!("records-{stem}.parquet")))
}

/// Converts one spool file to `out` (Parquet), skipping damaged frames. A failed conversion removes its
/// `.partial` (on a full disk it holds space the next try needs).
pub fn convert_spool(spool: &Path, out: &Path) -> io::Result<ConvertedFile> {
    let r = convert_spool_inner(spool, out);
    if r.is_err() {
        let _ = fs::remove_file(crate::parquet_out::partial_path(out));
    }
    r
}

fn convert_spool_inner(spool: &Path, out: &Path) -> io::Result<ConvertedFile> {
    let mut reader = SpoolReader::open(spool)?;
    let props = writer_properties(&[("spool", spool.display().to_string())]);
    let mut w = RecordFileWriter::create(out, props)?;
    let mut bad_records = 0u64;
    while let Some(h) = reader.next_frame()? {
        let mut n = 0u32;
        for r in records(reader.payload()) {
            match r {
                Ok(record) => {
                    n += 1;
                    w.push(&StoredRecord {
                        record,
                        probe_id: h.probe_id,
                        stream_id: h.stream_id,
                    })?;
                }
                Err(_) => break,
            }
        }
        bad_records += h.count.saturating_sub(n) as u64;
    }
    let tail = reader.tail().clone();
    let skipped_bytes = reader.skipped_bytes();
    let (path, records, bytes) = w.finish()?;
    Ok(ConvertedFile {
        spool: spool.to_path_buf(),
        path,
        records,
        bytes,
        tail,
        skipped_bytes,
        bad_records,
    })
}

/// Converts and removes every spool left in `dir` and in its `sensor=/date=/hour=` directories
/// (whatever the sensor: a restart under another name still converts them, in place).
fn recover_tree(dir: &Path) -> io::Result<Vec<ConvertedFile>> {
    let mut done = recover_dir(dir)?;
    for d in crate::partition::partition_dirs(dir)? {
        done.extend(recover_dir(&d)?);
    }
    Ok(done)
}

/// Converts and removes every spool left in `dir` by an earlier run, oldest first.
pub fn recover_dir(dir: &Path) -> io::Result<Vec<ConvertedFile>> {
    let mut spools = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        if parquet_name_for(&p).is_some() {
            spools.push(p);
        }
    }
    spools.sort();
    let mut done = Vec::new();
    for s in spools {
        let out = parquet_name_for(&s).expect("filtered above");
        if out.exists() {
            // Converted and renamed, but the crash came before the spool was removed.
            fs::remove_file(&s)?;
            continue;
        }
        let c = convert_spool(&s, &out).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot recover the spool {}: {e} (move it out of the directory to start without it)",
                    s.display()
                ),
            )
        })?;
        fs::remove_file(&s)?;
        done.push(c);
    }
    Ok(done)
}

/// Everything the archive did, for the final summary.
#[derive(Clone, Debug, Default)]
pub struct ArchiveReport {
    /// Files converted during this run (recovered ones not included).
    pub files: Vec<ConvertedFile>,
    /// Conversion errors (the spool is kept for the next start).
    pub errors: Vec<String>,
}

/// Spool + rotation + background conversion.
pub struct Archive {
    cfg: ArchiveConfig,
    start_tag: String,
    next_n: u64,
    spool: Option<SpoolWriter>,
    opened_at: Instant,
    /// The UTC hour (seconds since the epoch) the open spool's partition names.
    spool_hour: u64,
    to_converter: Option<SyncSender<PathBuf>>,
    converter: Option<JoinHandle<()>>,
    report: Arc<Mutex<ArchiveReport>>,
    records: u64,
    batches: u64,
    /// Batches 1..=durable are on disk or in `not_durable`.
    durable: u64,
    /// Ranges (after, upto] of batch numbers whose sync failed (refused when asked for; the last 16).
    not_durable: VecDeque<(u64, u64)>,
}

impl Archive {
    /// Creates the directory, converts leftover spools (returned), starts the converter.
    pub fn open(cfg: ArchiveConfig, events: Events) -> io::Result<(Archive, Vec<ConvertedFile>)> {
        fs::create_dir_all(&cfg.dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create output directory {}: {e}", cfg.dir.display()),
            )
        })?;
        let recovered = recover_tree(&cfg.dir)?;
        for c in &recovered {
            events(&format!(
                "recovered {} records from {} into {}{}",
                c.records,
                c.spool.display(),
                c.path.display(),
                tail_note(c)
            ));
        }
        // Milliseconds since the epoch: names sort by start and never meet an earlier run's.
        let mut ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let start_tag = loop {
            let tag = format!("{ms}");
            let taken = fs::read_dir(&cfg.dir)?.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .contains(&format!("-{tag}-"))
            });
            if !taken {
                break tag;
            }
            ms += 1;
        };
        let (tx, rx) = sync_channel::<PathBuf>(CONVERT_QUEUE);
        let report = Arc::new(Mutex::new(ArchiveReport::default()));
        let rep = Arc::clone(&report);
        let converter = std::thread::Builder::new()
            .name("records-convert".into())
            .spawn(move || converter_loop(rx, &rep, &events))?;
        Ok((
            Archive {
                cfg,
                start_tag,
                next_n: 0,
                spool: None,
                opened_at: Instant::now(),
                spool_hour: 0,
                to_converter: Some(tx),
                converter: Some(converter),
                report,
                records: 0,
                batches: 0,
                durable: 0,
                not_durable: VecDeque::new(),
            },
            recovered,
        ))
    }

    /// Appends one batch payload (in the page cache when this returns Ok) and returns its number in this
    /// run, for [`Self::sync`]. A failed write closes the spool (cut back to its last whole frame); the
    /// next append opens a new one.
    pub fn append(
        &mut self,
        probe_id: u64,
        stream_id: u32,
        count: u32,
        payload: &[u8],
    ) -> io::Result<u64> {
        let hour = crate::partition::hour_of(SystemTime::now());
        if self.cfg.sensor.is_some() && self.spool.is_some() && hour != self.spool_hour {
            // A file holds one hour of arrivals: its partition says which.
            self.rotate()?;
        }
        if self.spool.is_none() {
            let dir = match &self.cfg.sensor {
                Some(s) => crate::partition::create_dirs(
                    &self.cfg.dir,
                    &crate::partition::partition(s, hour),
                )?,
                None => self.cfg.dir.clone(),
            };
            let name = format!(".spool-{}-{:05}.rcr", self.start_tag, self.next_n);
            self.next_n += 1;
            let spool = SpoolWriter::create(&dir.join(&name))?;
            // The new name must survive a crash too, or its synced frames are lost with it.
            File::open(&dir).and_then(|d| d.sync_all())?;
            self.spool = Some(spool);
            self.opened_at = Instant::now();
            self.spool_hour = hour;
        }
        let spool = self.spool.as_mut().expect("opened above");
        if let Err(e) = spool.append(probe_id, stream_id, count, payload) {
            // Its whole frames are still good: convert them, and start a new spool next time.
            self.rotate()?;
            return Err(e);
        }
        self.records += count as u64;
        self.batches += 1;
        let number = self.batches;
        if spool.bytes() >= self.cfg.rotate_bytes {
            self.rotate()?;
        }
        Ok(number)
    }

    /// Makes batches 1..=`upto` durable; Ok means every one of them is on disk (safe to ack). Batches
    /// appended by other connections since the last sync ride along: one fdatasync per run of batches.
    pub fn sync(&mut self, upto: u64) -> io::Result<()> {
        if self.not_durable.iter().any(|&(a, b)| a < upto && upto <= b) {
            return Err(io::Error::other(
                "syncing the spool failed; the batch is not acked",
            ));
        }
        if upto <= self.durable {
            return Ok(());
        }
        self.sync_open_spool()?;
        Ok(())
    }

    /// fdatasync of the open spool; on failure its unsynced batches are marked not durable and it is
    /// closed.
    fn sync_open_spool(&mut self) -> io::Result<()> {
        let Some(spool) = &self.spool else {
            self.durable = self.batches;
            return Ok(());
        };
        match spool.sync() {
            Ok(()) => {
                self.durable = self.batches;
                Ok(())
            }
            Err(e) => {
                // Batches after the last good sync are not known to be on disk: refuse them all.
                if self.not_durable.len() >= 16 {
                    self.not_durable.pop_front();
                }
                self.not_durable.push_back((self.durable, self.batches));
                self.durable = self.batches;
                if let Some(s) = self.spool.take() {
                    self.queue_for_conversion(s.path().to_path_buf())?;
                }
                Err(e)
            }
        }
    }

    /// Rotates when the open spool is older than the rotation interval, or its UTC hour has ended
    /// (with a sensor's partitions).
    pub fn tick(&mut self, now: Instant) -> io::Result<()> {
        let hour_ended = self.cfg.sensor.is_some()
            && crate::partition::hour_of(SystemTime::now()) != self.spool_hour;
        if self.spool.is_some()
            && (hour_ended || now.duration_since(self.opened_at) >= self.cfg.rotate_after)
        {
            self.rotate()?;
        }
        Ok(())
    }

    /// Syncs and closes the open spool (if any) and queues it for conversion.
    pub fn rotate(&mut self) -> io::Result<()> {
        if self.spool.is_none() {
            return Ok(());
        }
        // A failed sync closes and queues the spool itself; the batches it held are refused.
        if self.sync_open_spool().is_err() {
            return Ok(());
        }
        let s = self.spool.take().expect("checked above");
        let path = s.path().to_path_buf();
        drop(s);
        self.queue_for_conversion(path)
    }

    fn queue_for_conversion(&self, path: PathBuf) -> io::Result<()> {
        if let Some(tx) = &self.to_converter {
            tx.send(path)
                .map_err(|_| io::Error::other("the converter thread died"))?;
        }
        Ok(())
    }

    /// Records appended in this run.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Batches appended in this run.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Files converted so far (and errors).
    pub fn report(&self) -> ArchiveReport {
        self.report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Rotates the last spool, waits for every conversion, returns what was written.
    pub fn close(mut self) -> io::Result<ArchiveReport> {
        self.rotate()?;
        self.to_converter = None;
        if let Some(t) = self.converter.take() {
            t.join()
                .map_err(|_| io::Error::other("the converter thread panicked"))?;
        }
        Ok(self.report())
    }
}

/// Spools whose conversion failed and are tried again (at the next rotation and at close).
const RETRY_MAX: usize = 64;

/// The converter thread: converts each closed spool, retrying failed ones (a full disk may have room again)
/// before each new one and once more at the end.
fn converter_loop(
    rx: std::sync::mpsc::Receiver<PathBuf>,
    report: &Mutex<ArchiveReport>,
    events: &Events,
) {
    let mut failed: Vec<(PathBuf, String)> = Vec::new();
    let convert = |spool: PathBuf, failed: &mut Vec<(PathBuf, String)>| {
        let out = parquet_name_for(&spool).expect("the archive names its spools");
        let res = convert_spool(&spool, &out).and_then(|c| fs::remove_file(&spool).map(|_| c));
        let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
        match res {
            Ok(c) => {
                events(&format!(
                    "wrote {} records to {}{}",
                    c.records,
                    c.path.display(),
                    tail_note(&c)
                ));
                r.files.push(c);
            }
            Err(e) => {
                let m = format!(
                    "converting {} failed: {e} (the spool is kept and tried again at the next rotation, \
                     at exit and at the next start)",
                    spool.display()
                );
                events(&m);
                if failed.len() < RETRY_MAX {
                    failed.push((spool, m));
                }
            }
        }
        r.errors = failed.iter().map(|(_, m)| m.clone()).collect();
    };
    let retry = |failed: &mut Vec<(PathBuf, String)>| {
        for (spool, _) in std::mem::take(failed) {
            convert(spool, failed);
        }
    };
    for spool in rx {
        retry(&mut failed);
        convert(spool, &mut failed);
    }
    retry(&mut failed);
}

fn tail_note(c: &ConvertedFile) -> String {
    let mut note = String::new();
    if c.skipped_bytes > 0 {
        note += &format!(
            " (skipped {} damaged bytes in the middle of the spool)",
            c.skipped_bytes
        );
    }
    match c.tail {
        SpoolTail::Clean => {}
        SpoolTail::Truncated { bytes } => {
            note += &format!(" (dropped a torn last batch of {bytes} bytes, never acked)")
        }
        SpoolTail::Corrupt { bytes } => {
            note += &format!(" (dropped {bytes} damaged bytes at the end)")
        }
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet_out::read_records;
    use wire::record::Record;

    /// `n` encoded IPv4 records starting at ts `t0`, back to back.
    fn payload(t0: u64, n: u32) -> Vec<u8> {
        let mut out = vec![0u8; n as usize * wire::record::RECORD_LEN];
        let mut at = 0;
        for i in 0..n {
            let r = Record {
                ts_ns: t0 + i as u64,
                wire_len: 100 + i,
                ethertype: 0x0800,
                ip_version: 4,
                ip_header_len: 20,
                protocol: 17,
                src_port: 1000,
                dst_port: 2000,
                l4_len: 80 + i as u16,
                ..Record::default()
            };
            at += r.encode(&mut out[at..]);
        }
        out
    }

    fn quiet() -> Events {
        Arc::new(|_| {})
    }

    fn cfg(dir: &Path) -> ArchiveConfig {
        ArchiveConfig {
            dir: dir.to_path_buf(),
            rotate_after: Duration::from_secs(3600),
            rotate_bytes: 1 << 30,
            sensor: None,
        }
    }

    fn parquet_rows(dir: &Path) -> (usize, u64) {
        let mut files = 0;
        let mut v = Vec::new();
        for e in fs::read_dir(dir).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("records-") && n.ends_with(".parquet") {
                files += 1;
                read_records(&e.path(), &mut v).unwrap();
            }
        }
        (files, v.len() as u64)
    }

    #[test]
    fn rotation_by_size_writes_one_file_per_spool() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cfg(dir.path());
        // 100 records of 48 bytes + a 24-byte frame header per batch: rotate every 3 batches.
        c.rotate_bytes = 3 * (100 * 48 + 24);
        let (mut s, rec) = Archive::open(c, quiet()).unwrap();
        assert!(rec.is_empty());
        for b in 0..10u64 {
            s.append(1, 2, 100, &payload(b * 100, 100)).unwrap();
        }
        let rep = s.close().unwrap();
        assert!(rep.errors.is_empty(), "{:?}", rep.errors);
        // 3 + 3 + 3 rotated by size, the last one by close.
        assert_eq!(rep.files.len(), 4);
        assert_eq!(
            rep.files.iter().map(|f| f.records).collect::<Vec<_>>(),
            vec![300, 300, 300, 100]
        );
        assert_eq!(parquet_rows(dir.path()), (4, 1000));
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "spools or partials left: {left:?}");
    }

    #[test]
    fn with_a_sensor_files_go_to_their_hours_partition_and_are_recovered_there() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cfg(dir.path());
        c.sensor = Some("s1".into());
        let (mut s, _) = Archive::open(c.clone(), quiet()).unwrap();
        let before = crate::partition::hour_of(SystemTime::now());
        s.append(1, 2, 10, &payload(0, 10)).unwrap();
        let rep = s.close().unwrap();
        let after = crate::partition::hour_of(SystemTime::now());
        let part = rep.files[0].path.parent().unwrap().to_path_buf();
        let rel = part.strip_prefix(dir.path()).unwrap();
        assert!(
            [before, after]
                .map(|h| crate::partition::partition("s1", h))
                .contains(&rel.to_path_buf()),
            "{}",
            rel.display()
        );
        assert_eq!(parquet_rows(&part), (1, 10));
        // A crash with a spool open: the next start converts it where it is.
        let (mut s, _) = Archive::open(c.clone(), quiet()).unwrap();
        s.append(1, 2, 5, &payload(10, 5)).unwrap();
        let spool = s.spool.as_ref().unwrap().path().to_path_buf();
        std::mem::forget(s);
        let (s, rec) = Archive::open(c, quiet()).unwrap();
        assert_eq!(rec.len(), 1);
        assert_eq!(rec[0].path.parent(), spool.parent());
        assert!(!spool.exists());
        s.close().unwrap();
        let rows: u64 = crate::partition::partition_dirs(dir.path())
            .unwrap()
            .iter()
            .map(|d| parquet_rows(d).1)
            .sum();
        assert_eq!(rows, 15);
        assert_eq!(parquet_rows(dir.path()), (0, 0), "nothing in the root");
    }

    #[test]
    fn rotation_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cfg(dir.path());
        c.rotate_after = Duration::from_millis(50);
        let (mut s, _) = Archive::open(c, quiet()).unwrap();
        s.append(1, 2, 10, &payload(0, 10)).unwrap();
        s.tick(Instant::now()).unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "too early");
        std::thread::sleep(Duration::from_millis(60));
        s.tick(Instant::now()).unwrap();
        // Nothing appended since: no empty spool is opened by a tick.
        std::thread::sleep(Duration::from_millis(60));
        s.tick(Instant::now()).unwrap();
        s.append(1, 2, 5, &payload(10, 5)).unwrap();
        let rep = s.close().unwrap();
        assert_eq!(
            rep.files.iter().map(|f| f.records).collect::<Vec<_>>(),
            vec![10, 5]
        );
    }

    #[test]
    fn spool_of_a_crashed_writer_is_recovered_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Archive::open(cfg(dir.path()), quiet()).unwrap();
        for b in 0..7u64 {
            s.append(9, 3, 50, &payload(b * 50, 50)).unwrap();
        }
        // The crash: the archive is forgotten without close (no rotation, no conversion), and the write
        // of an eighth batch was cut in the middle.
        let spool = s.spool.as_ref().unwrap().path().to_path_buf();
        std::mem::forget(s);
        let mut torn = fs::read(&spool).unwrap();
        let one = 24 + 50 * 48;
        torn.extend_from_within(8..8 + one / 2);
        fs::write(&spool, &torn).unwrap();
        // A .partial of a conversion that was running at the crash is overwritten.
        let target = parquet_name_for(&spool).unwrap();
        fs::write(crate::parquet_out::partial_path(&target), b"half").unwrap();

        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let l2 = Arc::clone(&lines);
        let ev: Events = Arc::new(move |m| l2.lock().unwrap().push(m.to_string()));
        let (s2, rec) = Archive::open(cfg(dir.path()), ev).unwrap();
        assert_eq!(rec.len(), 1);
        assert_eq!(rec[0].records, 350);
        assert_eq!(
            rec[0].tail,
            SpoolTail::Truncated {
                bytes: (one / 2) as u64
            }
        );
        assert!(!spool.exists());
        assert_eq!(parquet_rows(dir.path()), (1, 350));
        let mut v = Vec::new();
        read_records(&target, &mut v).unwrap();
        assert_eq!(
            v.iter().map(|r| r.record.ts_ns).collect::<Vec<_>>(),
            (0..350).collect::<Vec<_>>()
        );
        assert!(v.iter().all(|r| r.probe_id == 9 && r.stream_id == 3));
        assert!(lines.lock().unwrap()[0].starts_with("recovered 350 records from"));
        s2.close().unwrap();
    }
}
