//! The TLS side: a rustls server config from PEM files that asks every client for a certificate
//! and accepts only those a given CA signed (mutual TLS, as stenographer's stenoread uses).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// Why TLS could not be set up; each names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The private key file is not private, or unreadable.
    #[error(transparent)]
    Key(#[from] sys::SecretFileError),
    #[error("{}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {what}", path.display())]
    Pem { path: PathBuf, what: String },
    #[error("{0}")]
    Config(String),
}

/// A server config with the certificate chain of `cert`, the private key of `key` (a file that
/// group or others may read is refused) and client authentication against the CA
/// certificates of `client_ca`: a client without a certificate, or with one no such CA signed,
/// fails the handshake. HTTP/1.1 is offered by ALPN.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: &Path,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key_path = key;
    let chain = certificates(cert)?;
    let key = private_key(key_path)?;
    let mut roots = RootCertStore::empty();
    for ca in certificates(client_ca)? {
        roots.add(ca).map_err(|e| TlsError::Pem {
            path: client_ca.to_path_buf(),
            what: format!("not a usable CA certificate: {e}"),
        })?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::Pem {
            path: client_ca.to_path_buf(),
            what: format!("cannot verify clients with it: {e}"),
        })?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| {
            TlsError::Config(format!(
                "{} and {}: {e} (is the key the certificate's?)",
                cert.display(),
                key_path.display()
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client config for a `ringcap serve` (another sensor): the server must show a certificate
/// signed by a CA of `ca` (for the name or address the client asked for), and the client shows
/// `cert` with the private key of `key` (refused if group or others may read it).
pub fn client_config(ca: &Path, cert: &Path, key: &Path) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in certificates(ca)? {
        roots.add(c).map_err(|e| TlsError::Pem {
            path: ca.to_path_buf(),
            what: format!("not a usable CA certificate: {e}"),
        })?;
    }
    let chain = certificates(cert)?;
    let private = private_key(key)?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, private)
        .map_err(|e| {
            TlsError::Config(format!(
                "{} and {}: {e} (is the key the certificate's?)",
                cert.display(),
                key.display()
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Every certificate of a PEM file (at least one).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|error| TlsError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let pem_err = |what: String| TlsError::Pem {
        path: path.to_path_buf(),
        what,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(pem_err(
            "no certificate in it (PEM, -----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1), which must be private.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = sys::read_private_file(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Pem {
        path: path.to_path_buf(),
        what: format!("no usable private key in it (PEM, -----BEGIN PRIVATE KEY-----): {e}"),
    })
}
