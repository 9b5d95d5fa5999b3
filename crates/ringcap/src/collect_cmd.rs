//! `ringcap collect` and `ringcap dedup`: header-record collectors (issue 7, seed 001).

use crate::Fatal;
use anyhow::anyhow;
use clap::Args;
use records::archive::{ArchiveConfig, Events};
use records::collect::{CollectStats, Collector, CollectorConfig, Listen};
use session::Stop;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
#[command(
    mut_arg("json", |a| a.help("Print the final summary as JSON on stdout.")),
    mut_arg("quiet", |a| a.help("No live summary line and no per-file lines (rejections and errors are still reported)."))
)]
pub struct CollectArgs {
    /// Address to receive batches on: tcp://ADDR:PORT (acked) or udp://ADDR:PORT; repeatable. Port 0 picks a
    /// free port (the "listening on" line names it). kafka://BROKER[,BROKER]/TOPIC consumes the topic's
    /// partitions instead (offsets kept in OUT_DIR/kafka-TOPIC.offsets).
    #[arg(long, value_name = "URL", required = true, value_parser = parse_listen)]
    pub listen: Vec<ListenArg>,
    /// Output directory: records-<start>-<n>.parquet, plus the hidden spool being filled (below
    /// sensor=/date=/hour= directories with --sensor).
    #[arg(short = 'o', long = "out-dir", value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Lay the files out as a dataset: OUT_DIR/sensor=NAME/date=YYYY-MM-DD/hour=HH/records-….parquet
    /// (the UTC hour the records arrived in; a new file every hour), the layout `ringcap archive`
    /// gives flow tables, so one SQL statement reads every sensor (docs/datasets.md).
    #[arg(long = "sensor", value_name = "NAME")]
    pub sensor: Option<String>,
    /// The key file shared by every probe (at least 16 bytes, mode 0600, a regular file of root or of this
    /// user), the same as the probes' --key.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "key_dir",
        conflicts_with = "key_dir"
    )]
    pub key: Option<PathBuf>,
    /// A key per probe instead: DIR/<probe id> is the key of the probe with that --probe-id (each 0600); a
    /// probe's batches must verify under its own key, so one probe cannot speak for another. DIR must be
    /// owned by root or this user and not writable by group or others (as ssh wants ~/.ssh).
    #[arg(long = "key-dir", value_name = "DIR")]
    pub key_dir: Option<PathBuf>,
    /// This collector's id, covered by every batch tag and ack so batches made for one collector are refused
    /// by another (default: HOST:PORT of the first TCP --listen, the host name for 0.0.0.0 or ::).
    #[arg(long = "collector-id", value_name = "ID")]
    pub collector_id: Option<String>,
    /// A TCP connection must finish its handshake (and TLS) within this time, or it is closed.
    #[arg(long = "auth-timeout", value_name = "TIME", default_value = "5s", value_parser = units::time::parse_duration)]
    pub auth_timeout: Duration,
    /// Once a message's first byte arrived, the whole message must arrive within this time (slow senders
    /// cannot hold a connection slot).
    #[arg(long = "message-timeout", value_name = "TIME", default_value = "10s", value_parser = units::time::parse_duration)]
    pub message_timeout: Duration,
    /// TCP connections open at once from one IP address.
    #[arg(long = "max-per-address", value_name = "N", default_value_t = 16)]
    pub max_per_address: usize,
    /// Mutual TLS on TCP: this collector's certificate (PEM), with --tls-key and --tls-ca.
    #[arg(long = "tls-cert", value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM, mode 0600).
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The CA that probes' client certificates must chain to (a probe without one is refused).
    #[arg(long = "tls-ca", value_name = "FILE", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// Start a new output file this often (seconds).
    #[arg(long = "rotate-seconds", value_name = "N", default_value_t = 60)]
    pub rotate_seconds: u64,
    /// Start a new output file when the spool reaches this size (e.g. 256MiB).
    #[arg(long = "rotate-size", value_name = "SIZE", default_value = "256MiB", value_parser = units::parse_size)]
    pub rotate_size: u64,
    /// Seconds between live summary lines on stderr (0: none).
    #[arg(long = "stats-interval", value_name = "S", default_value_t = 1.0)]
    pub stats_interval: f64,
    /// Largest allowed difference between a batch's sent time and this machine's clock (replay window).
    #[arg(long = "max-skew", value_name = "TIME", default_value = "120s", value_parser = units::time::parse_duration)]
    pub max_skew: Duration,
    /// Authenticated TCP connections served at once (as many more may be handshaking).
    #[arg(long = "max-connections", value_name = "N", default_value_t = 64)]
    pub max_connections: usize,
    /// Spool and Parquet files are readable by GROUP too (mode 0640 instead of 0600); ringcap must run as
    /// root or a member of GROUP.
    #[arg(long = "group", value_name = "GROUP")]
    pub group: Option<String>,
    #[command(flatten)]
    pub json: crate::cli::Json,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
}

/// A socket to listen on or a Kafka topic to consume.
#[derive(Clone, Debug)]
pub enum ListenArg {
    Socket(Listen),
    Kafka(records::kafka::KafkaDest),
}

fn parse_listen(s: &str) -> Result<ListenArg, String> {
    match records::kafka::KafkaDest::parse(s) {
        Some(k) => k.map(ListenArg::Kafka).map_err(|e| format!("`{s}`: {e}")),
        None => s.parse().map(ListenArg::Socket),
    }
}

#[derive(Args, Debug)]
#[command(
    after_help = "Two rows are copies of one packet when every header field of the record is \
equal and their timestamps differ by at most --tolerance. Overlapping probes stamp a packet with their own \
clocks, so the tolerance must cover the offset between them (1 µs suits probes on one host or with PTP; NTP \
needs about 1 ms). It cannot be much larger: packets with identical headers closer than the tolerance, each \
seen by a different probe only, would be taken for one. A row absorbs at most one row of each other probe, so \
a run of identical packets seen by both probes stays whole, and rows of the same probe count as copies only \
with equal timestamps (a batch stored twice after a lost ack)."
)]
pub struct DedupArgs {
    /// Collector output directories (their .parquet files are merged).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Output directory (must not hold .parquet files yet).
    #[arg(short = 'o', long = "out-dir", value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Lay the files out as a dataset: OUT_DIR/sensor=NAME/date=YYYY-MM-DD/hour=HH/records-….parquet
    /// (the UTC hour the records arrived in; a new file every hour), the layout `ringcap archive`
    /// gives flow tables, so one SQL statement reads every sensor (docs/datasets.md).
    #[arg(long = "sensor", value_name = "NAME")]
    pub sensor: Option<String>,
    /// Largest timestamp difference between two copies of one packet from different probes.
    #[arg(long, value_name = "DUR", default_value = "1us", value_parser = units::time::parse_duration)]
    pub tolerance: Duration,
    #[command(flatten)]
    pub json: crate::cli::Json,
}

/// "bad_tag 2, truncated 1" or "none".
fn rejected_line(s: &CollectStats) -> String {
    if s.rejected.is_empty() {
        return "none".into();
    }
    s.rejected
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn run_collect(a: CollectArgs) -> Result<(), Fatal> {
    if let Some(g) = &a.group {
        crate::privileges::share_files_with_group(g, None)?;
    }
    let keys: records::KeySet = match (&a.key, &a.key_dir) {
        (Some(k), _) => records::Key::load(k).map_err(Fatal::usage)?.into(),
        (None, Some(d)) => records::KeySet::load_dir(d).map_err(Fatal::usage)?,
        (None, None) => return Err(Fatal::usage(anyhow!("give --key FILE or --key-dir DIR"))),
    };
    let tls = match (&a.tls_cert, &a.tls_key, &a.tls_ca) {
        (Some(cert), Some(key), Some(ca)) => {
            Some(records::tls::server_config(cert, key, ca).map_err(Fatal::usage)?)
        }
        _ => None,
    };
    if let Some(name) = &a.sensor {
        records::partition::check_sensor(name).map_err(|e| Fatal::usage(anyhow!(e)))?;
    }
    if a.rotate_seconds == 0 || a.rotate_size == 0 {
        return Err(Fatal::usage(anyhow!(
            "--rotate-seconds and --rotate-size must be above 0"
        )));
    }
    if !(a.stats_interval >= 0.0 && a.stats_interval.is_finite()) {
        return Err(Fatal::usage(anyhow!(
            "--stats-interval must be a number ≥ 0"
        )));
    }
    let stop = Stop::install().map_err(Fatal::runtime)?;
    let quiet = a.quiet.on;
    let events: Events = Arc::new(move |m: &str| {
        // Rejections, recovery and errors always; per-file lines only when not quiet.
        if !quiet || !m.starts_with("wrote ") {
            eprintln!("ringcap collect: {m}");
        }
    });
    let mut cfg = CollectorConfig::new(
        a.listen
            .iter()
            .filter_map(|l| match l {
                ListenArg::Socket(s) => Some(*s),
                ListenArg::Kafka(_) => None,
            })
            .collect(),
        ArchiveConfig {
            dir: a.out_dir.clone(),
            rotate_after: Duration::from_secs(a.rotate_seconds),
            rotate_bytes: a.rotate_size,
            sensor: a.sensor.clone(),
        },
        keys,
        events,
    );
    cfg.kafka = a
        .listen
        .iter()
        .filter_map(|l| match l {
            ListenArg::Kafka(k) => Some(k.clone()),
            ListenArg::Socket(_) => None,
        })
        .collect();
    cfg.collector_id = a.collector_id.clone();
    cfg.auth_timeout = a.auth_timeout;
    cfg.message_timeout = a.message_timeout;
    cfg.max_per_address = a.max_per_address.max(1);
    cfg.tls = tls;
    cfg.max_skew = a.max_skew;
    cfg.max_connections = a.max_connections.max(1);
    let collector = Collector::start(cfg).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            Fatal::usage(e)
        } else {
            Fatal::runtime(e)
        }
    })?;
    let addrs: Vec<String> = collector
        .local_addrs()
        .iter()
        .map(|l| l.to_string())
        .chain(a.listen.iter().filter_map(|l| match l {
            ListenArg::Kafka(k) => Some(k.name()),
            ListenArg::Socket(_) => None,
        }))
        .collect();
    eprintln!(
        "ringcap collect: listening on {} (output {}, collector id {}{})",
        addrs.join(", "),
        a.out_dir.display(),
        collector.collector_id(),
        if a.tls_cert.is_some() {
            ", mutual TLS"
        } else {
            ""
        }
    );
    let interval = Duration::from_secs_f64(a.stats_interval);
    let started = Instant::now();
    let mut last_print = Instant::now();
    let mut last_records = 0u64;
    while !stop.stopping() {
        std::thread::sleep(Duration::from_millis(100));
        if let Err(e) = collector.tick() {
            eprintln!("ringcap collect: rotation failed: {e}");
        }
        if !a.quiet.on && !interval.is_zero() && last_print.elapsed() >= interval {
            let s = collector.stats();
            let dt = last_print.elapsed().as_secs_f64();
            eprintln!(
                "ringcap collect: {:.1} s: {} batches, {} records ({:.0} rec/s), seq loss {} batches, \
                 {} connections, rejected {}",
                started.elapsed().as_secs_f64(),
                s.batches,
                s.records_stored,
                (s.records_stored - last_records) as f64 / dt,
                s.seq_loss(),
                s.connections_open,
                rejected_line(&s)
            );
            last_records = s.records_stored;
            last_print = Instant::now();
        }
    }
    let rep = collector.stop().map_err(Fatal::runtime)?;
    let s = &rep.stats;
    let recovered: u64 = rep.recovered.iter().map(|f| f.records).sum();
    eprintln!(
        "ringcap collect: stored {} records in {} batches ({} files); recovered {} records from an earlier run",
        s.records_stored,
        s.batches,
        rep.files.len(),
        recovered
    );
    for st in &s.streams {
        eprintln!(
            "  probe {} stream {:08x}: {} batches, {} records, seq loss {} batches, {} duplicates, {} reordered",
            st.probe_id, st.stream_id, st.batches, st.records, st.seq_loss, st.duplicates, st.reordered
        );
    }
    eprintln!("  rejected: {}", rejected_line(s));
    for e in &rep.errors {
        eprintln!("ringcap collect: {e}");
    }
    if a.json.on {
        println!(
            "{}",
            serde_json::to_string_pretty(&rep).map_err(Fatal::runtime)?
        );
    }
    if !rep.errors.is_empty() {
        return Err(Fatal::runtime(anyhow!(
            "{} spool(s) could not be converted; they are kept in {} for the next start",
            rep.errors.len(),
            a.out_dir.display()
        )));
    }
    Ok(())
}

pub fn run_dedup(a: DedupArgs) -> Result<(), Fatal> {
    for d in &a.dirs {
        if !d.is_dir() {
            return Err(Fatal::usage(anyhow!(
                "{} is not a directory (give the -o directories of `ringcap collect`)",
                d.display()
            )));
        }
    }
    let rep = records::dedup::dedup_dirs(&a.dirs, &a.out_dir, a.tolerance).map_err(|e| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::AlreadyExists
        ) {
            Fatal::usage(e)
        } else {
            Fatal::runtime(e)
        }
    })?;
    eprintln!(
        "ringcap dedup: read {} records from {} files, kept {}, removed {} copies ({} of them a batch stored \
         twice by one probe); wrote {}",
        rep.read,
        rep.inputs.len(),
        rep.kept,
        rep.removed,
        rep.removed_same_probe,
        rep.outputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if a.json.on {
        println!(
            "{}",
            serde_json::to_string_pretty(&rep).map_err(Fatal::runtime)?
        );
    }
    Ok(())
}
