//! The collector's spool: accepted batch payloads appended to a plain file, synced (fdatasync) before
//! they are acked. Converted to Parquet on rotation.
//!
//! Layout: the 8-byte magic `RCSPOOL1`, then frames back to back:
//! ```text
//! off size field
//! 0   8  probe_id
//! 8   4  stream_id
//! 12  4  record_count
//! 16  4  payload_len    bytes of records that follow (<= MAX_PAYLOAD)
//! 20  4  crc32          crc32fast of the payload (catches a torn or damaged frame)
//! 24  .. payload        the batch payload as received (records back to back)
//! ```
//! Each frame is written with one `write()`. A write that fails (disk full) is cut back to the last whole
//! frame and the writer refuses further appends: the archive closes it and opens a new spool. The reader
//! skips a damaged frame by scanning for the next plausible header whose crc matches, and reports the
//! bytes it skipped.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// First bytes of every spool file.
pub const SPOOL_MAGIC: &[u8; 8] = b"RCSPOOL1";
/// Frame header size.
pub const FRAME_HEADER: usize = 24;
/// Largest payload of one frame (a batch payload is at most 64 KiB).
pub const MAX_PAYLOAD: usize = 65536;
/// Bytes of the smallest and largest record (IPv4/non-IP; IPv6 in a tunnel with an IPv6 carrier):
/// bound a plausible payload length.
const MIN_RECORD: usize = wire::record::RECORD_LEN;
const MAX_RECORD: usize = wire::record::RECORD_MAX_LEN;

/// Appends frames to one spool file.
pub struct SpoolWriter {
    file: File,
    path: PathBuf,
    /// Bytes of the magic and the whole frames written (where the next frame starts).
    bytes: u64,
    records: u64,
    frames: u64,
    /// A write failed: the file was cut back to `bytes` and takes no more frames.
    broken: bool,
    /// Reused frame buffer: header + payload go out in a single write.
    buf: Vec<u8>,
}

impl SpoolWriter {
    /// Creates `path` (it must not exist; mode 0600, not through a symlink) and writes the magic. A
    /// file that could not take the magic (disk full) is removed again.
    pub fn create(path: &Path) -> io::Result<SpoolWriter> {
        let mut file = sys::create_data_file(path)?;
        if let Err(e) = file.write_all(SPOOL_MAGIC) {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(SpoolWriter {
            file,
            path: path.to_path_buf(),
            bytes: SPOOL_MAGIC.len() as u64,
            records: 0,
            frames: 0,
            broken: false,
            buf: Vec::with_capacity(FRAME_HEADER + MAX_PAYLOAD),
        })
    }

    /// Appends one batch payload of `count` records (in the page cache when this returns Ok; see
    /// [`Self::sync`]). After an error the file ends with its last whole frame and [`Self::broken`] is
    /// true: close it and start another.
    pub fn append(
        &mut self,
        probe_id: u64,
        stream_id: u32,
        count: u32,
        payload: &[u8],
    ) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::other(format!(
                "the spool {} had a failed write; open a new one",
                self.path.display()
            )));
        }
        if payload.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("spool frame of {} bytes > {MAX_PAYLOAD}", payload.len()),
            ));
        }
        self.buf.clear();
        self.buf.extend_from_slice(&probe_id.to_le_bytes());
        self.buf.extend_from_slice(&stream_id.to_le_bytes());
        self.buf.extend_from_slice(&count.to_le_bytes());
        self.buf
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.buf
            .extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        self.buf.extend_from_slice(payload);
        if let Err(e) = self.file.write_all(&self.buf) {
            // Part of the frame may be in the file: cut it off so the spool ends with a whole frame.
            self.broken = true;
            return Err(match self.file.set_len(self.bytes) {
                Ok(()) => e,
                Err(t) => io::Error::new(
                    e.kind(),
                    format!("{e}; cutting back the torn frame failed too: {t}"),
                ),
            });
        }
        self.bytes += self.buf.len() as u64;
        self.records += count as u64;
        self.frames += 1;
        Ok(())
    }

    /// Makes every appended frame durable (fdatasync).
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// True after a failed write: the file takes no more frames.
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// Bytes in the file (magic and whole frames).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Records appended.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Frames (batches) appended.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One frame's header; its payload is [`SpoolReader::payload`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The probe that sent the batch.
    pub probe_id: u64,
    /// The probe's stream (process start).
    pub stream_id: u32,
    /// Records in the payload.
    pub count: u32,
}

impl FrameHeader {
    /// (header, payload length, crc) from 24 header bytes.
    fn parse(h: &[u8]) -> (FrameHeader, usize, u32) {
        let le32 = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
        let header = FrameHeader {
            probe_id: u64::from_le_bytes(h[0..8].try_into().expect("8 bytes")),
            stream_id: le32(8),
            count: le32(12),
        };
        (header, le32(16) as usize, le32(20))
    }
}

/// A frame worth a crc check while resynchronising: at least one record and a length that `count`
/// records can have (runs of zeros, e.g. a file hole, never qualify).
fn plausible(count: u32, len: usize) -> bool {
    let count = count as usize;
    count >= 1 && len <= MAX_PAYLOAD && len >= count * MIN_RECORD && len <= count * MAX_RECORD
}

/// How the end of a spool looked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpoolTail {
    /// The whole file was read.
    Clean,
    /// The last frame was cut short (a crash during its write); `bytes` skipped.
    Truncated { bytes: u64 },
    /// Damaged bytes up to the end with no whole frame after them; `bytes` skipped.
    Corrupt { bytes: u64 },
}

/// Reads the frames of a spool file in order, with one reused buffer; skips damaged regions.
pub struct SpoolReader {
    reader: BufReader<File>,
    file_len: u64,
    /// Offset of the next frame.
    pos: u64,
    payload: Vec<u8>,
    tail: SpoolTail,
    done: bool,
    skipped_bytes: u64,
    skipped_regions: u64,
}

impl SpoolReader {
    /// Opens a spool file and checks its magic.
    pub fn open(path: &Path) -> io::Result<SpoolReader> {
        let file = File::open(path)?;
        let file_len = file.metadata()?.len();
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut magic = [0u8; 8];
        let mut done = false;
        let mut tail = SpoolTail::Clean;
        match reader.read_exact(&mut magic) {
            Ok(()) if &magic == SPOOL_MAGIC => {}
            Ok(()) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} is not a ringcap spool (magic {:02x?}, want RCSPOOL1)",
                        path.display(),
                        magic
                    ),
                ))
            }
            // Crashed right after create: an empty spool.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                done = true;
                tail = SpoolTail::Truncated { bytes: file_len };
            }
            Err(e) => return Err(e),
        }
        Ok(SpoolReader {
            reader,
            file_len,
            pos: 8,
            payload: Vec::with_capacity(MAX_PAYLOAD),
            tail,
            done,
            skipped_bytes: 0,
            skipped_regions: 0,
        })
    }

    /// The next whole frame's header (its payload is then [`Self::payload`]); None at the end.
    pub fn next_frame(&mut self) -> io::Result<Option<FrameHeader>> {
        if self.done {
            return Ok(None);
        }
        if self.pos == self.file_len {
            self.done = true;
            return Ok(None);
        }
        if let Some(h) = self.read_frame_here()? {
            return Ok(Some(h));
        }
        // Damaged or torn here: look for the next whole frame.
        let damaged_at = self.pos;
        match self.find_next_frame(damaged_at + 1)? {
            Some(at) => {
                self.skipped_bytes += at - damaged_at;
                self.skipped_regions += 1;
                self.pos = at;
                self.reader.seek(SeekFrom::Start(at))?;
                Ok(Some(
                    self.read_frame_here()?
                        .expect("find_next_frame checked this frame"),
                ))
            }
            None => {
                self.done = true;
                let bytes = self.file_len - damaged_at;
                self.tail = if self.torn_tail(damaged_at)? {
                    SpoolTail::Truncated { bytes }
                } else {
                    SpoolTail::Corrupt { bytes }
                };
                Ok(None)
            }
        }
    }

    /// Reads the frame at `pos` (the reader is positioned there); None (position unspecified) when it is
    /// short or fails its checks.
    fn read_frame_here(&mut self) -> io::Result<Option<FrameHeader>> {
        let mut h = [0u8; FRAME_HEADER];
        if read_full(&mut self.reader, &mut h)? < FRAME_HEADER {
            return Ok(None);
        }
        let (header, len, crc) = FrameHeader::parse(&h);
        // The crc covers the payload only: a count that cannot fit the length is damage too.
        let empty = header.count == 0 && len == 0;
        if !empty && !plausible(header.count, len) {
            return Ok(None);
        }
        self.payload.resize(len, 0);
        if read_full(&mut self.reader, &mut self.payload)? < len
            || crc32fast::hash(&self.payload) != crc
        {
            return Ok(None);
        }
        self.pos += (FRAME_HEADER + len) as u64;
        Ok(Some(header))
    }

    /// Offset ≥ `from` of the first frame with a plausible header and a matching crc, if any.
    fn find_next_frame(&mut self, from: u64) -> io::Result<Option<u64>> {
        let file = self.reader.get_ref();
        let mut window = vec![0u8; 1 << 20];
        let mut start = from;
        while start + FRAME_HEADER as u64 <= self.file_len {
            let n = ((self.file_len - start) as usize).min(window.len());
            file.read_exact_at(&mut window[..n], start)?;
            // Headers that start in this window (the next window overlaps by a header).
            let last = n.saturating_sub(FRAME_HEADER);
            for i in 0..=last {
                let (h, len, crc) = FrameHeader::parse(&window[i..i + FRAME_HEADER]);
                let at = start + i as u64;
                if !plausible(h.count, len) || at + (FRAME_HEADER + len) as u64 > self.file_len {
                    continue;
                }
                let body_at = i + FRAME_HEADER;
                let matches = if body_at + len <= n {
                    crc32fast::hash(&window[body_at..body_at + len]) == crc
                } else {
                    self.payload.resize(len, 0);
                    file.read_exact_at(&mut self.payload, at + FRAME_HEADER as u64)?;
                    crc32fast::hash(&self.payload) == crc
                };
                if matches {
                    return Ok(Some(at));
                }
            }
            start += last as u64 + 1;
        }
        Ok(None)
    }

    /// True when the frame at `at` is a header (or part of one) whose payload runs past the end: the
    /// torn last write of a crash, as opposed to damaged bytes.
    fn torn_tail(&self, at: u64) -> io::Result<bool> {
        let rest = self.file_len - at;
        if rest < FRAME_HEADER as u64 {
            return Ok(true);
        }
        let mut h = [0u8; FRAME_HEADER];
        self.reader.get_ref().read_exact_at(&mut h, at)?;
        let (_, len, _) = FrameHeader::parse(&h);
        Ok(len <= MAX_PAYLOAD && rest < (FRAME_HEADER + len) as u64)
    }

    /// The payload of the frame last returned by [`Self::next_frame`].
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// How reading ended (meaningful once `next_frame` returned None).
    pub fn tail(&self) -> &SpoolTail {
        &self.tail
    }

    /// Damaged bytes skipped before a whole frame (not counting the tail).
    pub fn skipped_bytes(&self) -> u64 {
        self.skipped_bytes
    }

    /// Damaged regions skipped before a whole frame.
    pub fn skipped_regions(&self) -> u64 {
        self.skipped_regions
    }
}

/// Reads until `buf` is full or EOF; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn payload(i: u32, len: usize) -> Vec<u8> {
        (0..len)
            .map(|k| (k as u32 ^ i.wrapping_mul(31)) as u8)
            .collect()
    }

    #[test]
    fn frames_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rcr");
        let mut w = SpoolWriter::create(&p).unwrap();
        for i in 0..50u32 {
            w.append(7, i, i, &payload(i, 48 * i as usize)).unwrap();
        }
        assert_eq!(w.records(), (0..50).sum::<u32>() as u64);
        let bytes = w.bytes();
        drop(w);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), bytes);
        let mut r = SpoolReader::open(&p).unwrap();
        let mut i = 0u32;
        while let Some(h) = r.next_frame().unwrap() {
            assert_eq!(
                h,
                FrameHeader {
                    probe_id: 7,
                    stream_id: i,
                    count: i
                }
            );
            assert_eq!(r.payload(), &payload(i, 48 * i as usize)[..]);
            i += 1;
        }
        assert_eq!(i, 50);
        assert_eq!(r.tail(), &SpoolTail::Clean);
    }

    #[test]
    fn torn_last_frame_is_skipped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rcr");
        let mut w = SpoolWriter::create(&p).unwrap();
        for i in 0..3u32 {
            w.append(1, 2, 10, &payload(i, 480)).unwrap();
        }
        drop(w);
        // A crash in the middle of the fourth write: half a frame at the end.
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        let mut frame = vec![0u8; FRAME_HEADER];
        frame[16..20].copy_from_slice(&480u32.to_le_bytes());
        frame.extend_from_slice(&payload(3, 100));
        f.write_all(&frame).unwrap();
        let mut r = SpoolReader::open(&p).unwrap();
        let mut n = 0;
        while r.next_frame().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 3);
        assert_eq!(
            r.tail(),
            &SpoolTail::Truncated {
                bytes: (FRAME_HEADER + 100) as u64
            }
        );
    }

    /// Reads every frame: (stream ids in order, skipped bytes, skipped regions, tail).
    fn read_all(p: &Path) -> (Vec<u32>, u64, u64, SpoolTail) {
        let mut r = SpoolReader::open(p).unwrap();
        let mut ids = Vec::new();
        while let Some(h) = r.next_frame().unwrap() {
            assert_eq!(r.payload(), &payload(h.stream_id, 480)[..], "frame {h:?}");
            ids.push(h.stream_id);
        }
        (
            ids,
            r.skipped_bytes(),
            r.skipped_regions(),
            r.tail().clone(),
        )
    }

    /// A spool of `n` frames of 10 records (480 bytes) with stream ids 0..n.
    fn spool_of(p: &Path, n: u32) {
        let mut w = SpoolWriter::create(p).unwrap();
        for i in 0..n {
            w.append(1, i, 10, &payload(i, 480)).unwrap();
        }
    }

    const ONE: usize = FRAME_HEADER + 480;

    #[test]
    fn corrupt_frame_in_the_middle_is_skipped_and_the_rest_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rcr");
        spool_of(&p, 5);
        let mut bytes = std::fs::read(&p).unwrap();
        // A flipped bit in the payload of frame 1 and in the record count of frame 3.
        bytes[8 + ONE + FRAME_HEADER + 5] ^= 0xff;
        bytes[8 + 3 * ONE + 13] ^= 0x01;
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(
            read_all(&p),
            (vec![0, 2, 4], 2 * ONE as u64, 2, SpoolTail::Clean)
        );
    }

    #[test]
    fn torn_frame_in_the_middle_is_skipped_and_the_rest_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rcr");
        spool_of(&p, 2);
        // What a collector before this fix left after a failed write: half a frame, then whole ones.
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        let mut torn = Vec::new();
        torn.extend_from_slice(&1u64.to_le_bytes());
        torn.extend_from_slice(&99u32.to_le_bytes());
        torn.extend_from_slice(&10u32.to_le_bytes());
        torn.extend_from_slice(&480u32.to_le_bytes());
        torn.extend_from_slice(&crc32fast::hash(&payload(99, 480)).to_le_bytes());
        torn.extend_from_slice(&payload(99, 200));
        f.write_all(&torn).unwrap();
        drop(f);
        let mut w = SpoolWriter {
            file: OpenOptions::new().append(true).open(&p).unwrap(),
            path: p.clone(),
            bytes: 0,
            records: 0,
            frames: 0,
            broken: false,
            buf: Vec::new(),
        };
        for i in 2..4 {
            w.append(1, i, 10, &payload(i, 480)).unwrap();
        }
        drop(w);
        assert_eq!(
            read_all(&p),
            (vec![0, 1, 2, 3], torn.len() as u64, 1, SpoolTail::Clean)
        );
    }

    #[test]
    fn damage_up_to_the_end_is_a_corrupt_tail() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rcr");
        spool_of(&p, 3);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[8 + 2 * ONE + FRAME_HEADER] ^= 0xff;
        // A run of zeros (a file hole) is no frame either.
        bytes.extend_from_slice(&[0u8; 4096]);
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(
            read_all(&p),
            (
                vec![0, 1],
                0,
                0,
                SpoolTail::Corrupt {
                    bytes: ONE as u64 + 4096
                }
            )
        );
    }

    #[test]
    fn failed_write_on_a_full_disk_is_cut_back_and_the_writer_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let mnt = match testbed::Tmpfs::mount(&dir.path().join("mnt"), "16k") {
            Ok(m) => m,
            Err(e) => return testbed::skip(&e.to_string()),
        };
        let p = mnt.path.join("a.rcr");
        let mut w = SpoolWriter::create(&p).unwrap();
        // 504-byte frames into 4 pages: one write is cut short at the end of the last page.
        let mut i = 0;
        let err = loop {
            match w.append(1, i, 10, &payload(i, 480)) {
                Ok(()) => i += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        assert!(w.broken() && w.frames() == i as u64);
        let e = w.append(1, 0, 10, &payload(0, 480)).unwrap_err();
        assert!(e.to_string().contains("open a new one"), "{e}");
        let whole = w.bytes();
        drop(w);
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            whole,
            "torn frame cut off"
        );
        assert_eq!(
            read_all(&p),
            ((0..i).collect::<Vec<_>>(), 0, 0, SpoolTail::Clean)
        );
    }

    #[test]
    fn created_0600_and_never_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rcr");
        drop(SpoolWriter::create(&p).unwrap());
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // A symlink planted at the name, pointing at a file of someone else's: refused, target intact.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let planted = dir.path().join("b.rcr");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let e = SpoolWriter::create(&planted).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        // Dangling too (O_CREAT would otherwise create the target).
        let dangling = dir.path().join("c.rcr");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(SpoolWriter::create(&dangling).is_err());
        assert!(!dir.path().join("nowhere").exists());
    }

    #[test]
    fn not_a_spool_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rcr");
        std::fs::write(&p, b"PAR1 and more bytes").unwrap();
        let e = SpoolReader::open(&p).err().unwrap();
        assert!(e.to_string().contains("not a ringcap spool"), "{e}");
    }
}
