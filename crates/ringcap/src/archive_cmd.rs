//! `ringcap archive`: copy a store's completed files to S3-compatible object storage (the archive
//! crate does the work; this wires flags, priority, progress and exit codes).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use crate::Fatal;

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Each complete capture file of STORE (not the hidden .NAME.partial being written), with its index
(.idx) and flow table (.flows.parquet), is copied to
  PREFIX/sensor=NAME/date=YYYY-MM-DD/hour=HH/<file name>
(date and hour in UTC from the file name's time stamp, else its first packet), verified (size and
the store's MD5 ETag, else a read-back SHA-256) and only then listed in
STORE/.ringcap-archive/manifest.jsonl. Running again uploads only what is not listed; a large file
cut by a kill resumes with the parts it had not sent. --transfers files go at once, oldest first (a
capture's index only once the rest of its capture is verified). With a manifest present, capture's
retention deletes only files the manifest lists (see docs/archive.md).
Credentials as AWS tools take them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN),
else profile --profile / AWS_PROFILE / default of ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE).
Region: --region, AWS_REGION, AWS_DEFAULT_REGION, ~/.aws/config, us-east-1.
With --archive-max-age and/or --archive-budget, each pass then deletes this sensor's oldest archived
captures (capture first, then its index and flow table) that the limits do not keep; objects outside
the sensor=/date=/hour= layout are never touched.
Exit status: 0 all archived, 1 an upload or a local file failed (run again to resume), 2 bad usage
or no credentials, 3 the object store refused (credentials, bucket, permissions), 4 the object
store could not be reached.
Examples:
  ringcap archive /data --to s3://pcap/site1 --sensor s1 --endpoint http://minio:9000 --once
  ringcap archive /data --to s3://pcap --sensor s1 --region eu-west-1 --watch --max-upload-rate 20MB/s")]
pub struct ArchiveArgs {
    /// The store directory (capture -w's directory).
    #[arg(value_name = "STORE")]
    pub store: PathBuf,
    /// Destination: s3://BUCKET/PREFIX.
    #[arg(long = "to", value_name = "s3://BUCKET/PREFIX")]
    pub to: String,
    /// This sensor's name in the keys (sensor=NAME).
    #[arg(long = "sensor", value_name = "NAME")]
    pub sensor: String,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// Archive what is there and exit (the default).
    #[arg(long = "once", conflicts_with = "watch")]
    pub once: bool,
    /// Keep archiving new files until SIGINT/SIGTERM; failures are logged and retried.
    #[arg(long = "watch")]
    pub watch: bool,
    /// Seconds between passes with --watch.
    #[arg(long = "interval", value_name = "SECS", default_value_t = 10)]
    pub interval: u64,
    /// Average upload rate at most, e.g. 20MB/s or 100MiB/s (a part goes at full speed).
    #[arg(long = "max-upload-rate", value_name = "SIZE/s", value_parser = parse_rate)]
    pub max_upload_rate: Option<u64>,
    /// Files sent at once (1-16, like rclone's --transfers); their parts in flight share one budget
    /// of 8 parts (128 MiB at the default part size). 1 sends one file at a time.
    #[arg(long = "transfers", value_name = "N", default_value_t = archive::DEFAULT_TRANSFERS,
          value_parser = parse_transfers)]
    pub transfers: usize,
    /// Multipart part size (files larger than this are sent in parts); at least 5MiB.
    #[arg(long = "part-size", value_name = "SIZE", default_value = "16MiB",
          value_parser = crate::cli::parse_size_arg)]
    pub part_size: u64,
    /// Archive retention by age: after each pass, delete this sensor's archived captures (with their
    /// index and flow table) once the whole hour of their key is older than this, e.g. 30d, 12w.
    #[arg(long = "archive-max-age", value_name = "DURATION", value_parser = units::time::parse_duration)]
    pub archive_max_age: Option<Duration>,
    /// Archive retention by bytes: after each pass, delete this sensor's oldest archived captures
    /// (with their companions) until its objects take at most SIZE, e.g. 2TB.
    #[arg(long = "archive-budget", value_name = "SIZE", value_parser = crate::cli::parse_size_arg)]
    pub archive_budget: Option<u64>,
    #[command(flatten)]
    pub json: crate::cli::Json,
    #[command(flatten)]
    pub quiet: crate::cli::Quiet,
}

/// How to reach the object store: `ringcap archive`'s flags, and `ringcap query s3://…`'s.
#[derive(Args, Debug, Clone, Default)]
pub struct EndpointArgs {
    /// An S3-compatible server's URL (http://HOST:PORT or https://HOST:PORT; AWS_ENDPOINT_URL if
    /// not given); without it, AWS S3 of the region.
    #[arg(long = "endpoint", value_name = "URL")]
    pub endpoint: Option<String>,
    /// Path-style addressing (https://HOST/BUCKET/KEY): the default with --endpoint.
    #[arg(long = "path-style", conflicts_with = "virtual_host")]
    pub path_style: bool,
    /// Virtual-host addressing (https://BUCKET.HOST/KEY): the default for AWS.
    #[arg(long = "virtual-host")]
    pub virtual_host: bool,
    /// Region (default: AWS_REGION, AWS_DEFAULT_REGION, ~/.aws/config, us-east-1).
    #[arg(long = "region", value_name = "R")]
    pub region: Option<String>,
    /// Profile of ~/.aws/credentials (default: AWS_PROFILE, else the environment's keys, else default).
    #[arg(long = "profile", value_name = "NAME")]
    pub profile: Option<String>,
    /// Extra CA certificates (PEM) for an https endpoint with a private CA.
    #[arg(long = "ca-cert", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

impl EndpointArgs {
    pub fn endpoint(&self) -> archive::Endpoint {
        archive::Endpoint {
            url: self.endpoint.clone().or_else(|| {
                std::env::var("AWS_ENDPOINT_URL")
                    .ok()
                    .filter(|u| !u.is_empty())
            }),
            path_style: (self.path_style || self.virtual_host).then_some(self.path_style),
            region: self.region.clone(),
            profile: self.profile.clone(),
            ca_file: self.ca_cert.clone(),
        }
    }
}

fn parse_transfers(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=archive::MAX_TRANSFERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{s}`: a number of files from 1 to {}",
            archive::MAX_TRANSFERS
        )),
    }
}

pub(crate) fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix("/s").unwrap_or(t);
    match units::parse_size(t)? {
        0 => Err(format!("`{s}`: a rate must be above 0")),
        n => Ok(n),
    }
}

pub(crate) fn fatal(e: archive::ArchiveError) -> Fatal {
    Fatal {
        code: e.exit_code(),
        error: e.into(),
    }
}

pub fn run(a: ArchiveArgs) -> Result<(), Fatal> {
    let dest = archive::Dest::parse(&a.to).map_err(fatal)?;
    let opts = archive::Options {
        dir: a.store.clone(),
        dest,
        endpoint: a.endpoint.endpoint(),
        sensor: a.sensor.clone(),
        max_rate: a.max_upload_rate,
        part_size: a.part_size,
        transfers: a.transfers,
        retention: archive::Retention {
            max_age: a.archive_max_age,
            budget: a.archive_budget,
        },
        hold: None,
    };
    let mut arch = archive::Archiver::new(opts).map_err(fatal)?;
    // Never cost a capture a packet: SCHED_IDLE while one writes here (as query), else nice 10.
    if arch.capture_running() {
        sys::sched_idle();
    } else {
        sys::low_priority();
    }
    arch.check().map_err(fatal)?;
    if !a.watch {
        return one_pass(&mut arch, &a).map(|_| ());
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    // A signal ends the pass after the object being sent, not after every new file (bench-fleet
    // saw --watch outlive SIGINT and SIGTERM by more than 10 s each).
    arch.stop_when(stop.clone());
    while !stop.load(Relaxed) {
        if let Err(f) = one_pass(&mut arch, &a) {
            if f.code == 2 {
                return Err(f);
            }
            log::warn!("{:#} (retrying in {} s)", f.error, a.interval);
        }
        let until = Instant::now() + Duration::from_secs(a.interval);
        while !stop.load(Relaxed) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(())
}

/// One pass with a progress bar (a terminal, not --quiet/--json) and a summary.
fn one_pass(arch: &mut archive::Archiver, a: &ArchiveArgs) -> Result<(), Fatal> {
    let hidden = a.quiet.on || a.json.on;
    let mut bar = None;
    let started = Instant::now();
    let r = arch.pass(&mut |ev| match ev {
        archive::Event::Planned { objects, bytes } => {
            if objects > 0 {
                bar = Some(crate::progress::bytes_bar(
                    bytes,
                    hidden,
                    &format!("{objects} files"),
                ));
            }
        }
        archive::Event::Sent(n) => {
            if let Some(b) = &bar {
                b.inc(n);
            }
        }
        archive::Event::Archived {
            item,
            key,
            bytes,
            how,
            method,
        } => {
            let how = match how {
                archive::How::Uploaded { resumed: false } => "uploaded",
                archive::How::Uploaded { resumed: true } => "resumed",
                archive::How::Present => "present",
            };
            if a.json.on {
                let line = serde_json::json!({"file": item.path, "key": key, "bytes": bytes,
                    "status": how, "verified": method});
                println!("{line}");
            } else if let Some(b) = &bar {
                b.println(format!("{how} {key} ({})", units::bytes(bytes)));
            }
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let r = r.map_err(fatal)?;
    let secs = started.elapsed().as_secs_f64();
    if a.json.on {
        let mut v = serde_json::to_value(&r).unwrap_or_default();
        v["summary"] = true.into();
        v["seconds"] = secs.into();
        println!("{v}");
    } else if !a.quiet.on {
        eprintln!(
            "archived {} files ({}) in {}; {} already in the archive, {} already in the manifest",
            r.uploaded,
            units::bytes(r.uploaded_bytes),
            units::seconds(secs),
            r.present,
            r.current
        );
    }
    // After the pass: what was just verified counts toward the budget too.
    let e = arch.expire().map_err(fatal)?;
    if a.json.on && e.deleted_objects > 0 {
        let mut v = serde_json::to_value(&e).unwrap_or_default();
        v["retention"] = true.into();
        println!("{v}");
    } else if !a.quiet.on && e.deleted_objects > 0 {
        eprintln!(
            "archive retention deleted {} captures ({} objects, {}); the sensor keeps {}",
            e.deleted_captures,
            e.deleted_objects,
            units::bytes(e.deleted_bytes),
            units::bytes(e.kept_bytes)
        );
    }
    Ok(())
}
