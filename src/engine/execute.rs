//! Executes a [`Plan`] for one client session: picks the backend connection
//! (pooled, or the one a transaction is bound to), replays session settings,
//! sends the statement, relays the answer.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use mysql_common::constants::StatusFlags;
use tokio::io::AsyncWrite;

use super::answer::{write_local_result, write_single_value};
use super::lex_state;
use super::pause::{Blocked, ShardGuard};
use super::relay::{relay_response, InsertIdComposer, RelayFailure, RelayOptions, RelayOutcome};
use super::session_state::{BoundTransaction, SessionSettings, SessionState, SettingsLimits};
use super::Engine;
use crate::backend::conn::{COM_QUERY, COM_RESET_CONNECTION};
use crate::backend::{ConnKey, HostPool, PoolShare, PooledConn};
use crate::error::ClientError;
use crate::protocol::packets::{err_packet, ok_packet, parse_err, LocalColumnType, ERR_HEADER};
use crate::protocol::FrameWriter;
use crate::router::{
    route, Placement, Plan, RouteContext, RouteError, SessionAction, ShardQuery, SqlText,
    StatementKind, Target,
};
use crate::topology::{FleetId, TableKind, Topology};

/// Where a statement runs.
enum Venue {
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

/// Fingerprint stamped on a backend connection after a statement that may
/// have changed its session state in ways the proxy does not track, so the
/// next session to use it resets it first.
const DIRTY: u64 = u64::MAX;

/// What to send, and what it does to the connection's session state.
struct Statement<'a> {
    /// The shard, for error messages and checkout (None: any host).
    target: Option<Target>,
    /// The text to send.
    sql: &'a [u8],
    /// Rewrites an object INSERT's last-insert-id.
    composer: Option<InsertIdComposer<'a>>,
    /// Settings fingerprint the connection has after the statement succeeds
    /// (None: unchanged).
    stamp: Option<u64>,
}

impl<'a> Statement<'a> {
    fn plain(sql: &'a [u8]) -> Self {
        Self {
            target: None,
            sql,
            composer: None,
            stamp: None,
        }
    }
}

impl Engine {
    /// Executes one plan that touches no shard's data (`USE`, a routing
    /// error) and writes the complete answer to `client` (flushed). An
    /// `Err` means the client connection is unusable. Statements for
    /// shards go through [`Engine::run_statement`] (the pause gate).
    pub async fn execute<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        plan: Plan,
        client: &mut FrameWriter<W>,
    ) -> io::Result<()> {
        self.execute_admitted(topology, state, plan, ShardGuard::default(), client)
            .await?;
        client.flush().await
    }

    /// Routes one statement (of a COM_QUERY, or a prepared statement's text
    /// with its values) on the topology in force and executes it; the
    /// answer is queued, not flushed, and the session's sequence id moves
    /// past it. A statement for a paused shard waits for its RESUME (at
    /// most `pause.timeout_ms`, then fails without having run) and is
    /// routed again: the shard may have moved. `more` says whether more
    /// statements of a multi-statement follow. Returns whether the batch
    /// may go on (routed, and succeeded).
    ///
    /// A statement longer than `limits.max_statement_analysis_bytes` is
    /// refused (1105) before it is analysed; one of at least
    /// `limits.blocking_analysis_bytes` is routed on the blocking pool, so
    /// its analysis never holds a runtime worker other sessions need.
    pub async fn run_statement<W: AsyncWrite + Unpin, P: Placement + Clone + Send + 'static>(
        &self,
        state: &mut SessionState,
        sql: &[u8],
        placement: &mut P,
        more: bool,
        client: &mut FrameWriter<W>,
    ) -> io::Result<bool> {
        let mut waiting_since: Option<Instant> = None;
        loop {
            // The epoch is read before the topology (see PauseGate::enter).
            let epoch = self.pauses.epoch();
            let topology = self.topology_for(state);
            let limits = &topology.config.limits;
            let size = sql.len() as u64;
            if size > limits.max_statement_analysis_bytes {
                let error = ClientError::StatementTooLarge {
                    bytes: size,
                    limit: limits.max_statement_analysis_bytes,
                };
                write_error(client, state.response_seq, &error).await?;
                state.response_seq = client.next_seq();
                return Ok(false);
            }
            state.route.max_tokens = limits.max_statement_tokens;
            let plan = if size >= limits.blocking_analysis_bytes {
                route_off_runtime(sql, &topology, state.route, placement).await
            } else {
                route(sql, &topology, &state.route, placement)
            };
            match self.admit(&topology, state, &plan, epoch) {
                Ok(guard) => {
                    let rejected = matches!(plan, Plan::Reject(_));
                    state.more_results = more && !rejected;
                    let result = self
                        .execute_admitted(&topology, state, plan, guard, client)
                        .await;
                    state.more_results = false;
                    return Ok(result? && !rejected);
                }
                Err(Blocked::Stale) => {}
                Err(Blocked::Paused(paused)) => {
                    let since = *waiting_since.get_or_insert_with(Instant::now);
                    let limit = Duration::from_millis(topology.config.pause.timeout_ms);
                    if !self.pauses.wait(&paused, since + limit).await {
                        let error = ClientError::ShardPaused {
                            fleet: paused.fleet.clone(),
                            shard: paused.shard,
                            waited_ms: since.elapsed().as_millis(),
                        };
                        write_error(client, state.response_seq, &error).await?;
                        state.response_seq = client.next_seq();
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// The topology in force, with the session's `USE` selection resolved
    /// in it.
    pub fn topology_for(&self, state: &mut SessionState) -> Arc<Topology> {
        let topology = self.topology.load();
        state.follow_topology(&topology);
        topology
    }

    /// Registers a plan's shards at the pause gate. A statement on the
    /// session's bound transaction needs no registration (the transaction
    /// holds one); the range that pauses the bound shard does not hold the
    /// session's other statements either, since that pause is waiting for
    /// the session's transaction to end.
    fn admit(
        &self,
        topology: &Topology,
        state: &SessionState,
        plan: &Plan,
        epoch: u64,
    ) -> Result<ShardGuard, Blocked> {
        let exempt = state
            .bound
            .as_ref()
            .map(|bound| (bound.fleet.as_str(), bound.target.shard));
        match plan {
            Plan::Shard(query) if !on_bound_shard(topology, state, query.target) => {
                let target = query.target;
                self.pauses
                    .enter(topology, [(target.fleet, target.shard)], epoch, exempt)
            }
            Plan::MultiShard(query) => self.pauses.enter(
                topology,
                query
                    .parts
                    .iter()
                    .map(|part| (part.target.fleet, part.target.shard)),
                epoch,
                exempt,
            ),
            _ => Ok(ShardGuard::default()),
        }
    }

    /// Executes an admitted plan, answer queued; whether it succeeded.
    async fn execute_admitted<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        plan: Plan,
        guard: ShardGuard,
        client: &mut FrameWriter<W>,
    ) -> io::Result<bool> {
        self.execute_unflushed(topology, state, plan, guard, client)
            .await?;
        state.response_seq = client.next_seq();
        Ok(!client.last_was_error())
    }

    async fn execute_unflushed<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        plan: Plan,
        guard: ShardGuard,
        client: &mut FrameWriter<W>,
    ) -> io::Result<()> {
        let held = state.held.take();
        let result = match plan {
            Plan::Diagnostics { sql } => {
                self.run_diagnostics(topology, state, held, &sql, client)
                    .await
            }
            plan => {
                if let Some(conn) = held {
                    conn.release();
                }
                self.run_plan(topology, state, plan, guard, client).await
            }
        };
        match result {
            Ok(()) => {}
            Err(Failure::Client(error)) => {
                write_error(client, state.response_seq, &error).await?;
            }
            Err(Failure::Io(error)) => return Err(error),
        }
        Ok(())
    }

    /// Runs a plan; `guard` (its shards' registration at the pause gate)
    /// lives until the statement is done, or moves into the transaction
    /// the statement binds.
    async fn run_plan<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        plan: Plan,
        guard: ShardGuard,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        match plan {
            Plan::Shard(query) => self.run_shard(topology, state, query, guard, client).await,
            Plan::MultiShard(query) => self.run_multi_shard(topology, state, query, client).await,
            Plan::AnyHost { sql } => self.run_anywhere(topology, state, &sql, client).await,
            Plan::Session(action) => self.run_session(topology, state, action, client).await,
            Plan::Diagnostics { sql } => {
                self.run_diagnostics(topology, state, None, &sql, client)
                    .await
            }
            Plan::Reject(error) => Err(Failure::Client(ClientError::Route(error))),
        }
    }

    /// Runs SHOW WARNINGS and the like on the connection that ran the
    /// previous statement (held, or the bound one); with neither, the
    /// previous statement left nothing to show, and the proxy says so (a
    /// pooled connection may still carry another statement's warnings).
    async fn run_diagnostics<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        held: Option<PooledConn>,
        sql: &[u8],
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let venue = match held {
            Some(conn) => Venue::Held(conn),
            None if state.last_on_bound && state.bound.is_some() => Venue::Bound,
            None => return write_no_diagnostics(client, state, sql).await,
        };
        self.run_on(topology, state, venue, Statement::plain(sql), client)
            .await
            .map(|_| ())
    }

    async fn run_shard<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        query: ShardQuery,
        guard: ShardGuard,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let composer = query.compose_insert_id.map(|type_id| InsertIdComposer {
            shard: query.target.shard,
            type_id,
            table: object_table_name(topology, query.target.fleet, type_id),
        });
        let (venue, _guard) = self.venue_for(topology, state, &query, guard).await?;
        let outcome = self
            .run_on(
                topology,
                state,
                venue,
                Statement {
                    target: Some(query.target),
                    sql: &query.sql,
                    composer,
                    stamp: None,
                },
                client,
            )
            .await?;
        if let Some(id) = outcome.last_insert_id {
            state.last_insert_id = id;
        }
        Ok(())
    }

    /// Decides where a shard statement runs, binding the transaction to its
    /// shard on the first write or locking read (the statement's pause-gate
    /// `guard` then moves into the transaction). Returns the venue and the
    /// guard to hold while the statement runs.
    async fn venue_for(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        query: &ShardQuery,
        guard: ShardGuard,
    ) -> Result<(Venue, ShardGuard), Failure> {
        let target = query.target;
        let pool = self.backends.pool(host_addr(topology, target.host));
        if !state.in_transaction() {
            return Ok((Venue::Pool(pool), guard));
        }
        if let Some(bound) = &state.bound {
            if on_bound_shard(topology, state, target) {
                self.check_not_moved(topology, state).await?;
                return Ok((Venue::Bound, guard));
            }
            if query.kind == StatementKind::Read {
                return Ok((Venue::Pool(pool), guard));
            }
            return Err(Failure::Client(ClientError::Transaction(format!(
                "this transaction is bound to shard {} of fleet {}; a write or locking read for shard {} of fleet {} cannot join it (transactions are single-shard). \
                 COMMIT or ROLLBACK first; plain reads of other shards are served outside the transaction",
                bound.target.shard,
                bound.fleet,
                target.shard,
                fleet_name(topology, target),
            ))));
        }
        if query.kind == StatementKind::Read {
            return Ok((Venue::Pool(pool), guard));
        }
        // The transaction's own connection: outside the session's share, so
        // its reads of other shards on the same host never wait for it.
        let mut conn = self
            .checkout_with(topology, &pool, Some(target), state, false)
            .await?;
        let opening = std::iter::once(state.begin_statement().to_owned())
            .chain(state.pending_savepoints.drain(..))
            .collect::<Vec<_>>();
        for sql in &opening {
            match conn.conn().simple_command(COM_QUERY, sql.as_bytes()).await {
                Ok(answer) if answer.first() == Some(&ERR_HEADER) => {
                    drop(conn);
                    return Err(Failure::Client(backend_error(&answer)));
                }
                Ok(_) => {}
                Err(error) => {
                    let addr = conn.pool().addr.clone();
                    conn.discard_broken();
                    return Err(Failure::Client(ClientError::BackendLost {
                        host: addr,
                        reason: error.to_string(),
                    }));
                }
            }
        }
        state.bound = Some(BoundTransaction {
            target,
            fleet: fleet_name(topology, target).to_owned(),
            conn,
            guard,
        });
        Ok((Venue::Bound, ShardGuard::default()))
    }

    /// When the shard of the session's bound transaction has another master
    /// in `topology` than the one the transaction runs on (a reload moved
    /// it), rolls the transaction back there, ends it, and fails: it must
    /// not commit on the old master.
    async fn check_not_moved(
        &self,
        topology: &Topology,
        state: &mut SessionState,
    ) -> Result<(), Failure> {
        let Some(bound) = &state.bound else {
            return Ok(());
        };
        let master = topology
            .fleet_by_name(&bound.fleet)
            .and_then(|fleet| topology.master_of(fleet, bound.target.shard))
            .map(|host| host_addr(topology, host));
        let from = bound.conn.pool().addr.clone();
        let to = match master {
            Some(addr) if addr == from => return Ok(()),
            Some(addr) => addr.to_owned(),
            None => "no master (the shard is no longer in the config)".to_owned(),
        };
        let Some(mut bound) = state.bound.take() else {
            return Ok(());
        };
        state.explicit_transaction = false;
        state.pending_savepoints.clear();
        match bound
            .conn
            .conn()
            .simple_command(COM_QUERY, b"ROLLBACK")
            .await
        {
            Ok(answer) if answer.first() != Some(&ERR_HEADER) => bound.conn.release(),
            _ => bound.conn.discard_broken(),
        }
        Err(Failure::Client(ClientError::ShardMoved {
            fleet: bound.fleet.clone(),
            shard: bound.target.shard,
            from,
            to,
        }))
    }

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
    /// against the session's share of the pool.
    async fn checkout_with(
        &self,
        topology: &Topology,
        pool: &Arc<HostPool>,
        target: Option<Target>,
        state: &SessionState,
        shared: bool,
    ) -> Result<PooledConn, Failure> {
        let limits = &topology.config.limits;
        let share = shared.then(|| (state.share.as_ref(), limits.max_host_share_percent));
        let mut conn = checkout_open(pool, state.conn_key, share)
            .await
            .map_err(|reason| {
                Failure::Client(match target {
                    Some(target) => ClientError::HostUnavailable {
                        fleet: fleet_name(topology, target).to_owned(),
                        shard: target.shard,
                        host: pool.addr.clone(),
                        reason,
                    },
                    None => ClientError::NoHealthyHost(format!("{}: {reason}", pool.addr)),
                })
            })?;
        apply_settings(&mut conn, &state.settings, limits.statement_timeout_ms).await?;
        Ok(conn)
    }

    /// Sends `sql` at the venue and relays the answer. A pooled connection
    /// that fails while the statement is sent is replaced once.
    #[allow(clippy::too_many_arguments)]
    async fn run_on<W: AsyncWrite + Unpin>(
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
        } = statement;
        let options = RelayOptions {
            first_seq: state.response_seq,
            deprecate_eof: state.deprecate_eof,
            shard: target.map(|t| t.shard),
            composer,
            more_results: state.more_results,
            binary_rows: state.binary_rows,
        };
        match venue {
            Venue::Bound => {
                state.last_on_bound = true;
                let Some(bound) = state.bound.as_mut() else {
                    return Err(Failure::Client(ClientError::Transaction(
                        "no transaction is bound".to_owned(),
                    )));
                };
                match send_and_relay(&mut bound.conn, sql, client, options).await {
                    Ok(outcome) => {
                        stamp_connection(&mut bound.conn, stamp, &outcome);
                        if !outcome.failed {
                            state.note_status(outcome.status);
                        }
                        Ok(outcome)
                    }
                    Err(failure) => {
                        let host = state
                            .bound
                            .take()
                            .map(|bound| close_after_failure(bound.conn, &failure))
                            .unwrap_or_default();
                        Err(relay_failure_to_client(
                            state,
                            failure,
                            host,
                            Scope::Transaction,
                        ))
                    }
                }
            }
            Venue::Held(mut conn) => {
                state.last_on_bound = false;
                match send_and_relay(&mut conn, sql, client, options).await {
                    Ok(outcome) => {
                        // Diagnostics leave the diagnostics area as it was.
                        state.held = Some(conn);
                        if !outcome.failed {
                            state.note_status(outcome.status);
                        }
                        Ok(outcome)
                    }
                    result => finish_pooled(state, conn, result, stamp),
                }
            }
            Venue::Pool(pool) => {
                state.last_on_bound = false;
                let conn = self.checkout(topology, &pool, target, state).await?;
                self.run_pooled(topology, state, conn, (target, sql, stamp), options, client)
                    .await
            }
            Venue::AnyOf(pools) => {
                state.last_on_bound = false;
                let mut refused = None;
                for pool in &pools {
                    match self.checkout(topology, pool, target, state).await {
                        Ok(conn) => {
                            return self
                                .run_pooled(
                                    topology,
                                    state,
                                    conn,
                                    (target, sql, stamp),
                                    options,
                                    client,
                                )
                                .await
                        }
                        Err(failure) => refused = Some(failure),
                    }
                }
                Err(refused.unwrap_or_else(no_masters))
            }
        }
    }

    /// Sends `sql` on a checked-out connection, relays the answer and puts
    /// the connection back. When sending fails on a reused connection (it
    /// went stale in the pool), the statement did not run and is sent once
    /// more on another connection; once it was sent, a lost connection is
    /// the client's error (the statement may have run).
    async fn run_pooled<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        mut conn: PooledConn,
        (target, sql, stamp): (Option<Target>, &[u8], Option<u64>),
        options: RelayOptions<'_>,
        client: &mut FrameWriter<W>,
    ) -> Result<RelayOutcome, Failure> {
        let result = match send_and_relay(&mut conn, sql, client, options).await {
            Err(RelayFailure::NotSent(_)) if conn.reused => {
                let pool = conn.pool().clone();
                conn.discard_broken();
                conn = self.checkout(topology, &pool, target, state).await?;
                send_and_relay(&mut conn, sql, client, options).await
            }
            result => result,
        };
        finish_pooled(state, conn, result, stamp)
    }

    /// Runs a statement that names no sharded table on the bound connection
    /// or on any healthy master.
    async fn run_anywhere<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        sql: &[u8],
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let venue = self.any_venue(topology, state)?;
        let statement = Statement {
            stamp: Some(DIRTY),
            ..Statement::plain(sql)
        };
        self.run_on(topology, state, venue, statement, client)
            .await
            .map(|_| ())
    }

    fn any_venue(&self, topology: &Topology, state: &SessionState) -> Result<Venue, Failure> {
        if state.bound.is_some() {
            return Ok(Venue::Bound);
        }
        Ok(Venue::AnyOf(self.any_pools(topology, state)?))
    }

    /// Every master's pool, in the order a statement that any master can
    /// answer tries them: hosts not known to be down first, starting at one
    /// chosen by the session so sessions spread over the masters.
    fn any_pools(
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
        pools.sort_by_key(|pool| pool.is_down());
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

    async fn run_session<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        action: SessionAction,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        match action {
            SessionAction::Use { fleet, shard } => {
                state.select_database(topology, fleet, shard);
                write_ok(client, state).await
            }
            SessionAction::Begin { sql } => {
                state.pending_savepoints.clear();
                if state.bound.is_some() {
                    self.end_transaction(topology, state, "COMMIT", client, false)
                        .await?;
                }
                state.explicit_transaction = true;
                state.begin_sql = recorded_text(sql)?;
                write_ok(client, state).await
            }
            SessionAction::Commit => {
                self.end_transaction(topology, state, "COMMIT", client, true)
                    .await
            }
            SessionAction::Rollback => {
                self.end_transaction(topology, state, "ROLLBACK", client, true)
                    .await
            }
            SessionAction::SetAutocommit(on) => {
                if on && state.bound.is_some() {
                    self.end_transaction(topology, state, "COMMIT", client, false)
                        .await?;
                }
                if on {
                    state.explicit_transaction = false;
                }
                state.autocommit = on;
                write_ok(client, state).await
            }
            SessionAction::SetSession { variables, sql } => {
                let sql = recorded_text(sql)?;
                self.set_session(topology, state, variables, sql, client)
                    .await
            }
            SessionAction::SelectDatabase { column } => {
                let name = state.route.current_db.and_then(|(fleet, shard)| {
                    topology.fleets.get(fleet).map(|f| f.database_name(shard))
                });
                write_single_value(
                    client,
                    state,
                    &column,
                    LocalColumnType::Text,
                    name.as_deref().map(str::as_bytes),
                )
                .await
            }
            SessionAction::Savepoint { sql } => {
                if state.bound.is_some() {
                    self.run_on(
                        topology,
                        state,
                        Venue::Bound,
                        Statement::plain(&sql),
                        client,
                    )
                    .await
                    .map(|_| ())
                } else if state.in_transaction() {
                    state.pending_savepoints.push(recorded_text(sql)?);
                    write_ok(client, state).await
                } else {
                    self.run_anywhere(topology, state, &sql, client).await
                }
            }
            SessionAction::SelectLastInsertId { column } => {
                let id = state.last_insert_id.to_string();
                write_single_value(
                    client,
                    state,
                    &column,
                    LocalColumnType::UnsignedBigInt,
                    Some(id.as_bytes()),
                )
                .await
            }
        }
    }

    /// Sends COMMIT or ROLLBACK to the bound connection (answering with its
    /// response when `answer` is set) and unbinds it. A COMMIT whose shard
    /// moved to another master meanwhile is a rollback and an error.
    async fn end_transaction<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        sql: &str,
        client: &mut FrameWriter<W>,
        answer: bool,
    ) -> Result<(), Failure> {
        if sql == "COMMIT" {
            self.check_not_moved(topology, state).await?;
        }
        if answer {
            state.explicit_transaction = false;
        }
        state.pending_savepoints.clear();
        let Some(mut bound) = state.bound.take() else {
            return if answer {
                write_ok(client, state).await
            } else {
                Ok(())
            };
        };
        let addr = bound.conn.pool().addr.clone();
        let result = if answer {
            send_and_relay(
                &mut bound.conn,
                sql.as_bytes(),
                client,
                RelayOptions {
                    first_seq: state.response_seq,
                    deprecate_eof: state.deprecate_eof,
                    shard: None,
                    composer: None,
                    more_results: state.more_results,
                    binary_rows: state.binary_rows,
                },
            )
            .await
            .map(|outcome| !outcome.failed)
        } else {
            let backend = bound.conn.conn();
            match backend.send_command(COM_QUERY, sql.as_bytes()).await {
                Err(error) => Err(RelayFailure::NotSent(error)),
                Ok(()) => match backend.reader.next_packet().await {
                    Ok((_, payload)) if payload.first() == Some(&ERR_HEADER) => {
                        bound.conn.release();
                        return Err(Failure::Client(backend_error(&payload)));
                    }
                    Ok(_) => Ok(true),
                    Err(error) => Err(RelayFailure::Backend {
                        error,
                        forwarded: false,
                        next_seq: 1,
                    }),
                },
            }
        };
        match result {
            Ok(_) => {
                bound.conn.release();
                Ok(())
            }
            Err(failure) => {
                close_after_failure(bound.conn, &failure);
                let scope = if sql == "COMMIT" {
                    Scope::Commit
                } else {
                    Scope::Transaction
                };
                Err(relay_failure_to_client(state, failure, addr, scope))
            }
        }
    }

    /// Runs a SET on a backend (so the server validates it), then records it
    /// for replay on the session's later connections, and reads back how
    /// the server will now read the session's statements (`sql_mode`,
    /// `character_set_client`: [`Engine::learn_lex_state`]). A SET that
    /// would take the recorded list past `limits.max_session_settings` or
    /// `limits.max_session_settings_bytes` is refused before it runs.
    async fn set_session<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        variables: Vec<String>,
        sql: String,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let limits = SettingsLimits::from_config(&topology.config.limits);
        let next = state
            .settings
            .with(variables, sql.clone(), limits)
            .map_err(Failure::Client)?;
        let venue = self.any_venue(topology, state)?;
        let statement = Statement {
            stamp: Some(next.fingerprint()),
            ..Statement::plain(sql.as_bytes())
        };
        let outcome = self
            .run_on(topology, state, venue, statement, client)
            .await?;
        if !outcome.failed {
            state.settings = next;
            self.learn_lex_state(topology, state, outcome.warnings)
                .await?;
        }
        Ok(())
    }

    /// Asks the server for the session's `sql_mode` and
    /// `character_set_client` and takes them as the session's lexical
    /// state: on the bound connection, or on a pooled one with the
    /// session's settings (the one the SET just ran on, unless it is held
    /// for `SHOW WARNINGS`). Without an answer the proxy cannot know how
    /// the server reads the session's text, so the session ends.
    async fn learn_lex_state(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        warnings: u16,
    ) -> Result<(), Failure> {
        let unknown = |reason: String| {
            Failure::Io(io::Error::other(format!(
                "shardgate could not read the session's sql_mode and character set after a SET: {reason}"
            )))
        };
        if warnings == 0 {
            if let Some(bound) = state.bound.as_mut() {
                let lex = lex_state::read_lex_state(bound.conn.conn())
                    .await
                    .map_err(unknown)?;
                state.set_server_lex_state(&lex.sql_mode, &lex.character_set_client);
                return Ok(());
            }
        }
        let mut refused = None;
        for pool in self.any_pools(topology, state)? {
            let mut conn = match self.checkout(topology, &pool, None, state).await {
                Ok(conn) => conn,
                Err(failure) => {
                    refused = Some(failure);
                    continue;
                }
            };
            match lex_state::read_lex_state(conn.conn()).await {
                Ok(lex) => {
                    conn.release();
                    state.set_server_lex_state(&lex.sql_mode, &lex.character_set_client);
                    return Ok(());
                }
                Err(reason) => {
                    conn.discard_broken();
                    return Err(unknown(reason));
                }
            }
        }
        Err(match refused {
            Some(Failure::Client(error)) => unknown(error.to_string()),
            Some(failure) => failure,
            None => no_masters(),
        })
    }
}

/// The text of a statement the session records (SET, BEGIN, a pending
/// SAVEPOINT): recorded as text, so bytes that are not UTF-8 are refused
/// rather than altered.
fn recorded_text(sql: SqlText) -> Result<String, Failure> {
    String::from_utf8(sql.0).map_err(|_| {
        Failure::Client(ClientError::Route(RouteError::Unreadable(
            "a SET, BEGIN or SAVEPOINT that is not valid UTF-8 (the session records these as text)"
                .to_owned(),
        )))
    })
}

/// A statement's failure: an error for the client, or a dead client.
pub(crate) enum Failure {
    Client(ClientError),
    Io(io::Error),
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Self {
        Failure::Io(error)
    }
}

/// Sends `sql` and relays the answer, counting it in the host's statistics.
async fn send_and_relay<W: AsyncWrite + Unpin>(
    pooled: &mut PooledConn,
    sql: &[u8],
    client: &mut FrameWriter<W>,
    options: RelayOptions<'_>,
) -> Result<RelayOutcome, RelayFailure> {
    let started = Instant::now();
    let conn = pooled.conn();
    let result = match conn.send_command(COM_QUERY, sql).await {
        Err(error) => Err(RelayFailure::NotSent(error)),
        Ok(()) => relay_response(conn, client, options).await,
    };
    let failed = result.as_ref().map_or(true, |outcome| outcome.failed);
    pooled.pool().statements.record(started.elapsed(), failed);
    result
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
                state.held = Some(conn);
            } else {
                conn.release();
            }
            Ok(outcome)
        }
        Err(failure) => {
            let host = close_after_failure(conn, &failure);
            Err(relay_failure_to_client(
                state,
                failure,
                host,
                Scope::Statement,
            ))
        }
    }
}

/// Most stale idle connections [`checkout_open`] replaces in a row.
const STALE_REPLACED: usize = 3;

/// A connection from `pool`. A reused one that the server closed while it
/// sat idle (a restarted server) is discarded before anything is sent on it
/// and another one taken.
pub(crate) async fn checkout_open(
    pool: &Arc<HostPool>,
    key: ConnKey,
    share: Option<(&PoolShare, u32)>,
) -> Result<PooledConn, String> {
    let mut conn = pool.checkout(key, share).await?;
    for _ in 0..STALE_REPLACED {
        if !(conn.reused && closed_while_idle(&mut conn)) {
            break;
        }
        conn.discard_broken();
        conn = pool.checkout(key, share).await?;
    }
    Ok(conn)
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
    setup_command(backend, COM_QUERY, sql.as_bytes(), &lost).await?;
    backend.statement_timeout_ms = statement_timeout_ms;
    Ok(())
}

/// Sends a command that prepares a connection for a session (a reset, a
/// setting) and expects OK: a lost connection or the server's error is the
/// statement's failure.
async fn setup_command(
    backend: &mut crate::backend::BackendConn,
    command: u8,
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
        setup_command(backend, COM_RESET_CONNECTION, &[], &lost).await?;
        backend.statement_timeout_ms = 0;
    }
    for sql in settings.statements() {
        setup_command(backend, COM_QUERY, sql.as_bytes(), &lost).await?;
    }
    backend.settings_fingerprint = settings.fingerprint();
    Ok(())
}

/// Turns an I/O error on a backend connection into the client's error.
pub(crate) fn lost_connection(host: &str) -> impl Fn(io::Error) -> Failure + '_ {
    move |error| {
        Failure::Client(ClientError::BackendLost {
            host: host.to_owned(),
            reason: error.to_string(),
        })
    }
}

/// Records what a statement did to the connection's session state: a
/// successful SET gives it the session's new settings; a statement the
/// proxy cannot see through marks it dirty even if it failed.
fn stamp_connection(conn: &mut PooledConn, stamp: Option<u64>, outcome: &RelayOutcome) {
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

/// Closes a connection whose statement failed: a backend failure also drops
/// the host's idle connections (likely stale too); a client failure does
/// not reflect on the host. Returns the host's address.
fn close_after_failure(conn: PooledConn, failure: &RelayFailure) -> String {
    let addr = conn.pool().addr.clone();
    match failure {
        RelayFailure::NotSent(_) | RelayFailure::Backend { .. } => conn.discard_broken(),
        RelayFailure::Client(_) => drop(conn),
    }
    addr
}

/// What a lost backend connection took with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// A statement outside a transaction.
    Statement,
    /// A statement of an open transaction (or its ROLLBACK).
    Transaction,
    /// The COMMIT of an open transaction.
    Commit,
}

/// The error for a failed relay: says whether the statement may have run.
/// When part of the answer already reached the client, the ERR packet
/// continues its sequence numbering.
fn relay_failure_to_client(
    state: &mut SessionState,
    failure: RelayFailure,
    host: String,
    scope: Scope,
) -> Failure {
    let (error, sent) = match failure {
        RelayFailure::Client(error) => return Failure::Io(error),
        RelayFailure::NotSent(error) => (error, false),
        RelayFailure::Backend {
            error,
            forwarded,
            next_seq,
        } => {
            if forwarded {
                state.response_seq = next_seq;
            }
            (error, true)
        }
    };
    let outcome = match (scope, sent) {
        (Scope::Statement, false) => "the statement was not sent, so it did not run",
        (Scope::Statement, true) => {
            "the statement was sent before the connection broke, so it may have run: check before running it again"
        }
        (Scope::Commit, true) => {
            "the COMMIT was sent before the connection broke, so the transaction may or may not have committed: check before running it again"
        }
        (Scope::Transaction, _) | (Scope::Commit, false) => {
            "the open transaction was rolled back by the server"
        }
    };
    Failure::Client(ClientError::BackendLost {
        host,
        reason: format!("{error}; {outcome}"),
    })
}

pub(crate) fn backend_error(payload: &[u8]) -> ClientError {
    match parse_err(payload) {
        Some((code, sql_state, message)) => ClientError::Backend {
            code,
            sql_state,
            message,
        },
        None => ClientError::Backend {
            code: 1105,
            sql_state: "HY000".to_owned(),
            message: "shardgate: malformed error from backend".to_owned(),
        },
    }
}

/// The logical object table of `type_id` on `fleet` (the first by name if
/// several share it), for messages.
fn object_table_name(topology: &Topology, fleet: FleetId, type_id: u16) -> &str {
    topology
        .tables
        .values()
        .filter(|t| {
            t.fleet == fleet && matches!(t.kind, TableKind::Object { type_id: id } if id == type_id)
        })
        .map(|t| t.name.as_str())
        .min()
        .unwrap_or("?")
}

/// Whether `target` is the shard of the session's bound transaction
/// (compared by fleet name: fleet ids may change across reloads).
fn on_bound_shard(topology: &Topology, state: &SessionState, target: Target) -> bool {
    state.bound.as_ref().is_some_and(|bound| {
        bound.target.shard == target.shard && bound.fleet == fleet_name(topology, target)
    })
}

fn fleet_name(topology: &Topology, target: Target) -> &str {
    topology
        .fleets
        .get(target.fleet)
        .map(|f| f.name.as_str())
        .unwrap_or("?")
}

fn host_addr(topology: &Topology, host: usize) -> &str {
    topology
        .hosts
        .get(host)
        .map(|h| h.addr.as_str())
        .unwrap_or("")
}

fn no_masters() -> Failure {
    Failure::Client(ClientError::NoHealthyHost(
        "the config has no hosts".to_owned(),
    ))
}

fn topology_masters(topology: &Topology) -> Vec<String> {
    topology
        .masters()
        .into_iter()
        .map(|host| host_addr(topology, host).to_owned())
        .collect()
}

/// Routes a large statement on the blocking pool (owned copies of the
/// text and the placement policy, which comes back with its state).
async fn route_off_runtime<P: Placement + Clone + Send + 'static>(
    sql: &[u8],
    topology: &Arc<Topology>,
    context: RouteContext,
    placement: &mut P,
) -> Plan {
    let sql = sql.to_owned();
    let topology = Arc::clone(topology);
    let mut policy = placement.clone();
    let routed = tokio::task::spawn_blocking(move || {
        let plan = route(&sql, &topology, &context, &mut policy);
        (plan, policy)
    })
    .await;
    match routed {
        Ok((plan, policy)) => {
            *placement = policy;
            plan
        }
        Err(error) => Plan::Reject(RouteError::Unsupported(format!(
            "shardgate could not analyse the statement: {error}"
        ))),
    }
}

/// Writes an ERR packet for `error`.
pub async fn write_error<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    seq: u8,
    error: &ClientError,
) -> io::Result<()> {
    let payload = err_packet(error.code(), error.sql_state(), &error.to_string());
    client.write_packet(seq, &payload).await.map(|_| ())
}

async fn write_ok<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    state: &SessionState,
) -> Result<(), Failure> {
    client
        .write_packet(
            state.response_seq,
            &ok_packet(0, 0, state.status_flags(), 0),
        )
        .await?;
    Ok(())
}

/// The answer to a diagnostics statement when the previous statement left
/// no warnings and no error: no rows, or a count of 0.
async fn write_no_diagnostics<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    state: &SessionState,
    sql: &[u8],
) -> Result<(), Failure> {
    let text = String::from_utf8_lossy(sql);
    let text = text.trim();
    let upper = text.to_ascii_uppercase();
    if upper.starts_with("SELECT") {
        let name = text[6..].trim();
        return write_single_value(
            client,
            state,
            name,
            LocalColumnType::UnsignedBigInt,
            Some(b"0"),
        )
        .await;
    }
    if upper.contains("COUNT(") {
        let name = if upper.contains("ERRORS") {
            "@@session.error_count"
        } else {
            "@@session.warning_count"
        };
        return write_single_value(
            client,
            state,
            name,
            LocalColumnType::UnsignedBigInt,
            Some(b"0"),
        )
        .await;
    }
    let columns = [
        ("Level", LocalColumnType::Text),
        ("Code", LocalColumnType::UnsignedBigInt),
        ("Message", LocalColumnType::Text),
    ];
    write_local_result(client, state, &columns, Vec::new()).await
}
