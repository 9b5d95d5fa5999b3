//! `capture --archive s3://BUCKET/PREFIX --sensor NAME`: a thread that archives each file the
//! capture completes (with its coverage record, index and flow table) with the archive crate's
//! pass, as `ringcap archive --watch` would, at SCHED_IDLE and idle I/O so it never takes the
//! capture's CPU or disk. The store's manifest exists from the start, so retention deletes only
//! what the archive verified (unless the disk is full). Object store failures are logged and
//! retried with a growing pause; the capture never waits for them. When the capture stops, one
//! last pass (bounded by --archive-wait); what it leaves, `ringcap archive` finishes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use anyhow::anyhow;
use clap::Args;

use crate::archive_cmd::{fatal, parse_rate, EndpointArgs};
use crate::Fatal;

/// How often the archiver looks for completed files while all goes well.
const PERIOD: Duration = Duration::from_secs(2);
/// The longest pause between attempts while the object store fails.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A complete file without its index yet waits this long for it (the indexer writes it within
/// about a second; one it left behind comes later, from the catch-up, and is archived then).
const INDEX_WAIT: Duration = Duration::from_secs(60);

/// The archive flags of `ringcap capture`.
#[derive(Args, Debug, Clone)]
pub struct ArchiveFlags {
    /// Archive each file the capture completes, with its coverage record, index and flow table, to
    /// S3-compatible object storage as `ringcap archive` does (PREFIX/sensor=NAME/date=…/hour=…/NAME,
    /// verified, listed in DIR/.ringcap-archive/manifest.jsonl), from a thread at idle CPU and I/O
    /// priority. Retention (-W, --disk-budget) then deletes only archived files, unless the disk is
    /// full. Object store failures are logged and retried; they never stop the capture. At the end
    /// one last pass (--archive-wait). Needs file mode (-C, -G, --compress, ...) and --sensor;
    /// credentials and endpoint as for `ringcap archive`.
    #[arg(
        long = "archive",
        value_name = "s3://BUCKET/PREFIX",
        requires = "sensor"
    )]
    pub archive: Option<String>,
    /// This sensor's name in the archive's keys (sensor=NAME), with --archive.
    #[arg(long = "sensor", value_name = "NAME", requires = "archive")]
    pub sensor: Option<String>,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// With --archive: average upload rate at most, e.g. 20MB/s (a part goes at full speed).
    #[arg(long = "max-upload-rate", value_name = "SIZE/s", value_parser = parse_rate, requires = "archive")]
    pub max_upload_rate: Option<u64>,
    /// With --archive: when the capture stops, how long (seconds) its last archive pass may take
    /// before it exits; what is left then, `ringcap archive` (or the next capture) uploads.
    #[arg(long = "archive-wait", value_name = "SECS", default_value_t = 30)]
    pub archive_wait: u64,
}

/// What the archiver thread and the capture share.
struct State {
    /// The output directories and the destination (for the backlog).
    dirs: Vec<PathBuf>,
    dest: archive::Dest,
    /// The capture has ended (every file complete and indexed): the next pass is the last.
    finished: AtomicBool,
    /// Set when the last pass is over; wakes the thread for it.
    done: Mutex<bool>,
    wake: Condvar,
    uploaded_objects: AtomicU64,
    uploaded_bytes: AtomicU64,
    failed_passes: AtomicU64,
}

/// The running archiver.
pub struct Archiving {
    state: Arc<State>,
    thread: Option<JoinHandle<()>>,
    wait: Duration,
}

/// The archiver's counters, for the metrics thread.
#[derive(Clone)]
pub struct ArchiveStatus(Arc<State>);

impl ArchiveStatus {
    /// (objects left, bytes left, objects uploaded, bytes uploaded, failed passes).
    pub fn read(&self) -> (u64, u64, u64, u64, u64) {
        let s = &self.0;
        let (left, left_bytes) = s.backlog();
        (
            left,
            left_bytes,
            s.uploaded_objects.load(Relaxed),
            s.uploaded_bytes.load(Relaxed),
            s.failed_passes.load(Relaxed),
        )
    }
}

impl State {
    /// Objects (captures and companions, those waiting for their index too) and bytes of the
    /// store not archived yet: the directories against their manifests, now.
    fn backlog(&self) -> (u64, u64) {
        self.dirs.iter().fold((0, 0), |(n, b), d| {
            let (dn, db) = archive::backlog(d, &self.dest).unwrap_or_else(|e| {
                log::debug!("archive backlog of {}: {e}", d.display());
                (0, 0)
            });
            (n + dn, b + db)
        })
    }
}

/// What the archive did, for the summary.
pub struct ArchiveReport {
    pub uploaded_objects: u64,
    pub uploaded_bytes: u64,
    pub left_objects: u64,
    pub left_bytes: u64,
    pub failed_passes: u64,
    /// The last pass did not end within --archive-wait.
    pub timed_out: bool,
}

/// Checks the flags and connects (no request yet: the object store may be down now, which only
/// delays the uploads). Each output directory gets its archiver, which holds that store's archive
/// lock, and its manifest, so retention waits for the archive from the first file on.
pub fn start(
    f: &ArchiveFlags,
    plan: Option<&store::FilePlan>,
    indexing: bool,
) -> Result<Option<Archiving>, Fatal> {
    let Some(url) = &f.archive else {
        return Ok(None);
    };
    let Some(plan) = plan else {
        return Err(Fatal::usage(anyhow!(
            "--archive archives the files of a file series: add rotation (-C SIZE or -G SECONDS) or \
             --out-dir"
        )));
    };
    let dest = archive::Dest::parse(url).map_err(fatal)?;
    let state = Arc::new(State {
        dirs: plan.dirs.clone(),
        dest: dest.clone(),
        finished: AtomicBool::new(false),
        done: Mutex::new(false),
        wake: Condvar::new(),
        uploaded_objects: AtomicU64::new(0),
        uploaded_bytes: AtomicU64::new(0),
        failed_passes: AtomicU64::new(0),
    });
    let st = Arc::clone(&state);
    // A file's index comes a moment after the file: wait for it (not past the end, when every
    // index this run could write is written).
    let hold: archive::Hold = Arc::new(move |p: &Path| {
        indexing
            && !st.finished.load(Relaxed)
            && !store::index_path(p).exists()
            && std::fs::metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() < INDEX_WAIT)
    });
    let mut archivers = Vec::new();
    for dir in &plan.dirs {
        let opts = archive::Options {
            dir: dir.clone(),
            dest: dest.clone(),
            endpoint: f.endpoint.endpoint(),
            sensor: f.sensor.clone().unwrap_or_default(),
            max_rate: f.max_upload_rate,
            part_size: archive::DEFAULT_PART_SIZE,
            // One file at a time: the capture's archiving takes only what the capture leaves
            // (SCHED_IDLE); `ringcap archive` catches up a backlog with several.
            transfers: 1,
            retention: archive::Retention::default(),
            hold: Some(Arc::clone(&hold)),
        };
        let a = archive::Archiver::new(opts).map_err(fatal)?;
        a.gate_retention().map_err(fatal)?;
        archivers.push(a);
    }
    log::info!(
        "archiving each completed file to {} as sensor {}",
        dest.url(),
        f.sensor.as_deref().unwrap_or_default()
    );
    let st = Arc::clone(&state);
    let thread = std::thread::Builder::new()
        .name("ringcap-archive".into())
        .spawn(move || {
            // Idle CPU and I/O class: only what the capture leaves (threads it starts inherit it).
            sys::sched_idle();
            run(archivers, &st);
        })
        .map_err(|e| Fatal::runtime(anyhow!("cannot start the archive thread: {e}")))?;
    Ok(Some(Archiving {
        state,
        thread: Some(thread),
        wait: Duration::from_secs(f.archive_wait),
    }))
}

/// The archiver thread: a pass whenever the period is over (sooner at the end), passes failing
/// in a row wait longer and longer.
fn run(mut archivers: Vec<archive::Archiver>, st: &State) {
    let mut pause = PERIOD;
    let mut failing: Option<String> = None;
    loop {
        let last = st.finished.load(Relaxed);
        match pass(&mut archivers, st) {
            Ok(()) => {
                if failing.take().is_some() {
                    log::info!("archive: the object store answers again; uploading the backlog");
                }
                pause = PERIOD;
            }
            Err(e) => {
                st.failed_passes.fetch_add(1, Relaxed);
                pause = (pause * 2).min(MAX_BACKOFF);
                // Said once per kind of failure, not at every retry.
                if failing.as_deref() != Some(e.as_str()) {
                    log::warn!(
                        "archive: {e} (retrying, at most every {} s; the capture goes on)",
                        MAX_BACKOFF.as_secs()
                    );
                    failing = Some(e);
                }
            }
        }
        let mut done = st.done.lock().unwrap_or_else(|e| e.into_inner());
        if last && failing.is_none() {
            *done = true;
            st.wake.notify_all();
            return;
        }
        if last {
            // The last pass failed: again shortly, until the capture stops waiting.
            drop(st.wake.wait_timeout(done, Duration::from_secs(1)));
        } else {
            // Woken at once when the capture ends: the last pass runs then.
            drop(
                st.wake
                    .wait_timeout_while(done, pause, |_| !st.finished.load(Relaxed)),
            );
        }
    }
}

/// One pass over every directory; the first failure ends it (the next pass resumes).
fn pass(archivers: &mut [archive::Archiver], st: &State) -> Result<(), String> {
    for a in archivers.iter_mut() {
        a.pass(&mut |ev| {
            if let archive::Event::Archived { key, bytes, .. } = ev {
                st.uploaded_objects.fetch_add(1, Relaxed);
                st.uploaded_bytes.fetch_add(bytes, Relaxed);
                log::debug!("archived {key}");
            }
        })
        .map_err(|e| format!("{e:#}"))?;
    }
    Ok(())
}

impl Archiving {
    pub fn status(&self) -> ArchiveStatus {
        ArchiveStatus(Arc::clone(&self.state))
    }

    /// The capture has ended and every file is complete: one last pass, waited for at most
    /// --archive-wait; says what is left for `ringcap archive`.
    pub fn finish(mut self) -> ArchiveReport {
        let st = &self.state;
        st.finished.store(true, Relaxed);
        let deadline = Instant::now() + self.wait;
        let mut done = st.done.lock().unwrap_or_else(|e| e.into_inner());
        st.wake.notify_all();
        while !*done {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            done = st
                .wake
                .wait_timeout(done, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let timed_out = !*done;
        drop(done);
        if timed_out {
            // The thread may be in an upload: it ends with the process (an upload cut short
            // leaves no object under a final name; `ringcap archive` resumes it).
            drop(self.thread.take());
        } else if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let (left_objects, left_bytes) = st.backlog();
        let r = ArchiveReport {
            uploaded_objects: st.uploaded_objects.load(Relaxed),
            uploaded_bytes: st.uploaded_bytes.load(Relaxed),
            left_objects,
            left_bytes,
            failed_passes: st.failed_passes.load(Relaxed),
            timed_out,
        };
        if timed_out || r.left_objects > 0 {
            let dirs: Vec<String> = st.dirs.iter().map(|d| d.display().to_string()).collect();
            log::warn!(
                "archive: {} objects ({}) not archived yet{}: run `ringcap archive {} --to … --sensor …` \
                 to finish (retention keeps them meanwhile)",
                r.left_objects,
                units::bytes(r.left_bytes),
                if timed_out {
                    " (the last pass did not end within --archive-wait)"
                } else {
                    ""
                },
                dirs.join(" ")
            );
        }
        r
    }
}

impl ArchiveReport {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "uploaded_objects": self.uploaded_objects,
            "uploaded_bytes": self.uploaded_bytes,
            "left_objects": self.left_objects,
            "left_bytes": self.left_bytes,
            "failed_passes": self.failed_passes,
            "timed_out": self.timed_out,
        })
    }

    pub fn line(&self) -> String {
        format!(
            "archive: {} objects uploaded ({}), {} left ({}), {} failed passes",
            self.uploaded_objects,
            units::bytes(self.uploaded_bytes),
            self.left_objects,
            units::bytes(self.left_bytes),
            self.failed_passes
        )
    }
}
