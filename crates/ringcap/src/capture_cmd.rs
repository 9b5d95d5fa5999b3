//! `ringcap capture`: maps the flags to a capture session (crates/session): sources, sinks, options; prints
//! the listening line, then the stats lines and the summary of `capture_stats`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use capture::{BatchSource, CaptureError, Fanout, Source, SourceConfig};
use session::sinks::{CountSink, LoadSink, PrintSink, RecordSink, WriterSink};
use session::{Options, Session, Sink, Stop};
use store::{CaptureWriter, CompressMode, FilePlan, WriterOptions};

use crate::capture_stats::{StatsPrinter, Summary};
use crate::cli::CaptureArgs;
use crate::Fatal;

pub fn run(a: CaptureArgs) -> Result<(), Fatal> {
    // The link type of the captured frames, as the filter tests them, the files record them and the
    // printer and probe parse them: libpcap's choice for the interface's hardware type.
    let linktype = capture::interface_link_type(&a.interface).map_err(capture_fatal)?;
    let mut cfg = source_config(&a, linktype)?;
    if a.dump_filter {
        let prog = cfg.filter.as_deref().unwrap_or(&[]);
        print!("{}", capture::dump(prog, capture::DumpStyle::Asm));
        return Ok(());
    }
    let user = a.user.as_deref().map(unprivileged_user).transpose()?;
    let stop = Stop::install()
        .map_err(|e| Fatal::runtime(anyhow!("cannot install signal handlers: {e}")))?;
    let sources = Source::open_group(&cfg, a.threads).map_err(capture_fatal)?;
    cfg.filter = None; // the compiled program now lives in the kernel
                       // Nothing after this point needs privileges, and no other thread exists yet (capabilities are per
                       // thread): give them up before files are opened and packets parsed.
    relinquish_privileges(user.as_ref())?;

    let plan = file_plan(&a)?;
    let cutoff = cutoff_config(&a, plan.is_some())?;
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    let mut writer_counters = None;
    if let Some(writer) = match (&plan, &a.write) {
        _ if a.drop_all => None,
        (None, None) => None,
        (plan, path) => Some(open_writer(
            &a,
            plan.as_ref(),
            path.as_deref().unwrap_or(Path::new("-")),
            linktype,
        )?),
    } {
        let mut w = WriterSink::new(writer);
        if let Some(cfg) = cutoff {
            w = w.cutoff(cfg, linktype);
        }
        w.rotate_on_sighup()
            .map_err(|e| Fatal::runtime(anyhow!("cannot install the SIGHUP handler: {e}")))?;
        writer_counters = Some(w.counters());
        sinks.push(Box::new(w));
    } else if a.drop_all || !a.records.is_empty() {
        // --records alone: the records are the output, no packet lines.
        sinks.push(Box::<CountSink>::default());
    } else {
        sinks.push(Box::new(PrintSink::new(linktype, stop.clone())));
    }
    let probe = records_probe(&a)?;
    let probe_line = probe.as_ref().map(|p| records_destinations(&a, p));
    if let Some(p) = probe {
        sinks.push(Box::new(RecordSink::new(p, linktype)));
    }
    if let Some(spec) = a.load {
        sinks.push(Box::new(LoadSink::new(spec, capture::MAX_SNAPLEN as usize)));
    }
    if !a.quiet.on || a.write.is_some() || plan.is_some() || a.drop_all || probe_line.is_some() {
        listening_line(&a, linktype, plan.as_ref(), probe_line.is_some());
        if let Some(line) = &probe_line {
            eprintln!("ringcap: header records to {line}");
        }
    }

    let opts = Options {
        cpus: a.cpus.list.clone(),
        count: a.count,
        duration: a.duration,
        drain_wait: Duration::from_millis(a.block_timeout_ms as u64 + 50),
    };
    let sources = sources
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn BatchSource>)
        .collect();
    let session = Session::new(sources, opts, stop);
    let counters = session.counters();
    let mut printer = StatsPrinter::new(
        a.json.on,
        a.quiet.on || a.stats_interval <= 0.0,
        a.stats_interval,
    );
    let mut report = session
        .run(sinks, || {
            printer.maybe_print(&counters, writer_counters.as_deref())
        })
        .map_err(Fatal::runtime)?;
    Summary::new(&report, a.count, a.drop_all, plan.is_some()).print(a.json.on);
    if !report.sink_errors.is_empty() {
        return Err(Fatal::runtime(report.sink_errors.remove(0)));
    }
    match report.thread_error {
        Some(e) => Err(Fatal::runtime(e)),
        None => Ok(()),
    }
}

fn listening_line(
    a: &CaptureArgs,
    linktype: wire::LinkType,
    plan: Option<&FilePlan>,
    records: bool,
) {
    let what = match (plan, &a.write) {
        (None, None) if records => "sending header records only".to_string(),
        _ if a.drop_all => "counting and dropping every packet (--drop-all)".to_string(),
        (Some(p), _) => format!(
            "writing {} files {}-<UTC start>-<seq>{} in {}{}",
            a.format.name(),
            p.base,
            store::extension(a.format.into(), p.compression),
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
        (None, Some(p)) => format!("writing {} to {}", a.format.name(), p.display()),
        (None, None) => "printing one line per packet".to_string(),
    };
    eprintln!(
        "ringcap: listening on {}, link-type {} ({} source, {} thread{}), {}",
        a.interface,
        linktype.name(),
        a.source.name(),
        a.threads,
        if a.threads == 1 { "" } else { "s" },
        what
    );
}

fn source_config(a: &CaptureArgs, linktype: wire::LinkType) -> Result<SourceConfig, Fatal> {
    if a.threads == 0 {
        return Err(Fatal::usage(anyhow!("--threads must be at least 1")));
    }
    let mut cfg = SourceConfig::new(&a.interface);
    cfg.kind = a.source.into();
    cfg.snaplen = if a.snaplen == 0 {
        capture::MAX_SNAPLEN
    } else {
        a.snaplen.min(capture::MAX_SNAPLEN)
    };
    cfg.promiscuous = !a.no_promisc;
    cfg.set_buffer_kib(a.buffer_kib as usize);
    cfg.ring.block_size = a.block_size as usize;
    cfg.ring.block_timeout = Duration::from_millis(a.block_timeout_ms as u64);
    if a.threads > 1 {
        cfg.fanout = Some(Fanout {
            mode: a.fanout.into(),
            rollover: a.rollover,
            defrag: true,
        });
    }
    let expr = a.filter.join(" ");
    if !expr.trim().is_empty() {
        let prog = capture::compile_filter(&expr, linktype, cfg.snaplen)
            .map_err(|e| Fatal::usage(anyhow!(e)))?;
        cfg.filter = Some(prog);
    }
    Ok(cfg)
}

/// `--cutoff SIZE` (0 or absent: off); it cuts what is written, so it needs a file (`-w` or `--out-dir`).
fn cutoff_config(a: &CaptureArgs, file_mode: bool) -> Result<Option<session::CutoffConfig>, Fatal> {
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

/// The user of `-Z NAME`, checked before anything is opened.
fn unprivileged_user(name: &str) -> Result<sys::User, Fatal> {
    let u = sys::User::lookup(name).map_err(|e| {
        Fatal::usage(anyhow!(
            "-Z {name}: {e} (give an existing user, e.g. -Z nobody)"
        ))
    })?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Err(Fatal::usage(anyhow!(
            "-Z {name} needs ringcap to run as root (it is running as uid {euid})"
        )));
    }
    Ok(u)
}

/// `-Z USER`: become USER, with no capabilities; otherwise keep only what writing files needs
/// (CAP_DAC_OVERRIDE, when held).
fn relinquish_privileges(user: Option<&sys::User>) -> Result<(), Fatal> {
    if let Some(u) = user {
        sys::switch_user(u)
            .map_err(|e| Fatal::runtime(anyhow!("-Z {}: cannot become that user: {e}", u.name)))?;
    }
    let keep: &[u32] = if user.is_some() {
        &[]
    } else {
        &[sys::CAP_DAC_OVERRIDE]
    };
    sys::keep_only_capabilities(keep)
        .map_err(|e| Fatal::runtime(anyhow!("cannot give up capabilities: {e}")))
}

/// Configuration mistakes exit 2, everything else 1.
fn capture_fatal(e: CaptureError) -> Fatal {
    match e {
        CaptureError::NoSuchInterface { .. }
        | CaptureError::InterfaceDown { .. }
        | CaptureError::Filter(_)
        | CaptureError::UnsupportedLinkType { .. }
        | CaptureError::Config(_) => Fatal::usage(anyhow!(e)),
        _ => Fatal::runtime(anyhow!(e)),
    }
}

/// File mode (a series of named files) when rotation, compression, --out-dir or a budget is asked
/// for; plain `-w FILE` keeps tcpdump's meaning (exactly that file).
fn file_plan(a: &CaptureArgs) -> Result<Option<FilePlan>, Fatal> {
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
    plan.compression = a.compress;
    plan.compressors = a.compress_threads;
    plan.max_write_rate = a.max_write_rate.map(|r| (r * 1e6).max(1.0) as u64);
    plan.events = Some(Arc::new(|m: &str| eprintln!("ringcap: {m}")));
    if !a.no_index {
        plan.indexer = Some(Arc::new(|| {
            Box::new(index::LiveIndexer::default()) as Box<dyn store::FileIndexer>
        }));
    }
    Ok(Some(plan))
}

/// The file series of `plan`, or the one file of `-w` (`-` is stdout).
fn open_writer(
    a: &CaptureArgs,
    plan: Option<&FilePlan>,
    path: &Path,
    linktype: wire::LinkType,
) -> Result<CaptureWriter, Fatal> {
    let mut opts = WriterOptions {
        format: a.format.into(),
        snaplen: if a.snaplen == 0 {
            store::MAX_SNAPLEN
        } else {
            a.snaplen.min(store::MAX_SNAPLEN)
        },
        linktype: linktype.pcap(),
        if_name: a.interface.clone(),
        direct_io: a.direct_io,
        ..WriterOptions::default()
    };
    let writer = match plan {
        Some(plan) => {
            if plan.compression != CompressMode::None {
                // One 1 MiB buffer = one compressed frame; 32 of them absorb about 0.3 s at 100 MB/s.
                opts.buffer_size = 1 << 20;
                opts.buffers = 32;
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

/// Starts the header-record probe for `--records` (None without it). Bad destinations or keys are usage
/// errors; collectors that cannot be reached yet are retried by the sender, not errors.
fn records_probe(a: &CaptureArgs) -> Result<Option<records::probe::Probe>, Fatal> {
    use records::probe::{Dest, Probe, ProbeConfig, Stripe};
    if a.records.is_empty() {
        return Ok(None);
    }
    let dests = a
        .records
        .iter()
        .map(|d| Dest::parse(d.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Fatal::usage)?;
    let key_path = a.key.as_ref().ok_or_else(|| {
        Fatal::usage(anyhow!(
            "--records needs --key FILE (the collectors' shared key)"
        ))
    })?;
    let key = records::batch::Key::load(key_path).map_err(Fatal::usage)?;
    let stripe: Stripe = a.stripe.parse().map_err(Fatal::usage)?;
    let mut cfg = ProbeConfig::new(dests, key);
    cfg.stripe = stripe;
    cfg.probe_id = a
        .probe_id
        .unwrap_or_else(|| records::probe::default_probe_id(&a.interface));
    cfg.flush = Duration::from_millis(a.records_flush.max(1));
    cfg.ack_timeout = Duration::from_millis(a.ack_timeout_ms.max(1));
    Probe::start(cfg).map(Some).map_err(Fatal::usage)
}

fn records_destinations(a: &CaptureArgs, p: &records::probe::Probe) -> String {
    let dests: Vec<String> = a
        .records
        .iter()
        .zip(p.capacities())
        .map(|(d, cap)| format!("{} ({} B batches)", d.trim(), cap))
        .collect();
    format!("{}, stripe {}", dests.join(", "), a.stripe)
}
