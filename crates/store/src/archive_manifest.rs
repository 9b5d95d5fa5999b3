//! The archive manifest of a store directory: which of its files have a verified copy in object
//! storage (written by `ringcap archive`, read by retention). One JSON object per line in
//! `DIR/.ringcap-archive/manifest.jsonl`, replaced whole (write, fsync, rename, fsync the
//! directory), so a reader sees the old or the new list, never half of one.
//!
//! The rule: an entry is added only after the object under its final key was verified (size and
//! checksum, see docs/archive.md), so the manifest lists verified objects only. An entry counts for
//! a local file only while the file still has the size and modification time it had when uploaded.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The hidden directory of the archive's state in a store directory.
pub const ARCHIVE_DIR: &str = ".ringcap-archive";

/// One verified object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// The local file's name (in the store directory).
    pub file: String,
    /// Destination, `s3://bucket/prefix`.
    pub dest: String,
    /// Object key in the bucket.
    pub key: String,
    pub bytes: u64,
    /// The local file's modification time (ns) when it was uploaded.
    pub mtime_ns: u64,
    /// SHA-256 of the bytes, hex, when a read-back verified the copy; empty for "etag-md5" (the
    /// ETag is the checksum kept; `ringcap archive` no longer hashes each file a second time).
    pub sha256: String,
    /// The ETag the object store reported, without quotes.
    pub etag: String,
    /// How the copy was verified: "etag-md5" (the store's MD5, or MD5 of part MD5s, equals ours)
    /// or "read-back-sha256" (the object read back hashes to our SHA-256).
    pub verified: String,
    /// When it was verified (ns since the epoch).
    pub at_ns: u64,
}

/// `DIR/.ringcap-archive/manifest.jsonl`.
pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(ARCHIVE_DIR).join("manifest.jsonl")
}

/// The entries of `dir`'s manifest; None when there is none (archiving is off for `dir`). A line
/// that does not parse is skipped (logged by nobody: the archive re-verifies what it does not
/// find), so a damaged manifest can only make a file look unarchived, never archived.
pub fn load(dir: &Path) -> io::Result<Option<Vec<ManifestEntry>>> {
    let text = match fs::read_to_string(manifest_path(dir)) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    ))
}

/// Replaces `dir`'s manifest with `entries`: a hidden temporary file, fsync, rename, fsync of the
/// directory. A kill at any point leaves the previous manifest or the new one.
pub fn save(dir: &Path, entries: &[ManifestEntry]) -> io::Result<()> {
    let path = manifest_path(dir);
    let parent = path.parent().expect("manifest has a directory");
    fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(".manifest.jsonl.{}.tmp", std::process::id()));
    let mut text = String::new();
    for e in entries {
        text.push_str(&serde_json::to_string(e).map_err(io::Error::other)?);
        text.push('\n');
    }
    let mut f = fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, &path)?;
    fs::File::open(parent)?.sync_all()
}

/// Modification time of `m` in ns.
pub fn mtime_ns(m: &fs::Metadata) -> u64 {
    (m.mtime() as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(m.mtime_nsec() as u64)
}

/// The verified entries by local file name, for answering "is this file archived?".
#[derive(Default, Debug)]
pub struct Archived(HashMap<String, Vec<ManifestEntry>>);

impl Archived {
    pub fn new(entries: Vec<ManifestEntry>) -> Archived {
        let mut m: HashMap<String, Vec<ManifestEntry>> = HashMap::new();
        for e in entries {
            m.entry(e.file.clone()).or_default().push(e);
        }
        Archived(m)
    }

    /// Whether `path` (a file of the manifest's directory) has a verified copy of its current
    /// content (same size and mtime) at some destination. A file that is gone counts as archived.
    pub fn has(&self, path: &Path) -> bool {
        let Ok(m) = fs::metadata(path) else {
            return true;
        };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        self.0.get(name).is_some_and(|es| {
            es.iter()
                .any(|e| e.bytes == m.len() && e.mtime_ns == mtime_ns(&m))
        })
    }

    /// Whether a capture file may be deleted: it, its index, its flow table and its coverage
    /// (those that exist) are all archived.
    pub fn capture_done(&self, capture: &Path) -> bool {
        self.has(capture)
            && self.has(&crate::index_path(capture))
            && self.has(&crate::flows_path(capture))
            && self.has(&crate::coverage_path(capture))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(file: &str, bytes: u64, mtime_ns: u64) -> ManifestEntry {
        ManifestEntry {
            file: file.into(),
            dest: "s3://b/p".into(),
            key: format!("p/{file}"),
            bytes,
            mtime_ns,
            sha256: "00".into(),
            etag: "11".into(),
            verified: "etag-md5".into(),
            at_ns: 1,
        }
    }

    #[test]
    fn saved_manifests_load_back_and_torn_lines_are_skipped() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load(d.path()).unwrap(), None);
        let es = vec![entry("a.pcap", 10, 5), entry("b.pcap", 20, 6)];
        save(d.path(), &es).unwrap();
        assert_eq!(load(d.path()).unwrap(), Some(es.clone()));
        // A line cut short (another writer's crash would not do this, a disk might) is left out.
        let mut text = fs::read_to_string(manifest_path(d.path())).unwrap();
        text.push_str("{\"file\":\"c.pc");
        fs::write(manifest_path(d.path()), text).unwrap();
        assert_eq!(load(d.path()).unwrap(), Some(es));
    }

    #[test]
    fn a_capture_is_done_only_when_it_and_its_index_match_the_manifest() {
        let d = tempfile::tempdir().unwrap();
        let cap = d.path().join("c-20261201T100000-000001.pcap");
        fs::write(&cap, b"0123456789").unwrap();
        let m = fs::metadata(&cap).unwrap();
        let a = Archived::new(vec![entry(
            "c-20261201T100000-000001.pcap",
            10,
            mtime_ns(&m),
        )]);
        assert!(a.capture_done(&cap));
        // An index appeared after the upload: not archived yet, so neither is the capture.
        fs::write(crate::index_path(&cap), b"idx").unwrap();
        assert!(!a.capture_done(&cap));
        // Same name, other size: not this content.
        let b = Archived::new(vec![entry(
            "c-20261201T100000-000001.pcap",
            9,
            mtime_ns(&m),
        )]);
        assert!(!b.has(&cap));
    }
}
