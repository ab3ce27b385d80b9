//! Multi-shard reads: runs a [`MultiShardQuery`]'s parts concurrently
//! (at most [`FANOUT_CONCURRENCY`] in flight per client statement, each
//! bounded by `limits.multi_shard_part_timeout_ms`), then merges their rows (`engine::merge`:
//! concatenated, in order by a k-way merge of the sorted parts, or
//! aggregated; then OFFSET/LIMIT) and answers with one result set.
//!
//! Parts are buffered before merging (a LIMIT bounds each part to
//! `offset + limit` rows). What a merge holds is counted as it arrives,
//! packet by packet, against `limits.max_merge_bytes` ([`MergeBudget`]):
//! each part's text and task, its column definitions (kept for one part
//! only), and its decoded rows (the largest once more: it is briefly held
//! twice); past the limit the statement fails with an error that says so
//! rather than exhausting memory. The same bytes are taken from the
//! process's budget for all merges, `limits.max_merge_bytes_total`; a read
//! that finds it spent fails at once (1105) rather than wait. The session's
//! settings are shared by the parts, not copied.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_common::constants::{ColumnFlags, ColumnType};
use tokio::io::AsyncWrite;
use tokio::task::JoinSet;
use tracing::debug;

use super::answer::write_result_set;
use super::checkout::{apply_settings, checkout_error, checkout_open, DIRTY};
use super::direct::{start_direct, Keep};
use super::failure::{backend_error, Failure};
use super::kill::kill_abandoned;
use super::merge::{
    compared_text_columns, decode_text_row, general_ci_exact, is_general_ci, merge_rows,
    merges_exactly, RowFormat, Value,
};
use super::session_state::SessionSettings;
use super::sessions::SessionEntry;
use super::transaction::on_bound_shard;
use super::{Engine, SessionState};
use crate::backend::{ConnKey, HostPool, PoolShare};
use crate::error::ClientError;
use crate::protocol::binary::{
    binary_row_values, parse_column_definition, text_row_to_binary, ColumnInfo,
};
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::{ends_result_set, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER};
use crate::protocol::FrameWriter;
use crate::router::{MultiShardQuery, RouteError, Target};
use crate::topology::config::BackendConfig;
use crate::topology::Topology;
use mysql_common::constants::Command;

/// Most backend statements in flight for one client statement.
pub const FANOUT_CONCURRENCY: usize = 32;
/// What one part costs before it holds anything: its task, its job and
/// its slot in the results (its text is counted by length).
const PART_OVERHEAD: u64 = 1024;
/// What one buffered row costs besides its values' bytes: its vector.
const ROW_OVERHEAD: u64 = 64;
/// What one buffered value costs besides its bytes: its slot and its
/// allocation.
const VALUE_OVERHEAD: u64 = (std::mem::size_of::<Value>() + 16) as u64;
/// What one column definition costs besides its bytes: its slot and its
/// parsed form.
const COLUMN_OVERHEAD: u64 =
    (std::mem::size_of::<Vec<u8>>() + std::mem::size_of::<ColumnInfo>()) as u64;

/// The bytes one multi-shard read may hold (`limits.max_merge_bytes`),
/// shared by its parts and counted as they read, taken from the process's
/// budget for all merges (`limits.max_merge_bytes_total`, [`Engine`]'s
/// `merge_bytes`) and given back there when the read is done.
pub(crate) struct MergeBudget {
    held: AtomicU64,
    limit: u64,
    process: Arc<AtomicU64>,
    process_limit: u64,
}

impl MergeBudget {
    fn new(limit: u64, process: Arc<AtomicU64>, process_limit: u64) -> Self {
        Self {
            held: AtomicU64::new(0),
            limit,
            process,
            process_limit,
        }
    }

    /// Counts `bytes` more; fails past the statement's limit or the
    /// process's, having taken nothing.
    fn take(&self, bytes: u64) -> Result<(), ClientError> {
        let held = self.held.fetch_add(bytes, AtomicOrdering::Relaxed) + bytes;
        if held > self.limit {
            self.held.fetch_sub(bytes, AtomicOrdering::Relaxed);
            return Err(ClientError::MergeTooLarge(self.limit));
        }
        let total = self.process.fetch_add(bytes, AtomicOrdering::Relaxed) + bytes;
        if total > self.process_limit {
            self.process.fetch_sub(bytes, AtomicOrdering::Relaxed);
            self.held.fetch_sub(bytes, AtomicOrdering::Relaxed);
            return Err(ClientError::MergeBudgetExhausted(self.process_limit));
        }
        Ok(())
    }

    /// Counts `bytes` freed.
    fn give_back(&self, bytes: u64) {
        self.held.fetch_sub(bytes, AtomicOrdering::Relaxed);
        self.process.fetch_sub(bytes, AtomicOrdering::Relaxed);
    }

    /// Bytes held now.
    fn held(&self) -> u64 {
        self.held.load(AtomicOrdering::Relaxed)
    }
}

impl Drop for MergeBudget {
    fn drop(&mut self) {
        self.process
            .fetch_sub(*self.held.get_mut(), AtomicOrdering::Relaxed);
    }
}

/// What one shard answered.
struct PartResult {
    /// Column definition payloads, as the server sent them.
    definitions: Vec<Vec<u8>>,
    /// Their parsed types, for comparisons and binary rows.
    columns: Vec<ColumnInfo>,
    /// What `definitions` and `columns` were counted as.
    definition_bytes: u64,
    /// The rows, decoded into values of the read's [`RowFormat`].
    rows: Vec<Vec<Value>>,
}

/// Everything a part's task needs, owned (the settings shared).
struct PartJob {
    shard: u32,
    fleet: String,
    pool: Arc<HostPool>,
    key: ConnKey,
    settings: Arc<SessionSettings>,
    sql: crate::router::SqlText,
    /// Binary for a prepared statement's execute: the part runs as a
    /// directly executed prepared statement and keeps the server's
    /// binary values.
    format: RowFormat,
    /// `limits.backend_prepared_statements`.
    keep: usize,
    budget: Arc<MergeBudget>,
    /// The session's share of the pools, and `limits.max_host_share_percent`.
    share: Arc<PoolShare>,
    share_percent: u32,
    /// `limits.statement_timeout_ms`.
    statement_timeout_ms: u64,
    /// `limits.multi_shard_part_timeout_ms` (0: none).
    part_timeout_ms: u64,
    /// The backend account, to kill a part that ran past its time.
    backend: Arc<BackendConfig>,
    /// The session, which lists the part's connection while it runs.
    session: Arc<SessionEntry>,
    /// The part leaves session state on its connection
    /// ([`crate::router::ShardQuery::leaves_session_state`]).
    leaves_session_state: bool,
}

impl Engine {
    /// Runs a multi-shard read and writes the merged result.
    pub(crate) async fn run_multi_shard<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        query: MultiShardQuery,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let MultiShardQuery { parts, merge } = query;
        let probe = parts.first().map(|part| (part.target, part.sql.0.clone()));
        debug!(parts = parts.len(), ?merge, "multi-shard read");
        let limits = &topology.config.limits;
        let budget = Arc::new(MergeBudget::new(
            limits.max_merge_bytes,
            Arc::clone(&self.merge_bytes),
            limits.max_merge_bytes_total,
        ));
        let texts: u64 = parts
            .iter()
            .map(|part| part.sql.len() as u64 + PART_OVERHEAD)
            .sum();
        budget.take(texts).map_err(Failure::Client)?;
        let settings = Arc::new(state.settings.clone());
        let backend = Arc::new(topology.config.backend.clone());
        let format = if state.binary_rows {
            RowFormat::Binary
        } else {
            RowFormat::Text
        };
        let count = parts.len();
        // The bound transaction's shard answers on the bound connection, so
        // the read sees the transaction's own writes there; the others run
        // on pooled connections.
        let (on_bound, pooled): (Vec<_>, Vec<_>) = parts
            .into_iter()
            .enumerate()
            .partition(|(_, part)| on_bound_shard(topology, state, part.target));
        let (conn_key, share, entry) = (
            state.conn_key,
            Arc::clone(&state.share),
            Arc::clone(&state.entry),
        );
        // Parts start as others finish, at most FANOUT_CONCURRENCY at once:
        // no task (and its future's state) exists for a part not running.
        let mut waiting = pooled.into_iter();
        let mut tasks = JoinSet::new();
        let mut start_next = |tasks: &mut JoinSet<_>| -> Result<(), Failure> {
            let Some((index, part)) = waiting.next() else {
                return Ok(());
            };
            debug!(shard = part.target.shard, sql = %part.sql, "multi-shard part");
            let Some(host) = topology.hosts.get(part.target.host) else {
                return Err(Failure::Client(ClientError::Internal(format!(
                    "shard {} has no host in the topology",
                    part.target.shard
                ))));
            };
            let job = PartJob {
                shard: part.target.shard,
                fleet: topology
                    .fleets
                    .get(part.target.fleet)
                    .map(|f| f.name.clone())
                    .unwrap_or_default(),
                pool: self.backends.pool(&host.addr),
                key: conn_key,
                settings: Arc::clone(&settings),
                sql: part.sql,
                format,
                keep: topology.config.limits.backend_prepared_statements,
                leaves_session_state: part.leaves_session_state,
                budget: Arc::clone(&budget),
                share: Arc::clone(&share),
                share_percent: topology.config.limits.max_host_share_percent,
                statement_timeout_ms: topology.config.limits.statement_timeout_ms,
                part_timeout_ms: topology.config.limits.multi_shard_part_timeout_ms,
                backend: Arc::clone(&backend),
                session: Arc::clone(&entry),
            };
            tasks.spawn(async move { (index, run_part(job).await) });
            Ok(())
        };
        for _ in 0..FANOUT_CONCURRENCY {
            start_next(&mut tasks)?;
        }
        let mut results: Vec<Option<PartResult>> = Vec::new();
        results.resize_with(count, || None);
        let mut shape: Option<(Vec<Vec<u8>>, Vec<ColumnInfo>)> = None;
        for (index, part) in on_bound {
            let outcome = self
                .run_bound_part(topology, state, part, &budget, format)
                .await;
            let mut result = match outcome {
                Ok(result) => result,
                Err(failure) => {
                    self.cancel_statement(topology, &state.entry).await;
                    return Err(failure);
                }
            };
            shape = Some((
                std::mem::take(&mut result.definitions),
                std::mem::take(&mut result.columns),
            ));
            if let Some(slot) = results.get_mut(index) {
                *slot = Some(result);
            }
        }
        while let Some(joined) = tasks.join_next().await {
            let (index, outcome) = joined.map_err(|error| {
                Failure::Client(ClientError::Internal(format!(
                    "a multi-shard part failed: {error}"
                )))
            })?;
            let mut result = match outcome {
                Ok(result) => result,
                Err(error) => {
                    // The other parts still run on their servers: killed,
                    // not left running behind closed connections.
                    self.cancel_statement(topology, &state.entry).await;
                    return Err(Failure::Client(error));
                }
            };
            start_next(&mut tasks)?;
            // One part's column definitions describe them all.
            let definitions = std::mem::take(&mut result.definitions);
            let columns = std::mem::take(&mut result.columns);
            if shape.is_none() {
                shape = Some((definitions, columns));
            } else {
                budget.give_back(result.definition_bytes);
            }
            if let Some(slot) = results.get_mut(index) {
                *slot = Some(result);
            }
        }
        debug!(held = budget.held(), "multi-shard parts read");
        let parts: Vec<PartResult> = results.into_iter().flatten().collect();
        let Some((definitions, columns)) = shape else {
            return Err(Failure::Client(ClientError::Internal(
                "a multi-shard read with no parts".to_owned(),
            )));
        };
        let compared = compared_text_columns(&merge, &columns);
        let mut collated = columns.clone();
        if let (false, Some((target, sql))) = (compared.is_empty(), probe) {
            let collations = self.read_collations(topology, state, target, &sql).await?;
            if collations.len() != columns.len() {
                return Err(collation_refused(format!(
                    "it read {} columns where the parts have {}",
                    collations.len(),
                    columns.len()
                )));
            }
            for &i in &compared {
                if !merges_exactly(collations[i]) {
                    let name = column_name(&definitions[i]);
                    return Err(Failure::Client(ClientError::Route(RouteError::Unsupported(
                        format!(
                            "a multi-shard ORDER BY, MIN or MAX over `{name}`, whose collation (id {}) shardgate does not merge in the server's order (it merges binary, the _bin collations of utf8mb4/utf8mb3/ascii and utf8mb4/utf8mb3_general_ci); select `{name}` with COLLATE utf8mb4_bin or utf8mb4_general_ci and sort by that, or read one shard at a time",
                            collations[i]
                        ),
                    ))));
                }
            }
            for &i in compared.iter().filter(|&&i| is_general_ci(collations[i])) {
                let inexact = parts
                    .iter()
                    .flat_map(|part| &part.rows)
                    .filter_map(|row| row.get(i).and_then(Option::as_deref))
                    .any(|value| !general_ci_exact(value));
                if inexact {
                    let name = column_name(&definitions[i]);
                    return Err(Failure::Client(ClientError::Route(RouteError::Unsupported(
                        format!(
                            "a multi-shard ORDER BY, MIN or MAX over `{name}` in utf8mb4_general_ci with characters whose general_ci weight shardgate does not know (it knows Latin-1, Latin Extended-A, CJK and others; not Latin Extended-B, Greek or Cyrillic); select `{name}` with COLLATE utf8mb4_bin and sort by that, or read one shard at a time"
                        ),
                    ))));
                }
            }
            for (column, collation) in collated.iter_mut().zip(collations) {
                column.charset = collation;
            }
        }
        let parts = parts.into_iter().map(|part| part.rows).collect();
        let rows = merge_rows(parts, &collated, &merge, format);
        let sent = rows.len() as u64;
        let visible = columns.len().saturating_sub(merge.hidden_columns);
        let written = write_result_set(
            client,
            state,
            &definitions[..visible],
            &columns[..visible],
            rows,
            format,
        )
        .await;
        state.statement_rows_sent += sent;
        written
    }
}

impl Engine {
    /// Runs the part of a multi-shard read on the session's bound shard on
    /// the bound connection, inside the transaction, within
    /// `limits.multi_shard_part_timeout_ms` and the merge budget. Over the
    /// budget, the rest of its result is read and dropped so the
    /// transaction stays usable; a server error leaves the transaction as
    /// the server left it (a deadlock ends it). A part that runs past its
    /// time, or whose connection fails, loses the connection and with it
    /// the transaction, and the error says so.
    async fn run_bound_part(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        part: crate::router::ShardQuery,
        budget: &MergeBudget,
        format: RowFormat,
    ) -> Result<PartResult, Failure> {
        debug!(shard = part.target.shard, sql = %part.sql, "multi-shard part on the bound connection");
        if state.entry.is_cancelled() {
            return Err(Failure::Client(ClientError::QueryInterrupted));
        }
        let entry = Arc::clone(&state.entry);
        let Some(bound) = state.transaction.run_on_bound() else {
            return Err(Failure::Client(ClientError::Transaction(
                "no transaction is bound".to_owned(),
            )));
        };
        let pool = Arc::clone(bound.conn.pool());
        let conn = bound.conn.conn();
        if part.leaves_session_state {
            conn.settings_fingerprint = DIRTY;
        }
        let thread = conn.thread_id;
        let started = Instant::now();
        let in_use = entry.using(&pool, thread);
        let part_timeout_ms = topology.config.limits.multi_shard_part_timeout_ms;
        let keep = Keep::on(&pool, topology.config.limits.backend_prepared_statements);
        let read = read_part(conn, &part.sql, budget, true, (format, keep));
        let result = if part_timeout_ms == 0 {
            Some(read.await)
        } else {
            tokio::time::timeout(Duration::from_millis(part_timeout_ms), read)
                .await
                .ok()
        };
        if in_use.finish() {
            conn.kill_aimed = true;
        }
        pool.statements
            .record(started.elapsed(), !matches!(result, Some(Ok(Ok(_)))));
        let fleet = bound.fleet.clone();
        let lost = |state: &mut SessionState, reason: String| {
            if let Some(bound) = state.transaction.lose_binding() {
                bound.conn.discard_broken();
            }
            Failure::Client(ClientError::BackendLost {
                host: pool.addr.clone(),
                reason: format!("{reason}; the open transaction was rolled back by the server"),
            })
        };
        match result {
            Some(Ok(Ok(result))) => Ok(result),
            Some(Ok(Err(
                error @ (ClientError::MergeTooLarge(_) | ClientError::MergeBudgetExhausted(_)),
            ))) => Err(Failure::Client(error)),
            Some(Ok(Err(error))) => {
                let error =
                    super::relay::explain_backend_error(conn, error, part.target.shard).await;
                super::venue::settle_failed_in_transaction(state).await;
                Err(Failure::Client(error))
            }
            Some(Err(error)) => Err(lost(state, format!("connection lost: {error}"))),
            None => {
                kill_abandoned(Arc::new(topology.config.backend.clone()), &pool, thread);
                Err(lost(
                    state,
                    format!(
                        "shard {} of fleet {fleet} did not finish its part of a multi-shard read on the transaction's connection within limits.multi_shard_part_timeout_ms ({part_timeout_ms} ms); the statement was cancelled and the connection closed",
                        part.target.shard
                    ),
                ))
            }
        }
    }
}

impl Engine {
    /// The collation ids of a multi-shard read's columns as the server has
    /// them (a column definition names the client's result character set
    /// instead): the part's text as a derived table, `LIMIT 0` (nothing
    /// runs), with `character_set_results` NULL for that statement only, on
    /// a pooled connection to the part's host.
    async fn read_collations(
        &self,
        topology: &Topology,
        state: &SessionState,
        target: Target,
        sql: &[u8],
    ) -> Result<Vec<u16>, Failure> {
        let Some(host) = topology.hosts.get(target.host) else {
            return Err(collation_refused("the shard has no host".to_owned()));
        };
        let pool = self.backends.pool(&host.addr);
        let mut conn = self.checkout(topology, &pool, Some(target), state).await?;
        let mut probe = b"SET STATEMENT character_set_results = NULL FOR SELECT * FROM (".to_vec();
        probe.extend_from_slice(sql);
        probe.extend_from_slice(b"\n) AS shardgate_collations LIMIT 0");
        match read_definitions(conn.conn(), &probe).await {
            Ok(Ok(collations)) => {
                conn.release();
                Ok(collations)
            }
            Ok(Err(reason)) => {
                conn.release();
                Err(collation_refused(reason))
            }
            Err(error) => {
                conn.discard_broken();
                Err(collation_refused(format!("connection lost: {error}")))
            }
        }
    }
}

/// A merge refused because the columns' collations could not be read.
fn collation_refused(reason: String) -> Failure {
    Failure::Client(ClientError::Route(RouteError::Unsupported(format!(
        "a multi-shard ORDER BY, MIN or MAX over text: shardgate could not read the columns' collations ({reason}); give the selected columns distinct names, or read one shard at a time"
    ))))
}

/// Sends `sql` and returns the collation ids of its result's columns (it
/// returns no rows). The inner error is the server's answer.
async fn read_definitions(
    conn: &mut crate::backend::BackendConn,
    sql: &[u8],
) -> std::io::Result<Result<Vec<u16>, String>> {
    conn.send_command(Command::COM_QUERY, sql).await?;
    let deprecate_eof = conn
        .key
        .framing
        .contains(mysql_common::constants::CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let (_, first) = conn.reader.next_packet().await?;
    match first.first() {
        Some(&ERR_HEADER) => return Ok(Err(backend_error(&first).to_string())),
        Some(&OK_HEADER) | Some(&LOCAL_INFILE_HEADER) | None => {
            return Ok(Err("no result set".to_owned()))
        }
        _ => {}
    }
    let count = read_lenenc_int(&mut first.as_slice()).unwrap_or(0);
    let mut collations = Vec::new();
    for _ in 0..count {
        let (_, definition) = conn.reader.next_packet().await?;
        collations.push(parse_column_definition(&definition).map_or(0, |c| c.charset));
    }
    if !deprecate_eof {
        conn.reader.next_packet().await?;
    }
    loop {
        let (_, packet) = conn.reader.next_packet().await?;
        if packet.first() == Some(&ERR_HEADER) {
            return Ok(Err(backend_error(&packet).to_string()));
        }
        if ends_result_set(&packet, deprecate_eof) {
            return Ok(Ok(collations));
        }
    }
}

/// The name of a column, from its definition (the fifth length-encoded
/// string), for messages.
fn column_name(definition: &[u8]) -> String {
    let mut rest = definition;
    for _ in 0..4 {
        let len = read_lenenc_int(&mut rest).unwrap_or(0) as usize;
        rest = rest.get(len..).unwrap_or_default();
    }
    let len = read_lenenc_int(&mut rest).unwrap_or(0) as usize;
    String::from_utf8_lossy(rest.get(..len).unwrap_or_default()).into_owned()
}

/// Runs one part on its shard's master and reads the whole result, within
/// `limits.multi_shard_part_timeout_ms`: a part that had its connection
/// and was still running then fails with [`ClientError::PartTimeout`]
/// (the host answered; the statement was slow) and its statement is
/// killed on the server; one still waiting for a connection fails with
/// [`ClientError::PoolExhausted`] when the host's pool is full, else
/// [`ClientError::HostUnavailable`].
async fn run_part(job: PartJob) -> Result<PartResult, ClientError> {
    // One more than the backend thread the statement was sent on; 0 until
    // it is sent.
    let sent_on = AtomicU64::new(0);
    let unavailable = |reason: String| ClientError::HostUnavailable {
        fleet: job.fleet.clone(),
        shard: job.shard,
        host: job.pool.addr.clone(),
        reason,
    };
    let work = async {
        let share = Some((job.share.as_ref(), job.share_percent));
        let mut conn = checkout_open(&job.pool, job.key, share)
            .await
            .map_err(|error| {
                checkout_error(error, &job.pool.addr, Some((&job.fleet, job.shard)))
            })?;
        apply_settings(&mut conn, job.settings.as_ref(), job.statement_timeout_ms)
            .await
            .map_err(|failure| match failure {
                Failure::Client(error) => error,
                Failure::Io(error) => unavailable(error.to_string()),
            })?;
        if job.session.is_cancelled() {
            conn.release();
            return Err(ClientError::QueryInterrupted);
        }
        if job.leaves_session_state {
            conn.conn().settings_fingerprint = DIRTY;
        }
        let started = Instant::now();
        sent_on.store(
            u64::from(conn.conn().thread_id) + 1,
            AtomicOrdering::Relaxed,
        );
        let in_use = job.session.using(&job.pool, conn.conn().thread_id);
        let result = read_part(
            conn.conn(),
            &job.sql,
            &job.budget,
            false,
            (job.format, Keep::on(&job.pool, job.keep)),
        )
        .await;
        if in_use.finish() {
            conn.conn().kill_aimed = true;
        }
        job.pool
            .statements
            .record(started.elapsed(), !matches!(result, Ok(Ok(_))));
        match result {
            Ok(Ok(part)) => {
                conn.release();
                Ok(part)
            }
            // Over the merge budget: the rest of the result is unread, so
            // the connection closes.
            Ok(Err(
                error @ (ClientError::MergeTooLarge(_) | ClientError::MergeBudgetExhausted(_)),
            )) => Err(error),
            Ok(Err(error)) => {
                let error =
                    super::relay::explain_backend_error(conn.conn(), error, job.shard).await;
                conn.release();
                Err(error)
            }
            Err(error) => {
                conn.discard_broken();
                Err(unavailable(format!("connection lost: {error}")))
            }
        }
    };
    if job.part_timeout_ms == 0 {
        return work.await;
    }
    let limit = Duration::from_millis(job.part_timeout_ms);
    match tokio::time::timeout(limit, work).await {
        Ok(outcome) => outcome,
        Err(_) if sent_on.load(AtomicOrdering::Relaxed) != 0 => {
            let thread = u32::try_from(sent_on.load(AtomicOrdering::Relaxed) - 1).unwrap_or(0);
            kill_abandoned(Arc::clone(&job.backend), &job.pool, thread);
            Err(ClientError::PartTimeout {
                fleet: job.fleet.clone(),
                shard: job.shard,
                host: job.pool.addr.clone(),
                timeout_ms: job.part_timeout_ms,
            })
        }
        Err(_) if !job.pool.has_free() => Err(ClientError::PoolExhausted {
            host: job.pool.addr.clone(),
            place: format!(" (shard {} of fleet {})", job.shard, job.fleet),
            reason: format!(
                "no connection came free within limits.multi_shard_part_timeout_ms ({} ms)",
                job.part_timeout_ms
            ),
        }),
        Err(_) => Err(unavailable(format!(
            "no connection within limits.multi_shard_part_timeout_ms ({} ms)",
            job.part_timeout_ms
        ))),
    }
}

/// Sends `sql` and reads its result set, counting what it keeps against
/// `budget`. The outer error is the connection's; the inner one the
/// server's answer, or [`ClientError::MergeTooLarge`] (the rest of the
/// result left unread, or with `drain` read and dropped so the connection
/// stays usable).
///
/// For [`RowFormat::Binary`] the text runs as a prepared statement
/// (`engine::direct`, kept among `keep` per connection) and the rows are
/// the server's binary rows,
/// split into values; a text the server does not prepare runs as COM_QUERY
/// and its text rows are converted, as a single-shard execute does.
async fn read_part(
    conn: &mut crate::backend::BackendConn,
    sql: &[u8],
    budget: &MergeBudget,
    drain: bool,
    (format, keep): (RowFormat, Keep),
) -> std::io::Result<Result<PartResult, ClientError>> {
    let deprecate_eof = conn
        .key
        .framing
        .contains(mysql_common::constants::CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let binary_wire =
        format == RowFormat::Binary && start_direct(conn, sql, deprecate_eof, keep).await?;
    if !binary_wire {
        conn.send_command(Command::COM_QUERY, sql).await?;
    }
    let (_, first) = conn.reader.next_packet().await?;
    match first.first() {
        Some(&ERR_HEADER) => return Ok(Err(backend_error(&first))),
        Some(&OK_HEADER) | Some(&LOCAL_INFILE_HEADER) | None => {
            return Ok(Err(ClientError::Internal(
                "a multi-shard part returned no result set".to_owned(),
            )))
        }
        _ => {}
    }
    let count = read_lenenc_int(&mut first.as_slice()).unwrap_or(0) as usize;
    let mut definitions = Vec::new();
    let mut columns = Vec::new();
    let mut definition_bytes = 0u64;
    let mut over = None;
    for _ in 0..count {
        let (_, definition) = conn.reader.next_packet().await?;
        let bytes = definition.len() as u64 + COLUMN_OVERHEAD;
        if let Err(error) = budget.take(bytes) {
            over = Some(error);
            break;
        }
        definition_bytes += bytes;
        columns.push(parse_column_definition(&definition).unwrap_or_else(|| {
            ColumnInfo::new(ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty())
        }));
        definitions.push(definition);
    }
    if let Some(error) = over {
        return drained(conn, drain, error, false, count - columns.len() - 1).await;
    }
    if !deprecate_eof {
        conn.reader.next_packet().await?;
    }
    let row_overhead = ROW_OVERHEAD + VALUE_OVERHEAD * count as u64;
    let mut rows = Vec::new();
    let mut converted = Vec::new();
    // The largest row is held twice for a moment: as read and decoded, and
    // as encoded for the client.
    let mut largest = 0u64;
    loop {
        let (_, packet) = conn.reader.next_packet().await?;
        match packet.first() {
            Some(&ERR_HEADER) => return Ok(Err(backend_error(&packet))),
            _ if ends_result_set(&packet, deprecate_eof) => break,
            _ => {
                let len = packet.len() as u64;
                let transient = len.saturating_sub(largest);
                largest = largest.max(len);
                if let Err(error) = budget.take(len + row_overhead + transient) {
                    drop(rows);
                    return drained(conn, drain, error, true, 0).await;
                }
                let row = match (format, binary_wire) {
                    (RowFormat::Text, _) => decode_text_row(&packet, count),
                    (RowFormat::Binary, true) => match binary_row_values(&packet, &columns) {
                        Ok(row) => row,
                        Err(error) => return Err(unreadable_row(error)),
                    },
                    (RowFormat::Binary, false) => {
                        converted.clear();
                        let split = text_row_to_binary(&packet, &columns, &mut converted)
                            .and_then(|()| binary_row_values(&converted, &columns));
                        match split {
                            Ok(row) => row,
                            Err(error) => return Err(unreadable_row(error)),
                        }
                    }
                };
                rows.push(row);
            }
        }
    }
    Ok(Ok(PartResult {
        definitions,
        columns,
        definition_bytes,
        rows,
    }))
}

/// A part's row that could not be read as the binary protocol's: the
/// rest of its result is unread, so the connection is closed.
fn unreadable_row(error: crate::protocol::binary::BinaryError) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("a row of the server's could not be read in the binary protocol: {error}"),
    )
}

/// Returns `error` once, with `drain`, the rest of the result was read and
/// dropped: `definitions` more column definitions, the EOF after them
/// unless `rows_started` (or the framing has none), then the rows to the
/// end of the result.
async fn drained(
    conn: &mut crate::backend::BackendConn,
    drain: bool,
    error: ClientError,
    rows_started: bool,
    definitions: usize,
) -> std::io::Result<Result<PartResult, ClientError>> {
    if !drain {
        return Ok(Err(error));
    }
    let deprecate_eof = conn
        .key
        .framing
        .contains(mysql_common::constants::CapabilityFlags::CLIENT_DEPRECATE_EOF);
    for _ in 0..definitions {
        conn.reader.next_packet().await?;
    }
    if !rows_started && !deprecate_eof {
        conn.reader.next_packet().await?;
    }
    loop {
        let (_, packet) = conn.reader.next_packet().await?;
        if packet.first() == Some(&ERR_HEADER) || ends_result_set(&packet, deprecate_eof) {
            return Ok(Err(error));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_take_from_and_give_back_to_the_process_budget() {
        let process = Arc::new(AtomicU64::new(0));
        let first = MergeBudget::new(100, Arc::clone(&process), 150);
        let second = MergeBudget::new(100, Arc::clone(&process), 150);
        first.take(90).expect("within both");
        assert!(matches!(
            first.take(20),
            Err(ClientError::MergeTooLarge(100))
        ));
        assert_eq!(
            (first.held(), process.load(AtomicOrdering::Relaxed)),
            (90, 90)
        );
        second.take(50).expect("within the process");
        assert!(matches!(
            second.take(20),
            Err(ClientError::MergeBudgetExhausted(150))
        ));
        assert_eq!(
            process.load(AtomicOrdering::Relaxed),
            140,
            "a refusal takes nothing"
        );
        second.give_back(30);
        assert_eq!(process.load(AtomicOrdering::Relaxed), 110);
        drop(first);
        assert_eq!(
            process.load(AtomicOrdering::Relaxed),
            20,
            "a finished read gives all back"
        );
        second.take(80).expect("room again");
    }
}
