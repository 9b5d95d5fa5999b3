//! `ringcap dist`: the thesis's createDist (seed 000 §4.2, A.1) as a command: read sizes, a histogram, a
//! trace or a live interface; write a histogram, procfs lines for a pktgen-style generator, sizes drawn
//! from the model, or a summary with the model's fidelity.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use gen::sizes::{self, Distribution, Histogram, InputKind, Mode, Params, ReadOptions, SizeModel};

use crate::Fatal;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InputArg {
    /// One IP packet size per line.
    Sizes,
    /// `<size> <count>` per line (see --fs).
    Dist,
    /// pcap/pcapng, plain, .zst or .lz4: IP lengths of the IP packets, others skipped and reported.
    Trace,
    /// Count packets on the interface given with -i for --seconds.
    Live,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputArg {
    /// `<size> <count>` lines of the source histogram.
    Dist,
    /// The two-stage model as `dist`/`outl`/`hist` lines (seed 000 A.2.2); -s wraps them in pgset "...".
    Procfs,
    /// -n sizes drawn from the model, one per line.
    Sizes,
    /// Heavy hitters, cumulative share, mean, and each model's total-variation distance to the source.
    Summary,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Sizes are IP packet lengths (an untagged Ethernet frame is 14 bytes longer, 18 with the FCS).\n\
Examples:\n  ringcap dist -I trace -i capture.pcap -O summary\n  ringcap dist -I trace -i capture.pcap -O procfs -s > pktgen.conf\n  ringcap dist --dist imix -O sizes -n 1000\n  ringcap dist -I live -i eth0 --seconds 10 -O dist -o mylink.dist"
)]
#[command(
    mut_arg("json", |a| a.help("Summary as JSON."))
)]
pub struct DistArgs {
    /// Input kind (createDist's -I).
    #[arg(short = 'I', long = "input-kind", value_enum, default_value = "dist")]
    pub input_kind: InputArg,
    /// Input file(s) ("-" for stdin; several are added up), or the interface for -I live.
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// Use a named distribution instead of input files: internet (default), imix, rfc6985:GENOME,
    /// fixed:N, uniform:A-B, file:PATH.
    #[arg(long = "dist", value_name = "SPEC", conflicts_with = "inputs")]
    pub spec: Option<String>,
    /// What to write (createDist's -O).
    #[arg(
        short = 'O',
        long = "output-kind",
        value_enum,
        default_value = "summary"
    )]
    pub output_kind: OutputArg,
    /// Output file (default stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Precision ρ: cells of the outliers array (eq. 4.1–4.10).
    #[arg(long = "prec", default_value_t = sizes::DEFAULT_PRECISION)]
    pub precision: u32,
    /// Largest size N_ps.
    #[arg(long = "max", default_value_t = sizes::DEFAULT_MAX_SIZE)]
    pub max_size: u16,
    /// Outlier bound p_Ωbound as a fraction (0.002 = 0.2 %, createDist's A.1.3 default; see the docs).
    #[arg(long = "outlb", default_value_t = sizes::DEFAULT_OUTLIER_BOUND)]
    pub outlier_bound: f64,
    /// Bin width σ_bin in bytes.
    #[arg(long = "hwidth", default_value_t = sizes::DEFAULT_BIN_WIDTH)]
    pub bin_width: u16,
    /// Draw sizes with exact alias sampling over the whole histogram instead of the two-stage model.
    #[arg(long = "exact")]
    pub exact: bool,
    /// Field separator of dist input lines (default: runs of blanks).
    #[arg(long = "fs", value_name = "CHAR")]
    pub field_sep: Option<char>,
    /// Sizes to draw for -O sizes (and for the sampled fidelity in the summary).
    #[arg(short = 'n', long = "count", default_value_t = sizes::DEFAULT_SIZES_COUNT)]
    pub count: u64,
    /// Wrap procfs lines in pgset "..." (a pktgen shell script).
    #[arg(short = 's', long = "pgset")]
    pub pgset: bool,
    /// Seed of the ChaCha8 generator that draws sizes.
    #[arg(long = "seed", default_value_t = 1)]
    pub seed: u64,
    /// Also write an SVG plot of source vs model probabilities (Figure 4.4's comparison).
    #[arg(long = "plot", value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Seconds to count for -I live.
    #[arg(long = "seconds", default_value_t = 10.0)]
    pub seconds: f64,
    /// In the summary, also give the total-variation distance of the input to this distribution (e.g. the
    /// spec a generator was given: did what arrived follow it?).
    #[arg(long = "compare", value_name = "SPEC")]
    pub compare: Option<String>,
    #[command(flatten)]
    pub json: crate::cli::Json,
}

pub fn run(a: DistArgs) -> Result<(), Fatal> {
    let params = Params {
        precision: a.precision,
        max_size: a.max_size,
        outlier_bound: a.outlier_bound,
        bin_width: a.bin_width,
    };
    params.validate().map_err(Fatal::usage)?;
    let read_opts = ReadOptions {
        field_sep: a.field_sep,
        max_size: a.max_size,
    };
    let dist = load(&a, &read_opts)?;
    if dist.histogram.is_empty() {
        return Err(Fatal::usage(anyhow!("the input holds no packet sizes")));
    }
    let mode = if a.exact {
        Mode::Exact
    } else {
        Mode::CreateDist
    };
    let model = SizeModel::build(&dist, mode, params).map_err(Fatal::usage)?;

    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(BufWriter::new(
            File::create(p)
                .with_context(|| format!("cannot create {}", p.display()))
                .map_err(Fatal::usage)?,
        )),
        None => Box::new(BufWriter::new(io::stdout().lock())),
    };
    let io_err = |e: io::Error| Fatal::runtime(anyhow!("cannot write the output: {e}"));
    match a.output_kind {
        OutputArg::Dist => sizes::write_dist(&dist.histogram, &mut out, a.field_sep.unwrap_or(' '))
            .map_err(io_err)?,
        OutputArg::Procfs => {
            let cd = match model.create_dist_model() {
                Some(cd) => cd.clone(),
                None => sizes::CreateDist::build(&dist.histogram, params).map_err(Fatal::usage)?,
            };
            cd.write_procfs(&mut out, a.pgset).map_err(io_err)?;
        }
        OutputArg::Sizes => {
            let mut s = model.sampler(a.seed);
            sizes::write_sizes(&mut s, a.count, &mut out).map_err(io_err)?;
        }
        OutputArg::Summary => summary(&a, &dist, params, &mut out)?,
    }
    out.flush().map_err(io_err)?;
    if let Some(path) = &a.plot {
        let svg = sizes::plot_svg(
            &dist.histogram,
            &model.probabilities(),
            &format!("{} — {:?} model", dist.name, mode),
        )
        .map_err(Fatal::runtime)?;
        std::fs::write(path, svg)
            .with_context(|| format!("cannot write {}", path.display()))
            .map_err(Fatal::runtime)?;
    }
    Ok(())
}

fn load(a: &DistArgs, opts: &ReadOptions) -> Result<Distribution, Fatal> {
    if let Some(spec) = &a.spec {
        return Distribution::from_spec_with(spec, opts).map_err(Fatal::usage);
    }
    if a.inputs.is_empty() {
        return Err(Fatal::usage(anyhow!(
            "no input: give -i FILE (with -I sizes|dist|trace), -I live -i IF, or --dist SPEC"
        )));
    }
    if a.input_kind == InputArg::Live {
        let ifname = a.inputs[0].to_string_lossy().into_owned();
        let hist = count_live(&ifname, Duration::from_secs_f64(a.seconds), a.max_size)?;
        return Ok(Distribution::from_histogram(format!("live:{ifname}"), hist));
    }
    let kind = match a.input_kind {
        InputArg::Sizes => InputKind::Sizes,
        InputArg::Dist => InputKind::Dist,
        InputArg::Trace => InputKind::Trace,
        InputArg::Live => unreachable!("handled above"),
    };
    let (hist, report) = sizes::read_files(kind, &a.inputs, opts).map_err(Fatal::usage)?;
    let t = report.trace;
    if t.non_ip + t.bad_ip + t.oversize + t.reader_issues > 0 {
        eprintln!(
            "ringcap dist: counted {} IP packets of {}; skipped {} non-IP, {} malformed, {} above {} bytes; {} damaged regions",
            t.ip, t.packets, t.non_ip, t.bad_ip, t.oversize, a.max_size, t.reader_issues
        );
    }
    let name = a
        .inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join("+");
    Ok(Distribution::from_histogram(name, hist))
}

/// createDist's live mode: count IP sizes on an interface for a while (ring source, promiscuous).
fn count_live(ifname: &str, how_long: Duration, max: u16) -> Result<Histogram, Fatal> {
    let cfg = capture::SourceConfig::new(ifname);
    let mut src = capture::Source::open(&cfg).map_err(|e| Fatal::usage(anyhow!(e)))?;
    let mut hist = Histogram::new();
    let mut stats = sizes::TraceStats::default();
    let end = Instant::now() + how_long;
    eprintln!(
        "ringcap dist: counting packet sizes on {ifname} for {:.1} s",
        how_long.as_secs_f64()
    );
    while Instant::now() < end {
        src.for_each_batch(Duration::from_millis(100), |p| {
            sizes::count_frame(
                wire::LinkType::Ethernet.pcap(),
                p.data,
                max,
                &mut hist,
                &mut stats,
            );
        })
        .map_err(|e| Fatal::runtime(anyhow!(e)))?;
    }
    eprintln!(
        "ringcap dist: counted {} IP packets of {}; skipped {} non-IP, {} malformed, {} above {max} bytes",
        stats.ip, stats.packets, stats.non_ip, stats.bad_ip, stats.oversize
    );
    Ok(hist)
}

fn summary(
    a: &DistArgs,
    d: &Distribution,
    params: Params,
    out: &mut dyn Write,
) -> Result<(), Fatal> {
    let s = sizes::Summary::of(&d.histogram, 10);
    // Fidelity of both models (Figure 4.4): analytic TV, and TV of a sample of draws.
    let draws = a.count.min(1_000_000);
    let mut fidelity = Vec::new();
    for mode in [Mode::CreateDist, Mode::Exact] {
        let m = SizeModel::build(d, mode, params).map_err(Fatal::usage)?;
        let mut sampler = m.sampler(a.seed);
        let sampled = sizes::sampled_tv(&mut sampler, draws, &d.histogram);
        fidelity.push((mode, m.tv_distance(), sampled, m.mean()));
    }
    let compared = match &a.compare {
        Some(spec) => {
            let other = Distribution::from_spec(spec).map_err(Fatal::usage)?;
            Some((
                spec.clone(),
                sizes::histogram_tv(&d.histogram, &other.histogram),
            ))
        }
        None => None,
    };
    let io_err = |e: io::Error| Fatal::runtime(anyhow!("cannot write the output: {e}"));
    if a.json.on {
        let v = serde_json::json!({
            "name": d.name,
            "packets": s.count,
            "distinct_sizes": s.distinct,
            "mean": s.mean,
            "min": s.min,
            "max": s.max,
            "heavy_hitters": s.heavy_hitters.iter().map(|h| serde_json::json!({
                "size": h.size, "count": h.count, "share": h.share, "cumulative": h.cumulative})).collect::<Vec<_>>(),
            "models": fidelity.iter().map(|(m, tv, stv, mean)| serde_json::json!({
                "mode": format!("{m:?}").to_lowercase(), "tv_distance": tv, "sampled_tv_distance": stv,
                "sampled_draws": draws, "mean": mean})).collect::<Vec<_>>(),
            "compared_to": compared.as_ref().map(|(spec, tv)| serde_json::json!({"spec": spec, "tv_distance": tv})),
        });
        writeln!(out, "{v}").map_err(io_err)?;
        return Ok(());
    }
    writeln!(out, "{}: {s}", d.name).map_err(io_err)?;
    for (mode, tv, stv, mean) in fidelity {
        writeln!(
            out,
            "model {:<10} mean {mean:.2} B   total-variation distance to the source {tv:.4} (sampled over {draws} draws: {stv:.4})",
            format!("{mode:?}").to_lowercase()
        )
        .map_err(io_err)?;
    }
    if let Some((spec, tv)) = compared {
        writeln!(
            out,
            "total-variation distance of the input to {spec}: {tv:.4}"
        )
        .map_err(io_err)?;
    }
    Ok(())
}
