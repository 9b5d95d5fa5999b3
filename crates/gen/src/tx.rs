//! Sending backends on an AF_PACKET socket bound to one interface, both with PACKET_QDISC_BYPASS:
//! `sendmmsg` of batches of linear frames, and a TPACKET_V2 TX_RING kicked with `send()`.
//!
//! Both hand exactly the frames they are given to the kernel: back-pressure (EAGAIN when the socket's send
//! buffer is full, ENOBUFS when the device dropped a frame, e.g. a full receive backlog behind veth with
//! RPS) is counted and waited out, and the frames the kernel did not take are offered again. Other errors
//! end the run with a message saying what to do.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use sys::Interface;

use serde::{Deserialize, Serialize};

use crate::error::GenError;

/// Which sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// sendmmsg of batches of linear frames (the default: faster on veth, where TX_RING frames are copied
    /// again per frame by `skb_copy_ubufs`).
    #[default]
    Sendmmsg,
    /// TPACKET_V2 TX_RING, frames written into the shared ring and kicked with send().
    TxRing,
    /// AF_XDP, one socket per thread on transmit queue = thread, frames built once in its UMEM.
    Xdp,
    /// BPF_PROG_TEST_RUN in live-frames mode: the kernel sends `live_repeat` copies of a frame per call.
    XdpLive,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sendmmsg => "sendmmsg",
            Backend::TxRing => "tx-ring",
            Backend::Xdp => "xdp",
            Backend::XdpLive => "xdp-live",
        })
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sendmmsg" | "mmsg" => Ok(Backend::Sendmmsg),
            "tx-ring" | "txring" | "ring" => Ok(Backend::TxRing),
            "xdp" | "af-xdp" => Ok(Backend::Xdp),
            "xdp-live" => Ok(Backend::XdpLive),
            _ => Err(format!(
                "bad backend {s:?}: use sendmmsg, tx-ring, xdp or xdp-live"
            )),
        }
    }
}

/// Send errors that were waited out, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendErrors {
    /// EAGAIN / EWOULDBLOCK: the socket's send buffer was full.
    pub eagain: u64,
    /// ENOBUFS: the device dropped the frame (it was sent again).
    pub enobufs: u64,
    /// EINTR: a signal interrupted the call.
    pub eintr: u64,
    /// sendmmsg calls that took only part of their batch (the rest was sent again).
    pub partial: u64,
    /// Times the TX_RING had no free frame and the sender waited for one.
    pub ring_full: u64,
}

impl SendErrors {
    /// Adds another set of counts.
    pub fn add(&mut self, o: &SendErrors) {
        self.eagain += o.eagain;
        self.enobufs += o.enobufs;
        self.eintr += o.eintr;
        self.partial += o.partial;
        self.ring_full += o.ring_full;
    }

    /// Total back-pressure events.
    pub fn total(&self) -> u64 {
        self.eagain + self.enobufs + self.eintr + self.partial + self.ring_full
    }

    /// Counts a waitable errno; false for errors that must end the run.
    fn count(&mut self, errno: i32) -> bool {
        match errno {
            libc::EAGAIN => self.eagain += 1,
            libc::ENOBUFS => self.enobufs += 1,
            libc::EINTR => self.eintr += 1,
            _ => return false,
        }
        true
    }
}

/// Waits out a back-pressure error: poll for room on EAGAIN, a short sleep on ENOBUFS (poll cannot tell
/// when a device queue has room again).
fn back_off(fd: RawFd, errno: i32) {
    match errno {
        libc::EAGAIN => {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: one valid pollfd; a 1 ms cap keeps stop requests responsive.
            unsafe { libc::poll(&mut p, 1, 1) };
        }
        libc::ENOBUFS => std::thread::sleep(std::time::Duration::from_micros(20)),
        _ => {}
    }
}

fn os_err(what: &str, e: io::Error, hint: &str) -> GenError {
    GenError::Io {
        context: format!("{what}: {hint}"),
        source: e,
    }
}

fn setsockopt<T>(fd: RawFd, level: i32, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a valid T of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Looks the interface up, with the error saying what to do.
pub fn lookup_interface(name: &str) -> Result<Interface, GenError> {
    Interface::lookup(name).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound if name.len() >= libc::IFNAMSIZ => GenError::Options(format!(
            "interface name {name:?} is longer than 15 bytes"
        )),
        io::ErrorKind::NotFound => GenError::Options(format!(
            "no interface {name:?} in this network namespace: check `ip link` (or run inside the right netns)"
        )),
        _ => os_err("SIOCGIFMTU", e, "cannot read the interface MTU"),
    })
}

/// Opens an AF_PACKET SOCK_RAW socket for sending: protocol 0 (it receives nothing), qdisc bypassed,
/// optional send buffer size. Bind it with [`bind_socket`].
pub fn open_socket(sndbuf: Option<usize>) -> Result<OwnedFd, GenError> {
    let fd = sys::packet_socket().map_err(|e| {
        os_err(
            "socket(AF_PACKET)",
            e,
            "packet sockets need root or CAP_NET_RAW",
        )
    })?;
    let raw = fd.as_raw_fd();
    setsockopt(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32).map_err(|e| {
        os_err(
            "PACKET_QDISC_BYPASS",
            e,
            "the kernel is too old (needs 3.14)",
        )
    })?;
    if let Some(n) = sndbuf {
        let n = n.min(i32::MAX as usize) as i32;
        // SO_SNDBUFFORCE passes net.core.wmem_max (root); plain SO_SNDBUF as a fallback.
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &n)
            .or_else(|_| setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &n))
            .map_err(|e| os_err("SO_SNDBUF", e, "choose another send buffer size"))?;
    }
    Ok(fd)
}

/// Binds a packet socket to the interface (protocol 0: no receive hook).
pub fn bind_socket(fd: &OwnedFd, ifc: &Interface) -> Result<(), GenError> {
    // SAFETY: zeroed sockaddr_ll is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifc.index;
    // SAFETY: valid sockaddr_ll of the given size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(os_err(
            &format!("bind to {}", ifc.name),
            e,
            "is the interface up?",
        ));
    }
    Ok(())
}

/// A sender. Frames are written into slots one by one ([`slot`](Tx::slot), [`commit`](Tx::commit)) and
/// handed to the kernel together ([`flush`](Tx::flush)); at most [`capacity`](Tx::capacity) between flushes.
pub trait Tx {
    /// Frames per flush.
    fn capacity(&self) -> usize;
    /// Runs `f` once on every slot (to write the constant bytes).
    fn prepare(&mut self, f: &mut dyn FnMut(&mut [u8]));
    /// Frames committed since the last flush.
    fn pending(&self) -> usize;
    /// The next free slot (waits for one if a ring is full); `None` if `stop` was raised while waiting.
    /// Call only while `pending() < capacity()`.
    fn slot(
        &mut self,
        errors: &mut SendErrors,
        stop: &AtomicBool,
    ) -> Result<Option<&mut [u8]>, GenError>;
    /// Marks the slot last returned as a frame of `len` bytes.
    fn commit(&mut self, len: usize);
    /// Sends every committed frame, waiting out back-pressure; returns how many left (all, unless `stop`
    /// was raised while waiting).
    fn flush(&mut self, errors: &mut SendErrors, stop: &AtomicBool) -> Result<usize, GenError>;
    /// Waits until every frame handed over has left the socket.
    fn finish(&mut self, errors: &mut SendErrors) -> Result<(), GenError>;
}

/// Bytes reserved per slot: the largest frame, rounded to a cache line.
fn slot_size(max_frame: usize) -> usize {
    max_frame.div_ceil(64) * 64
}

/// sendmmsg of batches of linear frames, one iovec each.
///
/// (Gathering random payloads straight from the pool with extra iovecs was tried: the kernel's per-iovec work
/// cost more than our copy into the slot, about 4 % fewer frames per second.)
pub struct MmsgTx {
    fd: OwnedFd,
    slot: usize,
    buf: Vec<u8>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    pending: usize,
}

impl MmsgTx {
    /// `batch` frames of up to `max_frame` bytes per call on a bound socket.
    pub fn new(fd: OwnedFd, batch: usize, max_frame: usize) -> Self {
        let slot = slot_size(max_frame);
        let mut buf = vec![0u8; slot * batch];
        let mut iov: Vec<libc::iovec> = (0..batch)
            .map(|i| libc::iovec {
                // SAFETY: in bounds of `buf`, which is never resized, so the pointer stays valid.
                iov_base: unsafe { buf.as_mut_ptr().add(i * slot) } as *mut libc::c_void,
                iov_len: 0,
            })
            .collect();
        let msgs = (0..batch)
            .map(|i| {
                // SAFETY: zeroed msghdr is valid (no name, no control).
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = &mut iov[i];
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        MmsgTx {
            fd,
            slot,
            buf,
            iov,
            msgs,
            pending: 0,
        }
    }
}

impl Tx for MmsgTx {
    fn capacity(&self) -> usize {
        self.msgs.len()
    }

    fn prepare(&mut self, f: &mut dyn FnMut(&mut [u8])) {
        for s in self.buf.chunks_exact_mut(self.slot) {
            f(s);
        }
    }

    fn pending(&self) -> usize {
        self.pending
    }

    fn slot(
        &mut self,
        _errors: &mut SendErrors,
        _stop: &AtomicBool,
    ) -> Result<Option<&mut [u8]>, GenError> {
        let at = self.pending * self.slot;
        Ok(Some(&mut self.buf[at..at + self.slot]))
    }

    fn commit(&mut self, len: usize) {
        self.iov[self.pending].iov_len = len;
        self.pending += 1;
    }

    fn flush(&mut self, errors: &mut SendErrors, stop: &AtomicBool) -> Result<usize, GenError> {
        let n = std::mem::take(&mut self.pending);
        let fd = self.fd.as_raw_fd();
        let mut sent = 0;
        while sent < n {
            // SAFETY: msgs[sent..n] point to iovecs into `buf`, all valid for the call.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    self.msgs.as_mut_ptr().add(sent),
                    (n - sent) as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                sent += r as usize;
                if sent < n {
                    // The kernel stopped at a frame it could not take; offer the rest again.
                    errors.partial += 1;
                }
                continue;
            }
            let e = io::Error::last_os_error();
            let errno = e.raw_os_error().unwrap_or(0);
            if !errors.count(errno) {
                return Err(send_error("sendmmsg", e));
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            back_off(fd, errno);
        }
        Ok(sent)
    }

    fn finish(&mut self, _errors: &mut SendErrors) -> Result<(), GenError> {
        Ok(())
    }
}

fn send_error(call: &str, e: io::Error) -> GenError {
    let hint = match e.raw_os_error() {
        Some(libc::EMSGSIZE) => {
            "a frame is larger than the interface MTU allows: lower the sizes or raise the MTU"
        }
        Some(libc::ENETDOWN) | Some(libc::ENXIO) => "the interface went down or away",
        _ => "sending failed",
    };
    GenError::Io {
        context: format!("{call}: {hint}"),
        source: e,
    }
}

// TPACKET_V2 frame header: tp_status u32 at 0, tp_len u32 at 4; data starts at
// TPACKET2_HDRLEN - sizeof(sockaddr_ll) = 32 + 20 - 20 = 32 (no PACKET_TX_HAS_OFF).
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
// (2 = TP_STATUS_SENDING: the kernel holds the frame until its skb is freed.)
const TP_STATUS_WRONG_FORMAT: u32 = 4;
const TP2_DATA: usize = 32;

/// A TPACKET_V2 TX_RING.
pub struct RingTx {
    fd: OwnedFd,
    map: sys::RingMap,
    frame_size: usize,
    frames: usize,
    head: usize,
    batch: usize,
    /// Index of the last frame marked SEND_REQUEST (to see when the kernel has taken everything).
    last: Option<usize>,
    pending: usize,
}

impl RingTx {
    /// Sets up a ring of at least `frames` frames for frames up to `max_frame` bytes on an unbound socket,
    /// then binds it; `batch` frames are written between kicks.
    pub fn new(
        fd: OwnedFd,
        ifc: &Interface,
        frames: usize,
        batch: usize,
        max_frame: usize,
    ) -> Result<Self, GenError> {
        let raw = fd.as_raw_fd();
        setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &libc::tpacket_versions::TPACKET_V2,
        )
        .map_err(|e| os_err("PACKET_VERSION", e, "TPACKET_V2 is not available"))?;
        let page = 4096usize;
        let frame_size = (TP2_DATA + max_frame).next_power_of_two().max(2048);
        let block_size = frame_size.max(page);
        let per_block = block_size / frame_size;
        let blocks = frames.max(batch).max(per_block).div_ceil(per_block);
        let frames = blocks * per_block;
        let req = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: frames as u32,
        };
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_TX_RING, &req)
            .map_err(|e| os_err("PACKET_TX_RING", e, "choose fewer ring frames"))?;
        let map_len = block_size * blocks;
        let map = sys::RingMap::new(raw, map_len)
            .map_err(|e| os_err("mmap of the TX_RING", e, "choose fewer ring frames"))?;
        let tx = RingTx {
            fd,
            map,
            frame_size,
            frames,
            head: 0,
            batch,
            last: None,
            pending: 0,
        };
        bind_socket(&tx.fd, ifc)?;
        Ok(tx)
    }

    #[inline]
    fn frame(&self, i: usize) -> *mut u8 {
        // Blocks hold whole frames back to back (block size is a multiple of the frame size).
        // SAFETY: i < frames, so the offset is inside the mapping.
        unsafe { self.map.as_ptr().add(i * self.frame_size) }
    }

    /// The data area of frame i (frame_size - 32 bytes).
    #[inline]
    fn data(&mut self, i: usize) -> &mut [u8] {
        // SAFETY: inside the mapping; user space owns the data area of frames it has not handed over, and
        // `&mut self` keeps two slices of one frame from existing at once.
        unsafe {
            std::slice::from_raw_parts_mut(self.frame(i).add(TP2_DATA), self.frame_size - TP2_DATA)
        }
    }

    #[inline]
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte-aligned u32 of a frame the kernel updates concurrently.
        unsafe { &*(self.frame(i) as *const AtomicU32) }
    }

    /// Asks the kernel to send every SEND_REQUEST frame (non-blocking); counts waitable errors.
    fn kick(&self, errors: &mut SendErrors) -> Result<(), GenError> {
        // SAFETY: a zero-length send on a socket with a TX_RING.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r < 0 {
            let e = io::Error::last_os_error();
            let errno = e.raw_os_error().unwrap_or(0);
            if !errors.count(errno) {
                return Err(send_error("send (TX_RING kick)", e));
            }
            back_off(self.fd.as_raw_fd(), errno);
        }
        Ok(())
    }

    fn check_wrong_format(&self, i: usize) -> Result<(), GenError> {
        if self.status(i).load(Ordering::Acquire) == TP_STATUS_WRONG_FORMAT {
            return Err(GenError::Io {
                context: "TX_RING: the kernel rejected a frame (TP_STATUS_WRONG_FORMAT): a frame is larger than the \
                          MTU allows or malformed"
                    .into(),
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        Ok(())
    }

    /// Kicks until the kernel has taken every frame marked so far (the last one is no longer SEND_REQUEST;
    /// the kernel takes frames in ring order and puts back any frame the device dropped).
    fn push_out(&mut self, errors: &mut SendErrors, stop: &AtomicBool) -> Result<(), GenError> {
        let Some(last) = self.last else { return Ok(()) };
        loop {
            self.kick(errors)?;
            let st = self.status(last).load(Ordering::Acquire);
            if st != TP_STATUS_SEND_REQUEST {
                self.check_wrong_format(last)?;
                return Ok(());
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
        }
    }
}

impl Tx for RingTx {
    fn capacity(&self) -> usize {
        self.batch
    }

    fn prepare(&mut self, f: &mut dyn FnMut(&mut [u8])) {
        for i in 0..self.frames {
            f(self.data(i));
        }
    }

    fn pending(&self) -> usize {
        self.pending
    }

    fn slot(
        &mut self,
        errors: &mut SendErrors,
        stop: &AtomicBool,
    ) -> Result<Option<&mut [u8]>, GenError> {
        let i = self.head;
        // Wait for the frame to come back from the kernel (it stays SENDING until its skb is freed).
        let mut waited = false;
        while self.status(i).load(Ordering::Acquire) != TP_STATUS_AVAILABLE {
            self.check_wrong_format(i)?;
            if !waited {
                errors.ring_full += 1;
                waited = true;
            }
            self.push_out(errors, stop)?;
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if self.status(i).load(Ordering::Acquire) != TP_STATUS_AVAILABLE {
                std::thread::yield_now();
            }
        }
        Ok(Some(self.data(i)))
    }

    fn commit(&mut self, len: usize) {
        let i = self.head;
        // SAFETY: tp_len at offset 4 of frame i's header, written before the status is released.
        unsafe { (self.frame(i).add(4) as *mut u32).write_volatile(len as u32) };
        self.status(i)
            .store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.last = Some(i);
        self.head = (i + 1) % self.frames;
        self.pending += 1;
    }

    fn flush(&mut self, errors: &mut SendErrors, stop: &AtomicBool) -> Result<usize, GenError> {
        self.push_out(errors, stop)?;
        // Frames left behind by a stop are still marked and go out in `finish`.
        Ok(std::mem::take(&mut self.pending))
    }

    fn finish(&mut self, errors: &mut SendErrors) -> Result<(), GenError> {
        let never = AtomicBool::new(false);
        self.push_out(errors, &never)?;
        // Every frame returns to AVAILABLE once its skb is freed; on veth that is immediate.
        let deadline = sys::monotonic_ns() + 5_000_000_000;
        for i in 0..self.frames {
            while self.status(i).load(Ordering::Acquire) != TP_STATUS_AVAILABLE {
                self.check_wrong_format(i)?;
                if sys::monotonic_ns() > deadline {
                    return Err(GenError::Io {
                        context: "TX_RING: frames still in flight 5 s after the last send".into(),
                        source: io::Error::from_raw_os_error(libc::ETIMEDOUT),
                    });
                }
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
        Ok(())
    }
}
