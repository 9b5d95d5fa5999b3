//! The accept loop. A new connection first waits, without a thread, until its first message is
//! whole (TLS: the ClientHello; plain HTTP: the request head): the accept thread reads it with
//! poll, at most [`WAITING_PER_PLACE`] × `max_connections` connections at once; when more come,
//! the one that has waited longest with part of a first message is closed (else the one that
//! has waited longest). Peers that connect, send a byte and stall therefore cost no thread and
//! cannot take the places of clients, which send their first message whole and at once.
//!
//! A connection whose first message is whole takes a place (a thread; at most
//! `max_connections`); when all are taken, the one that has shown least (see [`Stage`]), the
//! oldest of those, is closed for it, but never one being answered. Each thread then reads one
//! request under the limits and hands it to the handler.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::conn::Conn;
use crate::request::{read_request, Limits, Refusal, Request};
use crate::response::send;

/// The stack of each connection's thread, whatever RUST_MIN_STACK says: a handler that runs
/// recursive code (serve's expression parser) can rely on it, and check in a smaller stack first.
pub const CONNECTION_STACK: usize = 2 << 20;
/// Connections that may wait for their first message, per place: they cost a socket and the
/// bytes received so far, no thread, so there can be many more of them than places.
pub const WAITING_PER_PLACE: usize = 8;
/// The longest TLS record (2^14 bytes of plaintext and what encryption may add, RFC 8446), plus
/// its 5-byte header: a ClientHello that claims more is handed on for rustls to refuse.
const MAX_RECORD: usize = 5 + (1 << 14) + 256;

/// What the server answers with.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request; the connection closes afterwards. An error means the client went
    /// away or the answer could not be sent: nothing more is said to it.
    fn handle(&self, request: Request, conn: &mut Conn) -> io::Result<()>;

    /// A connection refused before any request was handled: failed TLS handshake (no or a
    /// wrong client certificate), slow, oversized or malformed request, or closed to make room
    /// for a new one. For the log.
    fn rejected(&self, _peer: SocketAddr, _why: &str) {}
}

/// How the server treats its clients.
#[derive(Clone)]
pub struct Config {
    /// TLS (with the client-certificate verifier in it), or plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Connections served at once once their first message is whole (see the module's text).
    /// A new one beyond them closes the one that has shown least (oldest first) that is not
    /// being answered; when every one is being answered, the new one is closed at once.
    pub max_connections: usize,
    /// Time from accepting to a finished TLS handshake.
    pub handshake_deadline: Duration,
    /// What a request may be, and how long it may take to arrive.
    pub limits: Limits,
    /// A write that makes no progress this long fails (a client that stopped reading).
    pub write_stall: Duration,
    /// Name of the threads.
    pub name: String,
}

/// How far a connection with a place got, in the order places are taken back when all are
/// taken: one without a certificate yet first, one with a certificate that has not finished its
/// request next; one being answered never.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// TLS: the ClientHello was whole; the client's certificate has not come yet.
    Handshake,
    /// The request is being read (TLS: the client showed a certificate our CA signed).
    Request,
    /// The handler runs (a query): never taken back.
    Answering,
}

/// One connection with a place.
struct Open {
    id: u64,
    since: Instant,
    stage: Stage,
    /// A handle on the socket, to close it from the accept loop.
    sock: TcpStream,
    peer: SocketAddr,
}

/// The connections with a place, and the threads still running (a closed connection's thread
/// may take a moment to notice).
struct Places {
    open: Vec<Open>,
    threads: usize,
    next_id: u64,
}

struct Registry {
    places: Mutex<Places>,
    max: usize,
}

/// A connection's place, given back when its thread ends.
struct Ticket {
    registry: Arc<Registry>,
    id: u64,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Places> {
        self.places.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for `sock`, at `stage`; when all are taken, the place of the connection that has
    /// shown least (the oldest of those) is taken back: its socket is shut, which ends its
    /// thread's reads at once, and the returned line says whose it was. None: every place is
    /// answering a request (or too many closed connections' threads have not ended yet).
    fn admit(
        self: &Arc<Self>,
        sock: &TcpStream,
        peer: SocketAddr,
        stage: Stage,
    ) -> Option<(Ticket, Option<(SocketAddr, String)>)> {
        let handle = sock.try_clone().ok()?;
        let mut p = self.lock();
        // Threads of closed connections end within moments; bounded all the same.
        if p.threads >= 2 * self.max {
            return None;
        }
        let mut evicted = None;
        if p.open.len() >= self.max {
            let i = p
                .open
                .iter()
                .enumerate()
                .filter(|(_, o)| o.stage < Stage::Answering)
                .min_by_key(|(_, o)| (o.stage, o.since))
                .map(|(i, _)| i)?;
            let old = p.open.swap_remove(i);
            let _ = old.sock.shutdown(Shutdown::Both);
            let what = match old.stage {
                Stage::Handshake => "had not finished its TLS handshake",
                _ => "had not finished sending its request",
            };
            evicted = Some((
                old.peer,
                format!(
                    "closed to make room for a new connection (--max-connections {} reached): it {what} in {:.1} s",
                    self.max,
                    old.since.elapsed().as_secs_f64()
                ),
            ));
        }
        let id = p.next_id;
        p.next_id += 1;
        p.open.push(Open {
            id,
            since: Instant::now(),
            stage,
            sock: handle,
            peer,
        });
        p.threads += 1;
        let ticket = Ticket {
            registry: Arc::clone(self),
            id,
        };
        Some((ticket, evicted))
    }
}

impl Ticket {
    /// Moves the connection on; false when its place was taken back (it must end, silently).
    fn advance(&self, stage: Stage) -> bool {
        let mut p = self.registry.lock();
        match p.open.iter_mut().find(|o| o.id == self.id) {
            Some(o) => {
                o.stage = o.stage.max(stage);
                true
            }
            None => false,
        }
    }

    /// Whether its place was taken back (the reason was logged then).
    fn evicted(&self) -> bool {
        !self.advance(Stage::Handshake)
    }

    /// Gives the place back once the answer is sent: closing (close_notify, then waiting for
    /// the peer's close) may take a moment, and a client that has its answer may already be
    /// back with its next request; that request must not close another client's handshake to
    /// make room. The thread still counts until it ends.
    fn release(&self) {
        self.registry.lock().open.retain(|o| o.id != self.id);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut p = self.registry.lock();
        p.open.retain(|o| o.id != self.id);
        p.threads -= 1;
    }
}

/// Serves `listener` from a thread of its own until the process ends.
pub fn spawn<H: Handler>(
    listener: TcpListener,
    config: Config,
    handler: Arc<H>,
) -> io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name(config.name.clone())
        .spawn(move || accept_loop(listener, Arc::new(config), handler))
}

/// A connection waiting for its first message.
struct Waiting {
    sock: TcpStream,
    peer: SocketAddr,
    accepted: Instant,
    received: Vec<u8>,
}

/// What the bytes of a waiting connection make.
#[derive(Debug, PartialEq, Eq)]
enum First {
    /// Not whole yet.
    Partial,
    /// Whole (or never to be: handed on to be refused with the words that say why).
    Whole,
}

/// Whether `received` holds the first message: TLS: a whole first record (a ClientHello), or
/// a first byte that says it is no TLS (a letter: plain HTTP, told to use https://); plain
/// HTTP: the request head, or more bytes than a head may have.
fn first_message(tls: bool, received: &[u8], max_head: usize) -> First {
    let whole = if tls {
        match received {
            [] => false,
            [first, ..] if *first != 0x16 => true,
            [_, _, _, hi, lo, ..] => received.len() >= 5 + u16::from_be_bytes([*hi, *lo]) as usize,
            _ => false,
        }
    } else {
        received.len() > max_head
            || received.windows(4).any(|w| w == b"\r\n\r\n")
            || received.windows(2).any(|w| w == b"\n\n")
    };
    if whole {
        First::Whole
    } else {
        First::Partial
    }
}

fn poll_fd(fd: i32, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn accept_loop<H: Handler>(listener: TcpListener, config: Arc<Config>, handler: Arc<H>) {
    let registry = Arc::new(Registry {
        places: Mutex::new(Places {
            open: Vec::new(),
            threads: 0,
            next_id: 0,
        }),
        max: config.max_connections.max(1),
    });
    let tls = config.tls.is_some();
    // How long a connection may wait for its first message: the handshake's or the request's.
    let first_deadline = if tls {
        config.handshake_deadline
    } else {
        config.limits.deadline
    };
    let max_waiting = registry.max * WAITING_PER_PLACE;
    // What a first message may be: a TLS record, or a request head and a bit.
    let max_first = if tls {
        MAX_RECORD
    } else {
        config.limits.max_head + 1
    };
    let mut waiting: VecDeque<Waiting> = VecDeque::new();
    let mut accept_after = Instant::now();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        let now = Instant::now();
        let listening = now >= accept_after;
        fds.clear();
        fds.push(poll_fd(
            listener.as_raw_fd(),
            if listening { libc::POLLIN } else { 0 },
        ));
        fds.extend(
            waiting
                .iter()
                .map(|w| poll_fd(w.sock.as_raw_fd(), libc::POLLIN | libc::POLLRDHUP)),
        );
        let next = waiting
            .front()
            .map(|w| w.accepted + first_deadline)
            .into_iter()
            .chain((!listening).then_some(accept_after))
            .min();
        let timeout = next.map_or(-1, |t| {
            t.saturating_duration_since(now).as_millis().min(60_000) as i32 + 1
        });
        // SAFETY: a valid array of pollfds on sockets owned here.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) } < 0 {
            continue; // EINTR
        }
        // Waiting connections that sent something or hung up (from the back: removal by index).
        for i in (0..waiting.len()).rev() {
            if fds[i + 1].revents == 0 {
                continue;
            }
            let w = &mut waiting[i];
            let mut chunk = [0u8; 4096];
            let room = max_first
                .saturating_sub(w.received.len())
                .clamp(1, chunk.len());
            let gone = match (&w.sock).read(&mut chunk[..room]) {
                Ok(0) => true,
                Ok(n) => {
                    w.received.extend_from_slice(&chunk[..n]);
                    false
                }
                Err(e) => e.kind() != io::ErrorKind::WouldBlock,
            };
            let first = first_message(tls, &w.received, config.limits.max_head);
            if first == First::Whole || w.received.len() >= max_first {
                let w = waiting.remove(i).expect("in range");
                take_place(w, &registry, &config, &handler);
            } else if gone {
                // Closed before its first message was whole: a peer that never spoke, as
                // before (nothing to log).
                waiting.remove(i);
            }
        }
        // Those whose time is up are closed: a TLS peer (no ClientHello in time) silently, a
        // plain HTTP one told 408 first (a few bytes into an empty socket buffer: no wait).
        let now = Instant::now();
        while waiting
            .front()
            .is_some_and(|w| now >= w.accepted + first_deadline)
        {
            let w = waiting.pop_front().expect("non-empty");
            let secs = first_deadline.as_secs_f64();
            if tls {
                let why = format!("TLS handshake failed: no whole ClientHello within {secs} s");
                handler.rejected(w.peer, &why);
            } else {
                let why = format!("the request did not arrive within {secs} s");
                handler.rejected(w.peer, &format!("408: {why}"));
                let mut bytes = Vec::new();
                let _ = send(
                    &mut bytes,
                    408,
                    TEXT,
                    &[],
                    format!("{why}\n").as_bytes(),
                    false,
                );
                let _ = (&w.sock).write(&bytes);
                let _ = w.sock.shutdown(Shutdown::Write);
            }
        }
        if !listening || fds[0].revents == 0 {
            continue;
        }
        // One at a time: the bytes the others sent meanwhile are read (by the poll above)
        // before the next choice of whom to close.
        match listener.accept() {
            Ok((sock, peer)) => {
                // Read here without waiting; its thread gets it blocking again.
                if sock.set_nonblocking(true).is_err() {
                    continue;
                }
                if waiting.len() >= max_waiting {
                    // The oldest that sent part of a first message and stalled goes first; a
                    // client that has connected but whose first bytes are still on their way
                    // has sent nothing yet, and is closed only when no one stalls.
                    let i = waiting
                        .iter()
                        .position(|w| !w.received.is_empty())
                        .unwrap_or(0);
                    let old = waiting.remove(i).expect("in range");
                    handler.rejected(
                        old.peer,
                        &format!(
                            "closed to make room for a new connection ({max_waiting} waiting for their first message): it had sent {} byte{} in {:.1} s",
                            old.received.len(),
                            if old.received.len() == 1 { "" } else { "s" },
                            old.accepted.elapsed().as_secs_f64()
                        ),
                    );
                }
                waiting.push_back(Waiting {
                    sock,
                    peer,
                    accepted: Instant::now(),
                    received: Vec::new(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // Out of descriptors or memory: wait rather than spin.
            Err(_) => accept_after = Instant::now() + Duration::from_millis(100),
        }
    }
}

/// Gives a connection whose first message is whole (or whose time is up) a place and a thread.
fn take_place<H: Handler>(
    w: Waiting,
    registry: &Arc<Registry>,
    config: &Arc<Config>,
    handler: &Arc<H>,
) {
    if w.sock.set_nonblocking(false).is_err() {
        return;
    }
    let stage = if config.tls.is_some() {
        Stage::Handshake
    } else {
        Stage::Request
    };
    let Some((ticket, evicted)) = registry.admit(&w.sock, w.peer, stage) else {
        return; // dropped: closed at once
    };
    if let Some((who, why)) = evicted {
        handler.rejected(who, &why);
    }
    let (config, handler) = (config.clone(), handler.clone());
    // A failed spawn drops the closure, and with it the socket and the ticket.
    let _ = std::thread::Builder::new()
        .name(config.name.clone())
        .stack_size(CONNECTION_STACK)
        .spawn(move || serve_connection(w, &ticket, &config, &*handler));
}

const TEXT: &str = "text/plain; charset=utf-8";
const HTTPS_ONLY: &str = "this port speaks HTTPS (TLS with a client certificate): use https://\n";

fn serve_connection<H: Handler>(w: Waiting, ticket: &Ticket, config: &Config, handler: &H) {
    let Waiting {
        sock,
        peer,
        accepted,
        received,
    } = w;
    // A connection closed to make room was logged when it was closed: nothing more about it.
    let rejected = |why: &str| {
        if !ticket.evicted() {
            handler.rejected(peer, why);
        }
    };
    let (conn, received) = match &config.tls {
        // A client whose first byte is a letter, as an HTTP request line starts (a TLS client
        // starts with 0x16), is told to use https:// instead of getting a TLS alert it would
        // take for a broken HTTP/0.9 answer.
        Some(_) if received.first().is_some_and(u8::is_ascii_uppercase) => {
            rejected("plain HTTP sent to the HTTPS port");
            let mut conn = Conn::plain(sock, peer);
            let _ = send(&mut conn, 400, TEXT, &[], HTTPS_ONLY.as_bytes(), false);
            conn.close();
            return;
        }
        Some(tls) => {
            let deadline = accepted + config.handshake_deadline;
            let conn = Conn::tls_handshake(sock, peer, tls.clone(), deadline, &received);
            (conn, Vec::new())
        }
        None => (Ok(Conn::plain(sock, peer)), received),
    };
    let mut conn = match conn {
        Ok(c) => c,
        Err(e) => {
            rejected(&format!("TLS handshake failed: {e}"));
            return;
        }
    };
    if conn.set_write_stall(config.write_stall).is_err() || !ticket.advance(Stage::Request) {
        return;
    }
    // Plain HTTP: the request's time began at accept; TLS: when the handshake ended.
    let deadline = if conn.is_tls() {
        Instant::now() + config.limits.deadline
    } else {
        accepted + config.limits.deadline
    };
    match read_request(&mut conn, &config.limits, received, deadline) {
        // Answering from here on: the place is not taken back for a newcomer.
        Ok(request) if ticket.advance(Stage::Answering) => {
            let _ = handler.handle(request, &mut conn);
            ticket.release();
        }
        Ok(_) => return,
        Err(_) if ticket.evicted() => return,
        Err(Refusal::Answer(status, why)) => {
            rejected(&format!("{status}: {why}"));
            let body = format!("{why}\n");
            let _ = send(&mut conn, status, TEXT, &[], body.as_bytes(), false);
        }
        Err(Refusal::Gone) => {}
    }
    conn.close();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    struct Echo;

    impl Handler for Echo {
        fn handle(&self, r: Request, conn: &mut Conn) -> io::Result<()> {
            if r.path() == "/slow" {
                std::thread::sleep(Duration::from_millis(500));
            }
            send(conn, 200, "text/plain", &[], &r.body, false)
        }
    }

    fn server(max_connections: usize) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let config = Config {
            tls: None,
            max_connections,
            handshake_deadline: Duration::from_secs(1),
            limits: Limits {
                deadline: Duration::from_millis(300),
                max_head: 1024,
                max_headers: 8,
                max_body: 64,
            },
            write_stall: Duration::from_secs(1),
            name: "test-httpd".into(),
        };
        spawn(listener, config, Arc::new(Echo)).unwrap();
        addr
    }

    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(request); // a refused connection may be reset already
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn answers_a_request_with_its_body() {
        let addr = server(4);
        let out = exchange(addr, b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
        assert!(
            out.starts_with("HTTP/1.1 200 OK\r\n") && out.ends_with("\r\n\r\nhello"),
            "{out}"
        );
    }

    #[test]
    fn an_oversized_head_is_refused_even_when_it_arrives_whole() {
        let addr = server(4);
        let request = format!("GET / HTTP/1.1\r\nA: {}\r\n\r\n", "a".repeat(2000));
        let out = exchange(addr, request.as_bytes());
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    }

    #[test]
    fn a_request_that_never_ends_is_cut_at_the_deadline() {
        let addr = server(4);
        let started = Instant::now();
        let out = exchange(addr, b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhe");
        assert!(out.starts_with("HTTP/1.1 408 "), "{out}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn connections_beyond_the_limit_are_closed_at_once() {
        let addr = server(1);
        let busy = std::thread::spawn(move || exchange(addr, b"GET /slow HTTP/1.1\r\n\r\n"));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(exchange(addr, b"GET / HTTP/1.1\r\n\r\n"), "");
        assert!(busy.join().unwrap().starts_with("HTTP/1.1 200"));
        // The slot is free again once the first connection ended.
        std::thread::sleep(Duration::from_millis(100));
        assert!(exchange(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn a_client_that_has_its_answer_holds_no_place_while_the_server_closes() {
        let addr = server(1);
        // It reads the whole answer (to the server's FIN) but keeps its socket open: the
        // server lingers, waiting for its close, and must not keep the next client out.
        let mut first = TcpStream::connect(addr).unwrap();
        first.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert!(answer(&first).starts_with("HTTP/1.1 200"));
        let out = exchange(addr, b"POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok");
        assert!(
            out.starts_with("HTTP/1.1 200 ") && out.ends_with("ok"),
            "{out}"
        );
        drop(first);
    }

    /// Reads what the server says until it closes the connection.
    fn answer(mut s: &TcpStream) -> String {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn stalled(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(bytes).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        s
    }

    #[test]
    fn peers_that_stall_before_their_first_message_take_no_place() {
        let addr = server(1);
        // Eight may wait per place: the client, ninth, closes the one that waited longest.
        let peers: Vec<TcpStream> = (0..8).map(|_| stalled(addr, b"P")).collect();
        let started = Instant::now();
        let out = exchange(addr, b"POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok");
        assert!(
            out.starts_with("HTTP/1.1 200 ") && out.ends_with("ok"),
            "{out}"
        );
        assert!(started.elapsed() < Duration::from_millis(250));
        // The first was closed unanswered; the others were told 408 at their deadline.
        let answers: Vec<String> = peers.iter().map(answer).collect();
        assert_eq!(answers[0], "");
        for a in &answers[1..] {
            assert!(a.starts_with("HTTP/1.1 408 "), "{a}");
        }
    }

    #[test]
    fn a_new_connection_takes_the_place_of_an_unfinished_request_not_of_an_answer() {
        let addr = server(2);
        // One is answered (slowly), one holds a place with a body that never comes.
        let busy = std::thread::spawn(move || exchange(addr, b"GET /slow HTTP/1.1\r\n\r\n"));
        let unfinished = stalled(addr, b"POST /x HTTP/1.1\r\nContent-Length: 9\r\n\r\nab");
        std::thread::sleep(Duration::from_millis(50));
        let out = exchange(addr, b"POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok");
        assert!(
            out.starts_with("HTTP/1.1 200 ") && out.ends_with("ok"),
            "{out}"
        );
        assert_eq!(answer(&unfinished), "");
        assert!(busy.join().unwrap().starts_with("HTTP/1.1 200 "));
    }

    #[test]
    fn a_first_message_is_whole_at_the_end_of_its_tls_record_or_request_head() {
        let tls = |b: &[u8]| first_message(true, b, 100);
        assert_eq!(tls(b""), First::Partial);
        assert_eq!(tls(b"\x16"), First::Partial);
        assert_eq!(tls(b"\x16\x03\x01\x00\x03ab"), First::Partial);
        assert_eq!(tls(b"\x16\x03\x01\x00\x03abc"), First::Whole);
        assert_eq!(tls(b"G"), First::Whole);
        let plain = |b: &[u8]| first_message(false, b, 100);
        assert_eq!(plain(b"GET / HTTP/1.1\r\n"), First::Partial);
        assert_eq!(plain(b"GET / HTTP/1.1\r\n\r\n"), First::Whole);
        assert_eq!(plain(&[b'a'; 101]), First::Whole);
    }
}
