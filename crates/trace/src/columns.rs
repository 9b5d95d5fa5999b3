//! The Parquet tables: the packet table of `ringcap convert` (its Arrow schema and a builder that
//! appends one parsed packet per row), the header-record table of `ringcap collect` (its schema; the
//! `records` crate fills it), and the writer properties both are written with.
//!
//! Types chosen for SQL and for speed:
//! - MAC addresses are `UInt64` (the 48-bit address as a big-endian number, so `02:00:00:00:00:01`
//!   is `0x020000000001`): one integer append per packet, cheap to group and compare. In DuckDB:
//!   `printf('%012x', src_mac)`.
//! - IPv4 addresses are `UInt32` in host order (`10.0.0.1` = 167772161); DuckDB shows them with
//!   `concat_ws('.', src_ip4 >> 24, (src_ip4 >> 16) & 255, (src_ip4 >> 8) & 255, src_ip4 & 255)`.
//! - IPv6 addresses are `FixedSizeBinary(16)` in network order, null for IPv4.
//! - `file` is dictionary encoded (one distinct value per input); `offset` is the byte offset of the
//!   packet's first captured byte in the decompressed input (the record header is just before it).
//! - Header records use the packet table's names and types where the fields overlap.

use std::sync::Arc;

use arrow_array::builder::{FixedSizeBinaryBuilder, PrimitiveBuilder};
use arrow_array::types::{
    Int32Type, TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;
use wire::{Headers, IpVersion};

use crate::flow::flow_hash;

/// Column names: the packet table's in schema order, then those only header records have.
pub mod col {
    pub const TS: &str = "ts";
    pub const WIRE_LEN: &str = "wire_len";
    pub const CAP_LEN: &str = "cap_len";
    pub const LINKTYPE: &str = "linktype";
    pub const SRC_MAC: &str = "src_mac";
    pub const DST_MAC: &str = "dst_mac";
    pub const ETHERTYPE: &str = "ethertype";
    pub const VLAN: &str = "vlan";
    pub const IP_VERSION: &str = "ip_version";
    pub const SRC_IP4: &str = "src_ip4";
    pub const DST_IP4: &str = "dst_ip4";
    pub const SRC_IP6: &str = "src_ip6";
    pub const DST_IP6: &str = "dst_ip6";
    pub const IP_LEN: &str = "ip_len";
    pub const TTL: &str = "ttl";
    pub const PROTOCOL: &str = "protocol";
    pub const SRC_PORT: &str = "src_port";
    pub const DST_PORT: &str = "dst_port";
    pub const TCP_FLAGS: &str = "tcp_flags";
    pub const UDP_LEN: &str = "udp_len";
    pub const ICMP_TYPE: &str = "icmp_type";
    pub const ICMP_CODE: &str = "icmp_code";
    pub const FLOW_HASH: &str = "flow_hash";
    pub const FILE: &str = "file";
    pub const OFFSET: &str = "offset";
    /// IP header length in bytes (IPv4 IHL*4; IPv6 40 + extension headers).
    pub const IP_HEADER_LEN: &str = "ip_header_len";
    /// TCP header length in bytes (TCP only).
    pub const TCP_HEADER_LEN: &str = "tcp_header_len";
    /// The probe that made the record.
    pub const PROBE_ID: &str = "probe_id";
    /// The probe's stream (one per probe process start).
    pub const STREAM_ID: &str = "stream_id";
}

/// The Arrow schema of the packet table.
pub fn packet_schema() -> SchemaRef {
    use DataType::*;
    let f = |name: &str, ty: DataType, nullable: bool| Field::new(name, ty, nullable);
    Arc::new(Schema::new(vec![
        f(
            col::TS,
            Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
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
        f(
            col::FILE,
            Dictionary(Box::new(Int32), Box::new(Utf8)),
            false,
        ),
        f(col::OFFSET, UInt64, false),
    ]))
}

/// The Arrow schema of a header-record file (docs/records.md): the packet table's types where the
/// fields overlap. Columns that do not apply to a record are null, as in the packet table.
pub fn record_schema() -> SchemaRef {
    use DataType::*;
    let f = |name: &str, ty: DataType, nullable: bool| Field::new(name, ty, nullable);
    Arc::new(Schema::new(vec![
        f(
            col::TS,
            Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
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
    ]))
}

/// Writer properties of both tables (measured on `ringcap convert`, see BENCHMARKS.md): ZSTD pages,
/// statistics per page and chunk, dictionaries only where values repeat, delta encoding for the
/// growing columns; `footer` goes into the file's key-value metadata.
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

/// A MAC address as the 48-bit big-endian number it spells.
#[inline]
fn mac_u64(m: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]])
}

/// Appends packets column by column; [`Self::finish`] turns them into one `RecordBatch`.
pub struct PacketColumns {
    ts: PrimitiveBuilder<TimestampNanosecondType>,
    wire_len: PrimitiveBuilder<UInt32Type>,
    cap_len: PrimitiveBuilder<UInt32Type>,
    linktype: PrimitiveBuilder<UInt16Type>,
    src_mac: PrimitiveBuilder<UInt64Type>,
    dst_mac: PrimitiveBuilder<UInt64Type>,
    ethertype: PrimitiveBuilder<UInt16Type>,
    vlan: PrimitiveBuilder<UInt16Type>,
    ip_version: PrimitiveBuilder<UInt8Type>,
    src_ip4: PrimitiveBuilder<UInt32Type>,
    dst_ip4: PrimitiveBuilder<UInt32Type>,
    src_ip6: FixedSizeBinaryBuilder,
    dst_ip6: FixedSizeBinaryBuilder,
    ip_len: PrimitiveBuilder<UInt32Type>,
    ttl: PrimitiveBuilder<UInt8Type>,
    protocol: PrimitiveBuilder<UInt8Type>,
    src_port: PrimitiveBuilder<UInt16Type>,
    dst_port: PrimitiveBuilder<UInt16Type>,
    tcp_flags: PrimitiveBuilder<UInt16Type>,
    udp_len: PrimitiveBuilder<UInt16Type>,
    icmp_type: PrimitiveBuilder<UInt8Type>,
    icmp_code: PrimitiveBuilder<UInt8Type>,
    flow_hash: PrimitiveBuilder<UInt64Type>,
    offset: PrimitiveBuilder<UInt64Type>,
    rows: usize,
    capacity: usize,
}

impl PacketColumns {
    /// Builders sized for `capacity` rows (they grow past it if needed).
    pub fn with_capacity(capacity: usize) -> PacketColumns {
        fn p<T: arrow_array::ArrowPrimitiveType>(n: usize) -> PrimitiveBuilder<T> {
            PrimitiveBuilder::with_capacity(n)
        }
        let n = capacity;
        PacketColumns {
            ts: p::<TimestampNanosecondType>(n).with_timezone("UTC"),
            wire_len: p(n),
            cap_len: p(n),
            linktype: p(n),
            src_mac: p(n),
            dst_mac: p(n),
            ethertype: p(n),
            vlan: p(n),
            ip_version: p(n),
            src_ip4: p(n),
            dst_ip4: p(n),
            // IPv6 is the minority on most links: start small, the builders grow.
            src_ip6: FixedSizeBinaryBuilder::with_capacity(n / 8, 16),
            dst_ip6: FixedSizeBinaryBuilder::with_capacity(n / 8, 16),
            ip_len: p(n),
            ttl: p(n),
            protocol: p(n),
            src_port: p(n),
            dst_port: p(n),
            tcp_flags: p(n),
            udp_len: p(n),
            icmp_type: p(n),
            icmp_code: p(n),
            flow_hash: p(n),
            offset: p(n),
            rows: 0,
            capacity,
        }
    }

    /// Rows appended since the last finish.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// No rows appended since the last finish.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends one packet.
    #[inline]
    pub fn push(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        cap_len: u32,
        linktype: u32,
        offset: u64,
        h: &Headers,
    ) {
        self.rows += 1;
        // Timestamps past 2262 do not fit i64 nanoseconds; they are clamped (no capture has them).
        self.ts.append_value(ts_ns.min(i64::MAX as u64) as i64);
        self.wire_len.append_value(wire_len);
        self.cap_len.append_value(cap_len);
        self.linktype
            .append_value(linktype.min(u16::MAX as u32) as u16);
        self.src_mac.append_option(h.src_mac.map(|m| mac_u64(m.0)));
        self.dst_mac.append_option(h.dst_mac.map(|m| mac_u64(m.0)));
        self.ethertype.append_option(h.ethertype);
        self.vlan.append_option(h.vlan_outer);
        match h.ip_version {
            Some(IpVersion::V4) => {
                self.ip_version.append_value(4);
                let a = &h.src_ip;
                let b = &h.dst_ip;
                self.src_ip4
                    .append_value(u32::from_be_bytes([a[0], a[1], a[2], a[3]]));
                self.dst_ip4
                    .append_value(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                self.src_ip6.append_null();
                self.dst_ip6.append_null();
            }
            Some(IpVersion::V6) => {
                self.ip_version.append_value(6);
                self.src_ip4.append_null();
                self.dst_ip4.append_null();
                // 16 bytes into a 16-wide builder cannot fail.
                let _ = self.src_ip6.append_value(h.src_ip);
                let _ = self.dst_ip6.append_value(h.dst_ip);
            }
            None => {
                self.ip_version.append_null();
                self.src_ip4.append_null();
                self.dst_ip4.append_null();
                self.src_ip6.append_null();
                self.dst_ip6.append_null();
            }
        }
        self.ip_len.append_option(h.ip_len);
        self.ttl.append_option(h.ttl);
        self.protocol.append_option(h.protocol);
        self.src_port.append_option(h.src_port);
        self.dst_port.append_option(h.dst_port);
        self.tcp_flags.append_option(h.tcp_flags.map(|f| f.0));
        self.udp_len.append_option(h.udp_len);
        self.icmp_type.append_option(h.icmp_type);
        self.icmp_code.append_option(h.icmp_code);
        self.flow_hash.append_option(flow_hash(h));
        self.offset.append_value(offset);
    }

    /// The rows so far as a batch (`file` names their input); the builders start over, empty.
    pub fn finish(&mut self, file: &Arc<str>) -> RecordBatch {
        let rows = std::mem::take(&mut self.rows);
        let keys = Int32Array::from(vec![0i32; rows]);
        let values: ArrayRef = Arc::new(StringArray::from(vec![file.as_ref()]));
        let file_col = DictionaryArray::<Int32Type>::new(keys, values);
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.wire_len.finish()),
            Arc::new(self.cap_len.finish()),
            Arc::new(self.linktype.finish()),
            Arc::new(self.src_mac.finish()),
            Arc::new(self.dst_mac.finish()),
            Arc::new(self.ethertype.finish()),
            Arc::new(self.vlan.finish()),
            Arc::new(self.ip_version.finish()),
            Arc::new(self.src_ip4.finish()),
            Arc::new(self.dst_ip4.finish()),
            Arc::new(self.src_ip6.finish()),
            Arc::new(self.dst_ip6.finish()),
            Arc::new(self.ip_len.finish()),
            Arc::new(self.ttl.finish()),
            Arc::new(self.protocol.finish()),
            Arc::new(self.src_port.finish()),
            Arc::new(self.dst_port.finish()),
            Arc::new(self.tcp_flags.finish()),
            Arc::new(self.udp_len.finish()),
            Arc::new(self.icmp_type.finish()),
            Arc::new(self.icmp_code.finish()),
            Arc::new(self.flow_hash.finish()),
            Arc::new(file_col),
            Arc::new(self.offset.finish()),
        ];
        // The builders produce exactly the schema's types and equal lengths.
        let batch = RecordBatch::try_new(packet_schema(), cols).expect("columns match the schema");
        // finish() leaves builders with no capacity; give it back so appends do not regrow.
        *self = PacketColumns::with_capacity(self.capacity);
        batch
    }
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
