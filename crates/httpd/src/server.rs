//! The accept loop: a thread per connection, at most `max_connections` at once; each reads one
//! request under the limits and hands it to the handler. When all places are taken, a new
//! connection takes the place of the one that has shown least (see [`Stage`]) and, among those,
//! the oldest: peers that hold sockets without finishing a handshake or a request cannot lock
//! the clients with certificates out, and a running answer is never cut for a newcomer.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::conn::Conn;
use crate::request::{read_request, Limits, Refusal, Request};
use crate::response::send;

/// The stack of each connection's thread, whatever RUST_MIN_STACK says: a handler that runs
/// recursive code (serve's expression parser) can rely on it, and check in a smaller stack first.
pub const CONNECTION_STACK: usize = 2 << 20;

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
    /// Connections served at once. A new one beyond them closes the one that has shown least
    /// (oldest first) that is not being answered; when every one is being answered, the new
    /// one is closed at once.
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

/// How far a connection got, in the order places are taken back when the server is full: a peer
/// that has not even sent a whole first message goes first, one with a certificate that has not
/// finished its request last; one being answered is never closed for a newcomer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// Accepted; nothing whole received yet (TLS: no ClientHello; plain HTTP: the request).
    Connected,
    /// TLS: the ClientHello was answered; the client's certificate has not come yet.
    Handshake,
    /// TLS done (the client showed a certificate our CA signed): its request is being read.
    Request,
    /// The handler runs (a query): never taken back.
    Answering,
}

/// One open connection.
struct Open {
    id: u64,
    since: Instant,
    stage: Stage,
    /// A handle on the socket, to close it from the accept loop.
    sock: TcpStream,
    peer: SocketAddr,
}

/// The open connections, and the threads still running (a closed connection's thread may take
/// a moment to notice).
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

    /// A place for `sock`; when all are taken, the place of the connection that has shown least
    /// (the oldest of those) is taken back: its socket is shut, which ends its thread's reads at
    /// once, and the returned line says whose it was. None: every place is answering a request
    /// (or too many closed connections' threads have not ended yet).
    fn admit(
        self: &Arc<Self>,
        sock: &TcpStream,
        peer: SocketAddr,
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
                Stage::Connected => "had not sent a whole first message",
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
            stage: Stage::Connected,
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
        !self.advance(Stage::Connected)
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
    std::thread::Builder::new()
        .name(config.name.clone())
        .spawn(move || accept_loop(listener, Arc::new(config), handler))
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
    for accepted in listener.incoming() {
        let sock = match accepted {
            Ok(s) => s,
            // Out of descriptors or memory: wait rather than spin.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let Ok(peer) = sock.peer_addr() else {
            continue;
        };
        let Some((ticket, evicted)) = registry.admit(&sock, peer) else {
            continue; // dropped: closed at once
        };
        if let Some((who, why)) = evicted {
            handler.rejected(who, &why);
        }
        let (config, handler) = (config.clone(), handler.clone());
        // A failed spawn drops the closure, and with it the socket and the ticket.
        let _ = std::thread::Builder::new()
            .name(config.name.clone())
            .stack_size(CONNECTION_STACK)
            .spawn(move || serve_connection(sock, peer, &ticket, &config, &*handler));
    }
}

const TEXT: &str = "text/plain; charset=utf-8";
const HTTPS_ONLY: &str = "this port speaks HTTPS (TLS with a client certificate): use https://\n";

/// Whether the client's first byte is a letter, as an HTTP request line starts (a TLS client
/// starts with 0x16): such a client is told to use https:// instead of getting a TLS alert it
/// would take for a broken HTTP/0.9 answer.
fn plain_http_first(sock: &TcpStream, deadline: Instant) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    let mut first = [0u8; 1];
    sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))
        .is_ok()
        && matches!(sock.peek(&mut first), Ok(1))
        && first[0].is_ascii_uppercase()
}

fn serve_connection<H: Handler>(
    sock: TcpStream,
    peer: SocketAddr,
    ticket: &Ticket,
    config: &Config,
    handler: &H,
) {
    // A connection closed to make room was logged when it was closed: nothing more about it.
    let rejected = |why: &str| {
        if !ticket.evicted() {
            handler.rejected(peer, why);
        }
    };
    let conn = match &config.tls {
        Some(tls) => {
            let deadline = Instant::now() + config.handshake_deadline;
            if plain_http_first(&sock, deadline) {
                rejected("plain HTTP sent to the HTTPS port");
                let mut conn = Conn::plain(sock, peer);
                let _ = send(&mut conn, 400, TEXT, &[], HTTPS_ONLY.as_bytes(), false);
                conn.close();
                return;
            }
            let mut answered = || {
                ticket.advance(Stage::Handshake);
            };
            Conn::tls_handshake(sock, peer, tls.clone(), deadline, &mut answered)
        }
        None => Ok(Conn::plain(sock, peer)),
    };
    let mut conn = match conn {
        Ok(c) => c,
        Err(e) => {
            rejected(&format!("TLS handshake failed: {e}"));
            return;
        }
    };
    if conn.set_write_stall(config.write_stall).is_err() {
        return;
    }
    // Only a certificate lifts a peer above the others (plain HTTP is for loopback alone).
    if conn.is_tls() && !ticket.advance(Stage::Request) {
        return;
    }
    match read_request(&mut conn, &config.limits) {
        // Answering from here on: the place is not taken back for a newcomer.
        Ok(request) if ticket.advance(Stage::Answering) => {
            let _ = handler.handle(request, &mut conn);
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
    fn a_new_connection_takes_the_place_of_the_oldest_unfinished_request() {
        let addr = server(2);
        // Two peers that never finish their requests hold both places.
        let stalled: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"P").unwrap();
                std::thread::sleep(Duration::from_millis(50));
                s
            })
            .collect();
        let started = Instant::now();
        let out = exchange(addr, b"POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok");
        assert!(
            out.starts_with("HTTP/1.1 200 ") && out.ends_with("ok"),
            "{out}"
        );
        assert!(started.elapsed() < Duration::from_millis(250));
        // The oldest was closed without an answer; the other kept its place until its request
        // deadline, which it is told.
        let answers: Vec<String> = stalled
            .iter()
            .map(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                out
            })
            .collect();
        assert_eq!(answers[0], "");
        assert!(answers[1].starts_with("HTTP/1.1 408 "), "{}", answers[1]);
    }
}
