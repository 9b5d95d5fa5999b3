//! What `ringcap archive` puts under which key, and how it survives kills, bad credentials and a server that goes away.

use super::*;

#[test]
fn archive_puts_each_file_under_its_key_byte_identical_and_a_second_run_uploads_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    let want = small_store(&store);
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "archive: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(summary(&o)["uploaded"], want.len());
    let keys = s3.keys("site/");
    let expected: BTreeSet<String> = want.iter().map(|w| w.1.clone()).collect();
    assert_eq!(keys, expected, "keys in the bucket");
    for (local, key) in &want {
        assert_eq!(
            s3.sha256(key, tmp.path()).as_deref(),
            Some(sha256_file(local).as_str()),
            "{key} differs from {}",
            local.display()
        );
    }
    // The manifest lists each, verified.
    let m = fs::read_to_string(store.join(".ringcap-archive/manifest.jsonl")).unwrap();
    assert_eq!(m.lines().count(), want.len());
    let again = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    assert!(again.status.success());
    let s = summary(&again);
    assert_eq!(
        (s["uploaded"].as_u64(), s["current"].as_u64()),
        (Some(0), Some(want.len() as u64))
    );
    // A lost manifest: the objects are found already there (checksums equal), nothing is sent.
    fs::remove_file(store.join(".ringcap-archive/manifest.jsonl")).unwrap();
    let third = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    let s = summary(&third);
    assert_eq!(
        (s["uploaded"].as_u64(), s["present"].as_u64()),
        (Some(0), Some(want.len() as u64))
    );
}

/// Waits until the journal of the multipart upload of `name` lists at least `parts` parts.
fn wait_parts(store: &Path, name: &str, parts: usize, within: Duration) {
    let j = store.join(format!(".ringcap-archive/uploads/{name}.json"));
    let t0 = Instant::now();
    loop {
        let n = fs::read(&j)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["parts"].as_array().map(|a| a.len()))
            .unwrap_or(0);
        if n >= parts {
            return;
        }
        assert!(
            t0.elapsed() < within,
            "no {parts} parts of {name} within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn big_store(store: &Path) -> (PathBuf, String) {
    fs::create_dir_all(store).unwrap();
    let name = "cap-20261203T120000-000001.pcap";
    // ~200 MB: 140 000 frames of 1 500 bytes.
    write_pcap(&store.join(name), 140_000, 1500, 1_796_299_200, 3);
    (
        store.join(name),
        format!("site/sensor=s1/date=2026-12-03/hour=12/{name}"),
    )
}

#[test]
fn archive_killed_mid_upload_resumes_and_no_half_object_has_a_final_name() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    let (big, key) = big_store(&store);
    let name = big.file_name().unwrap().to_str().unwrap().to_string();
    let mut child = archive(
        &s3,
        &store,
        tmp.path(),
        &[
            "--once",
            "--part-size",
            "8MiB",
            "--max-upload-rate",
            "25MB/s",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_parts(&store, &name, 3, Duration::from_secs(120));
    // SAFETY: kill(2) on our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    assert_eq!(
        s3.sha256(&key, tmp.path()),
        None,
        "a half upload is visible under its final name"
    );
    assert!(
        !fs::read_to_string(store.join(".ringcap-archive/manifest.jsonl"))
            .unwrap_or_default()
            .contains(&name)
    );
    let o = archive(&s3, &store, tmp.path(), &["--once", "--part-size", "8MiB"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "rerun: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines = json_lines(&o);
    assert!(
        lines
            .iter()
            .any(|v| v["status"] == "resumed" && v["key"] == key.as_str()),
        "{lines:?}"
    );
    assert_eq!(
        s3.sha256(&key, tmp.path()).as_deref(),
        Some(sha256_file(&big).as_str())
    );
    assert!(
        fs::read_to_string(store.join(".ringcap-archive/manifest.jsonl"))
            .unwrap()
            .contains(&name)
    );
}

#[test]
fn wrong_credentials_missing_bucket_and_no_server_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    small_store(&store);
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .env("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("credentials"), "{err}");
    assert!(
        !err.contains("not-the-secret") && !err.contains(SECRET),
        "a secret in the log: {err}"
    );
    let o = archive(
        &s3,
        &store,
        tmp.path(),
        &["--once", "--to", "s3://no-such-bucket/x"],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("no-such-bucket") && err.contains("does not exist"),
        "{err}"
    );
    // No credentials anywhere: a usage error naming where they are looked for.
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("AWS_ACCESS_KEY_ID") && err.contains(".aws/credentials"),
        "{err}"
    );
    // A profile of ~/.aws/credentials works like the environment.
    fs::create_dir_all(tmp.path().join(".aws")).unwrap();
    fs::write(
        tmp.path().join(".aws/credentials"),
        format!("[lab]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"),
    )
    .unwrap();
    let o = archive(&s3, &store, tmp.path(), &["--once", "--profile", "lab"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    s3.kill();
    fs::remove_file(store.join(".ringcap-archive/manifest.jsonl")).unwrap();
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("cannot reach"), "{err}");
}

#[test]
fn object_store_killed_mid_run_is_an_error_and_the_rerun_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(mut s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    let want = small_store(&store);
    let (big, big_key) = big_store(&store);
    let name = big.file_name().unwrap().to_str().unwrap().to_string();
    let child = archive(
        &s3,
        &store,
        tmp.path(),
        &[
            "--once",
            "--part-size",
            "8MiB",
            "--max-upload-rate",
            "25MB/s",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_parts(&store, &name, 2, Duration::from_secs(120));
    s3.kill();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        matches!(o.status.code(), Some(1) | Some(4)),
        "exit {:?}: {err}",
        o.status.code()
    );
    assert!(
        err.contains("cannot reach") || err.contains("run again"),
        "{err}"
    );
    s3.restart();
    let o = archive(&s3, &store, tmp.path(), &["--once", "--part-size", "8MiB"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "rerun: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (local, key) in want.iter().chain([(big.clone(), big_key)].iter()) {
        assert_eq!(
            s3.sha256(key, tmp.path()).as_deref(),
            Some(sha256_file(local).as_str()),
            "{key}"
        );
    }
}

#[test]
fn an_https_endpoint_with_a_private_ca_is_trusted_only_with_ca_cert() {
    use common::auth_harness::{make_certs, openssl};
    let tmp = tempfile::tempdir().unwrap();
    let pki = tmp.path().join("pki");
    fs::create_dir_all(&pki).unwrap();
    make_certs(&pki);
    // The server certificate (IP 127.0.0.1) and key as the PKCS#12 keystore s3proxy's Jetty reads.
    openssl(
        &pki,
        &[
            "pkcs12",
            "-export",
            "-in",
            "collector.pem",
            "-inkey",
            "collector.key",
            "-certfile",
            "ca.pem",
            "-name",
            "s3proxy",
            "-out",
            "ks.p12",
            "-passout",
            "pass:ringcap",
        ],
    );
    let Some(s3) = S3::start_tls(tmp.path(), &pki.join("ks.p12")) else {
        return;
    };
    let store = tmp.path().join("store");
    let files = small_store(&store);
    let https = format!("https://127.0.0.1:{}", s3.tls_port.unwrap());
    let run = |ca: Option<&Path>| {
        let mut c = ringcap_with_credentials(tmp.path());
        c.arg("archive")
            .arg(&store)
            .args([
                "--to",
                "s3://pcap/tls",
                "--sensor",
                "s1",
                "--once",
                "--json",
            ])
            .args(["--endpoint", &https])
            .stdin(Stdio::null());
        if let Some(ca) = ca {
            c.arg("--ca-cert").arg(ca);
        }
        c.output().unwrap()
    };
    // Without the CA the server is a stranger: nothing is sent, and the error says why.
    let o = run(None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a server no CA vouches for was trusted"
    );
    assert!(
        err.to_lowercase().contains("certificate"),
        "the error does not say it is the certificate: {err}"
    );
    assert!(
        s3.keys("tls/").is_empty(),
        "objects sent to an untrusted server"
    );
    // With it, every file arrives whole over TLS.
    let o = run(Some(&pki.join("ca.pem")));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (local, rel) in &files {
        let key = rel.replacen("site/", "tls/", 1);
        assert_eq!(
            s3.sha256(&key, tmp.path()),
            Some(sha256_file(local)),
            "{key} over https"
        );
    }
}

#[test]
fn watch_ends_soon_after_sigint_even_in_the_middle_of_a_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    let files = small_store(&store);
    // 12 objects of about 0.8 MB at 400 kB/s: a pass of some 25 s.
    let mut child = archive(
        &s3,
        &store,
        tmp.path(),
        &["--watch", "--max-upload-rate", "400kB/s"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let signalled = Instant::now();
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if signalled.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            panic!("archive --watch still running 15 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = signalled.elapsed();
    assert!(status.success(), "{status:?}");
    // The object being sent when the signal came is finished (at most ~0.8 MB at 400 kB/s).
    assert!(
        took < Duration::from_secs(8),
        "exited {took:?} after SIGINT"
    );
    let archived = s3.keys("site/").len();
    assert!(
        archived < files.len(),
        "the whole pass ran: {archived} objects"
    );
    // What it left, the next run sends; everything is then there, whole.
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (local, key) in &files {
        assert_eq!(
            s3.sha256(key, tmp.path()),
            Some(sha256_file(local)),
            "{key}"
        );
    }
}

/// Parts of `name`'s multipart upload its journal lists as sent (0 without a journal).
fn journaled_parts(store: &Path, name: &str) -> usize {
    fs::read(store.join(format!(".ringcap-archive/uploads/{name}.json")))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| {
            v["parts"]
                .as_array()
                .map(|a| a.iter().filter(|p| !p.is_null()).count())
        })
        .unwrap_or(0)
}

#[test]
fn parallel_transfers_killed_mid_upload_resume_and_every_object_is_whole_and_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    let mut want = small_store(&store);
    // Three captures of ~30 MB (4 parts of 8 MiB each), indexed: .idx and .flows.parquet too.
    let mut big = Vec::new();
    for i in 0..3u32 {
        let name = format!("cap-20261203T1{i}0000-00001{i}.pcap");
        write_pcap(
            &store.join(&name),
            20_000,
            1500,
            1_796_299_200 + i * 600,
            40 + i as u64,
        );
        big.push(name);
    }
    let o = Command::new(ringcap())
        .args(["index", "-q"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (i, name) in big.iter().enumerate() {
        for suffix in ["", ".idx", ".flows.parquet"] {
            want.push((
                store.join(format!("{name}{suffix}")),
                format!("site/sensor=s1/date=2026-12-03/hour=1{i}/{name}{suffix}"),
            ));
        }
    }
    let first_out = tmp.path().join("first.jsonl");
    let args = ["--once", "--transfers", "3", "--part-size", "8MiB"];
    let mut child = archive(&s3, &store, tmp.path(), &args)
        .args(["--max-upload-rate", "20MB/s"])
        .stdout(fs::File::create(&first_out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed while at least two of the large files are part-way: uploads in parallel.
    let t0 = Instant::now();
    loop {
        let part_way = big
            .iter()
            .filter(|n| journaled_parts(&store, n) >= 1)
            .count();
        if part_way >= 2 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "never two multipart uploads at once"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    // No half object under a final name; the manifest lists only whole objects.
    let manifest =
        || fs::read_to_string(store.join(".ringcap-archive/manifest.jsonl")).unwrap_or_default();
    let listed = manifest();
    for (local, key) in &want {
        let name = local.file_name().unwrap().to_str().unwrap();
        match s3.sha256(key, tmp.path()) {
            None => assert!(
                !listed.contains(&format!("\"{name}\"")),
                "{key} listed, not there"
            ),
            Some(got) => assert_eq!(got, sha256_file(local), "{key}: half an object"),
        }
    }
    let o = archive(&s3, &store, tmp.path(), &args).output().unwrap();
    assert!(
        o.status.success(),
        "rerun: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let second = json_lines(&o);
    assert!(
        second.iter().filter(|v| v["status"] == "resumed").count() >= 2,
        "{second:?}"
    );
    for (local, key) in &want {
        assert_eq!(
            s3.sha256(key, tmp.path()).as_deref(),
            Some(sha256_file(local).as_str()),
            "{key}"
        );
    }
    // Each verified by its ETag (s3proxy's multipart ETag is S3's): nothing was read back.
    let entries: Vec<serde_json::Value> = manifest()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), want.len());
    assert!(
        entries.iter().all(|e| e["verified"] == "etag-md5"),
        "{entries:?}"
    );
    // An index went only after its capture, in each run.
    let first: Vec<serde_json::Value> = fs::read_to_string(&first_out)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for (r, run) in [&first, &second].into_iter().enumerate() {
        let keys: Vec<&str> = run.iter().filter_map(|v| v["key"].as_str()).collect();
        for (at, k) in keys.iter().enumerate() {
            if let Some(capture) = k.strip_suffix(".idx") {
                assert!(
                    keys[..at].contains(&capture)
                        || (r == 1 && first.iter().any(|v| v["key"] == capture)),
                    "{k} before its capture: {keys:?}"
                );
            }
        }
    }
}
