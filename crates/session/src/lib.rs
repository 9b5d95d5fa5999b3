//! The capture session: what `ringcap capture` does, as a library.
//!
//! Sources ([`capture::BatchSource`]: the ring, AF_XDP sockets, the copy source, packets in memory) each run on
//! their own thread (pinned when asked) and hand every batch to each [`Sink`]'s per-thread [`Lane`]; a
//! [`Stop`] (SIGINT/SIGTERM, `--duration`, `-c`, a failed sink) ends the threads after they drained what the
//! kernel had already delivered; [`Session::run`] returns one [`Report`]. Counters stay with their owners: the
//! sources' [`capture::Counters`], the writer's [`store::WriterCounters`], the probe's stats.
//!
//! ```text
//! source ─► Batch ─► lane of sink 1 (file writer: store::Producer per thread, no lock per block)
//!                 ├► lane of sink 2 (header records: records::probe::Batcher)
//!                 └► lane of sink 3 (line printer | --load work | drop-all counter)
//! ```
//!
//! A new sink implements [`Sink`] (made once, finished once after every thread ended) and [`Lane`] (one per
//! capture thread, gets `&Batch` and a tick); nothing else changes.

pub mod cutoff;
pub mod decap;
pub mod merge;
mod run;
mod sink;
pub mod sinks;
mod stop;

pub use cutoff::{Cutoff, CutoffConfig, CutoffStats};
pub use decap::{Decap, DecapConfig, DecapStats};
pub use merge::{MergeConfig, Sll2Interface, SLL2_HEADER_LEN};
pub use run::{drop_meter, Options, Report, Session};
pub use sink::{InterfaceTotals, Lane, Sink, SinkReport, Totals};
pub use stop::Stop;
