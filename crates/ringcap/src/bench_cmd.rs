//! `ringcap bench` and `ringcap report`: measurement plans (issue 5). Being written.

use crate::Fatal;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(after_help = "\
Each run: fresh network namespaces joined by a veth pair, the capturers started in the receiving one
(pinned to the capture CPU) and waited for until ready, a warm-up, the interface counters and a CPU
profile around `ringcap gen` sending --packets frames, a drain, SIGINT to the capturers, then the
packets each one received (capinfos of its file, or its own summary when writing to /dev/null), its
drops by stage and its CPU time (utime+stime with children). Reruns are interleaved (rerun 0 of every
point, then rerun 1, ...). Rows are appended to DIR/results.csv as runs finish; Ctrl-C keeps them and
--resume continues. Peers that are not installed are reported and skipped. Needs root.

Examples:
  ringcap bench plans/thesis-baseline.toml --quick --out bench-out/baseline
  ringcap bench plans/buffers.toml --dry-run          # the runs and a time estimate
  ringcap bench plans/schultz.toml --out bench-out/schultz --resume   # after an interruption")]
pub struct BenchArgs {
    /// The plan (TOML): factors and levels, reruns, packets (see plans/*.toml).
    pub plan: PathBuf,
    /// Run the plan's [quick] variant (fewer levels, reruns and packets).
    #[arg(long)]
    pub quick: bool,
    /// Output directory [default: bench-out/<plan name>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue an interrupted plan in DIR: runs already in results.csv are not redone.
    #[arg(long)]
    pub resume: bool,
    /// Reruns of every point (overrides the plan).
    #[arg(long, value_name = "N")]
    pub reruns: Option<u32>,
    /// Packets per run (overrides the plan).
    #[arg(long, value_name = "N")]
    pub packets: Option<u64>,
    /// Label of this machine in results.csv's `machine` column [default: the plan's [run] machine, else
    /// the host name], so results of several hosts merge into one ANOVA.
    #[arg(long, value_name = "LABEL")]
    pub machine: Option<String>,
    /// Print the runs and a time estimate; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One line per finished run.
    #[arg(short, long)]
    pub verbose: bool,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Reads DIR/results.csv (also of an interrupted plan), DIR/plan.toml ([report]: x, series, plots,
multi_app; [anova]) and DIR/meta.json, and writes DIR/summary.csv (per point and metric: n, avg, min,
max, median), DIR/plots/*.svg and .png, DIR/anova.json when the plan has [anova], and DIR/report.html.

Examples:
  ringcap report bench-out/thesis-baseline
  ringcap report bench-out/schultz --json")]
#[command(
    mut_arg("json", |a| a.help("Print what was written as JSON (files, runs, failed runs, warnings)."))
)]
pub struct ReportArgs {
    /// A bench output directory (made by `ringcap bench`).
    pub dir: PathBuf,
    #[command(flatten)]
    pub json: crate::cli::Json,
}

pub fn run_bench(a: BenchArgs) -> Result<(), Fatal> {
    use lab::bench::{self, Event};
    use lab::plan::{Overrides, Plan};
    let plan = Plan::load(&a.plan).map_err(|e| Fatal::usage(anyhow::anyhow!("{e}")))?;
    if a.packets.is_some_and(|n| n < 1000) {
        return Err(Fatal::usage(anyhow::anyhow!(
            "--packets must be at least 1000"
        )));
    }
    let overrides = Overrides {
        quick: a.quick,
        reruns: a.reruns,
        packets: a.packets,
        machine: a.machine.clone(),
    };
    let plan = plan.with_overrides(&overrides);
    let ringcap = std::env::current_exe().map_err(Fatal::runtime)?;
    let runs = plan.expand();
    if a.dry_run {
        let skipped = bench::skipped_methods(&plan, &ringcap);
        println!(
            "{}: {} runs ({} points × {} reruns), {} packets each (+{} warm-up)",
            plan.title,
            runs.len(),
            runs.len() / plan.reruns.max(1) as usize,
            plan.reruns,
            plan.packets,
            plan.warmup_packets
        );
        for r in &runs {
            let skip = skipped.iter().find(|s| s.method == r.setup.method);
            println!(
                "{:>5}  rerun {}  {}{}",
                r.index,
                r.rerun,
                r.point,
                skip.map_or(String::new(), |_| "  (skipped)".into())
            );
        }
        for s in &skipped {
            println!("skipped: {}: {}", s.method, s.reason);
        }
        let todo: Vec<_> = runs
            .iter()
            .filter(|r| !skipped.iter().any(|s| s.method == r.setup.method))
            .cloned()
            .collect();
        println!(
            "estimated time: {} (rough: {} runs)",
            units::time::format_duration(std::time::Duration::from_secs(
                plan.estimate_seconds(&todo).round() as u64
            )),
            todo.len()
        );
        return Ok(());
    }
    let out = a.out.unwrap_or_else(|| {
        let stem = a
            .plan
            .file_stem()
            .map_or("plan".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from("bench-out").join(stem)
    });
    let flags = session::Stop::install().map_err(Fatal::runtime)?;
    let opts = bench::Options {
        out: out.clone(),
        ringcap,
        resume: a.resume,
        overrides,
        stop: &flags.stop,
    };
    let bar = indicatif::ProgressBar::hidden();
    // indicatif drops println on a bar it does not draw (not a terminal): print those lines directly.
    let say = |bar: &indicatif::ProgressBar, line: String| {
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
    };
    let verbose = a.verbose;
    let started = std::time::Instant::now();
    let outcome = bench::run(&plan, &opts, |ev| match ev {
        Event::Skip(s) => say(
            &bar,
            format!("ringcap bench: skipping {}: {}", s.method, s.reason),
        ),
        Event::SkipLevel(s) => say(
            &bar,
            format!(
                "ringcap bench: skipping {} ({} run{}): {}",
                s.level,
                s.runs,
                if s.runs == 1 { "" } else { "s" },
                s.reason
            ),
        ),
        Event::Start {
            todo,
            done,
            estimate_s,
        } => {
            if done > 0 {
                say(
                    &bar,
                    format!("ringcap bench: resuming: {done} runs already done, {todo} to go"),
                );
            }
            bar.set_length(todo as u64);
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} runs, ETA {eta} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            say(
                &bar,
                format!(
                    "ringcap bench: {} runs, about {} (estimate); results in {}",
                    todo,
                    units::time::format_duration(std::time::Duration::from_secs(
                        estimate_s.round() as u64
                    )),
                    out.display()
                ),
            );
        }
        Event::RunStarted(r) => {
            bar.set_message(format!("run {} rerun {} {}", r.index, r.rerun, r.point))
        }
        Event::RunFinished { run, rows, seconds } => {
            bar.inc(1);
            if verbose {
                for row in rows {
                    say(&bar, format!(
                        "run {:>4} rerun {} app {} {}: generated {} received {} rate {} {} ns/pkt, {:.1} s, {}",
                        run.index,
                        run.rerun,
                        row.app,
                        run.point,
                        row.generated.map_or("-".into(), |v| v.to_string()),
                        row.received.map_or("-".into(), |v| v.to_string()),
                        row.capture_rate.map_or("-".into(), |v| format!("{:.4}", v)),
                        row.app_ns_per_pkt.map_or("-".into(), |v| format!("{v:.0}")),
                        seconds,
                        row.status
                    ));
                }
            } else {
                for row in rows.iter().filter(|r| r.status != "ok") {
                    say(
                        &bar,
                        format!("run {} ({}): {}", run.index, run.point, row.status),
                    );
                }
            }
        }
    });
    bar.finish_and_clear();
    let outcome = outcome.map_err(|e| match e {
        bench::BenchError::Refused(_) => Fatal::usage(anyhow::anyhow!("{e}")),
        bench::BenchError::Io { .. } => Fatal::runtime(anyhow::anyhow!("{e}")),
        bench::BenchError::Report(e) => report_error(e),
    })?;
    let took =
        units::time::format_duration(std::time::Duration::from_secs(started.elapsed().as_secs()));
    if outcome.interrupted {
        eprintln!(
            "ringcap bench: interrupted after {took}: {} runs written to {}; continue with --resume",
            outcome.runs_done,
            out.join("results.csv").display()
        );
        return Err(Fatal::runtime(anyhow::anyhow!("interrupted")));
    }
    eprintln!(
        "ringcap bench: {} runs in {took} ({} with a failure; see the status column), results in {}",
        outcome.runs_done,
        outcome.runs_failed,
        out.join("results.csv").display()
    );
    // "How fast can it go here?": one line per point of a plan with [search].
    for f in &outcome.search {
        let rate = |v: f64| lab::bench::search::rate_text(&f.factor, v);
        eprintln!(
            "ringcap bench: max loss-free rate, {}: {}{}{} ({})",
            f.point,
            f.max_loss_free
                .map_or("below the lowest rate tried".into(), rate),
            f.measured_pps.map_or(String::new(), |p| format!(
                " (measured {})",
                units::si(p, "pps")
            )),
            f.lossy_at
                .map_or(String::new(), |h| format!(", loss at {}", rate(h))),
            f.note
        );
    }
    // The report (summary.csv, plots, report.html) of what was measured.
    if let Some(report) = &outcome.report {
        print_report_summary(report);
    }
    Ok(())
}

pub fn run_report(a: ReportArgs) -> Result<(), Fatal> {
    let summary = lab::report::write(&a.dir).map_err(report_error)?;
    if a.json.on {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).map_err(Fatal::runtime)?
        );
    } else {
        print_report_summary(&summary);
    }
    Ok(())
}

fn print_report_summary(s: &lab::report::ReportSummary) {
    for w in &s.warnings {
        eprintln!("ringcap report: note: {w}");
    }
    eprintln!(
        "ringcap report: {} runs of {} points ({} failed){}; {} plots, {}{}",
        s.runs,
        s.points,
        s.runs_failed,
        if s.complete {
            ""
        } else {
            ", plan not finished"
        },
        s.plots.len(),
        s.summary_csv.display(),
        s.anova_json
            .as_ref()
            .map(|p| format!(", {}", p.display()))
            .unwrap_or_default()
    );
    println!("{}", s.html.display());
}

/// Bad or missing input is the user's to fix (exit 2); failing to write is a runtime error (exit 1).
fn report_error(e: lab::report::ReportError) -> Fatal {
    match e {
        lab::report::ReportError::Io { .. } => Fatal::runtime(e),
        _ => Fatal::usage(e),
    }
}
