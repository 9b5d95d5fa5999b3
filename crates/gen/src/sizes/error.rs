//! Errors of the size model: each says what went wrong, where, and what to do.

use std::io;

/// Everything that can go wrong while reading inputs or building a size model.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// A line of a `sizes` or `dist` input could not be used.
    #[error("{file}:{line}: {msg}")]
    Parse {
        /// File name as given by the caller (`-` or `<stdin>` for standard input).
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line and how to fix it.
        msg: String,
    },
    /// An input held no packet size at all.
    #[error("{file}: no packet sizes found (the input is empty or holds only blank and # comment lines); give at least one size")]
    Empty {
        /// File name as given by the caller.
        file: String,
    },
    /// Reading an input failed.
    #[error("{file}: {source}")]
    Io {
        /// File name as given by the caller.
        file: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A trace could not be read or uses a link type we cannot find IP packets in.
    #[error("{file}: {msg}")]
    Trace {
        /// File name as given by the caller.
        file: String,
        /// What went wrong.
        msg: String,
    },
    /// A distribution spec such as `fixed:46` or `rfc6985:aaafg` is malformed.
    #[error("bad distribution {spec:?}: {msg}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What is wrong and what is accepted.
        msg: String,
    },
    /// A createDist parameter (ρ, N_ps, p_Ωbound, σ_bin) is out of range.
    #[error("bad size-model parameter: {0}")]
    Param(String),
    /// The model cannot be built from this histogram with these parameters.
    #[error("cannot build the size model: {0}")]
    Model(String),
}

/// Shorthand for results of this module.
pub type Result<T, E = DistError> = std::result::Result<T, E>;
