//! The TLS ClientHello (RFC 8446 §4.1.2): server name (SNI), ALPN, and the JA4 fingerprint.
//!
//! [`ClientHello::parse`] reads the hello from the first bytes a client sends on a TCP connection: one
//! TLS record of type handshake holding the whole ClientHello. When that record continues past the bytes
//! given (a hello split over TCP segments, as large post-quantum hellos are) the result is
//! [`Error::Truncated`] whose `need` is the length of the whole record, so a caller that keeps the
//! segments can retry with that many bytes; this module does not reassemble. A hello spread over several
//! records (allowed, rarely seen) is `Malformed`.
//! [`ClientHello::parse_handshake`] reads a bare handshake message (a QUIC CRYPTO stream).
//!
//! `parse` checks the structure once (lengths of every vector and of every extension); the accessors
//! then never panic, and the contents of an extension that does not parse read as absent.

use core::fmt;

use sha2::{Digest, Sha256};

use crate::bytes::be16;
use crate::error::{need, Error, Result};

const HDR: &str = "TLS ClientHello";

/// Length of a TLS record header.
pub const RECORD_HDR: usize = 5;

/// Extension types read here (IANA "TLS ExtensionType Values").
pub mod ext {
    /// server_name (RFC 6066).
    pub const SERVER_NAME: u16 = 0;
    /// signature_algorithms (RFC 8446).
    pub const SIGNATURE_ALGORITHMS: u16 = 13;
    /// application_layer_protocol_negotiation (RFC 7301).
    pub const ALPN: u16 = 16;
    /// supported_versions (RFC 8446).
    pub const SUPPORTED_VERSIONS: u16 = 43;
}

fn malformed(what: &'static str) -> Error {
    Error::Malformed { header: HDR, what }
}

/// True for the GREASE values of RFC 8701 (0x0a0a, 0x1a1a, … 0xfafa), which JA4 ignores.
pub const fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && (v >> 8) == (v & 0xff)
}

/// A ClientHello, borrowed from the bytes it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientHello<'a> {
    version: u16,
    session_id: &'a [u8],
    ciphers: &'a [u8],
    extensions: &'a [u8],
}

impl<'a> ClientHello<'a> {
    /// Reads the ClientHello from bytes that start with a TLS record header (the client's first TCP
    /// payload). `Truncated` (with `need` counted from the start of `data`) when the hello does not end
    /// within `data`; `Malformed` when the bytes are not a handshake record holding a ClientHello.
    pub fn parse(data: &'a [u8]) -> Result<Self> {
        need(HDR, RECORD_HDR, data.len())?;
        if data[0] != 22 {
            return Err(malformed("not a handshake record"));
        }
        if data[1] != 3 {
            return Err(malformed("record version is not 3.x"));
        }
        let rec_len = be16(data, 3) as usize;
        if rec_len < 4 {
            return Err(malformed("record too short for a handshake header"));
        }
        need(HDR, RECORD_HDR + rec_len, data.len())?;
        let hs = &data[RECORD_HDR..RECORD_HDR + rec_len];
        if hs[0] != 1 {
            return Err(malformed("handshake message is not a ClientHello"));
        }
        let body_len = u32::from_be_bytes([0, hs[1], hs[2], hs[3]]) as usize;
        if 4 + body_len > rec_len {
            return Err(malformed("hello spans several records (not reassembled)"));
        }
        Self::parse_handshake(hs)
    }

    /// Reads a ClientHello handshake message (type 1, 3-byte length, body), as in a QUIC CRYPTO stream.
    pub fn parse_handshake(hs: &'a [u8]) -> Result<Self> {
        need(HDR, 4, hs.len())?;
        if hs[0] != 1 {
            return Err(malformed("handshake message is not a ClientHello"));
        }
        let body_len = u32::from_be_bytes([0, hs[1], hs[2], hs[3]]) as usize;
        need(HDR, 4 + body_len, hs.len())?;
        Self::parse_body(&hs[4..4 + body_len])
    }

    fn parse_body(b: &'a [u8]) -> Result<Self> {
        let bad = || malformed("a length runs past the end of the hello");
        let version = be16(b.get(..2).ok_or_else(bad)?, 0);
        let mut r = Reader { b, at: 34 };
        let session_id = r.vec8().ok_or_else(bad)?;
        if session_id.len() > 32 {
            return Err(malformed("session id longer than 32 bytes"));
        }
        let ciphers = r.vec16().ok_or_else(bad)?;
        if ciphers.len() % 2 != 0 {
            return Err(malformed("odd cipher suite list length"));
        }
        r.vec8().ok_or_else(bad)?; // compression methods
        let extensions = if r.at == b.len() {
            &b[b.len()..] // no extensions (SSL 3.0 style)
        } else {
            let e = r.vec16().ok_or_else(bad)?;
            if r.at != b.len() {
                return Err(malformed("bytes after the extensions"));
            }
            let mut it = Reader { b: e, at: 0 };
            while it.at < e.len() {
                it.u16().ok_or_else(bad)?;
                it.vec16().ok_or_else(bad)?;
            }
            e
        };
        Ok(ClientHello {
            version,
            session_id,
            ciphers,
            extensions,
        })
    }

    /// The legacy version field (0x0303 for TLS 1.2 and 1.3).
    pub fn legacy_version(&self) -> u16 {
        self.version
    }

    /// The highest version offered: the largest non-GREASE value of supported_versions when that
    /// extension is present, else the legacy version.
    pub fn version(&self) -> u16 {
        match self.extension(ext::SUPPORTED_VERSIONS) {
            Some(d) => Reader { b: d, at: 0 }
                .vec8()
                .map(u16s)
                .and_then(|v| v.filter(|&v| !is_grease(v)).max())
                .unwrap_or(0),
            None => self.version,
        }
    }

    /// The legacy session id.
    pub fn session_id(&self) -> &'a [u8] {
        self.session_id
    }

    /// The cipher suites offered, in order, GREASE included.
    pub fn cipher_suites(&self) -> impl Iterator<Item = u16> + Clone + 'a {
        u16s(self.ciphers)
    }

    /// The extensions (type, data), in order, GREASE included.
    pub fn extensions(&self) -> Extensions<'a> {
        Extensions {
            r: Reader {
                b: self.extensions,
                at: 0,
            },
        }
    }

    /// The data of the first extension of type `ty`.
    pub fn extension(&self, ty: u16) -> Option<&'a [u8]> {
        self.extensions().find(|&(t, _)| t == ty).map(|(_, d)| d)
    }

    /// The first host_name of the server_name extension, as sent (not checked to be a valid host name).
    pub fn sni(&self) -> Option<&'a [u8]> {
        let mut r = Reader {
            b: self.extension(ext::SERVER_NAME)?,
            at: 0,
        };
        let list = r.vec16()?;
        let mut l = Reader { b: list, at: 0 };
        while l.at < list.len() {
            let ty = l.u8()?;
            let name = l.vec16()?;
            if ty == 0 {
                return Some(name);
            }
        }
        None
    }

    /// The ALPN protocol names offered, in order (empty when the extension is absent or malformed).
    pub fn alpn(&self) -> Alpn<'a> {
        let list = self
            .extension(ext::ALPN)
            .and_then(|d| Reader { b: d, at: 0 }.vec16())
            .unwrap_or(&[]);
        Alpn {
            r: Reader { b: list, at: 0 },
        }
    }

    /// The signature algorithms offered, in order (empty when the extension is absent or malformed).
    pub fn signature_algorithms(&self) -> impl Iterator<Item = u16> + Clone + 'a {
        let list = self
            .extension(ext::SIGNATURE_ALGORITHMS)
            .and_then(|d| Reader { b: d, at: 0 }.vec16())
            .unwrap_or(&[]);
        u16s(list)
    }

    /// The JA4 fingerprint of this hello sent over `transport`; see [`Ja4`].
    pub fn ja4(&self, transport: Transport) -> Ja4 {
        crate::ja4::fingerprint(self, transport)
    }
}

/// The u16 values of a list (a trailing odd byte is ignored).
fn u16s(b: &[u8]) -> impl Iterator<Item = u16> + Clone + '_ {
    b.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]))
}

/// Bounds-checked reading of TLS vectors.
#[derive(Debug, Clone)]
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| be16(b, 0))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()? as usize;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()? as usize;
        self.take(n)
    }
}

/// Iterator over the extensions of a [`ClientHello`]: (type, data).
#[derive(Debug, Clone)]
pub struct Extensions<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for Extensions<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let ty = self.r.u16()?;
        let data = self.r.vec16()?;
        Some((ty, data))
    }
}

/// Iterator over the ALPN protocol names of a [`ClientHello`]; stops at a malformed entry.
#[derive(Debug, Clone)]
pub struct Alpn<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for Alpn<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<Self::Item> {
        self.r.vec8()
    }
}

/// What carried a ClientHello: JA4's first character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TLS over TCP (`t`).
    Tcp,
    /// QUIC (`q`).
    Quic,
    /// DTLS (`d`).
    Dtls,
}

/// A JA4 fingerprint: 36 ASCII bytes such as `t13d1516h2_8daaf6152771_e5627efa2ab1`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ja4(pub(crate) [u8; 36]);

impl Ja4 {
    /// The fingerprint as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written into it.
        core::str::from_utf8(&self.0).unwrap_or("")
    }

    /// The fingerprint's bytes.
    pub fn as_bytes(&self) -> &[u8; 36] {
        &self.0
    }
}

impl fmt::Display for Ja4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Ja4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ja4({})", self.as_str())
    }
}

/// Lower-case hex of the first 6 bytes of SHA-256, JA4's truncated hash.
pub(crate) fn hash12(h: Sha256, out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let d = h.finalize();
    for (i, b) in d[..6].iter().enumerate() {
        out[2 * i] = HEX[(b >> 4) as usize];
        out[2 * i + 1] = HEX[(b & 15) as usize];
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
