//! `ringcap repair FILE...`: keep every whole packet of damaged or interrupted capture files
//! (plain, .zst, .lz4) and give ringcap's hidden `.<name>.partial` files their final name.

use anyhow::anyhow;
use clap::Args;
use std::path::PathBuf;

use crate::Fatal;

#[derive(Args, Debug, Clone)]
pub struct RepairArgs {
    /// Capture files to repair (pcap/pcapng, plain or zstd/lz4 compressed): ringcap's
    /// `.NAME.partial` files; others only with --force.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Change nothing: say what would be done.
    #[arg(long)]
    pub dry_run: bool,
    /// Also repair files not named `.NAME.partial` (finished captures, other tools' files).
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: RepairArgs) -> Result<(), Fatal> {
    let opts = store::RepairOptions {
        dry_run: a.dry_run,
        force: a.force,
    };
    let mut failed = 0;
    for f in &a.files {
        match store::repair(f, opts) {
            Ok(r) => println!("{}: {}", f.display(), describe(&r)),
            Err(e) => {
                eprintln!("ringcap: repair {}: {e}", f.display());
                failed += 1;
            }
        }
    }
    if failed > 0 {
        return Err(Fatal::runtime(anyhow!(
            "{failed} of {} file(s) could not be repaired",
            a.files.len()
        )));
    }
    Ok(())
}

/// One line: what was (or, with --dry-run, would be) done.
fn describe(r: &store::RepairReport) -> String {
    let (would, kept, cut, renamed) = if r.dry_run {
        (
            "dry run, nothing changed: would keep",
            "would be",
            "would cut",
            "would rename",
        )
    } else {
        ("kept", "", "cut", "renamed")
    };
    let mut line = if r.changed() {
        format!(
            "{would} {} whole packets, {cut} {} damaged region(s) ({}), {} → {}",
            r.packets,
            r.regions,
            left_out(r),
            units::bytes(r.original_len),
            units::bytes(r.new_len)
        )
    } else {
        format!("already whole: {} packets", r.packets)
    };
    if r.rewritten && !r.dry_run {
        line.push_str(" (written anew)");
    } else if r.rewritten {
        line.push_str(&format!(" ({kept} written anew)"));
    }
    if let Some(n) = r.frames {
        line.push_str(&format!(", {n} whole frames"));
    }
    if r.undecodable {
        line.push_str(
            ", a large frame cannot be decoded past the damage: the rest of it is lost, and what \
             was kept of it is unverified (its checksum covers the whole frame)",
        );
    }
    if r.suspect_frames > 0 {
        line.push_str(&format!(
            ", {} frame(s) kept that fail their checksum (the damage is somewhere in their data)",
            r.suspect_frames
        ));
    }
    if let Some(d) = &r.first_damage {
        line.push_str(&format!(" (first damage at {d})"));
    }
    if let Some(to) = &r.renamed_to {
        line.push_str(&format!("; {renamed} to {}", to.display()));
    }
    line
}

/// What the damaged regions held, as far as it is known: "12.0 KiB of decompressed data (1 frame
/// that does not decode, 4.1 KiB compressed), 17 packets". Every part left out is counted, so the
/// line never says 0 B while packets went.
fn left_out(r: &store::RepairReport) -> String {
    let of = if r.compression == store::Compression::None {
        "file"
    } else {
        "decompressed data"
    };
    let mut parts = Vec::new();
    parts.push(match (r.dropped_bytes, r.dropped_bytes_unknown) {
        (0, true) => format!("an unknown amount of {of}"),
        (n, true) => format!("{} and more of {of}", units::bytes(n)),
        (n, false) => format!("{} of {of}", units::bytes(n)),
    });
    if r.dropped_compressed > 0 {
        parts.push(format!(
            "{} compressed frame(s) that do not decode or verify, {} compressed",
            r.lost_frames,
            units::bytes(r.dropped_compressed)
        ));
    } else if r.lost_frames > 0 {
        parts.push(format!(
            "{} compressed frame(s) that do not decode past the damage",
            r.lost_frames
        ));
    }
    parts.push(match (r.lost_packets, r.lost_packets_exact) {
        (n, true) => format!("{n} packets"),
        (0, false) => "packets in it: unknown".to_string(),
        (n, false) => format!("at least {n} packets"),
    });
    parts.join(", ")
}
