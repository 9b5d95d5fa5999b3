//! `ringcap capture --decap` (issue 36): the same tunnelled traffic captured twice at once from a
//! real veth, plain and with `--decap`, then
//! - the decapsulated file's frames are, frame for frame, the Ethernet frames tshark decodes inside
//!   the plain capture's tunnels (bytes from tshark's layer offsets, original lengths, stamps), and
//!   the packets without such a tunnel are the plain ones unchanged;
//! - each decapsulated frame's comment (`frame.comment`) names the tunnel tshark decoded: kind, VNI
//!   / key / session, the carrier's addresses;
//! - `tcpdump -r` of the decapsulated file with `host INNER` finds the packets `ringcap query` finds
//!   with `vxlan and host INNER` (or `geneve and ...`) over the plain store;
//! - `ringcap query` over the decapsulated store equals `tcpdump -r` of it, with the live index and
//!   with one `ringcap index` rebuilt;
//! - the summary counts what was decapsulated and what kept whole.
//!
//! VXLAN from real Linux vxlan devices (real sockets inside); GENEVE, gretap, ERSPAN II/III, VXLAN
//! on two ports, nested and malformed tunnels from scripts/tunnels.py (scapy), as this kernel has
//! no such devices. Bad flags exit 2.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::stores::store_files;
use common::tunnels::*;
use common::*;
use testbed::Testbed;

/// Every tunnel kind `--decap` knows.
const ALL: &str = "vxlan,geneve,gre,erspan";

/// One plain capture and one `--decap` capture of the same frames.
struct Pair {
    plain: Captured,
    decap: Captured,
    /// The decapsulating capture's JSON summary.
    summary: serde_json::Value,
}

fn capture_pair(
    tb: &Testbed,
    tag: &str,
    decap: &str,
    min_frames: u64,
    send: impl FnOnce(),
) -> Pair {
    let dir = temp_dir(&format!("decap-{tag}"));
    let start = |name: &str, extra: &[&str]| {
        let store = dir.join(name);
        std::fs::create_dir_all(&store).unwrap();
        let base = store.join("cap");
        let mut args = vec!["capture", "-i", &tb.rx_if, "-w", base.to_str().unwrap()];
        args.extend(["-C", "64MB", "-F", "pcapng", "--json"]);
        args.extend(extra);
        (store, spawn_capture(tb, &args))
    };
    let (plain_store, plain) = start("plain", &[]);
    let (decap_store, decapped) = start("decap", &["--decap", decap]);
    let before = tb.rx_packets();
    send();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tb.rx_packets() < before + min_frames && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    // The decapsulating one first: the harness keeps the stderr of the capture spawned last.
    let d = stop(decapped, libc::SIGINT);
    let p = stop(plain, libc::SIGINT);
    assert!(p.status.success(), "plain capture: {}", stderr_text(&p));
    assert!(d.status.success(), "--decap capture: {}", stderr_text(&d));
    let err = stderr_text(&d);
    let summary = err
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no JSON summary in: {err}"));
    let captured = |store: PathBuf, name: &str| {
        let files = store_files(&store);
        assert_eq!(files.len(), 1, "one capture file expected: {files:?}");
        let work = dir.join(format!("work-{name}"));
        std::fs::create_dir_all(&work).unwrap();
        Captured {
            file: files[0].clone(),
            store,
            sent: Vec::new(),
            work,
        }
    };
    Pair {
        plain: captured(plain_store, "plain"),
        decap: captured(decap_store, "decap"),
        summary,
    }
}

/// One frame as tshark shows it: bytes, original length, comment. (Not the stamp: each packet
/// socket may stamp a frame itself as it fills its ring, so two captures of one frame can differ.)
#[derive(Clone, Debug, PartialEq, Eq)]
struct Shown {
    bytes: Vec<u8>,
    len: u64,
    comment: String,
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// tshark's JSON of every frame of `file` (with bytes and layer offsets; VXLAN on 4789 and GENEVE
/// on 6081 only, as `--decap vxlan,geneve` reads them).
fn tshark_json(file: &Path) -> Vec<serde_json::Value> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-n", "-T", "json", "-x", "--no-duplicate-keys"])
        .output()
        .expect("tshark");
    assert!(out.status.success(), "tshark: {}", stderr_text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("tshark's JSON");
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| p["_source"]["layers"].clone())
        .collect()
}

/// The first occurrence of a layer or of its bytes (tshark gives a list when there are several;
/// one occurrence of bytes is itself a list: hex, offset, length, ...).
fn first(v: &serde_json::Value) -> &serde_json::Value {
    match v.as_array() {
        Some(a) if a.first().is_some_and(|x| x.is_array() || x.is_object()) => &a[0],
        _ => v,
    }
}

fn field(layer: &serde_json::Value, name: &str) -> String {
    first(layer)[name].as_str().unwrap_or("").to_string()
}

/// Frames of `file` as tshark shows them.
fn shown(file: &Path) -> Vec<Shown> {
    tshark_json(file)
        .iter()
        .map(|l| Shown {
            bytes: hex(first(&l["frame_raw"])[0].as_str().unwrap()),
            len: field(&l["frame"], "frame.len").parse().unwrap(),
            comment: l["pkt_comment"]["frame.comment"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        })
        .collect()
}

/// What `--decap ALL` must write for each frame of the plain capture, from tshark's decode of it:
/// when tshark's outermost layers are Ethernet, IPv4 and a VXLAN (4789), GENEVE (6081), GRE or
/// ERSPAN carrying Ethernet, the carried frame from tshark's offset of the inner Ethernet header to
/// the end of the carrier's IP packet (its ip.len), its length the frame's less the bytes before and
/// after, and a comment naming the tunnel; otherwise the frame unchanged, without comment.
fn expected(plain: &Path, kinds: &[&str]) -> Vec<Shown> {
    tshark_json(plain)
        .iter()
        .map(|l| {
            let protocols = field(&l["frame"], "frame.protocols");
            let raw = hex(first(&l["frame_raw"])[0].as_str().unwrap());
            let len: u64 = field(&l["frame"], "frame.len").parse().unwrap();
            let whole = Shown {
                bytes: raw.clone(),
                len,
                comment: String::new(),
            };
            let kind = [
                ("eth:ethertype:ip:udp:vxlan:eth", "vxlan"),
                ("eth:ethertype:ip:udp:geneve:eth", "geneve"),
                ("eth:ethertype:ip:gre:eth", "gre"),
                ("eth:ethertype:ip:gre:erspan:eth", "erspan"),
            ]
            .into_iter()
            .find(|(p, _)| protocols.starts_with(p))
            .map(|(_, k)| k);
            let Some(kind) = kind.filter(|k| kinds.contains(k)) else {
                return whole;
            };
            let Some(inner_at) = l["eth_raw"][1][1].as_u64() else {
                // No inner Ethernet header tshark could read (cut): kept whole.
                return whole;
            };
            let inner_at = inner_at as usize;
            let ip = first(&l["ip"]);
            let ip_at = first(&l["ip_raw"])[1].as_u64().unwrap() as usize;
            let ip_len: usize = ip["ip.len"].as_str().unwrap().parse().unwrap();
            let end = ip_at + ip_len;
            if end < inner_at + 14 {
                // Less than an Ethernet header inside (tshark marks it malformed): kept whole.
                return whole;
            }
            let (src, dst) = (field(ip, "ip.src"), field(ip, "ip.dst"));
            // tshark prints some ids in hex (geneve.vni, gre.key).
            let num = |s: String| match s.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).unwrap(),
                None => s.parse().unwrap_or_else(|_| panic!("`{s}`")),
            };
            let id = match kind {
                "vxlan" => format!("vxlan {}", num(field(&l["vxlan"], "vxlan.vni"))),
                "geneve" => format!("geneve {}", num(field(&l["geneve"], "geneve.vni"))),
                "gre" => match field(&l["gre"], "gre.key") {
                    k if k.is_empty() => "gre".to_string(),
                    k => format!("gre {}", num(k)),
                },
                _ => {
                    let e = first(&l["erspan"]);
                    let ty = match field(e, "erspan.version").as_str() {
                        "1" => "erspan2",
                        "2" => "erspan3",
                        v => panic!("ERSPAN version {v}"),
                    };
                    format!("{ty} {}", num(field(e, "erspan.spanid")))
                }
            };
            Shown {
                bytes: raw[inner_at..end.min(raw.len())].to_vec(),
                len: len - inner_at as u64 - (len - end as u64),
                comment: format!("{id} {src} > {dst}"),
            }
        })
        .collect()
}

/// The decapsulated file is what tshark decodes inside the plain one, frame for frame; returns
/// how many frames were decapsulated, which the summary must say too.
fn assert_decapsulated_as_tshark(p: &Pair, kinds: &[&str]) -> u64 {
    let all = expected(&p.plain.file, kinds);
    let got = shown(&p.decap.file);
    // The plain capture starts before and stops after the other one, so it may hold a few more
    // frames at either end (the kernel's own: neighbour discovery through a vxlan device). The
    // decapsulated file must be one unbroken run of it, frame for frame.
    assert!(
        got.len() <= all.len() && all.len() - got.len() <= 8,
        "frames: --decap {} vs plain {}",
        got.len(),
        all.len()
    );
    let from = (0..=all.len() - got.len())
        .find(|&o| all[o..o + got.len()] == got[..])
        .unwrap_or_else(|| {
            let i = got.iter().zip(&all).position(|(g, w)| g != w).unwrap_or(0);
            panic!("frame {}: {:?} vs {:?}", i + 1, got[i], all[i])
        });
    let want = &all[from..from + got.len()];
    let n = want.iter().filter(|w| !w.comment.is_empty()).count() as u64;
    let d = &p.summary["decap"];
    assert_eq!(d["decapsulated"], n, "{d}");
    assert_eq!(d["kept_whole"], want.len() as u64 - n, "{d}");
    n
}

/// Positions (0-based) in `file` of the packets of `some` (tcpdump's decodes of packets of it).
fn positions(file: &Path, some: &[(u64, String)]) -> Vec<usize> {
    let all = tcpdump_decoded(file, "");
    some.iter()
        .map(|s| {
            all.iter()
                .position(|a| a == s)
                .expect("a packet of the file")
        })
        .collect()
}

/// `tcpdump -r DECAP 'host H'` finds the packets `ringcap query PLAIN 'TERM and host H'` does
/// (the same positions: the two files hold the same frames in the same order).
fn assert_inner_hosts_agree(p: &Pair, term: &str, hosts: &[&str]) {
    for h in hosts {
        let by_tcpdump = tcpdump_decoded(&p.decap.file, &format!("host {h}"));
        let by_query = query_decoded(
            &p.plain.store,
            &p.plain.work,
            &format!("{term} and host {h}"),
        );
        assert!(!by_query.is_empty(), "`{term} and host {h}`: nothing");
        assert_eq!(
            positions(&p.decap.file, &by_tcpdump),
            positions(&p.plain.file, &by_query),
            "host {h}: tcpdump over the decapsulated file vs `{term} and host {h}` over the plain store"
        );
    }
}

/// `ringcap query` over the decapsulated store equals tcpdump -r, with the live index and with
/// one rebuilt by `ringcap index`.
fn assert_store_is_tcpdump(c: &Captured, exprs: &[&str]) {
    assert!(
        c.file
            .with_file_name(format!(
                "{}.idx",
                c.file.file_name().unwrap().to_str().unwrap()
            ))
            .exists(),
        "the live indexer indexed {}",
        c.file.display()
    );
    assert_query_equals_tcpdump(c, exprs);
    let st = Command::new(ringcap())
        .args(["index", "--force", "-q"])
        .arg(&c.store)
        .output()
        .unwrap();
    assert!(st.status.success(), "index: {}", stderr_text(&st));
    assert_query_equals_tcpdump(c, exprs);
}

#[test]
fn kernel_vxlan_devices_decapsulated() {
    if !have_tunnel_tools() {
        return;
    }
    let (tb, pairs) = kernel_vxlan_testbed();
    let p = capture_pair(
        &tb,
        "kernel",
        "vxlan",
        kernel_vxlan_min_frames(&pairs),
        || kernel_vxlan_traffic(&tb, &pairs),
    );
    let n = assert_decapsulated_as_tshark(&p, &["vxlan"]);
    assert!(n >= kernel_vxlan_min_frames(&pairs), "{n} decapsulated");
    // The VNIs tshark decodes, in the comments: both sessions.
    let comments: Vec<String> = shown(&p.decap.file)
        .into_iter()
        .map(|s| s.comment)
        .collect();
    for vni in [42, 43] {
        let c = format!("vxlan {vni} ");
        assert!(comments.iter().any(|x| x.starts_with(&c)), "no {c}");
    }
    // The inner frames decode as plain Ethernet to tshark: no VXLAN left, inner hosts outermost.
    let rows = tshark_rows(
        &p.decap.file,
        "vxlan || ip.addr == 10.77.0.1",
        &["frame.number"],
    );
    assert!(rows.is_empty(), "tunnel left in {rows:?}");
    let hosts = [VX42_TX[0], VX42_RX[1], VX43_TX, VX42_TX6];
    assert_inner_hosts_agree(&p, "vxlan", &hosts);
    let exprs = [
        format!("host {}", VX42_RX[0]),
        format!("host {VX43_RX} and tcp"),
        "tcp port 7000".to_string(),
        format!("ip6 and host {VX42_RX6}"),
        "udp and greater 200".to_string(),
    ];
    assert_store_is_tcpdump(
        &p.decap,
        &exprs.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    // And the interface says what was done.
    let d = tshark_rows(
        &p.decap.file,
        "frame.number == 1",
        &["frame.interface_description"],
    );
    assert!(d[0][0].contains("--decap vxlan:4789"), "{d:?}");
}

#[test]
fn scapy_tunnels_decapsulated() {
    if !have_tunnel_tools() {
        return;
    }
    let tb = testbed();
    // VXLAN on 4789 and on 8472 (kept whole unless named), GENEVE, gretap with and without key,
    // ERSPAN II and III, then tunnels in tunnels and malformed ones (only the outermost tunnel of
    // a kind asked for, carrying Ethernet and read whole, is stripped).
    for kind in [
        "geneve",
        "gretap",
        "erspan2",
        "erspan3",
        "vxlan",
        "nested",
        "malformed",
    ] {
        let sent = manifest(kind, 36).len() as u64;
        let p = capture_pair(&tb, kind, ALL, sent, || send_kind(&tb, kind));
        let n = assert_decapsulated_as_tshark(&p, &["vxlan", "geneve", "gre", "erspan"]);
        let d = &p.summary["decap"];
        match kind {
            "nested" => assert_eq!(n, 0, "{kind}: {d}"),
            "malformed" => {
                assert!(d["kept_cut_or_malformed"].as_u64().unwrap() > 0, "{d}");
            }
            _ => assert!(n > 0 && n <= sent, "{kind}: {n} of {sent}"),
        }
        if kind == "vxlan" {
            // 8472 is not VXLAN to `--decap vxlan`: those frames are kept whole.
            assert_eq!(d["kept_not_tunnelled"], sent - n, "{d}");
        }
        if kind == "geneve" {
            // libpcap's `geneve and host H` over the plain store, tcpdump's `host H` over the
            // decapsulated file.
            let mut hosts: Vec<String> = manifest(kind, 36)
                .into_iter()
                .filter_map(|s| s.inner)
                .flat_map(|i| [i.src, i.dst])
                .filter(|a| !a.contains(':'))
                .collect();
            hosts.sort();
            hosts.dedup();
            let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
            assert_inner_hosts_agree(&p, "geneve", &hosts);
            assert_store_is_tcpdump(
                &p.decap,
                &[
                    "host 10.1.0.3",
                    "tcp port 443",
                    "ip6",
                    "net 10.1.0.0/24 and udp",
                ],
            );
        }
    }
}

/// `--decap vxlan:8472` reads VXLAN on that port (and not on 4789).
#[test]
fn vxlan_on_another_port() {
    if !have_tunnel_tools() {
        return;
    }
    let tb = testbed();
    let sent = manifest("vxlan", 36);
    let p = capture_pair(&tb, "port", "vxlan:8472", sent.len() as u64, || {
        send_kind(&tb, "vxlan")
    });
    let on_8472 = sent.iter().filter(|s| s.ids["port"] == 8472).count() as u64;
    assert!(on_8472 > 0);
    let d = &p.summary["decap"];
    assert_eq!(d["decapsulated"], on_8472, "{d}");
    assert_eq!(d["tunnels"], "vxlan:8472", "{d}");
    // tshark reads 8472 as VXLAN with decode-as: the comments name its VNI (44).
    let rows = tshark_rows(&p.decap.file, "frame.comment", &["frame.comment"]);
    assert_eq!(rows.len() as u64, on_8472);
    assert!(
        rows.iter().all(|r| r[0].starts_with("vxlan 44 192.0.2.")),
        "{rows:?}"
    );
}

#[test]
fn bad_decap_flags_exit_2() {
    let dir = temp_dir("decap-flags");
    let out = dir.join("x.pcapng");
    for (flag, says) in [
        ("foo", "not a tunnel kind"),
        ("vxlan:notaport", "PORT must be a UDP port"),
        ("ipip", "carries IP packets"),
        ("gre:4789", "has no port"),
    ] {
        let o = Command::new(ringcap())
            .args(["capture", "-i", "lo", "-F", "pcapng", "--decap", flag, "-w"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "--decap {flag}: {}",
            stderr_text(&o)
        );
        assert!(
            stderr_text(&o).contains(says),
            "--decap {flag}: {}",
            stderr_text(&o)
        );
    }
    // pcap has no place for the tunnel; a terminal has no file to rewrite.
    for (args, says) in [
        (vec!["-w", out.to_str().unwrap()], "needs -F pcapng"),
        (vec!["-F", "pcapng"], "needs -w FILE"),
    ] {
        let o = Command::new(ringcap())
            .args(["capture", "-i", "lo", "--decap", "vxlan", "-c", "1"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr_text(&o));
        assert!(
            stderr_text(&o).contains(says),
            "{args:?}: {}",
            stderr_text(&o)
        );
    }
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
