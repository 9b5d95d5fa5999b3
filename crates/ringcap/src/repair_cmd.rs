//! `ringcap repair FILE...`: cut damaged or interrupted capture files (plain, .zst, .lz4) back to
//! their last whole packet, and give ringcap's hidden `.<name>.partial` files their final name.

use anyhow::anyhow;
use clap::Args;
use std::path::PathBuf;

use crate::Fatal;

#[derive(Args, Debug, Clone)]
pub struct RepairArgs {
    /// Capture files to repair (pcap/pcapng, plain or zstd/lz4 compressed).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
}

pub fn run(a: RepairArgs) -> Result<(), Fatal> {
    let mut failed = 0;
    for f in &a.files {
        match store::repair(f) {
            Ok(r) => {
                let what = if r.rewritten {
                    "re-encoded to its last whole packet"
                } else if r.truncated() {
                    "cut after its last whole packet"
                } else {
                    "already whole"
                };
                let mut line = format!(
                    "{}: {what}: {} packets kept, {} → {}",
                    f.display(),
                    r.packets,
                    units::bytes(r.original_len),
                    units::bytes(r.new_len)
                );
                if let Some(n) = r.frames {
                    line.push_str(&format!(", {n} whole frames"));
                }
                if r.packets_after_damage > 0 {
                    line.push_str(&format!(
                        ", {} packets after the damage dropped",
                        r.packets_after_damage
                    ));
                }
                if let Some(d) = &r.first_damage {
                    line.push_str(&format!(" (damage at {d})"));
                }
                if let Some(to) = &r.renamed_to {
                    line.push_str(&format!("; renamed to {}", to.display()));
                }
                println!("{line}");
            }
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
