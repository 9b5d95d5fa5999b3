//! The frames of a zstd or lz4 file: independently decodable pieces, found from their headers
//! and block sizes alone (RFC 8878 §3.1.1; lz4 frame format 1.6), so an index can name them and
//! a reader decode only those it needs. Skippable frames (magic 0x184D2A5?, shared by both) count
//! as frames that decode to nothing.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::Compression;

/// A file's frames as far as they could be walked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    /// (file offset, length) of each whole frame, in order.
    pub frames: Vec<(u64, u64)>,
    /// Where the whole frames end: the file's size, or where a frame is cut or damaged.
    pub end: u64,
}

/// Walks the frames of a `compression` (zstd or lz4) file of `size` bytes, reading only frame
/// and block headers (a few bytes per block: memory stays small whatever the frames' sizes).
/// Stops early, with what it found, when `stop` is set: a cold file's headers are many small
/// reads.
pub fn walk(file: &File, size: u64, compression: Compression, stop: &AtomicBool) -> Walk {
    let frame_len = match compression {
        Compression::Zstd => zstd_frame_len,
        Compression::Lz4 => lz4_frame_len,
        _ => {
            return Walk {
                frames: vec![(0, size)],
                end: size,
            }
        }
    };
    let mut w = Walk::default();
    while w.end < size && !stop.load(Relaxed) {
        match frame_len(file, w.end).filter(|&n| n > 0 && w.end + n <= size) {
            Some(n) => {
                w.frames.push((w.end, n));
                w.end += n;
            }
            None => break,
        }
    }
    w
}

fn read_at<const N: usize>(f: &File, off: u64) -> Option<[u8; N]> {
    let mut b = [0u8; N];
    f.read_exact_at(&mut b, off).ok()?;
    Some(b)
}

/// Skippable frames (zstd and lz4 share them): magic 0x184D2A5?, then a 4-byte length.
fn skippable_len(f: &File, at: u64, magic: u32) -> Option<u64> {
    if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
        let n = u32::from_le_bytes(read_at::<4>(f, at + 4)?);
        return Some(8 + u64::from(n));
    }
    None
}

/// Length of the zstd frame at `at`, from its header and block headers.
fn zstd_frame_len(f: &File, at: u64) -> Option<u64> {
    let h: [u8; 5] = read_at(f, at)?;
    let magic = u32::from_le_bytes(h[..4].try_into().unwrap());
    if let Some(n) = skippable_len(f, at, magic) {
        return Some(n);
    }
    if magic != 0xFD2F_B528 {
        return None;
    }
    let fhd = h[4];
    let single = (fhd >> 5) & 1 == 1;
    let fcs = match fhd >> 6 {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dict = [0, 1, 2, 4][usize::from(fhd & 3)];
    let mut pos = at + 5 + u64::from(!single) + dict as u64 + fcs as u64;
    loop {
        let b: [u8; 3] = read_at(f, pos)?;
        let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
        let (last, kind, size) = (v & 1 == 1, (v >> 1) & 3, u64::from(v >> 3));
        pos += 3 + match kind {
            1 => 1, // RLE: one byte repeated `size` times
            3 => return None,
            _ => size,
        };
        if last {
            break;
        }
    }
    if (fhd >> 2) & 1 == 1 {
        pos += 4;
    }
    Some(pos - at)
}

/// Length of the lz4 frame at `at`, from its header and block sizes.
fn lz4_frame_len(f: &File, at: u64) -> Option<u64> {
    let h: [u8; 6] = read_at(f, at)?;
    let magic = u32::from_le_bytes(h[..4].try_into().unwrap());
    if let Some(n) = skippable_len(f, at, magic) {
        return Some(n);
    }
    if magic != 0x184D_2204 {
        return None;
    }
    let flg = h[4];
    let mut pos =
        at + 6 + if flg & 0x08 != 0 { 8 } else { 0 } + if flg & 0x01 != 0 { 4 } else { 0 } + 1;
    let block_sum = if flg & 0x10 != 0 { 4 } else { 0 };
    loop {
        let n = u32::from_le_bytes(read_at::<4>(f, pos)?);
        pos += 4;
        if n == 0 {
            break;
        }
        pos += u64::from(n & 0x7FFF_FFFF) + block_sum;
    }
    if flg & 0x04 != 0 {
        pos += 4;
    }
    Some(pos - at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn walk_bytes(b: &[u8], c: Compression) -> Walk {
        let path =
            std::env::temp_dir().join(format!("ringcap-walk-{}-{}", std::process::id(), b.len()));
        std::fs::write(&path, b).unwrap();
        let f = File::open(&path).unwrap();
        let w = walk(&f, b.len() as u64, c, &AtomicBool::new(false));
        std::fs::remove_file(&path).unwrap();
        w
    }

    #[test]
    fn frames_of_zstd_and_lz4_files_with_skippable_ones_and_a_cut_tail() {
        let a = zstd::bulk::compress(&[1u8; 5000], 1).unwrap();
        let b = zstd::encode_all(&[2u8; 70_000][..], 3).unwrap();
        let mut skip = 0x184D_2A53u32.to_le_bytes().to_vec();
        skip.extend_from_slice(&3u32.to_le_bytes());
        skip.extend_from_slice(b"abc");
        let mut file = [a.clone(), skip.clone(), b.clone()].concat();
        let whole = file.len() as u64;
        file.extend_from_slice(&a[..a.len() / 2]);
        let w = walk_bytes(&file, Compression::Zstd);
        let lens: Vec<u64> = w.frames.iter().map(|f| f.1).collect();
        assert_eq!(lens, [a.len() as u64, 11, b.len() as u64]);
        assert_eq!(w.end, whole);

        let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
        enc.write_all(&[3u8; 100_000]).unwrap();
        let l = enc.finish().unwrap();
        let file = [l.clone(), skip, l.clone()].concat();
        let w = walk_bytes(&file, Compression::Lz4);
        let lens: Vec<u64> = w.frames.iter().map(|f| f.1).collect();
        assert_eq!(lens, [l.len() as u64, 11, l.len() as u64]);
        assert_eq!(w.end, file.len() as u64);
    }
}
