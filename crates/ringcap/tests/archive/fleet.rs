//! A sensor and its archive in one query (issue 35): the sensor gives the files it still holds,
//! the archive the ones retention deleted there, and a packet kept in both comes out once. The
//! answer equals `tcpdump -r` over every file the capture wrote; with the sensor down, the
//! archive still gives them all and the sensor is named (exit 1).

use super::*;

/// `ringcap query --sensors FLEET EXPR -w OUT --json` with the test's credentials.
fn fleet_query(s3: &S3, home: &Path, fleet: &Path, expr: &str, out: &Path) -> Output {
    ringcap_with_credentials(home)
        .arg("query")
        .args(["--sensors", fleet.to_str().unwrap(), expr])
        .args([
            "-w",
            out.to_str().unwrap(),
            "--json",
            "--endpoint",
            &s3.endpoint(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_sensor_and_its_archive_give_each_packet_once() {
    use common::stores::{decode, expected, need, sh, store_files};
    need("tcpdump");
    need("zstd");
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    fs::create_dir_all(&store).unwrap();
    query::capture_with_a_connection(&common::testbed(), &store);
    let o = Command::new(ringcap())
        .args(["index", "-q"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Every file as the capture wrote it, kept aside for tcpdump; then the sensor's retention
    // deletes its oldest half (they are in the archive).
    let files = store_files(&store);
    assert!(files.len() >= 4, "{files:?}");
    let kept = tmp.path().join("all");
    fs::create_dir_all(&kept).unwrap();
    let all: Vec<PathBuf> = files
        .iter()
        .map(|f| {
            let to = kept.join(f.file_name().unwrap());
            fs::copy(f, &to).unwrap();
            to
        })
        .collect();
    let gone = files.len() / 2;
    for f in &files[..gone] {
        for p in [f.clone(), store::index_path(f), store::flows_path(f)] {
            let _ = fs::remove_file(p);
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut serve = Command::new(ringcap());
    serve.args(["serve", store.to_str().unwrap(), "--listen", &listen]);
    let mut serve = common::spawn_announced(serve, "listening");
    let fleet = tmp.path().join("sensors.toml");
    fs::write(
        &fleet,
        format!("[[sensor]]\nname = \"s1\"\nurl = \"http://{listen}\"\narchive = \"s3://{BUCKET}/site\"\n"),
    )
    .unwrap();
    let out = tmp.path().join("out.pcap");
    let decoded = |p: &Path| {
        decode(&sh(&format!(
            "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
            p.display()
        )))
    };
    for expr in ["", query::CONNECTION, "host 10.0.0.7"] {
        let o = fleet_query(&s3, tmp.path(), &fleet, expr, &out);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "`{expr}`: {err}");
        let want = expected(&all, expr, 0, u64::MAX);
        let got = decoded(&out);
        assert_eq!(got.len(), want.len(), "`{expr}`: {err}");
        assert!(got == want, "`{expr}`: the packets differ from tcpdump's");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let sources = v["sources"].as_array().expect("sources");
        let archive = sources.iter().find(|s| s["kind"] == "archive").unwrap();
        let sensor = sources.iter().find(|s| s["kind"] == "sensor").unwrap();
        // The archive left to the sensor exactly the files it still holds.
        assert_eq!(
            archive["left_to_sensor"].as_u64(),
            Some((files.len() - gone) as u64),
            "{v}"
        );
        assert_eq!(
            archive["packets"].as_u64().unwrap() + sensor["packets"].as_u64().unwrap(),
            want.len() as u64
        );
        // Both know what they cover: the capture's records, on the sensor and archived.
        for src in [archive, sensor] {
            assert_eq!(src["coverage"]["unknown"].as_u64(), Some(0), "{src}");
            assert!(src["coverage"]["files"].as_u64().unwrap() > 0, "{src}");
        }
    }

    // `ringcap serve` of the archive itself answers as the query does (curl, plain HTTP on
    // loopback).
    let port2 = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen2 = format!("127.0.0.1:{port2}");
    let mut cmd = ringcap_with_credentials(tmp.path());
    cmd.args([
        "serve",
        &format!("s3://{BUCKET}/site"),
        "--listen",
        &listen2,
    ])
    .args(["--endpoint", &s3.endpoint()]);
    let mut archive_serve = common::spawn_announced(cmd, "listening");
    let answer = tmp.path().join("served.pcap");
    let o = Command::new("curl")
        .args([
            "-sS",
            "--fail",
            "--max-time",
            "60",
            "-X",
            "POST",
            "--data",
            query::CONNECTION,
        ])
        .arg(format!("http://{listen2}/query"))
        .args(["-o", answer.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let want = expected(&all, query::CONNECTION, 0, u64::MAX);
    assert!(
        decoded(&answer) == want,
        "serve of the archive differs from tcpdump"
    );
    let _ = archive_serve.child.kill();
    let _ = archive_serve.child.wait();

    // The sensor down: the archive gives every file, the sensor is named, exit 1.
    let _ = serve.child.kill();
    let _ = serve.child.wait();
    let o = fleet_query(&s3, tmp.path(), &fleet, query::CONNECTION, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("s1") && err.contains("down"), "{err}");
    assert_eq!(want.len(), 1500);
    assert!(
        decoded(&out) == want,
        "the archive did not give every file: {err}"
    );

    // A forged index in the archive: the second file's .idx object replaced by the third file's.
    // Its identity check (the capture file's size and last bytes) fails: the file is read whole,
    // the answer is still tcpdump's, and --explain says why.
    let key = |f: &Path| {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        s3.keys("site/")
            .into_iter()
            .find(|k| k.ends_with(&format!("/{name}")))
            .unwrap()
    };
    let (victim, donor) = (key(&all[1]), key(&all[2]));
    let forged = tmp.path().join("forged.idx");
    let o = s3.curl(&[
        &s3.url(&format!("{BUCKET}/{donor}.idx")),
        "-o",
        forged.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let o = s3.curl(&[
        "-T",
        forged.to_str().unwrap(),
        &s3.url(&format!("{BUCKET}/{victim}.idx")),
        "-w",
        "%{http_code}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "200",
        "PUT of the forged index"
    );
    let o = ringcap_with_credentials(tmp.path())
        .arg("query")
        .arg(format!("s3://{BUCKET}/site"))
        .arg(query::CONNECTION)
        .args([
            "-w",
            out.to_str().unwrap(),
            "--json",
            "--explain",
            "--endpoint",
            &s3.endpoint(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        decoded(&out) == want,
        "a forged index changed the answer: {err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let victim_url = format!("s3://{BUCKET}/{victim}");
    let report = v["explain"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == victim_url.as_str())
        .unwrap_or_else(|| panic!("no report of {victim_url}: {v}"));
    let how = report["how"].as_str().unwrap();
    assert!(
        how.starts_with("scan"),
        "the forged index was trusted: {how}"
    );
}
