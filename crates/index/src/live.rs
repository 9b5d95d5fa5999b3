//! The indexer that follows a capture (store's [`store::FileIndexer`]): one index per file the
//! writer completes, written hidden and renamed into place.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use store::{FileIndexer, FrameSpan};
use wire::LinkType;

use crate::build::Builder;
use crate::file::{Compression, Identity};

/// The index of `capture`: next to it, `NAME.idx`.
pub fn index_path(capture: &Path) -> PathBuf {
    store::index_path(capture)
}

/// Writes `bytes` as the index of `capture`: first hidden (`.NAME.idx.partial`), then renamed,
/// so a reader never sees half an index.
pub fn write_index(capture: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let path = index_path(capture);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.partial"));
    // Readable as the capture files are; created anew (O_EXCL) and never through a symlink: a
    // name already there (a crash's leftover, or planted) is unlinked first, never followed.
    let create = || sys::create_data_file(&tmp);
    let mut f = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fs::remove_file(&tmp)?;
            create()?
        }
        r => r?,
    };
    f.write_all(bytes)?;
    drop(f);
    fs::rename(&tmp, &path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })?;
    Ok(path)
}

/// Finishes `b`, the builder of `capture`, and writes the file's index and flow table (the flow
/// table first: an index in place means both were written). Returns the bytes of each.
pub fn write_index_and_flows(capture: &Path, b: Builder) -> Result<(u64, u64), String> {
    let err = |e: std::io::Error| format!("{}: {e}", capture.display());
    let covered = b.covered();
    let id = Identity::of(capture, covered).map_err(err)?;
    let built = b.finish(id);
    let flows = crate::flows::write_flow_table(capture, id, covered, &built.flows).map_err(err)?;
    drop(built.flows);
    write_index(capture, &built.index).map_err(err)?;
    Ok((built.index.len() as u64, flows))
}

/// Compression of a capture file from its name (ringcap's own files are named by it).
pub fn compression_of_name(path: &Path) -> u8 {
    match path.extension().and_then(|e| e.to_str()) {
        Some("zst") => Compression::ZSTD,
        Some("lz4") => Compression::LZ4,
        Some("gz") => Compression::GZIP,
        _ => Compression::NONE,
    }
}

/// The link type a file header declares (pcap, or the first pcapng interface).
pub fn prelude_linktype(prelude: &[u8]) -> Option<u32> {
    let cursor = std::io::Cursor::new(prelude.to_vec());
    let mut r =
        store::CaptureReader::from_reader_sized(Box::new(cursor), Path::new("header"), 4096)
            .ok()?;
    while let Some(Ok(_)) = r.next_packet() {}
    r.linktype()
}

/// Follows a capture's files.
#[derive(Default)]
pub struct LiveIndexer {
    file: Option<(PathBuf, Builder, LinkType)>,
    /// The previous file's index being sorted, compressed and written on a thread of its own, so
    /// the buffers of the next file keep flowing meanwhile (finishing 100 k flows takes tens of ms,
    /// long enough for the writer to pass buffers by and leave the next file unindexed).
    finishing: Option<std::thread::JoinHandle<Result<u64, String>>>,
    /// CPU time of the finished finishing threads.
    finish_cpu_ns: u64,
    /// Flows and packets of the last file: the next builder starts that big.
    last_sizes: (usize, usize),
}

impl LiveIndexer {
    /// Waits for the previous file's index; says so if it could not be written.
    fn wait_finishing(&mut self) -> bool {
        match self.finishing.take().map(|h| h.join()) {
            Some(Ok(Ok(cpu))) => {
                self.finish_cpu_ns += cpu;
                true
            }
            Some(Ok(Err(e))) => {
                log::warn!("an index was not written: {e} (run `ringcap index` on the store)");
                false
            }
            Some(Err(_)) => false,
            _ => true,
        }
    }
}

impl Drop for LiveIndexer {
    fn drop(&mut self) {
        self.wait_finishing();
    }
}

impl FileIndexer for LiveIndexer {
    fn begin(&mut self, path: &Path, header: &[u8]) {
        let linktype = prelude_linktype(header)
            .and_then(LinkType::from_pcap)
            .unwrap_or(LinkType::Ethernet);
        let (flows, packets) = self.last_sizes;
        let b = Builder::with_capacity(header.to_vec(), compression_of_name(path), flows, packets);
        self.file = Some((path.to_path_buf(), b, linktype));
    }

    fn frame(&mut self, s: FrameSpan) {
        if let Some((_, b, _)) = self.file.as_mut() {
            b.frame(s.file_off, s.file_len, s.raw_start, s.raw_len);
        }
    }

    #[inline]
    fn packet(&mut self, raw_off: u64, ts_ns: u64, wire_len: u32, data: &[u8]) {
        if let Some((_, b, lt)) = self.file.as_mut() {
            b.packet(raw_off, ts_ns, wire_len, *lt, data);
        }
    }

    fn wait_all(&mut self) -> u64 {
        self.wait_finishing();
        self.finish_cpu_ns
    }

    fn end(&mut self, complete: bool) -> Result<bool, String> {
        let Some((path, b, _)) = self.file.take() else {
            return Ok(false);
        };
        self.last_sizes = b.sizes();
        if !complete {
            return Ok(false);
        }
        // One file finishes at a time: by the time the next file ends, this one is long done.
        let previous_ok = self.wait_finishing();
        let finish = move || -> Result<u64, String> {
            sys::idle_priority();
            write_index_and_flows(&path, b)?;
            Ok(sys::thread_cpu_ns())
        };
        let h = std::thread::Builder::new()
            .name("ringcap-index-w".into())
            .spawn(finish)
            .map_err(|e| e.to_string())?;
        self.finishing = Some(h);
        if !previous_ok {
            return Err("the previous file's index was not written".into());
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn an_index_is_owner_only_and_never_written_through_a_planted_symlink() {
        let dir = std::env::temp_dir().join(format!("ringcap-live-idx-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        fs::write(&victim, b"not an index").unwrap();
        symlink(&victim, dir.join(".c.pcap.idx.partial")).unwrap();
        let idx = write_index(&dir.join("c.pcap"), b"index bytes").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"not an index");
        let meta = fs::symlink_metadata(&idx).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read(&idx).unwrap(), b"index bytes");
        fs::remove_dir_all(&dir).unwrap();
    }
}
