//! TLS for both protocols: one certificate chain and private key (PEM),
//! served with rustls and the `ring` provider.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use pgwire::tokio::tokio_rustls::rustls;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};

/// A server's certificate chain and private key, both PEM. `Debug` never
/// shows the key.
#[derive(Clone)]
pub struct TlsIdentity {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("cert", &format_args!("{} bytes of PEM", self.cert.len()))
            .field("key", &"<redacted>")
            .finish()
    }
}

impl TlsIdentity {
    /// A certificate chain and its private key, checked now: the first
    /// certificate must be the key's, or this fails.
    pub fn from_pem(cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Result<Self> {
        let identity = Self {
            cert: cert.into(),
            key: key.into(),
        };
        identity.rustls_config(Vec::new())?;
        Ok(identity)
    }

    /// Reads the PEM files `cert` and `key`; errors name the file.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self> {
        let read = |path: &Path, what: &str| {
            std::fs::read(path).map_err(|e| {
                Error::invalid_input(format!(
                    "cannot read the TLS {what} {}: {e}",
                    path.display()
                ))
            })
        };
        let identity = Self {
            cert: read(cert, "certificate")?,
            key: read(key, "key")?,
        };
        identity.rustls_config(Vec::new()).map_err(|e| {
            Error::invalid_input(format!("{} and {}: {e}", cert.display(), key.display()))
        })?;
        Ok(identity)
    }

    /// The Flight SQL (tonic) server's TLS settings.
    pub(super) fn tonic(&self) -> tonic::transport::ServerTlsConfig {
        install_ring_provider();
        tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(&self.cert, &self.key))
    }

    /// The Postgres server's TLS acceptor (ALPN `postgresql` for clients
    /// that start TLS directly).
    pub(super) fn acceptor(&self) -> Result<pgwire::tokio::TlsAcceptor> {
        let config = self.rustls_config(vec![b"postgresql".to_vec()])?;
        Ok(pgwire::tokio::TlsAcceptor::from(Arc::new(config)))
    }

    fn rustls_config(&self, alpn: Vec<Vec<u8>>) -> Result<rustls::ServerConfig> {
        let bad = |what: &str, e: &dyn fmt::Display| {
            Error::invalid_input(format!("invalid TLS {what}: {e}"))
        };
        let chain = CertificateDer::pem_slice_iter(&self.cert)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad("certificate", &e))?;
        if chain.is_empty() {
            return Err(bad("certificate", &"no CERTIFICATE block in the PEM"));
        }
        // The key's own error would print nothing of it, but say only
        // what kind of problem it is.
        let key = PrivateKeyDer::from_pem_slice(&self.key)
            .map_err(|_| bad("key", &"no PKCS#8, PKCS#1 or SEC1 private key in the PEM"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("settings", &e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad("certificate or key", &e))?;
        config.alpn_protocols = alpn;
        Ok(config)
    }
}

/// tonic builds its rustls settings with the process's default crypto
/// provider, which this build (ring and aws-lc-rs both linked) cannot pick
/// by itself: installs ring's unless the process chose one already.
fn install_ring_provider() {
    if CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_pem_is_named_and_the_key_never_shown() {
        let err = TlsIdentity::from_pem("not a certificate", "secret-key-text").unwrap_err();
        assert!(err.to_string().contains("invalid TLS certificate"), "{err}");
        let err = TlsIdentity::from_files(Path::new("/nonexistent/cert.pem"), Path::new("k"))
            .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
        let identity = TlsIdentity {
            cert: b"c".to_vec(),
            key: b"secret-key-text".to_vec(),
        };
        assert!(!format!("{identity:?}").contains("secret"));
    }
}
