//! The header-record table's builder: one TICKET record per row (`ringcap collect`, `dedup`).
//!
//! Columns that do not apply are null: IP fields for non-IP frames, `tcp_flags`/`tcp_header_len` unless
//! TCP, `udp_len` unless UDP, `icmp_type`/`icmp_code` unless ICMP/ICMPv6 (whose record keeps them in the
//! port fields), ports for ICMP and for other protocols without ports, `vlan` when untagged, the
//! tunnel columns outside tunnels.

use std::sync::Arc;

use arrow_array::builder::PrimitiveBuilder;
use arrow_array::types::{UInt32Type, UInt64Type, UInt8Type};
use arrow_array::RecordBatch;
use wire::ip_proto;
use wire::record::Record;

use crate::shared::{batch, builder, Addresses, SharedColumns};
use crate::{col, mac_to_u64, record_schema};

/// Appends records column by column; [`Self::finish`] turns them into one `RecordBatch`.
pub struct RecordColumns {
    shared: SharedColumns,
    ip_header_len: PrimitiveBuilder<UInt8Type>,
    tcp_header_len: PrimitiveBuilder<UInt8Type>,
    probe_id: PrimitiveBuilder<UInt64Type>,
    stream_id: PrimitiveBuilder<UInt32Type>,
    rows: usize,
    capacity: usize,
}

impl RecordColumns {
    /// Builders sized for `capacity` rows (they grow past it if needed).
    pub fn with_capacity(capacity: usize) -> RecordColumns {
        let n = capacity;
        RecordColumns {
            shared: SharedColumns::with_capacity(n),
            ip_header_len: builder(n),
            tcp_header_len: builder(n),
            probe_id: builder(n),
            stream_id: builder(n),
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

    /// Appends one record, made by `probe_id` in its stream `stream_id`.
    pub fn push(&mut self, r: &Record, probe_id: u64, stream_id: u32) {
        self.rows += 1;
        let s = &mut self.shared;
        s.push_ts(r.ts_ns);
        s.wire_len.append_value(r.wire_len);
        s.src_mac.append_value(mac_to_u64(r.src_mac));
        s.dst_mac.append_value(mac_to_u64(r.dst_mac));
        s.ethertype.append_value(r.ethertype);
        s.vlan.append_option((r.vlan != 0).then_some(r.vlan));
        let ip = r.ip_version != 0;
        s.ip_version.append_option(ip.then_some(r.ip_version));
        s.push_addresses(match r.ip_version {
            4 => Addresses::V4(r.src_ip4, r.dst_ip4),
            6 => Addresses::V6(&r.src_ip6, &r.dst_ip6),
            _ => Addresses::None,
        });
        s.ip_len.append_option(ip.then_some(r.ip_len as u32));
        self.ip_header_len
            .append_option(ip.then_some(r.ip_header_len));
        s.protocol.append_option(ip.then_some(r.protocol));
        let icmp = ip && (r.protocol == ip_proto::ICMP || r.protocol == ip_proto::ICMPV6);
        let tcp = ip && r.protocol == ip_proto::TCP;
        let udp = ip && r.protocol == ip_proto::UDP;
        // Ports: TCP/UDP always; other protocols only when the probe filled them (keeps the row lossless).
        let ports = !icmp && (tcp || udp || r.src_port != 0 || r.dst_port != 0);
        s.src_port.append_option(ports.then_some(r.src_port));
        s.dst_port.append_option(ports.then_some(r.dst_port));
        s.tcp_flags.append_option(tcp.then_some(r.tcp_flags as u16));
        self.tcp_header_len
            .append_option(tcp.then_some(r.l4_len.min(255) as u8));
        s.udp_len.append_option(udp.then_some(r.l4_len));
        s.icmp_type.append_option(icmp.then_some(r.src_port as u8));
        s.icmp_code.append_option(icmp.then_some(r.dst_port as u8));
        self.probe_id.append_value(probe_id);
        self.stream_id.append_value(stream_id);
        let problem = wire::TunnelProblem::from_code(r.tunnel_problem);
        s.tunnel.push(r.tunnel().as_ref(), problem);
    }

    /// The rows so far as a batch; the builders start over, empty.
    pub fn finish(&mut self) -> RecordBatch {
        self.rows = 0;
        let batch = batch(record_schema(), |name| match name {
            col::IP_HEADER_LEN => Arc::new(self.ip_header_len.finish()),
            col::TCP_HEADER_LEN => Arc::new(self.tcp_header_len.finish()),
            col::PROBE_ID => Arc::new(self.probe_id.finish()),
            col::STREAM_ID => Arc::new(self.stream_id.finish()),
            _ => self.shared.finish(name),
        });
        // finish() leaves builders with no capacity; give it back so appends do not regrow.
        *self = RecordColumns::with_capacity(self.capacity);
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_of_the_schema_is_built() {
        let mut c = RecordColumns::with_capacity(4);
        c.push(&Record::default(), 1, 2);
        let b = c.finish();
        assert_eq!((b.schema(), b.num_rows()), (record_schema(), 1));
        assert!(c.is_empty());
    }
}
