//! Requests come from any peer that reaches `ringcap serve` or `--metrics`: any bytes give a
//! request, a refusal or "more bytes", never a panic, and a whole request keeps the limits.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = httpd::Limits {
        deadline: std::time::Duration::from_secs(1),
        max_head: 1024,
        max_headers: 16,
        max_body: 256,
    };
    if let httpd::Parsed::Complete(r) = httpd::parse_request(data, &limits) {
        assert!(r.headers.len() <= limits.max_headers);
        assert!(r.body.len() <= limits.max_body);
        assert!(r.target.starts_with('/'));
    }
});
