//! `ringcap generate`: man pages and shell completions from the clap definitions, so they never drift from
//! the flags (`make install` writes them).

use anyhow::Context;
use clap::{CommandFactory, Subcommand};
use std::path::{Path, PathBuf};

use crate::cli::Cli;
use crate::Fatal;

#[derive(Subcommand, Debug)]
pub enum GenerateWhat {
    /// One man page per command into DIR: ringcap.1, ringcap-capture.1, …
    Man {
        /// Output directory (created if missing).
        dir: PathBuf,
    },
    /// The completion script of SHELL into DIR (ringcap.bash, _ringcap, ringcap.fish, …).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
        /// Output directory (created if missing).
        dir: PathBuf,
    },
}

pub fn run(what: GenerateWhat) -> Result<(), Fatal> {
    let mut cmd = Cli::command();
    let create = |dir: &Path| {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {}", dir.display()))
            .map_err(Fatal::runtime)
    };
    match what {
        GenerateWhat::Man { dir } => {
            create(&dir)?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))
                .map_err(Fatal::runtime)
        }
        GenerateWhat::Completions { shell, dir } => {
            create(&dir)?;
            clap_complete::generate_to(shell, &mut cmd, "ringcap", &dir)
                .with_context(|| format!("cannot write completions into {}", dir.display()))
                .map_err(Fatal::runtime)
                .map(drop)
        }
    }
}
