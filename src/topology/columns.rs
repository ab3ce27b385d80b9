//! The columns of the object tables, as a shard database has them, so the
//! router can expand `SELECT *` into the table's columns with `local_id`
//! turned into the composed `id`.
//!
//! [`TableColumns`] is one reading (per fleet, per table, the column names
//! in their ordinal order); [`SharedColumns`] holds the reading in force,
//! swapped atomically by whoever reads the servers (the engine's column
//! refresher), and the requests for a new reading (after a reload or a
//! schema change). Every [`crate::topology::Topology`] a running proxy
//! swaps in shares the same [`SharedColumns`], so a reload does not forget
//! what was read.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::Notify;

/// One reading of the object tables' columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableColumns {
    /// Fleet name → lower-case table name → column names in order.
    fleets: HashMap<String, HashMap<String, Arc<[String]>>>,
    /// Fleet name → lower-case table name → how its shard databases differ
    /// (a schema change rolled out part-way): no columns are given for it.
    differing: HashMap<String, HashMap<String, String>>,
}

impl TableColumns {
    /// Records the columns of `table` on `fleet`, in their order.
    pub fn insert(&mut self, fleet: &str, table: &str, columns: Vec<String>) {
        self.fleets
            .entry(fleet.to_owned())
            .or_default()
            .insert(table.to_ascii_lowercase(), columns.into());
    }

    /// The columns of `table` (any case) on `fleet`, if they were read.
    pub fn get(&self, fleet: &str, table: &str) -> Option<Arc<[String]>> {
        let tables = self.fleets.get(fleet)?;
        if table.bytes().any(|b| b.is_ascii_uppercase()) {
            tables.get(&table.to_ascii_lowercase()).cloned()
        } else {
            tables.get(table).cloned()
        }
    }

    /// Records that the shard databases of `fleet` differ on `table`
    /// (`why` names them).
    pub fn insert_differing(&mut self, fleet: &str, table: &str, why: String) {
        self.differing
            .entry(fleet.to_owned())
            .or_default()
            .insert(table.to_ascii_lowercase(), why);
    }

    /// How the shard databases of `fleet` differ on `table` (any case), if
    /// they do.
    pub fn differing(&self, fleet: &str, table: &str) -> Option<String> {
        self.differing
            .get(fleet)?
            .get(&table.to_ascii_lowercase())
            .cloned()
    }

    /// Whether this reading has anything for `fleet`.
    pub fn has_fleet(&self, fleet: &str) -> bool {
        self.fleets.contains_key(fleet)
    }

    /// Takes `fleet`'s tables from `other` (replacing this reading's).
    pub fn take_fleet(&mut self, fleet: &str, other: &TableColumns) {
        if let Some(tables) = other.fleets.get(fleet) {
            self.fleets.insert(fleet.to_owned(), tables.clone());
        }
        if let Some(tables) = other.differing.get(fleet) {
            self.differing.insert(fleet.to_owned(), tables.clone());
        }
    }
}

/// The columns reading in force, and the requests for a new one.
#[derive(Default)]
pub struct SharedColumns {
    current: ArcSwap<TableColumns>,
    refresh: Notify,
}

impl std::fmt::Debug for SharedColumns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedColumns")
            .field("current", &self.current.load())
            .finish_non_exhaustive()
    }
}

impl SharedColumns {
    /// A holder with `columns` already in force (tests, tools).
    pub fn with(columns: TableColumns) -> Self {
        Self {
            current: ArcSwap::from_pointee(columns),
            refresh: Notify::new(),
        }
    }

    /// The reading in force.
    pub fn load(&self) -> Arc<TableColumns> {
        self.current.load_full()
    }

    /// The columns of `table` on `fleet` in the reading in force.
    pub fn get(&self, fleet: &str, table: &str) -> Option<Arc<[String]>> {
        self.current.load().get(fleet, table)
    }

    /// Puts a new reading in force.
    pub fn store(&self, columns: TableColumns) {
        self.current.store(Arc::new(columns));
    }

    /// Asks the refresher for a new reading now (after a reload or a
    /// schema change that went through the proxy); requests made while it
    /// reads coalesce into one more reading.
    pub fn request_refresh(&self) {
        self.refresh.notify_one();
    }

    /// Waits for [`SharedColumns::request_refresh`].
    pub async fn refresh_requested(&self) {
        self.refresh.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_per_fleet_and_table_any_case() {
        let mut read = TableColumns::default();
        read.insert("main", "Pins", vec!["local_id".into(), "data".into()]);
        let shared = SharedColumns::with(read.clone());
        let columns = shared.get("main", "PINS").expect("pins read");
        assert_eq!(&*columns, ["local_id", "data"]);
        assert!(shared.get("mod", "pins").is_none());
        assert!(shared.get("main", "users").is_none());

        let mut next = TableColumns::default();
        assert!(!next.has_fleet("main"));
        next.take_fleet("main", &read);
        assert!(next.has_fleet("main"));
        next.insert("main", "users", vec!["local_id".into()]);
        shared.store(next);
        assert!(shared.get("main", "users").is_some());
        assert!(shared.get("main", "pins").is_some());
    }
}
