//! The copy phase: every database of the source written to the target
//! over two SQL connections, the source read inside one consistent
//! snapshot whose GTID position (`binlog_snapshot_file/position` through
//! `BINLOG_GTID_POS`) the target then replicates from; then the target's
//! catch-up. After every database's tables and rows, each database's views,
//! triggers, stored procedures and functions, and events are created on the
//! target as the source shows them (views last, in as many passes as views
//! built on views need; events `DISABLE ON SLAVE`: the source runs them).

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use super::{failed, literal, run, Login, SplitError};
use crate::ops::verify::rows::{pace, snapshot_coordinates};
use crate::ops::{quote_ident, split_addr, OpsError};

/// Knobs of [`copy`].
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// Source rows read per second at most (0: no limit).
    pub max_rows_per_second: u64,
    /// Bytes of one multi-row `INSERT` on the target.
    pub batch_bytes: usize,
    /// How long the target may take to catch up after the copy.
    pub catch_up_timeout: Duration,
}

impl Default for CopyOptions {
    fn default() -> Self {
        Self {
            max_rows_per_second: 0,
            batch_bytes: 1 << 20,
            catch_up_timeout: Duration::from_secs(600),
        }
    }
}

/// Where a copy is, for the progress line.
#[derive(Debug, Clone, Default)]
pub struct CopyProgress {
    /// Databases finished.
    pub databases_done: usize,
    /// Databases to copy.
    pub databases: usize,
    /// Rows written so far.
    pub rows: u64,
    /// Bytes of row data (as SQL text) written so far.
    pub bytes: u64,
    /// Time since the copy started.
    pub elapsed: Duration,
}

impl CopyProgress {
    /// The time left, from the databases done so far.
    pub fn eta(&self) -> Option<Duration> {
        (self.databases_done > 0).then(|| {
            let left = self.databases.saturating_sub(self.databases_done) as f64;
            self.elapsed.mul_f64(left / self.databases_done as f64)
        })
    }
}

/// What [`copy`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopyReport {
    /// Databases copied.
    pub databases: usize,
    /// Tables copied.
    pub tables: usize,
    /// Views, triggers, routines and events created on the target.
    pub objects: usize,
    /// Rows copied.
    pub rows: u64,
    /// Bytes of row data (as SQL text) sent to the target.
    pub bytes: u64,
    /// The snapshot's GTID position: the target replicates from there.
    pub gtid: String,
    /// The copy's wall time.
    pub copy_elapsed: Duration,
    /// The catch-up's wall time.
    pub catch_up_elapsed: Duration,
}

impl CopyReport {
    /// Rows and megabytes copied per second.
    pub fn rates(&self) -> (f64, f64) {
        let seconds = self.copy_elapsed.as_secs_f64().max(1e-9);
        (
            self.rows as f64 / seconds,
            self.bytes as f64 / seconds / 1e6,
        )
    }
}

/// Copies `databases` from `source` to `target` at one consistent snapshot,
/// then makes the target a GTID replica of the source from that snapshot
/// and waits until it has caught up. Anything of `databases` already on the
/// target (an interrupted copy) is dropped first, and any replication the
/// target has is reset. `progress` hears after each table.
pub async fn copy(
    login: &Login,
    source_addr: &str,
    target_addr: &str,
    databases: &[String],
    options: &CopyOptions,
    progress: &(dyn Fn(&CopyProgress) + Sync),
) -> Result<CopyReport, SplitError> {
    let started = Instant::now();
    let mut source = login.connect(source_addr).await?;
    let mut target = login.connect(target_addr).await?;
    let result = async {
        let (s, t) = (source_addr, target_addr);
        reset_replication(&mut target, t).await?;
        // Not binlogged on the target: its replicas (if any) are not the
        // source's, and its binlog starts clean at the cutover.
        run(
            &mut target,
            t,
            &format!(
                "SET SESSION sql_log_bin = 0, foreign_key_checks = 0, unique_checks = 0, \
                 time_zone = '+00:00', sql_mode = {}",
                literal(COPY_SQL_MODE)
            ),
        )
        .await?;
        for database in databases {
            run(
                &mut target,
                t,
                &format!("DROP DATABASE IF EXISTS {}", quote_ident(database)),
            )
            .await?;
        }
        run(&mut source, s, "SET SESSION time_zone = '+00:00'").await?;
        run(
            &mut source,
            s,
            "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
        )
        .await?;
        let gtid = snapshot_position(&mut source, s).await?;
        let mut report = CopyReport {
            gtid,
            ..CopyReport::default()
        };
        let mut state = CopyProgress {
            databases: databases.len(),
            ..CopyProgress::default()
        };
        for database in databases {
            copy_database(
                &mut source,
                s,
                &mut target,
                t,
                database,
                options,
                started,
                &mut report,
            )
            .await?;
            report.databases += 1;
            state.databases_done = report.databases;
            state.rows = report.rows;
            state.bytes = report.bytes;
            state.elapsed = started.elapsed();
            progress(&state);
        }
        report.objects = copy_objects(&mut source, s, &mut target, t, databases).await?;
        run(&mut source, s, "COMMIT").await?;
        report.copy_elapsed = started.elapsed();
        start_replication(login, &mut target, s, t, &report.gtid).await?;
        let catching_up = Instant::now();
        catch_up(&mut source, s, &mut target, t, options.catch_up_timeout).await?;
        report.catch_up_elapsed = catching_up.elapsed();
        Ok(report)
    }
    .await;
    let _ = source.disconnect().await;
    let _ = target.disconnect().await;
    result
}

/// The GTID position of the open snapshot.
async fn snapshot_position(source: &mut Conn, s: &str) -> Result<String, SplitError> {
    let status: Vec<(String, String)> = source
        .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
        .await
        .map_err(failed(s, "reading the snapshot's binlog position"))?;
    let Some((file, offset)) = snapshot_coordinates(&status) else {
        return Err(SplitError::Replication(format!(
            "{s} has no binlog (binlog_snapshot_file is empty): the target cannot replicate it; enable log_bin"
        )));
    };
    let position: Option<Option<String>> = source
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file.clone(), offset))
        .await
        .map_err(failed(s, "BINLOG_GTID_POS"))?;
    match position.flatten() {
        Some(position) if !position.is_empty() => Ok(position),
        _ => Err(SplitError::Replication(format!(
            "{s}: BINLOG_GTID_POS('{file}', {offset}) gave no GTID position: the binlog holds no GTID yet \
             (write one transaction on the source) or was purged"
        ))),
    }
}

/// Stops and forgets any replication the target has.
async fn reset_replication(target: &mut Conn, t: &str) -> Result<(), OpsError> {
    let status: Option<Row> = target
        .query_first("SHOW SLAVE STATUS")
        .await
        .map_err(failed(t, "SHOW SLAVE STATUS"))?;
    if status.is_some() {
        run(target, t, "STOP SLAVE").await?;
        run(target, t, "RESET SLAVE ALL").await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn copy_database(
    source: &mut Conn,
    s: &str,
    target: &mut Conn,
    t: &str,
    database: &str,
    options: &CopyOptions,
    started: Instant,
    report: &mut CopyReport,
) -> Result<(), SplitError> {
    let db = quote_ident(database);
    let create: Option<(String, String)> = source
        .query_first(format!("SHOW CREATE DATABASE {db}"))
        .await
        .map_err(failed(s, format!("SHOW CREATE DATABASE {db}")))?;
    let Some((_, create)) = create else {
        return Ok(());
    };
    run(target, t, &create).await?;
    run(target, t, &format!("USE {db}")).await?;
    let tables: Vec<String> = source
        .exec(
            "SELECT TABLE_NAME FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
            (database,),
        )
        .await
        .map_err(failed(s, format!("listing the tables of {db}")))?;
    for table in tables {
        let qualified = format!("{db}.{}", quote_ident(&table));
        let create: Option<(String, String)> = source
            .query_first(format!("SHOW CREATE TABLE {qualified}"))
            .await
            .map_err(failed(s, format!("SHOW CREATE TABLE {qualified}")))?;
        let Some((_, create)) = create else {
            continue;
        };
        run(target, t, &create).await?;
        let columns: Vec<String> = source
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND IS_GENERATED = 'NEVER' \
                 ORDER BY ORDINAL_POSITION",
                (database, &table),
            )
            .await
            .map_err(failed(s, format!("listing the columns of {qualified}")))?;
        let list = columns
            .iter()
            .map(|c| quote_ident(c))
            .collect::<Vec<_>>()
            .join(", ");
        copy_rows(
            source, s, target, t, &qualified, &list, options, started, report,
        )
        .await?;
        report.tables += 1;
    }
    Ok(())
}

/// The `sql_mode` the target's copy session runs in (restored after each
/// object created in the source's own mode).
const COPY_SQL_MODE: &str = "NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION";

/// One view, trigger, routine or event to create on the target.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Object {
    database: String,
    /// `VIEW`, `TRIGGER`, `PROCEDURE`, `FUNCTION` or `EVENT`.
    kind: &'static str,
    name: String,
}

impl Object {
    /// The column of `SHOW CREATE <kind>` holding the statement.
    fn statement_column(&self) -> &'static str {
        match self.kind {
            "VIEW" => "Create View",
            "TRIGGER" => "SQL Original Statement",
            "PROCEDURE" => "Create Procedure",
            "FUNCTION" => "Create Function",
            _ => "Create Event",
        }
    }
}

/// The views, triggers, routines and events of `databases` on the source
/// (triggers in their firing order, so that creating them one after the
/// other keeps it).
async fn objects_of(
    source: &mut Conn,
    s: &str,
    databases: &[String],
) -> Result<Vec<Object>, OpsError> {
    let queries: [(&'static str, &str); 5] = [
        (
            "TRIGGER",
            "SELECT TRIGGER_SCHEMA, TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? \
             ORDER BY EVENT_OBJECT_TABLE, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER",
        ),
        (
            "PROCEDURE",
            "SELECT ROUTINE_SCHEMA, ROUTINE_NAME FROM information_schema.ROUTINES \
             WHERE ROUTINE_SCHEMA = ? AND ROUTINE_TYPE = 'PROCEDURE' ORDER BY ROUTINE_NAME",
        ),
        (
            "FUNCTION",
            "SELECT ROUTINE_SCHEMA, ROUTINE_NAME FROM information_schema.ROUTINES \
             WHERE ROUTINE_SCHEMA = ? AND ROUTINE_TYPE = 'FUNCTION' ORDER BY ROUTINE_NAME",
        ),
        (
            "EVENT",
            "SELECT EVENT_SCHEMA, EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ? \
             ORDER BY EVENT_NAME",
        ),
        (
            "VIEW",
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'VIEW' ORDER BY TABLE_NAME",
        ),
    ];
    let mut objects = Vec::new();
    for (kind, sql) in queries {
        for database in databases {
            let found: Vec<(String, String)> = source
                .exec(sql, (database,))
                .await
                .map_err(failed(s, format!("listing the {kind}s of {database}")))?;
            objects.extend(found.into_iter().map(|(database, name)| Object {
                database,
                kind,
                name,
            }));
        }
    }
    Ok(objects)
}

/// Creates one object on the target as `SHOW CREATE` gives it on the
/// source, in the source's `sql_mode` when it has one; the target's
/// answer.
async fn create_object(
    source: &mut Conn,
    s: &str,
    target: &mut Conn,
    object: &Object,
) -> Result<Result<(), mysql_async::Error>, SplitError> {
    let qualified = format!(
        "{}.{}",
        quote_ident(&object.database),
        quote_ident(&object.name)
    );
    let show = format!("SHOW CREATE {} {qualified}", object.kind);
    let row: Option<Row> = source
        .query_first(&show)
        .await
        .map_err(failed(s, show.clone()))?;
    let text = |column: &str| {
        row.as_ref().and_then(|row| {
            row.get_opt::<Option<String>, _>(column)
                .and_then(Result::ok)
                .flatten()
        })
    };
    let Some(statement) = text(object.statement_column()) else {
        return Err(SplitError::Copy(format!(
            "{s}: {show} shows no statement: the operations account needs SHOW CREATE ROUTINE (or SELECT on \
             mysql.proc), TRIGGER and EVENT on the source's databases"
        )));
    };
    let mut sql = format!("USE {}; ", quote_ident(&object.database));
    if let Some(mode) = text("sql_mode") {
        sql.push_str(&format!("SET SESSION sql_mode = {}; ", literal(&mode)));
    }
    Ok(target.query_drop(format!("{sql}{statement}")).await)
}

/// Creates every view, trigger, routine and event of `databases` on the
/// target; how many. Views go last, in passes while a pass creates some
/// (a view may read another one); a view that still fails fails the copy
/// with the target's error. Events are then made `DISABLE ON SLAVE` on the
/// target: the source runs them until the split is done.
async fn copy_objects(
    source: &mut Conn,
    s: &str,
    target: &mut Conn,
    t: &str,
    databases: &[String],
) -> Result<usize, SplitError> {
    let mut pending = objects_of(source, s, databases).await?;
    if pending.is_empty() {
        return Ok(0);
    }
    let mut created = 0;
    loop {
        let before = created;
        let mut left = Vec::new();
        let mut first_error = None;
        for object in pending {
            let what = format!(
                "creating {} {}.{}",
                object.kind, object.database, object.name
            );
            match create_object(source, s, target, &object).await? {
                Ok(()) => {
                    if object.kind == "EVENT" {
                        let qualified = format!(
                            "{}.{}",
                            quote_ident(&object.database),
                            quote_ident(&object.name)
                        );
                        run(
                            target,
                            t,
                            &format!("ALTER EVENT {qualified} DISABLE ON SLAVE"),
                        )
                        .await?;
                    }
                    created += 1;
                }
                Err(error) if object.kind == "VIEW" => {
                    first_error.get_or_insert((what, error));
                    left.push(object);
                }
                Err(error) => return Err(failed(t, what)(error).into()),
            }
        }
        pending = left;
        match first_error {
            None => break,
            Some((what, error)) if created == before => return Err(failed(t, what)(error).into()),
            Some(_) => {}
        }
    }
    run(
        target,
        t,
        &format!("SET SESSION sql_mode = {}", literal(COPY_SQL_MODE)),
    )
    .await?;
    Ok(created)
}

/// `INSERT INTO table (columns) VALUES` then rows, in batches.
#[allow(clippy::too_many_arguments)]
async fn copy_rows(
    source: &mut Conn,
    s: &str,
    target: &mut Conn,
    t: &str,
    qualified: &str,
    columns: &str,
    options: &CopyOptions,
    started: Instant,
    report: &mut CopyReport,
) -> Result<(), SplitError> {
    let head = format!("INSERT INTO {qualified} ({columns}) VALUES ");
    let mut batches = Vec::new();
    let mut sql = String::new();
    let mut batch_rows = 0u64;
    // The source's rows are read a batch at a time (streamed), each batch
    // written before the next is read.
    let mut result = source
        .query_iter(format!("SELECT {columns} FROM {qualified}"))
        .await
        .map_err(failed(s, format!("reading {qualified}")))?;
    loop {
        let row: Option<Row> = result
            .next()
            .await
            .map_err(failed(s, format!("reading {qualified}")))?;
        let end = row.is_none();
        if let Some(row) = row {
            if sql.is_empty() {
                sql.push_str(&head);
            } else {
                sql.push(',');
            }
            let values: Vec<Value> = row.unwrap();
            sql.push('(');
            for (i, value) in values.iter().enumerate() {
                if i > 0 {
                    sql.push(',');
                }
                sql.push_str(&value.as_sql(false));
            }
            sql.push(')');
            batch_rows += 1;
        }
        if !sql.is_empty() && (end || sql.len() >= options.batch_bytes) {
            batches.push((std::mem::take(&mut sql), batch_rows));
            batch_rows = 0;
        }
        // Written while the source's result is still open: two connections.
        for (batch, rows) in batches.drain(..) {
            target
                .query_drop(&batch)
                .await
                .map_err(failed(t, format!("writing rows of {qualified}")))?;
            report.rows += rows;
            report.bytes += batch.len() as u64;
            let wait = pace(report.rows, started.elapsed(), options.max_rows_per_second);
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        if end {
            return Ok(());
        }
    }
}

/// `CHANGE MASTER TO` the source from `gtid`, and `START SLAVE`.
async fn start_replication(
    login: &Login,
    target: &mut Conn,
    s: &str,
    t: &str,
    gtid: &str,
) -> Result<(), SplitError> {
    let (host, port) = split_addr(s)?;
    reset_replication(target, t).await?;
    run(
        target,
        t,
        &format!("SET GLOBAL gtid_slave_pos = {}", literal(gtid)),
    )
    .await?;
    run(
        target,
        t,
        &format!(
            "CHANGE MASTER TO MASTER_HOST = {}, MASTER_PORT = {port}, MASTER_USER = {}, MASTER_PASSWORD = {}, \
             MASTER_CONNECT_RETRY = 1, MASTER_USE_GTID = slave_pos",
            literal(&host),
            literal(&login.user),
            literal(&login.password)
        ),
    )
    .await?;
    run(target, t, "START SLAVE").await?;
    Ok(())
}

/// What the target's replication says when it is broken: the IO or SQL
/// thread stopped, with its error.
pub(super) async fn replication_problem(
    target: &mut Conn,
    t: &str,
) -> Result<Option<String>, OpsError> {
    let status: Option<Row> = target
        .query_first("SHOW SLAVE STATUS")
        .await
        .map_err(failed(t, "SHOW SLAVE STATUS"))?;
    let Some(status) = status else {
        return Ok(Some(
            "replication is not configured (SHOW SLAVE STATUS is empty)".to_owned(),
        ));
    };
    let column = |name: &str| {
        status
            .get_opt::<String, _>(name)
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    if column("Slave_SQL_Running") != "Yes" {
        return Ok(Some(format!(
            "the SQL thread stopped: {}",
            column("Last_SQL_Error")
        )));
    }
    if column("Slave_IO_Running") == "No" {
        return Ok(Some(format!(
            "the IO thread stopped: {}",
            column("Last_IO_Error")
        )));
    }
    Ok(None)
}

/// Waits until the target has applied everything the source has now.
async fn catch_up(
    source: &mut Conn,
    s: &str,
    target: &mut Conn,
    t: &str,
    timeout: Duration,
) -> Result<(), SplitError> {
    let started = Instant::now();
    let position: Option<String> = source
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .map_err(failed(s, "reading @@gtid_binlog_pos"))?;
    let position = position.unwrap_or_default();
    loop {
        let waited: Option<Option<i64>> = target
            .exec_first("SELECT MASTER_GTID_WAIT(?, 2)", (&position,))
            .await
            .map_err(failed(t, "MASTER_GTID_WAIT"))?;
        if waited.flatten() == Some(0) {
            return Ok(());
        }
        if let Some(problem) = replication_problem(target, t).await? {
            return Err(SplitError::Replication(format!(
                "{t} does not replicate {s}: {problem}"
            )));
        }
        if started.elapsed() >= timeout {
            return Err(SplitError::Replication(format!(
                "{t} did not reach {s}'s GTID position {position} within {}s",
                timeout.as_secs()
            )));
        }
    }
}

/// Makes sure the target replicates (a verify killed during a pinned read
/// leaves it stopped at its `UNTIL` position): `START SLAVE`, then fails
/// with the server's error when a thread still does not run.
pub async fn ensure_replicating(login: &Login, target_addr: &str) -> Result<(), SplitError> {
    let mut target = login.connect(target_addr).await?;
    let result = async {
        run(&mut target, target_addr, "START SLAVE").await?;
        for _ in 0..50 {
            match replication_problem(&mut target, target_addr).await? {
                None => return Ok(()),
                Some(problem) if problem.starts_with("replication is not configured") => {
                    return Err(SplitError::Replication(format!(
                        "{target_addr}: {problem}: the copy is gone? remove the state file and split again"
                    )))
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        match replication_problem(&mut target, target_addr).await? {
            None => Ok(()),
            Some(problem) => Err(SplitError::Replication(format!(
                "{target_addr} does not replicate: {problem}"
            ))),
        }
    }
    .await;
    let _ = target.disconnect().await;
    result
}
