//! Why a query gave no whole answer ([`QueryError`]), and why one file could not be read whole
//! ([`FileError`]). A file that could not be read whole is not a [`QueryError`]: its
//! [`FileReport`](super::FileReport) says why and the other files' packets are still given, as
//! `tcpdump -r` gives each file's.

use std::io;
use std::path::PathBuf;

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

/// Why some or all of one file's packets are missing from a result (its report's `error`). The
/// other files' packets are still given, as `tcpdump -r` gives each file's.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be opened or read (the system's words).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The capture reader's words: a header it refuses, a frame that does not decode, a record
    /// cut short.
    #[error("{0}")]
    Read(#[from] store::StoreError),
    /// A record the index names is not in the file as the index says.
    #[error("{0}: the index does not match the file; run `ringcap index`")]
    IndexMismatch(String),
    /// libpcap refuses the filter for this file's link type (libpcap's words).
    #[error("{0}")]
    Filter(String),
    /// `--name` could not choose the file's flows.
    #[error("{0}")]
    Names(String),
    /// A packet came before the file said its link type (a pcapng packet before any interface).
    #[error("the file's link type is not known before its packets")]
    LinkUnknown,
    /// Damaged packet data, read as tcpdump reads it: the first damage ends the file, what lay
    /// there (and, in a scan, after it) is missing.
    #[error(
        "damaged {offset} bytes into its packet data ({reason}{}){}: what lay there is missing{}",
        skipped_bytes(*.skipped),
        problems_in_all(*.problems),
        if *.compressed { INDEX_READS_ON } else { "" }
    )]
    Damaged {
        offset: u64,
        reason: String,
        /// Bytes the reader stepped over.
        skipped: u64,
        /// Problems the reader counted in all.
        problems: u64,
        /// A compressed file scanned whole: its index can step over a frame that does not decode.
        compressed: bool,
    },
    /// Compressed frames that do not decode were stepped over (frames are independent); the
    /// other frames were read.
    #[error(
        "{frames} damaged frame(s) skipped ({bytes} bytes; the first at file offset {offset}: \
         {why}): their packets are missing, the other frames were read"
    )]
    FramesSkipped {
        frames: u64,
        bytes: u64,
        offset: u64,
        why: String,
    },
    /// The query's deadline passed while this file was read.
    #[error("the query ran past its time limit")]
    TimedOut,
    /// The query was stopped (its result was complete, or its reader went away).
    #[error("stopped")]
    Stopped,
}

const INDEX_READS_ON: &str = "; `ringcap index` on the file leaves frames that do not decode out \
    and indexes the rest (if its frames are cut at packets, as ringcap's are), so queries read on";

fn skipped_bytes(n: u64) -> String {
    match n {
        0 => String::new(),
        n => format!(", {n} bytes skipped"),
    }
}

fn problems_in_all(n: u64) -> String {
    match n {
        0 | 1 => String::new(),
        n => format!(" ({n} problems in all)"),
    }
}
