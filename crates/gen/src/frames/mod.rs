//! UDP frames over IPv4 or IPv6 built from prebuilt templates.
//!
//! A sending slot (a sendmmsg buffer or a TX_RING frame) is prepared once with the constant bytes (MACs,
//! VLAN tag, version, TTL, protocol and, for `zero` and `file` payloads, the payload itself). Per packet
//! [`FrameBuilder::write`] rewrites only what changes: lengths, addresses, ports, the two checksums and,
//! for `random` and `half` payloads, the payload bytes. Checksums are sums of precomputed parts: the
//! payload's sum comes from prefix sums (O(1) per packet), never from a pass over the payload.
//!
//! Sizes are IP packet lengths; the frame adds 14 bytes (18 with a VLAN tag). The smallest packets are
//! IPv4 28 (20 + 8 UDP) and IPv6 48 (40 + 8): a size model asking for less is raised to the minimum, one
//! asking for more than the interface MTU is lowered to it, and both are counted
//! ([`FrameBuilder::clamped_small`], [`FrameBuilder::clamped_large`]).

mod builder;
mod options;
mod payload;

pub use builder::{FrameBuilder, FrameShared};
pub use options::{AddrRange, FrameOptions, Order, Payload, PortRange};
pub use payload::{RandomPool, RANDOM_POOL_BYTES};
