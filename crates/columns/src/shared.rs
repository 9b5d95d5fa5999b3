//! The columns the packet and header-record tables both have: one builder each, the values' mapping
//! (MACs as numbers, addresses by family, clamped timestamps), and batches put in schema order.

use std::sync::Arc;

use arrow_array::builder::{FixedSizeBinaryBuilder, PrimitiveBuilder};
use arrow_array::types::{TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{ArrayRef, ArrowPrimitiveType, RecordBatch};
use arrow_schema::SchemaRef;

use crate::tunnel::TunnelColumns;
use crate::{col, ts_builder};

/// A MAC address as the 48-bit big-endian number it spells (`02:00:00:00:00:01` is `0x020000000001`).
#[inline]
pub fn mac_to_u64(m: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]])
}

/// The MAC address a `*_mac` column's number spells: the inverse of [`mac_to_u64`].
#[inline]
pub fn mac_from_u64(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// A row's source and destination IP addresses, in network order.
pub(crate) enum Addresses<'a> {
    /// No IP header: every address column is null.
    None,
    V4([u8; 4], [u8; 4]),
    V6(&'a [u8; 16], &'a [u8; 16]),
}

/// A builder sized for `capacity` rows (it grows past it if needed).
pub(crate) fn builder<T: ArrowPrimitiveType>(capacity: usize) -> PrimitiveBuilder<T> {
    PrimitiveBuilder::with_capacity(capacity)
}

/// The builders of the columns both tables have; each table's `push` fills them its own way.
pub(crate) struct SharedColumns {
    pub ts: PrimitiveBuilder<TimestampNanosecondType>,
    pub wire_len: PrimitiveBuilder<UInt32Type>,
    pub src_mac: PrimitiveBuilder<UInt64Type>,
    pub dst_mac: PrimitiveBuilder<UInt64Type>,
    pub ethertype: PrimitiveBuilder<UInt16Type>,
    pub vlan: PrimitiveBuilder<UInt16Type>,
    pub ip_version: PrimitiveBuilder<UInt8Type>,
    src_ip4: PrimitiveBuilder<UInt32Type>,
    dst_ip4: PrimitiveBuilder<UInt32Type>,
    src_ip6: FixedSizeBinaryBuilder,
    dst_ip6: FixedSizeBinaryBuilder,
    pub ip_len: PrimitiveBuilder<UInt32Type>,
    pub protocol: PrimitiveBuilder<UInt8Type>,
    pub src_port: PrimitiveBuilder<UInt16Type>,
    pub dst_port: PrimitiveBuilder<UInt16Type>,
    pub tcp_flags: PrimitiveBuilder<UInt16Type>,
    pub udp_len: PrimitiveBuilder<UInt16Type>,
    pub icmp_type: PrimitiveBuilder<UInt8Type>,
    pub icmp_code: PrimitiveBuilder<UInt8Type>,
    pub tunnel: TunnelColumns,
}

impl SharedColumns {
    pub fn with_capacity(n: usize) -> SharedColumns {
        SharedColumns {
            ts: ts_builder(n),
            wire_len: builder(n),
            src_mac: builder(n),
            dst_mac: builder(n),
            ethertype: builder(n),
            vlan: builder(n),
            ip_version: builder(n),
            src_ip4: builder(n),
            dst_ip4: builder(n),
            // IPv6 is the minority on most links: start small, the builders grow.
            src_ip6: FixedSizeBinaryBuilder::with_capacity(n / 8, 16),
            dst_ip6: FixedSizeBinaryBuilder::with_capacity(n / 8, 16),
            ip_len: builder(n),
            protocol: builder(n),
            src_port: builder(n),
            dst_port: builder(n),
            tcp_flags: builder(n),
            udp_len: builder(n),
            icmp_type: builder(n),
            icmp_code: builder(n),
            tunnel: TunnelColumns::with_capacity(n),
        }
    }

    #[inline]
    pub fn push_ts(&mut self, ts_ns: u64) {
        // Timestamps past 2262 do not fit i64 nanoseconds; they are clamped (no capture has them).
        self.ts.append_value(ts_ns.min(i64::MAX as u64) as i64);
    }

    /// The four address columns: IPv4 as host-order numbers, IPv6 as bytes, the other family null.
    #[inline]
    pub fn push_addresses(&mut self, a: Addresses) {
        match a {
            Addresses::V4(src, dst) => {
                self.src_ip4.append_value(u32::from_be_bytes(src));
                self.dst_ip4.append_value(u32::from_be_bytes(dst));
                self.src_ip6.append_null();
                self.dst_ip6.append_null();
            }
            Addresses::V6(src, dst) => {
                self.src_ip4.append_null();
                self.dst_ip4.append_null();
                // 16 bytes into a 16-wide builder cannot fail.
                let _ = self.src_ip6.append_value(src);
                let _ = self.dst_ip6.append_value(dst);
            }
            Addresses::None => {
                self.src_ip4.append_null();
                self.dst_ip4.append_null();
                self.src_ip6.append_null();
                self.dst_ip6.append_null();
            }
        }
    }

    /// The column `name` as appended so far; its builder starts over, empty. Panics on a column
    /// that is not one of these: the tables' tests finish every column of their schema.
    pub fn finish(&mut self, name: &str) -> ArrayRef {
        match name {
            col::TS => Arc::new(self.ts.finish()),
            col::WIRE_LEN => Arc::new(self.wire_len.finish()),
            col::SRC_MAC => Arc::new(self.src_mac.finish()),
            col::DST_MAC => Arc::new(self.dst_mac.finish()),
            col::ETHERTYPE => Arc::new(self.ethertype.finish()),
            col::VLAN => Arc::new(self.vlan.finish()),
            col::IP_VERSION => Arc::new(self.ip_version.finish()),
            col::SRC_IP4 => Arc::new(self.src_ip4.finish()),
            col::DST_IP4 => Arc::new(self.dst_ip4.finish()),
            col::SRC_IP6 => Arc::new(self.src_ip6.finish()),
            col::DST_IP6 => Arc::new(self.dst_ip6.finish()),
            col::IP_LEN => Arc::new(self.ip_len.finish()),
            col::PROTOCOL => Arc::new(self.protocol.finish()),
            col::SRC_PORT => Arc::new(self.src_port.finish()),
            col::DST_PORT => Arc::new(self.dst_port.finish()),
            col::TCP_FLAGS => Arc::new(self.tcp_flags.finish()),
            col::UDP_LEN => Arc::new(self.udp_len.finish()),
            col::ICMP_TYPE => Arc::new(self.icmp_type.finish()),
            col::ICMP_CODE => Arc::new(self.icmp_code.finish()),
            _ => self
                .tunnel
                .finish(name)
                .unwrap_or_else(|| panic!("no builder for column `{name}`")),
        }
    }
}

/// The batch of `schema` with each column from `column` by name: the schema alone sets the order.
pub(crate) fn batch(schema: SchemaRef, mut column: impl FnMut(&str) -> ArrayRef) -> RecordBatch {
    let cols = schema.fields().iter().map(|f| column(f.name())).collect();
    // The builders produce exactly the schema's types and equal lengths.
    RecordBatch::try_new(schema, cols).expect("columns match the schema")
}
