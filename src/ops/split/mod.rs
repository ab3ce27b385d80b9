//! `shardgate fleet split`: the phases that run on the hosts. A split
//! takes shards A-B of one master (the source) to an empty server (the
//! target):
//!
//! - [`prepare`]: the checks on both servers, each failing one with its fix;
//! - [`copy`]: every database of the source copied to the target inside one
//!   consistent snapshot, then the target replicates the source from that
//!   snapshot's GTID position (all databases, so no replication filter is
//!   needed) and catches up;
//! - the row verify ([`crate::ops::verify_rows`]) and the cutover (`fleet
//!   move`'s sequence) are run by the phase driver, `control::split`, which
//!   also keeps the state record ([`state`]);
//! - [`cleanup`]: replication removed from the target, the databases it does
//!   not own dropped there, the range's databases dropped (or kept under
//!   `_moved_` names) on the source.
//!
//! docs/decisions/0036-a-split-copies-the-whole-source-logically.md says why
//! the copy is logical and of every database.

mod cleanup;
mod copy;
mod prepare;
pub mod state;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

pub use cleanup::{cleanup, cleanup_plan, Removal, MOVED_PREFIX};
pub use copy::{copy, ensure_replicating, CopyOptions, CopyProgress, CopyReport};
pub use prepare::{prepare, Check, PrepareReport};

use crate::ops::{admin_connect_timeout, connect, OpsError};
use crate::topology::Topology;

/// The schemas of the server itself, never copied nor dropped.
pub const SYSTEM_SCHEMAS: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];

/// Why a phase of a split failed.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// The request does not fit the config.
    #[error("{0}")]
    Argument(String),
    /// A host could not be reached or a query failed.
    #[error(transparent)]
    Fleet(#[from] OpsError),
    /// Checks of the prepare phase failed (each with its fix).
    #[error("prepare: {} check(s) failed:\n{}", .0.len(), .0.join("\n"))]
    Checks(Vec<String>),
    /// The target's replication of the source broke or did not catch up.
    #[error("{0}")]
    Replication(String),
    /// The copy cannot recreate something of the source on the target.
    #[error("copy: {0}")]
    Copy(String),
    /// The state record cannot be read or written.
    #[error("state record: {0}")]
    State(String),
}

/// What a split is about: the range, its databases and both servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitPlan {
    /// The fleet's name.
    pub fleet: String,
    /// First shard.
    pub first: u32,
    /// Last shard.
    pub last: u32,
    /// The range's master now.
    pub source: String,
    /// The new master.
    pub target: String,
    /// The range's shard databases.
    pub moved: Vec<String>,
}

/// The split of `first..=last` (of `fleet`, or the one fleet that has
/// them) to `target`, from the range's master in `topology`.
pub fn plan(
    topology: &Topology,
    fleet: Option<&str>,
    first: u32,
    last: u32,
    target: &str,
) -> Result<SplitPlan, SplitError> {
    let mut request = crate::ops::RowVerifyRequest::new(first, last, target);
    request.fleet = fleet.map(str::to_owned);
    let scope = crate::ops::verify::rows::scope(topology, &request)
        .map_err(|e| SplitError::Argument(e.to_string()))?;
    let info = &topology.fleets[scope.fleet];
    Ok(SplitPlan {
        fleet: info.name.clone(),
        first,
        last,
        source: scope.source,
        target: target.to_owned(),
        moved: (first..=last).map(|s| info.database_name(s)).collect(),
    })
}

/// The operations account and connect timeout of a config, for the hosts
/// of a split (which may no longer be in the config after the cutover).
#[derive(Debug, Clone)]
pub struct Login {
    /// The account.
    pub user: String,
    /// Its password.
    pub password: String,
    /// Connect timeout.
    pub timeout: Duration,
}

impl Login {
    /// The config's operations account.
    pub fn operations(topology: &Topology) -> Self {
        let account = topology.config.operations_account();
        Self {
            user: account.user.clone(),
            password: account.password.clone(),
            timeout: admin_connect_timeout(topology),
        }
    }

    /// A connection to `host`.
    pub async fn connect(&self, host: &str) -> Result<Conn, OpsError> {
        connect(host, &self.user, &self.password, self.timeout).await
    }
}

/// A query's failure on `host`.
fn failed(host: &str, what: impl Into<String>) -> impl FnOnce(mysql_async::Error) -> OpsError {
    let host = host.to_owned();
    let what = what.into();
    move |source| OpsError::Query { host, what, source }
}

/// Runs `sql` on `host`'s connection.
async fn run(conn: &mut Conn, host: &str, sql: &str) -> Result<(), OpsError> {
    conn.query_drop(sql).await.map_err(failed(host, sql))
}

/// The databases of a host, system schemas aside, sorted.
pub async fn databases(conn: &mut Conn, host: &str) -> Result<Vec<String>, OpsError> {
    let mut names: Vec<String> = conn
        .query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA ORDER BY SCHEMA_NAME")
        .await
        .map_err(failed(host, "listing databases"))?;
    names.retain(|n| !SYSTEM_SCHEMAS.contains(&n.as_str()));
    Ok(names)
}

/// `'text'` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}
