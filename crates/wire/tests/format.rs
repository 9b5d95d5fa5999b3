//! Printed lines against what tcpdump 4.99 (`-n -S`) printed for the very same bytes (tests/samples).

mod samples;

use std::io::Write as _;

use samples::*;
use wire::*;

/// 1_700_000_000 s is 2023-11-14 22:13:20 UTC (`date -u -d @1700000000`).
const TS: u64 = 1_700_000_000_123_456_789;
const TS_TEXT: &str = "22:13:20.123456789 ";

fn line(frame: &[u8], wire_len: u32, lt: LinkType) -> String {
    let mut s = String::new();
    format_line(&mut s, TS, frame, wire_len, lt).unwrap();
    s.strip_prefix(TS_TEXT)
        .unwrap_or_else(|| panic!("no timestamp prefix in {s:?}"))
        .to_string()
}

#[test]
fn same_as_tcpdump_on_real_frames() {
    let cases: &[(&[u8], u32, &str)] = &[
        (UDP4, UDP4_WIRE_LEN, UDP4_TCPDUMP),
        (TCP_SYN, TCP_SYN_WIRE_LEN, TCP_SYN_TCPDUMP),
        (TCP_SYN_ACK, TCP_SYN_ACK_WIRE_LEN, TCP_SYN_ACK_TCPDUMP),
        (TCP_PSH, TCP_PSH_WIRE_LEN, TCP_PSH_TCPDUMP),
        (ICMP4_ECHO, ICMP4_ECHO_WIRE_LEN, ICMP4_ECHO_TCPDUMP),
        (ARP_REQUEST, ARP_REQUEST_WIRE_LEN, ARP_REQUEST_TCPDUMP),
        (ARP_REPLY, ARP_REPLY_WIRE_LEN, ARP_REPLY_TCPDUMP),
        (VLAN_ICMP, VLAN_ICMP_WIRE_LEN, VLAN_ICMP_TCPDUMP),
        (QINQ_ICMP, QINQ_ICMP_WIRE_LEN, QINQ_ICMP_TCPDUMP),
        (UDP6, UDP6_WIRE_LEN, UDP6_TCPDUMP),
        (IPV6_HBH_MLD, IPV6_HBH_MLD_WIRE_LEN, IPV6_HBH_MLD_TCPDUMP),
        (ICMP6_ECHO, ICMP6_ECHO_WIRE_LEN, ICMP6_ECHO_TCPDUMP),
        (ICMP6_NA, ICMP6_NA_WIRE_LEN, ICMP6_NA_TCPDUMP),
        (FRAG4_FIRST, FRAG4_FIRST_WIRE_LEN, FRAG4_FIRST_TCPDUMP),
        (FRAG4_LAST, FRAG4_LAST_WIRE_LEN, FRAG4_LAST_TCPDUMP),
        (FRAG6_FIRST, FRAG6_FIRST_WIRE_LEN, FRAG6_FIRST_TCPDUMP),
        (FRAG6_LAST, FRAG6_LAST_WIRE_LEN, FRAG6_LAST_TCPDUMP),
    ];
    for &(frame, wire, want) in cases {
        assert_eq!(line(frame, wire, LinkType::Ethernet), want);
    }
    assert_eq!(
        line(SLL_UDP4, SLL_UDP4_WIRE_LEN, LinkType::LinuxSll),
        SLL_UDP4_TCPDUMP
    );
    // tcpdump adds the interface and direction for SLL2, and the tag's ethertype for SLL + VLAN;
    // ringcap does not print link-layer details.
    let sll2 = SLL2_UDP4_TCPDUMP.strip_prefix("?     In  ").unwrap();
    assert_eq!(
        line(SLL2_UDP4, SLL2_UDP4_WIRE_LEN, LinkType::LinuxSll2),
        sll2
    );
    let sll_vlan = SLL_VLAN_ICMP_TCPDUMP
        .strip_prefix("ethertype IPv4, ")
        .unwrap();
    assert_eq!(
        line(SLL_VLAN_ICMP, SLL_VLAN_ICMP_WIRE_LEN, LinkType::LinuxSll),
        sll_vlan
    );
}

#[test]
fn raw_ip_lines() {
    assert_eq!(line(&UDP4[14..], 47, LinkType::Raw), UDP4_TCPDUMP);
    assert_eq!(line(&UDP6[14..], 58, LinkType::Ipv6), UDP6_TCPDUMP);
    let mut null = vec![2, 0, 0, 0];
    null.extend_from_slice(&TCP_SYN[14..]);
    assert_eq!(line(&null, 64, LinkType::Null), TCP_SYN_TCPDUMP);
}

#[test]
fn timestamp_is_utc_time_of_day_with_ns() {
    assert_eq!(TimeOfDay(0).to_string(), "00:00:00.000000000");
    assert_eq!(
        TimeOfDay(86_399_999_999_999).to_string(),
        "23:59:59.999999999"
    );
    assert_eq!(
        TimeOfDay(86_400_000_000_001).to_string(),
        "00:00:00.000000001"
    );
    assert_eq!(TimeOfDay(TS).to_string(), TS_TEXT.trim_end());
    // The example of the brief: 12:34:56.123456789 is 45296 s into a day.
    assert_eq!(
        TimeOfDay(45_296_123_456_789).to_string(),
        "12:34:56.123456789"
    );
}

#[test]
fn unknown_ethertype_and_8023_fallback() {
    let mut f = UDP4.to_vec();
    f[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
    assert_eq!(
        line(&f, 60, LinkType::Ethernet),
        "02:00:00:00:00:01 > 02:00:00:00:00:02, ethertype 0x88cc, length 60"
    );
    f[12..14].copy_from_slice(&38u16.to_be_bytes());
    assert_eq!(
        line(&f, 52, LinkType::Ethernet),
        "02:00:00:00:00:01 > 02:00:00:00:00:02, 802.3, length 52"
    );
}

#[test]
fn truncated_frames_say_where_they_end() {
    assert_eq!(
        line(&UDP4[..10], 61, LinkType::Ethernet),
        "[|link], length 61"
    );
    assert_eq!(
        line(&UDP4[..20], 61, LinkType::Ethernet),
        "IP [|ip], length 61"
    );
    assert_eq!(
        line(&UDP6[..40], 72, LinkType::Ethernet),
        "IP6 [|ip6], length 72"
    );
    assert_eq!(
        line(&UDP4[..36], 61, LinkType::Ethernet),
        "IP 10.0.0.1 > 10.0.0.2: [|udp]"
    );
    assert_eq!(
        line(&UDP4[..40], 61, LinkType::Ethernet),
        "IP 10.0.0.1.1234 > 10.0.0.2.4321: [|udp]"
    );
    assert_eq!(
        line(&TCP_SYN[..60], 74, LinkType::Ethernet),
        "IP 10.0.0.1.40001 > 10.0.0.2.9000: [|tcp]"
    );
    assert_eq!(
        line(&ICMP4_ECHO[..38], 98, LinkType::Ethernet),
        "IP 10.0.0.1 > 10.0.0.2: ICMP [|icmp]"
    );
    assert_eq!(
        line(&ARP_REQUEST[..30], 42, LinkType::Ethernet),
        "ARP, [|arp], length 28"
    );
    assert_eq!(
        line(&IPV6_HBH_MLD[..58], 90, LinkType::Ethernet),
        "IP6 fe80::ff:fe00:1 > ff02::16: HBH [|ip]"
    );
}

#[test]
fn writes_into_io_write_and_reuses_a_buffer() {
    let mut out: Vec<u8> = Vec::new();
    writeln!(
        out,
        "{}",
        Line {
            ts_ns: TS,
            frame: UDP4,
            wire_len: 61,
            linktype: LinkType::Ethernet
        }
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("{TS_TEXT}{UDP4_TCPDUMP}\n")
    );

    let mut s = String::with_capacity(256);
    for _ in 0..3 {
        s.clear();
        format_line(&mut s, TS, ARP_REPLY, 42, LinkType::Ethernet).unwrap();
    }
    assert_eq!(s, format!("{TS_TEXT}{ARP_REPLY_TCPDUMP}"));
    let h = parse(ARP_REPLY, LinkType::Ethernet);
    s.clear();
    format_headers(&mut s, TS, ARP_REPLY, 42, &h).unwrap();
    assert_eq!(s, format!("{TS_TEXT}{ARP_REPLY_TCPDUMP}"));
}
