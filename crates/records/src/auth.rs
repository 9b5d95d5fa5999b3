//! Protocol v2 on TCP: the handshake that binds a connection to one probe key and one collector id, and the
//! authenticated acks (docs/records.md, "Handshake").
//!
//! ```text
//! probe → collector  hello   "RCH2" ver=2 flags=0 0 0 | key_id u64 | probe nonce [16] | 32 zero bytes   64 B
//! collector → probe  server  "RCS2" ver=2 id_len 0 0  | collector nonce [16] | id | tag [32]
//!                            tag = HMAC(K, "ringcap v2 server\0" ‖ hello ‖ server without tag)
//! probe → collector  finish  "RCF2" 0 0 0 0 | tag [32]                                                  40 B
//!                            tag = HMAC(K, "ringcap v2 finish\0" ‖ hello ‖ server)
//! collector → probe  ack     "RCA2" 0 0 0 0 | seq u64 | tag [32]                                        48 B
//!                            tag = HMAC(K, "ringcap v2 ack\0" ‖ key_id ‖ id_len ‖ id ‖ probe nonce ‖
//!                                       collector nonce ‖ seq)
//! collector → probe  error   "RCE2" code 0 0 0 (then close; unauthenticated, for the message only)      8 B
//! ```
//!
//! K is the key of `key_id` (the probe id) in the collector's key set. Each side proves it holds K over the
//! other side's fresh nonce, so neither a recorded handshake nor a recorded ack works on a new connection.
//! Everything here parses fixed-size fields from peer bytes before any MAC is checked; nothing else of an
//! unauthenticated message is used.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use crate::batch::{Key, KeyError, MAX_COLLECTOR_ID, TAG_LEN};

/// Protocol version of the handshake, acks and batches.
pub const PROTOCOL_VERSION: u8 = 2;
/// Bytes of the probe's hello: as long as a v1 batch header, so a v1 collector (which reads 64 bytes before
/// looking at them) refuses it at once and the probe can say why, instead of both waiting.
pub const HELLO_LEN: usize = 64;
/// Bytes of the collector's reply before its id and tag.
pub const SERVER_FIXED_LEN: usize = 24;
/// Bytes of the probe's finish.
pub const FINISH_LEN: usize = 8 + TAG_LEN;
/// Bytes of an ack.
pub const ACK_LEN: usize = 16 + TAG_LEN;
/// Bytes of an error message.
pub const ERROR_LEN: usize = 8;
/// Nonce bytes (random per connection and side).
pub const NONCE_LEN: usize = 16;

const HELLO_MAGIC: [u8; 4] = *b"RCH2";
const SERVER_MAGIC: [u8; 4] = *b"RCS2";
const FINISH_MAGIC: [u8; 4] = *b"RCF2";
const ACK_MAGIC: [u8; 4] = *b"RCA2";
const ERROR_MAGIC: [u8; 4] = *b"RCE2";
/// What a v1 probe sends first (a batch) and a v1 collector answers (an ack).
const V1_BATCH_MAGIC: [u8; 4] = *b"RCB1";
const V1_ACK_MAGIC: [u8; 4] = *b"RCA1";

const SERVER_LABEL: &[u8] = b"ringcap v2 server\0";
const FINISH_LABEL: &[u8] = b"ringcap v2 finish\0";
const ACK_LABEL: &[u8] = b"ringcap v2 ack\0";

/// Why a collector refused a handshake (sent in an error message, so the probe can say it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefuseCode {
    /// The collector has no key for this key id.
    UnknownKeyId = 1,
    /// The probe's finish tag did not verify (the probe's key differs from the collector's).
    BadKey = 2,
    /// The probe speaks another protocol version.
    Version = 3,
}

impl RefuseCode {
    fn from_byte(b: u8) -> Option<RefuseCode> {
        match b {
            1 => Some(RefuseCode::UnknownKeyId),
            2 => Some(RefuseCode::BadKey),
            3 => Some(RefuseCode::Version),
            _ => None,
        }
    }
}

impl std::fmt::Display for RefuseCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RefuseCode::UnknownKeyId => "the collector has no key for this probe id (--key-dir DIR/<probe id>)",
            RefuseCode::BadKey => "authentication failed: this probe's key is not the collector's key for its probe id",
            RefuseCode::Version => "protocol version mismatch",
        })
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The peer speaks protocol v1 (a ringcap from before the handshake).
    #[error("the peer speaks record protocol v1 (an older ringcap); upgrade it: this build speaks v{PROTOCOL_VERSION}")]
    OldPeer,
    /// Another version number.
    #[error("the peer speaks record protocol v{0}; this build speaks v{PROTOCOL_VERSION}")]
    Version(u8),
    /// Not a ringcap record peer at all.
    #[error("not a ringcap handshake (first bytes {0:02x?})")]
    BadMagic([u8; 4]),
    /// The collector has no key for the probe's key id.
    #[error("no key for probe id {0}")]
    UnknownKeyId(u64),
    /// A tag did not verify: the two sides hold different keys (or bytes were altered).
    #[error("{0}")]
    BadTag(&'static str),
    /// A malformed field (reserved bytes, collector id).
    #[error("malformed handshake: {0}")]
    Malformed(&'static str),
    /// The collector refused, saying why.
    #[error("the collector refused: {0}")]
    Refused(RefuseCode),
    /// The connection ended or failed during the handshake.
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl HandshakeError {
    /// A short fixed name for the collector's counters.
    pub fn reason(&self) -> &'static str {
        match self {
            HandshakeError::OldPeer | HandshakeError::Version(_) => "bad_version",
            HandshakeError::BadMagic(_) | HandshakeError::Malformed(_) => "bad_handshake",
            HandshakeError::UnknownKeyId(_) => "unknown_key_id",
            HandshakeError::BadTag(_) | HandshakeError::Refused(_) => "bad_auth",
            HandshakeError::Io(_) => "handshake_io",
        }
    }

    /// The code to tell the probe (None: just close).
    pub fn refuse_code(&self) -> Option<RefuseCode> {
        match self {
            HandshakeError::OldPeer | HandshakeError::Version(_) => Some(RefuseCode::Version),
            HandshakeError::UnknownKeyId(_) => Some(RefuseCode::UnknownKeyId),
            HandshakeError::BadTag(_) => Some(RefuseCode::BadKey),
            _ => None,
        }
    }
}

/// The collector's keys: one shared by every probe (`--key`), or one per probe id (`--key-dir`).
#[derive(Clone, Debug)]
pub enum KeySet {
    /// Every probe id uses this key.
    Shared(Key),
    /// Only the probe ids listed, each with its own key.
    PerProbe(Arc<HashMap<u64, Key>>),
}

impl From<Key> for KeySet {
    fn from(k: Key) -> KeySet {
        KeySet::Shared(k)
    }
}

/// Why a key directory could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyDirError {
    /// The directory could not be listed.
    #[error("cannot read key directory {path}: {source}")]
    Read {
        /// The directory.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A file whose name is not a probe id.
    #[error("{path}: a key file in --key-dir must be named by the probe id it is for (a decimal number, as --probe-id)")]
    BadName {
        /// The file.
        path: String,
    },
    /// No key at all.
    #[error("key directory {path} holds no key (create one per probe: (umask 077; head -c 32 /dev/urandom > {path}/PROBE_ID))")]
    Empty {
        /// The directory.
        path: String,
    },
    /// One key file is bad.
    #[error(transparent)]
    Key(#[from] KeyError),
}

impl KeySet {
    /// Loads every key file of `dir`, each named by its probe id (`DIR/17` is probe 17's key); names starting
    /// with `.` are ignored. The directory is checked as ssh checks `~/.ssh` (owned by root or this user,
    /// writable by nobody else: else anyone could add a probe's key) and each file as `--key` is (a private
    /// regular file of root or this user, ≥ 16 bytes), by [`sys::PrivateDir`].
    pub fn load_dir(dir: &Path) -> Result<KeySet, KeyDirError> {
        let d = sys::PrivateDir::open(dir).map_err(|e| match e {
            sys::SecretFileError::Read { source, .. } => KeyDirError::Read {
                path: dir.display().to_string(),
                source,
            },
            e => KeyDirError::Key(KeyError::Refused(e)),
        })?;
        let names = d.names().map_err(|e| match e {
            sys::SecretFileError::Read { source, .. } => KeyDirError::Read {
                path: dir.display().to_string(),
                source,
            },
            e => KeyDirError::Key(KeyError::Refused(e)),
        })?;
        let mut keys = HashMap::new();
        for name in names {
            let path = d.path_of(&name);
            let text = name.to_str().unwrap_or("");
            if text.starts_with('.') {
                continue;
            }
            let id: u64 = text.parse().map_err(|_| KeyDirError::BadName {
                path: path.display().to_string(),
            })?;
            keys.insert(id, Key::from_file(&path, d.read(&name))?);
        }
        if keys.is_empty() {
            return Err(KeyDirError::Empty {
                path: dir.display().to_string(),
            });
        }
        Ok(KeySet::PerProbe(Arc::new(keys)))
    }

    /// The key that batches and handshakes of probe `id` must verify under.
    pub fn get(&self, id: u64) -> Option<&Key> {
        match self {
            KeySet::Shared(k) => Some(k),
            KeySet::PerProbe(m) => m.get(&id),
        }
    }
}

/// A connection after the handshake: the key, the ids and the two nonces its acks are bound to.
#[derive(Clone, Debug)]
pub struct Session {
    key: Key,
    key_id: u64,
    collector_id: Vec<u8>,
    probe_nonce: [u8; NONCE_LEN],
    collector_nonce: [u8; NONCE_LEN],
}

/// Why an ack was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// Not an ack (or a v1 ack).
    #[error("garbage instead of an ack")]
    NotAnAck,
    /// The collector ran protocol v1.
    #[error(
        "a v1 ack: the collector is an older ringcap (upgrade it to protocol v{PROTOCOL_VERSION})"
    )]
    V1,
    /// The collector sent an error and will close.
    #[error("the collector refused: {0}")]
    Refused(RefuseCode),
    /// The tag does not verify: forged, or replayed from another connection.
    #[error("an ack whose tag does not verify (forged or replayed); batches stay unacked")]
    BadTag,
}

impl Session {
    /// The key batches of this connection are sealed and opened with.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The probe id the connection authenticated as.
    pub fn key_id(&self) -> u64 {
        self.key_id
    }

    /// The collector id every batch tag covers.
    pub fn collector_id(&self) -> &[u8] {
        &self.collector_id
    }

    /// What an ack's tag covers: both ids, both nonces of this connection, and the seq.
    fn with_ack_parts<R>(&self, seq: u64, f: impl FnOnce(&[&[u8]]) -> R) -> R {
        f(&[
            ACK_LABEL,
            &self.key_id.to_le_bytes(),
            &[self.collector_id.len() as u8],
            &self.collector_id,
            &self.probe_nonce,
            &self.collector_nonce,
            &seq.to_le_bytes(),
        ])
    }

    fn ack_tag(&self, seq: u64) -> [u8; TAG_LEN] {
        self.with_ack_parts(seq, |parts| self.key.tag_parts(parts))
    }

    /// The ack of every batch up to `seq` on this connection.
    pub fn ack(&self, seq: u64) -> [u8; ACK_LEN] {
        let mut a = [0u8; ACK_LEN];
        a[..4].copy_from_slice(&ACK_MAGIC);
        a[8..16].copy_from_slice(&seq.to_le_bytes());
        a[16..].copy_from_slice(&self.ack_tag(seq));
        a
    }

    /// The seq an ack covers, after its tag verified (constant time).
    pub fn check_ack(&self, b: &[u8; ACK_LEN]) -> Result<u64, AckError> {
        if let Some(code) = parse_error(&b[..ERROR_LEN]) {
            return Err(AckError::Refused(code));
        }
        if b[..4] == V1_ACK_MAGIC {
            return Err(AckError::V1);
        }
        if b[..4] != ACK_MAGIC || b[4..8] != [0; 4] {
            return Err(AckError::NotAnAck);
        }
        let seq = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let ok = self.with_ack_parts(seq, |parts| self.key.verify_parts(parts, &b[16..]));
        if ok {
            Ok(seq)
        } else {
            Err(AckError::BadTag)
        }
    }
}

/// An error message's code, if `b` (≥ 8 bytes) is one.
pub fn parse_error(b: &[u8]) -> Option<RefuseCode> {
    if b.len() < ERROR_LEN || b[..4] != ERROR_MAGIC {
        return None;
    }
    RefuseCode::from_byte(b[4])
}

/// The error message for `code`.
pub fn error_message(code: RefuseCode) -> [u8; ERROR_LEN] {
    let mut m = [0u8; ERROR_LEN];
    m[..4].copy_from_slice(&ERROR_MAGIC);
    m[4] = code as u8;
    m
}

/// The probe's first message, parsed (nothing in it is authenticated yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The probe id whose key the probe claims to hold.
    pub key_id: u64,
    /// The probe's fresh nonce.
    pub nonce: [u8; NONCE_LEN],
    raw: [u8; HELLO_LEN],
}

impl Hello {
    /// A new hello with a fresh nonce.
    pub fn new(key_id: u64) -> Hello {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let mut raw = [0u8; HELLO_LEN];
        raw[..4].copy_from_slice(&HELLO_MAGIC);
        raw[4] = PROTOCOL_VERSION;
        raw[8..16].copy_from_slice(&key_id.to_le_bytes());
        raw[16..32].copy_from_slice(&nonce);
        Hello { key_id, nonce, raw }
    }

    /// The bytes to send.
    pub fn bytes(&self) -> &[u8; HELLO_LEN] {
        &self.raw
    }

    /// Parses a hello; a v1 batch header (`RCB1`) is named as an old probe.
    pub fn parse(b: &[u8; HELLO_LEN]) -> Result<Hello, HandshakeError> {
        let magic: [u8; 4] = b[..4].try_into().expect("4 bytes");
        if magic == V1_BATCH_MAGIC {
            return Err(HandshakeError::OldPeer);
        }
        if magic != HELLO_MAGIC {
            return Err(HandshakeError::BadMagic(magic));
        }
        if b[4] != PROTOCOL_VERSION {
            return Err(HandshakeError::Version(b[4]));
        }
        if b[5..8] != [0; 3] || b[32..].iter().any(|&x| x != 0) {
            return Err(HandshakeError::Malformed("reserved hello bytes are not 0"));
        }
        Ok(Hello {
            key_id: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            nonce: b[16..32].try_into().expect("16 bytes"),
            raw: *b,
        })
    }
}

/// The collector's side between its reply and the probe's finish.
pub struct ServerPending {
    hello: Hello,
    reply: Vec<u8>,
    key: Key,
    collector_nonce: [u8; NONCE_LEN],
    collector_id: Vec<u8>,
}

impl ServerPending {
    /// The collector's reply to `hello` (its id, a fresh nonce, a tag proving it holds the probe's key).
    pub fn reply(
        hello: Hello,
        keys: &KeySet,
        collector_id: &[u8],
    ) -> Result<ServerPending, HandshakeError> {
        if collector_id.is_empty() || collector_id.len() > MAX_COLLECTOR_ID {
            return Err(HandshakeError::Malformed(
                "collector id must be 1 to 255 bytes",
            ));
        }
        let key = keys
            .get(hello.key_id)
            .ok_or(HandshakeError::UnknownKeyId(hello.key_id))?
            .clone();
        let collector_nonce: [u8; NONCE_LEN] = rand::random();
        let mut reply = Vec::with_capacity(SERVER_FIXED_LEN + collector_id.len() + TAG_LEN);
        reply.extend_from_slice(&SERVER_MAGIC);
        reply.push(PROTOCOL_VERSION);
        reply.push(collector_id.len() as u8);
        reply.extend_from_slice(&[0, 0]);
        reply.extend_from_slice(&collector_nonce);
        reply.extend_from_slice(collector_id);
        let tag = key.tag_parts(&[SERVER_LABEL, hello.bytes(), &reply]);
        reply.extend_from_slice(&tag);
        Ok(ServerPending {
            hello,
            reply,
            key,
            collector_nonce,
            collector_id: collector_id.to_vec(),
        })
    }

    /// The bytes to send.
    pub fn bytes(&self) -> &[u8] {
        &self.reply
    }

    /// Checks the probe's finish; the session on success.
    pub fn finish(self, b: &[u8; FINISH_LEN]) -> Result<Session, HandshakeError> {
        if b[..4] != FINISH_MAGIC || b[4..8] != [0; 4] {
            return Err(HandshakeError::Malformed("not a finish message"));
        }
        if !self
            .key
            .verify_parts(&[FINISH_LABEL, self.hello.bytes(), &self.reply], &b[8..])
        {
            return Err(HandshakeError::BadTag(
                "the probe's finish tag does not verify (its key is not the one for its probe id)",
            ));
        }
        Ok(Session {
            key: self.key,
            key_id: self.hello.key_id,
            collector_id: self.collector_id,
            probe_nonce: self.hello.nonce,
            collector_nonce: self.collector_nonce,
        })
    }
}

/// The fixed part of the collector's reply, parsed: (id length, nonce); or why it is not one.
pub fn parse_server_fixed(
    b: &[u8; SERVER_FIXED_LEN],
) -> Result<(usize, [u8; NONCE_LEN]), HandshakeError> {
    if let Some(code) = parse_error(&b[..ERROR_LEN]) {
        return Err(HandshakeError::Refused(code));
    }
    let magic: [u8; 4] = b[..4].try_into().expect("4 bytes");
    if magic == V1_ACK_MAGIC || magic == V1_BATCH_MAGIC {
        return Err(HandshakeError::OldPeer);
    }
    if magic != SERVER_MAGIC {
        return Err(HandshakeError::BadMagic(magic));
    }
    if b[4] != PROTOCOL_VERSION {
        return Err(HandshakeError::Version(b[4]));
    }
    if b[5] == 0 || b[6..8] != [0, 0] {
        return Err(HandshakeError::Malformed(
            "bad collector id length or reserved bytes",
        ));
    }
    Ok((b[5] as usize, b[8..24].try_into().expect("16 bytes")))
}

/// The probe's side of the handshake on a blocking stream (with timeouts set by the caller): hello, the
/// collector's reply checked, finish. An early EOF names the likely cause (an old collector closes on the
/// hello it cannot read).
pub fn client_handshake<S: Read + Write>(
    s: &mut S,
    key: &Key,
    key_id: u64,
) -> Result<Session, HandshakeError> {
    let hello = Hello::new(key_id);
    s.write_all(hello.bytes())?;
    s.flush()?;
    let mut fixed = [0u8; SERVER_FIXED_LEN];
    read_reply(s, &mut fixed[..ERROR_LEN])?;
    if let Some(code) = parse_error(&fixed[..ERROR_LEN]) {
        return Err(HandshakeError::Refused(code));
    }
    read_reply(s, &mut fixed[ERROR_LEN..])?;
    let (id_len, collector_nonce) = parse_server_fixed(&fixed)?;
    let mut rest = vec![0u8; id_len + TAG_LEN];
    read_reply(s, &mut rest)?;
    let mut reply = fixed.to_vec();
    reply.extend_from_slice(&rest[..id_len]);
    if !key.verify_parts(&[SERVER_LABEL, hello.bytes(), &reply], &rest[id_len..]) {
        return Err(HandshakeError::BadTag(
            "the collector's handshake tag does not verify: it does not hold this probe's key for its probe id \
             (or it is not a ringcap collector)",
        ));
    }
    reply.extend_from_slice(&rest[id_len..]);
    let mut finish = [0u8; FINISH_LEN];
    finish[..4].copy_from_slice(&FINISH_MAGIC);
    finish[8..].copy_from_slice(&key.tag_parts(&[FINISH_LABEL, hello.bytes(), &reply]));
    s.write_all(&finish)?;
    s.flush()?;
    Ok(Session {
        key: key.clone(),
        key_id,
        collector_id: rest[..id_len].to_vec(),
        probe_nonce: hello.nonce,
        collector_nonce,
    })
}

fn read_reply<S: Read>(s: &mut S, buf: &mut [u8]) -> Result<(), HandshakeError> {
    s.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            HandshakeError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the collector closed the connection during the handshake (a collector older than record \
                 protocol v2, or one that refused this probe)",
            ))
        } else {
            HandshakeError::Io(e)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn key(b: &[u8]) -> Key {
        Key::from_bytes(b).unwrap()
    }

    /// The collector's side over a socket, as collect/mod.rs runs it (without deadlines).
    fn serve(
        mut s: UnixStream,
        keys: KeySet,
        id: &'static [u8],
    ) -> Result<Session, HandshakeError> {
        let mut h = [0u8; HELLO_LEN];
        s.read_exact(&mut h)?;
        let pending = match Hello::parse(&h).and_then(|h| ServerPending::reply(h, &keys, id)) {
            Ok(p) => p,
            Err(e) => {
                if let Some(c) = e.refuse_code() {
                    let _ = s.write_all(&error_message(c));
                }
                return Err(e);
            }
        };
        s.write_all(pending.bytes())?;
        let mut f = [0u8; FINISH_LEN];
        s.read_exact(&mut f)?;
        let r = pending.finish(&f);
        if let Err(e) = &r {
            if let Some(c) = e.refuse_code() {
                let _ = s.write_all(&error_message(c));
            }
        }
        r
    }

    fn run(
        probe_key: Key,
        id: u64,
        keys: KeySet,
    ) -> (
        Result<Session, HandshakeError>,
        Result<Session, HandshakeError>,
    ) {
        let (a, b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || serve(b, keys, b"col-a:5400"));
        let mut a = a;
        let c = client_handshake(&mut a, &probe_key, id);
        drop(a);
        (c, server.join().unwrap())
    }

    #[test]
    fn shared_key_handshake_and_acks() {
        let k = key(b"0123456789abcdef-shared");
        let (c, s) = run(k.clone(), 7, KeySet::Shared(k));
        let (c, s) = (c.unwrap(), s.unwrap());
        assert_eq!(c.collector_id(), b"col-a:5400");
        assert_eq!((c.key_id(), s.key_id()), (7, 7));
        let a = s.ack(41);
        assert_eq!(c.check_ack(&a), Ok(41));
        // Altered seq, altered tag, a v1 ack, garbage.
        let mut t = a;
        t[8] ^= 1;
        assert_eq!(c.check_ack(&t), Err(AckError::BadTag));
        let mut t = a;
        t[47] ^= 0x80;
        assert_eq!(c.check_ack(&t), Err(AckError::BadTag));
        let mut t = [0u8; ACK_LEN];
        t[..4].copy_from_slice(b"RCA1");
        assert_eq!(c.check_ack(&t), Err(AckError::V1));
        assert_eq!(c.check_ack(&[0x55; ACK_LEN]), Err(AckError::NotAnAck));
    }

    #[test]
    fn an_ack_of_another_connection_does_not_verify() {
        let k = key(b"0123456789abcdef-shared");
        let (c1, s1) = run(k.clone(), 7, KeySet::Shared(k.clone()));
        let (c2, _) = run(k.clone(), 7, KeySet::Shared(k));
        let a = s1.unwrap().ack(3);
        assert_eq!(c1.unwrap().check_ack(&a), Ok(3));
        assert_eq!(c2.unwrap().check_ack(&a), Err(AckError::BadTag));
    }

    #[test]
    fn per_probe_keys() {
        let k1 = key(b"key-of-probe-1-0123456789");
        let k2 = key(b"key-of-probe-2-0123456789");
        let set = KeySet::PerProbe(Arc::new(HashMap::from([(1, k1.clone()), (2, k2.clone())])));
        assert!(run(k1.clone(), 1, set.clone()).0.is_ok());
        // Probe 1 claiming to be probe 2 with its own key: the collector's tag fails at the probe.
        let (c, s) = run(k1.clone(), 2, set.clone());
        assert!(matches!(c, Err(HandshakeError::BadTag(_))), "{c:?}");
        assert!(s.is_err());
        // An unknown id is refused with a reason the probe can print.
        let (c, s) = run(k1, 3, set);
        assert!(
            matches!(c, Err(HandshakeError::Refused(RefuseCode::UnknownKeyId))),
            "{c:?}"
        );
        assert!(matches!(s, Err(HandshakeError::UnknownKeyId(3))));
    }

    #[test]
    fn old_and_foreign_peers_are_named() {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(b"RCB1");
        b[4] = 1;
        assert!(matches!(Hello::parse(&b), Err(HandshakeError::OldPeer)));
        b[..4].copy_from_slice(b"GET ");
        assert!(matches!(Hello::parse(&b), Err(HandshakeError::BadMagic(_))));
        let mut h = *Hello::new(1).bytes();
        h[4] = 3;
        assert!(matches!(Hello::parse(&h), Err(HandshakeError::Version(3))));
        let mut f = [0u8; SERVER_FIXED_LEN];
        f[..4].copy_from_slice(b"RCA1");
        assert!(matches!(
            parse_server_fixed(&f),
            Err(HandshakeError::OldPeer)
        ));
    }

    #[test]
    fn key_dir() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            KeySet::load_dir(d.path()),
            Err(KeyDirError::Empty { .. })
        ));
        for (name, bytes) in [("17", &b"seventeen-key-0123456"[..]), (".hidden", b"x")] {
            let p = d.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let set = KeySet::load_dir(d.path()).unwrap();
        assert!(set.get(17).is_some() && set.get(18).is_none());
        std::fs::write(d.path().join("probe-a"), b"0123456789abcdef").unwrap();
        let e = KeySet::load_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("named by the probe id"), "{e}");
    }
}
