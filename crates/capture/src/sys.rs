//! Thin wrappers over the AF_PACKET system calls both sources share (set-up only, never per packet).

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use libc::{c_int, c_void, sock_filter};

use wire::LinkType;

use crate::error::CaptureError;

/// Opens the packet socket (see [`::sys::packet_socket`]).
pub fn packet_socket() -> Result<OwnedFd, CaptureError> {
    ::sys::packet_socket().map_err(|e| CaptureError::from_io("socket(AF_PACKET, SOCK_RAW)", e))
}

pub(crate) fn lookup(name: &str) -> Result<::sys::Interface, CaptureError> {
    ::sys::Interface::lookup(name).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => CaptureError::NoSuchInterface {
            name: name.to_string(),
            available: ::sys::interface_names(),
        },
        _ => CaptureError::from_io("interface lookup (SIOCGIF*)", e),
    })
}

/// The link type of the frames a packet socket on `name` delivers: the one libpcap picks for the
/// interface's hardware type (pcap-linux.c `map_arphrd_to_dlt`), for the types whose frames a SOCK_RAW
/// socket delivers with the link header libpcap writes. Others (PPP, GRE, IPv6 tunnels...) need
/// libpcap's cooked mode, a header built per packet, and are refused by name.
pub fn interface_link_type(name: &str) -> Result<LinkType, CaptureError> {
    let ifc = lookup(name)?;
    link_type_of(ifc.hw_type).ok_or(CaptureError::UnsupportedLinkType {
        name: name.to_string(),
        hw_type: ifc.hw_type,
    })
}

fn link_type_of(hw_type: u16) -> Option<LinkType> {
    match hw_type {
        // Loopback frames carry a zeroed Ethernet header.
        libc::ARPHRD_ETHER | libc::ARPHRD_LOOPBACK => Some(LinkType::Ethernet),
        // No link header: the frame is the IP packet (tun, WireGuard, ipip, sit, SLIP).
        libc::ARPHRD_NONE
        | libc::ARPHRD_TUNNEL
        | libc::ARPHRD_SIT
        | libc::ARPHRD_SLIP
        | libc::ARPHRD_CSLIP
        | libc::ARPHRD_SLIP6
        | libc::ARPHRD_CSLIP6
        | libc::ARPHRD_ADAPT
        | libc::ARPHRD_RAWHDLC
        | libc::ARPHRD_DLCI => Some(LinkType::Raw),
        _ => None,
    }
}

/// Looks `name` up and checks it is up.
pub fn interface_up(name: &str) -> Result<::sys::Interface, CaptureError> {
    let ifc = lookup(name)?;
    if !ifc.up {
        return Err(CaptureError::InterfaceDown {
            name: name.to_string(),
        });
    }
    Ok(ifc)
}

/// setsockopt with a plain value.
pub fn set_opt<T>(
    fd: RawFd,
    level: c_int,
    name: c_int,
    value: &T,
    op: &'static str,
) -> Result<(), CaptureError> {
    set_opt_raw(fd, level, name, value).map_err(|e| CaptureError::from_io(op, e))
}

/// setsockopt returning the raw io::Error, for callers that classify errors themselves.
pub fn set_opt_raw<T>(fd: RawFd, level: c_int, name: c_int, value: &T) -> io::Result<()> {
    // SAFETY: value points to size_of::<T>() readable bytes.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value as *const T as *const c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Attach a classic BPF program (replaces any earlier one atomically).
pub fn attach_filter(fd: RawFd, insns: &[sock_filter]) -> Result<(), CaptureError> {
    let prog = libc::sock_fprog {
        len: insns.len() as u16,
        filter: insns.as_ptr() as *mut sock_filter,
    };
    set_opt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_ATTACH_FILTER,
        &prog,
        "setsockopt(SO_ATTACH_FILTER)",
    )
}

/// Remove the socket's filter.
pub fn detach_filter(fd: RawFd) -> Result<(), CaptureError> {
    let zero: c_int = 0;
    set_opt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_DETACH_FILTER,
        &zero,
        "setsockopt(SO_DETACH_FILTER)",
    )
}

/// Put the interface in promiscuous mode for as long as the socket lives.
pub fn set_promiscuous(fd: RawFd, ifindex: c_int) -> Result<(), CaptureError> {
    // SAFETY: packet_mreq is plain data.
    let mut mreq: libc::packet_mreq = unsafe { zeroed() };
    mreq.mr_ifindex = ifindex;
    mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
    set_opt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_ADD_MEMBERSHIP,
        &mreq,
        "setsockopt(PACKET_ADD_MEMBERSHIP, PROMISC)",
    )
}

/// Bind to `ifindex` for all protocols: from here on packets flow.
pub fn bind_all(fd: RawFd, ifindex: c_int) -> Result<(), CaptureError> {
    // SAFETY: sockaddr_ll is plain data; bind reads exactly its size.
    let r = unsafe {
        let mut sll: libc::sockaddr_ll = zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex;
        libc::bind(
            fd,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENETDOWN) {
            return Err(CaptureError::Io {
                op: "bind(AF_PACKET) (interface down? `ip link set IF up`)",
                source: e,
            });
        }
        return Err(CaptureError::from_io("bind(AF_PACKET)", e));
    }
    Ok(())
}

/// Join fanout group `id` (`type_flags` = mode | flags). `id` 0 with PACKET_FANOUT_FLAG_UNIQUEID makes the
/// kernel choose a free id; the id actually used is returned.
pub fn join_fanout(fd: RawFd, id: u16, type_flags: u32) -> Result<u16, CaptureError> {
    let arg: u32 = id as u32 | (type_flags << 16);
    set_opt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_FANOUT,
        &arg,
        "setsockopt(PACKET_FANOUT)",
    )?;
    let mut val: u32 = 0;
    let mut len = size_of::<u32>() as libc::socklen_t;
    // SAFETY: val is a u32 buffer of len bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            &mut val as *mut u32 as *mut c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(CaptureError::os("getsockopt(PACKET_FANOUT)"));
    }
    Ok((val & 0xffff) as u16)
}

/// Read (and thereby reset) the kernel's PACKET_STATISTICS: (packets, drops, freeze_q_cnt).
///
/// `packets` counts every packet that passed the filter, including the dropped ones.
pub fn packet_statistics(fd: RawFd) -> io::Result<(u32, u32, u32)> {
    let mut st = libc::tpacket_stats_v3 {
        tp_packets: 0,
        tp_drops: 0,
        tp_freeze_q_cnt: 0,
    };
    // Non-ring (TPACKET_V1) sockets fill only the first two fields and shorten len.
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: st is len bytes long.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            &mut st as *mut libc::tpacket_stats_v3 as *mut c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.tp_packets, st.tp_drops, st.tp_freeze_q_cnt))
}

/// Pending socket error (SO_ERROR), e.g. ENETDOWN after the interface went away.
pub fn socket_error(fd: RawFd) -> io::Error {
    let mut val: c_int = 0;
    let mut len = size_of::<c_int>() as libc::socklen_t;
    // SAFETY: val is a c_int buffer of len bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut val as *mut c_int as *mut c_void,
            &mut len,
        )
    };
    if r < 0 {
        io::Error::last_os_error()
    } else if val == 0 {
        io::Error::other("socket reported an error condition without an errno")
    } else {
        io::Error::from_raw_os_error(val)
    }
}

/// Wait up to `timeout_ms` for the socket to become readable. Returns false on timeout or EINTR.
pub fn poll_readable(fd: &OwnedFd, timeout_ms: c_int) -> Result<bool, CaptureError> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(CaptureError::Io {
            op: "poll",
            source: e,
        });
    }
    if pfd.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
        return Err(read_failure("poll", socket_error(fd.as_raw_fd())));
    }
    Ok(r > 0)
}

/// A failure while reading packets; ENETDOWN gets the likely cause spelled out.
pub fn read_failure(op: &'static str, e: io::Error) -> CaptureError {
    let op = match (e.raw_os_error(), op) {
        (Some(libc::ENETDOWN), "poll") => "poll (the interface went down or was removed)",
        (Some(libc::ENETDOWN), _) => "recvmmsg (the interface went down or was removed)",
        _ => op,
    };
    CaptureError::Io { op, source: e }
}
