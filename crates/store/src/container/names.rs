//! The name of a file still being written: `.NAME.partial` next to where `NAME` will be. Hidden
//! (no listing of complete files shows it), and renamed into place when complete, so a reader
//! never takes a growing file for a whole one.

use std::path::{Path, PathBuf};

/// `dir/NAME` → `dir/.NAME.partial`.
pub fn partial_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial"))
}

/// `dir/.NAME.partial` → `dir/NAME`; None for other names.
pub fn finished_name(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let inner = name.strip_prefix('.')?.strip_suffix(".partial")?;
    (!inner.is_empty()).then(|| path.with_file_name(inner))
}

/// Whether `path` names a file still being written.
pub fn is_partial(path: &Path) -> bool {
    finished_name(path).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_names_go_there_and_back() {
        let f = Path::new("/d/cap-x-000001.pcap.zst");
        let p = partial_name(f);
        assert_eq!(p, Path::new("/d/.cap-x-000001.pcap.zst.partial"));
        assert_eq!(finished_name(&p).as_deref(), Some(f));
        assert!(is_partial(&p));
        assert!(!is_partial(f));
        assert_eq!(finished_name(Path::new("/d/..partial")), None);
        assert_eq!(finished_name(Path::new("/d/x.partial")), None);
    }
}
