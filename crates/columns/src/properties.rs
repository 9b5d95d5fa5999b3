//! The writer properties every table is written with.

use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;

use crate::col;

/// Writer properties of every table (measured on `ringcap convert`, see BENCHMARKS.md): ZSTD pages,
/// statistics per page and chunk, dictionaries only where values repeat, delta encoding for the
/// growing columns; `footer` goes into the file's key-value metadata. Rules name columns, so a
/// table that reuses a name (the flow table's `file`, `vlan`) is written as the others are.
pub fn writer_properties(level: ZstdLevel, footer: Vec<KeyValue>) -> WriterPropertiesBuilder {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_statistics_enabled(EnabledStatistics::Page)
        // 8 Ki values per call into each column writer instead of 1 Ki: less per-call overhead
        // (page-size checks, statistics, level encoding); pages of at most 64 Ki rows keep the
        // page index fine enough for time-range queries and make fewer, larger ZSTD frames.
        .set_write_batch_size(8192)
        .set_data_page_row_count_limit(1 << 16)
        .set_created_by(format!("ringcap {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(footer))
        // Dictionaries cost a hash lookup per value. They pay where values repeat from a set of up to
        // a few thousand (addresses, MACs, lengths: bit-packed indices hand ZSTD a third of the
        // bytes, which saves more than the lookups cost: -7 % CPU with the next rule, 5 % smaller).
        // Hashing every timestamp, hash or offset would cost time for nothing, and near-constant
        // fields (link type, ethertype, IP version, TTL, protocol, header lengths, probe and
        // stream) are cheaper as plain values that ZSTD squeezes to almost nothing.
        .set_dictionary_enabled(false);
    for c in [
        col::WIRE_LEN,
        col::CAP_LEN,
        col::SRC_MAC,
        col::DST_MAC,
        col::VLAN,
        col::SRC_IP4,
        col::DST_IP4,
        col::IP_LEN,
        col::TCP_FLAGS,
        col::UDP_LEN,
        col::ICMP_TYPE,
        col::ICMP_CODE,
        col::FILE,
    ] {
        b = b.set_column_dictionary_enabled(ColumnPath::from(c), true);
    }
    // The flow hash is random by design: ZSTD would spend time on it and save nothing.
    b = b.set_column_compression(ColumnPath::from(col::FLOW_HASH), Compression::UNCOMPRESSED);
    for c in [col::TS, col::OFFSET] {
        b = b.set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED);
    }
    b
}
