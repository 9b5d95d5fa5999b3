//! Tunnelled traffic captured by `ringcap capture`, and what the independent decoders make of it
//! (issue 36): tshark for tunnels and inner hosts, VNIs, keys, labels and conversations; tcpdump for
//! the expressions libpcap can say.
//!
//! Traffic: scripts/tunnels.py (scapy, an encoder independent of ringcap, libpcap and Wireshark)
//! for every kind, sent through the testbed's veth by a packet socket; VXLAN also from real Linux
//! `vxlan` devices (testbed::VxlanOptions) carrying real TCP and UDP sockets' traffic. This kernel
//! has no GENEVE, GRE, ERSPAN, IP-in-IP, sit/ip6tnl devices and no MPLS routing, hence the encoder.
//!
//! What tshark 4.0 does with tunnels (checked by tests/tunnels.rs, `tshark_conv_*`):
//! - display filters see every layer: `ip.addr == X` matches an outer or an inner address; the
//!   layer operator picks one (`ip.addr#2 == X`, the second IPv4 header); 802.1ad tags are
//!   `ieee8021ad.id`, 802.1Q tags `vlan.id`.
//! - `-z conv,tcp` lists only the TCP layer's conversations, i.e. the innermost 5-tuple (no tunnel
//!   here is carried over TCP); `-z conv,udp` lists EVERY UDP layer: a VXLAN or GENEVE packet counts
//!   in the outer (carrier) conversation, e.g. 192.0.2.1:49152 <-> 192.0.2.2:4789, and, when its
//!   inner packet is UDP, in the inner one too. `-z conv,ip` likewise lists outer and inner IPv4
//!   conversations. Bytes are always the whole frame's length (outer headers included), whatever
//!   layer keys the row. [`inner_conversations_by_tshark`] keeps only the innermost 5-tuples.
//! - VXLAN on 4789 and GENEVE on 6081 decode by default; other ports need decode-as
//!   (`-d udp.port==8472,vxlan`), which every call here passes ([`DECODE_AS`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use testbed::{Side, Testbed, VxlanOptions};

use super::stores::{decode, sh};
use super::*;

/// Debian's python, which has python3-scapy (`make deps`); a `python3` earlier in PATH (pyenv, a
/// venv) may lack it.
pub const SCAPY_PYTHON: &str = "/usr/bin/python3";

/// Decode-as rules every tshark call here passes: VXLAN on Linux's old default port.
pub const DECODE_AS: &[&str] = &["udp.port==8472,vxlan"];

/// Kinds scripts/tunnels.py makes.
pub const KINDS: &[&str] = &[
    "qinq",
    "mpls",
    "gre",
    "gre-key",
    "gretap",
    "erspan2",
    "erspan3",
    "vxlan",
    "geneve",
    "ipip",
    "ip6in4",
    "nested",
    "malformed",
];

/// The innermost 5-tuple of a packet (addresses as tshark prints them).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FiveTuple {
    pub src: String,
    pub dst: String,
    /// "tcp", "udp" or the IP protocol number.
    pub proto: String,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
}

/// One frame the generator sent, as its manifest line says.
#[derive(Clone, Debug)]
pub struct SentFrame {
    /// 1-based position in sending order: tshark's frame.number when only these were captured.
    pub n: u64,
    pub len: u64,
    /// Tunnel identity: any of "vlans", "labels" (outer first), "key", "vni", "port", "span", "depth".
    pub ids: serde_json::Value,
    /// None for malformed frames.
    pub inner: Option<FiveTuple>,
    pub malformed: Option<String>,
}

/// The generator script.
pub fn generator() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tunnels.py")
}

/// Whether scapy and tshark can run; skips (a failure under CI) when not.
pub fn have_tunnel_tools() -> bool {
    if !(have("tshark") && have("tcpdump")) {
        return false;
    }
    let ok = Command::new(SCAPY_PYTHON)
        .args(["-c", "import scapy.all"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip("scapy is not installed for /usr/bin/python3 (`make deps` installs python3-scapy)");
    }
    ok
}

/// The generator's manifest of `kind` with `seed` (nothing sent).
pub fn manifest(kind: &str, seed: u32) -> Vec<SentFrame> {
    let out = Command::new(SCAPY_PYTHON)
        .arg(generator())
        .args(["--kind", kind, "--seed", &seed.to_string(), "--manifest"])
        .output()
        .expect("run scripts/tunnels.py");
    assert!(
        out.status.success(),
        "tunnels.py --kind {kind}: {}",
        stderr_text(&out)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("manifest line");
            let inner = v["inner"].as_object().map(|i| FiveTuple {
                src: i["src"].as_str().unwrap().to_string(),
                dst: i["dst"].as_str().unwrap().to_string(),
                proto: i["proto"].as_str().unwrap().to_string(),
                sport: i["sport"].as_u64().map(|p| p as u16),
                dport: i["dport"].as_u64().map(|p| p as u16),
            });
            SentFrame {
                n: v["n"].as_u64().unwrap(),
                len: v["len"].as_u64().unwrap(),
                ids: v["ids"].clone(),
                inner,
                malformed: v["malformed"].as_str().map(str::to_string),
            }
        })
        .collect()
}

/// A capture of one kind of tunnelled traffic: the store, its one capture file, what was sent.
pub struct Captured {
    pub store: PathBuf,
    pub file: PathBuf,
    /// The generator's manifest (empty for the kernel VXLAN traffic, which the kernel shapes).
    pub sent: Vec<SentFrame>,
    /// A scratch directory for query results.
    pub work: PathBuf,
}

/// Starts `ringcap capture` (with `extra` arguments) into a store under a fresh directory, runs
/// `send`, waits until the Rx end has seen `min_frames` more frames, then stops the capture; the
/// store must hold one file.
fn capture_with(
    tb: &Testbed,
    tag: &str,
    min_frames: u64,
    extra: &[&str],
    send: impl FnOnce(),
) -> Captured {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = temp_dir(&format!("tunnels-{tag}-{n}"));
    let store = dir.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let base = store.join("cap");
    let before = tb.rx_packets();
    let mut args = vec![
        "capture",
        "-i",
        &tb.rx_if,
        "-w",
        base.to_str().unwrap(),
        "-C",
        "64MB",
    ];
    args.extend(extra);
    let cap = spawn_capture(tb, &args);
    send();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tb.rx_packets() < before + min_frames && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let out = stop(cap, libc::SIGINT);
    assert!(out.status.success(), "capture: {}", stderr_text(&out));
    let files = super::stores::store_files(&store);
    assert_eq!(files.len(), 1, "one capture file expected: {files:?}");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    Captured {
        store,
        file: files[0].clone(),
        sent: Vec::new(),
        work,
    }
}

/// Sends the generator's frames of `kind` (seed 36) through a fresh testbed while `ringcap capture`
/// records the other end; the file must hold exactly the frames sent, in order, with their lengths.
pub fn capture_kind(kind: &str) -> Captured {
    capture_kind_on(&testbed(), kind, &[])
}

/// [`capture_kind`] on a given testbed, with `extra` capture arguments (e.g. `--records`).
pub fn capture_kind_on(tb: &Testbed, kind: &str, extra: &[&str]) -> Captured {
    let sent = manifest(kind, 36);
    let mut c = capture_with(tb, kind, sent.len() as u64, extra, || send_kind(tb, kind));
    let lens: Vec<u64> = tshark_frames(&c.file, "").iter().map(|f| f.1).collect();
    let want: Vec<u64> = sent.iter().map(|f| f.len).collect();
    assert_eq!(
        lens, want,
        "{kind}: the capture must hold exactly the frames sent, in order"
    );
    c.sent = sent;
    c
}

/// Sends the generator's frames of `kind` (seed 36) from the testbed's Tx end.
pub fn send_kind(tb: &Testbed, kind: &str) {
    let out = tb
        .command(Side::Tx, SCAPY_PYTHON)
        .arg(generator())
        .args(["--kind", kind, "--seed", "36", "--iface", &tb.tx_if])
        .output()
        .expect("run scripts/tunnels.py");
    assert!(
        out.status.success(),
        "tunnels.py --kind {kind}: {}",
        stderr_text(&out)
    );
}

/// Inner addresses of the kernel VXLAN testbed: VNI 42 carries 10.200.42.0/24 and fd00:42::/64,
/// VNI 43 carries 10.200.43.0/24, both on UDP 4789 between 10.77.0.1 and 10.77.0.2.
pub const VX42_TX: [&str; 2] = ["10.200.42.1", "10.200.42.3"];
pub const VX42_RX: [&str; 2] = ["10.200.42.2", "10.200.42.4"];
pub const VX43_TX: &str = "10.200.43.1";
pub const VX43_RX: &str = "10.200.43.2";
pub const VX42_TX6: &str = "fd00:42::1";
pub const VX42_RX6: &str = "fd00:42::2";

/// Real TCP and UDP sockets talking through two Linux vxlan devices (VNIs 42 and 43) while
/// `ringcap capture` records the encapsulated frames on the Rx veth: per (client, server) pair one
/// TCP connection (request, reply, close) and three UDP request/response pairs, also over IPv6.
pub fn capture_kernel_vxlan() -> Captured {
    let (tb, pairs) = kernel_vxlan_testbed();
    capture_with(
        &tb,
        "kernel-vxlan",
        kernel_vxlan_min_frames(&pairs),
        &[],
        || kernel_vxlan_traffic(&tb, &pairs),
    )
}

/// A fresh testbed with the two vxlan devices of [`capture_kernel_vxlan`], and the (client,
/// server) pairs that talk through them.
pub fn kernel_vxlan_testbed() -> (Testbed, Vec<(String, String)>) {
    let tb = testbed();
    let v4 = |a: &[&str]| a.iter().map(|a| format!("{a}/24")).collect::<Vec<_>>();
    tb.add_vxlan(&VxlanOptions {
        name: "vx42".into(),
        vni: 42,
        port: 4789,
        tx_addrs: v4(&VX42_TX),
        rx_addrs: v4(&VX42_RX),
        ipv6: Some((format!("{VX42_TX6}/64"), format!("{VX42_RX6}/64"))),
    })
    .expect("vxlan device 42");
    tb.add_vxlan(&VxlanOptions {
        name: "vx43".into(),
        vni: 43,
        port: 4789,
        tx_addrs: v4(&[VX43_TX]),
        rx_addrs: v4(&[VX43_RX]),
        ipv6: None,
    })
    .expect("vxlan device 43");
    let mut pairs: Vec<(String, String)> = Vec::new();
    for c in VX42_TX {
        for s in VX42_RX {
            pairs.push((c.into(), s.into()));
        }
    }
    pairs.push((VX43_TX.into(), VX43_RX.into()));
    pairs.push((format!("[{VX42_TX6}]"), format!("[{VX42_RX6}]")));
    (tb, pairs)
}

/// Frames [`kernel_vxlan_traffic`] makes at least: 8 per TCP connection, 6 per UDP exchange.
pub fn kernel_vxlan_min_frames(pairs: &[(String, String)]) -> u64 {
    pairs.len() as u64 * 14
}

/// The sockets' traffic of [`capture_kernel_vxlan`]: per pair one TCP connection and three UDP
/// exchanges, through the vxlan devices.
pub fn kernel_vxlan_traffic(tb: &Testbed, pairs: &[(String, String)]) {
    for (i, (c, s)) in pairs.iter().enumerate() {
        socket_exchange(tb, c, s, 7000 + i as u16);
    }
}

/// A TCP connection from `src` (port 0: any) to `dst`, made in the calling thread's namespace (std
/// cannot bind before connecting, and the kernel would otherwise pick the device's first address).
fn tcp_connect_from(src: std::net::SocketAddr, dst: std::net::SocketAddr) -> std::net::TcpStream {
    use std::net::SocketAddr;
    use std::os::fd::FromRawFd;
    fn raw(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
        // SAFETY: sockaddr_storage is large enough for either address and zeroed is a valid start.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match a {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as u16,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*a.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: writes a sockaddr_in into the larger storage.
                unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as u16,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: 0,
                };
                // SAFETY: as above.
                unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        (ss, len as libc::socklen_t)
    }
    let family = if src.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let (s, sl) = raw(src);
    let (d, dl) = raw(dst);
    // SAFETY: a fresh socket; bind and connect get valid addresses of the given lengths.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = std::net::TcpStream::from_raw_fd(fd);
        let r = libc::bind(fd, (&s as *const libc::sockaddr_storage).cast(), sl);
        assert_eq!(r, 0, "bind {src}: {}", std::io::Error::last_os_error());
        let r = libc::connect(fd, (&d as *const libc::sockaddr_storage).cast(), dl);
        assert_eq!(
            r,
            0,
            "connect {src} -> {dst}: {}",
            std::io::Error::last_os_error()
        );
        stream
    }
}

/// One TCP connection and three UDP exchanges from `client` to `server` (IPv6 in brackets), small
/// writes with TCP_NODELAY so every segment is one frame.
fn socket_exchange(tb: &Testbed, client: &str, server: &str, port: u16) {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, UdpSocket};
    let srv: SocketAddr = format!("{server}:{port}").parse().unwrap();
    let cli: SocketAddr = format!("{client}:0").parse().unwrap();
    let (listener, udp_srv) = tb.run_in(Side::Rx, || {
        (
            TcpListener::bind(srv).expect("bind tcp"),
            UdpSocket::bind(srv).expect("bind udp"),
        )
    });
    let (mut stream, udp_cli) = tb.run_in(Side::Tx, || {
        (
            tcp_connect_from(cli, srv),
            UdpSocket::bind(cli).expect("bind udp client"),
        )
    });
    let (mut conn, _) = listener.accept().unwrap();
    stream.set_nodelay(true).unwrap();
    conn.set_nodelay(true).unwrap();
    let mut buf = vec![0u8; 4000];
    stream
        .write_all(&vec![b'q'; 100 + port as usize % 50])
        .unwrap();
    assert!(conn.read(&mut buf).unwrap() > 0);
    conn.write_all(&vec![b'r'; 300 + port as usize % 70])
        .unwrap();
    assert!(stream.read(&mut buf).unwrap() > 0);
    drop(stream);
    assert_eq!(conn.read(&mut buf).unwrap(), 0, "the client's FIN");
    drop(conn);
    udp_srv
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    udp_cli
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    for k in 0..3 {
        udp_cli.send_to(&vec![b'u'; 40 + k * 10], srv).unwrap();
        let (_, from) = udp_srv.recv_from(&mut buf).expect("udp through vxlan");
        udp_srv.send_to(&vec![b'v'; 200 + k * 10], from).unwrap();
        udp_cli
            .recv_from(&mut buf)
            .expect("udp reply through vxlan");
    }
}

/// `tshark -r FILE [-Y FILTER] -T fields` with [`DECODE_AS`]; one Vec of fields per packet, every
/// occurrence of a field joined by ','.
pub fn tshark_rows(file: &Path, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut c = Command::new("tshark");
    c.arg("-r").arg(file).arg("-n");
    for d in DECODE_AS {
        c.args(["-d", d]);
    }
    if !filter.is_empty() {
        c.args(["-Y", filter]);
    }
    c.args([
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c.output().expect("tshark (make deps installs it)");
    assert!(
        out.status.success(),
        "tshark -Y '{filter}': {}",
        stderr_text(&out)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// The packets tshark's display filter `filter` selects ("" for all): (frame.number, frame.len).
pub fn tshark_frames(file: &Path, filter: &str) -> Vec<(u64, u64)> {
    tshark_rows(file, filter, &["frame.number", "frame.len"])
        .iter()
        .map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap()))
        .collect()
}

/// The frame numbers of [`tshark_frames`].
pub fn tshark_numbers(file: &Path, filter: &str) -> Vec<u64> {
    tshark_frames(file, filter)
        .into_iter()
        .map(|f| f.0)
        .collect()
}

/// One packet as tshark decodes it: its number and length, the innermost IP header's 5-tuple, the
/// protocol stack, and the tunnel fields (every occurrence, outer first).
#[derive(Clone, Debug, Default)]
pub struct Decoded {
    pub number: u64,
    pub len: u64,
    /// `frame.protocols`, e.g. "eth:ethertype:ip:udp:vxlan:eth:ethertype:ip:tcp".
    pub protocols: String,
    /// None when the packet has no IP header tshark could decode.
    pub inner: Option<FiveTuple>,
    /// 802.1ad then 802.1Q tag ids.
    pub vlans: Vec<u64>,
    pub labels: Vec<u64>,
    pub gre_keys: Vec<u64>,
    pub vxlan_vnis: Vec<u64>,
    pub geneve_vnis: Vec<u64>,
    pub erspan_spans: Vec<u64>,
    /// The layers tshark found malformed (`_ws.malformed`, e.g. "[Malformed Packet: VXLAN]"); empty
    /// when none. The random payloads of the generator may upset application dissectors (HTTP, RTCP).
    pub malformed: String,
}

const DECODED_FIELDS: &[&str] = &[
    "frame.number",
    "frame.len",
    "frame.protocols",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "tcp.srcport",
    "tcp.dstport",
    "udp.srcport",
    "udp.dstport",
    "ieee8021ad.id",
    "vlan.id",
    "mpls.label",
    "gre.key",
    "vxlan.vni",
    "geneve.vni",
    "erspan.spanid",
    "_ws.malformed",
];

/// Every packet of `file` (or those `filter` selects) as tshark decodes it, innermost first.
pub fn tshark_decoded(file: &Path, filter: &str) -> Vec<Decoded> {
    let nums = |s: &str| -> Vec<u64> {
        s.split(',')
            .filter(|v| !v.is_empty())
            .map(|v| {
                // Fields shown in hex (gre.key) print as 0x..., the others in decimal.
                match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16),
                    None => v.parse(),
                }
                .unwrap_or_else(|_| panic!("{s}"))
            })
            .collect()
    };
    let last = |s: &str| {
        s.rsplit(',')
            .next()
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    tshark_rows(file, filter, DECODED_FIELDS)
        .into_iter()
        .map(|r| {
            let protos: Vec<&str> = r[2].split(':').collect();
            let ip = protos.iter().rposition(|p| *p == "ip" || *p == "ipv6");
            let inner = ip.and_then(|i| {
                let (s, d) = if protos[i] == "ip" {
                    (&r[3], &r[4])
                } else {
                    (&r[5], &r[6])
                };
                let l4 = protos.get(i + 1).copied().unwrap_or("");
                let (proto, sp, dp) = match l4 {
                    "tcp" => ("tcp".to_string(), last(&r[7]), last(&r[8])),
                    "udp" => ("udp".to_string(), last(&r[9]), last(&r[10])),
                    other => (other.to_string(), None, None),
                };
                Some(FiveTuple {
                    src: last(s)?,
                    dst: last(d)?,
                    proto,
                    sport: sp.map(|p| p.parse().unwrap()),
                    dport: dp.map(|p| p.parse().unwrap()),
                })
            });
            let mut vlans = nums(&r[11]);
            vlans.extend(nums(&r[12]));
            Decoded {
                number: r[0].parse().unwrap(),
                len: r[1].parse().unwrap(),
                protocols: r[2].clone(),
                inner,
                vlans,
                labels: nums(&r[13]),
                gre_keys: nums(&r[14]),
                vxlan_vnis: nums(&r[15]),
                geneve_vnis: nums(&r[16]),
                erspan_spans: nums(&r[17]),
                malformed: r[18].clone(),
            }
        })
        .collect()
}

/// HARNESS FOR THE INNER COMPARISONS (issue 36): the packets (frame numbers, 1-based) of `file`
/// that tshark's display filter `tunnel` selects (e.g. "vxlan.vni == 42", "gre.key == 5",
/// "erspan.spanid == 123", "mpls.label == 100", "geneve.vni == 7", "ip.proto == 4") and whose
/// INNERMOST IP header has `host` as source or destination (outer headers do not count).
pub fn inner_host_packets_by_tshark(file: &Path, tunnel: &str, host: &str) -> Vec<u64> {
    tshark_decoded(file, tunnel)
        .into_iter()
        .filter(|d| {
            d.inner
                .as_ref()
                .is_some_and(|i| i.src == host || i.dst == host)
        })
        .map(|d| d.number)
        .collect()
}

/// Packets and bytes (whole frames) each way of one conversation, as tshark's `-z conv` counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvCounts {
    pub a_to_b_frames: u64,
    pub a_to_b_bytes: u64,
    pub b_to_a_frames: u64,
    pub b_to_a_bytes: u64,
}

/// A conversation's ends as tshark prints them: ((A, A port), (B, B port)), A the first sender.
pub type ConvKey = ((String, u16), (String, u16));

/// tshark's `-z conv,PROTO[,FILTER]` (`proto` "tcp" or "udp") as rows; every UDP layer counts (see
/// the module's notes). Panics on byte counts tshark rounds (≥ 10 kB): keep conversations small.
pub fn tshark_conv(file: &Path, proto: &str, filter: &str) -> BTreeMap<ConvKey, ConvCounts> {
    let mut c = Command::new("tshark");
    c.arg("-r").arg(file).args(["-n", "-q"]);
    for d in DECODE_AS {
        c.args(["-d", d]);
    }
    let z = if filter.is_empty() {
        format!("conv,{proto}")
    } else {
        format!("conv,{proto},{filter}")
    };
    let out = c.args(["-z", &z]).output().expect("tshark");
    assert!(out.status.success(), "tshark -z {z}: {}", stderr_text(&out));
    let end = |s: &str| -> (String, u16) {
        let (a, p) = s.rsplit_once(':').unwrap_or_else(|| panic!("{s}"));
        (a.to_string(), p.parse().unwrap_or_else(|_| panic!("{s}")))
    };
    let bytes = |n: &str, unit: &str| -> u64 {
        assert_eq!(
            unit, "bytes",
            "tshark rounded a byte count ({n} {unit}): keep conversations < 10 kB"
        );
        n.parse().unwrap()
    };
    let mut rows = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("<->"))
    {
        let w: Vec<&str> = line.split_whitespace().collect();
        // Columns: A <-> B, then "<-" (B to A) frames and bytes, "->" (A to B) frames and bytes.
        let counts = ConvCounts {
            b_to_a_frames: w[3].parse().unwrap(),
            b_to_a_bytes: bytes(w[4], w[5]),
            a_to_b_frames: w[6].parse().unwrap(),
            a_to_b_bytes: bytes(w[7], w[8]),
        };
        assert!(
            rows.insert((end(w[0]), end(w[2])), counts).is_none(),
            "row twice: {line}"
        );
    }
    rows
}

/// HARNESS FOR THE INNER COMPARISONS (issue 36): tshark's `conv,tcp` or `conv,udp` rows of the
/// INNERMOST 5-tuples only (the carriers' outer UDP conversations of VXLAN and GENEVE dropped),
/// optionally under a display filter (e.g. "vxlan.vni == 42"). What a flow table keyed by the inner
/// 5-tuple must hold, row for row (bytes are whole frames).
pub fn inner_conversations_by_tshark(
    file: &Path,
    proto: &str,
    filter: &str,
) -> BTreeMap<ConvKey, ConvCounts> {
    let inner: BTreeSet<((String, u16), (String, u16))> = tshark_decoded(file, filter)
        .into_iter()
        .filter_map(|d| d.inner)
        .filter(|t| t.proto == proto)
        .map(|t| ((t.src, t.sport.unwrap()), (t.dst, t.dport.unwrap())))
        .collect();
    let mut rows = tshark_conv(file, proto, filter);
    rows.retain(|(a, b), _| {
        inner.contains(&(a.clone(), b.clone())) || inner.contains(&(b.clone(), a.clone()))
    });
    rows
}

/// The same conversations counted from tshark's per-packet decode of the innermost headers: a
/// check of [`inner_conversations_by_tshark`] (A is the sender of the first packet).
pub fn inner_conversations_by_packets(
    file: &Path,
    proto: &str,
    filter: &str,
) -> BTreeMap<ConvKey, ConvCounts> {
    let mut rows: BTreeMap<ConvKey, ConvCounts> = BTreeMap::new();
    for d in tshark_decoded(file, filter) {
        let Some(t) = d.inner.filter(|t| t.proto == proto) else {
            continue;
        };
        let (s, r) = ((t.src, t.sport.unwrap()), (t.dst, t.dport.unwrap()));
        if let Some(c) = rows.get_mut(&(r.clone(), s.clone())) {
            c.b_to_a_frames += 1;
            c.b_to_a_bytes += d.len;
        } else {
            let c = rows.entry((s, r)).or_default();
            c.a_to_b_frames += 1;
            c.a_to_b_bytes += d.len;
        }
    }
    rows
}

/// tcpdump's decode (`-nn --nano -tt -xx`) of the packets of `file` that `expr` selects.
pub fn tcpdump_decoded(file: &Path, expr: &str) -> Vec<(u64, String)> {
    decode(&sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx '{expr}' 2>/dev/null",
        file.display()
    )))
}

/// tcpdump's decode of the packets of `file` numbered `numbers` (1-based, as tshark's): what a
/// query answering "these packets" must return, to compare with [`query_decoded`].
pub fn decoded_by_numbers(file: &Path, numbers: &[u64]) -> Vec<(u64, String)> {
    let all = tcpdump_decoded(file, "");
    numbers
        .iter()
        .map(|n| all[*n as usize - 1].clone())
        .collect()
}

/// What `ringcap query STORE EXPR` returns, as tcpdump decodes it (written under `work`).
pub fn query_decoded(store: &Path, work: &Path, expr: &str) -> Vec<(u64, String)> {
    let out = work.join("result.pcap");
    let st = Command::new(ringcap())
        .arg("query")
        .arg(store)
        .arg(expr)
        .args(["-w", out.to_str().unwrap(), "-q"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "ringcap query '{expr}': {}",
        stderr_text(&st)
    );
    decode(&sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
        out.display()
    )))
}

/// Whether this libpcap compiles `expr` (`tcpdump -d`): `vxlan`, `gre` and `erspan` are not
/// keywords of libpcap 1.10.
pub fn libpcap_accepts(expr: &str) -> bool {
    Command::new("tcpdump")
        .args(["-y", "EN10MB", "-d", expr])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `ringcap query` equals `tcpdump -r` for every expression over the capture, packet for packet and
/// byte for byte; returns how many packets each expression selected. At least one must select
/// something (a test of nothing proves nothing).
pub fn assert_query_equals_tcpdump(c: &Captured, exprs: &[&str]) -> Vec<usize> {
    let mut counts = Vec::new();
    for e in exprs {
        assert!(libpcap_accepts(e), "libpcap does not compile `{e}`");
        let want = tcpdump_decoded(&c.file, e);
        let got = query_decoded(&c.store, &c.work, e);
        assert_eq!(
            got.len(),
            want.len(),
            "`{e}`: packets from ringcap query vs tcpdump"
        );
        assert!(got == want, "`{e}`: packets differ from tcpdump's");
        counts.push(got.len());
    }
    assert!(
        counts.iter().any(|n| *n > 0),
        "no expression selected a packet: {exprs:?}"
    );
    counts
}
