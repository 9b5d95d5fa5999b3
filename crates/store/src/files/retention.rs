//! Retention: the complete files of a capture, oldest first, deleted only for `-W` and
//! `--disk-budget`, never the newest `keep_newest`.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use super::naming::{flows_path, index_path, AgeKey, DoneFile};
use super::{tell, EventFn};
use crate::archive_manifest::{self, Archived};
use crate::stats::WriterCounters;

/// The archive manifests of the output directories (`ringcap archive`), read again when one
/// changes. A directory with a manifest has archiving on: its files are deleted only once the
/// manifest lists them as verified, unless the disk is full.
#[derive(Default)]
struct ArchiveGate {
    /// Per directory: the manifest's (size, mtime) when read, and what it says.
    seen: Vec<(Option<Stamp>, Option<Archived>)>,
}

/// A manifest's (size, mtime in ns): read it again when this changes.
type Stamp = (u64, u64);

impl ArchiveGate {
    /// What directory `dir` (number `d`) has archived; None when archiving is off there.
    fn archived(&mut self, d: usize, dir: &Path) -> Option<&Archived> {
        if self.seen.len() <= d {
            self.seen.resize_with(d + 1, || (None, None));
        }
        let stamp = fs::metadata(archive_manifest::manifest_path(dir))
            .ok()
            .map(|m| (m.len(), archive_manifest::mtime_ns(&m)));
        if stamp != self.seen[d].0 {
            // Unreadable counts as empty: nothing is taken for archived that is not listed.
            let entries = stamp.map(|_| {
                archive_manifest::load(dir)
                    .ok()
                    .flatten()
                    .unwrap_or_default()
            });
            self.seen[d] = (stamp, entries.map(Archived::new));
        }
        self.seen[d].1.as_ref()
    }
}

/// How much space the files of one directory may use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// At most this many bytes of this capture's files (complete ones plus the one being written).
    Bytes(u64),
    /// Delete old files while the file system is fuller than this percentage, as `df` shows it.
    Percent(f64),
}

impl Budget {
    /// Parses `100MB`-style sizes (with `parse_size`) or `80%`.
    pub fn parse(
        s: &str,
        parse_size: impl Fn(&str) -> Result<u64, String>,
    ) -> Result<Self, String> {
        if let Some(p) = s.trim().strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("`{s}` is not a percentage: write e.g. 80%"))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(format!(
                    "`{s}`: a disk budget percentage must be in (0, 100]"
                ));
            }
            return Ok(Budget::Percent(v));
        }
        match parse_size(s)? {
            0 => Err(format!("`{s}`: a disk budget must be above 0")),
            n => Ok(Budget::Bytes(n)),
        }
    }
}

/// The rules that may change while a capture runs (SIGHUP with `--config`): read at every check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetentionRules {
    /// Per-directory space budget (`--disk-budget`).
    pub budget: Option<Budget>,
    /// Never delete the newest this many files, counting the open one (at least 1).
    pub keep_newest: usize,
}

/// A handle on a running capture's [`RetentionRules`]: set from outside, applied from the next write on.
#[derive(Clone, Debug)]
pub struct LiveRetention(Arc<Mutex<RetentionRules>>);

impl LiveRetention {
    pub fn new(rules: RetentionRules) -> LiveRetention {
        LiveRetention(Arc::new(Mutex::new(rules)))
    }

    pub fn get(&self) -> RetentionRules {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set(&self, rules: RetentionRules) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = rules;
    }
}

/// The complete files of one capture and the rules that delete them.
pub(crate) struct Retention {
    /// Complete files of this base in all directories, oldest first.
    done: BTreeMap<AgeKey, DoneFile>,
    /// The output directories, and the bytes of complete files of this capture in each.
    dirs: Vec<PathBuf>,
    done_bytes: Vec<u64>,
    max_files: Option<usize>,
    rules: LiveRetention,
    /// The budget is exceeded but only protected files are left (said once until it holds again).
    stuck: bool,
    archive: ArchiveGate,
    /// When the budget last found only files waiting for the archive: looking again (stats of
    /// every file) waits a second or a new file, not every write.
    archive_wait: Option<std::time::Instant>,
    counters: Arc<WriterCounters>,
    events: Option<EventFn>,
}

impl Retention {
    pub fn new(
        dirs: Vec<PathBuf>,
        done: BTreeMap<AgeKey, DoneFile>,
        max_files: Option<usize>,
        rules: LiveRetention,
        counters: Arc<WriterCounters>,
        events: Option<EventFn>,
    ) -> Retention {
        let mut done_bytes = vec![0; dirs.len()];
        for f in done.values() {
            done_bytes[f.dir] += f.bytes;
        }
        Retention {
            done,
            dirs,
            done_bytes,
            max_files,
            rules,
            stuck: false,
            archive: ArchiveGate::default(),
            archive_wait: None,
            counters,
            events,
        }
    }

    /// A file was completed and renamed into place.
    pub fn add(&mut self, f: DoneFile) {
        self.archive_wait = None;
        self.done_bytes[f.dir] += f.bytes;
        self.done.insert(f.key.clone(), f);
    }

    /// `-W`: deletes the oldest files until one more fits.
    pub fn make_room_for_one(&mut self) {
        if let Some(max) = self.max_files {
            while self.done.len() + 1 > max && self.delete_oldest(None, 0, false) {}
        }
    }

    /// Deletes the oldest complete files of directory `d` while it is over its budget
    /// (`open_bytes`: the open file's bytes there); never the open file nor the newest
    /// `keep_newest - 1` complete ones, and no more than needed.
    pub fn enforce(&mut self, d: usize, open_bytes: u64) {
        let rules = self.rules.get();
        if self
            .archive_wait
            .is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1))
        {
            return;
        }
        while self.over(d, open_bytes, rules.budget) {
            if !self.delete_oldest(Some(d), rules.keep_newest.max(1) - 1, false) {
                self.cannot_hold(d);
                return;
            }
        }
        self.stuck = false;
    }

    /// Directory `d` is full: a percentage budget deletes one file if the file system is over it
    /// now (then writing there may go on: true); a size budget is about this capture's bytes,
    /// which a full disk does not change, so it deletes nothing, unless archiving kept files over
    /// it. Either way a full disk deletes files not archived yet (each one named).
    pub fn on_disk_full(&mut self, d: usize) -> bool {
        let rules = self.rules.get();
        let over = self.over(d, 0, rules.budget);
        let percent = matches!(rules.budget, Some(Budget::Percent(_))) && over;
        let held_for_archive = matches!(rules.budget, Some(Budget::Bytes(_)))
            && over
            && self.archive.archived(d, &self.dirs[d]).is_some();
        if !(percent || held_for_archive) {
            return false;
        }
        if self.delete_oldest(Some(d), rules.keep_newest.max(1) - 1, true) {
            return true;
        }
        self.cannot_hold(d);
        false
    }

    /// Whether directory `d` is over the budget: this capture's bytes there (complete files and
    /// the open one) above SIZE, or the file system's use as `df` shows it above P %.
    fn over(&self, d: usize, open_bytes: u64, budget: Option<Budget>) -> bool {
        match budget {
            None => false,
            Some(Budget::Bytes(max)) => self.done_bytes[d] + open_bytes > max,
            Some(Budget::Percent(p)) => disk_use_percent(&self.dirs[d]).is_ok_and(|u| u > p),
        }
    }

    /// Says once (until the budget holds again) that only protected files are left.
    fn cannot_hold(&mut self, d: usize) {
        if std::mem::replace(&mut self.stuck, true) {
            return;
        }
        let rules = self.rules.get();
        let state = match (rules.budget, disk_use_percent(&self.dirs[d])) {
            (Some(Budget::Percent(p)), Ok(u)) => {
                format!("the file system is {u:.1}% full (budget {p}%) with other data")
            }
            _ => "this capture's newest files alone exceed it".to_string(),
        };
        let state = match self.archive.archived(d, &self.dirs[d]) {
            Some(_) => {
                format!("{state}, or its older files wait for `ringcap archive` to verify them")
            }
            None => state,
        };
        tell(
            &self.events,
            &format!(
                "disk budget cannot hold in {}: {state}; keeping the newest {} files of this \
                 capture (--keep-newest)",
                self.dirs[d].display(),
                rules.keep_newest
            ),
        );
    }

    /// Deletes the oldest complete file (of directory `d`, or of any), never one of the newest
    /// `protect` complete files; false if there is none to delete. Where archiving is on, the
    /// oldest one the archive has verified; with none, and `disk_full`, the oldest all the same,
    /// said by name.
    fn delete_oldest(&mut self, d: Option<usize>, protect: usize, disk_full: bool) -> bool {
        let deletable = self.done.len().saturating_sub(protect);
        let candidates: Vec<(AgeKey, usize, PathBuf)> = self
            .done
            .values()
            .take(deletable)
            .filter(|f| d.is_none_or(|d| f.dir == d))
            .map(|f| (f.key.clone(), f.dir, f.path.clone()))
            .collect();
        let dirs = &self.dirs;
        let archive = &mut self.archive;
        let archived = candidates.iter().find(|(_, dir, path)| {
            archive
                .archived(*dir, &dirs[*dir])
                .is_none_or(|a| a.capture_done(path))
        });
        let key = match (archived, candidates.first()) {
            (Some(c), _) => c.0.clone(),
            (None, Some(c)) if disk_full => {
                tell(
                    &self.events,
                    &format!(
                        "disk full: deleting {} before `ringcap archive` verified it",
                        c.2.display()
                    ),
                );
                c.0.clone()
            }
            (None, Some(_)) => {
                self.archive_wait = Some(std::time::Instant::now());
                return false;
            }
            (None, None) => return false,
        };
        let f = self.done.remove(&key).expect("listed");
        match fs::remove_file(&f.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tell(
                &self.events,
                &format!("cannot delete {}: {e}", f.path.display()),
            ),
        }
        // Its index, flow table and coverage go with it (absent when never written).
        let _ = fs::remove_file(index_path(&f.path));
        let _ = fs::remove_file(flows_path(&f.path));
        let _ = fs::remove_file(crate::coverage::coverage_path(&f.path));
        self.done_bytes[f.dir] = self.done_bytes[f.dir].saturating_sub(f.bytes);
        self.counters.files_deleted.fetch_add(1, Relaxed);
        self.counters.bytes_deleted.fetch_add(f.bytes, Relaxed);
        true
    }
}

/// Use of the file system holding `dir` in percent, computed as `df` does: used blocks
/// (`f_blocks - f_bfree`) over the blocks a user can have (used + `f_bavail`), so blocks reserved
/// for root count as neither. `df` rounds this up: `Use%` is its ceiling.
pub fn disk_use_percent(dir: &Path) -> io::Result<f64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs fills a plain struct for a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let used = s.f_blocks.saturating_sub(s.f_bfree) as f64;
    let usable = used + s.f_bavail as f64;
    Ok(if usable == 0.0 {
        0.0
    } else {
        100.0 * used / usable
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_sizes_and_percentages() {
        let size = |s: &str| s.parse::<u64>().map_err(|e| e.to_string());
        assert_eq!(Budget::parse("80%", size), Ok(Budget::Percent(80.0)));
        assert_eq!(Budget::parse("1000", size), Ok(Budget::Bytes(1000)));
        assert!(Budget::parse("150%", size).is_err());
        assert!(Budget::parse("0", size).is_err());
    }

    /// With an archive manifest in the directory, the budget deletes the oldest file the archive
    /// verified, waits for the others, and a full disk deletes an unarchived one, saying so.
    #[test]
    fn with_archiving_on_only_verified_files_go_unless_the_disk_is_full() {
        use crate::archive_manifest::{mtime_ns, save, ManifestEntry};
        let dir = tempfile::tempdir().unwrap();
        let mut done = BTreeMap::new();
        let names: Vec<String> = (1..=4)
            .map(|i| format!("c-20261201T10000{i}-00000{i}.pcap"))
            .collect();
        for (i, n) in names.iter().enumerate() {
            let path = dir.path().join(n);
            fs::write(&path, vec![0u8; 100]).unwrap();
            let key = (i as u64 + 1, n.clone());
            done.insert(
                key.clone(),
                DoneFile {
                    key,
                    path,
                    dir: 0,
                    bytes: 100,
                },
            );
        }
        // Only file 2 is archived (file 1 is older but not verified).
        let m = fs::metadata(dir.path().join(&names[1])).unwrap();
        let entry = ManifestEntry {
            file: names[1].clone(),
            dest: "s3://b/p".into(),
            key: format!("p/{}", names[1]),
            bytes: 100,
            mtime_ns: mtime_ns(&m),
            sha256: String::new(),
            etag: String::new(),
            verified: "etag-md5".into(),
            at_ns: 0,
        };
        save(dir.path(), &[entry]).unwrap();
        let said = Arc::new(Mutex::new(Vec::<String>::new()));
        let s2 = said.clone();
        let events: EventFn = Arc::new(move |m: &str| s2.lock().unwrap().push(m.to_string()));
        let rules = LiveRetention::new(RetentionRules {
            budget: Some(Budget::Bytes(250)),
            keep_newest: 1,
        });
        let mut r = Retention::new(
            vec![dir.path().to_path_buf()],
            done,
            None,
            rules,
            Arc::default(),
            Some(events),
        );
        r.enforce(0, 0);
        let exists = |i: usize| dir.path().join(&names[i]).exists();
        assert!(!exists(1), "the archived file is deleted");
        assert!(exists(0) && exists(2) && exists(3), "unarchived files wait");
        assert!(said
            .lock()
            .unwrap()
            .iter()
            .any(|m| m.contains("ringcap archive")));
        // The disk fills: the oldest unarchived file goes, by name.
        assert!(r.on_disk_full(0));
        assert!(!exists(0));
        assert!(said
            .lock()
            .unwrap()
            .iter()
            .any(|m| m.contains(&names[0]) && m.contains("before `ringcap archive` verified it")));
    }
}
