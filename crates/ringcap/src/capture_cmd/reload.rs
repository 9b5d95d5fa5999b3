//! SIGHUP with `--config`: read the file again and apply what can change without losing a packet (the disk
//! budget and the newest files it keeps, the stats interval, quiet); every other key that changed is named
//! as needing a restart. A file that no longer parses is refused whole and the running settings stay.
//! SIGHUP still starts a new file too (logrotate's convention; the writer listens for it itself).

use std::ffi::OsString;
use std::sync::Arc;

use signal_hook::consts::SIGHUP;
use signal_hook::iterator::Signals;

use crate::capture_stats::LiveStats;
use crate::cli::CaptureArgs;
use crate::config::{self, FileSettings};

/// What a reload can reach in the running capture.
pub struct Reloadable {
    pub retention: Option<store::LiveRetention>,
    pub stats: Arc<LiveStats>,
}

/// Keys applied while running; the others need a restart.
const LIVE_KEYS: [&str; 4] = ["disk_budget", "keep_newest", "stats_interval", "quiet"];

/// Starts the thread that reloads on SIGHUP (only with `--config`).
pub fn spawn(a: &CaptureArgs, live: Reloadable) -> std::io::Result<()> {
    let Some(path) = a.config.clone() else {
        return Ok(());
    };
    let args = crate::cli::with_default_subcommand(std::env::args_os().collect());
    let (started, mut running) = config::reread(&args).map_err(std::io::Error::other)?;
    let mut signals = Signals::new([SIGHUP])?;
    std::thread::Builder::new()
        .name("reload".into())
        .spawn(move || {
            for _ in signals.forever() {
                match reload(&args, &started, &running, &live) {
                    Ok((r, lines)) => {
                        running = r;
                        for l in lines {
                            log::info!("reload of {}: {l}", path.display());
                        }
                    }
                    Err(e) => log::warn!(
                        "reload of {} refused, the running settings stay: {e}",
                        path.display()
                    ),
                }
            }
        })?;
    Ok(())
}

/// One reload: the settings now running, and one line per change (applied, or needing a restart: those
/// are compared with the file the capture started with, so each reload names them again).
fn reload(
    args: &[OsString],
    old: &FileSettings,
    running: &CaptureArgs,
    live: &Reloadable,
) -> Result<(CaptureArgs, Vec<String>), String> {
    let (new, mut next) = config::reread(args)?;
    let mut lines = Vec::new();
    let mut changed: Vec<&String> = old
        .keys
        .keys()
        .chain(new.keys.keys())
        .filter(|id| old.keys.get(*id) != new.keys.get(*id) && !LIVE_KEYS.contains(&id.as_str()))
        .collect();
    changed.sort();
    changed.dedup();
    for id in changed {
        let name = id.replace('_', "-");
        if new.overridden.contains(id) {
            lines.push(format!(
                "{name} changed, but the command line sets it: unchanged"
            ));
        } else {
            lines.push(format!(
                "{name} changed: needs a restart (the capture goes on as it started)"
            ));
        }
    }
    // Applied: what the live keys now say (a key removed from the file goes back to its default).
    if (next.disk_budget, next.keep_newest) != (running.disk_budget, running.keep_newest) {
        match &live.retention {
            Some(r) => {
                r.set(store::RetentionRules {
                    budget: next.disk_budget,
                    keep_newest: next.keep_newest,
                });
                lines.push(format!(
                    "disk budget now {} keeping the newest {} files (was {}, {})",
                    budget_text(next.disk_budget),
                    next.keep_newest,
                    budget_text(running.disk_budget),
                    running.keep_newest
                ));
            }
            None => {
                lines.push(
                    "disk-budget changed: it needs file mode (-C/-G/--out-dir) and a restart"
                        .into(),
                );
            }
        }
    }
    if next.stats_interval != running.stats_interval || next.quiet.on != running.quiet.on {
        live.stats.set(next.stats_interval, next.quiet.on);
        lines.push(format!(
            "stats every {} s{}",
            next.stats_interval,
            if next.quiet.on {
                " (quiet: none printed)"
            } else {
                ""
            }
        ));
    }
    if lines.is_empty() {
        lines.push("nothing changed".into());
    }
    // A budget that could not be applied keeps running as before: the next reload reports it again.
    if live.retention.is_none() {
        next.disk_budget = running.disk_budget;
        next.keep_newest = running.keep_newest;
    }
    Ok((next, lines))
}

fn budget_text(b: Option<store::Budget>) -> String {
    match b {
        None => "none".into(),
        Some(store::Budget::Bytes(n)) => units::bytes(n),
        Some(store::Budget::Percent(p)) => format!("{p} % of the file system"),
    }
}
