//! A capture file as stored, apart from the packets in it: its compression (found by its first
//! bytes, never by its name), a decoder of its stream, its compressed frames (independent zstd
//! and lz4 frames, which an index names and a query decodes alone), the framing of its records,
//! and the name of a file still being written. The reader, the index, `repair` and the query path
//! all know a capture file through this module.

mod frames;
mod names;
mod records;

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

pub use frames::{walk, Walk};
pub use names::{finished_name, is_partial, partial_name};
pub use records::{RecordLayout, PCAP_MAGIC_PATCHED};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];

/// Compression of a capture file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zstd,
    Lz4,
}

impl Compression {
    /// From a file's first bytes (four are enough; fewer mean none).
    pub fn sniff(head: &[u8]) -> Compression {
        match head {
            [a, b, c, d, ..] if [*a, *b, *c, *d] == ZSTD_MAGIC => Compression::Zstd,
            [a, b, c, d, ..] if [*a, *b, *c, *d] == LZ4_MAGIC => Compression::Lz4,
            [a, b, ..] if [*a, *b] == GZIP_MAGIC => Compression::Gzip,
            _ => Compression::None,
        }
    }

    /// Of the file at `path`, from its first bytes.
    pub fn of_file(path: &Path) -> io::Result<Compression> {
        let mut head = [0u8; 4];
        let mut f = File::open(path)?;
        let mut got = 0;
        while got < head.len() {
            match f.read(&mut head[got..])? {
                0 => break,
                n => got += n,
            }
        }
        Ok(Compression::sniff(&head[..got]))
    }

    /// Lower-case name, as in reports: "none", "gzip", "zstd", "lz4".
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
        }
    }

    /// The number an index file stores for it.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Zstd => 1,
            Compression::Lz4 => 2,
            Compression::Gzip => 3,
        }
    }

    /// The compression an index file's number stands for.
    pub fn from_code(code: u8) -> Option<Compression> {
        Some(match code {
            0 => Compression::None,
            1 => Compression::Zstd,
            2 => Compression::Lz4,
            3 => Compression::Gzip,
            _ => return None,
        })
    }

    /// zstd or lz4: a file of independent frames that an index can name.
    pub fn has_frames(self) -> bool {
        matches!(self, Compression::Zstd | Compression::Lz4)
    }
}

/// A reader of the decompressed stream of `r` (concatenated frames or gzip members are one
/// stream, as the command-line tools read them).
pub fn decoder<'a, R: Read + Send + 'a>(
    r: R,
    compression: Compression,
) -> io::Result<Box<dyn Read + Send + 'a>> {
    Ok(match compression {
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(r)?),
        Compression::Lz4 => Box::new(Lz4Frames(Some(lz4_flex::frame::FrameDecoder::new(
            BufReader::with_capacity(1 << 16, r),
        )))),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(
            BufReader::with_capacity(1 << 16, r),
        )),
        Compression::None => Box::new(r),
    })
}

/// Reads concatenated lz4 frames. lz4_flex's decoder reports end-of-input at the end of each
/// frame and is not meant to carry on into a frame with other parameters, so each frame gets a
/// fresh decoder over the same buffered input.
struct Lz4Frames<R: BufRead>(Option<lz4_flex::frame::FrameDecoder<R>>);

impl<R: BufRead> Read for Lz4Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Bounded: each round consumes input, but a stream of empty frames must not spin forever.
        for _ in 0..1024 {
            let Some(dec) = self.0.as_mut() else {
                return Ok(0);
            };
            let n = dec.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let mut inner = self.0.take().expect("decoder").into_inner();
            if inner.fill_buf()?.is_empty() {
                return Ok(0);
            }
            self.0 = Some(lz4_flex::frame::FrameDecoder::new(inner));
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_is_found_by_content_and_its_code_goes_there_and_back() {
        assert_eq!(Compression::sniff(&ZSTD_MAGIC), Compression::Zstd);
        assert_eq!(Compression::sniff(&LZ4_MAGIC), Compression::Lz4);
        assert_eq!(Compression::sniff(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(Compression::sniff(&[0xd4, 0xc3]), Compression::None);
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Zstd,
            Compression::Lz4,
        ] {
            assert_eq!(Compression::from_code(c.code()), Some(c));
        }
    }
}
