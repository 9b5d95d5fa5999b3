//! TICKET header records (seed 001): the batch format with its authentication, the probe's senders,
//! the collector and the merge of overlapping probes. The record itself lives in `wire::record`.

pub mod parquet_out;
pub mod spool;
pub mod store;

pub mod batch;
pub mod collect;
pub mod dedup;
pub mod probe;
pub mod replay;

pub use batch::{open, Batch, BatchBuilder, BatchError, BatchView, Header, Key, KeyError};
pub use replay::{Gap, Rejected, ReplayGuard};
