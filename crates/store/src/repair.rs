//! Cutting a damaged capture file back to its last whole packet (after kill -9 or a crash).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::reader::{CaptureReader, Compression, InputFormat, Issue};

/// What [`repair_truncate`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairReport {
    /// Format of the file.
    pub format: InputFormat,
    /// Size before.
    pub original_len: u64,
    /// Size after (equal to `original_len` when nothing was wrong).
    pub new_len: u64,
    /// Whole packets kept.
    pub packets: u64,
    /// Packets found after the damage, which the cut removed (the file must be valid for every tool).
    pub packets_after_damage: u64,
    /// The first damage found, if any.
    pub first_damage: Option<Issue>,
    /// Compressed input: whole frames kept (the cut is after the last one).
    pub frames: Option<u64>,
    /// The compressed stream had to be rewritten (its last whole frame did not end at a whole
    /// packet, or a frame failed to decode), not just cut.
    pub rewritten: bool,
    /// New name after [`repair`] dropped a `.partial` marker.
    pub renamed_to: Option<PathBuf>,
}

impl RepairReport {
    /// Whether the file was changed.
    pub fn truncated(&self) -> bool {
        self.new_len < self.original_len
    }
}

/// Finds the last whole packet before the first damage of a plain pcap/pcapng file and cuts the
/// file right after it, so every tool reads it to the end.
pub fn repair_truncate(path: &Path) -> Result<RepairReport, StoreError> {
    let mut reader = CaptureReader::open(path)?;
    if reader.compression() != Compression::None {
        return Err(StoreError::format(
            path,
            "repairing compressed files is not supported yet: decompress it first (zstd -d / lz4 -d)",
        ));
    }
    while let Some(p) = reader.next_packet() {
        p?;
    }
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(read_err)?;
    let original_len = file.metadata().map_err(read_err)?.len();
    let new_len = reader.clean_end();
    if new_len < original_len {
        file.set_len(new_len)
            .and_then(|_| file.sync_all())
            .map_err(read_err)?;
    }
    Ok(RepairReport {
        format: reader.format(),
        original_len,
        new_len,
        packets: reader.clean_packets(),
        packets_after_damage: reader.packets() - reader.clean_packets(),
        first_damage: reader.issues().iter().find(|i| i.corrupt).cloned(),
        frames: None,
        rewritten: false,
        renamed_to: None,
    })
}

/// `ringcap repair`: cuts a plain or compressed (zstd/lz4) capture file to its last whole packet,
/// then, for ringcap's hidden `.<name>.partial` files, renames it to `<name>`.
///
/// A compressed file is first cut after its last whole frame (ringcap's frames end at packet
/// boundaries, so that is enough); when the kept frames do not decode to whole packets (another
/// writer, or a damaged frame), the whole packets are re-encoded into a fresh stream.
pub fn repair(path: &Path) -> Result<RepairReport, StoreError> {
    let nothing = |what: &str| {
        StoreError::format(
            path,
            format!("holds no whole packet ({what}): nothing to keep, delete it"),
        )
    };
    let compression = match CaptureReader::open(path) {
        Ok(r) => r.compression(),
        Err(StoreError::Format { reason, .. }) if reason.contains("empty") => {
            return Err(nothing("empty"))
        }
        Err(StoreError::Format { reason, .. }) if reason.contains("too short") => {
            return Err(nothing("shorter than a file header"))
        }
        Err(e) => return Err(e),
    };
    let mut report = match compression {
        Compression::None => repair_truncate(path)?,
        // ringcap never writes gzip, so a cut .gz is someone else's file.
        Compression::Gzip => {
            return Err(StoreError::format(
                path,
                "repairing gzip files is not supported: decompress it first (gzip -dc)",
            ))
        }
        c => repair_compressed(path, c)?,
    };
    if let Some(to) = finished_name(path) {
        std::fs::rename(path, &to).map_err(|source| StoreError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        report.renamed_to = Some(to);
    }
    Ok(report)
}

/// `dir/.name.partial` → `dir/name`; `None` for other names.
pub fn finished_name(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let inner = name.strip_prefix('.')?.strip_suffix(".partial")?;
    (!inner.is_empty()).then(|| path.with_file_name(inner))
}

fn repair_compressed(path: &Path, compression: Compression) -> Result<RepairReport, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(read_err)?;
    let original_len = file.metadata().map_err(read_err)?.len();
    let (frames_end, frames) = whole_frames(&mut file, compression).map_err(read_err)?;
    if frames == 0 {
        return Err(StoreError::format(
            path,
            "holds no whole packet (cut inside its first compressed frame): nothing to keep, delete it",
        ));
    }
    // What do the whole frames hold?
    file.seek(SeekFrom::Start(0)).map_err(read_err)?;
    let mut reader = CaptureReader::from_reader(
        Box::new(file.try_clone().map_err(read_err)?.take(frames_end)),
        path,
    )?;
    while let Some(p) = reader.next_packet() {
        p?;
    }
    let damaged = reader.damaged();
    let first_damage = reader.issues().iter().find(|i| i.corrupt).cloned();
    let mut new_len = frames_end;
    if damaged {
        new_len = rewrite_clean(path, &mut file, compression, frames_end, reader.clean_end())
            .map_err(read_err)?;
    } else if frames_end < original_len {
        file.set_len(frames_end)
            .and_then(|_| file.sync_all())
            .map_err(read_err)?;
    }
    // Packets after the damage are counted against the stream as it was.
    let mut all = CaptureReader::open(path)?;
    let mut after = 0u64;
    if damaged {
        after = reader.packets() - reader.clean_packets();
    }
    while let Some(p) = all.next_packet() {
        p?;
    }
    Ok(RepairReport {
        format: reader.format(),
        original_len,
        new_len,
        packets: all.packets(),
        packets_after_damage: after,
        first_damage: first_damage.or_else(|| {
            (frames_end < original_len).then(|| Issue {
                offset: frames_end,
                skipped: original_len - frames_end,
                reason: "the last compressed frame is cut".into(),
                corrupt: true,
            })
        }),
        frames: Some(frames),
        rewritten: damaged,
        renamed_to: None,
    })
}

/// Re-encodes the first `clean_end` decompressed bytes of the whole frames into the file.
fn rewrite_clean(
    path: &Path,
    file: &mut File,
    compression: Compression,
    frames_end: u64,
    clean_end: u64,
) -> io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let input = file.try_clone()?.take(frames_end);
    let mut decoded: Box<dyn Read> = match compression {
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(input)?),
        _ => Box::new(crate::reader::lz4_frames(input)),
    };
    let tmp = path.with_extension("repair-tmp");
    let out = File::create(&tmp)?;
    let mut taken = (&mut decoded).take(clean_end);
    match compression {
        Compression::Zstd => {
            let mut enc = zstd::stream::write::Encoder::new(out, 3)?;
            io::copy(&mut taken, &mut enc)?;
            enc.finish()?.sync_all()?;
        }
        _ => {
            let mut enc = lz4_flex::frame::FrameEncoder::new(out);
            io::copy(&mut taken, &mut enc)?;
            let f = enc.finish().map_err(io::Error::other)?;
            f.sync_all()?;
        }
    }
    std::fs::rename(&tmp, path)?;
    Ok(std::fs::metadata(path)?.len())
}

/// Finds the end of the last whole frame (zstd or lz4, skippable frames included) and how many
/// whole frames there are. Reads the file once, a frame at a time.
fn whole_frames(file: &mut File, compression: Compression) -> io::Result<(u64, u64)> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf: Vec<u8> = Vec::new();
    let mut base = 0u64; // file offset of buf[0]
    let mut pos = 0usize;
    let mut eof = false;
    let mut frames = 0;
    loop {
        let len = match compression {
            Compression::Zstd => zstd::zstd_safe::find_frame_compressed_size(&buf[pos..]).ok(),
            _ => lz4_frame_len(&buf[pos..]),
        };
        match len {
            Some(n) if n > 0 && pos + n <= buf.len() => {
                pos += n;
                frames += 1;
                continue;
            }
            _ if eof => return Ok((base + pos as u64, frames)),
            _ => {}
        }
        // Need more input: drop what is done, read the next 4 MiB.
        buf.drain(..pos);
        base += pos as u64;
        pos = 0;
        let at = buf.len();
        buf.resize(at + (4 << 20), 0);
        let n = read_full(file, &mut buf[at..])?;
        buf.truncate(at + n);
        eof = n == 0;
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Length of the lz4 frame (or skippable frame) at the start of `b`, if it is whole.
fn lz4_frame_len(b: &[u8]) -> Option<usize> {
    let rd = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let magic = rd(0)?;
    if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
        let n = 8 + rd(4)? as usize;
        return (n <= b.len()).then_some(n);
    }
    if magic != 0x184D_2204 {
        return None;
    }
    let flg = *b.get(4)?;
    let mut at = 7 + if flg & 0x08 != 0 { 8 } else { 0 } + if flg & 0x01 != 0 { 4 } else { 0 };
    let block_checksum = flg & 0x10 != 0;
    loop {
        let size = rd(at)?;
        at += 4;
        if size == 0 {
            break;
        }
        at += (size & 0x7FFF_FFFF) as usize + if block_checksum { 4 } else { 0 };
    }
    if flg & 0x04 != 0 {
        at += 4;
    }
    (at <= b.len()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_names_lose_their_marker() {
        assert_eq!(
            finished_name(Path::new("/d/.cap-x-000001.pcap.zst.partial")),
            Some(PathBuf::from("/d/cap-x-000001.pcap.zst"))
        );
        assert_eq!(finished_name(Path::new("/d/cap.pcap")), None);
        assert_eq!(finished_name(Path::new("/d/..partial")), None);
    }

    #[test]
    fn lz4_frames_are_measured_whole_or_not_at_all() {
        let mut out = vec![0; crate::compress::frame_bound(5000)];
        let n = crate::compress::lz4_frame(&[7u8; 5000], &mut out, false);
        assert_eq!(lz4_frame_len(&out[..n]), Some(n));
        assert_eq!(lz4_frame_len(&out[..n - 1]), None);
    }
}
