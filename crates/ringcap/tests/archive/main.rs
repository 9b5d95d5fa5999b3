//! `ringcap archive` against a real S3 API server: s3proxy 2.6.0 (Maven Central, fetched by
//! scripts/s3proxy-jar.sh) with its filesystem back end in a temporary directory, on 127.0.0.1 and a
//! free port. What is in the archive is read back with curl's own SigV4 client (`--aws-sigv4`), a
//! peer independent of ringcap's client, and compared byte for byte (SHA-256) with the local files.
//! Under CI a server that cannot be fetched or started fails the test.
//!
//! This file: the S3 server and the stores the tests archive; `upload.rs`: what `ringcap archive`
//! puts where and how it survives faults; `query.rs`: `ringcap query s3://` against tcpdump;
//! `retention.rs`: archive retention; `datasets.rs`: the archive as one table for DuckDB and Spark.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

// The testbed capture and tcpdump's expectation of the time-machine tests.
#[path = "../common/mod.rs"]
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
    /// The HTTPS port, when started with TLS (`S3::start_tls`).
    tls_port: Option<u16>,
    conf: PathBuf,
    jar: PathBuf,
    log: PathBuf,
    /// The network namespace it runs in (a capture in the testbed reaches it there); None: this one.
    ns: Option<String>,
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
        S3::start_with(dir, "", None, None)
    }

    /// [`S3::start`] in network namespace `ns` (its 127.0.0.1), where curl then runs too.
    fn start_in(dir: &Path, ns: Option<&str>) -> Option<S3> {
        S3::start_with(dir, "", None, ns)
    }

    /// As [`S3::start`], and HTTPS too, with the certificate and key of `keystore` (PKCS#12,
    /// password "ringcap").
    fn start_tls(dir: &Path, keystore: &Path) -> Option<S3> {
        let tls_port = free_port();
        let extra = format!(
            "s3proxy.secure-endpoint=https://127.0.0.1:{tls_port}\n\
             s3proxy.keystore-path={}\ns3proxy.keystore-password=ringcap\n",
            keystore.display()
        );
        S3::start_with(dir, &extra, Some(tls_port), None)
    }

    fn start_with(dir: &Path, extra: &str, tls_port: Option<u16>, ns: Option<&str>) -> Option<S3> {
        let jar = jar()?;
        let port = free_port();
        let data = dir.join("s3data");
        fs::create_dir_all(&data).unwrap();
        let conf = dir.join("s3proxy.conf");
        fs::write(
            &conf,
            format!(
                "s3proxy.endpoint=http://127.0.0.1:{port}\ns3proxy.authorization=aws-v2-or-v4\n\
                 s3proxy.identity={KEY_ID}\ns3proxy.credential={SECRET}\n\
                 jclouds.provider=filesystem\njclouds.filesystem.basedir={}\n{extra}",
                data.display()
            ),
        )
        .unwrap();
        let mut s = S3 {
            child: None,
            port,
            tls_port,
            conf,
            jar,
            log: dir.join("s3proxy.log"),
            ns: ns.map(str::to_string),
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
        let child = self
            .command("java")
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
        while !self.listening() {
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "s3proxy did not listen within 90 s: {}",
                fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `program` in the server's namespace.
    fn command(&self, program: &str) -> Command {
        match &self.ns {
            None => Command::new(program),
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, program]);
                c
            }
        }
    }

    /// Whether the server accepts connections (from inside its namespace).
    /// Whether s3proxy takes connections (on both ports when it has TLS).
    fn listening(&self) -> bool {
        let ports: Vec<u16> = [Some(self.port), self.tls_port]
            .into_iter()
            .flatten()
            .collect();
        let ns = self.ns.clone();
        std::thread::spawn(move || {
            if let Some(ns) = ns {
                testbed::enter_netns(&ns).unwrap();
            }
            ports
                .iter()
                .all(|&p| TcpStream::connect(("127.0.0.1", p)).is_ok())
        })
        .join()
        .unwrap()
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
        self.command("curl")
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
    let mut w = pcap_file(path);
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

/// A new pcap file (µs, Ethernet, snaplen 65535) with its header written.
fn pcap_file(path: &Path) -> std::io::BufWriter<fs::File> {
    let mut w = std::io::BufWriter::new(fs::File::create(path).unwrap());
    w.write_all(&0xa1b2_c3d4u32.to_le_bytes()).unwrap();
    w.write_all(&[2, 0, 4, 0]).unwrap();
    w.write_all(&[0; 8]).unwrap();
    w.write_all(&65535u32.to_le_bytes()).unwrap();
    w.write_all(&1u32.to_le_bytes()).unwrap();
    w
}

/// `ringcap archive STORE --to s3://pcap/site --sensor s1 …` with the test's credentials (and a
/// HOME of its own: no ~/.aws of the machine).
fn archive(s3: &S3, store: &Path, home: &Path, extra: &[&str]) -> Command {
    // `--to` given in `extra` replaces the test's destination.
    let to = match extra.iter().position(|a| *a == "--to") {
        Some(_) => None,
        None => Some("s3://pcap/site"),
    };
    // And `--sensor` the test's sensor.
    let sensor = match extra.iter().position(|a| *a == "--sensor") {
        Some(_) => None,
        None => Some("s1"),
    };
    let mut c = Command::new(ringcap());
    c.arg("archive")
        .arg(store)
        .args(to.map(|t| ["--to", t]).into_iter().flatten())
        .args(sensor.map(|s| ["--sensor", s]).into_iter().flatten())
        .args(["--endpoint", &s3.endpoint(), "--json"])
        .args(extra)
        .stdin(Stdio::null());
    with_test_credentials(&mut c, home);
    c
}

/// `ringcap` with the test server's credentials (see [`with_test_credentials`]).
fn ringcap_with_credentials(home: &Path) -> Command {
    let mut c = Command::new(ringcap());
    with_test_credentials(&mut c, home);
    c
}

/// The test server's credentials in the environment, and a HOME of the test's own (no ~/.aws of
/// the machine, no profile, token or endpoint from the caller's environment).
fn with_test_credentials<'a>(c: &'a mut Command, home: &Path) -> &'a mut Command {
    c.env("HOME", home)
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_ENDPOINT_URL")
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

mod capture;
mod datasets;
mod fleet;
mod names;
mod query;
mod retention;
mod upload;
