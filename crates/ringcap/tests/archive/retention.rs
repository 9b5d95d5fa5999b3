//! Archive retention by age and by bytes.

use super::*;

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
