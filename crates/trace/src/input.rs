//! Opening one capture file for conversion: decompression (gzip, zstd, lz4 found by magic) and a byte
//! counter for the progress bar. The store reader does the pcap/pcapng parsing and gives every
//! packet's byte offset in the decompressed stream.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use store::{CaptureReader, StoreError};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];

/// Compression found on an input file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Lz4,
}

/// Adds the bytes read from the raw file to a shared counter (progress by input bytes).
struct Counting<R> {
    inner: R,
    bytes: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}

/// An open capture file.
pub struct OpenInput {
    /// The pcap/pcapng reader over the decompressed stream.
    pub reader: CaptureReader,
    /// Compression of the file.
    pub compression: Compression,
}

/// Opens `path`, finding its compression by magic; raw bytes read are added to `bytes_read`.
pub fn open_input(path: &Path, bytes_read: Arc<AtomicU64>) -> Result<OpenInput, StoreError> {
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(read_err)?;
    // Small: only the magic is looked at through it. The store reader asks for about 1 MiB at a time,
    // which passes straight through a smaller, empty BufReader into its own buffer (with 1 MiB here,
    // every byte of a plain input was copied twice).
    let mut raw = BufReader::with_capacity(
        1 << 16,
        Counting {
            inner: file,
            bytes: bytes_read,
        },
    );
    let head = raw.fill_buf().map_err(read_err)?;
    let compression = if head.starts_with(&ZSTD_MAGIC) {
        Compression::Zstd
    } else if head.starts_with(&LZ4_MAGIC) {
        Compression::Lz4
    } else if head.starts_with(&GZIP_MAGIC) {
        Compression::Gzip
    } else {
        Compression::None
    };
    let plain: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(raw),
        // Reads concatenated members, as gzip(1) does.
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        // Decodes concatenated frames (rotated or appended output).
        Compression::Zstd => {
            Box::new(zstd::stream::read::Decoder::with_buffer(raw).map_err(read_err)?)
        }
        Compression::Lz4 => Box::new(Lz4Frames(Some(lz4_flex::frame::FrameDecoder::new(raw)))),
    };
    let reader = CaptureReader::from_reader(plain, path)?;
    Ok(OpenInput {
        reader,
        compression,
    })
}

/// Reads concatenated lz4 frames: lz4_flex's decoder ends at the end of each frame, so each frame
/// gets a fresh decoder over the same buffered input.
struct Lz4Frames<R: BufRead>(Option<lz4_flex::frame::FrameDecoder<R>>);

impl<R: BufRead> Read for Lz4Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Bounded, so a stream of empty frames cannot spin forever.
        for _ in 0..1024 {
            let Some(dec) = self.0.as_mut() else {
                return Ok(0);
            };
            let n = dec.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let mut inner = self.0.take().expect("decoder present").into_inner();
            if inner.fill_buf()?.is_empty() {
                return Ok(0);
            }
            self.0 = Some(lz4_flex::frame::FrameDecoder::new(inner));
        }
        Ok(0)
    }
}
