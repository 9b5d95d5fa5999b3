//! ClientHellos captured from real clients, with expectations from independent decoders:
//! * the test pcaps of github.com/FoxIO-LLC/ja4 (commit 0e54bc8) and the JA4 its Rust reference gives
//!   for them (`rust/ja4/src/snapshots/ja4__insta@<file>.snap`); SNI and ALPN from tshark 4.0.17;
//! * `openssl s_client` 3.0.19 against `openssl s_server` on loopback, captured with tcpdump; SNI and ALPN
//!   from tshark (`tls.handshake.extensions_server_name`, `tls.handshake.extensions_alpn_str`), JA4 from
//!   FoxIO's Python reference (`python/ja4.py` of the same commit, run on the capture with tshark 4.0.17).
//!
//! Each file is the TCP payload of the frame that carries the hello.

use super::*;

struct Case {
    bytes: &'static [u8],
    sni: &'static str,
    alpn: &'static [&'static str],
    ja4: &'static str,
}

const CASES: [Case; 5] = [
    // pcap/tls-sni.pcapng frame 1 (tcp stream 0); snapshot: "tls_server_name: clientservices.googleapis.com",
    // "ja4: t13d1516h2_8daaf6152771_e5627efa2ab1" (the example of technical_details/JA4.md).
    Case {
        bytes: include_bytes!("../testdata/ja4-tls-sni-frame1.bin"),
        sni: "clientservices.googleapis.com",
        alpn: &["h2", "http/1.1"],
        ja4: "t13d1516h2_8daaf6152771_e5627efa2ab1",
    },
    // pcap/tls-alpn-h2.pcap frame 4; snapshot: "tls_server_name: www.cloudflare.com",
    // "ja4: t12d4605h2_85626a9a5f7f_aaf95bb78ec9" (also "JA4.1" of python/test/testdata/tls-alpn-h2.pcap.json).
    Case {
        bytes: include_bytes!("../testdata/ja4-tls-alpn-h2-frame4.bin"),
        sni: "www.cloudflare.com",
        alpn: &["h2", "http/1.1"],
        ja4: "t12d4605h2_85626a9a5f7f_aaf95bb78ec9",
    },
    // pcap/tls12.pcap frame 1; snapshot: "tls_server_name: contile.services.mozilla.com",
    // "ja4: t13d1715h2_5b57614c22b0_3d5424432f57".
    Case {
        bytes: include_bytes!("../testdata/ja4-tls12-frame1.bin"),
        sni: "contile.services.mozilla.com",
        alpn: &["h2", "http/1.1"],
        ja4: "t13d1715h2_5b57614c22b0_3d5424432f57",
    },
    // openssl s_client -servername names.example.test -alpn h2,http/1.1 (TLS 1.3).
    Case {
        bytes: include_bytes!("../testdata/openssl-s_client-tls13.bin"),
        sni: "names.example.test",
        alpn: &["h2", "http/1.1"],
        ja4: "t13d3111h2_e8f1e7e78f70_1f22a2ca17c4",
    },
    // openssl s_client -tls1_2 -servername tls12.example.test -alpn acme-tls/1.
    Case {
        bytes: include_bytes!("../testdata/openssl-s_client-tls12.bin"),
        sni: "tls12.example.test",
        alpn: &["acme-tls/1"],
        ja4: "t12d2808a1_d943125447b4_e7e480e5a997",
    },
];

#[test]
fn sni_alpn_and_ja4_of_real_hellos() {
    for c in &CASES {
        let h = ClientHello::parse(c.bytes).unwrap();
        assert_eq!(h.sni(), Some(c.sni.as_bytes()));
        let alpn: Vec<_> = h.alpn().collect();
        assert_eq!(
            alpn,
            c.alpn.iter().map(|a| a.as_bytes()).collect::<Vec<_>>(),
            "{}",
            c.sni
        );
        assert_eq!(h.ja4(Transport::Tcp).as_str(), c.ja4, "{}", c.sni);
    }
}

#[test]
fn versions() {
    let h = ClientHello::parse(CASES[0].bytes).unwrap();
    assert_eq!((h.legacy_version(), h.version()), (0x0303, 0x0304));
    let h = ClientHello::parse(CASES[1].bytes).unwrap();
    assert_eq!((h.legacy_version(), h.version()), (0x0303, 0x0303));
    assert!(h.extension(ext::SUPPORTED_VERSIONS).is_none());
    // Chrome greases: the first cipher and the first extension.
    let h = ClientHello::parse(CASES[0].bytes).unwrap();
    assert!(is_grease(h.cipher_suites().next().unwrap()));
    assert!(is_grease(h.extensions().next().unwrap().0));
}

#[test]
fn cut_hellos_say_how_many_bytes_they_need() {
    for c in &CASES {
        let whole = c.bytes.len();
        for n in 0..whole {
            let e = ClientHello::parse(&c.bytes[..n]).unwrap_err();
            let want = if n < RECORD_HDR { RECORD_HDR } else { whole };
            assert_eq!(
                e,
                Error::Truncated {
                    header: HDR,
                    need: want,
                    have: n
                },
                "{n}"
            );
        }
        // Bytes after the record (the next record of the flight) do not matter.
        let mut more = c.bytes.to_vec();
        more.extend_from_slice(&[23, 3, 3, 0, 1, 0]);
        assert_eq!(
            ClientHello::parse(&more).unwrap().sni(),
            Some(c.sni.as_bytes())
        );
    }
}

#[test]
fn not_hellos() {
    let b = CASES[0].bytes;
    let mut x = b.to_vec();
    x[0] = 23;
    assert_eq!(
        ClientHello::parse(&x),
        Err(malformed("not a handshake record"))
    );
    let mut x = b.to_vec();
    x[5] = 2;
    assert_eq!(
        ClientHello::parse(&x),
        Err(malformed("handshake message is not a ClientHello"))
    );
    // A record shorter than the hello it starts.
    let mut x = b.to_vec();
    let short = (b.len() - RECORD_HDR - 10) as u16;
    x[3..5].copy_from_slice(&short.to_be_bytes());
    assert_eq!(
        ClientHello::parse(&x),
        Err(malformed("hello spans several records (not reassembled)"))
    );
    // An extension length one too long.
    let h = ClientHello::parse(b).unwrap();
    let ext_at = h.extensions.as_ptr() as usize - b.as_ptr() as usize;
    let mut x = b.to_vec();
    x[ext_at + 3] += 1;
    assert!(matches!(
        ClientHello::parse(&x),
        Err(Error::Malformed { .. })
    ));
    assert!(ClientHello::parse(b"GET / HTTP/1.1\r\n").is_err());
}

/// A minimal hello: TLS 1.0, no session id, the given ciphers and extensions.
fn hello(ciphers: &[u16], exts: &[(u16, &[u8])]) -> Vec<u8> {
    let mut body = vec![3, 1];
    body.extend_from_slice(&[0; 32]);
    body.push(0);
    body.extend_from_slice(&((ciphers.len() * 2) as u16).to_be_bytes());
    for c in ciphers {
        body.extend_from_slice(&c.to_be_bytes());
    }
    body.extend_from_slice(&[1, 0]);
    if !exts.is_empty() {
        let mut e = Vec::new();
        for (t, d) in exts {
            e.extend_from_slice(&t.to_be_bytes());
            e.extend_from_slice(&(d.len() as u16).to_be_bytes());
            e.extend_from_slice(d);
        }
        body.extend_from_slice(&(e.len() as u16).to_be_bytes());
        body.extend_from_slice(&e);
    }
    let mut m = vec![22, 3, 1];
    m.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
    m.extend_from_slice(&[1, 0]);
    m.extend_from_slice(&(body.len() as u16).to_be_bytes());
    m.extend_from_slice(&body);
    m
}

#[test]
fn ja4_edge_cases_of_the_spec() {
    // No extensions, no ciphers: "000000000000" for both hashes, "i", "00" ALPN.
    let m = hello(&[], &[]);
    let h = ClientHello::parse(&m).unwrap();
    assert_eq!(
        h.ja4(Transport::Tcp).as_str(),
        "t10i000000_000000000000_000000000000"
    );
    assert_eq!(h.ja4(Transport::Quic).as_bytes()[0], b'q');
    // Only SNI and ALPN: counted, but the extension list hashed is empty. GREASE is not counted.
    let sni: &[u8] = &[0, 6, 0, 0, 3, b'a', b'.', b'b'];
    let alpn: &[u8] = &[0, 3, 2, b'h', b'2'];
    let m = hello(&[0x0a0a, 0x1301], &[(0x2a2a, &[]), (0, sni), (16, alpn)]);
    let h = ClientHello::parse(&m).unwrap();
    assert_eq!(h.sni(), Some(&b"a.b"[..]));
    let ja4 = h.ja4(Transport::Tcp);
    assert_eq!(&ja4.as_str()[..11], "t10d0102h2_");
    assert_eq!(&ja4.as_str()[24..], "000000000000");
    // Over 99 ciphers (and over the 256 sorted on the stack): "99", no panic.
    let many: Vec<u16> = (1..=300).collect();
    let m = hello(&many, &[]);
    assert_eq!(
        &ClientHello::parse(&m).unwrap().ja4(Transport::Tcp).as_str()[..10],
        "t10i990000"
    );
    // An unknown version in supported_versions.
    let m = hello(&[1], &[(43, &[4, 0x7a, 0x7a, 0x7f, 0x1c])]);
    assert_eq!(
        &ClientHello::parse(&m).unwrap().ja4(Transport::Tcp).as_str()[..3],
        "t00"
    );
}
