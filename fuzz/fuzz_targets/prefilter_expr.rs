//! Filter expressions come from users and config files: any text gives a prefilter or none, never a
//! panic (nor a stack overflow on deep parentheses), and a prefilter it gives always fits its map.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some(p) = xdp::Prefilter::recognise(s) {
            let _ = p.to_string();
            assert!(p.map_value().is_ok(), "{s:?} gave a prefilter its map cannot hold");
        }
    }
});
