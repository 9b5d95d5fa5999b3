//! `ringcap cpusage`: the thesis's cpusage (seed 000 §5.1, A.3) and trimusage (A.4): CPU usage per mode
//! from /proc/stat every interval, while a command runs, for a duration, or until Ctrl-C.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use clap::Args;
use lab::cpusage::{Report, Sampler};

use crate::Fatal;
use session::Stop;

#[derive(Args, Debug)]
#[command(
    after_help = "Output as the thesis's Figure 5.1: one line per interval with the share of each \
mode (user, nice, system, idle, iowait, irq, softirq, steal) of the whole machine, then ---Summary--- with \
Min, Max and Avg for the machine and each CPU.\n\
Examples:\n  ringcap cpusage --duration 10s\n  ringcap cpusage --trim 95 -- ringcap -i eth0 -w /dev/null -c 1000000\n  \
ringcap cpusage -l 90 --json -o usage.json"
)]
#[command(
    mut_arg("json", |a| a.help("Print one JSON document at the end instead of text lines."))
)]
pub struct CpusageArgs {
    /// Seconds between readouts of /proc/stat.
    #[arg(long = "interval", value_name = "SECONDS", default_value_t = 0.5)]
    pub interval: f64,
    /// Sample for this long (e.g. 10s, 2m); default: until COMMAND ends or Ctrl-C.
    #[arg(long = "duration", value_name = "TIME", value_parser = units::time::parse_duration,
          conflicts_with = "command")]
    pub duration: Option<Duration>,
    /// Average only over the first stretch in which idle is below L % (cpusage -l); default: all samples.
    #[arg(short = 'l', long = "limit", value_name = "L")]
    pub limit: Option<f64>,
    /// Also report trimusage: the average over the longest stretch in which idle is below THRESHOLD %.
    #[arg(long = "trim", value_name = "THRESHOLD")]
    pub trim: Option<f64>,
    /// Print every interval of every CPU too, not only the machine total.
    #[arg(long = "per-cpu")]
    pub per_cpu: bool,
    #[command(flatten)]
    pub json: crate::cli::Json,
    /// Write the output to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Command to profile, after `--`; sampling ends when it exits.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(a: CpusageArgs) -> Result<(), Fatal> {
    if !(a.interval.is_finite() && (0.01..=3600.0).contains(&a.interval)) {
        return Err(Fatal::usage(anyhow!(
            "--interval {}: use seconds between 0.01 and 3600 (the thesis used 0.5)",
            a.interval
        )));
    }
    for (flag, v) in [("--limit", a.limit), ("--trim", a.trim)] {
        if let Some(v) = v {
            if !(v > 0.0 && v <= 100.0) {
                return Err(Fatal::usage(anyhow!(
                    "{flag} {v}: an idle percentage between 0 and 100 (e.g. 95)"
                )));
            }
        }
    }
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(BufWriter::new(
            File::create(p)
                .with_context(|| format!("cannot create {}", p.display()))
                .map_err(Fatal::usage)?,
        )),
        None => Box::new(io::stdout().lock()),
    };
    let stop = Stop::install().map_err(Fatal::runtime)?;
    let interval = Duration::from_secs_f64(a.interval);
    let sampler = Sampler::start()
        .context("cannot read /proc/stat")
        .map_err(Fatal::runtime)?;

    let mut child = match a.command.split_first() {
        Some((program, args)) => Some(
            Command::new(program)
                .args(args)
                .spawn()
                .with_context(|| format!("cannot start `{program}`"))
                .map_err(Fatal::usage)?,
        ),
        None => None,
    };
    let start = Instant::now();
    let mut child_status = None;
    let mut write_error = None;
    let samples = sampler
        .run(
            interval,
            || {
                if stop.stopping() {
                    return false;
                }
                if let Some(d) = a.duration {
                    if start.elapsed() >= d {
                        return false;
                    }
                }
                if let Some(c) = child.as_mut() {
                    if let Ok(Some(status)) = c.try_wait() {
                        child_status = Some(status);
                        return false;
                    }
                }
                true
            },
            |s| {
                // Live lines, as cpusage prints them; JSON waits for the end.
                if !a.json.on && write_error.is_none() {
                    let mut line = format!("{}\n", s.all);
                    if a.per_cpu {
                        for (c, u) in &s.cpus {
                            line.push_str(&format!("  cpu{c} {u}\n"));
                        }
                    }
                    if let Err(e) = out.write_all(line.as_bytes()).and_then(|_| out.flush()) {
                        write_error = Some(e);
                    }
                }
            },
        )
        .context("reading /proc/stat")
        .map_err(Fatal::runtime)?;
    if let Some(c) = child.as_mut() {
        if child_status.is_none() {
            child_status = Some(stop_child(c).map_err(Fatal::runtime)?);
        }
    }
    if let Some(e) = write_error {
        return Err(Fatal::runtime(anyhow!(e).context("writing the output")));
    }

    let report = Report::new(a.interval, samples, a.limit, a.trim);
    let text = if a.json.on {
        serde_json::to_string_pretty(&report).map_err(Fatal::runtime)? + "\n"
    } else {
        report.format_summary()
    };
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .context("writing the output")
        .map_err(Fatal::runtime)?;

    match child_status {
        Some(status) if !status.success() => Err(Fatal {
            code: status.code().map_or(1, |c| c.clamp(1, 255) as u8),
            error: anyhow!("`{}` exited with {status}", a.command.join(" ")),
        }),
        _ => Ok(()),
    }
}

/// We were told to stop while the command still runs: pass SIGTERM on (Ctrl-C already reached it through
/// the terminal's process group) and wait for it.
fn stop_child(c: &mut Child) -> io::Result<std::process::ExitStatus> {
    // SAFETY: kill has no memory preconditions; the pid is our own child, not yet waited for.
    unsafe {
        libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
    }
    c.wait()
}
