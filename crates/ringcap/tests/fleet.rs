//! One query over many sensors (issue 35): three sensors, each a capture in its own testbed
//! (network namespaces, real traffic) and a `ringcap serve` of its store over mutual TLS, are
//! asked at once by `ringcap query https://… https://… https://…` and by a fleet file. The
//! answer must equal `tcpdump -r` over `mergecap` of all their files, record by record (tcpdump's
//! decode of both); a sensor that is down is named and exit 1 says the answer lacks it, while
//! the others' packets are still all there.

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::auth_harness::make_certs;
use common::stores::*;
use common::*;

/// A sensor: its testbed, its store and its serve (killed when dropped).
struct Sensor {
    _tb: testbed::Testbed,
    store: PathBuf,
    serve: Option<Announced>,
    port: u16,
}

impl Drop for Sensor {
    fn drop(&mut self) {
        if let Some(s) = self.serve.as_mut() {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
    }
}

/// A free TCP port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Three captures at once (so their packets interleave in time), each fed its own mix.
fn three_sensors(work: &Path, pki: &Path) -> Vec<Sensor> {
    let mut sensors: Vec<Sensor> = (0..3)
        .map(|i| {
            let store = work.join(format!("s{i}"));
            std::fs::create_dir_all(&store).unwrap();
            Sensor {
                _tb: testbed(),
                store,
                serve: None,
                port: free_port(),
            }
        })
        .collect();
    let captures: Vec<Announced> = sensors
        .iter()
        .map(|s| {
            let base = s.store.join("cap");
            let cmd = ringcap_rx(
                &s._tb,
                &[
                    "capture",
                    "-i",
                    &s._tb.rx_if,
                    "-w",
                    base.to_str().unwrap(),
                    "-C",
                    "200KB",
                ],
            );
            spawn_announced(cmd, "listening on")
        })
        .collect();
    std::thread::scope(|scope| {
        for (i, s) in sensors.iter().enumerate() {
            scope.spawn(move || send_mix(&s._tb, 3000, 10 + i as u32, (i == 1).then_some(100)));
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    for mut c in captures {
        let st = signal_and_wait(&mut c.child, libc::SIGINT, "capture");
        assert!(st.success(), "capture: {}", c.stderr.lock().unwrap());
    }
    for s in sensors.iter_mut() {
        // Every file indexed, as a sensor's would be once its capture caught up.
        let st = Command::new(ringcap())
            .args(["index", s.store.to_str().unwrap(), "-q"])
            .status()
            .unwrap();
        assert!(st.success());
        let listen = format!("127.0.0.1:{}", s.port);
        let p = |n: &str| pki.join(n).display().to_string();
        let mut cmd = Command::new(ringcap());
        cmd.args([
            "serve",
            s.store.to_str().unwrap(),
            "--listen",
            &listen,
            "--cert",
            &p("collector.pem"),
            "--key",
            &p("collector.key"),
            "--client-ca",
            &p("ca.pem"),
        ]);
        s.serve = Some(spawn_announced(cmd, "listening"));
    }
    sensors
}

/// `ringcap query ARGS -w OUT`: its status and stderr.
fn query(args: &[&str], out: &Path) -> (std::process::ExitStatus, String) {
    let o = Command::new(ringcap())
        .arg("query")
        .args(args)
        .args(["-w", out.to_str().unwrap()])
        .output()
        .unwrap();
    (o.status, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// What tcpdump gives for `expr` over mergecap of every sensor's files (in time order; nanosecond
/// times, as the captures wrote them).
fn merged_expectation(work: &Path, sensors: &[Sensor], expr: &str) -> Vec<(u64, String)> {
    let files: Vec<String> = sensors
        .iter()
        .flat_map(|s| store_files(&s.store))
        .map(|f| format!("'{}'", f.display()))
        .collect();
    let merged = work.join("merged.pcap");
    sh(&format!(
        "mergecap -F nsecpcap -w '{}' {}",
        merged.display(),
        files.join(" ")
    ));
    ties_in_one_order(expected(&[merged], expr, 0, u64::MAX))
}

/// A query's answer as tcpdump decodes it; it must be in time order.
fn decoded(pcap: &Path) -> Vec<(u64, String)> {
    let v = decode(&sh(&format!(
        "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
        pcap.display()
    )));
    assert!(
        v.windows(2).all(|w| w[0].0 <= w[1].0),
        "{}: packets out of time order",
        pcap.display()
    );
    ties_in_one_order(v)
}

/// Packets of the same time stamp from different sensors have no order of their own: mergecap
/// gives the last-listed file's first (its `is_earlier` is true on a tie), ringcap the first-named
/// source's (as `tcpdump -r` of files one after another does). Compared in one order: by time, then
/// by their decode.
fn ties_in_one_order(mut v: Vec<(u64, String)>) -> Vec<(u64, String)> {
    v.sort();
    v
}

#[test]
fn a_query_over_three_sensors_equals_tcpdump_over_their_merged_files() {
    for tool in ["tcpdump", "mergecap", "openssl"] {
        need(tool);
    }
    let work = temp_dir("fleet");
    let pki = work.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    make_certs(&pki);
    let sensors = three_sensors(&work, &pki);
    let p = |n: &str| pki.join(n).display().to_string();
    let urls: Vec<String> = sensors
        .iter()
        .map(|s| format!("https://127.0.0.1:{}", s.port))
        .collect();
    let tls = [
        "--ca".to_string(),
        p("ca.pem"),
        "--cert".into(),
        p("probe.pem"),
        "--key".into(),
        p("probe.key"),
    ];
    let out = work.join("out.pcap");
    for expr in [
        "",
        "udp and host 10.0.0.7",
        "vlan 100 and port 53",
        "host 10.0.0.3 or host 10.1.0.2",
    ] {
        let want = merged_expectation(&work, &sensors, expr);
        let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
        args.extend(tls.iter().map(String::as_str));
        if !expr.is_empty() {
            args.push(expr);
        }
        let (st, err) = query(&args, &out);
        assert!(st.success(), "{expr}: {err}");
        let got = decoded(&out);
        assert!(
            !want.is_empty() || expr.contains("vlan"),
            "{expr}: nothing to find"
        );
        assert_eq!(got.len(), want.len(), "{expr}: {err}");
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "{expr}: packet {i} of {} differs from tcpdump's over mergecap:\n{}\nwant:\n{}",
                got.len(),
                got[i].1,
                want[i].1
            );
        }
        for s in &sensors {
            assert!(
                err.contains(&format!("127.0.0.1:{}", s.port)),
                "{expr}: sensor not reported: {err}"
            );
        }
    }

    // Coverage: each sensor's capture wrote a record per file (drops 0 at this rate, one file's
    // close is the next one's open); a window that begins a minute before the first packet has a
    // gap from its start, which no file covers.
    let all = merged_expectation(&work, &sensors, "");
    let after = all[0].0 - 60_000_000_000;
    let at = format!("@{}.{:09}", after / 1_000_000_000, after % 1_000_000_000);
    let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
    args.extend(tls.iter().map(String::as_str));
    args.extend(["--after", &at, "--json"]);
    let o = Command::new(ringcap())
        .arg("query")
        .args(&args)
        .args(["-w", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for (s, src) in sensors.iter().zip(v["sources"].as_array().unwrap()) {
        let c = &src["coverage"];
        let files = store_files(&s.store).len() as u64;
        assert_eq!(c["files"].as_u64(), Some(files), "{src}");
        assert_eq!(c["unknown"].as_u64(), Some(0), "{src}");
        assert_eq!(c["drops"]["kernel"].as_u64(), Some(0), "{src}");
        let gaps = c["gaps"].as_array().unwrap();
        assert_eq!(gaps.len(), 1, "one gap, before the capture began: {src}");
        let (lo, hi) = (gaps[0][0].as_u64().unwrap(), gaps[0][1].as_u64().unwrap());
        assert_eq!(lo, after, "{src}");
        assert!(hi > after + 50_000_000_000 && hi <= all[0].0, "{src}");
    }

    // The same through a fleet file, with a fourth sensor that is down: named, exit 1, and the
    // three others' packets all there.
    let down = free_port();
    let mut fleet = format!(
        "ca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
        p("ca.pem"),
        p("probe.pem"),
        p("probe.key")
    );
    for (i, u) in urls.iter().enumerate() {
        fleet.push_str(&format!("[[sensor]]\nname = \"s{i}\"\nurl = \"{u}\"\n"));
    }
    fleet.push_str(&format!(
        "[[sensor]]\nname = \"gone\"\nurl = \"https://127.0.0.1:{down}\"\n"
    ));
    let fleet_file = work.join("sensors.toml");
    std::fs::write(&fleet_file, fleet).unwrap();
    let expr = "udp and host 10.0.0.7";
    let want = merged_expectation(&work, &sensors, expr);
    let (st, err) = query(&["--sensors", fleet_file.to_str().unwrap(), expr], &out);
    assert_eq!(
        st.code(),
        Some(1),
        "a sensor down must fail the query: {err}"
    );
    assert!(
        err.contains("gone") && err.contains("down"),
        "the sensor down is not named: {err}"
    );
    assert!(
        decoded(&out) == want,
        "the answer of the others is not whole: {err}"
    );

    // A bad expression is refused in libpcap's words, as `tcpdump -r` refuses it (exit 1).
    let (st, err) = query(
        &["--sensors", fleet_file.to_str().unwrap(), "udp and"],
        &out,
    );
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("syntax error"), "{err}");

    // Hostile or broken sensors among the real ones: one that never answers, one whose answer is
    // cut inside a packet, one that sends garbage. Each is named; the real ones' packets are all
    // there; exit 1.
    let fakes: Vec<(&str, String)> = ["slow", "cut", "garbage"]
        .into_iter()
        .map(|how| (how, format!("http://127.0.0.1:{}", fake_sensor(how))))
        .collect();
    let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
    args.extend(fakes.iter().map(|(_, u)| u.as_str()));
    args.extend(tls.iter().map(String::as_str));
    args.extend(["--sensor-timeout", "2s", expr]);
    let (st, err) = query(&args, &out);
    assert_eq!(st.code(), Some(1), "{err}");
    for (how, url) in &fakes {
        let named = err
            .lines()
            .any(|l| l.contains(url.trim_start_matches("http://")));
        assert!(named, "the {how} sensor is not named: {err}");
    }
    assert!(err.contains("slow"), "{err}");
    assert!(
        decoded(&out) == want,
        "the real sensors' answer is not whole: {err}"
    );
    drop(sensors);
    let _ = std::fs::remove_dir_all(&work);
}

/// A sensor that misbehaves `how`: "slow" (reads the request, never answers), "cut" (a pcap
/// header and half a packet, then the connection closes mid-chunk), "garbage" (200 and bytes
/// that are no capture file). Its port; it serves until the test ends.
fn fake_sensor(how: &'static str) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf);
                match how {
                    "slow" => std::thread::sleep(Duration::from_secs(30)),
                    "cut" => {
                        let mut body = Vec::new();
                        // pcap header (µs, Ethernet), then a record that claims 100 bytes and
                        // brings 10.
                        body.extend([0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]);
                        body.extend([0u8; 8]);
                        body.extend(65535u32.to_le_bytes());
                        body.extend(1u32.to_le_bytes());
                        body.extend([0u8; 8]);
                        body.extend(100u32.to_le_bytes());
                        body.extend(100u32.to_le_bytes());
                        body.extend([0u8; 10]);
                        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
                        let _ = c.write_all(head.as_bytes());
                        let _ = c.write_all(format!("{:x}\r\n", body.len()).as_bytes());
                        let _ = c.write_all(&body);
                        let _ = c.write_all(b"\r\n");
                    }
                    _ => {
                        let junk =
                            b"this is not a capture file, whatever the sensor says".repeat(4);
                        let head =
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", junk.len());
                        let _ = c.write_all(head.as_bytes());
                        let _ = c.write_all(&junk);
                    }
                }
            });
        }
    });
    port
}
