//! index: the time machine. A packet index next to every capture file (built off the hot path by
//! the writer's indexer thread, or by `ringcap index` for any pcap/pcapng file), and queries in
//! tcpdump syntax plus time that return exactly what `tcpdump -r` would, reading only the frames
//! and records the index names. The layout and the bounds are in `docs/index.md`.

pub mod build;
pub mod expr;
pub mod file;
pub mod files;
pub mod flow_rows;
pub mod flows;
pub mod key;
pub mod live;
pub mod names;
pub mod priority;
pub mod query;
pub mod ranges;
pub mod scan;
#[cfg(test)]
mod testdata;
pub mod tunnel_term;

pub use build::Builder;
pub use expr::{parse_query, Narrow, Query};
pub use file::{IndexError, IndexFile};
pub use files::{capture_files, is_capture_name, is_partial_capture, ListError};
pub use flow_rows::{read_flow_rows, FlowRow};
pub use flows::{check_flow_table, check_flow_table_footer, flows_path, FlowStat, FlowTableError};
pub use live::{index_path, LiveIndexer};
pub use names::{FlowNames, NamePattern};
pub use query::{
    compile_query, prepare_query, Feed, FileError, FileReport, Hit, How, Matcher, Priority,
    Progress, QueryError, QueryOptions, ScanWhy,
};
pub use ranges::{RangeFile, ReadAt};
pub use scan::{index_file, Indexed};
pub use tunnel_term::{TunnelTerm, TunnelWord};
/// Times as `after`/`before` take them (`units::time`); here for the query code.
pub use units::time::parse_time;
