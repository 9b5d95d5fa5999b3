//! The archive as one dataset (docs/datasets.md): three sensors' stores, indexed by `ringcap
//! index` and archived by `ringcap archive` to the s3proxy, are read as one partitioned table
//! (`sensor=*/date=*/hour=*/*.flows.parquet`) from the S3 server's own directory, by DuckDB and by
//! Spark SQL, each in one statement. Both must give what tshark and tcpdump make of the capture
//! files: the hosts that talked to X per sensor (flows and packets) and every sensor's totals.
//! Then `ringcap query s3://…` returns the packets of the answer, as tcpdump finds them.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use common::stores::{need, sh};

/// The host the question is about.
const X: &str = "10.9.9.9";
/// What the queries are asked: rows "sensor\tpeer\tflows\tpackets", sorted. `{FROM}` is the
/// engine's table, `{LAST_NS}` its spelling of `last_ts` in ns since the epoch.
const PEERS_SQL: &str = "SELECT sensor, CASE WHEN src = '10.9.9.9' THEN dst ELSE src END AS peer, \
     count(*) AS flows, CAST(sum(packets) AS BIGINT) AS packets FROM {FROM} \
     WHERE (src = '10.9.9.9' OR dst = '10.9.9.9') AND date >= DATE '2026-11-25' \
     AND {LAST_NS} >= 1795564800000000000 GROUP BY 1, 2 ORDER BY 1, 2";
/// Every sensor's flows and packets: rows "sensor\tflows\tpackets".
const TOTALS_SQL: &str =
    "SELECT sensor, count(*) AS flows, CAST(sum(packets) AS BIGINT) AS packets \
     FROM {FROM} GROUP BY 1 ORDER BY 1";

/// An Ethernet/IPv4 frame, UDP (17) or a TCP SYN (6), with 20 bytes of payload.
fn ip_frame(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
    let l4 = if proto == 6 { 20 } else { 8 };
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    f.extend([0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0]);
    f[16..18].copy_from_slice(&((20 + l4 + 20) as u16).to_be_bytes());
    f.extend(src);
    f.extend(dst);
    f.extend(sport.to_be_bytes());
    f.extend(dport.to_be_bytes());
    if proto == 6 {
        f.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        f.extend((8u16 + 20).to_be_bytes());
        f.extend([0, 0]);
    }
    f.extend([0x5a; 20]);
    f
}

/// A capture file `name` in `store` of `n` frames one millisecond apart from `t0` (s): sensor
/// `s`'s conversations with X among background traffic of its own subnet.
fn capture_file(store: &Path, name: &str, t0: u32, s: u8, n: u32) {
    let x = [10, 9, 9, 9];
    let mut w = std::io::BufWriter::new(fs::File::create(store.join(name)).unwrap());
    w.write_all(&0xa1b2_c3d4u32.to_le_bytes()).unwrap();
    w.write_all(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    w.write_all(&65535u32.to_le_bytes()).unwrap();
    w.write_all(&1u32.to_le_bytes()).unwrap();
    for i in 0..n {
        let bg = [10, 0, s, 10 + (i % 7) as u8];
        let other = [10, 0, s, 20 + (i % 5) as u8];
        let f = match (s, i % 10) {
            // s1: a DNS exchange with 10.0.1.1 and SYNs to 10.0.1.2:443; s2: queries from 10.0.2.1
            // and X's DNS to 10.0.1.1 (a peer two sensors see); s3 never sees X.
            (1, 0) => ip_frame(x, [10, 0, 1, 1], 17, 1000 + (i % 3) as u16, 53),
            (1, 1) => ip_frame([10, 0, 1, 1], x, 17, 53, 1000 + (i % 3) as u16),
            (1, 2) => ip_frame(x, [10, 0, 1, 2], 6, 40000, 443),
            (2, 0) => ip_frame([10, 0, 2, 1], x, 17, 5353, 53),
            (2, 1) if i % 20 == 1 => ip_frame(x, [10, 0, 1, 1], 17, 1001, 53),
            _ => ip_frame(bg, other, 17, 2000 + (i % 4) as u16, 9000),
        };
        let ts = t0 + i / 1000;
        w.write_all(&ts.to_le_bytes()).unwrap();
        w.write_all(&(i % 1000 * 1000).to_le_bytes()).unwrap();
        w.write_all(&(f.len() as u32).to_le_bytes()).unwrap();
        w.write_all(&(f.len() as u32).to_le_bytes()).unwrap();
        w.write_all(&f).unwrap();
    }
    w.flush().unwrap();
}

/// What tshark decodes of `files`: per peer of X (flows, packets), and all (flows, packets), a
/// flow being the protocol and both endpoints, counted once per file as the flow tables are.
fn tshark_expectation(files: &[PathBuf]) -> (BTreeMap<String, (u64, u64)>, (u64, u64)) {
    let mut peers: BTreeMap<String, (BTreeSet<String>, u64)> = BTreeMap::new();
    let (mut flows, mut packets) = (0, 0);
    for f in files {
        let text = sh(&format!(
            "tshark -n -r '{}' -T fields -E separator=/t -e ip.src -e ip.dst -e ip.proto \
             -e udp.srcport -e udp.dstport -e tcp.srcport -e tcp.dstport 2>/dev/null",
            f.display()
        ));
        let mut in_file = BTreeSet::new();
        for line in text.lines() {
            let v: Vec<&str> = line.split('\t').collect();
            let ports = |i: usize| if v[i].is_empty() { v[i + 2] } else { v[i] };
            let mut ends = [
                format!("{}:{}", v[0], ports(3)),
                format!("{}:{}", v[1], ports(4)),
            ];
            ends.sort();
            let flow = format!("{} {} {} {}", f.display(), v[2], ends[0], ends[1]);
            packets += 1;
            in_file.insert(flow.clone());
            let peer = match (v[0] == X, v[1] == X) {
                (true, _) => v[1],
                (_, true) => v[0],
                _ => continue,
            };
            let e = peers.entry(peer.to_string()).or_default();
            e.0.insert(flow);
            e.1 += 1;
        }
        flows += in_file.len() as u64;
    }
    let peers = peers
        .into_iter()
        .map(|(p, (f, n))| (p, (f.len() as u64, n)))
        .collect();
    (peers, (flows, packets))
}

/// Rows printed by a Python program over the dataset: each engine prints its two answers.
fn run_python(code: &str, env: &[(&str, String)]) -> String {
    let mut c = Command::new("python3");
    c.arg("-c").arg(code).envs(env.iter().map(|(k, v)| (k, v)));
    let o = c.output().expect("python3");
    assert!(
        o.status.success(),
        "python failed (make deps installs requirements-test.txt and Java 17): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Whether Python can import `module`: a skip outside CI, a failure under CI.
fn have_module(module: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        testbed::skip(&format!(
            "python module {module} missing (pip install -r requirements-test.txt)"
        ));
    }
    ok
}

/// The two answers by DuckDB over `root` (hive partitions from the directory names).
fn duckdb_answers(root: &Path) -> String {
    let from = format!(
        "read_parquet('{}/sensor=*/date=*/hour=*/*.flows.parquet', hive_partitioning = true)",
        root.display()
    );
    let q = |sql: &str| {
        sql.replace("{FROM}", &from)
            .replace("{LAST_NS}", "epoch_ns(last_ts)")
    };
    run_python(
        &format!(
            "import duckdb\nfor q in [\"\"\"{}\"\"\", \"\"\"{}\"\"\"]:\n  for r in duckdb.sql(q).fetchall(): \
             print('\\t'.join(str(v) for v in r))\n  print('--')",
            q(PEERS_SQL),
            q(TOTALS_SQL)
        ),
        &[],
    )
}

/// The two answers by Spark SQL (local[1], small heap, loopback only) over `root`: the view is
/// the root directory, partitions discovered, only the flow tables read. Spark 3.5 reads
/// TIMESTAMP(NANOS) only as ns numbers (nanosAsLong).
fn spark_answers(root: &Path) -> String {
    let view = format!(
        "CREATE TEMPORARY VIEW flows USING parquet OPTIONS (path '{}', pathGlobFilter '*.flows.parquet')",
        root.display()
    );
    let q = |sql: &str| {
        sql.replace("{FROM}", "flows")
            .replace("{LAST_NS}", "last_ts")
    };
    let code = format!(
        "from pyspark.sql import SparkSession\n\
         s = (SparkSession.builder.master('local[1]').config('spark.driver.memory', '512m')\n\
           .config('spark.driver.host', '127.0.0.1').config('spark.driver.bindAddress', '127.0.0.1')\n\
           .config('spark.ui.enabled', 'false').config('spark.sql.shuffle.partitions', '1')\n\
           .config('spark.sql.legacy.parquet.nanosAsLong', 'true').getOrCreate())\n\
         s.sparkContext.setLogLevel('ERROR')\n\
         s.sql(\"\"\"{view}\"\"\")\n\
         for q in [\"\"\"{}\"\"\", \"\"\"{}\"\"\"]:\n  for r in s.sql(q).collect(): \
           print('\\t'.join(str(v) for v in r))\n  print('--')\n\
         s.stop()",
        q(PEERS_SQL),
        q(TOTALS_SQL)
    );
    let mut env = vec![("SPARK_LOCAL_IP", "127.0.0.1".to_string())];
    // Spark 3.5 runs on Java 8, 11 and 17: the Java 17 that `make deps` installs, if `java` is
    // another one.
    if let Some(j17) = fs::read_dir("/usr/lib/jvm").ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().contains("java-17-openjdk"))
    }) {
        env.push(("JAVA_HOME", j17.display().to_string()));
    }
    run_python(&code, &env)
}

#[test]
fn three_sensors_archived_read_as_one_dataset_by_duckdb_and_spark() {
    need("tshark");
    need("tcpdump");
    need("java");
    if !have_module("duckdb") || !have_module("pyspark") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(s3) = S3::start(tmp.path()) else {
        return;
    };
    // Two files per sensor, either side of midnight UTC (two dates, two hours).
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for s in 1..=3u8 {
        let sensor = format!("s{s}");
        let store = tmp.path().join(&sensor);
        fs::create_dir_all(&store).unwrap();
        // 2026-12-01 23:58:00 and 2026-12-02 00:00:10 UTC.
        for (name, t0) in [
            ("cap-20261201T235800-000001.pcap", 1_796_169_480),
            ("cap-20261202T000010-000002.pcap", 1_796_169_610),
        ] {
            capture_file(&store, name, t0, s, 3000);
            files
                .entry(sensor.clone())
                .or_default()
                .push(store.join(name));
        }
        let o = Command::new(ringcap())
            .args(["index", "-q"])
            .arg(&store)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = archive(
            &s3,
            &store,
            tmp.path(),
            &["--once", "--to", "s3://pcap/ds", "--sensor", &sensor],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // The S3 server's filesystem back end keeps each object as a file under its key.
    let root = tmp.path().join("s3data").join(BUCKET).join("ds");
    assert!(root
        .join("sensor=s2/date=2026-12-02/hour=00/cap-20261202T000010-000002.pcap.flows.parquet")
        .is_file());

    // The independent answer, sensor by sensor.
    let mut want_peers = Vec::new();
    let mut want_totals = Vec::new();
    for (sensor, fs) in &files {
        let (peers, (flows, packets)) = tshark_expectation(fs);
        for (peer, (f, n)) in &peers {
            want_peers.push(format!("{sensor}\t{peer}\t{f}\t{n}"));
        }
        // tcpdump's count of the packets to or from X agrees with tshark's.
        let host: u64 = fs
            .iter()
            .map(|f| {
                sh(&format!(
                    "tcpdump -nn -r '{}' 'host {X}' 2>/dev/null | wc -l",
                    f.display()
                ))
                .trim()
                .parse::<u64>()
                .unwrap()
            })
            .sum();
        assert_eq!(host, peers.values().map(|p| p.1).sum::<u64>(), "{sensor}");
        want_totals.push(format!("{sensor}\t{flows}\t{packets}"));
    }
    assert!(want_peers.len() >= 4, "{want_peers:?}");
    let want = format!(
        "{}\n--\n{}\n--\n",
        want_peers.join("\n"),
        want_totals.join("\n")
    );
    eprintln!(
        "tshark and tcpdump (sensor, peer of {X}, flows, packets; then sensor totals):\n{want}"
    );

    let t = Instant::now();
    let duck = duckdb_answers(&root);
    eprintln!("duckdb: {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(duck, want, "DuckDB against tshark");
    let t = Instant::now();
    let spark = spark_answers(&root);
    eprintln!("spark: {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(spark, want, "Spark SQL against tshark");

    // The packets of the answer: one query over every sensor of the archive.
    let out = tmp.path().join("x.pcap");
    let o = query::remote_query(
        &s3,
        tmp.path(),
        "ds",
        &format!("host {X}"),
        &[
            "--after",
            "2026-11-25T00:00:00Z",
            "-w",
            out.to_str().unwrap(),
            "-q",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let all: Vec<PathBuf> = files.values().flatten().cloned().collect();
    let (peers, _) = tshark_expectation(&all);
    let got = sh(&format!(
        "tcpdump -nn -r '{}' 2>/dev/null | wc -l",
        out.display()
    ));
    assert_eq!(
        got.trim().parse::<u64>().unwrap(),
        peers.values().map(|p| p.1).sum::<u64>(),
        "ringcap query s3://pcap/ds 'host {X}'"
    );
    let (got_peers, _) = tshark_expectation(&[out]);
    assert_eq!(
        got_peers.keys().collect::<Vec<_>>(),
        peers.keys().collect::<Vec<_>>()
    );
}
