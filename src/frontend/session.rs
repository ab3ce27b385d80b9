//! One client session: login, then the command loop. Statements are routed
//! here (router) and executed by the engine.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use mysql_common::constants::{CapabilityFlags, Command};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::{debug, debug_span, Instrument};

use super::handoff::{HandoffSocket, ReleasableWrite, SessionSnapshot};
use super::handshake::{self, LoggedIn, LoginBounds, LoginFailure};
use super::tls::{self, TlsSettings};
use crate::backend::conn::FRAMING_CAPABILITIES;
use crate::backend::ConnKey;
use crate::engine::local_infile::{client_file_link, ClientFileLink, ClientFileRequests};
use crate::engine::sessions::{BoundarySignal, HandoffLink, HandoffOffer};
use crate::engine::{write_error, Engine, Registration, SessionEntry, SessionState};
use crate::error::ClientError;
use crate::protocol::frame::PacketTooLarge;
use crate::protocol::packets::{ok_packet, result_set_terminator};
use crate::protocol::{FrameReader, FrameWriter};
use crate::router::{split_statements, Plan, RandomPlacement, RouteError, SessionAction};
use crate::stats::CommandClass;

const COM_QUIT: u8 = Command::COM_QUIT as u8;
const COM_INIT_DB: u8 = Command::COM_INIT_DB as u8;
const COM_QUERY: u8 = Command::COM_QUERY as u8;
const COM_FIELD_LIST: u8 = Command::COM_FIELD_LIST as u8;
const COM_STATISTICS: u8 = Command::COM_STATISTICS as u8;
const COM_PING: u8 = Command::COM_PING as u8;
const COM_CHANGE_USER: u8 = Command::COM_CHANGE_USER as u8;
const COM_STMT_PREPARE: u8 = Command::COM_STMT_PREPARE as u8;
const COM_STMT_EXECUTE: u8 = Command::COM_STMT_EXECUTE as u8;
const COM_STMT_SEND_LONG_DATA: u8 = Command::COM_STMT_SEND_LONG_DATA as u8;
const COM_STMT_CLOSE: u8 = Command::COM_STMT_CLOSE as u8;
const COM_STMT_RESET: u8 = Command::COM_STMT_RESET as u8;
const COM_SET_OPTION: u8 = Command::COM_SET_OPTION as u8;
const COM_RESET_CONNECTION: u8 = Command::COM_RESET_CONNECTION as u8;
const COM_PROCESS_KILL: u8 = Command::COM_PROCESS_KILL as u8;
const COM_PROCESS_INFO: u8 = Command::COM_PROCESS_INFO as u8;

/// Runs `session` (a session's whole future) inside `span` (its
/// `connection_id` and `user`) only while debug events may be logged: the
/// span is entered and left at every poll, a cost paid per statement for
/// nothing when no event of the session can be logged. The few events a
/// session logs above debug (the slow log, a hand-off refused) carry the
/// connection id as a field of their own.
pub async fn logged<F: std::future::Future>(span: tracing::Span, session: F) -> F::Output {
    let mut session = std::pin::pin!(session);
    std::future::poll_fn(|cx| {
        if tracing::level_enabled!(tracing::Level::DEBUG) {
            let _entered = span.enter();
            session.as_mut().poll(cx)
        } else {
            session.as_mut().poll(cx)
        }
    })
    .await
}

/// Serves one client connection until it quits or fails. With `tls`
/// (the config's `tls` section) the greeting offers TLS and a client that
/// asks for it is served over TLS; plain clients are served over the
/// socket's owned halves either way. The login, TLS handshake included,
/// is held to `bounds`.
pub async fn run(
    engine: Arc<Engine>,
    mut stream: TcpStream,
    connection_id: u32,
    tls: Option<Arc<TlsSettings>>,
    bounds: LoginBounds,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "?".to_owned(), |addr| addr.to_string());
    let version = engine.server_info().greeting_version();
    let Some(tls) = tls else {
        let (read_half, write_half, handoff) = plain_halves(stream);
        let mut writer = FrameWriter::new(write_half);
        let greeting = bounds
            .within(handshake::greet(
                &mut writer,
                connection_id,
                false,
                &version,
            ))
            .await?;
        return serve_stream_with(
            engine,
            FrameReader::new(read_half),
            writer,
            (connection_id, peer),
            greeting,
            bounds,
            Some(handoff),
        )
        .await;
    };
    // The first answer is read off the raw socket, exactly one packet: after
    // an SSLRequest the client's TLS handshake follows at once and must be
    // left to the TLS acceptor.
    let (mut greeting, body) = handshake::Greeting::new(connection_id, true, &version);
    bounds
        .within(tls::write_packet_raw(&mut stream, 0, &body))
        .await?;
    let (seq, first) = bounds
        .within(tls::read_packet_exact(&mut stream, bounds.max_login_packet))
        .await?;
    if handshake::is_ssl_request(&first) {
        let secured = bounds.within(tls.accept(stream)).await?;
        let (read_half, write_half) = tokio::io::split(secured);
        greeting.secure = true;
        return serve_stream(
            engine,
            FrameReader::new(read_half),
            FrameWriter::new(write_half),
            (connection_id, peer),
            greeting,
            bounds,
        )
        .await;
    }
    if tls.require {
        debug!(connection_id, "refused a client without TLS (tls.require)");
        let error = handshake::insecure_transport_error();
        tls::write_packet_raw(&mut stream, seq.wrapping_add(1), &error).await?;
        return stream.flush().await;
    }
    greeting.first_packet = Some((seq, first));
    let (read_half, write_half, handoff) = plain_halves(stream);
    serve_stream_with(
        engine,
        FrameReader::new(read_half),
        FrameWriter::new(write_half),
        (connection_id, peer),
        greeting,
        bounds,
        Some(handoff),
    )
    .await
}

/// A plain client socket's halves, its write half one a takeover can
/// release ([`ReleasableWrite`]).
fn plain_halves(
    stream: TcpStream,
) -> (
    tokio::net::tcp::OwnedReadHalf,
    ReleasableWrite,
    HandoffSocket,
) {
    use std::os::fd::AsRawFd;
    let fd = stream.as_raw_fd();
    let (read_half, write_half) = stream.into_split();
    let (write_half, handoff) = ReleasableWrite::new(write_half, fd);
    (read_half, write_half, handoff)
}

/// Serves a session taken over from another process (`serve --takeover`)
/// on its client socket `stream`: registered under its old id, its state
/// restored from `snapshot`, its command loop resumed at the boundary it
/// left at once the returned future runs. `Err` when the state cannot be
/// taken (the old process then keeps the session). The returned
/// [`HandoffSocket`] must be released before the future is dropped unrun
/// (the old process goes on with the session).
pub fn resume(
    engine: Arc<Engine>,
    stream: TcpStream,
    snapshot: SessionSnapshot,
) -> Result<
    (
        impl std::future::Future<Output = io::Result<()>>,
        HandoffSocket,
    ),
    String,
> {
    let topology = engine.topology.load();
    let login = LoggedIn {
        user: snapshot.user,
        capabilities: CapabilityFlags::from_bits_truncate(snapshot.capabilities),
        collation: snapshot.collation,
        database: snapshot.login_database,
        next_seq: 0,
        nonce: snapshot.nonce,
        secure: false,
    };
    let connection_id = snapshot.connection_id;
    if engine.sessions.get(u64::from(connection_id)).is_some() {
        return Err(format!("a session with id {connection_id} is already here"));
    }
    let registration = engine
        .sessions
        .register(connection_id, &login.user, &snapshot.peer);
    let mut state = new_state(connection_id, &login, registration.entry());
    state.take_carried(snapshot.state, &topology)?;
    let (read_half, write_half, handoff) = plain_halves(stream);
    let socket = handoff.clone();
    let mut reader = FrameReader::new(read_half);
    reader.set_max_packet(LoginBounds::new(&topology.config.limits).max_packet);
    registration
        .entry()
        .sleep(state.database_name(), Instant::now());
    let mut session = Session {
        state,
        registration,
        engine: engine.clone(),
        reader,
        writer: FrameWriter::new(write_half),
        placement: RandomPlacement::new(),
        client_file: None,
        login,
        handoff: Some(handoff),
        idle_timer: None,
    };
    session.attach_client_file();
    Ok((async move { session.command_loop().await }, socket))
}

/// Logs the client in (its greeting already sent) within `bounds` and
/// runs its command loop over any byte stream; the session is listed in
/// the engine's registry under `connection_id` (with the client's address
/// `peer`) while it is logged in.
pub async fn serve_stream<R, W>(
    engine: Arc<Engine>,
    reader: FrameReader<R>,
    writer: FrameWriter<W>,
    (connection_id, peer): (u32, String),
    greeting: handshake::Greeting,
    bounds: LoginBounds,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    serve_stream_with(
        engine,
        reader,
        writer,
        (connection_id, peer),
        greeting,
        bounds,
        None,
    )
    .await
}

/// [`serve_stream`]; with `handoff`, a plain socket's session a takeover
/// may move to a new process.
async fn serve_stream_with<R, W>(
    engine: Arc<Engine>,
    mut reader: FrameReader<R>,
    mut writer: FrameWriter<W>,
    (connection_id, peer): (u32, String),
    greeting: handshake::Greeting,
    bounds: LoginBounds,
    handoff: Option<HandoffSocket>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    reader.set_max_packet(bounds.max_login_packet);
    let users = handshake::Accounts::client_port(&engine.topology.load().config);
    let login = bounds.within(handshake::login(&mut reader, &mut writer, greeting, &users));
    let login = match login.await {
        Ok(login) => login,
        Err(LoginFailure::Io(error)) => return Err(error),
        Err(LoginFailure::Refused { error, seq }) => {
            debug!(connection_id, %error, "login refused");
            engine.stats.operator.login_failed();
            return bounds
                .within(handshake::reject(&mut writer, seq, &error))
                .await;
        }
    };
    reader.set_max_packet(bounds.max_packet);
    let registration = engine.sessions.register(connection_id, &login.user, &peer);
    tracing::Span::current().record("user", login.user.as_str());
    let mut session = Session {
        state: new_state(connection_id, &login, registration.entry()),
        registration,
        engine,
        reader,
        writer,
        placement: RandomPlacement::new(),
        client_file: None,
        login,
        handoff,
        idle_timer: None,
    };
    session.attach_client_file();
    if let Err(error) = session.select_login_database() {
        let seq = session.login.next_seq;
        return bounds
            .within(handshake::reject(&mut session.writer, seq, &error))
            .await;
    }
    bounds
        .within(handshake::accept(
            &mut session.writer,
            session.login.next_seq,
        ))
        .await?;
    debug!(connection_id, user = %session.login.user, "logged in");
    session.command_loop().await
}

fn new_state(connection_id: u32, login: &LoggedIn, entry: &Arc<SessionEntry>) -> SessionState {
    let key = ConnKey {
        framing: login.capabilities & FRAMING_CAPABILITIES,
        collation: login.collation,
    };
    let deprecate_eof = login
        .capabilities
        .contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let mut state = SessionState::new(connection_id, key, deprecate_eof);
    state.multi_statements = login
        .capabilities
        .contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS);
    state.entry = Arc::clone(entry);
    state
}

/// The client stayed silent past the session's idle limit.
struct IdleTimeout;

/// The idle deadline used when the limit (a server's `wait_timeout`) is
/// too large to add to the clock: about 30 years.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Whether the session goes on after a command.
enum Next {
    Continue,
    Close,
}

struct Session<R, W> {
    engine: Arc<Engine>,
    reader: FrameReader<R>,
    writer: FrameWriter<W>,
    state: SessionState,
    login: LoggedIn,
    placement: RandomPlacement,
    /// The session's place in the registry (removed when the session ends).
    registration: Registration,
    /// Where a `LOAD DATA LOCAL INFILE` asks for the client's file (when
    /// the client announced `CLIENT_LOCAL_FILES`).
    client_file: Option<(ClientFileLink, ClientFileRequests)>,
    /// The plain client socket a takeover may move (none over TLS).
    handoff: Option<HandoffSocket>,
    /// The idle limit of the read of the next command: one timer for the
    /// session's life, moved later before each read. Moving a registered
    /// timer later only updates it in place, where a new timer per
    /// statement took the timer wheel's lock twice and often woke the
    /// runtime's driver (an eventfd write per statement).
    idle_timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<R, W> Session<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    /// Gives the session state the way to the client's file, if the client
    /// announced `CLIENT_LOCAL_FILES` (again after COM_CHANGE_USER).
    fn attach_client_file(&mut self) {
        if !self
            .login
            .capabilities
            .contains(CapabilityFlags::CLIENT_LOCAL_FILES)
        {
            return;
        }
        let (link, _) = self.client_file.get_or_insert_with(client_file_link);
        self.state.client_file = Some(link.clone());
    }

    /// Applies the database named at login (or in COM_CHANGE_USER).
    fn select_login_database(&mut self) -> Result<(), ClientError> {
        let Some(database) = &self.login.database else {
            return Ok(());
        };
        let topology = self.engine.topology.load();
        match topology.parse_database(database) {
            Some((fleet, shard)) => {
                self.state.select_database(&topology, fleet, shard);
                Ok(())
            }
            None => Err(ClientError::Route(RouteError::UnknownDatabase(
                database.clone(),
            ))),
        }
    }

    async fn command_loop(&mut self) -> io::Result<()> {
        let entry = Arc::clone(self.registration.entry());
        // A takeover that did not take the session is not asked again
        // before its next command.
        let mut declined = false;
        // When the last command ended: the idle limit counts from it (one
        // clock read per command, shared with its latency and the
        // processlist's Sleep).
        let mut finished: Option<tokio::time::Instant> = None;
        loop {
            if entry.is_killed() {
                return self.close_killed().await;
            }
            // A stop closes the session at a boundary outside a transaction.
            let closable = !self.state.transaction.in_transaction();
            if closable && self.engine.sessions.is_draining() {
                return self.close_for_shutdown(true).await;
            }
            // A takeover moves it at a boundary outside a transaction, with
            // no bytes of the next command read.
            let movable = !declined
                && self.handoff.is_some()
                && !self.state.transaction.is_open()
                && !self.reader.has_buffered();
            // A TLS session cannot move (its keys are here): a takeover
            // closes it at a boundary as a stop does.
            let tls_closable = self.handoff.is_none() && closable;
            if tls_closable && self.engine.sessions.handoff_link().is_some() {
                return self.close_for_shutdown(false).await;
            }
            if movable {
                if let Some(link) = self.engine.sessions.handoff_link() {
                    // Boxed: a hand-off's future would otherwise enlarge
                    // every idle session's task.
                    if Box::pin(self.hand_off(link)).await {
                        return Ok(());
                    }
                    declined = true;
                    continue;
                }
            }
            let mut handing = false;
            let mut stopping = false;
            let (limit, in_transaction) = self.idle_limit();
            self.reader.release_idle();
            self.writer.release_idle();
            // The read is never cancelled: meanwhile a connection held only
            // for `SHOW WARNINGS` is given back as soon as another session
            // waits for its pool (its diagnostics copied first), and a
            // transaction idle on a shard being paused is rolled back after
            // 3/4 of `pause.drain_timeout_ms`, so the pause can complete.
            let idle_during_pause = self.idle_during_pause();
            let idle_since = finished.take().unwrap_or_else(tokio::time::Instant::now);
            let deadline = idle_since
                .checked_add(limit)
                .unwrap_or(idle_since + FAR_FUTURE);
            let idle_timer = self
                .idle_timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
            // Moved only when the limit comes sooner: a timer that fires
            // before the deadline is set again then (once per idle limit,
            // not once per command).
            if deadline < idle_timer.deadline() {
                idle_timer.as_mut().reset(deadline);
            }
            let read = {
                let mut next = std::pin::pin!(self.reader.next_packet_bytes());
                let mut idle_timer = idle_timer.as_mut();
                let read = async move {
                    loop {
                        tokio::select! {
                            biased;
                            read = &mut next => return Ok(read),
                            () = idle_timer.as_mut() => {}
                        }
                        if tokio::time::Instant::now() >= deadline {
                            return Err(IdleTimeout);
                        }
                        idle_timer.as_mut().reset(deadline);
                    }
                };
                tokio::pin!(read);
                loop {
                    let held_pool = self.state.held.as_ref().map(|conn| conn.pool().clone());
                    let pressure = async {
                        match &held_pool {
                            Some(pool) => pool.pressure().await,
                            None => std::future::pending().await,
                        }
                    };
                    let paused = async {
                        match &idle_during_pause {
                            Some((fleet, shard, grace)) => {
                                self.engine.pauses.paused_for(fleet, *shard, *grace).await;
                                ClientError::IdleDuringPause {
                                    fleet: fleet.clone(),
                                    shard: *shard,
                                    idle_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
                                }
                            }
                            None => std::future::pending().await,
                        }
                    };
                    // Biased (a kill first, then the read): no random
                    // start drawn per statement.
                    // A kill, a stop and a takeover wake the one task
                    // registered on the session's entry.
                    let boundary =
                        entry.boundary(&self.engine.sessions, closable, movable || tls_closable);
                    tokio::select! {
                        biased;
                        () = entry.killed() => break None,
                        read = &mut read => break Some(read),
                        signal = boundary => {
                            match signal {
                                BoundarySignal::Draining => stopping = true,
                                BoundarySignal::HandoffRequested => handing = true,
                            }
                            break None;
                        }
                        () = pressure => self.engine.give_up_held(&mut self.state).await,
                        error = paused, if self.state.transaction.is_bound() => {
                            debug!(connection_id = self.state.connection_id, %error, "idle on a shard being paused");
                            self.state.end_idle_for_pause(error);
                        }
                    }
                }
            };
            let read = match read {
                Some(Ok(read)) => read,
                // The transaction was ended meanwhile (a pause): wait again,
                // for the session's own idle limit.
                Some(Err(IdleTimeout)) if in_transaction && !self.state.transaction.is_bound() => {
                    continue
                }
                Some(Err(IdleTimeout)) if in_transaction => {
                    return self.end_idle_transaction(limit).await
                }
                Some(Err(IdleTimeout)) => {
                    debug!(
                        connection_id = self.state.connection_id,
                        "idle past wait_timeout: closing"
                    );
                    return self.writer.shutdown().await;
                }
                None if stopping => return self.close_for_shutdown(false).await,
                // The read, cancel-safe, had nothing: offer the session.
                None if handing => continue,
                None => return self.close_killed().await,
            };
            declined = false;
            let (last_seq, packet) = match read {
                Ok(packet) => packet,
                Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::InvalidData => {
                    let seq = PacketTooLarge::of(&error).map_or(1, |over| over.seq.wrapping_add(1));
                    let error = ClientError::PacketTooLarge(error.to_string());
                    write_error(&mut self.writer, seq, &error).await?;
                    self.writer.shutdown().await?;
                    return skip_rest_of_packet(&mut self.reader).await;
                }
                Err(error) => return Err(error),
            };
            self.state.response_seq = last_seq.wrapping_add(1);
            // Shared, not copied, with the blocking pool that analyses a
            // long statement.
            let mut body: Bytes = packet;
            let Some(&command) = body.first() else {
                self.refuse(ClientError::UnsupportedCommand(
                    "empty command packet".to_owned(),
                ))
                .await?;
                continue;
            };
            body.advance(1);
            // A long statement, or an execute that binds long data.
            let long = body.len() + 1 >= RELEASE_AFTER_BYTES
                || (command == COM_STMT_EXECUTE
                    && self.state.prepared.long_data_bytes() >= RELEASE_AFTER_BYTES);
            let (kind, received) = (
                CommandClass::of(command, &body),
                tokio::time::Instant::now(),
            );
            let name = activity_name(command);
            entry.start(
                name,
                (command == COM_QUERY).then_some(&body[..]),
                received.into_std(),
            );
            // Boxed: the command's future (the whole statement path) lives
            // on the heap only while it runs, so an idle session's task is
            // small. In its span only while debug lines may be logged (the
            // wrapper would move the future once more).
            let next = if tracing::level_enabled!(tracing::Level::DEBUG) {
                let span = debug_span!("statement", command = name);
                Box::pin(self.command(command, body).instrument(span)).await?
            } else {
                Box::pin(self.command(command, body)).await?
            };
            if let Next::Close = next {
                return Ok(());
            }
            if long {
                release_freed_memory();
            }
            let now = tokio::time::Instant::now();
            finished = Some(now);
            entry.sleep(self.state.database_name(), now.into_std());
            if let Some(kind) = kind {
                let error = self.writer.last_was_error();
                self.engine.stats.record(kind, now - received, error);
            }
        }
    }

    /// Runs one command (`command`, its packet's first byte, and
    /// `packet_body`, the rest, shared with a statement's analysis);
    /// [`Next::Close`] when the session ends with it.
    async fn command(&mut self, command: u8, packet_body: Bytes) -> io::Result<Next> {
        match command {
            COM_QUERY => self.query(packet_body).await?,
            COM_STMT_EXECUTE => {
                self.engine
                    .execute_prepared(
                        &mut self.state,
                        &packet_body,
                        &mut self.placement,
                        &mut self.writer,
                    )
                    .await?;
            }
            // Boxed: a statement's future does not carry the others'.
            _ => return Box::pin(self.other_command(command, &packet_body)).await,
        }
        Ok(Next::Continue)
    }

    /// [`Session::command`] for commands other than COM_QUERY and
    /// COM_STMT_EXECUTE.
    async fn other_command(&mut self, command: u8, body: &[u8]) -> io::Result<Next> {
        match command {
            COM_INIT_DB => {
                let name = String::from_utf8_lossy(body);
                let topology = self.engine.topology_for(&mut self.state);
                let plan = match topology.parse_database(&name) {
                    Some((fleet, shard)) => Plan::Session(SessionAction::Use { fleet, shard }),
                    None => Plan::Reject(RouteError::UnknownDatabase(name.into_owned())),
                };
                self.engine
                    .execute(&topology, &mut self.state, plan, &mut self.writer)
                    .await?;
            }
            COM_PING => self.ok().await?,
            COM_QUIT => return Ok(Next::Close),
            COM_RESET_CONNECTION => {
                self.state.reset();
                self.ok().await?;
            }
            COM_CHANGE_USER => {
                if !self.change_user(body).await? {
                    self.writer.shutdown().await?;
                    return Ok(Next::Close);
                }
            }
            COM_STMT_PREPARE => {
                let topology = self.engine.topology_for(&mut self.state);
                match statement_text(body) {
                    Ok(sql) => {
                        self.engine
                            .prepare(&topology, &mut self.state, sql, &mut self.writer)
                            .await?
                    }
                    Err(error) => self.refuse(error).await?,
                }
            }
            COM_STMT_SEND_LONG_DATA => self.engine.send_long_data(&mut self.state, body),
            COM_STMT_CLOSE => self.state.prepared.close(body),
            COM_STMT_RESET => {
                if self.state.prepared.reset(body) {
                    self.ok().await?;
                } else {
                    let id = body
                        .get(..4)
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .unwrap_or(0);
                    self.refuse(ClientError::UnknownStatement(id)).await?;
                }
            }
            COM_SET_OPTION => self.set_option(body).await?,
            COM_STATISTICS => self.statistics().await?,
            COM_FIELD_LIST => {
                self.engine
                    .field_list(&mut self.state, body, &mut self.writer)
                    .await?;
            }
            COM_PROCESS_KILL => {
                let id = body
                    .get(..4)
                    .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                let plan = Plan::Session(SessionAction::Kill {
                    query: false,
                    id: u64::from(id),
                });
                self.run_own(plan).await?;
            }
            COM_PROCESS_INFO => {
                let plan = Plan::Session(SessionAction::ProcessList {
                    full: false,
                    table: false,
                    id: None,
                });
                self.run_own(plan).await?;
            }
            other => {
                self.refuse(ClientError::UnsupportedCommand(format!(
                    "command {other:#04x} ({}) is not supported",
                    command_name(other)
                )))
                .await?
            }
        }
        Ok(Next::Continue)
    }

    /// A plan the proxy answers itself, on the topology in force.
    async fn run_own(&mut self, plan: Plan) -> io::Result<()> {
        let topology = self.engine.topology_for(&mut self.state);
        self.engine
            .execute(&topology, &mut self.state, plan, &mut self.writer)
            .await
    }

    /// Offers the session to the process taking over (`link`) and waits
    /// for its answer: `true` when the new process took it (its socket is
    /// then left open for it, and this session ends without a byte
    /// written), `false` when it stays here.
    async fn hand_off(&mut self, link: HandoffLink) -> bool {
        let Some(socket) = self.handoff.clone() else {
            return false;
        };
        // The previous statement's diagnostics go along (`SHOW WARNINGS`
        // right after the move); its held connection stays here.
        self.engine.give_up_held(&mut self.state).await;
        let Some(carried) = self.state.carry() else {
            return false;
        };
        let snapshot = SessionSnapshot {
            connection_id: self.state.connection_id,
            user: self.login.user.clone(),
            peer: self.registration.entry().host.clone(),
            capabilities: self.login.capabilities.bits(),
            collation: self.login.collation,
            nonce: self.login.nonce,
            login_database: self.login.database.clone(),
            state: carried,
        };
        let Ok(state) = serde_json::to_value(&snapshot) else {
            return false;
        };
        if self.writer.flush().await.is_err() {
            return false;
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let offer = HandoffOffer {
            connection_id: self.state.connection_id,
            state,
            fd: socket.fd,
            reply,
        };
        if link.send(offer).is_err() {
            return false;
        }
        let taken = answer.await.unwrap_or(false);
        if taken {
            socket.release();
            debug!(
                connection_id = self.state.connection_id,
                "handed over to the new process"
            );
        }
        taken
    }

    /// Ends a session killed by `KILL CONNECTION`: the connection closes
    /// (an open transaction's backend connection with it, so the server
    /// rolls it back), as a server closes a killed connection.
    async fn close_killed(&mut self) -> io::Result<()> {
        debug!(connection_id = self.state.connection_id, "killed: closing");
        self.state.transaction.lose_binding();
        self.writer.flush().await?;
        self.writer.shutdown().await
    }

    /// How long the client may stay silent now, and whether that limit is
    /// the one for an open transaction: the session's `wait_timeout` (as
    /// the client set it, else `interactive_timeout` for an interactive
    /// client or `wait_timeout` of the servers), or
    /// `limits.idle_in_transaction_timeout_ms` while a transaction is open
    /// on a backend if that is shorter.
    fn idle_limit(&self) -> (Duration, bool) {
        let interactive = self
            .login
            .capabilities
            .contains(CapabilityFlags::CLIENT_INTERACTIVE);
        let wait = self
            .state
            .wait_timeout
            .unwrap_or_else(|| self.engine.server_info().idle_timeout(interactive))
            .max(Duration::from_secs(1));
        match self.idle_in_transaction_limit() {
            Some(limit) if limit < wait => (limit, true),
            _ => (wait, false),
        }
    }

    /// How long the client may stay silent now: `limits.idle_in_transaction_timeout_ms`
    /// while a transaction is open on a backend (it holds a connection and
    /// its locks), else unbounded.
    fn idle_in_transaction_limit(&self) -> Option<Duration> {
        self.state.transaction.bound()?;
        let limit = self
            .engine
            .topology
            .load()
            .config
            .limits
            .idle_in_transaction_timeout_ms;
        (limit > 0).then(|| Duration::from_millis(limit))
    }

    /// The shard of the session's bound transaction and how long the
    /// transaction may sit idle while that shard is being paused (3/4 of
    /// `pause.drain_timeout_ms`, so the pause still completes).
    fn idle_during_pause(&self) -> Option<(String, u32, Duration)> {
        let bound = self.state.transaction.bound()?;
        let drain_ms = self.engine.topology.load().config.pause.drain_timeout_ms;
        Some((
            bound.fleet.clone(),
            bound.target.shard,
            Duration::from_millis(drain_ms.saturating_mul(3) / 4),
        ))
    }

    /// Ends a session that stayed idle in its open transaction past the
    /// limit: the backend connection is closed, so the server rolls the
    /// transaction back; the client gets an error (1205, as the answer to
    /// whatever it sends next) and the connection closes.
    /// Closes the session for a stop with 1053 (read by the client with its
    /// next command); `after_work`: it finished a statement or a
    /// transaction after the stop came.
    async fn close_for_shutdown(&mut self, after_work: bool) -> io::Result<()> {
        debug!(
            connection_id = self.state.connection_id,
            "stopping: closing"
        );
        self.engine.sessions.closed_for_shutdown(after_work);
        drop(self.state.transaction.end());
        write_error(&mut self.writer, 1, &ClientError::ServerShutdown).await?;
        self.writer.flush().await?;
        self.writer.shutdown().await
    }

    async fn end_idle_transaction(&mut self, limit: Duration) -> io::Result<()> {
        if let Some(bound) = self.state.transaction.lose_binding() {
            debug!(
                connection_id = self.state.connection_id,
                "idle in transaction too long: closing"
            );
            drop(bound);
        }
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        write_error(
            &mut self.writer,
            1,
            &ClientError::IdleInTransaction(limit_ms),
        )
        .await?;
        self.writer.flush().await?;
        self.writer.shutdown().await
    }

    /// COM_QUERY: one statement, or several when the client enabled
    /// multi-statements; each is routed and executed on its own, in order,
    /// and the first error ends the rest.
    async fn query(&mut self, sql: Bytes) -> io::Result<()> {
        // Without a `;` there is one statement: skip the splitter's
        // tokenizing pass on the hot path.
        let pieces = if self.state.multi_statements && sql.contains(&b';') {
            self.split_off_runtime(&sql).await
        } else {
            Vec::new()
        };
        let whole = 0..sql.len();
        let ranges = if pieces.len() <= 1 {
            std::slice::from_ref(&whole)
        } else {
            pieces.as_slice()
        };
        let last = ranges.len() - 1;
        for (index, range) in ranges.iter().enumerate() {
            let statement = if ranges.len() == 1 {
                sql.clone()
            } else {
                sql.slice(range.clone())
            };
            let run = self.engine.run_statement(
                &mut self.state,
                &statement,
                &mut self.placement,
                index < last,
                &mut self.writer,
            );
            // A LOAD DATA LOCAL INFILE reads the client's file meanwhile.
            let go_on = match &mut self.client_file {
                Some((_, requests)) => {
                    // Biased: no random start drawn per statement.
                    tokio::select! {
                        biased;
                        go_on = run => go_on?,
                        () = requests.serve(&mut self.reader) => false,
                    }
                }
                None => run.await?,
            };
            if !go_on {
                break;
            }
        }
        self.writer.flush().await
    }

    /// [`split_statements`], on the blocking pool for a text of at least
    /// `limits.blocking_analysis_bytes` (as routing is); a text longer than
    /// `limits.max_statement_analysis_bytes` is left whole, for
    /// `run_statement` to refuse.
    async fn split_off_runtime(&self, sql: &Bytes) -> Vec<std::ops::Range<usize>> {
        let limits = self.engine.topology.load().config.limits.clone();
        let size = sql.len() as u64;
        if size > limits.max_statement_analysis_bytes {
            return Vec::new();
        }
        let lex = self.state.route.lex;
        if size < limits.blocking_analysis_bytes {
            return split_statements(sql, &lex);
        }
        let text = sql.clone();
        tokio::task::spawn_blocking(move || split_statements(&text[..], &lex))
            .await
            .unwrap_or_default()
    }

    /// COM_CHANGE_USER: a new login on the same connection. Returns false
    /// when it was refused (the connection then closes, as MySQL does).
    async fn change_user(&mut self, body: &[u8]) -> io::Result<bool> {
        let users = handshake::Accounts::client_port(&self.engine.topology.load().config);
        match handshake::change_user(
            &mut self.reader,
            &mut self.writer,
            &self.login,
            body,
            &users,
        )
        .await
        {
            Ok(login) => {
                self.state = new_state(self.state.connection_id, &login, self.registration.entry());
                self.registration.entry().set_user(&login.user);
                self.login = login;
                self.attach_client_file();
                let seq = self.login.next_seq;
                if let Err(error) = self.select_login_database() {
                    write_error(&mut self.writer, seq, &error).await?;
                    self.writer.flush().await?;
                    return Ok(true);
                }
                self.state.response_seq = seq;
                self.ok().await?;
                Ok(true)
            }
            Err(LoginFailure::Io(error)) => Err(error),
            Err(LoginFailure::Refused { error, seq }) => {
                handshake::reject(&mut self.writer, seq, &error).await?;
                Ok(false)
            }
        }
    }

    /// COM_SET_OPTION: multi-statements on (0) or off (1).
    async fn set_option(&mut self, body: &[u8]) -> io::Result<()> {
        match body {
            [0, 0, ..] => self.state.multi_statements = true,
            [1, 0, ..] => self.state.multi_statements = false,
            _ => {
                return self
                    .refuse(ClientError::UnsupportedCommand(
                        "COM_SET_OPTION takes 0 (multi-statements on) or 1 (off)".to_owned(),
                    ))
                    .await
            }
        }
        let packet = result_set_terminator(self.state.deprecate_eof, self.state.status_flags());
        self.writer
            .write_packet(self.state.response_seq, &packet)
            .await?;
        self.writer.flush().await
    }

    /// COM_STATISTICS: a one-line status string, as servers answer it:
    /// `label: number` pairs two spaces apart (drivers parse it so), the
    /// proxy's uptime, sessions, hosts and shards.
    async fn statistics(&mut self) -> io::Result<()> {
        let topology = self.engine.topology.load();
        let text = format!(
            "Uptime: {}  Threads: {}  Hosts: {}  Shards: {}",
            self.engine.started.elapsed().as_secs(),
            self.engine.sessions.count(),
            topology.hosts.len(),
            topology
                .fleets
                .iter()
                .map(|fleet| fleet.shard_count)
                .sum::<u32>(),
        );
        self.writer
            .write_packet(self.state.response_seq, text.as_bytes())
            .await?;
        self.writer.flush().await
    }

    async fn ok(&mut self) -> io::Result<()> {
        let packet = ok_packet(0, 0, self.state.status_flags(), 0);
        self.writer
            .write_packet(self.state.response_seq, &packet)
            .await?;
        self.writer.flush().await
    }

    async fn refuse(&mut self, error: ClientError) -> io::Result<()> {
        write_error(&mut self.writer, self.state.response_seq, &error).await?;
        self.writer.flush().await
    }
}

/// A command packet at least this long, or an execute binding at least
/// this much long data, is followed by [`release_freed_memory`].
const RELEASE_AFTER_BYTES: usize = 1 << 20;

/// Gives the memory freed after a long statement back to the system. The
/// allocator keeps freed memory between allocations still in use, so a
/// proxy that once analysed a long statement would otherwise go on holding
/// several times its size (20 MiB held after 20 MiB of long data ran). On
/// the blocking pool, at most one at a time: a client sending long
/// statements in a loop costs one release in flight.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::atomic::{AtomicBool, Ordering};
        static RELEASING: AtomicBool = AtomicBool::new(false);
        if RELEASING.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::task::spawn_blocking(|| {
            // SAFETY: malloc_trim only returns free pages of glibc's heaps
            // to the system; it touches no memory in use.
            unsafe { libc::malloc_trim(0) };
            RELEASING.store(false, Ordering::Release);
        });
    }
}

/// How long, and for how many bytes, a refused client is read (and
/// ignored) before its socket is dropped.
const SKIP_AFTER_REFUSAL: (Duration, usize) = (Duration::from_secs(5), 64 << 20);

/// After an error that ends a logged-in session (written and the write
/// side shut), reads what the client still sends (the rest of an oversized packet)
/// until it closes, for a bounded time and byte count. Dropping a socket
/// with unread bytes resets the connection, and a client still writing
/// would see "broken pipe" instead of the error it was sent. (Before login
/// a refused peer is dropped at once: an anonymous socket gets no time.)
async fn skip_rest_of_packet<R: AsyncRead + Unpin>(reader: &mut FrameReader<R>) -> io::Result<()> {
    let (time, bytes) = SKIP_AFTER_REFUSAL;
    // An error or a timeout here changes nothing: the session is over.
    let _ = tokio::time::timeout(time, reader.discard_until_eof(bytes)).await;
    Ok(())
}

/// A prepared statement's text (kept as text to bind values into it): the
/// client's bytes are used unchanged or the statement is refused, so bytes
/// that are not UTF-8 are refused (1105) rather than replaced.
fn statement_text(body: &[u8]) -> Result<&str, ClientError> {
    std::str::from_utf8(body).map_err(|e| {
        ClientError::Route(RouteError::Unreadable(format!(
            "a prepared statement whose text is not valid UTF-8 (byte {}); \
             send it as a plain query, whose bytes shardgate forwards unchanged",
            e.valid_up_to()
        )))
    })
}

/// The Command column of `SHOW PROCESSLIST` for a command byte.
fn activity_name(command: u8) -> &'static str {
    match command {
        COM_QUERY => "Query",
        COM_STMT_EXECUTE => "Execute",
        COM_STMT_PREPARE => "Prepare",
        COM_INIT_DB => "Init DB",
        COM_FIELD_LIST => "Field List",
        COM_PING => "Ping",
        COM_CHANGE_USER => "Change user",
        COM_PROCESS_KILL => "Kill",
        COM_PROCESS_INFO => "Processlist",
        _ => "Query",
    }
}

fn command_name(command: u8) -> &'static str {
    const CREATE_DB: u8 = Command::COM_CREATE_DB as u8;
    const DROP_DB: u8 = Command::COM_DROP_DB as u8;
    const REFRESH: u8 = Command::COM_REFRESH as u8;
    const DEBUG: u8 = Command::COM_DEBUG as u8;
    const BINLOG_DUMP: u8 = Command::COM_BINLOG_DUMP as u8;
    const STMT_FETCH: u8 = Command::COM_STMT_FETCH as u8;
    match command {
        CREATE_DB => "COM_CREATE_DB",
        DROP_DB => "COM_DROP_DB",
        REFRESH => "COM_REFRESH",
        DEBUG => "COM_DEBUG",
        BINLOG_DUMP => "COM_BINLOG_DUMP",
        STMT_FETCH => "COM_STMT_FETCH (cursors are not offered)",
        _ => "unknown command",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{load, SPEC_YAML};

    /// What a session's task holds between commands is its state, not the
    /// statement path's futures (boxed while a command runs): 10,000 idle
    /// sessions must fit in a small budget.
    #[test]
    fn a_logged_session_runs_in_its_span_while_debug_lines_are_logged() {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(std::io::sink)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("session", connection_id = 7u32);
            let id = span.id();
            let inside = logged(span, async { tracing::Span::current().id() });
            let inside = run_ready(inside);
            assert!(id.is_some());
            assert_eq!(inside, id);
        });
    }

    /// Polls `future`, which must not wait, to its end.
    fn run_ready<F: std::future::Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => panic!("the future waited"),
        }
    }

    #[test]
    fn an_idle_session_task_stays_small() {
        let engine = Arc::new(Engine::new(load(SPEC_YAML)));
        let limits = engine.topology.load().config.limits.clone();
        let (greeting, _) = handshake::Greeting::new(1, false, "5.5.5-test");
        let session = serve_stream(
            engine,
            FrameReader::new(tokio::io::empty()),
            FrameWriter::new(tokio::io::sink()),
            (1, "127.0.0.1:1".to_owned()),
            greeting,
            LoginBounds::new(&limits),
        );
        let size = std::mem::size_of_val(&session);
        assert!(size <= 4096, "a session's future is {size} bytes");
    }

    /// A logged-in session over no socket, as `serve_stream` builds it.
    fn idle_session(engine: Arc<Engine>) -> Session<tokio::io::Empty, tokio::io::Sink> {
        let login = LoggedIn {
            user: "app".to_owned(),
            capabilities: CapabilityFlags::CLIENT_PROTOCOL_41
                | CapabilityFlags::CLIENT_DEPRECATE_EOF,
            collation: 45,
            database: None,
            next_seq: 2,
            nonce: [0; 20],
            secure: false,
        };
        let registration = engine.sessions.register(1, &login.user, "127.0.0.1:1");
        Session {
            state: new_state(1, &login, registration.entry()),
            registration,
            engine,
            reader: FrameReader::new(tokio::io::empty()),
            writer: FrameWriter::new(tokio::io::sink()),
            placement: RandomPlacement::new(),
            client_file: None,
            login,
            handoff: None,
            idle_timer: None,
        }
    }

    /// The future of one command is boxed and moved (memcpy'd) once per
    /// statement, and the futures it nests are moved as they start: the
    /// common path (a statement routed to one shard and relayed) must not
    /// carry the state of rare paths (multi-shard merges, COM_CHANGE_USER,
    /// prepares, LOAD DATA LOCAL, the proxy's own answers, a transaction's
    /// binding, a stale connection's retry), which are boxed where they
    /// branch off. They were 7,568 bytes (the command), 7,344 (an execute)
    /// with those paths inline; 6,608 (the command) with a checkout's
    /// futures and five more nested levels on the shard path (a checkout
    /// now builds none when a connection is idle and free).
    #[test]
    fn a_statements_future_stays_small() {
        let engine = Arc::new(Engine::new(load(SPEC_YAML)));
        let mut session = idle_session(Arc::clone(&engine));
        let sql = Bytes::from_static(b"SELECT * FROM users WHERE id = 7");
        let command = {
            let future = session.command(COM_QUERY, sql.clone());
            std::mem::size_of_val(&future.instrument(debug_span!("statement")))
        };
        let query = std::mem::size_of_val(&session.query(sql.clone()));
        let statement = std::mem::size_of_val(&engine.run_statement(
            &mut session.state,
            &sql,
            &mut session.placement,
            false,
            &mut session.writer,
        ));
        let execute = std::mem::size_of_val(&engine.execute_prepared(
            &mut session.state,
            &Bytes::from_static(&[1, 0, 0, 0, 0, 1, 0, 0, 0]),
            &mut session.placement,
            &mut session.writer,
        ));
        println!(
            "command {command}, query {query}, run_statement {statement}, execute_prepared {execute}"
        );
        for (name, size) in [
            ("command", command),
            ("COM_QUERY", query),
            ("run_statement", statement),
            ("execute_prepared", execute),
        ] {
            assert!(size <= 4608, "the {name} future is {size} bytes");
        }
    }
}
