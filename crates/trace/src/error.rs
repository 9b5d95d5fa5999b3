//! Errors that stop a conversion or an analysis (per-input problems are reported, not raised).

use std::path::PathBuf;

/// A fatal error, naming the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The request cannot be carried out as given.
    #[error("{0}")]
    Usage(String),
    /// Writing output failed (disk full, permissions).
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Reading an input failed.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The Parquet library refused a file.
    #[error("{}: {source}", path.display())]
    Parquet {
        path: PathBuf,
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// A Parquet file lacks a column the analysis needs.
    #[error("{}: {what} (is it a table written by `ringcap convert`?)", path.display())]
    Schema { path: PathBuf, what: String },
}
