//! Checking a received batch before any record is read, and viewing its records.

use wire::record::Record;

use super::{
    id_prefix, off, BatchError, Header, Key, HEADER_LEN, MAGIC, MAX_COLLECTOR_ID, MAX_PAYLOAD,
    MIN_VERSION, TAG_LEN, VERSION,
};

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
    if !(MIN_VERSION..=VERSION).contains(&version) || header_len as usize != HEADER_LEN {
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
    // Records of a v2 batch come from a probe without tunnel fields: flags there are damage.
    check_framing(payload, header.record_count, buf[off::VERSION] >= 3)?;
    Ok(BatchView { header, payload })
}

/// Walks the record lengths (byte 28 of each, and the tunnel extension) so [`BatchView::records`]
/// cannot fail later; `flags`: the batch's version allows byte-28 flags.
fn check_framing(payload: &[u8], count: u32, flags: bool) -> Result<(), BatchError> {
    let mut at = 0usize;
    for index in 0..count {
        let rest = payload.get(at..).unwrap_or_default();
        at += match Record::len_at(rest, flags) {
            Ok(n) => n,
            Err(wire::RecordError::Truncated { .. }) if rest.len() <= 28 => {
                return Err(BatchError::BadRecord {
                    index,
                    what: "payload ends before record_count records",
                })
            }
            Err(wire::RecordError::BadIpVersion(_)) if !flags => {
                return Err(BatchError::BadRecord {
                    index,
                    what: "ip_version not 0, 4 or 6 (a v2 batch has no tunnel flags)",
                })
            }
            Err(wire::RecordError::BadIpVersion(_)) => {
                return Err(BatchError::BadRecord {
                    index,
                    what: "ip_version not 0, 4 or 6",
                })
            }
            Err(wire::RecordError::BadTunnel(what)) => {
                return Err(BatchError::BadRecord { index, what })
            }
            Err(wire::RecordError::Truncated { .. }) => {
                return Err(BatchError::BadRecord {
                    index,
                    what: "record runs past the payload",
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
