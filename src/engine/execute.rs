//! Executes a [`Plan`] for one client session: routes the statement, admits
//! it at the pause gate, and dispatches the plan (a shard, several shards,
//! any master, the session itself, diagnostics). Where a statement runs and
//! how it is sent is in `venue`, transactions in `transaction`, checkout and
//! settings replay in `checkout`, failures in `failure`.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::answer::{write_local_result, write_ok, write_single_value};
use super::checkout::DIRTY;
use super::diagnostics_copy::{show_limit, DiagnosticsCopy};
use super::failure::{answer_failure, write_error, Failure};
use super::lex_state;
use super::observe::Routed;
use super::pause::{Blocked, PausedShard, ShardGuard};
use super::relay::{InsertIdComposer, LocalInfile, RelayOutcome};
use super::session_state::{SessionState, SettingsLimits};
use super::sessions::SessionEntry;
use super::transaction::{
    check_combined_autocommit, on_bound_shard, recorded_text, transition_failure,
};
use super::venue::{Statement, Venue};
use super::Engine;
use crate::backend::PooledConn;
use crate::error::ClientError;
use crate::protocol::packets::LocalColumnType;
use crate::protocol::FrameWriter;
use crate::router::{
    records_whole_text, route_digested, Diagnostics, DiagnosticsArea, DiagnosticsValue, Placement,
    Plan, RouteContext, RouteError, SessionAction, SessionValue, SetEvaluation, ShardQuery,
    StatementKind,
};
use crate::topology::{FleetId, TableKind, Topology};

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
    /// may go on (routed, and succeeded). While the fence is up, a write or
    /// locking read is refused before it is admitted.
    ///
    /// A statement longer than `limits.max_statement_analysis_bytes` is
    /// refused (1105) before it is analysed, and so is a SET the session
    /// would record whole ([`records_whole_text`]) that is longer than
    /// `limits.max_session_settings_bytes` on its own; one of at least
    /// `limits.blocking_analysis_bytes` is routed on the blocking pool, so
    /// its analysis never holds a runtime worker other sessions need.
    ///
    /// Every statement is counted once it ended ([`Engine::observe`]).
    pub async fn run_statement<W: AsyncWrite + Unpin, P: Placement + Clone + Send + 'static>(
        &self,
        state: &mut SessionState,
        sql: &Bytes,
        placement: &mut P,
        more: bool,
        client: &mut FrameWriter<W>,
    ) -> io::Result<bool> {
        let started = Instant::now();
        let mut routed = Routed::default();
        state.statement_rows_sent = 0;
        let result = self
            .route_and_run(state, sql, placement, more, client, &mut routed)
            .await;
        self.observe(
            state,
            sql,
            &routed,
            started.elapsed(),
            client.last_was_error(),
        );
        result
    }

    /// [`Engine::run_statement`]'s work; `routed` gets what routing decided.
    async fn route_and_run<W: AsyncWrite + Unpin, P: Placement + Clone + Send + 'static>(
        &self,
        state: &mut SessionState,
        sql: &Bytes,
        placement: &mut P,
        more: bool,
        client: &mut FrameWriter<W>,
        routed: &mut Routed,
    ) -> io::Result<bool> {
        if let Some(error) = state.ended_while_idle.take() {
            if !is_plain_rollback(sql) {
                write_error(client, state.response_seq, &error).await?;
                state.response_seq = client.next_seq();
                return Ok(false);
            }
        }
        let mut waiting_since: Option<Instant> = None;
        loop {
            // The epoch is read before the topology (see PauseGate::enter).
            let epoch = self.pauses.epoch();
            let topology = self.topology_for(state);
            let limits = &topology.config.limits;
            // An execute's long values count as bound ([`super::long_values`]).
            let size = sql.len() as u64 + state.prepared.set_aside_bytes();
            if size > limits.max_statement_analysis_bytes {
                let error = ClientError::StatementTooLarge {
                    bytes: size,
                    limit: limits.max_statement_analysis_bytes,
                };
                write_error(client, state.response_seq, &error).await?;
                state.response_seq = client.next_seq();
                return Ok(false);
            }
            if size > limits.max_session_settings_bytes && records_whole_text(sql) {
                let error = ClientError::SessionLimit(format!(
                    "recording this SET would hold at least {size} bytes of SET statements, more than limits.max_session_settings_bytes ({}); refused before it was analysed",
                    limits.max_session_settings_bytes
                ));
                write_error(client, state.response_seq, &error).await?;
                state.response_seq = client.next_seq();
                return Ok(false);
            }
            state.route.max_tokens = limits.max_statement_tokens;
            state.route.autocommit = state.transaction.autocommit();
            state.route.in_transaction = state.transaction.is_open();
            let bound;
            let mut text = sql;
            let (plan, digest) = match state.prepared.route_binary(&topology, &state.route) {
                Some(Ok((plan, digest))) => (plan, Some(digest)),
                routed => {
                    if let Some(Err(whole)) = routed {
                        bound = whole;
                        text = &bound;
                    }
                    if size >= limits.blocking_analysis_bytes {
                        Box::pin(route_off_runtime(text, &topology, state.route, placement)).await
                    } else {
                        route_digested(text, &topology, &state.route, placement)
                    }
                }
            };
            let Some(plan) = state.prepared.splice_set_aside(plan) else {
                return Ok(false);
            };
            *routed = Routed::of(&plan, digest, &topology);
            if let Some(error) = self.fence.refusal(&plan, state.transaction.is_bound()) {
                routed.refused();
                write_error(client, state.response_seq, &error).await?;
                state.response_seq = client.next_seq();
                return Ok(false);
            }
            if matches!(&plan, Plan::Shard(query) if query.kind == StatementKind::SchemaChange) {
                // Before the pause gate: once committed, the schema change
                // waits there like any statement (the bound transaction's
                // exemption no longer covers it).
                let committed = Box::pin(self.commit_implicitly(&topology, state, client)).await;
                if committed.is_err() {
                    answer_failure(client, state.response_seq, committed).await?;
                    state.response_seq = client.next_seq();
                    return Ok(false);
                }
            }
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
                    let resumed = Box::pin(self.wait_for_resume(
                        &topology,
                        &paused,
                        &mut waiting_since,
                        &state.entry,
                    ))
                    .await;
                    if let Err(error) = resumed {
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
    /// holds one).
    fn admit(
        &self,
        topology: &Topology,
        state: &SessionState,
        plan: &Plan,
        epoch: u64,
    ) -> Result<ShardGuard, Blocked> {
        match plan {
            Plan::Shard(query) if !on_bound_shard(topology, state, query.target) => {
                let target = query.target;
                self.admit_shards(topology, state, [(target.fleet, target.shard)], epoch)
            }
            Plan::MultiShard(query) => self.admit_shards(
                topology,
                state,
                query
                    .parts
                    .iter()
                    .map(|part| (part.target.fleet, part.target.shard)),
                epoch,
            ),
            _ => Ok(ShardGuard::default()),
        }
    }

    /// Registers a statement on `shards` at the pause gate. The range that
    /// pauses the session's bound shard does not hold the session's other
    /// statements, since that pause is waiting for the session's
    /// transaction to end.
    pub(super) fn admit_shards(
        &self,
        topology: &Topology,
        state: &SessionState,
        shards: impl IntoIterator<Item = (FleetId, u32)>,
        epoch: u64,
    ) -> Result<ShardGuard, Blocked> {
        let exempt = state
            .transaction
            .bound()
            .map(|bound| (bound.fleet.as_str(), bound.target.shard));
        self.pauses.enter(topology, shards, epoch, exempt)
    }

    /// Waits for the RESUME of a paused shard, at most `pause.timeout_ms`
    /// after the statement first waited (`waiting_since`, set on its first
    /// wait), and no longer than a `KILL QUERY` of `session` (1317). The
    /// error says the statement did not run.
    pub(super) async fn wait_for_resume(
        &self,
        topology: &Topology,
        paused: &PausedShard,
        waiting_since: &mut Option<Instant>,
        session: &SessionEntry,
    ) -> Result<(), ClientError> {
        let since = *waiting_since.get_or_insert_with(Instant::now);
        let limit = Duration::from_millis(topology.config.pause.timeout_ms);
        tokio::select! {
            resumed = self.pauses.wait(paused, since + limit) => if resumed {
                return Ok(());
            },
            () = session.cancelled() => return Err(ClientError::QueryInterrupted),
        }
        Err(ClientError::ShardPaused {
            fleet: paused.fleet.clone(),
            shard: paused.shard,
            waited_ms: since.elapsed().as_millis(),
        })
    }

    /// Executes an admitted plan, answer queued, and moves the sequence id
    /// past it; whether it succeeded. The held connection goes back to the
    /// pool unless diagnostics use it, and a failure is answered with its
    /// error. A statement on one shard runs from here (the common path
    /// nests no further future); the other plans are boxed.
    async fn execute_admitted<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        plan: Plan,
        guard: ShardGuard,
        client: &mut FrameWriter<W>,
    ) -> io::Result<bool> {
        let held = state.held.take();
        // ROW_COUNT() after it: 0 after an OK the proxy writes, the OK's
        // affected rows after one a server sent (`run_shard`,
        // `run_anywhere`), -1 after a result set or an error.
        state.route.row_count = match &plan {
            Plan::Session(action) if !action.answers_rows() => 0,
            _ => -1,
        };
        let result = match plan {
            Plan::Diagnostics { sql, asked } => {
                Box::pin(self.run_diagnostics(topology, state, held, (&sql, &asked), client)).await
            }
            plan => {
                if let Some(conn) = held {
                    conn.release();
                }
                state.diagnostics_copy = None;
                match plan {
                    Plan::Shard(query) => {
                        self.run_shard(topology, state, query, guard, client).await
                    }
                    plan => Box::pin(self.run_plan(topology, state, plan, guard, client)).await,
                }
            }
        };
        if result.is_err() {
            answer_failure(client, state.response_seq, result).await?;
        }
        if client.last_was_error() {
            state.route.row_count = -1;
        }
        state.response_seq = client.next_seq();
        Ok(!client.last_was_error())
    }

    /// Runs a plan; `guard` (its shards' registration at the pause gate)
    /// lives until the statement is done, or moves into the transaction
    /// the statement binds. A statement on one shard runs from
    /// [`Engine::execute_admitted`], without this future.
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
            Plan::MultiShard(query) => {
                state.transaction.statement_on_shards();
                // A read over shards outside a transaction is the
                // transaction a pending `SET TRANSACTION` was for; its
                // parts run without it.
                state.transaction.multi_shard_read();
                self.run_multi_shard(topology, state, query, client).await
            }
            Plan::AnyHost { sql, .. } => self.run_anywhere(topology, state, &sql, client).await,
            Plan::Session(action) => self.run_session(topology, state, action, client).await,
            Plan::Diagnostics { sql, asked } => {
                self.run_diagnostics(topology, state, None, (&sql, &asked), client)
                    .await
            }
            Plan::Reject(error) => Err(Failure::Client(ClientError::Route(error))),
        }
    }

    /// Runs SHOW WARNINGS and the like on the connection that ran the
    /// previous statement (held, or the bound one); with neither, the
    /// proxy answers from the copy taken when the held connection was
    /// given up, or says the previous statement left nothing to show (a
    /// pooled connection may still carry another statement's warnings).
    async fn run_diagnostics<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        held: Option<PooledConn>,
        (sql, asked): (&[u8], &Diagnostics),
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let venue = match held {
            Some(conn) => Venue::Held(conn),
            None if state.transaction.ran_last_on_bound() => Venue::Bound,
            None => match asked {
                Diagnostics::Select {
                    fallback: Some(fallback),
                    ..
                } => return self.run_anywhere(topology, state, fallback, client).await,
                _ => {
                    let copy = state.diagnostics_copy.clone().unwrap_or_default();
                    return write_diagnostics(client, state, asked, &copy, show_limit(sql)).await;
                }
            },
        };
        self.run_on(topology, state, venue, Statement::plain(sql), client)
            .await
            .map(|_| ())
    }

    /// Runs a single-shard statement where [`Engine::venue_for`] says, and
    /// remembers the 64-bit ID an object INSERT composed.
    async fn run_shard<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        query: ShardQuery,
        guard: ShardGuard,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        start_on_shards(state, &query);
        let composer = query.compose_insert_id.map(|type_id| InsertIdComposer {
            shard: query.target.shard,
            type_id,
            table: object_table_name(topology, query.target.fleet, type_id),
        });
        let schema_change = query.kind == StatementKind::SchemaChange;
        let link = match (&query.local_infile, &state.client_file) {
            (None, _) => None,
            (Some(_), Some(link)) => Some(link.clone()),
            (Some(_), None) => return Err(Failure::Client(ClientError::LocalInfileDisabled)),
        };
        let local_infile = match (&query.local_infile, &link) {
            (Some(name), Some(link)) => Some(LocalInfile { name, link }),
            _ => None,
        };
        // A user variable or lock it leaves on the connection must not
        // reach the next session that uses it: reset first.
        let stamp = query.leaves_session_state.then_some(DIRTY);
        // Outside a transaction the statement is the transaction a pending
        // `SET TRANSACTION` is for, as on a server.
        // It stays pending until it is sent (`Engine::send_prelude`).
        let prelude = state.transaction.next_for_autocommit();
        let (venue, _guard) = self.venue_for(topology, state, &query, guard).await?;
        let binary = state.prepared.take_binary();
        let outcome = self
            .run_on(
                topology,
                state,
                venue,
                Statement {
                    target: Some(query.target),
                    sql: &query.sql,
                    composer,
                    stamp,
                    prelude,
                    local_infile,
                    server_prepared: true,
                    binary: binary.as_deref(),
                },
                client,
            )
            .await;
        if schema_change {
            // Whatever the outcome, the table's columns may have changed.
            topology.columns.request_refresh();
        }
        let outcome = outcome?;
        if let Some(id) = outcome.last_insert_id {
            state.route.last_insert_id = id;
        }
        remember_row_count(state, &outcome);
        Ok(())
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
            server_prepared: true,
            ..Statement::plain(sql)
        };
        let outcome = self
            .run_on(topology, state, venue, statement, client)
            .await?;
        remember_row_count(state, &outcome);
        Ok(())
    }

    /// Carries out what the proxy answers itself (`USE`, transactions,
    /// `SET`, savepoints, `SELECT DATABASE()`, `SELECT LAST_INSERT_ID()`).
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
            SessionAction::Begin { sql } => self.begin(topology, state, sql, client).await,
            SessionAction::Commit => {
                self.end_transaction(topology, state, "COMMIT", client, true)
                    .await
            }
            SessionAction::Rollback => {
                self.end_transaction(topology, state, "ROLLBACK", client, true)
                    .await
            }
            SessionAction::SetAutocommit(on) => {
                self.set_autocommit(topology, state, on, client).await
            }
            SessionAction::SetSession {
                variables,
                sql,
                autocommit,
                computed,
                writes_through_function,
                evaluates,
            } => {
                if writes_through_function {
                    return Err(set_refused(SET_WRITES_REFUSED));
                }
                let sql = recorded_text(sql)?;
                check_combined_autocommit(state, autocommit)?;
                let undo = match autocommit {
                    Some(on) => Some(self.apply_autocommit(topology, state, on, client).await?),
                    None => None,
                };
                let done = self
                    .set_session(
                        topology,
                        state,
                        (variables, sql, computed, evaluates),
                        client,
                    )
                    .await;
                if let (false, Some(undo)) = (matches!(done, Ok(true)), undo) {
                    state.transaction.undo_autocommit(undo);
                }
                done.map(|_| ())
            }
            SessionAction::SetNextTransaction { sql } => {
                self.set_next_transaction(state, sql, client).await
            }
            SessionAction::SelectSessionValues { columns } => {
                let flag = |on: bool| Some(if on { b"1".to_vec() } else { b"0".to_vec() });
                let row = columns
                    .iter()
                    .map(|(_, value)| match value {
                        SessionValue::Autocommit => flag(state.transaction.autocommit()),
                        SessionValue::InTransaction => flag(state.transaction.is_open()),
                    })
                    .collect();
                let names: Vec<(&str, LocalColumnType)> = columns
                    .iter()
                    .map(|(name, _)| (name.as_str(), LocalColumnType::BigInt))
                    .collect();
                write_local_result(client, state, &names, vec![row]).await
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
                if state.transaction.is_bound() {
                    self.run_on(
                        topology,
                        state,
                        Venue::Bound,
                        Statement::plain(&sql),
                        client,
                    )
                    .await
                    .map(|_| ())
                } else if state.transaction.in_transaction() {
                    let sql = recorded_text(sql)?;
                    state
                        .transaction
                        .add_savepoint(sql)
                        .map_err(transition_failure)?;
                    write_ok(client, state).await
                } else {
                    self.run_anywhere(topology, state, &sql, client).await
                }
            }
            action @ (SessionAction::SelectConnectionId { .. }
            | SessionAction::SelectVersion { .. }
            | SessionAction::ProcessList { .. }
            | SessionAction::Kill { .. }) => {
                self.run_proxy_info(topology, state, action, client).await
            }
            SessionAction::SelectLastInsertId { column } => {
                let id = state.route.last_insert_id.to_string();
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

    /// Runs a SET on a backend (so the server validates it), then records it
    /// for replay on the session's later connections, and reads back how
    /// the server will now read the session's statements (`sql_mode`,
    /// `character_set_client`), on the connection the SET ran on. A SET
    /// whose value is `computed` from the session is recorded as the
    /// values that server computed (read back there,
    /// [`lex_state::read_replay`]), so no connection evaluates it again;
    /// one whose values cannot be read back so is recorded as written. A
    /// SET that would take the recorded list past
    /// `limits.max_session_settings` or `limits.max_session_settings_bytes`
    /// is refused before it runs. A SET whose value reads a shard
    /// database runs on that shard (on the bound connection when the
    /// session's transaction is bound there); one whose value calls a
    /// function or runs a subquery must be replayed by value, or it is
    /// refused and its connection closed (it may not run again elsewhere).
    /// Returns whether the server took it.
    async fn set_session<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        (variables, sql, computed, evaluates): (Vec<String>, String, bool, SetEvaluation),
        client: &mut FrameWriter<W>,
    ) -> Result<bool, Failure> {
        let limits = SettingsLimits::from_config(&topology.config.limits);
        let sets_wait_timeout = variables.iter().any(|name| name == "wait_timeout");
        let as_written = state
            .settings
            .with(variables.clone(), sql.clone(), limits)
            .map_err(Failure::Client)?;
        // The SET's own connection: the bound one, or a pooled one kept
        // until its values are read back.
        let venue = match (evaluates.shard, state.transaction.bound()) {
            (Some(target), Some(_)) if on_bound_shard(topology, state, target) => Venue::Bound,
            (Some(_), Some(_)) => return Err(set_refused(SET_OTHER_SHARD_REFUSED)),
            (Some(_), None) if evaluates.locking && state.transaction.is_open() => {
                return Err(set_refused(SET_LOCKING_REFUSED))
            }
            (Some(target), None) => {
                let Some(host) = topology.hosts.get(target.host) else {
                    return Err(Failure::Client(ClientError::Internal(format!(
                        "shard {} has no host in the topology",
                        target.shard
                    ))));
                };
                let pool = self.backends.pool(&host.addr);
                Venue::Held(self.checkout(topology, &pool, Some(target), state).await?)
            }
            (None, Some(_)) => Venue::Bound,
            (None, None) => Venue::Held(self.checkout_any(topology, state).await?),
        };
        let statement = Statement {
            stamp: Some(as_written.fingerprint()),
            ..Statement::plain(sql.as_bytes())
        };
        let outcome = self
            .run_on(topology, state, venue, statement, client)
            .await?;
        if outcome.failed {
            return Ok(false);
        }
        let mut pooled = state.held.take();
        let conn = match (pooled.as_mut(), state.transaction.bound_mut()) {
            (Some(conn), _) => conn,
            (None, Some(bound)) => &mut bound.conn,
            (None, None) => return Err(unknown_lex_state("the connection is gone".to_owned())),
        };
        let read = async {
            let replay = match computed {
                true => lex_state::read_replay(conn.conn(), &variables).await?,
                false => None,
            };
            Ok::<_, String>((replay, lex_state::read_lex_state(conn.conn()).await?))
        }
        .await;
        let (replay, lex) = match read {
            Ok(read) => read,
            Err(reason) => {
                if let Some(conn) = pooled {
                    conn.discard_broken();
                }
                return Err(unknown_lex_state(reason));
            }
        };
        let by_value =
            replay.and_then(|replay| state.settings.with(variables, replay, limits).ok());
        let next = match by_value {
            Some(next) => next,
            None if computed && (evaluates.calls || evaluates.shard.is_some()) => {
                // It ran once; its effects and values stay off the
                // session's connections.
                conn.conn().settings_fingerprint = DIRTY;
                if let Some(conn) = pooled {
                    conn.discard_broken();
                }
                return Err(set_refused(SET_NOT_BY_VALUE_REFUSED));
            }
            None => as_written,
        };
        conn.conn().settings_fingerprint = next.fingerprint();
        conn.conn().statement_timeout_ms = u64::MAX;
        if let Some(conn) = pooled {
            if outcome.warnings > 0 {
                state.held = Some(conn);
            } else {
                conn.release();
            }
        }
        state.settings = next;
        state.set_server_lex_state(&lex.sql_mode, &lex.character_set_client);
        if sets_wait_timeout {
            if let Some(seconds) = lex.wait_timeout {
                state.wait_timeout = Some(Duration::from_secs(seconds));
            }
        }
        Ok(true)
    }

    /// A connection from the first master's pool that gives one, in the
    /// order a statement any master can answer tries them, with the
    /// session's settings.
    async fn checkout_any(
        &self,
        topology: &Topology,
        state: &SessionState,
    ) -> Result<PooledConn, Failure> {
        let pools = self.any_pools(topology, state)?;
        self.checkout_first(topology, state, &pools, None).await
    }
}

/// Why a SET whose value calls a function that writes is refused.
const SET_WRITES_REFUSED: &str = "a SET whose value calls a function that writes (GET_LOCK, RELEASE_LOCK, NEXTVAL, SETVAL, a stored function, ...): shardgate gives a SET's values to every backend connection of the session, and the function's effect would stay on one pooled connection; call the function in a statement of its own and SET the variable to the value it returned";

/// Why a SET reading another shard inside a bound transaction is refused.
const SET_OTHER_SHARD_REFUSED: &str = "a SET whose value reads a shard database other than the one the open transaction is bound to: the transaction's connection cannot read it; read the value with a SELECT and SET the variable to it";

/// Why a SET whose subquery takes row locks is refused in a transaction
/// not bound to its shard.
const SET_LOCKING_REFUSED: &str = "a SET whose subquery takes row locks (FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE) in a transaction not bound to its shard: the locks would be released at once; run the locking SELECT first (it binds the transaction) and SET the variable to its value";

/// Why a SET that cannot be replayed by value is refused.
const SET_NOT_BY_VALUE_REFUSED: &str = "a SET whose value calls a function or reads a table, of a variable whose value shardgate cannot read back (a quoted name, timestamp, insert_id, ...): it would run again on every backend connection of the session; use a plain variable name, or SET it to the value as a literal";

/// A SET refused before (or instead of) being recorded.
fn set_refused(reason: &str) -> Failure {
    Failure::Client(ClientError::Route(RouteError::Unsupported(
        reason.to_owned(),
    )))
}

/// Without the session's `sql_mode` and character set as the server has
/// them after a SET, the proxy cannot know how the server reads the
/// session's text: the session ends.
/// What a statement on one shard does to the session's transaction before
/// it runs: the server commits implicitly before and after a schema change
/// (`Engine::commit_implicitly` ran before it was admitted), so no
/// transaction is open once it ran.
fn start_on_shards(state: &mut SessionState, query: &ShardQuery) {
    if query.kind == StatementKind::SchemaChange {
        state.transaction.end_unbound();
    } else {
        state.transaction.statement_on_shards();
    }
}

/// What `ROW_COUNT()` reads after a statement a server answered with an OK.
fn remember_row_count(state: &mut SessionState, outcome: &RelayOutcome) {
    if let Some(rows) = outcome.affected_rows {
        state.route.row_count = i64::try_from(rows).unwrap_or(i64::MAX);
    }
    state.statement_rows_sent += outcome.rows;
}

fn unknown_lex_state(reason: String) -> Failure {
    Failure::Io(io::Error::other(format!(
        "shardgate could not read the session's sql_mode and character set after a SET: {reason}"
    )))
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

/// Routes a large statement on the blocking pool (the text shared, not
/// copied; a copy of the placement policy, which comes back with its
/// state).
async fn route_off_runtime<P: Placement + Clone + Send + 'static>(
    sql: &Bytes,
    topology: &Arc<Topology>,
    context: RouteContext,
    placement: &mut P,
) -> (Plan, Option<u64>) {
    let sql = sql.clone();
    let topology = Arc::clone(topology);
    let mut policy = placement.clone();
    let routed = tokio::task::spawn_blocking(move || {
        let (plan, digest) = route_digested(&sql, &topology, &context, &mut policy);
        (plan, digest, policy)
    })
    .await;
    match routed {
        Ok((plan, digest, policy)) => {
            *placement = policy;
            (plan, digest)
        }
        Err(error) => (
            Plan::Reject(RouteError::Unsupported(format!(
                "shardgate could not analyse the statement: {error}"
            ))),
            None,
        ),
    }
}

/// Whether `sql` is `ROLLBACK [WORK]` alone (a client that already knows
/// its transaction failed, answered OK after the proxy ended it).
fn is_plain_rollback(sql: &[u8]) -> bool {
    let text = sql.trim_ascii();
    let text = text.strip_suffix(b";").unwrap_or(text);
    let words: Vec<&[u8]> = text
        .split(u8::is_ascii_whitespace)
        .filter(|word| !word.is_empty())
        .collect();
    match words.as_slice() {
        [rollback] => rollback.eq_ignore_ascii_case(b"ROLLBACK"),
        [rollback, work] => {
            rollback.eq_ignore_ascii_case(b"ROLLBACK") && work.eq_ignore_ascii_case(b"WORK")
        }
        _ => false,
    }
}

/// The answer to a diagnostics statement from `copy` (the default when the
/// previous statement left no warnings and no error: no rows, counts of 0);
/// `limit` is a `SHOW WARNINGS|ERRORS` list's `LIMIT`.
async fn write_diagnostics<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    state: &SessionState,
    asked: &Diagnostics,
    copy: &DiagnosticsCopy,
    limit: Option<(usize, usize)>,
) -> Result<(), Failure> {
    let (count_column, area) = match asked {
        Diagnostics::List(area) => {
            let columns = [
                ("Level", LocalColumnType::Text),
                ("Code", LocalColumnType::UnsignedBigInt),
                ("Message", LocalColumnType::Text),
            ];
            return write_local_result(client, state, &columns, copy.list(*area, limit)).await;
        }
        Diagnostics::Count(area @ DiagnosticsArea::Warnings) => ("@@session.warning_count", area),
        Diagnostics::Count(area @ DiagnosticsArea::Errors) => ("@@session.error_count", area),
        Diagnostics::Select { columns, .. } => {
            let (names, row): (Vec<_>, Vec<_>) = columns
                .iter()
                .map(|column| {
                    let (kind, value) = match &column.value {
                        DiagnosticsValue::Count(area) => (
                            LocalColumnType::UnsignedBigInt,
                            Some(copy.count(*area).to_string().into_bytes()),
                        ),
                        DiagnosticsValue::Number(n) if n.parse::<i64>().is_ok() => {
                            (LocalColumnType::BigInt, Some(n.as_bytes().to_vec()))
                        }
                        DiagnosticsValue::Number(text) | DiagnosticsValue::Text(text) => {
                            (LocalColumnType::Text, Some(text.as_bytes().to_vec()))
                        }
                        DiagnosticsValue::Null | DiagnosticsValue::Variable => {
                            (LocalColumnType::Text, None)
                        }
                    };
                    ((column.name.as_str(), kind), value)
                })
                .unzip();
            return write_local_result(client, state, &names, vec![row]).await;
        }
    };
    write_single_value(
        client,
        state,
        count_column,
        LocalColumnType::UnsignedBigInt,
        Some(copy.count(*area).to_string().as_bytes()),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::is_plain_rollback;

    #[test]
    fn plain_rollbacks_are_told_from_other_statements() {
        for sql in ["ROLLBACK", " rollback ;", "ROLLBACK\tWORK;"] {
            assert!(is_plain_rollback(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "ROLLBACK TO s1",
            "COMMIT",
            "ROLLBACK WORK AND CHAIN",
            "SELECT 1",
        ] {
            assert!(!is_plain_rollback(sql.as_bytes()), "{sql}");
        }
    }
}
