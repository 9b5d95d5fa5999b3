//! `ringcap repair`: after a crash or kill -9, keep every whole packet of a damaged capture file.
//! Damaged regions are cut out where the reader resynchronises past them (every whole packet
//! after them stays), a cut tail is dropped, and ringcap's hidden `.<name>.partial` files get
//! their final name. Only `.partial` files are touched unless forced: a finished file is whole.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::reader::{CaptureReader, Compression, InputFormat, Issue};

/// How [`repair`] may change files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairOptions {
    /// Change nothing; the report says what would be done.
    pub dry_run: bool,
    /// Also repair files that are not ringcap's `.<name>.partial` files.
    pub force: bool,
}

/// What [`repair`] did (or, with `dry_run`, would do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairReport {
    /// Format of the file.
    pub format: InputFormat,
    /// Compression of the file.
    pub compression: Compression,
    /// Size before.
    pub original_len: u64,
    /// Size after (equal to `original_len` when nothing was wrong).
    pub new_len: u64,
    /// Whole packets kept.
    pub packets: u64,
    /// Damaged regions cut out (a cut tail counts as one).
    pub regions: u64,
    /// Bytes of those regions (of the decompressed stream for compressed files).
    pub dropped_bytes: u64,
    /// The first damage found, if any.
    pub first_damage: Option<Issue>,
    /// Compressed input: whole frames found.
    pub frames: Option<u64>,
    /// The file was written anew (damage inside it), not just cut at the end.
    pub rewritten: bool,
    /// A compressed stream that cannot be decoded past some point: what follows it is lost.
    pub undecodable: bool,
    /// New name after dropping a `.partial` marker.
    pub renamed_to: Option<PathBuf>,
    /// Nothing was changed (`RepairOptions::dry_run`).
    pub dry_run: bool,
}

impl RepairReport {
    /// Whether the file's content was (or would be) changed.
    pub fn changed(&self) -> bool {
        self.new_len != self.original_len || self.rewritten
    }
}

/// Repairs a plain or compressed (zstd/lz4) capture file: every whole packet the reader finds is
/// kept, damaged regions and a cut tail go; then a `.<name>.partial` file is renamed to `<name>`
/// (never over an existing file). Files not named `.partial` are refused unless `opts.force`.
///
/// A compressed file is first cut after its last whole frame (ringcap's frames end at packet
/// boundaries, so that is enough); when the kept frames hold damage, the kept bytes are
/// re-encoded into a fresh stream.
pub fn repair(path: &Path, opts: RepairOptions) -> Result<RepairReport, StoreError> {
    let partial = finished_name(path);
    if partial.is_none() && !opts.force {
        return Err(StoreError::format(
            path,
            "refused: not a file ringcap was writing (those are named .NAME.partial), so it should be \
             whole and repair would rewrite it; check it with `capinfos`, and pass --force to repair it \
             anyway (--dry-run first shows what would change)",
        ));
    }
    if let Some(to) = partial.as_ref().filter(|to| to.exists()) {
        return Err(StoreError::format(
            path,
            format!(
                "refused: its finished name {} exists already (the capture completed it): compare \
                 the two, delete the one you do not need",
                to.display()
            ),
        ));
    }
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
        Compression::None => repair_plain(path, opts.dry_run)?,
        // ringcap never writes gzip, so a cut .gz is someone else's file.
        Compression::Gzip => {
            return Err(StoreError::format(
                path,
                "repairing gzip files is not supported: decompress it first (gzip -dc)",
            ))
        }
        c => repair_compressed(path, c, opts.dry_run)?,
    };
    if let Some(to) = partial {
        if !opts.dry_run {
            // link + unlink: the finished name is taken only if it is free (rename would replace).
            std::fs::hard_link(path, &to)
                .and_then(|_| std::fs::remove_file(path))
                .map_err(|source| StoreError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
            sync_parent(&to);
        }
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

/// Reads the whole stream; returns the reader (for its counts) and the damaged regions inside
/// the records it read (those after [`CaptureReader::records_end`] are the cut tail).
fn scan(mut reader: CaptureReader) -> Result<(CaptureReader, Vec<(u64, u64)>), StoreError> {
    while let Some(p) = reader.next_packet() {
        p?;
    }
    let end = reader.records_end();
    let inside = reader
        .dropped_regions()
        .iter()
        .copied()
        .filter(|&(at, _)| at < end)
        .collect();
    Ok((reader, inside))
}

/// Counts for the report from a finished scan of a stream of `stream_len` bytes kept up to `end`:
/// (regions, dropped bytes, new length).
fn counts(end: u64, inside: &[(u64, u64)], stream_len: u64) -> (u64, u64, u64) {
    let tail = stream_len.saturating_sub(end);
    let in_bytes: u64 = inside.iter().map(|r| r.1).sum();
    let regions = inside.len() as u64 + u64::from(tail > 0);
    (regions, in_bytes + tail, end - in_bytes)
}

fn repair_plain(path: &Path, dry_run: bool) -> Result<RepairReport, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let original_len = std::fs::metadata(path).map_err(read_err)?.len();
    let (reader, mut inside) = scan(CaptureReader::open(path)?)?;
    // Zeros at the end are a torn write's never-written blocks, not packets.
    let (end, zeros) = reader.zero_tail().unwrap_or((reader.records_end(), 0));
    inside.retain(|&(at, _)| at < end);
    let (regions, dropped_bytes, new_len) = counts(end, &inside, original_len);
    let rewritten = !inside.is_empty();
    let zero_issue = (zeros > 0).then(|| Issue {
        offset: end,
        skipped: original_len - end,
        reason: format!("the file ends in {zeros} all-zero records, as a torn write leaves"),
        corrupt: true,
    });
    if !dry_run {
        if rewritten {
            let mut input = File::open(path).map_err(read_err)?;
            rewrite(path, |out| copy_kept(&mut input, out, end, &inside)).map_err(read_err)?;
        } else if new_len < original_len {
            let file = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(read_err)?;
            file.set_len(new_len)
                .and_then(|_| file.sync_all())
                .map_err(read_err)?;
        }
    }
    Ok(RepairReport {
        format: reader.format(),
        compression: Compression::None,
        original_len,
        new_len,
        packets: reader.packets() - zeros,
        regions,
        dropped_bytes,
        first_damage: reader
            .issues()
            .iter()
            .find(|i| i.corrupt)
            .cloned()
            .or(zero_issue),
        frames: None,
        rewritten,
        undecodable: false,
        renamed_to: None,
        dry_run,
    })
}

/// Copies `input[..end]` to `out` without the `dropped` regions (sorted, inside `..end`).
fn copy_kept(
    input: &mut dyn Read,
    out: &mut dyn Write,
    end: u64,
    dropped: &[(u64, u64)],
) -> io::Result<()> {
    let mut at = 0u64;
    for &(from, len) in dropped.iter().chain(&[(end, 0)]) {
        let keep = from.saturating_sub(at);
        if io::copy(&mut (&mut *input).take(keep), out)? != keep {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let skip = (from + len).min(end).saturating_sub(at + keep);
        io::copy(&mut (&mut *input).take(skip), &mut io::sink())?;
        at += keep + skip;
    }
    Ok(())
}

/// Writes a new version of `path` with `fill` into a hidden file next to it (created anew, never
/// through a symlink, with the original's permissions), syncs it and renames it over `path`.
fn rewrite(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.repair-tmp"));
    let meta = std::fs::metadata(path)?;
    let mode = meta.permissions().mode() & 0o777;
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", tmp.display())))?;
    // And the original's group (a 0640 file of `--group` stays readable by that group). Only root or a
    // member may set it; if we cannot, no group may read the copy (its group would be ours instead).
    let fd = std::os::fd::AsRawFd::as_raw_fd(&out);
    let gid = std::os::unix::fs::MetadataExt::gid(&meta);
    // SAFETY: fchown/fchmod on a descriptor we own; -1 leaves the owner as it is.
    if unsafe { libc::fchown(fd, u32::MAX, gid) } != 0 {
        unsafe { libc::fchmod(fd, mode & 0o700) };
    }
    let done = fill(&mut out)
        .and_then(|_| out.sync_all())
        .and_then(|_| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done?;
    sync_parent(path);
    Ok(())
}

/// fsync on the directory makes a rename durable.
fn sync_parent(path: &Path) {
    if let Some(d) = path.parent().and_then(|d| File::open(d).ok()) {
        let _ = d.sync_all();
    }
}

fn repair_compressed(
    path: &Path,
    compression: Compression,
    dry_run: bool,
) -> Result<RepairReport, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(read_err)?;
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
    let reader = CaptureReader::from_reader(
        Box::new(file.try_clone().map_err(read_err)?.take(frames_end)),
        path,
    )?;
    let (reader, inside) = scan(reader)?;
    let undecodable = reader
        .issues()
        .iter()
        .any(|i| i.corrupt && i.reason.contains("stream is damaged"));
    let first_damage = reader.issues().iter().find(|i| i.corrupt).cloned();
    let rewritten = reader.damaged();
    let mut report = RepairReport {
        format: reader.format(),
        compression,
        original_len,
        new_len: frames_end,
        packets: reader.packets(),
        regions: inside.len() as u64,
        dropped_bytes: inside.iter().map(|r| r.1).sum(),
        first_damage: first_damage.or_else(|| {
            (frames_end < original_len).then(|| Issue {
                offset: frames_end,
                skipped: original_len - frames_end,
                reason: "the last compressed frame is cut".into(),
                corrupt: true,
            })
        }),
        frames: Some(frames),
        rewritten,
        undecodable,
        renamed_to: None,
        dry_run,
    };
    if frames_end < original_len {
        report.regions += 1;
    }
    if dry_run {
        return Ok(report);
    }
    if rewritten {
        file.seek(SeekFrom::Start(0)).map_err(read_err)?;
        let end = reader.records_end();
        rewrite(path, |out| {
            let input = file.try_clone()?.take(frames_end);
            let mut decoded: Box<dyn Read> = match compression {
                Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(input)?),
                _ => Box::new(crate::reader::lz4_frames(input)),
            };
            match compression {
                Compression::Zstd => {
                    let mut enc = zstd::stream::write::Encoder::new(out, 3)?;
                    copy_kept(&mut decoded, &mut enc, end, &inside)?;
                    enc.finish()?;
                }
                _ => {
                    let mut enc = lz4_flex::frame::FrameEncoder::new(out);
                    copy_kept(&mut decoded, &mut enc, end, &inside)?;
                    enc.finish().map_err(io::Error::other)?;
                }
            }
            Ok(())
        })
        .map_err(read_err)?;
        report.new_len = std::fs::metadata(path).map_err(read_err)?.len();
    } else if frames_end < original_len {
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(read_err)?;
        f.set_len(frames_end)
            .and_then(|_| f.sync_all())
            .map_err(read_err)?;
    }
    Ok(report)
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
