//! `ringcap capture`: maps the flags to a capture session (crates/session): sources, sinks, options; prints
//! the listening line, then the stats lines and the summary of `capture_stats`.

use std::path::Path;
use std::time::Duration;

use anyhow::anyhow;
use capture::{BatchSource, CaptureError, Source};
use session::sinks::{CountSink, LoadSink, PrintSink, RecordSink, WriterSink};
use session::{Options, Session, Sink, Stop};

pub(crate) mod archiver;
mod interfaces;
mod output;
mod probe;
mod reload;
mod source;
mod xdp_count;

use output::{cutoff_config, decap_config, file_plan, listening_line, open_writer};
use probe::{records_destinations, records_probe};
use source::{list_time_stamp_types, merge_config, source_config};

use crate::capture_stats::{StatsPrinter, Summary, XdpSummary};
use crate::cli::CaptureArgs;
use crate::privileges::{relinquish_privileges, share_files_with_group, unprivileged_user};
use crate::xdp_metrics::XdpMetrics;
use crate::{metrics, Fatal};

pub fn run(a: CaptureArgs) -> Result<(), Fatal> {
    let ifaces = interfaces::resolve(&a.interface).map_err(capture_fatal)?;
    if a.list_time_stamp_types {
        for name in &ifaces {
            list_time_stamp_types(name)?;
        }
        return Ok(());
    }
    // The link type of the captured frames, as the filter tests them, the files record them and the
    // printer and probe parse them: libpcap's choice for the interface's hardware type.
    let linktype = interfaces::common_link_type(&ifaces).map_err(capture_fatal)?;
    let mut cfg = source_config(&a, linktype)?;
    let merged = ifaces.len() > 1;
    if merged && cfg.kind == capture::SourceKind::Xdp {
        return Err(Fatal::usage(anyhow!(
            "several interfaces need --source ring (or copy): --source xdp takes one interface"
        )));
    }
    // Several interfaces in one pcap (or on the terminal): Linux SLL2 records say each packet's interface;
    // pcapng says it with the interface id of each packet block and keeps the frames as captured.
    let sll2 = merged && a.file_format() != crate::cli::OutputFormat::Pcapng;
    let out_linktype = if sll2 {
        wire::LinkType::LinuxSll2
    } else {
        linktype
    };
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
        return xdp_count::run(&a, cfg.xdp_mode, stop, metrics_listener);
    }
    // Each interface its own socket(s), --threads each (one fanout group per interface).
    let mut sources = Vec::new();
    let mut interface_of = Vec::new();
    for (i, name) in ifaces.iter().enumerate() {
        cfg.interface = name.clone();
        let group = Source::open_group(&cfg, a.threads).map_err(capture_fatal)?;
        interface_of.extend(std::iter::repeat_n(i as u32, group.len()));
        sources.extend(group);
    }
    if let Some(program) = sources.first().and_then(|s| s.xdp_program()) {
        match program.prefilter() {
            Some(p) => {
                log::info!("XDP prefilter on: {p}; frames that cannot match stay with the stack")
            }
            None if cfg.filter.is_some() => {
                log::info!("XDP prefilter off: the filter runs in user space on every frame")
            }
            None => {}
        }
    }
    // The compiled program now lives in the kernel (or in the xdp sources).
    cfg.filter = None;
    // Nothing after this point needs privileges, and no other thread exists yet (capabilities are per
    // thread): give them up before files are opened and packets parsed.
    relinquish_privileges(user.as_ref(), &[sys::CAP_DAC_OVERRIDE])?;

    let mut plan = file_plan(&a)?;
    if let Some(p) = plan.as_mut() {
        // Each file the capture completes gets its coverage record, with the drops counted
        // while it was open.
        p.coverage = Some(session::drop_meter(
            sources.iter().map(|s| s.counters()).collect(),
        ));
    }
    let cutoff = cutoff_config(&a, plan.is_some())?;
    let decap = decap_config(&a, plan.is_some(), out_linktype)?;
    // Before the writer: its retention must see the archive's manifest from the first file on.
    let archiving = archiver::start(&a.archive, plan.as_ref(), !a.no_index)?;
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    let mut writer_counters = None;
    let mut written_per_interface = None;
    if let Some(writer) = match (&plan, &a.write) {
        _ if a.drop_all => None,
        (None, None) => None,
        (plan, path) => Some(open_writer(
            &a,
            plan.as_ref(),
            path.as_deref().unwrap_or(Path::new("-")),
            out_linktype,
            &ifaces,
        )?),
    } {
        let mut w = WriterSink::new(writer);
        if merged {
            w = w.interfaces(ifaces.len());
        }
        if let Some(cfg) = cutoff {
            w = w.cutoff(cfg, out_linktype);
        }
        if let Some(cfg) = decap {
            w = w.decap(cfg);
        }
        w.rotate_on_sighup()
            .map_err(|e| Fatal::runtime(anyhow!("cannot install the SIGHUP handler: {e}")))?;
        writer_counters = Some(w.counters());
        written_per_interface = w.written_per_interface();
        sinks.push(Box::new(w));
    } else if a.drop_all || !a.records.is_empty() {
        // --records alone: the records are the output, no packet lines.
        sinks.push(Box::<CountSink>::default());
    } else {
        sinks.push(Box::new(PrintSink::new(out_linktype, stop.clone())));
    }
    let probe = records_probe(&a)?;
    let probe_line = probe.as_ref().map(|p| records_destinations(&a, p));
    let probe_stats = probe.as_ref().map(|p| p.stats_handle());
    if let Some(p) = probe {
        sinks.push(Box::new(RecordSink::new(p, out_linktype)));
    }
    if let Some(spec) = a.load {
        sinks.push(Box::new(LoadSink::new(spec, capture::MAX_SNAPLEN as usize)));
    }
    if !a.quiet.on || a.write.is_some() || plan.is_some() || a.drop_all || probe_line.is_some() {
        listening_line(
            &a,
            &ifaces,
            out_linktype,
            plan.as_ref(),
            probe_line.is_some(),
        );
        if let Some(line) = &probe_line {
            log::info!("header records to {line}");
        }
    }

    let opts = Options {
        cpus: a.cpus.list.clone(),
        count: a.count,
        duration: a.duration,
        drain_wait: Duration::from_millis(a.block_timeout_ms as u64 + 50),
        merge: merged
            .then(|| merge_config(&ifaces, interface_of, a.block_timeout_ms, sll2))
            .transpose()?,
    };
    let xdp = sources
        .first()
        .and_then(|s| s.xdp_program())
        .map(|p| (p, sources.len(), sources.iter().all(|s| s.is_zero_copy())));
    let sources = sources
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn BatchSource>)
        .collect();
    let opts_interfaces = opts.merge.as_ref().map(|m| m.interface_of.clone());
    let metric_interface_of = opts_interfaces.clone().unwrap_or_default();
    let session = Session::new(sources, opts, stop);
    let counters = session.counters();
    if let Some(listener) = metrics_listener {
        let sources = metrics::MetricSources {
            archive: archiving.as_ref().map(archiver::Archiving::status),
            interfaces: ifaces.clone(),
            interface_of: metric_interface_of.clone(),
            capture: counters.clone(),
            writer: writer_counters.clone(),
            records: probe_stats,
            dirs: plan.as_ref().map(|p| p.dirs.clone()).unwrap_or_default(),
            xdp: xdp
                .as_ref()
                .map(|(program, _, _)| XdpMetrics::new(program, false)),
        };
        metrics::serve(listener, sources)
            .map_err(|e| Fatal::runtime(anyhow!("cannot start the metrics thread: {e}")))?;
    }
    let mut printer = StatsPrinter::new(
        json_lines(&a),
        a.quiet.on || a.stats_interval <= 0.0,
        a.stats_interval,
    );
    if let Some(m) = &opts_interfaces {
        printer = printer.interfaces(ifaces.clone(), m.clone(), written_per_interface.clone());
    }
    let reloadable = reload::Reloadable {
        retention: plan.as_ref().and_then(|p| p.live_retention.clone()),
        stats: printer.live(),
    };
    reload::spawn(&a, reloadable)
        .map_err(|e| Fatal::runtime(anyhow!("cannot watch for SIGHUP to reload --config: {e}")))?;
    let mut report = session
        .run(sinks, || {
            printer.maybe_print(&counters, writer_counters.as_deref())
        })
        .map_err(Fatal::runtime)?;
    // Every file is complete and indexed now: the archive's last pass.
    let archived = archiving.map(archiver::Archiving::finish);
    let mut summary = Summary::new(&report, a.count, a.drop_all, plan.is_some())
        .interfaces(if merged { ifaces.clone() } else { Vec::new() })
        .timestamps(
            a.time_stamp_type.into(),
            a.source == crate::cli::SourceKind::Ring,
        );
    if let Some((program, queues, zero_copy)) = xdp {
        summary = summary.xdp(XdpSummary {
            mode: program.mode().name(),
            zero_copy,
            queues,
            seen: program.seen().ok().map(|s| s.packets),
            prefilter: program
                .prefilter()
                .map(|p| (p.to_string(), program.left_to_stack().ok())),
            // One source per queue, opened queue 0 upwards.
            per_queue: counters
                .iter()
                .map(|c| (c.snapshot().packets, c.kernel_stats()))
                .collect(),
        });
    }
    if let Some(r) = &archived {
        summary = summary.archive(r.json(), r.line());
    }
    summary.print(json_lines(&a));
    if !report.sink_errors.is_empty() {
        return Err(Fatal::runtime(report.sink_errors.remove(0)));
    }
    match report.thread_error {
        Some(e) => Err(Fatal::runtime(e)),
        None => Ok(()),
    }
}

/// Stats and summary as JSON objects: asked for (--json), or every stderr line is one (--log-format json).
fn json_lines(a: &CaptureArgs) -> bool {
    a.json.on || crate::logging::json()
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
