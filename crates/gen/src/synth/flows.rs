//! Flows of a synthetic trace: TCP connections (handshake, request, response segments acknowledged every
//! second segment, FIN in both directions, consistent sequence numbers) and UDP request/response
//! exchanges, with response sizes from a heavy-tailed (bounded Pareto) distribution.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use rand::distributions::Distribution;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::Zipf;
use wire::{IpPair, MacAddr, TcpFlags, TcpFrameSpec, UdpFrameSpec};

/// TCP payload per full segment (1500-byte MTU, IPv4, no options).
pub const MSS: u32 = 1460;
/// UDP payload per response datagram (a QUIC-sized datagram).
pub const UDP_DATAGRAM: u32 = 1200;
/// Servers the clients talk to; popularity follows Zipf's law.
const SERVERS: u64 = 1000;
const TTL: u8 = 64;
const WINDOW: u16 = 64240;
/// Client side MAC (frames to servers leave from it) and the router's on the server side.
const CLIENT_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
const SERVER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);
/// Ephemeral ports 32768-60999 (Linux's default range).
const EPHEMERAL_FIRST: u16 = 32768;
const EPHEMERAL_COUNT: u16 = 28232;

/// Response bytes per flow: a Pareto distribution with shape `alpha` from `min`, cut at `max`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSize {
    /// Tail index: P(size > x) ~ x^-alpha (web and file sizes: 1.0-1.5).
    pub alpha: f64,
    /// Smallest response, bytes.
    pub min: u64,
    /// Largest response, bytes.
    pub max: u64,
}

impl Default for FlowSize {
    fn default() -> Self {
        FlowSize {
            alpha: 1.2,
            min: 2000,
            max: 100_000_000,
        }
    }
}

impl FromStr for FlowSize {
    type Err = String;
    /// `pareto:ALPHA:MIN[:MAX]`, sizes in bytes with units (`2KB`, `100MB`).
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            format!(
                "`{s}` is not a flow size: write pareto:ALPHA:MIN[:MAX], e.g. pareto:1.2:2KB:100MB"
            )
        };
        let rest = s.strip_prefix("pareto:").ok_or_else(usage)?;
        let parts: Vec<&str> = rest.split(':').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err(usage());
        }
        let alpha: f64 = parts[0].parse().map_err(|_| usage())?;
        let min = units::parse_size(parts[1])?;
        let max = match parts.get(2) {
            Some(m) => units::parse_size(m)?,
            None => FlowSize::default().max.max(min),
        };
        let size = FlowSize { alpha, min, max };
        size.validate()?;
        Ok(size)
    }
}

impl fmt::Display for FlowSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pareto:{}:{}:{}", self.alpha, self.min, self.max)
    }
}

impl FlowSize {
    /// Checks the parameters; the error says what to change.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(format!(
                "the Pareto shape must be above 0, not {}",
                self.alpha
            ));
        }
        if self.min == 0 || self.max < self.min {
            return Err(format!(
                "flow sizes need 1 ≤ MIN ≤ MAX bytes, not {}..{}",
                self.min, self.max
            ));
        }
        Ok(())
    }

    /// One size by inverting the bounded Pareto CDF (rand_distr's Pareto has no upper bound, and cutting its
    /// samples would pile them up at the bound).
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        let (l, h, a) = (self.min as f64, self.max as f64, self.alpha);
        let u: f64 = rng.gen();
        let tail = 1.0 - (l / h).powf(a);
        let x = l / (1.0 - u * tail).powf(1.0 / a);
        (x.round() as u64).clamp(self.min, self.max)
    }
}

/// Which way a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ToServer,
    ToClient,
}

/// Where a TCP connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TcpStep {
    Syn,
    SynAck,
    Ack,
    Request,
    Data,
    ClientAck,
    ServerFin,
    ClientFin,
    LastAck,
    Done,
}

/// One flow: its endpoints and how far it has come.
pub struct Flow {
    pub tcp: bool,
    client: (Ipv4Addr, u16),
    server: (Ipv4Addr, u16),
    /// Request and response payload bytes.
    request: u32,
    pub response: u64,
    /// Response bytes sent so far; segments not yet acknowledged.
    sent: u64,
    unacked: u32,
    client_isn: u32,
    server_isn: u32,
    step: TcpStep,
}

/// One packet's description, written by [`Flow::emit`].
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub direction: Direction,
    flags: u16,
    seq: u32,
    ack: u32,
    pub payload: u32,
}

impl Flow {
    fn client_seq(&self, extra: u32) -> u32 {
        self.client_isn.wrapping_add(1).wrapping_add(extra)
    }

    fn server_seq(&self, sent: u64) -> u32 {
        // Sequence numbers are modulo 2^32 (RFC 9293): a response over 4 GiB wraps.
        self.server_isn.wrapping_add(1).wrapping_add(sent as u32)
    }

    /// The next packet, or `None` once the flow is over.
    pub fn next_segment(&mut self) -> Option<Segment> {
        if !self.tcp {
            return self.next_udp();
        }
        use Direction::*;
        let seg = |direction, flags, seq, ack, payload| Segment {
            direction,
            flags,
            seq,
            ack,
            payload,
        };
        let req = self.request;
        let (s, step) = match self.step {
            TcpStep::Syn => (
                seg(ToServer, TcpFlags::SYN, self.client_isn, 0, 0),
                TcpStep::SynAck,
            ),
            TcpStep::SynAck => (
                seg(
                    ToClient,
                    TcpFlags::SYN | TcpFlags::ACK,
                    self.server_isn,
                    self.client_seq(0),
                    0,
                ),
                TcpStep::Ack,
            ),
            TcpStep::Ack => (
                seg(
                    ToServer,
                    TcpFlags::ACK,
                    self.client_seq(0),
                    self.server_seq(0),
                    0,
                ),
                TcpStep::Request,
            ),
            TcpStep::Request => (
                seg(
                    ToServer,
                    TcpFlags::PSH | TcpFlags::ACK,
                    self.client_seq(0),
                    self.server_seq(0),
                    req,
                ),
                TcpStep::Data,
            ),
            TcpStep::Data => {
                let len = (self.response - self.sent).min(MSS as u64) as u32;
                let last = self.sent + len as u64 == self.response;
                let flags = if last {
                    TcpFlags::PSH | TcpFlags::ACK
                } else {
                    TcpFlags::ACK
                };
                let s = seg(
                    ToClient,
                    flags,
                    self.server_seq(self.sent),
                    self.client_seq(req),
                    len,
                );
                self.sent += len as u64;
                self.unacked += 1;
                // The client acknowledges every second full segment and the last one (RFC 9293 §3.8.6.3).
                (
                    s,
                    if self.unacked == 2 || last {
                        TcpStep::ClientAck
                    } else {
                        TcpStep::Data
                    },
                )
            }
            TcpStep::ClientAck => {
                self.unacked = 0;
                let next = if self.sent == self.response {
                    TcpStep::ServerFin
                } else {
                    TcpStep::Data
                };
                (
                    seg(
                        ToServer,
                        TcpFlags::ACK,
                        self.client_seq(req),
                        self.server_seq(self.sent),
                        0,
                    ),
                    next,
                )
            }
            TcpStep::ServerFin => (
                seg(
                    ToClient,
                    TcpFlags::FIN | TcpFlags::ACK,
                    self.server_seq(self.sent),
                    self.client_seq(req),
                    0,
                ),
                TcpStep::ClientFin,
            ),
            TcpStep::ClientFin => (
                seg(
                    ToServer,
                    TcpFlags::FIN | TcpFlags::ACK,
                    self.client_seq(req),
                    self.server_seq(self.sent).wrapping_add(1),
                    0,
                ),
                TcpStep::LastAck,
            ),
            TcpStep::LastAck => (
                seg(
                    ToClient,
                    TcpFlags::ACK,
                    self.server_seq(self.sent).wrapping_add(1),
                    self.client_seq(req).wrapping_add(1),
                    0,
                ),
                TcpStep::Done,
            ),
            TcpStep::Done => return None,
        };
        self.step = step;
        Some(s)
    }

    /// UDP: the request, then the response in datagrams.
    fn next_udp(&mut self) -> Option<Segment> {
        let seg = |direction, payload| Segment {
            direction,
            flags: 0,
            seq: 0,
            ack: 0,
            payload,
        };
        match self.step {
            TcpStep::Syn => {
                self.step = TcpStep::Data;
                Some(seg(Direction::ToServer, self.request))
            }
            TcpStep::Data if self.sent < self.response => {
                let len = (self.response - self.sent).min(UDP_DATAGRAM as u64) as u32;
                self.sent += len as u64;
                Some(seg(Direction::ToClient, len))
            }
            _ => None,
        }
    }

    /// Writes the frame of `s` into `buf` (its payload bytes must be zero) and returns its length.
    pub fn emit(&self, s: &Segment, buf: &mut [u8]) -> usize {
        let ((src, sport), (dst, dport), src_mac, dst_mac) = match s.direction {
            Direction::ToServer => (self.client, self.server, CLIENT_MAC, SERVER_MAC),
            Direction::ToClient => (self.server, self.client, SERVER_MAC, CLIENT_MAC),
        };
        let ip = IpPair::V4 { src, dst };
        if self.tcp {
            TcpFrameSpec {
                src_mac,
                dst_mac,
                vlan: None,
                ip,
                ttl: TTL,
                src_port: sport,
                dst_port: dport,
                seq: s.seq,
                ack: s.ack,
                flags: TcpFlags(s.flags),
                window: WINDOW,
                payload_len: s.payload as usize,
            }
            .emit_with_payload_sum(buf, 0)
        } else {
            UdpFrameSpec {
                src_mac,
                dst_mac,
                vlan: None,
                ip,
                src_port: sport,
                dst_port: dport,
                ttl: TTL,
                payload_len: s.payload as usize,
            }
            .emit_with_payload_sum(buf, 0)
        }
    }
}

/// Largest frame a flow writes.
pub const MAX_FRAME: usize = 14 + 20 + 20 + MSS as usize;

/// Starts new flows: clients in 10.1.0.0/16, servers 10.2.0.1 onwards by Zipf popularity, well-known server
/// ports (TCP 443, 80, 22; UDP 443), each client host's ephemeral ports in turn from a random one (so no
/// 5-tuple repeats until a host has used them all).
pub struct FlowSource {
    udp_share: f64,
    size: FlowSize,
    servers: Zipf<f64>,
    next_port: Vec<u16>,
}

impl FlowSource {
    pub fn new(udp_share: f64, size: FlowSize, rng: &mut ChaCha8Rng) -> Self {
        FlowSource {
            udp_share,
            size,
            servers: Zipf::new(SERVERS, 1.0).expect("Zipf parameters are constants"),
            next_port: (0..1 << 16)
                .map(|_| rng.gen_range(0..EPHEMERAL_COUNT))
                .collect(),
        }
    }

    pub fn start(&mut self, rng: &mut ChaCha8Rng) -> Flow {
        let tcp = !rng.gen_bool(self.udp_share);
        let host: u16 = rng.gen();
        let n = &mut self.next_port[host as usize];
        let port = EPHEMERAL_FIRST + *n;
        *n = (*n + 1) % EPHEMERAL_COUNT;
        let rank = self.servers.sample(rng) as u32;
        let server = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 2, 0, 0)) + rank);
        let server_port = if tcp {
            [443, 443, 443, 443, 443, 443, 443, 80, 80, 22][rng.gen_range(0..10)]
        } else {
            // QUIC's port: with zero payload bytes, DNS or NTP ports would decode as malformed messages.
            443
        };
        Flow {
            tcp,
            client: (Ipv4Addr::new(10, 1, (host >> 8) as u8, host as u8), port),
            server: (server, server_port),
            request: rng.gen_range(40..600),
            response: self.size.sample(rng),
            sent: 0,
            unacked: 0,
            client_isn: rng.gen(),
            server_isn: rng.gen(),
            step: TcpStep::Syn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn tcp_flow(response: u64) -> Flow {
        Flow {
            tcp: true,
            client: (Ipv4Addr::new(10, 1, 0, 1), 40000),
            server: (Ipv4Addr::new(10, 2, 0, 1), 443),
            request: 100,
            response,
            sent: 0,
            unacked: 0,
            client_isn: u32::MAX - 10,
            server_isn: 1000,
            step: TcpStep::Syn,
        }
    }

    #[test]
    fn a_connection_opens_answers_and_closes() {
        let mut f = tcp_flow(3 * MSS as u64 + 1);
        let segs: Vec<Segment> = std::iter::from_fn(|| f.next_segment()).collect();
        let letters: Vec<String> = segs.iter().map(|s| TcpFlags(s.flags).to_string()).collect();
        // SYN, SYN/ACK, ACK, request, 2 segments + ACK, 2 segments (the last one short) + ACK, FINs, last ACK.
        assert_eq!(
            letters,
            ["S", "S.", ".", "P.", ".", ".", ".", ".", "P.", ".", "F.", "F.", "."]
        );
        let payload: u32 = segs
            .iter()
            .filter(|s| s.direction == Direction::ToClient)
            .map(|s| s.payload)
            .sum();
        assert_eq!(payload as u64, 3 * MSS as u64 + 1);
        // The client's sequence numbers wrap past 2^32 and its last ACK covers the server's FIN.
        assert_eq!(segs[3].seq, (u32::MAX - 10).wrapping_add(1));
        assert_eq!(segs[12].ack, segs[11].seq.wrapping_add(1));
        assert_eq!(segs[11].ack, segs[10].seq.wrapping_add(1));
    }

    #[test]
    fn sizes_follow_the_bounded_pareto() {
        let size = FlowSize {
            alpha: 1.2,
            min: 1000,
            max: 1_000_000_000,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 200_000;
        let mut over =
            |x: f64| (0..n).filter(|_| size.sample(&mut rng) as f64 > x).count() as f64 / n as f64;
        // P(X > x) = (min/x)^alpha (the bound changes it by under 1e-7 here).
        for x in [2e3f64, 1e4, 1e5] {
            let expect = (1000.0 / x).powf(1.2);
            let got = over(x);
            assert!(
                (got - expect).abs() < 4.0 * (expect / n as f64).sqrt() + 1e-4,
                "P(X > {x}) = {got}, expected {expect}"
            );
        }
        assert!("pareto:0:1KB"
            .parse::<FlowSize>()
            .unwrap_err()
            .contains("shape"));
        assert_eq!(
            "pareto:1.5:2KB:1MB".parse::<FlowSize>().unwrap(),
            FlowSize {
                alpha: 1.5,
                min: 2000,
                max: 1_000_000
            }
        );
    }
}
