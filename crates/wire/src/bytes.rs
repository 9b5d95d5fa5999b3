//! Big-endian field access shared by the views (private).

/// A byte range inside a header.
pub(crate) type Field = core::ops::Range<usize>;

/// Reads a big-endian u16 at `at`. Panics if out of bounds (views check lengths first).
#[inline(always)]
pub(crate) fn be16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}

/// Reads a big-endian u32 at `at`.
#[inline(always)]
pub(crate) fn be32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

/// Writes a big-endian u16 at `at`.
#[inline(always)]
pub(crate) fn put16(data: &mut [u8], at: usize, v: u16) {
    data[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes a big-endian u32 at `at`.
#[inline(always)]
pub(crate) fn put32(data: &mut [u8], at: usize, v: u32) {
    data[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Reads a big-endian u16 if both bytes are present (for the lenient parser).
#[inline(always)]
pub(crate) fn get16(data: &[u8], at: usize) -> Option<u16> {
    data.get(at..at + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
}

/// Copies `N` bytes at `at` into an array.
#[inline(always)]
pub(crate) fn array<const N: usize>(data: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&data[at..at + N]);
    out
}
