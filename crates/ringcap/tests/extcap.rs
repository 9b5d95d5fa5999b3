//! Wireshark's own client drives ringcap through the extcap protocol: tshark finds ringcap in a personal
//! extcap folder, lists its interfaces (`tshark -D`), captures on the testbed through it
//! (`tshark -i ringcap_<if> -a packets:N`) and reads the store through it; what tshark wrote is checked with
//! capinfos and tshark's own decode against what was sent.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use testbed::{Side, Testbed};

/// A home directory whose Wireshark configuration has ringcap in its extcap folder.
fn wireshark_home(tag: &str) -> PathBuf {
    let home = temp_dir(&format!("extcap-{tag}"));
    let dir = home.join(".config/wireshark/extcap");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(ringcap(), dir.join("ringcap")).unwrap();
    home
}

fn tshark(tb: &Testbed, home: &Path) -> Command {
    let mut c = tb.command(Side::Rx, "tshark");
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"));
    c
}

/// Values of one field, as tshark decodes `file`.
fn field(file: &Path, name: &str) -> Vec<String> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-e", name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn tshark_lists_ringcap_interfaces_and_the_store() {
    if !testbed::have("tshark", "apt install tshark") {
        return;
    }
    let tb = testbed();
    let home = wireshark_home("list");
    let out = tshark(&tb, &home).arg("-D").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!(
            "ringcap_{} (ringcap ring capture: {})",
            tb.rx_if, tb.rx_if
        )),
        "{text}"
    );
    assert!(
        text.contains("ringcap_store (ringcap time machine"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(home);
}

#[test]
fn tshark_captures_through_ringcap_on_the_testbed() {
    if !testbed::have("tshark", "apt install tshark") {
        return;
    }
    let tb = testbed();
    let home = wireshark_home("live");
    let out = home.join("out.pcapng");
    let mut child = tshark(&tb, &home)
        .args([
            "-i",
            &format!("ringcap_{}", tb.rx_if),
            "-a",
            "packets:1000",
            "-w",
        ])
        .arg(&out)
        .args(["-f", "udp dst port 9"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Frames to port 9 (wanted) and 10 (filtered out by the capture filter, in the kernel) until tshark
    // has its 1000.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seq = 0;
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "tshark did not get 1000 packets in 60 s"
        );
        let fs: Vec<Vec<u8>> = (0..100)
            .map(|i| {
                seq += 1;
                frame(seq, 1000, if i % 2 == 0 { 9 } else { 10 }, 60)
            })
            .collect();
        send(&tb, &fs);
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    assert_eq!(capinfos_count(&out), 1000, "{err}");
    let ports = field(&out, "udp.dstport");
    assert_eq!(ports.len(), 1000);
    assert!(
        ports.iter().all(|p| p == "9"),
        "the capture filter reached ringcap"
    );
    let _ = std::fs::remove_dir_all(home);
}

#[test]
fn tshark_reads_the_store_through_ringcap() {
    if !testbed::have("tshark", "apt install tshark") {
        return;
    }
    let tb = testbed();
    let home = wireshark_home("store");
    let store = home.join("store");
    std::fs::create_dir(&store).unwrap();
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--out-dir",
            store.to_str().unwrap(),
            "-C",
            "1MB",
            "-q",
        ],
    );
    let sent: Vec<Vec<u8>> = (0..3000)
        .map(|i| frame(i, 1000 + (i % 3) as u16, 9, 400))
        .collect();
    send(&tb, &sent);
    std::thread::sleep(Duration::from_millis(500));
    let o = stop(child, libc::SIGINT);
    assert!(o.status.success(), "{}", stderr_text(&o));

    let out = home.join("out.pcapng");
    let o = tshark(&tb, &home)
        .args(["-i", "ringcap_store", "-f", "udp src port 1001", "-w"])
        .arg(&out)
        .arg("-o")
        .arg(format!("extcap.ringcap_store.store:{}", store.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Every third frame came from port 1001, in the order sent.
    let seqs: Vec<u32> = field(&out, "udp.payload")
        .iter()
        .map(|d| u32::from_str_radix(&d[0..8], 16).unwrap())
        .collect();
    let want: Vec<u32> = (0..3000).filter(|i| i % 3 == 1).collect();
    assert_eq!(seqs, want, "{err}");
    let _ = std::fs::remove_dir_all(home);
}
