//! What the output flags become: `-w`, `-C`/`-G`/`-W`, `--compress`, `--out-dir`, `--disk-budget` (a file
//! plan for the writer) and `--cutoff`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use store::{CaptureWriter, CompressMode, FilePlan, WriterOptions};

use crate::cli::CaptureArgs;
use crate::Fatal;

/// `--cutoff SIZE` (0 or absent: off); it cuts what is written, so it needs a file (`-w` or `--out-dir`).
pub fn cutoff_config(
    a: &CaptureArgs,
    file_mode: bool,
) -> Result<Option<session::CutoffConfig>, Fatal> {
    let Some(size) = a.cutoff.filter(|&s| s > 0) else {
        return Ok(None);
    };
    if a.drop_all || (a.write.is_none() && !file_mode) {
        return Err(Fatal::usage(anyhow!(
            "--cutoff limits what is written to the capture file: it needs -w FILE (or --out-dir DIR)"
        )));
    }
    if a.cutoff_flows == 0 {
        return Err(Fatal::usage(anyhow!("--cutoff-flows must be at least 1")));
    }
    Ok(Some(session::CutoffConfig {
        size,
        flows: a.cutoff_flows,
    }))
}

/// `--decap KINDS`: it rewrites what is written, so it needs a file, pcapng (the comment that names
/// each packet's tunnel) and Ethernet frames (what the tunnels carry is written in their place).
pub fn decap_config(
    a: &CaptureArgs,
    file_mode: bool,
    linktype: wire::LinkType,
) -> Result<Option<session::DecapConfig>, Fatal> {
    let Some(cfg) = a.decap else {
        return Ok(None);
    };
    if a.drop_all || (a.write.is_none() && !file_mode) {
        return Err(Fatal::usage(anyhow!(
            "--decap rewrites what is written to the capture file: it needs -w FILE (or --out-dir DIR)"
        )));
    }
    if a.file_format() != crate::cli::OutputFormat::Pcapng {
        return Err(Fatal::usage(anyhow!(
            "--decap {cfg} needs -F pcapng: each decapsulated packet keeps its tunnel (kind, VNI or \
             key, carrier addresses) in its packet block's comment, which pcap has no place for"
        )));
    }
    if linktype != wire::LinkType::Ethernet {
        return Err(Fatal::usage(anyhow!(
            "--decap {cfg} writes the Ethernet frames the tunnels carry among the frames of the \
             interface, which must then be Ethernet too (link type {}: {})",
            linktype.pcap(),
            linktype.name()
        )));
    }
    Ok(Some(cfg))
}

/// File mode (a series of named files) when rotation, compression, --out-dir or a budget is asked
/// for; plain `-w FILE` keeps tcpdump's meaning (exactly that file).
pub fn file_plan(a: &CaptureArgs) -> Result<Option<FilePlan>, Fatal> {
    let wanted = a.file_size.is_some()
        || a.rotate_seconds.is_some()
        || a.file_count.is_some()
        || a.compress != CompressMode::None
        || !a.out_dirs.is_empty()
        || a.disk_budget.is_some();
    if !wanted || a.drop_all {
        return Ok(None);
    }
    if a.write.as_deref() == Some(Path::new("-")) {
        return Err(Fatal::usage(anyhow!(
            "-C/-G/-W/--compress/--out-dir/--disk-budget write files, not stdout: give -w a base name \
             (e.g. -w /data/cap), or pipe `-w -` into zstd yourself"
        )));
    }
    if a.write.is_none() && a.out_dirs.is_empty() {
        return Err(Fatal::usage(anyhow!(
            "-C/-G/-W/--compress/--disk-budget need -w BASE (e.g. -w /data/cap) or --out-dir DIR"
        )));
    }
    if a.rotate_seconds == Some(0) || a.file_count == Some(0) {
        return Err(Fatal::usage(anyhow!("-G and -W must be at least 1")));
    }
    if a.compress_threads == 0 {
        return Err(Fatal::usage(anyhow!(
            "--compress-threads must be at least 1"
        )));
    }
    // -w /data/cap.pcap → base "cap" in /data; --out-dir overrides the directory.
    let (dir, base) = match &a.write {
        Some(w) => {
            let name = w.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
                Fatal::usage(anyhow!("-w {}: not a usable file name", w.display()))
            })?;
            let mut base = name;
            for ext in [".zst", ".lz4", ".pcapng", ".pcap"] {
                base = base.strip_suffix(ext).unwrap_or(base);
            }
            let dir = w
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            (dir, base.to_string())
        }
        None => (PathBuf::from("."), "ringcap".to_string()),
    };
    let dirs = if a.out_dirs.is_empty() {
        vec![dir]
    } else {
        a.out_dirs.clone()
    };
    let mut plan = FilePlan::new(dirs[0].clone(), &base);
    plan.dirs = dirs;
    plan.rotate_bytes = a.file_size;
    plan.rotate_secs = a.rotate_seconds;
    plan.max_files = a.file_count;
    plan.budget = a.disk_budget;
    plan.keep_newest = a.keep_newest;
    // A reload (SIGHUP with --config) changes these two while the capture runs.
    plan.live_retention = Some(store::LiveRetention::new(store::RetentionRules {
        budget: a.disk_budget,
        keep_newest: a.keep_newest,
    }));
    plan.compression = a.compress;
    plan.compressors = a.compress_threads;
    // Indexed files get smaller frames so a narrow query decompresses less (BENCHMARKS.md, issue 11).
    plan.frame_size = a.frame_size.map_or(
        if a.no_index {
            store::DEFAULT_FRAME_SIZE
        } else {
            store::INDEXED_FRAME_SIZE
        },
        |n| n as usize,
    );
    plan.max_write_rate = a.max_write_rate.map(|r| (r * 1e6).max(1.0) as u64);
    plan.events = Some(Arc::new(|m: &str| log::warn!("{m}")));
    if !a.no_index {
        plan.indexer = Some(Arc::new(|| {
            Box::new(index::LiveIndexer::default()) as Box<dyn store::FileIndexer>
        }));
    }
    Ok(Some(plan))
}

/// What the pcapng interface block says of the stamps, e.g. "timestamps: host (kernel software)".
pub fn timestamps_description(t: capture::TimestampType) -> String {
    format!("timestamps: {} ({})", t.name(), t.source())
}

/// The file series of `plan`, or the one file of `-w` (`-` is stdout).
pub fn open_writer(
    a: &CaptureArgs,
    plan: Option<&FilePlan>,
    path: &Path,
    linktype: wire::LinkType,
    ifaces: &[String],
) -> Result<CaptureWriter, Fatal> {
    let mut opts = WriterOptions {
        format: a.file_format().into(),
        tsresol: a.tsresol(),
        if_description: match a.decap {
            // Wireshark shows it with the interface: say where the tunnels went.
            Some(d) => format!(
                "{}; --decap {d}: tunnelled packets written as the frame they carry, the tunnel in \
                 each one's comment",
                timestamps_description(a.time_stamp_type.into())
            ),
            None => timestamps_description(a.time_stamp_type.into()),
        },
        snaplen: if *a.snaplen == 0 {
            store::MAX_SNAPLEN
        } else {
            a.snaplen.min(store::MAX_SNAPLEN)
        },
        linktype: linktype.pcap(),
        if_names: ifaces.to_vec(),
        direct_io: a.direct_io,
        ..WriterOptions::default()
    };
    let writer = match plan {
        Some(plan) => {
            if plan.compression != CompressMode::None {
                // 1 MiB buffers (one or more compressed frames each; a frame never spans two): 32 of
                // them absorb about 0.3 s at 100 MB/s. A larger --frame-size gets buffers that size.
                opts.buffer_size = plan.frame_size.max(1 << 20);
                opts.buffers = 32;
            } else if let Some(n) = plan.rotate_bytes.filter(|&n| n < opts.buffer_size as u64) {
                // A file ends a buffer: with files smaller than a buffer, the pool held a file per
                // buffer (4 MB with `-C 1`), and a writer held up for 0.2 s dropped packets in the
                // test suite. Buffers of about a file keep the pool's bytes.
                let pool = opts.buffer_size * opts.buffers;
                opts.buffer_size = (n as usize).next_multiple_of(4096).max(1 << 20);
                opts.buffers = (pool / opts.buffer_size).max(opts.buffers);
            }
            CaptureWriter::create_files(plan.clone(), opts)
        }
        None => CaptureWriter::create(path, opts),
    };
    // A bad option is a usage error (2); a directory that is missing or not writable is an I/O failure at
    // run time (1), as tcpdump exits for `-w /nonexistent/x`.
    writer.map_err(|e| match e {
        store::StoreError::Config(_) => Fatal::usage(anyhow!(e)),
        _ => Fatal::runtime(anyhow!(e)),
    })
}

/// The line saying what the capture listens on and where its packets go.
pub(super) fn listening_line(
    a: &CaptureArgs,
    ifaces: &[String],
    linktype: wire::LinkType,
    plan: Option<&FilePlan>,
    records: bool,
) {
    let what = match (plan, &a.write) {
        (None, None) if records => "sending header records only".to_string(),
        _ if a.drop_all => "counting and dropping every packet (--drop-all)".to_string(),
        (Some(p), _) => format!(
            "writing {} files {}-<UTC start>-<seq>{} in {}{}",
            a.file_format().name(),
            p.base,
            store::extension(a.file_format().into(), p.compression),
            p.dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if p.compression == CompressMode::None {
                String::new()
            } else {
                format!(" (compress {})", p.compression)
            }
        ),
        (None, Some(p)) => format!("writing {} to {}", a.file_format().name(), p.display()),
        (None, None) => "printing one line per packet".to_string(),
    };
    log::info!(
        "listening on {}, link-type {} ({} source, {} thread{}{}), {}",
        ifaces.join(", "),
        linktype.name(),
        a.source.name(),
        a.threads,
        if a.threads == 1 { "" } else { "s" },
        if ifaces.len() > 1 {
            " per interface, merged by time"
        } else {
            ""
        },
        what
    );
}
