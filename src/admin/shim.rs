//! One admin session on `opensrv-mysql`: the login against `admin.users`
//! of the config in force, then each query parsed and answered.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use mysql_common::scramble::scramble_sha256;
use opensrv_mysql::{
    AsyncMysqlShim, ErrorKind, InitWriter, ParamParser, QueryResultWriter, StatementMetaWriter,
};
use tokio::io::AsyncWrite;
use tracing::{debug, info};

use super::admission::Ticket;
use super::commands::{self, Context};
use super::throttle::{LoginThrottle, Turn};
use super::{parse, AdminError, Answer};
use crate::control::Control;
use crate::frontend::handshake::{check_account, new_nonce, SERVER_VERSION};

const NATIVE_PASSWORD: &str = "mysql_native_password";

const NO_PREPARED: &str =
    "the admin port does not take prepared statements; send admin commands as plain text (SHOW COMMANDS lists them)";

/// What `#[async_trait]` turns the shim's `async fn`s into.
type ShimFuture<'f, T> = Pin<Box<dyn Future<Output = T> + Send + 'f>>;

/// The state of one admin connection.
pub(super) struct AdminShim {
    control: Arc<Control>,
    connection_id: u32,
    peer: SocketAddr,
    salt: [u8; 20],
    user: OnceLock<String>,
    /// Set once the login is accepted (ends the login bounds of
    /// [`super::bounded::BoundedReader`]).
    logged_in: Arc<AtomicBool>,
    /// The name given with `USE` (the admin port has no databases; kept
    /// only so `SELECT DATABASE()` agrees with the client's prompt).
    database: Option<String>,
    /// Failed logins per client address, shared by the port's sessions.
    throttle: Arc<LoginThrottle>,
    /// The connection's place on the port (moved to the logged-in
    /// sessions' on login).
    ticket: Ticket,
}

impl AdminShim {
    /// A session for a connection from `peer`, with a fresh scramble;
    /// `logged_in` is set when its login is accepted.
    pub(super) fn new(
        control: Arc<Control>,
        (connection_id, peer): (u32, SocketAddr),
        logged_in: Arc<AtomicBool>,
        throttle: Arc<LoginThrottle>,
        ticket: Ticket,
    ) -> Self {
        Self {
            control,
            connection_id,
            peer,
            salt: new_nonce(),
            user: OnceLock::new(),
            logged_in,
            database: None,
            throttle,
            ticket,
        }
    }

    /// Whether `username` is an admin account of the config in force and
    /// `auth_data` answers this session's scramble with its password, as
    /// `mysql_native_password` or as a `caching_sha2_password` fast-auth
    /// scramble. opensrv offers an auth switch only when the first answer
    /// is empty, so a client whose default plugin is `caching_sha2_password`
    /// (MySQL 8 clients, Connector/Python with `auth_plugin`) answers the
    /// native challenge with its 32-byte SHA-256 scramble; the clear-text
    /// password in the config verifies that as well.
    fn check_login(&self, plugin: &str, username: &[u8], auth_data: &[u8]) -> bool {
        let user = String::from_utf8_lossy(username);
        let topology = self.control.engine.topology.load();
        let accepted = plugin == NATIVE_PASSWORD
            && topology.config.admin.as_ref().is_some_and(|admin| {
                check_account(&admin.users, &user, &self.salt, auth_data)
                    || admin.users.iter().any(|account| {
                        account.name == user
                            && sha2_scramble_matches(&self.salt, &account.password, auth_data)
                    })
            });
        if accepted && !self.ticket.log_in() {
            info!(
                connection_id = self.connection_id,
                peer = %self.peer,
                %user,
                "admin login refused: the connection lost its place to a newer one while logging in"
            );
            return false;
        }
        if accepted {
            debug!(connection_id = self.connection_id, peer = %self.peer, %user, "admin logged in");
            let _ = self.user.set(user.into_owned());
            self.logged_in.store(true, Ordering::Release);
        } else {
            let client_account = topology.config.users.iter().any(|u| u.name == user);
            info!(
                connection_id = self.connection_id,
                peer = %self.peer,
                %user,
                client_account,
                "admin login refused"
            );
        }
        accepted
    }

    async fn answer(&self, query: &str) -> Result<Answer, AdminError> {
        let command = parse(query)?;
        let user = self.user.get().map_or("", String::as_str);
        let context = Context {
            control: &self.control,
            engine: &self.control.engine,
            user,
            client: format!("{user}@{}", self.peer.ip()),
            connection_id: self.connection_id,
            database: self.database.as_deref(),
        };
        commands::run(&context, command).await
    }
}

/// Whether `auth_data` is the `caching_sha2_password` scramble of
/// `password` for `nonce`.
fn sha2_scramble_matches(nonce: &[u8], password: &str, auth_data: &[u8]) -> bool {
    auth_data.len() == 32
        && scramble_sha256(nonce, password.as_bytes()).is_some_and(|expected| expected == auth_data)
}

impl<W> AsyncMysqlShim<W> for AdminShim
where
    W: AsyncWrite + Send + Unpin,
{
    type Error = io::Error;

    fn version(&self) -> String {
        format!("{SERVER_VERSION}-admin")
    }

    fn connect_id(&self) -> u32 {
        self.connection_id
    }

    fn salt(&self) -> [u8; 20] {
        self.salt
    }

    fn authenticate<'life0, 'life1, 'life2, 'life3, 'life4, 'async_trait>(
        &'life0 self,
        auth_plugin: &'life1 str,
        username: &'life2 [u8],
        _salt: &'life3 [u8],
        auth_data: &'life4 [u8],
    ) -> ShimFuture<'async_trait, bool>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        'life3: 'async_trait,
        'life4: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let ip = self.peer.ip();
            match self.throttle.turn(ip, Instant::now()) {
                Turn::Refuse => {
                    info!(connection_id = self.connection_id, peer = %self.peer, "admin login refused unchecked: too many failed logins from this address are waiting");
                    return false;
                }
                Turn::Wait(wait) if !wait.is_zero() => {
                    debug!(connection_id = self.connection_id, peer = %self.peer, ?wait, "admin login delayed after failed logins from this address");
                    tokio::time::sleep(wait).await;
                }
                Turn::Wait(_) => {}
            }
            let accepted = self.check_login(auth_plugin, username, auth_data);
            self.throttle.record(ip, accepted, Instant::now());
            accepted
        })
    }

    fn on_prepare<'a, 'async_trait>(
        &'a mut self,
        _query: &'a str,
        info: StatementMetaWriter<'a, W>,
    ) -> ShimFuture<'async_trait, io::Result<()>>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            info.error(ErrorKind::ER_UNSUPPORTED_PS, NO_PREPARED.as_bytes())
                .await
        })
    }

    fn on_execute<'a, 'async_trait>(
        &'a mut self,
        _id: u32,
        _params: ParamParser<'a>,
        results: QueryResultWriter<'a, W>,
    ) -> ShimFuture<'async_trait, io::Result<()>>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            results
                .error(ErrorKind::ER_UNSUPPORTED_PS, NO_PREPARED.as_bytes())
                .await
        })
    }

    fn on_close<'a, 'async_trait>(&'a mut self, _stmt: u32) -> ShimFuture<'async_trait, ()>
    where
        W: 'async_trait,
        'a: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(std::future::ready(()))
    }

    fn on_query<'a, 'async_trait>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, W>,
    ) -> ShimFuture<'async_trait, io::Result<()>>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            match self.answer(query).await {
                Ok(answer) => answer.write(results).await,
                Err(error) => {
                    debug!(connection_id = self.connection_id, %error, "admin command failed");
                    results
                        .error(error.kind(), error.to_string().as_bytes())
                        .await
                }
            }
        })
    }

    /// `USE` / COM_INIT_DB: the admin port has no databases; any name is
    /// accepted so clients that give one can connect.
    fn on_init<'a, 'async_trait>(
        &'a mut self,
        database: &'a str,
        writer: InitWriter<'a, W>,
    ) -> ShimFuture<'async_trait, io::Result<()>>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        self.database = Some(database.to_owned());
        Box::pin(async move { writer.ok().await })
    }
}
