//! Batch v2: a 64-byte header, records back to back, a 32-byte HMAC-SHA256 tag (docs/records.md). The tag
//! covers the id of the collector the batch was sealed for (not sent: both ends know it from the handshake),
//! so a batch recorded on its way to one collector fails the tag on any other.
//!
//! ```text
//!  0 4 magic "RCB1"   4 1 version 2    5 1 flags 0       6 2 header_len 64   8 8 probe_id
//! 16 4 stream_id     20 4 record_count 24 8 seq         32 8 first_ts_ns     40 8 last_ts_ns
//! 48 8 sent_unix_ns  56 4 payload_len  60 4 crc32 of payload   64.. payload   then 32 tag
//! ```
//!
//! The probe fills a [`BatchBuilder`], turns it into a [`Batch`] and the sender [`Batch::seal`]s it with the
//! collector's sequence number just before sending (and reseals it with another collector's number on
//! failover). The collector calls [`open`], which checks everything before any record is read.

use std::fmt;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wire::record::{Record, RECORD_LEN, RECORD_V6_LEN};

/// First four bytes of every batch.
pub const MAGIC: [u8; 4] = *b"RCB1";
/// Format version written by this code (the record layout is versioned with it). 2: the tag covers the
/// collector id (v1 batches are refused with BadVersion, so an old probe is told to upgrade).
pub const VERSION: u8 = 2;
/// Longest collector id (bytes).
pub const MAX_COLLECTOR_ID: usize = 255;
/// Header bytes before the payload.
pub const HEADER_LEN: usize = 64;
/// HMAC-SHA256 tag bytes after the payload.
pub const TAG_LEN: usize = 32;
/// Largest payload a batch may carry.
pub const MAX_PAYLOAD: usize = 65536;
/// Largest batch on the wire (header + payload + tag).
pub const MAX_BATCH_LEN: usize = HEADER_LEN + MAX_PAYLOAD + TAG_LEN;
/// Shortest key accepted.
pub const MIN_KEY_LEN: usize = 16;

type HmacSha256 = Hmac<Sha256>;

mod off {
    pub const VERSION: usize = 4;
    pub const FLAGS: usize = 5;
    pub const HEADER_LEN: usize = 6;
    pub const PROBE_ID: usize = 8;
    pub const STREAM_ID: usize = 16;
    pub const RECORD_COUNT: usize = 20;
    pub const SEQ: usize = 24;
    pub const FIRST_TS: usize = 32;
    pub const LAST_TS: usize = 40;
    pub const SENT: usize = 48;
    pub const PAYLOAD_LEN: usize = 56;
    pub const CRC: usize = 60;
}

/// The shared secret, with the HMAC key schedule done once.
#[derive(Clone)]
pub struct Key {
    mac: HmacSha256,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)") // never print the secret
    }
}

/// Why a key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error(
        "cannot read key file {path}: {source} (create one with: (umask 077; head -c 32 /dev/urandom > {path}))"
    )]
    Read {
        /// The key file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Group or others may read the file (a secret must be private, as ssh requires of private keys).
    #[error(
        "key file {path} is readable by group or others (mode {mode:04o}): run chmod 600 {path}"
    )]
    NotPrivate {
        /// The key file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// Fewer than [`MIN_KEY_LEN`] bytes.
    #[error("key{where_} is {len} bytes, at least {MIN_KEY_LEN} are needed (create one with: (umask 077; head -c 32 /dev/urandom > FILE))")]
    TooShort {
        /// " file PATH" or "".
        where_: String,
        /// Bytes found (after stripping a trailing newline).
        len: usize,
    },
}

impl Key {
    /// Reads a key file (at least 16 bytes; one trailing `\n` or `\r\n` is stripped). A file that group or
    /// others may read is refused.
    pub fn load(path: impl AsRef<Path>) -> Result<Key, KeyError> {
        let path = path.as_ref();
        let bytes = sys::read_private_file(path).map_err(|e| match e {
            sys::SecretFileError::Read { source, .. } => KeyError::Read {
                path: path.display().to_string(),
                source,
            },
            sys::SecretFileError::NotPrivate { mode, .. } => KeyError::NotPrivate {
                path: path.display().to_string(),
                mode,
            },
        })?;
        Key::from_bytes(&bytes).map_err(|e| match e {
            KeyError::TooShort { len, .. } => KeyError::TooShort {
                where_: format!(" file {}", path.display()),
                len,
            },
            e => e,
        })
    }

    /// A key from bytes (at least 16; one trailing `\n` or `\r\n` is stripped, as `echo` adds one).
    pub fn from_bytes(bytes: &[u8]) -> Result<Key, KeyError> {
        let b = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let b = b.strip_suffix(b"\r").unwrap_or(b);
        if b.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort {
                where_: String::new(),
                len: b.len(),
            });
        }
        let mac = HmacSha256::new_from_slice(b).expect("HMAC takes keys of any length");
        Ok(Key { mac })
    }

    #[cfg(test)]
    fn tag(&self, data: &[u8]) -> [u8; TAG_LEN] {
        self.tag_parts(&[data])
    }

    /// HMAC over the concatenation of `parts` (callers make the encoding unambiguous).
    pub(crate) fn tag_parts(&self, parts: &[&[u8]]) -> [u8; TAG_LEN] {
        let mut m = self.mac.clone();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// Constant-time check of `tag` over the concatenation of `parts`.
    pub(crate) fn verify_parts(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m = self.mac.clone();
        for p in parts {
            m.update(p);
        }
        m.verify_slice(tag).is_ok()
    }
}

/// The header fields of one batch (magic, version, lengths and checksum are implied).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Probe id (`--probe-id`).
    pub probe_id: u64,
    /// Random per probe process start.
    pub stream_id: u32,
    /// Records in the payload.
    pub record_count: u32,
    /// Per (probe, stream, collector): 0, 1, 2, ...
    pub seq: u64,
    /// Earliest record timestamp (ns).
    pub first_ts_ns: u64,
    /// Latest record timestamp (ns).
    pub last_ts_ns: u64,
    /// When the probe sent the batch (Unix ns), for replay freshness.
    pub sent_unix_ns: u64,
    /// Payload bytes.
    pub payload_len: u32,
}

/// Why [`open`] rejected bytes. Each names what was wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than the header says (or than a header).
    #[error("truncated batch: {have} bytes, {need} needed")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// More bytes than header + payload + tag (one datagram must be one batch).
    #[error("trailing bytes after the batch: {have} bytes, the batch is {len}")]
    TrailingBytes {
        /// Batch length from its header.
        len: usize,
        /// Bytes present.
        have: usize,
    },
    /// Not `RCB1`.
    #[error("bad magic {0:02x?} (not a ringcap record batch)")]
    BadMagic([u8; 4]),
    /// Unknown version or header length.
    #[error("unsupported batch version {version} / header length {header_len} (this build reads v2, 64; \
             a v1 batch comes from a ringcap before collector-bound tags: upgrade that probe)")]
    BadVersion {
        /// Version byte.
        version: u8,
        /// Header length field.
        header_len: u16,
    },
    /// `payload_len` above [`MAX_PAYLOAD`].
    #[error("payload length {0} above the 65536 limit")]
    TooLarge(u32),
    /// The HMAC does not match: wrong key or altered bytes.
    #[error("authentication failed (wrong key or altered batch)")]
    BadTag,
    /// The payload checksum does not match (authenticated, so a sender bug).
    #[error("payload crc32 mismatch")]
    BadCrc,
    /// The records do not fill the payload as `record_count` says.
    #[error("bad record {index}: {what}")]
    BadRecord {
        /// Index of the first bad record.
        index: u32,
        /// What was wrong.
        what: &'static str,
    },
}

impl BatchError {
    /// A short fixed name for counters and logs ("truncated", "bad_tag", ...).
    pub const fn reason(&self) -> &'static str {
        match self {
            BatchError::Truncated { .. } => "truncated",
            BatchError::TrailingBytes { .. } => "trailing",
            BatchError::BadMagic(_) => "bad_magic",
            BatchError::BadVersion { .. } => "bad_version",
            BatchError::TooLarge(_) => "too_large",
            BatchError::BadTag => "bad_tag",
            BatchError::BadCrc => "bad_crc",
            BatchError::BadRecord { .. } => "bad_record",
        }
    }
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline]
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Total batch length (header + payload + tag) from the first 64 bytes, after checking magic, version
/// and the payload bound; for reading batches off a TCP stream.
pub fn batch_len(header: &[u8]) -> Result<usize, BatchError> {
    if header.len() < HEADER_LEN {
        return Err(BatchError::Truncated {
            need: HEADER_LEN,
            have: header.len(),
        });
    }
    let magic: [u8; 4] = header[..4].try_into().unwrap();
    if magic != MAGIC {
        return Err(BatchError::BadMagic(magic));
    }
    let version = header[off::VERSION];
    let header_len = u16_at(header, off::HEADER_LEN);
    if version != VERSION || header_len as usize != HEADER_LEN {
        return Err(BatchError::BadVersion {
            version,
            header_len,
        });
    }
    let payload_len = u32_at(header, off::PAYLOAD_LEN);
    if payload_len as usize > MAX_PAYLOAD {
        return Err(BatchError::TooLarge(payload_len));
    }
    Ok(HEADER_LEN + payload_len as usize + TAG_LEN)
}

/// The collector id as the tag covers it: one length byte, then the id (so id and header cannot be shifted
/// into each other). Panics above [`MAX_COLLECTOR_ID`] bytes (a caller bug: ids are checked where made).
fn id_prefix(collector_id: &[u8]) -> [u8; 1] {
    assert!(
        collector_id.len() <= MAX_COLLECTOR_ID,
        "collector id too long"
    );
    [collector_id.len() as u8]
}

/// Writes the header for `h` (crc computed over the payload already in `buf[64..64 + payload_len]`) and the
/// tag (over `collector_id`, header and payload) after the payload; returns the batch length.
///
/// Panics if `buf` is shorter than `64 + payload_len + 32` or `payload_len > MAX_PAYLOAD` (caller bugs).
pub fn seal(buf: &mut [u8], h: &Header, key: &Key, collector_id: &[u8]) -> usize {
    let p = h.payload_len as usize;
    assert!(p <= MAX_PAYLOAD, "batch::seal: payload {p} > {MAX_PAYLOAD}");
    let total = HEADER_LEN + p + TAG_LEN;
    let buf = &mut buf[..total];
    let crc = crc32fast::hash(&buf[HEADER_LEN..HEADER_LEN + p]);
    let hd = &mut buf[..HEADER_LEN];
    hd[..4].copy_from_slice(&MAGIC);
    hd[off::VERSION] = VERSION;
    hd[off::FLAGS] = 0;
    hd[off::HEADER_LEN..off::HEADER_LEN + 2].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
    hd[off::PROBE_ID..off::PROBE_ID + 8].copy_from_slice(&h.probe_id.to_le_bytes());
    hd[off::STREAM_ID..off::STREAM_ID + 4].copy_from_slice(&h.stream_id.to_le_bytes());
    hd[off::RECORD_COUNT..off::RECORD_COUNT + 4].copy_from_slice(&h.record_count.to_le_bytes());
    hd[off::SEQ..off::SEQ + 8].copy_from_slice(&h.seq.to_le_bytes());
    hd[off::FIRST_TS..off::FIRST_TS + 8].copy_from_slice(&h.first_ts_ns.to_le_bytes());
    hd[off::LAST_TS..off::LAST_TS + 8].copy_from_slice(&h.last_ts_ns.to_le_bytes());
    hd[off::SENT..off::SENT + 8].copy_from_slice(&h.sent_unix_ns.to_le_bytes());
    hd[off::PAYLOAD_LEN..off::PAYLOAD_LEN + 4].copy_from_slice(&h.payload_len.to_le_bytes());
    hd[off::CRC..off::CRC + 4].copy_from_slice(&crc.to_le_bytes());
    let tag = key.tag_parts(&[
        &id_prefix(collector_id),
        collector_id,
        &buf[..HEADER_LEN + p],
    ]);
    buf[HEADER_LEN + p..].copy_from_slice(&tag);
    total
}

/// The probe id of a batch whose first 64 bytes passed [`batch_len`], *before* authentication: only for
/// choosing which probe's key to check the tag with (the tag then covers it).
pub fn claimed_probe_id(header: &[u8]) -> Option<u64> {
    (header.len() >= HEADER_LEN).then(|| u64_at(header, off::PROBE_ID))
}

/// Checks one batch (length, magic/version, payload bound, tag over `collector_id` and the batch in constant
/// time, crc, record framing) and gives a view of it. Nothing of a batch that fails is trusted.
pub fn open<'a>(
    buf: &'a [u8],
    key: &Key,
    collector_id: &[u8],
) -> Result<BatchView<'a>, BatchError> {
    if collector_id.len() > MAX_COLLECTOR_ID {
        return Err(BatchError::BadTag);
    }
    let total = batch_len(buf)?;
    if buf.len() < total {
        return Err(BatchError::Truncated {
            need: total,
            have: buf.len(),
        });
    }
    if buf.len() > total {
        return Err(BatchError::TrailingBytes {
            len: total,
            have: buf.len(),
        });
    }
    let end = total - TAG_LEN;
    if !key.verify_parts(
        &[&id_prefix(collector_id), collector_id, &buf[..end]],
        &buf[end..],
    ) {
        return Err(BatchError::BadTag);
    }
    let payload = &buf[HEADER_LEN..end];
    if crc32fast::hash(payload) != u32_at(buf, off::CRC) {
        return Err(BatchError::BadCrc);
    }
    let header = Header {
        probe_id: u64_at(buf, off::PROBE_ID),
        stream_id: u32_at(buf, off::STREAM_ID),
        record_count: u32_at(buf, off::RECORD_COUNT),
        seq: u64_at(buf, off::SEQ),
        first_ts_ns: u64_at(buf, off::FIRST_TS),
        last_ts_ns: u64_at(buf, off::LAST_TS),
        sent_unix_ns: u64_at(buf, off::SENT),
        payload_len: (end - HEADER_LEN) as u32,
    };
    check_framing(payload, header.record_count)?;
    Ok(BatchView { header, payload })
}

/// Walks the record lengths (byte 28 of each) so [`BatchView::records`] cannot fail later.
fn check_framing(payload: &[u8], count: u32) -> Result<(), BatchError> {
    let mut at = 0usize;
    for index in 0..count {
        let Some(&v) = payload.get(at + 28) else {
            return Err(BatchError::BadRecord {
                index,
                what: "payload ends before record_count records",
            });
        };
        at += match v {
            0 | 4 => RECORD_LEN,
            6 => RECORD_V6_LEN,
            _ => {
                return Err(BatchError::BadRecord {
                    index,
                    what: "ip_version not 0, 4 or 6",
                })
            }
        };
        if at > payload.len() {
            return Err(BatchError::BadRecord {
                index,
                what: "record runs past the payload",
            });
        }
    }
    if at != payload.len() {
        return Err(BatchError::BadRecord {
            index: count,
            what: "bytes left after record_count records",
        });
    }
    Ok(())
}

/// A batch that passed [`open`].
#[derive(Clone, Copy, Debug)]
pub struct BatchView<'a> {
    header: Header,
    payload: &'a [u8],
}

impl<'a> BatchView<'a> {
    /// The header fields.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The records' bytes (record_count records back to back).
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// Decodes the records lazily (framing was checked by [`open`], so this cannot fail).
    pub fn records(&self) -> impl Iterator<Item = Record> + 'a {
        // open() checked every record's length, so decode errors cannot happen; map_while keeps it panic-free.
        wire::record::records(self.payload).map_while(Result::ok)
    }
}

/// Collects records into one payload up to a byte capacity (the probe's ring thread fills it).
#[derive(Debug)]
pub struct BatchBuilder {
    buf: Vec<u8>,
    capacity: usize,
    count: u32,
    first_ts: u64,
    last_ts: u64,
    spare: Vec<Vec<u8>>,
}

impl BatchBuilder {
    /// A builder whose payloads hold at most `capacity_bytes` (clamped to 80..=65536, so one record of any
    /// kind always fits).
    pub fn new(capacity_bytes: usize) -> BatchBuilder {
        let capacity = capacity_bytes.clamp(RECORD_V6_LEN, MAX_PAYLOAD);
        BatchBuilder {
            buf: Self::fresh(capacity),
            capacity,
            count: 0,
            first_ts: u64::MAX,
            last_ts: 0,
            spare: Vec::new(),
        }
    }

    fn fresh(capacity: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN + capacity + TAG_LEN);
        v.resize(HEADER_LEN, 0);
        v
    }

    /// Payload capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Records pushed since the last [`take`](Self::take).
    pub fn record_count(&self) -> u32 {
        self.count
    }

    /// Payload bytes so far.
    pub fn payload_len(&self) -> usize {
        self.buf.len() - HEADER_LEN
    }

    /// True when no record was pushed since the last take.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// True when `r` still fits.
    #[inline]
    pub fn fits(&self, r: &Record) -> bool {
        self.payload_len() + r.encoded_len() <= self.capacity
    }

    /// Appends `r`; false (nothing written) when it does not fit: take the batch and push again.
    #[inline]
    pub fn push(&mut self, r: &Record) -> bool {
        if !self.fits(r) {
            return false;
        }
        let at = self.buf.len();
        let n = r.encoded_len();
        // Within the capacity reserved at creation: no reallocation on the hot path.
        self.buf.resize(at + n, 0);
        r.encode(&mut self.buf[at..]);
        self.count += 1;
        self.first_ts = self.first_ts.min(r.ts_ns);
        self.last_ts = self.last_ts.max(r.ts_ns);
        true
    }

    /// Gives a buffer of a sent batch back for reuse (no allocation per batch in steady state).
    pub fn recycle(&mut self, mut batch: Batch) {
        if self.spare.len() < 8 && batch.buf.capacity() >= HEADER_LEN + self.capacity + TAG_LEN {
            batch.buf.truncate(HEADER_LEN);
            self.spare.push(batch.buf);
        }
    }

    /// Ends the current payload as an unsealed [`Batch`] and starts a new one.
    pub fn take(&mut self, probe_id: u64, stream_id: u32) -> Batch {
        let next = match self.spare.pop() {
            Some(v) => v,
            None => Self::fresh(self.capacity),
        };
        let mut buf = std::mem::replace(&mut self.buf, next);
        let payload_len = (buf.len() - HEADER_LEN) as u32;
        buf.resize(buf.len() + TAG_LEN, 0);
        let header = Header {
            probe_id,
            stream_id,
            record_count: self.count,
            seq: 0,
            first_ts_ns: if self.count == 0 { 0 } else { self.first_ts },
            last_ts_ns: self.last_ts,
            sent_unix_ns: 0,
            payload_len,
        };
        self.count = 0;
        self.first_ts = u64::MAX;
        self.last_ts = 0;
        Batch { buf, header }
    }
}

/// A filled batch, sealed (and resealed on failover) by the sender with a collector's sequence number.
#[derive(Debug)]
pub struct Batch {
    buf: Vec<u8>,
    header: Header,
}

impl Batch {
    /// Header fields (seq and sent time as of the last seal).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Records in the batch.
    pub fn record_count(&self) -> u32 {
        self.header.record_count
    }

    /// Sets seq and sent time, writes header and tag (for `collector_id`); returns the bytes to send.
    pub fn seal(&mut self, key: &Key, collector_id: &[u8], seq: u64, sent_unix_ns: u64) -> &[u8] {
        self.header.seq = seq;
        self.header.sent_unix_ns = sent_unix_ns;
        let n = seal(&mut self.buf, &self.header, key, collector_id);
        &self.buf[..n]
    }

    /// The bytes as of the last seal.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// Current Unix time in ns (for `sent_unix_ns` and the replay check).
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use wire::{IpPair, LinkType, MacAddr, UdpFrameSpec};

    const CID: &[u8] = b"collector-a";

    fn key() -> Key {
        Key::from_bytes(b"0123456789abcdef-test-key").unwrap()
    }

    fn frame(i: u16, v6: bool) -> Vec<u8> {
        let ip = if v6 {
            IpPair::V6 {
                src: "fd00::1".parse().unwrap(),
                dst: "fd00::2".parse().unwrap(),
            }
        } else {
            IpPair::V4 {
                src: "10.0.0.1".parse().unwrap(),
                dst: "10.0.0.2".parse().unwrap(),
            }
        };
        let spec = UdpFrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            vlan: None,
            ip,
            src_port: 1000 + i,
            dst_port: 53,
            ttl: 64,
            payload_len: 10 + i as usize,
        };
        let mut f = vec![0u8; spec.frame_len()];
        spec.emit(&mut f);
        f
    }

    fn records(n: u16) -> Vec<Record> {
        (0..n)
            .map(|i| {
                let f = frame(i, i % 5 == 0);
                Record::from_frame(1_000 + i as u64, f.len() as u32, &f, LinkType::Ethernet)
            })
            .collect()
    }

    fn sealed(n: u16, seq: u64) -> (Vec<u8>, Vec<Record>) {
        let recs = records(n);
        let mut b = BatchBuilder::new(MAX_PAYLOAD);
        for r in &recs {
            assert!(b.push(r));
        }
        let mut batch = b.take(7, 99);
        (batch.seal(&key(), CID, seq, 12345).to_vec(), recs)
    }

    #[test]
    fn round_trip() {
        let (bytes, recs) = sealed(50, 3);
        // 40 IPv4 records of 48 bytes, 10 IPv6 of 80.
        assert_eq!(bytes.len(), 64 + 40 * 48 + 10 * 80 + 32);
        assert_eq!(&bytes[..4], b"RCB1");
        let v = open(&bytes, &key(), CID).unwrap();
        let h = v.header();
        assert_eq!(
            *h,
            Header {
                probe_id: 7,
                stream_id: 99,
                record_count: 50,
                seq: 3,
                first_ts_ns: 1000,
                last_ts_ns: 1049,
                sent_unix_ns: 12345,
                payload_len: 2720,
            }
        );
        assert_eq!(v.records().collect::<Vec<_>>(), recs);
        assert_eq!(batch_len(&bytes[..64]), Ok(bytes.len()));
    }

    #[test]
    fn empty_batch_and_reseal() {
        let mut b = BatchBuilder::new(1000);
        let mut batch = b.take(1, 2);
        let bytes = batch.seal(&key(), CID, 0, 1).to_vec();
        assert_eq!(bytes.len(), 96);
        assert_eq!(open(&bytes, &key(), CID).unwrap().records().count(), 0);
        let bytes2 = batch.seal(&key(), CID, 9, 2).to_vec();
        assert_eq!(open(&bytes2, &key(), CID).unwrap().header().seq, 9);
        assert_ne!(bytes[64..], bytes2[64..], "reseal changes the tag");
    }

    #[test]
    fn builder_stops_at_capacity() {
        let recs = records(100);
        // Room for 10 IPv4 records or fewer with IPv6 ones.
        let mut b = BatchBuilder::new(480);
        let mut pushed = 0;
        for r in &recs {
            if !b.push(r) {
                break;
            }
            pushed += 1;
        }
        // Records 0 and 5 are IPv6 (80), the others 48: 2 * 80 + 6 * 48 = 448, record 8 does not fit.
        assert_eq!(pushed, 8);
        assert_eq!(b.payload_len(), 448);
        let mut batch = b.take(1, 1);
        assert!(b.is_empty());
        let bytes = batch.seal(&key(), CID, 0, 0).to_vec();
        assert_eq!(open(&bytes, &key(), CID).unwrap().records().count(), 8);
        b.recycle(batch);
        assert!(b.push(&recs[1]));
        assert_eq!(b.take(1, 1).record_count(), 1);
    }

    #[test]
    fn every_flipped_bit_is_rejected() {
        let (bytes, _) = sealed(5, 0);
        for i in 0..bytes.len() {
            for bit in [0, 3, 7] {
                let mut t = bytes.clone();
                t[i] ^= 1 << bit;
                let e = open(&t, &key(), CID).unwrap_err();
                // Structural fields fail before the tag; everything else fails the tag.
                let ok = match i {
                    0..=3 => matches!(e, BatchError::BadMagic(_)),
                    4 | 6 | 7 => matches!(e, BatchError::BadVersion { .. }),
                    56..=59 => matches!(
                        e,
                        BatchError::TooLarge(_)
                            | BatchError::Truncated { .. }
                            | BatchError::TrailingBytes { .. }
                    ),
                    _ => e == BatchError::BadTag,
                };
                assert!(ok, "byte {i} bit {bit}: {e:?}");
            }
        }
    }

    #[test]
    fn wrong_key_is_bad_tag() {
        let (bytes, _) = sealed(5, 0);
        let other = Key::from_bytes(b"another key of 16+ bytes").unwrap();
        assert_eq!(open(&bytes, &other, CID).unwrap_err(), BatchError::BadTag);
    }

    #[test]
    fn truncated_at_every_length() {
        let (bytes, _) = sealed(3, 0);
        for n in 0..bytes.len() {
            let e = open(&bytes[..n], &key(), CID).unwrap_err();
            assert!(
                matches!(e, BatchError::Truncated { have, .. } if have == n),
                "{n}: {e:?}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            open(&long, &key(), CID).unwrap_err(),
            BatchError::TrailingBytes {
                len: bytes.len(),
                have: bytes.len() + 1
            }
        );
    }

    #[test]
    fn too_large_before_anything_else() {
        let (mut bytes, _) = sealed(1, 0);
        bytes[56..60].copy_from_slice(&65537u32.to_le_bytes());
        assert_eq!(
            open(&bytes, &key(), CID).unwrap_err(),
            BatchError::TooLarge(65537)
        );
    }

    /// A sender with the key but a bug: the tag is right, the contents are not.
    #[test]
    fn authenticated_but_inconsistent() {
        let (good, _) = sealed(4, 0);
        // crc field wrong, tag recomputed over it.
        let mut t = good.clone();
        t[60] ^= 1;
        let end = t.len() - 32;
        let tag = key().tag_parts(&[&[CID.len() as u8], CID, &t[..end]]);
        t[end..].copy_from_slice(&tag);
        assert_eq!(open(&t, &key(), CID).unwrap_err(), BatchError::BadCrc);

        // record_count says 5 records, there are 4.
        let recs = records(4);
        let mut b = BatchBuilder::new(MAX_PAYLOAD);
        for r in &recs {
            b.push(r);
        }
        let mut batch = b.take(1, 1);
        batch.header.record_count = 5;
        let bytes = batch.seal(&key(), CID, 0, 0).to_vec();
        assert_eq!(
            open(&bytes, &key(), CID).unwrap_err(),
            BatchError::BadRecord {
                index: 4,
                what: "payload ends before record_count records"
            }
        );
        batch.header.record_count = 3;
        let bytes = batch.seal(&key(), CID, 0, 0).to_vec();
        assert!(matches!(
            open(&bytes, &key(), CID).unwrap_err(),
            BatchError::BadRecord { index: 3, .. }
        ));
        // An unknown ip_version byte in record 1.
        batch.header.record_count = 4;
        batch.buf[64 + 80 + 28] = 9;
        let bytes = batch.seal(&key(), CID, 0, 0).to_vec();
        assert!(matches!(
            open(&bytes, &key(), CID).unwrap_err(),
            BatchError::BadRecord { index: 1, .. }
        ));
    }

    #[test]
    fn garbage_never_panics() {
        let k = key();
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut buf = vec![0u8; 400];
        for i in 0..20000 {
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            if i % 2 == 0 {
                // Plausible header so the deeper checks run too.
                buf[..4].copy_from_slice(b"RCB1");
                buf[4] = 2;
                buf[6..8].copy_from_slice(&64u16.to_le_bytes());
                buf[56..60].copy_from_slice(&((x % 300) as u32).to_le_bytes());
            }
            let n = (x % 401) as usize;
            assert!(open(&buf[..n], &k, CID).is_err());
        }
    }

    #[test]
    fn keys() {
        assert!(matches!(
            Key::from_bytes(b"short\n"),
            Err(KeyError::TooShort { len: 5, .. })
        ));
        // A 16-byte key written by echo (newline stripped) equals the same bytes without it.
        let a = Key::from_bytes(b"0123456789abcdef\n").unwrap();
        let b = Key::from_bytes(b"0123456789abcdef").unwrap();
        assert_eq!(a.tag(b"x"), b.tag(b"x"));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, b"tooshort").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = Key::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("8 bytes") && e.contains(&p.display().to_string()),
            "{e}"
        );
        let e = Key::load(dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read key file"), "{e}");
        assert_eq!(format!("{a:?}"), "Key(..)");
    }

    #[test]
    fn key_files_readable_by_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, b"0123456789abcdef0123").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660, 0o602] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = Key::load(&p).unwrap_err().to_string();
            assert!(
                e.contains(&format!("chmod 600 {}", p.display()))
                    && e.contains(&format!("{mode:04o}")),
                "{mode:o}: {e}"
            );
        }
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(Key::load(&p).is_ok(), "{mode:o}");
        }
    }

    #[test]
    fn tag_binds_the_collector_id() {
        let (bytes, _) = sealed(3, 0);
        assert!(open(&bytes, &key(), CID).is_ok());
        for other in [&b"collector-b"[..], b"", b"collector-a ", b"collector-"] {
            assert_eq!(open(&bytes, &key(), other).unwrap_err(), BatchError::BadTag);
        }
        assert_eq!(claimed_probe_id(&bytes), Some(7));
    }

    #[test]
    fn v1_batches_are_refused_by_version() {
        let (mut bytes, _) = sealed(1, 0);
        bytes[4] = 1;
        let e = open(&bytes, &key(), CID).unwrap_err();
        assert!(
            matches!(e, BatchError::BadVersion { version: 1, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("upgrade"), "{e}");
    }
}
