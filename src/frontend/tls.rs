//! TLS towards clients: the certificate and key named in the config's `tls`
//! section, loaded once, and the upgrade of a client connection after its
//! SSLRequest.
//!
//! The MySQL protocol starts in clear text: the server's greeting advertises
//! CLIENT_SSL, a client that wants TLS answers with a 32-byte SSLRequest
//! (sequence 1), both sides run the TLS handshake on the same socket, and
//! the client's full HandshakeResponse follows inside TLS (sequence 2).

use std::io;
use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::protocol::frame::PacketTooLarge;
use crate::topology::config::TlsConfig;
pub use crate::topology::tls_files::{load_certs, load_key, server_config};

/// TLS as the listener offers it: the acceptor built from the config's
/// certificate and key, and whether clients must use it.
#[derive(Clone)]
pub struct TlsSettings {
    acceptor: TlsAcceptor,
    /// Whether a client that does not ask for TLS is refused.
    pub require: bool,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("require", &self.require)
            .finish_non_exhaustive()
    }
}

impl TlsSettings {
    /// Loads the certificate chain and key named in `config` (an error says
    /// which file is wrong and why).
    pub fn load(config: &TlsConfig) -> Result<TlsSettings, String> {
        let certs = load_certs(Path::new(&config.cert))?;
        let key = load_key(Path::new(&config.key))?;
        let server = server_config(certs, key)?;
        Ok(TlsSettings {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            require: config.require,
        })
    }

    /// Runs the server side of the TLS handshake on `stream`, which must
    /// have nothing buffered past the client's SSLRequest.
    pub async fn accept(&self, stream: TcpStream) -> io::Result<TlsStream<TcpStream>> {
        self.acceptor.accept(stream).await
    }
}

/// Reads exactly one packet (header and payload, nothing more) off the raw
/// socket: after an SSLRequest the client's TLS handshake follows at once,
/// and those bytes must stay in the socket for the TLS acceptor. A packet
/// over `max_packet` bytes is refused on its header ([`PacketTooLarge`]).
pub async fn read_packet_exact(
    stream: &mut TcpStream,
    max_packet: usize,
) -> io::Result<(u8, Vec<u8>)> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if len > max_packet {
        return Err(PacketTooLarge {
            seq: header[3],
            declared: len,
            limit: max_packet,
        }
        .into());
    }
    if len == crate::protocol::frame::MAX_FRAME_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "handshake response longer than one frame",
        ));
    }
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await?;
    Ok((header[3], payload))
}

/// Writes one packet straight to the raw socket (before any split).
pub async fn write_packet_raw(stream: &mut TcpStream, seq: u8, payload: &[u8]) -> io::Result<()> {
    let len = payload.len() as u32;
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&[len as u8, (len >> 8) as u8, (len >> 16) as u8, seq]);
    frame.extend_from_slice(payload);
    stream.write_all(&frame).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shardgate-tls-unit-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn self_signed() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn loads_pkcs8_and_rejects_bad_files() {
        let dir = temp_dir("pkcs8");
        let (cert, key) = self_signed();
        std::fs::write(dir.join("cert.pem"), &cert).unwrap();
        std::fs::write(dir.join("key.pem"), &key).unwrap();
        let config = TlsConfig {
            cert: dir.join("cert.pem").display().to_string(),
            key: dir.join("key.pem").display().to_string(),
            require: true,
        };
        let settings = TlsSettings::load(&config).unwrap();
        assert!(settings.require);

        // Missing file, a key where the certificate should be, and the other way.
        let missing = load_certs(&dir.join("nope.pem")).unwrap_err();
        assert!(
            missing.contains("cannot read certificate file"),
            "{missing}"
        );
        let no_cert = load_certs(&dir.join("key.pem")).unwrap_err();
        assert!(no_cert.contains("holds no PEM certificate"), "{no_cert}");
        let no_key = load_key(&dir.join("cert.pem")).unwrap_err();
        assert!(no_key.contains("holds no PEM private key"), "{no_key}");

        // A key of another certificate.
        let (_, other_key) = self_signed();
        std::fs::write(dir.join("other.pem"), other_key).unwrap();
        let mismatch = TlsSettings::load(&TlsConfig {
            key: dir.join("other.pem").display().to_string(),
            ..config
        })
        .unwrap_err();
        assert!(mismatch.contains("does not belong"), "{mismatch}");
        std::fs::remove_dir_all(dir).ok();
    }

    /// The config's `tls` section is checked at load, with the line.
    #[test]
    fn config_validation_reports_tls_lines() {
        use crate::topology::Topology;
        let dir = temp_dir("config");
        let (cert, key) = self_signed();
        std::fs::write(dir.join("cert.pem"), &cert).unwrap();
        std::fs::write(dir.join("key.pem"), &key).unwrap();
        let base = include_str!("../../config/shardgate.yaml");
        let base_lines = base.lines().count();
        let with_tls = |cert: &str, key: &str| {
            format!("{base}\ntls:\n  cert: {cert}\n  key: {key}\n  require: true\n")
        };
        let good = with_tls(
            &dir.join("cert.pem").display().to_string(),
            &dir.join("key.pem").display().to_string(),
        );
        let topology = Topology::from_yaml_str(&good, "good.yaml").unwrap();
        let tls = topology.config.tls.as_ref().unwrap();
        assert!(tls.require);
        assert!(TlsSettings::load(tls).is_ok());

        let bad = with_tls(
            &dir.join("missing.pem").display().to_string(),
            &dir.join("cert.pem").display().to_string(),
        );
        let errors = Topology::from_yaml_str(&bad, "bad.yaml").unwrap_err().0;
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(errors[0].line, base_lines + 3, "{errors:?}");
        assert!(errors[0]
            .message
            .starts_with("tls cert: cannot read certificate file"));
        assert_eq!(errors[1].line, base_lines + 4, "{errors:?}");
        assert!(errors[1].message.contains("holds no PEM private key"));

        let missing = format!("{base}\ntls: {{ require: true }}\n");
        let errors = Topology::from_yaml_str(&missing, "missing.yaml")
            .unwrap_err()
            .0;
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors.iter().all(|e| e.line == base_lines + 2),
            "{errors:?}"
        );
        assert!(
            errors[0].message.contains("`cert` is missing"),
            "{errors:?}"
        );

        let unknown = format!("{base}\ntls: {{ cert: a, key: b, required: true }}\n");
        let errors = Topology::from_yaml_str(&unknown, "unknown.yaml")
            .unwrap_err()
            .0;
        assert!(errors[0].message.contains("required"), "{errors:?}");
        std::fs::remove_dir_all(dir).ok();
    }

    /// PKCS#1 RSA and SEC1 EC keys, made by the `openssl` CLI when present
    /// (ring cannot generate RSA keys, rcgen writes only PKCS#8).
    #[test]
    fn loads_rsa_and_sec1_keys() {
        let openssl = |args: &[&str]| {
            std::process::Command::new("openssl")
                .args(args)
                .output()
                .is_ok_and(|out| out.status.success())
        };
        if !openssl(&["version"]) {
            eprintln!("openssl CLI not found; skipping");
            return;
        }
        let dir = temp_dir("legacy");
        let path = |name: &str| dir.join(name).display().to_string();
        let (rsa_key, ec_key) = (path("rsa.key"), path("ec.key"));
        let cases = [
            (
                "rsa",
                vec!["genrsa", "-traditional", "-out", &rsa_key, "2048"],
                "RSA PRIVATE KEY",
            ),
            (
                "ec",
                vec![
                    "ecparam",
                    "-name",
                    "prime256v1",
                    "-genkey",
                    "-noout",
                    "-out",
                    &ec_key,
                ],
                "EC PRIVATE KEY",
            ),
        ];
        for (name, genkey, label) in cases {
            assert!(openssl(&genkey), "openssl {genkey:?}");
            let key = path(&format!("{name}.key"));
            let cert = path(&format!("{name}.crt"));
            assert!(openssl(&[
                "req",
                "-new",
                "-x509",
                "-key",
                &key,
                "-out",
                &cert,
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
            ]));
            let text = std::fs::read_to_string(&key).unwrap();
            assert!(text.contains(label), "{name}: {text}");
            TlsSettings::load(&TlsConfig {
                cert,
                key,
                require: false,
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        std::fs::remove_dir_all(dir).ok();
    }
}
