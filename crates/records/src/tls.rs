//! Optional mutual TLS between probe and collector (rustls with the ring provider). The record protocol runs
//! unchanged inside: TLS adds confidentiality and certificate identities, the HMAC handshake still decides
//! which probe key a connection speaks for.
//!
//! [`Stream`] is a TCP connection with or without TLS, so the collector and the probe read and write one type.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned,
};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("{path}: {why}")]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
    /// A private key file that is not private, not regular or not ours (sys's checks).
    #[error(transparent)]
    Key(sys::SecretFileError),
    /// rustls refused the configuration (a key that does not match its certificate, ...).
    #[error("TLS configuration: {0}")]
    Config(String),
}

fn file_err(path: &Path, why: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(path, e))?;
    if certs.is_empty() {
        return Err(file_err(path, "no CERTIFICATE in the file"));
    }
    Ok(certs)
}

/// A private key file, read through the one checked reader of secrets ([`sys::read_private_file`]:
/// a regular file of root or this user that group and others may not read), as `--key` is.
fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = sys::read_private_file(path).map_err(|e| match e {
        // The path is said once, by file_err.
        sys::SecretFileError::Read { source, .. } => file_err(path, source),
        e => TlsError::Key(e),
    })?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| file_err(path, e))
}

fn load_roots(ca: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca)? {
        roots.add(c).map_err(|e| file_err(ca, e))?;
    }
    Ok(Arc::new(roots))
}

/// The collector's TLS: its certificate and key, and the CA every probe's client certificate must chain to
/// (a probe without one is refused).
pub fn server_config(cert: &Path, key: &Path, ca: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let verifier = WebPkiClientVerifier::builder_with_provider(load_roots(ca)?, provider())
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(load_certs(cert)?, load_key(key)?)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(Arc::new(cfg))
}

/// The probe's TLS: the CA the collectors' certificates must chain to, and its own certificate and key
/// (`None`: no client certificate, which a collector with TLS refuses).
pub fn client_config(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let b = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(load_roots(ca)?);
    let cfg = match identity {
        Some((cert, key)) => b
            .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|e| TlsError::Config(e.to_string()))?,
        None => b.with_no_client_auth(),
    };
    Ok(Arc::new(cfg))
}

/// A TCP connection, plain or inside TLS.
pub enum Stream {
    /// No TLS.
    Plain(TcpStream),
    /// The collector's end of a TLS connection.
    Server(Box<StreamOwned<ServerConnection, TcpStream>>),
    /// The probe's end of a TLS connection.
    Client(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// The collector's end: TLS when configured (the handshake happens on the first read).
    pub fn server(tcp: TcpStream, tls: Option<&Arc<ServerConfig>>) -> io::Result<Stream> {
        Ok(match tls {
            None => Stream::Plain(tcp),
            Some(cfg) => {
                let conn = ServerConnection::new(Arc::clone(cfg)).map_err(io::Error::other)?;
                Stream::Server(Box::new(StreamOwned::new(conn, tcp)))
            }
        })
    }

    /// The probe's end: TLS when configured, checking the collector's certificate against `host`.
    pub fn client(tcp: TcpStream, tls: Option<(&Arc<ClientConfig>, &str)>) -> io::Result<Stream> {
        Ok(match tls {
            None => Stream::Plain(tcp),
            Some((cfg, host)) => {
                let name = ServerName::try_from(host.to_string()).map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("TLS name {host}: {e}"))
                })?;
                let conn =
                    ClientConnection::new(Arc::clone(cfg), name).map_err(io::Error::other)?;
                Stream::Client(Box::new(StreamOwned::new(conn, tcp)))
            }
        })
    }

    /// The TCP socket underneath (timeouts, blocking mode, poll).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Server(s) => s.get_ref(),
            Stream::Client(s) => s.get_ref(),
        }
    }

    /// True when a read would return data (or EOF) now: bytes in the socket, or plaintext TLS already
    /// decrypted and buffered.
    pub fn readable_now(&mut self) -> bool {
        let buffered = match self {
            Stream::Plain(_) => false,
            Stream::Server(s) => s
                .conn
                .process_new_packets()
                .is_ok_and(|st| st.plaintext_bytes_to_read() > 0),
            Stream::Client(s) => s
                .conn
                .process_new_packets()
                .is_ok_and(|st| st.plaintext_bytes_to_read() > 0),
        };
        buffered || poll_now(self.tcp().as_raw_fd())
    }
}

fn poll_now(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Server(s) => s.read(buf),
            Stream::Client(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Server(s) => s.write(buf),
            Stream::Client(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Server(s) => s.flush(),
            Stream::Client(s) => s.flush(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;

    /// The TLS private key is read by sys's one reader of secrets: a FIFO is refused at once (not
    /// waited on in open()), a key others may read is refused with the chmod to run.
    #[test]
    fn a_tls_key_that_is_a_fifo_or_readable_by_others_is_refused_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo.key");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(load_key(&fifo).err().map(|e| e.to_string())));
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("a FIFO as the TLS key hung")
            .expect("refused");
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        let open = d.path().join("open.key");
        std::fs::write(&open, b"-----BEGIN PRIVATE KEY-----\n").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let Err(e) = load_key(&open) else {
            panic!("a key others may read was accepted")
        };
        let e = e.to_string();
        assert!(e.contains("(mode 0644): run chmod 600"), "{e}");
    }
}
