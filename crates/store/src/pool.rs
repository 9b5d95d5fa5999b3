//! Page-aligned output buffers (O_DIRECT needs aligned addresses, sizes and file offsets).

use std::ptr::NonNull;

use crate::coverage::Mark;

/// Alignment of every buffer: a page, which covers 512-byte and 4 KiB logical blocks.
pub const ALIGN: usize = 4096;

/// One page-aligned output buffer plus what the writer needs to know about its records.
pub struct OutBuf {
    ptr: NonNull<u8>,
    cap: usize,
    /// Bytes filled.
    pub len: usize,
    /// Stream offset of byte 0 of this buffer in the output.
    pub stream_offset: u64,
    /// Offset of the first record boundary in this buffer (where the record spilling in from the
    /// previous buffer ends; 0 if none; after the file header in the first buffer).
    pub first_boundary: usize,
    /// Offset of the last record boundary (end of the last record that ends in this buffer).
    pub last_boundary: usize,
    /// Packet records that end in this buffer (including one spilling in).
    pub packets: u64,
    /// The record ending at `first_boundary` is a packet that began in the previous buffer.
    pub spill_in_packet: bool,
    /// Soft capacity (≤ the allocation): where the current file must end (`-C`).
    pub limit: usize,
    /// Position in the stream, so the writer can restore the order after parallel compression.
    pub seq: u64,
    /// This buffer begins a new file (the file header is at its start); the value is the file's
    /// start time in ns since the epoch (named after it).
    pub new_file: Option<u64>,
    /// The file ends after this buffer (rotation): the writer closes and renames it.
    pub ends_file: bool,
    /// The capture's drop counters where the file this buffer begins starts, and where the file it
    /// ends stops (read at the rotation: see `crate::coverage`). Boxed: set once per file, and
    /// the buffer travels between threads at every hand-over.
    pub(crate) start_mark: Option<Box<Mark>>,
    pub(crate) end_mark: Option<Box<Mark>>,
    /// First and last packet times of the buffer as the file records them (when `packets > 0`),
    /// set when it is handed on: a file's coverage takes them without a look at every packet.
    pub first_ts: u64,
    pub last_ts: u64,
    /// Compressed form of the filled bytes (standard frames, one per `cuts` entry), allocated once
    /// per buffer.
    pub out: Vec<u8>,
    /// End of each compressed frame in the filled bytes (at record boundaries; the last is `len`).
    pub cuts: Vec<usize>,
    /// End of each compressed frame in `out` (as many as `cuts`).
    pub frame_ends: Vec<usize>,
    /// Bytes of `out` in use.
    pub out_len: usize,
    /// Ladder step used for `out` (see [`crate::compress::Level`]).
    pub level: u8,
}

// SAFETY: the buffer owns its allocation exclusively; it is moved between threads, never shared.
unsafe impl Send for OutBuf {}

impl OutBuf {
    /// Maps `cap` bytes (a multiple of [`ALIGN`]) and faults every page in now, so the capture
    /// thread never takes a page fault while it fills the buffer.
    ///
    /// An anonymous mapping, not the allocator: `alloc_zeroed` with page alignment zeroes the
    /// memory a second time in user space on top of the kernel's zeroing, and asks for 4 KiB
    /// pages. Here the kernel zeroes once, with 2 MiB pages where it has them (`MADV_HUGEPAGE`;
    /// mappings of whole 2 MiB multiples are aligned for it): one fault per 2 MiB instead of 512.
    /// Measured at start-up (idle capture, 4 × 4 MiB buffers): see BENCHMARKS.md, "Where
    /// ringcap's capture CPU goes".
    pub fn new(cap: usize) -> OutBuf {
        assert!(cap > 0 && cap.is_multiple_of(ALIGN));
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cap,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            let layout = std::alloc::Layout::from_size_align(cap, ALIGN).expect("buffer layout");
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: advice on our own mapping only; failure leaves 4 KiB pages, which still work.
        let populated = unsafe {
            libc::madvise(raw, cap, libc::MADV_HUGEPAGE);
            libc::madvise(raw, cap, libc::MADV_POPULATE_WRITE) == 0
        };
        if !populated {
            // Kernels before 5.14 have no MADV_POPULATE_WRITE: touch one byte per page.
            for off in (0..cap).step_by(ALIGN) {
                // SAFETY: off < cap, inside the mapping.
                unsafe { (raw as *mut u8).add(off).write_volatile(0) };
            }
        }
        let ptr = NonNull::new(raw as *mut u8).expect("mmap returned a non-null address");
        OutBuf {
            ptr,
            cap,
            len: 0,
            stream_offset: 0,
            first_boundary: 0,
            last_boundary: 0,
            packets: 0,
            spill_in_packet: false,
            limit: cap,
            seq: 0,
            new_file: None,
            ends_file: false,
            start_mark: None,
            end_mark: None,
            first_ts: 0,
            last_ts: 0,
            out: Vec::new(),
            cuts: Vec::new(),
            frame_ends: Vec::new(),
            out_len: 0,
            level: 0,
        }
    }

    /// Size of the allocation.
    #[inline(always)]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Free bytes left.
    #[inline(always)]
    pub fn remaining(&self) -> usize {
        self.limit - self.len
    }

    /// The whole buffer, filled or not.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for cap bytes and uniquely owned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }

    /// The first `len` bytes, whatever `len` says is filled (the writer's staging buffer).
    pub(crate) fn filled_to(&self, len: usize) -> &[u8] {
        assert!(len <= self.cap);
        // SAFETY: ptr is valid for cap bytes, all initialised (zero-filled by the kernel).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }

    /// The filled part.
    #[inline(always)]
    pub fn filled(&self) -> &[u8] {
        // SAFETY: ptr is valid for cap >= len bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The filled part and the compressed-output vector, borrowed together.
    pub fn filled_and_out(&mut self) -> (&[u8], &mut Vec<u8>) {
        // SAFETY: ptr is valid for cap >= len bytes; `out` is a separate allocation.
        let filled = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) };
        (filled, &mut self.out)
    }

    /// The bytes to write: the compressed frame when there is one, else the filled part.
    pub fn payload(&self) -> &[u8] {
        if self.out_len > 0 {
            &self.out[..self.out_len]
        } else {
            self.filled()
        }
    }

    /// Empties the buffer and places it at `stream_offset`.
    pub fn reset(&mut self, stream_offset: u64) {
        self.len = 0;
        self.stream_offset = stream_offset;
        self.first_boundary = 0;
        self.last_boundary = 0;
        self.packets = 0;
        self.spill_in_packet = false;
        self.limit = self.cap;
        self.new_file = None;
        self.ends_file = false;
        self.start_mark = None;
        self.end_mark = None;
        self.first_ts = 0;
        self.last_ts = 0;
        self.out_len = 0;
        self.cuts.clear();
        self.frame_ends.clear();
    }
}

impl Drop for OutBuf {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length; no borrow of it outlives the buffer.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.cap) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_page_aligned() {
        let mut b = OutBuf::new(2 * ALIGN);
        assert_eq!(b.as_mut_slice().as_ptr() as usize % ALIGN, 0);
        assert_eq!(b.remaining(), 2 * ALIGN);
    }
}
