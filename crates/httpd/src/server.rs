//! The accept loop: a thread per connection, at most `max_connections` at once; each reads one
//! request under the limits and hands it to the handler.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::conn::Conn;
use crate::request::{read_request, Limits, Refusal, Request};
use crate::response::send;
use crate::slots::Slots;

/// What the server answers with.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request; the connection closes afterwards. An error means the client went
    /// away or the answer could not be sent: nothing more is said to it.
    fn handle(&self, request: Request, conn: &mut Conn) -> io::Result<()>;

    /// A connection refused before any request was handled: failed TLS handshake (no or a
    /// wrong client certificate), slow, oversized or malformed request. For the log.
    fn rejected(&self, _peer: SocketAddr, _why: &str) {}
}

/// How the server treats its clients.
#[derive(Clone)]
pub struct Config {
    /// TLS (with the client-certificate verifier in it), or plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Connections served at once; more are closed as soon as they are accepted.
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
    let open = Slots::new(config.max_connections);
    for accepted in listener.incoming() {
        let sock = match accepted {
            Ok(s) => s,
            // Out of descriptors or memory: wait rather than spin.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let Some(slot) = open.try_take() else {
            continue; // dropped: closed at once
        };
        let (config, handler) = (config.clone(), handler.clone());
        // A failed spawn drops the closure, and with it the socket and the slot.
        let _ = std::thread::Builder::new()
            .name(config.name.clone())
            .spawn(move || {
                let _slot = slot;
                serve_connection(sock, &config, &*handler);
            });
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

fn serve_connection<H: Handler>(sock: TcpStream, config: &Config, handler: &H) {
    let Ok(peer) = sock.peer_addr() else {
        return;
    };
    let conn = match &config.tls {
        Some(tls) => {
            let deadline = Instant::now() + config.handshake_deadline;
            if plain_http_first(&sock, deadline) {
                handler.rejected(peer, "plain HTTP sent to the HTTPS port");
                let mut conn = Conn::plain(sock, peer);
                let _ = send(&mut conn, 400, TEXT, &[], HTTPS_ONLY.as_bytes(), false);
                conn.close();
                return;
            }
            Conn::tls_handshake(sock, peer, tls.clone(), deadline)
        }
        None => Ok(Conn::plain(sock, peer)),
    };
    let mut conn = match conn {
        Ok(c) => c,
        Err(e) => {
            handler.rejected(peer, &format!("TLS handshake failed: {e}"));
            return;
        }
    };
    if conn.set_write_stall(config.write_stall).is_err() {
        return;
    }
    match read_request(&mut conn, &config.limits) {
        Ok(request) => {
            let _ = handler.handle(request, &mut conn);
        }
        Err(Refusal::Answer(status, why)) => {
            handler.rejected(peer, &format!("{status}: {why}"));
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
}
