// Over 700 lines on purpose: one socket and its four rings; the unsafe ring protocol reads best in one file.
//! AF_XDP sockets: a UMEM (the frames, in this process's memory), the fill and completion rings that pass
//! frames to and from the kernel, and the rx and tx descriptor rings.
//!
//! Written against the kernel's ABI with `libc`'s definitions rather than through libxdp: the receive path
//! hands out packets that borrow UMEM frames (no copy) for as long as the caller holds a batch, which the
//! crates that wrap libxdp do not offer, and the ring protocol is four loads and stores.

use std::io;
use std::marker::PhantomData;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use libc::{
    sockaddr_xdp, xdp_desc, xdp_mmap_offsets, xdp_ring_offset, xdp_statistics, xdp_umem_reg,
};

use crate::error::XdpError;

/// How the socket is bound (`--xdp-bind`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bind {
    /// Zero copy where the driver supports it, copy otherwise.
    #[default]
    Auto,
    /// The kernel copies each frame into the UMEM (every driver with XDP).
    Copy,
    /// The NIC writes into the UMEM itself (drivers with AF_XDP zero-copy support only; not veth).
    ZeroCopy,
}

impl FromStr for Bind {
    type Err = String;
    fn from_str(s: &str) -> Result<Bind, String> {
        match s {
            "auto" => Ok(Bind::Auto),
            "copy" => Ok(Bind::Copy),
            "zerocopy" | "zero-copy" => Ok(Bind::ZeroCopy),
            _ => Err(format!(
                "unknown bind mode '{s}': use auto, copy or zerocopy"
            )),
        }
    }
}

/// Sizes and binding of one socket.
#[derive(Clone, Copy, Debug)]
pub struct XskConfig {
    /// Bytes per UMEM frame: 2048 or 4096 (a frame holds one packet, so this bounds the packet size).
    pub frame_size: u32,
    /// Frames in the UMEM.
    pub frames: u32,
    /// Entries of each ring (rx or tx, fill, completion); a power of two.
    pub ring_size: u32,
    /// Copy or zero copy.
    pub bind: Bind,
    /// Ask the kernel to be woken only when it needs it (XDP_USE_NEED_WAKEUP): saves a system call per
    /// batch while the kernel keeps up.
    pub need_wakeup: bool,
}

impl Default for XskConfig {
    fn default() -> XskConfig {
        XskConfig {
            frame_size: 4096,
            frames: 8192,
            ring_size: 4096,
            bind: Bind::Auto,
            need_wakeup: true,
        }
    }
}

impl XskConfig {
    fn check(&self) -> Result<(), XdpError> {
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(XdpError::Config(format!(
                "AF_XDP frame size {} must be 2048 or 4096",
                self.frame_size
            )));
        }
        if !self.ring_size.is_power_of_two() || !(64..=65536).contains(&self.ring_size) {
            return Err(XdpError::Config(format!(
                "AF_XDP ring size {} must be a power of two between 64 and 65536",
                self.ring_size
            )));
        }
        if self.frames < self.ring_size || self.frames > (1 << 24) {
            return Err(XdpError::Config(format!(
                "AF_XDP UMEM of {} frames must hold at least one ring ({}) and at most 16 M frames",
                self.frames, self.ring_size
            )));
        }
        Ok(())
    }
}

/// The kernel's AF_XDP counters of one socket (XDP_STATISTICS), since it was bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Dropped for other reasons (a frame too large for a UMEM frame, ...).
    pub rx_dropped: u64,
    /// The rx ring was full: the reader fell behind.
    pub rx_ring_full: u64,
    /// The fill ring was empty: no free frame to receive into.
    pub rx_fill_ring_empty: u64,
    /// Descriptors the kernel rejected (a bug on our side if not 0).
    pub invalid_descs: u64,
}

impl XskStats {
    /// Packets the kernel lost at this socket.
    pub fn lost(&self) -> u64 {
        self.rx_dropped + self.rx_ring_full + self.rx_fill_ring_empty
    }
}

/// A shared mapping (a ring) or the anonymous UMEM area.
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; the rings' concurrent use is governed by their atomics.
unsafe impl Send for Mmap {}

impl Mmap {
    fn new(len: usize, fd: Option<(RawFd, libc::off_t)>, what: &str) -> Result<Mmap, XdpError> {
        let (flags, fd, off) = match fd {
            Some((fd, off)) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd, off),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            ),
        };
        // SAFETY: a fresh mapping; the kernel checks fd and offset.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_error(what));
        }
        Ok(Mmap {
            ptr: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what new() mapped.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One ring shared with the kernel: `T` is a frame address (fill, completion) or a descriptor (rx, tx).
struct Ring<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    entries: *mut T,
    mask: u32,
    size: u32,
    /// Our side's index: the producer index of a ring we fill, the consumer index of one we drain.
    local: u32,
    _map: Mmap,
    _t: PhantomData<T>,
}

// SAFETY: the pointers point into `_map`, owned by the ring.
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    fn map(
        fd: RawFd,
        off: &xdp_ring_offset,
        size: u32,
        pgoff: libc::off_t,
        what: &str,
    ) -> Result<Ring<T>, XdpError> {
        let len = off.desc as usize + size as usize * size_of::<T>();
        let map = Mmap::new(len, Some((fd, pgoff)), what)?;
        let base = map.ptr.as_ptr();
        // SAFETY: the offsets come from the kernel for this mapping.
        let (producer, consumer, flags, entries) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize) as *mut T,
            )
        };
        let mut r = Ring {
            producer,
            consumer,
            flags,
            entries,
            mask: size - 1,
            size,
            local: 0,
            _map: map,
            _t: PhantomData,
        };
        r.local = 0;
        Ok(r)
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: valid for the life of the mapping.
        unsafe { &*self.producer }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Entries we may produce now.
    fn free(&self) -> u32 {
        self.size - self.local.wrapping_sub(self.cons().load(Ordering::Acquire))
    }

    /// Entries the kernel produced that we have not consumed.
    fn ready(&self) -> u32 {
        self.prod().load(Ordering::Acquire).wrapping_sub(self.local)
    }

    #[inline]
    fn get(&self, idx: u32) -> T {
        // SAFETY: masked into the ring.
        unsafe { *self.entries.add((idx & self.mask) as usize) }
    }

    #[inline]
    fn set(&mut self, idx: u32, v: T) {
        // SAFETY: masked into the ring.
        unsafe { *self.entries.add((idx & self.mask) as usize) = v }
    }

    /// Publish `n` produced entries (written with `set` at `local..local + n`).
    fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.prod().store(self.local, Ordering::Release);
    }

    /// Give `n` consumed entries back.
    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.cons().store(self.local, Ordering::Release);
    }
}

/// One AF_XDP socket bound to one (interface, queue), with its own UMEM.
pub struct XskSocket {
    // Field order is drop order: the rings' mappings go before the socket that owns them, the UMEM last.
    fill: Ring<u64>,
    completion: Ring<u64>,
    rx: Option<Ring<xdp_desc>>,
    tx: Option<Ring<xdp_desc>>,
    fd: OwnedFd,
    umem: Mmap,
    frame_size: u32,
    frames: u32,
    zero_copy: bool,
    need_wakeup: bool,
    queue: u32,
    /// Frames not in any ring (tx only: free for the next send).
    free_frames: Vec<u64>,
}

/// Which rings a socket gets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Rx,
    Tx,
}

impl XskSocket {
    /// A receiving socket on `queue` of interface `ifindex`, every frame handed to the kernel's fill ring.
    /// The caller registers it with the XDP program ([`crate::Program::set_socket`]).
    pub fn rx(ifindex: u32, queue: u32, cfg: &XskConfig) -> Result<XskSocket, XdpError> {
        let mut s = XskSocket::open(ifindex, queue, cfg, Direction::Rx)?;
        let n = s.fill.size.min(s.frames);
        for i in 0..n {
            let addr = u64::from(i) * u64::from(s.frame_size);
            let at = s.fill.local.wrapping_add(i);
            s.fill.set(at, addr);
        }
        s.fill.submit(n);
        Ok(s)
    }

    /// A sending socket on `queue` of interface `ifindex`; its frames start free (see [`XskSocket::frame_mut`]).
    pub fn tx(ifindex: u32, queue: u32, cfg: &XskConfig) -> Result<XskSocket, XdpError> {
        let mut s = XskSocket::open(ifindex, queue, cfg, Direction::Tx)?;
        s.free_frames = (0..s.frames)
            .rev()
            .map(|i| u64::from(i) * u64::from(s.frame_size))
            .collect();
        Ok(s)
    }

    fn open(
        ifindex: u32,
        queue: u32,
        cfg: &XskConfig,
        dir: Direction,
    ) -> Result<XskSocket, XdpError> {
        cfg.check()?;
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => {
                    XdpError::Privileges("AF_XDP sockets need root (CAP_NET_RAW)".into())
                }
                Some(libc::EAFNOSUPPORT) => XdpError::Unsupported(
                    "this kernel has no AF_XDP (CONFIG_XDP_SOCKETS): use --source ring".into(),
                ),
                _ => XdpError::Socket {
                    what: "socket(AF_XDP)".into(),
                    err: e,
                },
            });
        }
        // SAFETY: a descriptor we just created.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = cfg.frames as usize * cfg.frame_size as usize;
        let umem = Mmap::new(len, None, "mmap of the UMEM")?;
        let reg = xdp_umem_reg {
            addr: umem.ptr.as_ptr() as u64,
            len: len as u64,
            chunk_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setopt(raw, libc::XDP_UMEM_REG, &reg, "setsockopt(XDP_UMEM_REG)")?;
        setopt(
            raw,
            libc::XDP_UMEM_FILL_RING,
            &cfg.ring_size,
            "setsockopt(XDP_UMEM_FILL_RING)",
        )?;
        setopt(
            raw,
            libc::XDP_UMEM_COMPLETION_RING,
            &cfg.ring_size,
            "setsockopt(XDP_UMEM_COMPLETION_RING)",
        )?;
        match dir {
            Direction::Rx => setopt(
                raw,
                libc::XDP_RX_RING,
                &cfg.ring_size,
                "setsockopt(XDP_RX_RING)",
            )?,
            Direction::Tx => setopt(
                raw,
                libc::XDP_TX_RING,
                &cfg.ring_size,
                "setsockopt(XDP_TX_RING)",
            )?,
        }
        // SAFETY: zeroed is a valid xdp_mmap_offsets; the kernel fills it.
        let mut off: xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut optlen = size_of::<xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: off is as large as optlen says.
        let r = unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut off as *mut xdp_mmap_offsets).cast(),
                &mut optlen,
            )
        };
        if r < 0 {
            return Err(os_error("getsockopt(XDP_MMAP_OFFSETS)"));
        }
        let fill = Ring::map(
            raw,
            &off.fr,
            cfg.ring_size,
            libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
            "mmap of the fill ring",
        )?;
        let completion = Ring::map(
            raw,
            &off.cr,
            cfg.ring_size,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
            "mmap of the completion ring",
        )?;
        let (rx, tx) = match dir {
            Direction::Rx => (
                Some(Ring::map(
                    raw,
                    &off.rx,
                    cfg.ring_size,
                    libc::XDP_PGOFF_RX_RING,
                    "mmap of the rx ring",
                )?),
                None,
            ),
            Direction::Tx => (
                None,
                Some(Ring::map(
                    raw,
                    &off.tx,
                    cfg.ring_size,
                    libc::XDP_PGOFF_TX_RING,
                    "mmap of the tx ring",
                )?),
            ),
        };
        let mut s = XskSocket {
            fill,
            completion,
            rx,
            tx,
            fd,
            umem,
            frame_size: cfg.frame_size,
            frames: cfg.frames,
            zero_copy: false,
            need_wakeup: cfg.need_wakeup,
            queue,
            free_frames: Vec::new(),
        };
        s.bind(ifindex, queue, cfg)?;
        Ok(s)
    }

    fn bind(&mut self, ifindex: u32, queue: u32, cfg: &XskConfig) -> Result<(), XdpError> {
        let wake = if cfg.need_wakeup {
            libc::XDP_USE_NEED_WAKEUP
        } else {
            0
        };
        let try_bind = |mode: u16| -> io::Result<()> {
            let sa = sockaddr_xdp {
                sxdp_family: libc::AF_XDP as u16,
                sxdp_flags: mode | wake,
                sxdp_ifindex: ifindex,
                sxdp_queue_id: queue,
                sxdp_shared_umem_fd: 0,
            };
            // SAFETY: sa is a valid sockaddr_xdp of the length given.
            let r = unsafe {
                libc::bind(
                    self.fd.as_raw_fd(),
                    (&sa as *const sockaddr_xdp).cast(),
                    size_of::<sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let explain = |e: io::Error, mode: &str| -> XdpError {
            match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::EPROTONOSUPPORT) if mode == "zero-copy" => XdpError::Unsupported(format!(
                    "the driver cannot bind queue {queue} in zero-copy mode: use --xdp-bind copy (or auto)"
                )),
                Some(libc::EINVAL) => XdpError::Unsupported(format!(
                    "cannot bind an AF_XDP socket to queue {queue} ({e}): the interface may have fewer queues \
                     (`ethtool -l`), or it is down"
                )),
                Some(libc::EBUSY) => XdpError::Busy(format!(
                    "queue {queue} already has an AF_XDP socket (another capture on the same queue?)"
                )),
                _ => XdpError::Socket { what: format!("bind of the AF_XDP socket ({mode}) to queue {queue}"), err: e },
            }
        };
        match cfg.bind {
            Bind::Copy => try_bind(libc::XDP_COPY).map_err(|e| explain(e, "copy")),
            Bind::ZeroCopy => {
                try_bind(libc::XDP_ZEROCOPY).map_err(|e| explain(e, "zero-copy"))?;
                self.zero_copy = true;
                Ok(())
            }
            Bind::Auto => match try_bind(libc::XDP_ZEROCOPY) {
                Ok(()) => {
                    self.zero_copy = true;
                    Ok(())
                }
                Err(_) => try_bind(libc::XDP_COPY).map_err(|e| explain(e, "copy")),
            },
        }
    }

    /// True when bound in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The queue it is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Wait up to `timeout` until the socket is readable (rx) or writable (tx); false on timeout.
    pub fn wait(&self, timeout: Duration) -> Result<bool, XdpError> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: if self.rx.is_some() {
                libc::POLLIN
            } else {
                libc::POLLOUT
            },
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(XdpError::Socket {
                what: "poll on the AF_XDP socket".into(),
                err: e,
            });
        }
        Ok(r > 0)
    }

    /// Received descriptors waiting, at most `max`: read them with [`XskSocket::rx_desc`] at `0..n`, then
    /// [`XskSocket::rx_release`] them. Frames stay ours until released.
    #[inline]
    pub fn rx_ready(&self, max: u32) -> u32 {
        self.rx.as_ref().map_or(0, |r| r.ready().min(max))
    }

    /// The `i`-th waiting descriptor: (UMEM offset of the packet, its length).
    #[inline]
    pub fn rx_desc(&self, i: u32) -> (u64, u32) {
        let r = self.rx.as_ref().expect("rx socket");
        let d = r.get(r.local.wrapping_add(i));
        (d.addr, d.len)
    }

    /// The packet bytes at a UMEM offset.
    #[inline]
    pub fn frame(&self, addr: u64, len: u32) -> &[u8] {
        let end = (addr + u64::from(len)).min(self.umem.len as u64);
        let start = addr.min(end);
        // SAFETY: clamped into the UMEM; the kernel wrote the frame before it produced the descriptor.
        unsafe {
            std::slice::from_raw_parts(
                self.umem.ptr.as_ptr().add(start as usize),
                (end - start) as usize,
            )
        }
    }

    /// The 8 bytes of metadata ringcap's XDP program writes in front of a packet (its receive time on
    /// CLOCK_MONOTONIC), if the frame has room for them; they are zeroed as they are read, so a frame
    /// the program could not stamp (a driver without metadata) reads 0 next time, not a stale time.
    #[inline]
    pub fn take_meta_u64(&self, addr: u64) -> Option<u64> {
        let frame_start = addr & !(u64::from(self.frame_size) - 1);
        if addr < frame_start + 8 || addr > self.umem.len as u64 {
            return None;
        }
        // SAFETY: addr - 8 .. addr lies inside the UMEM (checked above) and before the frame's data, which
        // no slice handed out covers; the kernel does not write a frame user space holds in rx.
        unsafe {
            let p = self.umem.ptr.as_ptr().add(addr as usize - 8) as *mut u64;
            let v = p.read_unaligned();
            p.write_unaligned(0);
            Some(v)
        }
    }

    /// Give the first `n` waiting descriptors back and their frames to the fill ring.
    pub fn rx_release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        let mask = !(u64::from(self.frame_size) - 1);
        let rx = self.rx.as_mut().expect("rx socket");
        // The fill ring is as large as the rx ring and holds every frame not in rx, so there is room.
        for i in 0..n {
            let d = rx.get(rx.local.wrapping_add(i));
            let at = self.fill.local.wrapping_add(i);
            self.fill.set(at, d.addr & mask);
        }
        rx.release(n);
        self.fill.submit(n);
        if self.need_wakeup && self.fill.needs_wakeup() {
            // The driver sleeps until told that frames are back (a recvfrom of nothing tells it).
            // SAFETY: zero-length receive with no buffer.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// A free frame to build a packet in (tx), or None while every frame is in flight.
    pub fn free_frame(&mut self) -> Option<u64> {
        if self.free_frames.is_empty() {
            self.reap_completions();
        }
        self.free_frames.pop()
    }

    /// The bytes of a frame, to build a packet in (tx).
    pub fn frame_mut(&mut self, addr: u64) -> &mut [u8] {
        let fs = self.frame_size as usize;
        let start = (addr as usize).min(self.umem.len - fs);
        // SAFETY: within the UMEM; a free frame is in no ring, so the kernel does not touch it.
        unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.as_ptr().add(start), fs) }
    }

    /// Queue packets for sending: (frame offset, length) each; returns how many fit in the tx ring.
    pub fn tx_submit(&mut self, packets: &[(u64, u32)]) -> usize {
        let tx = self.tx.as_mut().expect("tx socket");
        let n = (tx.free() as usize).min(packets.len());
        for (i, &(addr, len)) in packets[..n].iter().enumerate() {
            let at = tx.local.wrapping_add(i as u32);
            tx.set(
                at,
                xdp_desc {
                    addr,
                    len,
                    options: 0,
                },
            );
        }
        tx.submit(n as u32);
        n
    }

    /// Tell the kernel to send what was submitted (needed in copy mode, or when it asks for a wakeup).
    /// False when the device dropped a frame (EBUSY).
    pub fn tx_kick(&self) -> Result<bool, XdpError> {
        let tx = self.tx.as_ref().expect("tx socket");
        if self.zero_copy && self.need_wakeup && !tx.needs_wakeup() {
            return Ok(true);
        }
        // SAFETY: zero-length send with no buffer.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // The kernel sent what its budget allowed: call again.
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {}
                // The device refused a frame (dropped it): the caller counts it.
                Some(libc::EBUSY) => return Ok(false),
                _ => {
                    return Err(XdpError::Socket {
                        what: "sendto on the AF_XDP socket".into(),
                        err: e,
                    })
                }
            }
        }
        Ok(true)
    }

    /// Descriptors in the tx ring the kernel has not taken yet.
    pub fn tx_queued(&self) -> u32 {
        let tx = self.tx.as_ref().expect("tx socket");
        tx.local.wrapping_sub(tx.cons().load(Ordering::Acquire))
    }

    /// Bytes per UMEM frame (the largest packet it can send or receive).
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Move sent frames from the completion ring back to the free list; returns how many.
    pub fn reap_completions(&mut self) -> u32 {
        let n = self.completion.ready();
        for i in 0..n {
            let addr = self.completion.get(self.completion.local.wrapping_add(i));
            self.free_frames.push(addr);
        }
        self.completion.release(n);
        n
    }

    /// Frames submitted for sending that the kernel has not completed yet.
    pub fn tx_in_flight(&self) -> u32 {
        self.frames - self.free_frames.len() as u32 - self.completion.ready()
    }

    /// The kernel's counters for this socket.
    pub fn stats(&self) -> Result<XskStats, XdpError> {
        XskSocket::stats_of(self.fd.as_raw_fd())
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for XskSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn setopt<T>(fd: RawFd, opt: libc::c_int, v: &T, what: &str) -> Result<(), XdpError> {
    // SAFETY: v is a valid T of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(os_error(what));
    }
    Ok(())
}

fn os_error(what: &str) -> XdpError {
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ENOMEM) || err.raw_os_error() == Some(libc::ENOBUFS) {
        return XdpError::Config(format!(
            "{what}: out of memory ({err}): use fewer frames (--xdp-frames) or raise RLIMIT_MEMLOCK"
        ));
    }
    XdpError::Socket {
        what: what.to_string(),
        err,
    }
}

impl XskSocket {
    /// The kernel's counters of the AF_XDP socket `fd` (for a reader that holds only the descriptor).
    pub fn stats_of(fd: RawFd) -> Result<XskStats, XdpError> {
        // SAFETY: zeroed is a valid xdp_statistics; the kernel fills it.
        let mut st: xdp_statistics = unsafe { std::mem::zeroed() };
        let mut optlen = size_of::<xdp_statistics>() as libc::socklen_t;
        // SAFETY: st is as large as optlen says.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut st as *mut xdp_statistics).cast(),
                &mut optlen,
            )
        };
        if r < 0 {
            return Err(os_error("getsockopt(XDP_STATISTICS)"));
        }
        Ok(XskStats {
            rx_dropped: st.rx_dropped,
            rx_ring_full: st.rx_ring_full,
            rx_fill_ring_empty: st.rx_fill_ring_empty_descs,
            invalid_descs: st.rx_invalid_descs + st.tx_invalid_descs,
        })
    }
}
