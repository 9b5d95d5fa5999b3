//! `ringcap capture`: sources (capture crate) → one sink (store writer or terminal lines), a stats line per
//! interval on stderr, and tcpdump's summary plus ringcap's per-stage lines at the end.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use capture::{CaptureError, Counters, Fanout, Source, SourceConfig};
use store::{
    CaptureWriter, CompressMode, FilePlan, Format, IfStats, Level, WriterCounters, WriterOptions,
    WriterStats,
};

use crate::cli::{self, CaptureArgs};
use crate::load::{Load, LoadSpec};
use crate::stop::StopFlags;
use crate::units;
use crate::Fatal;

/// How long one wait for packets may take: bounds the reaction time to signals and -c/--duration.
const POLL: Duration = Duration::from_millis(100);
/// The longest a stopped capture keeps draining packets that had already arrived.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Where captured packets go.
enum Sink {
    /// One `tcpdump -n` style line per packet on stdout.
    Print,
    /// A pcap/pcapng file or stdout, or a series of files; shared by all capture threads, locked
    /// once per batch.
    File(Arc<Mutex<CaptureWriter>>),
    /// `--drop-all`: count and drop (the source's counters are the result).
    Count,
}

pub fn run(a: CaptureArgs) -> Result<(), Fatal> {
    let mut cfg = source_config(&a)?;
    if a.dump_filter {
        let prog = cfg.filter.as_deref().unwrap_or(&[]);
        print!("{}", capture::dump(prog, capture::DumpStyle::Asm));
        return Ok(());
    }
    let stop = StopFlags::install()
        .map_err(|e| Fatal::runtime(anyhow!("cannot install signal handlers: {e}")))?;

    let sources = Source::open_group(&cfg, a.threads).map_err(capture_fatal)?;
    cfg.filter = None; // compiled program now lives in the kernel
    let counters: Vec<Arc<Counters>> = sources.iter().map(|s| s.counters()).collect();

    let plan = file_plan(&a)?;
    let sink = if a.drop_all {
        Sink::Count
    } else if let Some(plan) = &plan {
        Sink::File(Arc::new(Mutex::new(open_files(plan.clone(), &a)?)))
    } else {
        match &a.write {
            // --records alone: the records are the output, no packet lines.
            None if !a.records.is_empty() => Sink::Count,
            None => Sink::Print,
            Some(path) => Sink::File(Arc::new(Mutex::new(open_writer(path, &a)?))),
        }
    };
    let writer_counters = match &sink {
        Sink::File(w) => Some(w.lock().unwrap_or_else(|p| p.into_inner()).counters()),
        Sink::Print | Sink::Count => None,
    };
    let probe = records_probe(&a)?;
    // SIGHUP: start a new file (file mode), as with logs.
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&hup))
        .map_err(|e| Fatal::runtime(anyhow!("cannot install the SIGHUP handler: {e}")))?;
    if !a.quiet || a.write.is_some() || plan.is_some() || a.drop_all || probe.is_some() {
        let what = match (&plan, &a.write) {
            (None, None) if probe.is_some() => "sending header records only".to_string(),
            _ if a.drop_all => "counting and dropping every packet (--drop-all)".to_string(),
            (Some(p), _) => format!(
                "writing {} files {}-<UTC start>-<seq>{} in {}{}",
                format_name(a.format),
                p.base,
                store::extension(store_format(a.format), p.compression),
                p.dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                if p.compression == CompressMode::None {
                    String::new()
                } else {
                    format!(" (compress {})", compress_name(p.compression))
                }
            ),
            (None, Some(p)) => format!("writing {} to {}", format_name(a.format), p.display()),
            (None, None) => "printing one line per packet".to_string(),
        };
        eprintln!(
            "ringcap: listening on {} ({} source, {} thread{}), {}",
            a.interface,
            match a.source {
                cli::SourceKind::Ring => "ring",
                cli::SourceKind::Copy => "copy",
            },
            a.threads,
            if a.threads == 1 { "" } else { "s" },
            what
        );
        if let Some(p) = &probe {
            eprintln!("ringcap: header records to {}", records_destinations(&a, p));
        }
    }

    let started = Instant::now();
    let start_ns = sys::now_ns();
    let taken = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for (i, src) in sources.into_iter().enumerate() {
        let cpu = (!a.cpus.is_empty()).then(|| a.cpus[i % a.cpus.len()]);
        let ctx = ThreadCtx {
            stop: stop.clone(),
            taken: Arc::clone(&taken),
            limit: a.count,
            sink: match &sink {
                Sink::Print => Sink::Print,
                Sink::Count => Sink::Count,
                Sink::File(w) => Sink::File(Arc::clone(w)),
            },
            hup: Arc::clone(&hup),
            load: a.load,
            records: probe.as_ref().map(|p| p.batcher()),
            drain_wait: Duration::from_millis(a.block_timeout_ms as u64 + 50),
        };
        let h = std::thread::Builder::new()
            .name(format!("ringcap-cap{i}"))
            .spawn(move || {
                if let Some(cpu) = cpu {
                    sys::pin_thread(cpu)
                        .map_err(|e| anyhow!("cannot pin capture thread to CPU {cpu}: {e}"))?;
                }
                capture_loop(src, ctx)
            })
            .map_err(|e| Fatal::runtime(anyhow!("cannot start a capture thread: {e}")))?;
        handles.push(h);
    }

    // Stats until every thread has ended (stop flag, -c, --duration or an error).
    let mut printer =
        StatsPrinter::new(a.json, a.quiet || a.stats_interval <= 0.0, a.stats_interval);
    while handles.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if a.duration.is_some_and(|d| started.elapsed() >= d) {
            stop.request_stop();
        }
        if let Some(wc) = &writer_counters {
            if wc.snapshot().failed {
                stop.request_stop();
            }
        }
        printer.maybe_print(&counters, writer_counters.as_deref());
    }
    let mut thread_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => thread_error = Some(e),
            Err(_) => thread_error = Some(anyhow!("a capture thread panicked")),
        }
    }

    // All sources are dropped: their kernel counters are final.
    let kernel = counters
        .iter()
        .fold(capture::KernelStats::default(), |mut k, c| {
            k.add(&c.kernel_stats());
            k
        });
    let snaps: Vec<_> = counters.iter().map(|c| c.snapshot()).collect();
    let delivered: u64 = snaps.iter().map(|s| s.packets).sum();
    let mut write_error = None;
    let writer_stats = match sink {
        Sink::File(w) => {
            let w = Arc::try_unwrap(w)
                .map_err(|_| {
                    Fatal::runtime(anyhow!("internal: writer still shared after threads ended"))
                })?
                .into_inner()
                .unwrap_or_else(|p| p.into_inner());
            let if_stats = IfStats {
                ifrecv: Some(kernel.packets),
                ifdrop: Some(kernel.drops),
                filter_accept: Some(kernel.packets),
                os_drop: Some(kernel.drops),
                usr_deliv: Some(delivered),
                start_ns: Some(start_ns),
                end_ns: Some(sys::now_ns()),
            };
            let counters = w.counters();
            match w.finish(Some(if_stats)) {
                Ok(s) => Some(s),
                Err(e) => {
                    write_error = Some(e);
                    Some(counters.snapshot())
                }
            }
        }
        Sink::Print | Sink::Count => {
            let _ = std::io::stdout().flush();
            None
        }
    };
    // Every batcher has finished with its thread: the sender sends the rest and waits for acks.
    let records = probe.map(|p| p.finish());
    let levels = writer_counters
        .as_ref()
        .map(|c| c.level_histogram())
        .unwrap_or_default();

    let summary = Summary {
        elapsed: started.elapsed(),
        kernel,
        delivered,
        // Printed lines: what the source delivered, cut at -c.
        captured: writer_stats.map_or(a.count.map_or(delivered, |l| delivered.min(l)), |s| {
            s.packets
        }),
        storage_drops: writer_stats.map_or(0, |s| s.storage_drops),
        wire_bytes: snaps.iter().map(|s| s.wire_bytes).sum(),
        blocks: snaps.iter().map(|s| s.batches).sum(),
        blocks_timed_out: snaps.iter().map(|s| s.blocks_timed_out).sum(),
        blocks_losing: snaps.iter().map(|s| s.blocks_losing).sum(),
        bytes_written: writer_stats.map(|s| s.bytes_written),
        direct_io: writer_stats.is_some_and(|s| s.direct_io),
        writer: writer_stats.filter(|_| plan.is_some()),
        levels,
        drop_all: a.drop_all,
        records,
    };
    summary.print(a.json);

    if let Some(e) = write_error {
        return Err(Fatal::runtime(anyhow!(e)));
    }
    if let Some(e) = thread_error {
        return Err(Fatal::runtime(e));
    }
    Ok(())
}

struct ThreadCtx {
    stop: StopFlags,
    taken: Arc<AtomicU64>,
    limit: Option<u64>,
    sink: Sink,
    hup: Arc<AtomicBool>,
    /// `--load`: work per packet; each thread makes its own buffers.
    load: Option<LoadSpec>,
    /// How long a draining thread waits for the kernel to hand over a partly filled block.
    drain_wait: Duration,
    /// `--records`: this thread's batcher (header records straight from the ring slots).
    records: Option<records::probe::Batcher>,
}

fn capture_loop(mut src: Source, mut ctx: ThreadCtx) -> anyhow::Result<()> {
    let mut rec = ctx.records.take();
    let mut line = String::with_capacity(256);
    let stdout = std::io::stdout();
    let mut flush_at = Instant::now() + Duration::from_millis(200);
    let mut load = ctx
        .load
        .map(|l| Load::new(l, capture::MAX_SNAPLEN as usize))
        .transpose()?;
    // After a stop (signal, --duration) keep reading what the kernel already delivered, until a wait of
    // one block timeout brings nothing or DRAIN_LIMIT has passed: SIGINT must not lose packets that had
    // arrived. (tcpdump leaves them in its buffer, uncounted.)
    let mut drain_until: Option<Instant> = None;
    loop {
        if ctx.limit.is_some_and(|l| ctx.taken.load(Relaxed) >= l) {
            ctx.stop.request_stop();
            break;
        }
        if drain_until.is_none() && ctx.stop.stopping() {
            if matches!(ctx.sink, Sink::Print) {
                break; // a terminal or a closed pipe (`| head`): stop at once, as tcpdump does
            }
            drain_until = Some(Instant::now() + DRAIN_LIMIT);
        }
        if drain_until.is_some_and(|t| Instant::now() >= t) {
            break;
        }
        let wait = if drain_until.is_some() {
            ctx.drain_wait
        } else {
            POLL
        };
        let n = match &ctx.sink {
            Sink::File(w) => {
                // Lock once per batch, and only once packets are there (not while waiting in poll).
                let mut guard = None;
                let n = src.for_each_batch(wait, |p| {
                    if !take_one(&ctx) {
                        return;
                    }
                    if let Some(l) = &mut load {
                        l.packet(p.data);
                    }
                    if let Some(b) = &mut rec {
                        b.push(&packet_record(p));
                    }
                    let w =
                        guard.get_or_insert_with(|| w.lock().unwrap_or_else(|p| p.into_inner()));
                    w.write_packet(p.ts_ns, p.wire_len, p.data, p.vlan);
                })?;
                let mut w = match guard {
                    Some(g) => g,
                    None => w.lock().unwrap_or_else(|p| p.into_inner()),
                };
                w.maybe_flush(Instant::now());
                w.maybe_rotate(sys::now_ns());
                // One thread takes the SIGHUP; without a free buffer it stays pending.
                if ctx.hup.swap(false, Relaxed) && !w.rotate_now() {
                    ctx.hup.store(true, Relaxed);
                }
                n
            }
            Sink::Count => src.for_each_batch(wait, |p| {
                if !take_one(&ctx) {
                    return;
                }
                if let Some(l) = &mut load {
                    l.packet(p.data);
                }
                if let Some(b) = &mut rec {
                    b.push(&packet_record(p));
                }
            })?,
            Sink::Print => {
                let mut out = stdout.lock();
                let n = src.for_each_batch(wait, |p| {
                    if !take_one(&ctx) {
                        return;
                    }
                    if let Some(l) = &mut load {
                        l.packet(p.data);
                    }
                    line.clear();
                    let _ = wire::format_line(
                        &mut line,
                        p.ts_ns,
                        p.data,
                        p.record_wire_len(),
                        wire::LinkType::Ethernet,
                    );
                    line.push('\n');
                    if let Err(e) = out.write_all(line.as_bytes()) {
                        // A closed pipe (`ringcap ... | head`) ends the capture, like tcpdump.
                        if e.kind() == std::io::ErrorKind::BrokenPipe {
                            ctx.stop.request_stop();
                        }
                    }
                })?;
                if Instant::now() >= flush_at {
                    let _ = out.flush();
                    flush_at = Instant::now() + Duration::from_millis(200);
                }
                n
            }
        };
        if let Some(b) = &mut rec {
            b.tick(Instant::now());
        }
        if n == 0 && drain_until.is_some() {
            break;
        }
    }
    if let Some(b) = rec {
        b.finish();
    }
    if let Some(l) = load {
        l.finish();
    }
    Ok(())
}

/// Count a packet against -c; false once the limit is reached.
#[inline]
fn take_one(ctx: &ThreadCtx) -> bool {
    match ctx.limit {
        None => true,
        Some(l) => ctx.taken.fetch_add(1, Relaxed) < l,
    }
}

fn source_config(a: &CaptureArgs) -> Result<SourceConfig, Fatal> {
    if a.threads == 0 {
        return Err(Fatal::usage(anyhow!("--threads must be at least 1")));
    }
    let mut cfg = SourceConfig::new(&a.interface);
    cfg.kind = match a.source {
        cli::SourceKind::Ring => capture::SourceKind::Ring,
        cli::SourceKind::Copy => capture::SourceKind::Copy,
    };
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
            mode: match a.fanout {
                cli::FanoutMode::Hash => capture::FanoutMode::Hash,
                cli::FanoutMode::Lb => capture::FanoutMode::Lb,
                cli::FanoutMode::Cpu => capture::FanoutMode::Cpu,
                cli::FanoutMode::Qm => capture::FanoutMode::Qm,
            },
            rollover: a.rollover,
            defrag: true,
        });
    }
    let expr = a.filter.join(" ");
    if !expr.trim().is_empty() {
        let prog = capture::compile_filter(&expr, wire::LinkType::Ethernet, cfg.snaplen)
            .map_err(|e| Fatal::usage(anyhow!(e)))?;
        cfg.filter = Some(prog);
    }
    Ok(cfg)
}

/// Configuration mistakes exit 2, everything else 1.
fn capture_fatal(e: CaptureError) -> Fatal {
    match e {
        CaptureError::NoSuchInterface { .. }
        | CaptureError::InterfaceDown { .. }
        | CaptureError::Filter(_)
        | CaptureError::Config(_) => Fatal::usage(anyhow!(e)),
        _ => Fatal::runtime(anyhow!(e)),
    }
}

fn store_format(f: cli::OutputFormat) -> Format {
    match f {
        cli::OutputFormat::Pcap => Format::Pcap { nanos: false },
        cli::OutputFormat::PcapNs => Format::Pcap { nanos: true },
        cli::OutputFormat::Pcapng => Format::PcapNg,
    }
}

fn format_name(f: cli::OutputFormat) -> &'static str {
    match f {
        cli::OutputFormat::Pcap => "pcap",
        cli::OutputFormat::PcapNs => "pcap (ns)",
        cli::OutputFormat::Pcapng => "pcapng",
    }
}

fn compress_name(c: CompressMode) -> String {
    match c {
        CompressMode::None => "none".into(),
        CompressMode::Lz4 => "lz4".into(),
        CompressMode::Zstd(n) => format!("zstd:{n}"),
        CompressMode::Auto => "auto".into(),
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
    plan.compression = a.compress;
    plan.compressors = a.compress_threads;
    plan.max_write_rate = a.max_write_rate.map(|r| (r * 1e6).max(1.0) as u64);
    plan.events = Some(Arc::new(|m: &str| eprintln!("ringcap: {m}")));
    Ok(Some(plan))
}

fn writer_options(a: &CaptureArgs) -> WriterOptions {
    WriterOptions {
        format: store_format(a.format),
        snaplen: if a.snaplen == 0 {
            store::MAX_SNAPLEN
        } else {
            a.snaplen.min(store::MAX_SNAPLEN)
        },
        linktype: 1,
        if_name: a.interface.clone(),
        direct_io: a.direct_io,
        ..WriterOptions::default()
    }
}

fn open_files(plan: FilePlan, a: &CaptureArgs) -> Result<CaptureWriter, Fatal> {
    let mut opts = writer_options(a);
    if plan.compression != CompressMode::None {
        // One 1 MiB buffer = one compressed frame; 32 of them absorb about 0.3 s at 100 MB/s.
        opts.buffer_size = 1 << 20;
        opts.buffers = 32;
    }
    CaptureWriter::create_files(plan, opts).map_err(|e| Fatal::usage(anyhow!(e)))
}

fn open_writer(path: &Path, a: &CaptureArgs) -> Result<CaptureWriter, Fatal> {
    CaptureWriter::create(path, writer_options(a)).map_err(|e| Fatal::usage(anyhow!(e)))
}

/// Prints one stats line per interval on stderr.
struct StatsPrinter {
    json: bool,
    silent: bool,
    interval: Duration,
    next: Instant,
    last: Instant,
    last_packets: u64,
    last_bytes: u64,
    last_written: u64,
}

impl StatsPrinter {
    fn new(json: bool, silent: bool, interval_s: f64) -> StatsPrinter {
        let interval = Duration::from_secs_f64(interval_s.max(0.05));
        StatsPrinter {
            json,
            silent,
            interval,
            next: Instant::now() + interval,
            last: Instant::now(),
            last_packets: 0,
            last_bytes: 0,
            last_written: 0,
        }
    }

    fn maybe_print(&mut self, counters: &[Arc<Counters>], writer: Option<&WriterCounters>) {
        let now = Instant::now();
        if self.silent || now < self.next {
            return;
        }
        self.next += self.interval;
        let mut packets = 0;
        let mut bytes = 0;
        let mut kernel = capture::KernelStats::default();
        for c in counters {
            let s = c.snapshot();
            packets += s.packets;
            bytes += s.wire_bytes;
            kernel.add(&c.kernel_stats());
        }
        let dt = now.duration_since(self.last).as_secs_f64().max(1e-9);
        let pps = (packets - self.last_packets) as f64 / dt;
        let bps = (bytes - self.last_bytes) as f64 / dt;
        self.last = now;
        self.last_packets = packets;
        self.last_bytes = bytes;
        let w = writer.map(|w| w.snapshot());
        let storage = w.map_or(0, |w| w.storage_drops);
        let written = w.map_or(0, |w| w.bytes_written);
        let write_rate = (written - self.last_written.min(written)) as f64 / dt;
        self.last_written = written;
        if self.json {
            let mut v = serde_json::json!({
                "type": "stats",
                "time_ns": sys::now_ns(),
                "pps": pps,
                "bits_per_sec": bps * 8.0,
                "captured": w.map_or(packets, |w| w.packets),
                "received": packets,
                "drops": { "kernel": kernel.drops, "storage": storage },
                "ring_freezes": kernel.freeze_q_cnt,
            });
            if let Some(w) = w {
                v["written_bytes"] = w.bytes_written.into();
                v["written_bytes_per_sec"] = write_rate.into();
                v["backlog"] =
                    serde_json::json!({ "filled": w.buffers_filled, "total": w.buffers_total });
                if w.compressing {
                    v["compression"] =
                        serde_json::json!({ "ratio": w.ratio(), "level": current_level(&w) });
                }
            }
            eprintln!("{v}");
        } else {
            let backlog = w.map_or(String::new(), |w| {
                let zip = if w.compressing {
                    format!(
                        " ratio {:.2} level {}",
                        w.ratio(),
                        current_level(&w).unwrap_or_else(|| "-".into())
                    )
                } else {
                    String::new()
                };
                format!(
                    " | wrote {:.1} MB/s{zip} | backlog {}/{}",
                    write_rate / 1e6,
                    w.buffers_filled,
                    w.buffers_total
                )
            });
            eprintln!(
                "{:>10} {:>10} | captured {} | drops: kernel {} storage {}{}",
                units::pps(pps),
                units::bits_per_sec(bps),
                w.map_or(packets, |w| w.packets),
                kernel.drops,
                storage,
                backlog
            );
        }
    }
}

/// The level of the last compressed buffer; none before the first.
fn current_level(w: &WriterStats) -> Option<String> {
    (w.compressed_out > 0).then(|| w.level.name())
}

/// End-of-capture numbers: tcpdump's three lines, then one line per stage.
struct Summary {
    elapsed: Duration,
    kernel: capture::KernelStats,
    delivered: u64,
    captured: u64,
    storage_drops: u64,
    wire_bytes: u64,
    blocks: u64,
    blocks_timed_out: u64,
    blocks_losing: u64,
    bytes_written: Option<u64>,
    direct_io: bool,
    /// File mode's counters (files, compression, retention, full disks).
    writer: Option<WriterStats>,
    /// Buffers compressed at each level.
    levels: Vec<(Level, u64)>,
    drop_all: bool,
    /// `--records`: the probe's counters.
    records: Option<records::probe::ProbeStats>,
}

impl Summary {
    fn print(&self, json: bool) {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        if json {
            let v = serde_json::json!({
                "type": "summary",
                "captured": self.captured,
                "received_by_filter": self.kernel.packets,
                "dropped_by_kernel": self.kernel.drops,
                "delivered_to_ringcap": self.delivered,
                "drops": { "kernel": self.kernel.drops, "storage": self.storage_drops },
                "ring": { "blocks": self.blocks, "timed_out": self.blocks_timed_out, "losing": self.blocks_losing, "freezes": self.kernel.freeze_q_cnt },
                "wire_bytes": self.wire_bytes,
                "bytes_written": self.bytes_written,
                "direct_io": self.direct_io,
                "seconds": secs,
            });
            let mut v = v;
            if self.drop_all {
                v["drop_all"] = true.into();
            }
            if let Some(r) = &self.records {
                v["drops"]["queue"] = r.queue_drops.into();
                v["records"] = serde_json::to_value(r).unwrap_or_default();
            }
            if let Some(w) = &self.writer {
                v["files"] = serde_json::json!({
                    "complete": w.files_done,
                    "deleted": w.files_deleted,
                    "bytes_deleted": w.bytes_deleted,
                    "disk_full_events": w.disk_full_events,
                });
                if w.compressing {
                    let levels: serde_json::Map<String, serde_json::Value> = self
                        .levels
                        .iter()
                        .map(|(l, n)| (l.name(), (*n).into()))
                        .collect();
                    v["compression"] = serde_json::json!({
                        "ratio": w.ratio(),
                        "bytes_in": w.compressed_in,
                        "bytes_out": w.compressed_out,
                        "levels": levels,
                    });
                }
            }
            eprintln!("{v}");
            return;
        }
        if self.drop_all {
            eprintln!(
                "{} packets counted and dropped (--drop-all: nothing written)",
                self.delivered
            );
        }
        eprintln!("{} packets captured", self.captured);
        eprintln!("{} packets received by filter", self.kernel.packets);
        eprintln!("{} packets dropped by kernel", self.kernel.drops);
        eprintln!(
            "ringcap: {} in {:.1} s ({}, {}); drops by stage: kernel {}, storage {}",
            units::bytes(self.wire_bytes),
            secs,
            units::pps(self.delivered as f64 / secs),
            units::bits_per_sec(self.wire_bytes as f64 / secs),
            self.kernel.drops,
            self.storage_drops,
        );
        eprintln!(
            "ringcap: ring: {} blocks ({} closed by timeout, {} while losing), {} ring-full freezes",
            self.blocks, self.blocks_timed_out, self.blocks_losing, self.kernel.freeze_q_cnt
        );
        if let Some(r) = &self.records {
            print_records(r);
        }
        if let Some(b) = self.bytes_written {
            eprintln!(
                "ringcap: wrote {} ({})",
                units::bytes(b),
                if self.direct_io {
                    "O_DIRECT"
                } else {
                    "page cache"
                }
            );
        }
        if let Some(w) = &self.writer {
            eprintln!(
                "ringcap: files: {} complete, {} deleted by retention ({}), {} disk-full event{}",
                w.files_done,
                w.files_deleted,
                units::bytes(w.bytes_deleted),
                w.disk_full_events,
                if w.disk_full_events == 1 { "" } else { "s" }
            );
            if w.compressing {
                let levels: Vec<String> = self
                    .levels
                    .iter()
                    .map(|(l, n)| format!("{} ×{n}", l.name()))
                    .collect();
                eprintln!(
                    "ringcap: compression: ratio {:.2} ({} → {}); 1 MiB chunks by level: {}",
                    w.ratio(),
                    units::bytes(w.compressed_in),
                    units::bytes(w.compressed_out),
                    levels.join(", ")
                );
            }
        }
    }
}

/// The header record of one ring slot (parsed in place, no copy); a tag the kernel stripped goes back
/// into the record, as libpcap puts it back into the pcap frame.
#[inline]
fn packet_record(p: &capture::Packet<'_>) -> wire::record::Record {
    let mut r = wire::record::Record::from_frame(
        p.ts_ns,
        p.record_wire_len(),
        p.data,
        wire::LinkType::Ethernet,
    );
    if let Some(v) = p.vlan {
        r.vlan = v.tci;
    }
    r
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
    cfg.probe_id = a.probe_id.unwrap_or_else(|| default_probe_id(&a.interface));
    cfg.flush = Duration::from_millis(a.records_flush.max(1));
    cfg.ack_timeout = Duration::from_millis(a.ack_timeout_ms.max(1));
    Probe::start(cfg).map(Some).map_err(Fatal::usage)
}

/// A probe id stable across restarts: a hash of the host name and the interface.
fn default_probe_id(interface: &str) -> u64 {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    // FNV-1a: stable across Rust versions (DefaultHasher is not).
    let mut h: u64 = 0xcbf29ce484222325;
    for b in host.trim().bytes().chain([b'/']).chain(interface.bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    h
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

fn print_records(r: &records::probe::ProbeStats) {
    eprintln!(
        "ringcap: records: {} built, {} batches; drops by stage: queue {}, no live collector {}",
        r.records,
        r.batches,
        r.queue_drops,
        r.collectors.iter().map(|c| c.dropped).sum::<u64>()
    );
    for c in &r.collectors {
        eprintln!(
            "ringcap: records to {}: sent {} (re-sent {}), acked {}, dropped {}, unacked {}, failures {}",
            c.dest, c.sent, c.resent, c.acked, c.dropped, c.unacked, c.failures
        );
    }
}
