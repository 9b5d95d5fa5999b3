//! What of a store gets archived and under which key: every complete capture file (hidden
//! `.NAME.partial` files are being written and are skipped), with its coverage record, index and
//! flow table when they exist, under `PREFIX/sensor=NAME/date=YYYY-MM-DD/hour=HH/<file name>`. Date and hour (UTC)
//! come from the time stamp in a ringcap file's name (`<base>-YYYYMMDDTHHMMSS-<seq>.<ext>`, the
//! file's start), else from the file's first packet, else from its modification time.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::ArchiveError;

/// One local file to archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub path: PathBuf,
    /// The file name (the last part of the key).
    pub name: String,
    /// `sensor=NAME/date=…/hour=…/name`, below the prefix.
    pub rel_key: String,
}

const CAPTURE_EXTS: [&str; 3] = [".pcap", ".pcapng", ".cap"];
const COMPRESSED: [&str; 4] = ["", ".gz", ".zst", ".lz4"];

/// Whether `name` is a capture file's name (not hidden, known extension).
pub fn is_capture_name(name: &str) -> bool {
    !name.starts_with('.')
        && CAPTURE_EXTS
            .iter()
            .flat_map(|e| COMPRESSED.map(move |c| format!("{e}{c}")))
            .any(|ext| name.len() > ext.len() && name.ends_with(&ext))
}

/// `YYYY-MM-DD` and `HH` from a ringcap file name's stamp (`-YYYYMMDDTHHMMSS-`).
pub fn date_hour_from_name(name: &str) -> Option<(String, String)> {
    let b = name.as_bytes();
    // The stamp is the last 15 characters between two '-' with a 'T' at position 8.
    (0..b.len().saturating_sub(16)).rev().find_map(|i| {
        let s = name.get(i + 1..i + 16)?;
        let ok = b[i] == b'-'
            && b.get(i + 16) == Some(&b'-')
            && s.bytes().enumerate().all(|(j, c)| {
                if j == 8 {
                    c == b'T'
                } else {
                    c.is_ascii_digit()
                }
            });
        ok.then(|| {
            (
                format!("{}-{}-{}", &s[0..4], &s[4..6], &s[6..8]),
                s[9..11].to_string(),
            )
        })
    })
}

/// `YYYY-MM-DD` and `HH` (UTC) of `ns` since the epoch.
fn date_hour_of(ns: u64) -> (String, String) {
    let t = units::time::utc_seconds(ns); // "YYYY-MM-DD HH:MM:SS"
    (t[0..10].to_string(), t[11..13].to_string())
}

/// The first packet's time of a capture file (any format, compressed or not).
fn first_packet_ns(path: &Path) -> Option<u64> {
    let mut r = store::open_capture(path).ok()?;
    r.next_packet()?.ok().map(|p| p.ts_ns)
}

fn date_hour(path: &Path, name: &str) -> (String, String) {
    if let Some(dh) = date_hour_from_name(name) {
        return dh;
    }
    let ns = first_packet_ns(path).unwrap_or_else(|| {
        fs::metadata(path)
            .map(|m| store::archive_manifest::mtime_ns(&m))
            .unwrap_or(0)
    });
    date_hour_of(ns)
}

/// The items of store directory `dir` for `sensor`, oldest capture first (by name: ringcap's
/// names sort by time within a base), each capture followed by its coverage, flow table and index
/// (the index last: one in the archive says the rest went before it). Captures `hold` says are
/// not ready (their index is still being written) are left with their companions for later.
pub fn list(
    dir: &Path,
    sensor: &str,
    hold: Option<&crate::Hold>,
) -> Result<Vec<Item>, ArchiveError> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map_err(|e| ArchiveError::io(dir, e))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_capture_name(n))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let path = dir.join(&name);
        if hold.is_some_and(|h| h(&path)) {
            continue;
        }
        let (date, hour) = date_hour(&path, &name);
        let part = format!("sensor={sensor}/date={date}/hour={hour}");
        for p in [
            path.clone(),
            store::coverage_path(&path),
            store::flows_path(&path),
            store::index_path(&path),
        ] {
            if !p.is_file() {
                continue;
            }
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            out.push(Item {
                rel_key: format!("{part}/{n}"),
                name: n.to_string(),
                path: p.clone(),
            });
        }
    }
    Ok(out)
}

/// Whether a capture is being written in `dir` (a hidden `.NAME.partial`): then the archive runs at
/// SCHED_IDLE, as a query does.
pub fn capture_running(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| store::container::is_partial(&e.path()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_come_from_ringcap_names() {
        assert_eq!(
            date_hour_from_name("cap-x-20261201T235959-000001.pcap.zst"),
            Some(("2026-12-01".into(), "23".into()))
        );
        assert_eq!(date_hour_from_name("trace.pcap"), None);
        assert_eq!(date_hour_from_name("a-20261301x235959-1.pcap"), None);
        assert_eq!(date_hour_of(0), ("1970-01-01".into(), "00".into()));
    }

    #[test]
    fn only_complete_capture_files_and_their_companions_are_listed() {
        let d = tempfile::tempdir().unwrap();
        let cap = "c-20261201T100000-000001.pcap";
        for n in [
            cap,
            "c-20261201T100000-000001.pcap.idx",
            "c-20261201T100000-000001.pcap.coverage.json",
            "c-20261201T110000-000002.pcap",
            ".c-20261201T110000-000002.pcap.partial",
            "notes.txt",
        ] {
            fs::write(d.path().join(n), b"x").unwrap();
        }
        let items = list(d.path(), "s1", None).unwrap();
        let keys: Vec<&str> = items.iter().map(|i| i.rel_key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "sensor=s1/date=2026-12-01/hour=10/c-20261201T100000-000001.pcap",
                "sensor=s1/date=2026-12-01/hour=10/c-20261201T100000-000001.pcap.coverage.json",
                "sensor=s1/date=2026-12-01/hour=10/c-20261201T100000-000001.pcap.idx",
                "sensor=s1/date=2026-12-01/hour=11/c-20261201T110000-000002.pcap",
            ]
        );
        assert!(capture_running(d.path()));
        // A capture held back (its index is being written) waits with its companions.
        let hold: crate::Hold =
            std::sync::Arc::new(|p: &Path| p.ends_with("c-20261201T100000-000001.pcap"));
        let items = list(d.path(), "s1", Some(&hold)).unwrap();
        assert_eq!(items.len(), 1, "{items:?}");
    }
}
