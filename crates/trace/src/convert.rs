//! pcap/pcapng (plain, .gz, .zst, .lz4) → Parquet, one row per packet, Hive-partitioned by hour.
//!
//! Shape: one reader per input (read + parse + append to column builders) hands finished chunks,
//! one row group each, round robin to N encoder threads (Parquet encoding and ZSTD are the
//! expensive part). An encoder writes each (input, hour) to its own part file, so the row groups of
//! a part file are in capture order. With one thread everything runs inline on the caller's thread.
//! Damaged input is converted up to and around the damage; skipped regions are reported.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow_array::RecordBatch;
use columns::{packet_schema, PacketColumns};
use parquet::arrow::ArrowWriter;
use parquet::basic::ZstdLevel;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde::Serialize;
use wire::{Described, LinkType};

use crate::error::TraceError;
use units::time::utc_hour;

const NS_PER_HOUR: u64 = 3_600_000_000_000;

/// How to convert.
#[derive(Clone, Debug, Serialize)]
pub struct ConvertOptions {
    /// Output directory (created; must not already hold a converted set).
    pub out_dir: PathBuf,
    /// Encoder threads; 1 reads, parses and encodes on the calling thread.
    pub threads: usize,
    /// Rows per row group (the unit handed to an encoder).
    pub rows_per_group: usize,
    /// ZSTD level of the Parquet pages.
    pub zstd_level: i32,
}

impl ConvertOptions {
    /// Defaults: one thread per core, 256 Ki rows per row group, ZSTD level 1.
    pub fn new(out_dir: impl Into<PathBuf>) -> ConvertOptions {
        ConvertOptions {
            out_dir: out_dir.into(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            rows_per_group: 1 << 18,
            zstd_level: 1,
        }
    }
}

/// Live counters for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    /// Raw (possibly compressed) input bytes read so far.
    pub bytes: Arc<AtomicU64>,
    /// Packets converted so far (updated once per row group).
    pub packets: AtomicU64,
}

/// A region of an input that was skipped or looked odd.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// Offset in the decompressed stream.
    pub offset: u64,
    /// Bytes skipped (0: nothing lost).
    pub bytes: u64,
    /// What was wrong.
    pub reason: String,
    /// Damage rather than something legal but unusual.
    pub corrupt: bool,
}

/// What happened to one input.
#[derive(Clone, Debug, Serialize)]
pub struct InputReport {
    /// The input as given.
    pub path: String,
    /// Size of the file in bytes.
    pub file_bytes: u64,
    /// Compression found by magic ("none", "gzip", "zstd", "lz4" in JSON).
    #[serde(serialize_with = "compression_name")]
    pub compression: Option<store::Compression>,
    /// "pcap" or "pcapng".
    pub format: Option<String>,
    /// Packets converted.
    pub packets: u64,
    /// Sum of wire lengths.
    pub wire_bytes: u64,
    /// Packets whose link type this version cannot decode (kept with timestamps and lengths).
    pub undecoded: u64,
    /// Skipped regions and oddities (the first 100; see `issues_total`).
    pub issues: Vec<Skipped>,
    /// All issues, counted.
    pub issues_total: u64,
    /// Why the file could not be read at all, or why reading stopped early.
    pub error: Option<String>,
}

fn compression_name<S: serde::Serializer>(
    c: &Option<store::Compression>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_some(&c.map(store::Compression::name))
}

/// One finished Parquet file.
#[derive(Clone, Debug, Serialize)]
pub struct PartFile {
    /// Path of the file.
    pub path: PathBuf,
    /// Rows in it.
    pub rows: u64,
    /// Row groups in it.
    pub row_groups: usize,
    /// Size in bytes.
    pub bytes: u64,
}

/// The outcome of a conversion.
#[derive(Clone, Debug, Serialize)]
pub struct ConvertReport {
    /// Options used.
    pub options: ConvertOptions,
    /// One entry per input, in the order given.
    pub inputs: Vec<InputReport>,
    /// Files written.
    pub parts: Vec<PartFile>,
    /// Packets converted.
    pub packets: u64,
    /// Sum of input file sizes.
    pub input_bytes: u64,
    /// Sum of output file sizes.
    pub output_bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Millions of packets per second.
    pub mpps: f64,
    /// CPU seconds (user + system) of the whole process during the conversion.
    pub cpu_seconds: f64,
    /// Millions of packets per CPU second: the speed on one dedicated core, whatever else runs.
    pub mpps_per_cpu: f64,
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF is always valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

impl ConvertReport {
    /// Inputs that could not be read at all.
    pub fn failed_inputs(&self) -> usize {
        self.inputs.iter().filter(|i| i.format.is_none()).count()
    }
}

/// A row group on its way to an encoder.
struct Chunk {
    input: usize,
    hour: u64,
    batch: RecordBatch,
}

enum Msg {
    Chunk(Chunk),
    /// The reader of this input is done: its part files can be closed.
    EndOfInput(usize),
}

/// Converts `inputs` into `opts.out_dir`.
pub fn convert(
    inputs: &[PathBuf],
    opts: &ConvertOptions,
    progress: &Progress,
) -> Result<ConvertReport, TraceError> {
    if inputs.is_empty() {
        return Err(TraceError::Usage("no input files given".into()));
    }
    if opts.threads == 0 || opts.rows_per_group == 0 {
        return Err(TraceError::Usage(
            "threads and rows per row group must be at least 1".into(),
        ));
    }
    prepare_out_dir(&opts.out_dir)?;
    let props = writer_properties(inputs, opts)?;
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    let labels: Vec<Arc<str>> = inputs
        .iter()
        .map(|p| Arc::from(p.display().to_string()))
        .collect();

    let (reports, parts) = if opts.threads == 1 {
        let mut enc = Encoder::new(0, opts.out_dir.clone(), props, &labels);
        let mut reports = Vec::new();
        for (i, path) in inputs.iter().enumerate() {
            let mut failed = None;
            let rep = read_input(i, path, &labels[i], opts, progress, &mut |c| {
                if failed.is_none() {
                    failed = enc.chunk(c).err();
                }
            });
            if let Some(e) = failed {
                return Err(e);
            }
            enc.end_input(i)?;
            reports.push(rep);
        }
        (reports, enc.finish()?)
    } else {
        run_parallel(inputs, &labels, opts, props, progress)?
    };

    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_start;
    let packets: u64 = reports.iter().map(|r| r.packets).sum();
    let mut parts = parts;
    parts.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ConvertReport {
        options: opts.clone(),
        packets,
        input_bytes: reports.iter().map(|r| r.file_bytes).sum(),
        output_bytes: parts.iter().map(|p| p.bytes).sum(),
        inputs: reports,
        parts,
        seconds,
        mpps: packets as f64 / seconds.max(1e-9) / 1e6,
        cpu_seconds: cpu,
        mpps_per_cpu: packets as f64 / cpu.max(1e-9) / 1e6,
    })
}

/// Readers (one per input at a time) feeding N encoder threads, each with its own queue.
fn run_parallel(
    inputs: &[PathBuf],
    labels: &[Arc<str>],
    opts: &ConvertOptions,
    props: WriterProperties,
    progress: &Progress,
) -> Result<(Vec<InputReport>, Vec<PartFile>), TraceError> {
    let n_enc = opts.threads;
    // Parsing costs a fraction of encoding: one reader per four encoders, at least one.
    let n_read = inputs.len().min(n_enc.div_ceil(4)).max(1);
    let next_input = AtomicUsize::new(0);
    let reports: Mutex<Vec<Option<InputReport>>> = Mutex::new(vec![None; inputs.len()]);
    let parts = std::thread::scope(|s| {
        let mut senders = Vec::new();
        let mut encoders = Vec::new();
        for id in 0..n_enc {
            // Two chunks in flight per encoder bound memory to a few row groups per thread.
            let (tx, rx): (SyncSender<Msg>, Receiver<Msg>) = sync_channel(2);
            senders.push(tx);
            let mut enc = Encoder::new(id, opts.out_dir.clone(), props.clone(), labels);
            encoders.push(s.spawn(move || -> Result<Vec<PartFile>, TraceError> {
                let mut result = Ok(());
                for msg in rx {
                    // After an error keep draining, so readers never block on a full queue.
                    if result.is_err() {
                        continue;
                    }
                    result = match msg {
                        Msg::Chunk(c) => enc.chunk(c),
                        Msg::EndOfInput(i) => enc.end_input(i),
                    };
                }
                result?;
                enc.finish()
            }));
        }
        let readers: Vec<_> = (0..n_read)
            .map(|r| {
                let senders = senders.clone();
                let (next_input, reports) = (&next_input, &reports);
                s.spawn(move || {
                    let mut rr = r;
                    loop {
                        let i = next_input.fetch_add(1, Relaxed);
                        if i >= inputs.len() {
                            break;
                        }
                        let rep = read_input(i, &inputs[i], &labels[i], opts, progress, &mut |c| {
                            // A send fails only if that encoder died; its error is reported below.
                            let _ = senders[rr % senders.len()].send(Msg::Chunk(c));
                            rr += 1;
                        });
                        for tx in &senders {
                            let _ = tx.send(Msg::EndOfInput(i));
                        }
                        reports.lock().expect("reports lock")[i] = Some(rep);
                    }
                })
            })
            .collect();
        drop(senders);
        for r in readers {
            r.join().expect("reader thread panicked");
        }
        let mut parts = Vec::new();
        for e in encoders {
            parts.extend(e.join().expect("encoder thread panicked")?);
        }
        Ok::<_, TraceError>(parts)
    })?;
    let reports = reports
        .into_inner()
        .expect("reports lock")
        .into_iter()
        .map(|r| r.expect("every input was read"))
        .collect();
    Ok((reports, parts))
}

/// Reads one input and hands its rows to `sink` in chunks of at most `rows_per_group` rows that
/// never span two hours.
fn read_input(
    index: usize,
    path: &Path,
    label: &Arc<str>,
    opts: &ConvertOptions,
    progress: &Progress,
    sink: &mut dyn FnMut(Chunk),
) -> InputReport {
    let mut rep = InputReport {
        path: label.to_string(),
        file_bytes: fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        compression: None,
        format: None,
        packets: 0,
        wire_bytes: 0,
        undecoded: 0,
        issues: Vec::new(),
        issues_total: 0,
        error: None,
    };
    let mut reader = match store::CaptureReader::open_with_progress(path, progress.bytes.clone()) {
        Ok(r) => r,
        Err(e) => {
            rep.error = Some(e.to_string());
            return rep;
        }
    };
    rep.compression = Some(reader.compression());
    rep.format = Some(match reader.format() {
        store::InputFormat::Pcap { .. } => "pcap".into(),
        store::InputFormat::PcapNg => "pcapng".into(),
    });
    let rows = opts.rows_per_group;
    let mut cols = PacketColumns::with_capacity(rows);
    let mut chunk_hour = 0u64;
    let mut emit = |cols: &mut PacketColumns, hour: u64| {
        progress.packets.fetch_add(cols.len() as u64, Relaxed);
        sink(Chunk {
            input: index,
            hour,
            batch: cols.finish(label),
        });
    };
    // Decoding is looked up once per link type change, not per packet.
    let mut last_dlt = u32::MAX;
    let mut link: Option<LinkType> = None;
    loop {
        let p = match reader.next_packet() {
            None => break,
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                // A read error or a damaged compressed stream: keep what was converted.
                rep.error = Some(format!("reading stopped early: {e}"));
                break;
            }
        };
        let hour = p.ts_ns / NS_PER_HOUR;
        if !cols.is_empty() && (hour != chunk_hour || cols.len() >= rows) {
            emit(&mut cols, chunk_hour);
        }
        chunk_hour = hour;
        if p.linktype != last_dlt {
            last_dlt = p.linktype;
            link = LinkType::from_pcap(p.linktype);
        }
        let h = match link {
            // A packet in one tunnel is a row of the packet it carries (wire::describe).
            Some(lt) => wire::describe(p.data, lt),
            None => {
                rep.undecoded += 1;
                Described::default()
            }
        };
        cols.push(
            p.ts_ns,
            p.wire_len,
            p.data.len() as u32,
            p.linktype,
            p.data_offset,
            &h,
        );
        rep.packets += 1;
        rep.wire_bytes += u64::from(p.wire_len);
    }
    if !cols.is_empty() {
        emit(&mut cols, chunk_hour);
    }
    rep.issues = reader
        .issues()
        .iter()
        .map(|i| Skipped {
            offset: i.offset,
            bytes: i.skipped,
            reason: i.reason.clone(),
            corrupt: i.corrupt,
        })
        .collect();
    rep.issues_total = reader.issues_total();
    rep
}

/// An open part file: written hidden, renamed when closed.
struct Part {
    writer: ArrowWriter<BufWriter<File>>,
    tmp: PathBuf,
    path: PathBuf,
    rows: u64,
    row_groups: usize,
}

/// Writes chunks into part files `hour=H/part-<input>-<encoder>.parquet`.
struct Encoder {
    id: usize,
    out_dir: PathBuf,
    props: WriterProperties,
    labels: Vec<Arc<str>>,
    open: HashMap<(usize, u64), Part>,
    done: Vec<PartFile>,
}

impl Encoder {
    fn new(id: usize, out_dir: PathBuf, props: WriterProperties, labels: &[Arc<str>]) -> Encoder {
        Encoder {
            id,
            out_dir,
            props,
            labels: labels.to_vec(),
            open: HashMap::new(),
            done: Vec::new(),
        }
    }

    fn chunk(&mut self, c: Chunk) -> Result<(), TraceError> {
        let key = (c.input, c.hour);
        if !self.open.contains_key(&key) {
            let part = self.create(c.input, c.hour)?;
            self.open.insert(key, part);
        }
        let part = self.open.get_mut(&key).expect("just inserted");
        let werr = |e| TraceError::Parquet {
            path: part.tmp.clone(),
            source: e,
        };
        part.writer.write(&c.batch).map_err(werr)?;
        // One chunk, one row group: the reader already cut chunks at the size and hour limits.
        part.writer.flush().map_err(werr)?;
        part.rows += c.batch.num_rows() as u64;
        part.row_groups += 1;
        Ok(())
    }

    fn create(&self, input: usize, hour: u64) -> Result<Part, TraceError> {
        let dir = self.out_dir.join(format!("hour={}", utc_hour(hour)));
        fs::create_dir_all(&dir).map_err(|e| TraceError::Write {
            path: dir.clone(),
            source: e,
        })?;
        let name = format!("part-{input:05}-{:02}.parquet", self.id);
        let path = dir.join(&name);
        let tmp = dir.join(format!(".{name}.tmp"));
        // Packet data, so as private as the capture files (0600, or 0640 with a shared group); a
        // leftover of an interrupted run is unlinked, never followed.
        let file = match sys::create_data_file(&tmp) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let _ = fs::remove_file(&tmp);
                sys::create_data_file(&tmp)
            }
            r => r,
        }
        .map_err(|e| TraceError::Write {
            path: tmp.clone(),
            source: e,
        })?;
        let mut writer = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 20, file),
            packet_schema(),
            Some(self.props.clone()),
        )
        .map_err(|e| TraceError::Parquet {
            path: tmp.clone(),
            source: e,
        })?;
        writer.append_key_value_metadata(KeyValue::new(
            "ringcap.input".into(),
            self.labels[input].to_string(),
        ));
        Ok(Part {
            writer,
            tmp,
            path,
            rows: 0,
            row_groups: 0,
        })
    }

    fn end_input(&mut self, input: usize) -> Result<(), TraceError> {
        let keys: Vec<_> = self.open.keys().filter(|k| k.0 == input).copied().collect();
        for k in keys {
            let part = self.open.remove(&k).expect("key listed");
            self.done.push(close(part)?);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<PartFile>, TraceError> {
        for (_, part) in self.open.drain() {
            self.done.push(close(part)?);
        }
        Ok(self.done)
    }
}

fn close(part: Part) -> Result<PartFile, TraceError> {
    let werr = |source| TraceError::Write {
        path: part.tmp.clone(),
        source,
    };
    let buf = part.writer.into_inner().map_err(|e| TraceError::Parquet {
        path: part.tmp.clone(),
        source: e,
    })?;
    let file = buf.into_inner().map_err(|e| werr(e.into_error()))?;
    let bytes = file.metadata().map_err(werr)?.len();
    drop(file);
    fs::rename(&part.tmp, &part.path).map_err(werr)?;
    Ok(PartFile {
        path: part.path,
        rows: part.rows,
        row_groups: part.row_groups,
        bytes,
    })
}

/// Refuses a directory that already holds hour partitions (mixing runs would double count).
fn prepare_out_dir(dir: &Path) -> Result<(), TraceError> {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("hour=") {
                return Err(TraceError::Usage(format!(
                    "{} already holds a converted set ({}); choose a new output directory or remove it",
                    dir.display(),
                    e.file_name().to_string_lossy()
                )));
            }
        }
    }
    fs::create_dir_all(dir).map_err(|e| TraceError::Write {
        path: dir.to_path_buf(),
        source: e,
    })
}

/// The tables' writer properties with the provenance in the footer; row groups are cut by the
/// caller (one per chunk).
fn writer_properties(
    inputs: &[PathBuf],
    opts: &ConvertOptions,
) -> Result<WriterProperties, TraceError> {
    let level = ZstdLevel::try_new(opts.zstd_level)
        .map_err(|e| TraceError::Usage(format!("bad ZSTD level {}: {e}", opts.zstd_level)))?;
    let inputs_json: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    let kv = vec![
        KeyValue::new(
            "ringcap.version".into(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        KeyValue::new(
            "ringcap.inputs".into(),
            serde_json::to_string(&inputs_json).unwrap_or_default(),
        ),
        KeyValue::new(
            "ringcap.options".into(),
            serde_json::to_string(opts).unwrap_or_default(),
        ),
        KeyValue::new(
            "ringcap.schema".into(),
            // The dataset's version; docs/datasets.md says when it changes.
            "packets/1.1".to_string(),
        ),
    ];
    Ok(columns::writer_properties(level, kv)
        .set_max_row_group_row_count(None)
        .build())
}
