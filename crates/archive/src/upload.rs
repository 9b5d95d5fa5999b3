//! Copying one file to one key, and proving the copy is whole.
//!
//! Small files go in one PUT, larger ones as a multipart upload of `part_size` parts. S3 makes an
//! object visible under its key only when a PUT or CompleteMultipartUpload succeeds, so a key never
//! names half an object; a multipart upload in progress is journaled (upload id and each part's
//! ETag, replaced by write + rename as parts finish) so a run killed with -9 resumes with the parts
//! it had not finished. Verification: HEAD the key; the size must be ours and the ETag the MD5 we
//! computed (one PUT) or the MD5 of the parts' MD5s with "-N" (multipart), as S3 defines them.
//! Where the ETag is not an MD5 (SSE-KMS, some servers), or differs, the object is read back and
//! its SHA-256 compared with the local file's, hashed then. The common path hashes each byte twice:
//! MD5 here, SHA-256 for the SigV4 payload signature (a whole-file SHA-256 besides cost bench-fleet
//! 16 % of the CPU for a record the ETag already keeps).
//!
//! Several files go at once (the pass runs one [`Uploader::put_file`] per file, all on one thread):
//! a part is read and hashed on a blocking thread, so a cold read or 16 MiB of MD5 never stalls the
//! other transfers' requests, and the parts in flight over all files share one budget (memory).

use std::cell::{Cell, RefCell};
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use futures::StreamExt;
use md5::{Digest, Md5};
use object_store::aws::AmazonS3;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::error::{classify, ArchiveError};

/// How often a wait (for the rate limit) looks whether the pass was told to stop.
const HALT_POLL: Duration = Duration::from_millis(100);

/// Spreads uploads to at most `rate` bytes per second on average (a part goes at full speed, the
/// next waits). No credit is saved up while idle. Shared by the transfers of a pass.
pub struct Pace {
    rate: Option<u64>,
    next: Instant,
}

impl Pace {
    pub fn new(rate: Option<u64>) -> Pace {
        Pace {
            rate: rate.filter(|r| *r > 0),
            next: Instant::now(),
        }
    }

    /// Books `n` more bytes: the instant they may go (None: now).
    fn reserve(&mut self, n: u64) -> Option<Instant> {
        let rate = self.rate?;
        let now = Instant::now();
        let at = self.next.max(now);
        self.next = at + Duration::from_secs_f64(n as f64 / rate as f64);
        (at > now).then_some(at)
    }
}

/// Waits until `n` more bytes may be sent; false when `halt` was set meanwhile (nothing is sent).
async fn paced(pace: &RefCell<Pace>, n: u64, halt: &Cell<bool>) -> bool {
    let at = pace.borrow_mut().reserve(n);
    if let Some(at) = at {
        while Instant::now() < at && !halt.get() {
            tokio::time::sleep_until(at.min(Instant::now() + HALT_POLL)).await;
        }
    }
    !halt.get()
}

/// How a file reached the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Sent now (`resumed`: a multipart upload of an earlier run continued).
    Uploaded { resumed: bool },
    /// Already there with our checksum (an earlier run verified it but lost its manifest line).
    Present,
}

/// A verified copy.
pub struct Verified {
    pub etag: String,
    /// SHA-256 of the bytes (hex) when a read-back verified them; empty when the ETag did.
    pub sha256: String,
    /// "etag-md5" or "read-back-sha256".
    pub method: &'static str,
    pub how: How,
}

/// A multipart upload in progress, as journaled in `.ringcap-archive/uploads/NAME.json`.
#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Journal {
    key: String,
    upload_id: String,
    bytes: u64,
    mtime_ns: u64,
    part_size: u64,
    /// ETag of each part sent (None: not sent yet). Parts go several at a time and may finish
    /// out of order; a resumed upload sends only the missing ones.
    parts: Vec<Option<String>>,
}

/// Parts of one file in flight at once: over a link with a round trip of tens of milliseconds
/// one part at a time leaves it idle between parts (rclone sends 4 chunks per file at once).
pub const PARTS_IN_FLIGHT: usize = 4;

/// Parts in flight over all the files of a pass (memory: this many parts of `--part-size`, 128 MiB
/// at the default 16 MiB; rclone's defaults hold 4 files × 4 chunks of 5 MiB).
pub const PARTS_IN_FLIGHT_TOTAL: usize = 8;

/// How an error that asks for the upload to start again begins.
const RESTART: &str = "restart";

/// Replaces the journal: write, rename. No fsync: a kill -9 keeps what was written (the page cache
/// survives it), and a journal that a power cut garbled costs no correctness (see
/// [`Uploader::put_multipart`]: every journaled part is checked against the file's MD5 before it
/// counts, and the whole object against the ETag). The first save of an upload, which holds the id
/// a later run needs to resume or abort it, is synced (`sync`).
fn save_journal(path: &Path, j: &Journal, sync: bool) -> Result<(), ArchiveError> {
    let tmp = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        fs::create_dir_all(path.parent().expect("journal dir"))?;
        let mut f = File::create(&tmp)?;
        serde_json::to_writer(&mut f, j)?;
        if sync {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if sync {
            File::open(path.parent().expect("journal dir"))?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| ArchiveError::io(path, e))
}

fn unquote(etag: &str) -> String {
    etag.trim_matches('"').to_string()
}

/// The ETag S3 gives a multipart object: MD5 of the concatenated binary part MD5s, "-", count.
fn multipart_etag(part_md5s: &[[u8; 16]]) -> String {
    let mut h = Md5::new();
    for m in part_md5s {
        h.update(m);
    }
    format!("{}-{}", hex::encode(h.finalize()), part_md5s.len())
}

/// Whether an ETag has the shape of an MD5 (or of a multipart MD5).
fn md5_shaped(etag: &str) -> bool {
    let hexpart = etag.split_once('-').map_or(etag, |(h, n)| {
        if n.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            ""
        }
    });
    hexpart.len() == 32 && hexpart.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A part read and hashed: its bytes and their MD5.
struct Part {
    data: Vec<u8>,
    md5: [u8; 16],
}

/// Reads `len` bytes at `off` of `f` and hashes them, on a blocking thread.
async fn read_part(f: &Arc<File>, path: &Path, off: u64, len: usize) -> Result<Part, ArchiveError> {
    let f = Arc::clone(f);
    tokio::task::spawn_blocking(move || {
        let mut data = vec![0u8; len];
        f.read_exact_at(&mut data, off)?;
        let md5 = Md5::digest(&data).into();
        Ok(Part { data, md5 })
    })
    .await
    .map_err(|e| ArchiveError::Store(format!("{}: reading: {e}", path.display())))?
    .map_err(|e| ArchiveError::io(path, e))
}

/// Uploads for one destination; one `Uploader` serves all the transfers of a pass.
pub struct Uploader<'a> {
    pub s3: &'a AmazonS3,
    pub endpoint: &'a str,
    pub bucket: &'a str,
    pub part_size: u64,
    pub pace: &'a RefCell<Pace>,
    /// Parts in flight over all transfers (permits of [`PARTS_IN_FLIGHT_TOTAL`]).
    pub parts: &'a Semaphore,
    /// Where multipart journals live.
    pub journals: PathBuf,
    /// Called with the bytes of each part or file sent.
    pub sent: &'a dyn Fn(u64),
    /// Set: send nothing more (stop, or another transfer failed). A multipart upload ends after its
    /// parts in flight, with its journal; the next run resumes it.
    pub halt: &'a Cell<bool>,
}

impl Uploader<'_> {
    fn err(&self, what: String) -> impl Fn(object_store::Error) -> ArchiveError {
        let (endpoint, bucket) = (self.endpoint.to_string(), self.bucket.to_string());
        move |e| classify(e, &what, &endpoint, &bucket)
    }

    /// Copies `path` (`bytes` long, modified at `mtime_ns`) to `key` and verifies the copy; None
    /// when `halt` stopped it first (nothing under `key` from this call; a journal to resume).
    pub async fn put_file(
        &self,
        path: &Path,
        key: &Key,
        bytes: u64,
        mtime_ns: u64,
    ) -> Result<Option<Verified>, ArchiveError> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let journal = self.journals.join(format!("{name}.json"));
        if bytes <= self.part_size && !journal.exists() {
            return self.put_small(path, key, bytes).await;
        }
        match self
            .put_multipart(path, key, bytes, mtime_ns, &journal)
            .await
        {
            // A resumed upload the server will not complete (it lost or mangled parts of it when
            // it was killed: s3proxy then lists a half-written part): started again, once, from
            // its first part. The journal is gone, so this upload is a fresh one.
            Err(ArchiveError::Store(why)) if why.starts_with(RESTART) => {
                self.put_multipart(path, key, bytes, mtime_ns, &journal)
                    .await
            }
            other => other,
        }
    }

    async fn put_small(
        &self,
        path: &Path,
        key: &Key,
        bytes: u64,
    ) -> Result<Option<Verified>, ArchiveError> {
        let permit = self.parts.acquire().await.expect("never closed");
        let f = Arc::new(File::open(path).map_err(|e| ArchiveError::io(path, e))?);
        let Part { data, md5 } = read_part(&f, path, 0, bytes as usize).await?;
        if f.metadata().map_err(|e| ArchiveError::io(path, e))?.len() != bytes {
            return Err(ArchiveError::Store(format!(
                "{}: changed while being archived",
                path.display()
            )));
        }
        let md5 = hex::encode(md5);
        if let Some(v) = self.present(key, bytes, &md5).await? {
            return Ok(Some(v));
        }
        if !paced(self.pace, bytes, self.halt).await {
            return Ok(None);
        }
        self.s3
            .put_opts(key, PutPayload::from(data), PutOptions::default())
            .await
            .map_err(self.err(format!("uploading {key}")))?;
        drop(permit);
        (self.sent)(bytes);
        self.verify(key, bytes, &md5, path, How::Uploaded { resumed: false })
            .await
            .map(Some)
    }

    /// Whether an object of `bytes` bytes is at `key`.
    async fn same_size_there(&self, key: &Key, bytes: u64) -> Result<bool, ArchiveError> {
        match self.s3.head(key).await {
            Ok(m) => Ok(m.size == bytes),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.err(format!("looking up {key}"))(e)),
        }
    }

    /// An object already at `key` with our size and checksum: verified without sending it again.
    async fn present(
        &self,
        key: &Key,
        bytes: u64,
        md5: &str,
    ) -> Result<Option<Verified>, ArchiveError> {
        match self.s3.head(key).await {
            Ok(m) if m.size == bytes => {
                let etag = unquote(m.e_tag.as_deref().unwrap_or(""));
                if etag == md5 {
                    return Ok(Some(Verified {
                        etag,
                        sha256: String::new(),
                        method: "etag-md5",
                        how: How::Present,
                    }));
                }
                Ok(None)
            }
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(format!("looking up {key}"))(e)),
        }
    }

    /// HEAD `key`: size and MD5-ETag must match, else the object is read back and its SHA-256
    /// compared with `local`'s; a copy that fails both is deleted (it must not stand under a final
    /// name).
    async fn verify(
        &self,
        key: &Key,
        bytes: u64,
        md5: &str,
        local: &Path,
        how: How,
    ) -> Result<Verified, ArchiveError> {
        let m = self
            .s3
            .head(key)
            .await
            .map_err(self.err(format!("verifying {key}")))?;
        let etag = unquote(m.e_tag.as_deref().unwrap_or(""));
        if m.size == bytes && etag == md5 {
            return Ok(Verified {
                etag,
                sha256: String::new(),
                method: "etag-md5",
                how,
            });
        }
        if m.size == bytes {
            if md5_shaped(&etag) {
                log::debug!("{key}: ETag {etag} is not our MD5 {md5}: reading the object back");
            }
            let p = local.to_path_buf();
            let sha256 = tokio::task::spawn_blocking(move || sha256_of(&p))
                .await
                .map_err(|e| ArchiveError::Store(format!("hashing: {e}")))??;
            let got = self.read_back_sha256(key).await?;
            if got == sha256 {
                return Ok(Verified {
                    etag,
                    sha256: got,
                    method: "read-back-sha256",
                    how,
                });
            }
        }
        let _ = self.s3.delete(key).await;
        Err(ArchiveError::Store(format!(
            "{key}: the stored copy is not the local file ({} bytes, ETag {etag}; expected {bytes} \
             bytes, MD5 {md5}): deleted it; run again to upload it again",
            m.size
        )))
    }

    async fn read_back_sha256(&self, key: &Key) -> Result<String, ArchiveError> {
        let what = format!("reading back {key}");
        let mut stream = self
            .s3
            .get(key)
            .await
            .map_err(self.err(what.clone()))?
            .into_stream();
        let mut h = Sha256::new();
        while let Some(chunk) = stream.next().await {
            h.update(chunk.map_err(self.err(what.clone()))?);
        }
        Ok(hex::encode(h.finalize()))
    }

    async fn put_multipart(
        &self,
        path: &Path,
        key: &Key,
        bytes: u64,
        mtime_ns: u64,
        journal_path: &Path,
    ) -> Result<Option<Verified>, ArchiveError> {
        let old: Option<Journal> = fs::read(journal_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let mut j = match old {
            Some(j)
                if j.key == key.as_ref()
                    && j.bytes == bytes
                    && j.mtime_ns == mtime_ns
                    && j.part_size == self.part_size =>
            {
                j
            }
            other => {
                if let Some(o) = other {
                    // The file or the part size changed since: that upload is of no use.
                    let _ = self
                        .s3
                        .abort_multipart(&Key::from(o.key.as_str()), &o.upload_id)
                        .await;
                }
                let _ = fs::remove_file(journal_path);
                // Hashing the whole file before sending it reads it twice (bench-fleet: most of
                // 9.3 s CPU per GB): only done when an object of its size is there already (a run
                // that verified it, then lost its manifest line).
                if self.same_size_there(key, bytes).await? {
                    let (p, n) = (path.to_path_buf(), self.part_size);
                    let md5s = tokio::task::spawn_blocking(move || hash_parts(&p, bytes, n))
                        .await
                        .map_err(|e| ArchiveError::Store(format!("hashing: {e}")))??;
                    if let Some(v) = self.present(key, bytes, &multipart_etag(&md5s)).await? {
                        return Ok(Some(v));
                    }
                }
                if self.halt.get() {
                    return Ok(None);
                }
                let upload_id = self
                    .s3
                    .create_multipart(key)
                    .await
                    .map_err(self.err(format!("starting the upload of {key}")))?;
                let j = Journal {
                    key: key.to_string(),
                    upload_id,
                    bytes,
                    mtime_ns,
                    part_size: self.part_size,
                    parts: Vec::new(),
                };
                save_journal(journal_path, &j, true)?;
                j
            }
        };
        let resumed = j.parts.iter().any(Option::is_some);
        let f = Arc::new(File::open(path).map_err(|e| ArchiveError::io(path, e))?);
        let n = bytes.div_ceil(self.part_size) as usize;
        j.parts.resize(n, None);
        let mut md5s = Vec::with_capacity(n);
        let s3 = self.s3;
        let upload_id = j.upload_id.clone();
        type Sent<'p> = (
            usize,
            usize,
            Result<PartId, object_store::Error>,
            SemaphorePermit<'p>,
        );
        let mut in_flight = futures::stream::FuturesUnordered::new();
        // Parts are read and hashed one at a time, in order, while those read before are sent;
        // `reading` is the next one, with its place in the budget.
        let mut reading = None;
        let mut next = 0;
        loop {
            if reading.is_none()
                && next < n
                && in_flight.len() < PARTS_IN_FLIGHT
                && !self.halt.get()
            {
                let off = next as u64 * self.part_size;
                let len = self.part_size.min(bytes - off) as usize;
                let (f, parts) = (&f, self.parts);
                reading = Some(Box::pin(async move {
                    let permit = parts.acquire().await.expect("never closed");
                    read_part(f, path, off, len).await.map(|p| (p, permit))
                }));
            }
            tokio::select! {
                r = async { reading.as_mut().expect("checked").await }, if reading.is_some() => {
                    reading = None;
                    let (Part { data, md5 }, permit) = r?;
                    let i = next;
                    next += 1;
                    md5s.push(md5);
                    let len = data.len();
                    if let Some(done) = &j.parts[i] {
                        if unquote(done) == hex::encode(md5) {
                            (self.sent)(len as u64);
                            continue;
                        }
                        // A journaled part that is not this content: start the upload again.
                        let _ = self.s3.abort_multipart(key, &j.upload_id).await;
                        let _ = fs::remove_file(journal_path);
                        return Err(ArchiveError::Store(format!(
                            "{}: part {i} of an earlier upload differs from the file: dropped \
                             that upload; run again",
                            path.display()
                        )));
                    }
                    if !paced(self.pace, len as u64, self.halt).await {
                        continue; // halted: the loop drains what is in flight
                    }
                    let upload_id = &upload_id;
                    in_flight.push(async move {
                        let r = s3.put_part(key, upload_id, i, PutPayload::from(data)).await;
                        (i, len, r, permit)
                    });
                }
                Some(sent) = in_flight.next(), if !in_flight.is_empty() => {
                    let (done, len, r, permit): Sent<'_> = sent;
                    drop(permit);
                    let id = r.map_err(self.err(format!(
                        "uploading part {} of {n} of {key}",
                        done + 1
                    )))?;
                    j.parts[done] = Some(id.content_id);
                    save_journal(journal_path, &j, false)?;
                    (self.sent)(len as u64);
                }
                else => break,
            }
        }
        drop(in_flight);
        if j.parts.iter().any(Option::is_none) {
            // Halted (stop, or another transfer failed): the journal holds what was sent.
            return Ok(None);
        }
        let parts = j
            .parts
            .iter()
            .map(|c| PartId {
                content_id: c.clone().unwrap_or_default(),
            })
            .collect();
        if let Err(e) = self.s3.complete_multipart(key, &j.upload_id, parts).await {
            let text = e.to_string();
            if text.contains("NoSuchUpload") {
                // Expired or aborted on the server: the next run starts it again.
                let _ = fs::remove_file(journal_path);
            } else if resumed && text.contains("400 Bad Request") {
                let _ = self.s3.abort_multipart(key, &j.upload_id).await;
                let _ = fs::remove_file(journal_path);
                return Err(ArchiveError::Store(format!(
                    "{RESTART}: the server refused to complete the resumed upload of {key}: {text}"
                )));
            }
            return Err(self.err(format!("completing the upload of {key}"))(e));
        }
        let v = self
            .verify(
                key,
                bytes,
                &multipart_etag(&md5s),
                path,
                How::Uploaded { resumed },
            )
            .await;
        // Verified or deleted: the upload is over either way.
        let _ = fs::remove_file(journal_path);
        v.map(Some)
    }
}

/// MD5 of each part of the file.
fn hash_parts(path: &Path, bytes: u64, part_size: u64) -> Result<Vec<[u8; 16]>, ArchiveError> {
    use std::io::Read;
    let mut f = File::open(path).map_err(|e| ArchiveError::io(path, e))?;
    let mut buf = vec![0u8; part_size as usize];
    let mut md5s = Vec::new();
    let mut left = bytes;
    while left > 0 {
        let len = part_size.min(left) as usize;
        f.read_exact(&mut buf[..len])
            .map_err(|e| ArchiveError::io(path, e))?;
        md5s.push(Md5::digest(&buf[..len]).into());
        left -= len as u64;
    }
    Ok(md5s)
}

/// SHA-256 of the file (hex).
fn sha256_of(path: &Path) -> Result<String, ArchiveError> {
    let mut h = Sha256::new();
    let mut f = File::open(path).map_err(|e| ArchiveError::io(path, e))?;
    std::io::copy(&mut f, &mut h).map_err(|e| ArchiveError::io(path, e))?;
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_etags_are_md5_of_part_md5s() {
        // Two parts "a" and "b": MD5(MD5("a") ‖ MD5("b")) with "-2", as S3 computes it.
        let parts = [Md5::digest(b"a").into(), Md5::digest(b"b").into()];
        let mut h = Md5::new();
        h.update(Md5::digest(b"a"));
        h.update(Md5::digest(b"b"));
        assert_eq!(
            multipart_etag(&parts),
            format!("{}-2", hex::encode(h.finalize()))
        );
        assert!(md5_shaped(&multipart_etag(&parts)));
        assert!(md5_shaped("0cc175b9c0f1b6a831c399e269772661"));
        assert!(!md5_shaped("kms-opaque"));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn pace_spreads_bytes_over_time_and_a_halt_ends_the_wait() {
        let p = RefCell::new(Pace::new(Some(1000)));
        let halt = Cell::new(false);
        let t0 = tokio::time::Instant::now();
        for _ in 0..4 {
            assert!(paced(&p, 500, &halt).await);
        }
        // The first 500 go at once, the next three wait 0.5 s each.
        assert!(t0.elapsed() >= Duration::from_millis(1400));
        // Booked 10 s ahead, then halted: the wait ends at the next look, nothing is sent.
        p.borrow_mut().reserve(10_000);
        halt.set(true);
        let t1 = tokio::time::Instant::now();
        assert!(!paced(&p, 500, &halt).await);
        assert!(t1.elapsed() <= HALT_POLL);
    }
}
