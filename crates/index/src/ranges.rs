//! Reading a capture file or its index by byte ranges: from a local file, or from anything else
//! that serves ranges (an archive's objects: `archive::Object`). The query and the index reader
//! read through [`ReadAt`]; a local file keeps its page-cache paths (read-ahead hints,
//! `RWF_NOWAIT`) through [`ReadAt::as_file`].

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// Bytes that can be read at any offset.
pub trait ReadAt: Send + Sync {
    /// Fills `buf` with the bytes from `offset` (all of them, or an error).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Its length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Whether it has no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        self.len().map(|n| n == 0)
    }

    /// The ranges a reader will read next, in order: a remote source fetches them ahead (adjacent
    /// ones joined), a local file needs no such word.
    fn will_read(&self, _ranges: &[Range<u64>]) {}

    /// The local file, for the paths that only a file has (the page cache's hints).
    fn as_file(&self) -> Option<&File> {
        None
    }
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        self.metadata().map(|m| m.len())
    }

    fn as_file(&self) -> Option<&File> {
        Some(self)
    }
}

/// A capture file that is read by ranges from elsewhere (an archive), with its index if it has
/// one; `name` is what reports and errors call it (`s3://bucket/key`).
#[derive(Clone)]
pub struct RangeFile {
    pub name: PathBuf,
    pub data: Arc<dyn ReadAt>,
    pub index: Option<Arc<dyn ReadAt>>,
    /// Its flow table, if it has one (read by `--name`).
    pub flows: Option<Arc<dyn ReadAt>>,
}

/// `range` of `src` as a stream. A local file is read as before (seek, then the kernel's own
/// read-ahead); anything else in blocks that grow from [`FIRST_BLOCK`] (a survey reads one
/// packet) to [`MAX_BLOCK`] (a scan reads everything).
pub fn stream_of(src: Arc<dyn ReadAt>, range: Range<u64>) -> io::Result<Box<dyn Read + Send>> {
    if let Some(f) = src.as_file() {
        let mut f = f.try_clone()?;
        f.seek(SeekFrom::Start(range.start))?;
        return Ok(Box::new(f.take(range.end.saturating_sub(range.start))));
    }
    Ok(Box::new(Blocks {
        src,
        at: range.start,
        end: range.end,
        block: FIRST_BLOCK,
        buf: Vec::new(),
        pos: 0,
    }))
}

/// The first block a stream of a remote source asks for.
pub const FIRST_BLOCK: u64 = 16 << 10;
/// The largest.
pub const MAX_BLOCK: u64 = 4 << 20;

struct Blocks {
    src: Arc<dyn ReadAt>,
    at: u64,
    end: u64,
    block: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for Blocks {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.buf.len() {
            if self.at >= self.end {
                return Ok(0);
            }
            let n = self.block.min(self.end - self.at);
            self.buf.resize(n as usize, 0);
            self.src.read_at(&mut self.buf, self.at)?;
            self.at += n;
            self.pos = 0;
            self.block = (self.block * 2).min(MAX_BLOCK);
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes in memory, not a file: the block path.
    struct Mem(Vec<u8>);

    impl ReadAt for Mem {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            let at = offset as usize;
            let src = self
                .0
                .get(at..at + buf.len())
                .ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(src);
            Ok(())
        }

        fn len(&self) -> io::Result<u64> {
            Ok(self.0.len() as u64)
        }
    }

    #[test]
    fn a_stream_of_blocks_gives_exactly_the_range() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 31) as u8).collect();
        let src: Arc<dyn ReadAt> = Arc::new(Mem(data.clone()));
        for r in [0..0, 0..1, 5..70_000, 100..200_000] {
            let mut got = Vec::new();
            stream_of(src.clone(), r.clone())
                .unwrap()
                .read_to_end(&mut got)
                .unwrap();
            assert_eq!(got, data[r.start as usize..r.end as usize]);
        }
    }
}
