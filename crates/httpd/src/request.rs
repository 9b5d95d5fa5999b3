//! Reading one request under limits: the request line and headers, then a body of at most a
//! given size announced by Content-Length, all within one deadline.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use crate::conn::Conn;

/// What a request may be.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The whole request (line, headers and body) must have arrived this long after the
    /// connection is ready (slowloris).
    pub deadline: Duration,
    /// Bytes of the request line and headers together.
    pub max_head: usize,
    /// Header lines.
    pub max_headers: usize,
    /// Bytes of the body.
    pub max_body: usize,
}

/// One request as the client sent it.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// "GET", "POST", ... as sent.
    pub method: String,
    /// The request target, e.g. "/query?x=1".
    pub target: String,
    /// HTTP/1.0 (no chunked responses).
    pub http10: bool,
    /// (name, value) in order, values trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The target without its query string.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The first header of that name (names compare without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why no request was read.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Answer with this status and text, then close.
    Answer(u16, String),
    /// The client went away (or never spoke): nothing to answer.
    Gone,
}

/// What the bytes received so far make of a request.
#[derive(Debug)]
pub enum Parsed {
    /// More bytes are needed. `wants_continue`: the head is complete and asks for `100 Continue`
    /// before the client sends its body.
    Incomplete { wants_continue: bool },
    /// A whole request (bytes after its body are ignored: one request per connection).
    Complete(Request),
    /// To be refused with this status and reason.
    Refused(u16, String),
}

/// A status and the reason sent with it.
type Refusing = (u16, String);

fn refusing(status: u16, why: impl Into<String>) -> Refusing {
    (status, why.into())
}

/// Parses the bytes a client sent so far (no I/O, so it can be fuzzed): the request line and
/// headers within `limits`, then a body of Content-Length bytes.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Parsed {
    let too_large = || {
        Parsed::Refused(
            431,
            format!(
                "the request line and headers exceed {} bytes",
                limits.max_head
            ),
        )
    };
    let end = match head_end(buf) {
        Some(end) if end > limits.max_head => return too_large(),
        Some(end) => end,
        None if buf.len() > limits.max_head => return too_large(),
        None => {
            return Parsed::Incomplete {
                wants_continue: false,
            }
        }
    };
    let head =
        parse_head(&buf[..end], limits).and_then(|r| body_length(&r, limits).map(|n| (r, n)));
    let (mut request, length) = match head {
        Ok(h) => h,
        Err((status, why)) => return Parsed::Refused(status, why),
    };
    let body = &buf[end..];
    if body.len() < length {
        let wants_continue = request
            .header("expect")
            .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"));
        return Parsed::Incomplete { wants_continue };
    }
    request.body = body[..length].to_vec();
    Parsed::Complete(request)
}

/// Reads one request from `conn` by `deadline` within `limits`, after the bytes `received`
/// already; the connection's read deadline is cleared again once it is read.
pub(crate) fn read_request(
    conn: &mut Conn,
    limits: &Limits,
    received: Vec<u8>,
    deadline: Instant,
) -> Result<Request, Refusal> {
    conn.set_read_deadline(Some(deadline))
        .map_err(|_| Refusal::Gone)?;
    let mut buf = received;
    let mut continued = false;
    loop {
        match parse_request(&buf, limits) {
            Parsed::Complete(request) => {
                conn.set_read_deadline(None).map_err(|_| Refusal::Gone)?;
                return Ok(request);
            }
            Parsed::Refused(status, why) => return Err(Refusal::Answer(status, why)),
            Parsed::Incomplete { wants_continue } => {
                if wants_continue && !continued {
                    // curl waits a second for this before sending a body it announced.
                    conn.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                        .and_then(|_| conn.flush())
                        .map_err(|_| Refusal::Gone)?;
                    continued = true;
                }
                read_some(conn, &mut buf, limits)?;
            }
        }
    }
}

/// Appends what the next read gives; a closed connection or the deadline ends the request.
fn read_some(conn: &mut Conn, buf: &mut Vec<u8>, limits: &Limits) -> Result<(), Refusal> {
    let mut chunk = [0u8; 4096];
    match conn.read(&mut chunk) {
        Ok(0) if buf.is_empty() => Err(Refusal::Gone),
        Ok(0) => Err(Refusal::Answer(
            400,
            "the connection ended inside the request".into(),
        )),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::TimedOut => Err(Refusal::Answer(
            408,
            format!(
                "the request did not arrive within {} s",
                limits.deadline.as_secs_f64()
            ),
        )),
        Err(_) => Err(Refusal::Gone),
    }
}

/// Where the headers end (past the blank line), if they do.
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn parse_head(head: &[u8], limits: &Limits) -> Result<Request, Refusing> {
    let text =
        std::str::from_utf8(head).map_err(|_| refusing(400, "the request head is not UTF-8"))?;
    let mut lines = text.lines().map(|l| l.trim_end_matches('\r'));
    let line = lines.next().unwrap_or("");
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(refusing(400, format!("not an HTTP request line: {line:?}")));
    };
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => {
            return Err(refusing(
                505,
                format!("{version} is not spoken here: use HTTP/1.1"),
            ))
        }
    };
    if method.is_empty() || !target.starts_with('/') {
        return Err(refusing(400, format!("not an HTTP request line: {line:?}")));
    }
    let mut headers = Vec::new();
    for l in lines.take_while(|l| !l.is_empty()) {
        if headers.len() == limits.max_headers {
            return Err(refusing(
                431,
                format!("more than {} header lines", limits.max_headers),
            ));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(refusing(400, format!("not a header line: {l:?}")));
        };
        if name.is_empty() || name.contains(|c: char| c.is_whitespace()) {
            return Err(refusing(400, format!("not a header name: {name:?}")));
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    Ok(Request {
        method: method.to_string(),
        target: target.to_string(),
        http10,
        headers,
        body: Vec::new(),
    })
}

/// The body's length from Content-Length: digits only (RFC 9110: `1*DIGIT`; a sign, spaces or a
/// list are refused, so a proxy in front cannot read the framing differently), the same value if
/// repeated. POST, PUT and PATCH must give it (411): read as an empty body, a POST without it
/// would be taken for the empty query, which matches everything. Chunked bodies are refused.
fn body_length(r: &Request, limits: &Limits) -> Result<usize, Refusing> {
    if r.header("transfer-encoding").is_some() {
        return Err(refusing(
            411,
            "send the body with a Content-Length (curl --data does); chunked request bodies are not accepted",
        ));
    }
    let too_large = |length: &dyn std::fmt::Display| {
        refusing(
            413,
            format!(
                "the body is {length} bytes; at most {} are accepted",
                limits.max_body
            ),
        )
    };
    let mut length: Option<u64> = None;
    for (_, v) in r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(refusing(
                400,
                format!("bad Content-Length {v:?}: decimal digits only"),
            ));
        }
        // All digits: a value past u64 is past any limit.
        let n: u64 = v.parse().map_err(|_| too_large(v))?;
        if length.is_some_and(|l| l != n) {
            return Err(refusing(400, "Content-Length given twice, differently"));
        }
        length = Some(n);
    }
    let length = match length {
        Some(n) => n,
        None if ["POST", "PUT", "PATCH"].contains(&r.method.as_str()) => {
            return Err(refusing(
                411,
                format!(
                    "a {} needs a Content-Length (curl --data sends one; an empty body is Content-Length: 0)",
                    r.method
                ),
            ))
        }
        None => 0,
    };
    if length > limits.max_body as u64 {
        return Err(too_large(&length));
    }
    Ok(length as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            deadline: Duration::from_secs(1),
            max_head: 1024,
            max_headers: 4,
            max_body: 16,
        }
    }

    /// 0: complete, 1: incomplete, else the refusal's status.
    fn status(p: Parsed) -> u16 {
        match p {
            Parsed::Complete(_) => 0,
            Parsed::Incomplete { .. } => 1,
            Parsed::Refused(s, _) => s,
        }
    }

    fn head(text: &str) -> Parsed {
        parse_request(text.as_bytes(), &limits())
    }

    fn complete(text: &str) -> Request {
        match head(text) {
            Parsed::Complete(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_request_line_and_headers_parse() {
        let r = complete("POST /query?a=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcd");
        assert_eq!(
            (r.method.as_str(), r.path(), r.http10),
            ("POST", "/query", false)
        );
        assert_eq!(
            (r.header("content-length"), &r.body[..]),
            (Some("3"), &b"abc"[..])
        );
        assert!(complete("GET / HTTP/1.0\n\n").http10);
    }

    #[test]
    fn malformed_or_oversized_requests_get_the_status_that_says_why() {
        assert_eq!(status(head("GET /\r\n\r\n")), 400);
        assert_eq!(status(head("GET / HTTP/2\r\n\r\n")), 505);
        assert_eq!(status(head("GET / HTTP/1.1\r\nno colon\r\n\r\n")), 400);
        assert_eq!(status(head("GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n")), 400);
        let many = "GET / HTTP/1.1\r\n".to_string() + &"A: 1\r\n".repeat(5) + "\r\n";
        assert_eq!(status(head(&many)), 431);
        assert_eq!(
            status(head("POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n")),
            413
        );
        assert_eq!(
            status(head("POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n")),
            400
        );
        assert_eq!(
            status(head(
                "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
            )),
            400
        );
        assert_eq!(
            status(head(
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            )),
            411
        );
    }

    #[test]
    fn content_length_is_digits_only_and_required_with_a_body_method() {
        let post = |cl: &str| status(head(&format!("POST / HTTP/1.1\r\n{cl}\r\nabc")));
        for bad in ["+3", "-3", "3 3", "0x3", "3, 3", "", "3.0", "\u{0663}"] {
            let cl = format!("Content-Length: {bad}\r\n");
            assert_eq!(post(&cl), 400, "{bad:?}");
        }
        // Optional whitespace around the value is allowed; so is the same value twice.
        assert_eq!(post("Content-Length:  3 \r\n"), 0);
        assert_eq!(post("Content-Length: 3\r\nContent-Length: 3\r\n"), 0);
        assert_eq!(post("Content-Length: 3\r\ncontent-length: 2\r\n"), 400);
        assert_eq!(post("Content-Length: 99999999999999999999999\r\n"), 413);
        assert_eq!(post("Content-Length: 0003\r\n"), 0);
        // Without it: a POST is refused; a GET has no body.
        assert_eq!(post(""), 411);
        assert_eq!(status(head("PUT / HTTP/1.1\r\n\r\n")), 411);
        assert_eq!(status(head("GET / HTTP/1.1\r\n\r\n")), 0);
        assert_eq!(
            status(head("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n")),
            0
        );
    }

    #[test]
    fn a_request_is_incomplete_until_its_body_is_whole() {
        assert_eq!(status(head("POST / HTTP/1.1\r\nContent-Le")), 1);
        let announced = "POST / HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\nab";
        assert!(matches!(
            head(announced),
            Parsed::Incomplete {
                wants_continue: true
            }
        ));
        assert_eq!(status(head(&format!("{announced}cd"))), 0);
        assert_eq!(status(head(&"a".repeat(1100))), 431);
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nbody"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }
}
