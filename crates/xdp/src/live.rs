//! Sending from inside the kernel: `BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` (Linux ≥ 5.18), the
//! way xdp-tools' `xdp-trafficgen` sends. Each call runs `ringcap_tx` (it returns XDP_TX) `repeat` times on
//! copies of one frame in a kernel page pool; the test run turns XDP_TX into a redirect to the context's
//! `ingress_ifindex`, so every run transmits the frame on that interface through its `ndo_xdp_xmit`, without
//! an skb, a socket or a qdisc. The program is loaded, never attached: nothing is left behind on exit.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use aya::{Ebpf, EbpfLoader};

use crate::error::XdpError;
use crate::program::{load_error, load_for_test_run, OBJECT};

/// `bpf(2)` command number of BPF_PROG_TEST_RUN (uapi `enum bpf_cmd`).
pub(crate) const BPF_PROG_TEST_RUN: libc::c_long = 10;
/// uapi `BPF_F_TEST_XDP_LIVE_FRAMES`.
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// The kernel's largest batch (`TEST_XDP_MAX_BATCH`).
pub const LIVE_MAX_BATCH: u32 = 256;

/// `union bpf_attr`'s `test` member, laid out as in the uapi header (the kernel zero-checks the rest).
#[repr(C, align(8))]
#[derive(Default)]
pub(crate) struct TestRunAttr {
    pub(crate) prog_fd: u32,
    pub(crate) retval: u32,
    pub(crate) data_size_in: u32,
    pub(crate) data_size_out: u32,
    pub(crate) data_in: u64,
    pub(crate) data_out: u64,
    pub(crate) repeat: u32,
    pub(crate) duration: u32,
    pub(crate) ctx_size_in: u32,
    pub(crate) ctx_size_out: u32,
    pub(crate) ctx_in: u64,
    pub(crate) ctx_out: u64,
    pub(crate) flags: u32,
    pub(crate) cpu: u32,
    pub(crate) batch_size: u32,
    /// Explicit, so it is zero: the kernel refuses (EINVAL) an attr with non-zero bytes past the last field.
    pub(crate) _pad: u32,
}

/// uapi `struct xdp_md`, the context given to the run: where the frame "arrived", which is where XDP_TX
/// sends it.
#[repr(C)]
#[derive(Default)]
pub(crate) struct XdpMd {
    pub(crate) data: u32,
    pub(crate) data_end: u32,
    pub(crate) data_meta: u32,
    pub(crate) ingress_ifindex: u32,
    pub(crate) rx_queue_index: u32,
    pub(crate) egress_ifindex: u32,
}

/// `ringcap_tx`, loaded for test runs that send on one interface.
pub struct LiveSender {
    // Holds the program (and so its fd) alive.
    _ebpf: Ebpf,
    prog: OwnedFd,
    interface: String,
    ifindex: u32,
    queue: u32,
    batch: u32,
}

impl LiveSender {
    /// Loads `ringcap_tx` for sending on `interface` (index `ifindex`) as if from its receive queue `queue`,
    /// `batch` frames per kernel batch (1-256).
    pub fn new(
        interface: &str,
        ifindex: u32,
        queue: u32,
        batch: u32,
    ) -> Result<LiveSender, XdpError> {
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("xsks", 1)
            .load(OBJECT)
            .map_err(|e| load_error(interface, &e))?;
        let fd = load_for_test_run(&mut ebpf, &["ringcap_tx"], interface)?;
        Ok(LiveSender {
            _ebpf: ebpf,
            prog: fd,
            interface: interface.to_string(),
            ifindex,
            queue,
            batch: batch.clamp(1, LIVE_MAX_BATCH),
        })
    }

    /// Sends `frame` `repeat` times (one `bpf(BPF_PROG_TEST_RUN)` call). The kernel reports no transmit
    /// drops here: the interface's `tx_dropped` counts them on veth.
    pub fn send(&self, frame: &[u8], repeat: u32) -> Result<(), XdpError> {
        let mut ctx = XdpMd {
            data_end: frame.len() as u32,
            ingress_ifindex: self.ifindex,
            rx_queue_index: self.queue,
            ..XdpMd::default()
        };
        let mut attr = TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            repeat,
            ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
            ctx_in: &mut ctx as *mut XdpMd as u64,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: self.batch,
            ..TestRunAttr::default()
        };
        loop {
            // SAFETY: attr and the memory it points to (frame, ctx) outlive the call; the kernel only reads
            // data_in and ctx_in (data_out and ctx_out are null, as live mode requires).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    BPF_PROG_TEST_RUN,
                    &mut attr as *mut TestRunAttr,
                    std::mem::size_of::<TestRunAttr>() as u32,
                )
            };
            if r == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            // EINTR only comes before any frame went (callers block signals on the sending thread, so a
            // run in progress is never interrupted by one): retry.
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(self.run_error(err, frame.len()));
        }
    }

    fn run_error(&self, err: io::Error, len: usize) -> XdpError {
        let ifc = &self.interface;
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        match err.raw_os_error() {
            // Root and still refused: the kernel (or the sandbox it runs in) forbids live frames; no
            // privilege helps, so say which backends still work.
            Some(libc::EPERM) | Some(libc::EACCES) if root => {
                XdpError::Unsupported(format!(
                    "this kernel refused --backend xdp-live on {ifc} (BPF_PROG_TEST_RUN with live frames: \
                     {err}) although ringcap runs as root: a policy of the kernel or of its sandbox forbids \
                     it; use --backend xdp (AF_XDP) or --backend sendmmsg"
                ))
            }
            Some(libc::EPERM) | Some(libc::EACCES) => XdpError::Privileges(format!(
                "BPF_PROG_TEST_RUN on {ifc} was refused: it needs root (CAP_BPF, CAP_NET_ADMIN)"
            )),
            Some(libc::ENODEV) => XdpError::NoInterface(ifc.clone()),
            Some(libc::EINVAL) if !kernel_at_least(5, 18) => XdpError::Unsupported(format!(
                "--backend xdp-live needs Linux 5.18 or later (BPF_F_TEST_XDP_LIVE_FRAMES), this is {}: use \
                 --backend xdp or sendmmsg",
                kernel_release()
            )),
            Some(libc::EINVAL) if len > 3000 => XdpError::Unsupported(format!(
                "--backend xdp-live sends frames that fit in one page with the kernel's headroom (about 3.5 KB), \
                 and this one is {len} bytes: lower the MTU of {ifc} or use --backend xdp"
            )),
            _ => XdpError::Socket {
                what: format!(
                    "BPF_PROG_TEST_RUN (live frames) on {ifc} queue {} with a {len}-byte frame",
                    self.queue
                ),
                err,
            },
        }
    }
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Whether the running kernel is at least `major.minor` (true if the release cannot be read).
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let rel = kernel_release();
    let mut parts = rel.split(|c: char| !c.is_ascii_digit());
    let (Some(Ok(a)), Some(Ok(b))) = (
        parts.next().map(str::parse::<u32>),
        parts.next().map(str::parse::<u32>),
    ) else {
        return true;
    };
    (a, b) >= (major, minor)
}
