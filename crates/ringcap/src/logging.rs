//! Lines for people on stderr, from the binary and the library crates (through the `log` facade):
//! `ringcap: MESSAGE` as always, or with `--log-format json` one JSON object per line, as journald and log
//! shippers keep them: `{"type":"log","level":"warn","time_ns":...,"msg":"..."}` (the stats and summary lines
//! are JSON objects of their own types then too).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

static JSON: AtomicBool = AtomicBool::new(false);

/// The workspace's crates that log events (targets are module paths).
const OUR_CRATES: [&str; 7] = [
    "ringcap", "records", "index", "store", "session", "capture", "gen",
];

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata) -> bool {
        // Our crates only: a dependency's info line (aya, rustls) is not an event of the capture.
        let ours = OUR_CRATES
            .iter()
            .any(|c| m.target() == *c || m.target().starts_with(&format!("{c}::")));
        ours && m.level() <= log::Level::Info
    }

    fn log(&self, r: &log::Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        eprintln!("{}", line(r.level(), &r.args().to_string()));
    }

    fn flush(&self) {}
}

/// The line for one event in the chosen format.
fn line(level: log::Level, msg: &str) -> String {
    if JSON.load(Relaxed) {
        serde_json::json!({
            "type": "log",
            "level": level.as_str().to_ascii_lowercase(),
            "time_ns": sys::now_ns(),
            "msg": msg,
        })
        .to_string()
    } else {
        format!("ringcap: {msg}")
    }
}

/// Installs the logger (once, at start).
pub fn init() {
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// `--log-format json`.
pub fn set_json(on: bool) {
    JSON.store(on, Relaxed);
}

pub fn json() -> bool {
    JSON.load(Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_lines() {
        set_json(false);
        assert_eq!(
            line(log::Level::Info, "listening on eth0"),
            "ringcap: listening on eth0"
        );
        set_json(true);
        let v: serde_json::Value =
            serde_json::from_str(&line(log::Level::Warn, "disk \"full\"\nnow")).unwrap();
        set_json(false);
        assert_eq!(v["type"], "log");
        assert_eq!(v["level"], "warn");
        assert_eq!(v["msg"], "disk \"full\"\nnow");
        assert!(v["time_ns"].as_u64().unwrap() > 1_700_000_000_000_000_000);
    }
}
