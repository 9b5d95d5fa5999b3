//! Key derivation against the RFCs' test vectors; whole Initials of Chrome from the test pcaps of
//! github.com/FoxIO-LLC/ja4 (commit 0e54bc8), with the SNI, ALPN and CRYPTO layout tshark 4.0.17 decodes
//! and the JA4 of FoxIO's Rust reference (`rust/ja4/src/snapshots/ja4__insta@<file>.snap`).

use super::*;
use crate::tls::Transport;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn initial_keys_of_the_rfcs() {
    let dcid = hex("8394c8f03e515708");
    // RFC 9001 Appendix A.1, client: key, iv, hp.
    let (k, iv, hpk) = client_key_bytes(VERSION_1, &dcid);
    assert_eq!(k.to_vec(), hex("1f369613dd76d5467730efcbe3b1a22d"));
    assert_eq!(iv.to_vec(), hex("fa044b2f42a3fd3b46fb255c"));
    assert_eq!(hpk.to_vec(), hex("9f50449e04a0e810283a1e9933adedd2"));
    // RFC 9369 Appendix A.1, client.
    let (k, iv, hpk) = client_key_bytes(VERSION_2, &dcid);
    assert_eq!(k.to_vec(), hex("8b1a0bc121284290a29e0971b5cd045d"));
    assert_eq!(iv.to_vec(), hex("91f73e2351d8fa91660e909f"));
    assert_eq!(hpk.to_vec(), hex("45b95e15235d6f45a6b19cbcb0294ba9"));
}

/// `pcap/tls-sni.pcapng` frame 2 (UDP payload): Initial, DCID 2fadc20ded383f8c, packet number 1, eleven
/// CRYPTO frames out of order (tshark quic.crypto.offset 150,160,145,137,151,0,131,232,148,132,152); SNI
/// www.google.com, ALPN h3, hello length 293; snapshot: "ja4: q13d0310h3_55b375c5d22e_cd85d2d88918".
const CHROME: &[u8] = include_bytes!("../testdata/ja4-tls-sni-frame2-quic-initial.bin");
/// `pcap/quic-with-several-tls-frames.pcapng` frame 1: CRYPTO at offsets 0,36,169; snapshot:
/// "tls_server_name: ogs.google.com", "ja4: q13d0310h3_55b375c5d22e_cd85d2d88918".
const SEVERAL: &[u8] = include_bytes!("../testdata/ja4-quic-several-tls-frames-frame1.bin");

#[test]
fn chrome_initials() {
    for (dgram, sni) in [(CHROME, "www.google.com"), (SEVERAL, "ogs.google.com")] {
        let (mut plain, mut crypto) = ([0u8; 1500], [0u8; 4096]);
        let h = client_hello(dgram, &mut plain, &mut crypto).unwrap();
        assert_eq!(h.sni(), Some(sni.as_bytes()));
        assert_eq!(h.alpn().collect::<Vec<_>>(), [b"h3"]);
        assert_eq!(
            h.ja4(Transport::Quic).as_str(),
            "q13d0310h3_55b375c5d22e_cd85d2d88918"
        );
    }
    let i = Initial::parse(CHROME).unwrap();
    assert_eq!(
        (i.version(), i.dcid(), i.scid(), i.token()),
        (1, &hex("2fadc20ded383f8c")[..], &[][..], &[][..])
    );
    assert_eq!(i.packet_len(), CHROME.len());
    let mut plain = [0u8; 1500];
    let mut crypto = [0u8; 4096];
    let frames = i.decrypt(&mut plain).unwrap();
    assert_eq!(crypto_stream(frames, &mut crypto), Ok(297));
    // A crypto buffer too small for the hello: the hello reads as cut.
    let mut small = [0u8; 200];
    let e = client_hello(CHROME, &mut plain, &mut small).unwrap_err();
    assert!(matches!(e, Error::Truncated { have: 200, .. }), "{e}");
}

#[test]
fn damaged_initials() {
    let (mut plain, mut crypto) = ([0u8; 1500], [0u8; 4096]);
    // One bit flipped in the ciphertext, or in the DCID (other keys): the tag does not verify.
    for at in [CHROME.len() - 30, 7] {
        let mut d = CHROME.to_vec();
        d[at] ^= 1;
        let e = client_hello(&d, &mut plain, &mut crypto).unwrap_err();
        assert_eq!(
            e,
            malformed("does not decrypt with the client Initial keys")
        );
    }
    // Cut datagrams: the header's Length runs past the end.
    for n in [0, 1, 5, 20, 100, CHROME.len() - 1] {
        let e = Initial::parse(&CHROME[..n]).unwrap_err();
        assert!(matches!(e, Error::Truncated { .. }), "{n}: {e}");
    }
    let mut d = CHROME.to_vec();
    d[0] &= 0x7f;
    assert_eq!(Initial::parse(&d), Err(malformed("not a long header")));
    let mut d = CHROME.to_vec();
    d[0] |= 0x30; // Retry
    assert_eq!(Initial::parse(&d), Err(malformed("not an Initial packet")));
    let mut d = CHROME.to_vec();
    d[4] = 2;
    assert_eq!(
        Initial::parse(&d),
        Err(malformed("not QUIC version 1 or 2"))
    );
    // A plaintext buffer shorter than the packet.
    let mut short = [0u8; 100];
    assert!(matches!(
        Initial::parse(CHROME).unwrap().decrypt(&mut short),
        Err(Error::Truncated { .. })
    ));
}

#[test]
fn crypto_frames_in_any_order() {
    // PADDING, CRYPTO [4..8), PING, CRYPTO [0..4), ACK, CRYPTO [10..12) after a gap.
    let frames = [
        0, 6, 4, 4, b'e', b'f', b'g', b'h', 1, 6, 0, 4, b'a', b'b', b'c', b'd', 2, 5, 0, 1, 0, 1,
        2, 6, 10, 2, b'x', b'y',
    ];
    let mut out = [0u8; 16];
    assert_eq!(crypto_stream(&frames, &mut out), Ok(8));
    assert_eq!(&out[..8], b"abcdefgh");
    // A frame cut by the end of the packet, and a frame not allowed in an Initial.
    assert_eq!(
        crypto_stream(&frames[..6], &mut out),
        Err(malformed("frame runs past the end of the packet"))
    );
    assert_eq!(
        crypto_stream(&[8, 0], &mut out),
        Err(malformed("frame type not allowed in an Initial"))
    );
    // Too many CRYPTO frames.
    let many: Vec<u8> = (0..=MAX_CRYPTO_FRAMES)
        .flat_map(|_| [6, 0, 1, b'z'])
        .collect();
    assert_eq!(
        crypto_stream(&many, &mut out),
        Err(malformed("too many CRYPTO frames"))
    );
}
