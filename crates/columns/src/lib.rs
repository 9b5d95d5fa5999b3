//! columns: ringcap's Parquet tables. The packet table of `ringcap convert` and the header-record
//! table of `ringcap collect` (their Arrow schemas and the builders that append one row at a
//! time), the types and the `file` column the index's flow table shares with them, and the writer
//! properties every table is written with. Only arrow, parquet and wire: the crates that write a
//! table (`trace`, `records`, `index`) need nothing of each other.
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
//! - A packet inside one tunnel is described by the packet it carries (`wire::describe`), with the
//!   tunnel in `tunnel`, `tunnel_id`, `tunnel_a`, `tunnel_b` (the flow table's columns); a broken
//!   or nested tunnel leaves the outer headers and says why in `tunnel_problem`.

mod flow_hash;
mod packets;
mod properties;
mod records;
mod schema;
mod shared;
mod tunnel;

pub use flow_hash::flow_hash;
pub use packets::PacketColumns;
pub use properties::writer_properties;
pub use records::RecordColumns;
pub use schema::{file_column, file_type, packet_schema, record_schema, ts_builder, ts_type};
pub use shared::{mac_from_u64, mac_to_u64};

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
    /// The tunnel a packet came in (`wire::TunnelKind::name`): the flow table's names and types.
    pub const TUNNEL: &str = "tunnel";
    /// VNI, GRE key, ERSPAN session, top MPLS label.
    pub const TUNNEL_ID: &str = "tunnel_id";
    /// The carrier's addresses, the lower first.
    pub const TUNNEL_A: &str = "tunnel_a";
    pub const TUNNEL_B: &str = "tunnel_b";
    /// Why a packet's tunnel was not decoded (`wire::TunnelProblem::name`).
    pub const TUNNEL_PROBLEM: &str = "tunnel_problem";
}
