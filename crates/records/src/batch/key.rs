//! The shared secret of probe and collector: loaded from a private file, it tags every batch.

use std::fmt;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{MIN_KEY_LEN, TAG_LEN};

type HmacSha256 = Hmac<Sha256>;

/// The shared secret, with the HMAC key schedule done once.
#[derive(Clone)]
pub struct Key {
    mac: HmacSha256,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)") // never print the secret
    }
}

/// Why a key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error(
        "cannot read key file {path}: {source} (create one with: (umask 077; head -c 32 /dev/urandom > {path}))"
    )]
    Read {
        /// The key file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Group or others may read the file (a secret must be private, as ssh requires of private keys).
    #[error(
        "key file {path} is readable by group or others (mode {mode:04o}): run chmod 600 {path}"
    )]
    NotPrivate {
        /// The key file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// Not a regular file, owned by someone else, or in a directory others may write (sys's checks,
    /// as ssh makes them).
    #[error(transparent)]
    Refused(sys::SecretFileError),
    /// Fewer than [`MIN_KEY_LEN`] bytes.
    #[error("key{where_} is {len} bytes, at least {MIN_KEY_LEN} are needed (create one with: (umask 077; head -c 32 /dev/urandom > FILE))")]
    TooShort {
        /// " file PATH" or "".
        where_: String,
        /// Bytes found (after stripping a trailing newline).
        len: usize,
    },
}

impl Key {
    /// Reads a key file (at least 16 bytes; one trailing `\n` or `\r\n` is stripped), checked by
    /// [`sys::read_private_file`]: a regular file of root or of this user that group and others may
    /// not read.
    pub fn load(path: impl AsRef<Path>) -> Result<Key, KeyError> {
        let path = path.as_ref();
        Key::from_file(path, sys::read_private_file(path))
    }

    /// A key from what a checked read of the file `path` gave (see [`sys::PrivateDir::read`] too).
    pub fn from_file(
        path: &Path,
        read: Result<Vec<u8>, sys::SecretFileError>,
    ) -> Result<Key, KeyError> {
        let bytes = read.map_err(|e| match e {
            sys::SecretFileError::Read { source, .. } => KeyError::Read {
                path: path.display().to_string(),
                source,
            },
            sys::SecretFileError::NotPrivate { mode, .. } => KeyError::NotPrivate {
                path: path.display().to_string(),
                mode,
            },
            e => KeyError::Refused(e),
        })?;
        Key::from_bytes(&bytes).map_err(|e| match e {
            KeyError::TooShort { len, .. } => KeyError::TooShort {
                where_: format!(" file {}", path.display()),
                len,
            },
            e => e,
        })
    }

    /// A key from bytes (at least 16; one trailing `\n` or `\r\n` is stripped, as `echo` adds one).
    pub fn from_bytes(bytes: &[u8]) -> Result<Key, KeyError> {
        let b = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let b = b.strip_suffix(b"\r").unwrap_or(b);
        if b.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort {
                where_: String::new(),
                len: b.len(),
            });
        }
        let mac = HmacSha256::new_from_slice(b).expect("HMAC takes keys of any length");
        Ok(Key { mac })
    }

    #[cfg(test)]
    pub(super) fn tag(&self, data: &[u8]) -> [u8; TAG_LEN] {
        self.tag_parts(&[data])
    }

    /// HMAC over the concatenation of `parts` (callers make the encoding unambiguous).
    pub(crate) fn tag_parts(&self, parts: &[&[u8]]) -> [u8; TAG_LEN] {
        let mut m = self.mac.clone();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// Constant-time check of `tag` over the concatenation of `parts`.
    pub(crate) fn verify_parts(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m = self.mac.clone();
        for p in parts {
            m.update(p);
        }
        m.verify_slice(tag).is_ok()
    }
}
