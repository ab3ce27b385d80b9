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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::schema::{plan_schema, table_columns};
use super::{admin_connect_timeout, connect, FleetError};
use crate::topology::{FleetId, HostId, Topology};

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
pub async fn verify(topology: &Topology) -> Result<VerifyReport, FleetError> {
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
) -> Result<VerifyReport, FleetError> {
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
    Ok(VerifyReport {
        hosts_checked: topology.hosts.len(),
        expected: topology.fleets.iter().map(|f| f.shard_count as usize).sum(),
        schema_compared: schema.is_some(),
        missing_from_schema,
        elapsed: started.elapsed(),
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
pub fn read_schema(path: &Path) -> Result<String, FleetError> {
    std::fs::read_to_string(path).map_err(|source| FleetError::ReadSchema {
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
) -> Result<VerifyReport, FleetError> {
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
) -> Result<(ExpectedSchema, Vec<String>), FleetError> {
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
            .collect::<Result<Vec<_>, FleetError>>()?;
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
fn like_patterns(topology: &Topology) -> Vec<String> {
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
type Tables = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// What one host holds, as far as the check needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct HostCatalog {
    /// Databases whose name starts like a fleet's shard databases.
    databases: Vec<String>,
    /// Their tables' columns; `None` when not read (not a master, or no
    /// schema to compare with).
    tables: Option<Tables>,
}

/// Everything a host-reading task needs, owned.
struct ReadCatalog {
    addr: String,
    user: String,
    password: String,
    timeout: Duration,
    patterns: Arc<Vec<String>>,
    columns: bool,
}

async fn read_catalog(read: ReadCatalog) -> Result<HostCatalog, FleetError> {
    let mut conn = connect(&read.addr, &read.user, &read.password, read.timeout).await?;
    let query_err = |what: &str| {
        let host = read.addr.clone();
        let what = what.to_string();
        move |source| FleetError::Query { host, what, source }
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
    let tables = if read.columns {
        let rows: Vec<(String, String, String)> = conn
            .exec(
                format!(
                    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS \
                     WHERE {} ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
                    filter("TABLE_SCHEMA")
                ),
                params,
            )
            .await
            .map_err(query_err("listing tables and columns"))?;
        let mut tables = Tables::new();
        for (database, table, column) in rows {
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
    Ok(HostCatalog { databases, tables })
}

/// Every problem in what the hosts hold (`Err` = the host's error), unsorted.
fn compare(
    topology: &Topology,
    schema: Option<&ExpectedSchema>,
    found: &[(HostId, Result<HostCatalog, String>)],
) -> Vec<Problem> {
    let addr = |h: HostId| topology.hosts[h].addr.clone();
    let mut problems = Vec::new();
    let mut catalogs: HashMap<HostId, &HostCatalog> = HashMap::new();
    for (hid, result) in found {
        match result {
            Ok(catalog) => {
                catalogs.insert(*hid, catalog);
            }
            Err(error) => problems.push(Problem {
                host: addr(*hid),
                database: String::new(),
                kind: kind::UNREACHABLE_HOST,
                detail: error.clone(),
            }),
        }
    }
    let present: HashMap<HostId, HashSet<&str>> = catalogs
        .iter()
        .map(|(h, c)| (*h, c.databases.iter().map(String::as_str).collect()))
        .collect();

    for (fid, fleet) in topology.fleets.iter().enumerate() {
        let no_tables = FleetTables::default();
        let tables = schema.map(|s| s.get(&fid).unwrap_or(&no_tables));
        for range in &fleet.ranges {
            let (Some(catalog), Some(dbs)) =
                (catalogs.get(&range.master), present.get(&range.master))
            else {
                continue;
            };
            for shard in range.first..=range.last {
                let database = fleet.database_name(shard);
                if !dbs.contains(database.as_str()) {
                    problems.push(Problem {
                        host: addr(range.master),
                        database,
                        kind: kind::MISSING_DATABASE,
                        detail: format!(
                            "shard {shard} of fleet {} (range {}-{}) is served by this host \
                             (`shardgate fleet init` creates it)",
                            fleet.name, range.first, range.last
                        ),
                    });
                    continue;
                }
                if let Some(expected) = tables {
                    let found = catalog.tables.as_ref().and_then(|t| t.get(&database));
                    for (kind, detail) in table_problems(topology, fid, expected, found) {
                        problems.push(Problem {
                            host: addr(range.master),
                            database: database.clone(),
                            kind,
                            detail,
                        });
                    }
                }
            }
        }
    }

    // Masters each host replicates (by the config), for orphans' copies.
    let mut replicates: HashMap<HostId, Vec<HostId>> = HashMap::new();
    for range in topology.fleets.iter().flat_map(|f| &f.ranges) {
        if let Some(r) = range.replica {
            let list = replicates.entry(r).or_default();
            if range.master != r && !list.contains(&range.master) {
                list.push(range.master);
            }
        }
    }
    for (hid, catalog) in &catalogs {
        for database in &catalog.databases {
            let Some((fid, shard)) = topology.parse_database(database) else {
                continue;
            };
            let fleet = &topology.fleets[fid];
            let Some(range) = fleet.range_of(shard) else {
                continue;
            };
            let canonical = fleet.database_name(shard);
            let detail = if *database != canonical {
                format!(
                    "named like shard {shard} of fleet {}, but the proxy uses `{canonical}`",
                    fleet.name
                )
            } else if range.master == *hid || range.replica == Some(*hid) {
                continue;
            } else {
                let mut detail = format!(
                    "shard {shard} of fleet {} belongs on {} (left behind by a shard move? \
                     drop it once nothing uses it)",
                    fleet.name,
                    addr(range.master)
                );
                for master in replicates.get(hid).into_iter().flatten() {
                    if present
                        .get(master)
                        .is_some_and(|dbs| dbs.contains(database.as_str()))
                    {
                        detail.push_str(&format!(
                            "; a replicated copy: {} (whose replica this is) has it too, \
                             dropping it there drops it here",
                            addr(*master)
                        ));
                    }
                }
                detail
            };
            problems.push(Problem {
                host: addr(*hid),
                database: database.clone(),
                kind: kind::ORPHAN_DATABASE,
                detail,
            });
        }
    }
    problems
}

/// The table problems of one shard database of `fleet`: `found` is its
/// tables' columns (`None`: no table at all). Names compare
/// case-insensitively.
fn table_problems(
    topology: &Topology,
    fleet: FleetId,
    expected: &FleetTables,
    found: Option<&BTreeMap<String, Vec<String>>>,
) -> Vec<(&'static str, String)> {
    let empty = BTreeMap::new();
    let found = found.unwrap_or(&empty);
    let mut problems = Vec::new();
    for table in &expected.tables {
        let here = found
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&table.name));
        match here {
            None => problems.push((
                kind::MISSING_TABLE,
                format!("`{}` (schema line {}) is absent", table.name, table.line),
            )),
            Some((name, columns)) => {
                if let Some(difference) = column_difference(&table.columns, columns) {
                    problems.push((kind::COLUMNS_DIFFER, format!("`{name}`: {difference}")));
                }
            }
        }
    }
    for name in found.keys() {
        let known = expected
            .tables
            .iter()
            .map(|t| t.name.as_str())
            .chain(expected.unchecked.iter().map(String::as_str))
            .any(|t| t.eq_ignore_ascii_case(name));
        if known {
            continue;
        }
        let owner = topology
            .table(&name.to_ascii_lowercase())
            .filter(|rule| rule.fleet != fleet)
            .and_then(|rule| topology.fleet(rule.fleet));
        let detail = match owner {
            Some(owner) => format!(
                "`{name}` is a table of fleet {}, not of fleet {}",
                owner.name, topology.fleets[fleet].name
            ),
            None => format!("`{name}` is not in the schema"),
        };
        problems.push((kind::UNEXPECTED_TABLE, detail));
    }
    problems
}

/// How `found` differs from `expected` (column names in order,
/// case-insensitive), or `None` when they are the same.
fn column_difference(expected: &[String], found: &[String]) -> Option<String> {
    let same = |a: &String, b: &String| a.eq_ignore_ascii_case(b);
    if expected.len() == found.len() && expected.iter().zip(found).all(|(a, b)| same(a, b)) {
        return None;
    }
    let missing: Vec<String> = expected
        .iter()
        .filter(|e| !found.iter().any(|f| same(e, f)))
        .map(|e| format!("`{e}`"))
        .collect();
    let extra: Vec<String> = found
        .iter()
        .enumerate()
        .filter(|(_, f)| !expected.iter().any(|e| same(e, f)))
        .map(|(i, f)| format!("`{f}` (position {})", i + 1))
        .collect();
    let shared_expected = expected.iter().filter(|e| found.iter().any(|f| same(e, f)));
    let shared_found = found.iter().filter(|f| expected.iter().any(|e| same(e, f)));
    let reordered = !shared_expected.zip(shared_found).all(|(a, b)| same(a, b));
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        parts.push(format!("not in the schema: {}", extra.join(", ")));
    }
    if reordered {
        parts.push("columns in another order".to_string());
    }
    Some(format!(
        "{}; expected ({}), found ({})",
        parts.join("; "),
        expected.join(", "),
        found.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = include_str!("../../config/schema.sql");

    fn topology() -> Topology {
        Topology::from_yaml_str(include_str!("../../config/shardgate.yaml"), "test").unwrap()
    }

    fn host(t: &Topology, addr: &str) -> HostId {
        t.hosts.iter().position(|h| h.addr == addr).unwrap()
    }

    /// What a healthy fleet holds: every master its shards with the
    /// schema's tables, the replica a copy of its master.
    fn clean(t: &Topology, schema: &ExpectedSchema) -> BTreeMap<HostId, HostCatalog> {
        let mut hosts: BTreeMap<HostId, HostCatalog> = (0..t.hosts.len())
            .map(|h| {
                (
                    h,
                    HostCatalog {
                        databases: Vec::new(),
                        tables: Some(Tables::new()),
                    },
                )
            })
            .collect();
        for (fid, fleet) in t.fleets.iter().enumerate() {
            for range in &fleet.ranges {
                for shard in range.first..=range.last {
                    let db = fleet.database_name(shard);
                    let tables: BTreeMap<String, Vec<String>> = schema[&fid]
                        .tables
                        .iter()
                        .map(|t| (t.name.clone(), t.columns.clone()))
                        .collect();
                    for h in std::iter::once(range.master).chain(range.replica) {
                        let c = hosts.get_mut(&h).unwrap();
                        c.databases.push(db.clone());
                        c.tables
                            .as_mut()
                            .unwrap()
                            .insert(db.clone(), tables.clone());
                    }
                }
            }
        }
        hosts
    }

    fn run(
        t: &Topology,
        schema: Option<&ExpectedSchema>,
        hosts: BTreeMap<HostId, HostCatalog>,
    ) -> Vec<Problem> {
        let found: Vec<_> = hosts.into_iter().map(|(h, c)| (h, Ok(c))).collect();
        let mut p = compare(t, schema, &found);
        p.sort();
        p
    }

    fn rows(problems: &[Problem]) -> Vec<(&str, &str, &str)> {
        problems
            .iter()
            .map(|p| (p.host.as_str(), p.database.as_str(), p.kind))
            .collect()
    }

    #[test]
    fn schema_tables_go_to_their_fleet() {
        let t = topology();
        let (schema, missing) = expected_schema(&t, SCHEMA).unwrap();
        assert!(missing.is_empty());
        let main = t.fleet_by_name("main").unwrap();
        let modf = t.fleet_by_name("mod").unwrap();
        let names = |f| {
            schema[&f]
                .tables
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(main),
            [
                "pins",
                "boards",
                "users",
                "board_has_pins",
                "user_likes_pins"
            ]
        );
        assert_eq!(names(modf), ["user_by_email"]);
        assert_eq!(schema[&modf].tables[0].columns, ["email", "user_id"]);
    }

    #[test]
    fn clean_fleet_has_no_problem() {
        let t = topology();
        let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
        assert_eq!(run(&t, Some(&schema), clean(&t, &schema)), []);
        assert_eq!(run(&t, None, clean(&t, &schema)), []);
    }

    #[test]
    fn orphan_on_a_master_shows_on_its_replica_too() {
        let t = topology();
        let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
        let mut hosts = clean(&t, &schema);
        for a in ["127.0.0.1:3307", "127.0.0.1:3309"] {
            hosts
                .get_mut(&host(&t, a))
                .unwrap()
                .databases
                .push("db03000".into());
        }
        let p = run(&t, Some(&schema), hosts);
        assert_eq!(
            rows(&p),
            [
                ("127.0.0.1:3307", "db03000", kind::ORPHAN_DATABASE),
                ("127.0.0.1:3309", "db03000", kind::ORPHAN_DATABASE)
            ]
        );
        assert!(
            p[0].detail.contains("belongs on 127.0.0.1:3308"),
            "{}",
            p[0].detail
        );
        assert!(!p[0].detail.contains("replicated"), "{}", p[0].detail);
        assert!(
            p[1].detail.contains("a replicated copy: 127.0.0.1:3307"),
            "{}",
            p[1].detail
        );
    }

    #[test]
    fn missing_database_and_misspelt_name() {
        let t = topology();
        let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
        let mut hosts = clean(&t, &schema);
        let b = hosts.get_mut(&host(&t, "127.0.0.1:3308")).unwrap();
        b.databases.retain(|d| d != "db04094");
        b.databases.push("DB04093".into());
        let p = run(&t, Some(&schema), hosts);
        assert_eq!(
            rows(&p),
            [
                ("127.0.0.1:3308", "DB04093", kind::ORPHAN_DATABASE),
                ("127.0.0.1:3308", "db04094", kind::MISSING_DATABASE)
            ]
        );
        assert!(
            p[0].detail.contains("the proxy uses `db04093`"),
            "{}",
            p[0].detail
        );
        assert!(
            p[1].detail
                .contains("shard 4094 of fleet main (range 2048-4095)"),
            "{}",
            p[1].detail
        );
    }

    #[test]
    fn table_problems_are_exact() {
        let t = topology();
        let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
        let mut hosts = clean(&t, &schema);
        let b = hosts.get_mut(&host(&t, "127.0.0.1:3308")).unwrap();
        let tables = b.tables.as_mut().unwrap();
        tables.get_mut("db04091").unwrap().remove("boards");
        tables
            .get_mut("db04092")
            .unwrap()
            .insert("extra".into(), vec!["x".into()]);
        tables
            .get_mut("db04093")
            .unwrap()
            .get_mut("users")
            .unwrap()
            .push("added".into());
        // Case differences are not problems (lower_case_table_names).
        let pins = tables.get_mut("db04090").unwrap().remove("pins").unwrap();
        tables.get_mut("db04090").unwrap().insert(
            "PINS".into(),
            pins.iter().map(|c| c.to_uppercase()).collect(),
        );
        let p = run(&t, Some(&schema), hosts);
        assert_eq!(
            rows(&p),
            [
                ("127.0.0.1:3308", "db04091", kind::MISSING_TABLE),
                ("127.0.0.1:3308", "db04092", kind::UNEXPECTED_TABLE),
                ("127.0.0.1:3308", "db04093", kind::COLUMNS_DIFFER)
            ]
        );
        assert_eq!(p[0].detail, "`boards` (schema line 18) is absent");
        assert_eq!(p[1].detail, "`extra` is not in the schema");
        assert_eq!(
            p[2].detail,
            "`users`: not in the schema: `added` (position 4); \
             expected (local_id, data, ts), found (local_id, data, ts, added)"
        );
        // Without a schema only databases are compared.
        let mut hosts = clean(&t, &schema);
        for c in hosts.values_mut() {
            c.tables = None;
        }
        assert_eq!(run(&t, None, hosts), []);
    }

    #[test]
    fn tables_the_schema_leaves_out_are_not_compared_on_their_fleet() {
        let t = topology();
        let (full, _) = expected_schema(&t, SCHEMA).unwrap();
        let partial_sql = &SCHEMA[..SCHEMA.find("CREATE TABLE IF NOT EXISTS users").unwrap()];
        let (partial, missing) = expected_schema(&t, partial_sql).unwrap();
        assert_eq!(
            missing,
            [
                "board_has_pins",
                "user_by_email",
                "user_likes_pins",
                "users"
            ]
        );
        let mut hosts = clean(&t, &full);
        // A table of the mod fleet in a main shard database is still unexpected.
        hosts
            .get_mut(&host(&t, "127.0.0.1:3308"))
            .unwrap()
            .tables
            .as_mut()
            .unwrap()
            .get_mut("db04090")
            .unwrap()
            .insert("user_by_email".into(), vec!["email".into()]);
        let p = run(&t, Some(&partial), hosts);
        assert_eq!(
            rows(&p),
            [("127.0.0.1:3308", "db04090", kind::UNEXPECTED_TABLE)]
        );
        assert_eq!(
            p[0].detail,
            "`user_by_email` is a table of fleet mod, not of fleet main"
        );
    }

    #[test]
    fn column_differences_say_which() {
        let v = |s: &[&str]| s.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let e = v(&["a", "b", "c"]);
        assert_eq!(column_difference(&e, &v(&["A", "b", "c"])), None);
        assert_eq!(
            column_difference(&e, &v(&["a", "c"])).unwrap(),
            "missing `b`; expected (a, b, c), found (a, c)"
        );
        assert_eq!(
            column_difference(&e, &v(&["a", "c", "b"])).unwrap(),
            "columns in another order; expected (a, b, c), found (a, c, b)"
        );
        assert_eq!(
            column_difference(&e, &v(&["z", "c", "a"])).unwrap(),
            "missing `b`; not in the schema: `z` (position 1); columns in another order; \
             expected (a, b, c), found (z, c, a)"
        );
    }

    #[test]
    fn unreachable_host_is_a_row_and_its_shards_are_not_missing() {
        let t = topology();
        let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
        let b = host(&t, "127.0.0.1:3308");
        let found: Vec<_> = clean(&t, &schema)
            .into_iter()
            .map(|(h, c)| {
                if h == b {
                    (
                        h,
                        Err("cannot connect to 127.0.0.1:3308: refused".to_string()),
                    )
                } else {
                    (h, Ok(c))
                }
            })
            .collect();
        let p = compare(&t, Some(&schema), &found);
        assert_eq!(
            p,
            [Problem {
                host: "127.0.0.1:3308".into(),
                database: String::new(),
                kind: kind::UNREACHABLE_HOST,
                detail: "cannot connect to 127.0.0.1:3308: refused".into(),
            }]
        );
        assert_eq!(
            p[0].to_string(),
            "127.0.0.1:3308: unreachable host: cannot connect to 127.0.0.1:3308: refused"
        );
    }

    #[test]
    fn promoted_replica_is_checked_as_the_master() {
        let yaml = include_str!("../../config/shardgate.yaml").replace(
            "master: 127.0.0.1:3307, replica: 127.0.0.1:3309",
            "master: 127.0.0.1:3309",
        );
        let t = Topology::from_yaml_str(&yaml, "promoted").unwrap();
        let (schema, _) = expected_schema(&t, SCHEMA).unwrap();
        assert!(t.hosts.iter().all(|h| h.addr != "127.0.0.1:3307"));
        assert_eq!(run(&t, Some(&schema), clean(&t, &schema)), []);
    }

    #[test]
    fn like_patterns_escape_the_prefix() {
        let t = topology();
        assert_eq!(like_patterns(&t), ["db%", "msdb%"]);
        let yaml = include_str!("../../config/shardgate.yaml").replace("msdb{:05}", "m_s{:05}");
        let t = Topology::from_yaml_str(&yaml, "odd").unwrap();
        assert_eq!(like_patterns(&t), ["db%", "m\\_s%"]);
    }

    #[test]
    fn report_display_counts_by_kind() {
        let mut r = VerifyReport {
            hosts_checked: 4,
            expected: 8192,
            schema_compared: true,
            elapsed: Duration::from_millis(420),
            ..VerifyReport::default()
        };
        assert_eq!(
            r.to_string(),
            "4 hosts checked, 8192 shard databases expected, tables compared with the schema: ok in 0.42s"
        );
        r.problems = vec![
            Problem {
                host: "h".into(),
                database: "db1".into(),
                kind: kind::ORPHAN_DATABASE,
                detail: "x".into(),
            },
            Problem {
                host: "h".into(),
                database: "db2".into(),
                kind: kind::ORPHAN_DATABASE,
                detail: "x".into(),
            },
        ];
        assert!(!r.is_ok());
        assert_eq!(r.count(kind::ORPHAN_DATABASE), 2);
        assert!(
            r.to_string().contains("2 problems (2 orphan database) in"),
            "{r}"
        );
    }
}
