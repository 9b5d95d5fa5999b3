//! wire::tls on any bytes, as a TCP payload and as a bare handshake message: no panic; a hello that parses
//! gives SNI, ALPN, versions and a JA4 of the right shape for every transport; a cut hello asks for more
//! bytes than it had, and bytes appended after a hello do not change it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::tls::{ClientHello, Transport};
use wire::Error;

fn check(h: &ClientHello<'_>) {
    let _ = (h.legacy_version(), h.version(), h.session_id(), h.sni());
    let _ = (
        h.cipher_suites().count(),
        h.extensions().count(),
        h.alpn().count(),
    );
    let _ = h.signature_algorithms().count();
    for t in [Transport::Tcp, Transport::Quic, Transport::Dtls] {
        let j = h.ja4(t);
        let s = j.as_str();
        assert_eq!(s.len(), 36);
        assert!(s.is_ascii());
        assert_eq!((&s[10..11], &s[23..24]), ("_", "_"));
        assert!(s[11..23]
            .bytes()
            .chain(s[24..].bytes())
            .all(|b| b.is_ascii_hexdigit()));
    }
}

fuzz_target!(|data: &[u8]| {
    match ClientHello::parse(data) {
        Ok(h) => {
            check(&h);
            let mut more = data.to_vec();
            more.extend_from_slice(&[0x17, 3, 3, 0, 0]);
            assert_eq!(ClientHello::parse(&more), Ok(h));
        }
        Err(Error::Truncated { need, have, .. }) => {
            assert!(need > have && have == data.len());
            assert!(need <= 5 + 0xffff);
        }
        Err(_) => {}
    }
    if let Ok(h) = ClientHello::parse_handshake(data) {
        check(&h);
    }
});
