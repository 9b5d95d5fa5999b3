//! Errors of the store crate: each message says what went wrong and what to do.

use std::io;
use std::path::PathBuf;

/// Every failure the store crate reports.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Bad writer options (caught before anything is written).
    #[error("invalid writer option: {0}")]
    Config(String),

    /// The output path is a symbolic link: never written through (it could point anywhere).
    #[error(
        "{path} is a symbolic link: ringcap does not write capture files through one (it could point \
         at any file); remove it or give the real path"
    )]
    Symlink { path: PathBuf },

    /// The output could not be opened.
    #[error("cannot create {path}: {source} (check the directory exists and is writable)")]
    Create { path: PathBuf, source: io::Error },

    /// A file could not be created in an output directory (found at start).
    #[error(
        "cannot create files in {dir}: {source} (check the directory exists and is writable by the user \
         ringcap runs as: with -Z USER, by USER)"
    )]
    DirNotWritable { dir: PathBuf, source: io::Error },

    /// A new file could not be given the `--group` (it was removed again); the message names the
    /// file, the group and what to do.
    #[error("{source}")]
    Group { path: PathBuf, source: io::Error },

    /// The file system ran out of space; the file was cut after its last whole packet.
    #[error(
        "disk full on {path} after {} written ({packets} packets kept, file cut after the last whole packet): \
         free space or use --disk-budget",
        units::bytes(*written)
    )]
    DiskFull {
        path: PathBuf,
        written: u64,
        packets: u64,
    },

    /// Any other write error; the file was cut after its last whole packet where possible.
    #[error(
        "write to {path} failed after {}: {source} ({packets} packets kept){hint}",
        units::bytes(*written)
    )]
    Write {
        path: PathBuf,
        written: u64,
        packets: u64,
        source: io::Error,
        hint: &'static str,
    },

    /// An I/O error while opening or reading an input file.
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },

    /// The input is not a capture file this crate understands.
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
}

impl StoreError {
    /// Builds a `Format` error.
    pub(crate) fn format(path: &std::path::Path, reason: impl Into<String>) -> Self {
        StoreError::Format {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}
