//! Opening sources: one socket, or N sockets in a PACKET_FANOUT group, with the filter in place before
//! any packet can reach a socket.
//!
//! Set-up order per socket, and why:
//! 1. `socket(AF_PACKET, SOCK_RAW, 0)`: protocol 0 receives nothing yet.
//! 2. Attach the filter. Alone: the real one. In a fanout group: a drop-all program, because a socket
//!    that is bound but has not joined the group yet receives every packet *in addition to* the group,
//!    i.e. duplicates; with drop-all those copies are discarded.
//! 3. Ring or receive-buffer set-up, promiscuous membership, then `bind` (packets start to flow).
//! 4. Group: join the fanout (the first socket asks the kernel for an unused id with
//!    PACKET_FANOUT_FLAG_UNIQUEID, so two groups in one process, e.g. parallel tests, never collide; a
//!    pid-derived id could), then, once every socket has joined, swap drop-all for the real filter.
//!    Nothing unfiltered ever reaches a ring; packets steered to a socket in the short swap window are
//!    not captured, which is the same as arriving before the capture started.

use std::os::fd::{AsRawFd, OwnedFd};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use libc::sock_filter;

use crate::batch::{Batch, BatchSource};
use crate::copy::{CopyConfig, CopySource};
use crate::counters::{Counters, KernelStats};
use crate::error::CaptureError;
use crate::packet::Packet;
use crate::ring::{RingConfig, RingSource};
use crate::sys;
use crate::tstamp::{self, TimestampType};
use crate::xdp::XdpSource;
use bpf as filter;
use bpf::MAX_SNAPLEN;

/// Which implementation reads the packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SourceKind {
    /// TPACKET_V3 ring, zero copy.
    #[default]
    Ring,
    /// recvmmsg copies (the classic baseline).
    Copy,
    /// AF_XDP sockets fed by an XDP program, one per receive queue (see [`crate::XdpSource`]).
    Xdp,
}

impl FromStr for SourceKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ring" => Ok(SourceKind::Ring),
            "copy" => Ok(SourceKind::Copy),
            "xdp" => Ok(SourceKind::Xdp),
            _ => Err(format!("unknown source '{s}': use ring, copy or xdp")),
        }
    }
}

/// How the kernel spreads packets over the sockets of a fanout group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FanoutMode {
    /// By flow hash: a flow always lands on the same socket.
    #[default]
    Hash,
    /// Round robin.
    Lb,
    /// By the CPU that received the packet.
    Cpu,
    /// By the NIC receive queue.
    Qm,
}

impl FanoutMode {
    fn kernel_value(self) -> u32 {
        match self {
            FanoutMode::Hash => libc::PACKET_FANOUT_HASH,
            FanoutMode::Lb => libc::PACKET_FANOUT_LB,
            FanoutMode::Cpu => libc::PACKET_FANOUT_CPU,
            FanoutMode::Qm => libc::PACKET_FANOUT_QM,
        }
    }
}

impl FromStr for FanoutMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "hash" => Ok(FanoutMode::Hash),
            "lb" => Ok(FanoutMode::Lb),
            "cpu" => Ok(FanoutMode::Cpu),
            "qm" => Ok(FanoutMode::Qm),
            _ => Err(format!(
                "unknown fanout mode '{s}': use hash, lb, cpu or qm"
            )),
        }
    }
}

/// PACKET_FANOUT settings for a group of sockets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fanout {
    /// Distribution mode.
    pub mode: FanoutMode,
    /// When the chosen socket is full, try the next one (PACKET_FANOUT_FLAG_ROLLOVER).
    pub rollover: bool,
    /// Reassemble IP fragments before hashing, so fragments follow their flow (hash mode only).
    pub defrag: bool,
}

impl Fanout {
    fn type_flags(self) -> u32 {
        let mut v = self.mode.kernel_value();
        if self.rollover {
            v |= libc::PACKET_FANOUT_FLAG_ROLLOVER;
        }
        if self.defrag && self.mode == FanoutMode::Hash {
            v |= libc::PACKET_FANOUT_FLAG_DEFRAG;
        }
        v
    }
}

/// Everything needed to open a source.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// Interface name (`-i`).
    pub interface: String,
    /// Ring or copy (`--source`).
    pub kind: SourceKind,
    /// Bytes kept per packet (`-s`); 262144 keeps whole packets.
    pub snaplen: u32,
    /// Put the interface in promiscuous mode (on unless `-p`).
    pub promiscuous: bool,
    /// Compiled filter ([`crate::compile_filter`]); its accepting returns are set to `snaplen`.
    pub filter: Option<Vec<sock_filter>>,
    /// Ring geometry (ring source); `buffer_bytes` is per socket.
    pub ring: RingConfig,
    /// Batch and receive buffer (copy source).
    pub copy: CopyConfig,
    /// Fanout settings, used when more than one socket is opened (default: hash).
    pub fanout: Option<Fanout>,
    /// Which clock stamps the packets (`-j`); hardware types need the ring source.
    pub timestamps: TimestampType,
    /// Where the XDP program runs (xdp source).
    pub xdp_mode: xdp::Mode,
    /// UMEM and ring sizes, copy or zero copy (xdp source).
    pub xsk: xdp::XskConfig,
    /// The XDP prefilter for `filter` when it is in the 5-tuple subset (xdp source): frames that cannot
    /// match stay with the stack. `filter` still runs on every frame the sockets get.
    pub prefilter: Option<xdp::Prefilter>,
}

impl SourceConfig {
    /// Defaults for `interface`: ring, whole packets, promiscuous, no filter, 64 MiB per socket.
    pub fn new(interface: &str) -> SourceConfig {
        SourceConfig {
            interface: interface.to_string(),
            kind: SourceKind::Ring,
            snaplen: MAX_SNAPLEN,
            promiscuous: true,
            filter: None,
            ring: RingConfig::default(),
            copy: CopyConfig::default(),
            fanout: None,
            timestamps: TimestampType::Host,
            xdp_mode: xdp::Mode::default(),
            xsk: xdp::XskConfig::default(),
            prefilter: None,
        }
    }

    /// Set `-B` (total buffer per socket, KiB) for both source kinds.
    pub fn set_buffer_kib(&mut self, kib: usize) {
        self.ring.buffer_bytes = kib.saturating_mul(1024);
        self.copy.rcvbuf_bytes = kib.saturating_mul(1024);
    }

    /// The program the kernel will run: the filter with `snaplen` in its returns; without a filter, a
    /// single `ret #snaplen` when the snaplen is short, so the kernel copies only what we keep.
    pub(crate) fn program(&self) -> Option<Vec<sock_filter>> {
        match &self.filter {
            Some(f) => {
                let mut f = f.clone();
                filter::set_snaplen(&mut f, self.snaplen);
                Some(f)
            }
            None if self.snaplen < MAX_SNAPLEN => Some(filter::accept_all(self.snaplen)),
            None => None,
        }
    }
}

/// A capture source: the same loop drives either kind.
pub enum Source {
    /// TPACKET_V3 ring.
    Ring(RingSource),
    /// recvmmsg copies.
    Copy(CopySource),
    /// One AF_XDP socket (boxed: its UMEM bookkeeping makes it much larger than the others).
    Xdp(Box<XdpSource>),
}

impl Source {
    /// Open one socket (a fanout group of one if `cfg.fanout` is set).
    pub fn open(cfg: &SourceConfig) -> Result<Source, CaptureError> {
        let mut v = Source::open_group(cfg, 1)?;
        Ok(v.remove(0))
    }

    /// Open `n` sockets; with `n > 1` (or `cfg.fanout` set) they form one PACKET_FANOUT group, one per
    /// capture thread. Sockets belong to the caller's current network namespace.
    pub fn open_group(cfg: &SourceConfig, n: usize) -> Result<Vec<Source>, CaptureError> {
        if n == 0 || n > 1024 {
            return Err(CaptureError::Config(format!(
                "thread count {n} must be between 1 and 1024"
            )));
        }
        if cfg.snaplen == 0 {
            return Err(CaptureError::Config(
                "snaplen 0: give -s at least 1 (262144 keeps whole packets)".into(),
            ));
        }
        if cfg.timestamps.is_hardware() && cfg.kind == SourceKind::Copy {
            // The copy source reads SO_TIMESTAMPNS, which is always the software stamp.
            return Err(CaptureError::Config(format!(
                "-j {} needs the ring source: drop --source copy",
                cfg.timestamps.name()
            )));
        }
        if cfg.kind == SourceKind::Xdp {
            return Source::open_xdp(cfg, n);
        }
        let fanout = match (n, cfg.fanout) {
            (_, Some(f)) => Some(f),
            (1, None) => None,
            (_, None) => Some(Fanout::default()),
        };
        let program = cfg.program();
        let mut sources = Vec::with_capacity(n);
        for _ in 0..n {
            let fd = sys::packet_socket()?;
            let ifc = sys::interface_up(&cfg.interface)?;
            if ifc.hw_type == libc::ARPHRD_LOOPBACK {
                // Loopback shows every packet twice, leaving and arriving; libpcap drops the outgoing
                // copy per packet in user space, the kernel can do it before the ring.
                sys::set_opt(
                    fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    libc::PACKET_IGNORE_OUTGOING,
                    &(1 as libc::c_int),
                    "setsockopt(PACKET_IGNORE_OUTGOING)",
                )?;
            }
            let ifindex = ifc.index;
            match (&fanout, &program) {
                (Some(_), _) => sys::attach_filter(fd.as_raw_fd(), &filter::drop_all())?,
                (None, Some(p)) => sys::attach_filter(fd.as_raw_fd(), p)?,
                (None, None) => {}
            }
            tstamp::select(fd.as_raw_fd(), &cfg.interface, cfg.timestamps)?;
            let src = match cfg.kind {
                SourceKind::Ring => Source::Ring(RingSource::create(fd, &cfg.ring, cfg.snaplen)?),
                SourceKind::Copy => Source::Copy(CopySource::create(fd, &cfg.copy, cfg.snaplen)?),
                SourceKind::Xdp => unreachable!("opened by open_xdp"),
            };
            let raw = src.fd().as_raw_fd();
            if cfg.promiscuous {
                sys::set_promiscuous(raw, ifindex)?;
            }
            sys::bind_all(raw, ifindex)?;
            sources.push(src);
        }
        if let Some(f) = fanout {
            let flags = f.type_flags();
            let first = sources[0].fd().as_raw_fd();
            let id = sys::join_fanout(first, 0, flags | libc::PACKET_FANOUT_FLAG_UNIQUEID)?;
            for s in &sources[1..] {
                sys::join_fanout(s.fd().as_raw_fd(), id, flags)?;
            }
            for s in &sources {
                let raw = s.fd().as_raw_fd();
                match &program {
                    Some(p) => sys::attach_filter(raw, p)?,
                    None => sys::detach_filter(raw)?,
                }
            }
        }
        Ok(sources)
    }

    /// One AF_XDP socket per receive queue: the thread count must be the queue count.
    fn open_xdp(cfg: &SourceConfig, n: usize) -> Result<Vec<Source>, CaptureError> {
        if cfg.timestamps != TimestampType::Host {
            return Err(CaptureError::Config(format!(
                "-j {} needs the ring source: the xdp source stamps packets in its XDP program (host clock)",
                cfg.timestamps.name()
            )));
        }
        let ifc = sys::interface_up(&cfg.interface)?;
        let queues = xdp::rx_queues(&cfg.interface);
        if n != queues as usize {
            return Err(CaptureError::Config(format!(
                "{} has {queues} receive queue{}; --source xdp reads each with its own socket and thread: \
                 use --threads {queues}",
                cfg.interface,
                if queues == 1 { "" } else { "s" }
            )));
        }
        // The XDP program sees only what the NIC accepts: promiscuous membership is held by a packet socket
        // that is never bound (so it receives nothing) and lives as long as the sources.
        let promisc = if cfg.promiscuous {
            let fd = sys::packet_socket()?;
            sys::set_promiscuous(fd.as_raw_fd(), ifc.index)?;
            Some(fd)
        } else {
            None
        };
        Ok(XdpSource::open_all(promisc, cfg, ifc.index as u32, queues)?
            .into_iter()
            .map(|s| Source::Xdp(Box::new(s)))
            .collect())
    }

    fn fd(&self) -> &OwnedFd {
        match self {
            Source::Ring(r) => r.fd(),
            Source::Copy(c) => c.fd(),
            Source::Xdp(_) => unreachable!("xdp sources are not in fanout groups"),
        }
    }

    /// The XDP program feeding this source (xdp source), shared by the sources of one interface.
    pub fn xdp_program(&self) -> Option<Arc<xdp::Program>> {
        match self {
            Source::Xdp(x) => Some(x.program()),
            _ => None,
        }
    }

    /// True for an AF_XDP socket bound in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        matches!(self, Source::Xdp(x) if x.is_zero_copy())
    }

    /// Which kind this is.
    pub fn kind(&self) -> SourceKind {
        match self {
            Source::Ring(_) => SourceKind::Ring,
            Source::Copy(_) => SourceKind::Copy,
            Source::Xdp(_) => SourceKind::Xdp,
        }
    }

    /// Wait up to `timeout` for packets and hand one batch (a ring block or a recvmmsg batch) to `f`,
    /// packet by packet. Returns how many packets were handed out (0 on timeout).
    #[inline]
    pub fn for_each_batch(
        &mut self,
        timeout: Duration,
        mut f: impl FnMut(&Packet),
    ) -> Result<usize, CaptureError> {
        let Some(batch) = self.next_batch(timeout)? else {
            return Ok(0);
        };
        let mut n = 0;
        for p in batch.packets() {
            f(&p);
            n += 1;
        }
        Ok(n)
    }

    /// Wait up to `timeout` for the next batch (a ring block or a recvmmsg batch); `Ok(None)` on timeout.
    #[inline]
    pub fn next_batch(&mut self, timeout: Duration) -> Result<Option<Batch<'_>>, CaptureError> {
        match self {
            Source::Ring(r) => r.next_batch(timeout),
            Source::Copy(c) => c.next_batch(timeout),
            Source::Xdp(x) => x.next_batch(timeout),
        }
    }

    /// Live counters, shareable with a stats thread.
    pub fn counters(&self) -> Arc<Counters> {
        match self {
            Source::Ring(r) => r.counters(),
            Source::Copy(c) => c.counters(),
            Source::Xdp(x) => x.counters(),
        }
    }

    /// The kernel's counters since open (accumulated; see [`Counters::kernel_stats`]).
    pub fn kernel_stats(&self) -> KernelStats {
        self.counters().kernel_stats()
    }
}

impl BatchSource for Source {
    fn next_batch(&mut self, timeout: Duration) -> Result<Option<Batch<'_>>, CaptureError> {
        Source::next_batch(self, timeout)
    }

    fn counters(&self) -> Arc<Counters> {
        Source::counters(self)
    }
}
