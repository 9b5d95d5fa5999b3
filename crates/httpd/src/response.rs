//! Writing responses: whole ones with a Content-Length, and bodies streamed as they are made.

use std::io::{self, Write};

/// Bytes gathered into one chunk of a streamed body.
const CHUNK: usize = 64 << 10;

/// The reason phrase of the statuses ringcap's endpoints answer.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

fn head(status: u16, content_type: &str, length: Option<usize>, extra: &[(&str, &str)]) -> String {
    let mut h = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nConnection: close\r\n",
        reason(status)
    );
    match length {
        Some(n) => h.push_str(&format!("Content-Length: {n}\r\n")),
        None => h.push_str("Transfer-Encoding: chunked\r\n"),
    }
    for (k, v) in extra {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    h
}

/// A whole response: status, content type, extra headers and body; `head_only` (a HEAD request)
/// sends the headers alone. The connection closes after it.
pub fn send(
    out: &mut impl Write,
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    head_only: bool,
) -> io::Result<()> {
    let mut bytes = head(status, content_type, Some(body.len()), extra).into_bytes();
    if !head_only {
        bytes.extend_from_slice(body);
    }
    out.write_all(&bytes)?;
    out.flush()
}

/// A response body sent while it is being made. HTTP/1.1 clients get it chunked, so a body cut
/// by an error (dropped without [`BodyStream::finish`]) is seen as cut: it lacks the last chunk
/// (curl: "transfer closed with outstanding read data remaining"). HTTP/1.0 clients get the
/// bytes until the connection closes.
pub struct BodyStream<W: Write> {
    out: W,
    buf: Vec<u8>,
    chunked: bool,
}

impl<W: Write> BodyStream<W> {
    /// Sends the status line and headers (200 or another status) and starts the body.
    pub fn start(
        mut out: W,
        status: u16,
        content_type: &str,
        extra: &[(&str, &str)],
        http10: bool,
    ) -> io::Result<Self> {
        let mut h = head(status, content_type, None, extra);
        if http10 {
            h = h.replace("Transfer-Encoding: chunked\r\n", "");
        }
        out.write_all(h.as_bytes())?;
        Ok(BodyStream {
            out,
            buf: Vec::with_capacity(CHUNK),
            chunked: !http10,
        })
    }

    fn send_buffered(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.chunked {
            self.out
                .write_all(format!("{:x}\r\n", self.buf.len()).as_bytes())?;
            self.buf.extend_from_slice(b"\r\n");
        }
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Ends the body properly (the last chunk) and flushes.
    pub fn finish(mut self) -> io::Result<W> {
        self.send_buffered()?;
        if self.chunked {
            self.out.write_all(b"0\r\n\r\n")?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> Write for BodyStream<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= CHUNK {
            self.send_buffered()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_buffered()?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_body_is_chunked_and_ends_with_the_last_chunk() {
        let mut s =
            BodyStream::start(Vec::new(), 200, "application/octet-stream", &[], false).unwrap();
        s.write_all(b"hello").unwrap();
        s.flush().unwrap();
        s.write_all(b" world").unwrap();
        let out = String::from_utf8(s.finish().unwrap()).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("Transfer-Encoding: chunked\r\n"), "{out}");
        assert!(
            out.ends_with("\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "{out}"
        );
    }

    #[test]
    fn a_whole_response_has_its_length_and_extra_headers() {
        let mut out = Vec::new();
        send(
            &mut out,
            503,
            "text/plain",
            &[("Retry-After", "5")],
            b"busy\n",
            false,
        )
        .unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
        assert!(out.contains("Content-Length: 5\r\n") && out.contains("Retry-After: 5\r\n"));
        assert!(out.ends_with("\r\n\r\nbusy\n"));
    }
}
