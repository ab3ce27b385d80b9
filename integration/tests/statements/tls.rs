//! TLS towards clients: proxies started in-process from
//! config/shardgate.yaml plus a `tls` section whose certificate (signed by a
//! throwaway CA) the test generates; the stock `mariadb` CLI connects over
//! TLS, verifies the certificate, writes a row by hint and reads it back;
//! with `require: true` a client without TLS is refused; a raw client that
//! pipelines its TLS handshake right behind the SSLRequest, and starts with
//! caching_sha2_password, gets in over TLS.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};

use common::tls_certificates::write_certificates;
use common::*;
use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
use mysql_common::proto::{MyDeserialize, MySerialize};
use mysql_common::scramble::scramble_native;
use shardgate::protocol::{FrameReader, FrameWriter};
use shardgate::topology::Topology;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::rustls;

/// Certificates in a temp dir and two proxies: TLS offered, TLS required.
struct Fixture {
    dir: PathBuf,
    offered: SocketAddr,
    required: SocketAddr,
}

impl Fixture {
    fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("shardgate-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        write_certificates(&dir);
        let offered = start_tls_proxy(&dir, false);
        let required = start_tls_proxy(&dir, true);
        Fixture {
            dir,
            offered,
            required,
        }
    })
}

/// Starts a proxy with the fleet config plus a `tls` section.
fn start_tls_proxy(dir: &Path, require: bool) -> SocketAddr {
    let base = std::fs::read_to_string(config_path()).expect("read config");
    let text = format!(
        "{base}\ntls:\n  cert: {}\n  key: {}\n  require: {require}\n",
        dir.join("server.pem").display(),
        dir.join("server.key").display(),
    );
    let topology = Topology::from_yaml_str(&text, "tls-test.yaml")
        .unwrap_or_else(|e| panic!("config with tls: {e}"));
    start_proxy(topology)
}

/// Runs the stock `mariadb` CLI against `addr` with extra options.
fn cli(addr: SocketAddr, options: &[&str], sql: &str) -> Output {
    mariadb_cli_at(addr, options, sql)
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_connects_over_tls_verifies_the_certificate_and_writes_by_hint() {
    let fixture = fixture();
    let ca = fixture.ca().display().to_string();
    let shard = 2781u32;
    let marker = format!("tls-{}", std::process::id());
    let sql = format!(
        "status; INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('{marker}'); \
         SELECT LAST_INSERT_ID();"
    );
    for addr in [fixture.offered, fixture.required] {
        let output = cli(
            addr,
            &[
                "--ssl",
                &format!("--ssl-ca={ca}"),
                "--ssl-verify-server-cert",
            ],
            &sql,
        );
        let (stdout, stderr) = text(&output);
        assert!(
            output.status.success(),
            "stdout: {stdout}\nstderr: {stderr}"
        );
        assert!(
            stdout.contains("Cipher in use is"),
            "the CLI sees a cipher: {stdout}"
        );
        let id: u64 = stdout
            .lines()
            .last()
            .and_then(|line| line.trim().parse().ok())
            .unwrap_or_else(|| panic!("LAST_INSERT_ID in {stdout}"));
        let decoded = decode(id);
        assert_eq!(decoded.shard, shard);

        // Read back through the proxy, over TLS, by the 64-bit ID.
        let output = cli(
            addr,
            &[
                "--ssl",
                &format!("--ssl-ca={ca}"),
                "--ssl-verify-server-cert",
            ],
            &format!("SELECT data FROM pins WHERE id = {id}"),
        );
        let (stdout, stderr) = text(&output);
        assert!(output.status.success(), "{stderr}");
        assert_eq!(stdout.trim(), marker);

        // And on the host that owns the shard, directly.
        let on_host = row_on_host(main_master_port(shard), "pins", shard, decoded.local_id).await;
        assert_eq!(on_host.as_deref(), Some(marker.as_str()));
    }
}

#[tokio::test]
async fn a_client_without_tls_is_refused_when_tls_is_required_and_served_when_offered() {
    let fixture = fixture();
    for skip in ["--skip-ssl", "--ssl=0"] {
        let output = cli(fixture.required, &[skip], "SELECT 1");
        let (stdout, stderr) = text(&output);
        assert!(!output.status.success(), "{skip}: refused, got {stdout}");
        assert!(
            stderr.contains("ERROR 3159")
                && stderr.contains(
                    "Connections using insecure transport are prohibited while --require_secure_transport=ON."
                ),
            "{skip}: {stderr}"
        );
    }
    // Where TLS is only offered, a plain client is served as before.
    let output = cli(fixture.offered, &["--skip-ssl"], "status; SELECT 41 + 1");
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("Not in use"), "{stdout}");
    assert_eq!(stdout.lines().last().map(str::trim), Some("42"));
    // A wrong password over TLS is still a 1045 (the refusal above comes
    // before any password check; here the check runs).
    let ca = fixture.ca().display().to_string();
    let output = Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &fixture.required.port().to_string(),
            "-u",
            APP_USER,
            "-pwrong",
            &format!("--ssl-ca={ca}"),
            "-e",
            "SELECT 1",
        ])
        .output()
        .expect("run the mariadb CLI");
    let (_, stderr) = text(&output);
    assert!(stderr.contains("ERROR 1045"), "{stderr}");
}

/// A raw client: greeting (with CLIENT_SSL), SSLRequest, and the TLS
/// handshake written at once behind it; then a caching_sha2_password
/// HandshakeResponse over TLS (sequence 2), the auth switch to
/// mysql_native_password, OK, and a statement.
#[tokio::test]
async fn a_caching_sha2_client_gets_in_over_tls() {
    let fixture = fixture();
    let mut stream = TcpStream::connect(fixture.required).await.unwrap();
    let (seq, greeting) = read_packet(&mut stream).await;
    assert_eq!(seq, 0);
    let handshake = HandshakePacket::deserialize((), &mut ParseBuf(&greeting)).unwrap();
    assert!(handshake
        .capabilities()
        .contains(CapabilityFlags::CLIENT_SSL));
    let caps = CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
        | CapabilityFlags::CLIENT_SSL;
    let mut ssl_request = Vec::with_capacity(32);
    ssl_request.extend_from_slice(&caps.bits().to_le_bytes());
    ssl_request.extend_from_slice(&(16u32 * 1024 * 1024).to_le_bytes());
    ssl_request.push(45);
    ssl_request.extend_from_slice(&[0u8; 23]);
    let mut frame = vec![32, 0, 0, 1];
    frame.extend_from_slice(&ssl_request);
    stream.write_all(&frame).await.unwrap();

    let mut roots = rustls::RootCertStore::empty();
    let ca_pem = std::fs::read(fixture.ca()).unwrap();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&ca_pem) {
        let cert: rustls::pki_types::CertificateDer = cert.unwrap();
        roots.add(cert).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector
        .connect(name, stream)
        .await
        .expect("TLS handshake");
    let (r, w) = tokio::io::split(tls);
    let mut reader = FrameReader::new(r);
    let mut writer = FrameWriter::new(w);

    let response = HandshakeResponse::new(
        Some(vec![7u8; 32]),
        (8, 0, 36),
        Some(&b"app"[..]),
        None::<&[u8]>,
        Some(AuthPlugin::CachingSha2Password),
        caps,
        None,
        16 * 1024 * 1024,
    );
    let mut body = Vec::new();
    response.serialize(&mut body);
    writer.write_packet(2, &body).await.unwrap();
    writer.flush().await.unwrap();
    let (seq, switch) = reader.next_packet().await.unwrap();
    assert_eq!(seq, 3);
    assert_eq!(switch[0], 0xFE, "auth switch request: {switch:?}");
    let rest = &switch[1..];
    let name_end = rest.iter().position(|b| *b == 0).unwrap();
    assert_eq!(&rest[..name_end], b"mysql_native_password");
    let nonce = rest[name_end + 1..].strip_suffix(&[0]).unwrap();
    writer
        .write_packet(seq + 1, &scramble_native(nonce, b"app").unwrap())
        .await
        .unwrap();
    writer.flush().await.unwrap();
    let (_, ok) = reader.next_packet().await.unwrap();
    assert_eq!(ok[0], 0x00, "login accepted over TLS: {ok:?}");

    writer.write_packet(0, b"\x03SELECT 6 * 7").await.unwrap();
    writer.flush().await.unwrap();
    let mut packets = Vec::new();
    loop {
        let (_, packet) = reader.next_packet().await.unwrap();
        let last = packet[0] == 0xFE && packet.len() < 0xFF_FFFF && packets.len() >= 2;
        packets.push(packet);
        if last || packets[0][0] == 0xFF {
            break;
        }
    }
    assert_eq!(packets[0], [1], "one column: {packets:?}");
    assert_eq!(packets[2], b"\x0242", "the row: {packets:?}");
}

async fn read_packet(stream: &mut TcpStream) -> (u8, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await.unwrap();
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.unwrap();
    (header[3], payload)
}
