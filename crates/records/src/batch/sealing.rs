//! Writing a batch's header and tag (the sender, just before sending).

use super::{id_prefix, off, Header, Key, HEADER_LEN, MAGIC, MAX_PAYLOAD, TAG_LEN, VERSION};

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
