//! Requests of curl 7.88.1 to `python3 -m http.server` on loopback, captured with tcpdump (the TCP payload
//! of the request's frame); expectations from tshark 4.0.17: `http.request.method`, `http.request.uri`,
//! `http.request.uri.path`, `http.host`, `http.request.version`.

use super::*;

/// `curl 'http://127.0.0.1:8000/a/b.txt?x=1&y=2' -H 'Host: names.example.test:8000'`: tshark GET,
/// /a/b.txt?x=1&y=2, /a/b.txt, names.example.test:8000, HTTP/1.1.
const CURL_11: &[u8] = include_bytes!("../testdata/curl-http11.bin");
/// `curl --http1.0 http://localhost:8000/`: tshark GET, /, localhost:8000, HTTP/1.0.
const CURL_10: &[u8] = include_bytes!("../testdata/curl-http10.bin");

#[test]
fn curl_requests() {
    let r = Request::parse(CURL_11).unwrap();
    assert_eq!(r.method(), b"GET");
    assert_eq!(r.target(), b"/a/b.txt?x=1&y=2");
    assert_eq!(r.path(), b"/a/b.txt");
    assert_eq!(r.host(), Some(&b"names.example.test:8000"[..]));
    assert_eq!(r.minor_version(), 1);
    assert!(r.head_complete());
    let r = Request::parse(CURL_10).unwrap();
    assert_eq!(
        (r.method(), r.target(), r.path()),
        (&b"GET"[..], &b"/"[..], &b"/"[..])
    );
    assert_eq!(
        (r.host(), r.minor_version()),
        (Some(&b"localhost:8000"[..]), 0)
    );
}

#[test]
fn cut_requests() {
    let line = CURL_11.iter().position(|&b| b == b'\n').unwrap();
    for n in 0..=line {
        assert_eq!(
            Request::parse(&CURL_11[..n]),
            Err(Error::Truncated {
                header: HDR,
                need: n + 1,
                have: n
            }),
            "{n}"
        );
    }
    // The request line whole, the Host line not yet: no host, head not complete.
    let r = Request::parse(&CURL_11[..line + 10]).unwrap();
    assert_eq!((r.host(), r.head_complete()), (None, false));
    let host_end = line
        + 1
        + CURL_11[line + 1..]
            .iter()
            .position(|&b| b == b'\n')
            .unwrap();
    let r = Request::parse(&CURL_11[..host_end + 1]).unwrap();
    assert_eq!(
        (r.host(), r.head_complete()),
        (Some(&b"names.example.test:8000"[..]), false)
    );
}

#[test]
fn forms_of_the_target_and_headers() {
    let r = Request::parse(b"GET http://h.example:81/p/q?r HTTP/1.1\nhOsT:\t h.example:81 \t\n\n")
        .unwrap();
    assert_eq!(
        (r.path(), r.host()),
        (&b"/p/q"[..], Some(&b"h.example:81"[..]))
    );
    assert!(r.head_complete());
    let r = Request::parse(b"GET http://h.example HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!((r.path(), r.host()), (&b"/"[..], None));
    let r =
        Request::parse(b"CONNECT h.example:443 HTTP/1.1\r\nHost: h.example:443\r\n\r\n").unwrap();
    assert_eq!(r.path(), b"h.example:443");
    let r = Request::parse(b"OPTIONS * HTTP/1.1\r\nHost: a\r\nHost: b\r\nX-Host: c\r\n").unwrap();
    assert_eq!((r.path(), r.host()), (&b"*"[..], Some(&b"a"[..])));
    let r = Request::parse(b"GET /x#f HTTP/1.1\r\nHost:\r\n\r\n").unwrap();
    assert_eq!((r.path(), r.host()), (&b"/x"[..], Some(&b""[..])));
}

#[test]
fn not_requests() {
    for bad in [
        &b"HTTP/1.1 200 OK\r\n"[..],
        b"GET / HTTP/2.0\r\n",
        b"GET  / HTTP/1.1\r\n",
        b"GET / HTTP/1.1 \r\n",
        b"GET /\x01 HTTP/1.1\r\n",
        b"G(T / HTTP/1.1\r\n",
        b"\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"AVERYLONGMETHODNAMEOFMORETHANTWENTY",
    ] {
        assert_eq!(
            Request::parse(bad),
            Err(malformed("not a request line")),
            "{bad:?}"
        );
    }
    let mut long = b"GET /".to_vec();
    long.resize(MAX_HEAD + 10, b'a');
    assert_eq!(
        Request::parse(&long),
        Err(malformed("request line longer than the head bound"))
    );
}
