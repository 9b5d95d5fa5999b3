//! Tunnelled traffic end to end (issue 36): every kind of tunnel is captured by `ringcap capture`
//! from a real veth, then
//! - tshark's decode of the captured file shows what the encoder sent: per frame the length, the
//!   innermost 5-tuple, the VLAN tags, MPLS labels, GRE key, VXLAN/GENEVE VNI and ERSPAN session
//!   (a check of scripts/tunnels.py and of the capture, and of the harness the inner comparisons
//!   use, common/tunnels.rs);
//! - `ringcap query` equals `tcpdump -r` of the same file for outer expressions and for libpcap's
//!   own tunnel keywords (`vlan`, `mpls`, `geneve`; libpcap 1.10 has no `vxlan`, `gre` or `erspan`),
//!   whose inner terms the index narrows by the carried packet;
//! - where libpcap can say an inner host or a tunnel id (its keywords, or byte offsets for GRE keys,
//!   VXLAN VNIs and IP-in-IP), tcpdump selects exactly the packets tshark's decode does;
//! - the flow table's rows of tunnelled flows (keyed by the carried packet) equal tshark's
//!   conversations of the innermost 5-tuples.
//!
//! VXLAN comes both from the encoder and from real Linux vxlan devices; the other kinds only from the
//! encoder, as this kernel has no such devices (see scripts/tunnels.py).
//!
//! Still to come: ringcap's own `vxlan`, `gre`, `erspan` terms against `inner_host_packets_by_tshark`
//! (see the end of this file).

mod common;

use std::collections::BTreeMap;

use common::tunnels::*;
use common::*;

/// tshark's decode of the captured file equals the generator's manifest, frame by frame.
fn check_decode(c: &Captured) -> Vec<Decoded> {
    let decoded = tshark_decoded(&c.file, "");
    assert_eq!(decoded.len(), c.sent.len());
    let list = |v: &serde_json::Value| -> Vec<u64> {
        match v {
            serde_json::Value::Array(a) => a.iter().map(|x| x.as_u64().unwrap()).collect(),
            serde_json::Value::Null => Vec::new(),
            x => vec![x.as_u64().unwrap()],
        }
    };
    for (s, d) in c.sent.iter().zip(&decoded) {
        let what = format!("frame {} ({}; sent {s:?})", d.number, d.protocols);
        assert_eq!(d.number, s.n, "{what}");
        assert_eq!(d.len, s.len, "{what}");
        if s.malformed.is_some() {
            continue;
        }
        assert_eq!(d.inner, s.inner, "innermost 5-tuple of {what}");
        assert_eq!(d.vlans, list(&s.ids["vlans"]), "VLAN ids of {what}");
        assert_eq!(d.labels, list(&s.ids["labels"]), "MPLS labels of {what}");
        assert_eq!(d.gre_keys, list(&s.ids["key"]), "GRE key of {what}");
        let vnis: Vec<u64> = d.vxlan_vnis.iter().chain(&d.geneve_vnis).copied().collect();
        assert_eq!(vnis, list(&s.ids["vni"]), "VNI of {what}");
        assert_eq!(
            d.erspan_spans,
            list(&s.ids["span"]),
            "ERSPAN session of {what}"
        );
        // Only the random payloads may upset tshark, never a tunnel or the inner IP/TCP/UDP.
        for layer in [
            "VLAN", "MPLS", "GRE", "ERSPAN", "VXLAN", "Geneve", "IPv", "Ethernet", "TCP", "UDP",
        ] {
            assert!(
                !d.malformed.contains(&format!(": {layer}")),
                "tshark calls {what} malformed: {}",
                d.malformed
            );
        }
    }
    decoded
}

/// The frame numbers the manifest says carry `key` = `value` in their tunnel identity.
fn sent_with(c: &Captured, key: &str, value: u64) -> Vec<u64> {
    c.sent
        .iter()
        .filter(|s| {
            s.ids[key].as_u64() == Some(value)
                || s.ids[key]
                    .as_array()
                    .is_some_and(|a| a.contains(&value.into()))
        })
        .map(|s| s.n)
        .collect()
}

/// tcpdump's `expr` selects exactly the packets tshark's display filter numbers.
fn assert_tcpdump_is_tshark(c: &Captured, expr: &str, numbers: &[u64]) {
    assert!(!numbers.is_empty(), "`{expr}`: tshark selected nothing");
    let want = decoded_by_numbers(&c.file, numbers);
    let got = tcpdump_decoded(&c.file, expr);
    assert!(
        got == want,
        "`{expr}`: tcpdump selected {} packets, tshark {numbers:?}",
        got.len()
    );
}

/// ringcap's own tunnel term (`vxlan`, `gre`, `erspan`: no keyword in this libpcap) selects, from
/// the store and from the captured file, exactly the packets tshark's display filter numbers.
fn assert_query_is_tshark(c: &Captured, expr: &str, numbers: &[u64]) {
    assert!(!numbers.is_empty(), "`{expr}`: tshark selected nothing");
    assert!(
        !libpcap_accepts(expr),
        "libpcap knows `{expr}` now: compare with tcpdump"
    );
    let want = decoded_by_numbers(&c.file, numbers);
    for source in [&c.store, &c.file] {
        let got = query_decoded(source, &c.work, expr);
        assert!(
            got == want,
            "`{expr}` over {}: ringcap selected {} packets {:?}, tshark {numbers:?}",
            source.display(),
            got.len(),
            got.iter().map(|g| g.0).collect::<Vec<_>>()
        );
    }
}

/// `TERM and host H` for every inner IPv4 host H is tshark's `TSHARK` with H in the innermost
/// IP header; at least one host has packets.
fn assert_inner_hosts_are_tshark(c: &Captured, term: &str, tshark: &str) {
    let mut some = false;
    // The hosts of tshark's innermost IPv4 headers (the kernel's VXLAN traffic has no manifest).
    let mut hosts: Vec<String> = tshark_decoded(&c.file, tshark)
        .into_iter()
        .filter_map(|d| d.inner)
        .flat_map(|i| [i.src, i.dst])
        .filter(|a| !a.contains(':'))
        .collect();
    hosts.sort();
    hosts.dedup();
    for h in hosts {
        let want = inner_host_packets_by_tshark(&c.file, tshark, &h);
        if want.is_empty() {
            let got = query_decoded(&c.store, &c.work, &format!("{term} and host {h}"));
            assert!(
                got.is_empty(),
                "`{term} and host {h}`: {} packets, tshark none",
                got.len()
            );
            continue;
        }
        some = true;
        assert_query_is_tshark(c, &format!("{term} and host {h}"), &want);
    }
    assert!(some, "`{term}`: no inner host has packets");
}

/// The inner IPv4 hosts the manifest names (sorted).
fn inner_hosts(c: &Captured) -> Vec<String> {
    let mut h: Vec<String> = c
        .sent
        .iter()
        .filter_map(|s| s.inner.as_ref())
        .flat_map(|i| [i.src.clone(), i.dst.clone()])
        .filter(|a| !a.contains(':'))
        .collect();
    h.sort();
    h.dedup();
    h
}

/// Counts of one conversation keyed by its two ends in sorted order: frames and bytes from the
/// lower end, then from the higher (tshark's A and a flow table's `src` are both the first
/// sender, which two rows of one inner flow in different tunnels need not share).
type Sided = BTreeMap<((String, u16), (String, u16)), [u64; 4]>;

fn sided(rows: impl IntoIterator<Item = (ConvKey, ConvCounts)>) -> Sided {
    let mut out = Sided::new();
    for ((a, b), c) in rows {
        let (key, v) = if a <= b {
            (
                (a, b),
                [
                    c.a_to_b_frames,
                    c.a_to_b_bytes,
                    c.b_to_a_frames,
                    c.b_to_a_bytes,
                ],
            )
        } else {
            (
                (b, a),
                [
                    c.b_to_a_frames,
                    c.b_to_a_bytes,
                    c.a_to_b_frames,
                    c.a_to_b_bytes,
                ],
            )
        };
        let e = out.entry(key).or_default();
        for (x, y) in e.iter_mut().zip(v) {
            *x += y;
        }
    }
    out
}

/// The flow table's rows of tunnelled TCP and UDP flows equal tshark's conversations of the
/// innermost 5-tuples (frames and whole-frame bytes each way), and name the tunnel. `filter`
/// leaves out what ringcap does not decapsulate (VXLAN on Linux's old port 8472).
fn assert_flow_table_is_tshark(c: &Captured, tunnel: &str, filter: &str) {
    let table = index::flows_path(&c.file);
    for (proto, number) in [("tcp", 6), ("udp", 17)] {
        let text = python(&format!(
            "import duckdb\nfor r in duckdb.sql(\"\"\"SELECT src, src_port, dst, dst_port, \
             src_packets, src_bytes, dst_packets, dst_bytes, tunnel FROM read_parquet('{}') \
             WHERE protocol = {number} AND tunnel IS NOT NULL\"\"\").fetchall(): \
             print('\\t'.join(str(v) for v in r))",
            table.display()
        ));
        let mut rows = Vec::new();
        for line in text.lines() {
            let v: Vec<&str> = line.split('\t').collect();
            let n = |i: usize| v[i].parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
            assert_eq!(v[8], tunnel, "{line}");
            let key = (
                (v[0].to_string(), n(1) as u16),
                (v[2].to_string(), n(3) as u16),
            );
            let counts = ConvCounts {
                a_to_b_frames: n(4),
                a_to_b_bytes: n(5),
                b_to_a_frames: n(6),
                b_to_a_bytes: n(7),
            };
            rows.push((key, counts));
        }
        let want = sided(inner_conversations_by_tshark(&c.file, proto, filter));
        assert!(
            !want.is_empty() || proto == "udp",
            "no inner {proto} in {}",
            c.file.display()
        );
        assert_eq!(sided(rows), want, "{tunnel} {proto}: flow table vs tshark");
    }
}

#[test]
fn libpcap_tunnel_keywords() {
    if !have("tcpdump") {
        return;
    }
    // What libpcap 1.10 (Debian 12) can say: these decide which comparisons below are tcpdump's.
    for e in [
        "vlan 10 and vlan 20",
        "mpls 100",
        "mpls 101 and mpls 200 and host 10.1.0.1",
        "geneve",
        "geneve 7 and host 10.1.0.3",
        "geneve and vlan 30",
        "mpls 300 and geneve 7",
    ] {
        assert!(libpcap_accepts(e), "libpcap should compile `{e}`");
    }
    // "no VLAN match after MPLS", even with a GENEVE (and so an Ethernet header) between them.
    assert!(!libpcap_accepts("mpls 300 and geneve 7 and vlan 30"));
    // Not keywords of this libpcap: ringcap's terms for them (issue 36) are checked against tshark.
    for e in ["vxlan", "vxlan 42", "gre", "erspan"] {
        assert!(
            !libpcap_accepts(e),
            "libpcap compiles `{e}` now: compare it with tcpdump too"
        );
    }
}

#[test]
fn qinq() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("qinq");
    check_decode(&c);
    let hosts = inner_hosts(&c);
    let h = &hosts[0];
    assert_query_equals_tcpdump(
        &c,
        &[
            "vlan 10 and vlan 20",
            "vlan 10 and vlan 30",
            "vlan 11 and vlan 21",
            "vlan and vlan and ip6",
            &format!("vlan 10 and vlan and host {h}"),
            "vlan 10 and vlan 20 and tcp",
            "vlan 20",
            "ether proto 0x88a8",
        ],
    );
    assert_eq!(
        tshark_numbers(&c.file, "ieee8021ad.id == 10 && vlan.id == 20"),
        sent_with(&c, "vlans", 20)
    );
    let want = inner_host_packets_by_tshark(&c.file, "vlan", h);
    assert_tcpdump_is_tshark(&c, &format!("vlan and vlan and host {h}"), &want);
}

#[test]
fn mpls() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("mpls");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "mpls", "");
    let hosts = inner_hosts(&c);
    let h = &hosts[1];
    assert_query_equals_tcpdump(
        &c,
        &[
            "mpls",
            "mpls 100",
            "mpls 101 and mpls 200",
            "mpls 100 and ip6",
            &format!("mpls 100 and host {h}"),
            "mpls and mpls and tcp port 443",
            "mpls 200",
        ],
    );
    assert_eq!(
        tshark_numbers(&c.file, "mpls.label == 100"),
        sent_with(&c, "labels", 100)
    );
    let want = inner_host_packets_by_tshark(&c.file, "mpls.label == 100", h);
    assert_tcpdump_is_tshark(&c, &format!("mpls 100 and host {h}"), &want);
}

#[test]
fn gre_without_key() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("gre");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "gre", "");
    assert_query_equals_tcpdump(
        &c,
        &[
            "proto gre",
            "ip proto 47 and src host 192.0.2.1",
            "proto gre and ip[22:2] = 0x86dd",
            "udp",
        ],
    );
    // ringcap's `gre`: GRE carrying IP, Ethernet or MPLS (not ERSPAN); terms after it read the
    // carried packet.
    assert_query_is_tshark(&c, "gre", &tshark_numbers(&c.file, "gre && !erspan"));
    assert_inner_hosts_are_tshark(&c, "gre", "gre && !erspan");
    assert_query_is_tshark(
        &c,
        "gre and ip6 and tcp",
        &tshark_numbers(&c.file, "gre && ipv6 && tcp"),
    );
}

#[test]
fn gre_with_key() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("gre-key");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "gre", "");
    // A GRE key by byte offsets (K bit, no checksum: the key follows the 4-byte header).
    let key5 = "proto gre and ip[20:2] & 0x2000 != 0 and ip[24:4] = 5";
    assert_query_equals_tcpdump(&c, &[key5, "proto gre and dst host 192.0.2.1"]);
    assert_eq!(
        tshark_numbers(&c.file, "gre.key == 5"),
        sent_with(&c, "key", 5)
    );
    assert_tcpdump_is_tshark(&c, key5, &sent_with(&c, "key", 5));
    for key in [5, 6] {
        let want = tshark_numbers(&c.file, &format!("gre.key == {key}"));
        assert_query_is_tshark(&c, &format!("gre {key}"), &want);
        assert_inner_hosts_are_tshark(&c, &format!("gre {key}"), &format!("gre.key == {key}"));
    }
    assert_query_is_tshark(
        &c,
        "proto gre and dst host 192.0.2.1 and gre 0x5 and udp",
        &tshark_numbers(&c.file, "ip.dst == 192.0.2.1 && gre.key == 5 && udp"),
    );
}

#[test]
fn gretap() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("gretap");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "gre", "");
    assert_query_equals_tcpdump(
        &c,
        &[
            "proto gre and ip[22:2] = 0x6558",
            "proto gre and ip[20:2] & 0x2000 != 0",
        ],
    );
    assert_query_is_tshark(&c, "gre 9", &tshark_numbers(&c.file, "gre.key == 9"));
    assert_inner_hosts_are_tshark(&c, "gre", "gre");
    assert_query_is_tshark(
        &c,
        "gre 9 and tcp port 443",
        &tshark_numbers(&c.file, "gre.key == 9 && tcp.port == 443"),
    );
}

#[test]
fn erspan_type_2() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("erspan2");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "erspan2", "");
    // GRE with a sequence number (8 bytes), then ERSPAN II: the session id is the low 10 bits of
    // its second 16-bit word.
    let span = "proto gre and ip[22:2] = 0x88be and ip[30:2] & 0x3ff = 123";
    assert_query_equals_tcpdump(&c, &[span, "host 192.0.2.10 and proto gre"]);
    assert_eq!(
        tshark_numbers(&c.file, "erspan.spanid == 123"),
        sent_with(&c, "span", 123)
    );
    assert_tcpdump_is_tshark(&c, span, &sent_with(&c, "span", 123));
    assert_query_is_tshark(&c, "erspan 123", &sent_with(&c, "span", 123));
    assert_query_is_tshark(&c, "erspan", &tshark_numbers(&c.file, "erspan"));
    assert_inner_hosts_are_tshark(&c, "erspan 124", "erspan.spanid == 124");
    // ERSPAN rides in GRE, but `gre` is GRE carrying IP, Ethernet or MPLS.
    assert!(query_decoded(&c.store, &c.work, "gre").is_empty());
}

#[test]
fn erspan_type_3() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("erspan3");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "erspan3", "");
    let span = "proto gre and ip[22:2] = 0x22eb and ip[30:2] & 0x3ff = 126";
    assert_query_equals_tcpdump(&c, &[span, "proto gre"]);
    assert_tcpdump_is_tshark(&c, span, &sent_with(&c, "span", 126));
    assert_query_is_tshark(
        &c,
        "erspan 126",
        &tshark_numbers(&c.file, "erspan.spanid == 126"),
    );
    assert_inner_hosts_are_tshark(&c, "erspan", "erspan");
}

#[test]
fn vxlan_from_the_encoder() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("vxlan");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "vxlan", "!(udp.port == 8472)");
    // The VNI by byte offsets: UDP header (8) + VXLAN flags and reserved (4), then VNI << 8.
    let vni43 = "udp dst port 4789 and udp[12:4] >> 8 = 43";
    assert_query_equals_tcpdump(&c, &[vni43, "udp port 8472", "udp and src host 192.0.2.2"]);
    assert_tcpdump_is_tshark(&c, vni43, &tshark_numbers(&c.file, "vxlan.vni == 43"));
    // VNI 44 rides on 8472: tshark sees it only through DECODE_AS.
    assert_eq!(
        tshark_numbers(&c.file, "vxlan.vni == 44"),
        sent_with(&c, "vni", 44)
    );
    // ringcap's `vxlan [VNI]`: UDP port 4789 as tshark decodes it (8472 is not VXLAN to either).
    for vni in [42, 43] {
        let want = tshark_numbers(&c.file, &format!("vxlan.vni == {vni}"));
        assert_eq!(want, sent_with(&c, "vni", vni));
        assert_query_is_tshark(&c, &format!("vxlan {vni}"), &want);
        assert_inner_hosts_are_tshark(&c, &format!("vxlan {vni}"), &format!("vxlan.vni == {vni}"));
    }
    assert!(query_decoded(&c.store, &c.work, "vxlan 44").is_empty());
    assert_query_is_tshark(
        &c,
        "udp and vxlan and (udp port 5300 or udp port 12300)",
        &tshark_numbers(&c.file, "vxlan && (udp.port == 5300 || udp.port == 12300)"),
    );
}

#[test]
fn geneve() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("geneve");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "geneve", "");
    let hosts = inner_hosts(&c);
    let h = &hosts[2];
    assert_query_equals_tcpdump(
        &c,
        &[
            "geneve",
            "geneve 7",
            "geneve and ip6",
            "udp port 6081",
            "geneve 7 or host 192.0.2.9",
        ],
    );
    assert_eq!(
        tshark_numbers(&c.file, "geneve.vni == 7"),
        sent_with(&c, "vni", 7)
    );
    // libpcap's `geneve and host H` is tshark's inner host H.
    let want = inner_host_packets_by_tshark(&c.file, "geneve", h);
    assert_tcpdump_is_tshark(&c, &format!("geneve and host {h}"), &want);
}

/// After `geneve` libpcap reads the carried packet: the index, which files it under that packet,
/// narrows these terms to the inner hosts and ports (it once narrowed them by the outer headers and
/// found nothing: `geneve and host 10.1.0.4` gave 0 packets where tcpdump gave 8).
#[test]
fn geneve_inner_terms_query_equals_tcpdump() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("geneve");
    let hosts = inner_hosts(&c);
    let h = &hosts[2];
    assert_query_equals_tcpdump(
        &c,
        &[
            &format!("geneve and host {h}"),
            &format!("geneve 8 and host {h}"),
            "geneve and net 10.1.0.0/24",
            "geneve and tcp port 443",
            "udp and geneve and port 80",
        ],
    );
}

#[test]
fn ip_in_ip() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("ipip");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "ipip", "");
    let hosts = inner_hosts(&c);
    let h = &hosts[0];
    let hex: String = h
        .split('.')
        .map(|o| format!("{:02x}", o.parse::<u8>().unwrap()))
        .collect();
    // The inner header's addresses at outer IHL (20) + 12 and + 16.
    let inner = format!("ip proto 4 and (ip[32:4] = 0x{hex} or ip[36:4] = 0x{hex})");
    assert_query_equals_tcpdump(&c, &["ip proto 4", &inner, "ip proto 4 and ip[29] = 6"]);
    assert_tcpdump_is_tshark(
        &c,
        &inner,
        &inner_host_packets_by_tshark(&c.file, "ip.proto == 4", h),
    );
}

#[test]
fn ipv6_in_ip() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("ip6in4");
    check_decode(&c);
    assert_flow_table_is_tshark(&c, "ipip", "");
    // The inner IPv6 next header at outer IHL (20) + 6.
    assert_query_equals_tcpdump(&c, &["ip proto 41", "ip proto 41 and ip[26] = 17", "ip6"]);
    assert_tcpdump_is_tshark(
        &c,
        "ip proto 41 and ip[26] = 6",
        &tshark_numbers(&c.file, "ipv6.nxt == 6"),
    );
}

#[test]
fn nested_tunnels() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("nested");
    check_decode(&c);
    // libpcap 1.10 matches `mpls 300 and geneve 7` (12 frames) but nothing once a term looks inside
    // that GENEVE (`... and tcp`, `... and host H`: 0, where tshark decodes 12): ringcap must agree.
    assert_query_equals_tcpdump(
        &c,
        &[
            "vlan 10 and vlan 20 and proto gre",
            "mpls 300 and udp port 6081",
            "mpls 300 and geneve 7",
            "mpls 300 and geneve 7 and tcp",
            "ip proto 4",
        ],
    );
    // VXLAN in GRE in QinQ: tshark finds VNI 77 and key 9 under the two tags.
    assert_eq!(
        tshark_numbers(
            &c.file,
            "ieee8021ad.id == 10 && gre.key == 9 && vxlan.vni == 77"
        ),
        sent_with(&c, "vni", 77)
    );
    // Eight IP-in-IP headers: tshark decodes all of them down to the TCP/UDP inside.
    let deep = tshark_decoded(&c.file, "ip.proto == 4");
    assert!(
        deep.iter().all(|d| d.protocols.matches(":ip").count() == 9),
        "{:?}",
        deep[0].protocols
    );
    // ringcap's terms find a tunnel at any depth; terms after it read what it carries.
    assert_query_is_tshark(
        &c,
        "vlan 10 and gre 9 and udp port 4789",
        &tshark_numbers(&c.file, "gre.key == 9"),
    );
    assert_inner_hosts_are_tshark(&c, "vxlan 77", "vxlan.vni == 77");
}

#[test]
fn malformed_tunnel_headers() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("malformed");
    let decoded = check_decode(&c);
    // None reaches an inner TCP/UDP header but the GRE of version 3, which tshark decodes as
    // version 0; tshark flags all as malformed but that one and the inner IPv4 header whose total
    // length runs past the frame (an expert note only).
    let lenient = [
        "gre version 3",
        "vxlan inner ip total length beyond the frame",
    ];
    for (s, d) in c.sent.iter().zip(&decoded) {
        let why = s.malformed.as_deref().expect("every frame is malformed");
        let l4 = d
            .inner
            .as_ref()
            .is_some_and(|i| i.src.starts_with("10.1.") && (i.proto == "tcp" || i.proto == "udp"));
        assert_eq!(l4, why == lenient[0], "{why}: decoded as {}", d.protocols);
        assert_eq!(
            !d.malformed.is_empty(),
            !lenient.contains(&why),
            "{why}: decoded as {}",
            d.protocols
        );
    }
    assert_query_equals_tcpdump(
        &c,
        &[
            "proto gre",
            "udp port 4789",
            "mpls",
            "vlan 10",
            "geneve",
            "geneve and host 10.1.0.1",
            "ip proto 4 or ip proto 41",
            "mpls 100 and mpls 101",
        ],
    );
}

#[test]
fn kernel_vxlan_devices() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kernel_vxlan();
    let decoded = tshark_decoded(&c.file, "");
    assert!(
        decoded
            .iter()
            .all(|d| d.protocols.starts_with("eth:ethertype:ip:udp:vxlan:eth")),
        "every frame is VXLAN"
    );
    for d in &decoded {
        let inner = d
            .inner
            .as_ref()
            .unwrap_or_else(|| panic!("no inner IP: {d:?}"));
        let vni = if inner.src.starts_with("10.200.43.") {
            43
        } else {
            42
        };
        assert_eq!(d.vxlan_vnis, [vni], "{d:?}");
    }
    // One TCP connection per (client, server) pair, five in VNI 42 (one over IPv6), one in 43.
    let tcp = inner_conversations_by_tshark(&c.file, "tcp", "vxlan.vni == 42");
    assert_eq!(tcp.len(), 5, "{tcp:?}");
    assert_eq!(
        inner_conversations_by_tshark(&c.file, "tcp", "vxlan.vni == 43").len(),
        1
    );
    assert_eq!(inner_conversations_by_tshark(&c.file, "udp", "").len(), 6);
    for (k, v) in &tcp {
        assert!(v.a_to_b_frames >= 4 && v.b_to_a_frames >= 3, "{k:?}: {v:?}");
    }
    let vni43 = "udp dst port 4789 and udp[12:4] >> 8 = 43";
    assert_query_equals_tcpdump(
        &c,
        &[
            vni43,
            "udp port 4789",
            "src host 10.77.0.2",
            "udp and greater 300",
        ],
    );
    assert_tcpdump_is_tshark(&c, vni43, &tshark_numbers(&c.file, "vxlan.vni == 43"));
    let h = VX42_RX[1];
    let want = inner_host_packets_by_tshark(&c.file, "vxlan.vni == 42", h);
    assert_eq!(
        want.len(),
        tshark_numbers(&c.file, &format!("vxlan.vni == 42 && ip.addr#2 == {h}")).len()
    );
    // ringcap's `vxlan` over the kernel's own encapsulation, real sockets inside.
    assert_inner_hosts_are_tshark(&c, "vxlan 42", "vxlan.vni == 42");
    assert_query_is_tshark(
        &c,
        "vxlan 43 and tcp",
        &tshark_numbers(&c.file, "vxlan.vni == 43 && tcp"),
    );
}

/// What tshark's conversation statistics count for tunnelled packets (see common/tunnels.rs).
#[test]
fn tshark_conversations_of_tunnelled_packets() {
    if !have_tunnel_tools() {
        return;
    }
    let c = capture_kind("vxlan");
    // conv,udp lists the carriers' outer conversations (port 4789 or 8472) besides the inner ones.
    let all = tshark_conv(&c.file, "udp", "");
    assert!(
        all.keys()
            .any(|(a, b)| a.0 == "192.0.2.1" && [4789, 8472].contains(&b.1)),
        "{all:?}"
    );
    for proto in ["tcp", "udp"] {
        let by_conv = inner_conversations_by_tshark(&c.file, proto, "");
        assert_eq!(
            by_conv,
            inner_conversations_by_packets(&c.file, proto, ""),
            "{proto}"
        );
        // ... and equals the manifest's inner flows, frames each way, bytes being whole frames.
        let mut sent: BTreeMap<ConvKey, ConvCounts> = BTreeMap::new();
        for s in &c.sent {
            let Some(t) = s.inner.as_ref().filter(|t| t.proto == proto) else {
                continue;
            };
            let (a, b) = (
                (t.src.clone(), t.sport.unwrap()),
                (t.dst.clone(), t.dport.unwrap()),
            );
            if let Some(r) = sent.get_mut(&(b.clone(), a.clone())) {
                r.b_to_a_frames += 1;
                r.b_to_a_bytes += s.len;
            } else {
                let r = sent.entry((a, b)).or_default();
                r.a_to_b_frames += 1;
                r.a_to_b_bytes += s.len;
            }
        }
        assert_eq!(by_conv, sent, "{proto}");
    }
    // conv,tcp has no outer rows: no tunnel here rides on TCP.
    assert_eq!(
        tshark_conv(&c.file, "tcp", ""),
        inner_conversations_by_tshark(&c.file, "tcp", "")
    );
}
