//! Reads the object tables' columns from the servers, for the router's
//! expansion of `SELECT *` ([`crate::topology::columns`]).
//!
//! Each fleet with object tables is read from the first and the last shard
//! database of each host range, on the range's master
//! (`information_schema.COLUMNS`, ordered by `ORDINAL_POSITION`). A table
//! whose columns agree in every database read is expanded with them; one
//! where they differ (a schema change rolled out part-way) gets no columns
//! but the names of two databases that differ, so `SELECT *` is refused
//! with them rather than sent with columns some shard lacks. Ranges whose
//! master does not answer are left out of the comparison. It logs in as the data path's `backend` account,
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
                for (table, agreed) in agree(&read, &tables) {
                    match agreed {
                        Ok(columns) => next.insert(&fleet.name, &table, columns),
                        Err(why) => next.insert_differing(&fleet.name, &table, why),
                    }
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

/// A shard database's object tables with their columns.
type Reading = (String, Vec<(String, Vec<String>)>);

/// The columns of `tables` in the first and the last shard database of
/// each host range of `fleet` whose master answers; `Err` says why none
/// did.
async fn read_fleet<T: Checked>(
    checked: &T,
    topology: &Topology,
    fleet: &Fleet,
    tables: &[String],
    timeout: Duration,
) -> Result<Vec<Reading>, String> {
    let account = &topology.config.backend;
    let mut failures = Vec::new();
    let mut readings = Vec::new();
    for range in &fleet.ranges {
        let Some(host) = topology.host(range.master) else {
            continue;
        };
        let databases = [
            fleet.database_name(range.first),
            fleet.database_name(range.last),
        ];
        let down = checked
            .backends()
            .host(&host.addr)
            .is_some_and(|state| state.host_health.is_down());
        if down {
            failures.push(format!("{} on {}: host down", databases[0], host.addr));
            continue;
        }
        let read = tokio::time::timeout(timeout, async {
            let mut conn = connect(&host.addr, &account.user, &account.password, timeout).await?;
            let mut read = Vec::new();
            for database in &databases {
                let rows: Vec<(String, String)> = conn
                    .exec(COLUMNS_QUERY, (database.as_str(),))
                    .await
                    .map_err(|e| format!("reading information_schema.COLUMNS failed: {e}"))?;
                read.push((database.clone(), group(rows, tables)));
            }
            let _ = conn.disconnect().await;
            Ok::<_, String>(read)
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} ms", timeout.as_millis())));
        match read {
            Ok(read) => readings.extend(read),
            Err(error) => failures.push(format!("{} on {}: {error}", databases[0], host.addr)),
        }
    }
    if readings.is_empty() {
        return Err(format!("fleet {}: {}", fleet.name, failures.join("; ")));
    }
    Ok(readings)
}

/// Each of `tables` some database has, with its columns when every
/// database read has the same ones, else (`Err`) the two databases that
/// differ first and how.
fn agree(readings: &[Reading], tables: &[String]) -> Vec<(String, Result<Vec<String>, String>)> {
    let columns_in = |reading: &Reading, table: &str| -> Option<Vec<String>> {
        reading
            .1
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(table))
            .map(|(_, columns)| columns.clone())
    };
    let shown = |columns: &Option<Vec<String>>| match columns {
        Some(columns) => format!("({})", columns.join(", ")),
        None => "no such table".to_owned(),
    };
    let mut out = Vec::new();
    for table in tables {
        let Some((first, rest)) = readings.split_first() else {
            break;
        };
        let reference = columns_in(first, table);
        let differs = rest
            .iter()
            .map(|reading| (reading, columns_in(reading, table)))
            .find(|(_, columns)| *columns != reference);
        match (differs, reference) {
            (None, None) => {}
            (None, Some(columns)) => out.push((table.clone(), Ok(columns))),
            (Some((other, columns)), reference) => out.push((
                table.clone(),
                Err(format!(
                    "the shard databases differ: {} has {} but {} has {}",
                    first.0,
                    shown(&reference),
                    other.0,
                    shown(&columns)
                )),
            )),
        }
    }
    out
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

    fn reading(database: &str, tables: &[(&str, &[&str])]) -> Reading {
        let tables = tables
            .iter()
            .map(|(t, cs)| (t.to_string(), cs.iter().map(|c| c.to_string()).collect()))
            .collect();
        (database.to_owned(), tables)
    }

    #[test]
    fn columns_are_given_only_where_every_database_agrees() {
        let tables = ["boards".to_owned(), "pins".to_owned(), "users".to_owned()];
        let readings = [
            reading(
                "db00000",
                &[("pins", &["local_id", "data"]), ("users", &["local_id"])],
            ),
            reading(
                "db02047",
                &[("pins", &["local_id", "data"]), ("users", &["local_id"])],
            ),
            reading(
                "db02048",
                &[
                    ("pins", &["local_id", "data", "ts"]),
                    ("users", &["local_id"]),
                ],
            ),
        ];
        let agreed = agree(&readings, &tables);
        assert_eq!(agreed.len(), 2, "no database has boards");
        let (table, pins) = &agreed[0];
        assert_eq!(table, "pins");
        let why = pins.as_ref().expect_err("the databases differ");
        assert!(why.contains("db00000 has (local_id, data)"), "{why}");
        assert!(why.contains("db02048 has (local_id, data, ts)"), "{why}");
        assert_eq!(
            agreed[1],
            ("users".to_owned(), Ok(vec!["local_id".to_owned()]))
        );
        let missing = [
            reading("db00000", &[("pins", &["local_id"])]),
            reading("db04095", &[]),
        ];
        let agreed = agree(&missing, &tables);
        let why = agreed[0].1.as_ref().expect_err("missing on one shard");
        assert!(why.contains("db04095 has no such table"), "{why}");
    }

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
