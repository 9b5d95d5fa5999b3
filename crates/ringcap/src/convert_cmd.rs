//! `ringcap convert`: capture files → Parquet (one row per packet, partitioned by hour).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use trace::{ConvertOptions, ConvertReport, Progress, TraceError};

use crate::Fatal;

#[derive(Args, Debug)]
#[command(
    after_help = "Inputs: pcap or pcapng, plain or .gz/.zst/.lz4 (found by content), files or directories \
(every file in them, sorted by name). Damaged inputs are converted as far as they are valid; skipped regions are \
reported with file and offset.\n\
Output: DIR/hour=YYYY-MM-DDTHH/part-<input>-<thread>.parquet, ZSTD, statistics on. Query with DuckDB:\n  \
SELECT count(*), sum(wire_len) FROM read_parquet('DIR/**/*.parquet', hive_partitioning = true);\n\
Columns and more SQL: docs/trace.md."
)]
pub struct ConvertArgs {
    /// Capture files or directories of them.
    #[arg(value_name = "IN", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output directory (created; must not already hold a converted set).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Encoder threads (default: one per core). 1 reads, parses and encodes on one thread.
    #[arg(long = "threads", value_name = "N")]
    pub threads: Option<usize>,
    /// Rows per Parquet row group.
    #[arg(long = "row-group", value_name = "ROWS", default_value_t = 1 << 18)]
    pub rows_per_group: usize,
    /// ZSTD level of the pages (1 is fastest; higher packs tighter).
    #[arg(long = "zstd-level", value_name = "N", default_value_t = 1)]
    pub zstd_level: i32,
    #[command(flatten)]
    pub json: crate::cli::Json,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
}

/// Every row group allocates and frees tens of MiB of column buffers; glibc's default gives freed
/// memory back to the kernel at once, so each row group page-faulted it in again (about 3 % of the
/// CPU of a conversion). Keep up to 1 GiB of freed heap and serve blocks up to 32 MiB from it.
fn keep_freed_memory() {
    // SAFETY: mallopt only changes allocator tuning; it is called before the worker threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

/// Files of the inputs, directories expanded (sorted, hidden files skipped).
fn expand(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, Fatal> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Fatal::runtime(anyhow!("cannot list {}: {e}", p.display())))?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn total_size(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

pub fn run(a: ConvertArgs) -> Result<(), Fatal> {
    let files = expand(&a.inputs)?;
    let mut opts = ConvertOptions::new(&a.out_dir);
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    opts.rows_per_group = a.rows_per_group;
    opts.zstd_level = a.zstd_level;
    keep_freed_memory();
    let progress = Progress::default();
    let bar = crate::progress::bytes_bar(total_size(&files), a.quiet.on || a.json.on, "");
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                bar.set_position(progress.bytes.load(Relaxed));
                bar.set_message(format!("{} packets", progress.packets.load(Relaxed)));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = trace::convert(&files, &opts, &progress);
        done.store(true, Ordering::Release);
        r
    });
    bar.finish_and_clear();
    let report = result.map_err(|e| match e {
        TraceError::Usage(_) => Fatal::usage(e),
        e => Fatal::runtime(e),
    })?;
    print_issues(&report);
    if a.json.on {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_summary(&report, &a.out_dir);
    }
    let failed = report.failed_inputs();
    if failed > 0 {
        return Err(Fatal::runtime(anyhow!(
            "{failed} of {} inputs could not be read at all (see above); the others were converted",
            report.inputs.len()
        )));
    }
    Ok(())
}

fn print_issues(r: &ConvertReport) {
    for i in &r.inputs {
        if let Some(e) = &i.error {
            eprintln!("ringcap: {}: {e}", i.path);
        }
        for s in &i.issues {
            let what = if s.corrupt { "skipped" } else { "note" };
            eprintln!(
                "ringcap: {what}: {}: offset {}: {} ({} bytes)",
                i.path, s.offset, s.reason, s.bytes
            );
        }
        if i.issues_total > i.issues.len() as u64 {
            eprintln!(
                "ringcap: {}: {} more issues not shown",
                i.path,
                i.issues_total - i.issues.len() as u64
            );
        }
        if i.undecoded > 0 {
            eprintln!(
                "ringcap: {}: {} packets of a link type ringcap does not decode (kept with time and lengths)",
                i.path, i.undecoded
            );
        }
    }
}

fn print_summary(r: &ConvertReport, dir: &Path) {
    let ratio = if r.input_bytes > 0 {
        r.output_bytes as f64 * 100.0 / r.input_bytes as f64
    } else {
        0.0
    };
    println!(
        "converted {} packets from {} inputs ({}) in {:.2} s: {:.2} Mpps, {}/s; {:.2} CPU s ({:.2} Mpps per CPU second)",
        r.packets,
        r.inputs.len(),
        units::bytes(r.input_bytes),
        r.seconds,
        r.mpps,
        units::bytes((r.input_bytes as f64 / r.seconds.max(1e-9)) as u64),
        r.cpu_seconds,
        r.mpps_per_cpu
    );
    println!(
        "wrote {} Parquet files, {} ({:.1} % of the input), to {} with {} threads",
        r.parts.len(),
        units::bytes(r.output_bytes),
        ratio,
        dir.display(),
        r.options.threads
    );
}
