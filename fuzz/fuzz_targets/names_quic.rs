//! wire::quic on any bytes: the Initial header parser, decryption with the keys its DCID gives (random
//! bytes almost never authenticate, so the rest is also fed the bytes directly), the CRYPTO frame collector
//! on the bytes as decrypted frames, and the ClientHello parser on what it collects. No panic; the
//! collected prefix never exceeds the buffer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::quic::{client_hello, crypto_stream, Initial};
use wire::tls::ClientHello;

fuzz_target!(|data: &[u8]| {
    let mut plain = [0u8; 2048];
    let mut crypto = [0u8; 512];
    if let Ok(i) = Initial::parse(data) {
        assert!(i.packet_len() <= data.len());
        assert!(i.dcid().len() <= 20 && i.scid().len() <= 20);
        let _ = (i.version(), i.token());
        let _ = client_hello(data, &mut plain, &mut crypto);
    }
    if let Ok(n) = crypto_stream(data, &mut crypto) {
        assert!(n <= crypto.len());
        if let Ok(h) = ClientHello::parse_handshake(&crypto[..n]) {
            let _ = (h.sni(), h.alpn().count(), h.ja4(wire::tls::Transport::Quic));
        }
    }
});
