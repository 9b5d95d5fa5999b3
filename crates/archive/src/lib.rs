//! archive: copies a store's completed capture files, with their index and flow table, to
//! S3-compatible object storage, and knows what is there (the manifest, see
//! `store::archive_manifest`). One pass lists the store, skips what the manifest lists as verified
//! with the same size and mtime, uploads the rest oldest first, several files at once (multipart for
//! large files, resumable after a kill), verifies each copy and only then adds it to the manifest.
//! A pass stops at the first failure: it starts nothing more, the transfers in flight end after
//! their parts being sent, everything verified so far is kept, and the next pass resumes.

mod error;
mod expire;
mod layout;
mod remote;
mod target;
mod upload;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

use futures::StreamExt;

use object_store::aws::AmazonS3;
use object_store::path::Path as Key;
use object_store::ObjectStore;
use store::archive_manifest::{self as manifest, ManifestEntry};

pub use error::ArchiveError;
pub use expire::{ExpireReport, Retention};
pub use layout::{date_hour_from_name, is_capture_name, Item};
pub use remote::{prune, FetchReport, Listing, Reader};
pub use target::{Credentials, Dest, Endpoint};
pub use upload::How;

/// Default part size of multipart uploads, and the size above which a file is sent in parts.
pub const DEFAULT_PART_SIZE: u64 = 16 << 20;
/// S3's smallest part (but the last).
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// Files sent at once by default (rclone's `--transfers` default too).
pub const DEFAULT_TRANSFERS: usize = 4;
/// Files sent at once at most (each holds a connection; parts in flight are bounded apart).
pub const MAX_TRANSFERS: usize = 16;

/// What to archive where.
pub struct Options {
    /// The store directory.
    pub dir: PathBuf,
    pub dest: Dest,
    pub endpoint: Endpoint,
    pub sensor: String,
    /// Bytes per second on average, or unlimited.
    pub max_rate: Option<u64>,
    pub part_size: u64,
    /// Files sent at once (1..=[`MAX_TRANSFERS`]); their parts in flight share one budget.
    pub transfers: usize,
    /// What the archive keeps of this sensor (age, bytes).
    pub retention: Retention,
    /// Captures to leave for a later pass (a capture archiving its own files holds those whose
    /// index is still being written).
    pub hold: Option<Hold>,
}

/// Says whether a complete capture file is to wait for a later pass.
pub type Hold = std::sync::Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// Something a user may want to see while a pass runs.
pub enum Event<'a> {
    /// The pass found `objects` new files of `bytes` in total to archive.
    Planned { objects: usize, bytes: u64 },
    /// `n` more bytes were sent (or found already sent, for a resumed upload).
    Sent(u64),
    /// A file is archived and verified.
    Archived {
        item: &'a Item,
        key: &'a str,
        bytes: u64,
        how: How,
        method: &'a str,
    },
}

/// What one pass did.
#[derive(Default, Debug, Clone, serde::Serialize)]
pub struct PassReport {
    pub uploaded: usize,
    pub uploaded_bytes: u64,
    /// Found already in the archive with our checksum (not sent again).
    pub present: usize,
    /// Listed in the manifest already.
    pub current: usize,
}

/// A connected archive for one store directory; holds the store's archive lock.
pub struct Archiver {
    opts: Options,
    s3: AmazonS3,
    rt: tokio::runtime::Runtime,
    endpoint_name: String,
    _lock: std::fs::File,
    /// Set (SIGINT/SIGTERM of `archive --watch`): a pass ends after the parts being sent.
    stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// Takes `DIR/.ringcap-archive/lock` so two archivers never interleave manifest writes.
fn lock(dir: &Path) -> Result<std::fs::File, ArchiveError> {
    let d = dir.join(manifest::ARCHIVE_DIR);
    std::fs::create_dir_all(&d).map_err(|e| ArchiveError::io(&d, e))?;
    let p = d.join("lock");
    let f = std::fs::File::create(&p).map_err(|e| ArchiveError::io(&p, e))?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(ArchiveError::Usage(format!(
            "another `ringcap archive` is running on {} (it holds {})",
            dir.display(),
            p.display()
        )));
    }
    Ok(f)
}

impl Archiver {
    /// Checks the store directory, takes its lock, finds credentials and builds the client (no
    /// request yet: see [`Archiver::check`]).
    pub fn new(opts: Options) -> Result<Archiver, ArchiveError> {
        if !opts.dir.is_dir() {
            return Err(ArchiveError::Usage(format!(
                "{}: not a directory (give the store directory capture -w writes into)",
                opts.dir.display()
            )));
        }
        if opts.sensor.is_empty() || opts.sensor.contains(['/', '=']) {
            return Err(ArchiveError::Usage(format!(
                "--sensor `{}`: a name without '/' or '='",
                opts.sensor
            )));
        }
        if !(1..=MAX_TRANSFERS).contains(&opts.transfers) {
            return Err(ArchiveError::Usage(format!(
                "--transfers {}: between 1 and {MAX_TRANSFERS}",
                opts.transfers
            )));
        }
        if opts.part_size < MIN_PART_SIZE {
            return Err(ArchiveError::Usage(format!(
                "part size {} is below S3's minimum of 5 MiB",
                opts.part_size
            )));
        }
        let lock = lock(&opts.dir)?;
        let creds = Credentials::find(opts.endpoint.profile.as_deref())?;
        log::debug!("credentials from {}", creds.source);
        let s3 = target::client(&opts.dest, &opts.endpoint, &creds)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ArchiveError::Store(format!("async runtime: {e}")))?;
        let endpoint_name = opts.endpoint.url.clone().unwrap_or_else(|| "AWS S3".into());
        Ok(Archiver {
            opts,
            s3,
            rt,
            endpoint_name,
            _lock: lock,
            stop: None,
        })
    }

    /// A pass ends after the parts being sent once `flag` is set (what it did not send is left for
    /// the next run, a multipart upload with its journal; nothing is half there: the manifest names
    /// only verified objects).
    pub fn stop_when(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.stop = Some(flag);
    }

    /// `PREFIX/sensor=NAME` as a key.
    fn sensor_key(&self) -> String {
        match self.opts.dest.prefix.as_str() {
            "" => format!("sensor={}", self.opts.sensor),
            p => format!("{p}/sensor={}", self.opts.sensor),
        }
    }

    /// One listing of the sensor's prefix: proves the endpoint answers, the bucket exists and the
    /// credentials are accepted, before any upload.
    pub fn check(&self) -> Result<(), ArchiveError> {
        let prefix = Key::from(self.sensor_key().as_str());
        self.rt
            .block_on(self.s3.list_with_delimiter(Some(&prefix)))
            .map(|_| ())
            .map_err(|e| {
                error::classify(
                    e,
                    &format!("listing {}", self.opts.dest.url()),
                    &self.endpoint_name,
                    &self.opts.dest.bucket,
                )
            })
    }

    /// Deletes this sensor's archived captures the retention does not keep (none if it is off).
    /// The local manifest still names them, so they are not uploaded again.
    pub fn expire(&self) -> Result<ExpireReport, ArchiveError> {
        if self.opts.retention.is_off() {
            return Ok(ExpireReport::default());
        }
        self.rt.block_on(expire::expire(
            &self.s3,
            &self.sensor_key(),
            self.opts.retention,
            &self.opts.dest.url(),
            &self.endpoint_name,
            &self.opts.dest.bucket,
        ))
    }

    /// Makes the store's retention wait for this archive from now on: an empty manifest where
    /// there is none (retention deletes only what a manifest lists, once one exists).
    pub fn gate_retention(&self) -> Result<(), ArchiveError> {
        let dir = &self.opts.dir;
        let path = manifest::manifest_path(dir);
        match manifest::load(dir) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => manifest::save(dir, &[]).map_err(|e| ArchiveError::io(&path, e)),
            Err(e) => Err(ArchiveError::io(&path, e)),
        }
    }

    /// Whether a capture is writing into the store now.
    pub fn capture_running(&self) -> bool {
        layout::capture_running(&self.opts.dir)
    }

    /// Archives what is new in the store; see the crate's doc.
    pub fn pass(&mut self, ev: &mut dyn FnMut(Event)) -> Result<PassReport, ArchiveError> {
        let dir = self.opts.dir.clone();
        let mut entries = manifest::load(&dir)
            .map_err(|e| ArchiveError::io(&manifest::manifest_path(&dir), e))?
            .unwrap_or_default();
        let dest = self.opts.dest.url();
        let mut report = PassReport::default();
        let (todo, current) = not_archived(
            &dir,
            &self.opts.sensor,
            &dest,
            self.opts.hold.as_ref(),
            &entries,
        )?;
        report.current = current;
        ev(Event::Planned {
            objects: todo.len(),
            bytes: todo.iter().map(|t| t.1).sum(),
        });
        let mut jobs = Vec::with_capacity(todo.len());
        for (item, bytes, mtime_ns) in todo {
            let key_text = match self.opts.dest.prefix.as_str() {
                "" => item.rel_key.clone(),
                p => format!("{p}/{}", item.rel_key),
            };
            let key = Key::parse(&key_text)
                .map_err(|e| ArchiveError::Usage(format!("object key `{key_text}`: {e}")))?;
            jobs.push(Job {
                item,
                key,
                key_text,
                bytes,
                mtime_ns,
            });
        }
        let ev = std::cell::RefCell::new(ev);
        let sent = |n| (ev.borrow_mut())(Event::Sent(n));
        let pace = std::cell::RefCell::new(upload::Pace::new(self.opts.max_rate));
        let parts = tokio::sync::Semaphore::new(upload::PARTS_IN_FLIGHT_TOTAL);
        let halt = std::cell::Cell::new(false);
        let up = upload::Uploader {
            s3: &self.s3,
            endpoint: &self.endpoint_name,
            bucket: &self.opts.dest.bucket,
            part_size: self.opts.part_size,
            pace: &pace,
            parts: &parts,
            journals: dir.join(manifest::ARCHIVE_DIR).join("uploads"),
            sent: &sent,
            halt: &halt,
        };
        let stop = self.stop.clone();
        let stopped = || stop.as_ref().is_some_and(|f| f.load(Relaxed));
        let transfers = self.opts.transfers;
        let mut first_err = None;
        // Apart from `jobs`: the transfers in flight borrow their jobs while states change.
        let mut states = vec![JobState::Waiting; jobs.len()];
        // Verified objects the manifest on disk does not list yet, and when it was last saved.
        let mut unsaved: Vec<(usize, upload::Verified)> = Vec::new();
        let mut last_save = std::time::Instant::now();
        self.rt.block_on(async {
            let mut in_flight = futures::stream::FuturesUnordered::new();
            loop {
                if stopped() {
                    halt.set(true);
                }
                while !halt.get() && in_flight.len() < transfers {
                    let Some(i) = next_job(&jobs, &states) else {
                        break;
                    };
                    states[i] = JobState::Sending;
                    let (up, job) = (&up, &jobs[i]);
                    in_flight.push(async move {
                        let r = up
                            .put_file(&job.item.path, &job.key, job.bytes, job.mtime_ns)
                            .await;
                        (i, r)
                    });
                }
                let (i, r) = tokio::select! {
                    Some(done) = in_flight.next(), if !in_flight.is_empty() => done,
                    // A look at the stop flag now and then (a signal sets it; nothing wakes us).
                    _ = tokio::time::sleep(STOP_POLL), if !in_flight.is_empty() => continue,
                    else => break,
                };
                let v = match r {
                    Ok(Some(v)) => v,
                    Ok(None) => continue, // halted before it was sent: the next run sends it
                    Err(e) => {
                        // What is in flight ends after its parts being sent (journaled); the
                        // first failure is the pass's.
                        halt.set(true);
                        first_err.get_or_insert(e);
                        continue;
                    }
                };
                let job = &jobs[i];
                // Verified: only now may the manifest name it.
                entries.retain(|e| !(e.file == job.item.name && e.dest == dest));
                entries.push(ManifestEntry {
                    file: job.item.name.clone(),
                    dest: dest.clone(),
                    key: job.key_text.clone(),
                    bytes: job.bytes,
                    mtime_ns: job.mtime_ns,
                    sha256: v.sha256.clone(),
                    etag: v.etag.clone(),
                    verified: v.method.to_string(),
                    at_ns: now_ns(),
                });
                unsaved.push((i, v));
                // Its companions may go now (the index waits for its capture to be verified).
                states[i] = JobState::Done;
                // Saved (two fsyncs) at most once per MANIFEST_EVERY, and when nothing is left in
                // flight: a kill in between costs the next run a look-up of those objects, never
                // a listing of an unverified one.
                if in_flight.is_empty() || last_save.elapsed() >= MANIFEST_EVERY {
                    last_save = std::time::Instant::now();
                    if let Err(e) =
                        save_and_report(&dir, &entries, &mut unsaved, &jobs, &mut report, &ev)
                    {
                        halt.set(true);
                        first_err.get_or_insert(e);
                    }
                }
            }
        });
        if let Err(e) = save_and_report(&dir, &entries, &mut unsaved, &jobs, &mut report, &ev) {
            first_err.get_or_insert(e);
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
}

/// Saves the manifest, then counts and reports the objects it now lists for the first time (an object
/// is archived once the manifest names it: local retention reads the manifest).
fn save_and_report(
    dir: &Path,
    entries: &[ManifestEntry],
    unsaved: &mut Vec<(usize, upload::Verified)>,
    jobs: &[Job],
    report: &mut PassReport,
    ev: &std::cell::RefCell<&mut dyn FnMut(Event)>,
) -> Result<(), ArchiveError> {
    if unsaved.is_empty() {
        return Ok(());
    }
    manifest::save(dir, entries).map_err(|e| ArchiveError::io(&manifest::manifest_path(dir), e))?;
    for (i, v) in unsaved.drain(..) {
        let job = &jobs[i];
        match v.how {
            How::Present => report.present += 1,
            How::Uploaded { .. } => {
                report.uploaded += 1;
                report.uploaded_bytes += job.bytes;
            }
        }
        (ev.borrow_mut())(Event::Archived {
            item: &job.item,
            key: &job.key_text,
            bytes: job.bytes,
            how: v.how,
            method: v.method,
        });
    }
    Ok(())
}

/// How often a pass saves its manifest at most while transfers run (each save is two fsyncs on the
/// thread that drives the transfers; BENCHMARKS.md "Beyond one sensor" measured 0.88 s of 10.7 s).
const MANIFEST_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How often a pass looks at its stop flag while transfers run.
const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// One file of a pass.
struct Job {
    item: Item,
    key: Key,
    key_text: String,
    bytes: u64,
    mtime_ns: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum JobState {
    Waiting,
    Sending,
    Done,
}

/// The first waiting job that may start, in the listing's order (oldest capture first). A capture's
/// index waits until its capture and other companions of this pass are verified: an index in the
/// archive says the rest of its capture went first (docs/archive.md).
fn next_job(jobs: &[Job], states: &[JobState]) -> Option<usize> {
    let waits = |j: &Job| {
        let Some(capture) = j.item.name.strip_suffix(".idx") else {
            return false;
        };
        jobs.iter().zip(states).any(|(o, s)| {
            *s != JobState::Done
                && (o.item.name == capture
                    || o.item
                        .name
                        .strip_prefix(capture)
                        .is_some_and(|rest| rest.starts_with('.') && !rest.ends_with(".idx")))
        })
    };
    (0..jobs.len()).find(|&i| states[i] == JobState::Waiting && !waits(&jobs[i]))
}

/// The items of `dir` the manifest's `entries` do not list as archived to `dest` with their
/// current size and mtime, with (bytes, mtime); and how many it does list.
#[allow(clippy::type_complexity)]
fn not_archived(
    dir: &Path,
    sensor: &str,
    dest: &str,
    hold: Option<&Hold>,
    entries: &[ManifestEntry],
) -> Result<(Vec<(Item, u64, u64)>, usize), ArchiveError> {
    let mut todo = Vec::new();
    let mut current = 0;
    for item in layout::list(dir, sensor, hold)? {
        let Ok(m) = std::fs::metadata(&item.path) else {
            continue; // deleted since the listing
        };
        let mtime = manifest::mtime_ns(&m);
        let listed = entries.iter().any(|e| {
            e.file == item.name && e.dest == dest && e.bytes == m.len() && e.mtime_ns == mtime
        });
        if listed {
            current += 1;
        } else {
            todo.push((item, m.len(), mtime));
        }
    }
    Ok((todo, current))
}

/// The backlog of store `dir` towards `dest`: objects (captures and companions) and bytes not
/// archived there yet, by the manifest. Reads the directory and the manifest, asks nobody.
pub fn backlog(dir: &Path, dest: &Dest) -> Result<(u64, u64), ArchiveError> {
    let entries = manifest::load(dir)
        .map_err(|e| ArchiveError::io(&manifest::manifest_path(dir), e))?
        .unwrap_or_default();
    // The sensor only names keys, which are not needed here.
    let (todo, _) = not_archived(dir, "-", &dest.url(), None, &entries)?;
    Ok((todo.len() as u64, todo.iter().map(|t| t.1).sum()))
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
