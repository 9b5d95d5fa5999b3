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
    #[command(flatten)]
    pub json: crate::cli::Json,
}

pub fn run(a: AnalyzeArgs) -> Result<(), Fatal> {
    let mut opts = AnalyzeOptions {
        top: a.top,
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
