//! `traffic = "synth:..."` runs: the trace is written once per (shape, rate, packets, seed) into the output
//! directory's `traces/` with `ringcap synth`, then each run sends it with `ringcap replay` at its recorded
//! timing from the testbed's sending namespace. The offered load is still the receiving interface's counters;
//! replay's `--json` report is the generator's count and so the cross-check.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::bed::Bed;
use crate::plan::{Plan, Rate, Run, SynthTraffic, Traffic};
use testbed::Side;

/// The run's synth shape and packet rate (None: the run sends `ringcap gen`'s stream).
fn synth_of(run: &Run) -> Option<(&SynthTraffic, f64)> {
    match (&run.setup.traffic, run.setup.rate) {
        (Traffic::Synth(t), Rate::Pps(pps)) => Some((t, pps)),
        // Validated: synth needs a rate_pps level.
        _ => None,
    }
}

/// Where the run's trace is: one file per traffic level, rate, packet count and seed, so reruns and the
/// other methods of a point replay the very same packets.
pub fn trace_path(out_dir: &Path, plan: &Plan, run: &Run) -> Option<PathBuf> {
    let (_, pps) = synth_of(run)?;
    let level = run
        .levels
        .iter()
        .chain(&plan.fixed)
        .find(|(k, _)| k == "traffic")
        .map_or("synth", |(_, v)| v.as_str());
    let name: String = level
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    Some(out_dir.join("traces").join(format!(
        "{name}-{pps}pps-{}pkts-seed{}.pcap",
        plan.packets, plan.seed
    )))
}

/// Write the run's trace unless an earlier run did: `plan.packets` at the run's rate, so its duration is
/// packets / pps, full frames (replay sends what the file holds). Ok(None) for `gen` runs.
pub fn write_trace(
    ringcap: &Path,
    out_dir: &Path,
    plan: &Plan,
    run: &Run,
) -> Result<Option<PathBuf>, String> {
    let (Some((shape, pps)), Some(path)) = (synth_of(run), trace_path(out_dir, plan, run)) else {
        return Ok(None);
    };
    if path.exists() {
        return Ok(Some(path));
    }
    let dir = path.parent().unwrap_or(out_dir);
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // Written beside and renamed, so an interrupted write never leaves a short trace to be reused.
    let partial = path.with_extension("pcap.partial");
    let duration_us = (plan.packets as f64 / pps * 1e6).round().max(1.0) as u64;
    let out = Command::new(ringcap)
        .args(["synth", "-q", "-w"])
        .arg(&partial)
        .args(["--pps", &pps.to_string()])
        .args(["--duration", &format!("{duration_us}us")])
        .args(["--seed", &plan.seed.to_string()])
        .args(shape.synth_args())
        .output()
        .map_err(|e| format!("cannot run ringcap synth: {e}"))?;
    if !out.status.success() {
        let _ = fs::remove_file(&partial);
        return Err(format!(
            "ringcap synth failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    fs::rename(&partial, &path).map_err(|e| format!("cannot rename {}: {e}", partial.display()))?;
    Ok(Some(path))
}

/// `ringcap replay TRACE` on the testbed's sending veth, pinned to the generator's CPU, with its report.
pub fn replay_command(bed: &Bed, ringcap: &Path, trace: &Path, gen_cpu: usize) -> Option<Command> {
    let Bed::Testbed(tb) = bed else {
        // Validated: synth traffic is for the testbed.
        return None;
    };
    let mut c = tb.command(Side::Tx, &ringcap.to_string_lossy());
    c.arg("replay").arg(trace).args([
        "-i",
        &tb.tx_if,
        "--cpu",
        &gen_cpu.to_string(),
        "--json",
        "-q",
    ]);
    Some(c)
}
