//! Reads the object tables' columns from the servers, for the router's
//! expansion of `SELECT *` ([`crate::topology::columns`]).
//!
//! Each fleet with object tables is read from its first reachable shard
//! database: the first shard of each host range in turn, on the range's
//! master, until one answers `information_schema.COLUMNS` (ordered by
//! `ORDINAL_POSITION`). It logs in as the data path's `backend` account,
//! so it sees the tables the data path sees. A fleet none of whose masters
//! answers keeps its previous reading. [`spawn`] reads again every
//! `health.columns_refresh_ms`, and at once when
//! [`crate::topology::columns::SharedColumns::request_refresh`] is called
//! (a reload, a schema change through the proxy).

use std::sync::{Arc, Weak};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use tracing::{debug, warn};

use super::health::{connect, Checked};
use crate::topology::columns::TableColumns;
use crate::topology::{Fleet, TableKind, Topology};

/// The columns of a shard database's tables, in order.
const COLUMNS_QUERY: &str = "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS \
     WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION";

/// Reads the columns of `topology`'s object tables once and puts them in
/// force; a fleet that cannot be read keeps what was read before. Returns
/// one line per fleet that could not be read.
pub async fn refresh<T: Checked>(checked: &T) -> Vec<String> {
    let topology = checked.topology().load();
    let shared = Arc::clone(&topology.columns);
    let previous = shared.load();
    let timeout = Duration::from_millis(topology.config.health.timeout_ms.max(1));
    let mut next = TableColumns::default();
    let mut problems = Vec::new();
    for fleet in &topology.fleets {
        let tables = object_tables(&topology, fleet);
        if tables.is_empty() {
            continue;
        }
        match read_fleet(checked, &topology, fleet, &tables, timeout).await {
            Ok(read) => {
                for (table, columns) in read {
                    next.insert(&fleet.name, &table, columns);
                }
            }
            Err(problem) => {
                next.take_fleet(&fleet.name, &previous);
                problems.push(problem);
            }
        }
    }
    if *previous != next {
        debug!("object table columns read: {next:?}");
    }
    shared.store(next);
    problems
}

/// Starts the periodic reading on the current runtime; it stops when
/// `checked` is dropped.
pub fn spawn<T: Checked>(checked: &Arc<T>) {
    tokio::spawn(refresh_forever(Arc::downgrade(checked)));
}

async fn refresh_forever<T: Checked>(checked: Weak<T>) {
    loop {
        let Some(strong) = checked.upgrade() else {
            return;
        };
        let topology = strong.topology().load();
        let interval = Duration::from_millis(topology.config.health.columns_refresh_ms.max(1));
        let shared = Arc::clone(&topology.columns);
        drop((strong, topology));
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = shared.refresh_requested() => {}
        }
        let Some(strong) = checked.upgrade() else {
            return;
        };
        for problem in refresh(&*strong).await {
            warn!("object table columns not read again (SELECT * keeps the previous reading): {problem}");
        }
    }
}

/// The names of `fleet`'s object tables.
fn object_tables(topology: &Topology, fleet: &Fleet) -> Vec<String> {
    let mut tables: Vec<String> = topology
        .tables
        .values()
        .filter(|t| {
            matches!(t.kind, TableKind::Object { .. })
                && topology.fleets.get(t.fleet).map(|f| &f.name) == Some(&fleet.name)
        })
        .map(|t| t.name.clone())
        .collect();
    tables.sort();
    tables
}

/// The columns of `tables` from the first shard database of `fleet` that
/// answers; `Err` says why none did.
async fn read_fleet<T: Checked>(
    checked: &T,
    topology: &Topology,
    fleet: &Fleet,
    tables: &[String],
    timeout: Duration,
) -> Result<Vec<(String, Vec<String>)>, String> {
    let account = &topology.config.backend;
    let mut failures = Vec::new();
    for range in &fleet.ranges {
        let Some(host) = topology.host(range.master) else {
            continue;
        };
        let database = fleet.database_name(range.first);
        let down = checked
            .backends()
            .host(&host.addr)
            .is_some_and(|state| state.host_health.is_down());
        if down {
            failures.push(format!("{database} on {}: host down", host.addr));
            continue;
        }
        let read = tokio::time::timeout(timeout, async {
            let mut conn = connect(&host.addr, &account.user, &account.password, timeout).await?;
            let rows: Vec<(String, String)> = conn
                .exec(COLUMNS_QUERY, (database.as_str(),))
                .await
                .map_err(|e| format!("reading information_schema.COLUMNS failed: {e}"))?;
            let _ = conn.disconnect().await;
            Ok::<_, String>(rows)
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} ms", timeout.as_millis())));
        match read {
            Ok(rows) => return Ok(group(rows, tables)),
            Err(error) => failures.push(format!("{database} on {}: {error}", host.addr)),
        }
    }
    Err(format!("fleet {}: {}", fleet.name, failures.join("; ")))
}

/// `(table, column)` rows in order → each of `tables` (any case) with its
/// columns; tables the database does not have are left out.
fn group(rows: Vec<(String, String)>, tables: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (table, column) in rows {
        if !tables.iter().any(|t| t.eq_ignore_ascii_case(&table)) {
            continue;
        }
        match out.last_mut() {
            Some((last, columns)) if *last == table => columns.push(column),
            _ => out.push((table, vec![column])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_group_by_table_in_order_keeping_only_object_tables() {
        let rows = [
            ("board_has_pins", "board_id"),
            ("pins", "local_id"),
            ("pins", "data"),
            ("pins", "ts"),
            ("users", "local_id"),
        ]
        .map(|(t, c)| (t.to_owned(), c.to_owned()))
        .to_vec();
        let tables = ["pins".to_owned(), "users".to_owned()];
        let grouped = group(rows, &tables);
        assert_eq!(
            grouped,
            [
                (
                    "pins".to_owned(),
                    vec!["local_id".into(), "data".into(), "ts".into()]
                ),
                ("users".to_owned(), vec!["local_id".into()]),
            ]
        );
    }
}
