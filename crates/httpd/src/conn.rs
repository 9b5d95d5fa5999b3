//! One client connection, plain or TLS, whose reads obey a deadline.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ServerConnection;

/// How long a closing connection reads what the client still sends (see [`Conn::close`]).
const LINGER: Duration = Duration::from_secs(1);
/// At most this much is read and thrown away while lingering.
const LINGER_BYTES: usize = 64 << 10;

/// A client's connection: a TCP socket, with TLS on it when the server has a certificate.
pub struct Conn {
    sock: TcpStream,
    tls: Option<Box<ServerConnection>>,
    peer: SocketAddr,
    read_deadline: Option<Instant>,
}

/// The socket read under a deadline: each read waits at most the time left, so a peer that
/// trickles bytes cannot stretch the whole past the deadline.
struct Deadlined<'a> {
    sock: &'a TcpStream,
    deadline: Option<Instant>,
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(d) = self.deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
            }
            self.sock.set_read_timeout(Some(left))?;
        }
        match (&*self.sock).read(buf) {
            // SO_RCVTIMEO expiring reads as EAGAIN.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"))
            }
            r => r,
        }
    }
}

impl Conn {
    pub(crate) fn plain(sock: TcpStream, peer: SocketAddr) -> Conn {
        Conn {
            sock,
            tls: None,
            peer,
            read_deadline: None,
        }
    }

    /// Completes the TLS handshake (client certificate checked by the config's verifier) by
    /// `deadline`, or fails; a failed handshake sends the client the alert that says why.
    /// `received` is what the client sent before (read while its connection waited for a place).
    pub(crate) fn tls_handshake(
        sock: TcpStream,
        peer: SocketAddr,
        config: Arc<rustls::ServerConfig>,
        deadline: Instant,
        received: &[u8],
    ) -> io::Result<Conn> {
        let mut tls = ServerConnection::new(config).map_err(io::Error::other)?;
        let left = deadline.saturating_duration_since(Instant::now());
        sock.set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
        let mut received = received;
        loop {
            while tls.wants_write() {
                tls.write_tls(&mut &sock)?;
            }
            if !tls.is_handshaking() {
                break;
            }
            let mut from = Deadlined {
                sock: &sock,
                deadline: Some(deadline),
            };
            let n = if received.is_empty() {
                tls.read_tls(&mut from)?
            } else {
                tls.read_tls(&mut received)?
            };
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the client closed the connection during the handshake",
                ));
            }
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(&mut &sock);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
        Ok(Conn {
            sock,
            tls: Some(Box::new(tls)),
            peer,
            read_deadline: None,
        })
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Whether the connection is TLS (the client then showed a certificate the server's CA signed).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Reads after `deadline` fail with `TimedOut`; None: reads wait as long as it takes.
    pub fn set_read_deadline(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        self.read_deadline = deadline;
        if deadline.is_none() {
            self.sock.set_read_timeout(None)?;
        }
        Ok(())
    }

    /// Waits up to `wait` for the client to end its side of the connection (FIN or reset): true
    /// when it has. Bytes it sends meanwhile do not count. A client that half-closes after its
    /// request is taken as gone too, as nginx takes it (499): HTTP clients that wait for an
    /// answer keep their side open.
    pub fn peer_closed(&self, wait: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd on a socket this Conn owns.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
    }

    /// A write that cannot make progress for this long fails (a client that stopped reading).
    pub(crate) fn set_write_stall(&self, stall: Duration) -> io::Result<()> {
        self.sock.set_write_timeout(Some(stall))
    }

    /// Ends the connection: TLS close_notify, then the socket's write side; then reads what the
    /// client still sends for a moment, because closing a socket with unread input resets the
    /// connection, and a reset can destroy a response the client has not read yet.
    pub(crate) fn close(mut self) {
        if let Some(tls) = self.tls.as_mut() {
            tls.send_close_notify();
            let _ = flush_tls(tls, &self.sock);
        }
        let _ = self.sock.shutdown(Shutdown::Write);
        let until = Instant::now() + LINGER;
        let mut drain = Deadlined {
            sock: &self.sock,
            deadline: Some(until),
        };
        let mut buf = [0u8; 4096];
        let mut total = 0;
        while total < LINGER_BYTES {
            match drain.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    }
}

fn flush_tls(tls: &mut ServerConnection, sock: &TcpStream) -> io::Result<()> {
    while tls.wants_write() {
        tls.write_tls(&mut &*sock)?;
    }
    Ok(())
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut from = Deadlined {
            sock: &self.sock,
            deadline: self.read_deadline,
        };
        let Some(tls) = self.tls.as_mut() else {
            return from.read(buf);
        };
        loop {
            match tls.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
            flush_tls(tls, &self.sock)?;
            let eof = tls.read_tls(&mut from)? == 0;
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(&mut &self.sock);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            if eof {
                // Closed without close_notify: the reader says so (UnexpectedEof), or Ok(0).
                return match tls.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    r => r,
                };
            }
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_mut() else {
            return (&self.sock).write(buf);
        };
        let n = tls.writer().write(buf)?;
        flush_tls(tls, &self.sock)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(tls) = self.tls.as_mut() {
            tls.writer().flush()?;
            flush_tls(tls, &self.sock)?;
        }
        (&self.sock).flush()
    }
}
