//! The XDP prefilter: a few OR'ed 5-tuple rules the program tests before it redirects a frame, so frames that
//! cannot match the tcpdump expression stay with the network stack (XDP_PASS) instead of costing a copy into
//! the socket and a filter run in user space.
//!
//! It is only ever a superset of the expression: user space still runs libpcap's full filter on every frame it
//! gets, so the capture keeps exactly what tcpdump keeps. Hence every doubt resolves towards "might match":
//! the program tests untagged (or, after a leading `vlan`, singly tagged) IPv4 only, and sends IPv6, ARP, RARP,
//! short frames and odd headers to the socket. [`Prefilter::recognise`] (recognise.rs) builds one from the
//! expression's parse tree ([`bpf::expr`]) when it fully understands every node, and gives up (no prefilter) on
//! anything else.

use std::fmt;
use std::net::Ipv4Addr;

/// Rules the program tests (PREFILTER_RULES in bpf/ringcap.c).
pub const PREFILTER_RULES: usize = 8;
/// Address tests and port tests per rule (PREFILTER_TESTS).
pub const PREFILTER_TESTS: usize = 2;

/// A frame's class, as a rule's protocol mask names it (CLASS_* in bpf/ringcap.c).
pub(crate) const CLASS_TCP: u32 = 1 << 0;
pub(crate) const CLASS_UDP: u32 = 1 << 1;
pub(crate) const CLASS_ICMP: u32 = 1 << 2;
pub(crate) const CLASS_SCTP: u32 = 1 << 3;
pub(crate) const CLASS_OTHER_IP: u32 = 1 << 4;
pub(crate) const CLASS_NOT_IP: u32 = 1 << 5;
/// Any IPv4 frame.
pub(crate) const CLASS_IP: u32 = CLASS_TCP | CLASS_UDP | CLASS_ICMP | CLASS_SCTP | CLASS_OTHER_IP;
/// The protocols libpcap's `port` tests.
pub(crate) const CLASS_PORTS: u32 = CLASS_TCP | CLASS_UDP | CLASS_SCTP;

/// Which end of the packet a test looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Src = 1,
    Dst = 2,
    /// `host`, `port`, `src or dst ...`.
    Either = 3,
}

impl Direction {
    fn prefix(self) -> &'static str {
        match self {
            Direction::Src => "src ",
            Direction::Dst => "dst ",
            Direction::Either => "",
        }
    }
}

/// `[src|dst] host A` or `[src|dst] net A/len` (IPv4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrTest {
    pub net: Ipv4Addr,
    pub prefix_len: u8,
    pub dir: Direction,
}

/// `[src|dst] port P`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortTest {
    pub port: u16,
    pub dir: Direction,
}

/// One conjunction: the frame's class is in `protos`, and every test passes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub protos: u32,
    pub addrs: Vec<AddrTest>,
    pub ports: Vec<PortTest>,
}

/// A leading `vlan` or `vlan N`, after which libpcap reads every term 4 bytes further on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VlanTest {
    Untagged,
    AnyTag,
    Id(u16),
}

/// The rules, OR'ed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prefilter {
    pub vlan: VlanTest,
    pub rules: Vec<Rule>,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let protos = self.protos & !CLASS_NOT_IP;
        let names = [
            (CLASS_TCP, "tcp"),
            (CLASS_UDP, "udp"),
            (CLASS_ICMP, "icmp"),
            (CLASS_SCTP, "sctp"),
        ];
        // `port` alone already implies tcp, udp or sctp: no need to name them.
        let implied = protos == CLASS_IP || (protos == CLASS_PORTS && !self.ports.is_empty());
        if !implied {
            let some: Vec<&str> = names
                .iter()
                .filter(|(bit, _)| protos & bit != 0)
                .map(|(_, n)| *n)
                .collect();
            parts.push(match some.len() {
                0 => "nothing".into(),
                1 => some[0].into(),
                _ => format!("({})", some.join(" or ")),
            });
        } else if self.protos == CLASS_IP && self.addrs.is_empty() && self.ports.is_empty() {
            parts.push("ip".into());
        }
        for a in &self.addrs {
            parts.push(if a.prefix_len == 32 {
                format!("{}host {}", a.dir.prefix(), a.net)
            } else {
                format!("{}net {}/{}", a.dir.prefix(), a.net, a.prefix_len)
            });
        }
        for p in &self.ports {
            parts.push(format!("{}port {}", p.dir.prefix(), p.port));
        }
        if parts.is_empty() {
            parts.push("any frame".into());
        }
        f.write_str(&parts.join(" and "))
    }
}

impl fmt::Display for Prefilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.vlan {
            VlanTest::Untagged => {}
            VlanTest::AnyTag => f.write_str("vlan and ")?,
            VlanTest::Id(n) => write!(f, "vlan {n} and ")?,
        }
        let rules: Vec<String> = self.rules.iter().map(|r| format!("({r})")).collect();
        if rules.is_empty() {
            f.write_str("nothing")
        } else {
            f.write_str(&rules.join(" or "))
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct AddrTestMap {
    addr: u32,
    mask: u32,
    dir: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct PortTestMap {
    port: u16,
    dir: u16,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RuleMap {
    protos: u32,
    addrs: [AddrTestMap; PREFILTER_TESTS],
    ports: [PortTestMap; PREFILTER_TESTS],
}

/// `struct prefilter` of bpf/ringcap.c, field for field.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct PrefilterMap {
    active: u32,
    vlan: u32,
    vid: u32,
    rules: u32,
    rule: [RuleMap; PREFILTER_RULES],
}

// SAFETY: plain integers in a repr(C) layout without padding (every field is 4-byte sized or paired u16s).
unsafe impl aya::Pod for PrefilterMap {}

impl Prefilter {
    /// The map value the program reads. Rules and tests beyond the program's room are never built by the
    /// lowering; should one get here, it is an error rather than a silently narrower filter.
    pub fn map_value(&self) -> Result<PrefilterMap, String> {
        if self.rules.len() > PREFILTER_RULES {
            return Err(format!(
                "{} prefilter rules, the program has room for {PREFILTER_RULES}",
                self.rules.len()
            ));
        }
        let mut m = PrefilterMap {
            active: 1,
            rules: self.rules.len() as u32,
            ..PrefilterMap::default()
        };
        (m.vlan, m.vid) = match self.vlan {
            VlanTest::Untagged => (0, 0),
            VlanTest::AnyTag => (1, 0),
            VlanTest::Id(n) => (2, u32::from(n)),
        };
        for (slot, rule) in m.rule.iter_mut().zip(&self.rules) {
            if rule.addrs.len() > PREFILTER_TESTS || rule.ports.len() > PREFILTER_TESTS {
                return Err(format!("prefilter rule {rule} has too many tests"));
            }
            slot.protos = rule.protos;
            for (s, a) in slot.addrs.iter_mut().zip(&rule.addrs) {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(a.prefix_len))
                    .unwrap_or(0);
                // The program compares the frame's bytes as loaded: network order, i.e. the octets in memory.
                s.mask = u32::from_ne_bytes(mask.to_be_bytes());
                s.addr = u32::from_ne_bytes(a.net.octets()) & s.mask;
                s.dir = a.dir as u32;
            }
            for (s, p) in slot.ports.iter_mut().zip(&rule.ports) {
                s.port = p.port;
                s.dir = p.dir as u16;
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_layout_is_the_c_struct() {
        // struct prefilter: 4 u32, then 8 rules of (u32, 2 × 3 u32, 2 × 2 u16) = 36 bytes.
        assert_eq!(std::mem::size_of::<RuleMap>(), 36);
        assert_eq!(std::mem::size_of::<PrefilterMap>(), 16 + 8 * 36);
    }

    #[test]
    fn addresses_and_masks_are_in_network_order() {
        let p = Prefilter {
            vlan: VlanTest::Id(6),
            rules: vec![Rule {
                protos: CLASS_UDP,
                addrs: vec![AddrTest {
                    net: Ipv4Addr::new(10, 1, 2, 3),
                    prefix_len: 16,
                    dir: Direction::Dst,
                }],
                ports: vec![PortTest {
                    port: 9000,
                    dir: Direction::Src,
                }],
            }],
        };
        let m = p.map_value().unwrap();
        assert_eq!((m.active, m.vlan, m.vid, m.rules), (1, 2, 6, 1));
        let a = m.rule[0].addrs[0];
        assert_eq!(a.addr.to_ne_bytes(), [10, 1, 0, 0]);
        assert_eq!(a.mask.to_ne_bytes(), [255, 255, 0, 0]);
        assert_eq!(a.dir, 2);
        assert_eq!((m.rule[0].ports[0].port, m.rule[0].ports[0].dir), (9000, 1));
        assert_eq!(m.rule[0].addrs[1].dir, 0, "unused tests are off");
    }

    #[test]
    fn a_zero_prefix_masks_nothing() {
        let p = Prefilter {
            vlan: VlanTest::Untagged,
            rules: vec![Rule {
                protos: CLASS_IP,
                addrs: vec![AddrTest {
                    net: Ipv4Addr::new(0, 0, 0, 0),
                    prefix_len: 0,
                    dir: Direction::Either,
                }],
                ports: vec![],
            }],
        };
        let m = p.map_value().unwrap();
        assert_eq!((m.rule[0].addrs[0].mask, m.rule[0].addrs[0].addr), (0, 0));
    }
}
