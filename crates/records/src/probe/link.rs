//! Opening the ways to a collector: a TCP connection (TLS when configured, then the handshake of
//! [`crate::auth`]) or a connected UDP socket sized to the path MTU.

use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use super::Dest;
use crate::auth::{self, Session};
use crate::batch::{Key, HEADER_LEN, MAX_PAYLOAD, TAG_LEN};
use crate::tls::Stream;

/// Largest UDP payload (IPv4).
const UDP_MAX_DATAGRAM: usize = 65507;

/// An authenticated TCP connection (non-blocking after the handshake).
pub(super) struct Conn {
    pub(super) stream: Stream,
    pub(super) session: Session,
}

/// How the sender reaches one collector.
pub(super) enum Link {
    /// Connected and authenticated stream, or none while down.
    Tcp(Option<Box<Conn>>),
    /// Connected datagram socket.
    Udp(UdpSocket),
}

/// Connects the TLS layer (if any) and runs the handshake on a blocking socket bounded by `timeout`, then
/// makes the socket non-blocking for the sender loop.
pub(super) fn open_conn(
    tcp: TcpStream,
    tls: Option<(&Arc<rustls::ClientConfig>, &str)>,
    key: &Key,
    probe_id: u64,
    timeout: Duration,
) -> Result<Conn, String> {
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut stream = Stream::client(tcp, tls).map_err(|e| e.to_string())?;
    let session = auth::client_handshake(&mut stream, key, probe_id).map_err(|e| e.to_string())?;
    stream
        .tcp()
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    Ok(Conn { stream, session })
}

/// The host of `tcp://HOST:PORT` (brackets of an IPv6 literal removed): the name a TLS certificate must hold.
pub(super) fn tls_host(dest_name: &str) -> String {
    let rest = dest_name.split_once("://").map_or(dest_name, |(_, r)| r);
    let host = rest.rsplit_once(':').map_or(rest, |(h, _)| h);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

pub(super) fn udp_socket(d: &Dest) -> io::Result<UdpSocket> {
    let bind: SocketAddr = if d.addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    let s = UdpSocket::bind(bind)?;
    s.connect(d.addr)?;
    // Large batches in bursts: a bigger send buffer before the kernel says EAGAIN/ENOBUFS.
    let size: libc::c_int = 4 << 20;
    // SAFETY: setsockopt with a c_int value of the right size.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &size as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    Ok(s)
}

/// Record payload bytes per datagram: the path MTU minus IP, UDP, batch header and tag, capped so the
/// datagram stays ≤ 65507 bytes.
pub(super) fn udp_payload_capacity(s: &UdpSocket, addr: SocketAddr) -> usize {
    let (level, opt, ip_hdr) = if addr.is_ipv4() {
        (libc::SOL_IP, libc::IP_MTU, 20)
    } else {
        (libc::SOL_IPV6, libc::IPV6_MTU, 40)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a c_int with its length.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            opt,
            &mut mtu as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    let mtu = if rc == 0 && mtu > 0 {
        mtu as usize
    } else {
        1500
    };
    let datagram = (mtu - ip_hdr - 8).min(UDP_MAX_DATAGRAM);
    (datagram - HEADER_LEN - TAG_LEN).min(MAX_PAYLOAD)
}
