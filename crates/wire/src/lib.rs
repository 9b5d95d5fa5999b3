//! Zero-copy views of packet headers, a one-pass summary parser, a tcpdump-style line printer and UDP
//! frame building. No I/O.
//!
//! # Views
//! Each header type ([`EthernetFrame`], [`VlanHeader`], [`Ipv4Packet`], [`Ipv6Packet`], [`TcpPacket`],
//! [`UdpPacket`], [`IcmpPacket`], [`ArpPacket`]) wraps any `T: AsRef<[u8]>` (smoltcp style): build it
//! from untrusted bytes with `new_checked`, after which no accessor panics; `new_unchecked` skips the
//! check (for buffers you built). Getters need `AsRef`, setters `AsMut`; `payload()` borrows from the
//! buffer, not from the view. IP and UDP views accept buffers cut short by a snap length: their
//! `payload()` is what is present, never past the length field (so Ethernet padding is excluded).
//!
//! # VLAN tags
//! [`Vlan`] is the tag as a value (TPID + TCI), used by every crate; [`VlanHeader`] is the view of one in a
//! frame. [`Vlan::from_meta`] and [`Vlan::reinsert`] are libpcap's rules for a tag the kernel moved into
//! packet metadata (VLAN offload) and that writers put back into the frame.
//!
//! # Names
//! The names a flow can be found by, read from the first payload bytes of untrusted peers, without
//! allocating: [`dns`] (questions, and answers with A/AAAA/CNAME data; bounded, loop-proof name
//! decompression), [`tls`] (ClientHello SNI, ALPN and the JA4 fingerprint), [`http`] (request line, path
//! and Host of an HTTP/1.x request), [`quic`] (the ClientHello of a client's QUIC v1/v2 Initial,
//! decrypted with the keys its Destination Connection ID gives, into buffers the caller lends). They
//! borrow from the payload, except decompressed DNS names, which are copied into a [`Name`] of at most
//! [`NAME_MAX`] bytes that says when it was cut. Each reads one segment or datagram: a TLS hello or HTTP
//! request line continuing in the next segment is [`Error::Truncated`] with the bytes it needs, as is a
//! hello continuing in a later QUIC Initial; none reassembles (the indexer joins split TLS hellos:
//! `index::names`).
//!
//! # Summary parser
//! [`parse()`] reads a frame of any [`LinkType`] into a small `Copy` [`Headers`] in one pass, without
//! allocating; truncated or malformed frames give what could be read.
//!
//! # Tunnels
//! [`decapsulate`] finds the packet inside VXLAN, GENEVE, GRE, ERSPAN, MPLS and IP-in-IP (bounded
//! depth) and names each tunnel crossed (kind, VNI / key / session / label, carrier addresses);
//! [`describe`] applies the tables' rule (one tunnel read whole: the carried packet).
//!
//! # Header records
//! [`Record`] is the TICKET header record (48 bytes, 80 for IPv6, + 16 or 40 in a tunnel) built from a frame with
//! [`Record::from_frame`] and encoded little-endian; see `docs/records.md`.
//!
//! # Printing
//! [`format_line`] / [`Line`] write one `tcpdump -n` style line into a reused buffer.
//!
//! # Building
//! [`UdpFrameSpec::emit`] writes Ethernet [+ VLAN] + IPv4/IPv6 + UDP headers with lengths and checksums;
//! [`checksum`] has the RFC 1071 sum and RFC 1624 incremental updates used to rewrite templates.
//!
//! # Size conventions
//! * Frame lengths never include the 4-byte FCS (as captured by AF_PACKET and stored in pcap).
//! * The generator and the lab count **IP packet length**: Ethernet frame = IP length + [`ETH_HDR`] (14),
//!   + [`VLAN_TAG_LEN`] (4) per VLAN tag. See [`frame_len_for_ip_len`].
//! * The smallest Ethernet frame on a real wire is [`ETH_MIN_FRAME`] (60 bytes without FCS); NICs pad
//!   shorter frames, veth does not. Padding shows up after the IP length; the views and [`parse()`] ignore it.
//! * Header sizes: [`IPV4_HDR`] 20 (without options), [`IPV6_HDR`] 40 (without extension headers),
//!   [`UDP_HDR`] 8, [`TCP_HDR`] 20 (without options), [`ICMP_HDR`] 8, ARP for Ethernet/IPv4
//!   [`ARP_ETH_IPV4_LEN`] 28. So a minimal UDP/IPv4 frame is 14 + 20 + 8 = 42 bytes (IP length 28).
//! * [`Headers::ip_len`] is the IP length from the header (IPv4 total length, IPv6 40 + payload length).

#![warn(missing_docs)]

mod bytes;
pub mod checksum;
pub mod describe;
mod error;
mod ja4;

pub mod arp;
pub mod dns;
pub mod emit;
pub mod ethernet;
pub mod format;
pub mod http;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod names;
pub mod parse;
pub mod quic;
pub mod record;
pub mod tcp;
pub mod tls;
pub mod tunnel;
pub mod udp;
pub mod vlan;

pub use arp::{ArpPacket, ARP_ETH_IPV4_LEN};
pub use describe::{
    describe, describe_tunnel, may_hold_tunnel, Described, TunnelId, TunnelProblem,
};
pub use emit::{IpPair, TcpFrameSpec, UdpFrameSpec};
pub use error::{Error, Result};
pub use ethernet::{ethertype, EthernetFrame, MacAddr, ETH_HDR};
pub use format::{format_headers, format_line, Line, TimeOfDay};
pub use icmp::{IcmpPacket, ICMP_HDR};
pub use ipv4::{Ipv4Packet, IPV4_HDR};
pub use ipv6::{skip_extension_headers, Ipv6Fragment, Ipv6Packet, UpperLayer, IPV6_HDR};
pub use names::{Name, NAME_MAX};
pub use parse::{parse, Headers, IpVersion, LinkType};
pub use record::{Record, RecordError};
pub use tcp::{TcpFlags, TcpOption, TcpOptions, TcpPacket, TCP_HDR};
pub use tunnel::{decapsulate, Decapsulated, Layer, Payload, Ports, Problem, TunnelKind};
pub use udp::{UdpPacket, UDP_HDR};
pub use vlan::{reinsert_tag, reinsert_tag_len, Vlan, VlanHeader, VLAN_TAG_LEN};

/// Smallest Ethernet frame on the wire, without the 4-byte FCS.
pub const ETH_MIN_FRAME: usize = 60;

/// Ethernet FCS length (never included in this crate's frame lengths).
pub const ETH_FCS: usize = 4;

/// Ethernet frame length (no FCS) carrying an IP packet of `ip_len` bytes behind `vlan_tags` tags.
pub const fn frame_len_for_ip_len(ip_len: usize, vlan_tags: usize) -> usize {
    ip_len + ETH_HDR + vlan_tags * VLAN_TAG_LEN
}

/// IP protocol / IPv6 next-header numbers.
pub mod ip_proto {
    /// IPv6 hop-by-hop options.
    pub const HOPOPTS: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// IPv4 in IP (IP-in-IP).
    pub const IPIP: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// DCCP.
    pub const DCCP: u8 = 33;
    /// IPv6 in IP (6in4, IPv6-in-IPv6).
    pub const IPV6: u8 = 41;
    /// IPv6 routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header.
    pub const FRAGMENT: u8 = 44;
    /// GRE.
    pub const GRE: u8 = 47;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 no next header.
    pub const NONE: u8 = 59;
    /// IPv6 destination options.
    pub const DSTOPTS: u8 = 60;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// IPv6 mobility header.
    pub const MOBILITY: u8 = 135;
    /// UDP-Lite.
    pub const UDPLITE: u8 = 136;
    /// Host identity protocol.
    pub const HIP: u8 = 139;
    /// Shim6.
    pub const SHIM6: u8 = 140;
}
