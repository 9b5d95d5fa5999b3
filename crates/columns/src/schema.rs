//! The tables' Arrow schemas, and the types every table spells the same way.

use std::sync::Arc;

use arrow_array::builder::PrimitiveBuilder;
use arrow_array::types::{Int32Type, TimestampNanosecondType};
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::col;

/// Every timestamp is UTC: DuckDB and pyarrow show it as such, whatever the reader's zone.
const TIME_ZONE: &str = "UTC";

/// The type of every timestamp column: nanoseconds since the epoch, UTC.
pub fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some(TIME_ZONE.into()))
}

/// A builder of a [`ts_type`] column sized for `capacity` rows.
pub fn ts_builder(capacity: usize) -> PrimitiveBuilder<TimestampNanosecondType> {
    PrimitiveBuilder::with_capacity(capacity).with_timezone(TIME_ZONE)
}

/// The type of a `file` column: dictionary encoded, so a batch stores its file's name once.
pub fn file_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// A `file` column of `rows` rows that all name `file`.
pub fn file_column(file: &str, rows: usize) -> ArrayRef {
    let keys = Int32Array::from(vec![0i32; rows]);
    let values: ArrayRef = Arc::new(StringArray::from(vec![file]));
    Arc::new(DictionaryArray::<Int32Type>::new(keys, values))
}

/// The Arrow schema of the packet table.
pub fn packet_schema() -> SchemaRef {
    use DataType::*;
    let f = |name: &str, ty: DataType, nullable: bool| Field::new(name, ty, nullable);
    Arc::new(Schema::new(vec![
        f(col::TS, ts_type(), false),
        f(col::WIRE_LEN, UInt32, false),
        f(col::CAP_LEN, UInt32, false),
        f(col::LINKTYPE, UInt16, false),
        f(col::SRC_MAC, UInt64, true),
        f(col::DST_MAC, UInt64, true),
        f(col::ETHERTYPE, UInt16, true),
        f(col::VLAN, UInt16, true),
        f(col::IP_VERSION, UInt8, true),
        f(col::SRC_IP4, UInt32, true),
        f(col::DST_IP4, UInt32, true),
        f(col::SRC_IP6, FixedSizeBinary(16), true),
        f(col::DST_IP6, FixedSizeBinary(16), true),
        f(col::IP_LEN, UInt32, true),
        f(col::TTL, UInt8, true),
        f(col::PROTOCOL, UInt8, true),
        f(col::SRC_PORT, UInt16, true),
        f(col::DST_PORT, UInt16, true),
        f(col::TCP_FLAGS, UInt16, true),
        f(col::UDP_LEN, UInt16, true),
        f(col::ICMP_TYPE, UInt8, true),
        f(col::ICMP_CODE, UInt8, true),
        f(col::FLOW_HASH, UInt64, true),
        f(col::FILE, file_type(), false),
        f(col::OFFSET, UInt64, false),
        // packets/1.1: the tunnel a row's packet came in (the columns above describe what it carried).
        f(col::TUNNEL, Utf8, true),
        f(col::TUNNEL_ID, UInt32, true),
        f(col::TUNNEL_A, Utf8, true),
        f(col::TUNNEL_B, Utf8, true),
        f(col::TUNNEL_PROBLEM, Utf8, true),
    ]))
}

/// The Arrow schema of a header-record file (docs/records.md): the packet table's types where the
/// fields overlap. Columns that do not apply to a record are null, as in the packet table.
pub fn record_schema() -> SchemaRef {
    use DataType::*;
    let f = |name: &str, ty: DataType, nullable: bool| Field::new(name, ty, nullable);
    Arc::new(Schema::new(vec![
        f(col::TS, ts_type(), false),
        f(col::WIRE_LEN, UInt32, false),
        f(col::SRC_MAC, UInt64, false),
        f(col::DST_MAC, UInt64, false),
        f(col::ETHERTYPE, UInt16, false),
        f(col::VLAN, UInt16, true),
        f(col::IP_VERSION, UInt8, true),
        f(col::SRC_IP4, UInt32, true),
        f(col::DST_IP4, UInt32, true),
        f(col::SRC_IP6, FixedSizeBinary(16), true),
        f(col::DST_IP6, FixedSizeBinary(16), true),
        f(col::IP_LEN, UInt32, true),
        f(col::IP_HEADER_LEN, UInt8, true),
        f(col::PROTOCOL, UInt8, true),
        f(col::SRC_PORT, UInt16, true),
        f(col::DST_PORT, UInt16, true),
        f(col::TCP_FLAGS, UInt16, true),
        f(col::TCP_HEADER_LEN, UInt8, true),
        f(col::UDP_LEN, UInt16, true),
        f(col::ICMP_TYPE, UInt8, true),
        f(col::ICMP_CODE, UInt8, true),
        f(col::PROBE_ID, UInt64, false),
        f(col::STREAM_ID, UInt32, false),
        // records/1.1: as in the packet table.
        f(col::TUNNEL, Utf8, true),
        f(col::TUNNEL_ID, UInt32, true),
        f(col::TUNNEL_A, Utf8, true),
        f(col::TUNNEL_B, Utf8, true),
        f(col::TUNNEL_PROBLEM, Utf8, true),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_share_the_packet_tables_types() {
        let packets = packet_schema();
        let mut shared = 0;
        for f in record_schema().fields() {
            if let Ok(p) = packets.field_with_name(f.name()) {
                assert_eq!(p.data_type(), f.data_type(), "{}", f.name());
                shared += 1;
            }
        }
        assert_eq!(
            shared,
            record_schema().fields().len() - 4,
            "all but the four record-only columns"
        );
    }
}
