//! Compression between the capture thread and the writer: a pool of threads turns each filled
//! buffer into independent, standard zstd or lz4 frames of at most `--frame-size` bytes of
//! records each (so `zstd -dc f | tcpdump -r -` works, a cut file is readable up to its last
//! whole frame, and an index can point a query at one frame). The level is chosen per buffer
//! from the backlog, like driverdump's gzip -9 / gzip -1 / lzf / copy ladder: strong when idle,
//! fast when busy, stored (uncompressed blocks inside a valid frame) when behind, so compression
//! never drops a packet that plain writing would have kept.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};

use crate::format::{own_record, Format};
use crate::pool::OutBuf;
use crate::stats::WriterCounters;

/// What `--compress` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressMode {
    /// Plain pcap/pcapng.
    None,
    /// lz4 frames (`.lz4`), stored blocks when behind.
    Lz4,
    /// zstd frames at this level (`.zst`), stored blocks when behind.
    Zstd(i32),
    /// zstd frames, level chosen per buffer from the backlog (`.zst`).
    Auto,
}

impl std::fmt::Display for CompressMode {
    /// As `--compress` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompressMode::None => f.write_str("none"),
            CompressMode::Lz4 => f.write_str("lz4"),
            CompressMode::Zstd(n) => write!(f, "zstd:{n}"),
            CompressMode::Auto => f.write_str("auto"),
        }
    }
}

impl CompressMode {
    /// Parses `none`, `lz4`, `zstd`, `zstd:N` (-7..=19, not 0; negative = zstd's fast levels) or `auto`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" | "off" => Ok(Self::None),
            "lz4" => Ok(Self::Lz4),
            "zstd" => Ok(Self::Zstd(3)),
            "auto" => Ok(Self::Auto),
            _ => {
                let level = s
                    .strip_prefix("zstd:")
                    .and_then(|l| l.parse::<i32>().ok())
                    .filter(|l| (-7..=19).contains(l) && *l != 0);
                level.map(Self::Zstd).ok_or_else(|| {
                    format!("`{s}` is not a compression: use none, lz4, zstd:N (N = 1..19, or -7..-1 for zstd's fast levels) or auto")
                })
            }
        }
    }

    /// File name suffix after `.pcap`/`.pcapng`.
    pub fn extension(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Lz4 => ".lz4",
            Self::Zstd(_) | Self::Auto => ".zst",
        }
    }
}

/// A ladder step, stored in counters as a small code: 0 = stored (no compression), 1 = lz4,
/// N + 9 = zstd level N (-7..=22; negative levels are zstd's fast modes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Level {
    /// Uncompressed blocks in a standard frame.
    #[default]
    Stored,
    /// lz4 block compression.
    Lz4,
    /// zstd at this level.
    Zstd(i32),
}

/// Number of distinct level codes (stored, lz4, zstd -7..=22).
pub const LEVEL_CODES: usize = 32;

impl Level {
    /// Code used in counters.
    pub fn code(self) -> u8 {
        match self {
            Level::Stored => 0,
            Level::Lz4 => 1,
            Level::Zstd(n) => (n.clamp(-7, 22) + 9) as u8,
        }
    }

    /// The level of a code.
    pub fn from_code(c: u8) -> Level {
        match c {
            0 => Level::Stored,
            1 => Level::Lz4,
            n => Level::Zstd(i32::from(n) - 9),
        }
    }

    /// Short name for stats lines: `stored`, `lz4`, `zstd:3`.
    pub fn name(self) -> String {
        match self {
            Level::Stored => "stored".into(),
            Level::Lz4 => "lz4".into(),
            Level::Zstd(n) => format!("zstd:{n}"),
        }
    }
}

/// The auto ladder, strongest first; a step is used while the backlog (filled buffers not yet
/// written, as a fraction of the pool) is below its bound. Above the last bound: stored.
/// The top is zstd 3, not 9: on half-random payloads 9 wrote the same bytes as 1 for about twice
/// the CPU (scripts/bench-disk.sh); below 1 come zstd's fast levels, still far better than a copy.
const AUTO_LADDER: [(f64, i32); 4] = [(0.125, 3), (0.25, 1), (0.375, -1), (0.5, -5)];
/// Fixed levels (`zstd:N`, `lz4`) fall back to stored from this backlog on.
const BEHIND: f64 = 0.5;

/// The level for the next buffer given the backlog fraction.
pub fn choose(mode: CompressMode, backlog: f64) -> Level {
    match mode {
        CompressMode::None => Level::Stored,
        CompressMode::Auto => AUTO_LADDER
            .iter()
            .find(|(bound, _)| backlog < *bound)
            .map_or(Level::Stored, |&(_, l)| Level::Zstd(l)),
        _ if backlog >= BEHIND => Level::Stored,
        CompressMode::Lz4 => Level::Lz4,
        CompressMode::Zstd(n) => Level::Zstd(n),
    }
}

/// Every this many buffers, `auto` probes a neighbouring level on the same buffer.
const PROBE_EVERY: u64 = 16;
/// A stronger level must save this fraction of the bytes to be worth its CPU.
const UP_GAIN: f64 = 0.05;
/// A cheaper level may cost this fraction more bytes and still be preferred.
const DOWN_LOSS: f64 = 0.02;

/// `auto`'s level for one compressor thread: the backlog sets the strongest level allowed (as
/// above); within that, a level is climbed only while it pays. Every [`PROBE_EVERY`] buffers the
/// same buffer is compressed once more one step stronger (or, alternately, cheaper); a stronger
/// level is kept only if it saves at least 5 % of the bytes, a cheaper one is taken if it costs
/// at most 2 % more. On half-random payloads zstd 3 wrote the same bytes as zstd 1 for 1.6× the
/// CPU, so paying for strength that buys nothing would break the CPU budget (scripts/bench-disk.sh).
pub(crate) struct GainLadder {
    /// Index into [`AUTO_LADDER`] the gain allows (0 = strongest); starts cheapest.
    at: usize,
    buffers: u64,
}

impl GainLadder {
    pub fn new() -> Self {
        GainLadder {
            at: AUTO_LADDER.len() - 1,
            buffers: 0,
        }
    }

    /// Compresses `buf` at the level the backlog and the gain allow, probing now and then.
    pub fn compress(&mut self, c: &mut Compressor, buf: &mut OutBuf, backlog: f64) {
        let Some(allowed) = AUTO_LADDER.iter().position(|(bound, _)| backlog < *bound) else {
            return c.compress(buf, Level::Stored, false);
        };
        let at = self.at.max(allowed);
        let level = AUTO_LADDER[at].1;
        c.compress(buf, Level::Zstd(level), false);
        self.buffers += 1;
        if !self.buffers.is_multiple_of(PROBE_EVERY) || buf.level != Level::Zstd(level).code() {
            return;
        }
        let now = buf.out_len as f64;
        let up = (self.buffers / PROBE_EVERY).is_multiple_of(2);
        if up && at > allowed {
            let stronger = AUTO_LADDER[at - 1].1;
            if let Some(n) = c.probe(buf, stronger) {
                if (n as f64) <= now * (1.0 - UP_GAIN) {
                    self.at = at - 1;
                    c.take_probe(buf, n, Level::Zstd(stronger));
                }
            }
        } else if !up && at + 1 < AUTO_LADDER.len() {
            let cheaper = AUTO_LADDER[at + 1].1;
            if let Some(n) = c.probe(buf, cheaper) {
                if (n as f64) <= now * (1.0 + DOWN_LOSS) {
                    self.at = at + 1;
                }
            }
        }
    }
}

/// Largest block of a zstd frame (RFC 8878: min(window, 128 KiB)).
const ZSTD_MAX_BLOCK: usize = 128 * 1024;
const ZSTD_MAGIC: u32 = 0xFD2F_B528;
const LZ4_MAGIC: u32 = 0x184D_2204;
/// lz4 frame: version 01, independent blocks.
const LZ4_FLG: u8 = 0x60;

/// Bytes a frame of `n` input bytes may need at most (any level).
pub fn frame_bound(n: usize) -> usize {
    // lz4_flex refuses an output slice below its own (generous) bound.
    zstd::zstd_safe::compress_bound(n).max(lz4_flex::block::get_maximum_output_size(n)) + 64
}

/// Writes `src` as a zstd frame of raw (stored) blocks into `out`; returns the frame length.
/// Hand-written because it is a tiny documented format (RFC 8878 §3.1.1) and costs one memcpy.
pub fn zstd_stored_frame(src: &[u8], out: &mut [u8]) -> usize {
    let mut at = 0;
    let mut put = |b: &[u8]| {
        out[at..at + b.len()].copy_from_slice(b);
        at += b.len();
    };
    put(&ZSTD_MAGIC.to_le_bytes());
    // Frame header descriptor: 4-byte content size (flag 2), single segment (window = content).
    put(&[0xA0]);
    put(&(src.len() as u32).to_le_bytes());
    if src.is_empty() {
        put(&[1, 0, 0]); // one empty raw block marked last
        return at;
    }
    let mut chunks = src.chunks(ZSTD_MAX_BLOCK).peekable();
    while let Some(c) = chunks.next() {
        let last = u32::from(chunks.peek().is_none());
        // Block header: bit 0 last, bits 1-2 type (0 = raw), bits 3.. size; 3 bytes LE.
        let h = ((c.len() as u32) << 3) | last;
        put(&h.to_le_bytes()[..3]);
        put(c);
    }
    at
}

/// Writes `src` as one lz4 frame (one block, compressed unless `stored` or incompressible).
pub fn lz4_frame(src: &[u8], out: &mut [u8], stored: bool) -> usize {
    out[..4].copy_from_slice(&LZ4_MAGIC.to_le_bytes());
    out[4] = LZ4_FLG;
    // Largest block: 1 MiB (code 6) or 4 MiB (code 7), so the whole buffer is one block.
    out[5] = if src.len() <= 1 << 20 { 0x60 } else { 0x70 };
    out[6] = (twox_hash::XxHash32::oneshot(0, &out[4..6]) >> 8) as u8;
    let mut at = 7;
    if !src.is_empty() {
        let body = at + 4;
        let compressed = if stored {
            None
        } else {
            lz4_flex::block::compress_into(src, &mut out[body..])
                .ok()
                .filter(|&n| n < src.len())
        };
        let (n, flag) = match compressed {
            Some(n) => (n, 0),
            None => {
                out[body..body + src.len()].copy_from_slice(src);
                (src.len(), 0x8000_0000u32) // high bit: block stored uncompressed
            }
        };
        out[at..body].copy_from_slice(&(n as u32 | flag).to_le_bytes());
        at = body + n;
    }
    out[at..at + 4].copy_from_slice(&0u32.to_le_bytes()); // end mark
    at + 4
}

/// Compressed frame size without an index: one frame per 1 MiB buffer, as files were always written.
pub const DEFAULT_FRAME_SIZE: usize = 1 << 20;
/// Compressed frame size when the files are indexed (`--frame-size`'s default then): a query
/// decompresses every frame holding a candidate packet whole, so smaller frames mean less to read
/// for a sparse query. On the bench-query traffic over 20 GB, 16 KiB against 32 KiB: one host
/// reads half as much and answers ~1.35× faster warm (0.41-0.48 against 0.56-0.69 s, same
/// binary), 1.27 against 1.72 s cold, for 0.6 % more bytes on disk and an index of 0.77 % of the
/// store (index v5; 32 KiB: 0.67 %; 8 KiB: 0.95 % on 1 GB) (BENCHMARKS.md, issue 11).
pub const INDEXED_FRAME_SIZE: usize = 16 << 10;
/// Smallest and largest `--frame-size` (a frame never spans two buffers, which hold at most 4 MiB).
pub const MIN_FRAME_SIZE: usize = 4 << 10;
pub const MAX_FRAME_SIZE: usize = 4 << 20;

/// Where the frames of `buf` end: at record boundaries, each frame holding at most `frame_size`
/// bytes unless one record alone is larger; the file header stays with the first record. So
/// every frame decodes to whole records and an index can point at it alone.
pub fn frame_cuts(format: Format, buf: &OutBuf, frame_size: usize, cuts: &mut Vec<usize>) {
    cuts.clear();
    let data = buf.filled();
    let mut start = 0;
    let mut at = buf.first_boundary;
    while at < data.len() {
        let Some(r) = own_record(format, &data[at..]) else {
            break; // not a record boundary: the rest goes in the last frame
        };
        if at + r.len - start > frame_size && at > start.max(buf.first_boundary) {
            cuts.push(at);
            start = at;
        }
        at += r.len;
    }
    cuts.push(data.len());
}

/// Compresses one whole buffer into `buf.out` at `level`, one frame per `buf.cuts` entry.
pub(crate) struct Compressor {
    zstd: zstd::bulk::Compressor<'static>,
    zstd_level: i32,
    /// Output of a probe at another level (allocated on the first probe), and its frame ends.
    scratch: Vec<u8>,
    scratch_ends: Vec<usize>,
}

/// Bytes the frames of `cuts` may need at most.
fn frames_bound(cuts: &[usize]) -> usize {
    let mut from = 0;
    cuts.iter()
        .map(|&end| {
            let n = frame_bound(end - from);
            from = end;
            n
        })
        .sum()
}

impl Compressor {
    pub fn new() -> std::io::Result<Self> {
        let mut zstd = zstd::bulk::Compressor::new(3)?;
        // A checksum per frame lets readers tell a damaged frame from a whole one.
        zstd.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
        Ok(Compressor {
            zstd,
            zstd_level: 3,
            scratch: Vec::new(),
            scratch_ends: Vec::new(),
        })
    }

    /// Fills `buf.out` with the frames of `buf.filled()` cut at `buf.cuts` (one frame if there are
    /// no cuts); falls back to stored on any error.
    pub fn compress(&mut self, buf: &mut OutBuf, mut level: Level, lz4_file: bool) {
        if buf.cuts.is_empty() {
            buf.cuts.push(buf.len);
        }
        let need = frames_bound(&buf.cuts).max(frame_bound(buf.capacity()));
        if buf.out.len() < need {
            buf.out = vec![0; need]; // once per buffer, never in steady state
        }
        if lz4_file {
            let stored = level == Level::Stored;
            level = if stored { Level::Stored } else { Level::Lz4 };
        }
        let mut ends = std::mem::take(&mut buf.frame_ends);
        let mut out = std::mem::take(&mut buf.out);
        let src = buf.filled();
        let n = match self.frames(src, &buf.cuts, &mut out, &mut ends, level, lz4_file) {
            Some(n) => n,
            None => {
                level = Level::Stored;
                self.frames(src, &buf.cuts, &mut out, &mut ends, level, lz4_file)
                    .expect("stored frames cannot fail")
            }
        };
        buf.out = out;
        buf.frame_ends = ends;
        buf.out_len = n;
        buf.level = level.code();
    }

    /// Writes one frame per cut of `src` into `out` at `level`, their ends into `ends`; the
    /// bytes written, or `None` if zstd failed.
    fn frames(
        &mut self,
        src: &[u8],
        cuts: &[usize],
        out: &mut [u8],
        ends: &mut Vec<usize>,
        level: Level,
        lz4_file: bool,
    ) -> Option<usize> {
        ends.clear();
        let (mut from, mut at) = (0, 0);
        for &end in cuts {
            let chunk = &src[from..end];
            let o = &mut out[at..];
            at += match (lz4_file, level) {
                (true, l) => lz4_frame(chunk, o, l == Level::Stored),
                (false, Level::Zstd(l)) => self.zstd_frame(chunk, o, l)?,
                (false, _) => zstd_stored_frame(chunk, o),
            };
            ends.push(at);
            from = end;
        }
        Some(at)
    }

    /// Compresses `buf` again at zstd `level` into the scratch vector: the probe's length.
    fn probe(&mut self, buf: &OutBuf, level: i32) -> Option<usize> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let need = frames_bound(&buf.cuts).max(frame_bound(buf.capacity()));
        if scratch.len() < need {
            scratch = vec![0; need];
        }
        let mut ends = std::mem::take(&mut self.scratch_ends);
        let n = self.frames(
            buf.filled(),
            &buf.cuts,
            &mut scratch,
            &mut ends,
            Level::Zstd(level),
            false,
        );
        self.scratch = scratch;
        self.scratch_ends = ends;
        n
    }

    /// Makes the last probe (`n` bytes at `level`) the buffer's frames.
    fn take_probe(&mut self, buf: &mut OutBuf, n: usize, level: Level) {
        std::mem::swap(&mut buf.out, &mut self.scratch);
        std::mem::swap(&mut buf.frame_ends, &mut self.scratch_ends);
        buf.out_len = n;
        buf.level = level.code();
    }

    fn zstd_frame(&mut self, src: &[u8], out: &mut [u8], level: i32) -> Option<usize> {
        if level != self.zstd_level {
            self.zstd.set_compression_level(level).ok()?;
            self.zstd_level = level;
        }
        self.zstd.compress_to_buffer(src, out).ok()
    }
}

/// One compressor thread: takes filled buffers in any order, compresses each, passes it on.
pub(crate) fn run_compressor(
    input: Arc<Mutex<Receiver<OutBuf>>>,
    output: Sender<OutBuf>,
    mode: CompressMode,
    (format, frame_size): (Format, usize),
    counters: Arc<WriterCounters>,
) {
    let Ok(mut c) = Compressor::new() else {
        return;
    };
    let lz4_file = mode == CompressMode::Lz4;
    let mut gain = GainLadder::new();
    loop {
        // Hold the lock only to receive, never while compressing.
        let next = input.lock().map(|rx| rx.recv());
        let Ok(Ok(mut buf)) = next else {
            return;
        };
        let total = counters.buffers_total.load(Relaxed).max(1);
        let backlog = counters.backlog.load(Relaxed) as f64 / total as f64;
        let mut cuts = std::mem::take(&mut buf.cuts);
        frame_cuts(format, &buf, frame_size, &mut cuts);
        buf.cuts = cuts;
        if mode == CompressMode::Auto {
            gain.compress(&mut c, &mut buf, backlog);
        } else {
            c.compress(&mut buf, choose(mode, backlog), lz4_file);
        }
        counters.note_level(buf.level, buf.len as u64, buf.out_len as u64);
        if output.send(buf).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn sample(n: usize) -> Vec<u8> {
        // Half random, half zero, like the benchmark's payloads.
        let mut x = 0x1234_5678u32;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 64 < 32 {
                    x as u8
                } else {
                    0
                }
            })
            .collect()
    }

    #[test]
    fn stored_zstd_frames_decode_with_libzstd() {
        for n in [0usize, 1, 1000, ZSTD_MAX_BLOCK, ZSTD_MAX_BLOCK + 1, 1 << 20] {
            let src = sample(n);
            let mut out = vec![0; frame_bound(n)];
            let len = zstd_stored_frame(&src, &mut out);
            assert_eq!(len, 4 + 1 + 4 + n + 3 * n.div_ceil(ZSTD_MAX_BLOCK).max(1));
            let back = zstd::stream::decode_all(&out[..len]).unwrap();
            assert_eq!(back, src, "n = {n}");
        }
    }

    #[test]
    fn lz4_frames_decode_with_lz4_flex_compressed_or_stored() {
        for stored in [false, true] {
            let src = sample(300_000);
            let mut out = vec![0; frame_bound(src.len())];
            let len = lz4_frame(&src, &mut out, stored);
            assert_eq!(len < src.len(), !stored);
            let mut back = Vec::new();
            lz4_flex::frame::FrameDecoder::new(&out[..len])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, src);
        }
    }

    #[test]
    fn ladder_steps_down_with_the_backlog() {
        let l = |b| choose(CompressMode::Auto, b);
        assert_eq!(l(0.0), Level::Zstd(3));
        assert_eq!(l(0.2), Level::Zstd(1));
        assert_eq!(l(0.3), Level::Zstd(-1));
        assert_eq!(l(0.45), Level::Zstd(-5));
        assert_eq!(l(0.5), Level::Stored);
        assert_eq!(choose(CompressMode::Zstd(5), 0.49), Level::Zstd(5));
        assert_eq!(choose(CompressMode::Lz4, 0.9), Level::Stored);
        for c in [
            Level::Stored,
            Level::Lz4,
            Level::Zstd(-7),
            Level::Zstd(1),
            Level::Zstd(22),
        ] {
            assert_eq!(Level::from_code(c.code()), c);
        }
    }

    #[test]
    fn auto_climbs_only_while_a_level_pays() {
        let mut c = Compressor::new().unwrap();
        let mut g = GainLadder::new();
        let mut buf = OutBuf::new(1 << 20);
        // Text-like data: stronger levels pay, so auto climbs to the top when idle.
        let text: Vec<u8> = (0..(1 << 20) - 100)
            .map(|i| b"the quick brown fox jumps over the lazy dog "[(i * 7 + i / 44) % 44])
            .collect();
        let mut levels = Vec::new();
        for _ in 0..(PROBE_EVERY * 8) {
            buf.reset(0);
            buf.as_mut_slice()[..text.len()].copy_from_slice(&text);
            buf.len = text.len();
            g.compress(&mut c, &mut buf, 0.0);
            levels.push(Level::from_code(buf.level));
        }
        assert_eq!(levels[0], Level::Zstd(-5), "starts cheap");
        assert!(levels.contains(&Level::Zstd(1)), "{levels:?}");
        // A backlog caps it again, whatever the gain.
        g.compress(&mut c, &mut buf, 0.3);
        assert_eq!(Level::from_code(buf.level), Level::Zstd(-1));
        g.compress(&mut c, &mut buf, 0.9);
        assert_eq!(Level::from_code(buf.level), Level::Stored);
    }

    /// A buffer as a compressed file's first buffer: a 24-byte pcap header, then records of `lens`
    /// captured bytes each. Returns the buffer and where each record ends.
    fn pcap_buffer(lens: &[usize]) -> (OutBuf, Vec<usize>) {
        let mut buf = OutBuf::new(1 << 20);
        let mut bytes = vec![0xA1u8; 24];
        let mut ends = Vec::new();
        for (i, &n) in lens.iter().enumerate() {
            for v in [i as u32, 0, n as u32, n as u32] {
                bytes.extend_from_slice(&v.to_ne_bytes());
            }
            bytes.extend(sample(n));
            ends.push(bytes.len());
        }
        buf.as_mut_slice()[..bytes.len()].copy_from_slice(&bytes);
        buf.len = bytes.len();
        buf.first_boundary = 24;
        (buf, ends)
    }

    #[test]
    fn frames_end_at_records_and_hold_at_most_the_frame_size() {
        let fmt = Format::Pcap { nanos: false };
        // 60..1514-byte packets, and one of 20 000 bytes (larger than the 8 KiB frames).
        let mut lens: Vec<usize> = (0..900).map(|i| 60 + (i * 397) % 1455).collect();
        lens[300] = 20_000;
        let (mut buf, ends) = pcap_buffer(&lens);
        let mut cuts = Vec::new();
        frame_cuts(fmt, &buf, 8192, &mut cuts);
        assert_eq!(*cuts.last().unwrap(), buf.len);
        let mut from = 0;
        for &c in &cuts {
            assert!(ends.contains(&c), "cut {c} is not a record end");
            // Over the frame size only when one record alone is (or with the 24-byte header).
            let records = ends.iter().filter(|&&e| e > from && e <= c).count();
            assert!(
                c - from <= 8192 || records == 1,
                "frame {from}..{c}: {records} records"
            );
            // Greedy: the next record would not have fitted.
            if let Some(&next) = ends.iter().find(|&&e| e > c) {
                assert!(
                    next - from > 8192,
                    "frame {from}..{c} could have taken the next record"
                );
            }
            from = c;
        }
        let n_before = cuts.len();
        assert!(
            n_before > buf.len / 8192,
            "{n_before} frames for {} bytes",
            buf.len
        );
        // Each frame decodes alone, and all of them in a row are the buffer (as zstd -dc reads it).
        let mut c = Compressor::new().unwrap();
        buf.cuts = cuts.clone();
        for level in [Level::Zstd(3), Level::Zstd(-5), Level::Stored] {
            c.compress(&mut buf, level, false);
            assert_eq!(buf.frame_ends.len(), cuts.len());
            assert_eq!(*buf.frame_ends.last().unwrap(), buf.out_len);
            let (mut raw_from, mut out_from) = (0, 0);
            for (&raw_to, &out_to) in cuts.iter().zip(&buf.frame_ends) {
                let back = zstd::stream::decode_all(&buf.out[out_from..out_to]).unwrap();
                assert!(
                    back == buf.filled()[raw_from..raw_to],
                    "{level:?} {raw_from}..{raw_to}"
                );
                (raw_from, out_from) = (raw_to, out_to);
            }
            let all = zstd::stream::decode_all(&buf.out[..buf.out_len]).unwrap();
            assert!(all == buf.filled(), "{level:?}: all frames");
        }
        // lz4 frames the same way, each alone.
        c.compress(&mut buf, Level::Lz4, true);
        assert_eq!(buf.frame_ends.len(), cuts.len());
        let (mut raw_from, mut out_from) = (0, 0);
        for (&raw_to, &out_to) in cuts.iter().zip(&buf.frame_ends) {
            let mut back = Vec::new();
            lz4_flex::frame::FrameDecoder::new(&buf.out[out_from..out_to])
                .read_to_end(&mut back)
                .unwrap();
            assert!(
                back == buf.filled()[raw_from..raw_to],
                "lz4 frame {raw_from}..{raw_to}"
            );
            (raw_from, out_from) = (raw_to, out_to);
        }
        // A frame size above the buffer: one frame, as before frame sizes were settable.
        frame_cuts(fmt, &buf, DEFAULT_FRAME_SIZE, &mut cuts);
        assert_eq!(cuts, [buf.len]);
    }

    #[test]
    fn the_header_stays_with_the_first_record() {
        let (buf, ends) = pcap_buffer(&[9000, 100]);
        let mut cuts = Vec::new();
        frame_cuts(Format::Pcap { nanos: false }, &buf, 4096, &mut cuts);
        assert_eq!(cuts, ends);
    }

    #[test]
    fn parse_names_the_choices() {
        assert_eq!(CompressMode::parse("zstd:7"), Ok(CompressMode::Zstd(7)));
        assert_eq!(CompressMode::parse("auto"), Ok(CompressMode::Auto));
        assert_eq!(CompressMode::parse("zstd:-3"), Ok(CompressMode::Zstd(-3)));
        assert!(CompressMode::parse("zstd:40")
            .unwrap_err()
            .contains("1..19"));
        assert!(CompressMode::parse("zstd:0").is_err());
        assert!(CompressMode::parse("gzip").is_err());
    }
}
