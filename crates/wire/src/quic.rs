//! The ClientHello in a client's QUIC Initial packet, decrypted with the Initial keys every observer can
//! derive from the packet's Destination Connection ID (RFC 9001 §5.2; QUIC v1, RFC 9000, and v2, RFC 9369).
//!
//! [`Initial::parse`] reads the long header of the first packet of a UDP datagram (no crypto).
//! [`client_hello`] then removes header protection, decrypts the payload (AES-128-GCM, `ring`) into the
//! caller's `plain` buffer, collects the CRYPTO frames into the caller's `crypto` buffer (they may come in
//! any order, as Chrome sends them) and parses the ClientHello from the bytes contiguous from offset 0.
//! A hello that continues in a later Initial (post-quantum key shares make it larger than one packet) is
//! [`Error::Truncated`]: this module reads one packet and does not reassemble across packets.
//!
//! The packet number is taken as sent (truncated): right for a connection's first Initials, which is
//! where the ClientHello is.

use ring::aead::{self, quic as hp, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;

use crate::error::{need, Error, Result};
use crate::tls::ClientHello;

const HDR: &str = "QUIC Initial";

/// QUIC version 1 (RFC 9000).
pub const VERSION_1: u32 = 1;
/// QUIC version 2 (RFC 9369).
pub const VERSION_2: u32 = 0x6b33_43cf;

/// Largest connection ID length in QUIC v1 and v2.
pub const MAX_CID: usize = 20;

/// CRYPTO frames of one Initial whose positions are remembered; more are `Malformed`.
pub const MAX_CRYPTO_FRAMES: usize = 64;

fn malformed(what: &'static str) -> Error {
    Error::Malformed { header: HDR, what }
}

/// The long header of a client's Initial packet, borrowed from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Initial<'a> {
    version: u32,
    dcid: &'a [u8],
    scid: &'a [u8],
    token: &'a [u8],
    /// Offset of the (protected) packet number.
    pn_offset: usize,
    /// Offset of the end of the packet (the header's Length counts from `pn_offset`).
    end: usize,
    packet: &'a [u8],
}

impl<'a> Initial<'a> {
    /// Reads the Initial packet at the start of `datagram`: a long header of type Initial for QUIC v1 or
    /// v2. `Truncated` when the packet (its Length field) runs past the datagram.
    pub fn parse(datagram: &'a [u8]) -> Result<Self> {
        let mut r = Cursor { b: datagram, at: 0 };
        let first = r.u8()?;
        if first & 0x80 == 0 {
            return Err(malformed("not a long header"));
        }
        let version = u32::from_be_bytes([r.u8()?, r.u8()?, r.u8()?, r.u8()?]);
        let ty = (first >> 4) & 3;
        match (version, ty) {
            (VERSION_1, 0) | (VERSION_2, 1) => {}
            (VERSION_1 | VERSION_2, _) => return Err(malformed("not an Initial packet")),
            _ => return Err(malformed("not QUIC version 1 or 2")),
        }
        let dcid = r.vec8()?;
        let scid = r.vec8()?;
        if dcid.len() > MAX_CID || scid.len() > MAX_CID {
            return Err(malformed("connection ID longer than 20 bytes"));
        }
        let token_len = r.varint()?;
        let token = r.take(token_len)?;
        let len = r.varint()?;
        let pn_offset = r.at;
        let end = pn_offset
            .checked_add(len)
            .ok_or_else(|| malformed("length overflows"))?;
        need(HDR, end, datagram.len())?;
        // Header protection samples 16 bytes 4 after the packet number's start (RFC 9001 §5.4.2).
        if len < 4 + 16 {
            return Err(malformed("packet too short to sample"));
        }
        Ok(Initial {
            version,
            dcid,
            scid,
            token,
            pn_offset,
            end,
            packet: &datagram[..end],
        })
    }

    /// The version (1 or 2).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The Destination Connection ID, from which the Initial keys are derived.
    pub fn dcid(&self) -> &'a [u8] {
        self.dcid
    }

    /// The Source Connection ID.
    pub fn scid(&self) -> &'a [u8] {
        self.scid
    }

    /// The token (empty on a first connection attempt).
    pub fn token(&self) -> &'a [u8] {
        self.token
    }

    /// Length of the packet in the datagram (coalesced packets may follow).
    pub fn packet_len(&self) -> usize {
        self.end
    }

    /// Removes header protection and decrypts the packet with the client's Initial keys into `plain`
    /// (which needs [`packet_len`](Self::packet_len) bytes); returns the plaintext frames, borrowed from
    /// `plain`. `Malformed` when the packet does not decrypt (it is not a client's Initial).
    pub fn decrypt<'b>(&self, plain: &'b mut [u8]) -> Result<&'b [u8]> {
        let keys = Keys::client(self.version, self.dcid);
        let n = self.end;
        need("QUIC plaintext buffer", n, plain.len())?;
        let buf = &mut plain[..n];
        buf.copy_from_slice(self.packet);
        let pn_at = self.pn_offset;
        let sample = &buf[pn_at + 4..pn_at + 4 + 16];
        let mask = keys
            .hp
            .new_mask(sample)
            .map_err(|_| malformed("header protection failed"))?;
        buf[0] ^= mask[0] & 0x0f;
        let pn_len = (buf[0] & 3) as usize + 1;
        let mut pn = 0u64;
        for i in 0..pn_len {
            buf[pn_at + i] ^= mask[1 + i];
            pn = pn << 8 | buf[pn_at + i] as u64;
        }
        let mut nonce = keys.iv;
        for (n, p) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= p;
        }
        let (header, body) = buf.split_at_mut(pn_at + pn_len);
        let frames = keys
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&*header),
                body,
            )
            .map_err(|_| malformed("does not decrypt with the client Initial keys"))?;
        Ok(frames)
    }
}

/// Reads the ClientHello of the client Initial at the start of `datagram`, using `plain` (at least the
/// datagram's length) to decrypt and `crypto` to collect the CRYPTO stream (bytes past its length are
/// dropped; 4096 holds any hello of one packet). See the module documentation.
pub fn client_hello<'b>(
    datagram: &[u8],
    plain: &mut [u8],
    crypto: &'b mut [u8],
) -> Result<ClientHello<'b>> {
    let initial = Initial::parse(datagram)?;
    let frames = initial.decrypt(plain)?;
    let contiguous = crypto_stream(frames, crypto)?;
    ClientHello::parse_handshake(&crypto[..contiguous])
}

/// Copies the CRYPTO frames of decrypted Initial `frames` into `out` at their offsets; returns how many
/// bytes from offset 0 are filled. Frames other than those allowed in an Initial are `Malformed`.
pub fn crypto_stream(frames: &[u8], out: &mut [u8]) -> Result<usize> {
    // The frames are a whole decrypted packet: one running past its end is malformed, not cut.
    crypto_frames(frames, out).map_err(|e| match e {
        Error::Truncated { .. } => malformed("frame runs past the end of the packet"),
        e => e,
    })
}

fn crypto_frames(frames: &[u8], out: &mut [u8]) -> Result<usize> {
    let mut ranges = [(0usize, 0usize); MAX_CRYPTO_FRAMES];
    let mut n = 0;
    let mut r = Cursor { b: frames, at: 0 };
    while r.at < frames.len() {
        match r.varint()? {
            0x00 | 0x01 => {} // PADDING, PING
            ty @ (0x02 | 0x03) => {
                // ACK: largest, delay, range count, first range, ranges, ECN counts.
                r.varint()?;
                r.varint()?;
                let count = r.varint()?;
                r.varint()?;
                for _ in 0..count {
                    r.varint()?;
                    r.varint()?;
                }
                if ty == 0x03 {
                    for _ in 0..3 {
                        r.varint()?;
                    }
                }
            }
            0x06 => {
                let off = r.varint()?;
                let len = r.varint()?;
                let data = r.take(len)?;
                if n == ranges.len() {
                    return Err(malformed("too many CRYPTO frames"));
                }
                if off < out.len() {
                    let k = data.len().min(out.len() - off);
                    out[off..off + k].copy_from_slice(&data[..k]);
                    ranges[n] = (off, off + k);
                    n += 1;
                }
            }
            0x1c | 0x1d => return Err(malformed("CONNECTION_CLOSE in an Initial")),
            _ => return Err(malformed("frame type not allowed in an Initial")),
        }
    }
    // The prefix from 0 covered by the ranges, in whatever order they came.
    let mut filled = 0;
    loop {
        let next = ranges[..n]
            .iter()
            .filter(|&&(s, e)| s <= filled && e > filled)
            .map(|&(_, e)| e)
            .max();
        match next {
            Some(e) => filled = e,
            None => return Ok(filled),
        }
    }
}

/// The client's Initial keys.
struct Keys {
    key: LessSafeKey,
    iv: [u8; 12],
    hp: hp::HeaderProtectionKey,
}

impl Keys {
    fn client(version: u32, dcid: &[u8]) -> Keys {
        let (key, iv, hpk) = client_key_bytes(version, dcid);
        Keys {
            // 16-byte keys for AES-128: these constructors cannot fail.
            key: LessSafeKey::new(UnboundKey::new(&aead::AES_128_GCM, &key).expect("AES-128 key")),
            iv,
            hp: hp::HeaderProtectionKey::new(&hp::AES_128, &hpk).expect("AES-128 key"),
        }
    }
}

/// The client's Initial key, IV and header-protection key for `version` (2 for v2, anything else v1).
fn client_key_bytes(version: u32, dcid: &[u8]) -> ([u8; 16], [u8; 12], [u8; 16]) {
    // RFC 9001 §5.2 and RFC 9369 §3.3.1.
    const SALT_V1: [u8; 20] = [
        0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c,
        0xad, 0xcc, 0xbb, 0x7f, 0x0a,
    ];
    const SALT_V2: [u8; 20] = [
        0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d,
        0xcb, 0xf9, 0xbd, 0x2e, 0xd9,
    ];
    let (salt, labels): (&[u8], [&[u8]; 3]) = if version == VERSION_2 {
        (&SALT_V2, [b"quicv2 key", b"quicv2 iv", b"quicv2 hp"])
    } else {
        (&SALT_V1, [b"quic key", b"quic iv", b"quic hp"])
    };
    let initial = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(dcid);
    let mut secret = [0u8; 32];
    expand_label(&initial, b"client in", &mut secret);
    let client = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &secret);
    let (mut key, mut iv, mut hpk) = ([0u8; 16], [0u8; 12], [0u8; 16]);
    expand_label(&client, labels[0], &mut key);
    expand_label(&client, labels[1], &mut iv);
    expand_label(&client, labels[2], &mut hpk);
    (key, iv, hpk)
}

/// TLS 1.3 HKDF-Expand-Label with an empty context (RFC 8446 §7.1).
fn expand_label(prk: &hkdf::Prk, label: &[u8], out: &mut [u8]) {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let len = (out.len() as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    let info: [&[u8]; 5] = [&len, &label_len, b"tls13 ", label, &[0]];
    // The lengths here (at most 32 bytes) are far below HKDF's limit of 255 × 32.
    prk.expand(&info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("HKDF output length");
}

/// Bounds-checked reading of the header and frames.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .ok_or_else(|| malformed("length overflows"))?;
        need(HDR, end, self.b.len())?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn vec8(&mut self) -> Result<&'a [u8]> {
        let n = self.u8()? as usize;
        self.take(n)
    }
    /// A variable-length integer (RFC 9000 §16), as usize (62 bits fit on 64-bit targets; larger values
    /// on 32-bit ones saturate and then fail the bounds checks).
    fn varint(&mut self) -> Result<usize> {
        let first = self.u8()?;
        let extra = (1usize << (first >> 6)) - 1;
        let mut v = (first & 0x3f) as u64;
        for &b in self.take(extra)? {
            v = v << 8 | b as u64;
        }
        Ok(usize::try_from(v).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
#[path = "quic_tests.rs"]
mod tests;
