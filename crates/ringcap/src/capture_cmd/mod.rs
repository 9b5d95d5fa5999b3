//! `ringcap capture`: maps the flags to a capture session (crates/session): sources, sinks, options; prints
//! the listening line, then the stats lines and the summary of `capture_stats`.

use std::path::Path;
use std::time::Duration;

use anyhow::anyhow;
use capture::{BatchSource, CaptureError, Fanout, Source, SourceConfig};
use session::sinks::{CountSink, LoadSink, PrintSink, RecordSink, WriterSink};
use session::{Options, Session, Sink, Stop};
use store::{CompressMode, FilePlan};

mod output;
mod probe;
mod xdp_count;

use output::{cutoff_config, file_plan, open_writer};
use probe::{records_destinations, records_probe};

use crate::capture_stats::{StatsPrinter, Summary, XdpSummary};
use crate::cli::CaptureArgs;
use crate::privileges::{relinquish_privileges, share_files_with_group, unprivileged_user};
use crate::{metrics, Fatal};

pub fn run(a: CaptureArgs) -> Result<(), Fatal> {
    if a.list_time_stamp_types {
        return list_time_stamp_types(&a.interface);
    }
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
    if let Some(g) = &a.group {
        share_files_with_group(g, user.as_ref())?;
    }
    let metrics_listener = a
        .metrics
        .as_deref()
        .map(|addr| {
            metrics::bind(addr).map_err(|e| {
                Fatal::usage(anyhow!(
                    "--metrics {addr}: cannot listen there: {e} (give a free HOST:PORT, e.g. 127.0.0.1:9100)"
                ))
            })
        })
        .transpose()?;
    let stop = Stop::install()
        .map_err(|e| Fatal::runtime(anyhow!("cannot install signal handlers: {e}")))?;
    if a.drop_all && cfg.kind == capture::SourceKind::Xdp {
        return xdp_count::run(&a, cfg.xdp_mode, stop);
    }
    let sources = Source::open_group(&cfg, a.threads).map_err(capture_fatal)?;
    cfg.filter = None; // the compiled program now lives in the kernel
                       // Nothing after this point needs privileges, and no other thread exists yet (capabilities are per
                       // thread): give them up before files are opened and packets parsed.
    relinquish_privileges(user.as_ref(), &[sys::CAP_DAC_OVERRIDE])?;

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
    let probe_stats = probe.as_ref().map(|p| p.stats_handle());
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
    let xdp = sources
        .first()
        .and_then(|s| s.xdp_program())
        .map(|p| (p, sources.len(), sources.iter().all(|s| s.is_zero_copy())));
    let sources = sources
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn BatchSource>)
        .collect();
    let session = Session::new(sources, opts, stop);
    let counters = session.counters();
    if let Some(listener) = metrics_listener {
        let sources = metrics::MetricSources {
            interface: a.interface.clone(),
            capture: counters.clone(),
            writer: writer_counters.clone(),
            records: probe_stats,
            dirs: plan.as_ref().map(|p| p.dirs.clone()).unwrap_or_default(),
        };
        let addr = listener
            .local_addr()
            .map_err(|e| Fatal::runtime(anyhow!(e)))?;
        metrics::serve(listener, sources)
            .map_err(|e| Fatal::runtime(anyhow!("cannot start the metrics thread: {e}")))?;
        eprintln!("ringcap: metrics on http://{addr}/metrics");
    }
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
    let mut summary = Summary::new(&report, a.count, a.drop_all, plan.is_some()).timestamps(
        a.time_stamp_type.into(),
        a.source == crate::cli::SourceKind::Ring,
    );
    if let Some((program, queues, zero_copy)) = xdp {
        summary = summary.xdp(XdpSummary {
            mode: program.mode().name(),
            zero_copy,
            queues,
            seen: program.seen().ok().map(|s| s.packets),
        });
    }
    summary.print(a.json.on);
    if !report.sink_errors.is_empty() {
        return Err(Fatal::runtime(report.sink_errors.remove(0)));
    }
    match report.thread_error {
        Some(e) => Err(Fatal::runtime(e)),
        None => Ok(()),
    }
}

/// `-J`: tcpdump's listing, on stdout, of the types libpcap would offer for the interface.
fn list_time_stamp_types(interface: &str) -> Result<(), Fatal> {
    let types = capture::supported_timestamp_types(interface).map_err(capture_fatal)?;
    println!("Time stamp types for {interface} (use option -j to set):");
    for t in types {
        println!("  {} ({})", t.name(), t.description());
    }
    Ok(())
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
    cfg.timestamps = a.time_stamp_type.into();
    cfg.set_buffer_kib(a.buffer_kib as usize);
    cfg.ring.block_size = a.block_size as usize;
    cfg.ring.block_timeout = Duration::from_millis(a.block_timeout_ms as u64);
    if a.source == crate::cli::SourceKind::Xdp {
        cfg.xdp_mode = match a.xdp_mode {
            crate::cli::XdpMode::Native => capture::XdpMode::Native,
            crate::cli::XdpMode::Generic => capture::XdpMode::Generic,
        };
        cfg.xsk.bind = match a.xdp_bind {
            crate::cli::XdpBind::Auto => capture::XdpBind::Auto,
            crate::cli::XdpBind::Copy => capture::XdpBind::Copy,
            crate::cli::XdpBind::Zerocopy => capture::XdpBind::ZeroCopy,
        };
        cfg.xsk.need_wakeup = a.xdp_need_wakeup;
        // The UMEM gets -B, as the ring would: same buffer for every source.
        let frames =
            (a.buffer_kib * 1024 / u64::from(cfg.xsk.frame_size)).clamp(64, 1 << 20) as u32;
        let ring = match a.xdp_ring {
            Some(r) => r,
            None => (1u32 << (31 - frames.leading_zeros())).min(65536),
        };
        cfg.xsk.ring_size = ring;
        cfg.xsk.frames = frames.max(ring);
    } else if a.threads > 1 {
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

/// Configuration mistakes exit 2, everything else 1.
pub(crate) fn capture_fatal(e: CaptureError) -> Fatal {
    match e {
        CaptureError::NoSuchInterface { .. }
        | CaptureError::InterfaceDown { .. }
        | CaptureError::Filter(_)
        | CaptureError::UnsupportedLinkType { .. }
        | CaptureError::TimestampTypeUnsupported { .. }
        | CaptureError::Config(_) => Fatal::usage(anyhow!(e)),
        _ => Fatal::runtime(anyhow!(e)),
    }
}
