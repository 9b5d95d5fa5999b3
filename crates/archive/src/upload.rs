//! Copying one file to one key, and proving the copy is whole.
//!
//! Small files go in one PUT, larger ones as a multipart upload of `part_size` parts. S3 makes an
//! object visible under its key only when a PUT or CompleteMultipartUpload succeeds, so a key never
//! names half an object; a multipart upload in progress is journaled (upload id and each part's
//! ETag, replaced with fsync+rename after every part) so a run killed with -9 resumes at the next
//! part. Verification: HEAD the key; the size must be ours and the ETag the MD5 we computed (one
//! PUT) or the MD5 of the parts' MD5s with "-N" (multipart), as S3 defines them. Where the ETag is
//! not an MD5 (SSE-KMS, some servers), or differs, the object is read back and its SHA-256 compared.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// Spreads uploads to at most `rate` bytes per second on average (a part goes at full speed, the
/// next waits). No credit is saved up while idle.
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

    /// Waits until `n` more bytes may be sent.
    pub async fn take(&mut self, n: u64) {
        let Some(rate) = self.rate else { return };
        let now = Instant::now();
        if self.next > now {
            tokio::time::sleep(self.next - now).await;
        }
        self.next = self.next.max(now) + Duration::from_secs_f64(n as f64 / rate as f64);
    }
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
/// Memory: this many parts (16 MiB each by default).
pub const PARTS_IN_FLIGHT: usize = 4;

/// How an error that asks for the upload to start again begins.
const RESTART: &str = "restart";

fn save_journal(path: &Path, j: &Journal) -> Result<(), ArchiveError> {
    let tmp = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        fs::create_dir_all(path.parent().expect("journal dir"))?;
        let mut f = File::create(&tmp)?;
        serde_json::to_writer(&mut f, j)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(path.parent().expect("journal dir"))?.sync_all()
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

/// Uploads for one destination.
pub struct Uploader<'a> {
    pub s3: &'a AmazonS3,
    pub endpoint: &'a str,
    pub bucket: &'a str,
    pub part_size: u64,
    pub pace: &'a mut Pace,
    /// Where multipart journals live.
    pub journals: PathBuf,
    /// Called with the bytes of each part or file sent.
    pub sent: &'a mut dyn FnMut(u64),
}

impl Uploader<'_> {
    fn err(&self, what: String) -> impl Fn(object_store::Error) -> ArchiveError {
        let (endpoint, bucket) = (self.endpoint.to_string(), self.bucket.to_string());
        move |e| classify(e, &what, &endpoint, &bucket)
    }

    /// Copies `path` (`bytes` long, modified at `mtime_ns`) to `key` and verifies the copy.
    pub async fn put_file(
        &mut self,
        path: &Path,
        key: &Key,
        bytes: u64,
        mtime_ns: u64,
    ) -> Result<Verified, ArchiveError> {
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
        &mut self,
        path: &Path,
        key: &Key,
        bytes: u64,
    ) -> Result<Verified, ArchiveError> {
        let data = fs::read(path).map_err(|e| ArchiveError::io(path, e))?;
        if data.len() as u64 != bytes {
            return Err(ArchiveError::Store(format!(
                "{}: changed while being archived",
                path.display()
            )));
        }
        let md5 = hex::encode(Md5::digest(&data));
        let sha256 = hex::encode(Sha256::digest(&data));
        if let Some(v) = self.present(key, bytes, &md5, &sha256).await? {
            return Ok(v);
        }
        self.pace.take(bytes).await;
        self.s3
            .put_opts(key, PutPayload::from(data), PutOptions::default())
            .await
            .map_err(self.err(format!("uploading {key}")))?;
        (self.sent)(bytes);
        self.verify(key, bytes, &md5, &sha256, How::Uploaded { resumed: false })
            .await
    }

    /// An object already at `key` with our size and checksum: verified without sending it again.
    /// Whether an object of `bytes` bytes is at `key`.
    async fn same_size_there(&self, key: &Key, bytes: u64) -> Result<bool, ArchiveError> {
        match self.s3.head(key).await {
            Ok(m) => Ok(m.size == bytes),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.err(format!("looking up {key}"))(e)),
        }
    }

    async fn present(
        &self,
        key: &Key,
        bytes: u64,
        md5: &str,
        sha256: &str,
    ) -> Result<Option<Verified>, ArchiveError> {
        match self.s3.head(key).await {
            Ok(m) if m.size == bytes => {
                let etag = unquote(m.e_tag.as_deref().unwrap_or(""));
                if etag == md5 {
                    return Ok(Some(Verified {
                        etag,
                        sha256: sha256.to_string(),
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
    /// compared; a copy that fails both is deleted (it must not stand under a final name).
    async fn verify(
        &self,
        key: &Key,
        bytes: u64,
        md5: &str,
        sha256: &str,
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
                sha256: sha256.to_string(),
                method: "etag-md5",
                how,
            });
        }
        if m.size == bytes {
            if md5_shaped(&etag) {
                log::debug!("{key}: ETag {etag} is not our MD5 {md5}: reading the object back");
            }
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
        &mut self,
        path: &Path,
        key: &Key,
        bytes: u64,
        mtime_ns: u64,
        journal_path: &Path,
    ) -> Result<Verified, ArchiveError> {
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
                    let (md5s, sha) = hash_parts(path, bytes, self.part_size)?;
                    if let Some(v) = self
                        .present(key, bytes, &multipart_etag(&md5s), &sha)
                        .await?
                    {
                        return Ok(v);
                    }
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
                save_journal(journal_path, &j)?;
                j
            }
        };
        let resumed = j.parts.iter().any(Option::is_some);
        let mut f = File::open(path).map_err(|e| ArchiveError::io(path, e))?;
        let n = bytes.div_ceil(self.part_size) as usize;
        j.parts.resize(n, None);
        let mut md5s = Vec::with_capacity(n);
        let mut sha = Sha256::new();
        let s3 = self.s3;
        let upload_id = j.upload_id.clone();
        let mut in_flight = futures::stream::FuturesUnordered::new();
        for i in 0..=n {
            // Wait for a place (or, after the last part, for all of them).
            while in_flight.len() >= PARTS_IN_FLIGHT || (i == n && !in_flight.is_empty()) {
                let (done, len, r): (usize, usize, Result<PartId, object_store::Error>) =
                    in_flight.next().await.expect("a part in flight");
                let id =
                    r.map_err(self.err(format!("uploading part {} of {n} of {key}", done + 1)))?;
                j.parts[done] = Some(id.content_id);
                save_journal(journal_path, &j)?;
                (self.sent)(len as u64);
            }
            if i == n {
                break;
            }
            let off = i as u64 * self.part_size;
            let len = self.part_size.min(bytes - off) as usize;
            // Read in order: the SHA-256 of the whole file is taken as the parts go by.
            let mut part = vec![0u8; len];
            f.seek(SeekFrom::Start(off))
                .and_then(|_| f.read_exact(&mut part))
                .map_err(|e| ArchiveError::io(path, e))?;
            let md5: [u8; 16] = Md5::digest(&part).into();
            sha.update(&part);
            md5s.push(md5);
            if let Some(done) = &j.parts[i] {
                if unquote(done) == hex::encode(md5) {
                    (self.sent)(len as u64);
                    continue;
                }
                // A journaled part that is not this content: start the upload again.
                let _ = self.s3.abort_multipart(key, &j.upload_id).await;
                let _ = fs::remove_file(journal_path);
                return Err(ArchiveError::Store(format!(
                    "{}: part {i} of an earlier upload differs from the file: dropped that upload; \
                     run again",
                    path.display()
                )));
            }
            self.pace.take(len as u64).await;
            let upload_id = &upload_id;
            in_flight.push(async move {
                let r = s3.put_part(key, upload_id, i, PutPayload::from(part)).await;
                (i, len, r)
            });
        }
        drop(in_flight);
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
        let sha = hex::encode(sha.finalize());
        let v = self
            .verify(
                key,
                bytes,
                &multipart_etag(&md5s),
                &sha,
                How::Uploaded { resumed },
            )
            .await;
        // Verified or deleted: the upload is over either way.
        let _ = fs::remove_file(journal_path);
        v
    }
}

/// MD5 of each part and SHA-256 of the whole file.
fn hash_parts(
    path: &Path,
    bytes: u64,
    part_size: u64,
) -> Result<(Vec<[u8; 16]>, String), ArchiveError> {
    let mut f = File::open(path).map_err(|e| ArchiveError::io(path, e))?;
    let mut buf = vec![0u8; part_size as usize];
    let mut md5s = Vec::new();
    let mut sha = Sha256::new();
    let mut left = bytes;
    while left > 0 {
        let len = part_size.min(left) as usize;
        f.read_exact(&mut buf[..len])
            .map_err(|e| ArchiveError::io(path, e))?;
        md5s.push(Md5::digest(&buf[..len]).into());
        sha.update(&buf[..len]);
        left -= len as u64;
    }
    Ok((md5s, hex::encode(sha.finalize())))
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
    async fn pace_spreads_bytes_over_time() {
        let mut p = Pace::new(Some(1000));
        let t0 = tokio::time::Instant::now();
        for _ in 0..4 {
            p.take(500).await;
        }
        // The first 500 go at once, the next three wait 0.5 s each.
        assert!(t0.elapsed() >= Duration::from_millis(1400));
    }
}
