//! Command-line definitions. Flags keep tcpdump's letters where ringcap has the same feature.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod flags;
pub use flags::{Cpus, FileFormat, Jobs, Json, Quiet, ResultFormat, Snaplen, User};

#[derive(Parser, Debug)]
#[command(
    name = "ringcap",
    version,
    about = "Line-rate packet capture, traffic generation and capture benchmarking",
    long_about = "ringcap captures packets through a memory-mapped AF_PACKET ring (TPACKET_V3) with no \
per-packet copy, allocation or system call, writes pcap/pcapng from large aligned buffers, generates \
reproducible traffic from realistic packet-size distributions, and measures capture systems.\n\n\
`ringcap -i IF [-w FILE] [EXPR]` is short for `ringcap capture -i IF ...` (tcpdump's flags).",
    after_help = "Exit codes: 0 success, 1 runtime error (I/O, capture), 2 usage or configuration error\n\
(archive also: 3 refused by the object store, 4 object store unreachable).\n\
Run `ringcap <command> --help` for the flags of each command."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Capture packets from an interface to a pcap/pcapng file, stdout or the terminal.
    Capture(Box<CaptureArgs>), // boxed: by far the largest variant
    /// Packet-size distributions (the thesis's createDist): read, model, draw, summarise.
    Dist(crate::dist_cmd::DistArgs),
    /// Send reproducible UDP traffic that follows a packet-size distribution, at an exact rate.
    Gen(crate::gen_cmd::GenArgs),
    /// Send the packets of a capture file again (tcpreplay's job).
    Replay(crate::gen_cmd::ReplayArgs),
    /// Write a synthetic trace shaped like real traffic: bursty at every time scale, many TCP and UDP flows
    /// in both directions with heavy-tailed sizes.
    Synth(crate::synth_cmd::SynthArgs),
    /// Keep every whole packet of interrupted or damaged capture files (plain, .zst, .lz4; each compressed
    /// frame decoded alone) and say what was left out; drop `.partial`.
    Repair(crate::repair_cmd::RepairArgs),
    /// Convert capture files to Parquet (one row per packet, partitioned by hour).
    Convert(crate::convert_cmd::ConvertArgs),
    /// Analyse a converted set: rates, burstiness, sizes, traffic mix, flows; HTML report.
    Analyze(crate::analyze_cmd::AnalyzeArgs),
    /// Analysis of variance of a full-factorial experiment in a CSV (allocation of variation, F-test).
    Anova(crate::anova_cmd::AnovaArgs),
    /// CPU usage per mode from /proc/stat (the thesis's cpusage and trimusage), alone or around a command.
    Cpusage(crate::cpusage_cmd::CpusageArgs),
    /// Run a measurement plan (TOML): testbed, generator, capturers, CPU profile, results and report.
    Bench(crate::bench_cmd::BenchArgs),
    /// Rebuild the summaries, plots and HTML report of a bench output directory.
    Report(crate::bench_cmd::ReportArgs),
    /// Receive header-record batches from probes and store them as Parquet (TICKET's collector).
    Collect(crate::collect_cmd::CollectArgs),
    /// Merge collector outputs of overlapping probes and remove duplicate records.
    Dedup(crate::collect_cmd::DedupArgs),
    /// Index capture files (any tool's pcap/pcapng, plain or compressed) so queries read only what they need.
    Index(crate::index_cmd::IndexArgs),
    /// The packets of a store matching a tcpdump expression and a time window, as tcpdump -r would give them.
    Query(crate::query_cmd::QueryArgs),
    /// Answer queries from other machines over HTTPS with client certificates (stenographer's POST /query).
    Serve(crate::serve_cmd::ServeArgs),
    /// Copy a store's completed files with their index and flow table to S3-compatible object storage,
    /// verified, resumable, throttled and at idle priority.
    Archive(crate::archive_cmd::ArchiveArgs),
    /// Write man pages or shell completions generated from these definitions (used by `make install`).
    #[command(hide = true, subcommand)]
    Generate(crate::generate_cmd::GenerateWhat),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SourceKind {
    /// Memory-mapped TPACKET_V3 ring: no per-packet copy or system call (default).
    Ring,
    /// Classic per-packet path (recvmmsg on a packet socket): the baseline to compare against.
    Copy,
    /// AF_XDP: an XDP program in the driver hands each frame to a socket per receive queue, before the
    /// kernel builds an skb. The packets are taken from the network stack (right for a tap or span port,
    /// wrong for an interface this host talks through). Needs --threads = the interface's receive queues.
    Xdp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum XdpMode {
    /// In the driver, before an skb exists: the fast path (needs a driver with native XDP; veth has it).
    Native,
    /// After the stack built the skb: any interface, no faster than --source ring.
    Generic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum XdpBind {
    /// Zero copy where the driver supports it, copy otherwise.
    Auto,
    /// The kernel copies each frame into ringcap's memory (every XDP driver).
    Copy,
    /// The NIC writes into ringcap's memory (drivers with AF_XDP zero-copy; not veth).
    Zerocopy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FanoutMode {
    /// Flow hash: all packets of a flow go to the same thread.
    Hash,
    /// Round robin over threads.
    Lb,
    /// By the CPU the packet arrived on.
    Cpu,
    /// By the NIC's receive queue.
    Qm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// pcap with microsecond timestamps (tcpdump's default; read everywhere).
    Pcap,
    /// pcap with nanosecond timestamps (magic a1b23c4d).
    PcapNs,
    /// pcapng with interface and statistics blocks, nanosecond timestamps.
    Pcapng,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimestampTypeArg {
    /// The kernel's software stamp on receive (default).
    Host,
    /// The NIC's hardware stamp, synced to system time.
    Adapter,
    /// The NIC's hardware clock, not synced to system time.
    #[value(name = "adapter_unsynced")]
    AdapterUnsynced,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Precision {
    /// Microseconds: pcap's classic magic (a1b2c3d4), pcapng if_tsresol 6.
    Micro,
    /// Nanoseconds: pcap magic a1b23c4d, pcapng if_tsresol 9.
    Nano,
}

#[derive(Args, Debug, Clone)]
#[command(
    mut_arg("json", |a| a.help("Print statistics (per second and final) as JSON lines on stderr.")),
    mut_arg("quiet", |a| {
        a.help("Quiet: no per-second statistics lines (the final summary is still printed).")
    })
)]
pub struct CaptureArgs {
    /// Read settings from a TOML file whose keys are the long flags without the dashes (interface = "eth0",
    /// file-size = "1GiB", no-index = true, out-dir = ["/a", "/b"], filter = "tcp"); flags given here
    /// override its keys (a repeatable flag replaces the file's list). A mistake names the key and line.
    /// SIGHUP reads it again: disk-budget, keep-newest, stats-interval and quiet change at once; other
    /// changed keys are named as needing a restart.
    #[arg(long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Check the flags and the --config file, print the equivalent command line and exit (0 when fine, 2 on
    /// a mistake) without opening the interface or any file.
    #[arg(long = "check-config")]
    pub check_config: bool,

    /// Interface to capture on. Repeat it (-i a -i b: a passive tap's two directions) for one capture of
    /// several interfaces, each with its own ring(s) (--threads each), merged into one time-ordered output:
    /// pcapng gets one interface block per interface and the interface id on every packet, pcap (and the
    /// printed lines) Linux SLL2 records (link-type 276) carrying each packet's interface index. `-i any`
    /// is every interface that is up with an Ethernet (or loopback) link type, as that list (not libpcap's
    /// single cooked socket: interfaces that come up later are not captured).
    #[arg(short = 'i', long = "interface", value_name = "IF", required = true)]
    pub interface: Vec<String>,

    /// Write packets to FILE ("-" for stdout) instead of printing one line per packet.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,

    #[command(flatten)]
    pub format: FileFormat,

    /// Time stamp precision of the file (as tcpdump): micro or nano. It decides pcap's magic (so
    /// `-F pcap-ns --time-stamp-precision micro` is `-F pcap`) and pcapng's if_tsresol (default 9, ns).
    #[arg(long = "time-stamp-precision", value_enum, value_name = "micro|nano")]
    pub precision: Option<Precision>,

    /// Time stamp type (as tcpdump -j; in query, serve and index, --jobs is not -j): host (the kernel's software stamps, default), adapter or
    /// adapter_unsynced (the NIC's hardware clock; needs a NIC with hardware time stamps, see -J).
    #[arg(
        short = 'j',
        long = "time-stamp-type",
        value_enum,
        value_name = "TYPE",
        default_value = "host"
    )]
    pub time_stamp_type: TimestampTypeArg,

    /// List the time stamp types the interface offers (as tcpdump -J) and exit.
    #[arg(short = 'J', long = "list-time-stamp-types")]
    pub list_time_stamp_types: bool,

    #[command(flatten)]
    pub snaplen: Snaplen,

    /// Stop after this many packets.
    #[arg(short = 'c', long = "count", value_name = "N")]
    pub count: Option<u64>,

    /// Kernel ring size in KiB, per thread (as tcpdump's -B). Default 64 MiB.
    #[arg(
        short = 'B',
        long = "buffer-size",
        value_name = "KiB",
        default_value_t = 65536
    )]
    pub buffer_kib: u64,

    /// Ring block size (power of two, multiple of the page size). 256 KiB as libpcap: under load ringcap reads
    /// several blocks per wake-up, so bigger blocks save nothing per packet, and on a VM they cost start-up CPU
    /// (1 MiB blocks: 0.05-0.15 s for a 64 MiB ring, the kernel zeroing contiguous pages the host had not backed
    /// yet; 4 MiB made the kernel compact memory; BENCHMARKS.md). A ring of fewer than 8 blocks gets smaller
    /// ones (-B 1024: 8 of 128 KiB): with two, one late hand-back fills the ring.
    #[arg(long = "block-size", value_name = "SIZE", default_value = "256KiB", value_parser = parse_size_arg)]
    pub block_size: u64,

    /// Hand a partly filled block to ringcap after this many milliseconds (latency vs. wake-ups).
    #[arg(long = "block-timeout", value_name = "MS", default_value_t = 20)]
    pub block_timeout_ms: u32,

    /// Don't put the interface into promiscuous mode.
    #[arg(short = 'p', long = "no-promiscuous-mode")]
    pub no_promisc: bool,

    #[command(flatten)]
    pub user: User,

    /// Files written (captures, indexes) are readable by GROUP too: mode 0640 (whatever the umask) and
    /// group GROUP instead of 0600, so analysts in GROUP read the store without root. ringcap must run
    /// as root or a member of GROUP; root is made a member before it gives up its capabilities, and
    /// with -Z, USER is. A file that cannot be given GROUP is an error at start, naming it.
    #[arg(long = "group", value_name = "GROUP")]
    pub group: Option<String>,

    /// Packet source.
    #[arg(long = "source", value_enum, default_value = "ring")]
    pub source: SourceKind,

    /// Where the XDP program runs (--source xdp).
    #[arg(long = "xdp-mode", value_enum, default_value = "native")]
    pub xdp_mode: XdpMode,

    /// How the AF_XDP sockets are bound (--source xdp).
    #[arg(long = "xdp-bind", value_enum, default_value = "auto")]
    pub xdp_bind: XdpBind,

    /// Entries of each AF_XDP socket's rx and fill rings (--source xdp; a power of two). Default: as many
    /// 4 KiB frames as -B holds, at most 65536, so every tool gets the same buffer.
    #[arg(long = "xdp-ring", value_name = "N")]
    pub xdp_ring: Option<u32>,

    /// Let the kernel ask for a wake-up only when it needs one (XDP_USE_NEED_WAKEUP; --source xdp): saves a
    /// system call per batch while it keeps up.
    #[arg(long = "xdp-need-wakeup", value_name = "on|off", default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub xdp_need_wakeup: bool,

    /// The XDP prefilter for filters in its subset (--source xdp; off only to measure what it saves).
    #[arg(long = "xdp-prefilter", value_name = "on|off", default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set, hide = true)]
    pub xdp_prefilter: bool,

    /// Capture threads, each with its own ring in one PACKET_FANOUT group (--source xdp: one per receive
    /// queue, so N must be the interface's queue count).
    #[arg(long = "threads", value_name = "N", default_value_t = 1)]
    pub threads: usize,

    /// How the kernel spreads packets over the threads.
    #[arg(long = "fanout", value_enum, default_value = "hash")]
    pub fanout: FanoutMode,

    /// With fanout: when one thread's ring is full, give its packets to another instead of dropping.
    #[arg(long = "rollover")]
    pub rollover: bool,

    #[command(flatten)]
    pub cpus: Cpus,

    /// Write output with O_DIRECT where the filesystem allows it (default: yes). "off" uses the page cache.
    #[arg(long = "direct-io", value_name = "on|off", default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub direct_io: bool,

    /// Print the compiled filter program (as tcpdump -d) and exit.
    #[arg(short = 'd')]
    pub dump_filter: bool,

    #[command(flatten)]
    pub json: Json,

    /// Serve the counters (packets, drops by stage, writer backlog, compression level, files written and
    /// deleted, disk space per directory, index lag, records per collector) as Prometheus text on
    /// http://ADDR/metrics, e.g. --metrics 127.0.0.1:9100. Plain HTTP: bind it to loopback or a
    /// management network.
    #[arg(long = "metrics", value_name = "ADDR")]
    pub metrics: Option<String>,

    /// Lines on stderr: text (`ringcap: ...`), or json: one JSON object per line for journald and log
    /// shippers (events as {"type":"log","level":...,"msg":...}; the stats and summary lines as with --json).
    #[arg(long = "log-format", value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Seconds between statistics lines on stderr (0 = none).
    #[arg(long = "stats-interval", value_name = "SECONDS", default_value_t = 1.0)]
    pub stats_interval: f64,

    #[command(flatten)]
    pub quiet: Quiet,

    /// Stop after this long (e.g. 10s, 5m).
    #[arg(long = "duration", value_name = "TIME", value_parser = units::time::parse_duration)]
    pub duration: Option<std::time::Duration>,

    /// Rotate: start a new file before this one would exceed SIZE (tcpdump's -C: a plain number is
    /// millions of bytes; units such as 100MB or 1GiB are accepted). Bytes before compression.
    #[arg(short = 'C', long = "file-size", value_name = "SIZE", value_parser = parse_file_size)]
    pub file_size: Option<u64>,

    /// Rotate: start a new file at every multiple of SECONDS of the wall clock (not of the first packet).
    #[arg(short = 'G', long = "rotate-seconds", value_name = "SECONDS")]
    pub rotate_seconds: Option<u64>,

    /// Keep at most N files (a ring): the oldest file of this base name is deleted as a new one starts.
    #[arg(short = 'W', long = "file-count", value_name = "N")]
    pub file_count: Option<usize>,

    /// Compress files: none, lz4, zstd:N (1..19; -7..-1 fast) or auto (per 1 MiB buffer, the strongest
    /// zstd level the backlog allows: 3, 1, -1, -5, then stored blocks). Standard zstd/lz4 frames.
    #[arg(long = "compress", value_name = "MODE", default_value = "none", value_parser = parse_compress)]
    pub compress: store::CompressMode,

    /// Compressed frame size (with --compress): each frame holds at most SIZE bytes of whole records
    /// and decodes alone (standard zstd/lz4 frames; `zstd -dc` reads the file as before). A query
    /// decompresses every frame that holds a packet it may want, so smaller frames read less for a
    /// narrow query (one host) at some cost in compression. Default: 16KiB when the files are
    /// indexed, 1MiB with --no-index. 4KiB..4MiB.
    #[arg(long = "frame-size", value_name = "SIZE", value_parser = parse_frame_size)]
    pub frame_size: Option<u64>,

    /// Compressor threads (with --compress).
    #[arg(long = "compress-threads", value_name = "N", default_value_t = 2)]
    pub compress_threads: usize,

    /// Do not index the files as they are written (file mode indexes each completed file, off the
    /// capture's path, at idle priority, for `ringcap query`; `ringcap index` catches up later).
    #[arg(long = "no-index")]
    pub no_index: bool,

    /// Output directory (repeatable): files go round robin over the directories, skipping full ones.
    #[arg(long = "out-dir", value_name = "DIR")]
    pub out_dirs: Vec<PathBuf>,

    /// Per-directory budget: SIZE (bytes of this capture's files, e.g. 50GiB) or PERCENT (file-system
    /// use as `df` shows it, e.g. 90%). After every write, while a directory is over it, the oldest
    /// complete file of this base name there is deleted; never one of the --keep-newest newest files.
    #[arg(long = "disk-budget", value_name = "SIZE|PERCENT", value_parser = parse_budget)]
    pub disk_budget: Option<store::Budget>,

    /// The disk budget never deletes the newest N files of this capture, counting the one being
    /// written (default 2: it and the newest complete one); 1 lets it delete every complete file.
    #[arg(long = "keep-newest", value_name = "N", default_value_t = store::DEFAULT_KEEP_NEWEST,
          value_parser = parse_keep_newest)]
    pub keep_newest: usize,

    /// Keep only the first SIZE bytes of each connection (both directions, wire lengths; e.g. 64KiB, 1MB)
    /// in the file and cut the rest, as the Time Machine's cutoff; 0 = off. Needs -w (or --out-dir). A
    /// connection is (VLAN, IP protocol, the two address:port ends); packets without an IP header are
    /// always kept. Each capture thread has its own table: with --fanout hash (the default) the kernel's
    /// symmetric flow hash sends both directions to one thread; with lb or cpu a connection may keep up to
    /// SIZE per thread. A connection evicted from a full table (--cutoff-flows) counts from 0 when it comes
    /// back, so it may keep more than SIZE, never less. Cut packets are counted apart, not as drops.
    #[arg(long = "cutoff", value_name = "SIZE", value_parser = parse_size_arg)]
    pub cutoff: Option<u64>,

    /// Connections tracked per capture thread for --cutoff (rounded up to a power of two; 24 bytes each,
    /// 4-way set associative, the least recently seen of a full set is evicted).
    #[arg(long = "cutoff-flows", value_name = "N", default_value_t = session::cutoff::DEFAULT_FLOWS)]
    pub cutoff_flows: usize,

    /// Write the Ethernet frame a tunnel carries instead of the tunnelled packet, for tools that
    /// cannot decode tunnels (as Arkime's collapse): KIND[:PORT][,KIND...] of vxlan[:PORT] (UDP
    /// destination port, default 4789), geneve[:PORT] (6081), gre (gretap: GRE carrying Ethernet,
    /// with or without key), erspan (types I, II, III). The outermost tunnel is stripped, with the
    /// headers in front of it; each such packet block's comment (pcapng opt_comment, Wireshark's
    /// frame.comment) names it: "vxlan 42 192.0.2.1 > 192.0.2.2". Its stamp stays; its wire length is
    /// the carrier's minus the bytes stripped. Packets without such a tunnel, with one carrying IP
    /// rather than Ethernet (GRE/GENEVE IP payloads: the file has one link type), or whose tunnel
    /// header is cut or malformed, are written unchanged and counted in the summary. The capture
    /// filter still applies to the packet as it arrives (e.g. 'udp dst port 4789'). Needs -F pcapng
    /// (pcap has no place for the tunnel) and an Ethernet interface. Not needed for ringcap's own
    /// queries: the index reads inside tunnels already (README: Tunnels and cloud mirroring).
    #[arg(long = "decap", value_name = "KIND[:PORT][,KIND...]")]
    pub decap: Option<session::DecapConfig>,

    /// Count packets and drop them, writing nothing (seed 002's way to measure the offered rate). With
    /// --source xdp, an XDP program counts and drops them in the driver: the cheapest count there is.
    #[arg(long = "drop-all", conflicts_with = "write")]
    pub drop_all: bool,

    #[command(flatten)]
    pub archive: crate::capture_cmd::archiver::ArchiveFlags,

    /// Lab: limit file writes to this many MB/s (10^6 bytes), to play a slow disk.
    #[arg(long = "max-write-rate", value_name = "MB/s", hide = true)]
    pub max_write_rate: Option<f64>,

    /// Lab: extra work per packet in the capture sink, memcpy:N (copy every packet N times), gzip:N
    /// (compress every packet into a discarded gzip stream at zlib level N) or zstd:N (the same with zstd),
    /// as the thesis loaded its capturer (seed 000 section 6.3.4: 25 or 50 copies, zlib level 3 or 9).
    #[arg(long = "load", value_name = "memcpy:N|gzip:N|zstd:N")]
    pub load: Option<session::sinks::LoadSpec>,

    /// Send header records (not packets) to collectors: tcp://HOST:PORT or udp://HOST:PORT, comma-separated.
    #[arg(
        long = "records",
        value_name = "DEST[,DEST...]",
        value_delimiter = ',',
        requires = "key"
    )]
    pub records: Vec<String>,

    /// Key file for record batches (HMAC-SHA256; at least 16 random bytes, mode 0600): the collectors' shared
    /// --key, or this probe's file from their --key-dir (named by its --probe-id).
    #[arg(long = "key", value_name = "FILE")]
    pub key: Option<PathBuf>,

    /// How record batches are spread over several collectors: batch (round robin) or flow (by flow hash).
    #[arg(long = "stripe", value_name = "batch|flow", default_value = "batch")]
    pub stripe: String,

    /// Probe id carried in every record batch, and the key id the collectors check it under (default: derived
    /// from the host name and interface).
    #[arg(long = "probe-id", value_name = "N")]
    pub probe_id: Option<u64>,

    /// Send records to TCP collectors inside TLS, checking their certificates against this CA (PEM) and the
    /// host names of --records.
    #[arg(long = "tls-ca", value_name = "FILE", requires = "records")]
    pub tls_ca: Option<PathBuf>,

    /// This probe's TLS client certificate (PEM; collectors with TLS require one), with --tls-key.
    #[arg(long = "tls-cert", value_name = "FILE", requires_all = ["tls_ca", "tls_key"])]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM, mode 0600).
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Send a record batch that is not full after this many milliseconds (records of quiet links still flow).
    #[arg(long = "records-flush", value_name = "MS", default_value_t = 100)]
    pub records_flush: u64,

    /// A TCP collector that has not acked a record batch for this many milliseconds is failed over (its
    /// unacked batches go to the other collectors).
    #[arg(long = "ack-timeout", value_name = "MS", default_value_t = 2000)]
    pub ack_timeout_ms: u64,

    /// Filter expression in tcpdump (pcap-filter) syntax, compiled by libpcap: run in the kernel (ring, copy)
    /// or in user space on every AF_XDP frame (xdp). With --source xdp, an and/or of tcp, udp, sctp, icmp,
    /// ip, [src|dst] host/net (IPv4) and [src|dst] port terms, optionally after a leading `vlan [N] and`, is
    /// also tested in the XDP program (the prefilter): frames that cannot match stay with the network stack
    /// instead of being copied to ringcap. The summary says whether the prefilter was on.
    #[arg(
        value_name = "EXPR",
        trailing_var_arg = true,
        allow_hyphen_values = false
    )]
    pub filter: Vec<String>,
}

pub fn parse_size_arg(s: &str) -> Result<u64, String> {
    units::parse_size(s)
}

fn parse_frame_size(s: &str) -> Result<u64, String> {
    let n = units::parse_size(s)?;
    let (lo, hi) = (store::MIN_FRAME_SIZE as u64, store::MAX_FRAME_SIZE as u64);
    if (lo..=hi).contains(&n) {
        Ok(n)
    } else {
        Err(format!("`{s}`: a frame size must be 4KiB..4MiB"))
    }
}

/// tcpdump's -C: a plain number is millions of bytes; with a unit, the unit.
fn parse_file_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let n = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        t.parse::<u64>()
            .map_err(|e| format!("`{s}`: {e}"))?
            .saturating_mul(1_000_000)
    } else {
        units::parse_size(t)?
    };
    if n == 0 {
        return Err(format!("`{s}`: the file size must be above 0"));
    }
    Ok(n)
}

fn parse_compress(s: &str) -> Result<store::CompressMode, String> {
    store::CompressMode::parse(s)
}

fn parse_keep_newest(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "`{s}`: give a number of files of at least 1 (the file being written is always kept)"
        )),
    }
}

fn parse_budget(s: &str) -> Result<store::Budget, String> {
    store::Budget::parse(s, units::parse_size)
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "yes" | "true" | "1" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        _ => Err(format!("`{s}`: use on or off")),
    }
}

// The flags several commands share, defined once and flattened in. What a command prints differs, so a
// command may say so with `#[command(mut_arg("json", |a| a.help(...)))]`; the name and letter stay.

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `ringcap -i eth0 ...` (no subcommand, tcpdump style) means `ringcap capture -i eth0 ...`.
pub fn with_default_subcommand(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    let is_global = matches!(first, "-h" | "--help" | "-V" | "--version");
    if first.starts_with('-') && !is_global {
        args.insert(1, "capture".into());
    }
    args
}

impl SourceKind {
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Ring => "ring",
            SourceKind::Copy => "copy",
            SourceKind::Xdp => "xdp",
        }
    }
}

impl From<SourceKind> for capture::SourceKind {
    fn from(k: SourceKind) -> Self {
        match k {
            SourceKind::Ring => capture::SourceKind::Ring,
            SourceKind::Copy => capture::SourceKind::Copy,
            SourceKind::Xdp => capture::SourceKind::Xdp,
        }
    }
}

impl From<FanoutMode> for capture::FanoutMode {
    fn from(m: FanoutMode) -> Self {
        match m {
            FanoutMode::Hash => capture::FanoutMode::Hash,
            FanoutMode::Lb => capture::FanoutMode::Lb,
            FanoutMode::Cpu => capture::FanoutMode::Cpu,
            FanoutMode::Qm => capture::FanoutMode::Qm,
        }
    }
}

impl OutputFormat {
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Pcap => "pcap",
            OutputFormat::PcapNs => "pcap (ns)",
            OutputFormat::Pcapng => "pcapng",
        }
    }
}

impl From<TimestampTypeArg> for capture::TimestampType {
    fn from(t: TimestampTypeArg) -> Self {
        match t {
            TimestampTypeArg::Host => capture::TimestampType::Host,
            TimestampTypeArg::Adapter => capture::TimestampType::Adapter,
            TimestampTypeArg::AdapterUnsynced => capture::TimestampType::AdapterUnsynced,
        }
    }
}

impl CaptureArgs {
    /// The file format with --time-stamp-precision applied: it overrides the precision pcap/pcap-ns imply.
    pub fn file_format(&self) -> OutputFormat {
        match (*self.format, self.precision) {
            (OutputFormat::Pcapng, _) => OutputFormat::Pcapng,
            (_, Some(Precision::Micro)) => OutputFormat::Pcap,
            (_, Some(Precision::Nano)) => OutputFormat::PcapNs,
            (f, None) => f,
        }
    }

    /// pcapng's if_tsresol: µs only when asked for.
    pub fn tsresol(&self) -> u8 {
        match self.precision {
            Some(Precision::Micro) => store::TSRESOL_US,
            _ => store::TSRESOL_NS,
        }
    }
}

impl From<OutputFormat> for store::Format {
    fn from(f: OutputFormat) -> Self {
        match f {
            OutputFormat::Pcap => store::Format::Pcap { nanos: false },
            OutputFormat::PcapNs => store::Format::Pcap { nanos: true },
            OutputFormat::Pcapng => store::Format::PcapNg,
        }
    }
}
