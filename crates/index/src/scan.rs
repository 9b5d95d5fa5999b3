//! Indexing a capture file that exists (`ringcap index`): any tool's pcap or pcapng, plain or
//! compressed. zstd and lz4 files are walked frame by frame (frame headers and block sizes
//! only), so a query decompresses only the frames it needs; a gzip file is one frame.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use wire::LinkType;

use crate::build::Builder;
use crate::file::{Compression, WHOLE_FRAME_MAX};

/// Frames of a plain file: fixed pieces of this size (records may cross their edges).
pub const PLAIN_FRAME: u64 = 4 << 20;

/// What indexing one file did.
#[derive(Clone, Debug, Default)]
pub struct Indexed {
    pub packets: u64,
    pub frames: u64,
    pub index_bytes: u64,
    /// Size of the flow table.
    pub flows_bytes: u64,
    pub file_bytes: u64,
    /// A limit or damage stopped the index before the end (queries scan the rest).
    pub partial: bool,
    /// Frames that did not decode and were left out (their packets are lost), and what the first
    /// one said.
    pub damaged: Option<Damage>,
}

/// Whole compressed frames that did not decode.
#[derive(Clone, Debug, Default)]
pub struct Damage {
    pub frames: u64,
    pub bytes: u64,
    /// The first one's file offset and the decoder's error.
    pub first_off: u64,
    pub why: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} damaged frame(s) left out ({} bytes; the first at file offset {}: {}): their \
             packets are lost, the rest of the file is indexed",
            self.frames, self.bytes, self.first_off, self.why
        )
    }
}

/// Indexes `path` and writes its index next to it. `progress` counts file bytes read.
pub fn index_file(path: &Path, progress: &AtomicU64) -> Result<Indexed, String> {
    index_file_unless(path, progress, &AtomicBool::new(false))
}

/// As [`index_file`], giving up (with an error, writing nothing) as soon as `stop` is set: it is
/// checked at every frame.
pub fn index_file_unless(
    path: &Path,
    progress: &AtomicU64,
    stop: &AtomicBool,
) -> Result<Indexed, String> {
    let compression = Compression::of_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let size = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let spans = match compression {
        Compression::None => (0..size.div_ceil(PLAIN_FRAME))
            .map(|i| (i * PLAIN_FRAME, PLAIN_FRAME.min(size - i * PLAIN_FRAME)))
            .collect(),
        Compression::Zstd | Compression::Lz4 => {
            // A file whose frames cannot be walked to the end keeps the frames found plus the
            // rest as one piece.
            let w = store::container::walk(&file, size, compression, stop);
            let mut spans = w.frames;
            if w.end < size && !stop.load(Relaxed) {
                spans.push((w.end, size - w.end));
            }
            spans
        }
        Compression::Gzip => vec![(0, size)],
    };
    if stop.load(Relaxed) {
        return Err(format!("{}: stopped", path.display()));
    }
    let starts = Arc::new(Mutex::new(Vec::with_capacity(spans.len())));
    let chain = FrameChain {
        file,
        spans: spans.clone(),
        next: 0,
        cur: None,
        compression,
        raw: 0,
        starts: starts.clone(),
        head: Vec::new(),
        head_shared: Arc::new(Mutex::new(Vec::new())),
        damaged: Arc::default(),
    };
    let head = chain.head_shared.clone();
    let damaged_frames = chain.damaged.clone();
    // Read as libpcap reads it: an index never names a packet after the point where `tcpdump -r`
    // stops (damage, an interface of another link type, ...).
    let mut reader = store::CaptureReader::strict_from_reader(Box::new(chain), path, 1 << 20)
        .map_err(|e| e.to_string())?;
    let mut builder: Option<Builder> = None;
    let mut frame = usize::MAX;
    let mut last_file_off = 0;
    let mut packets = 0u64;
    let mut starts_now: Vec<u64> = Vec::new();
    // Every frame with packets began with a record (ringcap cuts its frames at records; other
    // tools' multi-frame files may not): only then can a frame that did not decode be left out,
    // since the records after it still line up.
    let mut cut_at_records = true;
    while let Some(p) = reader.next_packet() {
        let p = p.map_err(|e| {
            if compression == Compression::None {
                e.to_string()
            } else {
                // A frame that does not decode: a bad checksum, damaged or missing bytes.
                format!(
                    "{}: the file is damaged: {}; not indexed (queries scan it up to there and \
                     say what they could not read)",
                    path.display(),
                    std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string())
                )
            }
        })?;
        let b = match builder.as_mut() {
            Some(b) => b,
            None => {
                // The header is everything before the first packet.
                let head = head.lock().unwrap_or_else(|e| e.into_inner());
                let Some(prelude) = head.get(..p.offset as usize) else {
                    return Err(format!(
                        "{}: the file header is longer than {} bytes; not indexed",
                        path.display(),
                        HEAD_KEEP
                    ));
                };
                builder.insert(Builder::new(prelude.to_vec(), compression))
            }
        };
        // Frame starts known so far: the new ones are fetched only when the packet lies in the
        // last known frame or beyond (a lock and a copy per packet cost 12 % of the time; a copy
        // of them all per frame 44 % with 32 KiB frames, ~8000 a file).
        if starts_now.last().is_none_or(|&last| p.offset >= last) {
            let all = starts.lock().unwrap_or_else(|e| e.into_inner());
            starts_now.extend_from_slice(&all[starts_now.len()..]);
        }
        let k = starts_now
            .partition_point(|&s| s <= p.offset)
            .saturating_sub(1);
        while frame == usize::MAX || frame < k {
            frame = frame.wrapping_add(1);
            let (off, len) = spans[frame];
            b.frame(off, len, starts_now[frame], 0);
            if frame == k && k > 0 && p.offset != starts_now[k] {
                cut_at_records = false;
            }
            if stop.load(Relaxed) {
                return Err(format!("{}: stopped", path.display()));
            }
        }
        b.packet(
            p.offset,
            p.ts_ns,
            p.wire_len,
            LinkType::from_pcap(p.linktype),
            p.data,
        );
        packets += 1;
        let done = spans[frame].0;
        if done > last_file_off {
            progress.fetch_add(done - last_file_off, Relaxed);
            last_file_off = done;
        }
    }
    progress.fetch_add(size - last_file_off, Relaxed);
    let damaged = reader.damaged();
    let late_interfaces = reader.late_interfaces();
    drop(reader);

    let Some(mut b) = builder else {
        return Err(format!("{}: no packets to index", path.display()));
    };
    if late_interfaces {
        // A piece read after such a block would lack the interfaces it describes.
        b.set_read_whole();
    }
    let starts = starts.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // Frames after the last packet (statistics blocks, empty frames) still belong to the file.
    while frame + 1 < starts.len() {
        frame += 1;
        b.frame(spans[frame].0, spans[frame].1, starts[frame], 0);
    }
    b.set_raw_lens(&raw_lens(&starts, &spans, compression));
    let left_out = std::mem::take(&mut *damaged_frames.lock().unwrap_or_else(|e| e.into_inner()));
    if damaged && left_out.is_empty() {
        // Offsets after damage cannot be trusted to line up: queries scan such a file instead.
        return Err(format!(
            "{}: the file is damaged; not indexed (queries scan it and say what they could not read)",
            path.display()
        ));
    }
    let damage = match left_out.first() {
        None => None,
        Some(first) if cut_at_records && !damaged => {
            for d in &left_out {
                b.mark_damaged(d.frame);
            }
            Some(Damage {
                frames: left_out.len() as u64,
                bytes: left_out.iter().map(|d| spans[d.frame].1).sum(),
                first_off: spans[first.frame].0,
                why: first.why.clone(),
            })
        }
        Some(first) => {
            return Err(format!(
                "{}: the file is damaged: the frame at file offset {}: {}; not indexed (its frames \
                 are not cut at packets, so the packets after the damage cannot be trusted; \
                 queries scan it up to there and say what they could not read)",
                path.display(),
                spans[first.frame].0,
                first.why
            ))
        }
    };
    let partial = b.is_full();
    if partial && !cut_at_records {
        // The part a query scans would begin inside a record.
        return Err(format!(
            "{}: not indexed: more than {} packets in a file whose frames are not cut at packets (queries scan it)",
            path.display(),
            crate::build::MAX_PACKETS
        ));
    }
    let frames = starts.len() as u64;
    let (index_bytes, flows_bytes) = crate::live::write_index_and_flows(path, b)?;
    Ok(Indexed {
        packets,
        frames,
        index_bytes,
        flows_bytes,
        file_bytes: size,
        partial,
        damaged: damage,
    })
}

/// Uncompressed lengths of the frames from their starts (plain frames: their file length).
fn raw_lens(starts: &[u64], spans: &[(u64, u64)], compression: Compression) -> Vec<u64> {
    if compression == Compression::None {
        return spans.iter().map(|s| s.1).collect();
    }
    let mut v: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    v.push(0); // the last frame's length is not needed by queries (they stream it)
    v
}

/// Bytes of the uncompressed stream kept to find the file header.
const HEAD_KEEP: usize = 1 << 16;

/// The uncompressed stream of a file, frame after frame, noting where each frame begins.
struct FrameChain {
    file: File,
    spans: Vec<(u64, u64)>,
    next: usize,
    cur: Option<Box<dyn Read + Send>>,
    compression: Compression,
    raw: u64,
    starts: Arc<Mutex<Vec<u64>>>,
    head: Vec<u8>,
    head_shared: Arc<Mutex<Vec<u8>>>,
    /// Whole frames that did not decode: left out of the stream (nothing of them was read).
    damaged: Arc<Mutex<Vec<LeftOut>>>,
}

/// A frame left out of the stream.
struct LeftOut {
    frame: usize,
    why: String,
}

impl FrameChain {
    /// A reader of the frame at `off`: a small zstd frame that gives its size is read with one
    /// `pread` and decoded at once with the thread's context (a streaming decoder per frame made
    /// a zstd context each time: 12 % of `ringcap index` with 32 KiB frames); anything else
    /// streams.
    /// A whole frame that does not decode gives an empty reader and is noted as left out: nothing
    /// of it reached the stream, so the next frame's records line up (if frames are cut at
    /// records, which `index_file` checks).
    fn open(&mut self, off: u64, len: u64) -> io::Result<Box<dyn Read + Send>> {
        if self.compression.has_frames() && len <= WHOLE_FRAME_MAX {
            let mut packed = vec![0; len as usize];
            self.file.read_exact_at(&mut packed, off)?;
            let mut raw = Vec::new();
            let decoded = if self.compression == Compression::Zstd {
                crate::file::zstd_decompress_whole(&packed, &mut raw)
            } else {
                // Bounded as zstd's: a larger frame streams.
                lz4_flex::frame::FrameDecoder::new(&packed[..])
                    .take(WHOLE_FRAME_MAX + 1)
                    .read_to_end(&mut raw)
                    .map(|n| n as u64 <= WHOLE_FRAME_MAX)
            };
            return match decoded {
                Ok(true) => Ok(Box::new(io::Cursor::new(raw))),
                Ok(false) => store::container::decoder(io::Cursor::new(packed), self.compression),
                Err(e) => {
                    let left_out = LeftOut {
                        frame: self.next - 1,
                        why: e.to_string(),
                    };
                    self.damaged
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(left_out);
                    Ok(Box::new(io::empty()))
                }
            };
        }
        let mut f = self.file.try_clone()?;
        f.seek(SeekFrom::Start(off))?;
        store::container::decoder(f.take(len), self.compression)
    }
}

impl Read for FrameChain {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.cur.is_none() {
                let Some(&(off, len)) = self.spans.get(self.next) else {
                    return Ok(0);
                };
                self.next += 1;
                self.starts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(self.raw);
                self.cur = Some(self.open(off, len).map_err(|e| at_frame(off, e))?);
            }
            let off = self.spans[self.next - 1].0;
            let n = self
                .cur
                .as_mut()
                .expect("set")
                .read(buf)
                .map_err(|e| at_frame(off, e))?;
            if n == 0 {
                self.cur = None;
                continue;
            }
            if self.head.len() < HEAD_KEEP {
                let k = n.min(HEAD_KEEP - self.head.len());
                self.head.extend_from_slice(&buf[..k]);
                *self.head_shared.lock().unwrap_or_else(|e| e.into_inner()) = self.head.clone();
            }
            self.raw += n as u64;
            return Ok(n);
        }
    }
}

/// A frame's error, saying which frame.
fn at_frame(off: u64, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("the frame at file offset {off}: {e}"))
}
