//! Hostile clients (issue 33 items 8-10, 13): costly and deeply nested filters, stalled sockets, bad
//! Content-Length, host names, clients that leave or stop reading; valid clients still served.

use super::*;

/// A store of `n` UDP frames of `len` bytes written without ringcap (frame i goes to port
/// 2000 + i % 11), so what a query must find is known.
fn written_store(dir: &Path, n: u32, len: usize) -> PathBuf {
    let store = dir.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| frame(i, 1000 + (i % 7) as u16, 2000 + (i % 11) as u16, len))
        .collect();
    write_pcap(&store.join("cap-1.pcap"), &frames);
    store
}

/// The query the well-behaved clients send, and how many of `n` frames it matches.
const VALID: &str = "udp and dst port 2003";
fn valid_count(n: u32) -> usize {
    (0..n).filter(|i| i % 11 == 3).count()
}

/// `ringcap serve STORE --listen ADDR EXTRA…` in the Rx namespace, once it listens.
fn serve(tb: &Testbed, store: &Path, addr: &str, extra: &[&str]) -> Server {
    let mut args = vec!["serve", store.to_str().unwrap(), "--listen", addr];
    args.extend_from_slice(extra);
    Server(Some(spawn_listening(ringcap_rx(tb, &args))))
}

/// POSTs `body` (from a file, byte for byte) with curl ARGS: the HTTP status and the answer.
fn post(tb: &Testbed, work: &Path, url: &str, body: &[u8], args: &[&str]) -> (u32, Vec<u8>) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (req, out) = (work.join(format!("req-{n}")), work.join(format!("out-{n}")));
    std::fs::write(&req, body).unwrap();
    let data = format!("@{}", req.display());
    let mut a = args.to_vec();
    a.extend(["--data-binary", &data, url, "-o", out.to_str().unwrap()]);
    let c = curl(tb, &a);
    // No answer: what curl said instead, for the failure message.
    let answer = match c.http {
        0 => c.stderr().into_bytes(),
        _ => std::fs::read(&out).unwrap_or_default(),
    };
    let _ = (std::fs::remove_file(&req), std::fs::remove_file(&out));
    (c.http, answer)
}

/// Packets in a pcap answer, as tcpdump counts them.
fn packets_in(work: &Path, pcap: &[u8]) -> usize {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let f = work.join(format!("answer-{n}.pcap"));
    std::fs::write(&f, pcap).unwrap();
    let count = tcpdump_count(&f);
    let _ = std::fs::remove_file(&f);
    count
}

/// A field of /proc/PID/status in KiB (VmHWM: the peak resident set).
fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The processes whose parent is `pid` (serve's filter checks).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            // Field 4 of stat, after the command in parentheses.
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split(' ').nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

impl Server {
    /// The server's pid, checked to be ringcap's (`ip netns exec` execs it in place).
    fn pid(&self) -> u32 {
        let pid = self.0.as_ref().expect("running").id();
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert_eq!(exe, ringcap(), "pid {pid} is not the server");
        pid
    }

    fn running(&mut self) -> bool {
        self.0
            .as_mut()
            .expect("started")
            .try_wait()
            .unwrap()
            .is_none()
    }
}

/// `port 1 or port 2 or … or port N`.
fn ports_expression(n: u32) -> String {
    (1..=n)
        .map(|i| format!("port {i}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Issue 33, item 9: the 16 KiB `port 1 or … or port 1345` made serve take 720 MB and minutes
/// of a CPU compiling it (libpcap's optimiser), before it took a query place, outside
/// --query-timeout, and after the client had gone. It is now compiled first in a child limited
/// to 256 MiB of address space, inside the place and the time limit, and killed when the client
/// hangs up. Memory bound asserted: serve's own peak resident set (VmHWM) stays under 64 MiB
/// while two attackers send that expression 16 times and a client gets 10 right answers (the
/// child fails its allocation and dies; measured here: about 14 MiB).
#[test]
fn a_filter_too_costly_to_compile_is_refused_by_a_bounded_child_while_clients_are_served() {
    for t in ["curl", "tcpdump"] {
        need(t);
    }
    let tb = testbed();
    let work = temp_dir("serve-costly");
    let n = 3000;
    let store = written_store(&work, n, 100);
    let mut server = serve(
        &tb,
        &store,
        "127.0.0.1:8082",
        &["--max-queries", "3", "--query-timeout", "3s"],
    );
    let pid = server.pid();
    let url = "http://127.0.0.1:8082/query";
    let attack = ports_expression(1345);
    assert!(attack.len() > 16_000 && attack.len() <= 16 << 10);

    let worst = std::thread::scope(|s| {
        let attackers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut worst = Duration::ZERO;
                    for _ in 0..8 {
                        let started = Instant::now();
                        let (http, text) = post(&tb, &work, url, attack.as_bytes(), &[]);
                        let text = String::from_utf8_lossy(&text).into_owned();
                        assert_eq!(http, 422, "{text}");
                        assert!(
                            text.contains("too costly") && text.contains("256 MiB"),
                            "{text}"
                        );
                        worst = worst.max(started.elapsed());
                    }
                    worst
                })
            })
            .collect();
        for _ in 0..10 {
            let (http, pcap) = post(&tb, &work, url, VALID.as_bytes(), &[]);
            assert_eq!(http, 200, "{}", String::from_utf8_lossy(&pcap));
            assert_eq!(packets_in(&work, &pcap), valid_count(n));
        }
        attackers
            .into_iter()
            .map(|a| a.join().unwrap())
            .max()
            .unwrap()
    });
    assert!(worst < Duration::from_secs(5), "an attack took {worst:?}");
    let peak = status_kib(pid, "VmHWM");
    eprintln!("serve's VmHWM after the attack: {} KiB", peak);
    assert!(peak < 64 << 10, "serve's peak resident set {peak} KiB");

    // An expression that compiles for minutes within the memory limit is stopped at the time
    // --query-timeout gives it, with the place given back.
    let slow = ports_expression(600);
    let started = Instant::now();
    let (http, text) = post(&tb, &work, url, slow.as_bytes(), &[]);
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&text);
    assert_eq!(http, 422, "{text}");
    assert!(text.contains("over 3.0 s"), "{text}");
    assert!(
        took > Duration::from_millis(2500) && took < Duration::from_secs(8),
        "answered after {took:?}"
    );
    assert!(children_of(pid).is_empty(), "a check outlived its answer");

    // A client that hangs up while its filter is checked: the check is killed at once.
    let started = Instant::now();
    let c = curl(
        &tb,
        &[
            "--max-time",
            "1",
            "--data-binary",
            &slow,
            url,
            "-o",
            "/dev/null",
        ],
    );
    assert_eq!(c.output.status.code(), Some(28), "{}", c.stderr());
    while !children_of(pid).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the check went on after its client left"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (http, pcap) = post(&tb, &work, url, VALID.as_bytes(), &[]);
    assert_eq!((http, packets_in(&work, &pcap)), (200, valid_count(n)));

    assert!(server.running());
    let done = server.stop(libc::SIGTERM);
    let log = stderr_text(&done);
    assert!(done.status.success(), "{log}");
    assert!(
        log.contains("422: the filter is too costly to compile: over 256 MiB")
            && log.contains("over 3.0 s")
            && log.contains("the client went away after")
            && log.contains("check stopped"),
        "{log}"
    );
    // The attacker's 16 KiB is not copied into every log line.
    assert!(log.lines().all(|l| l.len() < 2000), "{log}");
    let _ = std::fs::remove_dir_all(&work);
}

/// Issue 33, item 8 (serve's side): 16 380 `!` then `tcp` overflowed a connection thread's
/// stack in the expression parser, killing serve. The check now parses in a child on a stack
/// half a connection thread's; its crash is a 400, and serve goes on. (The parser itself is
/// being bounded in crates/index; this holds with or without that.)
#[test]
fn deeply_nested_queries_get_400_and_the_server_stays_up() {
    for t in ["curl", "tcpdump"] {
        need(t);
    }
    let tb = testbed();
    let work = temp_dir("serve-nested");
    let n = 1000;
    let store = written_store(&work, n, 100);
    let mut server = serve(&tb, &store, "127.0.0.1:8083", &[]);
    let url = "http://127.0.0.1:8083/query";
    let bangs = format!("{}tcp", "!".repeat(16_380));
    for (body, want) in [
        (bangs.clone(), 400),
        ("(".repeat(100_000), 413),
        ("(".repeat(16_000), 400),
    ] {
        let (http, text) = post(&tb, &work, url, body.as_bytes(), &[]);
        let text = String::from_utf8_lossy(&text);
        assert_eq!(http, want, "{} bytes: {text}", body.len());
        assert!(!text.trim().is_empty());
        assert!(server.running(), "serve died on {} bytes", body.len());
        let (http, pcap) = post(&tb, &work, url, VALID.as_bytes(), &[]);
        assert_eq!((http, packets_in(&work, &pcap)), (200, valid_count(n)));
    }
    let done = server.stop(libc::SIGTERM);
    assert!(done.status.success(), "{}", stderr_text(&done));
    let _ = std::fs::remove_dir_all(&work);
}

/// Holds `n` sockets to `addr` that each send one byte (a TLS record's first) and stall; each one
/// the server closes is opened again at once, until `stop` exists. Prints how many were closed.
const STALLER: &str = r#"
import os, selectors, socket, sys
host, port, n, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sel = selectors.DefaultSelector()
closed = 0
def open_one():
    s = socket.create_connection((host, port))
    s.sendall(b"\x16")
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
for _ in range(n):
    open_one()
while not os.path.exists(stop):
    for key, _ in sel.select(0.05):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:
            sel.unregister(s)
            s.close()
            closed += 1
            try:
                open_one()
            except OSError:
                pass
print(closed)
"#;

/// Issue 33, item 10: 40 sockets without a certificate that sent one byte and stalled held every
/// connection place (--max-connections 32) for their 10 s handshake deadline, again and again:
/// 0 of 27 queries answered in 30 s. A connection now waits for its first whole message (the
/// ClientHello) without a thread or a place, 8 × --max-connections of them at most (the one
/// that waited longest is closed for a newcomer); with a place, the oldest that has shown least
/// is closed for a newcomer, never a running query. The 40 here reconnect as soon as they are
/// closed.
#[test]
fn forty_stalled_sockets_without_certificates_do_not_keep_clients_out() {
    for t in ["curl", "openssl", "python3", "tcpdump"] {
        need(t);
    }
    let tb = testbed();
    let work = temp_dir("serve-stalled");
    let n = 1000;
    let store = written_store(&work, n, 100);
    let pki = Pki::new(&work.join("pki"));
    pki.ca("ca");
    pki.cert("server", "ca", true);
    pki.cert("client", "ca", false);
    let (cert, key, ca) = (pki.pem("server"), pki.key("server"), pki.pem("ca"));
    let (client_pem, client_key) = (pki.pem("client"), pki.key("client"));
    let client = [
        "--cacert",
        ca.as_str(),
        "--cert",
        &client_pem,
        "--key",
        &client_key,
    ];
    let url = "https://127.0.0.1:8444/query";
    // The issue's --max-connections (32: 256 may wait, more than the 40), then 3 (24 may wait,
    // fewer: the 40 are closed and come back thousands of times a second).
    for max_connections in ["32", "3"] {
        let server = serve(
            &tb,
            &store,
            "127.0.0.1:8444",
            &[
                "--cert",
                &cert,
                "--key",
                &key,
                "--client-ca",
                &ca,
                "--max-connections",
                max_connections,
                // Three clients query at once.
                "--max-queries",
                "3",
            ],
        );
        let stop = work.join("stop-stalling");
        let _ = std::fs::remove_file(&stop);
        let staller = tb
            .command(Side::Rx, "python3")
            .args(["-c", STALLER, "127.0.0.1", "8444", "40"])
            .arg(&stop)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The 40 connect before the clients come.
        std::thread::sleep(Duration::from_secs(1));
        let started = Instant::now();
        let answered: usize = std::thread::scope(|s| {
            let workers: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        let mut ok = 0;
                        for _ in 0..9 {
                            let (http, pcap) = post(&tb, &work, url, VALID.as_bytes(), &client);
                            assert_eq!(http, 200, "{}", String::from_utf8_lossy(&pcap));
                            assert_eq!(packets_in(&work, &pcap), valid_count(n));
                            ok += 1;
                        }
                        ok
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        let took = started.elapsed();
        std::fs::write(&stop, b"").unwrap();
        let staller = staller.wait_with_output().unwrap();
        let closed: u64 = String::from_utf8_lossy(&staller.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("staller: {}", String::from_utf8_lossy(&staller.stderr)));
        assert_eq!(answered, 27);
        assert!(took < Duration::from_secs(30), "27 queries took {took:?}");
        let done = server.stop(libc::SIGTERM);
        let log = stderr_text(&done);
        assert!(done.status.success(), "{log}");
        if max_connections == "3" {
            assert!(
                closed > 40,
                "the stalled sockets were not closed for the clients"
            );
            assert!(
                log.contains("closed to make room for a new connection (24 waiting")
                    && log.contains("it had sent 1 byte in"),
                "{log}"
            );
        }
        eprintln!(
            "--max-connections {max_connections}: 27 queries in {took:?}; stalled sockets closed meanwhile: {closed}"
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Sends `request` on a new connection in the Rx namespace and reads the answer's status line.
fn raw_status(tb: &Testbed, addr: &str, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let (addr, request) = (addr.to_string(), request.to_vec());
    tb.run_in(Side::Rx, move || {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(&request).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        text.lines().next().unwrap_or("").to_string()
    })
}

/// Issue 33, item 13: a POST without Content-Length was read as the empty query and streamed
/// the whole store; `Content-Length: +3` and other non-digit forms were accepted. Now: 411
/// without one (chunked bodies too: they are not supported), 400 for anything but digits or
/// for two different values.
#[test]
fn a_post_without_a_plain_content_length_is_refused() {
    need("curl");
    let tb = testbed();
    let work = temp_dir("serve-length");
    let store = written_store(&work, 100, 100);
    let server = serve(&tb, &store, "127.0.0.1:8084", &[]);
    let addr = "127.0.0.1:8084";
    let with = |headers: &str, body: &str| {
        let request = format!("POST /query HTTP/1.1\r\nHost: x\r\n{headers}\r\n{body}");
        raw_status(&tb, addr, request.as_bytes())
    };
    for (headers, body, want) in [
        ("", "", "411"),
        (
            "Transfer-Encoding: chunked\r\n",
            "3\r\nudp\r\n0\r\n\r\n",
            "411",
        ),
        ("Content-Length: +3\r\n", "udp", "400"),
        ("Content-Length: -3\r\n", "udp", "400"),
        ("Content-Length: 0x3\r\n", "udp", "400"),
        ("Content-Length: 1 2\r\n", "udp and tcp", "400"),
        ("Content-Length: 3,3\r\n", "udp", "400"),
        ("Content-Length: 3\r\nContent-Length: 4\r\n", "udp ", "400"),
        // Blanks around the value are allowed (RFC 9110's OWS); so is the same value twice.
        ("Content-Length:  3 \r\n", "udp", "200"),
        ("Content-Length: 3\r\nContent-Length: 3\r\n", "udp", "200"),
    ] {
        let status = with(headers, body);
        assert!(
            status.starts_with(&format!("HTTP/1.1 {want} ")),
            "{headers:?}: {status}"
        );
    }
    let c = curl(
        &tb,
        &[
            "-X",
            "POST",
            "http://127.0.0.1:8084/query",
            "-o",
            "/dev/null",
        ],
    );
    assert_eq!(c.http, 411, "{}", c.stderr());
    let done = server.stop(libc::SIGTERM);
    let log = stderr_text(&done);
    assert!(
        done.status.success() && log.contains("411: a POST needs a Content-Length"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// Issue 33, item 13: `host NAME` in a served query made the sensor resolve names (DNS) for a
/// remote client. Names of hosts and networks are refused (400, saying to give addresses)
/// unless serve runs with --allow-names; port and protocol names (local files) are fine.
#[test]
fn host_names_in_queries_are_refused_unless_allowed() {
    for t in ["curl", "tcpdump"] {
        need(t);
    }
    let tb = testbed();
    let work = temp_dir("serve-names");
    let n = 1000;
    let store = written_store(&work, n, 100);
    let server = serve(&tb, &store, "127.0.0.1:8085", &[]);
    let url = "http://127.0.0.1:8085/query";
    for expr in [
        "host sensor.invalid",
        "udp and src ringcap-test-host.invalid",
        "ether host gateway-mac and udp",
        "net corp.invalid",
        "udp and dst port 2003 or src bare-name.invalid",
        "host localhost and after 1m ago",
    ] {
        let (http, text) = post(&tb, &work, url, expr.as_bytes(), &[]);
        let text = String::from_utf8_lossy(&text);
        assert_eq!(http, 400, "{expr}: {text}");
        assert!(
            text.contains("give addresses") && text.contains("--allow-names"),
            "{expr}: {text}"
        );
    }
    // Addresses, and port and protocol names, are answered.
    for (expr, want) in [
        (
            "udp and host 10.77.0.2 and ether dst 02:00:00:00:00:02 and dst port 2003",
            valid_count(n),
        ),
        (
            "ip proto \\udp and (port domain or port 2003) and dst port 2003",
            valid_count(n),
        ),
        ("udp and net 10.77.0.0/16 and dst port 2003", valid_count(n)),
    ] {
        let (http, pcap) = post(&tb, &work, url, expr.as_bytes(), &[]);
        assert_eq!(http, 200, "{expr}: {}", String::from_utf8_lossy(&pcap));
        assert_eq!(packets_in(&work, &pcap), want, "{expr}");
    }
    let done = server.stop(libc::SIGTERM);
    assert!(done.status.success(), "{}", stderr_text(&done));

    // --allow-names: the operator lets names be resolved (localhost: /etc/hosts).
    let server = serve(&tb, &store, "127.0.0.1:8085", &["--allow-names"]);
    let (http, pcap) = post(&tb, &work, url, b"host localhost", &[]);
    assert_eq!(http, 200, "{}", String::from_utf8_lossy(&pcap));
    assert_eq!(packets_in(&work, &pcap), 0);
    let done = server.stop(libc::SIGTERM);
    assert!(done.status.success(), "{}", stderr_text(&done));
    let _ = std::fs::remove_dir_all(&work);
}

/// A client that sends a query, reads a little of the answer and stalls with a 4 KiB receive
/// buffer until `stop` exists.
const STALLED_READER: &str = r#"
import os, socket, sys, time
host, port, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect((host, port))
s.sendall(b"POST /query HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nudp")
s.recv(1024)
while not os.path.exists(stop):
    time.sleep(0.05)
"#;

/// Issue 33, item 13: a query cut because its client stopped reading (the write stall) or went
/// away left no line in the log. Each now logs one line with the packets and bytes written.
#[test]
fn a_query_cut_because_its_client_left_or_stopped_reading_is_logged() {
    need("python3");
    let tb = testbed();
    let work = temp_dir("serve-cut");
    // 10 MB: more than the socket buffers hold.
    let store = written_store(&work, 10_000, 1000);
    let server = serve(&tb, &store, "127.0.0.1:8086", &["--write-stall", "1s"]);
    // One reads 64 KiB of the answer and closes the connection.
    let read = tb.run_in(Side::Rx, || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect("127.0.0.1:8086").unwrap();
        s.write_all(b"POST /query HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nudp")
            .unwrap();
        let mut buf = vec![0u8; 64 << 10];
        s.read_exact(&mut buf).unwrap();
        buf.len()
    });
    assert_eq!(read, 64 << 10);
    // The other stops reading for longer than --write-stall. (The kernel still takes a little
    // of a blocked write at each zero-window probe, 0.2, 0.4, 0.8, 1.6 s… apart: a second
    // without progress comes about 3 s after the buffers filled.)
    let stop = work.join("stop-reading");
    let reader = tb
        .command(Side::Rx, "python3")
        .args(["-c", STALLED_READER, "127.0.0.1", "8086"])
        .arg(&stop)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(8));
    std::fs::write(&stop, b"").unwrap();
    let reader = reader.wait_with_output().unwrap();
    assert!(reader.status.success());
    std::thread::sleep(Duration::from_millis(500));
    let done = server.stop(libc::SIGTERM);
    let log = stderr_text(&done);
    assert!(done.status.success(), "{log}");
    let cut: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"udp\": cut after"))
        .collect();
    assert_eq!(cut.len(), 2, "{log}");
    assert!(
        cut.iter().any(|l| l.contains("the client went away"))
            && cut
                .iter()
                .any(|l| l.contains("the client stopped reading (1s without taking any")),
        "{log}"
    );
    assert!(cut.iter().all(|l| l.contains("bytes written")), "{log}");
    let _ = std::fs::remove_dir_all(&work);
}
