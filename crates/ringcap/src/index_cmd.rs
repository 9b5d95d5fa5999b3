//! `ringcap index`: index capture files that exist (any tool's), in parallel.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use clap::Args;

use crate::Fatal;

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Each FILE gets an index next to it (FILE.idx) and a flow table for DuckDB, Spark or Trino
(FILE.flows.parquet: one row per flow, see docs/index.md). Directories are searched for capture
files (.pcap, .pcapng, .cap, each plain or .gz/.zst/.lz4). A current index and flow table are
left alone; if either is missing, stale (the file changed) or damaged, both are (re)built.
`ringcap capture -w BASE` writes indexes as it goes; this command catches up files it could not
index and files of other tools.
A compressed frame that does not decode (bit rot, a torn write) is left out and the rest of the
file is indexed, if the file's frames are cut at packets (ringcap's are); the file is named with
the frames and bytes lost. Any other damaged file is not indexed: queries scan it.
Exit status: 0 all indexed or current, 1 a file could not be indexed or was damaged, 2 bad usage.
Examples:
  ringcap index /data/cap-*.pcap.zst
  ringcap index /data            # every capture file in /data")]
pub struct IndexArgs {
    /// Capture files, or directories of them.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,
    /// Rebuild even where the index is current.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub jobs: crate::cli::Jobs,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
    #[command(flatten)]
    pub json: crate::cli::Json,
}

/// The capture files under `paths` (index::capture_files), a path that is not there being a usage
/// error.
pub fn capture_files(paths: &[PathBuf], partial: bool) -> Result<Vec<PathBuf>, Fatal> {
    index::capture_files(paths, partial).map_err(|e| match e {
        index::ListError::NoSuchPath { .. } => Fatal::usage(e),
        index::ListError::Unreadable { .. } => Fatal::runtime(e),
    })
}

#[derive(serde::Serialize)]
struct FileResult {
    path: PathBuf,
    /// "indexed", "current" or "failed".
    status: &'static str,
    packets: u64,
    index_bytes: u64,
    flows_bytes: u64,
    file_bytes: u64,
    partial: bool,
    /// Compressed frames that did not decode and were left out of the index (their packets are
    /// lost; queries that touch them say so).
    damaged_frames: u64,
    error: Option<String>,
}

pub fn run(a: IndexArgs) -> Result<(), Fatal> {
    let files = capture_files(&a.paths, false)?;
    if files.is_empty() {
        return Err(Fatal::usage(anyhow::anyhow!(
            "no capture files found in {}",
            a.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let jobs = a
        .jobs
        .given()
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, files.len());
    let bar = crate::progress::bytes_bar(total, a.quiet.on || a.json.on, "indexing");
    let done = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<FileResult>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                sys::low_priority();
                loop {
                    let i = next.fetch_add(1, Relaxed);
                    let Some(f) = files.get(i) else { break };
                    let r = one(f, a.force, &done);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
        while next.load(Relaxed) < files.len() + jobs
            && results
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|r| r.is_none())
        {
            bar.set_position(done.load(Relaxed));
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    });
    bar.finish_and_clear();
    let results: Vec<FileResult> = results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect();
    let failed = results.iter().filter(|r| r.status == "failed").count();
    let damaged = results
        .iter()
        .filter(|r| r.status == "indexed" && r.damaged_frames > 0)
        .count();
    if a.json.on {
        println!(
            "{}",
            serde_json::to_string_pretty(&results).unwrap_or_default()
        );
    } else {
        for r in &results {
            match r.status {
                "failed" => eprintln!("ringcap: {}", r.error.as_deref().unwrap_or("failed")),
                "indexed" if r.damaged_frames > 0 => eprintln!(
                    "ringcap: {}: {}",
                    r.path.display(),
                    r.error.as_deref().unwrap_or("damaged")
                ),
                "current" if !a.quiet.on && r.damaged_frames > 0 => println!(
                    "{}: index is current ({} damaged frame(s) left out when it was built)",
                    r.path.display(),
                    r.damaged_frames
                ),
                "current" if !a.quiet.on => println!("{}: index is current", r.path.display()),
                "indexed" if !a.quiet.on => println!(
                    "{}: {} packets, index {} ({:.2} % of the file), flow table {} ({:.2} %){}",
                    r.path.display(),
                    units::si(r.packets as f64, ""),
                    units::bytes(r.index_bytes),
                    100.0 * r.index_bytes as f64 / r.file_bytes.max(1) as f64,
                    units::bytes(r.flows_bytes),
                    100.0 * r.flows_bytes as f64 / r.file_bytes.max(1) as f64,
                    if r.partial {
                        " (a size limit stopped it: queries scan the rest)"
                    } else {
                        ""
                    }
                ),
                _ => {}
            }
        }
        if !a.quiet.on {
            let secs = started.elapsed().as_secs_f64();
            println!(
                "{} files, {} read in {:.1} s ({}/s); {} failed",
                results.len(),
                units::bytes(total),
                secs,
                units::bytes((total as f64 / secs.max(1e-9)) as u64),
                failed
            );
        }
    }
    if failed > 0 {
        return Err(Fatal::runtime(anyhow::anyhow!(
            "{failed} of {} files could not be indexed (see above); queries scan them",
            results.len()
        )));
    }
    if damaged > 0 {
        return Err(Fatal::runtime(anyhow::anyhow!(
            "{damaged} of {} files are damaged (see above): indexed without the frames that do \
             not decode, whose packets are lost; queries that reach those frames say so",
            results.len()
        )));
    }
    Ok(())
}

fn one(f: &Path, force: bool, done: &AtomicU64) -> FileResult {
    let file_bytes = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
    let mut r = FileResult {
        path: f.to_path_buf(),
        status: "indexed",
        packets: 0,
        index_bytes: 0,
        flows_bytes: 0,
        file_bytes,
        partial: false,
        damaged_frames: 0,
        error: None,
    };
    if !force {
        // Every chunk of the index is decompressed and checked: a query reads only those it needs.
        let ix = index::IndexFile::open(&index::index_path(f), f)
            .and_then(|ix| ix.verify().map(|()| ix));
        // A flow table that is missing, cut, damaged or stale is rebuilt with the index.
        if let (Ok(ix), Ok(_)) = (ix, index::check_flow_table(f)) {
            done.fetch_add(file_bytes, Relaxed);
            r.status = "current";
            r.packets = ix.header.packets;
            r.damaged_frames = u64::from(ix.header.damaged);
            r.index_bytes = ix.len() as u64;
            r.flows_bytes = std::fs::metadata(index::flows_path(f)).map_or(0, |m| m.len());
            return r;
        }
    }
    match index::index_file(f, done) {
        Ok(x) => {
            r.packets = x.packets;
            r.index_bytes = x.index_bytes;
            r.flows_bytes = x.flows_bytes;
            r.partial = x.partial;
            if let Some(d) = x.damaged {
                r.damaged_frames = d.frames;
                r.error = Some(d.to_string());
            }
        }
        Err(e) => {
            r.status = "failed";
            r.error = Some(e);
        }
    }
    r
}
