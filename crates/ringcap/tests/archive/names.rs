//! `ringcap query --name` over an archive and over a sensor (issue 36: `--name` was refused for
//! s3:// and https:// sources): a store of DNS exchanges written here, archived to s3proxy with and
//! without its flow tables, served by `ringcap serve`; each answer equals `tcpdump -r` of the flows
//! that asked for or were answered the name (whose ports this file chose).

use super::*;
use crate::query::remote_query;
use common::stores::{need, sh};

/// An Ethernet / IPv4 / UDP frame between 10.9.0.1:`sport` and the resolver 10.9.0.53:53 (a query
/// to it, or its response with one A answer) about `name`.
fn dns_frame(sport: u16, name: &str, response: bool) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, if response { 0x81 } else { 0x01 }, 0x00];
    m.extend_from_slice(&[0, 1, 0, u8::from(response), 0, 0, 0, 0]);
    for label in name.split('.') {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.extend_from_slice(&[0, 0, 1, 0, 1]);
    if response {
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7]);
    }
    let (client, resolver) = ([10, 9, 0, 1], [10, 9, 0, 53]);
    let (src, dst, sp, dp) = if response {
        (resolver, client, 53, sport)
    } else {
        (client, resolver, sport, 53)
    };
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    let ip_len = (28 + m.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&u16::to_be_bytes(sp));
    f.extend_from_slice(&u16::to_be_bytes(dp));
    f.extend_from_slice(&((8 + m.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&m);
    f
}

/// A pcap file of `frames`, one per millisecond from `t0` s.
fn write_frames(path: &Path, frames: &[Vec<u8>], t0: u32) {
    let mut w = pcap_file(path);
    for (i, f) in frames.iter().enumerate() {
        w.write_all(&(t0 + i as u32 / 1000).to_le_bytes()).unwrap();
        w.write_all(&((i as u32 % 1000) * 1000).to_le_bytes())
            .unwrap();
        w.write_all(&(f.len() as u32).to_le_bytes()).unwrap();
        w.write_all(&(f.len() as u32).to_le_bytes()).unwrap();
        w.write_all(f).unwrap();
    }
    w.flush().unwrap();
}

/// tcpdump's lines of a pcap stream.
fn tcpdump_lines(pcap: &Path, expr: &str) -> String {
    sh(&format!(
        "tcpdump -nn -tt -r '{}' '{expr}' 2>/dev/null",
        pcap.display()
    ))
}

#[test]
fn query_by_name_over_an_archive_and_a_sensor_equals_tcpdump() {
    need("tcpdump");
    need("curl");
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    // Two capture files: each has exchanges about evil names (client ports 33000+) and others
    // (34000+), among 2000 frames of other UDP traffic.
    let store = tmp.path().join("store");
    fs::create_dir_all(&store).unwrap();
    let t0 = 1_796_169_600u32;
    for (seq, (evil, good)) in [(33001u16, 34001u16), (33002, 34002)].iter().enumerate() {
        let name = format!("cap-20261202T00000{seq}-00000{}.pcap", seq + 1);
        let noise = store.join("noise.pcap");
        write_pcap(&noise, 2000, 200, t0 + 10 * seq as u32, seq as u64 + 3);
        let mut frames = Vec::new();
        for (port, qname) in [
            (*evil, format!("host{seq}.evil.example")),
            (*good, "www.good.example".to_string()),
        ] {
            frames.push(dns_frame(port, &qname, false));
            frames.push(dns_frame(port, &qname, true));
        }
        let dns = store.join("dns.pcap");
        write_frames(&dns, &frames, t0 + 10 * seq as u32);
        // One file of both, in time order, as a capture would have written it.
        sh(&format!(
            "mergecap -F pcap -w '{}' '{}' '{}' && rm '{}' '{}'",
            store.join(&name).display(),
            noise.display(),
            dns.display(),
            noise.display(),
            dns.display()
        ));
    }
    let o = Command::new(ringcap())
        .args(["index", "-q"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let all = tmp.path().join("all.pcap");
    sh(&format!(
        "mergecap -F pcap -w '{}' '{}'/cap-*.pcap",
        all.display(),
        store.display()
    ));
    let want = tcpdump_lines(&all, "udp and (port 33001 or port 33002)");
    assert_eq!(want.lines().count(), 4, "{want}");

    // The archive with its flow tables, and a copy of it without (names read from the packets).
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bare = tmp.path().join("bare");
    fs::create_dir_all(&bare).unwrap();
    sh(&format!(
        "cp '{0}'/cap-*.pcap '{0}'/cap-*.pcap.idx '{1}'/",
        store.display(),
        bare.display()
    ));
    let o = archive(
        &s3,
        &bare,
        tmp.path(),
        &["--once", "--to", "s3://pcap/bare"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (prefix, how) in [
        ("site", "named (flow table)"),
        ("bare", "names read from the packets"),
    ] {
        let out = tmp.path().join(format!("{prefix}.pcap"));
        let o = remote_query(
            &s3,
            tmp.path(),
            prefix,
            "udp",
            &[
                "--name",
                "*.evil.example",
                "-w",
                out.to_str().unwrap(),
                "--explain",
            ],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{prefix}: {err}");
        assert!(err.contains(how), "{prefix}: {err}");
        assert_eq!(tcpdump_lines(&out, ""), want, "s3://pcap/{prefix} --name");
    }

    // A sensor (`ringcap serve`, plain HTTP on loopback) asked with --name.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut serve = Command::new(ringcap())
        .arg("serve")
        .arg(&store)
        .args(["--listen", &listen])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&listen).is_err() {
        assert!(Instant::now() < deadline, "serve did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = tmp.path().join("sensor.pcap");
    let o = Command::new(ringcap())
        .arg("query")
        .arg(format!("http://{listen}"))
        .args([
            "udp",
            "--name",
            "*.EVIL.example",
            "-w",
            out.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(tcpdump_lines(&out, ""), want, "a sensor asked with --name");
}
