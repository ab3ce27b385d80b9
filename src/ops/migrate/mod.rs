//! `shardgate fleet migrate`: one schema change (`ALTER TABLE pins ADD
//! COLUMN ...`) applied to every shard database of its table's fleet, on
//! the master that owns each, as the operations account.
//!
//! Hosts are worked in parallel, each with a bounded number of connections
//! (the walk, connections and progress bar of `fleet init`). Every shard
//! database done is appended to a state file, so an interrupted run resumes
//! where it stopped: a rerun of the same statement skips them. A shard
//! whose statement fails with an "already applied" error (1050 table
//! exists, 1060 duplicate column, 1061 duplicate key, 1091 can't drop, 1051
//! unknown table) counts as done only when its `SHOW CREATE TABLE` is the
//! one a shard that applied the statement has (AUTO_INCREMENT counters
//! aside). At the end every shard database's columns of the table are
//! compared with `fleet verify`'s comparison; the report lists the shards
//! that failed and why.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::verify::{column_difference, like_patterns, read_catalog, ReadCatalog, Tables};
use super::{
    drain_on_host, jobs_by_master, progress_bar, quote_ident, HostLogin, OpsError,
    DEFAULT_CONNECTIONS_PER_HOST,
};
use crate::router::plan::{ClientCharset, LexMode, TrailCharset};
use crate::router::{migration_table, migration_table_in, MigrationTable};
use crate::topology::{FleetId, HostId, Topology};
use state::{default_state_path, read_state, StateFile};

mod state;
#[cfg(test)]
mod tests;

/// Server errors that may mean the statement was applied before (by an
/// interrupted run whose state file missed it, or by hand).
const ALREADY_APPLIED: [u16; 5] = [1050, 1051, 1060, 1061, 1091];

/// What `shardgate fleet migrate` is asked to do.
#[derive(Debug, Clone)]
pub struct MigrateOptions {
    /// The schema change, naming its table unqualified.
    pub sql: String,
    /// The fleet, by name: needed for a table the config does not name
    /// when there are several fleets; must match the config's otherwise.
    pub fleet: Option<String>,
    /// Concurrent connections per host.
    pub connections_per_host: usize,
    /// Where the shard databases done are recorded (default: a file in the
    /// working directory named after the fleet, the table and the statement).
    pub state: Option<PathBuf>,
    /// Show a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// Stop after this many shard databases changed in this run, as an
    /// interruption would (for tests and for going step by step).
    pub limit: Option<usize>,
}

impl MigrateOptions {
    /// Options for `sql` with the defaults.
    pub fn new(sql: impl Into<String>) -> Self {
        MigrateOptions {
            sql: sql.into(),
            fleet: None,
            connections_per_host: DEFAULT_CONNECTIONS_PER_HOST,
            state: None,
            progress: true,
            limit: None,
        }
    }
}

/// The work of a migration, decided before anything is sent: its
/// `Display` is the dry run's output.
#[derive(Debug, Clone)]
pub struct MigratePlan {
    /// The statement.
    pub sql: String,
    /// Its table.
    pub table: MigrationTable,
    /// The fleet's index and name.
    pub fleet: (FleetId, String),
    /// Shard databases per master, hosts in topology order.
    pub hosts: Vec<(HostId, String, Vec<String>)>,
    /// The state file.
    pub state_path: PathBuf,
    /// Shard databases a previous run finished (from the state file).
    pub done_before: HashSet<String>,
}

impl MigratePlan {
    fn shards(&self) -> usize {
        self.hosts.iter().map(|(_, _, dbs)| dbs.len()).sum()
    }
}

impl fmt::Display for MigratePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fleet migrate plan: table `{}` of fleet {}, {} shard databases on {} hosts",
            self.table.name,
            self.fleet.1,
            self.shards(),
            self.hosts.len()
        )?;
        for (_, addr, dbs) in &self.hosts {
            let todo = dbs
                .iter()
                .filter(|d| !self.done_before.contains(*d))
                .count();
            let (first, last) = (dbs.first(), dbs.last());
            writeln!(
                f,
                "  {addr}: {} shard databases ({} .. {}), {todo} to do, {} done before",
                dbs.len(),
                first.map_or("-", String::as_str),
                last.map_or("-", String::as_str),
                dbs.len() - todo
            )?;
        }
        if let Some((_, _, dbs)) = self.hosts.first() {
            if let Some(db) = dbs.first() {
                writeln!(
                    f,
                    "  per shard database, e.g.: {}; then {}",
                    use_sql(db),
                    self.sql
                )?;
            }
        }
        write!(f, "  state file: {}", self.state_path.display())
    }
}

/// One shard database whose statement failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardFailure {
    /// Its master.
    pub host: String,
    /// The shard database (empty when the whole host failed).
    pub database: String,
    /// Why.
    pub reason: String,
}

/// What a migration did.
#[derive(Debug, Clone, Default)]
pub struct MigrateReport {
    /// The statement.
    pub sql: String,
    /// The fleet's name.
    pub fleet: String,
    /// The table.
    pub table: String,
    /// Shard databases of the fleet.
    pub shards: usize,
    /// Done by a previous run (skipped).
    pub done_before: usize,
    /// Applied by this run.
    pub applied: usize,
    /// Found already applied (an "already applied" error and the same
    /// definition as the applied shards).
    pub already_applied: usize,
    /// Left for a later run by `--limit`.
    pub left: usize,
    /// Shards (or hosts) that failed, and why.
    pub failures: Vec<ShardFailure>,
    /// Shard databases whose columns differ from the reference shard's.
    pub definition_problems: Vec<String>,
    /// Whether the definition check ran (every shard done).
    pub checked: bool,
    /// The shard database whose definition is the reference.
    pub reference: Option<String>,
    /// Its `SHOW CREATE TABLE` after the migration (`None`: dropped).
    pub show_create: Option<String>,
    /// The state file, and whether it was removed (migration complete).
    pub state: (PathBuf, bool),
    /// Wall time.
    pub elapsed: Duration,
}

impl MigrateReport {
    /// Every shard database done, and the same definition on all.
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty() && self.definition_problems.is_empty() && self.left == 0
    }
}

impl fmt::Display for MigrateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fleet migrate: `{}` on fleet {} (table `{}`): {} shard databases; {} applied, {} already applied, {} done before, {} failed, {} left ({:.1}s)",
            self.sql,
            self.fleet,
            self.table,
            self.shards,
            self.applied,
            self.already_applied,
            self.done_before,
            self.failures.len(),
            self.left,
            self.elapsed.as_secs_f64()
        )?;
        for failure in &self.failures {
            writeln!(
                f,
                "failed: {} on {}: {}",
                if failure.database.is_empty() {
                    "host"
                } else {
                    &failure.database
                },
                failure.host,
                failure.reason
            )?;
        }
        if self.checked {
            match self.definition_problems.len() {
                0 => writeln!(
                    f,
                    "definition check: `{}` is the same in every shard database",
                    self.table
                )?,
                n => {
                    writeln!(f, "definition check: {n} shard databases differ:")?;
                    for problem in &self.definition_problems {
                        writeln!(f, "  {problem}")?;
                    }
                }
            }
        }
        let (path, removed) = &self.state;
        if *removed {
            writeln!(f, "state file {} removed (complete)", path.display())?;
        } else {
            writeln!(
                f,
                "state file {} kept: run the same command again to resume",
                path.display()
            )?;
        }
        match (&self.reference, &self.show_create) {
            (Some(db), Some(create)) if self.is_ok() => write!(
                f,
                "now update the schema file (config/schema.sql) so `fleet init` and `fleet verify` agree; `{}` in {db} is now:\n{create};",
                self.table
            ),
            (_, None) if self.is_ok() => write!(
                f,
                "now remove `{}` from the schema file (config/schema.sql) and the config's tables, if it is there",
                self.table
            ),
            _ if self.failures.is_empty() && self.left > 0 => write!(
                f,
                "stopped after the --limit: run the same command again to do the {} left",
                self.left
            ),
            _ => write!(
                f,
                "not complete: fix the failures and run the same command again"
            ),
        }
    }
}

/// Decides what [`migrate`] would do: the statement's table and fleet, the
/// shard databases per master and the state of a previous run.
pub fn plan(topology: &Topology, options: &MigrateOptions) -> Result<MigratePlan, OpsError> {
    let bad = |message: String| OpsError::Migrate(message);
    let table =
        migration_table(&options.sql).map_err(|e| bad(format!("`{}`: {e}", options.sql)))?;
    let named = match &options.fleet {
        Some(name) => Some(
            topology
                .fleets
                .iter()
                .position(|f| &f.name == name)
                .ok_or_else(|| bad(format!("no fleet named {name} in the config")))?,
        ),
        None => None,
    };
    let configured = topology
        .table(&table.name.to_ascii_lowercase())
        .map(|r| r.fleet);
    let fleet = match (configured, named) {
        (Some(c), Some(n)) if c != n => {
            return Err(bad(format!(
                "table `{}` is on fleet {} in the config, not {}",
                table.name, topology.fleets[c].name, topology.fleets[n].name
            )))
        }
        (Some(fleet), _) | (None, Some(fleet)) => fleet,
        (None, None) if topology.fleets.len() == 1 => 0,
        (None, None) => {
            return Err(bad(format!(
                "table `{}` is not in the config: say which fleet with --fleet",
                table.name
            )))
        }
    };
    let fleet_name = topology.fleets[fleet].name.clone();
    let hosts = jobs_by_master(topology, Some(fleet))
        .into_iter()
        .map(|(id, jobs)| {
            let dbs = jobs.into_iter().map(|job| job.database).collect();
            (id, topology.hosts[id].addr.clone(), dbs)
        })
        .collect();
    let state_path = options
        .state
        .clone()
        .unwrap_or_else(|| default_state_path(&fleet_name, &table.name, &options.sql));
    let done_before = read_state(&state_path, &fleet_name, &options.sql)?;
    Ok(MigratePlan {
        sql: options.sql.clone(),
        table,
        fleet: (fleet, fleet_name),
        hosts,
        state_path,
        done_before,
    })
}

/// The statement that selects one shard database, sent on its own before
/// the migration statement.
fn use_sql(database: &str) -> String {
    format!("USE {}", quote_ident(database))
}

/// What reads the session's `sql_mode`, character set and version, which
/// decide how the server splits and reads the statement.
const LEX_STATE: &str = "SELECT @@session.sql_mode, @@session.character_set_client, @@version";

/// How a server whose session reports `sql_mode`, `charset` and `version`
/// reads a statement.
fn server_lex_mode(sql_mode: &str, charset: &str, version: &str) -> LexMode {
    let has = |flag: &str| {
        sql_mode
            .split(',')
            .any(|mode| mode.trim().eq_ignore_ascii_case(flag))
    };
    LexMode {
        no_backslash_escapes: has("NO_BACKSLASH_ESCAPES"),
        ansi_quotes: has("ANSI_QUOTES"),
        // An unknown set is read the most cautious way.
        charset: ClientCharset::from_name(charset)
            .unwrap_or(ClientCharset::AsciiTrail(TrailCharset::Gbk)),
        server_version: crate::router::plan::version_number(version)
            .unwrap_or(LexMode::default().server_version),
    }
}

/// Refuses `sql` unless the session described by `mode` reads it as the
/// plan did: one schema change of `table`.
fn check_as_server_reads(sql: &str, mode: &LexMode, table: &MigrationTable) -> Result<(), String> {
    match migration_table_in(sql, mode) {
        Ok(read) if &read == table => Ok(()),
        Ok(read) => Err(format!(
            "the server's session would read the statement as a change of `{}`, not `{}`; not sent",
            read.name, table.name
        )),
        Err(e) => Err(format!(
            "the server's session (sql_mode, character set) reads the statement differently: {e}; not sent"
        )),
    }
}

/// An "already applied" error on a shard, to check against the reference.
#[derive(Debug, Clone)]
struct Candidate {
    host: HostId,
    database: String,
    error: String,
}

/// What the host tasks share.
struct Shared {
    sql: String,
    /// What the plan read the statement as.
    table: MigrationTable,
    state: StateFile,
    applied: AtomicUsize,
    /// One shard database that applied the statement, and its host.
    reference: Mutex<Option<(HostId, String)>>,
    candidates: Mutex<Vec<Candidate>>,
    failures: Mutex<Vec<ShardFailure>>,
    limit: Option<usize>,
    /// Shard databases whose statement was started (for `limit`).
    started: AtomicUsize,
    limited: AtomicBool,
}

/// Applies the plan's statement to every shard database not done yet; see
/// the module documentation.
pub async fn migrate(
    topology: &Topology,
    plan: &MigratePlan,
    options: &MigrateOptions,
) -> Result<MigrateReport, OpsError> {
    let started = Instant::now();
    let state = StateFile::open(&plan.state_path, &plan.fleet.1, &plan.sql)?;
    let total = plan.shards();
    let bar = progress_bar(
        options.progress,
        total,
        "fleet migrate [{elapsed_precise}] {wide_bar} {pos}/{len} shard databases ({per_sec}, eta {eta})",
    );
    bar.inc(plan.done_before.len() as u64);
    let shared = Arc::new(Shared {
        sql: plan.sql.clone(),
        table: plan.table.clone(),
        state,
        applied: AtomicUsize::new(0),
        reference: Mutex::new(None),
        candidates: Mutex::new(Vec::new()),
        failures: Mutex::new(Vec::new()),
        limit: options.limit,
        started: AtomicUsize::new(0),
        limited: AtomicBool::new(false),
    });
    let mut tasks = Vec::new();
    for (host, addr, dbs) in &plan.hosts {
        let todo: Vec<String> = dbs
            .iter()
            .filter(|d| !plan.done_before.contains(*d))
            .cloned()
            .collect();
        let login = HostLogin::operations(topology, *host);
        let (shared, bar, host, addr) = (shared.clone(), bar.clone(), *host, addr.clone());
        let connections = options.connections_per_host;
        tasks.push(tokio::spawn(async move {
            let work = move |conn: Conn, database: String| {
                let (shared, bar, addr) = (shared.clone(), bar.clone(), addr.clone());
                async move { apply_one(conn, host, &addr, database, &shared, &bar).await }
            };
            drain_on_host(&login, connections, None, todo, work).await
        }));
    }
    for ((_, addr, _), task) in plan.hosts.iter().zip(tasks) {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => crate::sync::lock(&shared.failures).push(ShardFailure {
                host: addr.clone(),
                database: String::new(),
                reason: e.to_string(),
            }),
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
    bar.finish_and_clear();
    let done_now = Mutex::new(Vec::new());
    let reference = crate::sync::lock(&shared.reference).clone();
    let candidates = std::mem::take(&mut *crate::sync::lock(&shared.candidates));
    let reference =
        settle_candidates(topology, plan, reference, candidates, &shared, &done_now).await?;
    let applied = shared.applied.load(Ordering::Relaxed);
    let already_applied = crate::sync::lock(&done_now).len();
    let mut failures = std::mem::take(&mut *crate::sync::lock(&shared.failures));
    failures.sort_by(|a, b| (&a.host, &a.database).cmp(&(&b.host, &b.database)));
    let left =
        total.saturating_sub(plan.done_before.len() + applied + already_applied + failures.len());
    let mut report = MigrateReport {
        sql: plan.sql.clone(),
        fleet: plan.fleet.1.clone(),
        table: plan.table.name.clone(),
        shards: total,
        done_before: plan.done_before.len(),
        applied,
        already_applied,
        left: if shared.limited.load(Ordering::Relaxed) {
            left
        } else {
            0
        },
        failures,
        reference: reference.as_ref().map(|(_, db)| db.clone()),
        state: (plan.state_path.clone(), false),
        ..MigrateReport::default()
    };
    if report.failures.is_empty() && report.left == 0 {
        if let Some((host, db)) = &reference {
            report.show_create = show_create(topology, *host, db, &plan.table.name).await?;
        }
        report.definition_problems = check_definitions(topology, plan, &reference).await?;
        report.checked = true;
        if report.definition_problems.is_empty() {
            report.state.1 = std::fs::remove_file(&plan.state_path).is_ok();
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Runs the statement in one shard database and records the outcome; a
/// lost connection is returned as the host's error.
async fn apply_one(
    mut conn: Conn,
    host: HostId,
    addr: &str,
    database: String,
    shared: &Shared,
    bar: &indicatif::ProgressBar,
) -> (Conn, Result<(), OpsError>) {
    if let Some(limit) = shared.limit {
        if shared.started.fetch_add(1, Ordering::Relaxed) >= limit {
            shared.limited.store(true, Ordering::Relaxed);
            return (conn, Ok(()));
        }
    }
    let fail = |reason: String| {
        crate::sync::lock(&shared.failures).push(ShardFailure {
            host: addr.to_owned(),
            database: database.clone(),
            reason,
        })
    };
    let outcome = match read_as_server(&mut conn, &database, shared).await {
        Ok(Ok(())) => conn.query_drop(&shared.sql).await,
        Ok(Err(refused)) => {
            fail(refused);
            bar.inc(1);
            return (conn, Ok(()));
        }
        Err(e) => Err(e),
    };
    match outcome {
        Ok(()) => {
            shared.applied.fetch_add(1, Ordering::Relaxed);
            crate::sync::lock(&shared.reference).get_or_insert((host, database.clone()));
            if let Err(e) = shared.state.done(&database) {
                fail(e);
            }
        }
        Err(mysql_async::Error::Server(e)) if ALREADY_APPLIED.contains(&e.code) => {
            crate::sync::lock(&shared.candidates).push(Candidate {
                host,
                database,
                error: format!("{} {}", e.code, e.message),
            })
        }
        Err(mysql_async::Error::Server(e)) => fail(format!("{} {}", e.code, e.message)),
        Err(source) => {
            let error = OpsError::Query {
                host: addr.to_owned(),
                what: format!("migrating {database}"),
                source,
            };
            return (conn, Err(error));
        }
    }
    bar.inc(1);
    (conn, Ok(()))
}

/// Selects `database` on `conn` and checks that its session reads the
/// statement as the plan did (`Ok(Err)`: it does not, with why).
async fn read_as_server(
    conn: &mut Conn,
    database: &str,
    shared: &Shared,
) -> Result<Result<(), String>, mysql_async::Error> {
    conn.query_drop(use_sql(database)).await?;
    let row: Option<(String, String, String)> = conn.query_first(LEX_STATE).await?;
    let Some((sql_mode, charset, version)) = row else {
        return Ok(Err(
            "the server did not say its sql_mode; not sent".to_owned()
        ));
    };
    let mode = server_lex_mode(&sql_mode, &charset, &version);
    Ok(check_as_server_reads(&shared.sql, &mode, &shared.table))
}

/// Decides the "already applied" shards: done when their definition is
/// the reference's (a shard that applied the statement, in this run or an
/// earlier one; with none, every candidate fails). Returns the reference.
async fn settle_candidates(
    topology: &Topology,
    plan: &MigratePlan,
    reference: Option<(HostId, String)>,
    candidates: Vec<Candidate>,
    shared: &Shared,
    done_now: &Mutex<Vec<String>>,
) -> Result<Option<(HostId, String)>, OpsError> {
    let table = &plan.table.name;
    // A shard that applied the statement now, else one an earlier run
    // did, else the first candidate.
    let done_before = plan.hosts.iter().find_map(|(id, _, dbs)| {
        dbs.iter()
            .find(|db| plan.done_before.contains(*db))
            .map(|db| (*id, db.clone()))
    });
    let Some(reference) = reference.or(done_before) else {
        // Nothing to compare with: a definition every shard shares may
        // still differ from the one the statement makes.
        let mut failures = crate::sync::lock(&shared.failures);
        for candidate in candidates {
            failures.push(ShardFailure {
                host: topology.hosts[candidate.host].addr.clone(),
                database: candidate.database,
                reason: format!(
                    "{}, and no shard database applied the statement, so there is no definition \
                     to compare `{table}` with: check it by hand (SHOW CREATE TABLE) and change the \
                     statement (IF NOT EXISTS / IF EXISTS) rather than count it as applied",
                    candidate.error
                ),
            });
        }
        return Ok(None);
    };
    let expected = show_create(topology, reference.0, &reference.1, table).await?;
    for candidate in candidates {
        let found = show_create(topology, candidate.host, &candidate.database, table).await?;
        if found == expected {
            shared
                .state
                .done(&candidate.database)
                .map_err(OpsError::Migrate)?;
            crate::sync::lock(done_now).push(candidate.database);
        } else {
            crate::sync::lock(&shared.failures).push(ShardFailure {
                host: topology.hosts[candidate.host].addr.clone(),
                database: candidate.database,
                reason: format!(
                    "{}, and its `{table}` is not defined as in {}: not counted as already applied",
                    candidate.error, reference.1
                ),
            });
        }
    }
    Ok(Some(reference))
}

/// `SHOW CREATE TABLE` of `db.table` without its AUTO_INCREMENT counter;
/// `None` when the table does not exist.
async fn show_create(
    topology: &Topology,
    host: HostId,
    database: &str,
    table: &str,
) -> Result<Option<String>, OpsError> {
    let login = HostLogin::operations(topology, host);
    let mut conn = login.connect().await?;
    let sql = format!(
        "SHOW CREATE TABLE {}.{}",
        quote_ident(database),
        quote_ident(table)
    );
    let row: Result<Option<(String, String)>, _> = conn.query_first(&sql).await;
    let _ = conn.disconnect().await;
    match row {
        Ok(row) => Ok(row.map(|(_, create)| without_auto_increment(&create))),
        Err(mysql_async::Error::Server(e)) if e.code == 1146 => Ok(None),
        Err(source) => Err(OpsError::Query {
            host: login.host,
            what: sql,
            source,
        }),
    }
}

/// A table definition without ` AUTO_INCREMENT=N` (the counter, not the
/// definition).
fn without_auto_increment(create: &str) -> String {
    let mut out = String::with_capacity(create.len());
    let mut rest = create;
    while let Some(at) = rest.find(" AUTO_INCREMENT=") {
        out.push_str(&rest[..at]);
        rest =
            rest[at + " AUTO_INCREMENT=".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// Compares the table's columns in every shard database of the fleet with
/// the reference shard's (`fleet verify`'s reading and comparison): one
/// line per shard database that differs.
async fn check_definitions(
    topology: &Topology,
    plan: &MigratePlan,
    reference: &Option<(HostId, String)>,
) -> Result<Vec<String>, OpsError> {
    let patterns = Arc::new(like_patterns(topology));
    let mut catalogs: BTreeMap<HostId, Tables> = BTreeMap::new();
    for (id, _, _) in &plan.hosts {
        let login = HostLogin::operations(topology, *id);
        let catalog = read_catalog(ReadCatalog {
            addr: login.host,
            user: login.user,
            password: login.password,
            timeout: login.timeout,
            patterns: patterns.clone(),
            columns: true,
        })
        .await?;
        catalogs.insert(*id, catalog.tables.unwrap_or_default());
    }
    let table = &plan.table.name;
    let columns = |host: HostId, db: &str| -> Option<Vec<String>> {
        catalogs
            .get(&host)?
            .get(db)?
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(table))
            .map(|(_, columns)| columns.clone())
    };
    let expected = match reference {
        Some((host, db)) if !plan.table.dropped => columns(*host, db),
        _ => None,
    };
    let mut problems = Vec::new();
    for (id, addr, dbs) in &plan.hosts {
        for db in dbs {
            let found = columns(*id, db);
            let difference = match (&expected, &found) {
                (None, None) => None,
                (Some(_), None) => Some(format!("`{table}` is absent")),
                (None, Some(_)) => Some(format!("`{table}` is still there")),
                (Some(expected), Some(found)) => column_difference(expected, found),
            };
            if let Some(difference) = difference {
                problems.push(format!("{db} on {addr}: {difference}"));
            }
        }
    }
    Ok(problems)
}
