//! Multi-shard reads: runs a [`MultiShardQuery`]'s parts concurrently
//! (at most [`FANOUT_CONCURRENCY`] in flight per client statement, each
//! bounded by [`PART_TIMEOUT`]), then merges their rows: concatenated, in
//! order by a k-way merge of the sorted parts, or aggregated; then applies
//! OFFSET/LIMIT and answers with one result set.
//!
//! Parts are buffered before merging (a LIMIT bounds each part to
//! `offset + limit` rows). What a merge holds is counted as it arrives,
//! packet by packet, against `limits.max_merge_bytes` ([`MergeBudget`]):
//! each part's text and task, its column definitions (kept for one part
//! only), and its decoded rows; past the limit the statement fails with an
//! error that says so rather than exhausting memory. The session's
//! settings are shared by the parts, not copied.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_common::constants::{ColumnFlags, ColumnType};
use tokio::io::AsyncWrite;
use tokio::task::JoinSet;
use tracing::debug;

use super::answer::{write_result_set, Value};
use super::failure::{backend_error, Failure};
use super::session_state::SessionSettings;
use super::{Engine, SessionState};
use crate::backend::conn::COM_QUERY;
use crate::backend::{ConnKey, HostPool, PoolShare};
use crate::error::ClientError;
use crate::protocol::binary::{parse_column_definition, ColumnInfo};
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::{EOF_HEADER, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER};
use crate::protocol::FrameWriter;
use crate::router::{Merge, MergeColumn, MultiShardQuery, SortKey};
use crate::topology::Topology;

/// Most backend statements in flight for one client statement.
pub const FANOUT_CONCURRENCY: usize = 32;
/// Longest a part may take before the whole statement fails.
pub const PART_TIMEOUT: Duration = Duration::from_secs(10);
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
                return Err(Failure::Client(ClientError::UnsupportedCommand(format!(
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
                budget: Arc::clone(&budget),
                share: Arc::clone(&state.share),
                share_percent: topology.config.limits.max_host_share_percent,
                statement_timeout_ms: topology.config.limits.statement_timeout_ms,
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
                Failure::Client(ClientError::UnsupportedCommand(format!(
                    "a multi-shard part failed: {error}"
                )))
            })?;
            let mut result = outcome.map_err(Failure::Client)?;
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
            return Err(Failure::Client(ClientError::UnsupportedCommand(
                "a multi-shard read with no parts".to_owned(),
            )));
        };
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

/// Runs one part on its shard's master and reads the whole result.
async fn run_part(job: PartJob) -> Result<PartResult, ClientError> {
    let unavailable = |reason: String| ClientError::HostUnavailable {
        fleet: job.fleet.clone(),
        shard: job.shard,
        host: job.pool.addr.clone(),
        reason,
    };
    let work = async {
        let share = Some((job.share.as_ref(), job.share_percent));
        let mut conn = super::checkout::checkout_open(&job.pool, job.key, share)
            .await
            .map_err(&unavailable)?;
        super::checkout::apply_settings(&mut conn, job.settings.as_ref(), job.statement_timeout_ms)
            .await
            .map_err(|failure| match failure {
                Failure::Client(error) => error,
                Failure::Io(error) => unavailable(error.to_string()),
            })?;
        let started = Instant::now();
        let result = read_part(conn.conn(), &job.sql, &job.budget).await;
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
    tokio::time::timeout(PART_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(unavailable(format!("no answer within {PART_TIMEOUT:?}"))))
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
    conn.send_command(COM_QUERY, sql).await?;
    let deprecate_eof = conn
        .key
        .framing
        .contains(mysql_common::constants::CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let (_, first) = conn.reader.next_packet().await?;
    match first.first() {
        Some(&ERR_HEADER) => return Ok(Err(backend_error(&first))),
        Some(&OK_HEADER) | Some(&LOCAL_INFILE_HEADER) | None => {
            return Ok(Err(ClientError::UnsupportedCommand(
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
            Some(&EOF_HEADER) if packet.len() < 0xFF_FFFF => break,
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

/// Splits a text-protocol row into its values.
fn decode_text_row(mut row: &[u8], count: usize) -> Vec<Value> {
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        if row.first() == Some(&0xFB) {
            row = &row[1..];
            values.push(None);
            continue;
        }
        let len = read_lenenc_int(&mut row).unwrap_or(0) as usize;
        let len = len.min(row.len());
        values.push(Some(row[..len].to_vec()));
        row = &row[len..];
    }
    values
}

/// Combines the parts' rows as the plan says.
fn merge_rows(parts: Vec<PartResult>, columns: &[ColumnInfo], merge: &Merge) -> Vec<Vec<Value>> {
    let rows = match &merge.aggregation {
        Some(aggregation) => {
            let mut groups = aggregate(parts, columns, &aggregation.columns);
            if !merge.order_by.is_empty() {
                groups.sort_by(|a, b| compare_rows(a, b, &merge.order_by, columns));
            }
            groups
        }
        None if merge.order_by.is_empty() => parts.into_iter().flat_map(|p| p.rows).collect(),
        None => merge_sorted(parts, columns, &merge.order_by),
    };
    let offset = usize::try_from(merge.offset).unwrap_or(usize::MAX);
    let limit = merge
        .limit
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX))
        .unwrap_or(usize::MAX);
    rows.into_iter().skip(offset).take(limit).collect()
}

/// A row waiting in the k-way merge: the heap pops the smallest first.
struct Pending<'a> {
    row: Vec<Value>,
    part: usize,
    keys: &'a [SortKey],
    columns: &'a [ColumnInfo],
}

impl PartialEq for Pending<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pending<'_> {}

impl PartialOrd for Pending<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_rows(&other.row, &self.row, self.keys, self.columns)
            .then_with(|| other.part.cmp(&self.part))
    }
}

/// Merges parts that are each sorted by `keys` into one sorted list.
fn merge_sorted(
    parts: Vec<PartResult>,
    columns: &[ColumnInfo],
    keys: &[SortKey],
) -> Vec<Vec<Value>> {
    let total = parts.iter().map(|p| p.rows.len()).sum();
    let mut streams: Vec<_> = parts.into_iter().map(|p| p.rows.into_iter()).collect();
    let mut heap = BinaryHeap::with_capacity(streams.len());
    for (part, stream) in streams.iter_mut().enumerate() {
        if let Some(row) = stream.next() {
            heap.push(Pending {
                row,
                part,
                keys,
                columns,
            });
        }
    }
    let mut merged = Vec::with_capacity(total);
    while let Some(Pending { row, part, .. }) = heap.pop() {
        merged.push(row);
        if let Some(next) = streams[part].next() {
            heap.push(Pending {
                row: next,
                part,
                keys,
                columns,
            });
        }
    }
    merged
}

/// Orders two rows by the sort keys.
fn compare_rows(a: &[Value], b: &[Value], keys: &[SortKey], columns: &[ColumnInfo]) -> Ordering {
    for key in keys {
        let column = columns.get(key.column);
        let (x, y) = (a.get(key.column), b.get(key.column));
        let ordering = match (x, y, column) {
            (Some(x), Some(y), Some(column)) => compare_values(x, y, column),
            _ => Ordering::Equal,
        };
        let ordering = if key.descending {
            ordering.reverse()
        } else {
            ordering
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

/// Compares two values of a column the way the server orders them: NULL
/// first, numbers as numbers, text by a case-insensitive comparison unless
/// the column is binary.
pub(crate) fn compare_values(a: &Value, b: &Value, column: &ColumnInfo) -> Ordering {
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, Some(_)) => return Ordering::Less,
        (Some(_), None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a.as_slice(), b.as_slice()),
    };
    match column.column_type {
        ColumnType::MYSQL_TYPE_TINY
        | ColumnType::MYSQL_TYPE_SHORT
        | ColumnType::MYSQL_TYPE_INT24
        | ColumnType::MYSQL_TYPE_LONG
        | ColumnType::MYSQL_TYPE_LONGLONG
        | ColumnType::MYSQL_TYPE_YEAR
        | ColumnType::MYSQL_TYPE_DECIMAL
        | ColumnType::MYSQL_TYPE_NEWDECIMAL => compare_decimal_text(a, b),
        ColumnType::MYSQL_TYPE_FLOAT | ColumnType::MYSQL_TYPE_DOUBLE => {
            let parse = |v: &[u8]| {
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|t| t.trim().parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            parse(a).total_cmp(&parse(b))
        }
        _ if is_binary_collation(column) => a.cmp(b),
        _ => fold_general_ci(a).cmp(fold_general_ci(b)),
    }
}

/// Collation ids that compare bytes: binary, and the `_bin` collations of
/// utf8mb4, utf8mb3 and latin1.
fn is_binary_collation(column: &ColumnInfo) -> bool {
    matches!(column.charset, 63 | 46 | 83 | 47) || column.flags.contains(ColumnFlags::BINARY_FLAG)
}

/// The weights `utf8mb4_general_ci` compares by, closely enough for merging
/// rows the shards already sorted: accents dropped, case folded to upper.
fn fold_general_ci(text: &[u8]) -> impl Iterator<Item = char> + '_ {
    use unicode_normalization::char::is_combining_mark;
    use unicode_normalization::UnicodeNormalization;
    std::str::from_utf8(text)
        .unwrap_or_default()
        .nfd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_uppercase)
}

/// Compares two decimal numbers written as text (`-12.50`, `7`) exactly.
fn compare_decimal_text(a: &[u8], b: &[u8]) -> Ordering {
    let (a_negative, a) = split_sign(a);
    let (b_negative, b) = split_sign(b);
    let a_zero = is_zero(a);
    let b_zero = is_zero(b);
    match (a_negative && !a_zero, b_negative && !b_zero) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    let magnitude = compare_magnitude(a, b);
    if a_negative && !a_zero {
        magnitude.reverse()
    } else {
        magnitude
    }
}

fn split_sign(text: &[u8]) -> (bool, &[u8]) {
    match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

fn is_zero(text: &[u8]) -> bool {
    text.iter().all(|b| *b == b'0' || *b == b'.')
}

fn compare_magnitude(a: &[u8], b: &[u8]) -> Ordering {
    let split = |t: &[u8]| -> (Vec<u8>, Vec<u8>) {
        let mut parts = t.splitn(2, |c| *c == b'.');
        let int: Vec<u8> = parts
            .next()
            .unwrap_or_default()
            .iter()
            .copied()
            .skip_while(|c| *c == b'0')
            .collect();
        let mut frac: Vec<u8> = parts.next().unwrap_or_default().to_vec();
        while frac.last() == Some(&b'0') {
            frac.pop();
        }
        (int, frac)
    };
    let (a_int, a_frac) = split(a);
    let (b_int, b_frac) = split(b);
    a_int
        .len()
        .cmp(&b_int.len())
        .then_with(|| a_int.cmp(&b_int))
        .then_with(|| a_frac.cmp(&b_frac))
}

/// Groups the parts' rows by their group-key columns and merges the
/// aggregate columns. Groups keep the order in which they were first seen.
fn aggregate(
    parts: Vec<PartResult>,
    columns: &[ColumnInfo],
    rules: &[MergeColumn],
) -> Vec<Vec<Value>> {
    let mut order: Vec<Vec<Value>> = Vec::new();
    let mut index: HashMap<Vec<Value>, usize> = HashMap::new();
    for row in parts.into_iter().flat_map(|p| p.rows) {
        let key: Vec<Value> = rules
            .iter()
            .zip(&row)
            .filter(|(rule, _)| **rule == MergeColumn::GroupKey)
            .map(|(_, value)| value.clone())
            .collect();
        match index.get(&key) {
            Some(&at) => {
                let merged = &mut order[at];
                for (position, rule) in rules.iter().enumerate() {
                    let (Some(current), Some(incoming)) = (merged.get(position), row.get(position))
                    else {
                        continue;
                    };
                    let column = columns.get(position);
                    let combined = combine(*rule, current, incoming, column);
                    merged[position] = combined;
                }
            }
            None => {
                index.insert(key, order.len());
                order.push(row);
            }
        }
    }
    order
}

/// Merges one aggregate column's value from two parts.
fn combine(rule: MergeColumn, a: &Value, b: &Value, column: Option<&ColumnInfo>) -> Value {
    match rule {
        MergeColumn::GroupKey => a.clone(),
        MergeColumn::Count | MergeColumn::Sum => match (a, b) {
            (None, other) | (other, None) => other.clone(),
            (Some(x), Some(y)) => Some(add_numbers(x, y)),
        },
        MergeColumn::Min | MergeColumn::Max => {
            let fallback = ColumnInfo::new(ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty());
            let column = column.unwrap_or(&fallback);
            match (a, b) {
                (None, other) | (other, None) => other.clone(),
                (Some(_), Some(_)) => {
                    let ordering = compare_values(a, b, column);
                    let take_b = match rule {
                        MergeColumn::Min => ordering == Ordering::Greater,
                        _ => ordering == Ordering::Less,
                    };
                    if take_b {
                        b.clone()
                    } else {
                        a.clone()
                    }
                }
            }
        }
    }
}

/// Adds two numbers written as text: exactly for integers and decimals,
/// as doubles when either is in exponent form.
fn add_numbers(a: &[u8], b: &[u8]) -> Vec<u8> {
    let (x, y) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    if let (Some(x), Some(y)) = (parse_scaled(&x), parse_scaled(&y)) {
        let scale = x.1.max(y.1);
        let widen = |(value, s): (i128, u32)| value * 10i128.pow(scale - s);
        return format_scaled(widen(x) + widen(y), scale).into_bytes();
    }
    let sum = x.trim().parse::<f64>().unwrap_or(0.0) + y.trim().parse::<f64>().unwrap_or(0.0);
    sum.to_string().into_bytes()
}

/// A decimal text as (digits without the point, digits after the point).
fn parse_scaled(text: &str) -> Option<(i128, u32)> {
    let text = text.trim();
    if text.contains(['e', 'E']) {
        return None;
    }
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let scale = u32::try_from(frac.len()).ok()?;
    if scale > 30 {
        return None;
    }
    let digits = format!("{int}{frac}");
    Some((digits.parse().ok()?, scale))
}

fn format_scaled(value: i128, scale: u32) -> String {
    if scale == 0 {
        return value.to_string();
    }
    let negative = value < 0;
    let digits = value.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{}{int}.{frac}", if negative { "-" } else { "" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int_column() -> ColumnInfo {
        ColumnInfo::new(ColumnType::MYSQL_TYPE_LONGLONG, ColumnFlags::empty())
    }

    fn text_column() -> ColumnInfo {
        let mut column = ColumnInfo::new(ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty());
        column.charset = 45;
        column
    }

    fn v(text: &str) -> Value {
        Some(text.as_bytes().to_vec())
    }

    fn part(rows: Vec<Vec<Value>>) -> PartResult {
        PartResult {
            definitions: Vec::new(),
            columns: Vec::new(),
            definition_bytes: 0,
            rows,
        }
    }

    #[test]
    fn numbers_compare_as_numbers_not_bytes() {
        let column = int_column();
        assert_eq!(
            compare_values(&v("10"), &v("9"), &column),
            Ordering::Greater
        );
        assert_eq!(compare_values(&v("-10"), &v("-9"), &column), Ordering::Less);
        assert_eq!(compare_values(&None, &v("-9"), &column), Ordering::Less);
        let decimal = ColumnInfo::new(ColumnType::MYSQL_TYPE_NEWDECIMAL, ColumnFlags::empty());
        assert_eq!(
            compare_values(&v("2.50"), &v("2.5"), &decimal),
            Ordering::Equal
        );
        assert_eq!(
            compare_values(&v("-0.00"), &v("0"), &decimal),
            Ordering::Equal
        );
        assert_eq!(
            compare_values(&v("100.1"), &v("99.99"), &decimal),
            Ordering::Greater
        );
    }

    #[test]
    fn text_compares_case_insensitively() {
        let column = text_column();
        assert_eq!(
            compare_values(&v("apple"), &v("Banana"), &column),
            Ordering::Less
        );
    }

    #[test]
    fn k_way_merge_with_offset_and_limit() {
        let columns = vec![int_column()];
        let parts = vec![
            part(vec![vec![v("1")], vec![v("10")], vec![v("100")]]),
            part(vec![vec![v("2")], vec![v("20")]]),
            part(vec![]),
        ];
        let merge = Merge {
            order_by: vec![SortKey {
                column: 0,
                descending: false,
            }],
            offset: 1,
            limit: Some(3),
            ..Merge::default()
        };
        let rows = merge_rows(parts, &columns, &merge);
        assert_eq!(rows, vec![vec![v("2")], vec![v("10")], vec![v("20")]]);
    }

    #[test]
    fn descending_merge() {
        let columns = vec![int_column()];
        let parts = vec![
            part(vec![vec![v("100")], vec![v("1")]]),
            part(vec![vec![v("20")], vec![v("2")]]),
        ];
        let merge = Merge {
            order_by: vec![SortKey {
                column: 0,
                descending: true,
            }],
            ..Merge::default()
        };
        let rows = merge_rows(parts, &columns, &merge);
        let flat: Vec<_> = rows.into_iter().map(|r| r[0].clone()).collect();
        assert_eq!(flat, vec![v("100"), v("20"), v("2"), v("1")]);
    }

    #[test]
    fn aggregates_merge_by_group() {
        let columns = vec![
            int_column(),
            int_column(),
            int_column(),
            int_column(),
            int_column(),
        ];
        let rules = vec![
            MergeColumn::GroupKey,
            MergeColumn::Count,
            MergeColumn::Sum,
            MergeColumn::Min,
            MergeColumn::Max,
        ];
        let parts = vec![
            part(vec![
                vec![v("1"), v("2"), v("30"), v("10"), v("20")],
                vec![v("2"), v("1"), v("5"), v("5"), v("5")],
            ]),
            part(vec![vec![v("1"), v("3"), v("9"), v("2"), v("4")]]),
        ];
        let merge = Merge {
            aggregation: Some(crate::router::Aggregation { columns: rules }),
            order_by: vec![SortKey {
                column: 0,
                descending: false,
            }],
            ..Merge::default()
        };
        let rows = merge_rows(parts, &columns, &merge);
        assert_eq!(
            rows,
            vec![
                vec![v("1"), v("5"), v("39"), v("2"), v("20")],
                vec![v("2"), v("1"), v("5"), v("5"), v("5")],
            ]
        );
    }

    #[test]
    fn sums_are_exact_for_decimals_and_null_aware() {
        assert_eq!(add_numbers(b"1.25", b"2.5"), b"3.75".to_vec());
        assert_eq!(add_numbers(b"-1.25", b"1"), b"-0.25".to_vec());
        assert_eq!(
            add_numbers(b"99999999999999999999", b"1"),
            b"100000000000000000000".to_vec()
        );
        assert_eq!(
            combine(MergeColumn::Sum, &None, &v("4"), None),
            v("4"),
            "NULL parts are ignored"
        );
        assert_eq!(combine(MergeColumn::Sum, &None, &None, None), None);
    }

    #[test]
    fn text_rows_decode() {
        let mut row = Vec::new();
        crate::protocol::frame::write_lenenc_bytes(&mut row, b"abc");
        row.push(0xFB);
        crate::protocol::frame::write_lenenc_bytes(&mut row, b"");
        assert_eq!(decode_text_row(&row, 3), vec![v("abc"), None, v("")]);
    }
}
