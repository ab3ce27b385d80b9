//! Per virtual shard statistics: statements, errors and time, one array of
//! atomics per fleet indexed by shard number (no map), so counting costs
//! three relaxed additions. Read by `SHOW SHARD STATS` and `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::sync::lock;

/// The counters of one fleet's shards.
#[derive(Debug)]
struct FleetCounters {
    name: String,
    statements: Box<[AtomicU64]>,
    errors: Box<[AtomicU64]>,
    time_us: Box<[AtomicU64]>,
}

impl FleetCounters {
    fn new(name: &str, shards: usize) -> Self {
        let zeros = || (0..shards).map(|_| AtomicU64::new(0)).collect();
        Self {
            name: name.to_owned(),
            statements: zeros(),
            errors: zeros(),
            time_us: zeros(),
        }
    }

    /// A copy with room for `shards` shards and the counts so far.
    fn grown(&self, shards: usize) -> Self {
        let grown = Self::new(&self.name, shards.max(self.statements.len()));
        for (from, to) in [
            (&self.statements, &grown.statements),
            (&self.errors, &grown.errors),
            (&self.time_us, &grown.time_us),
        ] {
            for (old, new) in from.iter().zip(to.iter()) {
                new.store(old.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        grown
    }
}

/// Per-shard counters of every fleet, indexed by the fleet's place in the
/// topology (`FleetId`) and checked by name, so a reload that reorders or
/// adds fleets keeps each fleet's counts.
#[derive(Debug, Default)]
pub struct ShardStats {
    fleets: ArcSwap<Vec<Arc<FleetCounters>>>,
    /// Serialises the (rare) changes of `fleets`.
    changing: Mutex<()>,
}

/// One line of `SHOW SHARD STATS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRow {
    /// The fleet's name.
    pub fleet: String,
    /// The virtual shard.
    pub shard: u32,
    /// Statements that ran on it (a multi-shard read counts once per shard).
    pub statements: u64,
    /// Of which answered with an error.
    pub errors: u64,
    /// Sum of their times, microseconds (a multi-shard read's whole time
    /// counts on each of its shards).
    pub time_us: u64,
}

/// The order of `SHOW SHARD STATS` (descending).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardOrder {
    /// Statements.
    #[default]
    Statements,
    /// Errors.
    Errors,
    /// Sum of times.
    Time,
}

impl ShardStats {
    /// No counts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one statement on `shard` of the fleet `fleet` (its index in
    /// the topology, `name` its name, `shard_count` its shards).
    #[inline]
    pub fn record(
        &self,
        (fleet, name, shard_count): (usize, &str, u32),
        shard: u32,
        elapsed: Duration,
        error: bool,
    ) {
        let fleets = self.fleets.load();
        let counters = match fleets.get(fleet) {
            Some(counters)
                if counters.name == name && (shard as usize) < counters.statements.len() =>
            {
                Arc::clone(counters)
            }
            _ => {
                drop(fleets);
                self.add_fleet(fleet, name, shard_count.max(shard + 1))
            }
        };
        let at = shard as usize;
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        counters.statements[at].fetch_add(1, Ordering::Relaxed);
        counters.time_us[at].fetch_add(micros, Ordering::Relaxed);
        if error {
            counters.errors[at].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Puts the counters of fleet `name` at index `fleet`, with room for
    /// `shards` shards, keeping what was counted for it (under any index).
    #[cold]
    fn add_fleet(&self, fleet: usize, name: &str, shards: u32) -> Arc<FleetCounters> {
        let _changing = lock(&self.changing);
        let current = self.fleets.load_full();
        let mut fleets: Vec<Arc<FleetCounters>> = current.as_ref().clone();
        let existing = fleets.iter().position(|c| c.name == name);
        let counters = Arc::new(match existing {
            Some(at) => fleets[at].grown(shards as usize),
            None => FleetCounters::new(name, shards as usize),
        });
        if let Some(at) = existing {
            // Swapped with whatever sits at `fleet` below.
            fleets[at] = Arc::new(FleetCounters::new("", 0));
        }
        while fleets.len() <= fleet {
            fleets.push(Arc::new(FleetCounters::new("", 0)));
        }
        let displaced = std::mem::replace(&mut fleets[fleet], Arc::clone(&counters));
        if let Some(at) = existing.filter(|&at| at != fleet) {
            fleets[at] = displaced;
        }
        self.fleets.store(Arc::new(fleets));
        counters
    }

    /// The shards that ran a statement, highest first by `order`, at most
    /// `top`.
    pub fn top(&self, order: ShardOrder, top: usize) -> Vec<ShardRow> {
        let fleets = self.fleets.load();
        let mut rows = Vec::new();
        for counters in fleets.iter().filter(|c| !c.name.is_empty()) {
            for (shard, statements) in counters.statements.iter().enumerate() {
                let statements = statements.load(Ordering::Relaxed);
                if statements == 0 {
                    continue;
                }
                rows.push(ShardRow {
                    fleet: counters.name.clone(),
                    shard: shard as u32,
                    statements,
                    errors: counters.errors[shard].load(Ordering::Relaxed),
                    time_us: counters.time_us[shard].load(Ordering::Relaxed),
                });
            }
        }
        let key = |row: &ShardRow| match order {
            ShardOrder::Statements => row.statements,
            ShardOrder::Errors => row.errors,
            ShardOrder::Time => row.time_us,
        };
        rows.sort_by(|a, b| {
            key(b)
                .cmp(&key(a))
                .then_with(|| a.fleet.cmp(&b.fleet))
                .then(a.shard.cmp(&b.shard))
        });
        rows.truncate(top);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn counts_land_on_their_shard_and_the_hottest_comes_first() {
        let stats = ShardStats::new();
        let main = (0, "main", 4096);
        for _ in 0..5 {
            stats.record(main, 4095, MS, false);
        }
        stats.record(main, 3, 10 * MS, true);
        stats.record((1, "mod", 16), 3, MS, false);
        let top = stats.top(ShardOrder::Statements, 10);
        assert_eq!(top.len(), 3);
        assert_eq!((top[0].fleet.as_str(), top[0].shard), ("main", 4095));
        assert_eq!(
            (top[0].statements, top[0].errors, top[0].time_us),
            (5, 0, 5000)
        );
        let by_errors = stats.top(ShardOrder::Errors, 1);
        assert_eq!((by_errors[0].shard, by_errors[0].errors), (3, 1));
        let by_time = stats.top(ShardOrder::Time, 1);
        assert_eq!((by_time[0].shard, by_time[0].time_us), (3, 10_000));
        assert_eq!(stats.top(ShardOrder::Statements, 2).len(), 2);
    }

    #[test]
    fn a_reload_that_reorders_fleets_keeps_their_counts() {
        let stats = ShardStats::new();
        stats.record((0, "main", 8), 1, MS, false);
        stats.record((1, "mod", 8), 2, MS, false);
        // After a reload, `mod` comes first and `main` has more shards.
        stats.record((0, "mod", 8), 2, MS, false);
        stats.record((1, "main", 16), 12, MS, false);
        let rows = stats.top(ShardOrder::Statements, 10);
        let find = |fleet: &str, shard: u32| {
            rows.iter()
                .find(|r| r.fleet == fleet && r.shard == shard)
                .map(|r| r.statements)
        };
        assert_eq!(find("mod", 2), Some(2));
        assert_eq!(find("main", 1), Some(1));
        assert_eq!(find("main", 12), Some(1));
        assert_eq!(rows.len(), 3);
    }

    #[test]
    fn a_shard_past_the_fleet_size_grows_the_array() {
        let stats = ShardStats::new();
        stats.record((0, "main", 4), 9, MS, false);
        assert_eq!(stats.top(ShardOrder::Statements, 1)[0].shard, 9);
    }
}
