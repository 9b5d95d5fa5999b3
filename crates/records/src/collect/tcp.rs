//! The collector's TCP side: admitting connections (per-address limit, handshake and connection slots),
//! the handshake by its deadline, then batches with a deadline per message, stored and acked in runs.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{lock, Refusal, Shared, ACK_RUN_MAX, POLL};
use crate::auth::{self, HandshakeError, Hello, ServerPending, Session};
use crate::batch::{batch_len, BatchError, HEADER_LEN, MAX_BATCH_LEN};
use crate::tls::Stream;

/// Waits up to POLL for the listener to become readable.
fn wait_readable(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, POLL.as_millis() as i32) > 0 }
}

pub(super) fn accept_loop(sh: Arc<Shared>, l: TcpListener) {
    while !sh.stopping() {
        if !wait_readable(l.as_raw_fd()) {
            continue;
        }
        let (conn, peer) = match l.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                // EMFILE and friends: say so, back off, keep serving the open connections.
                (sh.cfg.events)(&format!("accept failed: {e}"));
                std::thread::sleep(POLL);
                continue;
            }
        };
        sh.connections.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = Slot::take(&sh, &conn, peer) else {
            drop(conn);
            continue;
        };
        let sh2 = Arc::clone(&sh);
        let spawned = std::thread::Builder::new()
            .name("collect-conn".into())
            .spawn(move || serve_connection(&sh2, conn, peer, slot));
        let mut workers = lock(&sh.workers);
        workers.retain(|t| !t.is_finished());
        match spawned {
            Ok(t) => workers.push(t),
            Err(e) => (sh.cfg.events)(&format!("cannot start a thread for {peer}: {e}")),
        }
    }
}

/// One open TCP connection's place in the limits; released (counts, address, handshake slot) on drop.
struct Slot {
    sh: Arc<Shared>,
    ip: IpAddr,
    id: u64,
    authenticated: bool,
}

impl Slot {
    /// Admits a new connection: within the per-address limit, and with a handshake slot (the oldest
    /// handshake is closed when all are taken, so clients that never finish cannot lock probes out).
    fn take(sh: &Arc<Shared>, conn: &TcpStream, peer: SocketAddr) -> Option<Slot> {
        {
            let mut per = lock(&sh.per_address);
            let n = per.entry(peer.ip()).or_insert(0);
            if *n >= sh.cfg.max_per_address.max(1) {
                drop(per);
                let r = Refusal::Other(
                    "per_address_limit",
                    format!(
                        "{} connections open from {} (limit {}); closed",
                        sh.cfg.max_per_address,
                        peer.ip(),
                        sh.cfg.max_per_address
                    ),
                );
                sh.refuse(peer, "tcp", &r);
                return None;
            }
            *n += 1;
        }
        let id = sh.next_conn.fetch_add(1, Ordering::Relaxed);
        let evicted = {
            let mut hs = lock(&sh.handshaking);
            let evicted = (hs.len() >= sh.cfg.max_connections.max(1))
                .then(|| hs.pop_front())
                .flatten();
            if let Ok(clone) = conn.try_clone() {
                hs.push_back((id, clone));
            }
            evicted
        };
        if let Some((_, old)) = evicted {
            // Its thread sees EOF and ends; counted there as a handshake that did not finish.
            let _ = old.shutdown(std::net::Shutdown::Both);
            *lock(&sh.rejected).entry("handshake_evicted").or_insert(0) += 1;
        }
        sh.connections_open.fetch_add(1, Ordering::Relaxed);
        Some(Slot {
            sh: Arc::clone(sh),
            ip: peer.ip(),
            id,
            authenticated: false,
        })
    }

    /// Moves the connection from a handshake slot to a connection slot; false when all are taken.
    fn authenticated(&mut self) -> bool {
        lock(&self.sh.handshaking).retain(|(id, _)| *id != self.id);
        let n = self
            .sh
            .connections_authenticated
            .fetch_add(1, Ordering::Relaxed);
        self.authenticated = true;
        n < self.sh.cfg.max_connections.max(1)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.authenticated {
            self.sh
                .connections_authenticated
                .fetch_sub(1, Ordering::Relaxed);
        } else {
            lock(&self.sh.handshaking).retain(|(id, _)| *id != self.id);
        }
        let mut per = lock(&self.sh.per_address);
        if let Some(n) = per.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.ip);
            }
        }
        self.sh.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How a read of a whole buffer ended.
enum Fill {
    Full,
    /// EOF before the first byte.
    Closed,
    /// EOF after `have` bytes.
    Short(usize),
    Stopped,
    /// The deadline passed with `have` bytes read.
    Timeout {
        have: usize,
    },
    /// Reset, TLS failure or another error: the peer is gone.
    Failed(io::Error),
}

/// Reads exactly `buf.len()` bytes by `deadline`, looking at the stop flag between socket timeouts. With
/// `per_message`, the first byte pulls the deadline in to that long after it: once a message started it
/// must arrive whole soon, however long the wait for it was allowed to be.
fn fill(
    sh: &Shared,
    c: &mut Stream,
    buf: &mut [u8],
    deadline: &mut Instant,
    per_message: Option<Duration>,
) -> Fill {
    let mut have = 0;
    while have < buf.len() {
        match c.read(&mut buf[have..]) {
            Ok(0) if have == 0 => return Fill::Closed,
            Ok(0) => return Fill::Short(have),
            Ok(n) => {
                if have == 0 {
                    if let Some(d) = per_message {
                        *deadline = (*deadline).min(Instant::now() + d);
                    }
                }
                have += n;
            }
            Err(e) if super::timed_out(&e) => {}
            Err(e) => return Fill::Failed(e),
        }
        if have < buf.len() {
            if sh.stopping() {
                return Fill::Stopped;
            }
            if Instant::now() >= *deadline {
                return Fill::Timeout { have };
            }
        }
    }
    Fill::Full
}

/// The collector's side of the handshake, by `deadline`: hello, reply, finish. Refusals with a reason the
/// probe can print are told to it before the connection closes.
fn handshake(sh: &Shared, c: &mut Stream, deadline: Instant) -> Result<Session, Option<Refusal>> {
    let mut deadline = deadline;
    let mut hello = [0u8; auth::HELLO_LEN];
    read_handshake(sh, c, &mut hello, &mut deadline)?;
    let pending =
        Hello::parse(&hello).and_then(|h| ServerPending::reply(h, &sh.keys, &sh.collector_id));
    let pending = pending.map_err(|e| tell_refusal(c, e))?;
    if c.write_all(pending.bytes())
        .and_then(|_| c.flush())
        .is_err()
    {
        return Err(None);
    }
    let mut finish = [0u8; auth::FINISH_LEN];
    read_handshake(sh, c, &mut finish, &mut deadline)?;
    pending.finish(&finish).map_err(|e| tell_refusal(c, e))
}

fn tell_refusal(c: &mut Stream, e: HandshakeError) -> Option<Refusal> {
    if let Some(code) = e.refuse_code() {
        let _ = c
            .write_all(&auth::error_message(code))
            .and_then(|_| c.flush());
    }
    Some(Refusal::Handshake(e))
}

/// One handshake message by the deadline; None for a stop or a peer that just went away.
fn read_handshake(
    sh: &Shared,
    c: &mut Stream,
    buf: &mut [u8],
    deadline: &mut Instant,
) -> Result<(), Option<Refusal>> {
    match fill(sh, c, buf, deadline, None) {
        Fill::Full => Ok(()),
        Fill::Stopped => Err(None),
        Fill::Closed | Fill::Short(_) => Err(Some(Refusal::Other(
            "handshake_closed",
            "closed before finishing the handshake".into(),
        ))),
        Fill::Timeout { have } => Err(Some(Refusal::Other(
            "auth_timeout",
            format!(
                "no handshake within {:?} ({have} bytes of a message); closed",
                sh.cfg.auth_timeout
            ),
        ))),
        Fill::Failed(e) if e.kind() == io::ErrorKind::InvalidData => Err(Some(Refusal::Other(
            "tls_failed",
            format!("TLS handshake failed: {e}"),
        ))),
        Fill::Failed(_) => Err(None),
    }
}

/// Batches stored on one connection but not yet synced and acked.
#[derive(Default)]
struct Run {
    batches: usize,
    /// Archive number and seq of the last one.
    last: Option<(u64, u64)>,
}

fn serve_connection(sh: &Shared, conn: TcpStream, peer: SocketAddr, mut slot: Slot) {
    if conn.set_read_timeout(Some(POLL)).is_err()
        || conn
            .set_write_timeout(Some(Duration::from_secs(5)))
            .is_err()
    {
        return;
    }
    let _ = conn.set_nodelay(true);
    let Ok(mut c) = Stream::server(conn, sh.cfg.tls.as_ref()) else {
        return;
    };
    let session = match handshake(sh, &mut c, Instant::now() + sh.cfg.auth_timeout) {
        Ok(s) => s,
        Err(r) => {
            if let Some(r) = r {
                sh.refuse(peer, "tcp", &r);
            }
            return;
        }
    };
    if !slot.authenticated() {
        let r = Refusal::Other(
            "too_many_connections",
            format!(
                "{} connections open (limit {}); closed",
                sh.cfg.max_connections, sh.cfg.max_connections
            ),
        );
        sh.refuse(peer, "tcp", &r);
        return;
    }
    serve_batches(sh, &mut c, &session, peer);
}

/// Reads batches off an authenticated connection, stores them and acks them in runs (group commit).
fn serve_batches(sh: &Shared, c: &mut Stream, session: &Session, peer: SocketAddr) {
    // One batch at most: the per-connection bound.
    let mut buf = vec![0u8; MAX_BATCH_LEN];
    let mut run = Run::default();
    // Acks what was stored before the connection ends (or before the next batch is waited for).
    let flush = |c: &mut Stream, run: &mut Run| -> bool {
        let Some((upto, seq)) = run.last.take() else {
            return true;
        };
        run.batches = 0;
        sh.sync_and_ack(c, session, peer, upto, seq)
    };
    loop {
        // Group commit: sync and ack once nothing more is waiting (or the run is long enough).
        if run.last.is_some()
            && (run.batches >= ACK_RUN_MAX || !c.readable_now())
            && !flush(c, &mut run)
        {
            return;
        }
        // Idle between messages for up to idle_timeout; a message once begun has message_timeout.
        let mut deadline = Instant::now() + sh.cfg.idle_timeout;
        let per_message = Some(sh.cfg.message_timeout);
        let hdr = match fill(sh, c, &mut buf[..HEADER_LEN], &mut deadline, per_message) {
            Fill::Full => HEADER_LEN,
            Fill::Closed | Fill::Stopped | Fill::Failed(_) => {
                flush(c, &mut run);
                return;
            }
            Fill::Timeout { have: 0 } => {
                flush(c, &mut run);
                (sh.cfg.events)(&format!("closing idle connection from {peer}"));
                return;
            }
            Fill::Timeout { have } => {
                flush(c, &mut run);
                sh.refuse(peer, "tcp", &stalled(sh, have, HEADER_LEN));
                return;
            }
            Fill::Short(have) => {
                flush(c, &mut run);
                let r = Refusal::Batch(BatchError::Truncated {
                    need: HEADER_LEN,
                    have,
                });
                sh.refuse(peer, "tcp", &r);
                return;
            }
        };
        // Magic, version and length bound before reading on: garbage is refused after 64 bytes.
        let total = match batch_len(&buf[..hdr]) {
            Ok(n) => n,
            Err(e) => {
                flush(c, &mut run);
                sh.refuse(peer, "tcp", &Refusal::Batch(e));
                return;
            }
        };
        match fill(sh, c, &mut buf[HEADER_LEN..total], &mut deadline, None) {
            Fill::Full => {}
            Fill::Closed => {
                flush(c, &mut run);
                let r = Refusal::Batch(BatchError::Truncated {
                    need: total,
                    have: HEADER_LEN,
                });
                sh.refuse(peer, "tcp", &r);
                return;
            }
            Fill::Short(have) => {
                flush(c, &mut run);
                let r = Refusal::Batch(BatchError::Truncated {
                    need: total,
                    have: HEADER_LEN + have,
                });
                sh.refuse(peer, "tcp", &r);
                return;
            }
            Fill::Stopped | Fill::Failed(_) => {
                flush(c, &mut run);
                return;
            }
            Fill::Timeout { have } => {
                flush(c, &mut run);
                sh.refuse(peer, "tcp", &stalled(sh, HEADER_LEN + have, total));
                return;
            }
        }
        match sh.accept_tcp(&buf[..total], session) {
            Ok((seq, number)) => {
                run.batches += 1;
                run.last = Some((number, seq));
            }
            Err(r) => {
                flush(c, &mut run);
                sh.refuse(peer, "tcp", &r);
                return;
            }
        }
    }
}

fn stalled(sh: &Shared, have: usize, need: usize) -> Refusal {
    Refusal::Other(
        "message_timeout",
        format!(
            "a message did not arrive whole within {:?} ({have} of {need} bytes); closed",
            sh.cfg.message_timeout
        ),
    )
}
