//! The dataset layout of header-record files (`ringcap collect --sensor NAME`):
//! `DIR/sensor=NAME/date=YYYY-MM-DD/hour=HH/records-<start>-<n>.parquet`, the layout `ringcap
//! archive` gives flow tables, so Spark, Trino or DuckDB read every sensor's records (and flows) as
//! one partitioned table (docs/datasets.md). Date and hour are the UTC hour in which the collector
//! opened the file's spool; a spool never outlives its hour, so every record of a file arrived in
//! that hour.

use std::fs::{self, DirBuilder, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The footer's `ringcap.schema` of a records file: `records/MAJOR.MINOR` (docs/datasets.md says
/// when each part changes).
pub const SCHEMA: &str = "records/1.1";

/// Whether `name` can be a sensor's name: it is one path component and one partition value, so
/// not empty and without '/', '=' or NUL (the rule of `ringcap archive --sensor`, plus NUL).
pub fn check_sensor(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(['/', '=', '\0']) {
        return Err(format!("--sensor `{name}`: a name without '/', '=' or NUL"));
    }
    Ok(())
}

/// The start of the UTC hour `t` falls in, as seconds since the epoch.
pub fn hour_of(t: SystemTime) -> u64 {
    let s = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    s - s % 3600
}

/// `sensor=NAME/date=YYYY-MM-DD/hour=HH` of the hour starting at `hour` (seconds since the epoch).
pub fn partition(sensor: &str, hour: u64) -> PathBuf {
    let t = units::time::utc_seconds(hour.saturating_mul(1_000_000_000)); // "YYYY-MM-DD HH:MM:SS"
    PathBuf::from(format!(
        "sensor={sensor}/date={}/hour={}",
        &t[0..10],
        &t[11..13]
    ))
}

/// Creates the directories of `rel` below `root` that are missing: mode 0700, or 0750 and the
/// shared group with `--group` (as the files in them are 0600 or 0640). Each new directory and its
/// parent are synced, so a spool's name in it survives a crash. Returns `root/rel`.
pub fn create_dirs(root: &Path, rel: &Path) -> io::Result<PathBuf> {
    let group = sys::file_group();
    let mut dir = root.to_path_buf();
    for part in rel.components() {
        let parent = dir.clone();
        dir.push(part);
        if dir.is_dir() {
            continue;
        }
        let mode = if group.is_some() { 0o750 } else { 0o700 };
        match DirBuilder::new().mode(mode).create(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot create {}: {e}", dir.display()),
                ))
            }
            _ => {}
        }
        if let Some(gid) = group {
            std::os::unix::fs::chown(&dir, None, Some(gid))?;
            // The umask may have taken the group's bits away.
            fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o750))?;
        }
        File::open(&dir).and_then(|d| d.sync_all())?;
        File::open(&parent).and_then(|d| d.sync_all())?;
    }
    Ok(dir)
}

/// Every `sensor=*/date=*/hour=*` directory below `root` (real directories, not symlinks), sorted:
/// where a crashed run may have left spools.
pub fn partition_dirs(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut level = vec![root.to_path_buf()];
    for prefix in ["sensor=", "date=", "hour="] {
        let mut next = Vec::new();
        for d in &level {
            for e in fs::read_dir(d)?.flatten() {
                let name = e.file_name();
                let real_dir = e.file_type().is_ok_and(|t| t.is_dir());
                if real_dir && name.to_string_lossy().starts_with(prefix) {
                    next.push(e.path());
                }
            }
        }
        level = next;
    }
    level.sort();
    Ok(level)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    #[test]
    fn partition_names_the_utc_hour() {
        // 2026-12-01 23:59:59 UTC and one second later.
        let t = UNIX_EPOCH + Duration::from_secs(1_796_169_599);
        assert_eq!(hour_of(t), 1_796_166_000);
        assert_eq!(
            partition("s1", hour_of(t)),
            Path::new("sensor=s1/date=2026-12-01/hour=23")
        );
        let next = hour_of(t + Duration::from_secs(1));
        assert_eq!(
            partition("s1", next),
            Path::new("sensor=s1/date=2026-12-02/hour=00")
        );
    }

    #[test]
    fn sensor_names_are_one_path_component() {
        assert!(check_sensor("edge-1.fra").is_ok());
        for bad in ["", "a/b", "a=b", "a\0b"] {
            assert!(check_sensor(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn directories_are_owner_only_and_found_again() {
        let root = tempfile::tempdir().unwrap();
        let rel = partition("s1", 1_796_166_000);
        let dir = create_dirs(root.path(), &rel).unwrap();
        assert_eq!(dir, root.path().join(&rel));
        let mut p = root.path().to_path_buf();
        for c in rel.components() {
            p.push(c);
            let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", p.display());
        }
        // Again: nothing to create, no error.
        create_dirs(root.path(), &rel).unwrap();
        let other = create_dirs(root.path(), &partition("s2", 0)).unwrap();
        fs::create_dir_all(root.path().join("sensor=s1/date=2026-12-01/not-an-hour")).unwrap();
        assert_eq!(partition_dirs(root.path()).unwrap(), vec![dir, other]);
    }
}
