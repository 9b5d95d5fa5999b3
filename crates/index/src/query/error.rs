//! Why a query gave no whole answer. A file that could not be read whole is not one of these: its
//! [`FileReport`](super::FileReport) says why and the other files' packets are still given, as
//! `tcpdump -r` gives each file's.

use std::io;

/// What stopped a query, for its caller to map: a command line to an exit code, a server to a status.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The expression or a time term is not understood; nothing was read.
    #[error("{0}")]
    Expression(String),
    /// libpcap refuses the filter for a link type of the files (libpcap's words, as `tcpdump -r`
    /// says them); nothing was read.
    #[error("{0}")]
    Filter(String),
    /// The deadline passed: what was given is incomplete.
    #[error("the query ran past its time limit; the result is incomplete")]
    TimedOut,
    /// The sink refused a packet (a reader gone, a full disk): the query stopped there.
    #[error("{0}")]
    Sink(#[source] io::Error),
}

impl QueryError {
    /// Whether the query itself is wrong (the user's to fix), not the run.
    pub fn is_refusal(&self) -> bool {
        matches!(self, QueryError::Expression(_) | QueryError::Filter(_))
    }
}
