//! `ringcap collect` and `ringcap dedup`: header-record collectors (issue 7). Being written.

use crate::Fatal;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CollectArgs {
    /// Address to listen on, e.g. tcp://0.0.0.0:5400 or udp://0.0.0.0:5400.
    #[arg(long)]
    pub listen: Vec<String>,
}

#[derive(Args, Debug)]
pub struct DedupArgs {
    /// Collector output directories.
    pub dirs: Vec<PathBuf>,
}

pub fn run_collect(_a: CollectArgs) -> Result<(), Fatal> {
    Err(Fatal::usage(anyhow::anyhow!("ringcap collect is not built yet")))
}

pub fn run_dedup(_a: DedupArgs) -> Result<(), Fatal> {
    Err(Fatal::usage(anyhow::anyhow!("ringcap dedup is not built yet")))
}
