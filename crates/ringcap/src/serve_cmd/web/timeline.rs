//! The page's timeline (`POST /api/timeline`): packets and bytes per time bucket of what a
//! search matches, with what the capture missed on the same axis: the stretches no file covers
//! (gaps) and the files during which packets were lost (their coverage records).
//!
//! The counts are the query's own: the index narrows the frames read as for `ringcap query`, and
//! each packet libpcap's filter accepts is counted in its bucket, so a bucket holds exactly the
//! packets `ringcap query` gives for its time.

use std::collections::BTreeMap;
use std::io;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{name_patterns, parse_body, plan_search, Search};
use crate::serve_cmd::QueryService;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
/// Bucket widths, each a multiple of the one before: counts kept at one width add up exactly
/// into any wider one. A bucket starts at a multiple of its width since the epoch (whole UTC
/// minutes, hours, days).
const WIDTHS: &[u64] = &[
    US,
    5 * US,
    10 * US,
    50 * US,
    100 * US,
    500 * US,
    MS,
    5 * MS,
    10 * MS,
    50 * MS,
    100 * MS,
    500 * MS,
    S,
    5 * S,
    10 * S,
    30 * S,
    60 * S,
    300 * S,
    900 * S,
    1800 * S,
    3600 * S,
    3 * 3600 * S,
    6 * 3600 * S,
    12 * 3600 * S,
    86_400 * S,
    7 * 86_400 * S,
    28 * 86_400 * S,
    364 * 86_400 * S,
];
/// Bars of a timeline, at most (one more when the window does not start on a bucket's edge).
pub const MAX_BARS: u64 = 120;
/// Buckets kept while the window is not known yet (the first and last match make it).
const MAX_KEPT: u64 = 4096;
/// Files with losses listed one by one, at most (the total counts them all).
const MAX_LOST: usize = 1000;

/// The narrowest width that cuts `span` ns into at most [`MAX_BARS`] buckets.
fn width_for(span: u64) -> usize {
    WIDTHS
        .iter()
        .position(|&w| span.div_ceil(w) <= MAX_BARS)
        .unwrap_or(WIDTHS.len() - 1)
}

#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Count {
    packets: u64,
    bytes: u64,
}

/// Packets and bytes per bucket, at a width that widens as the matches spread (bounded memory).
#[derive(Debug)]
pub struct Histogram {
    /// Index in [`WIDTHS`] of the width counts are kept at.
    at: usize,
    counts: BTreeMap<u64, Count>,
    /// First and last time added.
    extent: Option<(u64, u64)>,
}

/// A timeline: `packets[i]` and `bytes[i]` fell in `[start + i × width, start + (i+1) × width)`.
#[derive(Debug, PartialEq, Eq)]
pub struct Bars {
    pub start: u64,
    pub width: u64,
    pub packets: Vec<u64>,
    pub bytes: Vec<u64>,
}

impl Histogram {
    /// For a window `span` ns long when it is known (counted at its bars' width at once), else at
    /// the finest width.
    pub fn new(span: Option<u64>) -> Histogram {
        Histogram {
            at: span.map_or(0, width_for),
            counts: BTreeMap::new(),
            extent: None,
        }
    }

    pub fn add(&mut self, ts_ns: u64, bytes: u64) {
        let w = WIDTHS[self.at];
        let c = self.counts.entry(ts_ns / w).or_default();
        c.packets += 1;
        c.bytes += bytes;
        let (lo, hi) = self
            .extent
            .map_or((ts_ns, ts_ns), |(lo, hi)| (lo.min(ts_ns), hi.max(ts_ns)));
        self.extent = Some((lo, hi));
        if hi / w - lo / w >= MAX_KEPT {
            let at = (self.at..WIDTHS.len())
                .find(|&i| hi / WIDTHS[i] - lo / WIDTHS[i] < MAX_KEPT)
                .unwrap_or(WIDTHS.len() - 1);
            self.widen(at);
        }
    }

    /// The first and last times added.
    pub fn extent(&self) -> Option<(u64, u64)> {
        self.extent
    }

    fn widen(&mut self, at: usize) {
        if at <= self.at {
            return;
        }
        let (old, new) = (WIDTHS[self.at], WIDTHS[at]);
        let mut wider: BTreeMap<u64, Count> = BTreeMap::new();
        for (k, c) in std::mem::take(&mut self.counts) {
            let e = wider.entry(k * old / new).or_default();
            e.packets += c.packets;
            e.bytes += c.bytes;
        }
        self.counts = wider;
        self.at = at;
    }

    /// The bars of the window `[lo, hi)` (which must hold every time added).
    pub fn bars(mut self, lo: u64, hi: u64) -> Bars {
        let hi = hi.max(lo + 1);
        self.widen(width_for(hi - lo).max(self.at));
        let w = WIDTHS[self.at];
        let (first, last) = (lo / w, (hi - 1) / w);
        let n = (last - first + 1) as usize;
        let (mut packets, mut bytes) = (vec![0; n], vec![0; n]);
        for (&k, c) in self.counts.range(first..=last) {
            packets[(k - first) as usize] = c.packets;
            bytes[(k - first) as usize] = c.bytes;
        }
        Bars {
            start: first * w,
            width: w,
            packets,
            bytes,
        }
    }
}

/// A file during which packets were lost, as its coverage record says.
#[derive(Serialize)]
struct Lost {
    file: String,
    from: String,
    to: String,
    kernel: u64,
    interface: u64,
    storage: u64,
}

/// What the capture covered of the window: from the local stores' coverage records.
#[derive(Serialize)]
struct CoverageView {
    files: usize,
    /// Files without a record: their gaps and losses are not known.
    unknown: usize,
    drops: store::Drops,
    gaps: Vec<[String; 2]>,
    lost: Vec<Lost>,
    /// More files lost packets than are listed.
    lost_cut: bool,
}

fn coverage_of(entries: &[fleet::FileEntry], lo: u64, hi: u64) -> CoverageView {
    let c = fleet::covered(entries, Some(lo), Some(hi));
    let mut lost: Vec<Lost> = entries
        .iter()
        .filter_map(|e| {
            let r = e.coverage.as_ref()?;
            let inside = r.closed_ns >= lo && r.opened_ns < hi;
            (inside && r.drops.total() > 0).then(|| Lost {
                file: e.name.clone(),
                from: r.opened_ns.to_string(),
                to: r.closed_ns.max(r.opened_ns).to_string(),
                kernel: r.drops.kernel,
                interface: r.drops.interface,
                storage: r.drops.storage,
            })
        })
        .collect();
    let lost_cut = lost.len() > MAX_LOST;
    lost.truncate(MAX_LOST);
    CoverageView {
        files: c.files,
        unknown: c.unknown,
        drops: c.drops,
        gaps: c
            .gaps
            .iter()
            .map(|&(a, b)| [a.to_string(), b.to_string()])
            .collect(),
        lost,
        lost_cut,
    }
}

/// The first and last coverage times of the files (their open and close), when recorded.
fn recorded_span(entries: &[fleet::FileEntry]) -> Option<(u64, u64)> {
    entries
        .iter()
        .filter_map(|e| e.coverage.as_ref())
        .map(|r| (r.opened_ns, r.closed_ns.max(r.opened_ns)))
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// `POST /api/timeline`: the bars of the search's window (times as decimal text: more digits than
/// a JSON number keeps), the matches counted, the coverage.
pub(super) fn timeline(
    s: &QueryService,
    request: &httpd::Request,
    conn: &mut httpd::Conn,
) -> io::Result<()> {
    let search: Search = match parse_body(request) {
        Ok(b) => b,
        Err(why) => return s.refuse_json(conn, 400, &why),
    };
    let text = search.text();
    if text.len() > crate::serve_cmd::MAX_QUERY {
        return s.refuse_json(
            conn,
            413,
            &format!(
                "the query is longer than {} bytes",
                crate::serve_cmd::MAX_QUERY
            ),
        );
    }
    let names = match name_patterns(&search.name) {
        Ok(n) => n,
        Err(p) => {
            let body = serde_json::json!({"error": p.error.clone(), "problem": p});
            return s.json(conn, 400, &body);
        }
    };
    let Some(running) = s.queries.try_take() else {
        return s.busy(conn);
    };
    let started = Instant::now();
    let deadline = s.timeout.map(|t| started + t);
    let Some((files, plan)) = plan_search(s, &search, &text, names, conn, deadline)? else {
        return Ok(());
    };
    let now = sys::now_ns();
    let (after, before) = plan.window();
    // A window open at its end (`15m ago`) ends now; open at both ends, it is what was matched
    // and recorded.
    let end = before.or(after.map(|_| now));
    let mut h = Histogram::new(after.zip(end).map(|(a, b)| b.saturating_sub(a)));
    let options = index::QueryOptions {
        deadline,
        priority: index::Priority::for_files(&files),
        ..s.options.clone()
    };
    let (mut matched, mut gone) = (0u64, false);
    let result = plan.run(&options, |hit| {
        h.add(hit.ts_ns, u64::from(hit.wire_len));
        matched += 1;
        // Nothing is sent before the end: a client that went away is seen by polling.
        if matched % 65_536 == 0 && conn.peer_closed(Duration::ZERO) {
            gone = true;
            return Ok(false);
        }
        Ok(true)
    });
    drop(running);
    if gone {
        s.log(
            conn.peer(),
            &format!(
                "{}: timeline stopped after {matched} packets: the client went away",
                crate::serve_cmd::shown(&text)
            ),
        );
        return Ok(());
    }
    // Each coverage record read once: for the window's ends and for what it covers.
    let entries = crate::serve_cmd::file_entries(&files);
    let recorded = recorded_span(&entries);
    let spans = [h.extent().map(|(a, b)| (a, b + 1)), recorded];
    let lo = after.or_else(|| spans.iter().flatten().map(|s| s.0).min());
    let hi = end.or_else(|| spans.iter().flatten().map(|s| s.1).max());
    let error = match &result {
        Ok(reports) => crate::serve_cmd::unread_files(reports),
        Err(e) => Some(e.to_string()),
    };
    let took = started.elapsed().as_secs_f64() * 1e3;
    s.log(
        conn.peer(),
        &format!(
            "{}: timeline of {matched} packets in {took:.1} ms",
            crate::serve_cmd::shown(&text)
        ),
    );
    let (Some(lo), Some(hi)) = (lo, hi) else {
        // Nothing matched and nothing recorded: no window to draw.
        return s.json(
            conn,
            200,
            &serde_json::json!({"query": text, "matched": 0, "packets": [], "bytes": [],
                                "ms": took, "error": error, "coverage": null}),
        );
    };
    let coverage = coverage_of(&entries, lo, hi);
    let bars = h.bars(lo, hi);
    s.json(
        conn,
        200,
        &serde_json::json!({
            "query": text,
            "window": [lo.to_string(), hi.to_string()],
            "start": bars.start.to_string(),
            "width": bars.width.to_string(),
            "packets": bars.packets,
            "bytes": bars.bytes,
            "matched": matched,
            "ms": took,
            "error": error,
            "coverage": coverage,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_divide_each_other() {
        for w in WIDTHS.windows(2) {
            assert_eq!(w[1] % w[0], 0, "{} does not divide {}", w[0], w[1]);
        }
    }

    #[test]
    fn a_known_window_is_cut_into_at_most_120_bars_of_a_round_width() {
        assert_eq!(WIDTHS[width_for(3600 * S)], 30 * S);
        assert_eq!(WIDTHS[width_for(86_400 * S)], 900 * S);
        assert_eq!(WIDTHS[width_for(15 * 60 * S)], 10 * S);
        assert_eq!(WIDTHS[width_for(1)], US);
    }

    #[test]
    fn counts_kept_fine_add_up_into_the_bars() {
        // Times over 2 hours, added out of order; counted at 1 µs first, then widened.
        let t0 = 1_700_000_000 * S;
        let times: Vec<u64> = (0..5000u64)
            .map(|i| t0 + (i * 7919 % 5000) * 1_440 * MS)
            .collect();
        let mut h = Histogram::new(None);
        for &t in &times {
            h.add(t, 100);
        }
        let (lo, hi) = h.extent().unwrap();
        let bars = h.bars(lo, hi + 1);
        assert_eq!(bars.width, 60 * S, "2 hours: 60 s bars");
        assert!(bars.packets.len() as u64 <= MAX_BARS + 1);
        // Each bar is the times that fall in it, counted here from the list.
        for (i, &n) in bars.packets.iter().enumerate() {
            let from = bars.start + i as u64 * bars.width;
            let want = times
                .iter()
                .filter(|&&t| t >= from && t < from + bars.width)
                .count() as u64;
            assert_eq!(n, want, "bar {i}");
            assert_eq!(bars.bytes[i], want * 100);
        }
        assert_eq!(bars.packets.iter().sum::<u64>(), 5000);
    }

    #[test]
    fn bars_cover_the_window_with_empty_buckets() {
        let mut h = Histogram::new(Some(120 * S));
        h.add(1_000 * S + 7 * S, 60);
        let bars = h.bars(1_000 * S, 1_120 * S);
        assert_eq!(bars.width, S);
        assert_eq!(bars.start, 1_000 * S);
        assert_eq!(bars.packets.len(), 120);
        assert_eq!(bars.packets[7], 1);
        assert_eq!(bars.bytes[7], 60);
        assert_eq!(bars.packets.iter().sum::<u64>(), 1);
    }
}
