//! Repairing a compressed capture (zstd or lz4 frames): whole frames kept, a damaged frame decoded as far
//! as it goes, and the packets re-encoded into new frames where a region was cut out.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::container::{self, Compression};
use crate::error::StoreError;
use crate::reader::{CaptureReader, Issue};

use super::{copy_kept, rewrite, scan, RepairReport};

pub(super) fn repair_compressed(
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
