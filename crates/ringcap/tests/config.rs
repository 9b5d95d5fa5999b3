//! `ringcap capture --config FILE.toml`: a real capture on the testbed configured by the file, a flag that
//! overrides a key, mistakes named by key and line (exit 2), the shipped sample config, and `make
//! install-files` putting the systemd unit and the config in place (the unit checked by systemd-analyze).

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The repository root (the Makefile and dist/ are there).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Write `text` as a config file in `dir`.
fn config(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("ringcap.toml");
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// `ringcap ARGS` on this machine (no capture: checks only).
fn ringcap_here(args: &[&str]) -> Output {
    Command::new(ringcap()).args(args).output().unwrap()
}

/// Capture `sent` frames on the testbed with `ringcap capture --config CFG EXTRA...`, to its end (a count).
fn capture_with_config(tb: &testbed::Testbed, cfg: &Path, extra: &[&str], sent: u32) -> Output {
    let mut args = vec!["capture", "--config", cfg.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut child = spawn_capture(tb, &args);
    let frames: Vec<Vec<u8>> = (0..sent).map(|i| frame(i, 1000, 9, 200)).collect();
    send(tb, &frames);
    finish(&mut child)
}

#[test]
fn a_config_file_alone_runs_a_capture() {
    if !have("tcpdump") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("config-alone");
    let out = dir.join("out.pcap");
    let cfg = config(
        &dir,
        &format!(
            "# a capture set by its file only\ninterface = \"{}\"\nwrite = \"{}\"\ncount = 40\nformat = \"pcap\"\nquiet = true\n",
            tb.rx_if,
            out.display()
        ),
    );
    let o = capture_with_config(&tb, &cfg, &[], 100);
    assert!(o.status.success(), "{}", stderr_text(&o));
    assert_eq!(tcpdump_count(&out), 40);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_flag_overrides_the_key() {
    if !have("tcpdump") {
        return;
    }
    let tb = testbed();
    let dir = temp_dir("config-override");
    let (in_file, on_line) = (dir.join("from-file.pcap"), dir.join("from-flag.pcap"));
    let cfg = config(
        &dir,
        &format!(
            "interface = \"{}\"\nwrite = \"{}\"\ncount = 1000\n",
            tb.rx_if,
            in_file.display()
        ),
    );
    let o = capture_with_config(
        &tb,
        &cfg,
        &["-c", "25", "--write", on_line.to_str().unwrap()],
        100,
    );
    assert!(o.status.success(), "{}", stderr_text(&o));
    assert_eq!(tcpdump_count(&on_line), 25);
    assert!(!in_file.exists(), "the file's `write` was used despite -w");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `ringcap capture --config` with `text` refuses it: exit 2, a message with all of `says`.
fn refused(text: &str, says: &[&str]) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = temp_dir(&format!("config-bad-{n}"));
    let cfg = config(&dir, text);
    let o = ringcap_here(&[
        "capture",
        "--config",
        cfg.to_str().unwrap(),
        "--check-config",
    ]);
    let err = stderr_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}\n{err}");
    for s in says {
        assert!(err.contains(s), "{text}\nexpected `{s}` in: {err}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn mistakes_are_named_by_key_and_line() {
    let head = "interface = \"eth0\"\n# a comment\n";
    refused(
        &format!("{head}bogus-key = 3\n"),
        &[
            "line 3: key `bogus-key`: unknown key",
            "long flags of `ringcap capture`",
        ],
    );
    refused(
        &format!("{head}count = \"many\"\n"),
        &["line 3: key `count`: invalid value 'many' for '--count <N>'"],
    );
    refused(
        &format!("{head}compress = \"zstd:99\"\n"),
        &["line 3: key `compress`", "--compress"],
    );
    refused(
        &format!("{head}\nno-index = \"yes\"\n"),
        &["line 4: key `no-index`: give true or false"],
    );
    refused(
        &format!("{head}count = [1, 2]\n"),
        &["line 3: key `count`: give one string"],
    );
    refused(
        &format!("{head}[capture]\ncount = 1\n"),
        &["line 3: key `capture`"],
    );
    refused("interface = \n", &["TOML parse error at line 1"]);
    // How keys combine is clap's to check on the whole command line, and it says so.
    refused(
        &format!("{head}records = [\"tcp://127.0.0.1:1\"]\n"),
        &["--key", "with --config"],
    );
}

#[test]
fn a_config_others_may_write_is_refused() {
    let dir = temp_dir("config-mode");
    let cfg = config(&dir, "interface = \"eth0\"\n");
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o646)).unwrap();
    let o = ringcap_here(&[
        "capture",
        "--config",
        cfg.to_str().unwrap(),
        "--check-config",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr_text(&o).contains("run chmod o-w"),
        "{}",
        stderr_text(&o)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_sample_config_is_valid() {
    let sample = repo().join("dist/ringcap.toml");
    let o = ringcap_here(&[
        "capture",
        "--config",
        sample.to_str().unwrap(),
        "--check-config",
    ]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr_text(&o));
    assert!(o.status.success(), "{err}");
    for flag in [
        "--interface=eth0",
        "--out-dir=/var/lib/ringcap/store",
        "--compress=auto",
        "--disk-budget=90%",
        "--metrics=127.0.0.1:9100",
        "--file-size=512MB",
    ] {
        assert!(out.contains(flag), "{flag} missing from {out}");
    }
    // A flag on the command line wins over the file's key.
    let o = ringcap_here(&[
        "capture",
        "--config",
        sample.to_str().unwrap(),
        "-i",
        "lo",
        "--check-config",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("-i lo") && !out.contains("--interface=eth0"),
        "{out}"
    );
}

#[test]
fn install_files_puts_the_unit_and_config_in_place() {
    if !have("systemd-analyze") {
        return;
    }
    let dest = temp_dir("config-install");
    let make = |prefix: &str| {
        let o = Command::new("make")
            .current_dir(repo())
            .args(["-s", "install-files"])
            .arg(format!("DESTDIR={}", dest.display()))
            .arg(format!("PREFIX={prefix}"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "make install-files: {}",
            stderr_text(&o)
        );
    };
    make("/opt/rc");
    let unit = dest.join("opt/rc/lib/systemd/system/ringcap.service");
    let conf = dest.join("etc/ringcap/ringcap.toml");
    assert!(dest.join("opt/rc/lib/sysusers.d/ringcap.conf").exists());
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains("ExecStart=/opt/rc/bin/ringcap capture --config /etc/ringcap/ringcap.toml")
    );
    assert_eq!(
        std::fs::read(&conf).unwrap(),
        std::fs::read(repo().join("dist/ringcap.toml")).unwrap()
    );
    let mode = std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "the config must not be world-readable");
    // An admin's config is never overwritten.
    std::fs::write(&conf, "interface = \"mine\"\n").unwrap();
    make("/opt/rc");
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "interface = \"mine\"\n"
    );
    // systemd's own check of the unit, with ExecStart pointing at the binary under test.
    let check = dest.join("ringcap.service");
    std::fs::write(
        &check,
        text.replace("/opt/rc/bin/ringcap", ringcap().to_str().unwrap()),
    )
    .unwrap();
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&check)
        .output()
        .unwrap();
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr_text(&o)
    );
    std::fs::remove_dir_all(dest).unwrap();
}

#[test]
fn interface_takes_one_name_or_a_list() {
    let dir = temp_dir("config-ifaces");
    for (text, want) in [
        ("interface = \"eth0\"\n", vec!["--interface=eth0"]),
        (
            "interface = [\"tap0\", \"tap1\"]\n",
            vec!["--interface=tap0", "--interface=tap1"],
        ),
    ] {
        let cfg = config(&dir, text);
        let o = ringcap_here(&[
            "capture",
            "--config",
            cfg.to_str().unwrap(),
            "--check-config",
        ]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", stderr_text(&o));
        for w in want {
            assert!(out.contains(w), "{w} missing from {out}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// SIGHUP with --config: a smaller disk budget applies while the capture runs (files are deleted to meet
/// it, no packet is lost), a changed snapshot length is named as needing a restart, and a file that no
/// longer parses is refused with the running settings kept.
#[test]
fn sighup_reloads_the_budget_and_names_what_needs_a_restart() {
    let tb = testbed();
    let dir = temp_dir("config-reload");
    let base = dir.join("cap");
    let text = |budget: &str, extra: &str| {
        format!(
            "interface = \"{}\"\nwrite = \"{}\"\nfile-size = \"1MB\"\ndisk-budget = \"{budget}\"\nno-index = true\njson = true\n{extra}",
            tb.rx_if,
            base.display()
        )
    };
    let cfg = config(&dir, &text("50MB", ""));
    let child = spawn_capture(&tb, &["capture", "--config", cfg.to_str().unwrap()]);
    let frames = |from: u32| -> Vec<Vec<u8>> {
        (from..from + 3000)
            .map(|i| frame(i, 1000, 9, 1000))
            .collect()
    };
    let files = || -> (usize, u64) {
        let v: Vec<u64> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| {
                let n = e.file_name().to_string_lossy().to_string();
                n.contains("cap-") && !n.ends_with(".coverage.json")
            })
            .map(|e| e.metadata().unwrap().len())
            .collect();
        (v.len(), v.iter().sum())
    };
    send(&tb, &frames(0));
    std::thread::sleep(Duration::from_millis(500));
    let (n_before, _) = files();
    assert!(n_before >= 3, "3 MB in 1 MB files: {n_before} files");

    // A broken file first: refused, nothing changes.
    config(&dir, &text("2MB", "no-such-key = 1\n"));
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(300));
    // Then a budget of 2 MB and a snapshot length, which needs a restart.
    config(&dir, &text("2MB", "snaplen = 100\n"));
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(300));
    send(&tb, &frames(3000));
    std::thread::sleep(Duration::from_millis(500));
    let o = stop(child, libc::SIGINT);
    let err = stderr_text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("refused, the running settings stay") && err.contains("no-such-key"),
        "{err}"
    );
    assert!(err.contains("disk budget now"), "{err}");
    assert!(err.contains("snaplen changed: needs a restart"), "{err}");
    let summary = err
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no JSON summary:\n{err}"));
    // Nothing lost, and full packets still (the snapshot length did not change).
    assert_eq!(summary["captured"], 6000, "{summary}");
    // 6 MB written, 2 MB kept: the new budget deleted files (the old one of 50 MB never would).
    let (n, bytes) = files();
    assert!(n < n_before + 3, "{n} files left");
    assert!(
        bytes <= 3_300_000,
        "{bytes} bytes left (2 MB budget and the last file)"
    );
    assert!(
        summary["files"]["deleted"].as_u64().unwrap_or(0) >= 2,
        "{summary}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--log-format json` (a service's logs for journald): every stderr line is one JSON object: the events
/// ({"type":"log"}: listening, a failing file event), the stats lines and the summary.
#[test]
fn log_format_json_makes_every_stderr_line_an_object() {
    let tb = testbed();
    let dir = temp_dir("config-logjson");
    let out = dir.join("out.pcap");
    let cfg = config(
        &dir,
        &format!(
            "interface = \"{}\"\nwrite = \"{}\"\ncount = 50\nlog-format = \"json\"\nstats-interval = 0.1\n",
            tb.rx_if,
            out.display()
        ),
    );
    let mut child = spawn_capture(&tb, &["capture", "--config", cfg.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(300));
    let frames: Vec<Vec<u8>> = (0..50).map(|i| frame(i, 1000, 9, 200)).collect();
    send(&tb, &frames);
    let o = finish(&mut child);
    let err = stderr_text(&o);
    assert!(o.status.success(), "{err}");
    let objects: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{err}")))
        .collect();
    let of_type = |t: &str| objects.iter().filter(|v| v["type"] == t).count();
    assert!(
        objects.iter().any(|v| v["type"] == "log"
            && v["level"] == "info"
            && v["msg"].as_str().unwrap_or("").starts_with("listening on")),
        "{err}"
    );
    assert!(of_type("stats") >= 1, "{err}");
    assert_eq!(of_type("summary"), 1, "{err}");
    assert_eq!(tcpdump_count(&out), 50);

    // A usage mistake after the format is known is an error object too.
    let o = Command::new(ringcap())
        .args([
            "capture",
            "-i",
            "nosuch0",
            "--log-format",
            "json",
            "-w",
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_str(stderr_text(&o).trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {}", stderr_text(&o)));
    assert_eq!(v["level"], "error");
    assert!(v["msg"].as_str().unwrap().contains("nosuch0"), "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}
