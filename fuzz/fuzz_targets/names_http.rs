//! wire::http on any bytes: no panic; a request that parses has a method of at most MAX_METHOD bytes, a
//! target without spaces, and a path and Host borrowed from the bytes; a cut line asks for one more byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::http::{Request, MAX_METHOD};
use wire::Error;

fn inside(part: &[u8], whole: &[u8]) -> bool {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    p >= w && p + part.len() <= w + whole.len()
}

fuzz_target!(|data: &[u8]| {
    match Request::parse(data) {
        Ok(r) => {
            assert!(!r.method().is_empty() && r.method().len() <= MAX_METHOD);
            assert!(inside(r.method(), data) && inside(r.target(), data));
            assert!(!r.target().contains(&b' '));
            assert!(r.path() == b"/" || inside(r.path(), r.target()));
            assert!(r.host().is_none_or(|h| inside(h, data)));
            assert!(r.minor_version() <= 1);
            let _ = r.head_complete();
        }
        Err(Error::Truncated { need, have, .. }) => {
            assert_eq!((need, have), (data.len() + 1, data.len()))
        }
        Err(_) => {}
    }
});
