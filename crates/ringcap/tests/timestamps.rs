//! Time stamps as tcpdump offers them (-j, -J, --time-stamp-precision), checked against tcpdump itself and
//! Wireshark's tools on the testbed's veth pair (which has only the kernel's software stamps).

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testbed::Side;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// `tcpdump ARGS` in the Rx namespace, stopped after 5 s at most.
fn tcpdump_rx(tb: &testbed::Testbed, args: &[&str]) -> Output {
    tb.command(Side::Rx, "timeout")
        .args(["5", "tcpdump"])
        .args(args)
        .output()
        .expect("tcpdump (make deps installs it)")
}

/// The type names of a -J listing ("  host (Host)" → "host").
fn listed_types(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn list_time_stamp_types_matches_tcpdump() {
    let tb = testbed();
    let ours = ringcap_rx(&tb, &["-J", "-i", &tb.rx_if]).output().unwrap();
    assert!(ours.status.success(), "{}", stderr_text(&ours));
    let theirs = tcpdump_rx(&tb, &["-J", "-i", &tb.rx_if]);
    assert!(theirs.status.success(), "{}", stderr_text(&theirs));
    // tcpdump 4.99 prints the listing on stderr (later versions on stdout); ringcap prints it on stdout.
    let theirs = if theirs.stdout.is_empty() {
        theirs.stderr
    } else {
        theirs.stdout
    };
    assert_eq!(listed_types(&ours.stdout), listed_types(&theirs));
    assert!(!listed_types(&ours.stdout).is_empty());
    // Same words too: the listing reads as tcpdump's.
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&theirs)
    );
}

/// A veth has no hardware stamps. tcpdump warns that the type "is not supported by that device" and
/// captures with host stamps anyway (exit 0); ringcap refuses to start (exit 2, a usage problem) with the
/// same words, so a file never claims hardware stamps it does not have.
#[test]
fn hardware_types_on_a_veth_are_refused_as_tcpdump_warns() {
    let tb = testbed();
    for t in ["adapter_unsynced", "adapter"] {
        let theirs = tcpdump_rx(&tb, &["-j", t, "-i", &tb.rx_if, "-c", "1"]);
        let theirs_err = stderr_text(&theirs);
        assert!(
            theirs_err.contains(&format!(
                "When trying to set timestamp type '{t}' on {}: That type of time stamp is not supported \
                 by that device",
                tb.rx_if
            )),
            "tcpdump -j {t}: {theirs_err}"
        );
        let ours = ringcap_rx(
            &tb,
            &["-j", t, "-i", &tb.rx_if, "-c", "1", "-w", "/dev/null"],
        )
        .output()
        .unwrap();
        let err = stderr_text(&ours);
        assert_eq!(ours.status.code(), Some(2), "ringcap -j {t}: {err}");
        assert!(
            err.contains(&format!(
                "{}: time stamp type '{t}' is not supported by that device (it offers: host;",
                tb.rx_if
            )),
            "{err}"
        );
        assert!(err.contains("-j host"), "says what to do: {err}");
    }
}

/// Seconds.fraction as tshark prints frame.time_epoch, in ns (exact: no float).
fn epoch_ns(s: &str) -> u64 {
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac = format!("{frac:0<9}");
    sec.parse::<u64>().unwrap() * 1_000_000_000 + frac[..9].parse::<u64>().unwrap()
}

/// Capture `n` frames with EXTRA flags; returns (stamps as tshark reads them, wall clock before and after
/// sending, the capture's stderr).
fn capture_stamps(
    tag: &str,
    n: u32,
    extra: &[&str],
) -> (Vec<u64>, u64, u64, String, std::path::PathBuf) {
    let tb = testbed();
    let dir = temp_dir(tag);
    let file = dir.join("out.cap");
    let child = capture_to_file(&tb, &file, extra);
    let frames: Vec<Vec<u8>> = (0..n).map(|i| frame(i, 1000, 9, 100)).collect();
    let before = now_ns();
    send(&tb, &frames);
    let after = now_ns();
    std::thread::sleep(Duration::from_millis(300));
    let out = stop(child, libc::SIGINT);
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    let stamps = tshark_fields(&file, &["frame.time_epoch"])
        .iter()
        .map(|r| epoch_ns(&r[0]))
        .collect();
    (stamps, before, after, err, file)
}

#[test]
fn host_stamps_lie_between_the_wall_clock_before_and_after_sending() {
    let n = 1000;
    let (stamps, before, after, err, file) = capture_stamps("ts-host", n, &["-j", "host"]);
    assert_eq!(stamps.len(), n as usize, "{err}");
    for (i, t) in stamps.iter().enumerate() {
        assert!(
            (before..=after).contains(t),
            "packet {i}: stamp {t} outside [{before}, {after}]"
        );
    }
    // Every packet was checked in the ring and carried the kernel's software stamp (taken at receive, or
    // as the ring was filled when no socket on the machine has receive stamps on: both the host clock).
    let line = err
        .lines()
        .find(|l| l.starts_with("ringcap: timestamps: "))
        .unwrap_or_else(|| panic!("no timestamps line: {err}"));
    assert!(
        line == format!("ringcap: timestamps: {n} software (host)")
            || line.starts_with(&format!("ringcap: timestamps: {n} software (host; ")),
        "{line}"
    );
    assert!(!err.contains("WARNING"), "{err}");
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

/// capinfos's line for a file's or an interface's time precision.
fn capinfos(path: &Path) -> String {
    let out = Command::new("capinfos")
        .arg(path)
        .output()
        .expect("capinfos (make deps installs tshark)");
    assert!(out.status.success(), "{}", stderr_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn micro_precision_pcap_is_read_as_microseconds() {
    let n = 200;
    let (stamps, before, after, err, file) =
        capture_stamps("ts-micro", n, &["--time-stamp-precision", "micro"]);
    assert_eq!(stamps.len(), n as usize, "{err}");
    // pcap's classic microsecond magic, which is what tcpdump writes by default.
    let head = std::fs::read(&file).unwrap();
    assert_eq!(&head[..4], &store::PCAP_MAGIC_US.to_ne_bytes());
    let info = capinfos(&file);
    assert!(info.contains("microseconds (6)"), "{info}");
    for t in &stamps {
        assert_eq!(t % 1000, 0, "microsecond stamps have no ns digits");
        assert!((before / 1000 * 1000..=after).contains(t));
    }
    // tcpdump reads it.
    let td = Command::new("tcpdump")
        .args(["-n", "-r"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(td.status.success(), "{}", stderr_text(&td));
    assert_eq!(
        String::from_utf8_lossy(&td.stdout).lines().count(),
        n as usize
    );
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
}

#[test]
fn pcapng_interface_block_says_resolution_and_stamp_source() {
    for (precision, resol) in [("micro", "microseconds (6)"), ("nano", "nanoseconds (9)")] {
        let (stamps, before, after, err, file) = capture_stamps(
            &format!("ts-ng-{precision}"),
            50,
            &["-F", "pcapng", "--time-stamp-precision", precision],
        );
        assert_eq!(stamps.len(), 50, "{err}");
        let info = capinfos(&file);
        assert!(info.contains(resol), "{precision}: {info}");
        let floor = if precision == "micro" {
            before / 1000 * 1000
        } else {
            before
        };
        assert!(
            stamps.iter().all(|t| (floor..=after).contains(t)),
            "{precision}"
        );
        // tshark decodes the interface block's description on every packet.
        let desc = tshark_fields(&file, &["frame.interface_description"]);
        assert!(
            desc.iter()
                .all(|r| r[0] == "timestamps: host (kernel software)"),
            "{desc:?}"
        );
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }
}
