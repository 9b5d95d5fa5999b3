//! Errors that say what went wrong and what to do about it.

use std::io;

pub use bpf::FilterError;

/// Setting up or running a capture source failed.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The interface does not exist in this network namespace.
    #[error("no such interface '{name}' (available: {}); pick one with -i", available.join(", "))]
    NoSuchInterface {
        /// The name asked for.
        name: String,
        /// Interfaces that do exist here.
        available: Vec<String>,
    },
    /// The interface exists but is administratively down.
    #[error("interface '{name}' is down: bring it up with `ip link set {name} up`")]
    InterfaceDown {
        /// The interface.
        name: String,
    },
    /// Packet sockets need privileges.
    #[error(
        "{op}: permission denied: capturing needs root or CAP_NET_RAW: run with sudo or \
         `setcap cap_net_raw,cap_net_admin+eip <binary>`"
    )]
    Permission {
        /// The operation that was refused.
        op: &'static str,
    },
    /// The kernel could not allocate the ring (or the socket buffer).
    #[error(
        "cannot allocate a {} KiB capture buffer ({source}): reduce -B",
        bytes / 1024
    )]
    RingAlloc {
        /// Requested size in bytes.
        bytes: u64,
        /// The kernel's answer.
        source: io::Error,
    },
    /// The filter expression does not compile.
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// The interface's hardware type has no link type a raw packet socket can deliver as is.
    #[error(
        "interface '{name}' has hardware type {hw_type} ({}), which ringcap cannot capture yet: it captures \
         Ethernet, loopback and raw-IP interfaces (tun, WireGuard, IP-in-IP, SIT); tcpdump -i {name} can \
         (it uses Linux cooked capture there)",
        arphrd_name(*hw_type)
    )]
    UnsupportedLinkType {
        /// The interface.
        name: String,
        /// Its `ARPHRD_*` value.
        hw_type: u16,
    },
    /// The interface cannot give the time stamp type asked for (-j).
    #[error(
        "{interface}: time stamp type '{}' is not supported by that device (it offers: {}; \
         `ringcap -J -i {interface}` lists them): capture with -j host, or on a NIC with hardware time stamps",
        asked.name(),
        offered.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
    )]
    TimestampTypeUnsupported {
        /// The interface.
        interface: String,
        /// The type asked for.
        asked: crate::TimestampType,
        /// What it offers.
        offered: Vec<crate::TimestampType>,
    },
    /// The XDP program or an AF_XDP socket could not be set up (`--source xdp`); says what to do.
    #[error("--source xdp: {0}")]
    Xdp(String),
    /// A configuration value is out of range.
    #[error("bad capture setting: {0}")]
    Config(String),
    /// Any other system call failure, with the call that failed.
    #[error("{op} failed: {source}")]
    Io {
        /// The system call (and option) that failed.
        op: &'static str,
        /// The kernel's answer.
        source: io::Error,
    },
}

impl CaptureError {
    /// Wrap the last OS error of `op`, turning EPERM/EACCES into [`CaptureError::Permission`].
    pub(crate) fn os(op: &'static str) -> CaptureError {
        CaptureError::from_io(op, io::Error::last_os_error())
    }

    /// Classify an OS error of `op`.
    pub(crate) fn from_io(op: &'static str, source: io::Error) -> CaptureError {
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => CaptureError::Permission { op },
            _ => CaptureError::Io { op, source },
        }
    }
}

/// A readable name for common hardware types, for error messages.
fn arphrd_name(hw_type: u16) -> &'static str {
    match hw_type {
        libc::ARPHRD_PPP => "PPP",
        libc::ARPHRD_IPGRE => "GRE tunnel",
        libc::ARPHRD_TUNNEL6 => "IPv6 tunnel",
        libc::ARPHRD_IEEE80211_RADIOTAP => "802.11 radiotap",
        libc::ARPHRD_IEEE80211 => "802.11",
        libc::ARPHRD_CAN => "CAN",
        libc::ARPHRD_INFINIBAND => "InfiniBand",
        _ => "see ARPHRD_* in <linux/if_arp.h>",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eperm_and_eacces_become_permission_errors() {
        for errno in [libc::EPERM, libc::EACCES] {
            let e = CaptureError::from_io("socket(AF_PACKET)", io::Error::from_raw_os_error(errno));
            assert!(matches!(e, CaptureError::Permission { .. }), "{e:?}");
            assert!(e.to_string().contains("CAP_NET_RAW"), "{e}");
        }
        let e = CaptureError::from_io("bind", io::Error::from_raw_os_error(libc::ENODEV));
        assert!(matches!(e, CaptureError::Io { op: "bind", .. }));
    }

    #[test]
    fn messages_name_the_problem_and_the_fix() {
        let e = CaptureError::NoSuchInterface {
            name: "eth9".into(),
            available: vec!["lo".into(), "eth0".into()],
        };
        assert_eq!(
            e.to_string(),
            "no such interface 'eth9' (available: lo, eth0); pick one with -i"
        );
        let e = CaptureError::RingAlloc {
            bytes: 8 << 30,
            source: io::Error::from_raw_os_error(libc::ENOMEM),
        };
        assert!(e.to_string().contains("8388608 KiB"), "{e}");
        assert!(e.to_string().ends_with("reduce -B"), "{e}");
    }
}
