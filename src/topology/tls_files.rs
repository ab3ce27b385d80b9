//! The certificate and key files of the config's `tls` section: read,
//! parsed from PEM and checked to fit each other. Used by the config
//! validation and by the client listener's TLS setup.

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

/// Reads the PEM certificate chain in `path` (leaf first).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, "certificate")?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificate file `{}`: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "certificate file `{}` holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

/// Reads the first PEM private key in `path`: PKCS#8 (`PRIVATE KEY`),
/// PKCS#1 (`RSA PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path, "key")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "key file `{}` holds no PEM private key (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)",
            path.display()
        ),
        other => format!("key file `{}`: {other}", path.display()),
    })
}

/// Builds the rustls server configuration (ring provider, TLS 1.2 and 1.3);
/// fails when the key does not fit the certificate or is of an unsupported
/// kind.
pub fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, String> {
    ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                "the private key does not belong to the certificate".to_owned()
            }
            other => format!("certificate or key not usable: {other}"),
        })
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    if path.as_os_str().is_empty() {
        return Err(format!("no {what} file given"));
    }
    std::fs::read(path).map_err(|e| format!("cannot read {what} file `{}`: {e}", path.display()))
}
