//! `ringcap analyze`: rates, burstiness, sizes, traffic mix and flows of a converted set.

use std::path::PathBuf;

use clap::Args;
use trace::{AnalyzeOptions, TraceError};

use crate::Fatal;

#[derive(Args, Debug)]
#[command(
    after_help = "Writes into the report directory: index.html (plots and tables), report.json, \
timeline.svg, burstiness.svg, sizes.svg, sizes.dist (replay the size mix with `ringcap gen --dist file:OUT/sizes.dist`) \
and flows.parquet (one row per directional 5-tuple)."
)]
#[command(
    mut_arg("json", |a| a.help("Print the full report as JSON on stdout."))
)]
pub struct AnalyzeArgs {
    /// A directory written by `ringcap convert`, or one Parquet file of it.
    #[arg(value_name = "DIR|FILE")]
    pub input: PathBuf,
    /// Report directory (created if needed).
    #[arg(long = "report", value_name = "OUT")]
    pub report: PathBuf,
    /// Reader threads (default: one per core).
    #[arg(long = "threads", value_name = "N")]
    pub threads: Option<usize>,
    /// Rows in the top-N tables.
    #[arg(long = "top", value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Burstiness windows, multiples of 100us (e.g. 100us,200us,400us to follow a b-model's levels).
    #[arg(long = "windows", value_name = "T,T,...", default_value = "100us,1ms,10ms,100ms,1s", value_parser = parse_windows)]
    pub windows: Windows,
    #[command(flatten)]
    pub json: crate::cli::Json,
}

pub fn run(a: AnalyzeArgs) -> Result<(), Fatal> {
    let mut opts = AnalyzeOptions {
        top: a.top,
        windows: a.windows.0,
        ..AnalyzeOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    let r = trace::analyze(&a.input, &a.report, &opts).map_err(|e| match e {
        TraceError::Usage(_) | TraceError::Schema { .. } => Fatal::usage(e),
        e => Fatal::runtime(e),
    })?;
    if a.json.on {
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
        return Ok(());
    }
    println!(
        "{} packets, {} in {:.3} s of trace; {} flows; {} IP lengths (mean {:.1})",
        r.packets,
        units::bytes(r.bytes),
        r.duration_s,
        r.flows,
        r.sizes.distinct,
        r.sizes.mean
    );
    for b in &r.burstiness {
        println!(
            "window {:>7}: median {:>12}, p99 {:>12}, max {:>12} ({} of {} windows empty)",
            format!("{} s", b.window_s),
            units::pps(b.pps[4]),
            units::pps(b.pps[7]),
            units::pps(b.pps[9]),
            b.empty,
            b.windows
        );
    }
    println!(
        "rates pass {:.2} s ({:.1} M rows/s), sizes and flows pass {:.2} s ({:.1} M rows/s)",
        r.timing.rates_s, r.timing.rates_mpps, r.timing.traffic_s, r.timing.traffic_mpps
    );
    println!("report: {}", a.report.join("index.html").display());
    Ok(())
}

/// Window lengths in units of 100 µs.
#[derive(Clone, Debug)]
pub struct Windows(Vec<u64>);

/// Most windows in one report (each is a pass over the trace's 100 µs runs).
const MAX_WINDOWS: usize = 24;

fn parse_windows(s: &str) -> Result<Windows, String> {
    let base = trace::analyze::rates::BASE_NS;
    let mut w = Vec::new();
    for t in s.split(',') {
        let d = units::time::parse_duration(t.trim())
            .map_err(|e| format!("`{t}`: {e} (write e.g. 100us, 1ms, 2s)"))?;
        let ns = d.as_nanos();
        if ns == 0 || ns % base as u128 != 0 {
            return Err(format!(
                "`{t}` is not a multiple of 100us: windows are counted in 100us steps"
            ));
        }
        w.push((ns / base as u128).min(u64::MAX as u128) as u64);
    }
    w.sort_unstable();
    w.dedup();
    if w.len() > MAX_WINDOWS {
        return Err(format!("at most {MAX_WINDOWS} windows, not {}", w.len()));
    }
    Ok(Windows(w))
}
