//! JA4, the TLS client fingerprint of FoxIO (technical_details/JA4.md of github.com/FoxIO-LLC/ja4):
//!
//! `{t|q|d}{version}{d|i}{ciphers:02}{extensions:02}{alpn}_{cipher hash}_{extension hash}`
//!
//! * version: the largest non-GREASE supported_versions value, else the hello's version: `13` `12` `11`
//!   `10` `s3` `s2` `d1` `d2` `d3`, `00` for anything else;
//! * `d` when the server_name extension is present, `i` when not;
//! * counts without GREASE values, at most 99;
//! * alpn: the first and last bytes of the first ALPN name when both are ASCII letters or digits, else
//!   the first and last characters of its hex; `00` without ALPN or with an empty first name;
//! * cipher hash: SHA-256 of the sorted non-GREASE ciphers as 4-digit lower-case hex joined by `,`,
//!   truncated to 12 hex digits; `000000000000` when there are none;
//! * extension hash: the same of the sorted non-GREASE extensions without server_name (0000) and ALPN
//!   (0010), followed, when there are signature algorithms, by `_` and those in their order;
//!   `000000000000` when no extension is left.
//!
//! GREASE values are ignored "anywhere" as the specification says, signature algorithms included (the
//! reference implementations keep them there; no client is known to send them).
//! Sorting uses a stack buffer of 256 values; only a hostile hello with more needs the heap.

use sha2::{Digest, Sha256};

use crate::tls::{ext, hash12, is_grease, ClientHello, Ja4, Transport};

const HEX: &[u8; 16] = b"0123456789abcdef";

pub(crate) fn fingerprint(h: &ClientHello<'_>, transport: Transport) -> Ja4 {
    let mut out = [b'0'; 36];
    out[0] = match transport {
        Transport::Tcp => b't',
        Transport::Quic => b'q',
        Transport::Dtls => b'd',
    };
    out[1..3].copy_from_slice(match h.version() {
        0x0304 => b"13",
        0x0303 => b"12",
        0x0302 => b"11",
        0x0301 => b"10",
        0x0300 => b"s3",
        0x0002 => b"s2",
        0xfeff => b"d1",
        0xfefd => b"d2",
        0xfefc => b"d3",
        _ => b"00",
    });
    let has_sni = h.extensions().any(|(t, _)| t == ext::SERVER_NAME);
    out[3] = if has_sni { b'd' } else { b'i' };
    let ciphers = h.cipher_suites().filter(|&c| !is_grease(c));
    two_digits(&mut out[4..6], ciphers.clone().count());
    let exts = h.extensions().map(|(t, _)| t).filter(|&t| !is_grease(t));
    two_digits(&mut out[6..8], exts.clone().count());
    out[8..10].copy_from_slice(&alpn_chars(h.alpn().next().unwrap_or(&[])));
    out[10] = b'_';
    out[23] = b'_';

    with_sorted(ciphers, |c| {
        if !c.is_empty() {
            let mut s = Sha256::new();
            hex_list(&mut s, c);
            hash12(s, &mut out[11..23]);
        }
    });
    let exts = exts.filter(|&t| t != ext::SERVER_NAME && t != ext::ALPN);
    with_sorted(exts, |e| {
        if !e.is_empty() {
            let mut s = Sha256::new();
            hex_list(&mut s, e);
            let mut sigs = h
                .signature_algorithms()
                .filter(|&v| !is_grease(v))
                .peekable();
            if sigs.peek().is_some() {
                s.update(b"_");
                for (i, v) in sigs.enumerate() {
                    hex_item(&mut s, i, v);
                }
            }
            hash12(s, &mut out[24..36]);
        }
    });
    Ja4(out)
}

fn two_digits(out: &mut [u8], n: usize) {
    let n = n.min(99);
    out[0] = b'0' + (n / 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// JA4's two ALPN characters for the first ALPN name.
fn alpn_chars(a: &[u8]) -> [u8; 2] {
    let (Some(&first), Some(&last)) = (a.first(), a.last()) else {
        return *b"00";
    };
    if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() {
        [first, last]
    } else {
        [HEX[(first >> 4) as usize], HEX[(last & 15) as usize]]
    }
}

/// Calls `f` with the values sorted, on the stack when there are at most 256.
fn with_sorted(values: impl Iterator<Item = u16> + Clone, f: impl FnOnce(&[u16])) {
    let mut buf = [0u16; 256];
    let mut n = 0;
    for v in values.clone() {
        if n == buf.len() {
            let mut all: Vec<u16> = values.collect();
            all.sort_unstable();
            return f(&all);
        }
        buf[n] = v;
        n += 1;
    }
    buf[..n].sort_unstable();
    f(&buf[..n])
}

fn hex_item(s: &mut Sha256, i: usize, v: u16) {
    if i > 0 {
        s.update(b",");
    }
    let b = v.to_be_bytes();
    s.update([
        HEX[(b[0] >> 4) as usize],
        HEX[(b[0] & 15) as usize],
        HEX[(b[1] >> 4) as usize],
        HEX[(b[1] & 15) as usize],
    ]);
}

fn hex_list(s: &mut Sha256, values: &[u16]) {
    for (i, &v) in values.iter().enumerate() {
        hex_item(s, i, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples of technical_details/JA4.md, "ALPN Extension Value".
    #[test]
    fn alpn_examples_of_the_spec() {
        let cases: [(&[u8], &[u8; 2]); 11] = [
            (b"h2", b"h2"),
            (b"http/1.1", b"h1"),
            (b"h", b"hh"),
            (b"", b"00"),
            (&[0xab], b"ab"),
            (&[0x20], b"20"),
            (&[0xab, 0xcd], b"ad"),
            (&[0x20, 0x61], b"21"),
            (&[0x30, 0xab], b"3b"),
            (&[0x61, 0x20], b"60"),
            (&[0x30, 0x31, 0xab, 0xcd], b"3d"),
        ];
        for (alpn, want) in cases {
            assert_eq!(&alpn_chars(alpn), want, "{alpn:02x?}");
        }
        assert_eq!(&alpn_chars(&[0x30, 0xab, 0xcd, 0x31]), b"01");
    }

    /// The hashes worked out in technical_details/JA4.md ("Cipher hash", "Extension hash").
    #[test]
    fn hash_examples_of_the_spec() {
        let hash = |c: &[u16], sigs: &[u16]| {
            let mut s = Sha256::new();
            with_sorted(c.iter().copied(), |c| hex_list(&mut s, c));
            if !sigs.is_empty() {
                s.update(b"_");
                hex_list(&mut s, sigs);
            }
            let mut out = [0u8; 12];
            hash12(s, &mut out);
            String::from_utf8(out.to_vec()).unwrap()
        };
        let ciphers = [
            0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014,
            0x009c, 0x009d, 0x002f, 0x0035,
        ];
        assert_eq!(hash(&ciphers, &[]), "8daaf6152771");
        let exts = [
            0x001b, 0x0033, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023, 0x0012, 0x002b, 0xff01,
            0x000b, 0x000a, 0x0015,
        ];
        let sigs = [
            0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
        ];
        assert_eq!(hash(&exts, &sigs), "e5627efa2ab1");
        assert_eq!(hash(&exts, &[]), "6d807ffa2a79");
    }

    #[test]
    fn grease() {
        for v in [0x0a0a, 0x1a1a, 0x7a7a, 0xfafa] {
            assert!(is_grease(v));
        }
        for v in [0x0a1a, 0x0b0b, 0x1301, 0x0000, 0xaaab] {
            assert!(!is_grease(v));
        }
    }
}
