//! One tcpdump-style line per packet (`tcpdump -n -S --nano`, time of day in UTC).
//!
//! Writes into any `fmt::Write` (a reused `String`) or, through [`Line`]'s `Display`, into any
//! `io::Write` with `write!`; nothing is allocated per packet. Differences from tcpdump: the time of day
//! is UTC (tcpdump prints local time); TCP sequence numbers are absolute (tcpdump's `-S`, relative
//! numbers need per-flow state); application protocols (DNS, NTP...) are not decoded; VLAN tags and the
//! link header are not printed; unknown ethertypes print `src > dst, ethertype 0x88cc, length 60`.

use core::fmt::{self, Write};
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::arp::{op, ArpPacket};
use crate::ethernet::ethertype;
use crate::icmp::{self, IcmpPacket};
use crate::ip_proto;
use crate::parse::{parse, Headers, IpVersion, LinkType};
use crate::tcp::{TcpFlags, TcpOption, TcpPacket};

/// Writes one line (no newline) for a packet: `ts_ns` since the epoch, the captured bytes, the
/// original length on the wire.
pub fn format_line<W: Write + ?Sized>(
    out: &mut W,
    ts_ns: u64,
    frame: &[u8],
    wire_len: u32,
    linktype: LinkType,
) -> fmt::Result {
    let h = parse(frame, linktype);
    format_headers(out, ts_ns, frame, wire_len, &h)
}

/// `Display` adapter for [`format_line`], e.g. `writeln!(stdout, "{}", Line { .. })`.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// Timestamp, ns since the Unix epoch.
    pub ts_ns: u64,
    /// Captured bytes.
    pub frame: &'a [u8],
    /// Length on the wire.
    pub wire_len: u32,
    /// Link type of `frame`.
    pub linktype: LinkType,
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format_line(f, self.ts_ns, self.frame, self.wire_len, self.linktype)
    }
}

/// UTC time of day with nanoseconds, `HH:MM:SS.nnnnnnnnn`.
#[derive(Clone, Copy, Debug)]
pub struct TimeOfDay(pub u64);

impl fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0 / 1_000_000_000;
        let ns = self.0 % 1_000_000_000;
        let day = secs % 86_400;
        write!(
            f,
            "{:02}:{:02}:{:02}.{:09}",
            day / 3600,
            day / 60 % 60,
            day % 60,
            ns
        )
    }
}

/// Like [`format_line`] with headers already parsed from `frame` (avoids parsing twice).
pub fn format_headers<W: Write + ?Sized>(
    out: &mut W,
    ts_ns: u64,
    frame: &[u8],
    wire_len: u32,
    h: &Headers,
) -> fmt::Result {
    write!(out, "{} ", TimeOfDay(ts_ns))?;
    match h.ip_version {
        Some(IpVersion::V4) => ipv4_line(out, frame, h),
        Some(IpVersion::V6) => ipv6_line(out, frame, h),
        None => non_ip_line(out, frame, wire_len, h),
    }
}

fn non_ip_line<W: Write + ?Sized>(
    out: &mut W,
    frame: &[u8],
    wire_len: u32,
    h: &Headers,
) -> fmt::Result {
    // The version nibble says what a truncated or malformed network header was meant to be.
    let l3 = h
        .l3_offset
        .and_then(|o| frame.get(o as usize))
        .map(|b| b >> 4);
    match (h.ethertype, l3) {
        (Some(ethertype::ARP), _) => arp_line(out, frame, wire_len, h),
        (Some(ethertype::IPV4), _) | (None, Some(4)) => write!(out, "IP [|ip], length {wire_len}"),
        (Some(ethertype::IPV6), _) | (None, Some(6)) => {
            write!(out, "IP6 [|ip6], length {wire_len}")
        }
        (Some(et), _) => {
            if let (Some(s), Some(d)) = (h.src_mac, h.dst_mac) {
                write!(out, "{s} > {d}, ")?;
            }
            if et < ethertype::MIN_ETHERTYPE && h.dst_mac.is_some() {
                write!(out, "802.3, length {wire_len}")
            } else {
                write!(out, "ethertype 0x{et:04x}, length {wire_len}")
            }
        }
        (None, Some(v)) => write!(out, "IP{v} bad version, length {wire_len}"),
        (None, None) if h.truncated => write!(out, "[|link], length {wire_len}"),
        (None, None) => write!(out, "unknown link payload, length {wire_len}"),
    }
}

fn arp_line<W: Write + ?Sized>(
    out: &mut W,
    frame: &[u8],
    wire_len: u32,
    h: &Headers,
) -> fmt::Result {
    let off = h.l3_offset.unwrap_or(0) as usize;
    let len = wire_len.saturating_sub(off as u32);
    let data = frame.get(off..).unwrap_or(&[]);
    let Ok(arp) = ArpPacket::new_checked(data) else {
        return write!(out, "ARP, [|arp], length {len}");
    };
    if !arp.is_eth_ipv4() {
        return write!(
            out,
            "ARP, hardware type {}, protocol 0x{:04x}, opcode {}, length {len}",
            arp.hw_type(),
            arp.proto_type(),
            arp.opcode()
        );
    }
    let (Some(sha), Some(spa), Some(tha), Some(tpa)) = (
        arp.sender_mac(),
        arp.sender_ip(),
        arp.target_mac(),
        arp.target_ip(),
    ) else {
        return write!(out, "ARP, [|arp], length {len}");
    };
    match arp.opcode() {
        op::REQUEST => {
            write!(out, "ARP, Request who-has {tpa}")?;
            if !tha.is_zero() {
                write!(out, " ({tha})")?;
            }
            write!(out, " tell {spa}, length {len}")
        }
        op::REPLY => write!(out, "ARP, Reply {spa} is-at {sha}, length {len}"),
        other => write!(out, "ARP, opcode {other}, length {len}"),
    }
}

/// `addr` or `addr.port`.
struct Endpoint<A>(A, Option<u16>);

impl<A: fmt::Display> fmt::Display for Endpoint<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(p) => write!(f, "{}.{}", self.0, p),
            None => write!(f, "{}", self.0),
        }
    }
}

fn ipv4_line<W: Write + ?Sized>(out: &mut W, frame: &[u8], h: &Headers) -> fmt::Result {
    let s = &h.src_ip;
    let d = &h.dst_ip;
    let src = Ipv4Addr::new(s[0], s[1], s[2], s[3]);
    let dst = Ipv4Addr::new(d[0], d[1], d[2], d[3]);
    out.write_str("IP ")?;
    ip_body(out, frame, h, src, dst, false, None)
}

fn ipv6_line<W: Write + ?Sized>(out: &mut W, frame: &[u8], h: &Headers) -> fmt::Result {
    let src = Ipv6Addr::from(h.src_ip);
    let dst = Ipv6Addr::from(h.dst_ip);
    out.write_str("IP6 ")?;
    let first_next = h.l3_offset.and_then(|o| frame.get(o as usize + 6)).copied();
    let hbh = first_next == Some(ip_proto::HOPOPTS);
    // For IPv6, frag_offset is only set when a fragment header was crossed.
    let frag = h.frag_offset.map(|o| (o, h.ip_payload_len().unwrap_or(0)));
    ip_body(out, frame, h, src, dst, hbh, frag)
}

/// Everything after `IP ` / `IP6 `: endpoints and the transport summary. `hbh` and `frag6` add
/// tcpdump's `HBH` and `frag (offset|length)` for IPv6 extension headers.
fn ip_body<W: Write + ?Sized, A: fmt::Display + Copy>(
    out: &mut W,
    frame: &[u8],
    h: &Headers,
    src: A,
    dst: A,
    hbh: bool,
    frag6: Option<(u16, u32)>,
) -> fmt::Result {
    let proto = h.protocol.unwrap_or(0);
    let ip_payload = h.ip_payload_len().unwrap_or(0);
    let has_ports = matches!(proto, ip_proto::TCP | ip_proto::UDP) && h.l4_offset.is_some();
    let (sp, dp) = if has_ports {
        (h.src_port, h.dst_port)
    } else {
        (None, None)
    };
    if let Some((off, len)) = frag6 {
        write!(out, "{src} > {dst}:")?;
        if hbh {
            out.write_str(" HBH")?;
        }
        write!(out, " frag ({off}|{len})")?;
        if let (Some(sp), Some(dp)) = (sp, dp) {
            write!(out, " {sp} > {dp}:")?;
        }
        if h.l4_offset.is_none() {
            return if h.truncated {
                out.write_str(" [|ip6]")
            } else {
                Ok(())
            };
        }
    } else {
        write!(out, "{} > {}:", Endpoint(src, sp), Endpoint(dst, dp))?;
        if hbh {
            out.write_str(" HBH")?;
        }
    }
    let Some(l4) = h.l4_offset else {
        // A later IPv4 fragment, or the frame ended inside the IP (extension) headers.
        if h.truncated {
            return out.write_str(" [|ip]");
        }
        if h.malformed {
            return out.write_str(" [bad ip header]");
        }
        return write!(out, " ip-proto-{proto}");
    };
    let seg = frame.get(l4 as usize..).unwrap_or(&[]);
    match proto {
        ip_proto::UDP => match h.udp_len {
            Some(len) if !h.truncated => write!(out, " UDP, length {}", len.saturating_sub(8)),
            _ => out.write_str(" [|udp]"),
        },
        ip_proto::TCP => tcp_summary(out, seg, ip_payload),
        ip_proto::ICMP => icmp_summary(out, seg, false, ip_payload),
        ip_proto::ICMPV6 => icmp_summary(out, seg, true, ip_payload),
        _ => write!(out, " ip-proto-{proto} {ip_payload}"),
    }
}

fn tcp_summary<W: Write + ?Sized>(out: &mut W, seg: &[u8], ip_payload: u32) -> fmt::Result {
    let Ok(tcp) = TcpPacket::new_checked(seg) else {
        return out.write_str(" [|tcp]");
    };
    let flags = tcp.flags();
    let len = ip_payload.saturating_sub(tcp.header_len() as u32);
    write!(out, " Flags [{flags}]")?;
    if len > 0 || flags.0 & (TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST) != 0 {
        write!(out, ", seq {}", tcp.seq_number())?;
        if len > 0 {
            write!(out, ":{}", tcp.seq_number().wrapping_add(len))?;
        }
    }
    if flags.has(TcpFlags::ACK) {
        write!(out, ", ack {}", tcp.ack_number())?;
    }
    write!(out, ", win {}", tcp.window())?;
    if flags.has(TcpFlags::URG) {
        write!(out, ", urg {}", tcp.urgent())?;
    }
    if !tcp.options().is_empty() {
        out.write_str(", options [")?;
        for (i, opt) in tcp.option_iter().enumerate() {
            if i > 0 {
                out.write_char(',')?;
            }
            tcp_option(out, opt)?;
        }
        out.write_char(']')?;
    }
    write!(out, ", length {len}")
}

fn tcp_option<W: Write + ?Sized>(out: &mut W, opt: TcpOption<'_>) -> fmt::Result {
    match opt {
        TcpOption::EndOfList => out.write_str("eol"),
        TcpOption::Nop => out.write_str("nop"),
        TcpOption::Mss(m) => write!(out, "mss {m}"),
        TcpOption::WindowScale(s) => write!(out, "wscale {s}"),
        TcpOption::SackPermitted => out.write_str("sackOK"),
        TcpOption::Sack(blocks) => {
            write!(out, "sack {}", blocks.len() / 8)?;
            for b in blocks.chunks_exact(8) {
                let l = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                let r = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
                write!(out, " {{{l}:{r}}}")?;
            }
            Ok(())
        }
        TcpOption::Timestamp { val, ecr } => write!(out, "TS val {val} ecr {ecr}"),
        TcpOption::Other { kind, data } => {
            write!(out, "unknown-{kind}")?;
            if !data.is_empty() {
                out.write_str(" 0x")?;
                for b in data {
                    write!(out, "{b:02x}")?;
                }
            }
            Ok(())
        }
        TcpOption::Malformed { .. } => out.write_str("[bad opt]"),
    }
}

fn icmp_summary<W: Write + ?Sized>(out: &mut W, seg: &[u8], v6: bool, len: u32) -> fmt::Result {
    let tag = if v6 { " ICMP6," } else { " ICMP" };
    let Ok(icmp) = IcmpPacket::new_checked(seg) else {
        return write!(out, "{tag} [|icmp]");
    };
    let t = icmp.msg_type();
    let is_echo = if v6 {
        matches!(t, icmp::v6::ECHO_REQUEST | icmp::v6::ECHO_REPLY)
    } else {
        matches!(t, icmp::v4::ECHO_REQUEST | icmp::v4::ECHO_REPLY)
    };
    let name = if v6 {
        icmp::v6_type_name(t)
    } else {
        icmp::v4_type_name(t)
    };
    match name {
        Some(n) => write!(out, "{tag} {n}")?,
        None if v6 => write!(out, "{tag} type {t}")?,
        None => write!(out, "{tag} type-#{t}")?,
    }
    if is_echo {
        write!(out, ", id {}, seq {}", icmp.echo_ident(), icmp.echo_seq())?;
    } else if v6 && t == icmp::v6::MLD2_REPORT {
        write!(out, ", {} group record(s)", icmp.rest_of_header() & 0xffff)?;
    } else if v6 && matches!(t, icmp::v6::NEIGHBOR_SOLICIT | icmp::v6::NEIGHBOR_ADVERT) {
        if let Some(b) = icmp.payload().get(..16) {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            let target = Ipv6Addr::from(a);
            if t == icmp::v6::NEIGHBOR_SOLICIT {
                write!(out, ", who has {target}")?;
            } else {
                write!(out, ", tgt is {target}")?;
            }
        }
    }
    write!(out, ", length {len}")
}
