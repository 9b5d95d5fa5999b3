//! The store's file names: `<base>-<UTC start>-<seq>.<ext>`, their age order, the index next to
//! each file, and the listing of the complete files a capture finds at start.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::compress::CompressMode;
use crate::error::StoreError;
use crate::format::Format;
pub use units::time::utc_stamp;

/// File name extension for a format and compression: `.pcap`, `.pcapng.zst`...
pub fn extension(format: Format, compression: CompressMode) -> String {
    let f = match format {
        Format::Pcap { .. } => ".pcap",
        Format::PcapNg => ".pcapng",
    };
    format!("{f}{}", compression.extension())
}

/// The name of file `seq` of `base`, begun at `start_ns`.
pub(crate) fn file_name(base: &str, start_ns: u64, seq: u64, ext: &str) -> String {
    format!("{base}-{}-{seq:06}{ext}", utc_stamp(start_ns))
}

/// What a capture file's name says: (start stamp, sequence number).
pub(crate) type FileKey = (String, u64);

/// Age order of complete files: the sequence number first (a capture continues after the highest
/// one it finds, so it only grows), the stamp only between equal numbers. Stamps come from the
/// wall clock, which can step back: ordered by stamp first, a budget once deleted a newer file
/// and kept an older one.
pub(crate) type AgeKey = (u64, String);

pub(crate) fn age(k: &FileKey) -> AgeKey {
    (k.1, k.0.clone())
}

/// Where the packet index of a capture file lives: next to it, the name plus `.idx`.
pub fn index_path(capture: &Path) -> PathBuf {
    let mut name = capture.file_name().unwrap_or_default().to_os_string();
    name.push(".idx");
    capture.with_file_name(name)
}

/// Where the flow table of a capture file lives (written with its index): next to it, the name
/// plus `.flows.parquet`.
pub fn flows_path(capture: &Path) -> PathBuf {
    let mut name = capture.file_name().unwrap_or_default().to_os_string();
    name.push(".flows.parquet");
    capture.with_file_name(name)
}

/// Parses `<base>-<stamp>-<seq><ext>` for a known ringcap extension.
pub fn parse_name(base: &str, name: &str) -> Option<FileKey> {
    let rest = name.strip_prefix(base)?.strip_prefix('-')?;
    let (stamp, rest) = (rest.get(..15)?, rest.get(15..)?);
    let ok_stamp = stamp.bytes().enumerate().all(|(i, b)| {
        if i == 8 {
            b == b'T'
        } else {
            b.is_ascii_digit()
        }
    });
    let rest = rest.strip_prefix('-')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (seq, ext) = rest.split_at(digits);
    let known = [".pcap", ".pcapng"]
        .iter()
        .flat_map(|f| ["", ".zst", ".lz4"].map(move |c| format!("{f}{c}")))
        .any(|e| e == ext);
    if !(ok_stamp && digits > 0 && known) {
        return None;
    }
    Some((stamp.to_string(), seq.parse().ok()?))
}

/// A complete file of this capture's base.
pub(crate) struct DoneFile {
    pub key: AgeKey,
    pub path: PathBuf,
    /// Index of its directory in the plan.
    pub dir: usize,
    pub bytes: u64,
}

/// The complete files of `base` in `dirs`, oldest first, and the sequence number to continue with.
pub(crate) fn list_done(
    dirs: &[PathBuf],
    base: &str,
) -> Result<(BTreeMap<AgeKey, DoneFile>, u64), StoreError> {
    let mut done = BTreeMap::new();
    let mut seq = 0;
    for (i, d) in dirs.iter().enumerate() {
        let entries = fs::read_dir(d).map_err(|source| StoreError::Create {
            path: d.clone(),
            source,
        })?;
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(key) = name.to_str().and_then(|n| parse_name(base, n)) else {
                continue;
            };
            seq = seq.max(key.1 + 1);
            done.insert(
                age(&key),
                DoneFile {
                    key: age(&key),
                    path: e.path(),
                    dir: i,
                    bytes: e.metadata().map_or(0, |m| m.len()),
                },
            );
        }
    }
    Ok((done, seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_is_the_sequence_number_before_the_stamp() {
        // File 5 was opened after the wall clock stepped back a second: still the newer one.
        let four = age(&("20261124T100000".to_string(), 4));
        let five = age(&("20261124T095959".to_string(), 5));
        assert!(four < five);
    }

    #[test]
    fn names_parse_back_only_for_this_base() {
        let n = format!("cap-{}-000042.pcap.zst", utc_stamp(0));
        assert_eq!(parse_name("cap", &n), Some(("19700101T000000".into(), 42)));
        assert_eq!(parse_name("ca", &n), None);
        assert_eq!(parse_name("cap", "cap-19700101T000000-000001.txt"), None);
        assert_eq!(
            parse_name("cap", ".cap-19700101T000000-000001.pcap.partial"),
            None
        );
        assert_eq!(
            parse_name("cap", &file_name("cap", 0, 42, ".pcap.zst")),
            Some(("19700101T000000".into(), 42))
        );
    }
}
