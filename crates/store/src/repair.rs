//! Cutting a damaged capture file back to its last whole packet (after kill -9 or a crash).

use std::fs::OpenOptions;
use std::path::Path;

use crate::error::StoreError;
use crate::reader::{CaptureReader, Compression, InputFormat, Issue};

/// What [`repair_truncate`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairReport {
    /// Format of the file.
    pub format: InputFormat,
    /// Size before.
    pub original_len: u64,
    /// Size after (equal to `original_len` when nothing was wrong).
    pub new_len: u64,
    /// Whole packets kept.
    pub packets: u64,
    /// Packets found after the damage, which the cut removed (the file must be valid for every tool).
    pub packets_after_damage: u64,
    /// The first damage found, if any.
    pub first_damage: Option<Issue>,
}

impl RepairReport {
    /// Whether the file was changed.
    pub fn truncated(&self) -> bool {
        self.new_len < self.original_len
    }
}

/// Finds the last whole packet before the first damage of a plain pcap/pcapng file and cuts the
/// file right after it, so every tool reads it to the end.
pub fn repair_truncate(path: &Path) -> Result<RepairReport, StoreError> {
    let mut reader = CaptureReader::open(path)?;
    if reader.compression() != Compression::None {
        return Err(StoreError::format(
            path,
            "repairing compressed files is not supported yet: decompress it first (zstd -d / lz4 -d)",
        ));
    }
    while let Some(p) = reader.next_packet() {
        p?;
    }
    let read_err = |source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(read_err)?;
    let original_len = file.metadata().map_err(read_err)?.len();
    let new_len = reader.clean_end();
    if new_len < original_len {
        file.set_len(new_len)
            .and_then(|_| file.sync_all())
            .map_err(read_err)?;
    }
    Ok(RepairReport {
        format: reader.format(),
        original_len,
        new_len,
        packets: reader.clean_packets(),
        packets_after_damage: reader.packets() - reader.clean_packets(),
        first_damage: reader.issues().iter().find(|i| i.corrupt).cloned(),
    })
}
