//! Operator tooling over the hosts of the config's fleets (the code behind
//! `shardgate fleet ...` and `VERIFY FLEET`): `shardgate fleet init` creates every
//! shard database and its tables on the master that owns it, and
//! [`verify_with_schema`] (`VERIFY FLEET`, `shardgate fleet verify`) checks
//! that every shard database is where the config says, with the schema's
//! tables.
//!
//! Both talk to the hosts with `mysql_async` as the config's operations
//! account ([`crate::topology::Config::operations_account`]).
//! Only masters are written to; replicas get the databases through
//! replication.

mod migrate;
pub mod schema;
pub mod split;
mod verify;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

use crate::topology::{FleetId, HostId, Topology};

pub use migrate::{
    migrate, plan as plan_migration, MigrateOptions, MigratePlan, MigrateReport, ShardFailure,
};
pub use schema::{plan_schema, split_statements, table_columns, FleetSchema, TableDdl};
pub use verify::rows::{
    row_kind, verify_rows, RowDifference, RowVerifyError, RowVerifyReport, RowVerifyRequest,
    DEFAULT_MAX_ROWS_PER_SECOND,
};
pub use verify::{
    configured_schema_path, kind, read_schema, verify, verify_configured, verify_with_schema,
    Problem, VerifyReport,
};

/// Connections opened per host by [`init`] (measured: 4 saturate a 2-core
/// MariaDB creating databases; more only add contention).
pub const DEFAULT_CONNECTIONS_PER_HOST: usize = 4;

/// The shortest connect timeout [`init`] and [`verify`] use, whatever the
/// config's `backend.connect_timeout_ms` (which is tuned for the data path).
pub const MIN_ADMIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an operation on the hosts failed. Every variant names the host (and the
/// database, where there is one) it is about.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The schema file is malformed or has a statement that is not `CREATE TABLE`.
    #[error("schema line {line}: {message}")]
    Schema {
        /// 1-based line of the offending statement.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The schema file cannot be read.
    #[error("cannot read the schema file {}: {source}", path.display())]
    ReadSchema {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The schema creates tables that the config's `tables` section does not
    /// name, so no fleet owns them.
    #[error(
        "the schema creates tables that the config's `tables` section does not name \
         (add them to the config or remove them from the schema): {}",
        tables.join(", ")
    )]
    UnknownTables {
        /// `name (line N)` of every such table.
        tables: Vec<String>,
    },
    /// A host address in the topology is not `host:port`.
    #[error("bad host address `{host}`: {message}")]
    BadAddress {
        /// The address as written.
        host: String,
        /// What is wrong with it.
        message: String,
    },
    /// Connecting (or logging in) to a host failed.
    #[error("cannot connect to {host} as `{user}`: {source}")]
    Connect {
        /// The host address.
        host: String,
        /// The account used.
        user: String,
        /// The client error.
        #[source]
        source: mysql_async::Error,
    },
    /// A host did not answer a connect in time.
    #[error("cannot connect to {host}: no answer within {}s", timeout.as_secs_f32())]
    ConnectTimeout {
        /// The host address.
        host: String,
        /// How long we waited.
        timeout: Duration,
    },
    /// A query on a host failed outside any one shard database.
    #[error("{host}: {what} failed: {source}")]
    Query {
        /// The host address.
        host: String,
        /// What was being done.
        what: String,
        /// The client or server error.
        #[source]
        source: mysql_async::Error,
    },
    /// Creating a shard database or its tables failed.
    #[error("{host}, database {database}: {source}")]
    Create {
        /// The host address.
        host: String,
        /// The shard database.
        database: String,
        /// The client or server error.
        #[source]
        source: mysql_async::Error,
    },
    /// A migration cannot be planned or its state file used.
    #[error("fleet migrate: {0}")]
    Migrate(String),
    /// Several hosts failed; one error per host.
    #[error("{} hosts failed: {}", .0.len(), join_errors(.0))]
    Several(Vec<OpsError>),
}

fn join_errors(errors: &[OpsError]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Knobs of [`init_with`]; [`init`] uses the defaults with `progress` set.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// Show a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// Concurrent connections per host.
    pub connections_per_host: usize,
}

impl Default for InitOptions {
    fn default() -> Self {
        Self {
            progress: true,
            connections_per_host: DEFAULT_CONNECTIONS_PER_HOST,
        }
    }
}

/// What [`init`] did on one host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostReport {
    /// Host address.
    pub host: String,
    /// Shard databases this host owns as a master (all fleets).
    pub shards: usize,
    /// Shard databases that were missing and were created.
    pub databases_created: usize,
    /// Tables that were missing and were created.
    pub tables_created: usize,
    /// Shard databases that already had every table (nothing sent).
    pub complete_before: usize,
    /// Wall time spent on this host.
    pub elapsed: Duration,
}

/// What [`init`] did, per host and in total.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitReport {
    /// One entry per master host, in topology order.
    pub hosts: Vec<HostReport>,
    /// Tables of each fleet (by fleet name) created in every shard database.
    pub tables_by_fleet: BTreeMap<String, Vec<String>>,
    /// Tables named in the config that the schema does not create.
    pub missing_from_schema: Vec<String>,
    /// Total wall time.
    pub elapsed: Duration,
}

impl InitReport {
    /// Shard databases covered on all hosts.
    pub fn shards(&self) -> usize {
        self.hosts.iter().map(|h| h.shards).sum()
    }
    /// Shard databases created by this run.
    pub fn databases_created(&self) -> usize {
        self.hosts.iter().map(|h| h.databases_created).sum()
    }
    /// Tables created by this run.
    pub fn tables_created(&self) -> usize {
        self.hosts.iter().map(|h| h.tables_created).sum()
    }
}

impl fmt::Display for InitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (fleet, tables) in &self.tables_by_fleet {
            writeln!(f, "fleet {fleet}: tables {}", tables.join(", "))?;
        }
        for h in &self.hosts {
            writeln!(
                f,
                "{}: {} shard databases, {} databases and {} tables created, {} already complete ({:.1}s)",
                h.host,
                h.shards,
                h.databases_created,
                h.tables_created,
                h.complete_before,
                h.elapsed.as_secs_f64()
            )?;
        }
        if !self.missing_from_schema.is_empty() {
            writeln!(
                f,
                "warning: tables in the config but not in the schema (not created): {}",
                self.missing_from_schema.join(", ")
            )?;
        }
        write!(
            f,
            "fleet init: {} shard databases on {} hosts ready; {} databases and {} tables created in {:.1}s",
            self.shards(),
            self.hosts.len(),
            self.databases_created(),
            self.tables_created(),
            self.elapsed.as_secs_f64()
        )
    }
}

/// Creates every shard database and its tables on the master that owns it,
/// idempotently (used by `shardgate fleet init --config FILE --schema FILE`).
///
/// `schema_sql` holds `CREATE TABLE` statements (comments allowed); each
/// table goes to the fleet whose config `tables` entry names it, and only
/// there. Hosts are worked in parallel with a few connections each; shard
/// databases that already have every table are skipped. `progress` shows a
/// progress bar on stderr when it is a terminal.
pub async fn init(
    topology: &Topology,
    schema_sql: &str,
    progress: bool,
) -> Result<InitReport, OpsError> {
    init_with(
        topology,
        schema_sql,
        &InitOptions {
            progress,
            ..InitOptions::default()
        },
    )
    .await
}

/// One shard database to create on a host.
#[derive(Debug, Clone)]
struct Job {
    fleet: FleetId,
    database: String,
}

/// Everything a host task needs, owned.
struct HostWork {
    login: HostLogin,
    connections: usize,
    jobs: Vec<Job>,
    tables: Arc<HashMap<FleetId, Vec<TableDdl>>>,
    bar: ProgressBar,
}

/// [`init`] with explicit [`InitOptions`].
pub async fn init_with(
    topology: &Topology,
    schema_sql: &str,
    options: &InitOptions,
) -> Result<InitReport, OpsError> {
    let started = Instant::now();
    let plan = plan_schema(topology, schema_sql)?;
    let jobs = jobs_by_master(topology, None);
    let total: usize = jobs.values().map(Vec::len).sum();

    let bar = progress_bar(
        options.progress,
        total,
        "fleet init [{elapsed_precise}] {wide_bar} {pos}/{len} shard databases ({per_sec}, eta {eta})",
    );

    let mut by_fleet: HashMap<FleetId, Vec<TableDdl>> = plan.by_fleet.clone().into_iter().collect();
    // A fleet whose server mints IDs draws them from a sequence per shard.
    for (fid, fleet) in topology.fleets.iter().enumerate() {
        if let Some(sql) = fleet.layout.sequence_ddl() {
            by_fleet.entry(fid).or_default().push(TableDdl {
                name: crate::id::layout::SEQUENCE_NAME.to_owned(),
                sql,
                line: 0,
            });
        }
    }
    let tables: Arc<HashMap<FleetId, Vec<TableDdl>>> = Arc::new(by_fleet);
    let mut tasks = Vec::new();
    for (host_id, host_jobs) in jobs {
        let work = HostWork {
            login: HostLogin::operations(topology, host_id),
            connections: options.connections_per_host.max(1),
            jobs: host_jobs,
            tables: tables.clone(),
            bar: bar.clone(),
        };
        tasks.push(tokio::spawn(init_host(work)));
    }

    let mut hosts = Vec::new();
    let mut errors = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(report)) => hosts.push(report),
            Ok(Err(e)) => errors.push(e),
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
    bar.finish_and_clear();
    match errors.len() {
        0 => {}
        1 => return Err(errors.pop().expect("one error")),
        _ => return Err(OpsError::Several(errors)),
    }

    let tables_by_fleet = plan
        .by_fleet
        .iter()
        .map(|(fid, ddls)| {
            (
                topology.fleets[*fid].name.clone(),
                ddls.iter().map(|d| d.name.clone()).collect(),
            )
        })
        .collect();
    Ok(InitReport {
        hosts,
        tables_by_fleet,
        missing_from_schema: plan.missing_from_schema,
        elapsed: started.elapsed(),
    })
}

/// A progress bar on stderr over `total` shard databases with `template`,
/// when `enabled` and stderr is a terminal; else a hidden one.
pub fn progress_bar(enabled: bool, total: usize, template: &str) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template(template).expect("valid progress template"));
    bar
}

/// Shard databases each master must hold (of every fleet, or of `only`),
/// hosts in topology order.
fn jobs_by_master(topology: &Topology, only: Option<FleetId>) -> BTreeMap<HostId, Vec<Job>> {
    let mut jobs: BTreeMap<HostId, Vec<Job>> = BTreeMap::new();
    for (fid, fleet) in topology.fleets.iter().enumerate() {
        if only.is_some_and(|only| only != fid) {
            continue;
        }
        for range in &fleet.ranges {
            let list = jobs.entry(range.master).or_default();
            for shard in range.first..=range.last {
                list.push(Job {
                    fleet: fid,
                    database: fleet.database_name(shard),
                });
            }
        }
    }
    jobs
}

fn admin_connect_timeout(topology: &Topology) -> Duration {
    Duration::from_millis(topology.config.backend.connect_timeout_ms).max(MIN_ADMIN_CONNECT_TIMEOUT)
}

/// Splits `host:port` (or `[v6]:port`); the port defaults to 3306.
fn split_addr(addr: &str) -> Result<(String, u16), OpsError> {
    let bad = |message: &str| OpsError::BadAddress {
        host: addr.to_string(),
        message: message.to_string(),
    };
    let (host, port) = if let Some(rest) = addr.strip_prefix('[') {
        let (h, p) = rest.split_once(']').ok_or_else(|| bad("missing `]`"))?;
        (h, p.strip_prefix(':'))
    } else {
        match addr.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (addr, None),
        }
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| bad("port is not a number 1-65535"))?,
        None => 3306,
    };
    Ok((host.to_string(), port))
}

/// `mysql_async` options for a TCP connection to `host` (`host:port` or
/// `[v6]:port`) as `user`: the one place the control plane (fleet tooling,
/// health checks, failover) builds them.
pub(crate) fn connection_opts(
    host: &str,
    user: &str,
    password: &str,
) -> Result<OptsBuilder, OpsError> {
    let (name, port) = split_addr(host)?;
    Ok(OptsBuilder::default()
        .ip_or_hostname(name)
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false))
}

/// Opens one connection to `host` as `user`, bounded by `timeout`.
async fn connect(
    host: &str,
    user: &str,
    password: &str,
    timeout: Duration,
) -> Result<Conn, OpsError> {
    let opts = connection_opts(host, user, password)?;
    match tokio::time::timeout(timeout, Conn::new(opts)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(source)) => Err(OpsError::Connect {
            host: host.to_string(),
            user: user.to_string(),
            source,
        }),
        Err(_) => Err(OpsError::ConnectTimeout {
            host: host.to_string(),
            timeout,
        }),
    }
}

/// Where and as whom the fleet tools connect to one host.
#[derive(Debug, Clone)]
struct HostLogin {
    host: String,
    user: String,
    password: String,
    timeout: Duration,
}

impl HostLogin {
    /// The operations account on host `id` of `topology`.
    fn operations(topology: &Topology, id: HostId) -> Self {
        let account = topology.config.operations_account();
        HostLogin {
            host: topology.hosts[id].addr.clone(),
            user: account.user.clone(),
            password: account.password.clone(),
            timeout: admin_connect_timeout(topology),
        }
    }

    async fn connect(&self) -> Result<Conn, OpsError> {
        connect(&self.host, &self.user, &self.password, self.timeout).await
    }
}

/// Works through `items` on one host with up to `connections` connections
/// (`first`, if given, is one of them), each item by `work`, which hands
/// its connection back with the outcome. The first error stops every
/// connection of the host and is returned.
async fn drain_on_host<T, F, Fut>(
    login: &HostLogin,
    connections: usize,
    first: Option<Conn>,
    items: Vec<T>,
    work: F,
) -> Result<(), OpsError>
where
    T: Send + 'static,
    F: Fn(Conn, T) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = (Conn, Result<(), OpsError>)> + Send + 'static,
{
    let workers = connections.max(1).min(items.len()).max(1);
    let queue = Arc::new(Mutex::new(items.into_iter()));
    let abort = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    let mut first = first;
    for _ in 0..workers {
        let conn = first.take();
        let (login, queue, abort, work) =
            (login.clone(), queue.clone(), abort.clone(), work.clone());
        handles.push(tokio::spawn(async move {
            let mut conn = match conn {
                Some(c) => c,
                None => login.connect().await?,
            };
            let result = loop {
                if abort.load(Ordering::Relaxed) {
                    break Ok(());
                }
                let Some(item) = crate::sync::lock(&queue).next() else {
                    break Ok(());
                };
                let (back, outcome) = work(conn, item).await;
                conn = back;
                if let Err(e) = outcome {
                    abort.store(true, Ordering::Relaxed);
                    break Err(e);
                }
            };
            let _ = conn.disconnect().await;
            result
        }));
    }
    let mut first_error = None;
    for h in handles {
        match h.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                abort.store(true, Ordering::Relaxed);
                first_error.get_or_insert(e);
            }
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// Existing databases and `(database, table)` pairs on a host, outside the
/// system schemas.
async fn existing_objects(
    conn: &mut Conn,
    host: &str,
) -> Result<(HashSet<String>, HashSet<(String, String)>), OpsError> {
    const SYSTEM: &str = "('mysql','information_schema','performance_schema','sys')";
    let query_err = |what: &str| {
        let host = host.to_string();
        let what = what.to_string();
        move |source| OpsError::Query { host, what, source }
    };
    let dbs: Vec<String> = conn
        .query(format!(
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN {SYSTEM}"
        ))
        .await
        .map_err(query_err("listing databases"))?;
    let tables: Vec<(String, String)> = conn
        .query(format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA NOT IN {SYSTEM}"
        ))
        .await
        .map_err(query_err("listing tables"))?;
    Ok((dbs.into_iter().collect(), tables.into_iter().collect()))
}

/// A job with the statements it still needs: one multi-statement round trip.
struct Batch {
    database: String,
    sql: String,
    creates_database: bool,
    tables: usize,
}

async fn init_host(work: HostWork) -> Result<HostReport, OpsError> {
    let started = Instant::now();
    let HostWork {
        login,
        connections,
        jobs,
        tables,
        bar,
    } = work;
    let host = login.host.clone();
    let mut first = login.connect().await?;
    let (dbs, existing) = existing_objects(&mut first, &host).await?;

    let shards = jobs.len();
    let mut batches = Vec::new();
    let mut complete_before = 0;
    let no_tables = Vec::new();
    for job in jobs {
        let ddls = tables.get(&job.fleet).unwrap_or(&no_tables);
        let creates_database = !dbs.contains(&job.database);
        let missing: Vec<&TableDdl> = ddls
            .iter()
            .filter(|d| {
                creates_database || !existing.contains(&(job.database.clone(), d.name.clone()))
            })
            .collect();
        if !creates_database && missing.is_empty() {
            complete_before += 1;
            continue;
        }
        let db = quote_ident(&job.database);
        let mut sql = format!("CREATE DATABASE IF NOT EXISTS {db}");
        if !missing.is_empty() {
            sql.push_str(&format!(";\nUSE {db}"));
            for d in &missing {
                sql.push_str(";\n");
                sql.push_str(&d.sql);
            }
        }
        batches.push(Batch {
            database: job.database,
            sql,
            creates_database,
            tables: missing.len(),
        });
    }
    bar.inc(complete_before as u64);

    let dbs_created = Arc::new(AtomicUsize::new(0));
    let tables_created = Arc::new(AtomicUsize::new(0));
    let (databases, created) = (dbs_created.clone(), tables_created.clone());
    let failing_host = host.clone();
    drain_on_host(
        &login,
        connections,
        Some(first),
        batches,
        move |mut conn, batch: Batch| {
            let (host, bar) = (failing_host.clone(), bar.clone());
            let (databases, created) = (databases.clone(), created.clone());
            async move {
                if let Err(source) = conn.query_drop(&batch.sql).await {
                    let error = OpsError::Create {
                        host,
                        database: batch.database,
                        source,
                    };
                    return (conn, Err(error));
                }
                if batch.creates_database {
                    databases.fetch_add(1, Ordering::Relaxed);
                }
                created.fetch_add(batch.tables, Ordering::Relaxed);
                bar.inc(1);
                (conn, Ok(()))
            }
        },
    )
    .await?;
    Ok(HostReport {
        host,
        shards,
        databases_created: dbs_created.load(Ordering::Relaxed),
        tables_created: tables_created.load(Ordering::Relaxed),
        complete_before,
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            split_addr("127.0.0.1:3307").unwrap(),
            ("127.0.0.1".into(), 3307)
        );
        assert_eq!(split_addr("db-a").unwrap(), ("db-a".into(), 3306));
        assert_eq!(split_addr("[::1]:3310").unwrap(), ("::1".into(), 3310));
        assert!(split_addr("host:x").is_err());
        assert!(split_addr(":3306").is_err());
    }

    #[test]
    fn errors_name_host_and_database() {
        let e = OpsError::ConnectTimeout {
            host: "127.0.0.1:3308".into(),
            timeout: Duration::from_secs(5),
        };
        assert_eq!(
            e.to_string(),
            "cannot connect to 127.0.0.1:3308: no answer within 5s"
        );
        let e = OpsError::UnknownTables {
            tables: vec!["likes (line 3)".into(), "tags (line 9)".into()],
        };
        assert!(e.to_string().ends_with("likes (line 3), tags (line 9)"));
    }

    /// Creates the full fleet of `config/shardgate.yaml` on the running local
    /// fleet (`integration/fleet.sh start`) and checks it with [`verify`].
    /// Run with `cargo test --lib ops::tests::init_local_fleet -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "needs the local fleet (integration/fleet.sh start)"]
    async fn init_local_fleet() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let topology = Topology::load(&root.join("config/shardgate.yaml")).expect("config loads");
        let schema = std::fs::read_to_string(root.join("config/schema.sql")).unwrap();
        let report = init(&topology, &schema, true).await.expect("init");
        eprintln!("{report}");
        assert_eq!(report.shards(), 8192);
        let again = init(&topology, &schema, false).await.expect("second init");
        eprintln!("{again}");
        assert_eq!(again.databases_created(), 0);
        assert_eq!(again.tables_created(), 0);
        let v = verify(&topology).await.expect("verify");
        eprintln!("{v}");
        assert!(v.is_ok(), "{v:?}");
    }
}
