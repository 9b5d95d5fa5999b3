//! ringcap's XDP programs (bpf/ringcap.c), loaded and attached with aya.
//!
//! Attachment goes through a BPF link (kernel ≥ 5.9): the program stays attached only while this process
//! holds the link, so SIGINT, SIGTERM and `kill -9` all leave the interface as it was, and nothing is pinned
//! in bpffs (which is why `ip netns exec` without a mounted bpffs is no obstacle).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::str::FromStr;

use aya::maps::{Array, PerCpuArray, XskMap};
use aya::programs::{Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};

use crate::error::XdpError;
use crate::prefilter::{Prefilter, PrefilterMap};

pub(crate) static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ringcap.bpf.o"));

/// Where the kernel runs the program (`--xdp-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// In the driver, before an skb exists (XDP_FLAGS_DRV_MODE): the fast path, if the driver has it.
    #[default]
    Native,
    /// After the stack built the skb (XDP_FLAGS_SKB_MODE): any interface, no faster than a packet socket.
    Generic,
}

impl Mode {
    /// The flag value (`native`, `generic`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Generic => "generic",
        }
    }

    fn aya(self) -> XdpMode {
        match self {
            Mode::Native => XdpMode::Driver,
            Mode::Generic => XdpMode::Skb,
        }
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "native" => Ok(Mode::Native),
            "generic" => Ok(Mode::Generic),
            _ => Err(format!("unknown XDP mode '{s}': use native or generic")),
        }
    }
}

/// Packets and bytes an attached program saw (all CPUs, since it was attached).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub packets: u64,
    pub bytes: u64,
}

/// One of ringcap's programs, attached to an interface until dropped.
pub struct Program {
    ebpf: Ebpf,
    interface: String,
    mode: Mode,
    prefilter: Option<Prefilter>,
    /// Whether it writes the receive time in front of each frame ([`Program::stamps`]).
    stamps: bool,
}

/// The socket program that stamps each frame, and the one for kernels that refuse it the helper.
pub(crate) const TO_SOCKET: [&str; 2] = ["ringcap_xsk", "ringcap_xsk_unstamped"];

impl Program {
    /// `ringcap_xsk`: every packet is stamped and redirected to the AF_XDP socket of its receive queue
    /// (see [`Program::set_socket`]); queues without a socket pass packets on to the stack. With a
    /// `prefilter`, packets that cannot match it are passed on to the stack instead (and counted).
    pub fn redirect_to_sockets(
        interface: &str,
        mode: Mode,
        queues: u32,
        prefilter: Option<&Prefilter>,
    ) -> Result<Program, XdpError> {
        let value = prefilter
            .map(Prefilter::map_value)
            .transpose()
            .map_err(XdpError::Config)?;
        let mut p = Program::attach(&TO_SOCKET, interface, mode, queues.max(1), value)?;
        p.prefilter = prefilter.cloned();
        Ok(p)
    }

    /// `ringcap_drop`: count every packet and drop it in the driver.
    pub fn count_and_drop(interface: &str, mode: Mode) -> Result<Program, XdpError> {
        Program::attach(&["ringcap_drop"], interface, mode, 1, None)
    }

    /// Loads the first of `names` the kernel takes (see [`load_first`]) and attaches it.
    fn attach(
        names: &[&str],
        interface: &str,
        mode: Mode,
        queues: u32,
        prefilter: Option<PrefilterMap>,
    ) -> Result<Program, XdpError> {
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("xsks", queues)
            .load(OBJECT)
            .map_err(|e| load_error(interface, &e))?;
        // Before attaching, so the first packet already meets it.
        if let Some(value) = prefilter {
            let map = ebpf
                .map_mut("prefilter")
                .ok_or_else(|| XdpError::Load("map prefilter missing from the object".into()))?;
            let mut array: Array<_, PrefilterMap> =
                Array::try_from(map).map_err(|e| XdpError::Load(e.to_string()))?;
            array
                .set(0, value, 0)
                .map_err(|e| XdpError::Load(format!("cannot write the XDP prefilter: {e}")))?;
        }
        let name = load_first(&mut ebpf, names, interface)?;
        let prog = xdp_program(&mut ebpf, name)?;
        prog.attach(interface, mode.aya())
            .map_err(|e| attach_error(interface, mode, &e))?;
        Ok(Program {
            ebpf,
            interface: interface.to_string(),
            mode,
            prefilter: None,
            stamps: name == TO_SOCKET[0],
        })
    }

    /// Whether the program writes each frame's receive time (CLOCK_MONOTONIC) into the 8 bytes of
    /// metadata in front of it; when not (the kernel refused it `bpf_xdp_adjust_meta`), a frame's time
    /// is when user space takes its batch.
    pub fn stamps(&self) -> bool {
        self.stamps
    }

    /// The interface it is attached to.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// Where it runs.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Send the packets of receive queue `queue` to the AF_XDP socket `fd`.
    pub fn set_socket(&mut self, queue: u32, fd: &impl AsRawFd) -> Result<(), XdpError> {
        let map = self
            .ebpf
            .map_mut("xsks")
            .ok_or_else(|| XdpError::Load("map xsks missing from the object".into()))?;
        let mut xsks: XskMap<_> =
            XskMap::try_from(map).map_err(|e| XdpError::Load(e.to_string()))?;
        xsks.set(queue, fd.as_raw_fd(), 0).map_err(|e| {
            XdpError::Load(format!(
                "cannot register the AF_XDP socket of {} queue {queue}: {e}",
                self.interface
            ))
        })
    }

    /// The prefilter the program tests, if any.
    pub fn prefilter(&self) -> Option<&Prefilter> {
        self.prefilter.as_ref()
    }

    /// Packets the prefilter passed on to the stack (could not match the filter), summed over CPUs.
    pub fn left_to_stack(&self) -> Result<u64, XdpError> {
        left_to_stack(&self.ebpf)
    }

    /// What the program saw so far, summed over CPUs.
    pub fn seen(&self) -> Result<Seen, XdpError> {
        let map = self
            .ebpf
            .map("seen")
            .ok_or_else(|| XdpError::Load("map seen missing from the object".into()))?;
        let seen: PerCpuArray<_, u64> =
            PerCpuArray::try_from(map).map_err(|e| XdpError::Load(e.to_string()))?;
        let sum = |k: u32| -> Result<u64, XdpError> {
            let v = seen.get(&k, 0).map_err(|e| XdpError::Load(e.to_string()))?;
            Ok(v.iter().sum())
        };
        Ok(Seen {
            packets: sum(0)?,
            bytes: sum(1)?,
        })
    }
}

/// The errno at the bottom of an aya error, if any.
fn errno(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return io.raw_os_error();
        }
        cur = err.source();
    }
    None
}

pub(crate) fn load_error(interface: &str, e: &(dyn std::error::Error + 'static)) -> XdpError {
    match errno(e) {
        Some(libc::EPERM) | Some(libc::EACCES) => XdpError::Privileges(format!(
            "loading an XDP program for {interface} was refused: it needs root (CAP_BPF and CAP_NET_ADMIN)"
        )),
        _ => XdpError::Load(format!("cannot load ringcap's XDP program: {}", chain(e))),
    }
}

fn attach_error(interface: &str, mode: Mode, e: &(dyn std::error::Error + 'static)) -> XdpError {
    match errno(e) {
        Some(libc::EOPNOTSUPP) if mode == Mode::Native => XdpError::Unsupported(format!(
            "the driver of {interface} has no native XDP: use --xdp-mode generic (the kernel then runs the \
             program on an skb, which is no faster than --source ring)"
        )),
        Some(libc::EBUSY) | Some(libc::EEXIST) => XdpError::Busy(format!(
            "{interface} already has an XDP program attached (`ip link show {interface}` names it): stop \
             the tool that owns it, or `ip link set dev {interface} xdp off` if it was left behind"
        )),
        Some(libc::ENODEV) => XdpError::NoInterface(interface.to_string()),
        Some(libc::EPERM) | Some(libc::EACCES) => XdpError::Privileges(format!(
            "attaching an XDP program to {interface} was refused: it needs root (CAP_NET_ADMIN)"
        )),
        _ => {
            let msg = chain(e);
            if msg.contains("unknown network interface") || msg.contains("UnknownInterface") {
                XdpError::NoInterface(interface.to_string())
            } else {
                XdpError::Load(format!("cannot attach ringcap's XDP program to {interface}: {msg}"))
            }
        }
    }
}

/// An error and its sources on one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(err) = cur {
        let m = err.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = err.source();
    }
    s
}

/// The prefilter's per-CPU count of frames left to the stack, summed, from a loaded object.
pub(crate) fn left_to_stack(ebpf: &Ebpf) -> Result<u64, XdpError> {
    let map = ebpf
        .map("left_to_stack")
        .ok_or_else(|| XdpError::Load("map left_to_stack missing from the object".into()))?;
    let counts: PerCpuArray<_, u64> =
        PerCpuArray::try_from(map).map_err(|e| XdpError::Load(e.to_string()))?;
    let v = counts
        .get(&0, 0)
        .map_err(|e| XdpError::Load(e.to_string()))?;
    Ok(v.iter().sum())
}

/// Loads the XDP program `name` of a loaded object (not attached) and returns its own copy of the
/// program's fd, for BPF_PROG_TEST_RUN; `what` names the caller in a load error.
pub(crate) fn load_for_test_run(
    ebpf: &mut Ebpf,
    names: &[&str],
    what: &str,
) -> Result<OwnedFd, XdpError> {
    let name = load_first(ebpf, names, what)?;
    xdp_program(ebpf, name)?
        .fd()
        .map_err(|e| XdpError::Load(e.to_string()))?
        .as_fd()
        .try_clone_to_owned()
        .map_err(|err| XdpError::Socket {
            what: "dup of the program fd".into(),
            err,
        })
}

fn xdp_program<'e>(ebpf: &'e mut Ebpf, name: &str) -> Result<&'e mut Xdp, XdpError> {
    ebpf.program_mut(name)
        .ok_or_else(|| XdpError::Load(format!("program {name} missing from the object")))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| XdpError::Load(e.to_string()))
}

/// Loads the first of `names` into the kernel and returns its name. A later name is tried only when
/// the verifier refused the earlier one `bpf_xdp_adjust_meta` (the one helper a fallback leaves out);
/// any other refusal is the caller's error. `what` names the caller in a load error.
pub(crate) fn load_first<'n>(
    ebpf: &mut Ebpf,
    names: &[&'n str],
    what: &str,
) -> Result<&'n str, XdpError> {
    let mut last = None;
    for &name in names {
        match xdp_program(ebpf, name)?.load() {
            Ok(()) => return Ok(name),
            Err(e) if chain(&e).contains("bpf_xdp_adjust_meta") => {
                last = Some(load_error(what, &e))
            }
            Err(e) => return Err(load_error(what, &e)),
        }
    }
    Err(last.unwrap_or_else(|| XdpError::Load("no program to load".into())))
}
