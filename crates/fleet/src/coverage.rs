//! What a source covers of a query's window: the files it holds there, the packets it lost while
//! writing them (their coverage records), and the stretches no file covers (the capture was not
//! running, or the files are gone). So an analyst can tell "nothing happened" from "nothing was
//! captured".

use store::{Coverage, Drops};

/// A capture file a source holds, as `GET /files` of `ringcap serve` lists it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileEntry {
    /// The file's name (the archive's object has the same).
    pub name: String,
    pub size: u64,
    /// Its coverage record, when the capture wrote one and it is this file's.
    pub coverage: Option<Coverage>,
}

/// The answer of `GET /files`.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct FileList {
    pub files: Vec<FileEntry>,
}

/// A source's coverage of a window.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Covered {
    /// Files whose records overlap the window.
    pub files: usize,
    /// Packets lost while they were written.
    pub drops: Drops,
    /// Stretches of the window (ns, half-open) no file with a record covers.
    pub gaps: Vec<(u64, u64)>,
    /// Files without a record (written by another tool or an older ringcap): what they cover is
    /// not known, and gaps are only said when every file has one.
    pub unknown: usize,
}

impl Covered {
    /// Whether the window is covered whole without a loss.
    pub fn complete(&self) -> bool {
        self.drops.total() == 0 && self.gaps.is_empty() && self.unknown == 0
    }
}

/// Slack between one file's close and the next one's open that is not a gap (the rotation
/// itself takes a moment).
const ROTATION_SLACK_NS: u64 = 1_000_000_000;

/// What `files` cover of [after, before): a window end left open is the files' own edge.
pub fn covered(files: &[FileEntry], after: Option<u64>, before: Option<u64>) -> Covered {
    let mut c = Covered::default();
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for f in files {
        let Some(r) = &f.coverage else {
            c.unknown += 1;
            continue;
        };
        let (open, close) = (r.opened_ns, r.closed_ns.max(r.opened_ns));
        if after.is_some_and(|a| close < a) || before.is_some_and(|b| open >= b) {
            continue;
        }
        c.files += 1;
        c.drops.kernel += r.drops.kernel;
        c.drops.interface += r.drops.interface;
        c.drops.storage += r.drops.storage;
        spans.push((open, close));
    }
    if c.unknown > 0 {
        return c;
    }
    if spans.is_empty() {
        // No file covers any of a window whose ends are known: all of it is a gap.
        if let (Some(lo), Some(hi)) = (after, before) {
            if hi > lo.saturating_add(ROTATION_SLACK_NS) {
                c.gaps.push((lo, hi));
            }
        }
        return c;
    }
    spans.sort();
    let lo = after.unwrap_or(spans[0].0);
    let hi = before.unwrap_or_else(|| spans.iter().map(|s| s.1).max().unwrap_or(lo));
    let mut at = lo;
    for (open, close) in spans {
        if open > at.saturating_add(ROTATION_SLACK_NS) && at < hi {
            c.gaps.push((at, open.min(hi)));
        }
        at = at.max(close);
    }
    if hi > at.saturating_add(ROTATION_SLACK_NS) {
        c.gaps.push((at, hi));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(open_s: u64, close_s: u64, kernel: u64) -> FileEntry {
        FileEntry {
            name: format!("f{open_s}"),
            size: 1,
            coverage: Some(Coverage {
                version: 1,
                opened_ns: open_s * 1_000_000_000,
                closed_ns: close_s * 1_000_000_000,
                drops: Drops {
                    kernel,
                    ..Default::default()
                },
                ..Default::default()
            }),
        }
    }

    #[test]
    fn drops_are_summed_and_the_time_no_file_covers_is_a_gap() {
        let s = 1_000_000_000;
        let files = [
            file(100, 160, 0),
            file(160, 220, 5),
            file(300, 360, 0),
            file(400, 460, 1),
        ];
        // Window 150..350: the three files it touches, the gap 220..300.
        let c = covered(&files, Some(150 * s), Some(350 * s));
        assert_eq!(c.files, 3);
        assert_eq!(c.drops.kernel, 5);
        assert_eq!(c.gaps, vec![(220 * s, 300 * s)]);
        // A window that begins before the first file: that stretch is a gap too.
        let c = covered(&files, Some(50 * s), Some(200 * s));
        assert_eq!(c.gaps, vec![(50 * s, 100 * s)]);
        // A window no file reaches is a gap whole; open at one end, it has no known length.
        let c = covered(&files, Some(470 * s), Some(500 * s));
        assert_eq!((c.files, c.gaps.clone()), (0, vec![(470 * s, 500 * s)]));
        assert!(covered(&files, Some(470 * s), None).gaps.is_empty());
        // A file without a record: gaps cannot be told.
        let mut more = files.to_vec();
        more.push(FileEntry {
            name: "other".into(),
            size: 1,
            coverage: None,
        });
        let c = covered(&more, None, None);
        assert_eq!((c.unknown, c.gaps.len(), c.complete()), (1, 0, false));
    }
}
