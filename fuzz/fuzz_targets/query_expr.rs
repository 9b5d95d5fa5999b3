//! Query expressions come from users and scripts: any text gives a query or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = index::parse_query(s, 1_800_000_000_000_000_000);
        let _ = index::parse_time(s, 1_800_000_000_000_000_000);
    }
});
