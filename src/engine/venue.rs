//! Where a statement runs (a host's pool, any master, the bound
//! transaction's connection, the connection held for `SHOW WARNINGS`) and
//! sending it there: the answer relayed, the connection settled afterwards.

use std::sync::Arc;
use std::time::Instant;

use mysql_common::constants::StatusFlags;
use tokio::io::AsyncWrite;
use tracing::debug;

use super::checkout::{host_addr, stamp_connection, DIRTY};
use super::diagnostics_copy::{copy_diagnostics, DiagnosticsCopy};
use super::direct::{execute_direct, Keep};
use super::failure::{
    backend_error, close_after_failure, lost_connection, no_masters, relay_failure_to_client,
    Failure, Scope,
};
use super::prepared::BinaryExecute;
use super::relay::{
    relay_response, InsertIdComposer, LocalInfile, RelayFailure, RelayOptions, RelayOutcome,
};
use super::session_state::SessionState;
use super::sessions::SessionEntry;
use super::Engine;
use crate::backend::{HostPool, PooledConn};
use crate::error::ClientError;
use crate::protocol::packets::{parse_ok, ERR_HEADER};
use crate::protocol::FrameWriter;
use crate::router::Target;
use crate::topology::Topology;
use mysql_common::constants::Command;

/// Where a statement runs. One is made per statement and moved, never
/// stored, so the held connection is kept inline rather than boxed (no
/// allocation on the statement path).
#[allow(clippy::large_enum_variant)]
pub(super) enum Venue {
    /// A connection from the host's pool, returned afterwards.
    Pool(Arc<HostPool>),
    /// A connection from the first of these pools that gives one (a
    /// statement any master can answer: a host that refuses costs a retry
    /// on the next, not an error).
    AnyOf(Vec<Arc<HostPool>>),
    /// The connection the session's transaction is bound to.
    Bound,
    /// The pooled connection that ran the previous statement.
    Held(PooledConn),
}

/// What to send, and what it does to the connection's session state.
pub(super) struct Statement<'a> {
    /// The shard, for error messages and checkout (None: any host).
    pub(super) target: Option<Target>,
    /// The text to send.
    pub(super) sql: &'a [u8],
    /// Rewrites an object INSERT's last-insert-id.
    pub(super) composer: Option<InsertIdComposer<'a>>,
    /// Settings fingerprint the connection has after the statement succeeds
    /// (None: unchanged).
    pub(super) stamp: Option<u64>,
    /// Sent on a pooled connection right before the statement, its answer
    /// not relayed (the `SET TRANSACTION` an autocommit statement takes).
    pub(super) prelude: Option<String>,
    /// For `LOAD DATA LOCAL INFILE`: the file the server may ask for.
    pub(super) local_infile: Option<LocalInfile<'a>>,
    /// When the client executes a prepared statement: run this one as a
    /// prepared statement on the server and relay its binary rows
    /// ([`execute_direct`]), not as text with its rows converted.
    pub(super) server_prepared: bool,
    /// The client's parameters for the `?`s of `sql` (a prepared statement
    /// whose values go to the server as bound).
    pub(super) binary: Option<&'a BinaryExecute>,
}

impl<'a> Statement<'a> {
    /// `sql` as is, on any host, leaving the connection's settings as they
    /// are.
    pub(super) fn plain(sql: &'a [u8]) -> Self {
        Self {
            target: None,
            sql,
            composer: None,
            stamp: None,
            prelude: None,
            local_infile: None,
            server_prepared: false,
            binary: None,
        }
    }
}

impl Engine {
    /// Sends `sql` at the venue and relays the answer; a pooled connection
    /// is settled afterwards ([`finish_pooled`]). A reused pooled
    /// connection that fails while the statement is sent is replaced once.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_on<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        venue: Venue,
        statement: Statement<'_>,
        client: &mut FrameWriter<W>,
    ) -> Result<RelayOutcome, Failure> {
        let Statement {
            target,
            sql,
            composer,
            stamp,
            prelude,
            local_infile,
            server_prepared,
            binary,
        } = statement;
        let wire = match state.binary_rows && server_prepared {
            true => Wire::Prepared {
                keep: topology.config.limits.backend_prepared_statements,
                binary,
            },
            false => Wire::Text,
        };
        let options = RelayOptions {
            first_seq: state.response_seq,
            deprecate_eof: state.deprecate_eof,
            shard: target.map(|t| t.shard),
            composer,
            more_results: state.more_results,
            binary_rows: state.binary_rows,
            session_status: state.status_flags(),
            local_infile,
        };
        let session = Arc::clone(&state.entry);
        if session.is_cancelled() {
            if let Venue::Held(conn) = venue {
                state.held = Some(conn);
            }
            return Err(Failure::Client(ClientError::QueryInterrupted));
        }
        let mut conn = match venue {
            Venue::Bound => {
                let Some(bound) = state.transaction.run_on_bound() else {
                    return Err(Failure::Client(ClientError::Transaction(
                        "no transaction is bound".to_owned(),
                    )));
                };
                return match send_on(&mut bound.conn, (sql, wire), client, options, &session).await
                {
                    Ok(outcome) => {
                        stamp_connection(&mut bound.conn, stamp, &outcome);
                        if outcome.failed {
                            settle_failed_in_transaction(state).await;
                        } else {
                            state.note_status(outcome.status);
                        }
                        Ok(outcome)
                    }
                    Err(failure) => {
                        let host = state
                            .transaction
                            .lose_binding()
                            .map(|bound| close_after_failure(bound.conn, &failure))
                            .unwrap_or_default();
                        Err(relay_failure_to_client(
                            &mut state.response_seq,
                            failure,
                            host,
                            Scope::Transaction,
                        ))
                    }
                };
            }
            Venue::Held(mut conn) => {
                state.transaction.ran_elsewhere();
                // Boxed: rarer than a shard's pool.
                return match Box::pin(send_on(&mut conn, (sql, wire), client, options, &session))
                    .await
                {
                    Ok(outcome) => {
                        // Diagnostics leave the diagnostics area as it was.
                        state.held = Some(conn);
                        if !outcome.failed {
                            state.note_status(outcome.status);
                        }
                        Ok(outcome)
                    }
                    result => finish_pooled(state, conn, result, stamp),
                };
            }
            Venue::Pool(pool) => {
                state.transaction.ran_elsewhere();
                let mut conn = self.checkout(topology, &pool, target, state).await?;
                if let Some(prelude) = &prelude {
                    conn =
                        Box::pin(self.send_prelude(topology, state, conn, target, prelude)).await?;
                }
                conn
            }
            Venue::AnyOf(pools) => {
                state.transaction.ran_elsewhere();
                // Boxed: rarer than a shard's pool.
                Box::pin(self.checkout_first(topology, state, &pools, target)).await?
            }
        };
        // Sent on a checked-out connection, and the connection put back.
        // When sending fails on a reused connection (it went stale in the
        // pool), the statement did not run and is sent once more on
        // another connection; once it was sent, a lost connection is the
        // client's error (the statement may have run).
        if session.is_cancelled() {
            // Cancelled while it waited for the connection.
            conn.release();
            return Err(Failure::Client(ClientError::QueryInterrupted));
        }
        let result = match send_on(&mut conn, (sql, wire), client, options, &session).await {
            Err(RelayFailure::NotSent(_)) if conn.reused => {
                let pool = conn.pool().clone();
                conn.discard_broken();
                // Boxed, as rare: the statement path's future stays small.
                conn = Box::pin(self.checkout(topology, &pool, target, state)).await?;
                Box::pin(send_on(&mut conn, (sql, wire), client, options, &session)).await
            }
            result => result,
        };
        finish_pooled(state, conn, result, stamp)
    }

    /// A connection from the first of `pools` that gives one (a statement
    /// any master can answer); the last refusal when none does.
    pub(super) async fn checkout_first(
        &self,
        topology: &Topology,
        state: &SessionState,
        pools: &[Arc<HostPool>],
        target: Option<Target>,
    ) -> Result<PooledConn, Failure> {
        let mut refused = None;
        for pool in pools {
            match self.checkout(topology, pool, target, state).await {
                Ok(conn) => return Ok(conn),
                Err(failure) => refused = Some(failure),
            }
        }
        Err(refused.unwrap_or_else(no_masters))
    }

    /// Sends the pending `SET TRANSACTION` on a checked-out connection
    /// before the statement that takes it, and returns the connection. Not
    /// once the statement was cancelled. The connection is marked dirty
    /// first: the characteristics outlive a statement that does not consume
    /// them (one cancelled, refused, or a `SHOW`), so the next session to use
    /// the connection resets it. A reused connection that turns out stale is
    /// replaced once, as for the statement; once sent, the characteristics
    /// are no longer the session's pending ones, and the statement is not
    /// sent again on another connection (it would go without them).
    async fn send_prelude(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        mut conn: PooledConn,
        target: Option<Target>,
        prelude: &str,
    ) -> Result<PooledConn, Failure> {
        if state.entry.is_cancelled() {
            conn.release();
            return Err(Failure::Client(ClientError::QueryInterrupted));
        }
        conn.conn().settings_fingerprint = DIRTY;
        let sent = conn
            .conn()
            .send_command(Command::COM_QUERY, prelude.as_bytes())
            .await;
        if let Err(error) = sent {
            let (pool, reused) = (conn.pool().clone(), conn.reused);
            conn.discard_broken();
            if !reused {
                return Err(lost_connection(&pool.addr)(error));
            }
            conn = self.checkout(topology, &pool, target, state).await?;
            conn.conn().settings_fingerprint = DIRTY;
            conn.conn()
                .send_command(Command::COM_QUERY, prelude.as_bytes())
                .await
                .map_err(lost_connection(&pool.addr))?;
        }
        state.transaction.next_sent();
        conn.reused = false;
        match conn.conn().reader.next_packet().await {
            Ok((_, answer)) if answer.first() == Some(&ERR_HEADER) => {
                Err(Failure::Client(backend_error(&answer)))
            }
            Ok(_) => Ok(conn),
            Err(error) => {
                let addr = conn.pool().addr.clone();
                conn.discard_broken();
                let lost = lost_connection(&addr);
                Err(lost(error))
            }
        }
    }

    /// Gives the connection held for `SHOW WARNINGS` back to its pool,
    /// its diagnostics copied into the session first (a connection that
    /// fails meanwhile is closed, and the copy is of nothing).
    pub async fn give_up_held(&self, state: &mut SessionState) {
        let Some(mut conn) = state.held.take() else {
            return;
        };
        match copy_diagnostics(conn.conn()).await {
            Ok(copy) => {
                state.diagnostics_copy = Some(copy);
                conn.release();
            }
            Err(reason) => {
                debug!(%reason, "copying the held connection's diagnostics failed");
                state.diagnostics_copy = Some(DiagnosticsCopy::default());
                conn.discard_broken();
            }
        }
    }

    /// Where a statement any master can answer runs: on the bound
    /// connection inside a bound transaction, else on any master.
    pub(super) fn any_venue(
        &self,
        topology: &Topology,
        state: &SessionState,
    ) -> Result<Venue, Failure> {
        if state.transaction.is_bound() {
            return Ok(Venue::Bound);
        }
        Ok(Venue::AnyOf(self.any_pools(topology, state)?))
    }

    /// Every master's pool, in the order a statement that any master can
    /// answer tries them: hosts not known to be down first, then those
    /// with a connection free now (a full pool is waited on only when
    /// every pool is full), starting at one chosen by the session so
    /// sessions spread over the masters.
    pub(super) fn any_pools(
        &self,
        topology: &Topology,
        state: &SessionState,
    ) -> Result<Vec<Arc<HostPool>>, Failure> {
        let masters = topology_masters(topology);
        if masters.is_empty() {
            return Err(no_masters());
        }
        let start = state.connection_id as usize % masters.len();
        let mut pools: Vec<_> = (0..masters.len())
            .map(|i| self.backends.pool(&masters[(start + i) % masters.len()]))
            .collect();
        pools.sort_by_key(|pool| (pool.is_down(), !pool.has_free()));
        Ok(pools)
    }

    /// A healthy master's pool, spreading sessions over the masters.
    pub(crate) fn any_pool(
        &self,
        topology: &Topology,
        state: &SessionState,
    ) -> Result<Arc<HostPool>, Failure> {
        self.any_pools(topology, state)?
            .into_iter()
            .next()
            .ok_or_else(no_masters)
    }
}

/// Sends `sql` and relays the answer, counting it in the host's statistics;
/// meanwhile the connection is listed as in use by `session` (what `KILL
/// QUERY` cancels).
pub(super) async fn send_and_relay<W: AsyncWrite + Unpin>(
    pooled: &mut PooledConn,
    sql: &[u8],
    client: &mut FrameWriter<W>,
    options: RelayOptions<'_>,
    session: &Arc<SessionEntry>,
) -> Result<RelayOutcome, RelayFailure> {
    send_on(pooled, (sql, Wire::Text), client, options, session).await
}

/// How a statement is sent to the server.
#[derive(Debug, Clone, Copy)]
pub(super) enum Wire<'a> {
    /// COM_QUERY; text rows are converted for a client that executed a
    /// prepared statement.
    Text,
    /// A prepared statement executed ([`execute_direct`]), kept on the
    /// connection among `keep` at most: the server's binary rows are
    /// relayed as they are.
    Prepared {
        /// `limits.backend_prepared_statements`.
        keep: usize,
        /// The client's parameters for the text's `?`s.
        binary: Option<&'a BinaryExecute>,
    },
}

/// [`send_and_relay`], sent as `wire` says.
async fn send_on<W: AsyncWrite + Unpin>(
    pooled: &mut PooledConn,
    (sql, wire): (&[u8], Wire<'_>),
    client: &mut FrameWriter<W>,
    options: RelayOptions<'_>,
    session: &Arc<SessionEntry>,
) -> Result<RelayOutcome, RelayFailure> {
    let started = Instant::now();
    let thread_id = pooled.conn().thread_id;
    let in_use = session.using(pooled.pool(), thread_id);
    let room = pooled.pool().has_statement_room();
    let conn = pooled.conn();
    let result = match wire {
        Wire::Prepared { keep, binary } => {
            let keep = Keep {
                capacity: keep,
                room,
            };
            execute_direct(conn, sql, client, options, keep, binary).await
        }
        Wire::Text => match conn.send_command(Command::COM_QUERY, sql).await {
            Err(error) => Err(RelayFailure::NotSent(error)),
            Ok(()) => relay_response(conn, client, options).await,
        },
    };
    if in_use.finish() {
        conn.kill_aimed = true;
    }
    let failed = result.as_ref().map_or(true, |outcome| outcome.failed);
    pooled.pool().statements.record(started.elapsed(), failed);
    result
}

/// Sends `sql` on `conn` and reads its one-packet answer, not relayed: an
/// ERR becomes the client's error (the connection is closed), a lost
/// connection is discarded.
pub(super) async fn send_unrelayed(mut conn: PooledConn, sql: &str) -> Result<PooledConn, Failure> {
    match conn
        .conn()
        .simple_command(Command::COM_QUERY, sql.as_bytes())
        .await
    {
        Ok(answer) if answer.first() == Some(&ERR_HEADER) => {
            Err(Failure::Client(backend_error(&answer)))
        }
        Ok(_) => Ok(conn),
        Err(error) => {
            let addr = conn.pool().addr.clone();
            conn.discard_broken();
            Err(Failure::Client(ClientError::BackendLost {
                host: addr,
                reason: error.to_string(),
            }))
        }
    }
}

/// After a statement of the bound transaction failed, asks its connection
/// whether the server still has the transaction open (COM_PING's OK carries
/// the status flags and leaves the diagnostics area alone). When the server
/// rolled it back (a deadlock; a lock wait timeout under
/// `innodb_rollback_on_timeout`), the session's transaction ends as the
/// server's did: the connection, now clean, is held for `SHOW WARNINGS`
/// and then goes back to the pool; with autocommit off the next statement
/// opens and binds a new transaction. A connection that does not answer is
/// left bound: the next statement reports it lost.
pub(super) async fn settle_failed_in_transaction(state: &mut SessionState) {
    let Some(bound) = state.transaction.bound_mut() else {
        return;
    };
    let answer = bound
        .conn
        .conn()
        .simple_command(Command::COM_PING, &[])
        .await;
    let still_open = match answer.as_deref().ok().and_then(parse_ok) {
        Some(ok) => ok.status.contains(StatusFlags::SERVER_STATUS_IN_TRANS),
        None => return,
    };
    if still_open {
        return;
    }
    if let Some(bound) = state.transaction.end() {
        state.held = Some(bound.conn);
    }
}

/// Settles a pooled connection after its statement: one the server left
/// inside a transaction is closed; one whose statement left warnings or an
/// error is held for `SHOW WARNINGS`; the rest go back to the pool.
fn finish_pooled(
    state: &mut SessionState,
    mut conn: PooledConn,
    result: Result<RelayOutcome, RelayFailure>,
    stamp: Option<u64>,
) -> Result<RelayOutcome, Failure> {
    match result {
        Ok(outcome) => {
            stamp_connection(&mut conn, stamp, &outcome);
            if !outcome.failed {
                state.note_status(outcome.status);
            }
            if outcome.status.contains(StatusFlags::SERVER_STATUS_IN_TRANS) {
                drop(conn);
            } else if outcome.failed || outcome.warnings > 0 {
                state.diagnostics_copy = None;
                state.held = Some(conn);
            } else {
                conn.release();
            }
            Ok(outcome)
        }
        Err(failure) => {
            let host = close_after_failure(conn, &failure);
            Err(relay_failure_to_client(
                &mut state.response_seq,
                failure,
                host,
                Scope::Statement,
            ))
        }
    }
}

/// The addresses of `topology`'s masters.
fn topology_masters(topology: &Topology) -> Vec<String> {
    topology
        .masters()
        .into_iter()
        .map(|host| host_addr(topology, host).to_owned())
        .collect()
}
