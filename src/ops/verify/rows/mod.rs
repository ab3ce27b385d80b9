//! `shardgate fleet verify --rows` and `VERIFY SHARDS a-b ROWS AGAINST
//! host:port`: every row of every table of the shard databases of a range,
//! compared between the range's master (from the config) and another server
//! (its replica, or a split target), chunk by chunk of primary keys, at one
//! GTID point per chunk (docs/decisions/0029-row-verify-compares-at-one-gtid-point-per-chunk.md):
//!
//! - the source's chunk is read inside `START TRANSACTION WITH CONSISTENT
//!   SNAPSHOT`, with `@@gtid_binlog_pos` read just after it opened: a
//!   position `P` at or past everything the snapshot sees;
//! - a target that replicates is read after `MASTER_GTID_WAIT(P)` (so at `P`
//!   or later); a target that does not is read as it is;
//! - a chunk whose checksums differ is read again, row hashes this time, a
//!   few times (a row written between the two reads settles); if it still
//!   differs and the target replicates, once more with the target's
//!   replication stopped exactly at the source's snapshot (its binlog
//!   coordinates through `BINLOG_GTID_POS`, then `START SLAVE UNTIL
//!   master_gtid_pos`), which no write can disturb. Only that answer is
//!   reported.

mod plan;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

pub use plan::{
    diff_rows, format_key, pace, snapshot_coordinates, Checksum, ChunkBounds, RowsDiff, TableShape,
};

use crate::ops::{admin_connect_timeout, connect, progress_bar, OpsError};
use crate::topology::{FleetId, Topology};

/// Primary keys per chunk by default.
pub const DEFAULT_CHUNK_ROWS: usize = 1000;
/// `--max-rows-per-second` by default (source rows read per second; 0 is
/// no limit).
pub const DEFAULT_MAX_ROWS_PER_SECOND: u64 = 20_000;
/// Re-reads of a differing chunk before the pinned one (or the report).
pub const DEFAULT_RECHECKS: u32 = 3;
/// How long a target may take to reach the source's GTID position.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(30);

/// What to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowVerifyRequest {
    /// First shard.
    pub first: u32,
    /// Last shard (inclusive).
    pub last: u32,
    /// The fleet (needed when several fleets have those shards).
    pub fleet: Option<String>,
    /// The other server, `host:port`.
    pub against: String,
    /// Source rows read per second at most (0: no limit).
    pub max_rows_per_second: u64,
    /// Primary keys per chunk.
    pub chunk_rows: usize,
    /// Re-reads of a differing chunk.
    pub rechecks: u32,
    /// A progress bar on stderr (when it is a terminal).
    pub progress: bool,
}

impl RowVerifyRequest {
    /// Shards `first..=last` against `against`, with the defaults.
    pub fn new(first: u32, last: u32, against: impl Into<String>) -> Self {
        Self {
            first,
            last,
            fleet: None,
            against: against.into(),
            max_rows_per_second: DEFAULT_MAX_ROWS_PER_SECOND,
            chunk_rows: DEFAULT_CHUNK_ROWS,
            rechecks: DEFAULT_RECHECKS,
            progress: false,
        }
    }
}

/// Why the row compare could not run (differences are not errors: they are
/// in the [`RowVerifyReport`]).
#[derive(Debug, thiserror::Error)]
pub enum RowVerifyError {
    /// The request does not fit the config (unknown fleet, shard out of
    /// range, shards on several masters, the target is the master).
    #[error("{0}")]
    Argument(String),
    /// A host could not be reached or a query failed.
    #[error(transparent)]
    Fleet(#[from] OpsError),
    /// A replicating target did not reach the source's position in time.
    #[error(
        "{target} did not reach the source's GTID position {position} within {}s: \
         is its replication running and caught up?",
        CATCH_UP_TIMEOUT.as_secs()
    )]
    CatchUp {
        /// The target.
        target: String,
        /// The position waited for.
        position: String,
    },
}

/// The `kind` of a [`RowDifference`].
pub mod row_kind {
    /// Rows of a chunk differ (keys listed).
    pub const ROWS_DIFFER: &str = "rows differ";
    /// A table of the source is not on the target.
    pub const MISSING_TABLE: &str = "table missing on target";
    /// A table of the target is not on the source.
    pub const EXTRA_TABLE: &str = "table not on source";
    /// The table's columns differ (rows not compared).
    pub const COLUMNS_DIFFER: &str = "columns differ";
}

/// One difference found: a chunk whose rows differ, or a table that is not
/// alike on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowDifference {
    /// Shard number.
    pub shard: u32,
    /// Shard database.
    pub database: String,
    /// Table.
    pub table: String,
    /// One of the [`row_kind`] constants.
    pub kind: &'static str,
    /// The chunk's key range, `(lo, hi]` (empty for a table-level kind).
    pub key_range: String,
    /// The differing keys (empty for a table-level kind).
    pub keys: RowsDiff,
    /// What else there is to say (the columns on each side).
    pub detail: String,
}

impl fmt::Display for RowDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shard {} {}.{}: {}",
            self.shard, self.database, self.table, self.kind
        )?;
        if !self.key_range.is_empty() {
            write!(f, " in keys {}: {}", self.key_range, self.keys)?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// What [`verify_rows`] compared and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowVerifyReport {
    /// The shards' master.
    pub source: String,
    /// The server compared with it.
    pub target: String,
    /// Whether the target replicates (read at the source's GTID point).
    pub target_replicates: bool,
    /// Shard databases compared.
    pub databases: usize,
    /// Tables compared.
    pub tables: usize,
    /// Chunks compared.
    pub chunks: u64,
    /// Source rows read (re-reads included).
    pub rows: u64,
    /// Chunk re-reads after a differing checksum.
    pub rechecks: u64,
    /// Re-reads with the target's replication stopped at the source's point.
    pub pinned_reads: u64,
    /// Tables without a primary key (not compared), `db.table`.
    pub skipped: Vec<String>,
    /// Every difference, in shard and table order.
    pub differences: Vec<RowDifference>,
    /// Wall time.
    pub elapsed: Duration,
}

impl RowVerifyReport {
    /// No difference found.
    pub fn is_ok(&self) -> bool {
        self.differences.is_empty()
    }

    /// Source rows read per second.
    pub fn rows_per_second(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl fmt::Display for RowVerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} vs {}{}: {} databases, {} tables, {} chunks, {} rows, {} rechecks, {} pinned reads: ",
            self.source,
            self.target,
            if self.target_replicates {
                " (replicating)"
            } else {
                ""
            },
            self.databases,
            self.tables,
            self.chunks,
            self.rows,
            self.rechecks,
            self.pinned_reads
        )?;
        if self.differences.is_empty() {
            write!(f, "no difference")?;
        } else {
            write!(f, "{} differences", self.differences.len())?;
        }
        write!(
            f,
            " in {:.2}s ({:.0} rows/s)",
            self.elapsed.as_secs_f64(),
            self.rows_per_second()
        )?;
        if !self.skipped.is_empty() {
            write!(
                f,
                "; tables without a primary key, not compared: {}",
                self.skipped.join(", ")
            )?;
        }
        Ok(())
    }
}

/// The fleet, shard range and master a request is about.
pub(crate) struct Scope {
    pub(crate) fleet: FleetId,
    pub(crate) source: String,
}

/// The fleet and the master of a request's range (all on one master, not
/// the server compared with).
pub(crate) fn scope(
    topology: &Topology,
    request: &RowVerifyRequest,
) -> Result<Scope, RowVerifyError> {
    let arg = |m: String| RowVerifyError::Argument(m);
    if request.first > request.last {
        return Err(arg(format!(
            "the range {}-{} is backwards (first above last)",
            request.first, request.last
        )));
    }
    let fleet = match &request.fleet {
        Some(name) => topology
            .fleet_by_name(name)
            .ok_or_else(|| arg(format!("no fleet named '{name}' in the config")))?,
        None => {
            let having: Vec<FleetId> = (0..topology.fleets.len())
                .filter(|&f| topology.fleets[f].shard_count > request.last)
                .collect();
            match having.as_slice() {
                [one] => *one,
                [] => {
                    return Err(arg(format!(
                        "no fleet has shard {} in the config",
                        request.last
                    )))
                }
                _ => {
                    return Err(arg(
                        "several fleets have those shards: name one (--fleet F, or IN <fleet>)"
                            .to_owned(),
                    ))
                }
            }
        }
    };
    let info = &topology.fleets[fleet];
    if request.last >= info.shard_count {
        return Err(arg(format!(
            "fleet {} has shards 0-{}, not {}",
            info.name,
            info.shard_count.saturating_sub(1),
            request.last
        )));
    }
    let masters: BTreeSet<usize> = (request.first..=request.last)
        .filter_map(|s| topology.master_of(fleet, s))
        .collect();
    let [master] = masters.iter().copied().collect::<Vec<_>>()[..] else {
        let names: Vec<&str> = masters
            .iter()
            .map(|&h| topology.hosts[h].addr.as_str())
            .collect();
        return Err(arg(format!(
            "shards {}-{} of fleet {} are on several masters ({}): verify one master's range at a time",
            request.first,
            request.last,
            info.name,
            names.join(", ")
        )));
    };
    let source = topology.hosts[master].addr.clone();
    if source == request.against {
        return Err(arg(format!(
            "{source} is the shards' master: compare it with another server"
        )));
    }
    Ok(Scope { fleet, source })
}

/// Compares every row of every table of the shard databases of the
/// request's range between their master and `request.against`. Differences
/// are in the report; an error means the compare could not run.
pub async fn verify_rows(
    topology: &Topology,
    request: &RowVerifyRequest,
) -> Result<RowVerifyReport, RowVerifyError> {
    let started = Instant::now();
    let Scope { fleet, source } = scope(topology, request)?;
    let account = topology.config.operations_account();
    let timeout = admin_connect_timeout(topology);
    let mut side = Sides {
        source: Side::new(
            &source,
            connect(&source, &account.user, &account.password, timeout).await?,
        ),
        target: Side::new(
            &request.against,
            connect(&request.against, &account.user, &account.password, timeout).await?,
        ),
        replicates: false,
        rows: 0,
        started,
        max_rows_per_second: request.max_rows_per_second,
    };
    side.replicates = replicating(&mut side.target).await?;
    let databases: Vec<(u32, String)> = (request.first..=request.last)
        .map(|s| (s, topology.fleets[fleet].database_name(s)))
        .collect();
    let names: Vec<String> = databases.iter().map(|(_, d)| d.clone()).collect();
    if side.replicates {
        // The tables too are compared at a point the target has reached.
        let fail = side.source.failed("reading @@gtid_binlog_pos");
        let position: Option<Option<String>> = side
            .source
            .conn
            .query_first("SELECT @@gtid_binlog_pos")
            .await
            .map_err(fail)?;
        if let Some(position) = position.flatten().filter(|p| !p.is_empty()) {
            wait_for(&mut side.target, &position).await?;
        }
    }
    let (on_source, on_target) = tokio::try_join!(
        catalog(&mut side.source, &names),
        catalog(&mut side.target, &names)
    )?;

    let mut report = RowVerifyReport {
        source: source.clone(),
        target: request.against.clone(),
        target_replicates: side.replicates,
        databases: databases.len(),
        ..RowVerifyReport::default()
    };
    let bar = progress_bar(
        request.progress,
        databases.len(),
        "verify rows [{elapsed_precise}] {wide_bar} {pos}/{len} shard databases (eta {eta})",
    );
    let empty = BTreeMap::new();
    for (shard, database) in &databases {
        let source_tables = on_source.get(database).unwrap_or(&empty);
        let target_tables = on_target.get(database).unwrap_or(&empty);
        let table_level = |table: &str, kind: &'static str, detail: String| RowDifference {
            shard: *shard,
            database: database.clone(),
            table: table.to_owned(),
            kind,
            key_range: String::new(),
            keys: RowsDiff::default(),
            detail,
        };
        for name in target_tables.keys() {
            if !source_tables.contains_key(name) {
                report
                    .differences
                    .push(table_level(name, row_kind::EXTRA_TABLE, String::new()));
            }
        }
        for (name, shape) in source_tables {
            let Some(theirs) = target_tables.get(name) else {
                report
                    .differences
                    .push(table_level(name, row_kind::MISSING_TABLE, String::new()));
                continue;
            };
            if theirs.columns != shape.columns || theirs.key != shape.key {
                report.differences.push(table_level(
                    name,
                    row_kind::COLUMNS_DIFFER,
                    format!(
                        "source ({}) key ({}), target ({}) key ({})",
                        shape.columns.join(", "),
                        shape.key.join(", "),
                        theirs.columns.join(", "),
                        theirs.key.join(", ")
                    ),
                ));
                continue;
            }
            if shape.key.is_empty() {
                report.skipped.push(format!("{database}.{name}"));
                continue;
            }
            report.tables += 1;
            compare_table(&mut side, request, *shard, shape, &mut report).await?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    report.rows = side.rows;
    side.source.conn.disconnect().await.ok();
    side.target.conn.disconnect().await.ok();
    report.elapsed = started.elapsed();
    Ok(report)
}

/// One end of the compare.
struct Side {
    addr: String,
    conn: Conn,
}

impl Side {
    fn new(addr: &str, conn: Conn) -> Self {
        Self {
            addr: addr.to_owned(),
            conn,
        }
    }

    fn failed(&self, what: impl Into<String>) -> impl FnOnce(mysql_async::Error) -> OpsError {
        let host = self.addr.clone();
        let what = what.into();
        move |source| OpsError::Query { host, what, source }
    }

    async fn run(&mut self, sql: &str, what: &str) -> Result<(), OpsError> {
        let fail = self.failed(what);
        self.conn.query_drop(sql).await.map_err(fail)
    }
}

/// Both ends, the pacing state and whether the target replicates.
struct Sides {
    source: Side,
    target: Side,
    replicates: bool,
    rows: u64,
    started: Instant,
    max_rows_per_second: u64,
}

impl Sides {
    /// Counts `rows` read from the source and sleeps off any excess over
    /// the rate.
    async fn paced(&mut self, rows: u64) {
        self.rows += rows;
        let wait = pace(self.rows, self.started.elapsed(), self.max_rows_per_second);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// True when the target runs GTID replication (its SQL thread is running).
async fn replicating(target: &mut Side) -> Result<bool, OpsError> {
    let fail = target.failed("SHOW SLAVE STATUS");
    let status: Option<Row> = target
        .conn
        .query_first("SHOW SLAVE STATUS")
        .await
        .map_err(fail)?;
    let Some(status) = status else {
        return Ok(false);
    };
    let column = |name: &str| -> String {
        status
            .get_opt::<String, _>(name)
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    Ok(column("Slave_SQL_Running") == "Yes" && column("Using_Gtid") != "No")
}

/// Every base table of `databases` on a host: database -> table -> shape.
async fn catalog(
    side: &mut Side,
    databases: &[String],
) -> Result<BTreeMap<String, BTreeMap<String, TableShape>>, OpsError> {
    let list = databases
        .iter()
        .map(|d| format!("'{}'", d.replace('\\', "\\\\").replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(",");
    // Three plain queries joined here: information_schema's own JOIN of
    // COLUMNS and TABLES took 58 s over 2,048 databases, these under 1 s each.
    let fail = side.failed("listing tables");
    let base: BTreeSet<(String, String)> = side
        .conn
        .query(format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
             WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA IN ({list})"
        ))
        .await
        .map_err(fail)?
        .into_iter()
        .collect();
    let fail = side.failed("listing columns");
    let columns: Vec<(String, String, String)> = side
        .conn
        .query(format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA IN ({list}) ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"
        ))
        .await
        .map_err(fail)?;
    let fail = side.failed("listing primary keys");
    let keys: Vec<(String, String, String)> = side
        .conn
        .query(format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS \
             WHERE INDEX_NAME = 'PRIMARY' AND TABLE_SCHEMA IN ({list}) \
             ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX"
        ))
        .await
        .map_err(fail)?;
    let mut out: BTreeMap<String, BTreeMap<String, TableShape>> = BTreeMap::new();
    for (database, table, column) in columns {
        if !base.contains(&(database.clone(), table.clone())) {
            continue;
        }
        out.entry(database.clone())
            .or_default()
            .entry(table.clone())
            .or_insert_with(|| TableShape {
                database,
                table,
                key: Vec::new(),
                columns: Vec::new(),
            })
            .columns
            .push(column);
    }
    for (database, table, column) in keys {
        if let Some(shape) = out.get_mut(&database).and_then(|t| t.get_mut(&table)) {
            shape.key.push(column);
        }
    }
    Ok(out)
}

/// What one read of a chunk returned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Contents {
    Checksum(Checksum),
    Rows(Vec<(String, String)>),
}

impl Contents {
    fn rows(&self) -> u64 {
        match self {
            Contents::Checksum(c) => c.rows,
            Contents::Rows(r) => r.len() as u64,
        }
    }
}

/// How to read: the checksum, or every key with its row hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Checksum,
    Rows,
}

async fn read_chunk(
    side: &mut Side,
    shape: &TableShape,
    range: &ChunkBounds,
    mode: Mode,
) -> Result<Contents, OpsError> {
    let fail = side.failed(format!("reading {} keys {range}", shape.qualified()));
    match mode {
        Mode::Checksum => {
            let params = range.params();
            // A whole-table chunk (most tables) has no parameter: one round
            // trip as text instead of a prepare and an execute.
            let row: Option<(u64, u64, u64)> = if params.is_empty() {
                side.conn.query_first(shape.checksum_sql(range)).await
            } else {
                side.conn
                    .exec_first(shape.checksum_sql(range), params)
                    .await
            }
            .map_err(fail)?;
            let (rows, high, low) = row.unwrap_or_default();
            Ok(Contents::Checksum(Checksum { rows, high, low }))
        }
        Mode::Rows => {
            let rows: Vec<Row> = side
                .conn
                .exec(shape.rows_sql(range), range.params())
                .await
                .map_err(fail)?;
            let width = shape.key.len();
            Ok(Contents::Rows(
                rows.into_iter()
                    .map(|row| {
                        let mut values = row.unwrap();
                        let hash = match values.pop() {
                            Some(Value::Bytes(b)) => String::from_utf8_lossy(&b).into_owned(),
                            other => format!("{other:?}"),
                        };
                        values.truncate(width);
                        (format_key(&values), hash)
                    })
                    .collect(),
            ))
        }
    }
}

/// Opens a consistent snapshot on the source and returns a GTID position:
/// with `exact`, the snapshot's own (from its binlog coordinates, which
/// `BINLOG_GTID_POS` finds by reading the binlog file up to them: tens of
/// milliseconds on a busy server); else `@@gtid_binlog_pos` read just after
/// the snapshot opened, at or past it (a transaction is in the binlog
/// before the engine commits it, so everything the snapshot sees is in
/// it). `None` when the source has no binlog.
async fn source_snapshot(source: &mut Side, exact: bool) -> Result<Option<String>, OpsError> {
    source
        .run(
            "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
            "opening a consistent snapshot",
        )
        .await?;
    if !exact {
        let fail = source.failed("reading @@gtid_binlog_pos");
        let position: Option<Option<String>> = source
            .conn
            .query_first("SELECT @@gtid_binlog_pos")
            .await
            .map_err(fail)?;
        return Ok(position.flatten().filter(|p| !p.is_empty()));
    }
    let fail = source.failed("reading the snapshot's binlog position");
    let status: Vec<(String, String)> = source
        .conn
        .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
        .await
        .map_err(fail)?;
    let Some((file, offset)) = snapshot_coordinates(&status) else {
        return Ok(None);
    };
    let fail = source.failed("BINLOG_GTID_POS");
    let position: Option<Option<String>> = source
        .conn
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file, offset))
        .await
        .map_err(fail)?;
    Ok(position.flatten())
}

/// How the next chunk is cut: `rows` keys, never past `ceiling` (the
/// table's last key when its compare began; `None`: it was empty).
#[derive(Debug, Clone)]
struct Cut {
    rows: usize,
    ceiling: Option<Vec<Value>>,
}

/// The chunk's upper bound read inside the source's snapshot (`None`: the
/// rest of the table).
async fn boundary(
    source: &mut Side,
    shape: &TableShape,
    lo: &ChunkBounds,
    cut: &Cut,
) -> Result<Option<Vec<Value>>, OpsError> {
    let Some(ceiling) = &cut.ceiling else {
        return Ok(None);
    };
    let from = ChunkBounds {
        lo: lo.lo.clone(),
        hi: Some(ceiling.clone()),
    };
    let fail = source.failed(format!("planning chunks of {}", shape.qualified()));
    let row: Option<Row> = source
        .conn
        .exec_first(shape.boundary_sql(&from, cut.rows), from.params())
        .await
        .map_err(fail)?;
    Ok(row.map(Row::unwrap))
}

/// The table's last key on the source now.
async fn last_key(source: &mut Side, shape: &TableShape) -> Result<Option<Vec<Value>>, OpsError> {
    let fail = source.failed(format!("reading the last key of {}", shape.qualified()));
    // Prepared, so the key comes back typed (it is bound again as a bound).
    let row: Option<Row> = source
        .conn
        .exec_first(shape.last_key_sql(), ())
        .await
        .map_err(fail)?;
    Ok(row.map(Row::unwrap))
}

/// Reads the source's side of a chunk at one snapshot: its GTID position
/// (the snapshot's own with `exact`, else one at or past it), (when `plan`
/// is given, the chunk's upper bound first) and its contents.
async fn read_source(
    side: &mut Side,
    shape: &TableShape,
    range: &mut ChunkBounds,
    plan: Option<&Cut>,
    mode: Mode,
    exact: bool,
) -> Result<(Option<String>, Contents), OpsError> {
    let position = source_snapshot(side, exact).await?;
    let result = async {
        if let Some(cut) = plan {
            range.hi = boundary(side, shape, range, cut).await?;
        }
        read_chunk(side, shape, range, mode).await
    }
    .await;
    side.run("COMMIT", "closing the snapshot").await?;
    Ok((position, result?))
}

/// Waits until the target has applied `position`.
async fn wait_for(target: &mut Side, position: &str) -> Result<(), RowVerifyError> {
    let fail = target.failed("MASTER_GTID_WAIT");
    let waited: Option<Option<i64>> = target
        .conn
        .exec_first(
            "SELECT MASTER_GTID_WAIT(?, ?)",
            (position, CATCH_UP_TIMEOUT.as_secs()),
        )
        .await
        .map_err(fail)?;
    match waited.flatten() {
        Some(0) => Ok(()),
        _ => Err(RowVerifyError::CatchUp {
            target: target.addr.clone(),
            position: position.to_owned(),
        }),
    }
}

/// One read of a chunk on both sides, the target at the source's point or
/// later.
async fn read_both(
    sides: &mut Sides,
    shape: &TableShape,
    range: &mut ChunkBounds,
    plan: Option<&Cut>,
    mode: Mode,
) -> Result<(Contents, Contents), RowVerifyError> {
    let (position, ours) = read_source(&mut sides.source, shape, range, plan, mode, false).await?;
    if sides.replicates {
        if let Some(position) = &position {
            wait_for(&mut sides.target, position).await?;
        }
    }
    let theirs = read_chunk(&mut sides.target, shape, range, mode).await?;
    sides.paced(ours.rows()).await;
    Ok((ours, theirs))
}

/// One read of a chunk with the target's replication stopped exactly at
/// the source's snapshot: `STOP SLAVE`, the source's snapshot at `P` (at or
/// past the target, which only has the source's events), `START SLAVE
/// UNTIL master_gtid_pos = P`, wait for `P`, read, restart replication.
async fn read_pinned(
    sides: &mut Sides,
    shape: &TableShape,
    range: &mut ChunkBounds,
) -> Result<(Contents, Contents), RowVerifyError> {
    sides
        .target
        .run("STOP SLAVE", "stopping replication to pin a chunk")
        .await?;
    let pinned = async {
        let (position, ours) =
            read_source(&mut sides.source, shape, range, None, Mode::Rows, true).await?;
        let position = position.unwrap_or_default();
        let until = format!(
            "START SLAVE UNTIL master_gtid_pos = '{}'",
            position.replace('\'', "")
        );
        sides
            .target
            .run(&until, "replicating up to the source's point")
            .await?;
        wait_for(&mut sides.target, &position).await?;
        let theirs = read_chunk(&mut sides.target, shape, range, Mode::Rows).await?;
        Ok::<_, RowVerifyError>((ours, theirs))
    }
    .await;
    // Always back to plain replication, whatever happened above.
    let restarted = async {
        sides
            .target
            .run("STOP SLAVE", "restarting replication")
            .await?;
        sides
            .target
            .run("START SLAVE", "restarting replication")
            .await
    }
    .await;
    let (ours, theirs) = pinned?;
    restarted?;
    sides.paced(ours.rows()).await;
    Ok((ours, theirs))
}

fn rows_of(contents: Contents) -> Vec<(String, String)> {
    match contents {
        Contents::Rows(rows) => rows,
        Contents::Checksum(_) => Vec::new(),
    }
}

/// Compares one table chunk by chunk, recording differences in `report`.
async fn compare_table(
    sides: &mut Sides,
    request: &RowVerifyRequest,
    shard: u32,
    shape: &TableShape,
    report: &mut RowVerifyReport,
) -> Result<(), RowVerifyError> {
    let cut = Cut {
        rows: request.chunk_rows,
        ceiling: last_key(&mut sides.source, shape).await?,
    };
    let mut range = ChunkBounds::default();
    loop {
        let (ours, theirs) =
            read_both(sides, shape, &mut range, Some(&cut), Mode::Checksum).await?;
        report.chunks += 1;
        if ours != theirs {
            let mut diff = RowsDiff::default();
            let mut settled = false;
            for attempt in 1..=request.rechecks.max(1) {
                tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
                report.rechecks += 1;
                let (ours, theirs) = read_both(sides, shape, &mut range, None, Mode::Rows).await?;
                diff = diff_rows(&rows_of(ours), &rows_of(theirs));
                if diff.is_empty() {
                    settled = true;
                    break;
                }
            }
            if !settled && sides.replicates {
                report.pinned_reads += 1;
                let (ours, theirs) = read_pinned(sides, shape, &mut range).await?;
                diff = diff_rows(&rows_of(ours), &rows_of(theirs));
                settled = diff.is_empty();
            }
            if !settled {
                report.differences.push(RowDifference {
                    shard,
                    database: shape.database.clone(),
                    table: shape.table.clone(),
                    kind: row_kind::ROWS_DIFFER,
                    key_range: range.to_string(),
                    keys: diff,
                    detail: String::new(),
                });
            }
        }
        match range.hi.take() {
            Some(hi) => range.lo = Some(hi),
            None => return Ok(()),
        }
    }
}
