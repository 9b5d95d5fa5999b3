//! Privileges once the sockets are open, as the kernel reports them in /proc for every thread: `-Z USER`
//! becomes USER with no capabilities (files created as USER, as tcpdump -Z); root without -Z keeps only
//! CAP_DAC_OVERRIDE; a normal user running a copy of the binary given CAP_NET_RAW+CAP_NET_ADMIN by
//! `setcap` captures and keeps none.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use common::*;
use testbed::Side;

const NOBODY: u32 = 65534;
const CAP_DAC_OVERRIDE: u64 = 1 << 1;

/// (real uid, effective capabilities) of every thread of `pid`.
fn threads(pid: u32) -> Vec<(u32, u64)> {
    let mut v = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let Ok(status) = std::fs::read_to_string(t.unwrap().path().join("status")) else {
            continue; // the thread ended meanwhile
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in {status}"))
                .split_whitespace()
                .next()
                .unwrap()
                .to_string()
        };
        v.push((
            field("Uid:").parse().unwrap(),
            u64::from_str_radix(&field("CapEff:"), 16).unwrap(),
        ));
    }
    assert!(!v.is_empty());
    v
}

fn chown(path: &Path, uid: u32) {
    chown_group(path, uid, uid);
}

fn chown_group(path: &Path, uid: u32, gid: u32) {
    let st = Command::new("chown")
        .arg(format!("{uid}:{gid}"))
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// `capture -i RX -w BASE -C 1MB -Z nobody EXTRA... -q`: files rotated (and indexed) by threads running as nobody.
fn rotating_capture_as_nobody(tb: &testbed::Testbed, base: &Path, extra: &[&str]) -> Child {
    let mut args = vec![
        "capture",
        "-i",
        &tb.rx_if,
        "-w",
        base.to_str().unwrap(),
        "-C",
        "1MB",
        "-Z",
        "nobody",
    ];
    args.extend_from_slice(extra);
    args.push("-q");
    spawn_capture(tb, &args)
}

/// The capture files under `dir` (hidden partial files and indexes excluded).
fn capture_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            !n.starts_with('.') && n.ends_with(".pcap")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn dash_z_becomes_the_user_in_every_thread_and_writes_as_that_user() {
    if !testbed::have("capinfos", "apt install tshark") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("dash-z");
    chown(&dir, NOBODY);
    let base = dir.join("cap");
    // File mode with rotation: the writer, the indexer and their threads all run as nobody.
    let child = rotating_capture_as_nobody(&tb, &base, &[]);
    let sent = (0..4000)
        .map(|i| frame(i, 1000, 9, 600))
        .collect::<Vec<_>>();
    send(&tb, &sent);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let t = threads(child.id());
    assert!(t.len() > 2, "{t:?}");
    for (uid, caps) in &t {
        assert_eq!((*uid, *caps), (NOBODY, 0), "every thread: {t:?}");
    }
    let out = stop(child, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let files = capture_files(&dir);
    assert!(files.len() >= 2, "rotated at 1 MB: {files:?}");
    let mut total = 0;
    for f in &files {
        assert_eq!(
            std::fs::metadata(f).unwrap().uid(),
            NOBODY,
            "{}",
            f.display()
        );
        total += capinfos_count(f);
    }
    assert_eq!(total, sent.len() as u64);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn root_without_dash_z_keeps_only_the_right_to_write_files() {
    let tb = testbed();
    let dir = temp_dir("root-caps");
    let child = spawn_capture(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "-w",
            dir.join("x.pcap").to_str().unwrap(),
            "-q",
        ],
    );
    let t = threads(child.id());
    let out = stop(child, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    for (uid, caps) in &t {
        assert_eq!((*uid, *caps), (0, CAP_DAC_OVERRIDE), "every thread: {t:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_normal_user_captures_with_file_capabilities_and_keeps_none() {
    if !testbed::have("setcap", "apt install libcap2-bin")
        || !testbed::have("capinfos", "apt install tshark")
    {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("file-caps");
    let bin = dir.join("ringcap");
    std::fs::copy(ringcap(), &bin).unwrap();
    let st = Command::new("setcap")
        .args(["cap_net_raw,cap_net_admin+ep"])
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success(), "setcap");
    let out_dir = dir.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    chown(&out_dir, NOBODY);
    let file = out_dir.join("x.pcap");
    let as_nobody = |args: &[&str]| {
        let mut c = tb.command(Side::Rx, "setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(args);
        c
    };
    let child = spawn_listening(as_nobody(&[
        "capture",
        "-i",
        &tb.rx_if,
        "-w",
        file.to_str().unwrap(),
        "-q",
    ]));
    let t = threads(child.id());
    let sent = (0..500).map(|i| frame(i, 1000, 9, 100)).collect::<Vec<_>>();
    send(&tb, &sent);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = stop(child, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));
    for (uid, caps) in &t {
        assert_eq!((*uid, *caps), (NOBODY, 0), "every thread: {t:?}");
    }
    assert_eq!(std::fs::metadata(&file).unwrap().uid(), NOBODY);
    assert_eq!(capinfos_count(&file), sent.len() as u64);

    // -Z needs root, and says so.
    let out = as_nobody(&["capture", "-i", &tb.rx_if, "-Z", "nobody", "-c", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("needs ringcap to run as root"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unknown_user_is_a_usage_error_before_anything_opens() {
    let tb = testbed();
    let out = ringcap_rx(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "-Z",
            "no-such-user-rc",
            "-c",
            "1",
        ],
    )
    .output()
    .unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("-Z no-such-user-rc") && err.contains("-Z nobody"),
        "{err}"
    );
    assert!(!err.contains("listening on"), "{err}");
}

/// `setpriv` as the `daemon` user (not the files' owner), with or without group `adm` (4).
fn as_daemon(groups: &str, cmd: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=1", "--regid=1", groups, cmd]);
    c
}

#[test]
fn group_makes_the_files_readable_by_that_group_and_nobody_else() {
    if !testbed::have("capinfos", "apt install tshark")
        || !testbed::have("setpriv", "apt install util-linux")
    {
        return;
    }
    const ADM: u32 = 4;
    let tb = testbed();
    let dir = temp_dir("group");
    // A store as an operator sets it up: owned by the capture user, open to the readers' group.
    chown_group(&dir, NOBODY, ADM);
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    let base = dir.join("cap");
    let child = rotating_capture_as_nobody(&tb, &base, &["--group", "adm"]);
    let sent = (0..3000)
        .map(|i| frame(i, 1000, 9, 600))
        .collect::<Vec<_>>();
    send(&tb, &sent);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = stop(child, libc::SIGINT);
    assert!(out.status.success(), "{}", stderr_text(&out));

    let files = capture_files(&dir);
    assert!(files.len() >= 2, "rotated at 1 MB: {files:?}");
    let mut indexes = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let m = std::fs::metadata(&p).unwrap();
        indexes += p.to_string_lossy().ends_with(".idx") as usize;
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o777),
            (NOBODY, ADM, 0o640),
            "{}",
            p.display()
        );
    }
    assert!(indexes >= files.len(), "an index per file");
    // Another user reads them as a member of the group, and cannot without it.
    let mut total = 0;
    for f in &files {
        let out = as_daemon("--groups=4", "capinfos")
            .args(["-M", "-c"])
            .arg(f)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_text(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        total += text
            .lines()
            .find_map(|l| l.strip_prefix("Number of packets:"))
            .map(|n| n.trim().parse::<u64>().unwrap())
            .unwrap_or_else(|| panic!("{text}"));
        let out = as_daemon("--clear-groups", "cat").arg(f).output().unwrap();
        assert!(
            !out.status.success(),
            "read without the group: {}",
            f.display()
        );
    }
    assert_eq!(total, sent.len() as u64);

    // A group that does not exist is a usage error before capturing.
    let out = ringcap_rx(
        &tb,
        &[
            "capture",
            "-i",
            &tb.rx_if,
            "--group",
            "no-such-group-rc",
            "-c",
            "1",
        ],
    )
    .output()
    .unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--group no-such-group-rc"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}
