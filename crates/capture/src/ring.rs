//! The zero-copy source: an AF_PACKET TPACKET_V3 ring mapped into our address space.
//!
//! The kernel fills fixed-size blocks with packets and hands a whole block over by flipping its status
//! word to TP_STATUS_USER; we read the packets in place and flip it back when done. While blocks are
//! ready there are no system calls at all; poll() is used only when we have caught up with the kernel
//! (seed 003's requirements: no per-packet copy, allocation or system call).
//!
//! Timestamps are in nanoseconds (tp_sec + tp_nsec): the kernel's software receive stamps, unless `-j`
//! selected the NIC's (PACKET_TIMESTAMP, see `tstamp`). Each packet's tp_status says which one it got;
//! the counters keep the tally.

use std::cell::Cell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::batch::Batch;
use crate::counters::{ts_slot, BatchTally, Counters};
use crate::error::CaptureError;
use crate::packet::{clip_len, Packet};
use crate::sys;
use wire::Vlan;

/// Ring geometry and timing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes per block: a power of two, at least one page. The kernel retires a block when it is full
    /// or when `block_timeout` expires; we return it after reading. 256 KiB, as libpcap: ~2000
    /// minimum-size packets. Larger blocks were cheaper per packet only while each block cost a
    /// wake-up (naps now read several per wake-up, see [`RingSource::next_block`]), and on a VM the
    /// kernel zeroes 1 MiB blocks slowly at start-up (0.05-0.15 s for 64 MiB; BENCHMARKS.md, issue 10).
    pub block_size: usize,
    /// Total ring size in bytes (tcpdump's `-B`, which is in KiB). Blocks = total / block size, at least 2;
    /// when the total is smaller than two blocks the block size is halved until two fit.
    pub buffer_bytes: usize,
    /// How long the kernel keeps a partly filled block before handing it over (retire_blk_tov).
    /// 20 ms: under load blocks fill long before (256 KiB takes ~1.5 ms at 1.5 Mpps), so it only matters at
    /// low rates, where it bounds the delay of live output to something a human does not notice and
    /// costs at most 50 wake-ups a second. Much shorter would hand over nearly empty blocks, each of
    /// which occupies a whole block of ring space until read.
    pub block_timeout: Duration,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            block_size: 256 << 10,
            buffer_bytes: 64 << 20,
            block_timeout: Duration::from_millis(20),
        }
    }
}

/// Blocks a ring has at least, when its size allows (see [`RingConfig::geometry`]).
const MIN_BLOCKS: usize = 8;
/// V3 frame size: only sets tp_frame_nr (the kernel bounds a V3 frame by the block, not by this).
const FRAME_SIZE: usize = 2048;
/// struct tpacket_block_desc: version, offset_to_priv, then tpacket_hdr_v1 (40 bytes).
const DESC_LEN: usize = 48;
/// struct tpacket3_hdr.
const HDR_LEN: usize = 48;
const STATUS_OFFSET: usize = 8;

impl RingConfig {
    /// Validated (block_size, block_count).
    pub fn geometry(&self) -> Result<(usize, usize), CaptureError> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let mut block = self.block_size;
        if !block.is_power_of_two() || block < page || block > (1 << 30) {
            return Err(CaptureError::Config(format!(
                "ring block size {block} must be a power of two between {page} and 1 GiB"
            )));
        }
        // A small ring gets smaller blocks: with two, one late hand-back (a throttled or
        // descheduled reader) fills the ring; eight leave the kernel room while one is read.
        while block > page && self.buffer_bytes < MIN_BLOCKS * block {
            block /= 2;
        }
        let count = self.buffer_bytes / block;
        if count < 2 {
            return Err(CaptureError::Config(format!(
                "buffer of {} KiB is too small: give -B at least {} KiB",
                self.buffer_bytes / 1024,
                2 * page / 1024
            )));
        }
        if count > u32::MAX as usize / (block / FRAME_SIZE).max(1) {
            return Err(CaptureError::Config(format!(
                "buffer of {} KiB needs too many blocks: reduce -B",
                self.buffer_bytes / 1024
            )));
        }
        Ok((block, count))
    }
}

/// A mapped TPACKET_V3 receive ring on a packet socket.
pub struct RingSource {
    fd: OwnedFd,
    /// The mapped blocks (unmapped on drop, after Drop reads the final counters).
    map: ::sys::RingMap,
    block_size: usize,
    block_count: usize,
    next: usize,
    snaplen: u32,
    counters: Arc<Counters>,
    /// How long to sleep, instead of polling, once we have caught up (see [`nap_after`]); 0: poll.
    nap: Duration,
}

/// Longest nap between batches of blocks: bounds the delay of output, and the share of the ring a
/// sudden jump in rate can fill while we sleep.
const NAP_MAX: Duration = Duration::from_millis(20);
/// A nap lets at most this share of the ring's blocks fill (1/32: with 256 blocks, 8).
const NAP_RING_SHARE: usize = 32;

/// The nap after reading a block the kernel closed because it was full, whose packets arrived over
/// `fill_ns`: long enough for several blocks to fill at that rate, so one wake-up reads them all.
/// poll() wakes us at every block the kernel closes, and on this VM a wake-up cost ~15 µs of the
/// capture thread's CPU: with 256 KiB blocks at 0.6 Mpps that was a third of what it spent per packet
/// (BENCHMARKS.md, issue 10). Zero (poll as before) when the ring is too small for several blocks to
/// be a small share of it, or when the nap would not cover two blocks.
fn nap_after(fill_ns: u64, block_count: usize) -> Duration {
    let k = (block_count / NAP_RING_SHARE) as u64;
    let nap = Duration::from_nanos(fill_ns.saturating_mul(k)).min(NAP_MAX);
    if k < 2 || fill_ns == 0 || nap.as_nanos() < 2 * u128::from(fill_ns) {
        Duration::ZERO
    } else {
        nap
    }
}

impl RingSource {
    /// Ask for a TPACKET_V3 ring on `fd` (before bind) and map it.
    pub(crate) fn create(
        fd: OwnedFd,
        cfg: &RingConfig,
        snaplen: u32,
    ) -> Result<RingSource, CaptureError> {
        let (block_size, block_count) = cfg.geometry()?;
        let raw = fd.as_raw_fd();
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        sys::set_opt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &version,
            "setsockopt(PACKET_VERSION, TPACKET_V3)",
        )?;
        let tov_ms = cfg.block_timeout.as_millis().clamp(1, u32::MAX as u128) as u32;
        let req = libc::tpacket_req3 {
            tp_block_size: block_size as u32,
            tp_block_nr: block_count as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: ((block_size / FRAME_SIZE) * block_count) as u32,
            tp_retire_blk_tov: tov_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        let map_len = block_size * block_count;
        if let Err(e) = sys::set_opt_raw(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req) {
            return Err(match e.raw_os_error() {
                Some(libc::ENOMEM) | Some(libc::ENOBUFS) => CaptureError::RingAlloc {
                    bytes: map_len as u64,
                    source: e,
                },
                _ => CaptureError::from_io("setsockopt(PACKET_RX_RING)", e),
            });
        }
        let map = ::sys::RingMap::new(raw, map_len).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOMEM) {
                CaptureError::RingAlloc {
                    bytes: map_len as u64,
                    source: e,
                }
            } else {
                CaptureError::from_io("mmap(packet ring)", e)
            }
        })?;
        let counters = Arc::new(Counters::new(raw));
        Ok(RingSource {
            fd,
            map,
            block_size,
            block_count,
            next: 0,
            snaplen,
            counters,
            nap: Duration::ZERO,
        })
    }

    /// The socket (for poll, filters, fanout).
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Block size and count actually used.
    pub fn geometry(&self) -> (usize, usize) {
        (self.block_size, self.block_count)
    }

    /// Live counters of this ring.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    fn status_word(&self, block: usize) -> &AtomicU32 {
        // SAFETY: block < block_count, so the word lies inside the mapping; it is 4-aligned (blocks are
        // page-aligned, offset 8); the kernel and we only access it atomically.
        unsafe {
            &*(self
                .map
                .as_ptr()
                .add(block * self.block_size + STATUS_OFFSET) as *const AtomicU32)
        }
    }

    /// The next block the kernel has handed over, waiting up to `timeout` in poll() if there is none yet.
    /// `Ok(None)`: nothing arrived. The block goes back to the kernel when the guard is dropped. When
    /// the last block was closed full (busy traffic), we first nap while a few more fill (see
    /// [`nap_after`]), so that one wake-up reads several blocks.
    pub fn next_block(&mut self, timeout: Duration) -> Result<Option<Block<'_>>, CaptureError> {
        let nap = std::mem::take(&mut self.nap);
        if !self.ready(self.next) && !nap.is_zero() && nap <= timeout {
            // Caught up with a busy kernel: let a few blocks fill, then read them in one go.
            std::thread::sleep(nap);
        }
        if !self.ready(self.next) {
            self.counters.add_poll();
            let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            if !sys::poll_readable(&self.fd, ms)? || !self.ready(self.next) {
                return Ok(None);
            }
        }
        let base = self.next * self.block_size;
        // SAFETY: the block lies inside the mapping, and the kernel has given it to us (status USER,
        // read with Acquire so its contents are visible). It does not write it until we hand it back,
        // which happens only in Block::drop, after every borrow of `body` has ended (they borrow the Block).
        let (desc, body) = unsafe {
            let block = self.map.as_ptr().add(base);
            let desc = std::slice::from_raw_parts(block as *const u8, DESC_LEN);
            let body = std::slice::from_raw_parts(block.add(DESC_LEN), self.block_size - DESC_LEN);
            (desc, body)
        };
        let rd = |o: usize| u32::from_ne_bytes([desc[o], desc[o + 1], desc[o + 2], desc[o + 3]]);
        let block_status = rd(8);
        let num_pkts = rd(12);
        let first = rd(16);
        let seq = rd(24) as u64 | (rd(28) as u64) << 32;
        if block_status & libc::TP_STATUS_BLK_TMO == 0 && num_pkts > 1 {
            // Closed full: ts_first_pkt and ts_last_pkt (sec, nsec) say how fast it filled.
            let ts = |o: usize| u64::from(rd(o)) * 1_000_000_000 + u64::from(rd(o + 4));
            self.nap = nap_after(ts(40).saturating_sub(ts(32)), self.block_count);
        }
        let status = self.status_word(self.next) as *const AtomicU32;
        let count = self.block_count;
        Ok(Some(Block {
            // SAFETY: points into the mapping, which outlives the guard (it borrows self mutably).
            status: unsafe { &*status },
            body,
            block_status,
            num_pkts,
            first,
            seq,
            snaplen: self.snaplen,
            next: &mut self.next,
            count,
            counters: &self.counters,
            tally: Cell::new(None),
        }))
    }

    fn ready(&self, block: usize) -> bool {
        self.status_word(block).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// The next block as a [`Batch`], waiting up to `timeout`; `Ok(None)` when nothing arrived.
    pub fn next_batch(&mut self, timeout: Duration) -> Result<Option<Batch<'_>>, CaptureError> {
        Ok(self.next_block(timeout)?.map(Batch::block))
    }
}

impl Drop for RingSource {
    fn drop(&mut self) {
        self.counters.close();
    }
}

/// A ring block on loan from the kernel; dropping it gives it back.
pub struct Block<'a> {
    status: &'a AtomicU32,
    body: &'a [u8],
    block_status: u32,
    num_pkts: u32,
    first: u32,
    seq: u64,
    snaplen: u32,
    next: &'a mut usize,
    count: usize,
    counters: &'a Counters,
    tally: Cell<Option<BatchTally>>,
}

impl Block<'_> {
    /// The packets in this block, borrowed from the ring. The first pass over them is what the counters see.
    pub fn packets(&self) -> Packets<'_> {
        let first_pass = self.tally.get().is_none();
        if first_pass {
            self.tally.set(Some(BatchTally::default()));
        }
        Packets {
            body: self.body,
            off: self.first as usize,
            left: self.num_pkts,
            snaplen: self.snaplen,
            tally: BatchTally::default(),
            sink: first_pass.then_some(&self.tally),
        }
    }

    /// Number of packets the kernel put in this block.
    pub fn len(&self) -> usize {
        self.num_pkts as usize
    }

    /// True when the block holds no packets.
    pub fn is_empty(&self) -> bool {
        self.num_pkts == 0
    }

    /// The kernel's sequence number of this block (increases by one per block).
    pub fn seq_num(&self) -> u64 {
        self.seq
    }

    /// The kernel closed this block because the block timeout expired.
    pub fn timed_out(&self) -> bool {
        self.block_status & libc::TP_STATUS_BLK_TMO != 0
    }

    /// Packets were dropped while this block was being filled.
    pub fn losing(&self) -> bool {
        self.block_status & libc::TP_STATUS_LOSING != 0
    }
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        let mut t = self.tally.get().unwrap_or(BatchTally {
            packets: self.num_pkts as u64,
            ..BatchTally::default()
        });
        t.timed_out = self.timed_out();
        t.losing = self.losing();
        self.counters.add_batch(&t);
        // Release: our reads of the block happen before the kernel may refill it.
        self.status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        *self.next = (*self.next + 1) % self.count;
    }
}

/// Iterator over the packets of one block. Every header is checked against the block bounds, so a
/// corrupt block ends the iteration (its unread packets counted in `corrupt`) instead of reading outside
/// the ring.
pub struct Packets<'a> {
    body: &'a [u8], // the block after its 48-byte descriptor
    off: usize,     // offset of the next packet header from the block start
    left: u32,
    snaplen: u32,
    tally: BatchTally,
    sink: Option<&'a Cell<Option<BatchTally>>>,
}

impl Packets<'_> {
    #[cold]
    fn corrupt<T>(&mut self) -> Option<T> {
        self.skip_rest();
        None
    }

    /// The packets the block still claims cannot be read: they are lost, counted by their own stage.
    fn skip_rest(&mut self) {
        self.tally.corrupt += u64::from(self.left);
        self.left = 0;
    }
}

#[inline]
fn rd32(h: &[u8; HDR_LEN], o: usize) -> u32 {
    u32::from_ne_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]])
}

#[inline]
fn rd16(h: &[u8; HDR_LEN], o: usize) -> u16 {
    u16::from_ne_bytes([h[o], h[o + 1]])
}

impl<'a> Iterator for Packets<'a> {
    type Item = Packet<'a>;

    // Always: a sink's loop over a block (`BatchPackets::fold`) then reads the headers in place
    // instead of calling out and passing each packet through the stack.
    #[inline(always)]
    fn next(&mut self) -> Option<Packet<'a>> {
        if self.left == 0 {
            return None;
        }
        let body: &'a [u8] = self.body;
        let Some(rel) = self.off.checked_sub(DESC_LEN) else {
            return self.corrupt();
        };
        let Some(Ok(h)) = body.get(rel..rel + HDR_LEN).map(<&[u8; HDR_LEN]>::try_from) else {
            return self.corrupt();
        };
        // struct tpacket3_hdr field offsets.
        let next = rd32(h, 0) as usize;
        let (sec, nsec) = (rd32(h, 4) as u64, rd32(h, 8) as u64);
        let snap = rd32(h, 12) as usize;
        let len = rd32(h, 16);
        let status = rd32(h, 20);
        let mac = rd16(h, 24) as usize;
        let (tci, tpid) = (rd32(h, 32), rd16(h, 36));
        if mac < HDR_LEN {
            return self.corrupt();
        }
        let start = rel + mac;
        let Some(frame) = body.get(start..start.saturating_add(snap)) else {
            return self.corrupt();
        };
        self.left -= 1;
        if self.left > 0 {
            // The last packet's tp_next_offset is 0; every other one must move past its own header.
            if next < HDR_LEN {
                self.skip_rest();
            }
            self.off += next;
        }
        let vlan = Vlan::from_meta(status, tci as u16, tpid);
        let data = &frame[..clip_len(snap, self.snaplen, vlan.is_some())];
        self.tally.packets += 1;
        self.tally.wire_bytes += len as u64;
        self.tally.captured_bytes += data.len() as u64;
        self.tally.ts[ts_slot(status)] += 1;
        Some(Packet {
            ts_ns: sec * 1_000_000_000 + nsec,
            wire_len: len,
            data,
            vlan,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

impl Drop for Packets<'_> {
    fn drop(&mut self) {
        if let Some(sink) = self.sink {
            sink.set(Some(self.tally));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lay out packets the way the kernel does (header, 32 bytes gap, frame, 16-byte alignment).
    fn build_block(frames: &[(&[u8], u32)], block_size: usize) -> (Vec<u8>, u32) {
        let mut b = vec![0u8; block_size];
        let first = DESC_LEN as u32;
        let mut off = first as usize;
        for (i, (data, status)) in frames.iter().enumerate() {
            let mac = 80usize;
            let total = (mac + data.len() + 15) & !15;
            let next = if i + 1 == frames.len() {
                0
            } else {
                total as u32
            };
            b[off..off + 4].copy_from_slice(&next.to_ne_bytes());
            b[off + 4..off + 8].copy_from_slice(&(1_700_000_000u32 + i as u32).to_ne_bytes());
            b[off + 8..off + 12].copy_from_slice(&123_456_789u32.to_ne_bytes());
            b[off + 12..off + 16].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            b[off + 16..off + 20].copy_from_slice(&(data.len() as u32 + 4).to_ne_bytes());
            b[off + 20..off + 24].copy_from_slice(&status.to_ne_bytes());
            b[off + 24..off + 26].copy_from_slice(&(mac as u16).to_ne_bytes());
            b[off + 32..off + 36].copy_from_slice(&0x0abcu32.to_ne_bytes());
            b[off + mac..off + mac + data.len()].copy_from_slice(data);
            off += total;
        }
        (b, first)
    }

    #[test]
    fn naps_cover_several_blocks_of_a_big_ring_only() {
        let ms = |n: u64| n * 1_000_000;
        // 64 MiB of 256 KiB blocks (256): 8 blocks' fill time, up to the cap.
        assert_eq!(nap_after(ms(1), 256), Duration::from_millis(8));
        assert_eq!(nap_after(ms(4), 256), NAP_MAX);
        // A nap shorter than two blocks' fill time saves no wake-up: poll.
        assert_eq!(nap_after(ms(15), 256), Duration::ZERO);
        // 64 blocks: two at a time; 32 or fewer: never.
        assert_eq!(nap_after(ms(3), 64), Duration::from_millis(6));
        assert_eq!(nap_after(ms(1), 32), Duration::ZERO);
        assert_eq!(nap_after(0, 256), Duration::ZERO);
    }

    fn iter(b: &[u8], first: u32, n: u32, snaplen: u32) -> Packets<'_> {
        Packets {
            body: &b[DESC_LEN..],
            off: first as usize,
            left: n,
            snaplen,
            tally: BatchTally::default(),
            sink: None,
        }
    }

    #[test]
    fn walks_packets_and_applies_snaplen() {
        let a = [0xa5u8; 60];
        let c: Vec<u8> = (0..200u8).collect();
        let (b, first) = build_block(&[(&a, 1), (&c, 1 | libc::TP_STATUS_VLAN_VALID)], 4096);
        let got: Vec<_> = iter(&b, first, 2, 100).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].data, &a[..]);
        assert_eq!(got[0].wire_len, 64);
        assert_eq!(got[0].ts_ns, 1_700_000_000 * 1_000_000_000 + 123_456_789);
        assert_eq!(got[0].vlan.unwrap().tci, 0x0abc); // tci != 0 counts as a tag, as in libpcap
        assert_eq!(got[1].data, &c[..96]); // 100 - room for the tag
        assert_eq!(
            got[1].vlan,
            Some(Vlan {
                tpid: 0x8100,
                tci: 0x0abc
            })
        );
    }

    #[test]
    fn corrupt_headers_stop_iteration_without_reading_outside() {
        let a = [1u8; 60];
        let (mut b, first) = build_block(&[(&a, 1), (&a, 1)], 4096);
        // num_pkts larger than what is there: the third "header" is zeros (mac 0 < header) -> stop.
        let mut it = iter(&b, first, 3, 65535);
        assert_eq!(it.by_ref().count(), 2);
        assert_eq!(it.tally.corrupt, 1);
        drop(it);
        // snaplen pointing past the block end.
        let off = first as usize;
        b[off + 12..off + 16].copy_from_slice(&100_000u32.to_ne_bytes());
        let mut it = iter(&b, first, 2, 65535);
        assert_eq!(it.next().map(|p| p.data.len()), None);
        assert_eq!(
            it.tally.corrupt, 2,
            "both packets the block claims are lost"
        );
        drop(it);
        // tp_mac pointing past the end, and a first-packet offset past the end.
        b[off + 12..off + 16].copy_from_slice(&60u32.to_ne_bytes());
        b[off + 24..off + 26].copy_from_slice(&u16::MAX.to_ne_bytes());
        assert_eq!(iter(&b, first, 2, 65535).count(), 0);
        assert_eq!(iter(&b, 1 << 20, 1, 65535).count(), 0);
        assert_eq!(iter(&b, 0, 1, 65535).count(), 0);
        // A next offset of zero in the middle would loop on the same packet forever: stop after one.
        let (mut b, first) = build_block(&[(&a, 1), (&a, 1)], 4096);
        b[first as usize..first as usize + 4].copy_from_slice(&0u32.to_ne_bytes());
        let mut it = iter(&b, first, 2, 65535);
        assert_eq!(it.by_ref().count(), 1);
        assert_eq!(it.tally.corrupt, 1);
    }

    #[test]
    fn stamp_source_is_counted_from_tp_status() {
        let a = [1u8; 60];
        let sw = crate::tstamp::TP_STATUS_TS_SOFTWARE;
        let hw = crate::tstamp::TP_STATUS_TS_RAW_HARDWARE;
        let (b, first) = build_block(&[(&a, 1 | sw), (&a, 1 | hw), (&a, 1), (&a, 1 | sw)], 4096);
        let mut it = iter(&b, first, 4, 65535);
        assert_eq!(it.by_ref().count(), 4);
        assert_eq!(it.tally.ts, [1, 2, 1], "[none, software, hardware]");
    }

    #[test]
    fn geometry_follows_buffer_size() {
        let cfg = |block_size, buffer_bytes| RingConfig {
            block_size,
            buffer_bytes,
            block_timeout: Duration::from_millis(20),
        };
        assert_eq!(cfg(1 << 20, 64 << 20).geometry().unwrap(), (1 << 20, 64));
        assert_eq!(
            cfg(1 << 20, (64 << 20) + 5).geometry().unwrap(),
            (1 << 20, 64)
        );
        // tcpdump's default -B 2048 KiB: eight 256 KiB blocks; 1 MiB total: eight of 128 KiB.
        assert_eq!(cfg(1 << 20, 2 << 20).geometry().unwrap(), (256 << 10, 8));
        assert_eq!(cfg(1 << 20, 1 << 20).geometry().unwrap(), (128 << 10, 8));
        assert_eq!(cfg(1 << 20, 8 << 20).geometry().unwrap(), (1 << 20, 8));
        // Fewer than eight pages: as many page-sized blocks as fit.
        assert_eq!(cfg(1 << 20, 16 << 10).geometry().unwrap(), (4096, 4));
        assert!(cfg(3 << 20, 64 << 20).geometry().is_err());
        assert!(cfg(1 << 20, 4096).geometry().is_err());
    }
}
