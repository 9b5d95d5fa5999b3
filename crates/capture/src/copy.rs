//! The classic per-packet path ("generic" in seed 003): a packet socket without a ring, read with
//! recvmmsg into preallocated buffers. Every packet is copied by the kernel into our buffer; a batch of
//! up to `batch` packets costs one system call. It is the baseline the ring is measured against, so it is
//! careful (batching, no allocation per packet) but not clever.
//!
//! Metadata comes from control messages: the timestamp from SCM_TIMESTAMPNS (SO_TIMESTAMPNS, nanoseconds,
//! delivered with each packet, so no extra SIOCGSTAMPNS call), the original length and the VLAN tag from
//! PACKET_AUXDATA (`tp_len`, `tp_status`, `tp_vlan_tci`, `tp_vlan_tpid`). The length comes from auxdata and
//! not from MSG_TRUNC because a filter's return value trims the packet before recvmmsg sees it.

use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use crate::batch::Batch;
use crate::counters::Counters;
use crate::error::CaptureError;
use crate::packet::{clip_len, Packet};
use crate::sys;
use wire::Vlan;

/// recvmmsg batch size and per-packet buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyConfig {
    /// Packets per recvmmsg call. 64 amortises the system call well (at 1.5 Mpps ~25k calls/s) and keeps
    /// the buffers' cache footprint small.
    pub batch: usize,
    /// Socket receive buffer in bytes (SO_RCVBUFFORCE, falling back to SO_RCVBUF; tcpdump's `-B`).
    /// The kernel charges each packet's full buffer size (~1 KiB for a small frame) against it.
    pub rcvbuf_bytes: usize,
}

impl Default for CopyConfig {
    fn default() -> Self {
        CopyConfig {
            batch: 64,
            rcvbuf_bytes: 64 << 20,
        }
    }
}

/// Largest frame buffer: a full 64 KiB IP packet plus link header fits; larger (GRO) frames are
/// truncated, their true length still comes from auxdata.
const MAX_BUF: usize = 65_536 + 64;
/// Control buffer per message: room for SCM_TIMESTAMPNS (16 bytes) and PACKET_AUXDATA (20 bytes) with headers.
const CTRL_WORDS: usize = 16;

/// A packet socket read with recvmmsg.
pub struct CopySource {
    fd: OwnedFd,
    buf_size: usize,
    // The mmsghdrs point into `bufs`, `ctrl` and `iovs`; all are allocated once and never resized.
    bufs: Vec<u8>,
    ctrl: Vec<u64>, // u64 so control messages are 8-byte aligned
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    snaplen: u32,
    queue_drained: bool,
    counters: Arc<Counters>,
}

// SAFETY: the raw pointers in `msgs`/`iovs` point only into heap buffers this value owns.
unsafe impl Send for CopySource {}

impl CopySource {
    /// Prepare `fd` (before bind): timestamps, auxdata, receive buffer; allocate the batch buffers.
    pub(crate) fn create(
        fd: OwnedFd,
        cfg: &CopyConfig,
        snaplen: u32,
    ) -> Result<CopySource, CaptureError> {
        if cfg.batch == 0 || cfg.batch > 1024 {
            return Err(CaptureError::Config(format!(
                "copy batch {} must be between 1 and 1024",
                cfg.batch
            )));
        }
        let raw = fd.as_raw_fd();
        let on: libc::c_int = 1;
        sys::set_opt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on,
            "setsockopt(SO_TIMESTAMPNS)",
        )?;
        sys::set_opt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_AUXDATA,
            &on,
            "setsockopt(PACKET_AUXDATA)",
        )?;
        let want = cfg.rcvbuf_bytes.min(i32::MAX as usize) as libc::c_int;
        // FORCE ignores net.core.rmem_max but needs CAP_NET_ADMIN; without it take what rmem_max allows.
        if sys::set_opt_raw(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &want).is_err() {
            if let Err(e) = sys::set_opt_raw(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &want) {
                return Err(CaptureError::RingAlloc {
                    bytes: want as u64,
                    source: e,
                });
            }
        }

        let buf_size = (snaplen as usize).clamp(64, MAX_BUF);
        let n = cfg.batch;
        let mut src = CopySource {
            fd,
            buf_size,
            bufs: vec![0u8; n * buf_size],
            ctrl: vec![0u64; n * CTRL_WORDS],
            // SAFETY (both): iovec and mmsghdr are plain C structs for which all-zero is valid.
            iovs: vec![unsafe { zeroed() }; n],
            msgs: vec![unsafe { zeroed() }; n],
            snaplen,
            queue_drained: true,
            counters: Arc::new(Counters::new(raw)),
        };
        for i in 0..n {
            src.iovs[i].iov_base = src.bufs[i * buf_size..].as_mut_ptr() as *mut libc::c_void;
            src.iovs[i].iov_len = buf_size;
            let h = &mut src.msgs[i].msg_hdr;
            h.msg_iov = &mut src.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = src.ctrl[i * CTRL_WORDS..].as_mut_ptr() as *mut libc::c_void;
        }
        Ok(src)
    }

    /// The socket.
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Live counters of this socket.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// One recvmmsg call (after waiting up to `timeout` in poll() if nothing is queued); `Ok(None)` when
    /// nothing arrived.
    pub fn next_batch(&mut self, timeout: Duration) -> Result<Option<Batch<'_>>, CaptureError> {
        // A short previous batch means the queue was empty then: wait in poll() first instead of paying
        // for a recvmmsg that would most likely return EAGAIN. A full batch means more may be queued.
        let mut n = if self.queue_drained {
            0
        } else {
            self.receive()?
        };
        if n == 0 {
            self.counters.add_poll();
            let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            if !sys::poll_readable(&self.fd, ms)? {
                return Ok(None);
            }
            n = self.receive()?;
        }
        self.queue_drained = n < self.msgs.len();
        if n == 0 {
            return Ok(None);
        }
        // Counted on the first pass over the batch (see `Batch`), as the ring counts its blocks.
        Ok(Some(Batch::copy(self, n)))
    }

    /// Adds what one batch held to the counters (when the batch is dropped).
    pub(crate) fn count_batch(&self, t: &crate::counters::BatchTally) {
        self.counters.add_batch(t);
    }

    /// recvmmsg without blocking: the number of messages filled.
    fn receive(&mut self) -> Result<usize, CaptureError> {
        for m in self.msgs.iter_mut() {
            m.msg_hdr.msg_controllen = CTRL_WORDS * size_of::<u64>();
            m.msg_hdr.msg_flags = 0;
            m.msg_len = 0;
        }
        // SAFETY: every mmsghdr points at its own iovec, data buffer and control buffer, all alive.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(sys::read_failure("recvmmsg", e)),
            };
        }
        Ok(r as usize)
    }

    /// Message `i` of the last batch as a Packet.
    pub(crate) fn packet(&self, i: usize) -> Packet<'_> {
        let m = &self.msgs[i];
        let copied = (m.msg_len as usize).min(self.buf_size);
        let mut ts_ns = None;
        let mut aux: Option<libc::tpacket_auxdata> = None;
        // SAFETY: walking the control buffer the kernel filled for this message, bounded by msg_controllen;
        // payloads are read unaligned and only when the cmsg is long enough for them.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&m.msg_hdr);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                let payload = (*c).cmsg_len as usize - (data as usize - c as usize);
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS)
                        if payload >= size_of::<libc::timespec>() =>
                    {
                        let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                        ts_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                    }
                    (libc::SOL_PACKET, libc::PACKET_AUXDATA)
                        if payload >= size_of::<libc::tpacket_auxdata>() =>
                    {
                        aux = Some(std::ptr::read_unaligned(
                            data as *const libc::tpacket_auxdata,
                        ));
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(&m.msg_hdr, c);
            }
        }
        let (wire_len, vlan) = match aux {
            Some(a) => (
                a.tp_len,
                Vlan::from_meta(a.tp_status, a.tp_vlan_tci, a.tp_vlan_tpid),
            ),
            None => (m.msg_len, None),
        };
        let start = i * self.buf_size;
        let data = &self.bufs[start..start + clip_len(copied, self.snaplen, vlan.is_some())];
        Packet {
            // Only missing if the kernel did not timestamp; fall back to now (vDSO, no system call).
            ts_ns: ts_ns.unwrap_or_else(::sys::now_ns),
            wire_len,
            data,
            vlan,
        }
    }
}

impl Drop for CopySource {
    fn drop(&mut self) {
        self.counters.close();
    }
}
