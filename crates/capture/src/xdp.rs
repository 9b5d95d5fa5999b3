//! `--source xdp`: one AF_XDP socket per receive queue, fed by ringcap's XDP program in the driver, so a
//! packet reaches us without the kernel ever building an skb for it (native mode).
//!
//! What differs from the ring source, and why:
//! * The XDP program takes the packets of the queues it serves away from the network stack (an AF_XDP
//!   socket receives, it does not watch). That is what a tap or span port wants; on an interface that carries
//!   this host's own traffic, use the ring source.
//! * The tcpdump filter runs here, in user space, on each frame (libpcap's `bpf_filter`, the same program the
//!   ring source gives the kernel); what it rejects is counted (`filtered_out`), not silently lost. When the
//!   expression is in the 5-tuple subset, the XDP program also tests a prefilter (`xdp::Prefilter`) and
//!   leaves the frames that cannot match to the stack, so they cost neither a copy nor a wake-up here; the
//!   full filter still runs on what arrives, so the capture is exactly tcpdump's either way.
//! * Time stamps: the program writes CLOCK_MONOTONIC at XDP entry into 8 bytes of metadata in front of the
//!   frame; each batch converts them to wall-clock time with one offset read when the batch is taken. On a
//!   kernel that refuses XDP programs `bpf_xdp_adjust_meta`, the unstamped program runs and a frame's time
//!   is when its batch is taken (`Program::stamps`).
//! * Drop stages come from the socket's XDP_STATISTICS: rx ring full (we fell behind), fill ring empty (no
//!   free frame), other.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use libc::sock_filter;
use xdp::{Program, XdpError, XskSocket};

use crate::batch::Batch;
use crate::counters::{BatchTally, Counters};
use crate::error::CaptureError;
use crate::packet::{clip_len, Packet};
use crate::source::SourceConfig;
use bpf as filter;

/// Descriptors taken from the rx ring at once.
const BATCH: u32 = 256;

/// How long a reader woken for only a few frames waits for more. Far below the ring's fill time at any rate
/// where it matters (16 k frames at 14 Mpps last 1.2 ms).
const GATHER: Duration = Duration::from_micros(200);

/// One accepted packet of the current batch.
#[derive(Clone, Copy, Default)]
struct Accepted {
    addr: u64,
    wire_len: u32,
    caplen: u32,
    ts_ns: u64,
}

/// The AF_XDP source of one receive queue.
pub struct XdpSource {
    socket: XskSocket,
    /// Shared by the sources of one interface; attached while any of them lives.
    program: Arc<Program>,
    /// The packet socket holding promiscuous membership, if asked for.
    _promisc: Option<Arc<OwnedFd>>,
    filter: Option<Vec<sock_filter>>,
    snaplen: u32,
    accepted: Vec<Accepted>,
    counters: Arc<Counters>,
}

impl XdpSource {
    /// Open one socket per queue of `interface` (`queues` sockets, queue 0 upwards) and attach the program.
    pub(crate) fn open_all(
        promisc: Option<OwnedFd>,
        cfg: &SourceConfig,
        ifindex: u32,
        queues: u32,
    ) -> Result<Vec<XdpSource>, CaptureError> {
        let (interface, mode, xsk, snaplen) = (&cfg.interface, cfg.xdp_mode, &cfg.xsk, cfg.snaplen);
        let filter = cfg.program();
        let mut program =
            Program::redirect_to_sockets(interface, mode, queues, cfg.prefilter.as_ref())
                .map_err(xdp_error)?;
        let mut sockets = Vec::with_capacity(queues as usize);
        for q in 0..queues {
            let s = XskSocket::rx(ifindex, q, xsk).map_err(xdp_error)?;
            program.set_socket(q, &s).map_err(xdp_error)?;
            sockets.push(s);
        }
        let program = Arc::new(program);
        let promisc = promisc.map(Arc::new);
        Ok(sockets
            .into_iter()
            .map(|socket| {
                let counters = Arc::new(Counters::for_xsk(socket.as_raw_fd()));
                XdpSource {
                    socket,
                    program: Arc::clone(&program),
                    _promisc: promisc.clone(),
                    filter: filter.clone(),
                    snaplen,
                    accepted: Vec::with_capacity(BATCH as usize),
                    counters,
                }
            })
            .collect())
    }

    /// The receive queue this source reads.
    pub fn queue(&self) -> u32 {
        self.socket.queue()
    }

    /// True when the socket is bound in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.socket.is_zero_copy()
    }

    /// The XDP program (shared by the sources of one interface; attached while any holder lives).
    pub fn program(&self) -> Arc<Program> {
        Arc::clone(&self.program)
    }

    /// Live counters.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// Wait up to `timeout` for packets; the batch holds the frames until dropped.
    pub fn next_batch(&mut self, timeout: Duration) -> Result<Option<Batch<'_>>, CaptureError> {
        let mut n = self.socket.rx_ready(BATCH);
        if n == 0 {
            self.counters.add_poll();
            if !self.socket.wait(timeout).map_err(xdp_error)? {
                return Ok(None);
            }
            n = self.socket.rx_ready(BATCH);
            if n < BATCH / 4 {
                // Woken for a handful of frames: let a batch gather first, as the ring source waits for a
                // block (on veth a wake-up per ~10 frames cost more CPU than the frames; BENCHMARKS.md).
                std::thread::sleep(GATHER);
                n = self.socket.rx_ready(BATCH);
            }
            if n == 0 {
                return Ok(None);
            }
        }
        // Monotonic stamps from the program, wall-clock time for the file: one offset per batch.
        let offset = sys::now_ns().wrapping_sub(sys::monotonic_ns());
        let now = sys::now_ns();
        let stamped = self.program.stamps();
        self.accepted.clear();
        let mut tally = BatchTally::default();
        for i in 0..n {
            let (addr, len) = self.socket.rx_desc(i);
            let data = self.socket.frame(addr, len);
            let keep = match &self.filter {
                Some(f) => filter::run_filter(f, data, len) != 0,
                None => true,
            };
            if !keep {
                tally.filtered += 1;
                continue;
            }
            let ts_ns = if stamped {
                self.socket
                    .take_meta_u64(addr)
                    .filter(|&m| m != 0)
                    .map_or(now, |m| m.wrapping_add(offset))
            } else {
                now
            };
            let caplen = clip_len(data.len(), self.snaplen, false) as u32;
            tally.packets += 1;
            tally.wire_bytes += u64::from(len);
            tally.captured_bytes += u64::from(caplen);
            self.accepted.push(Accepted {
                addr,
                wire_len: len,
                caplen,
                ts_ns,
            });
        }
        self.counters.add_batch(&tally);
        Ok(Some(Batch::xdp(XdpBatch {
            socket: &mut self.socket,
            accepted: &self.accepted,
            taken: n,
        })))
    }
}

impl Drop for XdpSource {
    fn drop(&mut self) {
        self.counters.close();
    }
}

/// The frames of one batch, on loan from the UMEM; dropping it gives them back to the fill ring.
pub(crate) struct XdpBatch<'a> {
    socket: &'a mut XskSocket,
    accepted: &'a [Accepted],
    /// Descriptors taken from the rx ring (accepted or filtered out).
    taken: u32,
}

impl<'a> XdpBatch<'a> {
    pub(crate) fn len(&self) -> usize {
        self.accepted.len()
    }

    pub(crate) fn packet(&self, i: usize) -> Packet<'_> {
        let a = self.accepted[i];
        Packet {
            ts_ns: a.ts_ns,
            wire_len: a.wire_len,
            data: self.socket.frame(a.addr, a.caplen),
            vlan: None,
        }
    }
}

impl Drop for XdpBatch<'_> {
    fn drop(&mut self) {
        self.socket.rx_release(self.taken);
    }
}

/// The capture error for an XDP one (a missing interface stays a missing interface).
pub fn xdp_error(e: XdpError) -> CaptureError {
    match e {
        XdpError::NoInterface(name) => CaptureError::NoSuchInterface {
            name,
            available: ::sys::interface_names(),
        },
        // What the driver cannot do or what the flags asked wrongly is a setting to change: exit 2.
        e @ (XdpError::Unsupported(_) | XdpError::Busy(_) | XdpError::Config(_)) => {
            CaptureError::Config(e.to_string())
        }
        other => CaptureError::Xdp(other.to_string()),
    }
}
