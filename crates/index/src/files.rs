//! Which files of a store are capture files: what `ringcap index` indexes and a query reads.

use std::io;
use std::path::{Path, PathBuf};

/// Why a store could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// A path given does not exist or cannot be looked at (the user must change the command).
    #[error("{}: {error}", path.display())]
    NoSuchPath { path: PathBuf, error: io::Error },
    /// A directory exists but could not be read.
    #[error("{}: {error}", path.display())]
    Unreadable { path: PathBuf, error: io::Error },
}

/// The capture files under `paths` (files as given, directories searched one level), sorted per
/// directory. With `partial`, also the files a capture is writing (hidden `.NAME.partial`), for
/// queries.
pub fn capture_files(paths: &[PathBuf], partial: bool) -> Result<Vec<PathBuf>, ListError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|error| ListError::NoSuchPath {
            path: p.clone(),
            error,
        })?;
        if !meta.is_dir() {
            out.push(p.clone());
            continue;
        }
        let entries = std::fs::read_dir(p).map_err(|error| ListError::Unreadable {
            path: p.clone(),
            error,
        })?;
        let mut v: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|f| is_capture_name(f) || (partial && is_partial_capture(f)))
            .collect();
        v.sort();
        out.extend(v);
    }
    Ok(out)
}

/// A capture file being written: `.NAME.partial` where NAME is a capture file's name.
pub fn is_partial_capture(p: &Path) -> bool {
    store::container::finished_name(p).is_some_and(|done| is_capture_name(&done))
}

/// A capture file by its name (hidden files, being written, are not).
pub fn is_capture_name(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name.starts_with('.') {
        return false;
    }
    let base = [".zst", ".lz4", ".gz"]
        .iter()
        .find_map(|c| name.strip_suffix(c))
        .unwrap_or(name);
    [".pcap", ".pcapng", ".cap"]
        .iter()
        .any(|e| base.ends_with(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_names_and_files_being_written() {
        for yes in ["a.pcap", "a.pcapng.zst", "b.cap.gz", "c.pcap.lz4"] {
            assert!(is_capture_name(Path::new(yes)), "{yes}");
        }
        for no in [".a.pcap.partial", "a.pcap.idx", "notes.txt", ".hidden.pcap"] {
            assert!(!is_capture_name(Path::new(no)), "{no}");
        }
        assert!(is_partial_capture(Path::new("/d/.cap-1.pcap.zst.partial")));
        assert!(!is_partial_capture(Path::new("/d/.cap-1.pcap.idx.partial")));
    }
}
