//! `ringcap archive` against a real S3 API server: s3proxy 2.6.0 (Maven Central, fetched by
//! scripts/s3proxy-jar.sh) with its filesystem back end in a temporary directory, on 127.0.0.1 and a
//! free port. What is in the archive is read back with curl's own SigV4 client (`--aws-sigv4`), a
//! peer independent of ringcap's client, and compared byte for byte (SHA-256) with the local files.
//! Under CI a server that cannot be fetched or started fails the test.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

// The testbed capture and tcpdump's expectation of the time-machine tests.
mod common;

const KEY_ID: &str = "ringcap-test-key";
const SECRET: &str = "ringcap-test-secret-0123456789";
const BUCKET: &str = "pcap";

fn ringcap() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ringcap"))
}

/// An s3proxy process serving a filesystem directory; killed on drop.
struct S3 {
    child: Option<Child>,
    port: u16,
    conf: PathBuf,
    jar: PathBuf,
    log: PathBuf,
}

fn jar() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/s3proxy-jar.sh");
    let o = Command::new(&script).stderr(Stdio::inherit()).output();
    match o {
        Ok(o) if o.status.success() => Some(PathBuf::from(
            String::from_utf8_lossy(&o.stdout).trim().to_string(),
        )),
        r => {
            testbed::skip(&format!(
                "s3proxy could not be fetched with {} ({r:?}): `make deps` installs Java and Maven",
                script.display()
            ));
            None
        }
    }
}

impl S3 {
    /// Starts s3proxy over `data` and creates the test bucket; None (outside CI) without Java/Maven.
    fn start(dir: &Path) -> Option<S3> {
        let jar = jar()?;
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let data = dir.join("s3data");
        fs::create_dir_all(&data).unwrap();
        let conf = dir.join("s3proxy.conf");
        fs::write(
            &conf,
            format!(
                "s3proxy.endpoint=http://127.0.0.1:{port}\ns3proxy.authorization=aws-v2-or-v4\n\
                 s3proxy.identity={KEY_ID}\ns3proxy.credential={SECRET}\n\
                 jclouds.provider=filesystem\njclouds.filesystem.basedir={}\n",
                data.display()
            ),
        )
        .unwrap();
        let mut s = S3 {
            child: None,
            port,
            conf,
            jar,
            log: dir.join("s3proxy.log"),
        };
        s.restart();
        let put = s.curl(&[
            "-X",
            "PUT",
            &s.url(BUCKET),
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ]);
        assert_eq!(String::from_utf8_lossy(&put.stdout), "200", "create bucket");
        Some(s)
    }

    fn restart(&mut self) {
        let log = fs::File::create(&self.log).unwrap();
        let child = Command::new("java")
            .args(["-Xmx512m", "-jar"])
            .arg(&self.jar)
            .arg("--properties")
            .arg(&self.conf)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("java");
        self.child = Some(child);
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "s3proxy did not listen within 90 s: {}",
                fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.endpoint())
    }

    /// curl as an S3 client (SigV4; s3proxy wants the payload hash header).
    fn curl(&self, args: &[&str]) -> Output {
        Command::new("curl")
            .args(["-sS", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user"])
            .arg(format!("{KEY_ID}:{SECRET}"))
            .args(["-H", "x-amz-content-sha256:UNSIGNED-PAYLOAD"])
            .args(args)
            .output()
            .expect("curl")
    }

    /// Object keys under `prefix` (ListObjectsV2; the filesystem back end also lists directories
    /// as keys ending in '/': left out).
    fn keys(&self, prefix: &str) -> BTreeSet<String> {
        let enc = prefix.replace('/', "%2F").replace('=', "%3D");
        let o = self.curl(&[&format!("{}?list-type=2&prefix={enc}", self.url(BUCKET))]);
        let xml = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(xml.contains("<ListBucketResult"), "listing: {xml}");
        assert!(xml.contains("<IsTruncated>false"), "listing truncated");
        xml.split("<Key>")
            .skip(1)
            .filter_map(|s| s.split_once("</Key>").map(|(k, _)| k.to_string()))
            .filter(|k| !k.ends_with('/'))
            .collect()
    }

    /// SHA-256 of the object at `key` as curl downloads it; None if it is not there.
    fn sha256(&self, key: &str, tmp: &Path) -> Option<String> {
        let out = tmp.join("readback");
        let o = self.curl(&[
            &self.url(&format!("{BUCKET}/{key}")),
            "-o",
            out.to_str().unwrap(),
            "-w",
            "%{http_code}",
        ]);
        (String::from_utf8_lossy(&o.stdout) == "200").then(|| sha256_file(&out))
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        self.kill();
    }
}

fn sha256_file(p: &Path) -> String {
    let mut h = Sha256::new();
    let mut f = fs::File::open(p).unwrap();
    std::io::copy(&mut f, &mut h).unwrap();
    format!("{:x}", h.finalize())
}

/// A pcap file of `n` UDP frames of `len` bytes, the first at `t0` s (payload from a seed, so
/// files differ and do not compress to nothing).
fn write_pcap(path: &Path, n: usize, len: usize, t0: u32, seed: u64) {
    let mut w = std::io::BufWriter::new(fs::File::create(path).unwrap());
    w.write_all(&0xa1b2_c3d4u32.to_le_bytes()).unwrap();
    w.write_all(&[2, 0, 4, 0]).unwrap();
    w.write_all(&[0; 8]).unwrap();
    w.write_all(&65535u32.to_le_bytes()).unwrap();
    w.write_all(&1u32.to_le_bytes()).unwrap();
    let mut x = seed | 1;
    let mut f = vec![0u8; len];
    for i in 0..n {
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2 + (i % 3) as u8]);
        f[34..36].copy_from_slice(&4000u16.to_be_bytes());
        f[36..38].copy_from_slice(&5000u16.to_be_bytes());
        f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
        for b in f[42..].chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = b.len();
            b.copy_from_slice(&x.to_le_bytes()[..k]);
        }
        let ts = t0 + (i / 1000) as u32;
        w.write_all(&ts.to_le_bytes()).unwrap();
        w.write_all(&((i % 1000) as u32 * 1000).to_le_bytes())
            .unwrap();
        w.write_all(&(len as u32).to_le_bytes()).unwrap();
        w.write_all(&(len as u32).to_le_bytes()).unwrap();
        w.write_all(&f).unwrap();
    }
    w.flush().unwrap();
}

/// `ringcap archive STORE --to s3://pcap/site --sensor s1 …` with the test's credentials (and a
/// HOME of its own: no ~/.aws of the machine).
fn archive(s3: &S3, store: &Path, home: &Path, extra: &[&str]) -> Command {
    // `--to` given in `extra` replaces the test's destination.
    let to = match extra.iter().position(|a| *a == "--to") {
        Some(_) => None,
        None => Some("s3://pcap/site"),
    };
    let mut c = Command::new(ringcap());
    c.arg("archive")
        .arg(store)
        .args(to.map(|t| ["--to", t]).into_iter().flatten())
        .args(["--sensor", "s1", "--endpoint", &s3.endpoint(), "--json"])
        .args(extra)
        .env("HOME", home)
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_ENDPOINT_URL")
        .stdin(Stdio::null());
    c
}

fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn summary(o: &Output) -> serde_json::Value {
    json_lines(o)
        .into_iter()
        .find(|v| v["summary"] == true)
        .unwrap_or_else(|| panic!("no summary: {}", String::from_utf8_lossy(&o.stderr)))
}

/// A store of three small ringcap-named capture files (indexed by `ringcap index`: .idx and
/// .flows.parquet) and one foreign-named file whose key date comes from its first packet.
fn small_store(store: &Path) -> Vec<(PathBuf, String)> {
    fs::create_dir_all(store).unwrap();
    let names = [
        (
            "cap-20261201T235930-000001.pcap",
            1_796_169_570,
            "date=2026-12-01/hour=23",
        ),
        (
            "cap-20261202T000010-000002.pcap",
            1_796_169_610,
            "date=2026-12-02/hour=00",
        ),
        (
            "cap-20261202T010000-000003.pcap",
            1_796_173_200,
            "date=2026-12-02/hour=01",
        ),
        // 2026-12-02 02:13:20 UTC.
        (
            "tcpdump-trace.pcap",
            1_796_177_600,
            "date=2026-12-02/hour=02",
        ),
    ];
    for (i, (n, t0, _)) in names.iter().enumerate() {
        write_pcap(&store.join(n), 2000, 400, *t0, i as u64 + 7);
    }
    let o = Command::new(ringcap())
        .arg("index")
        .arg(store)
        .arg("-q")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "index: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A capture still being written: never archived.
    fs::write(
        store.join(".cap-20261202T020000-000004.pcap.partial"),
        b"half",
    )
    .unwrap();
    let mut want = Vec::new();
    for (n, _, part) in names {
        for suffix in ["", ".idx", ".flows.parquet"] {
            let local = store.join(format!("{n}{suffix}"));
            assert!(local.exists(), "{} missing", local.display());
            want.push((local, format!("site/sensor=s1/{part}/{n}{suffix}")));
        }
    }
    want
}

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

/// `ringcap query s3://pcap/PREFIX ARGS` against the test's s3proxy.
fn remote_query(s3: &S3, home: &Path, prefix: &str, expr: &str, args: &[&str]) -> Output {
    let mut c = Command::new(ringcap());
    c.arg("query").arg(format!("s3://{BUCKET}/{prefix}"));
    if !expr.is_empty() {
        c.arg(expr);
    }
    c.args(args)
        .args(["--endpoint", &s3.endpoint()])
        .env("HOME", home)
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_ENDPOINT_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A time as `--after`/`--before` take it (Unix seconds, to the nanosecond).
fn at(ns: u64) -> String {
    format!("@{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The JSON summary a `--json` query printed on stdout.
fn query_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "query --json: {e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Checks `ringcap query s3://pcap/PREFIX` against tcpdump over the local `files` for each
/// (expression, window); returns the packets compared.
fn compare_with_tcpdump(
    s3: &S3,
    tmp: &Path,
    prefix: &str,
    files: &[PathBuf],
    cases: &[(String, Option<(u64, u64)>)],
) -> usize {
    use common::stores::{decode, expected, sh};
    let out = tmp.join("remote.pcap");
    let mut total = 0;
    for (expr, window) in cases {
        let mut args = vec!["-w".to_string(), out.display().to_string(), "-q".into()];
        if let Some((a, b)) = window {
            args.extend(["--after".into(), at(*a), "--before".into(), at(*b)]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = remote_query(s3, tmp, prefix, expr, &args);
        assert!(
            o.status.success(),
            "query s3 `{expr}` {window:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let got = decode(&sh(&format!(
            "tcpdump -r '{}' -nn --nano -tt -xx 2>/dev/null",
            out.display()
        )));
        let (a, b) = window.unwrap_or((0, u64::MAX));
        let want = expected(files, expr, a, b);
        assert_eq!(
            got.len(),
            want.len(),
            "`{expr}` {window:?}: packets from the archive vs tcpdump -r"
        );
        assert!(
            got == want,
            "`{expr}` {window:?}: the archive's packets differ from tcpdump's"
        );
        total += got.len();
    }
    total
}

/// The one connection of [`capture_with_a_connection`], among the mix's many hosts and ports.
const CONNECTION: &str =
    "udp and src host 10.0.0.99 and src port 4000 and dst host 10.1.0.99 and dst port 5000";

/// A zstd store captured with rotation (1 MB files) on the testbed: the time-machine tests' mix
/// (many hosts and ports, some VLAN-tagged) and, at the same time, 1500 packets of one connection
/// spread among them.
fn capture_with_a_connection(tb: &testbed::Testbed, dir: &Path) {
    use common::stores::send_mix;
    let base = dir.join("cap");
    let args = [
        "capture",
        "-i",
        &tb.rx_if,
        "-w",
        base.to_str().unwrap(),
        "-C",
        "1MB",
        "--compress",
        "zstd",
    ];
    let cap = common::spawn_capture(tb, &args);
    let mut flow = tb
        .command(testbed::Side::Tx, ringcap().to_str().unwrap())
        .args(["gen", "-i", &tb.tx_if, "-n", "1500", "--pps", "10000", "-q"])
        .args(["--src-ip", "10.0.0.99", "--dst-ip", "10.1.0.99"])
        .args([
            "--src-port",
            "4000",
            "--dst-port",
            "5000",
            "--payload",
            "half",
        ])
        .spawn()
        .unwrap();
    send_mix(tb, 6000, 1, None);
    send_mix(tb, 2000, 2, Some(100));
    assert!(
        common::finish(&mut flow).status.success(),
        "gen of the connection"
    );
    std::thread::sleep(Duration::from_millis(500));
    let out = common::stop(cap, libc::SIGINT);
    assert!(
        out.status.success(),
        "capture: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ringcap query s3://…` over the archive of a store a ringcap capture wrote (zstd, rotated,
/// indexed) gives what `tcpdump -r` gives over the same local files, packet for packet and byte
/// for byte (tcpdump -xx of both), for one host, one connection, a port, `ip`, a time window and
/// the empty expression; so does the archive of a file tcpdump wrote (indexed by `ringcap
/// index`). A one-connection query fetches at most twice the bytes the same query reads locally
/// (the frames it names and the index bytes it reads, from the local `--explain --json`).
#[test]
fn query_of_the_archive_equals_tcpdump_and_fetches_what_the_index_names() {
    use common::stores::{expected, need, sh, store_files};
    need("tcpdump");
    need("zstd");
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    fs::create_dir_all(&store).unwrap();
    capture_with_a_connection(&common::testbed(), &store);
    // The live indexer runs last in line: what it left is indexed here.
    let o = Command::new(ringcap())
        .args(["index", "-q"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files = store_files(&store);
    assert!(files.len() >= 3, "{files:?}");
    let o = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let all = expected(&files, "", 0, u64::MAX);
    assert!(all.len() > 1000, "{} packets captured", all.len());
    let conn = CONNECTION.to_string();
    assert_eq!(expected(&files, &conn, 0, u64::MAX).len(), 1500);
    let (t1, t2) = (all[all.len() / 3].0, all[2 * all.len() / 3].0);
    let cases: Vec<(String, Option<(u64, u64)>)> = vec![
        (String::new(), None),
        ("host 10.0.0.7".into(), None),
        (conn.clone(), None),
        ("udp port 53".into(), None),
        ("ip".into(), None),
        ("udp".into(), Some((t1, t2))),
        (String::new(), Some((t1, t2))),
    ];
    let n = compare_with_tcpdump(&s3, tmp.path(), "site", &files, &cases);
    assert!(n > all.len(), "{n} packets compared");

    // The bytes of one connection: local reads (frames named by the index, index chunks) against
    // what the archive query fetched.
    let local = Command::new(ringcap())
        .arg("query")
        .arg(&store)
        .arg(&conn)
        .args(["-w", "/dev/null", "--explain", "--json"])
        .output()
        .unwrap();
    let local = query_json(&local);
    let reports = local["explain"].as_array().expect("explain");
    let frames: u64 = reports
        .iter()
        .map(|r| r["bytes_read"].as_u64().unwrap())
        .sum();
    let index: u64 = reports
        .iter()
        .map(|r| r["index_bytes_read"].as_u64().unwrap())
        .sum();
    assert!(
        reports.iter().all(|r| r["how"] == "index"),
        "local: {reports:?}"
    );
    let remote = remote_query(
        &s3,
        tmp.path(),
        "site",
        &conn,
        &["-w", "/dev/null", "--explain", "--json"],
    );
    assert!(
        remote.status.success(),
        "{}",
        String::from_utf8_lossy(&remote.stderr)
    );
    let remote = query_json(&remote);
    let fetched = remote["archive"]["bytes_fetched"].as_u64().unwrap();
    let requests = remote["archive"]["requests"].as_u64().unwrap();
    let rreports = remote["explain"].as_array().expect("explain");
    assert!(
        rreports.iter().all(|r| r["how"] == "index"),
        "remote: {rreports:?}"
    );
    assert_eq!(remote["packets"], local["packets"]);
    let stored: u64 = files.iter().map(|f| fs::metadata(f).unwrap().len()).sum();
    eprintln!(
        "one connection ({conn}): {} packets, {} files of {stored} B; local reads {frames} B of \
         frames + {index} B of index; the archive query fetched {fetched} B in {requests} requests",
        local["packets"],
        reports.len()
    );
    assert!(
        fetched <= 2 * (frames + index),
        "fetched {fetched} B for {frames} B of frames and {index} B of index"
    );

    // Windows outside the capture: files (and partitions) are left out by their names before any
    // index is opened; only the series' last file is opened for a window after it (it may run
    // on), and gives nothing.
    let hour = 3_600_000_000_000;
    let (first, last) = (all[0].0, all[all.len() - 1].0);
    for (flag, t, opened) in [("--before", first - hour, 0), ("--after", last + hour, 1)] {
        let o = remote_query(
            &s3,
            tmp.path(),
            "site",
            "",
            &[flag, &at(t), "-w", "/dev/null", "--explain", "--json"],
        );
        assert!(
            o.status.success(),
            "{flag}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v = query_json(&o);
        let x = &v["archive"];
        assert_eq!(v["packets"], 0, "{flag}");
        let listed = x["files_listed"].as_u64().unwrap();
        let pruned = x["files_pruned"].as_u64().unwrap();
        assert_eq!(listed - pruned, opened, "{flag}: {x}");
        if opened == 0 {
            assert_eq!(x["requests"], 0, "{flag}: {x}");
        }
    }

    // A file tcpdump wrote, indexed by `ringcap index`, archived under another sensor.
    let other = tmp.path().join("other");
    fs::create_dir_all(&other).unwrap();
    let trace = other.join("trace.pcap");
    let written = |from: &Path, to: &Path| {
        sh(&format!(
            "zstd -dc '{}' | tcpdump -r - -w '{}' 2>/dev/null",
            from.display(),
            to.display()
        ))
    };
    written(&files[0], &trace);
    let o = Command::new(ringcap())
        .args(["index", "-q"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // And one without an index: read whole.
    let unindexed = other.join("trace2.pcap");
    written(&files[1], &unindexed);
    let o = archive(
        &s3,
        &other,
        tmp.path(),
        &["--once", "--to", "s3://pcap/tcpdump"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cases: Vec<(String, Option<(u64, u64)>)> = vec![
        (String::new(), None),
        ("host 10.0.0.7".into(), None),
        (conn.clone(), None),
    ];
    compare_with_tcpdump(&s3, tmp.path(), "tcpdump", &[trace, unindexed], &cases);
    let o = remote_query(
        &s3,
        tmp.path(),
        "tcpdump",
        &conn,
        &["-w", "/dev/null", "--explain", "--json"],
    );
    let hows: Vec<String> = query_json(&o)["explain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["how"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hows, ["index", "scan (no index)"]);
}

#[test]
fn archive_retention_deletes_the_oldest_captures_with_their_companions_by_age_and_by_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    let store = tmp.path().join("store");
    let want = small_store(&store);
    // Objects put by another client: an old capture of this sensor with its index, a file outside
    // the layout, and another sensor's old capture.
    let body = tmp.path().join("body");
    fs::write(&body, vec![7u8; 1000]).unwrap();
    let old = [
        "site/sensor=s1/date=2020-01-01/hour=00/old-20200101T000000-000001.pcap",
        "site/sensor=s1/date=2020-01-01/hour=00/old-20200101T000000-000001.pcap.idx",
    ];
    let others = [
        "site/sensor=s1/notes.txt",
        "site/sensor=s2/date=2020-01-01/hour=00/x.pcap",
    ];
    for k in old.iter().chain(&others) {
        let o = s3.curl(&[
            "-T",
            body.to_str().unwrap(),
            &s3.url(&format!("{BUCKET}/{k}")),
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ]);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "200", "put {k}");
    }
    let all_keys: BTreeSet<String> = want
        .iter()
        .map(|w| w.1.clone())
        .chain(old.iter().chain(&others).map(|k| k.to_string()))
        .collect();

    // By age: the 2020 capture and its index go; this sensor's files of December 2026 (the
    // store's time stamps are ahead of the clock) and everything outside the layout stay.
    let o = archive(
        &s3,
        &store,
        tmp.path(),
        &["--once", "--archive-max-age", "30d"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json_lines(&o)
        .into_iter()
        .find(|v| v["retention"] == true)
        .expect("a retention line");
    assert_eq!(
        (
            r["deleted_captures"].as_u64(),
            r["deleted_objects"].as_u64()
        ),
        (Some(1), Some(2))
    );
    let mut expected = all_keys.clone();
    for k in old {
        expected.remove(k);
    }
    assert_eq!(s3.keys("site/"), expected);

    // By bytes: a budget one byte short of the sensor's layout objects takes the oldest capture
    // (with its index and flow table), nothing else.
    let sensor_bytes: u64 = want.iter().map(|w| fs::metadata(&w.0).unwrap().len()).sum();
    let budget = (sensor_bytes - 1).to_string();
    let o = archive(
        &s3,
        &store,
        tmp.path(),
        &["--once", "--archive-budget", &budget],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first: Vec<&String> = want.iter().take(3).map(|w| &w.1).collect();
    assert!(first[0].ends_with("cap-20261201T235930-000001.pcap"));
    for k in &first {
        expected.remove(*k);
    }
    assert_eq!(s3.keys("site/"), expected);
    // Not uploaded again: the manifest still names them.
    let again = archive(&s3, &store, tmp.path(), &["--once"])
        .output()
        .unwrap();
    assert_eq!(summary(&again)["uploaded"], 0);
    assert_eq!(s3.keys("site/"), expected);
}
