//! `ringcap generate`: the man pages and completions `make install` ships are generated from the clap
//! definitions and usable as they are.

use std::path::{Path, PathBuf};
use std::process::Command;

fn ringcap(args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_ringcap"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "ringcap {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn fresh_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ringcap-generate-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn man_pages_cover_every_command_and_name_their_flags() {
    let dir = fresh_dir("man");
    ringcap(&["generate", "man", dir.to_str().unwrap()]);
    let page = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let capture = page("ringcap-capture.1");
    assert!(capture.starts_with(".ie"), "not roff: {capture:.80}");
    // roff writes a flag's dash as \-: the man page of capture names -i and --json.
    assert!(capture.contains(r"\fB\-i\fR"), "no -i in {capture}");
    assert!(capture.contains(r"\fB\-\-json\fR"));
    assert!(page("ringcap.1").contains("ringcap\\-capture(1)"));
    for c in ["gen", "replay", "collect", "dist", "bench"] {
        assert!(dir.join(format!("ringcap-{c}.1")).exists(), "{c}");
    }
    // The hidden generator is not documented as a command.
    assert!(!dir.join("ringcap-generate.1").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn syntax_ok(shell: &str, script: &Path) {
    let o = Command::new(shell).arg("-n").arg(script).output().unwrap();
    assert!(
        o.status.success(),
        "{shell} -n {}: {}",
        script.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn completions_are_valid_scripts() {
    let dir = fresh_dir("completions");
    let d = dir.to_str().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        ringcap(&["generate", "completions", shell, d]);
    }
    let bash = dir.join("ringcap.bash");
    syntax_ok("bash", &bash);
    let text = std::fs::read_to_string(&bash).unwrap();
    assert!(text.contains("--cpus") && text.contains("--json"));
    assert!(dir.join("_ringcap").exists() && dir.join("ringcap.fish").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
