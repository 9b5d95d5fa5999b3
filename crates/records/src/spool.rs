//! The collector's spool: accepted batch payloads appended to a plain file, so a batch is safe (in the page
//! cache, survives a SIGKILL of the collector) before it is acked. Converted to Parquet on rotation.
//!
//! Layout: the 8-byte magic `RCSPOOL1`, then frames back to back:
//! ```text
//! off size field
//! 0   8  probe_id
//! 8   4  stream_id
//! 12  4  record_count
//! 16  4  payload_len    bytes of records that follow (<= MAX_PAYLOAD)
//! 20  4  crc32          crc32fast of the payload (catches a torn last frame)
//! 24  .. payload        the batch payload as received (records back to back)
//! ```
//! Each frame is written with one `write()`, so after a crash only the last frame can be short. The reader
//! stops at the first short or corrupt frame and reports the bytes it skipped.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// First bytes of every spool file.
pub const SPOOL_MAGIC: &[u8; 8] = b"RCSPOOL1";
/// Frame header size.
pub const FRAME_HEADER: usize = 24;
/// Largest payload of one frame (a batch payload is at most 64 KiB).
pub const MAX_PAYLOAD: usize = 65536;

/// Appends frames to one spool file.
pub struct SpoolWriter {
    file: File,
    path: PathBuf,
    bytes: u64,
    records: u64,
    frames: u64,
    /// Reused frame buffer: header + payload go out in a single write.
    buf: Vec<u8>,
}

impl SpoolWriter {
    /// Creates `path` (it must not exist) and writes the magic.
    pub fn create(path: &Path) -> io::Result<SpoolWriter> {
        let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
        file.write_all(SPOOL_MAGIC)?;
        Ok(SpoolWriter {
            file,
            path: path.to_path_buf(),
            bytes: SPOOL_MAGIC.len() as u64,
            records: 0,
            frames: 0,
            buf: Vec::with_capacity(FRAME_HEADER + MAX_PAYLOAD),
        })
    }

    /// Appends one batch payload of `count` records. When this returns Ok the bytes are in the page cache.
    pub fn append(
        &mut self,
        probe_id: u64,
        stream_id: u32,
        count: u32,
        payload: &[u8],
    ) -> io::Result<()> {
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
            // A partial frame may be on disk now; the reader's crc check drops it at recovery, but
            // appending more after it would hide them behind it: refuse further appends.
            self.bytes = u64::MAX;
            return Err(e);
        }
        self.bytes += self.buf.len() as u64;
        self.records += count as u64;
        self.frames += 1;
        Ok(())
    }

    /// Bytes in the file so far (u64::MAX after a failed write: rotate now).
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

/// Why reading a spool stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpoolTail {
    /// The whole file was read.
    Clean,
    /// The last frame was cut short (a crash during its write); `bytes` skipped.
    Truncated { bytes: u64 },
    /// A frame failed its checksum or had an impossible length; `bytes` from there to the end skipped.
    Corrupt { bytes: u64 },
}

/// Reads the frames of a spool file in order, with one reused buffer.
pub struct SpoolReader {
    reader: BufReader<File>,
    file_len: u64,
    pos: u64,
    payload: Vec<u8>,
    tail: SpoolTail,
    done: bool,
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
        })
    }

    /// The next frame's header (its payload is then [`Self::payload`]); None at the end or at a bad tail.
    pub fn next_frame(&mut self) -> io::Result<Option<FrameHeader>> {
        if self.done {
            return Ok(None);
        }
        let mut h = [0u8; FRAME_HEADER];
        match read_full(&mut self.reader, &mut h)? {
            0 => {
                self.done = true;
                return Ok(None);
            }
            n if n < FRAME_HEADER => return Ok(self.stop_truncated()),
            _ => {}
        }
        let le32 = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let probe_id = u64::from_le_bytes(h[0..8].try_into().expect("8 bytes"));
        let stream_id = le32(8);
        let count = le32(12);
        let len = le32(16) as usize;
        let crc = le32(20);
        if len > MAX_PAYLOAD {
            return Ok(self.stop_corrupt());
        }
        self.payload.resize(len, 0);
        if read_full(&mut self.reader, &mut self.payload)? < len {
            return Ok(self.stop_truncated());
        }
        if crc32fast::hash(&self.payload) != crc {
            return Ok(self.stop_corrupt());
        }
        self.pos += (FRAME_HEADER + len) as u64;
        Ok(Some(FrameHeader {
            probe_id,
            stream_id,
            count,
        }))
    }

    /// The payload of the frame last returned by [`Self::next_frame`].
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// How reading ended (meaningful once `next_frame` returned None).
    pub fn tail(&self) -> &SpoolTail {
        &self.tail
    }

    fn stop_truncated(&mut self) -> Option<FrameHeader> {
        self.done = true;
        self.tail = SpoolTail::Truncated {
            bytes: self.file_len - self.pos,
        };
        None
    }

    fn stop_corrupt(&mut self) -> Option<FrameHeader> {
        self.done = true;
        self.tail = SpoolTail::Corrupt {
            bytes: self.file_len - self.pos,
        };
        None
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

    #[test]
    fn corrupt_frame_stops_reading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.rcr");
        let mut w = SpoolWriter::create(&p).unwrap();
        for i in 0..3u32 {
            w.append(1, 2, 10, &payload(i, 480)).unwrap();
        }
        drop(w);
        let mut bytes = std::fs::read(&p).unwrap();
        let second_payload = 8 + (FRAME_HEADER + 480) + FRAME_HEADER + 5;
        bytes[second_payload] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        let mut r = SpoolReader::open(&p).unwrap();
        assert!(r.next_frame().unwrap().is_some());
        assert!(r.next_frame().unwrap().is_none());
        assert_eq!(
            r.tail(),
            &SpoolTail::Corrupt {
                bytes: 2 * (FRAME_HEADER + 480) as u64
            }
        );
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
