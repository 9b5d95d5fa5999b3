//! The Linux plumbing ringcap's crates share: packet sockets, interface lookup, thread pinning, clocks,
//! privileges, secret files, the mode and group of the files ringcap writes.
//! Thin wrappers that return `io::Error`; callers add what the failure means for them.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

mod accounts;
mod files;
mod privileges;
mod secret;
pub use files::{
    apply_file_group, create_data_file, data_file_mode, file_group, group_id, join_file_group,
    may_use_group, share_files_with_group,
};
pub use privileges::{
    effective_capabilities, keep_only_capabilities, switch_user, User, CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH,
};
pub use secret::{read_private_file, PrivateDir, SecretFileError};

/// Opens an AF_PACKET SOCK_RAW socket with protocol 0: it receives nothing until it is bound to a
/// protocol, so no packet reaches it before its filter and ring are in place (needs CAP_NET_RAW).
pub fn packet_socket() -> io::Result<OwnedFd> {
    socket(libc::AF_PACKET, libc::SOCK_RAW)
}

fn socket(domain: libc::c_int, ty: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An interface as seen from the calling thread's network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Name.
    pub name: String,
    /// Index (`sll_ifindex`).
    pub index: i32,
    /// MTU (the largest IP packet).
    pub mtu: u32,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// Hardware type (`ARPHRD_*`: 1 Ethernet, 772 loopback...).
    pub hw_type: u16,
    /// Hardware address (the first 6 bytes: the MAC address of an Ethernet interface).
    pub mac: [u8; 6],
}

impl Interface {
    /// Looks `name` up through ioctls, which see this thread's namespace (sysfs may not). A name that
    /// does not exist (or cannot, being empty or too long) gives `ErrorKind::NotFound`.
    pub fn lookup(name: &str) -> io::Result<Interface> {
        let not_found =
            || io::Error::new(io::ErrorKind::NotFound, format!("no interface {name:?}"));
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(not_found());
        }
        let cname = CString::new(name).map_err(|_| not_found())?;
        // SAFETY: cname is NUL-terminated.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if index == 0 {
            return Err(not_found());
        }
        let fd = socket(libc::AF_INET, libc::SOCK_DGRAM)?;
        let ioctl = |request| -> io::Result<libc::ifreq> {
            // SAFETY: a zeroed ifreq is valid; the name fits (checked above) and stays NUL-terminated.
            let mut req: libc::ifreq = unsafe { zeroed() };
            for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
                *d = s as libc::c_char;
            }
            // SAFETY: the SIOCGIF* requests used here fill one member of a valid ifreq.
            if unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut req) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(req)
        };
        // SAFETY: each ioctl set the member read.
        let (mtu, flags, hwaddr) = unsafe {
            (
                ioctl(libc::SIOCGIFMTU)?.ifr_ifru.ifru_mtu,
                ioctl(libc::SIOCGIFFLAGS)?.ifr_ifru.ifru_flags,
                ioctl(libc::SIOCGIFHWADDR)?.ifr_ifru.ifru_hwaddr,
            )
        };
        let mut mac = [0u8; 6];
        for (m, b) in mac.iter_mut().zip(hwaddr.sa_data) {
            *m = b as u8;
        }
        Ok(Interface {
            name: name.to_string(),
            index: index as i32,
            mtu: mtu as u32,
            up: flags & libc::IFF_UP as libc::c_short != 0,
            hw_type: hwaddr.sa_family,
            mac,
        })
    }
}

/// Names of the interfaces in the caller's network namespace.
pub fn interface_names() -> Vec<String> {
    let mut names = Vec::new();
    // SAFETY: if_nameindex returns an array terminated by a zero entry, freed with if_freenameindex.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return names;
        }
        let mut p = list;
        while (*p).if_index != 0 && !(*p).if_name.is_null() {
            names.push(CStr::from_ptr((*p).if_name).to_string_lossy().into_owned());
            p = p.add(1);
        }
        libc::if_freenameindex(list);
    }
    names
}

/// Transmit counters of an interface: 32-bit, so callers take differences with `wrapping_sub`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// `tx_packets`.
    pub packets: u32,
    /// `tx_dropped`.
    pub dropped: u32,
}

/// The transmit counters of interface `name` (`rtnl_link_stats` through getifaddrs, so in the caller's
/// network namespace).
pub fn interface_tx_counters(name: &str) -> io::Result<TxCounters> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = None;
    let mut p = list;
    // SAFETY: a linked list from getifaddrs; for AF_PACKET entries ifa_data is a `rtnl_link_stats`, whose
    // second u32 is tx_packets and eighth tx_dropped.
    unsafe {
        while !p.is_null() {
            let a = &*p;
            if !a.ifa_addr.is_null()
                && i32::from((*a.ifa_addr).sa_family) == libc::AF_PACKET
                && !a.ifa_data.is_null()
                && CStr::from_ptr(a.ifa_name).to_bytes() == name.as_bytes()
            {
                let stats = a.ifa_data as *const u32;
                found = Some(TxCounters {
                    packets: *stats.add(1),
                    dropped: *stats.add(7),
                });
                break;
            }
            p = a.ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

/// Pins the calling thread to one CPU (sched_setaffinity). Allocates nothing, so a child may call it
/// between fork and exec.
pub fn pin_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: a zeroed cpu_set_t is valid; cpu is in range.
    unsafe {
        let mut set: libc::cpu_set_t = zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Puts the calling thread at the lowest CPU priority (nice 19) and idle I/O priority: it gets
/// what the capture leaves. Not SCHED_IDLE: on a busy two-core machine that starved the indexer
/// outright (4 of 17 files left unindexed at 50 kpps), while nice 19 still yields to the capture.
/// Best effort: a refusal leaves the thread as it was.
pub fn idle_priority() {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        // ioprio_set(IOPRIO_WHO_PROCESS = 1, this thread, IOPRIO_CLASS_IDLE << 13).
        libc::syscall(libc::SYS_ioprio_set, 1, 0, 3 << 13);
    }
}

/// SCHED_IDLE and idle I/O for the calling thread (threads it starts inherit both): it runs only on
/// CPU time no other thread wants, so it can never take a capture's CPU, and may wait long on a busy
/// machine. For a query while a capture writes to the same store: at nice 10 a broad query still cost a
/// top-speed capture 2-13 % of its packets on this 2-core machine (BENCHMARKS.md).
/// Best effort: a refusal leaves the thread as it was.
pub fn sched_idle() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscalls on the calling thread; `param` outlives the call.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        libc::syscall(libc::SYS_ioprio_set, 1, 0, 3 << 13);
    }
}

/// CPU time used by the calling thread so far, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Lowers the calling thread's CPU priority (nice +10) and puts its I/O in the best-effort class at
/// the lowest level: below a capture, but not starved by every other process as with
/// [`idle_priority`] (an interactive query should still finish).
pub fn low_priority() {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
        // IOPRIO_CLASS_BE (2) << 13 | level 7.
        libc::syscall(libc::SYS_ioprio_set, 1, 0, (2 << 13) | 7);
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; both clocks used here always exist (vDSO: no system call).
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall clock (CLOCK_REALTIME), nanoseconds since the Unix epoch: packet timestamps, file names.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CLOCK_MONOTONIC in nanoseconds: deadlines and durations (never jumps with the wall clock).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A packet ring (PACKET_RX_RING or PACKET_TX_RING) mapped into the process, shared with the kernel;
/// unmapped when dropped.
pub struct RingMap {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; who may touch which part is the ring
// protocol's business (status words), not the thread's.
unsafe impl Send for RingMap {}

impl RingMap {
    /// Maps the `len` bytes of the ring the kernel allocated for socket `fd` (set up with
    /// PACKET_RX_RING/PACKET_TX_RING just before).
    pub fn new(fd: std::os::fd::RawFd, len: usize) -> io::Result<RingMap> {
        // SAFETY: a fresh shared mapping of the socket's ring at its exact size; nothing else aliases it yet.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = std::ptr::NonNull::new(ptr as *mut u8)
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(RingMap { ptr, len })
    }

    /// The first byte of the ring.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty mapping (never: the kernel refuses empty rings).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what new() mapped, once; borrows of it end with the owner's.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

/// Space of a file system, counted as `df` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsSpace {
    /// Total bytes.
    pub size: u64,
    /// Bytes an unprivileged user may still write (df's Avail, `f_bavail`).
    pub available: u64,
    /// Bytes in use (df's Used: total minus all free blocks).
    pub used: u64,
}

/// The space of the file system holding `path` (statvfs(3)).
pub fn fs_space(path: &std::path::Path) -> io::Result<FsSpace> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs fills a plain struct for a valid C string.
    let mut s: libc::statvfs = unsafe { zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let unit = s.f_frsize;
    Ok(FsSpace {
        size: s.f_blocks * unit,
        available: s.f_bavail * unit,
        used: (s.f_blocks - s.f_bfree) * unit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_up_with_its_hardware_type() {
        let lo = Interface::lookup("lo").unwrap();
        assert_eq!(
            (lo.index, lo.up, lo.hw_type),
            (1, true, libc::ARPHRD_LOOPBACK)
        );
        assert_eq!(
            lo.mtu,
            std::fs::read_to_string("/sys/class/net/lo/mtu")
                .unwrap()
                .trim()
                .parse::<u32>()
                .unwrap()
        );
        assert!(interface_names().contains(&"lo".to_string()));
        for bad in ["", "no-such-if0", "a-name-longer-than-15"] {
            assert_eq!(
                Interface::lookup(bad).unwrap_err().kind(),
                io::ErrorKind::NotFound,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn clocks_agree_with_std() {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(now_ns().abs_diff(wall) < 1_000_000_000);
        let t0 = std::time::Instant::now();
        let m0 = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (m1, el) = (monotonic_ns(), t0.elapsed().as_nanos() as u64);
        assert!(
            m1 - m0 >= 20_000_000 && m1 - m0 <= el + 1_000_000,
            "{} vs {el}",
            m1 - m0
        );
    }

    #[test]
    fn pins_to_cpu_0_and_refuses_impossible_cpus() {
        std::thread::spawn(|| pin_thread(0).unwrap())
            .join()
            .unwrap();
        assert!(pin_thread(libc::CPU_SETSIZE as usize).is_err());
    }

    #[test]
    fn packet_socket_opens_as_root() {
        // The suite runs as root (the testbeds need it), so the socket must open.
        assert!(packet_socket().is_ok());
    }

    #[test]
    fn fs_space_agrees_with_df() {
        let out = std::process::Command::new("df")
            .args(["-B1", "--output=size,avail,used", "/"])
            .output()
            .expect("df (coreutils)");
        let text = String::from_utf8(out.stdout).unwrap();
        let v: Vec<u64> = text
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let s = fs_space(std::path::Path::new("/")).unwrap();
        assert_eq!(s.size, v[0]);
        // Other processes write meanwhile: agree within 64 MiB.
        assert!(s.available.abs_diff(v[1]) < 64 << 20, "{s:?} vs df {v:?}");
        assert!(s.used.abs_diff(v[2]) < 64 << 20, "{s:?} vs df {v:?}");
        assert!(fs_space(std::path::Path::new("/nonexistent/x")).is_err());
    }
}
