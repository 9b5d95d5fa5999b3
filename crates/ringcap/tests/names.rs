//! Names per flow end to end (issue 36, deliverable 3): in testbed namespaces a real resolver
//! (dnsmasq), a real TLS server and clients (`openssl s_server` / `s_client -servername`), a real
//! HTTP server and client (`python3 -m http.server`, `curl`), a QUIC Initial and a TLS hello sent
//! over three TCP segments (both Chrome's, from wire's test data) are captured by `ringcap capture` into a store. Then:
//! - the flow table's names equal tshark's decode of the same file, flow by flow:
//!   `dns.qry.name`, `dns.a`/`dns.aaaa`, `dns.cname`, `tls.handshake.extensions_server_name`,
//!   `tls.handshake.extensions_alpn_str`, `http.host`, `http.request.uri` (its path); the JA4 equals
//!   wire's of the same ClientHello bytes (this tshark, 4.0, has no `tls.handshake.ja4`);
//! - `ringcap query --name` returns exactly what `tcpdump -r` gives for the expression restricted
//!   to the flows tshark names (their 5-tuples spelled out), from the flow table, from the packets
//!   (no flow table) and with `--no-index`;
//! - the README's DuckDB statement ("who resolved or contacted this name") finds the same flows;
//! - hostile names (markup, NULs, past 255 bytes, more names than a flow keeps) are stored bounded
//!   and counted as cut.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::stores::*;
use common::*;
use testbed::Side;

/// A flow as both sides name it: protocol and its two endpoints, sorted.
type Flow = (u8, (String, u16), (String, u16));

fn flow(proto: u8, a: (String, u16), b: (String, u16)) -> Flow {
    if a <= b {
        (proto, a, b)
    } else {
        (proto, b, a)
    }
}

/// What a flow was named, as sets (order and repeats do not matter).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Names {
    dns_query: BTreeSet<String>,
    dns_addr: BTreeSet<String>,
    dns_cname: BTreeSet<String>,
    sni: Option<String>,
    alpn: Vec<String>,
    host: Option<String>,
    path: Option<String>,
}

/// Source ports of the hostile senders: their flows are checked for bounds, not against tshark.
const HOSTILE_PORTS: std::ops::Range<u16> = 45000..45010;

/// Processes started for the test, killed by their ids when it ends.
struct Started(Vec<Child>);

impl Drop for Started {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The clients' script (run in the Tx namespace): DNS over UDP and TCP, hostile DNS and TLS
/// bytes, and a QUIC client Initial.
const CLIENTS: &str = r#"
import socket, struct, sys, time
SERVER = '10.77.0.2'
def query(names, qtype=1, tid=0x1234):
    m = struct.pack('>HHHHHH', tid, 0x0100, len(names), 0, 0, 0)
    for name in names:
        m += b''.join(bytes([len(l)]) + l for l in name.split(b'.')) + b'\0' + struct.pack('>HH', qtype, 1)
    return m
def udp(msg, sport=0, answer=True):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(('10.77.0.1', sport))
    s.settimeout(1)
    for _ in range(20):
        s.sendto(msg, (SERVER, 53))
        if not answer:
            return
        try:
            return s.recv(4096)
        except socket.timeout:
            pass
    sys.exit('no DNS answer')
def tcp(port, data, sport=0, length=False):
    for _ in range(50):
        try:
            s = socket.create_connection((SERVER, port), timeout=2, source_address=('10.77.0.1', sport))
            break
        except OSError:
            time.sleep(0.1)
    s.sendall(struct.pack('>H', len(data)) + data if length else data)
    try:
        s.recv(4096)
    except OSError:
        pass
    s.close()
udp(query([b'www.evil.example']))
udp(query([b'srv.evil.example'], qtype=28))
udp(query([b'other.example']))
tcp(53, query([b'srv.evil.example']), length=True)
# Hostile: markup and a NUL; a name past 255 bytes; more questions than a flow keeps.
udp(query([b'<script>\x00x.hostile.test']), sport=45000, answer=False)
udp(query([b'.'.join([b'b' * 63] * 4) + b'.hostile.test']), sport=45001, answer=False)
udp(query([b'n%d.hostile.test' % i for i in range(20)]), sport=45002, answer=False)
def hello(sni):
    ext = struct.pack('>HH', 0, len(sni) + 5) + struct.pack('>HBH', len(sni) + 3, 0, len(sni)) + sni
    body = b'\x03\x03' + b'\x11' * 32 + b'\x00' + struct.pack('>H', 2) + b'\x13\x01' + b'\x01\x00'
    body += struct.pack('>H', len(ext)) + ext
    hs = b'\x01' + struct.pack('>I', len(body))[1:] + body
    return b'\x16\x03\x01' + struct.pack('>H', len(hs)) + hs
tcp(4433, hello(b'<script>\x00' + b'a' * 300 + b'.hostile.test'), sport=45003)
q = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
q.bind(('10.77.0.1', 0))
q.sendto(open(sys.argv[1], 'rb').read(), (SERVER, 443))
# Chrome's hello split over three segments, as post-quantum hellos are over two.
s = socket.create_connection((SERVER, 4433), timeout=2, source_address=('10.77.0.1', 46004))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
h = open(sys.argv[2], 'rb').read()
for piece in (h[:200], h[200:400], h[400:]):
    s.sendall(piece)
    time.sleep(0.05)
try:
    s.recv(4096)
except OSError:
    pass
s.close()
"#;

fn spawn(tb: &testbed::Testbed, side: Side, prog: &str, args: &[&str]) -> Child {
    tb.command(side, prog)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{prog}: {e}"))
}

fn run(tb: &testbed::Testbed, side: Side, prog: &str, args: &[&str]) -> String {
    let out = tb.command(side, prog).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Captures the servers' and clients' traffic into `store`; returns the capture file.
fn capture_named_traffic(work: &Path, store: &Path) -> PathBuf {
    let tb = testbed();
    let cap = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "-w",
            store.join("cap").to_str().unwrap(),
            "-C",
            "100MB",
        ],
    );
    let mut started = Started(Vec::new());
    let w = |n: &str| work.join(n).to_string_lossy().into_owned();
    // The resolver: a local zone, no upstream (no internet).
    started.0.push(spawn(
        &tb,
        Side::Rx,
        "dnsmasq",
        &[
            "-k",
            "-u",
            "root",
            "--no-resolv",
            "--no-hosts",
            "--bind-interfaces",
            "--listen-address=10.77.0.2",
            "--port=53",
            &format!("--pid-file={}", w("dnsmasq.pid")),
            "--host-record=srv.evil.example,10.77.0.2,fd77::2",
            "--cname=www.evil.example,srv.evil.example",
            "--address=/other.example/10.77.0.9",
        ],
    ));
    sh(&format!(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
         -subj /CN=srv.evil.example -keyout {} -out {} 2>/dev/null",
        w("key.pem"),
        w("cert.pem")
    ));
    started.0.push(spawn(
        &tb,
        Side::Rx,
        "openssl",
        &[
            "s_server",
            "-accept",
            "10.77.0.2:4433",
            "-cert",
            &w("cert.pem"),
            "-key",
            &w("key.pem"),
            "-alpn",
            "h2,http/1.1",
            "-quiet",
        ],
    ));
    std::fs::create_dir_all(work.join("www")).unwrap();
    std::fs::write(work.join("www/index.html"), "hello\n").unwrap();
    started.0.push(spawn(
        &tb,
        Side::Rx,
        "python3",
        &[
            "-m",
            "http.server",
            "8080",
            "--bind",
            "10.77.0.2",
            "--directory",
            &w("www"),
        ],
    ));
    std::thread::sleep(Duration::from_millis(500));
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wire/testdata");
    let quic = testdata.join("ja4-tls-sni-frame2-quic-initial.bin");
    let split = testdata.join("ja4-tls-sni-frame1.bin");
    run(
        &tb,
        Side::Tx,
        "python3",
        &[
            "-c",
            CLIENTS,
            quic.to_str().unwrap(),
            split.to_str().unwrap(),
        ],
    );
    for (sni, extra) in [
        ("srv.evil.example", "-tls1_3"),
        ("api.evil.example", "-tls1_2"),
    ] {
        // s_client ends when its input does; the server may not be up at once.
        let line = format!(
            "for i in $(seq 50); do openssl s_client -connect 10.77.0.2:4433 -servername {sni} \
             -alpn h2,http/1.1 {extra} </dev/null >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1"
        );
        run(&tb, Side::Tx, "sh", &["-c", &line]);
    }
    for (host, url) in [
        (
            "web.evil.example:8080",
            "http://10.77.0.2:8080/index.html?token=1",
        ),
        ("", "http://10.77.0.2:8080/"),
    ] {
        let mut args = vec![
            "-s",
            "-o",
            "/dev/null",
            "--retry",
            "20",
            "--retry-connrefused",
            "--retry-delay",
            "0",
        ];
        let h = format!("Host: {host}");
        if !host.is_empty() {
            args.extend(["-H", &h]);
        }
        args.push(url);
        run(&tb, Side::Tx, "curl", &args);
    }
    std::thread::sleep(Duration::from_millis(500));
    let out = stop(cap, libc::SIGINT);
    assert!(
        out.status.success(),
        "capture: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(started);
    drop(tb);
    // Whatever the live indexer left is indexed now.
    let st = Command::new(ringcap())
        .arg("index")
        .arg(store)
        .status()
        .unwrap();
    assert!(st.success());
    let files = store_files(store);
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

/// tshark's names per flow (hostile senders' flows left out), and the ClientHello bytes per TLS flow.
fn tshark_names(f: &Path) -> (BTreeMap<Flow, Names>, BTreeMap<Flow, Vec<u8>>) {
    let fields = [
        "ip.proto",
        "ip.src",
        "ipv6.src",
        "tcp.srcport",
        "udp.srcport",
        "ip.dst",
        "ipv6.dst",
        "tcp.dstport",
        "udp.dstport",
        "dns.qry.name",
        "dns.a",
        "dns.aaaa",
        "dns.cname",
        "tls.handshake.type",
        "tls.handshake.extensions_server_name",
        "tls.handshake.extensions_alpn_str",
        "http.host",
        "http.request.uri",
        "tcp.payload",
        "tcp.reassembled.data",
    ];
    let cmd = format!(
        "tshark -n -r '{}' -Y 'dns || tls.handshake.type == 1 || http.request' -T fields \
         -E separator=/t -E aggregator=';' -E occurrence=a {} 2>/dev/null",
        f.display(),
        fields
            .iter()
            .map(|x| format!("-e {x}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut names: BTreeMap<Flow, Names> = BTreeMap::new();
    let mut hellos = BTreeMap::new();
    for line in sh(&cmd).lines() {
        let v: Vec<&str> = line.split('\t').collect();
        if v[0].contains(';') {
            // An ICMP error quoting a packet: not a flow of its own here.
            continue;
        }
        let list = |i: usize| -> Vec<String> {
            v[i].split(';')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        };
        let pick = |a: usize, b: usize| if v[a].is_empty() { v[b] } else { v[a] };
        let port = |a: usize, b: usize| {
            pick(a, b)
                .split(';')
                .next()
                .unwrap()
                .parse::<u16>()
                .unwrap()
        };
        let (sp, dp) = (port(3, 4), port(7, 8));
        if HOSTILE_PORTS.contains(&sp) || HOSTILE_PORTS.contains(&dp) {
            continue;
        }
        let proto: u8 = if v[3].is_empty() { 17 } else { 6 };
        let fl = flow(
            proto,
            (pick(1, 2).to_string(), sp),
            (pick(5, 6).to_string(), dp),
        );
        let n = names.entry(fl.clone()).or_default();
        n.dns_query.extend(list(9));
        n.dns_addr.extend(list(10));
        n.dns_addr.extend(list(11));
        n.dns_cname.extend(list(12));
        if list(13).contains(&"1".to_string()) && n.sni.is_none() && n.alpn.is_empty() {
            n.sni = list(14).into_iter().next();
            n.alpn = list(15);
            if proto == 6 {
                // A hello over several segments: the bytes tshark joined.
                let hex = if v[19].is_empty() { v[18] } else { v[19] };
                let bytes: Vec<u8> = (0..hex.len() / 2)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                    .collect();
                hellos.insert(fl.clone(), bytes);
            }
        }
        if (!v[16].is_empty() || !v[17].is_empty()) && n.host.is_none() && n.path.is_none() {
            n.host = list(16).into_iter().next();
            // The flow table keeps the path, without the query.
            n.path = Some(v[17].split('?').next().unwrap().to_string());
        }
    }
    (names, hellos)
}

/// Rows of a DuckDB statement as JSON values.
fn duckdb_json(sql: &str) -> Vec<serde_json::Value> {
    // As JSON made by DuckDB itself (its timestamps with a time zone need pytz in Python).
    let sql = sql.trim().trim_end_matches(';');
    let text = python(&format!(
        "import duckdb\nfor (j,) in duckdb.sql(\"\"\"SELECT to_json(t)::VARCHAR FROM (\n{sql}\n) t\"\"\").fetchall(): print(j)"
    ));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The named rows of the flow table: (flow, names, JA4, names_cut).
fn table_names(f: &Path) -> BTreeMap<Flow, (Names, Option<String>, Option<u64>)> {
    let rows = duckdb_json(&format!(
        "SELECT protocol, src, src_port, dst, dst_port, dns_query, dns_addr, dns_cname, tls_sni, \
         tls_alpn, ja4, http_host, http_path, names_cut FROM read_parquet('{}') \
         WHERE names_cut IS NOT NULL",
        index::flows_path(f).display()
    ));
    let mut out = BTreeMap::new();
    for r in rows {
        let s = |k: &str| r[k].as_str().map(String::from);
        let set = |k: &str| -> BTreeSet<String> {
            r[k].as_array()
                .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                .unwrap_or_default()
        };
        let fl = flow(
            r["protocol"].as_u64().unwrap() as u8,
            (s("src").unwrap(), r["src_port"].as_u64().unwrap() as u16),
            (s("dst").unwrap(), r["dst_port"].as_u64().unwrap() as u16),
        );
        let n = Names {
            dns_query: set("dns_query"),
            dns_addr: set("dns_addr"),
            dns_cname: set("dns_cname"),
            sni: s("tls_sni"),
            alpn: r["tls_alpn"]
                .as_array()
                .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                .unwrap_or_default(),
            host: s("http_host"),
            path: s("http_path"),
        };
        out.insert(fl, (n, s("ja4"), r["names_cut"].as_u64()));
    }
    out
}

/// Whether tshark's names of a flow match a glob as `--name` means it.
fn glob_matches(n: &Names, glob: &str) -> bool {
    let re = format!(
        "^{}$",
        glob.to_lowercase().replace('.', "\\.").replace('*', ".*")
    );
    let m = |s: &str| {
        let s = s.to_lowercase();
        python(&format!(
            "import re\nprint(bool(re.match(r'''{re}''', r'''{s}''')))"
        ))
        .trim()
            == "True"
    };
    let host = n
        .host
        .as_deref()
        .map(|h| h.rsplit_once(':').map_or(h, |(h, _)| h));
    n.dns_query
        .iter()
        .chain(&n.dns_cname)
        .map(String::as_str)
        .chain(n.sni.as_deref())
        .chain(host)
        .any(m)
}

/// tcpdump's packets of `expr` restricted to `flows` (their 5-tuples spelled out), as text.
fn tcpdump_of_flows(f: &Path, expr: &str, flows: &[&Flow]) -> String {
    if flows.is_empty() {
        return String::new();
    }
    let one = |(proto, (a, pa), (b, pb)): &Flow| {
        let p = if *proto == 6 { "tcp" } else { "udp" };
        format!(
            "({p} and ((src host {a} and src port {pa} and dst host {b} and dst port {pb}) or \
             (src host {b} and src port {pb} and dst host {a} and dst port {pa})))"
        )
    };
    let any = flows
        .iter()
        .map(|f| one(f))
        .collect::<Vec<_>>()
        .join(" or ");
    let full = if expr.is_empty() {
        any
    } else {
        format!("({expr}) and ({any})")
    };
    sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx '{full}' 2>/dev/null",
        f.display()
    ))
}

/// `ringcap query STORE EXPR --name GLOB [extra]`'s packets as tcpdump prints them, and its
/// explain lines.
fn query_by_name(
    store: &Path,
    expr: &str,
    glob: &str,
    extra: &[&str],
    work: &Path,
) -> (String, String) {
    let out_pcap = work.join("q.pcap");
    let mut c = Command::new(ringcap());
    c.arg("query").arg(store);
    if !expr.is_empty() {
        c.arg(expr);
    }
    c.args(["--name", glob, "--explain", "-w"])
        .arg(&out_pcap)
        .args(extra);
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "query --name {glob}: {err}");
    let text = sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
        out_pcap.display()
    ));
    (text, err)
}

#[test]
fn names_per_flow_equal_tshark_and_query_by_name_equals_tcpdump() {
    for t in ["tshark", "tcpdump", "python3", "openssl", "curl", "dnsmasq"] {
        need(t);
    }
    let work = temp_dir("names");
    let store = work.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let file = capture_named_traffic(&work, &store);

    // The flow table's names, flow by flow, against tshark's.
    let (want, hellos) = tshark_names(&file);
    let got = table_names(&file);
    let mut tls_flows = 0;
    for (fl, w) in &want {
        let (g, ja4, cut) = got
            .get(fl)
            .unwrap_or_else(|| panic!("{fl:?} named by tshark ({w:?}) has no names in the table"));
        assert_eq!(g, w, "{fl:?}");
        assert_eq!(*cut, Some(0), "{fl:?}");
        if let Some(h) = hellos.get(fl) {
            let hello = wire::tls::ClientHello::parse(h).expect("tshark's ClientHello parses");
            let ja4_wire = hello.ja4(wire::tls::Transport::Tcp);
            assert_eq!(ja4.as_deref(), Some(ja4_wire.as_str()), "{fl:?}");
            tls_flows += 1;
        }
        if fl.0 == 17 && (fl.1 .1 == 443 || fl.2 .1 == 443) {
            assert_eq!(
                ja4.as_deref(),
                Some("q13d0310h3_55b375c5d22e_cd85d2d88918"),
                "QUIC: the published vector's JA4"
            );
        }
    }
    assert_eq!(tls_flows, 3, "three TLS connections: {want:?}");
    let named_by_tshark: BTreeSet<&Flow> = want.keys().collect();
    for fl in got.keys() {
        let hostile = HOSTILE_PORTS.contains(&fl.1 .1) || HOSTILE_PORTS.contains(&fl.2 .1);
        assert!(
            hostile || named_by_tshark.contains(fl),
            "{fl:?} named by ringcap only"
        );
    }
    // What tshark found: DNS (UDP and TCP), TLS with SNI and ALPN, HTTP with a Host, QUIC.
    let all = |f: fn(&Names) -> bool| want.values().filter(|n| f(n)).count();
    assert!(
        all(|n| n.dns_query.contains("www.evil.example")
            && n.dns_cname.contains("srv.evil.example"))
            >= 1
    );
    assert!(all(|n| n.dns_addr.contains("fd77::2")) >= 1);
    assert!(all(|n| n.sni.as_deref() == Some("www.google.com")) == 1);
    // The hello over three segments, joined by tshark and by the indexer.
    assert!(all(|n| n.sni.as_deref() == Some("clientservices.googleapis.com")) == 1);
    let split = got
        .values()
        .find(|(n, ..)| n.sni.as_deref() == Some("clientservices.googleapis.com"))
        .expect("the split hello is in the flow table");
    assert_eq!(
        split.1.as_deref(),
        Some("t13d1516h2_8daaf6152771_e5627efa2ab1"),
        "FoxIO's JA4 of this hello"
    );
    assert!(all(|n| n.host.as_deref() == Some("web.evil.example:8080")) == 1);
    assert!(
        want.keys()
            .any(|f| f.0 == 6 && (f.1 .1 == 53 || f.2 .1 == 53)),
        "DNS over TCP"
    );

    // Hostile names: bounded, counted as cut, no panic.
    let by_port = |p: u16| {
        got.iter()
            .find(|(f, _)| f.1 .1 == p || f.2 .1 == p)
            .unwrap_or_else(|| panic!("no named flow from port {p}"))
            .1
    };
    let (n, _, cut) = by_port(45000);
    assert_eq!(
        n.dns_query,
        BTreeSet::from(["<script>\\x00x.hostile.test".to_string()])
    );
    assert_eq!(*cut, Some(0));
    let (n, _, cut) = by_port(45001);
    let long = n.dns_query.iter().next().unwrap();
    assert!(
        long.starts_with(&"b".repeat(63)) && long.len() <= 255,
        "{long}"
    );
    // Each time a name is left out it is counted (an answer repeating the question counts again).
    assert!(cut.unwrap() >= 1, "{cut:?}");
    let (n, _, cut) = by_port(45002);
    assert_eq!(n.dns_query.len(), index::names::MAX_DNS_NAMES);
    assert!(
        cut.unwrap() >= 20 - index::names::MAX_DNS_NAMES as u64,
        "{cut:?}"
    );
    let (n, _, cut) = by_port(45003);
    let sni = n.sni.as_deref().unwrap();
    assert!(sni.starts_with("<script>\\x00aaaa"), "{sni}");
    // 255 bytes kept: the NUL is written as 4 characters.
    assert_eq!(sni.len(), 255 + 3, "{sni}");
    assert_eq!(*cut, Some(1));
    let footer = duckdb_json(&format!(
        "SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('{}')",
        index::flows_path(&file).display()
    ));
    let kv = |k: &str| {
        footer
            .iter()
            .find(|r| r["k"] == k)
            .map(|r| r["v"].as_str().unwrap().to_string())
    };
    assert_eq!(kv("ringcap.schema").as_deref(), Some("flows/1.2"));
    let cut_sum: u64 = got.values().filter_map(|x| x.2).sum();
    assert_eq!(
        kv("ringcap.names_cut"),
        Some(cut_sum.to_string()),
        "{footer:?}"
    );
    assert!(cut_sum >= 14, "{cut_sum}");

    // ringcap query --name: tcpdump's packets of the expression over the flows tshark names.
    let table = index::flows_path(&file);
    for (glob, expr) in [
        ("*.evil.example", ""),
        ("*.evil.example", "tcp port 4433"),
        ("*.EVIL.example", "udp port 53"),
        ("srv.evil.example", "tcp"),
        ("www.google.com", ""),
        ("nothing.example", ""),
    ] {
        let flows: Vec<&Flow> = want
            .iter()
            .filter(|(_, n)| glob_matches(n, glob))
            .map(|(f, _)| f)
            .collect();
        let expected = tcpdump_of_flows(&file, expr, &flows);
        if glob != "nothing.example" {
            assert!(!expected.is_empty(), "{glob} {expr}: nothing expected");
        }
        let (from_table, explain) = query_by_name(&store, expr, glob, &[], &work);
        assert!(explain.contains("named (flow table)"), "{explain}");
        assert_eq!(from_table, expected, "{glob} / {expr}: from the flow table");
        let (scanned, _) = query_by_name(&store, expr, glob, &["--no-index"], &work);
        assert_eq!(scanned, expected, "{glob} / {expr}: --no-index");
        // Without its flow table the file's names are read from its packets.
        let kept = work.join("kept.flows.parquet");
        std::fs::rename(&table, &kept).unwrap();
        let (from_packets, explain) = query_by_name(&store, expr, glob, &[], &work);
        std::fs::rename(&kept, &table).unwrap();
        assert!(explain.contains("names read from the packets"), "{explain}");
        assert_eq!(
            from_packets, expected,
            "{glob} / {expr}: names from the packets"
        );
    }

    // The README's statement: who resolved or contacted a name, without reading a packet.
    let sql =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let start = sql
        .find("-- who resolved or contacted")
        .expect("the README's SQL");
    let stmt = &sql[start..sql[start..].find("```").unwrap() + start];
    let stmt = stmt.replace("/data/", &format!("{}/", store.display()));
    let rows = duckdb_json(&stmt);
    let got: BTreeSet<Flow> = rows
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            let p = |k: &str| r[k].as_u64().unwrap() as u16;
            flow(
                r["protocol"].as_u64().unwrap() as u8,
                (s("who"), p("src_port")),
                (s("server"), p("dst_port")),
            )
        })
        .collect();
    let want_flows: BTreeSet<Flow> = want
        .iter()
        .filter(|(_, n)| glob_matches(n, "*.evil.example"))
        .map(|(f, _)| f.clone())
        .collect();
    assert_eq!(got, want_flows, "the README's SQL");
    let _ = std::fs::remove_dir_all(&work);
}
