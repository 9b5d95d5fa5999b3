//! Where a record ends in a plain capture stream, from its header alone: what reading one record
//! at a known offset needs (an index names records by offset).

use crate::format::{PCAP_MAGIC_NS, PCAP_MAGIC_US};

/// The modified pcap of Alexey Kuznetzov's patched libpcap (`editcap -F modpcap`): µs times,
/// 24-byte record headers. libpcap reads it.
pub const PCAP_MAGIC_PATCHED: u32 = 0xa1b2_cd34;

/// How records are framed in a capture stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    pcapng: bool,
    big_endian: bool,
    /// pcap: bytes of a record header (16, or 24 in a patched file).
    pcap_header: usize,
}

/// Largest record length believed (a damaged header must not make a reader allocate without
/// bound): pcapng's largest block as libpcap reads it.
const MAX_RECORD: u32 = 16 << 20;

impl RecordLayout {
    /// From the stream's first bytes (the file header, at least 12 bytes).
    pub fn of(head: &[u8]) -> Result<RecordLayout, String> {
        let m: [u8; 4] = head
            .get(..4)
            .and_then(|m| m.try_into().ok())
            .ok_or("no file header")?;
        let (le, be) = (u32::from_le_bytes(m), u32::from_be_bytes(m));
        let pcap = [PCAP_MAGIC_US, PCAP_MAGIC_NS, PCAP_MAGIC_PATCHED];
        if pcap.contains(&le) || pcap.contains(&be) {
            return Ok(RecordLayout {
                pcapng: false,
                big_endian: !pcap.contains(&le),
                pcap_header: if le == PCAP_MAGIC_PATCHED || be == PCAP_MAGIC_PATCHED {
                    24
                } else {
                    16
                },
            });
        }
        let bom = head.get(8..12).ok_or("short pcapng header")?;
        Ok(RecordLayout {
            pcapng: true,
            big_endian: bom == [0x1a, 0x2b, 0x3c, 0x4d],
            pcap_header: 16,
        })
    }

    /// Bytes of a record's start that give its length.
    pub fn header_len(&self) -> usize {
        if self.pcapng {
            8
        } else {
            self.pcap_header
        }
    }

    /// The whole record's length from its first [`Self::header_len`] bytes.
    pub fn record_len(&self, head: &[u8]) -> Result<u64, String> {
        let at = if self.pcapng { 4 } else { 8 };
        let b: [u8; 4] = head
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .ok_or("a record header cut short")?;
        let v = if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        };
        if v > MAX_RECORD {
            return Err(format!("an impossible record length {v}"));
        }
        Ok(if self.pcapng {
            u64::from(v)
        } else {
            u64::from(v) + self.pcap_header as u64
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lengths_of_pcap_patched_pcap_and_pcapng() {
        let mut pcap = PCAP_MAGIC_US.to_be_bytes().to_vec();
        pcap.resize(24, 0);
        let l = RecordLayout::of(&pcap).unwrap();
        let mut rec = vec![0u8; 16];
        rec[8..12].copy_from_slice(&60u32.to_be_bytes());
        assert_eq!((l.header_len(), l.record_len(&rec).unwrap()), (16, 76));
        let patched = RecordLayout::of(&PCAP_MAGIC_PATCHED.to_le_bytes()).unwrap();
        let mut rec = vec![0u8; 24];
        rec[8..12].copy_from_slice(&60u32.to_le_bytes());
        assert_eq!(patched.record_len(&rec).unwrap(), 84);
        let mut ng = 0x0a0d_0d0au32.to_le_bytes().to_vec();
        ng.extend_from_slice(&[28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a]);
        let l = RecordLayout::of(&ng).unwrap();
        let mut blk = vec![0u8; 8];
        blk[4..8].copy_from_slice(&92u32.to_le_bytes());
        assert_eq!((l.header_len(), l.record_len(&blk).unwrap()), (8, 92));
        blk[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(l.record_len(&blk).is_err());
    }
}
