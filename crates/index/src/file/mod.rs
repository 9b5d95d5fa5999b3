//! The index file: layout, checks and reading its parts (the look-ups a query needs are in
//! `lookup`). The layout is in `docs/index.md`; every number is little-endian.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use crate::key::{KIND_IP, TUNNEL_SHIFT};

mod chunks;
mod frames;
mod lookup;

use chunks::{chunk_plan, pack_rows, sections, unpack_rows, ChunkSpec, Layout};
use frames::decode_frames;
pub use frames::Frame;
pub(crate) use frames::{encode_frames, put_varint, varint};

pub(crate) const MAGIC: &[u8; 8] = b"RCINDEX\x01";
/// Bumped on any change of layout or meaning; an index of another version is rebuilt.
/// 2: a compressed file's postings are frame numbers (1: record offsets everywhere).
/// 3: the body is compressed in chunks, read as look-ups need them; `by_b` holds each entry's
/// second endpoint with its flow; directories of the flows' and `by_b`'s endpoints.
/// 4: the frames are delta-coded varints (64 bytes each before: a third of the index with 8 KiB
/// frames), their length in the header.
/// 5: the flows' and `by_b`'s chunks hold whole rows, stored column by column, the flows'
/// posting offsets as differences (see `chunks::pack_rows`): 40 % less index on generated traffic.
/// 6: a plain file indexed after the fact gives its first frame's first record, not the file's
/// start (version 5 had the file header read as a record there).
/// 7: a packet in a tunnel is filed under the packet it carries; flow rows gain the tunnel's
/// code (kind bits 3-6) and id (4 more bytes), the header the count of tunnelled flows.
pub const VERSION: u32 = 7;
pub(crate) const HEADER_LEN: usize = 128;
pub(crate) const FLOW_LEN: usize = 32;
/// A `by_b` entry: the flow's second endpoint (address id), then the flow.
pub(crate) const BY_B_LEN: usize = 8;
/// Uncompressed bytes per chunk of the body (each chunk is one zstd frame). A look-up of one
/// flow decompresses a few chunks instead of the whole body (3-4 MB for 100 k flows).
pub(crate) const CHUNK: usize = 64 << 10;
/// The directories keep the endpoint of every this many flows (`by_b` entries).
pub(crate) const DIR_STEP: usize = 1024;
/// CRC-32 of everything before it, then the first four bytes of the magic.
pub(crate) const TRAILER_LEN: usize = 8;
/// Largest body believed (a damaged length must not allocate without bound).
const MAX_BODY: u64 = 4 << 30;
/// Bytes of the capture file checked at each end to tell it is the file that was indexed.
const ID_SPAN: u64 = 4096;

pub use store::Compression;

/// What ties an index to its capture file: the size and a CRC-32 of the first and of the last
/// 4 KiB of the indexed part. A file replaced, cut or rewritten fails the check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    pub size: u64,
    pub head_crc: u32,
    pub tail_crc: u32,
}

impl Identity {
    /// Reads the identity of `path`, as indexed up to `covered` bytes.
    pub fn of(path: &Path, covered: u64) -> io::Result<Identity> {
        let mut f = File::open(path)?;
        let size = f.metadata()?.len();
        let head = read_at(&mut f, 0, ID_SPAN.min(covered))?;
        let from = covered.saturating_sub(ID_SPAN);
        let tail = read_at(&mut f, from, covered - from)?;
        Ok(Identity {
            size,
            head_crc: crc32fast::hash(&head),
            tail_crc: crc32fast::hash(&tail),
        })
    }
}

impl Identity {
    /// As [`Identity::of`], of a file read by ranges (an archive's object).
    pub fn of_ranges(src: &dyn crate::ReadAt, covered: u64) -> io::Result<Identity> {
        let size = src.len()?;
        let mut head = vec![0; ID_SPAN.min(covered) as usize];
        src.read_at(&mut head, 0)?;
        let from = covered.saturating_sub(ID_SPAN);
        let mut tail = vec![0; (covered - from) as usize];
        src.read_at(&mut tail, from)?;
        Ok(Identity {
            size,
            head_crc: crc32fast::hash(&head),
            tail_crc: crc32fast::hash(&tail),
        })
    }
}

fn read_at(f: &mut File, off: u64, len: u64) -> io::Result<Vec<u8>> {
    f.seek(SeekFrom::Start(off))?;
    let mut v = vec![0; len as usize];
    f.read_exact(&mut v)?;
    Ok(v)
}

/// The fixed header after the magic and version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub identity: Identity,
    /// File bytes the frames cover.
    pub covered: u64,
    /// The frames cover the whole file (else a limit stopped the index: scan from `covered`).
    pub complete: bool,
    /// Stored as [`Compression::code`]; an unknown number reads as none (the identity check
    /// and the frames then fail for a file that is compressed).
    pub compression: Compression,
    pub first_ts: u64,
    pub last_ts: u64,
    pub packets: u64,
    pub frames: u32,
    pub flows: u32,
    pub addrs: u32,
    pub prelude_len: u32,
    /// Bytes of the frames section (see [`encode_frames`]).
    pub frames_len: u64,
    pub postings_len: u64,
    /// Frames that did not decode when the file was indexed (see [`Frame::is_damaged`]): zero
    /// bytes in version 5 indexes written before the field, which had none.
    pub damaged: u32,
    /// The file's pieces cannot be read alone (a pcapng file that describes interfaces or
    /// sections after its first packet): the index times the file, and a query that wants any of
    /// it reads it whole.
    pub read_whole: bool,
    /// Flows of packets that came in a tunnel (their rows have a tunnel code).
    pub tunnelled: u32,
}

impl Header {
    /// Writes the header; `body_len` is the uncompressed body's length, `chunks` the number of
    /// chunks it is stored in.
    pub(crate) fn write(&self, out: &mut Vec<u8>, body_len: u64, chunks: u32) {
        let start = out.len();
        for v in [self.identity.size, self.covered] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.identity.head_crc.to_le_bytes());
        out.extend_from_slice(&self.identity.tail_crc.to_le_bytes());
        for v in [self.first_ts, self.last_ts, self.packets, self.postings_len] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.frames, self.flows, self.addrs, self.prelude_len] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.push(u8::from(self.complete));
        out.push(self.compression.code());
        out.resize(start + 80, 0);
        out.extend_from_slice(&body_len.to_le_bytes());
        out.extend_from_slice(&chunks.to_le_bytes());
        out.extend_from_slice(&self.frames_len.to_le_bytes());
        out.extend_from_slice(&self.damaged.to_le_bytes());
        out.extend_from_slice(&u32::from(self.read_whole).to_le_bytes());
        out.extend_from_slice(&self.tunnelled.to_le_bytes());
        out.resize(start + HEADER_LEN - 12, 0);
    }

    /// The header from the 116 bytes after the magic and version, the uncompressed body's length
    /// and the number of chunks (the fuzz target builds index files from any header).
    pub fn read(b: &[u8]) -> (Header, u64, u32) {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let h = Header {
            identity: Identity {
                size: u64_at(0),
                head_crc: u32_at(16),
                tail_crc: u32_at(20),
            },
            covered: u64_at(8),
            first_ts: u64_at(24),
            last_ts: u64_at(32),
            packets: u64_at(40),
            postings_len: u64_at(48),
            frames: u32_at(56),
            flows: u32_at(60),
            addrs: u32_at(64),
            prelude_len: u32_at(68),
            frames_len: u64_at(92),
            damaged: u32_at(100),
            read_whole: u32_at(104) & 1 != 0,
            tunnelled: u32_at(108),
            complete: b[72] != 0,
            compression: Compression::from_code(b[73]).unwrap_or_default(),
        };
        (h, u64_at(80), u32_at(88))
    }
}

/// The index file from its parts: magic, version, header, the body in chunks (see
/// `chunks::chunk_plan`) of one zstd frame each with its checksum (level 1: sorted ids, small counts and deltas compress about 4× on generated
/// traffic, which keeps the index near 1 % of the store; level 3 cost as much CPU as filing the
/// packets for little gain), the table (each chunk's stored length, then the directories), and
/// the trailer (CRC-32 of the header and the table, then the first four bytes of the magic).
pub fn assemble(header: &Header, body: &[u8], flows_dir: &[u32], by_b_dir: &[u32]) -> Vec<u8> {
    let mut z = zstd::bulk::Compressor::new(1).expect("a zstd context");
    // Each chunk carries zstd's checksum of its content: a chunk damaged under a recomputed file
    // checksum (or by a bug) fails to decompress instead of answering wrongly.
    z.include_checksum(true).expect("a zstd parameter");
    let mut chunks = Vec::new();
    let mut lens = Vec::new();
    // A header that does not match the body (only the fuzz target makes one) gets plain chunks,
    // which the reader refuses.
    let plan = sections(header, body.len() as u64).map_or_else(
        || chunk_plan(body.len(), [body.len(); 5]),
        |at| chunk_plan(body.len(), at),
    );
    for c in plan {
        let piece = &body[c.start..c.start + c.len];
        let c = match c.layout {
            Layout::Bytes => z.compress(piece),
            Layout::Rows(w) => z.compress(&pack_rows(piece, w)),
        }
        .expect("zstd compresses a chunk");
        lens.push(c.len() as u32);
        chunks.extend_from_slice(&c);
    }
    let mut out = Vec::with_capacity(HEADER_LEN + chunks.len() + 4 * lens.len() + TRAILER_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    header.write(&mut out, body.len() as u64, lens.len() as u32);
    debug_assert_eq!(out.len(), HEADER_LEN);
    out.extend_from_slice(&chunks);
    let table_at = out.len();
    for v in lens.iter().chain(flows_dir).chain(by_b_dir) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let crc = checksum(&out[..HEADER_LEN], &out[table_at..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&MAGIC[..TRAILER_LEN - 4]);
    out
}

/// The trailer's CRC-32: of the header and the table (each chunk carries zstd's checksum of its
/// own content), so that opening an index reads only those.
fn checksum(header: &[u8], table: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(table);
    h.finalize()
}

/// Where an index's bytes are: in memory, or in its file, or anywhere that serves ranges (an
/// archive's object); read a chunk at a time.
enum Stored {
    Bytes(Vec<u8>),
    File(File, u64),
    Ranges(std::sync::Arc<dyn crate::ReadAt>, u64),
}

impl Stored {
    fn len(&self) -> u64 {
        match self {
            Stored::Bytes(b) => b.len() as u64,
            Stored::File(_, len) | Stored::Ranges(_, len) => *len,
        }
    }

    fn read(&self, at: u64, len: usize) -> io::Result<Cow<'_, [u8]>> {
        match self {
            Stored::Bytes(b) => b
                .get(at as usize..at as usize + len)
                .map(Cow::Borrowed)
                .ok_or_else(|| io::ErrorKind::UnexpectedEof.into()),
            Stored::File(f, _) => {
                let mut v = vec![0; len];
                std::os::unix::fs::FileExt::read_exact_at(f, &mut v, at)?;
                Ok(Cow::Owned(v))
            }
            Stored::Ranges(src, _) => {
                let mut v = vec![0; len];
                src.read_at(&mut v, at)?;
                Ok(Cow::Owned(v))
            }
        }
    }
}

thread_local! {
    /// One zstd context per thread for index chunks and packet frames: making one per chunk or
    /// frame (~100 kB zeroed) was a tenth of a 5-tuple query's CPU, and 26 % of a one-host
    /// query's samples with 64 KiB frames (`perf`; BENCHMARKS.md, one zstd context per thread).
    static ZSTD_DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses `src` (whole zstd frames) into `dst` (cleared first) with this thread's
/// context; `dst` must have room for the result: a frame that decodes to more is an error.
pub(crate) fn zstd_decompress_into(src: &[u8], dst: &mut Vec<u8>) -> io::Result<usize> {
    dst.clear();
    with_zstd_dctx(|d| d.decompress_to_buffer(src, dst))
}

/// zstd frames up to this size (compressed and decoded) are read with one `pread` and decoded in
/// one call with the thread's context; larger ones (another tool's single-frame file) stream.
pub(crate) const WHOLE_FRAME_MAX: u64 = 8 << 20;

/// Decodes the whole zstd frame `src` into `dst` when its header gives a size of at most
/// [`WHOLE_FRAME_MAX`]; `Ok(false)` (nothing done) when it does not, for the caller to stream it.
pub(crate) fn zstd_decompress_whole(src: &[u8], dst: &mut Vec<u8>) -> io::Result<bool> {
    match zstd::zstd_safe::get_frame_content_size(src) {
        Ok(Some(n)) if n <= WHOLE_FRAME_MAX => {
            dst.reserve(n as usize);
            zstd_decompress_into(src, dst)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// As [`zstd_decompress_into`], into a slice (the decoded size must fit it).
pub(crate) fn zstd_decompress_to(src: &[u8], dst: &mut [u8]) -> io::Result<usize> {
    with_zstd_dctx(|d| d.decompress_to_buffer(src, dst))
}

fn with_zstd_dctx<T>(
    f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> io::Result<T>,
) -> io::Result<T> {
    ZSTD_DCTX.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            *d = Some(zstd::bulk::Decompressor::new()?);
        }
        f(d.as_mut().expect("made"))
    })
}

fn decompress_chunk(src: &[u8], want: usize) -> io::Result<Vec<u8>> {
    let mut v = Vec::with_capacity(want);
    zstd_decompress_into(src, &mut v)?;
    Ok(v)
}

/// One flow as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRow {
    pub a: u32,
    pub b: u32,
    pub port_a: u16,
    pub port_b: u16,
    pub proto: u8,
    pub kind: u8,
    pub vlan: u16,
    /// Entries in the flow's postings: its packets (plain file) or the frames holding them.
    pub entries: u32,
    pub postings: u64,
    /// The tunnel the flow's packets came in (`wire::TunnelKind::code`; 0: none) and its id.
    pub tunnel: u8,
    pub tunnel_id: u32,
}

/// Why an index cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("cannot read the index {0}: {1}")]
    Io(String, io::Error),
    #[error("{0} is not a ringcap index (bad magic)")]
    Magic(String),
    #[error("{0} is index version {1}, this ringcap reads version {VERSION}: run `ringcap index` to rebuild it")]
    Version(String, u32),
    #[error("{0} is damaged (checksum or sizes do not match): run `ringcap index` to rebuild it")]
    Corrupt(String),
    #[error("{0} does not belong to the capture file as it is now (the file changed): run `ringcap index` to rebuild it")]
    Stale(String),
}

/// An index read into memory and checked; its body is decompressed a chunk at a time, when a
/// look-up first needs it.
pub struct IndexFile {
    name: String,
    /// The index as stored; its header and table were checked when it was opened.
    stored: Stored,
    /// Each chunk's place in `stored`, its place and layout in the body, and its bytes once
    /// decompressed.
    chunk_at: Vec<Range<u64>>,
    plan: Vec<ChunkSpec>,
    chunks: Vec<OnceLock<Vec<u8>>>,
    body_len: usize,
    /// The first endpoint of every [`DIR_STEP`]th flow, and the second of every such `by_b` entry.
    flows_dir: Vec<u32>,
    by_b_dir: Vec<u32>,
    pub header: Header,
    /// Bytes of the index read so far (header, table, chunks): what a query's explain reports.
    read: std::sync::atomic::AtomicU64,
    frames_at: usize,
    addrs_at: usize,
    flows_at: usize,
    by_b_at: usize,
    postings_at: usize,
}

impl IndexFile {
    /// Opens and checks `index`, made for `capture`: magic, version, the checksum of its header
    /// and table, section sizes, and that the capture file is still the one indexed. Only the
    /// header and the table are read; chunks are read as look-ups need them.
    pub fn open(index: &Path, capture: &Path) -> Result<IndexFile, IndexError> {
        let name = index.display().to_string();
        let io_err = |e| IndexError::Io(name.clone(), e);
        let f = File::open(index).map_err(io_err)?;
        let len = f.metadata().map_err(io_err)?.len();
        let ix = IndexFile::check(Stored::File(f, len), &name)?;
        // A capture file now shorter than what was indexed changed (and cannot be read that far).
        let size = std::fs::metadata(capture)
            .map_err(|e| IndexError::Io(capture.display().to_string(), e))?
            .len();
        if size < ix.header.covered {
            return Err(IndexError::Stale(name));
        }
        let now = Identity::of(capture, ix.header.covered)
            .map_err(|e| IndexError::Io(capture.display().to_string(), e))?;
        ix.belongs(now)
    }

    /// As [`Self::open`], for an index and a capture file read by ranges (an archive's objects;
    /// see [`crate::ReadAt`]): the header and the table are read, chunks as look-ups need them.
    /// The capture file's size must be the one indexed; its ends are not fetched to check their
    /// CRCs (8 KiB a file, more than a narrow query's frames): the archive verified each object
    /// against the local file it copied (size and checksum), and copies a file with its index.
    pub fn open_ranges(
        index: std::sync::Arc<dyn crate::ReadAt>,
        name: &str,
        capture: &dyn crate::ReadAt,
        capture_name: &str,
    ) -> Result<IndexFile, IndexError> {
        let len = index
            .len()
            .map_err(|e| IndexError::Io(name.to_string(), e))?;
        let ix = IndexFile::check(Stored::Ranges(index, len), name)?;
        let io_err = |e| IndexError::Io(capture_name.to_string(), e);
        let size = capture.len().map_err(io_err)?;
        let id = ix.header.identity;
        let same = size == id.size || (!ix.header.complete && size >= ix.header.covered);
        if !same {
            return Err(IndexError::Stale(name.to_string()));
        }
        Ok(ix)
    }

    /// Itself if `now` (the capture file's identity as it is) is what was indexed.
    fn belongs(self, now: Identity) -> Result<IndexFile, IndexError> {
        let id = self.header.identity;
        let same = now.head_crc == id.head_crc
            && now.tail_crc == id.tail_crc
            && (now.size == id.size || (!self.header.complete && now.size >= self.header.covered));
        if !same {
            return Err(IndexError::Stale(self.name));
        }
        Ok(self)
    }

    /// Only the header of `index` (no checksum, no body): enough to order files by time. Callers
    /// that read packets use [`Self::open`], which checks everything.
    pub fn peek_header(index: &Path) -> Option<Header> {
        let mut b = [0u8; HEADER_LEN];
        File::open(index).ok()?.read_exact(&mut b).ok()?;
        let ok = b[..8] == MAGIC[..] && u32::from_le_bytes(b[8..12].try_into().unwrap()) == VERSION;
        ok.then(|| Header::read(&b[12..]).0)
    }

    /// Checks an index's bytes in memory (no capture file needed), as [`Self::open`] does.
    pub fn parse(bytes: Vec<u8>, name: &str) -> Result<IndexFile, IndexError> {
        IndexFile::check(Stored::Bytes(bytes), name)
    }

    /// Magic, version, the checksum of the header and the table, and that the chunks and the
    /// sections fit. What the chunks hold is checked as they are read.
    fn check(stored: Stored, name: &str) -> Result<IndexFile, IndexError> {
        let corrupt = || IndexError::Corrupt(name.to_string());
        let io_err = |e| IndexError::Io(name.to_string(), e);
        let stored_len = stored.len();
        if stored_len < (HEADER_LEN + TRAILER_LEN) as u64 {
            return Err(IndexError::Magic(name.to_string()));
        }
        let head = stored.read(0, HEADER_LEN).map_err(io_err)?;
        if head[..7] != MAGIC[..7] {
            return Err(IndexError::Magic(name.to_string()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
        if version != VERSION || head[7] != MAGIC[7] {
            return Err(IndexError::Version(name.to_string(), version));
        }
        let (header, body_len, chunk_count) = Header::read(&head[12..HEADER_LEN]);
        if body_len > MAX_BODY {
            return Err(corrupt());
        }
        // Lengths are read from the file: sizes that overflow or do not add up are a corrupt
        // index, not a panic.
        let at = sections(&header, body_len).ok_or_else(corrupt)?;
        let [frames_at, addrs_at, flows_at, by_b_at, postings_at] = at;
        let body_len = body_len as usize;
        let plan = chunk_plan(body_len, at);
        if plan.len() != chunk_count as usize {
            return Err(corrupt());
        }
        let dir_len = (header.flows as usize).div_ceil(DIR_STEP);
        // The table after the chunks: each chunk's stored length, then the two directories.
        let table_len = 4 * (chunk_count as usize + 2 * dir_len);
        let end = stored_len - TRAILER_LEN as u64;
        let table_at = end
            .checked_sub(table_len as u64)
            .filter(|&t| t >= HEADER_LEN as u64)
            .ok_or_else(corrupt)?;
        let tail = stored
            .read(table_at, table_len + TRAILER_LEN)
            .map_err(io_err)?;
        let (table, trailer) = tail.split_at(table_len);
        let crc = u32::from_le_bytes(trailer[..4].try_into().unwrap());
        if crc != checksum(&head, table) || trailer[4..] != MAGIC[..4] {
            return Err(corrupt());
        }
        let u32s = |from: usize, n: usize| -> Vec<u32> {
            (0..n)
                .map(|i| {
                    let at = from + 4 * i;
                    u32::from_le_bytes(table[at..at + 4].try_into().unwrap())
                })
                .collect()
        };
        let lens = u32s(0, chunk_count as usize);
        let flows_dir = u32s(4 * chunk_count as usize, dir_len);
        let by_b_dir = u32s(4 * (chunk_count as usize + dir_len), dir_len);
        let mut chunk_at = Vec::with_capacity(lens.len());
        let mut at = HEADER_LEN as u64;
        for l in lens {
            chunk_at.push(at..at + u64::from(l));
            at += u64::from(l);
        }
        if at != table_at {
            return Err(corrupt());
        }
        drop(head);
        drop(tail);
        Ok(IndexFile {
            name: name.to_string(),
            stored,
            chunks: (0..chunk_at.len()).map(|_| OnceLock::new()).collect(),
            chunk_at,
            plan,
            body_len,
            flows_dir,
            by_b_dir,
            header,
            read: ((HEADER_LEN + table_len + TRAILER_LEN) as u64).into(),
            frames_at,
            addrs_at,
            flows_at,
            by_b_at,
            postings_at,
        })
    }

    fn corrupt(&self) -> IndexError {
        IndexError::Corrupt(self.name.clone())
    }

    /// Chunk `k` of the body, decompressed on first use.
    fn chunk(&self, k: usize) -> Result<&[u8], IndexError> {
        if let Some(c) = self.chunks[k].get() {
            return Ok(c);
        }
        let spec = self.plan[k];
        let want = spec.len;
        let at = &self.chunk_at[k];
        let packed = self
            .stored
            .read(at.start, (at.end - at.start) as usize)
            .map_err(|e| IndexError::Io(self.name.clone(), e))?;
        self.read
            .fetch_add(packed.len() as u64, std::sync::atomic::Ordering::Relaxed);
        // Damaged bytes fail zstd's content checksum (or give another length).
        let raw = decompress_chunk(&packed, want).map_err(|_| self.corrupt())?;
        if raw.len() != want {
            return Err(self.corrupt());
        }
        let raw = match spec.layout {
            Layout::Bytes => raw,
            Layout::Rows(w) => unpack_rows(&raw, w),
        };
        Ok(self.chunks[k].get_or_init(|| raw))
    }

    /// `len` bytes of the body from `at`: borrowed from one chunk, or copied where they cross
    /// chunks.
    fn raw(&self, at: usize, len: usize) -> Result<Cow<'_, [u8]>, IndexError> {
        let end = at
            .checked_add(len)
            .filter(|&e| e <= self.body_len)
            .ok_or_else(|| self.corrupt())?;
        if len == 0 {
            return Ok(Cow::Borrowed(&[]));
        }
        let holding = |x: usize| self.plan.partition_point(|c| c.start <= x) - 1;
        let (first, last) = (holding(at), holding(end - 1));
        if first == last {
            let (c, from) = (self.chunk(first)?, self.plan[first].start);
            return Ok(Cow::Borrowed(&c[at - from..end - from]));
        }
        let mut v = Vec::with_capacity(len);
        for k in first..=last {
            let (c, from) = (self.chunk(k)?, self.plan[k].start);
            v.extend_from_slice(&c[at.max(from) - from..end.min(from + c.len()) - from]);
        }
        Ok(Cow::Owned(v))
    }

    /// Decompresses every chunk: what `ringcap index` does before it calls an index current.
    pub fn verify(&self) -> Result<(), IndexError> {
        (0..self.chunks.len()).try_for_each(|k| self.chunk(k).map(drop))?;
        for i in 0..self.header.flows {
            self.flow(i)?;
            self.by_b(i)?;
        }
        Ok(())
    }

    /// Postings are frame numbers (the file is compressed), not record offsets.
    pub fn postings_are_frames(&self) -> bool {
        self.header.compression != Compression::None
    }

    /// Bytes of the index read so far (its header and table when opened, then each chunk a
    /// look-up needed, once).
    pub fn bytes_read(&self) -> u64 {
        self.read.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes of the index file (compressed, as stored).
    pub fn len(&self) -> usize {
        self.stored.len() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.stored.len() == 0
    }

    /// The capture file's header bytes (uncompressed).
    pub fn prelude(&self) -> Result<Cow<'_, [u8]>, IndexError> {
        self.raw(0, self.header.prelude_len as usize)
    }

    /// Every frame, in file order.
    pub fn frames(&self) -> Result<Vec<Frame>, IndexError> {
        let b = self.raw(self.frames_at, self.header.frames_len as usize)?;
        decode_frames(&b, self.header.frames).ok_or_else(|| self.corrupt())
    }

    fn addr(&self, i: u32) -> Result<[u8; 16], IndexError> {
        let b = self.raw(self.addrs_at + i as usize * 16, 16)?;
        Ok(b[..].try_into().unwrap())
    }

    /// Flow `i`, its ids and postings checked against their sections.
    pub fn flow(&self, i: u32) -> Result<FlowRow, IndexError> {
        self.flow_row(&self.raw(self.flows_at + i as usize * FLOW_LEN, FLOW_LEN)?)
    }

    /// A flow from its [`FLOW_LEN`] bytes, checked.
    fn flow_row(&self, b: &[u8]) -> Result<FlowRow, IndexError> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u16_at = |i: usize| u16::from_le_bytes(b[i..i + 2].try_into().unwrap());
        let f = FlowRow {
            a: u32_at(0),
            b: u32_at(4),
            port_a: u16_at(8),
            port_b: u16_at(10),
            proto: b[12],
            kind: b[13] & ((1 << TUNNEL_SHIFT) - 1),
            vlan: u16_at(14),
            entries: u32_at(16),
            postings: u64::from_le_bytes(b[20..28].try_into().unwrap()),
            tunnel: b[13] >> TUNNEL_SHIFT,
            tunnel_id: u32_at(28),
        };
        // Ids and posting offsets must stay inside their sections, whatever the bytes say.
        let addr_ok = |x: u32| (f.kind & KIND_IP == 0) || x < self.header.addrs;
        if !addr_ok(f.a) || !addr_ok(f.b) || f.postings > self.header.postings_len {
            return Err(self.corrupt());
        }
        Ok(f)
    }

    /// Entry `i` of the flows sorted by second endpoint: that endpoint's address id, and the flow.
    fn by_b(&self, i: u32) -> Result<(u32, u32), IndexError> {
        let b = self.raw(self.by_b_at + i as usize * BY_B_LEN, BY_B_LEN)?;
        let addr = u32::from_le_bytes(b[..4].try_into().unwrap());
        let flow = u32::from_le_bytes(b[4..].try_into().unwrap());
        if flow >= self.header.flows {
            return Err(self.corrupt());
        }
        Ok((addr, flow))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_their_encoding_including_odd_ones() {
        // file_off, file_len, raw_start, raw_len, rec_start, first_ts, last_ts, packets
        let f = |v: [u64; 8]| Frame {
            file_off: v[0],
            file_len: v[1],
            raw_start: v[2],
            raw_len: v[3],
            rec_start: v[4],
            first_ts: v[5],
            last_ts: v[6],
            packets: v[7],
        };
        let t = 1_700_000_000_000_000_000;
        let frames = [
            f([0, 4100, 0, 8192, 24, t, t + 500_000_000, 12]),
            // Contiguous, as ringcap writes them.
            f([
                4100,
                3900,
                8192,
                8150,
                8192,
                t + 400_000_000,
                t + 1_000_000_000,
                11,
            ]),
            // A gap in the file (a skippable frame), time going back, a frame without packets.
            f([9000, 10, 16342, 0, 16342, t - 10_000, t - 10_000, 0]),
            // A record that started in an earlier frame (plain files), extreme values.
            f([
                u64::MAX / 2,
                u64::MAX / 4,
                20_000,
                5,
                19_990,
                0,
                u64::MAX,
                u64::MAX,
            ]),
        ];
        let mut b = Vec::new();
        encode_frames(&frames, &mut b);
        assert_eq!(decode_frames(&b, 4).unwrap(), frames);
        // A count or length that does not match is refused, not guessed.
        assert_eq!(decode_frames(&b, 3), None);
        assert_eq!(decode_frames(&b, 5), None);
        assert_eq!(decode_frames(&b[..b.len() - 1], 4), None);
    }
}
