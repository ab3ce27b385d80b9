//! One raw connection to a backend server: the client side of the
//! handshake, then frames in and out.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use super::link::{Dialer, HostRead, HostWrite, TcpDialer};
use crate::protocol::packets::{parse_err, parse_ok, ERR_HEADER, OK_HEADER};
use crate::protocol::{FrameReader, FrameWriter};
use mysql_common::constants::{CapabilityFlags, Command, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
use mysql_common::proto::{MyDeserialize, MySerialize};
use mysql_common::scramble::scramble_native;

/// Capability flags every backend connection uses. `CLIENT_LOCAL_FILES` is
/// always on: the proxy relays a server's request for a file only for a
/// `LOAD DATA LOCAL INFILE` of a client that enabled it, for the file the
/// statement names (`engine::relay`), and refuses any other.
const BASE_CAPABILITIES: CapabilityFlags = CapabilityFlags::CLIENT_LONG_PASSWORD
    .union(CapabilityFlags::CLIENT_LOCAL_FILES)
    .union(CapabilityFlags::CLIENT_LONG_FLAG)
    .union(CapabilityFlags::CLIENT_PROTOCOL_41)
    .union(CapabilityFlags::CLIENT_TRANSACTIONS)
    .union(CapabilityFlags::CLIENT_SECURE_CONNECTION)
    .union(CapabilityFlags::CLIENT_PLUGIN_AUTH)
    .union(CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)
    .union(CapabilityFlags::CLIENT_PS_MULTI_RESULTS);

/// Client capabilities that change how responses are framed; a backend
/// connection must have exactly the client's set of them.
pub const FRAMING_CAPABILITIES: CapabilityFlags = CapabilityFlags::CLIENT_DEPRECATE_EOF
    .union(CapabilityFlags::CLIENT_FOUND_ROWS)
    .union(CapabilityFlags::CLIENT_MULTI_RESULTS)
    .union(CapabilityFlags::CLIENT_SESSION_TRACK);

/// What a backend connection must share with the client it serves: the
/// framing capabilities and the handshake collation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnKey {
    /// The framing capability bits (a subset of [`FRAMING_CAPABILITIES`]).
    pub framing: CapabilityFlags,
    /// Collation id sent in the handshake.
    pub collation: u8,
}

/// Why a backend connection could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// TCP connect or handshake did not finish in time.
    #[error("connect timed out after {0:?}")]
    ConnectTimeout(Duration),
    /// A socket error.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The server refused the backend account.
    #[error("server refused login: {code} {message}")]
    Auth {
        /// MySQL error code.
        code: u16,
        /// Server message.
        message: String,
    },
    /// The server spoke something we cannot follow.
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// The lowest version a backend reported in its handshake, as MariaDB
/// compares versions in `/*!NNNNN` comments (10.11.19 is 101119); 0 until a
/// backend connection was made.
static LOWEST_BACKEND_VERSION: AtomicU32 = AtomicU32::new(0);

/// The lowest version the backends reported (10.11.19 is 101119), once a
/// backend connection was made.
pub fn backend_version() -> Option<u32> {
    match LOWEST_BACKEND_VERSION.load(Ordering::Relaxed) {
        0 => None,
        version => Some(version),
    }
}

/// Whether the last backend login's OK had SERVER_STATUS_NO_BACKSLASH_ESCAPES:
/// the servers' default `sql_mode` has NO_BACKSLASH_ESCAPES.
static DEFAULT_NO_BACKSLASH_ESCAPES: AtomicBool = AtomicBool::new(false);

/// Whether a fresh session on the backends has NO_BACKSLASH_ESCAPES in its
/// `sql_mode` (as the last backend login reported it).
pub fn backend_default_no_backslash_escapes() -> bool {
    DEFAULT_NO_BACKSLASH_ESCAPES.load(Ordering::Relaxed)
}

pub use crate::router::plan::version_number;

/// A logged-in connection to one backend server.
pub struct BackendConn {
    /// Frames from the server.
    pub reader: FrameReader<HostRead>,
    /// Frames to the server.
    pub writer: FrameWriter<HostWrite>,
    /// What this connection was opened for.
    pub key: ConnKey,
    /// Fingerprint of the session settings applied to it (0 = none).
    pub settings_fingerprint: u64,
    /// The `max_statement_time` the proxy set on it, in milliseconds
    /// (0: the server's default, as after login or a reset).
    pub statement_timeout_ms: u64,
    /// The server's id of this connection (its handshake's connection id,
    /// what `KILL` takes).
    pub thread_id: u32,
    /// A `KILL QUERY` was aimed at it: it may still arrive, so the
    /// connection never goes back to the pool.
    pub kill_aimed: bool,
    /// The statements kept prepared on this connection.
    pub statements: Box<super::statements::StatementCache>,
}

impl BackendConn {
    /// Connects to `addr` over TCP and logs in as `user`, with the framing
    /// and collation of `key`.
    pub async fn connect(
        addr: &str,
        user: &str,
        password: &str,
        key: ConnKey,
        timeout: Duration,
    ) -> Result<BackendConn, BackendError> {
        Self::connect_via(&TcpDialer, addr, user, password, key, timeout).await
    }

    /// [`BackendConn::connect`] through `dialer` (the engine's pools and
    /// control connections: TCP, or a test's fake hosts).
    pub async fn connect_via(
        dialer: &dyn Dialer,
        addr: &str,
        user: &str,
        password: &str,
        key: ConnKey,
        timeout: Duration,
    ) -> Result<BackendConn, BackendError> {
        tokio::time::timeout(
            timeout,
            Self::connect_inner(dialer, addr, user, password, key),
        )
        .await
        .map_err(|_| BackendError::ConnectTimeout(timeout))?
    }

    async fn connect_inner(
        dialer: &dyn Dialer,
        addr: &str,
        user: &str,
        password: &str,
        key: ConnKey,
    ) -> Result<BackendConn, BackendError> {
        let (read_half, write_half) = dialer.dial(addr).await?.split();
        let mut reader = FrameReader::new(read_half);
        let mut writer = FrameWriter::new(write_half);

        let (seq, payload) = reader.next_packet().await?;
        if payload.first() == Some(&ERR_HEADER) {
            return Err(refusal(&payload));
        }
        let handshake = HandshakePacket::deserialize((), &mut ParseBuf(&payload))
            .map_err(|e| BackendError::Protocol(format!("bad handshake: {e}")))?;
        let version = String::from_utf8_lossy(handshake.server_version_ref());
        if let Some(version) = version_number(&version) {
            let _ =
                LOWEST_BACKEND_VERSION.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    (v == 0 || version < v).then_some(version)
                });
        }
        let thread_id = handshake.connection_id();
        let capabilities = (BASE_CAPABILITIES | key.framing) & handshake.capabilities();
        let nonce = handshake.nonce();
        let scramble = scramble_native(&nonce, password.as_bytes());
        let response = HandshakeResponse::new(
            scramble.as_ref().map(|s| s.as_slice()),
            handshake.server_version_parsed().unwrap_or((10, 11, 0)),
            Some(user.as_bytes()),
            None::<&[u8]>,
            Some(AuthPlugin::MysqlNativePassword),
            capabilities,
            None,
            16 * 1024 * 1024,
        );
        let mut body = Vec::with_capacity(128);
        response.serialize(&mut body);
        // The collation byte sits after capabilities (4) and max packet (4).
        if let Some(byte) = body.get_mut(8) {
            *byte = key.collation;
        }
        let next = writer.write_packet(seq.wrapping_add(1), &body).await?;
        writer.flush().await?;
        let _ = next;

        loop {
            let (seq, payload) = reader.next_packet().await?;
            match payload.first() {
                Some(&OK_HEADER) => {
                    if let Some(ok) = parse_ok(&payload) {
                        DEFAULT_NO_BACKSLASH_ESCAPES.store(
                            ok.status
                                .contains(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES),
                            Ordering::Relaxed,
                        );
                    }
                    break;
                }
                Some(&ERR_HEADER) => return Err(refusal(&payload)),
                Some(0xFE) => {
                    let rest = &payload[1..];
                    let plugin_end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
                    let plugin = &rest[..plugin_end];
                    if plugin != b"mysql_native_password" {
                        return Err(BackendError::Protocol(format!(
                            "backend asks for auth plugin {}; shardgate's backend account must use mysql_native_password",
                            String::from_utf8_lossy(plugin)
                        )));
                    }
                    let data = rest.get(plugin_end + 1..).unwrap_or_default();
                    let nonce = data.strip_suffix(&[0]).unwrap_or(data);
                    let answer = scramble_native(nonce, password.as_bytes())
                        .map(|s| s.to_vec())
                        .unwrap_or_default();
                    writer.write_packet(seq.wrapping_add(1), &answer).await?;
                    writer.flush().await?;
                }
                _ => {
                    return Err(BackendError::Protocol(
                        "unexpected packet during login".to_owned(),
                    ))
                }
            }
        }
        Ok(BackendConn {
            reader,
            writer,
            key,
            settings_fingerprint: 0,
            statement_timeout_ms: 0,
            thread_id,
            kill_aimed: false,
            statements: Default::default(),
        })
    }

    /// Sends a command packet (sequence id 0) and flushes it.
    pub async fn send_command(&mut self, command: Command, body: &[u8]) -> io::Result<()> {
        match command {
            Command::COM_RESET_CONNECTION | Command::COM_CHANGE_USER => {
                self.statements.forget_all()
            }
            Command::COM_INIT_DB => self.statements.close_all(),
            Command::COM_STMT_PREPARE => self.statements.preparing(),
            Command::COM_STMT_CLOSE => {
                if let Some(id) = body.first_chunk::<4>() {
                    self.statements.closed(u32::from_le_bytes(*id));
                }
            }
            _ => {}
        }
        self.writer.write_command(command as u8, body).await?;
        self.writer.flush().await
    }

    /// Runs a statement whose answer is a single OK or ERR (SET, BEGIN,
    /// COMMIT, COM_RESET_CONNECTION ...); returns the payload of that answer.
    pub async fn simple_command(&mut self, command: Command, body: &[u8]) -> io::Result<Vec<u8>> {
        self.send_command(command, body).await?;
        let (_, payload) = self.reader.next_packet().await?;
        Ok(payload)
    }
}

fn refusal(payload: &[u8]) -> BackendError {
    match parse_err(payload) {
        Some((code, _, message)) => BackendError::Auth { code, message },
        None => BackendError::Protocol("malformed error packet".to_owned()),
    }
}
