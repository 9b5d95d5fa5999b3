//! `ringcap bench` and `ringcap report`: measurement plans (issue 5). Being written.

use crate::Fatal;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The plan (TOML).
    pub plan: PathBuf,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A bench output directory.
    pub dir: PathBuf,
}

pub fn run_bench(_a: BenchArgs) -> Result<(), Fatal> {
    Err(Fatal::usage(anyhow::anyhow!("ringcap bench is not built yet")))
}

pub fn run_report(_a: ReportArgs) -> Result<(), Fatal> {
    Err(Fatal::usage(anyhow::anyhow!("ringcap report is not built yet")))
}
