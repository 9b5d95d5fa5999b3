//! How an index's body is cut into chunks and how each chunk's bytes are stored (version 5:
//! the flows' and `by_b`'s rows column by column).

use super::{Header, BY_B_LEN, CHUNK, FLOW_LEN};

/// How a chunk's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// As they are.
    Bytes,
    /// Whole rows of this many bytes, column by column (see [`pack_rows`]).
    Rows(usize),
}

/// One chunk: where its bytes lie in the body, and how they are stored.
#[derive(Clone, Copy, Debug)]
pub(super) struct ChunkSpec {
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) layout: Layout,
}

/// Where the body's sections begin: frames, addresses, flows, `by_b`, postings; `None` when the
/// header's sizes do not add up to `body_len` (a damaged header).
pub(super) fn sections(h: &Header, body_len: u64) -> Option<[usize; 5]> {
    let frames_at = u64::from(h.prelude_len).div_ceil(8) * 8;
    let addrs_at = frames_at.checked_add(h.frames_len)?;
    // Counts are u32s: these products fit; the sums are checked.
    let flows_at = addrs_at.checked_add(u64::from(h.addrs) * 16)?;
    let by_b_at = flows_at.checked_add(u64::from(h.flows) * FLOW_LEN as u64)?;
    let postings_at = by_b_at.checked_add(u64::from(h.flows) * BY_B_LEN as u64)?;
    (postings_at.checked_add(h.postings_len)? == body_len).then_some([
        frames_at as usize,
        addrs_at as usize,
        flows_at as usize,
        by_b_at as usize,
        postings_at as usize,
    ])
}

/// The chunks of a body: pieces of up to [`CHUNK`] bytes, except that the flows and `by_b`
/// sections are cut at whole rows (so each chunk can store its rows column by column). Every
/// chunk starts where the one before ends; none is empty.
pub(super) fn chunk_plan(
    body_len: usize,
    [_, _, flows_at, by_b_at, postings_at]: [usize; 5],
) -> Vec<ChunkSpec> {
    let mut plan = Vec::with_capacity(body_len / (CHUNK - FLOW_LEN) + 4);
    let mut cut = |from: usize, to: usize, layout: Layout| {
        let step = match layout {
            Layout::Bytes => CHUNK,
            Layout::Rows(w) => rows_per_chunk(w) * w,
        };
        let mut at = from;
        while at < to {
            let len = step.min(to - at);
            plan.push(ChunkSpec {
                start: at,
                len,
                layout,
            });
            at += len;
        }
    };
    cut(0, flows_at, Layout::Bytes);
    cut(flows_at, by_b_at, Layout::Rows(FLOW_LEN));
    cut(by_b_at, postings_at, Layout::Rows(BY_B_LEN));
    cut(postings_at, body_len, Layout::Bytes);
    plan
}

/// Rows of `w` bytes in a chunk: as many as fit in [`CHUNK`], 64 fewer (one cache line per
/// column) when that is a power of two. [`pack_rows`] writes a row's bytes that many bytes apart,
/// and L1 sets repeat every 4 KiB: 2048 apart (32-byte flow rows), a row's 32 lines share 2 sets
/// of 8 ways and the transposition cost ~10 ns per packet more than with 28-byte rows; 2047
/// apart, 3-4 sets (still ~8 ns); 1984 = 31 × 64 apart, a set each (~0; BENCHMARKS.md,
/// "Decapsulation in the indexer"). So: 1984 flow rows, 8128 `by_b` rows.
pub(super) fn rows_per_chunk(w: usize) -> usize {
    let n = CHUNK / w;
    if n.is_power_of_two() {
        n - 64
    } else {
        n
    }
}

/// Where a flow row keeps its postings offset (8 bytes, before the tunnel id).
const ROW_POSTINGS_AT: usize = 20;

/// Rows of `width` bytes as a chunk stores them: byte 0 of every row, then byte 1 of every row,
/// and so on; in flow rows, each postings offset less the row before's. Rows one after another
/// mix ids, ports, counts and offsets and zstd found little to share (450 kB for 100 k flows);
/// column by column, sorted ids and the zero high bytes of counts and offset differences run
/// together (60 kB; `by_b` 100 kB → 2 kB on the benchmark's traffic).
pub(super) fn pack_rows(rows: &[u8], width: usize) -> Vec<u8> {
    let n = rows.len() / width;
    let mut out = vec![0u8; n * width];
    let mut prev = 0u64;
    for (i, row) in rows.chunks_exact(width).enumerate() {
        let mut row: [u8; FLOW_LEN] = {
            let mut r = [0u8; FLOW_LEN];
            r[..width].copy_from_slice(row);
            r
        };
        if width == FLOW_LEN {
            let at = ROW_POSTINGS_AT;
            let off = u64::from_le_bytes(row[at..at + 8].try_into().unwrap());
            row[at..at + 8].copy_from_slice(&off.wrapping_sub(prev).to_le_bytes());
            prev = off;
        }
        for (j, &b) in row[..width].iter().enumerate() {
            out[j * n + i] = b;
        }
    }
    out
}

/// The rows [`pack_rows`] stored, as they were.
pub(super) fn unpack_rows(packed: &[u8], width: usize) -> Vec<u8> {
    let n = packed.len() / width;
    let mut out = vec![0u8; n * width];
    for (j, col) in packed.chunks_exact(n.max(1)).take(width).enumerate() {
        for (i, &b) in col.iter().enumerate() {
            out[i * width + j] = b;
        }
    }
    if width == FLOW_LEN {
        let mut prev = 0u64;
        for row in out.chunks_exact_mut(width) {
            let at = ROW_POSTINGS_AT;
            let off = prev.wrapping_add(u64::from_le_bytes(row[at..at + 8].try_into().unwrap()));
            row[at..at + 8].copy_from_slice(&off.to_le_bytes());
            prev = off;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_stored_by_column_come_back_as_they_were() {
        // Rows whose postings offsets grow, jump back (a damaged index must not panic) and wrap.
        let mut flows = Vec::new();
        for (i, off) in [0u64, 7, 7, 300, 5, u64::MAX, 2].into_iter().enumerate() {
            let mut row = [0u8; FLOW_LEN];
            row[0] = i as u8;
            row[13] = 0xab;
            row[ROW_POSTINGS_AT..ROW_POSTINGS_AT + 8].copy_from_slice(&off.to_le_bytes());
            row[FLOW_LEN - 1] = 0xcd;
            flows.extend_from_slice(&row);
        }
        let packed = pack_rows(&flows, FLOW_LEN);
        // Column by column: byte 0 of each row first.
        assert_eq!(&packed[..7], &[0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(unpack_rows(&packed, FLOW_LEN), flows);
        let by_b: Vec<u8> = (0..80u8).collect();
        assert_eq!(unpack_rows(&pack_rows(&by_b, BY_B_LEN), BY_B_LEN), by_b);
        assert!(unpack_rows(&[], FLOW_LEN).is_empty());
    }

    #[test]
    fn chunks_cut_row_sections_at_whole_rows() {
        let flows = 5000;
        let at = [
            8,
            100,
            70_000,
            70_000 + flows * FLOW_LEN,
            70_000 + flows * (FLOW_LEN + BY_B_LEN),
        ];
        let body_len = at[4] + 150_000;
        let plan = chunk_plan(body_len, at);
        let mut next = 0;
        for c in &plan {
            assert_eq!(c.start, next, "chunks follow each other");
            assert!(c.len > 0 && c.len <= CHUNK);
            if let Layout::Rows(w) = c.layout {
                assert_eq!(c.len % w, 0);
                assert!(c.start >= at[2] && c.start + c.len <= at[4]);
            }
            next += c.len;
        }
        assert_eq!(next, body_len);
        let rows = |w| plan.iter().filter(|c| c.layout == Layout::Rows(w)).count();
        assert_eq!(rows(FLOW_LEN), flows.div_ceil(rows_per_chunk(FLOW_LEN)));
        assert_eq!(rows(BY_B_LEN), flows.div_ceil(rows_per_chunk(BY_B_LEN)));
        // A row's bytes, stored that many apart, fall in different cache sets.
        assert_eq!(rows_per_chunk(32), 1984);
        assert_eq!(rows_per_chunk(8), 8128);
        assert_eq!(rows_per_chunk(28), 2340);
    }
}
