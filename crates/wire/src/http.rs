//! The start of an HTTP/1.x request (RFC 9112): method, request target, version and the Host header.
//!
//! [`Request::parse`] reads the first bytes a client sends on a connection. The request line must end
//! within the bytes (else `Truncated`) and look like HTTP: a method of token characters (at most
//! [`MAX_METHOD`] bytes), one space, a target without spaces or control bytes, one space, `HTTP/1.0` or
//! `HTTP/1.1`. Header lines are then scanned up to the empty line, the end of the bytes, or
//! [`MAX_HEAD`] bytes, whichever comes first; [`Request::head_complete`] tells which. Lines may end in
//! CRLF or a bare LF. Everything is borrowed; nothing allocates.

use crate::error::{Error, Result};

const HDR: &str = "HTTP request";

/// Longest method accepted (the longest registered method, `UPDATEREDIRECTREF`, has 17 bytes).
pub const MAX_METHOD: usize = 20;

/// Bytes of request head scanned for Host, request line included.
pub const MAX_HEAD: usize = 8192;

fn malformed(what: &'static str) -> Error {
    Error::Malformed { header: HDR, what }
}

/// The start of an HTTP/1.x request, borrowed from the bytes it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    method: &'a [u8],
    target: &'a [u8],
    minor: u8,
    host: Option<&'a [u8]>,
    complete: bool,
}

impl<'a> Request<'a> {
    /// Reads the request line and the headers present (see the module documentation).
    pub fn parse(data: &'a [u8]) -> Result<Self> {
        let data = &data[..data.len().min(MAX_HEAD)];
        let Some(eol) = data.iter().position(|&b| b == b'\n') else {
            // Refuse early what cannot become a request line, so non-HTTP flows are not held as "more".
            check_prefix(data)?;
            if data.len() == MAX_HEAD {
                return Err(malformed("request line longer than the head bound"));
            }
            return Err(Error::Truncated {
                header: HDR,
                need: data.len() + 1,
                have: data.len(),
            });
        };
        let line = trim_cr(&data[..eol]);
        let (method, target, minor) = request_line(line)?;
        let mut r = Request {
            method,
            target,
            minor,
            host: None,
            complete: false,
        };
        let mut rest = &data[eol + 1..];
        while let Some(eol) = rest.iter().position(|&b| b == b'\n') {
            let line = trim_cr(&rest[..eol]);
            rest = &rest[eol + 1..];
            if line.is_empty() {
                r.complete = true;
                break;
            }
            if r.host.is_none() {
                if let Some(v) = header_value(line, b"host") {
                    r.host = Some(v);
                }
            }
        }
        Ok(r)
    }

    /// The method (`GET`, `POST`, …), as sent.
    pub fn method(&self) -> &'a [u8] {
        self.method
    }

    /// The request target as sent: a path with its query (`/a/b?c`), or an absolute URI (to a proxy),
    /// an authority (`CONNECT`) or `*` (`OPTIONS`).
    pub fn target(&self) -> &'a [u8] {
        self.target
    }

    /// The target's path without the query: the target up to `?` or `#` (for an absolute URI, the part
    /// after its authority, `/` when empty). `CONNECT` and `*` give the whole target.
    pub fn path(&self) -> &'a [u8] {
        let t = self.target;
        let t = match find(t, b"://") {
            Some(i)
                if t[..i]
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b)) =>
            {
                let after = &t[i + 3..];
                match after
                    .iter()
                    .position(|&b| b == b'/' || b == b'?' || b == b'#')
                {
                    Some(p) if after[p] == b'/' => &after[p..],
                    _ => return b"/",
                }
            }
            _ => t,
        };
        let end = t
            .iter()
            .position(|&b| b == b'?' || b == b'#')
            .unwrap_or(t.len());
        &t[..end]
    }

    /// The minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub fn minor_version(&self) -> u8 {
        self.minor
    }

    /// The value of the first Host header among the lines read, without surrounding spaces and tabs.
    pub fn host(&self) -> Option<&'a [u8]> {
        self.host
    }

    /// True when the empty line ending the head was seen (all headers were read).
    pub fn head_complete(&self) -> bool {
        self.complete
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// RFC 9110 tchar.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Refuses a line start that can never be a request line: a method too long or with other bytes.
fn check_prefix(data: &[u8]) -> Result<()> {
    let m = data.iter().position(|&b| b == b' ').unwrap_or(data.len());
    if m > MAX_METHOD || !data[..m].iter().all(|&b| is_tchar(b)) {
        return Err(malformed("not a request line"));
    }
    Ok(())
}

fn request_line(line: &[u8]) -> Result<(&[u8], &[u8], u8)> {
    let bad = || malformed("not a request line");
    let sp = line.iter().position(|&b| b == b' ').ok_or_else(bad)?;
    let method = &line[..sp];
    if method.is_empty() || method.len() > MAX_METHOD || !method.iter().all(|&b| is_tchar(b)) {
        return Err(bad());
    }
    let rest = &line[sp + 1..];
    let sp = rest.iter().position(|&b| b == b' ').ok_or_else(bad)?;
    let target = &rest[..sp];
    if target.is_empty() || target.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(bad());
    }
    let minor = match &rest[sp + 1..] {
        b"HTTP/1.1" => 1,
        b"HTTP/1.0" => 0,
        _ => return Err(bad()),
    };
    Ok((method, target, minor))
}

/// The value of a header line named `name` (lower case), trimmed.
fn header_value<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let colon = line.iter().position(|&b| b == b':')?;
    if !line[..colon].eq_ignore_ascii_case(name) {
        return None;
    }
    let v = &line[colon + 1..];
    let start = v
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    Some(&v[start..end.max(start)])
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
