//! `VERIFY FLEET` and `shardgate fleet verify`: every shard database exists
//! on the master that owns it and nowhere it should not, and (given the
//! per-shard schema) has exactly the schema's tables with the schema's
//! columns in order. Every problem is one [`Problem`] row.
//!
//! Each host is read with two `information_schema` queries (databases, and
//! the columns of every table when the host is a master and a schema is
//! given), filtered to the fleets' database name prefixes, never one query
//! per database. Hosts are read in parallel.
//!
//! Where a shard database may be: on the master of its range, and on that
//! range's replica (a copy by replication). Anywhere else it is an orphan,
//! e.g. left on the old master after a shard move. A promoted replica is the
//! range's master in the config after `PROMOTE REPLICA`, so it is checked
//! as one; the old master is no longer in the topology unless it is still
//! listed (as another range's master, where its copies are orphans, or as
//! the new master's `replica:`, where they are allowed).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::schema::{plan_schema, table_columns};
use super::{admin_connect_timeout, connect, OpsError};
use crate::topology::{FleetId, Topology};

mod compare;
pub mod rows;
#[cfg(test)]
mod tests;

pub(super) use compare::column_difference;
use compare::{compare, mod_key_warnings};

/// The `kind` of every [`Problem`].
pub mod kind {
    /// A host could not be connected to or queried; `database` is empty.
    pub const UNREACHABLE_HOST: &str = "unreachable host";
    /// A shard database is absent from the master that owns it.
    pub const MISSING_DATABASE: &str = "missing database";
    /// A shard database is on a host that is neither its master nor that
    /// master's replica, or is spelt differently from the name the proxy uses.
    pub const ORPHAN_DATABASE: &str = "orphan database";
    /// A table of the schema is absent from a shard database.
    pub const MISSING_TABLE: &str = "missing table";
    /// A shard database has a table the schema does not create.
    pub const UNEXPECTED_TABLE: &str = "unexpected table";
    /// A table's columns are not the schema's, in the schema's order.
    pub const COLUMNS_DIFFER: &str = "columns differ";
}

/// One thing [`verify_with_schema`] found wrong. Rows sort by host, then
/// database, kind and detail.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Problem {
    /// Host address (`127.0.0.1:3307`).
    pub host: String,
    /// Shard database, empty for a host-wide problem (unreachable host).
    pub database: String,
    /// One of the [`kind`] constants.
    pub kind: &'static str,
    /// What exactly is wrong, for a person to act on.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.database.is_empty() {
            write!(f, "{}: {}: {}", self.host, self.kind, self.detail)
        } else {
            write!(
                f,
                "{} {}: {}: {}",
                self.host, self.database, self.kind, self.detail
            )
        }
    }
}

/// What [`verify_with_schema`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Hosts checked (masters and replicas of every fleet).
    pub hosts_checked: usize,
    /// Shard databases expected on masters.
    pub expected: usize,
    /// Whether tables and columns were compared with a schema.
    pub schema_compared: bool,
    /// Tables named in the config that the schema does not create (not
    /// compared; the proxy answers 1146 for them).
    pub missing_from_schema: Vec<String>,
    /// Wall time of the whole check.
    pub elapsed: Duration,
    /// What is not wrong with the fleet's layout but works differently
    /// through the proxy than on one server: a mod-shard key column whose
    /// collation equates different bytes ([`mod_key_warnings`]). Not
    /// problems: [`VerifyReport::is_ok`] ignores them.
    pub warnings: Vec<String>,
    problems: Vec<Problem>,
}

impl VerifyReport {
    /// True when nothing is wrong and every host answered.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Every problem, one row each, sorted (unreachable hosts included,
    /// with an empty database).
    pub fn problems(&self) -> Vec<Problem> {
        self.problems.clone()
    }

    /// How many problems are of `kind` (one of the [`kind`] constants).
    pub fn count(&self, kind: &str) -> usize {
        self.problems.iter().filter(|p| p.kind == kind).count()
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} hosts checked, {} shard databases expected, {}: ",
            self.hosts_checked,
            self.expected,
            if self.schema_compared {
                "tables compared with the schema"
            } else {
                "tables not compared (no schema)"
            }
        )?;
        if self.problems.is_empty() {
            write!(f, "ok")?;
        } else {
            let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
            for p in &self.problems {
                *by_kind.entry(p.kind).or_default() += 1;
            }
            let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
            write!(f, "{} problems ({})", self.problems.len(), kinds.join(", "))?;
        }
        write!(f, " in {:.2}s", self.elapsed.as_secs_f64())?;
        for warning in &self.warnings {
            write!(f, "; warning: {warning}")?;
        }
        if !self.missing_from_schema.is_empty() {
            write!(
                f,
                "; tables in the config but not in the schema (not compared): {}",
                self.missing_from_schema.join(", ")
            )?;
        }
        Ok(())
    }
}

/// [`verify_with_schema`] without a schema: databases only.
pub async fn verify(topology: &Topology) -> Result<VerifyReport, OpsError> {
    verify_with_schema(topology, None).await
}

/// Checks every host of `topology`: each shard database exists on its
/// master and nowhere it should not; with `schema_sql` (the `CREATE TABLE`
/// statements of `fleet init`, each table on the fleet the config gives it)
/// each shard database on its master also has exactly its fleet's tables,
/// with the schema's columns in order. Unreachable hosts are problems, not
/// an error; a malformed schema is an error.
pub async fn verify_with_schema(
    topology: &Topology,
    schema_sql: Option<&str>,
) -> Result<VerifyReport, OpsError> {
    let started = Instant::now();
    let (schema, missing_from_schema) = match schema_sql {
        Some(sql) => {
            let (schema, missing) = expected_schema(topology, sql)?;
            (Some(schema), missing)
        }
        None => (None, Vec::new()),
    };
    let masters = topology.masters();
    let patterns = Arc::new(like_patterns(topology));
    let timeout = admin_connect_timeout(topology);
    let account = topology.config.operations_account();
    let mut tasks = Vec::new();
    for (hid, host) in topology.hosts.iter().enumerate() {
        let read = ReadCatalog {
            addr: host.addr.clone(),
            user: account.user.clone(),
            password: account.password.clone(),
            timeout,
            patterns: patterns.clone(),
            columns: schema.is_some() && masters.contains(&hid),
        };
        tasks.push((hid, tokio::spawn(read_catalog(read))));
    }
    let mut found = Vec::new();
    for (hid, task) in tasks {
        match task.await {
            Ok(result) => found.push((hid, result.map_err(|e| e.to_string()))),
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
    let mut problems = compare(topology, schema.as_ref(), &found);
    problems.sort();
    let warnings = mod_key_warnings(topology, &found);
    Ok(VerifyReport {
        hosts_checked: topology.hosts.len(),
        expected: topology.fleets.iter().map(|f| f.shard_count as usize).sum(),
        schema_compared: schema.is_some(),
        missing_from_schema,
        elapsed: started.elapsed(),
        warnings,
        problems,
    })
}

/// The schema file the config names (`schema:`), relative paths taken from
/// the config file's directory; `None` when the config names none.
pub fn configured_schema_path(topology: &Topology, config_path: Option<&Path>) -> Option<PathBuf> {
    let schema = Path::new(topology.config.schema.as_deref()?);
    let dir = config_path.and_then(Path::parent);
    Some(match dir {
        Some(dir) if schema.is_relative() => dir.join(schema),
        _ => schema.to_path_buf(),
    })
}

/// Reads a schema file.
pub fn read_schema(path: &Path) -> Result<String, OpsError> {
    std::fs::read_to_string(path).map_err(|source| OpsError::ReadSchema {
        path: path.to_path_buf(),
        source,
    })
}

/// [`verify_with_schema`] with the schema the config names, if any
/// (what `VERIFY FLEET` runs): `config_path` is the file the topology was
/// loaded from.
pub async fn verify_configured(
    topology: &Topology,
    config_path: Option<&Path>,
) -> Result<VerifyReport, OpsError> {
    let schema = configured_schema_path(topology, config_path)
        .map(|path| read_schema(&path))
        .transpose()?;
    verify_with_schema(topology, schema.as_deref()).await
}

/// A table the schema creates in every shard database of its fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ExpectedTable {
    name: String,
    line: usize,
    columns: Vec<String>,
}

/// What the schema says about one fleet's shard databases.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct FleetTables {
    /// The schema's tables of the fleet, in schema order.
    tables: Vec<ExpectedTable>,
    /// Tables the config gives the fleet that the schema does not create
    /// (lower case): neither expected nor unexpected.
    unchecked: Vec<String>,
}

/// The expected tables of every fleet (fleets with nothing to expect are absent).
type ExpectedSchema = HashMap<FleetId, FleetTables>;

/// The schema's tables and columns per fleet, and the config's tables the
/// schema does not create.
fn expected_schema(
    topology: &Topology,
    schema_sql: &str,
) -> Result<(ExpectedSchema, Vec<String>), OpsError> {
    let plan = plan_schema(topology, schema_sql)?;
    let mut schema = ExpectedSchema::new();
    for (fleet, ddls) in &plan.by_fleet {
        let tables = ddls
            .iter()
            .map(|ddl| {
                Ok(ExpectedTable {
                    name: ddl.name.clone(),
                    line: ddl.line,
                    columns: table_columns(ddl)?,
                })
            })
            .collect::<Result<Vec<_>, OpsError>>()?;
        schema.entry(*fleet).or_default().tables = tables;
    }
    for name in &plan.missing_from_schema {
        if let Some(rule) = topology.table(name) {
            schema
                .entry(rule.fleet)
                .or_default()
                .unchecked
                .push(name.clone());
        }
    }
    Ok((schema, plan.missing_from_schema))
}

/// `LIKE` patterns matching every fleet's database names (by prefix).
pub(super) fn like_patterns(topology: &Topology) -> Vec<String> {
    let mut patterns: Vec<String> = topology
        .fleets
        .iter()
        .map(|f| {
            let mut p = String::new();
            for c in f.database.prefix.chars() {
                if matches!(c, '\\' | '%' | '_') {
                    p.push('\\');
                }
                p.push(c);
            }
            p.push('%');
            p
        })
        .collect();
    patterns.sort();
    patterns.dedup();
    patterns
}

/// Columns in order by table, by database.
pub(super) type Tables = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// What one host holds, as far as the check needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct HostCatalog {
    /// Databases whose name starts like a fleet's shard databases.
    pub(super) databases: Vec<String>,
    /// Their tables' columns; `None` when not read (not a master, or no
    /// schema to compare with).
    pub(super) tables: Option<Tables>,
    /// The collations each column (lower-case table and column name) has
    /// in those databases, read with the columns; binary strings and
    /// non-string columns have none.
    pub(super) collations: BTreeMap<(String, String), BTreeSet<String>>,
}

/// Everything a host-reading task needs, owned.
pub(super) struct ReadCatalog {
    pub(super) addr: String,
    pub(super) user: String,
    pub(super) password: String,
    pub(super) timeout: Duration,
    pub(super) patterns: Arc<Vec<String>>,
    pub(super) columns: bool,
}

pub(super) async fn read_catalog(read: ReadCatalog) -> Result<HostCatalog, OpsError> {
    let mut conn = connect(&read.addr, &read.user, &read.password, read.timeout).await?;
    let query_err = |what: &str| {
        let host = read.addr.clone();
        let what = what.to_string();
        move |source| OpsError::Query { host, what, source }
    };
    let filter = |column: &str| vec![format!("{column} LIKE ?"); read.patterns.len()].join(" OR ");
    let params: Vec<mysql_async::Value> = read.patterns.iter().map(|p| p.as_str().into()).collect();
    let databases: Vec<String> = conn
        .exec(
            format!(
                "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE {}",
                filter("SCHEMA_NAME")
            ),
            params.clone(),
        )
        .await
        .map_err(query_err("listing databases"))?;
    let mut collations: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let tables = if read.columns {
        let rows: Vec<(String, String, String, Option<String>)> = conn
            .exec(
                format!(
                    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLLATION_NAME \
                     FROM information_schema.COLUMNS \
                     WHERE {} ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
                    filter("TABLE_SCHEMA")
                ),
                params,
            )
            .await
            .map_err(query_err("listing tables and columns"))?;
        let mut tables = Tables::new();
        for (database, table, column, collation) in rows {
            if let Some(collation) = collation {
                collations
                    .entry((table.to_lowercase(), column.to_lowercase()))
                    .or_default()
                    .insert(collation);
            }
            tables
                .entry(database)
                .or_default()
                .entry(table)
                .or_default()
                .push(column);
        }
        Some(tables)
    } else {
        None
    };
    let _ = conn.disconnect().await;
    Ok(HostCatalog {
        databases,
        tables,
        collations,
    })
}
