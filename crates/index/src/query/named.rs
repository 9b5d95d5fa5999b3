//! `--name`: which flows of a file have a name that matches, from its flow table, and the test
//! that keeps every packet read to those flows.
//!
//! A file with a usable flow table (this version, written for the capture file as it is: the
//! footer's identity check) is answered from the table's name columns alone. Without one (no
//! table yet, an older version, a file being written, a damaged table) the names are read from
//! the file's packets first, by the indexer's own code ([`crate::names::Collector`]), so either
//! way a flow is named by the same rule. Then the index (or the scan) reads the file as for any
//! query, and a packet is returned only if its flow key ([`FlowKey::directed_of`], the key the
//! index files it under) is one of the flows chosen, and the filter accepts it.

use std::collections::HashSet;

use wire::LinkType;

use super::pace::Paced;
use super::{FileError, FileReport, Job, Target};
use crate::key::FlowKey;
use crate::names::{Collector, NamePattern};

/// The flows chosen in one file.
pub(crate) struct FlowSet {
    keys: HashSet<FlowKey, ahash::RandomState>,
    sorted: Vec<FlowKey>,
}

impl FlowSet {
    fn new(mut keys: Vec<FlowKey>) -> FlowSet {
        keys.sort_unstable();
        keys.dedup();
        FlowSet {
            keys: keys.iter().copied().collect(),
            sorted: keys,
        }
    }

    /// The flows, sorted.
    pub(crate) fn keys(&self) -> &[FlowKey] {
        &self.sorted
    }

    /// Whether the packet belongs to one of the flows.
    #[inline]
    pub(crate) fn contains(&self, data: &[u8], linktype: u32) -> bool {
        if self.keys.is_empty() {
            return false;
        }
        let Some(lt) = LinkType::from_pcap(linktype) else {
            return false;
        };
        self.keys.contains(&FlowKey::directed_of(data, lt).0)
    }
}

/// The flows of the file `t` whose names match the query's patterns.
pub(super) fn flows_named(t: &Target, job: &Job, r: &mut FileReport) -> Result<FlowSet, FileError> {
    let patterns = &job.query.names;
    let table = match t {
        Target::Path(path) => crate::flows::named_flows(path, patterns),
        // An archive's file: its table fetched whole (a few MB for a 256 MB file).
        Target::Ranges(f) => match &f.file.flows {
            Some(table) => {
                let name = f.file.name.display().to_string();
                let got =
                    crate::flows::named_flows_ranged(&*f.file.data, &name, &**table, patterns);
                if got.is_ok() {
                    r.index_bytes_read += table.len().unwrap_or(0);
                }
                got
            }
            None => Err(crate::flows::FlowTableError::Io(
                f.file.name.display().to_string(),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no flow table in the archive"),
            )),
        },
        Target::Feed(_) => {
            return Err(FileError::Names(format!(
                "{}: --name is answered by the sensor itself",
                t.label().display()
            )))
        }
    };
    match table {
        Ok(keys) => {
            r.named_flows = Some(keys.len() as u64);
            return Ok(FlowSet::new(keys));
        }
        Err(e) => log::debug!("{e}: reading the names from the packets"),
    }
    let keys = names_from_packets(t, job, patterns, r)?;
    r.named_flows = Some(keys.len() as u64);
    r.names_from_packets = true;
    Ok(FlowSet::new(keys))
}

/// Reads the whole file (as `tcpdump -r` reads it) and names its flows as the indexer does.
fn names_from_packets(
    t: &Target,
    job: &Job,
    patterns: &[NamePattern],
    r: &mut FileReport,
) -> Result<Vec<FlowKey>, FileError> {
    let path = t.label();
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let src = t.open().map_err(io)?;
    let len = src.len().map_err(io)?;
    r.bytes_read += len;
    let paced = Paced {
        inner: crate::ranges::stream_of(src, 0..len).map_err(io)?,
        pace: job.pace.clone(),
    };
    let mut reader = store::CaptureReader::strict_from_reader(Box::new(paced), path, 1 << 20)?;
    let mut c = Collector::default();
    let mut n = 0u64;
    while let Some(p) = reader.next_packet() {
        let Ok(p) = p else {
            // The scan that follows says what is missing.
            break;
        };
        n += 1;
        if n.is_multiple_of(super::worker::STOP_CHECK_PACKETS)
            && job.stop.load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(FileError::Stopped);
        }
        let Some(lt) = LinkType::from_pcap(p.linktype) else {
            continue;
        };
        if let (key, _, Some(l4)) = FlowKey::directed_l4(p.data, lt) {
            c.offer(p.data, l4, || key);
        }
    }
    Ok(c.into_flows()
        .into_iter()
        .filter(|(_, n)| n.matches(patterns))
        .map(|(k, _)| k)
        .collect())
}
