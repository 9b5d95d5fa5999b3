//! Header records through a real Kafka broker: `capture --records kafka://...` on the testbed, `collect
//! --listen kafka://...` writing Parquet, counts compared with the packets sent (the kernel's Rx counter) and
//! with DuckDB's count of the Parquet rows. The broker is Apache Kafka in KRaft mode from its Maven Central
//! jars (scripts/kafka-jars.sh), run with the machine's Java inside the Rx namespace; under CI a broker that
//! cannot start fails the test.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use testbed::{Side, Testbed};

const KEY: &[u8] = b"ringcap-kafka-e2e-test-key-0123\n";
/// Any 16 bytes in base64url: the broker only checks that the storage dir and the config agree.
const CLUSTER_ID: &str = "cmluZ2NhcC1rYWZrYS10ZQ";

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The jar dir, or None (outside CI) when Java or Maven are missing here.
fn kafka_jars() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka-jars.sh");
    let ok = have("java") && have("mvn");
    if !ok {
        assert!(!ci(), "java or mvn missing: `make deps` installs them");
        eprintln!("skipped: java or mvn missing (make deps)");
        return None;
    }
    let out = Command::new(script).output().expect("run kafka-jars.sh");
    assert!(
        out.status.success(),
        "kafka-jars.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// A free port on the Rx namespace's loopback.
fn free_port(tb: &Testbed) -> u16 {
    let ns = tb.ns(Side::Rx).to_string();
    std::thread::spawn(move || {
        testbed::enter_netns(&ns).unwrap();
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    })
    .join()
    .unwrap()
}

/// One KRaft broker+controller in a temp dir, inside the Rx namespace; killed on drop.
struct Broker {
    jars: PathBuf,
    dir: PathBuf,
    ns: String,
    port: u16,
    child: Option<Child>,
}

impl Broker {
    fn start(tb: &Testbed, jars: PathBuf, tag: &str) -> Broker {
        let dir = temp_dir(tag);
        let port = free_port(tb);
        let cport = free_port(tb);
        let props = format!(
            "process.roles=broker,controller\nnode.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{cport}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             log.dirs={}\n\
             offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\nauto.create.topics.enable=false\n",
            dir.join("data").display()
        );
        std::fs::write(dir.join("server.properties"), props).unwrap();
        let out = Command::new("java")
            .arg("-cp")
            .arg(format!("{}/*", jars.display()))
            .args(["kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c"])
            .arg(dir.join("server.properties"))
            .output()
            .expect("java");
        assert!(
            out.status.success(),
            "formatting the KRaft storage failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut b = Broker {
            jars,
            dir,
            ns: tb.ns(Side::Rx).to_string(),
            port,
            child: None,
        };
        b.run();
        b
    }

    /// Starts the JVM and waits (60 s at most) until the broker answers metadata requests.
    fn run(&mut self) {
        let log = std::fs::File::create(self.dir.join("broker.log")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns, "java", "-Xmx512m", "-cp"])
            .arg(format!("{}/*", self.jars.display()))
            .arg("kafka.Kafka")
            .arg(self.dir.join("server.properties"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn java");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "the Kafka broker did not start in 60 s: {}",
                std::fs::read_to_string(self.dir.join("broker.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn url(&self, topic: &str) -> String {
        format!("kafka://127.0.0.1:{}/{topic}", self.port)
    }

    /// Runs `f` on a tokio runtime inside the namespace.
    fn in_ns<T: Send + 'static>(
        &self,
        f: impl FnOnce(u16) -> std::pin::Pin<Box<dyn std::future::Future<Output = T>>> + Send + 'static,
    ) -> T {
        let (ns, port) = (self.ns.clone(), self.port);
        std::thread::spawn(move || {
            testbed::enter_netns(&ns).unwrap();
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(f(port))
        })
        .join()
        .unwrap()
    }

    fn answers(&self) -> bool {
        let ns = self.ns.clone();
        let port = self.port;
        let open = std::thread::spawn(move || {
            testbed::enter_netns(&ns).unwrap();
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .join()
        .unwrap();
        open && self.in_ns(|port| {
            Box::pin(async move {
                let c = tokio::time::timeout(
                    Duration::from_secs(3),
                    rskafka::client::ClientBuilder::new(vec![format!("127.0.0.1:{port}")]).build(),
                )
                .await;
                match c {
                    Ok(Ok(c)) => tokio::time::timeout(Duration::from_secs(3), c.list_topics())
                        .await
                        .is_ok_and(|r| r.is_ok()),
                    _ => false,
                }
            })
        })
    }

    fn create_topic(&self, topic: &str, partitions: i32) {
        let topic = topic.to_string();
        self.in_ns(move |port| {
            Box::pin(async move {
                let c = rskafka::client::ClientBuilder::new(vec![format!("127.0.0.1:{port}")])
                    .build()
                    .await
                    .unwrap();
                c.controller_client()
                    .unwrap()
                    .create_topic(topic, partitions, 1, 10_000)
                    .await
                    .unwrap();
            })
        });
    }

    /// SIGKILL: a broker that dies, not one that shuts down cleanly.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // `ip netns exec` execs java: the child is the JVM.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn key_file(dir: &Path, key: &[u8]) -> String {
    let p = dir.join("key");
    std::fs::write(&p, key).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    p.display().to_string()
}

/// Frames of 64 flows (ports vary), so every partition gets some.
fn frames(first: u32, n: u32) -> Vec<Vec<u8>> {
    (first..first + n)
        .map(|i| {
            frame(
                i,
                1000 + (i % 64) as u16,
                2000,
                60 + (i as usize * 37) % 900,
            )
        })
        .collect()
}

/// `ringcap collect --listen kafka://...` in the Rx namespace.
fn start_collect(tb: &Testbed, url: &str, out: &Path, key: &str) -> Announced {
    let mut cmd = ringcap_rx(
        tb,
        &[
            "collect",
            "--listen",
            url,
            "-o",
            out.to_str().unwrap(),
            "--key",
            key,
            "--json",
            "--stats-interval",
            "0",
        ],
    );
    cmd.stdin(Stdio::null());
    spawn_announced(cmd, "listening on")
}

fn stop_collect(c: Announced) -> serde_json::Value {
    let out = stop(c.child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    let err = c.stderr.lock().unwrap().clone();
    assert!(out.status.success(), "collect failed: {err}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn json_summary(stderr: &str) -> serde_json::Value {
    let line = stderr
        .lines()
        .find(|l| l.contains("\"type\":\"summary\""))
        .unwrap_or_else(|| panic!("no JSON summary in: {stderr}"));
    serde_json::from_str(line).unwrap()
}

/// Waits until the collector's stored count (its live stats on stderr are off: poll the spool via a stop)
/// is given time: the consumer fetches with 100 ms waits, so a few seconds cover everything.
fn settle() {
    std::thread::sleep(Duration::from_secs(3));
}

fn capture(tb: &Testbed, url: &str, key: &str) -> Child {
    spawn_capture(
        tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--records",
            url,
            "--key",
            key,
            "--probe-id",
            "7",
            "--json",
            "-q",
        ],
    )
}

#[test]
fn records_into_kafka_and_back_to_parquet_with_exact_counts() {
    let Some(jars) = kafka_jars() else { return };
    let tb = testbed();
    let dir = temp_dir("kafka-e2e");
    let key = key_file(&dir, KEY);
    let bad_dir = dir.join("bad");
    std::fs::create_dir_all(&bad_dir).unwrap();
    let bad_key = key_file(&bad_dir, b"another-key-not-the-probes-one!\n");
    let broker = Broker::start(&tb, jars, "kafka-broker");
    broker.create_topic("records", 3);
    let url = broker.url("records");

    let child = capture(&tb, &url, &key);
    let n = 20_000u32;
    let before = tb.rx_packets();
    send(&tb, &frames(0, n));
    std::thread::sleep(Duration::from_millis(500));
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(tb.rx_packets() - before, n as u64, "offered");
    let s = json_summary(&err);
    assert_eq!(s["captured"], n, "{err}");
    let r = &s["records"];
    assert_eq!(r["records"], n, "{r}");
    assert_eq!(r["collectors"][0]["acked"], n, "{r}");
    assert_eq!(r["collectors"][0]["dropped"], 0, "{r}");

    // Consumers after the fact: Kafka kept the batches. One with the key, one with a wrong key.
    let good = dir.join("good");
    let (c, cb) = (
        start_collect(&tb, &url, &good, &key),
        start_collect(&tb, &url, &bad_dir.join("out"), &bad_key),
    );
    settle();
    let (v, vb) = (stop_collect(c), stop_collect(cb));
    assert_eq!(v["records_stored"], n, "{v}");
    assert_eq!(duckdb_rows(&good), n as u64);
    // One stream per partition, each complete.
    let streams = v["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 3, "{v}");
    assert!(
        streams
            .iter()
            .all(|s| s["seq_loss"] == 0 && s["records"].as_u64() > Some(0)),
        "{v}"
    );
    assert_eq!(v["rejected_total"], 0, "{v}");
    // The wrong key stores nothing and counts every batch as refused.
    assert_eq!(vb["records_stored"], 0, "{vb}");
    assert_eq!(vb["rejected"]["bad_tag"], v["batches"], "{vb}");

    // A restarted consumer resumes after the saved offsets: nothing stored twice.
    let c = start_collect(&tb, &url, &good, &key);
    settle();
    let v2 = stop_collect(c);
    assert_eq!(v2["records_stored"], 0, "{v2}");
    assert_eq!(duckdb_rows(&good), n as u64);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn broker_killed_mid_run_records_are_resent_or_counted_never_silently_lost() {
    let Some(jars) = kafka_jars() else { return };
    let tb = testbed();
    let dir = temp_dir("kafka-kill");
    let key = key_file(&dir, KEY);
    let mut broker = Broker::start(&tb, jars, "kafka-broker-kill");
    broker.create_topic("rec", 2);
    let url = broker.url("rec");
    let child = capture(&tb, &url, &key);
    let before = tb.rx_packets();
    let (n1, n2, n3) = (5_000u32, 5_000u32, 5_000u32);
    send(&tb, &frames(0, n1));
    std::thread::sleep(Duration::from_millis(500));
    broker.kill();
    send(&tb, &frames(n1, n2));
    std::thread::sleep(Duration::from_secs(2));
    broker.run();
    send(&tb, &frames(n1 + n2, n3));
    std::thread::sleep(Duration::from_secs(3));
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    let n = (n1 + n2 + n3) as u64;
    assert_eq!(tb.rx_packets() - before, n, "offered");
    let s = json_summary(&err);
    let r = &s["records"];
    let c = &r["collectors"][0];
    let get = |v: &serde_json::Value| v.as_u64().unwrap();
    assert_eq!(get(&r["records"]), n, "{r}");
    assert!(get(&c["failures"]) >= 1, "the outage was seen: {r}");
    let lost = get(&c["dropped"]) + get(&r["queue_drops"]);
    assert_eq!(
        get(&c["unacked"]),
        0,
        "the broker came back before the end: {r}"
    );
    assert_eq!(get(&c["acked"]) + lost, n, "{r}");

    let good = dir.join("out");
    let col = start_collect(&tb, &url, &good, &key);
    settle();
    let v = stop_collect(col);
    // Every record sent is in Parquet or counted lost by the probe; re-sent copies are refused by seq.
    let rows = duckdb_rows(&good);
    eprintln!(
        "probe: {r}\ncollector: stored {rows}, rejected {}",
        v["rejected"]
    );
    assert_eq!(rows + lost, n, "rows {rows}, lost {lost}: {r} / {v}");
    assert_eq!(v["records_stored"], rows, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}
