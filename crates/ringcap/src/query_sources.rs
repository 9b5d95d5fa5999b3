//! Where a query's packets are: local stores, archives (`s3://BUCKET/PREFIX`) and sensors
//! (`https://HOST:PORT`, or every sensor of a fleet file with `--sensors`), joined into one plan:
//! the merge takes all their packets in time order, each source's through a bounded channel.
//!
//! A sensor that has an archive (a fleet file's `archive =`) gives the files it still holds; its
//! archive gives the others (those the sensor lists are left out of it), so a packet kept in
//! both comes out once. A file the sensor deletes between its listing and its answer (retention,
//! milliseconds apart) is then missing: the sensor's own report would not say it.

use std::collections::HashSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::query_cmd::{query_failed, QueryArgs};
use crate::Fatal;

/// How to ask sensors: a fleet file, or the certificates for sensors named on the command line.
#[derive(Args, Debug, Clone, Default)]
pub struct SensorArgs {
    /// A fleet file (sensors.toml): every sensor it names is asked, and its archive for the
    /// files the sensor no longer holds. See the README's "One query over many sensors".
    #[arg(long = "sensors", value_name = "FILE")]
    pub sensors: Option<PathBuf>,
    /// The CA that signed the sensors' server certificates (for https:// stores).
    #[arg(long = "ca", value_name = "FILE", requires_all = ["cert", "key"])]
    pub ca: Option<PathBuf>,
    /// This client's certificate, signed by the sensors' --client-ca.
    #[arg(long = "cert", value_name = "FILE", requires_all = ["ca", "key"])]
    pub cert: Option<PathBuf>,
    /// Its private key (not readable by group or others).
    #[arg(long = "key", value_name = "FILE", requires_all = ["ca", "cert"])]
    pub key: Option<PathBuf>,
    /// A sensor that sends nothing for this long is cut, and named slow in the report.
    #[arg(long = "sensor-timeout", value_name = "DURATION", default_value = "60s",
          value_parser = units::time::parse_duration)]
    pub sensor_timeout: Duration,
}

/// Whether a word names a remote store (an archive or a sensor) rather than a path.
pub fn is_remote(w: &str) -> bool {
    ["s3://", "https://", "http://"]
        .iter()
        .any(|p| w.starts_with(p))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Store,
    Archive,
    Sensor,
}

/// One place the query asked.
pub struct Source {
    pub name: String,
    pub kind: Kind,
    /// Its files (a sensor: its one answer) in the plan, and so in the reports.
    pub targets: Range<usize>,
    /// An archive's reader and what its listing found.
    pub archive: Option<(archive::Reader, archive::Listing)>,
    /// What it covers of the window (None: not known).
    pub coverage: Option<fleet::Covered>,
    /// An archive: files left out because their sensor still holds them.
    pub left_to_sensor: usize,
}

/// A query's plan over all its sources.
pub struct Gathered {
    pub plan: index::query::Plan,
    pub sources: Vec<Source>,
    pub priority: index::Priority,
    /// Files (and sensors' answers) in the plan.
    pub targets: usize,
}

/// Builds the plan over `words` (stores, archives, sensors) and the fleet file.
pub fn gather(a: &QueryArgs, words: &[String], q: &index::Query) -> Result<Gathered, Fatal> {
    let (mut stores, mut archives, mut sensors) = (Vec::new(), Vec::new(), Vec::new());
    for w in words {
        if w.starts_with("s3://") {
            archives.push((w.clone(), None));
        } else if w.starts_with("https://") || w.starts_with("http://") {
            sensors.push(sensor_of_url(w, &a.sensor)?);
        } else {
            stores.push(PathBuf::from(w));
        }
    }
    if let Some(path) = &a.sensor.sensors {
        let fleet = fleet::Fleet::load(path).map_err(|e| Fatal::usage(anyhow::anyhow!(e)))?;
        sensors.extend(fleet.sensors);
    }
    let text = fleet::query_text(q);
    let feeds = sensors
        .iter()
        .map(|s| {
            fleet::SensorFeed::new(s, text.clone(), a.sensor.sensor_timeout)
                .map(|f| Arc::new(f.with_names(&q.names)))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Fatal::usage(anyhow::anyhow!(e)))?;
    // Each sensor's files, asked all at once: for its coverage, and so that its archive leaves
    // out what it gives itself. A sensor that does not answer gives none (its query will say why).
    let listed: Vec<Option<fleet::FileList>> = std::thread::scope(|s| {
        let asked: Vec<_> = feeds.iter().map(|f| s.spawn(|| f.files().ok())).collect();
        asked.into_iter().map(|h| h.join().ok().flatten()).collect()
    });
    for (s, files) in sensors.iter().zip(&listed) {
        if let Some(url) = &s.archive {
            let held: HashSet<String> = files
                .iter()
                .flat_map(|l| l.files.iter().map(|f| f.name.clone()))
                .collect();
            archives.push((url.clone(), Some(held)));
        }
    }

    let mut sources = Vec::new();
    let mut joined = Joined::default();
    let mut local_files = Vec::new();
    if !stores.is_empty() {
        // Files being written are read too, up to their last whole packet.
        local_files = crate::index_cmd::capture_files(&stores, true)?;
        refuse_writing_into(a, &local_files)?;
        let entries: Vec<fleet::FileEntry> =
            local_files.iter().filter_map(|p| entry_of(p)).collect();
        let name = stores
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" ");
        sources.push(Source {
            targets: joined.add(index::query::survey(&local_files)),
            name,
            kind: Kind::Store,
            archive: None,
            coverage: Some(fleet::covered(&entries, q.after_ns, q.before_ns)),
            left_to_sensor: 0,
        });
    }
    for (url, held) in archives {
        use crate::archive_cmd::fatal;
        let dest = archive::Dest::parse(&url).map_err(fatal)?;
        let reader =
            archive::Reader::new(dest, &a.archive.endpoint(), a.max_requests).map_err(fatal)?;
        let mut listing = reader.list(q.after_ns, q.before_ns).map_err(fatal)?;
        let mut left = 0;
        if let Some(held) = &held {
            listing.files.retain(|f| {
                let name = f.name.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let keep = !held.contains(name);
                left += usize::from(!keep);
                keep
            });
        }
        // What the archived files cover: their capture's records, archived with them.
        let entries: Vec<fleet::FileEntry> = reader
            .coverage(&listing, &listing.files)
            .into_iter()
            .map(|(name, size, coverage)| fleet::FileEntry {
                name,
                size,
                coverage,
            })
            .collect();
        sources.push(Source {
            targets: joined.add(index::query::survey_ranges(listing.files.clone())),
            name: url,
            kind: Kind::Archive,
            archive: Some((reader, listing)),
            coverage: Some(fleet::covered(&entries, q.after_ns, q.before_ns)),
            left_to_sensor: left,
        });
    }
    if !feeds.is_empty() {
        let dyn_feeds: Vec<Arc<dyn index::Feed>> = feeds
            .iter()
            .map(|f| f.clone() as Arc<dyn index::Feed>)
            .collect();
        // All asked at once, in one survey; one source per sensor, each its one answer.
        let first = joined.add(index::query::survey_feeds(dyn_feeds)).start;
        for (i, (s, files)) in sensors.iter().zip(listed).enumerate() {
            // A sensor named on the command line is its URL; a fleet's, its name and URL.
            let name = if s.url.ends_with(&s.name) {
                s.url.clone()
            } else {
                format!("{} ({})", s.name, s.url)
            };
            sources.push(Source {
                name,
                kind: Kind::Sensor,
                targets: first + i..first + i + 1,
                archive: None,
                coverage: files.map(|l| fleet::covered(&l.files, q.after_ns, q.before_ns)),
                left_to_sensor: 0,
            });
        }
    }
    let Some(survey) = joined.survey else {
        return Err(Fatal::usage(anyhow::anyhow!(
            "no store given: name a store (a directory or file), an archive (s3://BUCKET/PREFIX) \
             or a sensor (https://HOST:PORT, --sensors FILE), then the expression"
        )));
    };
    if survey.is_empty() && sources.iter().all(|s| s.kind != Kind::Archive) {
        return Err(Fatal::usage(anyhow::anyhow!(
            "no capture files in the stores given"
        )));
    }
    let targets = survey.len();
    // The filter compiled for each file's link: what libpcap refuses for one of them is refused
    // here, before any packet, as `tcpdump -r` refuses it (exit 1, libpcap's words).
    let plan = survey.plan(q).map_err(query_failed)?;
    let priority = if local_files.is_empty() {
        // Nothing local to yield to but the CPU.
        index::Priority::Low
    } else {
        a.priority.resolve(&local_files)
    };
    Ok(Gathered {
        plan,
        sources,
        priority,
        targets,
    })
}

/// The sources' surveys joined, in the order they were added.
#[derive(Default)]
struct Joined {
    survey: Option<index::query::Survey>,
    at: usize,
}

impl Joined {
    /// Adds a source's files: where they are in the plan.
    fn add(&mut self, part: index::query::Survey) -> Range<usize> {
        let n = part.len();
        self.survey = Some(match self.survey.take() {
            None => part,
            Some(s) => s.join(part),
        });
        self.at += n;
        self.at - n..self.at
    }
}

/// A sensor named by its URL on the command line: its name is HOST:PORT, its certificates the
/// flags'.
fn sensor_of_url(url: &str, flags: &SensorArgs) -> Result<fleet::Sensor, Fatal> {
    let url = url.trim_end_matches('/').to_string();
    let https = url.starts_with("https://");
    let host = url.split("://").nth(1).unwrap_or("").to_string();
    let tls = match (&flags.ca, &flags.cert, &flags.key) {
        (Some(ca), Some(cert), Some(key)) => Some(fleet::TlsFiles {
            ca: ca.clone(),
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ if https => {
            return Err(Fatal::usage(anyhow::anyhow!(
                "{url}: an https sensor needs --ca, --cert and --key (or a fleet file, --sensors)"
            )))
        }
        _ => None,
    };
    Ok(fleet::Sensor {
        name: host,
        url,
        archive: None,
        tls,
    })
}

/// A local file as a file list entry, for its coverage.
fn entry_of(path: &Path) -> Option<fleet::FileEntry> {
    Some(fleet::FileEntry {
        name: path.file_name()?.to_str()?.to_string(),
        size: std::fs::metadata(path).ok()?.len(),
        coverage: store::read_coverage(path).ok().flatten(),
    })
}

/// `-w` onto one of the files queried would read what it writes.
fn refuse_writing_into(a: &QueryArgs, files: &[PathBuf]) -> Result<(), Fatal> {
    if let Some(w) = a
        .write
        .as_deref()
        .and_then(|w| std::fs::canonicalize(w).ok())
    {
        if files
            .iter()
            .any(|f| std::fs::canonicalize(f).ok().as_deref() == Some(&w))
        {
            return Err(Fatal::usage(anyhow::anyhow!(
                "-w {} is one of the files queried: write the result elsewhere",
                w.display()
            )));
        }
    }
    Ok(())
}
