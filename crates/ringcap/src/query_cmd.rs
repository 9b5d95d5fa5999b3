//! `ringcap query`: the packets of a store that match a tcpdump expression and a time window.

use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;

use store::{Format, PacketStream, StreamHeader};

use crate::query_sources::{Kind, Source};
use crate::Fatal;

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
STORE is a capture file or a directory of them (ringcap capture -w DIR/BASE writes one file per
rotation and an index next to each). The words after the stores are the expression, in tcpdump
syntax: the stores are the leading words that exist as paths, up to the first word that begins
an expression (`host`, `tcp`, `not`, `(`, ...); a store named like such a word is written with a
slash (./host), or the stores end with `--` (ringcap query ./host -- host 10.0.0.1). The expression
is `after T` and `before T` terms (stenographer's form) may begin or end it, joined by `and`.
T is RFC 3339 (2026-11-23T14:02:00Z, to the nanosecond, any offset; no offset = UTC), a date
(2026-11-23), `10m ago` (ns us ms s m h d), `@1700000000.5` (Unix seconds) or `now`.
`after T` keeps packets at or after T, `before T` those strictly before.

The result equals `tcpdump -r` of the same files with the same expression, packet for packet, in
time order across files. Time picks files and frames first, the index narrows host/net/port/
proto/vlan terms to candidate packets, and libpcap's compiled filter decides each candidate.
Files without a current index are scanned (run `ringcap index` to index them).
STORE may be an archive, s3://BUCKET/PREFIX (written by `ringcap archive`; PREFIX may end in
sensor=NAME): files are left out by the times in their names, then read by HTTP range requests,
only the index chunks and frames needed; --endpoint and the credentials as `ringcap archive` takes
them. --explain and --json say the requests made and the bytes fetched.
STORE may be a sensor, https://HOST:PORT (its `ringcap serve`; --ca, --cert, --key), and
--sensors FILE names a fleet (sensors.toml: each sensor's name, URL, archive, certificates).
Several stores, archives and sensors are merged in time order; each is reported with what it
covers of the window (files, drops, time not captured). A sensor down, refusing, silent for
--sensor-timeout or cut is named, and the exit status is 1 (the others' packets are given).
With -w, a query that takes more than half a second shows its progress on stderr (a terminal
only; not with -q or --json): files done, bytes read, packets matched.

Examples:
  ringcap query /data 'host 10.1.2.3 and after 2026-11-23T14:00:00Z and before 2026-11-23T14:05:00Z'
  ringcap query /data 'tcp port 443 and after 10m ago' -w - | wireshark -k -i -
  ringcap query /data 'udp[8:2] = 0x1234' --explain -w out.pcap
  ringcap query /data 'tcp port 443 or udp port 53' --name '*.evil.example' -w evil.pcap
  ringcap query s3://pcap/site 'host 10.1.2.3' --after 2026-11-23T14:00:00Z --endpoint http://minio:9000 -w out.pcap
  ringcap query --sensors sensors.toml 'host 10.1.2.3 and after 1h ago' -w out.pcap")]
pub struct QueryArgs {
    /// Stores (files or directories), then the expression words.
    #[arg(value_name = "STORE... EXPR", required = true, num_args = 1..)]
    pub words: Vec<String>,
    /// The expression, when the stores end with `--` (`ringcap query ./host -- host 10.0.0.1`).
    #[arg(last = true, value_name = "EXPR", hide = true)]
    pub expression: Vec<String>,
    /// Packets at or after this time (as `after T`).
    #[arg(long, value_name = "T")]
    pub after: Option<String>,
    /// Packets before this time (as `before T`).
    #[arg(long, value_name = "T")]
    pub before: Option<String>,
    /// Only the packets of flows with this name: a DNS question or CNAME answer, a TLS or QUIC
    /// server name (SNI), an HTTP Host. Case-insensitive; `*` stands for any characters
    /// (`*.evil.example`: every name under evil.example). Repeat for any of several names. The
    /// flows are chosen from the flow tables (or, for a file without a current one, from its
    /// packets); the expression then applies to their packets.
    #[arg(long = "name", value_name = "GLOB")]
    pub names: Vec<String>,
    /// Write the packets to FILE ("-" for stdout, e.g. into `tcpdump -r -` or `wireshark -k -i -`)
    /// instead of printing one line per packet.
    #[arg(short = 'w', value_name = "FILE")]
    pub write: Option<PathBuf>,
    #[command(flatten)]
    pub format: crate::cli::ResultFormat,
    /// Stop after N packets.
    #[arg(short = 'c', long = "limit", value_name = "N")]
    pub limit: Option<u64>,
    /// Say which files, frames and bytes were read, and how (on stderr; with --json in the JSON).
    #[arg(long)]
    pub explain: bool,
    /// Scan every file instead of using the indexes (a check, and a baseline).
    #[arg(long)]
    pub no_index: bool,
    #[command(flatten)]
    pub jobs: crate::cli::Jobs,
    /// Read at most this many bytes of the store per second (e.g. 100MB), so a query leaves the
    /// disk to a running capture (see also --priority).
    #[arg(long, value_name = "SIZE", value_parser = crate::cli::parse_size_arg)]
    pub max_read_rate: Option<u64>,
    /// CPU and I/O priority. auto: idle while a capture is writing to the store (a `.NAME.partial`
    /// file is there), else low. low: nice 10 and the lowest best-effort I/O (an interactive query
    /// still finishes). idle: SCHED_IDLE and idle I/O, only CPU nothing else wants: it never takes
    /// the capture's CPU, and may wait long on a busy machine.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = QueryPriority::Auto)]
    pub priority: QueryPriority,
    #[command(flatten)]
    pub json: crate::cli::Json,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
    /// How to reach an archive given as the store (s3://BUCKET/PREFIX), as `ringcap archive`.
    #[command(flatten, next_help_heading = "Archive (STORE is s3://BUCKET/PREFIX)")]
    pub archive: crate::archive_cmd::EndpointArgs,
    #[command(
        flatten,
        next_help_heading = "Sensors (STORE is https://HOST:PORT, or --sensors FILE)"
    )]
    pub sensor: crate::query_sources::SensorArgs,
    /// Range requests in flight at once, at most, when the store is an archive.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_requests: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum QueryPriority {
    Auto,
    Low,
    Idle,
}

impl QueryPriority {
    /// The priority for these files: `auto` looks for a capture writing to them.
    pub fn resolve(self, files: &[std::path::PathBuf]) -> index::Priority {
        match self {
            QueryPriority::Auto => index::Priority::for_files(files),
            QueryPriority::Low => index::Priority::Low,
            QueryPriority::Idle => index::Priority::Idle,
        }
    }
}

#[derive(serde::Serialize)]
struct Summary<'a> {
    packets: u64,
    files: usize,
    /// Sensors asked (their files are not counted in `files`).
    #[serde(skip_serializing_if = "is_zero")]
    sensors: usize,
    files_by_index: usize,
    files_scanned: usize,
    bytes_read: u64,
    elapsed_ms: f64,
    filter: String,
    after_ns: Option<u64>,
    before_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    explain: Option<&'a [index::FileReport]>,
    /// A query of an archive: what was asked of the object store.
    #[serde(skip_serializing_if = "Option::is_none")]
    archive: Option<ArchiveSummary>,
    /// Each place asked (stores, archives, sensors): what it gave and what it covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    sources: Option<Vec<SourceSummary>>,
}

/// What one source gave, and what it covers of the window.
#[derive(serde::Serialize)]
struct SourceSummary {
    name: String,
    kind: Kind,
    files: usize,
    packets: u64,
    bytes_read: u64,
    /// Why some of its packets are missing (a sensor down, slow, refused or cut; files damaged).
    errors: Vec<String>,
    /// None: not known (an archive; a sensor that did not list its files).
    coverage: Option<fleet::Covered>,
    /// An archive: files left out because their sensor gave them.
    #[serde(skip_serializing_if = "is_zero")]
    left_to_sensor: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl SourceSummary {
    fn of(s: &Source, reports: &[index::FileReport]) -> SourceSummary {
        let mine = reports.get(s.targets.clone()).unwrap_or(&[]);
        SourceSummary {
            name: s.name.clone(),
            kind: s.kind,
            files: if s.kind == Kind::Sensor {
                s.coverage.as_ref().map_or(0, |c| c.files + c.unknown)
            } else {
                mine.len()
            },
            packets: mine.iter().map(|r| r.packets_matched).sum(),
            bytes_read: mine.iter().map(|r| r.bytes_read).sum(),
            errors: mine
                .iter()
                .filter_map(|r| {
                    let e = r.error.as_ref()?.to_string();
                    // A sensor's error names it already: the line says whose it is.
                    let label = format!("{}: ", r.path.display());
                    Some(match e.strip_prefix(&label) {
                        Some(rest) if s.kind == Kind::Sensor => rest.to_string(),
                        _ => r.error_line().unwrap_or(e),
                    })
                })
                .collect(),
            coverage: s.coverage.clone(),
            left_to_sensor: s.left_to_sensor,
        }
    }
}

/// What the archives were asked, all together.
fn archive_summary(sources: &[Source]) -> Option<ArchiveSummary> {
    let mut sum: Option<ArchiveSummary> = None;
    for (reader, listing) in sources.iter().filter_map(|s| s.archive.as_ref()) {
        let f = reader.fetched();
        let x = sum.get_or_insert(ArchiveSummary {
            requests: 0,
            bytes_fetched: 0,
            listings: 0,
            files_listed: 0,
            files_pruned: 0,
            partitions_pruned: 0,
            max_requests: reader.in_flight(),
        });
        x.requests += f.requests;
        x.bytes_fetched += f.bytes;
        x.listings += f.listings;
        x.files_listed += listing.listed;
        x.files_pruned += listing.pruned_files;
        x.partitions_pruned += listing.pruned_partitions;
    }
    sum
}

#[derive(serde::Serialize)]
struct ArchiveSummary {
    /// Range GETs made and the bytes they returned (index and capture objects).
    requests: u64,
    bytes_fetched: u64,
    /// LIST requests.
    listings: u64,
    /// Capture objects listed, and those left out by the times in their names.
    files_listed: usize,
    files_pruned: usize,
    /// `date=`/`hour=` partitions not listed (begun after the window).
    partitions_pruned: usize,
    max_requests: usize,
}

/// Words that begin a tcpdump expression (pcap-filter's primitives and qualifiers, and the time
/// terms): a file of such a name in the working directory is not taken for a store unless
/// written as a path (`./host`) or before `--`.
const EXPRESSION_WORDS: &[&str] = &[
    "host",
    "net",
    "port",
    "portrange",
    "src",
    "dst",
    "ether",
    "fddi",
    "tr",
    "wlan",
    "ip",
    "ip6",
    "arp",
    "rarp",
    "tcp",
    "udp",
    "icmp",
    "icmp6",
    "sctp",
    "igmp",
    "proto",
    "protochain",
    "vlan",
    "mpls",
    "pppoed",
    "pppoes",
    "geneve",
    "not",
    "and",
    "or",
    "less",
    "greater",
    "len",
    "broadcast",
    "multicast",
    "inbound",
    "outbound",
    "gateway",
    "decnet",
    "iso",
    "stp",
    "ipx",
    "netbeui",
    "atalk",
    "aarp",
    "lat",
    "mopdl",
    "moprc",
    "sca",
    "llc",
    "radio",
    "type",
    "subtype",
    "dir",
    "ifname",
    "on",
    "rnr",
    "rulenum",
    "reason",
    "rset",
    "ruleset",
    "srnr",
    "subrulenum",
    "action",
    "after",
    "before",
];

/// Splits the words into stores and the expression: with `--`, the stores are the words before
/// it; otherwise the leading words that exist as paths, up to the first that reads as the start
/// of an expression (a keyword such as `host`, or `tcp[13]`, unless written with a `/`).
fn split_words(
    words: &[String],
    after_dashdash: &[String],
    exists: impl Fn(&str) -> bool,
) -> (Vec<PathBuf>, String) {
    if !after_dashdash.is_empty() {
        return (
            words.iter().map(PathBuf::from).collect(),
            after_dashdash.join(" "),
        );
    }
    let starts_expression = |w: &str| {
        let head = w.split(['[', '(']).next().unwrap_or(w);
        !w.contains('/') && (EXPRESSION_WORDS.contains(&head) || w.starts_with(['(', '!']))
    };
    let n = words
        .iter()
        .take_while(|w| exists(w) && !starts_expression(w))
        .count();
    let stores = words[..n].iter().map(PathBuf::from).collect();
    (stores, words[n..].join(" "))
}

/// A query's failure as an exit code: a bad expression is a usage error (2), libpcap refusing the
/// filter for a file's link type is exit 1 as with `tcpdump -r`, and so is a failed run.
pub(crate) fn query_failed(e: index::QueryError) -> Fatal {
    use index::QueryError::*;
    match e {
        Expression(_) => Fatal::usage(anyhow::anyhow!(e)),
        Sink(_) => Fatal::runtime(anyhow::anyhow!("writing the result: {e}")),
        Filter(_) | TimedOut => Fatal::runtime(anyhow::anyhow!(e)),
    }
}

pub fn run(a: QueryArgs) -> Result<(), Fatal> {
    let (words, expr) = split_words(&a.words, &a.expression, |w| {
        crate::query_sources::is_remote(w) || Path::new(w).exists()
    });
    if words.is_empty() && a.sensor.sensors.is_none() {
        return Err(Fatal::usage(anyhow::anyhow!(
            "`{}` is not a file or directory: give the store first (a path, s3://BUCKET/PREFIX, \
             https://SENSOR:PORT or --sensors FILE), then the expression",
            a.words[0]
        )));
    }
    let q = index::prepare_query(
        &expr,
        a.after.as_deref(),
        a.before.as_deref(),
        sys::now_ns(),
    )
    .map_err(query_failed)?;
    let mut q = q;
    q.names = a
        .names
        .iter()
        .map(|n| index::NamePattern::parse(n))
        .collect::<Result<_, _>>()
        .map_err(|e| Fatal::usage(anyhow::anyhow!(e)))?;
    if a.write.as_deref() == Some(Path::new("-")) && std::io::stdout().is_terminal() {
        return Err(Fatal::usage(anyhow::anyhow!(
            "-w - writes binary pcap to a terminal: pipe it (| tcpdump -r - or | wireshark -k -i -)"
        )));
    }
    let words: Vec<String> = words
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let crate::query_sources::Gathered {
        plan,
        sources,
        priority,
        targets: files,
    } = crate::query_sources::gather(&a, &words, &q)?;
    // The merging and writing thread too, not only the file workers.
    priority.apply();
    let progress = Arc::new(index::Progress::default());
    let opts = index::QueryOptions {
        jobs: a.jobs.max(1),
        use_index: !a.no_index,
        max_read_rate: a.max_read_rate,
        deadline: None,
        priority,
        progress: Some(progress.clone()),
    };
    let started = Instant::now();
    let mut out = Output::new(&a, plan.header)?;
    let mut packets = 0u64;
    let limit = a.limit.unwrap_or(u64::MAX);
    // A bar on stderr while packets go to a file or a pipe (not among tcpdump-style lines on
    // stdout); it shows only on a terminal, and only once the query has taken a moment.
    let bar = Bar::start(
        files as u64,
        progress,
        a.quiet.on || a.json.on || a.write.is_none(),
    );
    let reports = if limit == 0 {
        Vec::new()
    } else {
        plan.run(&opts, |hit| {
            out.packet(hit)?;
            packets += 1;
            bar.matched.store(packets, Relaxed);
            Ok(packets < limit)
        })
        .map_err(query_failed)?
    };
    bar.finish();
    out.finish()?;
    let elapsed = started.elapsed();
    let errors: Vec<String> = reports.iter().filter_map(|r| r.error_line()).collect();
    let archive = archive_summary(&sources);
    let source_summaries: Vec<SourceSummary> = sources
        .iter()
        .map(|s| SourceSummary::of(s, &reports))
        .collect();
    let summary = Summary {
        packets,
        files: reports.iter().filter(|r| r.how != index::How::Feed).count(),
        sensors: reports.iter().filter(|r| r.how == index::How::Feed).count(),
        files_by_index: reports.iter().filter(|r| r.how.by_index()).count(),
        files_scanned: reports.iter().filter(|r| r.how.scanned()).count(),
        bytes_read: reports.iter().map(|r| r.bytes_read).sum(),
        elapsed_ms: elapsed.as_secs_f64() * 1e3,
        filter: q.filter.clone(),
        after_ns: q.after_ns,
        before_ns: q.before_ns,
        explain: a.explain.then_some(&reports[..]),
        archive,
        // Said when the answer comes from more than one place, or from a sensor.
        sources: (sources.len() > 1 || sources.iter().any(|s| s.kind != Kind::Store))
            .then_some(source_summaries),
    };
    report(&a, &summary, &reports);
    if !errors.is_empty() {
        return Err(Fatal::runtime(anyhow::anyhow!(
            "{} file(s) or sensor(s) could not be read whole; the result lacks their packets:\n  {}",
            errors.len(),
            errors.join("\n  ")
        )));
    }
    Ok(())
}

/// The summary (and with --explain each file's report) on stderr, or as JSON.
fn report(a: &QueryArgs, summary: &Summary<'_>, reports: &[index::FileReport]) {
    if a.json.on {
        let text = serde_json::to_string_pretty(&summary).unwrap_or_default();
        if a.write.as_deref() == Some(Path::new("-")) {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    } else {
        if a.explain {
            for r in reports {
                let named = match (r.named_flows, r.names_from_packets) {
                    (None, _) => String::new(),
                    (Some(n), false) => format!(", {n} flows named (flow table)"),
                    (Some(n), true) => format!(", {n} flows named (names read from the packets)"),
                };
                eprintln!(
                    "{}: {}{named}; frames {}/{}, read {}, candidates {}, tested {}, matched {}",
                    r.path.display(),
                    r.how,
                    r.frames_read,
                    r.frames_total,
                    units::bytes(r.bytes_read),
                    r.candidates.map_or("-".to_string(), |c| c.to_string()),
                    r.packets_tested,
                    r.packets_matched
                );
            }
        }
        if !a.quiet.on {
            let sensors = match summary.sensors {
                0 => String::new(),
                1 => " and 1 sensor".into(),
                n => format!(" and {n} sensors"),
            };
            let files = if summary.files == 0 && summary.sensors > 0 {
                String::new()
            } else {
                format!(
                    " {} files ({} by index, {} scanned)",
                    summary.files, summary.files_by_index, summary.files_scanned
                )
            };
            let sensors = sensors.trim_start_matches(if files.is_empty() { " and" } else { "" });
            eprintln!(
                "{} packets from{files}{sensors} in {:.1} ms, {} read",
                summary.packets,
                summary.elapsed_ms,
                units::bytes(summary.bytes_read)
            );
        }
        if let (false, Some(sources)) = (a.quiet.on, &summary.sources) {
            for s in sources {
                eprintln!("  {}", source_line(s));
            }
        }
        if let (true, Some(x)) = (a.explain || !a.quiet.on, &summary.archive) {
            eprintln!(
                "archive: {} range requests ({} at most in flight), {} fetched, {} listings; \
                 {} capture files listed, {} left out by their names, {} partitions not listed",
                x.requests,
                x.max_requests,
                units::bytes(x.bytes_fetched),
                x.listings,
                x.files_listed,
                x.files_pruned,
                x.partitions_pruned
            );
        }
    }
}

/// One source's line: what it gave, what went wrong, what it covers.
fn source_line(s: &SourceSummary) -> String {
    let what = match s.kind {
        Kind::Sensor => "sensor",
        Kind::Archive => "archive",
        Kind::Store => "store",
    };
    let mut line = format!(
        "{what} {}: {} packets, {} received",
        s.name,
        s.packets,
        units::bytes(s.bytes_read)
    );
    if s.kind != Kind::Sensor {
        line.push_str(&format!(" from {} files", s.files));
    }
    if s.left_to_sensor > 0 {
        line.push_str(&format!(
            " ({} files left to the sensor that still holds them)",
            s.left_to_sensor
        ));
    }
    line.push_str("; ");
    line.push_str(&coverage_text(s.coverage.as_ref()));
    for e in &s.errors {
        line.push_str(&format!("\n    missing: {e}"));
    }
    line
}

/// What a source covers of the window, in words.
fn coverage_text(c: Option<&fleet::Covered>) -> String {
    let files = |n: usize| {
        if n == 1 {
            "1 file".to_string()
        } else {
            format!("{n} files")
        }
    };
    let Some(c) = c else {
        return "coverage not known".into();
    };
    if c.files == 0 && c.unknown > 0 {
        return format!(
            "coverage not known ({} without a coverage record: written by another tool or an older ringcap)",
            files(c.unknown)
        );
    }
    let mut parts = vec![format!("coverage: {}", files(c.files))];
    let d = c.drops;
    parts.push(match d.total() {
        0 => "no drop".to_string(),
        n => format!(
            "{n} packets dropped (kernel {}, interface {}, storage {})",
            d.kernel, d.interface, d.storage
        ),
    });
    if c.unknown > 0 {
        parts.push(format!(
            "{} without a coverage record (gaps not known)",
            files(c.unknown)
        ));
    } else if c.gaps.is_empty() {
        parts.push("no gap".into());
    } else {
        let gaps: Vec<String> = c
            .gaps
            .iter()
            .map(|&(lo, hi)| {
                format!(
                    "{} to {} ({})",
                    units::time::utc_seconds(lo),
                    units::time::utc_seconds(hi),
                    units::time::format_duration(std::time::Duration::from_nanos(hi - lo))
                )
            })
            .collect();
        parts.push(format!("not captured: {}", gaps.join(", ")));
    }
    parts.join(", ")
}

/// The progress bar of a query: files done of all, bytes read, packets matched; updated from
/// counters by a thread of its own (a call into the bar per packet would cost seconds over
/// tens of millions of packets).
struct Bar {
    matched: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bar {
    /// Time before the bar appears: a query that is over at once shows none.
    const DELAY: std::time::Duration = std::time::Duration::from_millis(500);

    fn start(files: u64, progress: Arc<index::Progress>, hidden: bool) -> Bar {
        let matched = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let thread = (!hidden).then(|| {
            let (m, d) = (matched.clone(), done.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let bar = indicatif::ProgressBar::with_draw_target(
                    Some(files),
                    indicatif::ProgressDrawTarget::hidden(),
                );
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{bar:20} {pos}/{len} files, {msg} (eta {eta})",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                let mut shown = false;
                while !d.load(Relaxed) {
                    if !shown && started.elapsed() >= Self::DELAY {
                        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                        shown = true;
                    }
                    bar.set_position(progress.files_done.load(Relaxed));
                    bar.set_message(format!(
                        "{} read, {} packets",
                        units::bytes(progress.bytes_read.load(Relaxed)),
                        units::si(m.load(Relaxed) as f64, "")
                    ));
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                bar.finish_and_clear();
            })
        });
        Bar {
            matched,
            done,
            thread,
        }
    }

    fn finish(mut self) {
        self.done.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where matching packets go: a capture file or stdout (`-w`), as one pcap stream with the header
/// of the files queried, or tcpdump-style lines on stdout.
struct Output {
    stream: Option<PacketStream<BufWriter<Box<dyn Write>>>>,
    lines: Option<BufWriter<std::io::Stdout>>,
}

impl Output {
    fn new(a: &QueryArgs, header: StreamHeader) -> Result<Output, Fatal> {
        let stream = match &a.write {
            None => None,
            Some(path) => {
                let sink: Box<dyn Write> = if path.as_os_str() == "-" {
                    Box::new(std::io::stdout())
                } else {
                    Box::new(create_private(path).map_err(|e| {
                        Fatal::runtime(anyhow::anyhow!("-w {}: {e}", path.display()))
                    })?)
                };
                let format = match *a.format {
                    Some(f) => f.into(),
                    None => Format::Pcap {
                        nanos: header.nanos,
                    },
                };
                Some(PacketStream::new(
                    BufWriter::with_capacity(1 << 20, sink),
                    format,
                    header,
                ))
            }
        };
        Ok(Output {
            stream,
            // With --json and no -w, stdout holds the JSON summary only.
            lines: (a.write.is_none() && !a.json.on).then(|| BufWriter::new(std::io::stdout())),
        })
    }

    fn packet(&mut self, hit: &index::Hit<'_>) -> std::io::Result<()> {
        if let Some(out) = self.lines.as_mut() {
            let lt = wire::LinkType::from_pcap(hit.linktype).unwrap_or(wire::LinkType::Ethernet);
            let mut line = String::new();
            let _ = wire::format_line(&mut line, hit.ts_ns, hit.data, hit.wire_len, lt);
            return writeln!(out, "{line}");
        }
        match self.stream.as_mut() {
            Some(s) => s.packet(&hit.time, hit.wire_len, hit.linktype, hit.data),
            None => Ok(()),
        }
    }

    fn finish(mut self) -> Result<(), Fatal> {
        if let Some(out) = self.lines.as_mut() {
            out.flush()
                .map_err(|e| Fatal::runtime(anyhow::anyhow!("stdout: {e}")))?;
        }
        if let Some(s) = self.stream.take() {
            // A result with no packet is still a valid file (the header alone).
            s.finish()
                .map_err(|e| Fatal::runtime(anyhow::anyhow!("writing the result: {e}")))?;
        }
        Ok(())
    }
}

/// A new file for the result, readable by its owner only (packets are private).
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_file_named_like_a_keyword_does_not_change_how_a_query_reads() {
        // As if the working directory held /data, a file `host` and a directory `tcp`.
        let exists = |w: &str| ["/data", "host", "./host", "tcp"].contains(&w);
        let (s, e) = split_words(&words(&["/data", "host", "10.0.0.1"]), &[], exists);
        assert_eq!(
            (s, e.as_str()),
            (vec![PathBuf::from("/data")], "host 10.0.0.1")
        );
        let (s, e) = split_words(
            &words(&["/data", "tcp[13]", "&", "2", "!=", "0"]),
            &[],
            exists,
        );
        assert_eq!(
            (s, e.as_str()),
            (vec![PathBuf::from("/data")], "tcp[13] & 2 != 0")
        );
        // Written as a path, or before `--`, it is a store.
        let (s, e) = split_words(&words(&["./host", "tcp"]), &[], exists);
        assert_eq!((s, e.as_str()), (vec![PathBuf::from("./host")], "tcp"));
        let (s, e) = split_words(&words(&["host"]), &words(&["host", "10.0.0.1"]), exists);
        assert_eq!(
            (s, e.as_str()),
            (vec![PathBuf::from("host")], "host 10.0.0.1")
        );
    }
}
