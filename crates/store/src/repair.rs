//! `ringcap repair`: after a crash or kill -9, keep every whole packet of a damaged capture file.
//! Damaged regions are cut out where the reader resynchronises past them (every whole packet
//! after them stays), a cut tail is dropped, and ringcap's hidden `.<name>.partial` files get
//! their final name. Only `.partial` files are touched unless forced: a finished file is whole.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::container::{self, finished_name, Compression};
use crate::error::StoreError;
use crate::reader::{CaptureReader, InputFormat, Issue};

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

fn repair_compressed(
    path: &Path,
    compression: Compression,
    dry_run: bool,
) -> Result<RepairReport, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(read_err)?;
    let original_len = file.metadata().map_err(read_err)?.len();
    let walked = container::walk(
        &file,
        original_len,
        compression,
        &std::sync::atomic::AtomicBool::new(false),
    );
    let frames_end = walked.end;
    let spans: Vec<Span> = walked
        .frames
        .iter()
        .map(|&(offset, len)| Span { offset, len })
        .collect();
    if spans.is_empty() {
        return Err(StoreError::format(
            path,
            "holds no whole packet (cut inside its first compressed frame): nothing to keep, delete it",
        ));
    }
    let file = Arc::new(file);
    // What do the whole frames hold? Each frame is decoded alone, so one that does not decode
    // loses only itself: ringcap's frames hold whole records, so the next one reads on.
    let stream = FrameStream::new(file.clone(), compression, spans.clone());
    let lost = stream.lost.clone();
    let suspect = stream.suspect.clone();
    let total = stream.total.clone();
    let reader = CaptureReader::from_reader(Box::new(stream), path)?;
    let (reader, inside) = scan(reader)?;
    let lost: Vec<LostFrame> = std::mem::take(&mut *lost.lock().expect("not poisoned"));
    let end = reader.records_end();
    // A record cut off where the decoded data ends (a frame that ended early): left out too.
    let decoded_tail = total.load(Relaxed).saturating_sub(end);
    // A region of records that spans where a lost frame was is the same damage: counted once.
    let at_seam = |&(at, len): &(u64, u64)| lost.iter().any(|l| at < l.seam && l.seam <= at + len);
    let tail_alone = decoded_tail > 0 && !at_seam(&(end, decoded_tail));
    let regions = inside.iter().filter(|r| !at_seam(r)).count() as u64
        + lost.len() as u64
        + u64::from(tail_alone)
        + u64::from(frames_end < original_len);
    let first_damage = lost
        .first()
        .map(|l| Issue {
            offset: l.offset,
            skipped: l.len.unwrap_or(0),
            reason: format!("the compressed frame at file offset {} {}", l.offset, l.why),
            corrupt: true,
        })
        .or_else(|| reader.issues().iter().find(|i| i.corrupt).cloned())
        .or_else(|| {
            (frames_end < original_len).then(|| Issue {
                offset: frames_end,
                skipped: original_len - frames_end,
                reason: "the last compressed frame is cut".into(),
                corrupt: true,
            })
        });
    let suspect_frames = *suspect.lock().expect("not poisoned");
    let rewritten = reader.damaged() || !lost.is_empty();
    let mut report = RepairReport {
        format: reader.format(),
        compression,
        original_len,
        new_len: frames_end,
        packets: reader.packets(),
        regions,
        dropped_bytes: inside.iter().map(|r| r.1).sum::<u64>()
            + decoded_tail
            + lost.iter().filter_map(|l| l.data).sum::<u64>(),
        dropped_compressed: lost.iter().filter_map(|l| l.len).sum::<u64>()
            + (original_len - frames_end),
        lost_frames: lost.len() as u64,
        dropped_bytes_unknown: lost.iter().any(|l| l.data.is_none()) || frames_end < original_len,
        lost_packets: lost.iter().filter_map(|l| l.packets).sum::<u64>() + u64::from(tail_alone),
        lost_packets_exact: inside.is_empty()
            && frames_end == original_len
            && lost.iter().all(|l| l.packets.is_some()),
        first_damage,
        frames: Some(spans.len() as u64),
        rewritten,
        undecodable: lost.iter().any(|l| l.rest_of_frame),
        suspect_frames,
        renamed_to: None,
        dry_run,
    };
    if dry_run {
        return Ok(report);
    }
    if rewritten {
        rewrite(path, |out| {
            // The same decoding as the scan's, so the regions' offsets hold.
            let mut decoded = FrameStream::new(file.clone(), compression, spans.clone());
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

/// A whole compressed frame of the file: its offset and length.
#[derive(Clone, Copy, Debug)]
struct Span {
    offset: u64,
    len: u64,
}

/// A frame left out (or, when `rest_of_frame`, its part after the damage).
#[derive(Debug)]
struct LostFrame {
    /// File offset of the frame, and its compressed bytes left out when known (all of it when
    /// left out whole).
    offset: u64,
    len: Option<u64>,
    /// Decompressed bytes left out, when known (the frame header's content size).
    data: Option<u64>,
    /// Packets left out, when known (a frame that decoded but failed its checksum).
    packets: Option<u64>,
    /// The decoded stream's offset where the frame's kept data ends.
    seam: u64,
    /// A large frame, decoded as it was read: what came before the damage was kept.
    rest_of_frame: bool,
    /// What was wrong.
    why: String,
}

/// Frames of at most this many decompressed bytes are decoded whole before any of them is used, so
/// one that fails its checksum is left out whole (ringcap writes frames of at most 4 MiB, see
/// `MAX_FRAME_SIZE`). Larger ones (another tool's file, often one frame for everything) are decoded
/// as they are read, and what came before the damage is kept.
const WHOLE_FRAME_MAX: usize = crate::compress::MAX_FRAME_SIZE;

/// The decompressed stream of a file's whole frames, each frame decoded alone: a frame that does
/// not decode, or does not match its checksum, is left out (and listed in `lost`) and the next one
/// read on. Only a read error of the file itself is an error.
struct FrameStream {
    file: Arc<File>,
    compression: Compression,
    spans: std::collections::VecDeque<Span>,
    /// Decoded bytes handed out so far (and for whoever holds a clone of `total`).
    at: u64,
    total: Arc<AtomicU64>,
    cur: Current,
    lost: Arc<Mutex<Vec<LostFrame>>>,
    /// The file is one frame (not ringcap's layout of many small ones).
    single: bool,
    /// Frames kept that decoded whole but failed their checksum (a file of one frame, or a large
    /// frame handed out as it was decoded).
    suspect: Arc<Mutex<u64>>,
}

enum Current {
    None,
    Whole(io::Cursor<Vec<u8>>),
    Streaming {
        dec: Box<dyn Read + Send>,
        span: Span,
        content: Option<u64>,
        emitted: u64,
    },
}

impl FrameStream {
    fn new(file: Arc<File>, compression: Compression, spans: Vec<Span>) -> FrameStream {
        FrameStream {
            file,
            compression,
            single: spans.len() == 1,
            suspect: Arc::default(),
            spans: spans.into(),
            at: 0,
            total: Arc::default(),
            cur: Current::None,
            lost: Arc::default(),
        }
    }

    fn decoder<'a>(&self, r: impl Read + Send + 'a) -> io::Result<Box<dyn Read + Send + 'a>> {
        container::decoder(r, self.compression)
    }

    /// Sets up the next frame; false at the end.
    fn next_frame(&mut self) -> io::Result<bool> {
        let Some(span) = self.spans.pop_front() else {
            return Ok(false);
        };
        let mut bytes = vec![0; span.len as usize];
        self.file.read_exact_at(&mut bytes, span.offset)?;
        let content = match self.compression {
            Compression::Zstd => zstd::zstd_safe::get_frame_content_size(&bytes)
                .ok()
                .flatten(),
            _ => None,
        };
        // zstd and lz4 share the skippable frames' magic, 0x184D2A5?.
        let skippable = bytes
            .get(..4)
            .is_some_and(|m| m[0] & 0xF0 == 0x50 && m[1..] == [0x2A, 0x4D, 0x18]);
        if skippable {
            self.cur = Current::Whole(io::Cursor::new(Vec::new()));
            return Ok(true);
        }
        let mut out = Vec::new();
        let whole = content.is_none_or(|n| n <= WHOLE_FRAME_MAX as u64);
        let result = if whole {
            self.decoder(&bytes[..])
                .and_then(|d| d.take(WHOLE_FRAME_MAX as u64 + 1).read_to_end(&mut out))
        } else {
            Ok(WHOLE_FRAME_MAX + 1)
        };
        match result {
            Ok(n) if n <= WHOLE_FRAME_MAX => {
                self.cur = Current::Whole(io::Cursor::new(out));
            }
            Ok(_) => {
                // Too large to hold: decoded as read (a stream of its own over the file).
                let r = ReadAt {
                    file: self.file.clone(),
                    at: span.offset,
                    end: span.offset + span.len,
                };
                self.cur = Current::Streaming {
                    dec: self.decoder(r)?,
                    span,
                    content,
                    emitted: 0,
                };
            }
            Err(e) => {
                // All of it decoded, yet it does not verify: the damage is somewhere inside, so
                // none of it is trusted, and its records can be counted.
                let decoded_all = all_decoded(content, out.len() as u64, &e);
                if decoded_all && self.single {
                    // Another tool's one frame for everything: losing all of it for a wrong bit
                    // somewhere would be worse than keeping it, said as suspect.
                    *self.suspect.lock().expect("not poisoned") += 1;
                    self.cur = Current::Whole(io::Cursor::new(out));
                    return Ok(true);
                }
                let packets = decoded_all
                    .then(|| records_in(&out, self.at == 0))
                    .flatten();
                let kept = if decoded_all { 0 } else { out.len() as u64 };
                self.lost.lock().expect("not poisoned").push(LostFrame {
                    offset: span.offset,
                    len: Some(span.len),
                    data: if decoded_all {
                        Some(out.len() as u64)
                    } else {
                        content.map(|n| n.saturating_sub(kept))
                    },
                    packets,
                    seam: self.at + kept,
                    rest_of_frame: false,
                    why: format!("does not decode: {e}"),
                });
                // What decoded before the damage is kept: whole records of it survive.
                out.truncate(kept as usize);
                self.cur = Current::Whole(io::Cursor::new(out));
            }
        }
        Ok(true)
    }
}

/// Whether a frame that failed with `e` after `decoded` bytes had given all of its content (only
/// its checksum failed). A frame's content size, where its header has one, decides: a flipped
/// "last block" bit ends a frame early, and then the checksum fails too.
fn all_decoded(content: Option<u64>, decoded: u64, e: &io::Error) -> bool {
    match content {
        Some(n) => n == decoded,
        None => e.to_string().to_lowercase().contains("checksum"),
    }
}

/// Packets in `data`, the decoded content of one of ringcap's frames (whole records; the first
/// also holds the file header), when it walks as records to its very end.
fn records_in(data: &[u8], first: bool) -> Option<u64> {
    use crate::format::{walk_own_records, Format, PCAP_HEADER_LEN};
    let pcap = data.len() >= 4
        && [crate::format::PCAP_MAGIC_US, crate::format::PCAP_MAGIC_NS]
            .contains(&u32::from_ne_bytes(data[..4].try_into().unwrap()));
    let (format, start) = match () {
        _ if first && pcap => (Format::Pcap { nanos: false }, PCAP_HEADER_LEN),
        _ if first => (Format::PcapNg, 0),
        _ => {
            // Not the first frame: the format is whichever walks the whole of it.
            let ng = walk_own_records(Format::PcapNg, data, 0);
            let p = walk_own_records(Format::Pcap { nanos: false }, data, 0);
            return match (ng.0 == data.len(), p.0 == data.len()) {
                (true, false) => Some(ng.1),
                (false, true) => Some(p.1),
                _ => None, // neither, or both: not known
            };
        }
    };
    let (end, n) = walk_own_records(format, data, start);
    (end == data.len()).then_some(n)
}

impl Read for FrameStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let mut failed = false;
            let n = match &mut self.cur {
                Current::None => 0,
                Current::Whole(c) => c.read(buf)?,
                Current::Streaming {
                    dec,
                    span,
                    content,
                    emitted,
                } => match dec.read(buf) {
                    Ok(n) => {
                        *emitted += n as u64;
                        n
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if all_decoded(*content, *emitted, &e) => {
                        // All of it was handed out, and then did not verify: kept, said as
                        // suspect (the reader cuts what does not read as records).
                        *self.suspect.lock().expect("not poisoned") += 1;
                        failed = true;
                        0
                    }
                    Err(e) => {
                        // Handed out already: the rest of this frame is what is lost (how many
                        // of its compressed bytes that is, the decoder does not say).
                        self.lost.lock().expect("not poisoned").push(LostFrame {
                            offset: span.offset,
                            len: None,
                            data: content.map(|c| c.saturating_sub(*emitted)),
                            packets: None,
                            seam: self.at,
                            rest_of_frame: true,
                            why: format!(
                                "cannot be decoded past {} of its data: {e}",
                                units::bytes(*emitted)
                            ),
                        });
                        failed = true;
                        0
                    }
                },
            };
            if failed {
                self.cur = Current::None;
            }
            if n > 0 {
                self.at += n as u64;
                self.total.store(self.at, Relaxed);
                return Ok(n);
            }
            if !self.next_frame()? {
                return Ok(0);
            }
        }
    }
}

/// Reads `file[at..end]` by offset (pread), leaving the file's own position alone.
struct ReadAt {
    file: Arc<File>,
    at: u64,
    end: u64,
}

impl Read for ReadAt {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min((self.end - self.at) as usize);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}
