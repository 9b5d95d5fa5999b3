//! TICKET header records (seed 001): the batch format with its authentication, the probe's senders,
//! the collector and the merge of overlapping probes. The record itself lives in `wire::record`.

pub mod archive;
pub mod parquet_out;
pub mod partition;
pub mod spool;

pub mod antireplay;
pub mod auth;
pub mod batch;
pub mod collect;
pub mod dedup;
pub mod kafka;
pub mod probe;
pub mod tls;

pub use antireplay::{Gap, Rejected, ReplayGuard};
pub use auth::{KeySet, Session};
pub use batch::{open, Batch, BatchBuilder, BatchError, BatchView, Header, Key, KeyError};
