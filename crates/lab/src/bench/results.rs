//! results.csv: one row per (run, app), appended and fsynced as each run finishes, so a crash loses at most
//! the run in flight; read back for `--resume`; converted to results.parquet after each run (bench::export).

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

/// Columns before the factor columns.
pub const HEAD: [&str; 4] = ["run", "point", "rerun", "app"];

/// The measured columns after the factor columns, in order (bench-contract.md; later additions at the end).
/// Counts are in [`COUNTS`], `status` is text, the others are real numbers.
pub const MEASURES: [&str; 28] = [
    "generated",
    "offered",
    "received",
    "drop_kernel",
    "drop_ring",
    "drop_storage",
    "capture_rate",
    "duration_s",
    "pps",
    "mbps",
    "cpu_user",
    "cpu_nice",
    "cpu_system",
    "cpu_idle",
    "cpu_iowait",
    "cpu_irq",
    "cpu_softirq",
    "cpu_steal",
    "app_cpu_s",
    "app_ns_per_pkt",
    "status",
    "app_setup_s",
    // The capturers' cgroup under `cpu_limit` (its cpu.stat): periods run, periods throttled, time throttled.
    "cg_periods",
    "cg_throttled",
    "cg_throttled_s",
    // Schultz (seed 004): the rate on the wire, each frame plus preamble 8, FCS 4 and gap 12 bytes.
    "line_mbps",
    // Host (or plan/CLI label) the run was measured on, so results of several machines merge into one
    // ANOVA (`ringcap anova a.csv b.csv --factors method,machine`). Text.
    "machine",
    // Busy % (100 − idle) of the capturers' CPU alone (ringmap Abb. 5-6's system load on the capturing
    // side): the whole machine's figure also holds the generator's CPU, busy at any rate on this testbed.
    "capture_cpu_busy",
];

/// Integer measures.
const COUNTS: [&str; 8] = [
    "generated",
    "offered",
    "received",
    "drop_kernel",
    "drop_ring",
    "drop_storage",
    "cg_periods",
    "cg_throttled",
];

/// Measures that are text.
const TEXT: [&str; 2] = ["status", "machine"];

/// The CPU columns: percent of the machine per mode of /proc/stat, in cpusage's order.
pub fn cpu_modes() -> &'static [&'static str] {
    &MEASURES[10..18]
}

/// Integer columns. Factor columns stay text even when numeric: their levels are as written ("max").
fn is_int(name: &str) -> bool {
    ["run", "rerun", "app"].contains(&name) || COUNTS.contains(&name)
}

/// Real-number columns: the measures that are neither counts nor the status.
fn is_float(name: &str) -> bool {
    MEASURES.contains(&name) && !COUNTS.contains(&name) && !TEXT.contains(&name)
}

/// One row of results.csv.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub run: usize,
    pub point: String,
    pub rerun: u32,
    pub app: u32,
    /// Levels of the plan's factors, in plan order.
    pub levels: Vec<String>,
    pub generated: Option<u64>,
    pub offered: Option<u64>,
    pub received: Option<u64>,
    pub drop_kernel: Option<u64>,
    pub drop_ring: Option<u64>,
    pub drop_storage: Option<u64>,
    pub capture_rate: Option<f64>,
    pub duration_s: Option<f64>,
    pub pps: Option<f64>,
    pub mbps: Option<f64>,
    /// Percent of the machine per mode (cpusage::MODES order), average over the generating phase.
    pub cpu: Option<[f64; 8]>,
    pub app_cpu_s: Option<f64>,
    /// Per-packet CPU without the set-up: (app_cpu_s - app_setup_s) / offered.
    pub app_ns_per_pkt: Option<f64>,
    pub status: String,
    /// CPU the capturer had used when it was ready (ring allocation, start-up), seconds.
    pub app_setup_s: Option<f64>,
    /// cpu.stat of the capturers' cgroup (runs with a `cpu_limit`; all apps of a run share the group).
    pub cg_periods: Option<u64>,
    pub cg_throttled: Option<u64>,
    pub cg_throttled_s: Option<f64>,
    /// Line rate of what was offered: (frame, at least 60, + 24) bytes × 8 / duration, Mbit/s.
    pub line_mbps: Option<f64>,
    pub machine: String,
    /// 100 − idle % of the capturers' CPU over the generating phase.
    pub capture_cpu_busy: Option<f64>,
}

/// The header for a plan with these factors.
pub fn header(factors: &[String]) -> Vec<String> {
    let mut h: Vec<String> = HEAD.iter().map(|s| s.to_string()).collect();
    h.extend(factors.iter().cloned());
    h.extend(MEASURES.iter().map(|s| s.to_string()));
    h
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn float(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.digits$}"))
        .unwrap_or_default()
}

impl Row {
    /// The row's fields in header order.
    pub fn fields(&self) -> Vec<String> {
        let mut f = vec![
            self.run.to_string(),
            self.point.clone(),
            self.rerun.to_string(),
            self.app.to_string(),
        ];
        f.extend(self.levels.iter().cloned());
        f.extend([
            opt(self.generated),
            opt(self.offered),
            opt(self.received),
            opt(self.drop_kernel),
            opt(self.drop_ring),
            opt(self.drop_storage),
            float(self.capture_rate, 6),
            float(self.duration_s, 6),
            float(self.pps, 1),
            float(self.mbps, 3),
        ]);
        for i in 0..8 {
            f.push(float(self.cpu.map(|c| c[i]), 2));
        }
        f.extend([
            float(self.app_cpu_s, 6),
            float(self.app_ns_per_pkt, 1),
            self.status.clone(),
            float(self.app_setup_s, 6),
            opt(self.cg_periods),
            opt(self.cg_throttled),
            float(self.cg_throttled_s, 6),
            float(self.line_mbps, 3),
            self.machine.clone(),
            float(self.capture_cpu_busy, 2),
        ]);
        f
    }
}

fn csv_line(fields: &[String]) -> io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(fields).map_err(io::Error::other)?;
    w.into_inner().map_err(|e| io::Error::other(e.to_string()))
}

/// Create results.csv with its header if it does not exist yet.
pub fn create(path: &Path, factors: &[String]) -> io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let mut f = fs::File::create(path)?;
    f.write_all(&csv_line(&header(factors))?)?;
    f.sync_all()
}

/// Append the rows of one run in a single write and fsync it.
pub fn append(path: &Path, rows: &[Row]) -> io::Result<()> {
    let mut buf = Vec::new();
    for r in rows {
        buf.extend(csv_line(&r.fields())?);
    }
    let mut f = OpenOptions::new().append(true).open(path)?;
    f.write_all(&buf)?;
    f.sync_data()
}

/// The runs already in results.csv (for `--resume`). A torn last line (a crash mid-write) is cut off
/// first; a header that does not match the plan's is an error.
pub fn finished_runs(path: &Path, factors: &[String]) -> io::Result<BTreeSet<usize>> {
    let mut done = BTreeSet::new();
    let Ok(bytes) = fs::read(path) else {
        return Ok(done);
    };
    if let Some(end) = bytes.iter().rposition(|&b| b == b'\n') {
        if end + 1 < bytes.len() {
            OpenOptions::new()
                .write(true)
                .open(path)?
                .set_len(end as u64 + 1)?;
        }
    }
    let mut r = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(path)
        .map_err(io::Error::other)?;
    let want = header(factors);
    let have: Vec<String> = r
        .headers()
        .map_err(io::Error::other)?
        .iter()
        .map(str::to_string)
        .collect();
    if have != want {
        return Err(io::Error::other(format!(
            "{} has the columns {:?}, but this plan writes {:?}: use another --out directory",
            path.display(),
            have,
            want
        )));
    }
    for rec in r.records() {
        let rec = rec.map_err(io::Error::other)?;
        if rec.len() != want.len() {
            continue;
        }
        if let Some(run) = rec.get(0).and_then(|v| v.parse().ok()) {
            done.insert(run);
        }
    }
    Ok(done)
}

/// Convert results.csv into results.parquet (zstd): integers as Int64, measures as Float64, factor levels
/// and status as text; empty cells are nulls.
pub fn write_parquet(csv_path: &Path, parquet_path: &Path) -> io::Result<()> {
    let mut r = csv::Reader::from_path(csv_path).map_err(io::Error::other)?;
    let names: Vec<String> = r
        .headers()
        .map_err(io::Error::other)?
        .iter()
        .map(str::to_string)
        .collect();
    let mut cols: Vec<Vec<String>> = vec![Vec::new(); names.len()];
    for rec in r.records() {
        let rec = rec.map_err(io::Error::other)?;
        if rec.len() != names.len() {
            continue;
        }
        for (c, v) in cols.iter_mut().zip(rec.iter()) {
            c.push(v.to_string());
        }
    }
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (name, vals) in names.iter().zip(&cols) {
        let n = name.as_str();
        if is_int(n) {
            fields.push(Field::new(n, DataType::Int64, true));
            arrays.push(Arc::new(Int64Array::from(
                vals.iter()
                    .map(|v| v.parse::<i64>().ok())
                    .collect::<Vec<_>>(),
            )));
        } else if is_float(n) {
            fields.push(Field::new(n, DataType::Float64, true));
            arrays.push(Arc::new(Float64Array::from(
                vals.iter()
                    .map(|v| v.parse::<f64>().ok())
                    .collect::<Vec<_>>(),
            )));
        } else {
            fields.push(Field::new(n, DataType::Utf8, false));
            arrays.push(Arc::new(StringArray::from(vals.clone())));
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(io::Error::other)?;
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
        .build();
    let tmp = parquet_path.with_extension("parquet.partial");
    let file = fs::File::create(&tmp)?;
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, Some(props))
        .map_err(io::Error::other)?;
    w.write(&batch).map_err(io::Error::other)?;
    w.close().map_err(io::Error::other)?;
    fs::rename(&tmp, parquet_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_kinds() {
        let cpu = cpu_modes();
        assert_eq!(cpu.len(), Row::default().cpu.unwrap_or_default().len());
        assert!(cpu.iter().all(|c| c.starts_with("cpu_")));
        assert!(["run", "app", "generated", "drop_storage", "cg_throttled"]
            .iter()
            .all(|c| is_int(c)));
        assert!(
            ["capture_rate", "cpu_steal", "app_setup_s", "cg_throttled_s"]
                .iter()
                .all(|c| is_float(c))
        );
        assert!(!is_int("status") && !is_float("status") && !is_float("point"));
        assert!(is_float("line_mbps") && !is_float("machine") && !is_int("machine"));
        assert!(is_float("capture_cpu_busy"));
    }

    fn row(run: usize, status: &str) -> Row {
        Row {
            run,
            point: "method=tcpdump;filter=udp, port 9".into(),
            levels: vec!["tcpdump".into(), "udp, port 9".into()],
            generated: Some(1000),
            offered: Some(1000),
            received: Some(990),
            capture_rate: Some(0.99),
            cpu: Some([1.0, 0.0, 2.0, 97.0, 0.0, 0.0, 0.0, 0.0]),
            status: status.into(),
            machine: "host-a".into(),
            ..Row::default()
        }
    }

    #[test]
    fn append_resume_cuts_torn_line_and_parquet() {
        let dir = std::env::temp_dir().join(format!("ringcap-results-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("results.csv");
        let factors = vec!["method".to_string(), "filter".to_string()];
        create(&csv, &factors).unwrap();
        append(&csv, &[row(0, "ok"), row(0, "ok")]).unwrap();
        append(&csv, &[row(2, "capturer exited before ready")]).unwrap();
        // A crash in the middle of the next append leaves half a line.
        let mut f = OpenOptions::new().append(true).open(&csv).unwrap();
        f.write_all(b"3,method=tcpdump,0,0,tcp").unwrap();
        drop(f);
        let done = finished_runs(&csv, &factors).unwrap();
        assert_eq!(done.into_iter().collect::<Vec<_>>(), vec![0, 2]);
        let text = fs::read_to_string(&csv).unwrap();
        assert!(
            // … machine, then the empty capture_cpu_busy.
            text.ends_with("capturer exited before ready,,,,,,host-a,\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 4);
        // The quoted level with a comma survives the round trip.
        assert!(text.contains("\"udp, port 9\""));
        let e = finished_runs(&csv, &["method".to_string()]).unwrap_err();
        assert!(e.to_string().contains("another --out"), "{e}");

        let pq = dir.join("results.parquet");
        write_parquet(&csv, &pq).unwrap();
        let file = fs::File::open(&pq).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        let b = &batches[0];
        assert_eq!(b.num_rows(), 3);
        let rate = b
            .column_by_name("capture_rate")
            .unwrap()
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(rate.value(0), 0.99);
        let recv = b
            .column_by_name("received")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(recv.value(2), 990);
        assert!(b.column_by_name("drop_ring").unwrap().is_null(0));
        fs::remove_dir_all(&dir).unwrap();
    }
}
