//! Answers equal to tcpdump's over HTTPS with client certificates; strangers refused; plain HTTP on
//! loopback only; a busy server says 503.

use super::*;

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

// ---- Issue 33: hostile queries and peers (items 8, 9, 10 and 13). ----
