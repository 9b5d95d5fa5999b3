//! Key files and key directories as `ringcap collect` and the probe read them (issue 33 item 13):
//! checked as ssh checks private keys and `~/.ssh`, by the one reader of secrets in `sys`. The real
//! binary on real files; each refusal must come at once, with the command that fixes it.

mod common;

use common::*;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown(p: &Path, uid: u32) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: chown of a path this test made; -1 keeps the group.
    assert_eq!(unsafe { libc::chown(c.as_ptr(), uid, u32::MAX) }, 0);
}

fn mkfifo(p: &Path) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `ringcap ARGS`, which must exit within 10 s (a FIFO opened without O_NONBLOCK waits forever).
fn run(args: &[&str]) -> Output {
    let child = Command::new(ringcap())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| {
            // SAFETY: kill of our own child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("ringcap {args:?} hung at start-up");
        })
}

/// `ringcap collect` with the key flags `keys`: refused before it listens (exit 2), saying `want`.
fn collect_refuses(out: &Path, keys: &[&str], want: &[&str]) {
    let mut args = vec!["collect", "--listen", "tcp://127.0.0.1:0", "-o"];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(keys);
    let o = run(&args);
    let err = stderr_text(&o);
    assert_eq!(o.status.code(), Some(2), "{keys:?}: {err}");
    assert!(!err.contains("listening on"), "{err}");
    for w in want {
        assert!(err.contains(w), "{keys:?}: wanted {w:?} in: {err}");
    }
}

#[test]
fn key_dirs_and_keys_others_could_write_are_refused_and_a_fifo_never_hangs_start_up() {
    let dir = temp_dir("secrets");
    let out = dir.join("out");
    let keys = dir.join("keys");
    std::fs::create_dir(&keys).unwrap();
    let k17 = keys.join("17");
    std::fs::write(&k17, KEY).unwrap();
    chmod(&k17, 0o600);
    let kd = keys.to_str().unwrap();

    // A directory anyone may write: anyone could add a probe's key.
    chmod(&keys, 0o777);
    collect_refuses(
        &out,
        &["--key-dir", kd],
        &[
            "may be written by group or others (mode 0777)",
            &format!("run chmod go-w {kd}"),
        ],
    );
    chmod(&keys, 0o770);
    collect_refuses(&out, &["--key-dir", kd], &["(mode 0770)", "chmod go-w"]);
    // Owned by another user.
    chmod(&keys, 0o700);
    chown(&keys, 65534);
    collect_refuses(
        &out,
        &["--key-dir", kd],
        &["owned by uid 65534", &format!("run chown 0 {kd}")],
    );
    chown(&keys, 0);
    // A key in it owned by another user, even with mode 0600.
    chown(&k17, 65534);
    collect_refuses(
        &out,
        &["--key-dir", kd],
        &[
            "owned by uid 65534",
            &format!("run chown 0 {}", k17.display()),
        ],
    );
    let k = k17.to_str().unwrap();
    collect_refuses(&out, &["--key", k], &["owned by uid 65534", "run chown 0"]);
    chown(&k17, 0);

    // A FIFO as the key, or in the key directory: refused at once, not waited on.
    let fifo = dir.join("fifo-key");
    mkfifo(&fifo);
    collect_refuses(
        &out,
        &["--key", fifo.to_str().unwrap()],
        &["is a FIFO, not a regular file"],
    );
    mkfifo(&keys.join("18"));
    collect_refuses(
        &out,
        &["--key-dir", kd],
        &["18 is a FIFO, not a regular file"],
    );
    // The probe's --key goes through the same reader.
    let o = run(&[
        "capture",
        "-i",
        "lo",
        "--records",
        "tcp://127.0.0.1:9",
        "--key",
    ]
    .into_iter()
    .chain([fifo.to_str().unwrap(), "-c", "1"])
    .collect::<Vec<_>>());
    let err = stderr_text(&o);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("is a FIFO, not a regular file"), "{err}");
    std::fs::remove_file(keys.join("18")).unwrap();

    // The directory as it should be: accepted, the collector starts.
    let mut c = Command::new(ringcap())
        .args(["collect", "--listen", "tcp://127.0.0.1:0", "-o"])
        .arg(&out)
        .args(["--key-dir", kd])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(c.stderr.take().unwrap());
        while !said.contains("listening on") && r.read_line(&mut said).unwrap() > 0 {}
    }
    // SAFETY: kill of our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let _ = c.wait();
    assert!(said.contains("listening on"), "{said}");
    let _ = std::fs::remove_dir_all(dir);
}
