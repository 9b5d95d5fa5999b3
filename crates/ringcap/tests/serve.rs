//! `ringcap serve` end to end, with real clients: a store written by a testbed capture is queried
//! with curl over HTTPS with client certificates made by the openssl CLI, and the pcap that comes
//! back must hold exactly the packets `tcpdump -r` finds in the same files with the same
//! expression (compared byte for byte, as tcpdump -xx decodes both). Clients without a
//! certificate or with one from another CA are refused in the handshake; bad expressions get
//! 400 with libpcap's words; plain HTTP works on loopback only; a busy server says 503.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::stores::*;
use common::*;
use testbed::{Side, Testbed};

/// A certificate authority, or a certificate and key it signed, as PEM files in one directory.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    fn pem(&self, name: &str) -> String {
        self.dir.join(format!("{name}.pem")).display().to_string()
    }

    fn key(&self, name: &str) -> String {
        self.dir.join(format!("{name}.key")).display().to_string()
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A self-signed CA: NAME.pem and NAME.key.
    fn ca(&self, name: &str) {
        let subject = format!("/CN=ringcap test CA {name}");
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &self.key(name),
            "-out",
            &self.pem(name),
            "-days",
            "2",
            "-subj",
            &subject,
        ]);
    }

    /// A certificate for `name` signed by `ca`: for the server (IP 127.0.0.1) or a client.
    fn cert(&self, name: &str, ca: &str, server: bool) {
        let csr = self.dir.join(format!("{name}.csr")).display().to_string();
        let ext = self.dir.join(format!("{name}.ext"));
        let usage = if server {
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
        } else {
            "extendedKeyUsage=clientAuth\n"
        };
        std::fs::write(&ext, format!("basicConstraints=CA:FALSE\n{usage}")).unwrap();
        let subject = format!("/CN={name}");
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &self.key(name),
            "-out",
            &csr,
            "-subj",
            &subject,
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &self.pem(ca),
            "-CAkey",
            &self.key(ca),
            "-CAcreateserial",
            "-out",
            &self.pem(name),
            "-days",
            "2",
            "-extfile",
            ext.to_str().unwrap(),
        ]);
        chmod(Path::new(&self.key(name)), 0o600);
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The running server, killed if a check fails before it is stopped, so a failed run leaves no
/// server behind.
struct Server(Option<std::process::Child>);

impl Server {
    fn stop(mut self, sig: i32) -> Output {
        stop(self.0.take().expect("running"), sig)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What curl did: its exit status, the HTTP status it saw (0: none) and its error text.
struct Curl {
    output: Output,
    http: u32,
}

impl Curl {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

/// `curl -sS ARGS -w %{http_code}` inside the Rx namespace (where the server listens).
fn curl(tb: &Testbed, args: &[&str]) -> Curl {
    let output = tb
        .command(Side::Rx, "curl")
        .args(["-sS", "--max-time", "60", "-w", "%{http_code}"])
        .args(args)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&output.stdout);
    let http = text.trim().parse().unwrap_or(0);
    Curl { output, http }
}

/// The packets of a pcap file as tcpdump decodes them.
fn decoded(pcap: &Path) -> Vec<(u64, String)> {
    decode(&sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
        pcap.display()
    )))
}

fn stamp(ns: u64) -> String {
    format!("@{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The expressions compared with tcpdump: index-narrowed, a VLAN, one the index cannot narrow,
/// and a host within a time window (stenographer's `after`/`before` terms).
fn expressions(files: &[PathBuf]) -> Vec<(String, Vec<(u64, String)>)> {
    let all = expected(files, "", 0, u64::MAX);
    assert!(all.len() > 1000, "only {} packets in the store", all.len());
    let (t0, t1) = (all[all.len() / 3].0, all[2 * all.len() / 3].0);
    let mut v: Vec<(String, Vec<(u64, String)>)> = [
        "host 10.0.0.7 and port 1003",
        "vlan 100 and host 10.0.0.9",
        "udp[8] & 1 = 1",
    ]
    .iter()
    .map(|e| (e.to_string(), expected(files, e, 0, u64::MAX)))
    .collect();
    v.push((
        format!(
            "host 10.0.0.5 and after {} and before {}",
            stamp(t0),
            stamp(t1)
        ),
        expected(files, "host 10.0.0.5", t0, t1),
    ));
    v
}

/// What tcpdump itself says of a bad expression (its message, without "tcpdump: ").
fn tcpdump_error(expr: &str) -> String {
    let out = Command::new("tcpdump")
        .args(["-d", expr])
        .output()
        .expect("tcpdump");
    assert!(!out.status.success(), "tcpdump accepted {expr}");
    let text = String::from_utf8_lossy(&out.stderr);
    text.lines()
        .last()
        .unwrap_or("")
        .trim_start_matches("tcpdump: ")
        .to_string()
}

/// Connects to `addr` in the Rx namespace, sends `bytes`, then waits for the server to end the
/// connection: what it answered, and when.
fn silent_peer(tb: &Testbed, addr: &str, bytes: &[u8]) -> (String, Duration) {
    use std::io::{Read, Write};
    let (addr, bytes) = (addr.to_string(), bytes.to_vec());
    tb.run_in(Side::Rx, move || {
        let started = Instant::now();
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(&bytes).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        (
            String::from_utf8_lossy(&out).into_owned(),
            started.elapsed(),
        )
    })
}

fn read_text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[test]
fn https_answers_equal_tcpdump_and_strangers_are_refused() {
    for t in ["tcpdump", "zstd", "curl", "openssl"] {
        need(t);
    }
    let tb = testbed();
    let work = temp_dir("serve-tls");
    let store = work.join("store");
    std::fs::create_dir_all(&store).unwrap();
    capture_store(&tb, &store, &["--compress", "zstd"]);
    let files = store_files(&store);

    let pki = Pki::new(&work.join("pki"));
    pki.ca("ca");
    pki.cert("server", "ca", true);
    pki.cert("client", "ca", false);
    pki.ca("other");
    pki.cert("stranger", "other", false);
    let (server_pem, server_key, ca) = (pki.pem("server"), pki.key("server"), pki.pem("ca"));
    let serve_args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "serve",
            store.to_str().unwrap(),
            "--listen",
            "127.0.0.1:8443",
            "--cert",
            &server_pem,
            "--key",
            &server_key,
            "--client-ca",
            &ca,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };

    // A key file others may read is refused before anything listens.
    chmod(Path::new(&server_key), 0o644);
    let args = serve_args(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ringcap_rx(&tb, &args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("chmod 600"), "{err}");
    chmod(Path::new(&server_key), 0o600);

    let server = Server(Some(spawn_listening(ringcap_rx(&tb, &args))));
    // A peer that connects and says nothing is cut at the handshake deadline (10 s), while
    // the others are served.
    let (answer, took) = std::thread::scope(|s| {
        let quiet = s.spawn(|| silent_peer(&tb, "127.0.0.1:8443", b""));
        let url = "https://127.0.0.1:8443/query";
        let client = [
            "--cacert",
            &ca,
            "--cert",
            &pki.pem("client"),
            "--key",
            &pki.key("client"),
        ];
        let out = work.join("out.pcap");
        let mut matched = 0;
        for (expr, want) in expressions(&files) {
            let _ = std::fs::remove_file(&out);
            let mut args = client.to_vec();
            args.extend([
                "-X",
                "POST",
                "--data",
                &expr,
                url,
                "-o",
                out.to_str().unwrap(),
            ]);
            let c = curl(&tb, &args);
            assert!(
                c.output.status.success() && c.http == 200,
                "{expr}: {} {}",
                c.http,
                c.stderr()
            );
            let got = decoded(&out);
            assert_eq!(got.len(), want.len(), "{expr}: packet count");
            assert!(got == want, "{expr}: packets differ from tcpdump's");
            matched += got.len();
        }
        assert!(
            matched > 100,
            "the expressions matched only {matched} packets"
        );

        // Without a client certificate, or with one another CA signed: refused in the handshake.
        let stranger = [
            "--cert",
            &pki.pem("stranger"),
            "--key",
            &pki.key("stranger"),
        ];
        for (who, extra) in [
            ("no certificate", &[][..]),
            ("another CA's certificate", &stranger[..]),
        ] {
            let refused = work.join("refused.pcap");
            let mut args = vec!["--cacert", &ca];
            args.extend_from_slice(extra);
            args.extend([
                "-X",
                "POST",
                "--data",
                "udp",
                url,
                "-o",
                refused.to_str().unwrap(),
            ]);
            let c = curl(&tb, &args);
            let err = c.stderr();
            assert!(!c.output.status.success(), "{who}: curl succeeded");
            assert_eq!(c.http, 0, "{who}: got an HTTP answer");
            assert!(
                err.contains("SSL") || err.contains("alert") || err.contains("TLS"),
                "{who}: not a TLS error: {err}"
            );
            assert!(
                std::fs::metadata(&refused).map_or(0, |m| m.len()) == 0,
                "{who}: pcap bytes came back"
            );
        }

        // A bad expression: 400 with libpcap's message, the one tcpdump prints.
        let bad = work.join("bad.txt");
        let mut args = client.to_vec();
        args.extend([
            "-X",
            "POST",
            "--data",
            "port 99999",
            url,
            "-o",
            bad.to_str().unwrap(),
        ]);
        let c = curl(&tb, &args);
        let why = tcpdump_error("port 99999");
        assert_eq!(c.http, 400, "{}", c.stderr());
        assert!(
            !why.is_empty() && read_text(&bad).contains(&why),
            "{:?} lacks {why:?}",
            read_text(&bad)
        );

        // Plain HTTP on the HTTPS port is told to use https://.
        let told = work.join("told.txt");
        let c = curl(
            &tb,
            &[
                "--data",
                "udp",
                "http://127.0.0.1:8443/query",
                "-o",
                told.to_str().unwrap(),
            ],
        );
        assert_eq!(c.http, 400, "{}", c.stderr());
        assert!(
            read_text(&told).contains("https://"),
            "{}",
            read_text(&told)
        );

        // Other paths and methods.
        let mut args = client.to_vec();
        args.extend([
            "-X",
            "POST",
            "--data",
            "udp",
            "https://127.0.0.1:8443/other",
            "-o",
            "/dev/null",
        ]);
        assert_eq!(curl(&tb, &args).http, 404);
        let mut args = client.to_vec();
        args.extend([url, "-o", "/dev/null"]);
        assert_eq!(curl(&tb, &args).http, 405);
        quiet.join().unwrap()
    });
    assert!(answer.is_empty(), "{answer}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(20),
        "cut after {took:?}"
    );

    let done = server.stop(libc::SIGINT);
    let log = stderr_text(&done);
    assert!(done.status.success(), "{log}");
    assert!(
        log.contains("TLS handshake failed"),
        "refusals not logged: {log}"
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn plain_http_only_on_loopback_and_a_busy_server_says_503() {
    for t in ["tcpdump", "curl"] {
        need(t);
    }
    let tb = testbed();
    let work = temp_dir("serve-plain");
    let store = work.join("store");
    std::fs::create_dir_all(&store).unwrap();
    capture_store(&tb, &store, &[]);
    let files = store_files(&store);

    // Plain HTTP anywhere but loopback is refused, saying what to pass.
    let out = ringcap_rx(
        &tb,
        &["serve", store.to_str().unwrap(), "--listen", "0.0.0.0:8081"],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("loopback") && err.contains("--cert") && err.contains("--client-ca"),
        "{err}"
    );

    // One query at a time, each reading at most 100 kB/s for at most 6 s.
    let server = Server(Some(spawn_listening(ringcap_rx(
        &tb,
        &[
            "serve",
            store.to_str().unwrap(),
            "--listen",
            "127.0.0.1:8080",
            "--max-queries",
            "1",
            "--max-read-rate",
            "100kB",
            "--query-timeout",
            "6s",
        ],
    ))));
    // Slowloris: a request that never ends is answered 408 at the request deadline (10 s),
    // while the others are served.
    let (answer, took) = std::thread::scope(|s| {
        let slowloris = b"POST /query HTTP/1.1\r\nContent-Length: 40\r\n\r\nhost";
        let quiet = s.spawn(|| silent_peer(&tb, "127.0.0.1:8080", slowloris));
        let url = "http://127.0.0.1:8080/query";
        let out = work.join("out.pcap");
        let expr = "host 10.0.0.7 and port 1003";
        let c = curl(&tb, &["--data", expr, url, "-o", out.to_str().unwrap()]);
        assert!(
            c.output.status.success() && c.http == 200,
            "{} {}",
            c.http,
            c.stderr()
        );
        let want = expected(&files, expr, 0, u64::MAX);
        assert!(
            !want.is_empty() && decoded(&out) == want,
            "{expr}: packets differ from tcpdump's"
        );

        // Request limits: an oversized header block.
        let big = format!("X-Big: {}", "a".repeat(20_000));
        let c = curl(&tb, &["-H", &big, "--data", "udp", url, "-o", "/dev/null"]);
        assert_eq!(c.http, 431, "{}", c.stderr());

        // A query of the whole store (megabytes at 100 kB/s) holds the only place: another is told
        // to come back later; the long one is cut at its time limit, which its client sees.
        let (slow_out, slow_head) = (work.join("slow.pcap"), work.join("slow-head.txt"));
        let slow = tb
            .command(Side::Rx, "curl")
            .args([
                "-sS",
                "--max-time",
                "60",
                "-w",
                "%{http_code}",
                "--data",
                "udp",
                url,
                "-o",
            ])
            .arg(&slow_out)
            .arg("-D")
            .arg(&slow_head)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The answer's head is sent once the query holds its place.
        let waited = Instant::now();
        while !read_text(&slow_head).contains("200") {
            assert!(
                waited.elapsed() < Duration::from_secs(20),
                "the long query did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let headers = work.join("headers.txt");
        let c = curl(
            &tb,
            &[
                "--data",
                expr,
                url,
                "-D",
                headers.to_str().unwrap(),
                "-o",
                "/dev/null",
            ],
        );
        assert_eq!(c.http, 503, "{}", c.stderr());
        assert!(
            read_text(&headers)
                .to_ascii_lowercase()
                .contains("retry-after: "),
            "{}",
            read_text(&headers)
        );
        let slow = slow.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&slow.stdout).trim(), "200");
        assert_eq!(
            slow.status.code(),
            Some(18),
            "a cut result must look cut (curl exit 18): {}",
            String::from_utf8_lossy(&slow.stderr)
        );
        quiet.join().unwrap()
    });
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(20),
        "cut after {took:?}"
    );

    let done = server.stop(libc::SIGTERM);
    let log = stderr_text(&done);
    assert!(done.status.success(), "{log}");
    assert!(log.contains("503") && log.contains("time limit"), "{log}");
    let _ = std::fs::remove_dir_all(&work);
}
