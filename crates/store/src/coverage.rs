//! What a capture file covers: when the capture was writing it and what it lost meanwhile, kept
//! next to the file (`NAME.coverage.json`, written when the file is complete, archived with it).
//! A query over a window reads these to say whether "nothing found" means nothing happened: a
//! drop counted during a file, or a stretch of time no file covers, is a hole in the answer.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The version written; a reader refuses newer ones (their fields may mean something else).
pub const COVERAGE_VERSION: u32 = 1;
/// Largest coverage file read (a few hundred bytes are written).
const MAX_COVERAGE_BYTES: u64 = 64 << 10;

/// One capture file's coverage.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Coverage {
    pub version: u32,
    /// The capture file's name and its size when it was complete (a stale or misplaced record
    /// names another file or size, and is not trusted).
    pub file: String,
    pub size: u64,
    /// Packets in the file, and its first and last packet times (ns since the epoch).
    pub packets: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    /// Wall-clock times the capture opened and closed the file: between one file's close and the
    /// next one's open, the capture was not running (a gap).
    pub opened_ns: u64,
    pub closed_ns: u64,
    /// Packets lost while the file was open, by stage.
    pub drops: Drops,
}

/// Packets lost, by who lost them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Drops {
    /// The kernel: ring full (TPACKET tp_drops, AF_XDP rx_dropped and ring-full counters).
    pub kernel: u64,
    /// The interface or driver (rx_missed, rx_fifo errors) when known.
    pub interface: u64,
    /// ringcap's writer: no free buffer, or a write that failed.
    pub storage: u64,
}

impl Drops {
    pub fn total(&self) -> u64 {
        self.kernel + self.interface + self.storage
    }
}

/// The capture's drops so far, cumulative since it began (kernel and interface; `storage` is the
/// store's own count and is not read from here). A live capture gives one to the file plan
/// ([`crate::FilePlan::coverage`]); it is read once per file boundary, never per packet.
pub type DropMeter = Arc<dyn Fn() -> Drops + Send + Sync>;

/// The capture's counters at a file boundary: the drops of a file are the difference between
/// the marks of its start and its end, so every drop counted lands in exactly one file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Wall clock of the boundary, ns since the epoch.
    pub wall_ns: u64,
    /// Cumulative drops: the meter's kernel and interface counts, the producers' refusals.
    pub kernel: u64,
    pub interface: u64,
    pub refused: u64,
}

/// Where the coverage of a capture file lives: next to it, the name plus `.coverage.json`.
pub fn coverage_path(capture: &Path) -> PathBuf {
    let mut name = capture.file_name().unwrap_or_default().to_os_string();
    name.push(".coverage.json");
    capture.with_file_name(name)
}

impl Coverage {
    /// Parses a coverage record; an error says what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<Coverage, String> {
        let c: Coverage =
            serde_json::from_slice(bytes).map_err(|e| format!("not a coverage record: {e}"))?;
        if c.version == 0 || c.version > COVERAGE_VERSION {
            return Err(format!(
                "coverage version {} (this ringcap reads 1 to {COVERAGE_VERSION})",
                c.version
            ));
        }
        Ok(c)
    }

    /// Whether the record is the one of this capture file (its name and size).
    pub fn describes(&self, name: &str, size: u64) -> bool {
        self.file == name && self.size == size
    }
}

/// The coverage of `capture` if one was written and it is this file's (Ok(None) when there is
/// none, or it names another file or size: a stale record is not trusted).
pub fn read_coverage(capture: &Path) -> io::Result<Option<Coverage>> {
    use std::io::Read;
    let f = match std::fs::File::open(coverage_path(capture)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.take(MAX_COVERAGE_BYTES).read_to_end(&mut bytes)?;
    let c = Coverage::parse(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let name = capture.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let size = std::fs::metadata(capture)?.len();
    Ok(c.describes(name, size).then_some(c))
}

/// Writes `c` next to `capture` (owner-only, or the --group's as every file of the store; replaced
/// whole: a temporary file renamed).
pub fn write_coverage(capture: &Path, c: &Coverage) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = coverage_path(capture);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(path.file_name().unwrap_or_default());
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    // The store's other files' group and mode (--group: 0640 to that group), as the capture file's.
    sys::apply_file_group(&f, &tmp)?;
    f.write_all(&serde_json::to_vec(c).map_err(io::Error::other)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_of_another_file_or_size_or_a_newer_version_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let cap = dir.path().join("a-20261128T000000-000001.pcap");
        std::fs::write(&cap, [0u8; 40]).unwrap();
        assert_eq!(read_coverage(&cap).unwrap(), None);
        let mut c = Coverage {
            version: COVERAGE_VERSION,
            file: "a-20261128T000000-000001.pcap".into(),
            size: 40,
            packets: 1,
            drops: Drops {
                kernel: 3,
                ..Default::default()
            },
            ..Default::default()
        };
        write_coverage(&cap, &c).unwrap();
        assert_eq!(read_coverage(&cap).unwrap(), Some(c.clone()));
        c.size = 41;
        write_coverage(&cap, &c).unwrap();
        assert_eq!(read_coverage(&cap).unwrap(), None);
        c.version = COVERAGE_VERSION + 1;
        write_coverage(&cap, &c).unwrap();
        assert!(read_coverage(&cap).is_err());
    }
}
