//! The tunnel columns of the packet and header-record tables: the flow table's names and types
//! (`tunnel`, `tunnel_id`, `tunnel_a`, `tunnel_b`, docs/datasets.md), plus `tunnel_problem`.

use std::net::Ipv6Addr;
use std::sync::Arc;

use arrow_array::builder::{PrimitiveBuilder, StringBuilder};
use arrow_array::types::UInt32Type;
use arrow_array::ArrayRef;
use wire::{IpVersion, TunnelId, TunnelProblem};

use crate::col;

/// Builders of the five tunnel columns.
pub(crate) struct TunnelColumns {
    tunnel: StringBuilder,
    tunnel_id: PrimitiveBuilder<UInt32Type>,
    tunnel_a: StringBuilder,
    tunnel_b: StringBuilder,
    tunnel_problem: StringBuilder,
}

impl TunnelColumns {
    pub fn with_capacity(n: usize) -> TunnelColumns {
        // Most rows of most links are outside tunnels: strings start small and grow.
        TunnelColumns {
            tunnel: StringBuilder::with_capacity(n, 0),
            tunnel_id: PrimitiveBuilder::with_capacity(n),
            tunnel_a: StringBuilder::with_capacity(n, 0),
            tunnel_b: StringBuilder::with_capacity(n, 0),
            tunnel_problem: StringBuilder::with_capacity(n, 0),
        }
    }

    /// One row: the tunnel the row's packet came in, or why its tunnel was not decoded.
    #[inline]
    pub fn push(&mut self, tunnel: Option<&TunnelId>, problem: Option<TunnelProblem>) {
        self.tunnel_problem.append_option(problem.map(|p| p.name()));
        let Some(t) = tunnel else {
            self.tunnel.append_null();
            self.tunnel_id.append_null();
            self.tunnel_a.append_null();
            self.tunnel_b.append_null();
            return;
        };
        self.tunnel.append_value(t.kind.name());
        // As the flow table: kinds without an id have none to show.
        self.tunnel_id
            .append_option(t.kind.has_id().then_some(t.id));
        append_addr(&mut self.tunnel_a, t.carrier_version, &t.carrier_a);
        append_addr(&mut self.tunnel_b, t.carrier_version, &t.carrier_b);
    }

    /// The column `name` if it is one of these.
    pub fn finish(&mut self, name: &str) -> Option<ArrayRef> {
        Some(match name {
            col::TUNNEL => Arc::new(self.tunnel.finish()),
            col::TUNNEL_ID => Arc::new(self.tunnel_id.finish()),
            col::TUNNEL_A => Arc::new(self.tunnel_a.finish()),
            col::TUNNEL_B => Arc::new(self.tunnel_b.finish()),
            col::TUNNEL_PROBLEM => Arc::new(self.tunnel_problem.finish()),
            _ => return None,
        })
    }
}

/// An address as people write it (IPv4 dotted, IPv6 RFC 5952), null without a carrier (MPLS over
/// Ethernet). IPv4 is spelled by hand: `Ipv4Addr`'s `Display` costs ~90 ns (the flow table's
/// measurement), and in a mirror every row is tunnelled.
fn append_addr(out: &mut StringBuilder, version: Option<IpVersion>, a: &[u8; 16]) {
    match version {
        None => out.append_null(),
        Some(IpVersion::V6) => out.append_value(Ipv6Addr::from(*a).to_string()),
        Some(IpVersion::V4) => {
            let mut text = [0u8; 15];
            let mut n = 0;
            for (i, &o) in a[..4].iter().enumerate() {
                if i > 0 {
                    text[n] = b'.';
                    n += 1;
                }
                if o >= 100 {
                    text[n] = b'0' + o / 100;
                    n += 1;
                }
                if o >= 10 {
                    text[n] = b'0' + o / 10 % 10;
                    n += 1;
                }
                text[n] = b'0' + o % 10;
                n += 1;
            }
            out.append_value(std::str::from_utf8(&text[..n]).expect("ASCII digits and dots"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn addresses_are_spelled_as_std_does() {
        let mut b = StringBuilder::new();
        let cases = [
            "0.0.0.0",
            "10.1.0.3",
            "192.0.2.255",
            "255.255.255.255",
            "100.9.99.1",
        ];
        for c in cases {
            let ip: std::net::Ipv4Addr = c.parse().unwrap();
            let mut a = [0u8; 16];
            a[..4].copy_from_slice(&ip.octets());
            append_addr(&mut b, Some(IpVersion::V4), &a);
        }
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        append_addr(&mut b, Some(IpVersion::V6), &v6.octets());
        append_addr(&mut b, None, &[0; 16]);
        let s = b.finish();
        let got: Vec<Option<&str>> = s.iter().collect();
        let mut want: Vec<Option<&str>> = cases.iter().map(|c| Some(*c)).collect();
        want.extend([Some("2001:db8::1"), None]);
        assert_eq!(got, want);
        assert!(s.is_null(6));
    }
}
