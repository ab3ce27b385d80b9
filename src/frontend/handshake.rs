//! The server side of the MySQL handshake: HandshakeV10 out ([`greet`]),
//! the client's HandshakeResponse in, `mysql_native_password` checked
//! against the config's client accounts (other plugins get an auth switch)
//! ([`login`]). With TLS configured the greeting offers CLIENT_SSL and the
//! session runner upgrades the socket between the two (see [`super::tls`]).

use std::future::Future;
use std::io;
use std::time::Duration;

use mysql_common::constants::{CapabilityFlags, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse};
use mysql_common::proto::{MyDeserialize, MySerialize};
use mysql_common::scramble::scramble_native;
use rand::Rng;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::error::ClientError;
use crate::protocol::frame::PacketTooLarge;
use crate::protocol::packets::{err_packet, ok_packet, UTF8MB4_GENERAL_CI};
use crate::protocol::{FrameReader, FrameWriter};
use crate::topology::config::{Config, LimitsConfig, UserConfig};

/// Version string of the admin port. (The client port's greeting carries
/// the backends' version marked as the proxy's: `Engine::server_info`.)
/// The `5.5.5-` prefix is how MariaDB servers tell MySQL clients they are
/// MariaDB; drivers pick dialect quirks from it.
pub const SERVER_VERSION: &str = "5.5.5-10.11.0-MariaDB-shardgate";

/// Capabilities the proxy offers clients.
pub const SERVER_CAPABILITIES: CapabilityFlags = CapabilityFlags::CLIENT_LONG_PASSWORD
    .union(CapabilityFlags::CLIENT_FOUND_ROWS)
    .union(CapabilityFlags::CLIENT_LONG_FLAG)
    .union(CapabilityFlags::CLIENT_CONNECT_WITH_DB)
    .union(CapabilityFlags::CLIENT_PROTOCOL_41)
    .union(CapabilityFlags::CLIENT_TRANSACTIONS)
    .union(CapabilityFlags::CLIENT_SECURE_CONNECTION)
    .union(CapabilityFlags::CLIENT_MULTI_STATEMENTS)
    .union(CapabilityFlags::CLIENT_MULTI_RESULTS)
    .union(CapabilityFlags::CLIENT_PS_MULTI_RESULTS)
    .union(CapabilityFlags::CLIENT_PLUGIN_AUTH)
    .union(CapabilityFlags::CLIENT_CONNECT_ATTRS)
    .union(CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)
    .union(CapabilityFlags::CLIENT_DEPRECATE_EOF)
    .union(CapabilityFlags::CLIENT_LOCAL_FILES);

const NATIVE_PLUGIN: &[u8] = b"mysql_native_password";

/// Length of an SSLRequest payload: capabilities, max packet size,
/// collation and 23 filler bytes (a HandshakeResponse is always longer).
const SSL_REQUEST_LEN: usize = 32;

/// MySQL's ER_SECURE_TRANSPORT_REQUIRED.
const SECURE_TRANSPORT_REQUIRED: u16 = 3159;

/// Room a client packet gets beyond `limits.max_allowed_packet`: the
/// command byte and the fixed header of any command (statement id,
/// parameter number ...), so that `max_allowed_packet` bytes of data fit.
pub const COMMAND_HEADER_ALLOWANCE: usize = 1024;

/// MySQL's ER_CON_COUNT_ERROR.
const TOO_MANY_CONNECTIONS: u16 = 1040;

/// The bounds on a connection that has not logged in yet (the config's
/// `limits`): one deadline for the whole login, counted from the accept
/// (TLS handshake, handshake response, auth switch and the final OK
/// included; none when `handshake_timeout_ms` is 0), and the size of a
/// login packet.
#[derive(Debug, Clone, Copy)]
pub struct LoginBounds {
    /// When the login must be over.
    pub deadline: Option<Instant>,
    timeout: Duration,
    /// Largest login packet (handshake response, auth switch answer).
    pub max_login_packet: usize,
    /// Largest client packet once logged in (`max_allowed_packet` and
    /// [`COMMAND_HEADER_ALLOWANCE`]).
    pub max_packet: usize,
}

impl LoginBounds {
    /// The bounds of a connection accepted now.
    pub fn new(limits: &LimitsConfig) -> Self {
        let timeout = Duration::from_millis(limits.handshake_timeout_ms);
        Self {
            deadline: (limits.handshake_timeout_ms > 0).then(|| Instant::now() + timeout),
            timeout,
            max_login_packet: usize::try_from(limits.max_login_packet).unwrap_or(usize::MAX),
            max_packet: usize::try_from(limits.max_allowed_packet)
                .unwrap_or(usize::MAX)
                .saturating_add(COMMAND_HEADER_ALLOWANCE),
        }
    }

    /// These bounds with a login deadline no later than `limit` from now
    /// (also when `handshake_timeout_ms` is off).
    pub fn at_most(mut self, limit: Duration) -> Self {
        if self.deadline.is_none() || self.timeout > limit {
            self.timeout = limit;
            self.deadline = Some(Instant::now() + limit);
        }
        self
    }

    /// Runs one step of the login; past the deadline it is dropped and the
    /// result is a `TimedOut` error (the caller closes the connection).
    pub async fn within<T, E, F>(&self, step: F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<io::Error>,
    {
        let Some(deadline) = self.deadline else {
            return step.await;
        };
        match tokio::time::timeout_at(deadline, step).await {
            Ok(result) => result,
            Err(_) => Err(self.timed_out().into()),
        }
    }

    /// The error of a login that went past the deadline.
    pub fn timed_out(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "login not completed within {} ms (limits.handshake_timeout_ms)",
                self.timeout.as_millis()
            ),
        )
    }
}

/// Answers a connection over the `limit` of connections with MySQL's 1040
/// in place of the greeting, without reading anything, and closes it. The
/// packet is small enough for the socket's send buffer: a client that does
/// not read cannot hold the caller.
pub fn refuse_too_many_connections(stream: TcpStream, limit: usize) {
    let payload = err_packet(
        TOO_MANY_CONNECTIONS,
        "08004",
        &format!("Too many connections (shardgate serves at most {limit} at once)"),
    );
    let mut frame = Vec::with_capacity(4 + payload.len());
    let len = payload.len() as u32;
    frame.extend_from_slice(&[len as u8, (len >> 8) as u8, (len >> 16) as u8, 0]);
    frame.extend_from_slice(&payload);
    let _ = stream.try_write(&frame);
}

/// The greeting a client was sent, and where its login stands.
#[derive(Debug, Clone)]
pub struct Greeting {
    nonce: [u8; 20],
    tls_offered: bool,
    /// The client's answer to the greeting when the caller already read it
    /// (a TLS listener reads it off the raw socket to look for an
    /// SSLRequest): its sequence id and payload.
    pub first_packet: Option<(u8, Vec<u8>)>,
    /// Whether the connection runs over TLS.
    pub secure: bool,
}

impl Greeting {
    /// The HandshakeV10 greeting for a new connection (payload to send at
    /// sequence 0) with server version `version`; `offer_tls` adds
    /// CLIENT_SSL.
    pub fn new(connection_id: u32, offer_tls: bool, version: &str) -> (Greeting, Vec<u8>) {
        let nonce = new_nonce();
        let mut scramble_2 = nonce[8..].to_vec();
        scramble_2.push(0);
        let mut scramble_1 = [0u8; 8];
        scramble_1.copy_from_slice(&nonce[..8]);
        let mut capabilities = SERVER_CAPABILITIES;
        if offer_tls {
            capabilities |= CapabilityFlags::CLIENT_SSL;
        }
        let handshake = HandshakePacket::new(
            10,
            version.as_bytes(),
            connection_id,
            scramble_1,
            Some(scramble_2),
            capabilities,
            UTF8MB4_GENERAL_CI as u8,
            StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            Some(NATIVE_PLUGIN),
        );
        let mut body = Vec::with_capacity(128);
        handshake.serialize(&mut body);
        let greeting = Greeting {
            nonce,
            tls_offered: offer_tls,
            first_packet: None,
            secure: false,
        };
        (greeting, body)
    }
}

/// Sends the greeting for a new connection through `writer`.
pub async fn greet<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter<W>,
    connection_id: u32,
    offer_tls: bool,
    version: &str,
) -> io::Result<Greeting> {
    let (greeting, body) = Greeting::new(connection_id, offer_tls, version);
    writer.write_packet(0, &body).await?;
    writer.flush().await?;
    Ok(greeting)
}

/// Whether a client's first packet is an SSLRequest (it asks to switch to
/// TLS before sending its credentials).
pub fn is_ssl_request(payload: &[u8]) -> bool {
    payload.len() == SSL_REQUEST_LEN
        && CapabilityFlags::from_bits_truncate(u32::from_le_bytes([
            payload[0], payload[1], payload[2], payload[3],
        ]))
        .contains(CapabilityFlags::CLIENT_SSL)
}

/// The ERR payload for a client that would not use TLS where TLS is
/// required (MySQL's 3159).
pub fn insecure_transport_error() -> Vec<u8> {
    err_packet(
        SECURE_TRANSPORT_REQUIRED,
        "HY000",
        "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
    )
}

/// The accounts one port accepts, and the accounts of the other port (so
/// that someone who logs in on the wrong port is told where to go).
#[derive(Debug, Clone, Default)]
pub struct Accounts {
    /// Accounts allowed on this port.
    pub users: Vec<UserConfig>,
    /// The other port's accounts and the address it listens on.
    pub other_port: Option<(Vec<UserConfig>, String)>,
}

impl Accounts {
    /// The client port's accounts: `config.users`; an admin account is told
    /// to log in on the admin port.
    pub fn client_port(config: &Config) -> Self {
        Self {
            users: config.users.clone(),
            other_port: config
                .admin
                .as_ref()
                .map(|admin| (admin.users.clone(), admin.listen.clone())),
        }
    }

    /// The error for a login that `users` refused: an account of the other
    /// port whose password is right is told where it logs in (MySQL's 1045
    /// either way); anyone else gets the plain access-denied error.
    fn refusal(&self, user: String, nonce: &[u8], auth_data: &[u8]) -> ClientError {
        let using_password = if auth_data.is_empty() { "NO" } else { "YES" };
        match &self.other_port {
            Some((users, addr)) if check_account(users, &user, nonce, auth_data) => {
                // No ClientError variant carries a custom access-denied
                // message; this one carries its own code and text.
                ClientError::Backend {
                    code: ACCESS_DENIED,
                    sql_state: "28000".to_owned(),
                    message: format!(
                        "Access denied for user '{user}' (using password: {using_password}): admin accounts log in on the admin port {addr}, not on the client port"
                    ),
                }
            }
            _ => ClientError::AccessDenied {
                user,
                using_password,
            },
        }
    }
}

/// MySQL's ER_ACCESS_DENIED_ERROR.
const ACCESS_DENIED: u16 = 1045;

/// A client that logged in.
#[derive(Debug, Clone)]
pub struct LoggedIn {
    /// Account name.
    pub user: String,
    /// Capabilities in force (the client's, within ours).
    pub capabilities: CapabilityFlags,
    /// Collation the client asked for.
    pub collation: u8,
    /// Database named in the handshake, if any.
    pub database: Option<String>,
    /// Sequence id for the packet that answers the login (OK or ERR).
    pub next_seq: u8,
    /// The scramble sent in the handshake; COM_CHANGE_USER answers with it.
    pub nonce: [u8; 20],
    /// Whether the client connected over TLS.
    pub secure: bool,
}

/// Why a login failed.
#[derive(Debug)]
pub enum LoginFailure {
    /// The socket failed; nothing more can be sent.
    Io(io::Error),
    /// An error to send to the client at `seq` before closing.
    Refused {
        /// The error.
        error: ClientError,
        /// Sequence id for the ERR packet.
        seq: u8,
    },
}

impl From<io::Error> for LoginFailure {
    fn from(error: io::Error) -> Self {
        LoginFailure::Io(error)
    }
}

/// Reads the client's HandshakeResponse to `greeting` (already sent) and
/// checks its credentials, up to (not including) the final OK, against the
/// accounts allowed on this port.
pub async fn login<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    greeting: Greeting,
    accounts: &Accounts,
) -> Result<LoggedIn, LoginFailure>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Greeting {
        nonce,
        tls_offered,
        first_packet,
        secure,
    } = greeting;
    let (seq, payload) = match first_packet {
        Some(packet) => packet,
        None => read_login_packet(reader).await?,
    };
    let HandshakeFields {
        user,
        capabilities,
        collation,
        database,
        native_auth,
    } = parse_handshake_response(&payload, tls_offered).map_err(|error| LoginFailure::Refused {
        error,
        seq: seq.wrapping_add(1),
    })?;
    let mut seq = seq;
    let auth_data = if let Some(data) = native_auth {
        data
    } else {
        let mut data = nonce.to_vec();
        data.push(0);
        let switch = AuthSwitchRequest::new(NATIVE_PLUGIN, data);
        let mut body = Vec::new();
        switch.serialize(&mut body);
        writer.write_packet(seq.wrapping_add(1), &body).await?;
        writer.flush().await?;
        let (next, answer) = read_login_packet(reader).await?;
        seq = next;
        answer
    };
    let next_seq = seq.wrapping_add(1);
    if !check_account(&accounts.users, &user, &nonce, &auth_data) {
        return Err(LoginFailure::Refused {
            error: accounts.refusal(user, &nonce, &auth_data),
            seq: next_seq,
        });
    }
    Ok(LoggedIn {
        user,
        capabilities,
        collation,
        database,
        next_seq,
        nonce,
        secure,
    })
}

/// The client's next login packet; one over the reader's limit is refused
/// with 1153 (the connection then closes).
async fn read_login_packet<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
) -> Result<(u8, Vec<u8>), LoginFailure> {
    reader
        .next_packet()
        .await
        .map_err(|error| match PacketTooLarge::of(&error) {
            Some(too_large) => LoginFailure::Refused {
                error: ClientError::PacketTooLarge(format!("in the login: {too_large}")),
                seq: too_large.seq.wrapping_add(1),
            },
            None => LoginFailure::Io(error),
        })
}

/// Handles COM_CHANGE_USER (`payload` without the command byte): checks the
/// new account's password (against the handshake's scramble, or after an
/// auth switch for another plugin) and returns the new login. The caller
/// resets the session and answers OK at `next_seq`.
pub async fn change_user<R, W>(
    reader: &mut FrameReader<R>,
    writer: &mut FrameWriter<W>,
    current: &LoggedIn,
    payload: &[u8],
    accounts: &Accounts,
) -> Result<LoggedIn, LoginFailure>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let malformed = || LoginFailure::Refused {
        error: ClientError::UnsupportedCommand("malformed COM_CHANGE_USER".to_owned()),
        seq: 1,
    };
    let (user, rest) = split_nul(payload).ok_or_else(malformed)?;
    let (auth_data, rest) = if current
        .capabilities
        .contains(CapabilityFlags::CLIENT_SECURE_CONNECTION)
    {
        let len = usize::from(*rest.first().ok_or_else(malformed)?);
        let data = rest.get(1..1 + len).ok_or_else(malformed)?;
        (data.to_vec(), &rest[1 + len..])
    } else {
        let (data, rest) = split_nul(rest).ok_or_else(malformed)?;
        (data.to_vec(), rest)
    };
    let (database, rest) = split_nul(rest).unwrap_or((&[], &[]));
    let (collation, rest) = match rest {
        [low, _high, rest @ ..] => (*low, rest),
        _ => (current.collation, rest),
    };
    let plugin = split_nul(rest)
        .map(|(name, _)| name)
        .unwrap_or(NATIVE_PLUGIN);
    let user = String::from_utf8_lossy(user).into_owned();
    let mut seq = 0u8;
    let (nonce, auth_data) = if plugin == NATIVE_PLUGIN || plugin.is_empty() {
        (current.nonce, auth_data)
    } else {
        let nonce = new_nonce();
        let mut data = nonce.to_vec();
        data.push(0);
        let mut body = Vec::new();
        AuthSwitchRequest::new(NATIVE_PLUGIN, data).serialize(&mut body);
        writer.write_packet(1, &body).await?;
        writer.flush().await?;
        let (next, answer) = read_login_packet(reader).await?;
        seq = next;
        (nonce, answer)
    };
    let next_seq = seq.wrapping_add(1);
    if !check_account(&accounts.users, &user, &nonce, &auth_data) {
        return Err(LoginFailure::Refused {
            error: accounts.refusal(user, &nonce, &auth_data),
            seq: next_seq,
        });
    }
    Ok(LoggedIn {
        user,
        capabilities: current.capabilities,
        collation,
        database: (!database.is_empty()).then(|| String::from_utf8_lossy(database).into_owned()),
        next_seq,
        nonce,
        secure: current.secure,
    })
}

fn split_nul(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = bytes.iter().position(|b| *b == 0)?;
    Some((&bytes[..end], &bytes[end + 1..]))
}

/// Sends the OK that completes a login.
pub async fn accept<W: AsyncWrite + Unpin>(writer: &mut FrameWriter<W>, seq: u8) -> io::Result<()> {
    writer
        .write_packet(
            seq,
            &ok_packet(0, 0, StatusFlags::SERVER_STATUS_AUTOCOMMIT, 0),
        )
        .await?;
    writer.flush().await
}

/// Sends an ERR that ends a login.
pub async fn reject<W: AsyncWrite + Unpin>(
    writer: &mut FrameWriter<W>,
    seq: u8,
    error: &ClientError,
) -> io::Result<()> {
    writer
        .write_packet(
            seq,
            &err_packet(error.code(), error.sql_state(), &error.to_string()),
        )
        .await?;
    writer.flush().await
}

/// A fresh random 20-byte scramble (printable ASCII, never NUL) for a
/// `mysql_native_password` challenge.
pub fn new_nonce() -> [u8; 20] {
    let mut rng = rand::rng();
    let mut nonce = [0u8; 20];
    for byte in nonce.iter_mut() {
        *byte = rng.random_range(0x21..0x7F);
    }
    nonce
}

/// Whether `users` has an account `user` whose password gives `auth_data`
/// for the scramble `nonce` (`mysql_native_password`).
pub fn check_account(users: &[UserConfig], user: &str, nonce: &[u8], auth_data: &[u8]) -> bool {
    users.iter().any(|account| {
        account.name == user && password_matches(nonce, &account.password, auth_data)
    })
}

fn password_matches(nonce: &[u8], password: &str, auth_data: &[u8]) -> bool {
    if password.is_empty() {
        return auth_data.is_empty();
    }
    match scramble_native(nonce, password.as_bytes()) {
        Some(expected) => expected.as_slice() == auth_data,
        None => false,
    }
}

/// What a client's HandshakeResponse asks for, as [`login`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeFields {
    /// Account name.
    pub user: String,
    /// The client's capabilities within ours.
    pub capabilities: CapabilityFlags,
    /// Collation the client asked for.
    pub collation: u8,
    /// Database named in the response, if any.
    pub database: Option<String>,
    /// The `mysql_native_password` answer to the scramble; `None` when the
    /// client used another plugin (it gets an auth switch).
    pub native_auth: Option<Vec<u8>>,
}

/// Parses a client's answer to the greeting (HandshakeResponse41 payload).
/// An SSLRequest (asking for TLS where none is offered, or twice), a
/// pre-4.1 response or a malformed one is the error to answer with.
/// Pure: the fuzz target `handshake` calls it on arbitrary bytes.
pub fn parse_handshake_response(
    payload: &[u8],
    tls_offered: bool,
) -> Result<HandshakeFields, ClientError> {
    if payload.len() <= SSL_REQUEST_LEN {
        let why = if !is_ssl_request(payload) {
            "this client speaks an old protocol; shardgate speaks protocol 4.1"
        } else if tls_offered {
            "this client asked for TLS twice"
        } else {
            "this client asked for TLS, which this listener does not offer (no `tls` section in the config)"
        };
        return Err(ClientError::UnsupportedCommand(why.to_owned()));
    }
    let response = HandshakeResponse::deserialize((), &mut ParseBuf(payload)).map_err(|e| {
        ClientError::UnsupportedCommand(format!("malformed handshake response: {e}"))
    })?;
    // A client that compresses anyway would send frames the proxy cannot
    // read, and both sides would wait for ever: refuse it at once.
    let compress =
        CapabilityFlags::CLIENT_COMPRESS | CapabilityFlags::CLIENT_ZSTD_COMPRESSION_ALGORITHM;
    if response.capabilities().intersects(compress) {
        return Err(ClientError::UnsupportedCommand(
            "this client asked for the compressed protocol, which shardgate does not offer; turn compression off in the client".to_owned(),
        ));
    }
    // CLIENT_INTERACTIVE is kept: it picks the session's idle timeout.
    let capabilities =
        response.capabilities() & (SERVER_CAPABILITIES | CapabilityFlags::CLIENT_INTERACTIVE);
    if !capabilities.contains(CapabilityFlags::CLIENT_PROTOCOL_41) {
        return Err(ClientError::UnsupportedCommand(
            "client does not speak protocol 4.1".to_owned(),
        ));
    }
    let uses_native = match response.auth_plugin() {
        None => true,
        Some(plugin) => matches!(plugin, AuthPlugin::MysqlNativePassword),
    };
    Ok(HandshakeFields {
        user: String::from_utf8_lossy(response.user()).into_owned(),
        capabilities,
        collation: response.collation(),
        database: response
            .db_name()
            .filter(|db| !db.is_empty())
            .map(|db| String::from_utf8_lossy(db).into_owned()),
        native_auth: uses_native.then(|| response.scramble_buf().to_vec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_password_check() {
        let nonce = new_nonce();
        let good = scramble_native(&nonce, b"app").unwrap();
        assert!(password_matches(&nonce, "app", &good));
        assert!(!password_matches(&nonce, "other", &good));
        assert!(!password_matches(&nonce, "app", &[]));
        assert!(password_matches(&nonce, "", &[]));
    }
}
