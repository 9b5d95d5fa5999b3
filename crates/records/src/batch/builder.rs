//! Filling a batch with records up to a byte capacity (the probe's ring thread), and the filled batch
//! the sender seals.

use wire::record::{Record, RECORD_MAX_LEN};

use super::{seal, Header, Key, HEADER_LEN, MAX_PAYLOAD, TAG_LEN};

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
        let capacity = capacity_bytes.clamp(RECORD_MAX_LEN, MAX_PAYLOAD);
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
    pub(super) buf: Vec<u8>,
    pub(super) header: Header,
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
