//! Analyses of a converted set (seed 002 §7): rate timeline, burstiness, sizes, protocol mix, top
//! talkers and ports, and a flow table. Files are read in parallel with the Parquet arrow reader,
//! each pass projecting only the columns it needs.

mod html;
mod plots;
pub mod rates;
pub mod traffic;
mod tunnel;

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use columns::col;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use rayon::prelude::*;
use serde::Serialize;

use crate::error::TraceError;
use rates::{Bin, Burstiness, Hour, Run, RunBuilder};
use traffic::{FlowKey, Mix, Sizes, Traffic};

/// The report flow table's version (`ringcap.schema`; 1.0 had no tunnel columns and no key).
pub const REPORT_FLOWS_SCHEMA: &str = "report-flows/1.1";

/// Largest size written to the generator `dist` file (gen's default maximum, an Ethernet MTU).
pub const DIST_MAX_SIZE: usize = 1500;

/// How to analyse.
#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    /// Threads reading files in parallel.
    pub threads: usize,
    /// Rows in heavy-hitter and top-N tables.
    pub top: usize,
    /// Burstiness window lengths in multiples of [`rates::BASE_NS`] (100 µs).
    pub windows: Vec<u64>,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            top: 20,
            windows: rates::WINDOWS.to_vec(),
        }
    }
}

/// Time spent per pass and its speed.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Rates and burstiness pass (ts and wire_len only).
    pub rates_s: f64,
    /// Its rows per second, in millions.
    pub rates_mpps: f64,
    /// Sizes and flows pass.
    pub traffic_s: f64,
    pub traffic_mpps: f64,
    /// Everything including the report files.
    pub total_s: f64,
}

/// All results; also written as `report.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub input: String,
    pub files: Vec<String>,
    pub packets: u64,
    /// Sum of wire lengths.
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub duration_s: f64,
    /// Rate timeline in bins that suit the trace's length (see [`rates::bin_for`]).
    pub timeline: Vec<Bin>,
    pub hours: Vec<Hour>,
    pub burstiness: Vec<Burstiness>,
    pub sizes: Sizes,
    /// Packets without an IP length (not IP, or cut before it).
    pub packets_without_ip_len: u64,
    pub mix: Mix,
    /// Directional 5-tuples in the flow table.
    pub flows: usize,
    /// Packets with a tunnel that was not decoded (keyed by their outer headers), by reason.
    pub tunnel_problems: std::collections::BTreeMap<String, u64>,
    pub timing: Timing,
    /// Files written into the report directory.
    pub outputs: Vec<String>,
}

/// The Parquet files of a converted set (a directory, searched recursively) or one file.
pub fn list_parquet(input: &Path) -> Result<Vec<PathBuf>, TraceError> {
    let rerr = |source| TraceError::Read {
        path: input.to_path_buf(),
        source,
    };
    let meta = fs::metadata(input).map_err(rerr)?;
    if meta.is_file() {
        return Ok(vec![input.to_path_buf()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![input.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).map_err(rerr)? {
            let e = e.map_err(rerr)?;
            let name = e.file_name().to_string_lossy().to_string();
            // Hidden files are unfinished parts of a running conversion.
            if name.starts_with('.') {
                continue;
            }
            let p = e.path();
            if e.file_type().map_err(rerr)?.is_dir() {
                stack.push(p);
            } else if name.ends_with(".parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(TraceError::Usage(format!(
            "no .parquet files under {}: convert a capture first (ringcap convert IN -o DIR)",
            input.display()
        )));
    }
    Ok(out)
}

/// Reads `cols` of `path` batch by batch, and those of `optional` the file has (columns of a later
/// minor version of the packet table).
fn scan(
    path: &Path,
    cols: &[&str],
    optional: &[&str],
    mut f: impl FnMut(&RecordBatch) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let perr = |source| TraceError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(|source| TraceError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(perr)?;
    for c in cols {
        if b.schema().field_with_name(c).is_err() {
            return Err(TraceError::Schema {
                path: path.to_path_buf(),
                what: format!("no column {c:?}"),
            });
        }
    }
    let present = optional
        .iter()
        .filter(|c| b.schema().field_with_name(c).is_ok());
    let mask = ProjectionMask::columns(b.parquet_schema(), cols.iter().chain(present).copied());
    let reader = b
        .with_projection(mask)
        .with_batch_size(64 * 1024)
        .build()
        .map_err(perr)?;
    for batch in reader {
        let batch = batch.map_err(|e| perr(e.into()))?;
        f(&batch)?;
    }
    Ok(())
}

fn column<'a>(b: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a ArrayRef, TraceError> {
    b.column_by_name(name).ok_or_else(|| TraceError::Schema {
        path: path.to_path_buf(),
        what: format!("no column {name:?}"),
    })
}

fn typed<'a, T: arrow_array::ArrowPrimitiveType>(
    b: &'a RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'a arrow_array::PrimitiveArray<T>, TraceError> {
    column(b, name, path)?
        .as_primitive_opt::<T>()
        .ok_or_else(|| TraceError::Schema {
            path: path.to_path_buf(),
            what: format!("column {name:?} has an unexpected type"),
        })
}

/// Pass 1: base-window runs of one file.
fn rate_runs(path: &Path) -> Result<(Vec<Run>, u64), TraceError> {
    let mut rb = RunBuilder::default();
    let mut rows = 0u64;
    scan(path, &[col::TS, col::WIRE_LEN], &[], |b| {
        let ts = typed::<TimestampNanosecondType>(b, col::TS, path)?;
        let len = typed::<UInt32Type>(b, col::WIRE_LEN, path)?;
        rb.add(ts.values(), len.values());
        rows += b.num_rows() as u64;
        Ok(())
    })?;
    Ok((rb.runs, rows))
}

/// Pass 2: sizes and flows of one file.
fn traffic_of(path: &Path) -> Result<Traffic, TraceError> {
    let mut t = Traffic::default();
    let cols = [
        col::TS,
        col::WIRE_LEN,
        col::ETHERTYPE,
        col::IP_VERSION,
        col::IP_LEN,
        col::PROTOCOL,
        col::SRC_IP4,
        col::DST_IP4,
        col::SRC_IP6,
        col::DST_IP6,
        col::SRC_PORT,
        col::DST_PORT,
    ];
    let tunnel_cols = [
        col::TUNNEL,
        col::TUNNEL_ID,
        col::TUNNEL_A,
        col::TUNNEL_B,
        col::TUNNEL_PROBLEM,
    ];
    let mut tunnels = tunnel::Reader::default();
    scan(path, &cols, &tunnel_cols, |b| {
        let tun = tunnel::Columns::of(b, path)?;
        let ts = typed::<TimestampNanosecondType>(b, col::TS, path)?;
        let wl = typed::<UInt32Type>(b, col::WIRE_LEN, path)?;
        let et = typed::<UInt16Type>(b, col::ETHERTYPE, path)?;
        let ver = typed::<UInt8Type>(b, col::IP_VERSION, path)?;
        let il = typed::<UInt32Type>(b, col::IP_LEN, path)?;
        let pr = typed::<UInt8Type>(b, col::PROTOCOL, path)?;
        let s4 = typed::<UInt32Type>(b, col::SRC_IP4, path)?;
        let d4 = typed::<UInt32Type>(b, col::DST_IP4, path)?;
        let fsb = |name: &str| {
            column(b, name, path)?
                .as_fixed_size_binary_opt()
                .ok_or_else(|| TraceError::Schema {
                    path: path.to_path_buf(),
                    what: format!("column {name:?} has an unexpected type"),
                })
        };
        let (s6, d6) = (fsb(col::SRC_IP6)?, fsb(col::DST_IP6)?);
        let sp = typed::<UInt16Type>(b, col::SRC_PORT, path)?;
        let dp = typed::<UInt16Type>(b, col::DST_PORT, path)?;
        let opt16 = |a: &arrow_array::PrimitiveArray<UInt16Type>, i: usize| {
            if a.is_valid(i) {
                a.value(i)
            } else {
                0
            }
        };
        for i in 0..b.num_rows() {
            let ip_len = il.is_valid(i).then(|| il.value(i));
            let mut key = FlowKey::default();
            if let Some(c) = &tun {
                key.tunnel = tunnels.row(c, i, &mut t.tunnel_problems);
            }
            match ver.is_valid(i).then(|| ver.value(i)) {
                Some(4) => {
                    key.version = 4;
                    key.src[..4].copy_from_slice(&s4.value(i).to_be_bytes());
                    key.dst[..4].copy_from_slice(&d4.value(i).to_be_bytes());
                }
                Some(6) if s6.is_valid(i) && d6.is_valid(i) => {
                    key.version = 6;
                    key.src.copy_from_slice(s6.value(i));
                    key.dst.copy_from_slice(d6.value(i));
                }
                _ => {
                    // Not IP: one "flow" per ethertype (0xffff: none known).
                    key.src_port = if et.is_valid(i) { et.value(i) } else { 0xffff };
                    t.add(ts.value(i), wl.value(i), ip_len, key);
                    continue;
                }
            }
            key.proto = if pr.is_valid(i) { pr.value(i) } else { 0 };
            key.src_port = opt16(sp, i);
            key.dst_port = opt16(dp, i);
            t.add(ts.value(i), wl.value(i), ip_len, key);
        }
        Ok(())
    })?;
    Ok(t)
}

/// Runs all analyses over `input` (a converted directory or one Parquet file) and writes the
/// report (`index.html`, `report.json`, SVGs, `sizes.dist`, `flows.parquet`) into `report_dir`.
pub fn analyze(
    input: &Path,
    report_dir: &Path,
    opts: &AnalyzeOptions,
) -> Result<Analysis, TraceError> {
    let start = Instant::now();
    let files = list_parquet(input)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.max(1))
        .build()
        .map_err(|e| TraceError::Usage(format!("cannot start {} threads: {e}", opts.threads)))?;

    // Pass 1: rates.
    let t1 = Instant::now();
    let parts: Vec<(Vec<Run>, u64)> = pool.install(|| {
        files
            .par_iter()
            .map(|p| rate_runs(p))
            .collect::<Result<_, _>>()
    })?;
    let rows: u64 = parts.iter().map(|p| p.1).sum();
    let base = RunBuilder::merge(parts.into_iter().map(|p| p.0).collect());
    let burstiness = rates::burstiness(&base, &opts.windows);
    let (width, sub) = rates::bin_for(&base);
    let timeline = rates::timeline(&base, width, sub);
    // Minute rates over the 100 ms steps with traffic: whole seconds would average an 8.2 s trace over 9 s.
    let hours = rates::hours(&rates::timeline(&base, rates::MIN, rates::HOUR_SUB));
    let rates_s = t1.elapsed().as_secs_f64();

    // Pass 2: sizes and flows.
    let t2 = Instant::now();
    let traffic = pool.install(|| {
        files
            .par_iter()
            .map(|p| traffic_of(p))
            .try_reduce(Traffic::default, |a, b| Ok(a.merge(b)))
    })?;
    let traffic_s = t2.elapsed().as_secs_f64();

    let sizes = traffic::size_summary(&traffic.sizes, opts.top);
    let mix = traffic::mix(&traffic.flows, opts.top);
    let first_ns = base.first().map_or(0, |r| r.window * rates::BASE_NS);
    let last_ns = base.last().map_or(0, |r| (r.window + 1) * rates::BASE_NS);
    let mut a = Analysis {
        input: input.display().to_string(),
        files: files.iter().map(|p| p.display().to_string()).collect(),
        packets: traffic.packets,
        bytes: traffic.bytes,
        first_ns,
        last_ns,
        duration_s: (last_ns - first_ns) as f64 / 1e9,
        timeline,
        hours,
        burstiness,
        packets_without_ip_len: traffic.packets - sizes.ip_packets,
        sizes,
        mix,
        flows: traffic.flows.len(),
        tunnel_problems: traffic.tunnel_problems.clone(),
        timing: Timing {
            rates_s,
            rates_mpps: rows as f64 / rates_s.max(1e-9) / 1e6,
            traffic_s,
            traffic_mpps: traffic.packets as f64 / traffic_s.max(1e-9) / 1e6,
            total_s: 0.0,
        },
        outputs: Vec::new(),
    };
    write_report(&mut a, &traffic, report_dir)?;
    a.timing.total_s = start.elapsed().as_secs_f64();
    write_file(
        &report_dir.join("report.json"),
        serde_json::to_string_pretty(&a)
            .unwrap_or_default()
            .as_bytes(),
    )?;
    Ok(a)
}

fn write_file(path: &Path, data: &[u8]) -> Result<(), TraceError> {
    fs::write(path, data).map_err(|source| TraceError::Write {
        path: path.to_path_buf(),
        source,
    })
}

fn write_report(a: &mut Analysis, t: &Traffic, dir: &Path) -> Result<(), TraceError> {
    fs::create_dir_all(dir).map_err(|source| TraceError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let plot = |name: &str, r: Result<String, plot::PlotError>| -> Result<(), TraceError> {
        let svg = r.map_err(|e| TraceError::Usage(format!("cannot draw {name}: {e}")))?;
        write_file(&dir.join(name), svg.as_bytes())
    };
    plot("timeline.svg", plots::timeline_svg(&a.timeline))?;
    plot("burstiness.svg", plots::burstiness_svg(&a.burstiness))?;
    plot("sizes.svg", plots::sizes_svg(&t.sizes))?;
    write_file(&dir.join("sizes.dist"), dist_file(a, &t.sizes).as_bytes())?;
    write_flows(&dir.join("flows.parquet"), t)?;
    a.outputs = [
        "index.html",
        "report.json",
        "timeline.svg",
        "burstiness.svg",
        "sizes.svg",
        "sizes.dist",
        "flows.parquet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    write_file(&dir.join("index.html"), html::page(a).as_bytes())
}

/// The size histogram as a generator `dist` file: `<IP length> <count>` lines (read by
/// `ringcap dist -I dist FILE` and `ringcap gen --dist file:FILE`).
pub fn dist_file(a: &Analysis, hist: &[u64]) -> String {
    let above: u64 = hist[DIST_MAX_SIZE + 1..].iter().sum();
    let mut s = format!(
        "# IP packet lengths of {} ({} packets, {} with an IP length)\n\
         # written by ringcap analyze; lengths above {DIST_MAX_SIZE} left out: {above} packets\n",
        a.input, a.packets, a.sizes.ip_packets
    );
    for (size, &c) in hist.iter().enumerate().take(DIST_MAX_SIZE + 1).skip(1) {
        if c > 0 {
            s.push_str(&format!("{size} {c}\n"));
        }
    }
    s
}

/// The flow table as Parquet: one row per directional 5-tuple, in order of first packet. Addresses
/// are typed as in the packet table (IPv4 as uint32, IPv6 as 16 bytes), so the two tables join.
fn write_flows(path: &Path, t: &Traffic) -> Result<(), TraceError> {
    use arrow_array::builder::{FixedSizeBinaryBuilder, PrimitiveBuilder};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    let mut flows: Vec<_> = t.flows.iter().collect();
    flows.sort_unstable_by(|a, b| a.1.first_ns.cmp(&b.1.first_ns).then_with(|| a.0.cmp(b.0)));
    let n = flows.len();
    let mut ver = PrimitiveBuilder::<UInt8Type>::with_capacity(n);
    let mut proto = PrimitiveBuilder::<UInt8Type>::with_capacity(n);
    let mut ethertype = PrimitiveBuilder::<UInt16Type>::with_capacity(n);
    let mut src4 = PrimitiveBuilder::<UInt32Type>::with_capacity(n);
    let mut dst4 = PrimitiveBuilder::<UInt32Type>::with_capacity(n);
    let mut src6 = FixedSizeBinaryBuilder::with_capacity(n / 8, 16);
    let mut dst6 = FixedSizeBinaryBuilder::with_capacity(n / 8, 16);
    let mut sport = PrimitiveBuilder::<UInt16Type>::with_capacity(n);
    let mut dport = PrimitiveBuilder::<UInt16Type>::with_capacity(n);
    let mut first =
        PrimitiveBuilder::<TimestampNanosecondType>::with_capacity(n).with_timezone("UTC");
    let mut last =
        PrimitiveBuilder::<TimestampNanosecondType>::with_capacity(n).with_timezone("UTC");
    let mut packets = PrimitiveBuilder::<UInt64Type>::with_capacity(n);
    let mut bytes = PrimitiveBuilder::<UInt64Type>::with_capacity(n);
    let v4 = |a: &[u8; 16]| u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
    let mut tunnels = tunnel::Builders::new();
    for (k, s) in flows {
        tunnels.push(k.tunnel.as_ref());
        let ip = k.version != 0;
        ver.append_option(ip.then_some(k.version));
        proto.append_option(ip.then_some(k.proto));
        ethertype.append_option((!ip).then_some(k.src_port));
        src4.append_option((k.version == 4).then(|| v4(&k.src)));
        dst4.append_option((k.version == 4).then(|| v4(&k.dst)));
        if k.version == 6 {
            // 16 bytes into 16-wide builders cannot fail.
            let _ = src6.append_value(k.src);
            let _ = dst6.append_value(k.dst);
        } else {
            src6.append_null();
            dst6.append_null();
        }
        sport.append_option(ip.then_some(k.src_port));
        dport.append_option(ip.then_some(k.dst_port));
        first.append_value(s.first_ns);
        last.append_value(s.last_ns);
        packets.append_value(s.packets);
        bytes.append_value(s.bytes);
    }
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    let mut fields = vec![
        Field::new("ip_version", DataType::UInt8, true),
        Field::new("protocol", DataType::UInt8, true),
        Field::new("ethertype", DataType::UInt16, true),
        Field::new("src_ip4", DataType::UInt32, true),
        Field::new("dst_ip4", DataType::UInt32, true),
        Field::new("src_ip6", DataType::FixedSizeBinary(16), true),
        Field::new("dst_ip6", DataType::FixedSizeBinary(16), true),
        Field::new("src_port", DataType::UInt16, true),
        Field::new("dst_port", DataType::UInt16, true),
        Field::new("first_ts", ts.clone(), false),
        Field::new("last_ts", ts, false),
        Field::new("packets", DataType::UInt64, false),
        Field::new("bytes", DataType::UInt64, false),
    ];
    // report-flows/1.1: the tunnel a flow came in (its key is then the carried packet's).
    fields.extend(tunnel::Builders::fields());
    let schema = Arc::new(Schema::new(fields));
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(ver.finish()),
        Arc::new(proto.finish()),
        Arc::new(ethertype.finish()),
        Arc::new(src4.finish()),
        Arc::new(dst4.finish()),
        Arc::new(src6.finish()),
        Arc::new(dst6.finish()),
        Arc::new(sport.finish()),
        Arc::new(dport.finish()),
        Arc::new(first.finish()),
        Arc::new(last.finish()),
        Arc::new(packets.finish()),
        Arc::new(bytes.finish()),
    ];
    cols.extend(tunnels.finish());
    let perr = |source| TraceError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let batch = RecordBatch::try_new(schema.clone(), cols).map_err(|e| perr(e.into()))?;
    let file = File::create(path).map_err(|source| TraceError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    // Versioned as the other tables (docs/datasets.md).
    let schema_kv = parquet::file::metadata::KeyValue::new(
        "ringcap.schema".into(),
        REPORT_FLOWS_SCHEMA.to_string(),
    );
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
        .set_key_value_metadata(Some(vec![schema_kv]))
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(BufWriter::new(file), schema, Some(props))
        .map_err(perr)?;
    w.write(&batch).map_err(perr)?;
    let mut inner = w.into_inner().map_err(perr)?;
    inner.flush().map_err(|source| TraceError::Write {
        path: path.to_path_buf(),
        source,
    })
}
