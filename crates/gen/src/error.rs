//! Why a run (generated or replayed) could not start or had to end.

/// Why a run could not start or had to end.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The options do not work (the message says what to change).
    #[error("{0}")]
    Options(String),
    /// A system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and a hint.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused an XDP step (the message says why and what to do).
    #[error("{0}")]
    Xdp(String),
    /// The capture file to replay could not be read.
    #[error("replay: {0}")]
    Replay(#[from] store::StoreError),
}
