//! A name copied into a fixed buffer of [`NAME_MAX`] bytes, for the names a flow is found by (DNS names,
//! TLS SNI, HTTP Host, ALPN). Longer input is cut at the bound and marked [`Name::is_cut`], so a flow table
//! can count it; nothing allocates.

use core::fmt;

/// The bound of a [`Name`]: 255 bytes, the longest DNS name on the wire (RFC 1035 §2.3.4; its dotted
/// form is at most 253 bytes) and the longest SNI host name a ClientHello can carry in one byte of length.
pub const NAME_MAX: usize = 255;

/// At most [`NAME_MAX`] bytes of a name, and whether the input was longer.
///
/// The bytes are kept as they came (no case folding, no escaping); [`fmt::Display`] writes them as text
/// with bytes outside printable ASCII as `\xHH`.
#[derive(Clone, Copy)]
pub struct Name {
    buf: [u8; NAME_MAX],
    len: u8,
    cut: bool,
}

impl Name {
    /// An empty name.
    pub const fn new() -> Self {
        Name {
            buf: [0; NAME_MAX],
            len: 0,
            cut: false,
        }
    }

    /// A name holding the first [`NAME_MAX`] bytes of `bytes`, cut when longer.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut n = Name::new();
        n.push(bytes);
        n
    }

    /// Appends as much of `bytes` as fits; sets the cut flag when something did not. Returns false then.
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        let at = self.len as usize;
        let room = NAME_MAX - at;
        let n = bytes.len().min(room);
        self.buf[at..at + n].copy_from_slice(&bytes[..n]);
        self.len = (at + n) as u8;
        if n < bytes.len() {
            self.cut = true;
        }
        !self.cut
    }

    /// Empties the name (and clears the cut flag).
    pub fn clear(&mut self) {
        self.len = 0;
        self.cut = false;
    }

    /// The bytes kept.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }

    /// Number of bytes kept.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when no byte is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when the input was longer than [`NAME_MAX`] and the rest was dropped.
    pub fn is_cut(&self) -> bool {
        self.cut
    }
}

impl Default for Name {
    fn default() -> Self {
        Name::new()
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes() && self.cut == other.cut
    }
}

impl Eq for Name {}

impl PartialEq<[u8]> for Name {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        escaped(f, self.as_bytes())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")?;
        if self.cut {
            f.write_str(" (cut)")?;
        }
        Ok(())
    }
}

/// Writes `bytes` as text, bytes outside printable ASCII (and `\`) as `\xHH`.
pub(crate) fn escaped(f: &mut dyn fmt::Write, bytes: &[u8]) -> fmt::Result {
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            f.write_char(b as char)?;
        } else {
            write!(f, "\\x{b:02x}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_at_the_bound() {
        let long = [b'a'; 300];
        let n = Name::from_bytes(&long);
        assert_eq!(n.len(), NAME_MAX);
        assert!(n.is_cut());
        let mut n = Name::from_bytes(&long[..250]);
        assert!(!n.is_cut());
        assert!(n.push(b"bcdef"));
        assert!(!n.push(b"g"));
        assert!(n.is_cut() && n.len() == NAME_MAX && n.as_bytes().ends_with(b"bcdef"));
        n.clear();
        assert!(n.is_empty() && !n.is_cut());
    }

    #[test]
    fn display_escapes() {
        let n = Name::from_bytes(b"a\x00b\\.c\xff");
        assert_eq!(n.to_string(), "a\\x00b\\x5c.c\\xff");
        assert_eq!(
            format!("{:?}", Name::from_bytes(&[b'x'; 256])).len(),
            255 + 2 + 6
        );
    }
}
