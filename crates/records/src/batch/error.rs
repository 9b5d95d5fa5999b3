//! Why a batch is refused.

/// Why [`open`](super::open) rejected bytes. Each names what was wrong.
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
    #[error("unsupported batch version {version} / header length {header_len} (this build reads v2 and v3, 64; \
             a v1 batch comes from a ringcap before collector-bound tags: upgrade that probe; a later one \
             from a newer probe: upgrade this collector)")]
    BadVersion {
        /// Version byte.
        version: u8,
        /// Header length field.
        header_len: u16,
    },
    /// `payload_len` above [`MAX_PAYLOAD`](super::MAX_PAYLOAD).
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
