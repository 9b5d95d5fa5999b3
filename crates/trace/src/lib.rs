//! trace: capture files into columns and analyses over them (seed 002 §3.3, §6–7).
//!
//! [`convert()`] turns pcap/pcapng (plain, .gz, .zst, .lz4) into Parquet, one row per packet,
//! Hive-partitioned by hour, in parallel; [`analyze::analyze`] computes rate timelines,
//! burstiness, size distributions, traffic mix and a flow table from such a set. The table's
//! schema and builder are the `columns` crate's; column meanings and example SQL: docs/trace.md.

pub mod analyze;
mod convert;
mod error;

pub use analyze::{analyze, Analysis, AnalyzeOptions};
pub use convert::{
    convert, ConvertOptions, ConvertReport, InputReport, PartFile, Progress, Skipped,
};
pub use error::TraceError;
