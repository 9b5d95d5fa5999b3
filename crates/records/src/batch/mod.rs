//! Batch v3 (v2 read too): a 64-byte header, records back to back, a 32-byte HMAC-SHA256 tag (docs/records.md). The tag
//! covers the id of the collector the batch was sealed for (not sent: both ends know it from the handshake),
//! so a batch recorded on its way to one collector fails the tag on any other.
//!
//! ```text
//!  0 4 magic "RCB1"   4 1 version 3    5 1 flags 0       6 2 header_len 64   8 8 probe_id
//! 16 4 stream_id     20 4 record_count 24 8 seq         32 8 first_ts_ns     40 8 last_ts_ns
//! 48 8 sent_unix_ns  56 4 payload_len  60 4 crc32 of payload   64.. payload   then 32 tag
//! ```
//!
//! The probe fills a [`BatchBuilder`], turns it into a [`Batch`] and the sender [`Batch::seal`]s it with the
//! collector's sequence number just before sending (and reseals it with another collector's number on
//! failover). The collector calls [`open`], which checks everything before any record is read.
//!
//! This file holds the layout (constants, field offsets, [`Header`]); the parts live in `key` (the shared
//! secret), `error` (why a batch is refused), `sealing` (writing header and tag), `opening` (checking a
//! batch and viewing its records) and `builder` (filling a batch, the probe side).

mod builder;
mod error;
mod key;
mod opening;
mod sealing;

pub use builder::{Batch, BatchBuilder};
pub use error::BatchError;
pub use key::{Key, KeyError};
pub use opening::{batch_len, claimed_probe_id, open, BatchView};
pub use sealing::seal;

/// First four bytes of every batch.
pub const MAGIC: [u8; 4] = *b"RCB1";
/// Format version written by this code (the record layout is versioned with it). 2: the tag covers the
/// collector id (v1 batches are refused with BadVersion, so an old probe is told to upgrade). 3: records
/// may carry tunnel flags and the tunnel extension (`wire::record`); same header, same tag.
pub const VERSION: u8 = 3;
/// The oldest version this code still reads: v2 batches (probes before the tunnel fields) are opened
/// as before, their records without flags.
pub const MIN_VERSION: u8 = 2;
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

/// The collector id as the tag covers it: one length byte, then the id (so id and header cannot be shifted
/// into each other). Panics above [`MAX_COLLECTOR_ID`] bytes (a caller bug: ids are checked where made).
fn id_prefix(collector_id: &[u8]) -> [u8; 1] {
    assert!(
        collector_id.len() <= MAX_COLLECTOR_ID,
        "collector id too long"
    );
    [collector_id.len() as u8]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use wire::record::Record;
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
                    // 3 ^ 1 is 2, a version still read: the tag (which covers it) refuses it.
                    4 if t[4] == MIN_VERSION => e == BatchError::BadTag,
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

    /// `bytes` with its version byte set to `v` and the tag made again (a batch as that version's
    /// probe seals it: same header and tag layout).
    fn as_version(mut bytes: Vec<u8>, v: u8) -> Vec<u8> {
        bytes[4] = v;
        let end = bytes.len() - TAG_LEN;
        let tag = key().tag_parts(&[&[CID.len() as u8], CID, &bytes[..end]]);
        bytes[end..].copy_from_slice(&tag);
        bytes
    }

    #[test]
    fn v2_batches_are_still_read_and_v3_carries_tunnels() {
        let (bytes, recs) = sealed(10, 0);
        assert_eq!(bytes[4], 3);
        let v2 = as_version(bytes, 2);
        assert_eq!(
            open(&v2, &key(), CID)
                .unwrap()
                .records()
                .collect::<Vec<_>>(),
            recs
        );
        // A record in a tunnel: 48 + 8 + 8 bytes (IPv4 carrier).
        let t = Record {
            tunnel: wire::TunnelKind::Vxlan.code(),
            tunnel_id: 42,
            carrier_version: 4,
            carrier_a: [192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            carrier_b: [192, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            ..recs[1]
        };
        let mut b = BatchBuilder::new(MAX_PAYLOAD);
        assert!(b.push(&recs[1]) && b.push(&t));
        let bytes = b.take(7, 99).seal(&key(), CID, 0, 0).to_vec();
        assert_eq!(bytes.len(), 64 + 48 + 64 + 32);
        let got: Vec<Record> = open(&bytes, &key(), CID).unwrap().records().collect();
        assert_eq!(got, vec![recs[1], t]);
        // The same bytes as a v2 batch: its records have no flags, so it is refused.
        assert!(matches!(
            open(&as_version(bytes, 2), &key(), CID).unwrap_err(),
            BatchError::BadRecord { index: 1, .. }
        ));
        // A version from the future names both ends' versions.
        let (bytes, _) = sealed(1, 0);
        let e = open(&as_version(bytes, 4), &key(), CID).unwrap_err();
        assert!(
            matches!(e, BatchError::BadVersion { version: 4, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("reads v2 and v3"), "{e}");
    }
}
