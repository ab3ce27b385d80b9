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
//! only), and its decoded rows; past the limit the statement fails with an
//! error that says so rather than exhausting memory. The session's
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
use super::failure::{backend_error, Failure};
use super::kill::kill_abandoned;
use super::merge::{decode_text_row, merge_rows, Value};
use super::session_state::SessionSettings;
use super::sessions::SessionEntry;
use super::{Engine, SessionState};
use crate::backend::{ConnKey, HostPool, PoolShare};
use crate::error::ClientError;
use crate::protocol::binary::{parse_column_definition, ColumnInfo};
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::{ends_result_set, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER};
use crate::protocol::FrameWriter;
use crate::router::MultiShardQuery;
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
/// shared by its parts and counted as they read.
pub(crate) struct MergeBudget {
    held: AtomicU64,
    limit: u64,
}

impl MergeBudget {
    fn new(limit: u64) -> Self {
        Self {
            held: AtomicU64::new(0),
            limit,
        }
    }

    /// Counts `bytes` more; fails past the limit.
    fn take(&self, bytes: u64) -> Result<(), ClientError> {
        let held = self.held.fetch_add(bytes, AtomicOrdering::Relaxed) + bytes;
        if held > self.limit {
            return Err(ClientError::MergeTooLarge(self.limit));
        }
        Ok(())
    }

    /// Counts `bytes` freed.
    fn give_back(&self, bytes: u64) {
        self.held.fetch_sub(bytes, AtomicOrdering::Relaxed);
    }

    /// Bytes held now.
    fn held(&self) -> u64 {
        self.held.load(AtomicOrdering::Relaxed)
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
    /// The rows, decoded into values.
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
        debug!(parts = parts.len(), ?merge, "multi-shard read");
        let budget = Arc::new(MergeBudget::new(topology.config.limits.max_merge_bytes));
        let texts: u64 = parts
            .iter()
            .map(|part| part.sql.len() as u64 + PART_OVERHEAD)
            .sum();
        budget.take(texts).map_err(Failure::Client)?;
        let settings = Arc::new(state.settings.clone());
        let backend = Arc::new(topology.config.backend.clone());
        let count = parts.len();
        // Parts start as others finish, at most FANOUT_CONCURRENCY at once:
        // no task (and its future's state) exists for a part not running.
        let mut waiting = parts.into_iter().enumerate();
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
                key: state.conn_key,
                settings: Arc::clone(&settings),
                sql: part.sql,
                leaves_session_state: part.leaves_session_state,
                budget: Arc::clone(&budget),
                share: Arc::clone(&state.share),
                share_percent: topology.config.limits.max_host_share_percent,
                statement_timeout_ms: topology.config.limits.statement_timeout_ms,
                part_timeout_ms: topology.config.limits.multi_shard_part_timeout_ms,
                backend: Arc::clone(&backend),
                session: Arc::clone(&state.entry),
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
        let parts = parts.into_iter().map(|part| part.rows).collect();
        let rows = merge_rows(parts, &columns, &merge);
        let visible = columns.len().saturating_sub(merge.hidden_columns);
        write_result_set(
            client,
            state,
            &definitions[..visible],
            &columns[..visible],
            rows,
        )
        .await
    }
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
        let result = read_part(conn.conn(), &job.sql, &job.budget).await;
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
            Ok(Err(error @ ClientError::MergeTooLarge(_))) => Err(error),
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
            kill_abandoned(Arc::clone(&job.backend), job.pool.addr.clone(), thread);
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
/// result left unread).
async fn read_part(
    conn: &mut crate::backend::BackendConn,
    sql: &[u8],
    budget: &MergeBudget,
) -> std::io::Result<Result<PartResult, ClientError>> {
    conn.send_command(Command::COM_QUERY, sql).await?;
    let deprecate_eof = conn
        .key
        .framing
        .contains(mysql_common::constants::CapabilityFlags::CLIENT_DEPRECATE_EOF);
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
    for _ in 0..count {
        let (_, definition) = conn.reader.next_packet().await?;
        let bytes = definition.len() as u64 + COLUMN_OVERHEAD;
        if let Err(error) = budget.take(bytes) {
            return Ok(Err(error));
        }
        definition_bytes += bytes;
        columns.push(parse_column_definition(&definition).unwrap_or_else(|| {
            ColumnInfo::new(ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty())
        }));
        definitions.push(definition);
    }
    if !deprecate_eof {
        conn.reader.next_packet().await?;
    }
    let row_overhead = ROW_OVERHEAD + VALUE_OVERHEAD * count as u64;
    let mut rows = Vec::new();
    loop {
        let (_, packet) = conn.reader.next_packet().await?;
        match packet.first() {
            Some(&ERR_HEADER) => return Ok(Err(backend_error(&packet))),
            _ if ends_result_set(&packet, deprecate_eof) => break,
            _ => {
                if let Err(error) = budget.take(packet.len() as u64 + row_overhead) {
                    return Ok(Err(error));
                }
                rows.push(decode_text_row(&packet, count));
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
