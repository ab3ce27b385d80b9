//! Connection checkout for a session: within the session's share of the
//! pool, a connection the server closed while idle replaced before use, the
//! session's settings replayed and the statement timeout set. Every path
//! that takes a backend connection for a session's statement goes through
//! here.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::{Context, Waker};

use super::failure::{backend_error, lost_connection, Failure};
use super::relay::RelayOutcome;
use super::session_state::{SessionSettings, SessionState};
use super::Engine;
use crate::backend::pool::PoolError;
use crate::backend::{BackendConn, ConnKey, HostPool, PoolShare, PooledConn};
use crate::error::ClientError;
use crate::protocol::packets::ERR_HEADER;
use crate::router::Target;
use crate::topology::Topology;
use mysql_common::constants::Command;

/// Most stale idle connections [`checkout_open`] replaces in a row.
const STALE_REPLACED: usize = 3;

/// A connection from `pool`. A reused one that the server closed while it
/// sat idle (a restarted server) is discarded before anything is sent on it
/// and another one taken.
pub(crate) async fn checkout_open(
    pool: &Arc<HostPool>,
    key: ConnKey,
    share: Option<(&PoolShare, u32)>,
) -> Result<PooledConn, PoolError> {
    let mut conn = pool.checkout(key, share).await?;
    if is_stale(&mut conn) {
        return replace_stale(pool, key, share, conn).await;
    }
    Ok(conn)
}

/// Whether `conn` is a reused connection the server ended while it sat
/// idle. The check reads from the connection, so it is asked once per
/// checkout: a second check would miss the packet the first one took.
fn is_stale(conn: &mut PooledConn) -> bool {
    conn.reused && closed_while_idle(conn)
}

/// Another connection from `pool` in place of `stale` (found stale by
/// [`is_stale`], discarded here); each replacement is checked the same way,
/// [`STALE_REPLACED`] replacements at most.
async fn replace_stale(
    pool: &Arc<HostPool>,
    key: ConnKey,
    share: Option<(&PoolShare, u32)>,
    mut stale: PooledConn,
) -> Result<PooledConn, PoolError> {
    for _ in 1..STALE_REPLACED {
        stale.discard_broken();
        let mut conn = pool.checkout(key, share).await?;
        if !is_stale(&mut conn) {
            return Ok(conn);
        }
        stale = conn;
    }
    stale.discard_broken();
    pool.checkout(key, share).await
}

/// Whether the server ended an idle connection: reading it without waiting
/// finds the end of the stream, an error, or a packet nobody asked for.
fn closed_while_idle(conn: &mut PooledConn) -> bool {
    let read = conn.conn().reader.next_frame();
    let mut read = std::pin::pin!(read);
    read.as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_ready()
}

/// Brings a backend connection's session settings to the client's, and
/// its `max_statement_time` to `limits.statement_timeout_ms` (0: left at
/// the server's default). The timeout is set after the client's own
/// settings, so a recorded `SET max_statement_time` does not undo it.
pub(crate) async fn apply_settings(
    conn: &mut PooledConn,
    settings: &SessionSettings,
    statement_timeout_ms: u64,
) -> Result<(), Failure> {
    if conn.conn().settings_fingerprint != settings.fingerprint() {
        replay_settings(conn, settings).await?;
    }
    if conn.conn().statement_timeout_ms == statement_timeout_ms {
        return Ok(());
    }
    let host = conn.pool().addr.clone();
    let lost = lost_connection(&host);
    let sql = format!(
        "SET SESSION max_statement_time = {}.{:03}",
        statement_timeout_ms / 1000,
        statement_timeout_ms % 1000
    );
    let backend = conn.conn();
    setup_command(backend, Command::COM_QUERY, sql.as_bytes(), &lost).await?;
    backend.statement_timeout_ms = statement_timeout_ms;
    Ok(())
}

/// Whether a backend connection already has the session's settings and
/// statement timeout ([`apply_settings`] has nothing to send).
fn has_settings(
    conn: &mut PooledConn,
    settings: &SessionSettings,
    statement_timeout_ms: u64,
) -> bool {
    let backend = conn.conn();
    backend.settings_fingerprint == settings.fingerprint()
        && backend.statement_timeout_ms == statement_timeout_ms
}

/// Sends a command that prepares a connection for a session (a reset, a
/// setting) and expects OK: a lost connection or the server's error is the
/// statement's failure.
async fn setup_command(
    backend: &mut BackendConn,
    command: Command,
    body: &[u8],
    lost: &impl Fn(io::Error) -> Failure,
) -> Result<(), Failure> {
    let answer = backend.simple_command(command, body).await.map_err(lost)?;
    if answer.first() == Some(&ERR_HEADER) {
        return Err(Failure::Client(backend_error(&answer)));
    }
    Ok(())
}

/// Resets a connection that carries other settings and replays the
/// session's.
async fn replay_settings(conn: &mut PooledConn, settings: &SessionSettings) -> Result<(), Failure> {
    let host = conn.pool().addr.clone();
    let lost = lost_connection(&host);
    let backend = conn.conn();
    if backend.settings_fingerprint != 0 {
        setup_command(backend, Command::COM_RESET_CONNECTION, &[], &lost).await?;
        backend.statement_timeout_ms = 0;
    }
    for sql in settings.statements() {
        setup_command(backend, Command::COM_QUERY, sql.as_bytes(), &lost).await?;
    }
    backend.settings_fingerprint = settings.fingerprint();
    Ok(())
}

/// Fingerprint stamped on a backend connection after a statement that may
/// have changed its session state in ways the proxy does not track, so the
/// next session to use it resets it first.
pub(super) const DIRTY: u64 = u64::MAX;

/// Records what a statement did to the connection's session state: a
/// successful SET gives it the session's new settings; a statement the
/// proxy cannot see through marks it dirty even if it failed.
pub(super) fn stamp_connection(conn: &mut PooledConn, stamp: Option<u64>, outcome: &RelayOutcome) {
    if stamp.is_some() {
        // It may have changed max_statement_time: set it again before the
        // next statement (`apply_settings`).
        conn.conn().statement_timeout_ms = u64::MAX;
    }
    match stamp {
        Some(DIRTY) => conn.conn().settings_fingerprint = DIRTY,
        Some(fingerprint) if !outcome.failed => conn.conn().settings_fingerprint = fingerprint,
        _ => {}
    }
}

/// The client's error for a checkout of a connection to `host` that
/// failed, for a statement on shard `(fleet, shard)` or (None) on any
/// master: a full pool is told apart from a host that cannot be used.
pub(super) fn checkout_error(
    error: PoolError,
    host: &str,
    shard: Option<(&str, u32)>,
) -> ClientError {
    let reason = error.to_string();
    let host = host.to_owned();
    match shard {
        _ if error.is_exhausted() => ClientError::PoolExhausted {
            host,
            place: shard.map_or_else(String::new, |(fleet, shard)| {
                format!(" (shard {shard} of fleet {fleet})")
            }),
            reason,
        },
        Some((fleet, shard)) => ClientError::HostUnavailable {
            fleet: fleet.to_owned(),
            shard,
            host,
            reason,
        },
        None => ClientError::NoHealthyHost(format!("{host}: {reason}")),
    }
}

/// The name of `target`'s fleet, for messages (`?` if the topology has
/// no such fleet).
pub(super) fn fleet_name(topology: &Topology, target: Target) -> &str {
    topology
        .fleets
        .get(target.fleet)
        .map(|f| f.name.as_str())
        .unwrap_or("?")
}

/// The address of host `host` of `topology` (empty if it has none).
pub(super) fn host_addr(topology: &Topology, host: usize) -> &str {
    topology
        .hosts
        .get(host)
        .map(|h| h.addr.as_str())
        .unwrap_or("")
}

impl Engine {
    /// A pooled connection with the session's settings applied, within the
    /// session's share of the pool.
    pub(crate) async fn checkout(
        &self,
        topology: &Topology,
        pool: &Arc<HostPool>,
        target: Option<Target>,
        state: &SessionState,
    ) -> Result<PooledConn, Failure> {
        self.checkout_with(topology, pool, target, state, true)
            .await
    }

    /// [`Engine::checkout`]; `shared` says whether the connection counts
    /// against the session's share of the pool. The common case (an idle
    /// connection free now, still open, with the session's settings) builds
    /// no future: a wait, a connect, a stale connection's replacement and a
    /// settings replay are boxed.
    pub(super) async fn checkout_with(
        &self,
        topology: &Topology,
        pool: &Arc<HostPool>,
        target: Option<Target>,
        state: &SessionState,
        shared: bool,
    ) -> Result<PooledConn, Failure> {
        let limits = &topology.config.limits;
        let share = shared.then(|| (state.share.as_ref(), limits.max_host_share_percent));
        let key = state.conn_key;
        let opened = match pool.try_checkout(key, share) {
            Some(Ok(mut conn)) => match is_stale(&mut conn) {
                true => Box::pin(replace_stale(pool, key, share, conn)).await,
                false => Ok(conn),
            },
            Some(Err(error)) => Err(error),
            None => Box::pin(checkout_open(pool, key, share)).await,
        };
        let mut conn = opened.map_err(|error| {
            let fleet = target.map(|target| (fleet_name(topology, target), target.shard));
            Failure::Client(checkout_error(error, &pool.addr, fleet))
        })?;
        if !has_settings(&mut conn, &state.settings, limits.statement_timeout_ms) {
            Box::pin(apply_settings(
                &mut conn,
                &state.settings,
                limits.statement_timeout_ms,
            ))
            .await?;
        }
        Ok(conn)
    }
}
