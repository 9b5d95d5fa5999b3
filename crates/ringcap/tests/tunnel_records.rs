//! Header records, `ringcap convert` and `ringcap analyze` of tunnelled traffic (issue 36): every
//! kind of tunnel (scripts/tunnels.py, as in tests/tunnels.rs) is captured from a real veth by
//! `ringcap capture -w … --records tcp://…` with a real `ringcap collect` in the Rx namespace, then
//! - each record (read by DuckDB from the collector's Parquet) equals tshark's decode of the same
//!   frame in the pcap the same process wrote: the innermost 5-tuple, the frame length, the tunnel
//!   and its id (`vxlan.vni`, `geneve.vni`, `gre.key`, `erspan.spanid`, the top `mpls.label`) and
//!   the carrier's addresses; frames ringcap does not decapsulate (VXLAN on 8472) are records of
//!   their outer headers;
//! - the records summed per inner flow equal tshark's conversations of the innermost 5-tuples;
//! - `ringcap convert` + `ringcap analyze` of the pcap give one flow row per direction of each inner
//!   5-tuple with tshark's frames and bytes that way, and the tunnel and its id;
//! - nested and malformed tunnels are records of their outer headers with the documented reason.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::collector;
use common::tunnels::*;
use common::*;
use testbed::Side;

/// One record or flow row as DuckDB reads it (addresses spelled by Python's `ipaddress`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Row {
    wire_len: u64,
    tuple: Option<FiveTuple>,
    tunnel: Option<String>,
    tunnel_id: Option<u64>,
    tunnel_a: Option<String>,
    tunnel_b: Option<String>,
    problem: Option<String>,
    /// Flow rows: packets.
    packets: u64,
}

/// Python that prints the rows of `sql` (columns: len or bytes, ip4 src/dst, ip6 src/dst, protocol,
/// ports, tunnel columns, packets) one per line, tab separated.
fn rows_by_duckdb(sql: &str) -> Vec<Row> {
    let text = python(&format!(
        "import duckdb, ipaddress\n\
         def a(v4, v6):\n\
         \x20   if v4 is not None: return str(ipaddress.IPv4Address(v4))\n\
         \x20   if v6 is not None: return str(ipaddress.IPv6Address(bytes(v6)))\n\
         \x20   return ''\n\
         for r in duckdb.sql(\"\"\"{sql}\"\"\").fetchall():\n\
         \x20   v = [r[0], a(r[1], r[3]), a(r[2], r[4])] + list(r[5:])\n\
         \x20   print('\\t'.join('' if x is None else str(x) for x in v))"
    ));
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
    text.lines()
        .map(|l| {
            let v: Vec<&str> = l.split('\t').collect();
            let num = |i: usize| v[i].parse::<u64>().ok();
            let tuple = opt(v[1]).map(|src| FiveTuple {
                src,
                dst: v[2].to_string(),
                proto: match v[3] {
                    "6" => "tcp".to_string(),
                    "17" => "udp".to_string(),
                    p => p.to_string(),
                },
                sport: num(4).map(|p| p as u16),
                dport: num(5).map(|p| p as u16),
            });
            Row {
                wire_len: num(0).unwrap(),
                tuple,
                tunnel: opt(v[6]),
                tunnel_id: num(7),
                tunnel_a: opt(v[8]),
                tunnel_b: opt(v[9]),
                problem: opt(v[10]),
                packets: num(11).unwrap_or(1),
            }
        })
        .collect()
}

/// The records of a collector's output directory in capture order.
fn records_by_duckdb(dir: &Path) -> Vec<Row> {
    rows_by_duckdb(&format!(
        "SELECT wire_len, src_ip4, dst_ip4, src_ip6, dst_ip6, protocol, src_port, dst_port, \
         tunnel, tunnel_id, tunnel_a, tunnel_b, tunnel_problem, 1 \
         FROM read_parquet('{}/**/*.parquet') ORDER BY ts, wire_len",
        dir.display()
    ))
}

/// Captures `kind` with header records sent to a `ringcap collect` in the Rx namespace; returns
/// the capture and the records, which must be one per frame sent.
fn capture_with_records(kind: &str) -> (Captured, Vec<Row>) {
    let tb = testbed();
    let lo = tb
        .command(Side::Rx, "ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(lo.success());
    let dir = temp_dir(&format!("tunnel-records-{kind}"));
    let key = collector::key_file(&dir);
    let out = dir.join("records");
    let coll = collector::start_with(
        tb.command(Side::Rx, ringcap().to_str().unwrap()),
        &out,
        &key,
        &[],
    );
    let dest = format!("tcp://{}", coll.tcp.unwrap());
    let c = capture_kind_on(
        &tb,
        kind,
        &["--records", &dest, "--key", key.to_str().unwrap()],
    );
    let (summary, _) = collector::stop_json(coll);
    assert_eq!(
        summary["records_stored"].as_u64(),
        Some(c.sent.len() as u64),
        "{summary}"
    );
    let rows = records_by_duckdb(&out);
    assert_eq!(rows.len(), c.sent.len());
    (c, rows)
}

/// A frame's outermost IPv4 source and destination, and UDP destination port.
type Outer = (Option<(String, String)>, Option<u16>);

/// Each frame's outermost IPv4 addresses and UDP destination port as tshark decodes them.
fn outer_by_tshark(file: &Path) -> Vec<Outer> {
    tshark_rows(file, "", &["ip.src", "ip.dst", "udp.dstport"])
        .into_iter()
        .map(|r| {
            let first = |s: &str| {
                s.split(',')
                    .next()
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
            };
            let ip = first(&r[0]).zip(first(&r[1]));
            (ip, first(&r[2]).map(|p| p.parse().unwrap()))
        })
        .collect()
}

/// What a record of a frame in one tunnel of `kind` must say, from tshark's decode of the frame.
fn expected_record(kind: &str, d: &Decoded, outer: &Option<(String, String)>) -> Row {
    let (tunnel, id) = match kind {
        "vxlan" => ("vxlan", d.vxlan_vnis.first().copied()),
        "geneve" => ("geneve", d.geneve_vnis.first().copied()),
        // GRE without a key has id 0, as in the flow table.
        "gre" | "gre-key" | "gretap" => ("gre", Some(d.gre_keys.first().copied().unwrap_or(0))),
        "erspan2" | "erspan3" => (kind, d.erspan_spans.first().copied()),
        "mpls" => ("mpls", d.labels.first().copied()),
        "ipip" | "ip6in4" => ("ipip", None),
        k => panic!("{k} is not a single-tunnel kind"),
    };
    // The carrier: the outermost IP header, the lower address first (none for MPLS over Ethernet).
    let carrier = outer.as_ref().filter(|_| kind != "mpls").map(|(s, d)| {
        let (s, d): (std::net::IpAddr, std::net::IpAddr) = (s.parse().unwrap(), d.parse().unwrap());
        (s.min(d).to_string(), s.max(d).to_string())
    });
    Row {
        wire_len: d.len,
        tuple: d.inner.clone(),
        tunnel: Some(tunnel.to_string()),
        tunnel_id: id,
        tunnel_a: carrier.as_ref().map(|c| c.0.clone()),
        tunnel_b: carrier.map(|c| c.1),
        problem: None,
        packets: 1,
    }
}

/// Records of a single-tunnel kind equal tshark, frame by frame and per inner flow; then the
/// analysis of the converted pcap does too, per direction.
fn check_single_tunnel_kind(kind: &str) {
    let (c, records) = capture_with_records(kind);
    let decoded = tshark_decoded(&c.file, "");
    let outer = outer_by_tshark(&c.file);
    assert_eq!(decoded.len(), records.len());
    let mut in_tunnel = 0;
    for ((d, (ip, dport)), got) in decoded.iter().zip(&outer).zip(&records) {
        let what = format!("{kind} frame {} ({})", d.number, d.protocols);
        if *dport == Some(8472) {
            // Not VXLAN to ringcap (tshark decodes it only as told): a record of the outer headers.
            let (src, dst) = ip.clone().unwrap();
            let want = Some(FiveTuple {
                src,
                dst,
                proto: "udp".into(),
                sport: got.tuple.as_ref().and_then(|t| t.sport),
                dport: Some(8472),
            });
            assert_eq!((&got.tuple, &got.tunnel), (&want, &None), "{what}");
            continue;
        }
        assert_eq!(*got, expected_record(kind, d, ip), "{what}");
        in_tunnel += 1;
    }
    assert!(in_tunnel > 0, "{kind}: no frame in a tunnel");
    // Per inner flow: the records' frames and bytes each way are tshark's innermost conversations.
    let filter = if kind == "vxlan" {
        "!(udp.port == 8472)"
    } else {
        ""
    };
    for proto in ["tcp", "udp"] {
        let want = inner_conversations_by_tshark(&c.file, proto, filter);
        let got = conversations(records.iter().filter(|r| r.tunnel.is_some()), proto);
        assert_eq!(
            got, want,
            "{kind} {proto}: records per inner flow vs tshark"
        );
    }
    check_analyze(kind, &c, &decoded, filter);
}

/// Rows (one per packet) summed into conversations as tshark counts them: A is the first sender.
fn conversations<'a>(
    rows: impl Iterator<Item = &'a Row>,
    proto: &str,
) -> BTreeMap<ConvKey, ConvCounts> {
    let mut out: BTreeMap<ConvKey, ConvCounts> = BTreeMap::new();
    for r in rows {
        let Some(t) = r.tuple.as_ref().filter(|t| t.proto == proto) else {
            continue;
        };
        let (s, d) = (
            (t.src.clone(), t.sport.unwrap()),
            (t.dst.clone(), t.dport.unwrap()),
        );
        if let Some(c) = out.get_mut(&(d.clone(), s.clone())) {
            c.b_to_a_frames += r.packets;
            c.b_to_a_bytes += r.wire_len;
        } else {
            let c = out.entry((s, d)).or_default();
            c.a_to_b_frames += r.packets;
            c.a_to_b_bytes += r.wire_len;
        }
    }
    out
}

/// `ringcap convert` then `ringcap analyze` of the capture: the report's flow rows of tunnelled
/// packets, one per direction, equal tshark's conversations each way and name the tunnel and id.
fn check_analyze(kind: &str, c: &Captured, decoded: &[Decoded], filter: &str) {
    let trace = c.work.join("trace");
    let report = c.work.join("report");
    for args in [
        vec![
            "convert",
            c.file.to_str().unwrap(),
            "-o",
            trace.to_str().unwrap(),
        ],
        vec![
            "analyze",
            trace.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
    ] {
        let out = std::process::Command::new(ringcap())
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ringcap {args:?}: {}",
            stderr_text(&out)
        );
    }
    let flows = report.join("flows.parquet");
    let version = python(&format!(
        "import duckdb\nprint(duckdb.sql(\"SELECT decode(value) FROM parquet_kv_metadata('{}') \
         WHERE decode(key) = 'ringcap.schema'\").fetchall()[0][0])",
        flows.display()
    ));
    assert_eq!(version, "report-flows/1.1");
    let rows = rows_by_duckdb(&format!(
        "SELECT bytes, src_ip4, dst_ip4, src_ip6, dst_ip6, protocol, src_port, dst_port, \
         tunnel, tunnel_id, tunnel_a, tunnel_b, NULL, packets FROM read_parquet('{}') \
         WHERE tunnel IS NOT NULL",
        flows.display()
    ));
    // The tunnel and id of each inner 5-tuple, from tshark's per-frame decode.
    let mut ids: BTreeMap<FiveTuple, Row> = BTreeMap::new();
    for d in decoded {
        if let Some(t) = &d.inner {
            let e = expected_record(kind, d, &None);
            let prev = ids.insert(t.clone(), e.clone());
            assert!(
                prev.is_none_or(|p| p.tunnel_id == e.tunnel_id),
                "{t:?} in two tunnels"
            );
        }
    }
    let mut got = BTreeMap::new();
    for r in &rows {
        let t = r.tuple.clone().expect("tunnelled flows are IP");
        if t.proto == "tcp" || t.proto == "udp" {
            let want = &ids[&t];
            assert_eq!(
                (&r.tunnel, r.tunnel_id),
                (&want.tunnel, want.tunnel_id),
                "{r:?}"
            );
            got.insert(t, (r.packets, r.wire_len));
        }
    }
    let mut want = BTreeMap::new();
    for proto in ["tcp", "udp"] {
        for ((a, b), n) in inner_conversations_by_tshark(&c.file, proto, filter) {
            let tuple = |s: &(String, u16), d: &(String, u16)| FiveTuple {
                src: s.0.clone(),
                dst: d.0.clone(),
                proto: proto.to_string(),
                sport: Some(s.1),
                dport: Some(d.1),
            };
            want.insert(tuple(&a, &b), (n.a_to_b_frames, n.a_to_b_bytes));
            if n.b_to_a_frames > 0 {
                want.insert(tuple(&b, &a), (n.b_to_a_frames, n.b_to_a_bytes));
            }
        }
    }
    assert!(!want.is_empty());
    assert_eq!(got, want, "{kind}: analyze's flows per direction vs tshark");
}

macro_rules! single_tunnel_tests {
    ($($name:ident => $kind:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            if have_tunnel_tools() && have("python3") {
                check_single_tunnel_kind($kind);
            }
        }
    )*};
}

single_tunnel_tests! {
    records_and_analyze_of_vxlan => "vxlan",
    records_and_analyze_of_geneve => "geneve",
    records_and_analyze_of_gre => "gre",
    records_and_analyze_of_gre_with_key => "gre-key",
    records_and_analyze_of_gretap => "gretap",
    records_and_analyze_of_erspan2 => "erspan2",
    records_and_analyze_of_erspan3 => "erspan3",
    records_and_analyze_of_mpls => "mpls",
    records_and_analyze_of_ipip => "ipip",
    records_and_analyze_of_ipv6_in_ip => "ip6in4",
}

/// Two or more tunnels: records of the outermost headers, `nested` (or `too_deep` past 4 tunnels).
#[test]
fn nested_tunnels_are_records_of_their_outer_headers() {
    if !(have_tunnel_tools() && have("python3")) {
        return;
    }
    let (c, records) = capture_with_records("nested");
    let outer = outer_by_tshark(&c.file);
    for ((s, (ip, _)), got) in c.sent.iter().zip(&outer).zip(&records) {
        let what = format!("frame {} ({:?})", s.n, s.ids);
        assert_eq!(got.tunnel, None, "{what}");
        let want = if s.ids["depth"].as_u64() > Some(4) {
            "too_deep"
        } else {
            "nested"
        };
        assert_eq!(got.problem.as_deref(), Some(want), "{what}");
        // MPLS straight over Ethernet has no outer IP header: the record has none either.
        let src = got.tuple.as_ref().map(|t| (t.src.clone(), t.dst.clone()));
        let mpls = s.ids["labels"].is_array();
        assert_eq!(src, if mpls { None } else { ip.clone() }, "{what}");
    }
}

/// Cut and impossible tunnel headers: records of the outer headers with the reason (by hand from
/// each case of scripts/tunnels.py and the rule in docs/records.md).
#[test]
fn malformed_tunnels_are_records_of_their_outer_headers() {
    if !(have_tunnel_tools() && have("python3")) {
        return;
    }
    let (c, records) = capture_with_records("malformed");
    let outer = outer_by_tshark(&c.file);
    for ((s, (ip, _)), got) in c.sent.iter().zip(&outer).zip(&records) {
        let why = s.malformed.as_deref().unwrap();
        let want = match why {
            // GRE of a version other than 0 is not a tunnel (version 1 is PPTP's).
            "gre version 3" => None,
            // VLAN tags are not tunnels: an IP header cut short is just that.
            "qinq inner ip header cut after 10 bytes" => None,
            // The inner IP header is whole; only its total length overshoots the frame.
            "vxlan inner ip total length beyond the frame" => Some("decapsulated"),
            _ => Some("truncated"),
        };
        let what = format!("frame {} ({why})", s.n);
        match want {
            Some("decapsulated") => {
                assert_eq!(
                    (got.tunnel.as_deref(), got.tunnel_id),
                    (Some("vxlan"), Some(42)),
                    "{what}"
                );
                assert_eq!(
                    got.tuple.as_ref().map(|t| t.src.as_str()),
                    Some("10.1.0.1"),
                    "{what}"
                );
            }
            p => {
                assert_eq!(
                    (got.tunnel.as_deref(), got.problem.as_deref()),
                    (None, p),
                    "{what}"
                );
                let src = got.tuple.as_ref().map(|t| (t.src.clone(), t.dst.clone()));
                if ip.is_some() && !why.starts_with("qinq") {
                    assert_eq!(&src, ip, "{what}: the outer addresses");
                }
            }
        }
    }
}
