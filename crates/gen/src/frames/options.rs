//! What `ringcap gen` may be told about its frames: address and port ranges, their order, the payload,
//! MACs and VLAN ([`FrameOptions`]), each parsed from and printed as the flag's text.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use wire::{MacAddr, Vlan};
use wire::{ETH_HDR, IPV4_HDR, IPV6_HDR, UDP_HDR, VLAN_TAG_LEN};

use crate::error::GenError;

/// An inclusive range of IP addresses (`10.0.0.1` or `10.0.0.1-10.0.0.254`; both ends of one family).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AddrRange {
    /// First address.
    pub first: IpAddr,
    /// Last address (inclusive).
    pub last: IpAddr,
}

impl AddrRange {
    /// A range holding one address.
    pub fn single(a: IpAddr) -> Self {
        AddrRange { first: a, last: a }
    }

    pub(super) fn bounds(&self) -> Result<(u128, u128), String> {
        let (a, b) = match (self.first, self.last) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
            _ => {
                return Err(format!(
                    "address range {self} mixes IPv4 and IPv6: use one family"
                ))
            }
        };
        if a > b {
            return Err(format!(
                "address range {self} runs backwards: write the lower address first"
            ));
        }
        Ok((a, b))
    }
}

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for AddrRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let addr = |t: &str| {
            t.trim().parse::<IpAddr>().map_err(|_| {
                format!("bad address {t:?} in {s:?}: write A or A-B, e.g. 10.0.0.1-10.0.0.9")
            })
        };
        let r = match s.split_once('-') {
            Some((a, b)) => AddrRange {
                first: addr(a)?,
                last: addr(b)?,
            },
            None => AddrRange::single(addr(s)?),
        };
        r.bounds()?;
        Ok(r)
    }
}

impl TryFrom<String> for AddrRange {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<AddrRange> for String {
    fn from(r: AddrRange) -> String {
        r.to_string()
    }
}

/// An inclusive range of UDP ports (`9` or `1024-65535`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port (inclusive).
    pub last: u16,
}

impl PortRange {
    /// A range holding one port.
    pub const fn single(p: u16) -> Self {
        PortRange { first: p, last: p }
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for PortRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .map_err(|_| format!("bad port {t:?} in {s:?}: write P or A-B with ports 0-65535"))
        };
        let r = match s.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => PortRange::single(port(s)?),
        };
        if r.first > r.last {
            return Err(format!(
                "port range {s:?} runs backwards: write the lower port first"
            ));
        }
        Ok(r)
    }
}

impl TryFrom<String> for PortRange {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<PortRange> for String {
    fn from(r: PortRange) -> String {
        r.to_string()
    }
}

/// How a field walks its range (Linux pktgen: without a `*_RND` flag it counts up, with it it draws).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Each packet takes the next value, wrapping at the end of the range.
    #[default]
    Cycle,
    /// Each packet draws a value uniformly from the range (seeded).
    Random,
}

impl FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cycle" | "seq" => Ok(Order::Cycle),
            "random" | "rnd" => Ok(Order::Random),
            _ => Err(format!("bad order {s:?}: use cycle or random")),
        }
    }
}

/// What fills the UDP payload.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Payload {
    /// All zero bytes (compresses absurdly well).
    #[default]
    Zero,
    /// Seeded random bytes (incompressible).
    Random,
    /// First half random, second half zero: about 50 % compressible, as seed 002 generated.
    Half,
    /// The bytes of a file, repeated from its start to fill each payload.
    File(PathBuf),
}

impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Zero => f.write_str("zero"),
            Payload::Random => f.write_str("random"),
            Payload::Half => f.write_str("half"),
            Payload::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

impl FromStr for Payload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "zero" => Ok(Payload::Zero),
            "random" => Ok(Payload::Random),
            "half" => Ok(Payload::Half),
            _ => match s.strip_prefix("file:") {
                Some(p) if !p.is_empty() => Ok(Payload::File(PathBuf::from(p))),
                _ => Err(format!(
                    "bad payload {s:?}: use zero, random, half or file:PATH"
                )),
            },
        }
    }
}

/// Everything that shapes the frames (the sizes come from the size model).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FrameOptions {
    /// Source MAC. The default 00:00:00:00:00:01 passes the thesis filter (seed 000 Fig. 6.5:
    /// `ether[6:4]=0 and ether[10]=0`).
    pub src_mac: MacAddr,
    /// Destination MAC; the default 02:00:00:00:00:02 is locally administered and belongs to no one, so the
    /// receiver does no IP work on the frames.
    pub dst_mac: MacAddr,
    /// Source addresses; their family (with `dst_ip`'s) decides IPv4 or IPv6.
    pub src_ip: AddrRange,
    /// Destination addresses.
    pub dst_ip: AddrRange,
    /// Source ports. Thread `t` of `n` uses this range shifted by `t` range lengths, so threads never
    /// share a flow.
    pub src_port: PortRange,
    /// Destination ports.
    pub dst_port: PortRange,
    /// How `src_ip` is walked.
    pub src_ip_order: Order,
    /// How `dst_ip` is walked.
    pub dst_ip_order: Order,
    /// How `src_port` is walked.
    pub src_port_order: Order,
    /// How `dst_port` is walked.
    pub dst_port_order: Order,
    /// Payload content.
    pub payload: Payload,
    /// Optional 802.1Q tag.
    pub vlan: Option<Vlan>,
}

impl Default for FrameOptions {
    fn default() -> Self {
        FrameOptions {
            src_mac: MacAddr([0, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: AddrRange::single(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
            dst_ip: AddrRange::single(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))),
            src_port: PortRange::single(9),
            dst_port: PortRange::single(9),
            src_ip_order: Order::Cycle,
            dst_ip_order: Order::Cycle,
            src_port_order: Order::Cycle,
            dst_port_order: Order::Cycle,
            payload: Payload::Zero,
            vlan: None,
        }
    }
}

impl FrameOptions {
    /// The defaults with IPv6 addresses fd00::1 → fd00::2.
    pub fn ipv6() -> Self {
        FrameOptions {
            src_ip: AddrRange::single(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1))),
            dst_ip: AddrRange::single(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2))),
            ..Default::default()
        }
    }

    /// True when the addresses are IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.src_ip.first.is_ipv6()
    }

    /// Link-layer header length: 14, or 18 with a VLAN tag.
    pub fn l2_len(&self) -> usize {
        ETH_HDR + if self.vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }

    /// Smallest IP packet length that holds the headers: 28 (IPv4) or 48 (IPv6).
    pub fn min_ip_len(&self) -> u16 {
        (self.ip_hdr_len() + UDP_HDR) as u16
    }

    fn ip_hdr_len(&self) -> usize {
        if self.is_ipv6() {
            IPV6_HDR
        } else {
            IPV4_HDR
        }
    }

    /// Checks the options make sense together; the error says what to change.
    pub fn validate(&self) -> Result<(), GenError> {
        let bad = |m: String| Err(GenError::Options(m));
        let (s, d) = (self.src_ip.bounds(), self.dst_ip.bounds());
        if let Err(m) = s.and(d) {
            return bad(m);
        }
        if self.src_ip.first.is_ipv6() != self.dst_ip.first.is_ipv6() {
            return bad(format!(
                "source {} and destination {} are of different IP families: use IPv4 or IPv6 for both",
                self.src_ip, self.dst_ip
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_reject_clearly() {
        assert_eq!(
            "02:00:00:00:00:0a".parse::<MacAddr>().unwrap(),
            MacAddr([2, 0, 0, 0, 0, 10])
        );
        assert!("02:00:00:00:00".parse::<MacAddr>().is_err());
        assert!("10.0.0.9-10.0.0.1"
            .parse::<AddrRange>()
            .unwrap_err()
            .contains("backwards"));
        assert!("10.0.0.1-fd00::1"
            .parse::<AddrRange>()
            .unwrap_err()
            .contains("mixes"));
        assert_eq!(
            "1-2".parse::<PortRange>().unwrap(),
            PortRange { first: 1, last: 2 }
        );
        assert!("70000".parse::<PortRange>().is_err());
        assert_eq!(
            "file:/x".parse::<Payload>().unwrap(),
            Payload::File("/x".into())
        );
        assert!("ones".parse::<Payload>().is_err());
        let json = serde_json::to_string(&FrameOptions::default()).unwrap();
        assert!(json.contains("\"src_mac\":\"00:00:00:00:00:01\""), "{json}");
        let back: FrameOptions = serde_json::from_str(&json).unwrap();
        assert_eq!(back, FrameOptions::default());
    }
}
