//! `ringcap synth`: a synthetic trace with the shape of real traffic (b-model bursts, TCP and UDP flows
//! with heavy-tailed sizes) written to a capture file, for `ringcap replay`, tcpreplay or `ringcap analyze`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use gen::synth::{self, BModel, FlowSize, SynthOptions};
use store::{CaptureWriter, WriterOptions};

use crate::Fatal;

#[derive(Args, Debug)]
#[command(
    after_help = "Arrivals follow the b-model: every period of BIN × 2^LEVELS gets the same number of \
packets, and each interval splits them between its halves as B and 1-B (which half is busier is a coin flip), \
down to the finest bin, so the rate is as bursty at 1 ms as at 100 ms (seed 002 Figure 2); --bmodel 0.5 is a \
constant rate. Each packet belongs to one of --concurrent open flows picked at random: TCP connections \
(handshake, request, response in 1460-byte segments acknowledged every second one, FIN both ways) or UDP \
request/response exchanges, between clients in 10.1.0.0/16 and servers from 10.2.0.1 (Zipf popularity). \
Response sizes follow a Pareto law cut at MAX. Payload bytes are zero: keep -s small for small files.\n\
Examples:\n  ringcap synth -w web.pcap --duration 60s --pps 50000\n  ringcap synth -w burst.pcap --bmodel 0.8 \
--levels 14 -s 96   # headers only, very bursty\n  ringcap synth -w t.pcap && ringcap replay t.pcap -i eth0"
)]
pub struct SynthArgs {
    /// Capture file to write (pcap/pcapng; "-" for stdout).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: PathBuf,
    #[command(flatten)]
    pub format: crate::cli::FileFormat,
    #[command(flatten)]
    pub snaplen: crate::cli::Snaplen,
    /// Trace length (e.g. 10s, 5m).
    #[arg(long = "duration", value_name = "TIME", default_value = "10s", value_parser = units::time::parse_duration)]
    pub duration: Duration,
    /// Mean packets per second.
    #[arg(long = "pps", value_name = "RATE", default_value_t = 20_000.0)]
    pub pps: f64,
    /// b-model bias: share of the busier half at every split, 0.5 (constant) to below 1.
    #[arg(long = "bmodel", value_name = "B", default_value_t = 0.7)]
    pub bmodel: f64,
    /// Splits per cascade period.
    #[arg(long = "levels", value_name = "N", default_value_t = 12)]
    pub levels: u32,
    /// Finest bin of the cascade (period = BIN × 2^LEVELS).
    #[arg(long = "bin", value_name = "TIME", default_value = "100us", value_parser = units::time::parse_duration)]
    pub bin: Duration,
    /// Flows open at any time.
    #[arg(long = "concurrent", value_name = "N", default_value_t = 256)]
    pub concurrent: usize,
    /// Share of flows that are UDP (0-1).
    #[arg(long = "udp-share", value_name = "F", default_value_t = 0.1)]
    pub udp_share: f64,
    /// Response bytes per flow: pareto:ALPHA:MIN[:MAX] (P(size > x) ~ x^-ALPHA).
    #[arg(
        long = "flow-size",
        value_name = "SPEC",
        default_value = "pareto:1.2:2KB:100MB"
    )]
    pub flow_size: FlowSize,
    /// Time of the first cascade period (RFC 3339 or `10m ago`); default: now, rounded down to a period so
    /// that windows of BIN × 2^k line up with the cascade.
    #[arg(long = "start", value_name = "TIME")]
    pub start: Option<String>,
    /// Seed of every random choice: same seed, same trace.
    #[arg(long = "seed", default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
    #[command(flatten)]
    pub json: crate::cli::Json,
}

pub fn run(a: SynthArgs) -> Result<(), Fatal> {
    let arrivals = BModel {
        b: a.bmodel,
        levels: a.levels,
        bin_ns: a.bin.as_nanos().min(u64::MAX as u128) as u64,
    };
    let period = arrivals.period_ns().max(1);
    let now = sys::now_ns();
    let start_ns = match &a.start {
        Some(t) => {
            units::time::parse_time(t, now).map_err(|e| Fatal::usage(anyhow!("--start: {e}")))?
        }
        None => now / period * period,
    };
    let opts = SynthOptions {
        duration_ns: a.duration.as_nanos().min(u64::MAX as u128) as u64,
        pps: a.pps,
        arrivals,
        start_ns,
        concurrent: a.concurrent,
        udp_share: a.udp_share,
        flow_size: a.flow_size,
        seed: a.seed,
    };
    opts.validate().map_err(|e| Fatal::usage(anyhow!(e)))?;
    let wopts = WriterOptions {
        format: (*a.format).into(),
        snaplen: *a.snaplen,
        direct_io: false,
        ..Default::default()
    };
    let mut w = CaptureWriter::create(&a.write, wopts).map_err(Fatal::runtime)?;
    w.wait_for_buffers();
    let expected = (a.pps * a.duration.as_secs_f64()) as u64;
    let bar = crate::progress::count_bar(expected, a.quiet.on || a.json.on, "packets");
    let mut n = 0u64;
    let written = synth::synthesize(&opts, |ts, frame| {
        n += 1;
        if n.is_multiple_of(65536) {
            bar.set_position(n);
        }
        if w.write_packet(ts, frame.len() as u32, frame, None) {
            Ok(())
        } else {
            Err(())
        }
    });
    bar.finish_and_clear();
    // A failed output says why in `finish`.
    let finished = w.finish(None);
    let r = match (written, finished) {
        (_, Err(e)) => return Err(Fatal::runtime(anyhow!("{}: {e}", a.write.display()))),
        (Err(()), Ok(_)) => {
            return Err(Fatal::runtime(anyhow!(
                "{}: the output failed",
                a.write.display()
            )))
        }
        (Ok(r), Ok(_)) => r,
    };
    if a.json.on {
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
        return Ok(());
    }
    let secs = r.last_ns.saturating_sub(r.first_ns) as f64 / 1e9;
    eprintln!(
        "{}: {} packets, {} in {secs:.3} s ({}); {} TCP and {} UDP flows, {} completed; b-model b={} over {} periods of {} packets",
        a.write.display(),
        r.packets,
        units::bytes(r.bytes),
        units::pps(r.packets as f64 / secs.max(1e-9)),
        r.tcp_flows,
        r.udp_flows,
        r.flows_completed,
        a.bmodel,
        units::time::format_duration(Duration::from_nanos(r.period_ns)),
        r.packets_per_period.round(),
    );
    Ok(())
}
