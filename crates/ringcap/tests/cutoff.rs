//! `ringcap capture --cutoff`: real TCP connections and UDP flows across the testbed's veth pair, captured at
//! the same time by ringcap with a cutoff and by tcpdump without one (the independent expectation); both
//! files read by tshark, not by ringcap's reader.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use testbed::Side;

const CUTOFF: u64 = 20_000;

/// Runs in the Rx namespace: a TCP server on 10.77.0.2:5001 (per connection: an 8-byte length N, then it
/// reads the client's bytes to EOF, sends N bytes back and closes) and a UDP sink on 5002; serves
/// argv[1] connections, then ends.
const SERVER: &str = r#"
import socket, struct, sys, threading
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("10.77.0.2", 5001)); t.listen(16)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("10.77.0.2", 5002))
threading.Thread(target=lambda: [u.recv(65535) for _ in iter(int, 1)], daemon=True).start()
print("ready", flush=True)
for _ in range(int(sys.argv[1])):
    c, _ = t.accept()
    head = b""
    while len(head) < 8:
        head += c.recv(8 - len(head))
    while c.recv(1 << 16):
        pass
    c.sendall(b"d" * struct.unpack("!Q", head)[0])
    c.close()
"#;

/// Runs in the Tx namespace, in the order of the arguments: one TCP connection per "up:down" (sends `up`
/// bytes, reads `down`), one UDP flow per "udp:count:size", each from its own source port.
const CLIENT: &str = r#"
import socket, struct, sys, time
for i, a in enumerate(sys.argv[1:]):
    p = a.split(":")
    if p[0] == "udp":
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("10.77.0.1", 6000 + i))
        for _ in range(int(p[1])):
            u.sendto(b"u" * int(p[2]), ("10.77.0.2", 5002)); time.sleep(0.001)
        u.close()
        continue
    up, down = int(p[0]), int(p[1])
    s = socket.create_connection(("10.77.0.2", 5001))
    s.sendall(struct.pack("!Q", down) + b"c" * up)
    s.shutdown(socket.SHUT_WR)
    got = 0
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        got += len(b)
    assert got == down, (got, down)
    s.close()
"#;

/// (sum of wire lengths, packets, longest wire length) of one connection.
#[derive(Default, Debug, Clone, Copy, PartialEq)]
struct Flow {
    bytes: u64,
    packets: u64,
    max_len: u64,
}

/// Every IP packet of a file by connection (protocol and the two address:port ends, sorted), as tshark
/// reads it; packets without IP (ARP) are left out, as the cutoff never cuts them.
fn flows(file: &Path) -> BTreeMap<String, Flow> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "separator=,", "-E", "aggregator=;"])
        .args([
            "-e",
            "frame.len",
            "-e",
            "ip.proto",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
        ])
        .args(["-e", "tcp.srcport", "-e", "tcp.dstport"])
        .args(["-e", "udp.srcport", "-e", "udp.dstport"])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark -r {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m: BTreeMap<String, Flow> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 8 || f[2].is_empty() {
            continue;
        }
        let len: u64 = f[0].parse().unwrap();
        // ICMP errors quote the packet they answer: tshark then lists two IP headers (the outer first) and
        // the quoted ports; the connection of an ICMP packet has no ports (as in ringcap's key).
        let first = |s: &str| s.split(';').next().unwrap_or("").to_string();
        let proto = first(f[1]);
        let port = |t: &str, u: &str| match proto.as_str() {
            "6" => first(t),
            "17" => first(u),
            _ => "0".to_string(),
        };
        let mut ends = [
            format!("{}:{}", first(f[2]), port(f[4], f[6])),
            format!("{}:{}", first(f[3]), port(f[5], f[7])),
        ];
        ends.sort();
        let e = m
            .entry(format!("{proto} {} {}", ends[0], ends[1]))
            .or_default();
        e.bytes += len;
        e.packets += 1;
        e.max_len = e.max_len.max(len);
    }
    m
}

/// tcpdump on the Rx end, writing every packet to `file`, once it is listening.
/// Waits until `file` has kept its size for `quiet` (at most `limit`).
fn wait_until_stable(file: &Path, quiet: Duration, limit: Duration) {
    let size = || std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    let start = std::time::Instant::now();
    let (mut last, mut since) = (size(), std::time::Instant::now());
    while since.elapsed() < quiet && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(100));
        let now = size();
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        }
    }
}

fn spawn_tcpdump(tb: &testbed::Testbed, file: &Path) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = tb
        .command(Side::Rx, "tcpdump")
        .args([
            "-i",
            &tb.rx_if,
            "-n",
            "-s",
            "0",
            // A 64 MiB buffer: with the default 2 MiB it dropped 10 of 223 packets (64 KiB GSO
            // frames) under the full suite. Immediate mode and -U: without them the last packets
            // sat in a ring block not yet retired (1 s timeout) when tcpdump was stopped, and the
            // last connection was missing from the reference; now the file shows what tcpdump
            // has seen, and the test waits until it stops growing.
            "-B",
            "65536",
            "--immediate-mode",
            "-U",
            "-Z",
            "root",
            "-w",
        ])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tcpdump");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) if l.contains("listening on") => break,
            Ok(_) => {}
            Err(_) => panic!("tcpdump did not start listening in 20 s"),
        }
    }
    (child, rx)
}

#[test]
fn cutoff_keeps_the_first_size_bytes_of_every_connection() {
    if !(have("tcpdump") && have("tshark") && have("python3")) {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("cutoff");
    let all = dir.join("all.pcap");
    let cut = dir.join("cut.pcap");

    // The server first (its "ready" line: bound and listening), then both captures, then the traffic.
    let conns = [
        "5000:0",
        "19000:0",
        "15000:8000",
        "200000:0",
        "1000000:0",
        "100:300000",
        "30000:30000",
    ];
    let mut server = tb
        .command(Side::Rx, "python3")
        .args(["-c", SERVER, &conns.len().to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    let mut ready = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready", "the server did not start");

    let (tcpdump, tcpdump_err) = spawn_tcpdump(&tb, &all);
    let ringcap = capture_to_file(&tb, &cut, &["--cutoff", "20000", "--json"]);

    // UDP first: the server (and its UDP sink) ends after the last TCP connection.
    let mut args: Vec<&str> = vec!["-c", CLIENT, "udp:10:1000", "udp:50:1400", "udp:5:100"];
    args.extend_from_slice(&conns);
    let client = tb
        .command(Side::Tx, "python3")
        .args(&args)
        .output()
        .expect("run the client");
    assert!(
        client.status.success(),
        "client: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(server.wait().unwrap().success(), "server failed");
    // Let the last FIN/ACKs reach both captures (ringcap's block timeout is 20 ms), and tcpdump
    // write them: its file stops growing.
    std::thread::sleep(Duration::from_millis(500));
    wait_until_stable(&all, Duration::from_secs(1), Duration::from_secs(30));

    let out = stop(ringcap, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "ringcap: {err}");
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(tcpdump.id() as i32, libc::SIGINT) };
    let mut tcpdump = tcpdump;
    assert!(tcpdump.wait().unwrap().success(), "tcpdump failed");
    let td_lines: Vec<String> = tcpdump_err.iter().collect();
    assert!(
        td_lines.iter().any(|l| l == "0 packets dropped by kernel"),
        "tcpdump dropped packets: {td_lines:?}"
    );

    let summary: serde_json::Value = err
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no JSON summary in: {err}"));
    assert_eq!(summary["drops"]["kernel"], 0, "{summary}");
    assert_eq!(summary["drops"]["storage"], 0, "{summary}");
    let c = &summary["cutoff"];
    assert_eq!(c["size"], CUTOFF, "{summary}");

    let want = flows(&all);
    let got = flows(&cut);
    // 7 TCP connections and 3 UDP flows (no ICMP: the UDP sink listens; an IGMP report may come along).
    let of = |proto: &str| want.keys().filter(|k| k.starts_with(proto)).count();
    assert_eq!(
        (of("6 "), of("17 ")),
        (conns.len(), 3),
        "connections in all.pcap: {want:#?}"
    );
    let mut report = String::new();
    for (k, w) in &want {
        let g = got.get(k).copied().unwrap_or_default();
        let lo = w.bytes.min(CUTOFF);
        report += &format!(
            "{k}: all {} B in {} packets (max {}), cut file {} B in {} packets, bounds [{lo}, {}]\n",
            w.bytes,
            w.packets,
            w.max_len,
            g.bytes,
            g.packets,
            lo + w.max_len
        );
        assert!(
            g.bytes >= lo && g.bytes <= lo + w.max_len,
            "{k}: kept {} B, want [{lo}, {}]\n{report}",
            g.bytes,
            lo + w.max_len
        );
        if w.bytes <= CUTOFF {
            assert_eq!(g, *w, "{k}: below the cutoff, every packet is kept");
        }
    }
    eprintln!("{report}");
    assert!(got.keys().all(|k| want.contains_key(k)), "{got:#?}");
    // Something was cut, and ringcap's own count of it is the difference the independent reader sees.
    let sum = |m: &BTreeMap<String, Flow>| {
        m.values()
            .fold((0, 0), |(b, p), f| (b + f.bytes, p + f.packets))
    };
    let ((all_b, all_p), (cut_b, cut_p)) = (sum(&want), sum(&got));
    assert!(all_b - cut_b > 1_000_000, "{report}");
    assert_eq!(c["bytes_cut"], all_b - cut_b, "{summary}\n{report}");
    assert_eq!(c["packets_cut"], all_p - cut_p, "{summary}\n{report}");
    assert_eq!(c["connections"], want.len() as u64, "{summary}");
    assert_eq!(c["evictions"], 0, "{summary}");
    assert_eq!(summary["captured"], capinfos_count(&cut), "{summary}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn cutoff_without_a_file_is_a_usage_error() {
    let tb = testbed();
    let out = ringcap_rx(&tb, &["capture", "-i", &tb.rx_if, "--cutoff", "64KiB"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--cutoff") && err.contains("-w"), "{err}");
}
