//! The frames section of an index file: each frame's place in the file and the stream, its first
//! record, times and packets, as LEB128 varints relative to the frame before.

/// One frame: an independently decodable piece of the file (a compressed frame; for plain
/// files, the bytes one writer buffer held).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    pub file_off: u64,
    pub file_len: u64,
    /// Where the frame's bytes lie in the uncompressed stream.
    pub raw_start: u64,
    pub raw_len: u64,
    /// Offset of the first record that starts in the frame (plain files: a record may spill in
    /// from the previous frame).
    pub rec_start: u64,
    pub first_ts: u64,
    pub last_ts: u64,
    pub packets: u64,
}

impl Frame {
    /// Whether any packet of the frame lies in `[after, before)` (no `before`: no end).
    pub fn overlaps(&self, after: u64, before: Option<u64>) -> bool {
        self.packets > 0 && self.last_ts >= after && before.is_none_or(|b| self.first_ts < b)
    }

    /// The frame did not decode when the file was indexed: its packets and their times are
    /// unknown. Marked by a last timestamp no packet has, with no packets (an empty frame's is 0).
    pub fn is_damaged(&self) -> bool {
        self.packets == 0 && self.last_ts == u64::MAX
    }
}

/// The frames section: per frame, varints relative to the frame before (file and stream places
/// as the gap after it, usually 0; the first record from the frame's start; the first timestamp as
/// a zigzag delta; the last one from the first; packets). About 7 bytes a frame after the
/// chunk's zstd, where 64 fixed bytes took 21.
pub(crate) fn encode_frames(frames: &[Frame], out: &mut Vec<u8>) {
    let mut prev = Frame::default();
    for f in frames {
        let fields = [
            f.file_off
                .wrapping_sub(prev.file_off.wrapping_add(prev.file_len)),
            f.file_len,
            f.raw_start
                .wrapping_sub(prev.raw_start.wrapping_add(prev.raw_len)),
            f.raw_len,
            zigzag(f.rec_start.wrapping_sub(f.raw_start)),
            zigzag(f.first_ts.wrapping_sub(prev.first_ts)),
            zigzag(f.last_ts.wrapping_sub(f.first_ts)),
            f.packets,
        ];
        for v in fields {
            put_varint(out, v);
        }
        prev = *f;
    }
}

/// The `n` frames of a frames section; `None` if the bytes do not hold exactly that.
pub(super) fn decode_frames(mut b: &[u8], n: u32) -> Option<Vec<Frame>> {
    // Each frame takes at least 8 bytes: a damaged count must not allocate without bound.
    let mut frames = Vec::with_capacity((n as usize).min(b.len() / 8));
    let mut prev = Frame::default();
    for _ in 0..n {
        let mut v = [0u64; 8];
        for x in &mut v {
            let (value, used) = varint(b)?;
            *x = value;
            b = &b[used..];
        }
        let file_off = prev.file_off.wrapping_add(prev.file_len).wrapping_add(v[0]);
        let raw_start = prev.raw_start.wrapping_add(prev.raw_len).wrapping_add(v[2]);
        let first_ts = prev.first_ts.wrapping_add(unzigzag(v[5]));
        let f = Frame {
            file_off,
            file_len: v[1],
            raw_start,
            raw_len: v[3],
            rec_start: raw_start.wrapping_add(unzigzag(v[4])),
            first_ts,
            last_ts: first_ts.wrapping_add(unzigzag(v[6])),
            packets: v[7],
        };
        frames.push(f);
        prev = f;
    }
    b.is_empty().then_some(frames)
}

fn zigzag(d: u64) -> u64 {
    let d = d as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> u64 {
    ((v >> 1) as i64 ^ -((v & 1) as i64)) as u64
}

/// LEB128: 7 bits per byte, low first.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A LEB128 varint (as [`put_varint`] writes it) and the bytes it took.
#[inline]
pub(crate) fn varint(b: &[u8]) -> Option<(u64, usize)> {
    // Most of a frame table's numbers take one byte (decoding the tables was a tenth of a warm
    // one-host query, perf).
    if let Some(&x) = b.first() {
        if x < 0x80 {
            return Some((u64::from(x), 1));
        }
    }
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate().take(10) {
        v |= u64::from(x & 0x7f) << (7 * i);
        if x & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}
