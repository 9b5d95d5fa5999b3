//! The packet table's builder: one parsed packet per row (`ringcap convert`).

use std::sync::Arc;

use arrow_array::builder::PrimitiveBuilder;
use arrow_array::types::{UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::RecordBatch;
use wire::{Described, IpVersion};

use crate::shared::{batch, builder, Addresses, SharedColumns};
use crate::{col, file_column, flow_hash, mac_to_u64, packet_schema};

/// Appends packets column by column; [`Self::finish`] turns them into one `RecordBatch`.
pub struct PacketColumns {
    shared: SharedColumns,
    cap_len: PrimitiveBuilder<UInt32Type>,
    linktype: PrimitiveBuilder<UInt16Type>,
    ttl: PrimitiveBuilder<UInt8Type>,
    flow_hash: PrimitiveBuilder<UInt64Type>,
    offset: PrimitiveBuilder<UInt64Type>,
    rows: usize,
    capacity: usize,
}

impl PacketColumns {
    /// Builders sized for `capacity` rows (they grow past it if needed).
    pub fn with_capacity(capacity: usize) -> PacketColumns {
        let n = capacity;
        PacketColumns {
            shared: SharedColumns::with_capacity(n),
            cap_len: builder(n),
            linktype: builder(n),
            ttl: builder(n),
            flow_hash: builder(n),
            offset: builder(n),
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

    /// Appends one packet, as [`wire::describe`] sees it.
    #[inline]
    pub fn push(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        cap_len: u32,
        linktype: u32,
        offset: u64,
        d: &Described,
    ) {
        let h = &d.headers;
        self.rows += 1;
        let s = &mut self.shared;
        s.push_ts(ts_ns);
        s.wire_len.append_value(wire_len);
        self.cap_len.append_value(cap_len);
        self.linktype
            .append_value(linktype.min(u16::MAX as u32) as u16);
        s.src_mac.append_option(h.src_mac.map(|m| mac_to_u64(m.0)));
        s.dst_mac.append_option(h.dst_mac.map(|m| mac_to_u64(m.0)));
        s.ethertype.append_option(h.ethertype);
        // The frame's own tag (libpcap's `vlan`), also when the row describes a carried packet.
        s.vlan.append_option(d.outer_vlan);
        let (a, b) = (&h.src_ip, &h.dst_ip);
        let (version, addresses) = match h.ip_version {
            Some(IpVersion::V4) => (
                Some(4),
                Addresses::V4([a[0], a[1], a[2], a[3]], [b[0], b[1], b[2], b[3]]),
            ),
            Some(IpVersion::V6) => (Some(6), Addresses::V6(a, b)),
            None => (None, Addresses::None),
        };
        s.ip_version.append_option(version);
        s.push_addresses(addresses);
        s.ip_len.append_option(h.ip_len);
        self.ttl.append_option(h.ttl);
        s.protocol.append_option(h.protocol);
        s.src_port.append_option(h.src_port);
        s.dst_port.append_option(h.dst_port);
        s.tcp_flags.append_option(h.tcp_flags.map(|f| f.0));
        s.udp_len.append_option(h.udp_len);
        s.icmp_type.append_option(h.icmp_type);
        s.icmp_code.append_option(h.icmp_code);
        self.flow_hash.append_option(flow_hash(h));
        self.offset.append_value(offset);
        s.tunnel.push(d.tunnel.as_ref(), d.problem);
    }

    /// The rows so far as a batch (`file` names their input); the builders start over, empty.
    pub fn finish(&mut self, file: &Arc<str>) -> RecordBatch {
        let rows = std::mem::take(&mut self.rows);
        let batch = batch(packet_schema(), |name| match name {
            col::CAP_LEN => Arc::new(self.cap_len.finish()),
            col::LINKTYPE => Arc::new(self.linktype.finish()),
            col::TTL => Arc::new(self.ttl.finish()),
            col::FLOW_HASH => Arc::new(self.flow_hash.finish()),
            col::FILE => file_column(file, rows),
            col::OFFSET => Arc::new(self.offset.finish()),
            _ => self.shared.finish(name),
        });
        // finish() leaves builders with no capacity; give it back so appends do not regrow.
        *self = PacketColumns::with_capacity(self.capacity);
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_of_the_schema_is_built() {
        let d = wire::describe(&[0u8; 60], wire::LinkType::Ethernet);
        let mut c = PacketColumns::with_capacity(4);
        c.push(1, 60, 60, 1, 0, &d);
        let b = c.finish(&Arc::from("f.pcap"));
        assert_eq!((b.schema(), b.num_rows()), (packet_schema(), 1));
        assert!(c.is_empty());
    }
}
