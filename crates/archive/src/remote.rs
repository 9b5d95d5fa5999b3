//! Reading the archive back for a query: the listing of a prefix, pruned by the partitions'
//! (`date=`, `hour=`) and the capture files' names before any index is opened, and each object as
//! an [`index::ReadAt`]: HTTP range GETs, the ranges a reader announces fetched ahead (adjacent
//! ones joined, at most [`Reader::in_flight`] requests at once over all objects), every request and
//! byte counted.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3;
use object_store::path::Path as Key;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};

use crate::error::{self, ArchiveError};
use crate::layout::is_capture_name;
use crate::target::{self, Credentials, Dest, Endpoint};

/// Announced ranges closer than this are fetched as one (the gap is read and dropped).
const JOIN_GAP: u64 = 4 << 10;
/// A joined range is cut at this size, so that several are in flight for a long run of frames.
const MAX_JOINED: u64 = 4 << 20;
/// Announced bytes fetched at once, ahead of the reader.
const AHEAD: u64 = 16 << 20;
/// Time stamps in names are the wall clock when a file was begun (seconds); a packet may be a
/// little older (it waited in the ring) and clocks step. A name must be this far outside the
/// window before its file is left out.
const SLACK_NS: u64 = 300 * 1_000_000_000;

/// What was asked of the object store.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Range GETs.
    pub requests: AtomicU64,
    /// Bytes those returned.
    pub bytes: AtomicU64,
    /// LIST requests.
    pub listings: AtomicU64,
}

/// The counters as numbers, for a report.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct FetchReport {
    pub requests: u64,
    pub bytes: u64,
    pub listings: u64,
}

impl Fetched {
    pub fn report(&self) -> FetchReport {
        FetchReport {
            requests: self.requests.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            listings: self.listings.load(Relaxed),
        }
    }
}

struct Shared {
    s3: AmazonS3,
    rt: tokio::runtime::Runtime,
    permits: tokio::sync::Semaphore,
    in_flight: usize,
    fetched: Arc<Fetched>,
    endpoint_name: String,
    dest: Dest,
}

impl Shared {
    fn fail(&self, e: object_store::Error, what: &str) -> ArchiveError {
        error::classify(e, what, &self.endpoint_name, &self.dest.bucket)
    }
}

/// An archive opened for reading.
pub struct Reader {
    shared: Arc<Shared>,
}

/// What a listing found.
pub struct Listing {
    /// The capture files to read, oldest first per series.
    pub files: Vec<index::RangeFile>,
    /// Capture objects listed, and those left out by their names' times.
    pub listed: usize,
    pub pruned_files: usize,
    /// `date=`/`hour=` partitions left out without a listing.
    pub pruned_partitions: usize,
    /// Each listed file's coverage record object (`NAME.coverage.json`), by the file's name
    /// (`s3://bucket/key`), and its size.
    pub coverage: std::collections::HashMap<PathBuf, (String, u64)>,
}

/// Largest coverage record fetched (a few hundred bytes are written).
const MAX_COVERAGE_OBJECT: u64 = 64 << 10;

impl Reader {
    /// The client for `dest` (no request yet). `in_flight`: range requests at once, at most.
    pub fn new(dest: Dest, endpoint: &Endpoint, in_flight: usize) -> Result<Reader, ArchiveError> {
        let creds = Credentials::find(endpoint.profile.as_deref())?;
        let s3 = target::client(&dest, endpoint, &creds)?;
        // Query workers are threads of their own: each blocks on its requests, which run here.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ringcap-s3")
            .enable_all()
            .build()
            .map_err(|e| ArchiveError::Store(format!("async runtime: {e}")))?;
        let in_flight = in_flight.max(1);
        Ok(Reader {
            shared: Arc::new(Shared {
                s3,
                rt,
                permits: tokio::sync::Semaphore::new(in_flight),
                in_flight,
                fetched: Arc::default(),
                endpoint_name: endpoint.url.clone().unwrap_or_else(|| "AWS S3".into()),
                dest,
            }),
        })
    }

    /// The counters of every request made so far.
    pub fn fetched(&self) -> FetchReport {
        self.shared.fetched.report()
    }

    /// Range requests in flight at most.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight
    }

    /// The capture files under the prefix that may hold packets in `[after, before)`, each with
    /// its index object when there is one. Partitions and files are left out by the times their
    /// names say (see [`prune`]); an index is not opened here.
    pub fn list(&self, after: Option<u64>, before: Option<u64>) -> Result<Listing, ArchiveError> {
        let sh = &self.shared;
        let root = match sh.dest.prefix.as_str() {
            "" => None,
            p => Some(Key::from(p)),
        };
        let mut objects = Vec::new();
        let mut pruned_partitions = 0;
        // Depth first: (prefix, start of the partition's time when known).
        let mut todo: Vec<(Option<Key>, Option<u64>)> = vec![(root, None)];
        while let Some((prefix, day)) = todo.pop() {
            sh.fetched.listings.fetch_add(1, Relaxed);
            let what = format!("listing {}", sh.dest.url());
            let res = sh
                .rt
                .block_on(sh.s3.list_with_delimiter(prefix.as_ref()))
                .map_err(|e| sh.fail(e, &what))?;
            objects.extend(res.objects);
            for cp in res.common_prefixes {
                let part = cp.filename().unwrap_or_default().to_string();
                let start = match partition_time(&part, day) {
                    Some(t) => t,
                    None => {
                        todo.push((Some(cp), day));
                        continue;
                    }
                };
                // Only a partition begun after the window is left out: a file begun before the
                // window (in an earlier partition) may run into it.
                if before.is_some_and(|b| start >= b.saturating_add(SLACK_NS)) {
                    pruned_partitions += 1;
                    continue;
                }
                todo.push((Some(cp), Some(start)));
            }
        }
        let keys: std::collections::HashMap<String, u64> = objects
            .iter()
            .map(|o| (o.location.to_string(), o.size))
            .collect();
        let (files, listed, pruned_files) = pair_and_prune(&self.shared, objects, after, before);
        let bucket = format!("s3://{}/", sh.dest.bucket);
        let coverage = files
            .iter()
            .filter_map(|f| {
                let key = f.name.to_str()?.strip_prefix(&bucket)?;
                let record = format!("{key}.coverage.json");
                let size = *keys.get(&record)?;
                Some((f.name.clone(), (record, size)))
            })
            .collect();
        Ok(Listing {
            files,
            listed,
            pruned_files,
            pruned_partitions,
            coverage,
        })
    }

    /// The coverage records of `files` (by name, as the listing gave them), fetched a few at a
    /// time; a file without one, or whose record is not its own (another name or size: stale or
    /// forged), gets None.
    pub fn coverage(
        &self,
        listing: &Listing,
        files: &[index::RangeFile],
    ) -> Vec<(String, u64, Option<store::Coverage>)> {
        let sh = &self.shared;
        // (file name, its size, its record's key and size when listed)
        type Ask = (String, u64, Option<(String, u64)>);
        let asks: Vec<Ask> = files
            .iter()
            .map(|f| {
                let name = f
                    .name
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("")
                    .to_string();
                let size = f.data.len().unwrap_or(0);
                (name, size, listing.coverage.get(&f.name).cloned())
            })
            .collect();
        sh.rt.block_on(async {
            futures::stream::iter(asks)
                .map(|(name, size, record)| async move {
                    let c = match record {
                        Some((key, n)) if n <= MAX_COVERAGE_OBJECT => {
                            sh.fetched.requests.fetch_add(1, Relaxed);
                            match sh.s3.get(&Key::from(key)).await {
                                Ok(got) => got.bytes().await.ok().and_then(|b| {
                                    sh.fetched.bytes.fetch_add(b.len() as u64, Relaxed);
                                    store::Coverage::parse(&b).ok()
                                }),
                                Err(_) => None,
                            }
                        }
                        _ => None,
                    };
                    let c = c.filter(|c| c.describes(&name, size));
                    (name, size, c)
                })
                .buffered(sh.in_flight)
                .collect()
                .await
        })
    }
}

/// The start (ns) of a `date=YYYY-MM-DD` or `hour=HH` partition (an hour within the date above
/// it); None for any other part of a key.
fn partition_time(part: &str, day: Option<u64>) -> Option<u64> {
    if let Some(d) = part.strip_prefix("date=") {
        return units::time::parse_time(&format!("{d}T00:00:00Z"), 0).ok();
    }
    let h: u64 = part.strip_prefix("hour=")?.parse().ok()?;
    Some(day? + h * 3600 * 1_000_000_000)
}

/// A ringcap name's series (the name without its stamp and sequence number), its start (ns) and
/// its sequence number: `<base>-YYYYMMDDTHHMMSS-<seq><ext>`.
fn series_of(name: &str) -> Option<(String, u64, u64)> {
    let (date, _) = crate::layout::date_hour_from_name(name)?;
    let at = name.rfind(&format!("-{}", date.replace('-', "")))?;
    let stamp = name.get(at + 1..at + 16)?;
    let rest = name.get(at + 17..)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let seq = rest[..digits].parse().ok()?;
    let rfc = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &stamp[0..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15]
    );
    let t = units::time::parse_time(&rfc, 0).ok()?;
    Some((format!("{}{}", &name[..at], &rest[digits..]), t, seq))
}

/// Pairs each capture object with its `.idx` object and leaves out the files whose names say
/// they hold nothing of the window (see [`prune`]).
fn pair_and_prune(
    shared: &Arc<Shared>,
    objects: Vec<ObjectMeta>,
    after: Option<u64>,
    before: Option<u64>,
) -> (Vec<index::RangeFile>, usize, usize) {
    let sizes: std::collections::HashMap<String, u64> = objects
        .iter()
        .map(|o| (o.location.to_string(), o.size))
        .collect();
    let mut captures: Vec<&ObjectMeta> = objects
        .iter()
        .filter(|o| o.location.filename().is_some_and(is_capture_name))
        .collect();
    captures.sort_by(|a, b| a.location.as_ref().cmp(b.location.as_ref()));
    let names: Vec<&str> = captures
        .iter()
        .map(|o| o.location.filename().unwrap_or_default())
        .collect();
    let keep = prune(&names, after, before);
    let listed = captures.len();
    let mut files = Vec::new();
    for (o, keep) in captures.into_iter().zip(keep) {
        if !keep {
            continue;
        }
        let key = o.location.to_string();
        let idx = format!("{key}.idx");
        let flows = format!("{key}.flows.parquet");
        let object = |key: &str, size: u64| -> Arc<dyn index::ReadAt> {
            Arc::new(Object::new(shared.clone(), Key::from(key), size))
        };
        files.push(index::RangeFile {
            name: format!("s3://{}/{key}", shared.dest.bucket).into(),
            data: object(&key, o.size),
            index: sizes.get(&idx).map(|&n| object(&idx, n)),
            flows: sizes.get(&flows).map(|&n| object(&flows, n)),
        });
    }
    let pruned = listed - files.len();
    (files, listed, pruned)
}

/// Which of these capture files (names sorted) may hold packets in `[after, before)`, by the times
/// their names say: a file begun after the window's end ([`SLACK_NS`] later) holds none, nor does
/// one whose successor in its series (by sequence number) was begun before the window's start.
/// Files of other tools (no stamp in the name) are always kept.
pub fn prune(names: &[&str], after: Option<u64>, before: Option<u64>) -> Vec<bool> {
    let parsed: Vec<Option<(String, u64, u64)>> = names.iter().map(|n| series_of(n)).collect();
    let mut keep = vec![true; names.len()];
    for (i, p) in parsed.iter().enumerate() {
        let Some((series, start, seq)) = p else {
            continue;
        };
        if before.is_some_and(|b| *start >= b.saturating_add(SLACK_NS)) {
            keep[i] = false;
            continue;
        }
        let Some(a) = after else { continue };
        // The next file of the series: the lowest sequence number above this one.
        let next = parsed
            .iter()
            .flatten()
            .filter(|(s, _, q)| s == series && q > seq)
            .min_by_key(|(_, _, q)| *q);
        if next.is_some_and(|(_, t, _)| t.saturating_add(SLACK_NS) <= a) {
            keep[i] = false;
        }
    }
    keep
}

/// One object, read by ranges (see the module's doc).
pub struct Object {
    shared: Arc<Shared>,
    key: Key,
    size: u64,
    state: Mutex<Ahead>,
}

#[derive(Default)]
struct Ahead {
    /// Announced ranges not fetched yet, joined, in order.
    plan: VecDeque<Range<u64>>,
    /// Fetched ranges not passed yet, in order.
    got: VecDeque<(u64, Bytes)>,
    /// The object's first bytes as last fetched: a survey reads them, then the index's check of
    /// the file and its first frame.
    head: Option<Bytes>,
}

fn covers(at: u64, b: &Bytes, off: u64, end: u64) -> bool {
    at <= off && end <= at + b.len() as u64
}

impl Object {
    fn new(shared: Arc<Shared>, key: Key, size: u64) -> Object {
        Object {
            shared,
            key,
            size,
            state: Mutex::default(),
        }
    }

    /// GETs `ranges` of the object, at most `in_flight` at once (over all objects), in order.
    fn fetch(&self, ranges: Vec<Range<u64>>) -> io::Result<Vec<Bytes>> {
        let sh = &*self.shared;
        let key = &self.key;
        sh.rt
            .block_on(
                futures::stream::iter(ranges.into_iter().map(|r| async move {
                    let _permit = sh.permits.acquire().await;
                    let b = sh.s3.get_range(key, r).await?;
                    sh.fetched.requests.fetch_add(1, Relaxed);
                    sh.fetched.bytes.fetch_add(b.len() as u64, Relaxed);
                    Ok::<_, object_store::Error>(b)
                }))
                .buffered(sh.in_flight)
                .try_collect(),
            )
            .map_err(|e| io::Error::other(format!("s3://{}/{key}: {e}", sh.dest.bucket)))
    }
}

impl index::ReadAt for Object {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let end = off + buf.len() as u64;
        if buf.is_empty() {
            return Ok(());
        }
        if end > self.size {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let copy = |buf: &mut [u8], at: u64, b: &Bytes| {
            let from = (off - at) as usize;
            buf.copy_from_slice(&b[from..from + buf.len()]);
        };
        if let Some(h) = st.head.as_ref().filter(|h| covers(0, h, off, end)) {
            copy(buf, 0, h);
            return Ok(());
        }
        // Readers go forward: what ends before this read is done with.
        while st
            .got
            .front()
            .is_some_and(|(at, b)| at + b.len() as u64 <= off)
        {
            st.got.pop_front();
        }
        while st.plan.front().is_some_and(|r| r.end <= off) {
            st.plan.pop_front();
        }
        if let Some((at, b)) = st.got.iter().find(|(at, b)| covers(*at, b, off, end)) {
            copy(buf, *at, b);
            return Ok(());
        }
        if st
            .plan
            .front()
            .is_some_and(|r| r.start <= off && end <= r.end)
        {
            // The announced ranges from here, up to AHEAD bytes, in flight together.
            let mut batch = Vec::new();
            let mut bytes = 0;
            while let Some(r) = st.plan.front() {
                if !batch.is_empty() && bytes + (r.end - r.start) > AHEAD {
                    break;
                }
                bytes += r.end - r.start;
                batch.push(st.plan.pop_front().expect("front"));
            }
            let starts: Vec<u64> = batch.iter().map(|r| r.start).collect();
            let got = self.fetch(batch)?;
            st.got.extend(starts.into_iter().zip(got));
            let (at, b) = st
                .got
                .iter()
                .find(|(at, b)| covers(*at, b, off, end))
                .ok_or_else(|| io::Error::other("a fetched range is short"))?;
            copy(buf, *at, b);
            return Ok(());
        }
        // Not announced: exactly what is asked.
        let b = self
            .fetch(std::iter::once(off..end).collect())?
            .pop()
            .unwrap_or_default();
        if b.len() != buf.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&b);
        if off == 0 {
            st.head = Some(b);
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.size)
    }

    fn will_read(&self, ranges: &[Range<u64>]) {
        let mut joined: Vec<Range<u64>> = Vec::new();
        for r in ranges.iter().filter(|r| r.end > r.start) {
            match joined.last_mut() {
                Some(last)
                    if r.start >= last.end
                        && r.start - last.end <= JOIN_GAP
                        && r.end - last.start <= MAX_JOINED =>
                {
                    last.end = r.end;
                }
                _ => joined.push(r.clone()),
            }
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.plan = joined.into();
        st.got.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_prune_files_outside_the_window_and_keep_foreign_ones() {
        let names = [
            "cap-20261201T100000-000001.pcap.zst",
            "cap-20261201T101000-000002.pcap.zst",
            "cap-20261201T102000-000003.pcap.zst",
            "cap-20261201T103000-000004.pcap.zst",
            "other.pcap",
        ];
        let t = |s: &str| units::time::parse_time(s, 0).unwrap();
        // 10:21 to 10:22: file 3 (begun 10:20); file 2 ends 10:20, within the slack of 10:21.
        let keep = prune(
            &names,
            Some(t("2026-12-01T10:21:00Z")),
            Some(t("2026-12-01T10:22:00Z")),
        );
        assert_eq!(keep, [false, true, true, false, true]);
        assert_eq!(
            series_of(names[1]),
            Some(("cap.pcap.zst".to_string(), t("2026-12-01T10:10:00Z"), 2))
        );
        assert_eq!(prune(&names, None, None), [true; 5]);
    }
}
