//! Time stamp types as libpcap names them (tcpdump's -j/-J): which clock stamps a packet, what an
//! interface offers (ethtool's ETHTOOL_GET_TS_INFO) and turning the NIC's hardware stamps on.
//!
//! The ring tells per packet which stamp it carries (tp_status TS_SOFTWARE / TS_RAW_HARDWARE), so what
//! was asked for is checked against what arrived (see [`crate::CounterSnapshot::ts_software`]).

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::CaptureError;

// <linux/sockios.h>, <linux/ethtool.h>, <linux/net_tstamp.h>, <linux/if_packet.h>: defined here, not
// taken from libc, whose versions differ in which of them they carry.
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const SIOCSHWTSTAMP: libc::c_ulong = 0x89b0;
const ETHTOOL_GET_TS_INFO: u32 = 0x41;
const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
const SOF_TIMESTAMPING_SYS_HARDWARE: u32 = 1 << 5;
const SOF_TIMESTAMPING_RAW_HARDWARE: u32 = 1 << 6;
const HWTSTAMP_TX_OFF: i32 = 0;
const HWTSTAMP_FILTER_ALL: i32 = 1;
const PACKET_TIMESTAMP: libc::c_int = 17;
/// tp_status bits of a ring packet: which stamp the kernel put in tp_sec/tp_nsec.
pub(crate) const TP_STATUS_TS_SOFTWARE: u32 = 1 << 29;
pub(crate) const TP_STATUS_TS_RAW_HARDWARE: u32 = 1 << 31;

/// Which clock stamps the packets (libpcap's PCAP_TSTAMP_* of the same names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimestampType {
    /// The kernel's software stamp on receive (the default, and all a veth has).
    #[default]
    Host,
    /// The NIC's hardware stamp converted to system time (SOF_TIMESTAMPING_SYS_HARDWARE; recent kernels
    /// no longer deliver it, and the ring then carries software stamps: the summary says so).
    Adapter,
    /// The NIC's raw hardware clock, not synchronised with system time (SOF_TIMESTAMPING_RAW_HARDWARE).
    AdapterUnsynced,
}

impl TimestampType {
    /// Every type, in libpcap's order.
    pub const ALL: [TimestampType; 3] = [
        TimestampType::Host,
        TimestampType::Adapter,
        TimestampType::AdapterUnsynced,
    ];

    /// libpcap's name (tcpdump -j).
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::Host => "host",
            TimestampType::Adapter => "adapter",
            TimestampType::AdapterUnsynced => "adapter_unsynced",
        }
    }

    /// libpcap's description (tcpdump -J).
    pub fn description(self) -> &'static str {
        match self {
            TimestampType::Host => "Host",
            TimestampType::Adapter => "Adapter",
            TimestampType::AdapterUnsynced => "Adapter, not synced with system time",
        }
    }

    /// Where the stamps come from, in words (summary and pcapng interface description).
    pub fn source(self) -> &'static str {
        match self {
            TimestampType::Host => "kernel software",
            TimestampType::Adapter => "NIC hardware, synced to system time",
            TimestampType::AdapterUnsynced => "NIC hardware clock, not synced",
        }
    }

    /// A hardware type: needs the NIC's stamping switched on.
    pub fn is_hardware(self) -> bool {
        self != TimestampType::Host
    }

    /// The ethtool capability that offers this type, and the PACKET_TIMESTAMP value that selects it.
    fn sof_flag(self) -> u32 {
        match self {
            TimestampType::Host => SOF_TIMESTAMPING_SOFTWARE,
            TimestampType::Adapter => SOF_TIMESTAMPING_SYS_HARDWARE,
            TimestampType::AdapterUnsynced => SOF_TIMESTAMPING_RAW_HARDWARE,
        }
    }
}

/// struct ethtool_ts_info.
#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// struct hwtstamp_config.
#[repr(C)]
struct HwTstampConfig {
    flags: i32,
    tx_type: i32,
    rx_filter: i32,
}

/// struct ifreq with its union used as ifr_data (the union is 24 bytes on 64-bit Linux).
#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 24 - size_of::<*mut libc::c_void>()],
}

fn ifreq(name: &str, data: *mut libc::c_void) -> Result<IfreqData, CaptureError> {
    let mut r = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data,
        _pad: [0; 24 - size_of::<*mut libc::c_void>()],
    };
    if name.len() >= libc::IFNAMSIZ || name.as_bytes().contains(&0) {
        return Err(CaptureError::Config(format!(
            "'{name}' is not an interface name"
        )));
    }
    for (d, s) in r.name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

/// A datagram socket for interface ioctls (in the caller's network namespace).
fn ioctl_socket() -> Result<OwnedFd, CaptureError> {
    // SAFETY: plain socket(2); the descriptor is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(CaptureError::os("socket(AF_INET) for interface ioctls"));
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ioctl(fd: RawFd, req: libc::c_ulong, ifr: &mut IfreqData) -> io::Result<()> {
    // SAFETY: ifr is a valid ifreq whose data pointer points at the struct `req` expects.
    let r = unsafe { libc::ioctl(fd, req as _, ifr as *mut IfreqData) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The time stamp types `interface` offers, decided as libpcap decides them: the types whose
/// capability the driver reports (ETHTOOL_GET_TS_INFO), hardware ones only if it can stamp every
/// received packet (HWTSTAMP_FILTER_ALL), host alone when it reports nothing usable, and every type
/// when the driver cannot be asked.
pub fn supported_timestamp_types(interface: &str) -> Result<Vec<TimestampType>, CaptureError> {
    crate::sys::lookup(interface)?; // a missing interface gets the usual error naming the ones there are
    let sock = ioctl_socket()?;
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..EthtoolTsInfo::default()
    };
    let mut ifr = ifreq(
        interface,
        &mut info as *mut EthtoolTsInfo as *mut libc::c_void,
    )?;
    if let Err(e) = ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut ifr) {
        return match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => Ok(TimestampType::ALL.to_vec()),
            _ => Err(CaptureError::from_io(
                "ioctl(SIOCETHTOOL, ETHTOOL_GET_TS_INFO)",
                e,
            )),
        };
    }
    Ok(types_from_ts_info(info.so_timestamping, info.rx_filters))
}

/// libpcap's mapping from the driver's report to a list of types (never empty: host is always there).
fn types_from_ts_info(so_timestamping: u32, rx_filters: u32) -> Vec<TimestampType> {
    if rx_filters & (1 << HWTSTAMP_FILTER_ALL) == 0 {
        return vec![TimestampType::Host];
    }
    let v: Vec<_> = TimestampType::ALL
        .into_iter()
        .filter(|t| so_timestamping & t.sof_flag() != 0)
        .collect();
    if v.is_empty() {
        vec![TimestampType::Host]
    } else {
        v
    }
}

/// Before the ring is set up: for a hardware type, check the interface offers it, switch the NIC's
/// receive stamping on for every packet (SIOCSHWTSTAMP, needs CAP_NET_ADMIN) and select the stamp on the
/// socket (PACKET_TIMESTAMP), as libpcap does. Host changes nothing.
pub(crate) fn select(fd: RawFd, interface: &str, t: TimestampType) -> Result<(), CaptureError> {
    if !t.is_hardware() {
        return Ok(());
    }
    let offered = supported_timestamp_types(interface)?;
    if !offered.contains(&t) {
        return Err(CaptureError::TimestampTypeUnsupported {
            interface: interface.to_string(),
            asked: t,
            offered,
        });
    }
    let mut cfg = HwTstampConfig {
        flags: 0,
        tx_type: HWTSTAMP_TX_OFF,
        rx_filter: HWTSTAMP_FILTER_ALL,
    };
    let mut ifr = ifreq(
        interface,
        &mut cfg as *mut HwTstampConfig as *mut libc::c_void,
    )?;
    if let Err(e) = ioctl(fd, SIOCSHWTSTAMP, &mut ifr) {
        return Err(match e.raw_os_error() {
            // The driver has no hardware stamps (EOPNOTSUPP) or only for some packets (ERANGE).
            Some(libc::EOPNOTSUPP) | Some(libc::ERANGE) | Some(libc::EINVAL) => {
                CaptureError::TimestampTypeUnsupported {
                    interface: interface.to_string(),
                    asked: t,
                    offered: vec![TimestampType::Host],
                }
            }
            _ => CaptureError::from_io("ioctl(SIOCSHWTSTAMP, HWTSTAMP_FILTER_ALL)", e),
        });
    }
    crate::sys::set_opt(
        fd,
        libc::SOL_PACKET,
        PACKET_TIMESTAMP,
        &(t.sof_flag() as libc::c_int),
        "setsockopt(PACKET_TIMESTAMP)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_follow_libpcap() {
        // veth: software stamps only, no hardware filters → host.
        let sw = SOF_TIMESTAMPING_SOFTWARE | 1 << 2 | 1 << 3;
        assert_eq!(types_from_ts_info(sw, 0), vec![TimestampType::Host]);
        // A PTP NIC stamping every packet: host and adapter_unsynced (no SYS_HARDWARE any more).
        let nic = sw | SOF_TIMESTAMPING_RAW_HARDWARE;
        assert_eq!(
            types_from_ts_info(nic, 1 << HWTSTAMP_FILTER_ALL),
            vec![TimestampType::Host, TimestampType::AdapterUnsynced]
        );
        // Hardware stamps only for PTP packets: not usable for a capture → host.
        assert_eq!(types_from_ts_info(nic, 1 << 12), vec![TimestampType::Host]);
        assert_eq!(size_of::<EthtoolTsInfo>(), 44);
        assert_eq!(size_of::<IfreqData>(), 40);
    }
}
