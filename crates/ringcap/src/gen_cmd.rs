//! `ringcap gen` and `ringcap replay`: options → gen crate → report (text or JSON), with a progress bar on
//! stderr when it is a terminal and the run is long.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use gen::frames::{AddrRange, FrameOptions, Order, Payload, PortRange};
use gen::pace::{Burst, RateBasis};
use gen::sizes::{self, Distribution, Mode, Params, SizeModel};
use gen::tx::Backend;
use gen::{Control, GenError, GenOptions, GenReport, Progress, ReplayOptions};
use indicatif::{ProgressBar, ProgressStyle};
use wire::MacAddr;

use crate::Fatal;
use session::Stop;

#[derive(Args, Debug)]
#[command(
    after_help = "Sizes are IP packet lengths: --dist fixed:46 sends 60-byte Ethernet frames (64 with the FCS).\n\
--mbps counts line rate by default (frame padded to 60 bytes + FCS 4 + preamble 8 + gap 12), so 1000 Mb/s of \
60-byte frames is 1.488 Mpps; --rate-basis frame counts frame bytes only.\n\
Examples:\n  ringcap gen -i eth0 -n 1000000                       # default internet mix, top speed\n  ringcap gen -i eth0 --dist imix --pps 100000 --duration 10s\n  ringcap gen -i eth0 --dist fixed:46 --mbps 500 --burst on=10s,off=10s --duration 60s\n  ringcap gen -i eth0 --duration 60s --burst 'on=10s,off=10s,phases=fixed:1500@max;fixed:50@max;mix:50,186,562,754,1010,1500@pps=360000'\n  ringcap gen -i eth0 --src-ip 10.0.0.1-10.0.0.254 --src-ip-order random --payload half"
)]
pub struct GenArgs {
    /// Interface to send on.
    #[arg(short = 'i', long = "interface", value_name = "IF")]
    pub interface: String,
    /// Frames to send (exactly this many leave).
    #[arg(short = 'n', long = "count", value_name = "N")]
    pub count: Option<u64>,
    /// Stop after this long (e.g. 10s, 2m).
    #[arg(long = "duration", value_name = "TIME", value_parser = units::time::parse_duration)]
    pub duration: Option<Duration>,
    /// Packet-size distribution: internet (default), imix, rfc6985:GENOME, fixed:N, uniform:A-B,
    /// mix:A,B,... (these sizes in turn, equal shares), file:PATH, trace:PCAP (sizes are IP lengths).
    #[arg(long = "dist", value_name = "SPEC", default_value = sizes::DEFAULT_SPEC)]
    pub dist: String,
    /// Draw sizes with the thesis's two-stage createDist model instead of exact alias sampling.
    #[arg(long = "createdist")]
    pub createdist: bool,
    /// Packets per second (all threads together).
    #[arg(long = "pps", value_name = "RATE", conflicts_with_all = ["mbps", "gap"])]
    pub pps: Option<f64>,
    /// Megabits per second (see --rate-basis).
    #[arg(long = "mbps", value_name = "RATE", conflicts_with = "gap")]
    pub mbps: Option<f64>,
    /// Nanoseconds between departures (pktgen's delay).
    #[arg(long = "gap", value_name = "NS")]
    pub gap: Option<f64>,
    /// What --mbps counts: l1 (line rate, default) or frame (frame bytes).
    #[arg(long = "rate-basis", value_name = "l1|frame", default_value = "l1")]
    pub rate_basis: RateBasis,
    /// On/off schedule, e.g. on=10s,off=10s (seed 002's burst test). With ,phases=DIST[@RATE];... last,
    /// on-period k sends phase k mod n: DIST a --dist spec, RATE max, pps=N, mbps=N or gap=NS (totals over
    /// the threads, as --pps/--mbps/--gap; without one the run's rate). Seed 002's three phases:
    /// on=10s,off=10s,phases=fixed:1500@max;fixed:50@max;mix:50,186,562,754,1010,1500@pps=360000
    #[arg(long = "burst", value_name = "on=T,off=T[,phases=P;P...]")]
    pub burst: Option<Burst>,
    /// Seed of every random choice (sizes, addresses, ports, payloads): same seed, same traffic.
    #[arg(long = "seed", default_value_t = 1)]
    pub seed: u64,
    /// Sender: sendmmsg (default), tx-ring (AF_PACKET TX_RING), xdp (an AF_XDP socket per thread on
    /// transmit queue = thread number, frames built once in its memory; frames up to 4096 bytes) or xdp-live
    /// (the kernel sends from inside by BPF_PROG_TEST_RUN in live-frames mode, Linux ≥ 5.18: each call sends
    /// --live-repeat copies of one frame, so sizes, addresses and ports change per call, not per packet; a
    /// paced rate is approached, not followed per frame: a call of more than one frame costs the kernel ~20 ms,
    /// so the frames due by then go in bursts of about 20 ms of traffic (one frame per call below ~50 calls/s); the
    /// count is exact where the driver counts refused frames in tx_dropped, as veth does; on veth the
    /// receiving end needs an XDP program or GRO on, or veth refuses every frame).
    #[arg(
        long = "backend",
        value_name = "sendmmsg|tx-ring|xdp|xdp-live",
        default_value = "sendmmsg"
    )]
    pub backend: Backend,
    /// xdp-live: copies of one frame per kernel call at top speed (fewer: less time per call, more calls).
    #[arg(long = "live-repeat", value_name = "N", default_value_t = gen::options::DEFAULT_LIVE_REPEAT)]
    pub live_repeat: u32,
    /// Sending threads, each with its own socket and flows.
    #[arg(long = "threads", default_value_t = 1)]
    pub threads: usize,
    #[command(flatten)]
    pub cpus: crate::cli::Cpus,
    /// Frames per send call (xdp-live: per kernel batch, 1-256).
    #[arg(long = "batch", default_value_t = gen::options::DEFAULT_BATCH)]
    pub batch: usize,
    /// Source MAC (the default passes the thesis filter of seed 000, Fig. 6.5).
    #[arg(long = "src-mac", default_value = "00:00:00:00:00:01")]
    pub src_mac: MacAddr,
    /// Destination MAC (default: locally administered, owned by no one, so receivers do no IP work).
    #[arg(long = "dst-mac", default_value = "02:00:00:00:00:02")]
    pub dst_mac: MacAddr,
    /// Source address or range A-B (IPv4 or IPv6; both ends of a flow must be the same family).
    #[arg(long = "src-ip", default_value = "10.0.0.1")]
    pub src_ip: AddrRange,
    /// Destination address or range A-B.
    #[arg(long = "dst-ip", default_value = "10.0.0.2")]
    pub dst_ip: AddrRange,
    /// Source port or range A-B.
    #[arg(long = "src-port", default_value = "9")]
    pub src_port: PortRange,
    /// Destination port or range A-B.
    #[arg(long = "dst-port", default_value = "9")]
    pub dst_port: PortRange,
    /// How ranges are walked: cycle (default) or random.
    #[arg(long = "src-ip-order", default_value = "cycle")]
    pub src_ip_order: Order,
    #[arg(long = "dst-ip-order", default_value = "cycle")]
    pub dst_ip_order: Order,
    #[arg(long = "src-port-order", default_value = "cycle")]
    pub src_port_order: Order,
    #[arg(long = "dst-port-order", default_value = "cycle")]
    pub dst_port_order: Order,
    /// Payload: zero, random, half (half random, half zero: ~50 % compressible) or file:PATH.
    #[arg(long = "payload", default_value = "zero")]
    pub payload: Payload,
    /// Add an 802.1Q tag with this VLAN id.
    #[arg(long = "vlan", value_name = "ID", value_parser = clap::value_parser!(u16).range(0..=4095))]
    pub vlan: Option<u16>,
    /// Priority of the VLAN tag (0-7).
    #[arg(long = "vlan-prio", default_value_t = 0, requires = "vlan", value_parser = clap::value_parser!(u8).range(0..=7))]
    pub vlan_prio: u8,
    #[command(flatten)]
    pub json: crate::cli::Json,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  ringcap replay trace.pcap -i eth0                 # at recorded timing\n  ringcap replay trace.pcap -i eth0 --topspeed --loop 10\n  ringcap replay trace.pcap.zst -i eth0 --speed 2"
)]
pub struct ReplayArgs {
    /// Capture file (pcap/pcapng, plain, .zst or .lz4).
    pub file: PathBuf,
    /// Interface to send on.
    #[arg(short = 'i', long = "interface", value_name = "IF")]
    pub interface: String,
    /// Timing factor: 2 replays twice as fast as recorded.
    #[arg(long = "speed", default_value_t = 1.0)]
    pub speed: f64,
    /// Ignore timestamps: as fast as possible.
    #[arg(long = "topspeed")]
    pub topspeed: bool,
    /// Times to play the file (0: until interrupted).
    #[arg(long = "loop", default_value_t = 1)]
    pub loops: u64,
    /// Sender: sendmmsg, tx-ring or xdp (AF_XDP, queue 0); not xdp-live, which repeats one frame per call.
    #[arg(long = "backend", default_value = "sendmmsg")]
    pub backend: Backend,
    /// CPU to pin the sender to.
    #[arg(long = "cpu")]
    pub cpu: Option<usize>,
    #[command(flatten)]
    pub json: crate::cli::Json,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
}

pub fn run_gen(a: GenArgs) -> Result<(), Fatal> {
    if a.count.is_none() && a.duration.is_none() {
        eprintln!("ringcap gen: no -n or --duration: sending until interrupted (Ctrl-C)");
    }
    let opts = GenOptions {
        interface: a.interface.clone(),
        count: a.count,
        duration_s: a.duration.map(|d| d.as_secs_f64()),
        backend: a.backend,
        threads: a.threads,
        cpus: a.cpus.list.clone(),
        batch: a.batch,
        live_repeat: a.live_repeat,
        pps: a.pps,
        mbps: a.mbps,
        gap_ns: a.gap,
        rate_basis: a.rate_basis,
        burst: a.burst.clone(),
        seed: a.seed,
        frame: FrameOptions {
            src_mac: a.src_mac,
            dst_mac: a.dst_mac,
            src_ip: a.src_ip,
            dst_ip: a.dst_ip,
            src_port: a.src_port,
            dst_port: a.dst_port,
            src_ip_order: a.src_ip_order,
            dst_ip_order: a.dst_ip_order,
            src_port_order: a.src_port_order,
            dst_port_order: a.dst_port_order,
            payload: a.payload.clone(),
            vlan: a.vlan.map(|id| wire::Vlan::dot1q(a.vlan_prio, id)),
        },
        ..GenOptions::default()
    };
    opts.validate().map_err(Fatal::usage)?;
    if a.createdist && a.burst.as_ref().is_some_and(|b| !b.phases.is_empty()) {
        return Err(Fatal::usage(anyhow!(
            "--createdist applies to --dist, and burst phases draw their sizes exactly: drop one of them"
        )));
    }
    let dist = Distribution::from_spec(&a.dist).map_err(Fatal::usage)?;
    let mode = if a.createdist {
        Mode::CreateDist
    } else {
        Mode::Exact
    };
    let model = SizeModel::build(&dist, mode, Params::default()).map_err(Fatal::usage)?;

    let stop = Stop::install()
        .map_err(|e| Fatal::runtime(anyhow!("cannot install signal handlers: {e}")))?;
    let bar = progress_bar(a.quiet.on || a.json.on, a.count, a.duration);
    let report =
        with_progress(&bar, &stop.stop, |ctl| gen::run(&opts, &model, ctl)).map_err(gen_fatal)?;
    print_report(&report, a.json.on);
    Ok(())
}

pub fn run_replay(a: ReplayArgs) -> Result<(), Fatal> {
    let opts = ReplayOptions {
        interface: a.interface.clone(),
        file: a.file.clone(),
        speed: a.speed,
        topspeed: a.topspeed,
        loops: a.loops,
        backend: a.backend,
        cpu: a.cpu,
        ..ReplayOptions::default()
    };
    let stop = Stop::install()
        .map_err(|e| Fatal::runtime(anyhow!("cannot install signal handlers: {e}")))?;
    let bar = progress_bar(a.quiet.on || a.json.on, None, None);
    let report =
        with_progress(&bar, &stop.stop, |ctl| gen::replay(&opts, ctl)).map_err(gen_fatal)?;
    print_report(&report, a.json.on);
    Ok(())
}

fn gen_fatal(e: GenError) -> Fatal {
    match e {
        GenError::Options(_) => Fatal::usage(anyhow!(e)),
        GenError::Replay(_) => Fatal::usage(anyhow!(e)),
        GenError::Io { .. } | GenError::Xdp(_) => Fatal::runtime(anyhow!(e)),
    }
}

/// A bar by packets (with -n), by time (with --duration), or a spinner; hidden unless stderr is a terminal.
fn progress_bar(quiet: bool, count: Option<u64>, duration: Option<Duration>) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let (len, template) = match (count, duration) {
        (Some(n), _) => (n, "{bar:30} {percent:>3}% {msg} (eta {eta})"),
        (None, Some(d)) => (
            d.as_millis() as u64,
            "{bar:30} {percent:>3}% {msg} (eta {eta})",
        ),
        (None, None) => (0, "{spinner} {msg}"),
    };
    let bar = if len > 0 {
        ProgressBar::new(len)
    } else {
        ProgressBar::new_spinner()
    };
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

fn with_progress(
    bar: &ProgressBar,
    stop: &AtomicBool,
    f: impl FnOnce(&Control) -> Result<GenReport, GenError>,
) -> Result<GenReport, GenError> {
    let update = |p: &Progress| {
        let pos = match (p.total_packets, p.total_s) {
            (Some(_), _) => p.packets,
            (None, Some(_)) => (p.elapsed_s * 1000.0) as u64,
            _ => p.packets,
        };
        bar.set_position(pos);
        let secs = p.elapsed_s.max(1e-9);
        bar.set_message(format!(
            "{} packets, {}, {}",
            p.packets,
            units::pps(p.packets as f64 / secs),
            units::bits_per_sec(p.bytes as f64 / secs)
        ));
    };
    let ctl = Control {
        stop: Some(stop),
        progress: Some(&update),
        progress_every: Duration::from_millis(250),
    };
    let r = f(&ctl);
    bar.finish_and_clear();
    r
}

fn print_report(r: &GenReport, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string(r).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
        );
        return;
    }
    println!(
        "sent {} packets, {} in {:.3} s: {}, {} frame bits ({} line rate)",
        r.packets,
        units::bytes(r.bytes),
        r.duration_s,
        units::pps(r.pps),
        units::bits_per_sec(r.mbps * 1e6 / 8.0),
        units::bits_per_sec(r.mbps_l1 * 1e6 / 8.0),
    );
    println!(
        "inter-departure: mean {:.0} ns, stddev {:.0} ns, CV {:.3}; seed {}",
        r.gap.mean_ns, r.gap.stddev_ns, r.gap.cv, r.seed
    );
    let e = &r.errors;
    if e.total() > 0 {
        println!(
            "send back-pressure waited out: {} EAGAIN, {} ENOBUFS, {} EINTR, {} partial batches, {} ring-full waits",
            e.eagain, e.enobufs, e.eintr, e.partial, e.ring_full
        );
    }
    if r.clamped_small + r.clamped_large > 0 {
        println!(
            "sizes clamped: {} raised to the minimum IP length, {} lowered to the MTU",
            r.clamped_small, r.clamped_large
        );
    }
    if let Some(rs) = &r.replay {
        println!(
            "replay: read {} packets, {} loops done; skipped {} non-Ethernet, {} too short, {} too long; \
             {} sent cut to their snap length; {} damaged regions in the file",
            rs.read, rs.loops_done, rs.skipped_linktype, rs.skipped_short, rs.skipped_oversize, rs.truncated, rs.file_issues
        );
    }
    if r.stopped {
        println!("stopped early by a signal");
    }
}
