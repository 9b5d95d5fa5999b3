//! `ringcap repair`: after a crash or kill -9, keep every whole packet of a damaged capture file.
//! Damaged regions are cut out where the reader resynchronises past them (every whole packet
//! after them stays), a cut tail is dropped, and ringcap's hidden `.<name>.partial` files get
//! their final name. Only `.partial` files are touched unless forced: a finished file is whole.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::container::{finished_name, Compression};
use crate::error::StoreError;
use crate::reader::{CaptureReader, InputFormat, Issue};

mod compressed;

use compressed::repair_compressed;

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
    /// Damaged regions left out: regions of records the reader skipped, compressed frames that
    /// did not decode or verify, a cut tail (each counts as one).
    pub regions: u64,
    /// Bytes of those regions as far as known (of the decompressed stream for compressed files).
    pub dropped_bytes: u64,
    /// Compressed files: bytes of the frames (or of their parts) that could not be decoded.
    pub dropped_compressed: u64,
    /// Compressed files: frames that did not decode or did not match their checksum.
    pub lost_frames: u64,
    /// Some left-out data's decompressed size is unknown (a frame without its content size).
    pub dropped_bytes_unknown: bool,
    /// Packets known to be left out (all-zero records of a torn write, the one record a cut tail
    /// ends in, the records of a frame that decoded but failed its checksum).
    pub lost_packets: u64,
    /// Whether `lost_packets` counts every packet left out; regions of garbage hide how many records
    /// they held.
    pub lost_packets_exact: bool,
    /// The first damage found, if any.
    pub first_damage: Option<Issue>,
    /// Compressed input: whole frames found.
    pub frames: Option<u64>,
    /// The file was written anew (damage inside it), not just cut at the end.
    pub rewritten: bool,
    /// A compressed stream that cannot be decoded past some point: what follows it is lost.
    pub undecodable: bool,
    /// Frames kept although they fail their checksum: a file of one frame, where leaving it out
    /// would lose everything for one wrong bit, or a large frame decoded as it was read.
    pub suspect_frames: u64,
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
    // The records lost are known only for a cut tail (the one record it ends in) and zeros; what a
    // region of garbage held is not.
    let tail = u64::from(original_len > reader.records_end());
    Ok(RepairReport {
        format: reader.format(),
        compression: Compression::None,
        original_len,
        new_len,
        packets: reader.packets() - zeros,
        regions,
        dropped_bytes,
        dropped_compressed: 0,
        lost_frames: 0,
        dropped_bytes_unknown: false,
        lost_packets: zeros + tail,
        lost_packets_exact: inside.is_empty(),
        first_damage: reader
            .issues()
            .iter()
            .find(|i| i.corrupt)
            .cloned()
            .or(zero_issue),
        frames: None,
        rewritten,
        undecodable: false,
        suspect_frames: 0,
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
