// Over 700 lines on purpose: frames and records read by index share one plan of pieces; apart, each half would need the other to read.
//! Reading a file by its index: only the frames (compressed files) or records (plain files) the
//! index names, plus the part it does not cover yet.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Cursor, Read};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::pace::{Paced, ReadPace};
use super::worker::{read_stream, scan_file, Out};
use super::{FileError, FileReport, How, Job, ScanWhy, Target};
use crate::file::{Compression, Frame, IndexError, IndexFile, WHOLE_FRAME_MAX};
use crate::ranges::{stream_of, ReadAt};

/// Candidate records closer than this are read with one read.
const COALESCE: u64 = 64 << 10;
/// Read buffer for each run of frames (it grows for a larger record). From the allocator's heap:
/// a buffer of 1 MiB was a fresh mapping per run, whose page faults were a fifth of a 5-tuple
/// query's time (~5 runs per file, `perf`).
const RUN_BUFFER: usize = 64 << 10;

/// One piece of a compressed file to decode: a frame the index names (or the part of one that
/// holds wanted records), or the part the index does not cover yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    off: u64,
    len: u64,
    /// Decoded bytes to drop first: what lies before the frame's first wanted record (the file
    /// header that [`read_stream`] already puts in front of the stream, in a first frame; the
    /// end of a record begun in the frame before, when frames are not cut at records).
    skip: u64,
    /// Decoded bytes to give after `skip`, at most (None: to the frame's end): a frame whose
    /// last record ends in a later frame is followed by that part of the later one, and no more.
    take: Option<u64>,
}

/// The pieces that give exactly the records starting in the wanted frames, in file order. A
/// frame's records run from its first record to the next frame's first record (or to a damaged
/// frame, or to the end): for ringcap's files, whose frames are cut at records, that is the
/// frame itself; other tools' compressed files may cut a record anywhere, even across several
/// frames. Adjacent ranges join, so no frame is decoded twice.
fn record_pieces(frames: &[Frame], wanted: &[bool]) -> Vec<Piece> {
    let ends = record_ends(frames);
    let mut ranges: Vec<(u64, Option<u64>)> = Vec::new();
    for k in (0..frames.len()).filter(|&k| wanted[k]) {
        let f = &frames[k];
        let range = if f.is_damaged() {
            // Read again whole: it fails again (and is said), or decodes now.
            (f.raw_start, frames.get(k + 1).map(|n| n.raw_start))
        } else {
            (f.rec_start, ends[k])
        };
        match ranges.last_mut() {
            Some(last) if last.1 == Some(range.0) => last.1 = range.1,
            _ => ranges.push(range),
        }
    }
    let mut pieces = Vec::new();
    for (from, to) in ranges {
        // The frames the range lies in: from the one holding `from` to the one holding `to - 1`.
        let mut k = frames
            .partition_point(|f| f.raw_start <= from)
            .saturating_sub(1);
        while k < frames.len() {
            let f = &frames[k];
            let end = frames.get(k + 1).map(|n| n.raw_start);
            let start = from.max(f.raw_start);
            if to.is_some_and(|to| start >= to) {
                break;
            }
            let take = match (to, end) {
                (Some(to), Some(end)) if to >= end => None,
                (Some(to), _) => Some(to - start),
                (None, _) => None,
            };
            pieces.push(Piece {
                off: f.file_off,
                len: f.file_len,
                skip: start - f.raw_start,
                take,
            });
            // The range ends in this frame, or this is the last frame.
            let last = match (to, end) {
                (_, None) => true,
                (Some(to), Some(end)) => end >= to,
                (None, Some(_)) => false,
            };
            if last {
                break;
            }
            k += 1;
        }
    }
    pieces
}

/// Whole frames that did not decode (a bad checksum, damaged bytes): each is skipped alone, as
/// frames are independent, and the query reads on and says what it could not read.
#[derive(Default)]
struct Skipped {
    frames: u64,
    bytes: u64,
    /// The first one's file offset and what was wrong.
    first: Option<(u64, String)>,
}

impl Skipped {
    /// What the report says, if anything was skipped.
    fn describe(&self) -> Option<FileError> {
        let (offset, why) = self.first.clone()?;
        Some(FileError::FramesSkipped {
            frames: self.frames,
            bytes: self.bytes,
            offset,
            why,
        })
    }
}

/// The wanted pieces of a compressed file as one stream of records, decoded piece by piece.
/// Frames are cut at record boundaries, so the records of frames far apart join up.
struct Frames {
    src: Arc<dyn ReadAt>,
    pace: Option<Arc<ReadPace>>,
    pieces: Vec<Piece>,
    next: usize,
    compression: Compression,
    /// Each piece is one whole frame (as the index lists them), not a stretch of frames.
    whole_frames: bool,
    ahead: Prefetch,
    cur: Option<Box<dyn Read + Send>>,
    /// A whole zstd frame as read, and decoded when it did not fit the caller's buffer
    /// (`raw[raw_pos..]` is still to be returned).
    packed: Vec<u8>,
    raw: Vec<u8>,
    raw_pos: usize,
    skipped: Arc<Mutex<Skipped>>,
}

impl Frames {
    fn new(
        src: &Arc<dyn ReadAt>,
        job: &Job,
        pieces: Vec<Piece>,
        compression: Compression,
        whole_frames: bool,
    ) -> io::Result<Frames> {
        if src.as_file().is_none() {
            // A remote source fetches what comes next (joined, a few requests at a time).
            let ranges: Vec<Range<u64>> = pieces.iter().map(|p| p.off..p.off + p.len).collect();
            src.will_read(&ranges);
        }
        Ok(Frames {
            src: src.clone(),
            pace: job.pace.clone(),
            pieces,
            next: 0,
            compression,
            whole_frames,
            // Paced reads must not run ahead of the pace; one long piece has the kernel's own
            // read-ahead.
            ahead: Prefetch {
                on: whole_frames && job.pace.is_none(),
                advised: 0,
                cached: true,
            },
            cur: None,
            packed: Vec::new(),
            raw: Vec::new(),
            raw_pos: 0,
            skipped: Arc::default(),
        })
    }

    /// What was skipped as damaged; read it once the stream is done.
    fn skipped(&self) -> Arc<Mutex<Skipped>> {
        self.skipped.clone()
    }

    /// Streams the piece from `src`, less its first `skip` decoded bytes, at most `take` after.
    fn stream<R: Read + Send + 'static>(
        &mut self,
        src: R,
        skip: u64,
        take: Option<u64>,
    ) -> io::Result<usize> {
        let mut dec = store::container::decoder(src, self.compression)?;
        io::copy(&mut dec.by_ref().take(skip), &mut io::sink())?;
        self.cur = Some(match take {
            Some(n) => Box::new(dec.take(n)),
            None => dec,
        });
        Ok(0)
    }

    /// Starts piece `p`, decoding into `buf` when it is a small whole zstd frame that fits there
    /// (then returns how many bytes it put there). A small whole zstd frame is decoded at once
    /// with the thread's context (a context per frame: 26 % of a one-host query's samples; `udp`
    /// took 1.5× the CPU), straight into the reader's buffer when it fits (copying it there was
    /// 19 % of a one-host query); a small whole lz4 frame is decoded at once too. A whole frame
    /// that does not decode is skipped (see [`Skipped`]): nothing of it reached the reader, so
    /// the next frame's records line up. Anything else gets a streaming decoder.
    fn start(&mut self, p: Piece, buf: &mut [u8]) -> io::Result<usize> {
        let whole = self.whole_frames && p.len <= WHOLE_FRAME_MAX && self.compression.has_frames();
        if !whole {
            // Not probed for the page cache: announce the frames after it.
            self.ahead.cached = false;
            let paced = Paced {
                inner: stream_of(self.src.clone(), p.off..p.off + p.len)?,
                pace: self.pace.clone(),
            };
            return self.stream(paced, p.skip, p.take);
        }
        self.packed.resize(p.len as usize, 0);
        let got = match self.src.as_file() {
            Some(f) => self.ahead.read_cached(f, &mut self.packed, p.off),
            None => 0,
        };
        if got < self.packed.len() {
            // Not (all) cached: announce the frames from this one on before waiting for it, so
            // that they are read while this one is.
            if let Some(f) = self.src.as_file() {
                self.ahead.advise(f, &self.pieces, self.next - 1);
            }
            self.src
                .read_at(&mut self.packed[got..], p.off + got as u64)?;
        }
        if let Some(pace) = &self.pace {
            pace.take(p.len)?;
        }
        let decoded = if self.compression == Compression::Lz4 {
            // Decoded sizes are bounded as zstd's are: a larger frame streams.
            self.raw.clear();
            let n = lz4_flex::frame::FrameDecoder::new(&self.packed[..])
                .take(WHOLE_FRAME_MAX + 1)
                .read_to_end(&mut self.raw);
            if matches!(n, Ok(n) if n as u64 > WHOLE_FRAME_MAX) {
                self.raw.clear();
                let packed = std::mem::take(&mut self.packed);
                return self.stream(Cursor::new(packed), p.skip, p.take);
            }
            n.map(|_| None)
        } else {
            match zstd::zstd_safe::get_frame_content_size(&self.packed) {
                Ok(Some(n)) if p.skip == 0 && p.take.is_none() && n as usize <= buf.len() => {
                    crate::file::zstd_decompress_to(&self.packed, &mut buf[..n as usize]).map(Some)
                }
                Ok(Some(n)) if n <= WHOLE_FRAME_MAX => {
                    crate::file::zstd_decompress_whole(&self.packed, &mut self.raw).map(|_| None)
                }
                // Size not in the header (or too large): stream the bytes already read.
                Ok(_) => {
                    let packed = std::mem::take(&mut self.packed);
                    return self.stream(Cursor::new(packed), p.skip, p.take);
                }
                Err(_) => Err(io::Error::other("no zstd frame header")),
            }
        };
        match decoded {
            Ok(Some(n)) => Ok(n),
            Ok(None) => {
                self.raw_pos = (p.skip as usize).min(self.raw.len());
                if let Some(n) = p.take {
                    let end = (p.skip + n).min(self.raw.len() as u64) as usize;
                    self.raw.truncate(end);
                }
                Ok(0)
            }
            Err(e) => {
                self.raw.clear();
                self.raw_pos = 0;
                let mut s = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
                s.frames += 1;
                s.bytes += p.len;
                s.first.get_or_insert((p.off, e.to_string()));
                Ok(0)
            }
        }
    }
}

impl Read for Frames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.raw_pos < self.raw.len() {
                let n = buf.len().min(self.raw.len() - self.raw_pos);
                buf[..n].copy_from_slice(&self.raw[self.raw_pos..self.raw_pos + n]);
                self.raw_pos += n;
                return Ok(n);
            }
            if self.cur.is_none() {
                let Some(&p) = self.pieces.get(self.next) else {
                    return Ok(0);
                };
                if let Some(f) = self.src.as_file() {
                    self.ahead.advise(f, &self.pieces, self.next);
                }
                self.next += 1;
                match self.start(p, buf)? {
                    0 => continue,
                    n => return Ok(n),
                }
            }
            let n = self.cur.as_mut().expect("set").read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            self.cur = None;
        }
    }
}

pub(super) fn by_index(
    t: &Target,
    ix: &IndexFile,
    job: &Job,
    out: &mut Out<'_>,
    r: &mut FileReport,
) -> Result<(), FileError> {
    let path = t.label();
    let h = ix.header;
    let compressed = h.compression != Compression::None;
    if !compressed && !h.complete {
        // A plain file indexed only in part: records cross the edge; read it whole.
        r.how = How::Scan(ScanWhy::PlainIndexedInPart);
        return scan_file(t, &job.pace, out, r);
    }
    if h.read_whole {
        let in_time =
            h.packets > 0 && h.last_ts >= out.after && out.before.is_none_or(|b| h.first_ts < b);
        if !in_time {
            r.how = How::IndexNothingInWindow;
            return Ok(());
        }
        r.how = How::Scan(ScanWhy::LateInterfaces);
        return scan_file(t, &job.pace, out, r);
    }
    let Plan {
        frames,
        prelude,
        wanted,
        records,
        candidates,
    } = match plan(ix, job, out.after, out.before, out.named.as_ref()) {
        Ok(p) => p,
        // Nothing of this file was returned yet: a damaged chunk means reading it whole.
        Err(e) => {
            r.how = How::Scan(super::worker::scan_why(&e));
            return scan_file(t, &job.pace, out, r);
        }
    };
    let prelude = &prelude[..];
    r.how = How::Index;
    r.frames_total = u64::from(h.frames);
    r.candidates = candidates;
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = t.open().map_err(io)?;
    if compressed {
        // The records of every wanted frame, as one stream.
        let pieces = record_pieces(&frames, &wanted);
        r.frames_read = pieces.len() as u64;
        r.bytes_read = pieces.iter().map(|p| p.len).sum();
        let body = Frames::new(&file, job, pieces, h.compression, true).map_err(io)?;
        let skipped = body.skipped();
        read_stream(prelude, Box::new(body), path, out, r, RUN_BUFFER)?;
        let skipped = skipped.lock().unwrap_or_else(|e| e.into_inner());
        if let (None, Some(why)) = (&r.error, skipped.describe()) {
            r.error = Some(why);
        }
    } else if r.candidates.is_none() {
        // Runs of wanted frames, each read as one piece: from the run's first record to the end
        // of the records of its last frame.
        let ends = record_ends(&frames);
        for run in wanted_runs(&wanted) {
            let (first, k) = (run.start, run.end);
            r.frames_read += (k - first) as u64;
            let from = frames[first].rec_start;
            let to = ends[k - 1].unwrap_or(h.covered);
            r.bytes_read += to - from;
            let paced = Paced {
                inner: stream_of(file.clone(), from..to).map_err(io)?,
                pace: job.pace.clone(),
            };
            read_stream(prelude, Box::new(paced), path, out, r, RUN_BUFFER)?;
        }
    } else {
        plain_records(&*file, prelude, &records, path, &job.pace, out, r)?;
        r.frames_read = wanted.iter().filter(|&&w| w).count() as u64;
    }
    if !h.complete {
        // What the index does not cover (compressed: whole frames from `covered` on).
        let size = file.len().unwrap_or(h.covered);
        r.how = How::IndexAndTail;
        r.bytes_read += size - h.covered;
        let raw_start = frames.last().map_or(0, |f| f.raw_start + f.raw_len);
        let tail = vec![Piece {
            off: h.covered,
            len: size - h.covered,
            skip: (prelude.len() as u64).saturating_sub(raw_start),
            take: None,
        }];
        let body = Frames::new(&file, job, tail, h.compression, false).map_err(io)?;
        read_stream(prelude, Box::new(body), path, out, r, RUN_BUFFER)?;
    }
    Ok(())
}

/// Where the records that start in each frame end: at the first record of a later frame that
/// has one, or at the start of a damaged frame (nothing of it reaches the stream); None: at the
/// end of what the index covers.
fn record_ends(frames: &[Frame]) -> Vec<Option<u64>> {
    let mut ends = vec![None; frames.len()];
    let mut next: Option<u64> = None;
    for k in (0..frames.len()).rev() {
        ends[k] = next;
        let f = &frames[k];
        if f.is_damaged() {
            next = Some(f.raw_start);
        } else if f.packets > 0 {
            next = Some(f.rec_start);
        }
    }
    ends
}

/// Runs of consecutive wanted frames, in file order.
fn wanted_runs(wanted: &[bool]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut k = 0;
    while k < wanted.len() {
        if !wanted[k] {
            k += 1;
            continue;
        }
        let first = k;
        while k < wanted.len() && wanted[k] {
            k += 1;
        }
        runs.push(first..k);
    }
    runs
}

/// Compressed bytes of wanted frames announced to the kernel ahead of the reader.
const PREFETCH_AHEAD: u64 = 8 << 20;

/// Tells the kernel which frames come next (`posix_fadvise(WILLNEED)`: reads started at once, in
/// the background), so a cold query keeps many reads in flight instead of waiting for one frame at
/// a time: a one-host query reads scattered frames, where the kernel's own read-ahead
/// (sequential only) does not help. Not while the file's frames are found in the page cache:
/// there each call only walks the cache (5 % of a warm one-host query's samples, perf), so the
/// frames are read with `RWF_NOWAIT` until one is not there, and announced from then on.
struct Prefetch {
    on: bool,
    /// Pieces announced so far.
    advised: usize,
    /// Every frame read so far was in the page cache.
    cached: bool,
}

impl Prefetch {
    /// Before reading piece `at`: announces the pieces from it up to PREFETCH_AHEAD bytes
    /// further, adjacent ones in one call.
    fn advise(&mut self, file: &File, pieces: &[Piece], at: usize) {
        use std::os::fd::AsRawFd;
        if !self.on || self.cached {
            return;
        }
        // Nothing before `at` is announced now: those were read.
        self.advised = self.advised.max(at);
        let from = pieces[at].off;
        while self.advised < pieces.len() {
            let first = pieces[self.advised];
            if self.advised > at && first.off >= from + PREFETCH_AHEAD {
                break;
            }
            let mut end = first.off + first.len;
            self.advised += 1;
            while let Some(p) = pieces.get(self.advised) {
                if p.off != end || end - first.off >= PREFETCH_AHEAD {
                    break;
                }
                end += p.len;
                self.advised += 1;
            }
            // SAFETY: a plain system call on an open descriptor; a failure only loses the hint.
            unsafe {
                libc::posix_fadvise(
                    file.as_raw_fd(),
                    first.off as libc::off_t,
                    (end - first.off) as libc::off_t,
                    libc::POSIX_FADV_WILLNEED,
                );
            }
        }
    }
}

impl Prefetch {
    /// Reads what of `buf.len()` bytes at `off` is in the page cache, while every frame so far
    /// was; how many bytes it read (the caller reads the rest). The first miss (or a file
    /// system without `RWF_NOWAIT`) ends the probing for this file.
    fn read_cached(&mut self, file: &File, buf: &mut [u8], off: u64) -> usize {
        use std::os::fd::AsRawFd;
        if !self.on || !self.cached {
            return 0;
        }
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: `iov` describes `buf`, which outlives the call; the descriptor is open.
        let n = unsafe {
            libc::preadv2(
                file.as_raw_fd(),
                &iov,
                1,
                off as libc::off_t,
                libc::RWF_NOWAIT,
            )
        };
        let n = usize::try_from(n).unwrap_or(0);
        if n < buf.len() {
            self.cached = false;
        }
        n
    }
}

/// What an index says to read of one file.
struct Plan<'a> {
    frames: Vec<Frame>,
    prelude: Cow<'a, [u8]>,
    /// Frames to read (compressed files, or every packet in the time window).
    wanted: Vec<bool>,
    /// Plain files: the candidate records, in file order.
    records: Vec<u64>,
    /// Packets the narrowing left to test (`None`: no narrowing).
    candidates: Option<u64>,
}

/// The frames and records of a file that may hold matches in `[after, before)`: time prunes the
/// frames, then the index's flows narrow them.
fn plan<'a>(
    ix: &'a IndexFile,
    job: &Job,
    after: u64,
    before: Option<u64>,
    named: Option<&super::named::FlowSet>,
) -> Result<Plan<'a>, IndexError> {
    let frames = ix.frames()?;
    let in_time: Vec<bool> = frames.iter().map(|f| f.overlaps(after, before)).collect();
    let prelude = ix.prelude()?;
    let mut wanted = vec![false; frames.len()];
    let mut records: Vec<u64> = Vec::new();
    let mut candidates = None;
    let mut flows = ix.candidates(&job.query.narrow)?;
    if let Some(named) = named {
        // Only the flows named: those of the narrowing among them.
        let mine = ix.flows_of_keys(named.keys())?;
        flows = Some(match flows {
            None => mine,
            Some(mut c) => {
                c.sort_unstable();
                mine.into_iter()
                    .filter(|f| c.binary_search(f).is_ok())
                    .collect()
            }
        });
    }
    match flows {
        None => wanted.clone_from(&in_time),
        Some(flows) => {
            let mut offs = Vec::new();
            ix.postings(&flows, &mut offs)?;
            if ix.postings_are_frames() {
                // Every packet of a candidate frame goes through the filter.
                offs.retain(|&k| in_time.get(k as usize) == Some(&true));
                offs.sort_unstable();
                offs.dedup();
                candidates = Some(offs.iter().map(|&k| frames[k as usize].packets).sum());
                for k in offs {
                    wanted[k as usize] = true;
                }
                offs = Vec::new();
            } else {
                candidates = Some(offs.len() as u64);
            }
            offs.sort_unstable();
            for off in offs {
                let k = frames
                    .partition_point(|f| f.rec_start <= off)
                    .saturating_sub(1);
                if in_time.get(k) == Some(&true) {
                    wanted[k] = true;
                    records.push(off);
                }
            }
        }
    }
    // Frames that did not decode when the file was indexed are read again (they fail again and
    // are reported as skipped, or decode now and go through the filter) when the window may
    // hold their packets: between the frames around them.
    for k in (0..frames.len()).filter(|&k| frames[k].is_damaged()) {
        let before_it = frames[..k].iter().rev().find(|f| f.packets > 0);
        let after_it = frames[k + 1..].iter().find(|f| f.packets > 0);
        let from = before_it.map_or(0, |f| f.last_ts);
        let to = after_it.map_or(u64::MAX, |f| f.first_ts);
        if before.is_none_or(|b| from < b) && to >= after {
            wanted[k] = true;
        }
    }
    Ok(Plan {
        frames,
        prelude,
        wanted,
        records,
        candidates,
    })
}

/// Reads the candidate records of a plain file, nearby ones together.
fn plain_records(
    file: &dyn ReadAt,
    prelude: &[u8],
    offs: &[u64],
    path: &Path,
    pace: &Option<Arc<ReadPace>>,
    out: &mut Out<'_>,
    r: &mut FileReport,
) -> Result<(), FileError> {
    let layout = store::container::RecordLayout::of(prelude).map_err(FileError::IndexMismatch)?;
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut i = 0;
    let mut buf = Vec::new();
    while i < offs.len() {
        let first = offs[i];
        let mut last = first;
        i += 1;
        while i < offs.len() && offs[i] - last <= COALESCE {
            last = offs[i];
            i += 1;
        }
        let mut head = vec![0; layout.header_len()];
        file.read_at(&mut head, last).map_err(io)?;
        let end = last
            + layout
                .record_len(&head)
                .map_err(|e| FileError::IndexMismatch(format!("the record at {last}: {e}")))?;
        buf.resize((end - first) as usize, 0);
        file.read_at(&mut buf, first).map_err(io)?;
        r.bytes_read += end - first;
        if let Some(p) = pace {
            // The pace refuses only past the query's deadline.
            p.take(end - first).map_err(|_| FileError::TimedOut)?;
        }
        let cap = prelude.len() + buf.len() + 64;
        read_stream(
            prelude,
            Box::new(Cursor::new(std::mem::take(&mut buf))),
            path,
            out,
            r,
            cap,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    #[test]
    fn frames_in_the_page_cache_are_read_without_hints_and_the_first_miss_ends_that() {
        // On a disk (/tmp may be tmpfs, whose pages cannot be dropped).
        let path = Path::new("/var/tmp").join(format!("ringcap-prefetch-{}", std::process::id()));
        let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7) as u8).collect();
        let mut f = File::create(&path).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let f = File::open(&path).unwrap();
        // No read-ahead: a read (even a missed RWF_NOWAIT one, which starts the reading) must
        // bring in its own pages only, or the pages dropped below may still be on their way.
        // SAFETY: a plain system call on an open descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        let mut buf = vec![0u8; 8192];
        // Written just now: in the page cache.
        let mut warm = Prefetch {
            on: true,
            advised: 0,
            cached: true,
        };
        assert_eq!(warm.read_cached(&f, &mut buf, 4096), 8192);
        assert!(warm.cached);
        assert_eq!(buf, data[4096..4096 + 8192]);
        // Dropped from the cache (clean pages go at once): the read says so and hints resume.
        // SAFETY: as above.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut cold = Prefetch {
            on: true,
            advised: 0,
            cached: true,
        };
        let got = cold.read_cached(&f, &mut buf, 16384);
        assert!(got < 8192, "{got} bytes read from a dropped cache");
        assert!(!cold.cached);
        // Once a frame missed, the file is read as a cold one.
        assert_eq!(cold.read_cached(&f, &mut buf, 4096), 0);
        // A frame half in the cache: the cached part is read, the rest is the caller's.
        // SAFETY: as above.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        f.read_exact_at(&mut buf[..4096], 0).unwrap();
        let mut half = Prefetch {
            on: true,
            advised: 0,
            cached: true,
        };
        buf.fill(0);
        let got = half.read_cached(&f, &mut buf, 0);
        assert_eq!(got, 4096, "one page of two cached");
        assert!(!half.cached);
        assert_eq!(buf[..4096], data[..4096]);
        std::fs::remove_file(&path).unwrap();
    }
}
