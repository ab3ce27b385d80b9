//! Statement digests: every statement counted under its shape (literals
//! masked, computed by the router), with its count, errors, times, rows,
//! shards and how it was routed. Read by `SHOW DIGESTS`.
//!
//! The table is split into [`LOCK_SHARDS`] parts by digest, each behind its
//! own mutex held only for a hash lookup and a few additions, so sessions
//! on different worker threads rarely wait for each other. Each part holds
//! at most `max / LOCK_SHARDS` digests (so the whole table at most `max`,
//! which validation keeps at least [`LOCK_SHARDS`]); a part that is full
//! evicts its least recently seen eighth at once, which keeps the cost of
//! an eviction per new digest constant.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::histogram::SparseHistogram;
use crate::sync::lock;

/// Parts the table is split into.
pub const LOCK_SHARDS: usize = 16;

/// How the router planned a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// One shard.
    OneShard,
    /// Several shards, for the keys it names (an `IN` list over shards).
    InSplit,
    /// Every shard of a fleet (`/*+ SCATTER */`).
    Scatter,
    /// Any master: it touches no sharded table.
    AnyHost,
    /// Answered by the proxy (`USE`, transactions, session variables,
    /// diagnostics).
    Session,
    /// Refused before it reached a server.
    Refused,
}

impl RouteKind {
    /// Every kind, in the order they are reported.
    pub const ALL: [RouteKind; 6] = [
        RouteKind::OneShard,
        RouteKind::InSplit,
        RouteKind::Scatter,
        RouteKind::AnyHost,
        RouteKind::Session,
        RouteKind::Refused,
    ];

    /// The name `SHOW DIGESTS` shows.
    pub fn name(self) -> &'static str {
        match self {
            RouteKind::OneShard => "shard",
            RouteKind::InSplit => "in_split",
            RouteKind::Scatter => "scatter",
            RouteKind::AnyHost => "any_host",
            RouteKind::Session => "session",
            RouteKind::Refused => "refused",
        }
    }
}

/// One statement as it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// Its digest.
    pub digest: u64,
    /// From receipt to answer queued.
    pub elapsed: Duration,
    /// Answered with an error.
    pub error: bool,
    /// Rows of its result set sent to the client.
    pub rows_sent: u64,
    /// Rows a server reported affected.
    pub rows_affected: u64,
    /// Shards it ran on.
    pub shards: u32,
    /// How it was routed.
    pub route: RouteKind,
}

/// What the table knows of one digest.
#[derive(Debug, Clone)]
struct Entry {
    text: Box<str>,
    count: u64,
    errors: u64,
    total_us: u64,
    max_us: u64,
    latency: SparseHistogram,
    rows_sent: u64,
    rows_affected: u64,
    shards: u64,
    routes: [u64; RouteKind::ALL.len()],
    first_seen: SystemTime,
    last_seen: SystemTime,
    /// The part's tick when last seen (what eviction orders by).
    last_tick: u64,
}

/// One part of the table.
#[derive(Debug, Default)]
struct Part {
    /// Keyed by a digest, a hash of client text: hashed again with a
    /// random key, so no client can choose digests that crowd one place.
    entries: HashMap<u64, Entry, foldhash::fast::RandomState>,
    tick: u64,
}

/// The digest table.
#[derive(Debug)]
pub struct Digests {
    parts: [Mutex<Part>; LOCK_SHARDS],
    evictions: AtomicU64,
}

impl Default for Digests {
    fn default() -> Self {
        Self {
            parts: std::array::from_fn(|_| Mutex::default()),
            evictions: AtomicU64::new(0),
        }
    }
}

/// One line of `SHOW DIGESTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestRow {
    /// The digest, as 16 hex digits.
    pub digest: String,
    /// The first statement seen with it, literals masked.
    pub text: String,
    /// Statements counted.
    pub count: u64,
    /// Of which answered with an error.
    pub errors: u64,
    /// Sum of their times, microseconds.
    pub total_us: u64,
    /// Longest, microseconds.
    pub max_us: u64,
    /// Median, microseconds.
    pub p50_us: u64,
    /// 99th percentile, microseconds.
    pub p99_us: u64,
    /// Result-set rows sent.
    pub rows_sent: u64,
    /// Rows affected.
    pub rows_affected: u64,
    /// Shards run on, summed over the statements.
    pub shards: u64,
    /// How they were routed: each kind seen, with its count
    /// (`shard:10,refused:1`).
    pub routes: String,
    /// First seen.
    pub first_seen: SystemTime,
    /// Last seen.
    pub last_seen: SystemTime,
}

/// The order of `SHOW DIGESTS` (descending).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DigestOrder {
    /// Sum of times.
    #[default]
    TotalTime,
    /// Statements counted.
    Count,
    /// 99th percentile.
    P99,
    /// Errors.
    Errors,
}

impl Digests {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts `seen` under its digest, in a table of at most `max` digests.
    /// `text` gives the masked text of a digest not in the table yet.
    pub fn record(&self, seen: &Observation, max: usize, text: impl FnOnce() -> String) {
        let micros = u64::try_from(seen.elapsed.as_micros()).unwrap_or(u64::MAX);
        let now = SystemTime::now();
        let mut part = lock(&self.parts[part_of(seen.digest)]);
        part.tick += 1;
        let tick = part.tick;
        if let Some(entry) = part.entries.get_mut(&seen.digest) {
            entry.count(seen, micros, now, tick);
            return;
        }
        let capacity = (max / LOCK_SHARDS).max(1);
        if part.entries.len() >= capacity {
            let over = part.entries.len() + 1 - capacity;
            let evicted = part.evict_oldest(capacity.div_ceil(8).max(over));
            self.evictions.fetch_add(evicted, Ordering::Relaxed);
        }
        let mut entry = Entry {
            text: text().into_boxed_str(),
            count: 0,
            errors: 0,
            total_us: 0,
            max_us: 0,
            latency: SparseHistogram::default(),
            rows_sent: 0,
            rows_affected: 0,
            shards: 0,
            routes: [0; RouteKind::ALL.len()],
            first_seen: now,
            last_seen: now,
            last_tick: tick,
        };
        entry.count(seen, micros, now, tick);
        part.entries.insert(seen.digest, entry);
    }

    /// Digests in the table.
    pub fn len(&self) -> usize {
        self.parts.iter().map(|part| lock(part).entries.len()).sum()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Digests evicted to stay within the bound, since the proxy started.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Forgets every digest (`RESET DIGESTS`); the eviction count stays.
    pub fn reset(&self) {
        for part in &self.parts {
            let mut part = lock(part);
            part.entries = HashMap::default();
        }
    }

    /// The digests, highest first by `order`, at most `limit`.
    pub fn rows(&self, order: DigestOrder, limit: Option<usize>) -> Vec<DigestRow> {
        let mut entries: Vec<(u64, Entry)> = Vec::new();
        for part in &self.parts {
            let part = lock(part);
            entries.extend(
                part.entries
                    .iter()
                    .map(|(&key, entry)| (key, entry.clone())),
            );
        }
        let key = |entry: &Entry| match order {
            DigestOrder::TotalTime => entry.total_us,
            DigestOrder::Count => entry.count,
            DigestOrder::P99 => entry.latency.quantile_us(0.99),
            DigestOrder::Errors => entry.errors,
        };
        entries.sort_by_cached_key(|(digest, entry)| (std::cmp::Reverse(key(entry)), *digest));
        entries.truncate(limit.unwrap_or(usize::MAX));
        entries
            .into_iter()
            .map(|(digest, entry)| DigestRow {
                digest: format!("{digest:016x}"),
                text: entry.text.into(),
                count: entry.count,
                errors: entry.errors,
                total_us: entry.total_us,
                max_us: entry.max_us,
                p50_us: entry.latency.quantile_us(0.5),
                p99_us: entry.latency.quantile_us(0.99),
                rows_sent: entry.rows_sent,
                rows_affected: entry.rows_affected,
                shards: entry.shards,
                routes: RouteKind::ALL
                    .iter()
                    .zip(entry.routes)
                    .filter(|(_, count)| *count > 0)
                    .map(|(kind, count)| format!("{}:{count}", kind.name()))
                    .collect::<Vec<_>>()
                    .join(","),
                first_seen: entry.first_seen,
                last_seen: entry.last_seen,
            })
            .collect()
    }
}

impl Entry {
    /// Counts `seen` (which took `micros`), seen at `now`, the part's
    /// `tick`.
    fn count(&mut self, seen: &Observation, micros: u64, now: SystemTime, tick: u64) {
        self.count += 1;
        self.errors += u64::from(seen.error);
        self.total_us = self.total_us.saturating_add(micros);
        self.max_us = self.max_us.max(micros);
        self.latency.record_us(micros);
        self.rows_sent = self.rows_sent.saturating_add(seen.rows_sent);
        self.rows_affected = self.rows_affected.saturating_add(seen.rows_affected);
        self.shards += u64::from(seen.shards);
        self.routes[seen.route as usize] += 1;
        self.last_seen = now;
        self.last_tick = tick;
    }
}

impl Part {
    /// Removes the `count` least recently seen entries; how many it
    /// removed.
    fn evict_oldest(&mut self, count: usize) -> u64 {
        let count = count.min(self.entries.len());
        if count == 0 {
            return 0;
        }
        let mut ticks: Vec<(u64, u64)> = self
            .entries
            .iter()
            .map(|(&key, entry)| (entry.last_tick, key))
            .collect();
        ticks.select_nth_unstable(count - 1);
        for &(_, key) in &ticks[..count] {
            self.entries.remove(&key);
        }
        count as u64
    }
}

/// The part of a digest: its top bits (the low ones pick the hash map's
/// bucket).
fn part_of(digest: u64) -> usize {
    (digest >> 60) as usize % LOCK_SHARDS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(digest: u64, micros: u64) -> Observation {
        Observation {
            digest,
            elapsed: Duration::from_micros(micros),
            error: false,
            rows_sent: 1,
            rows_affected: 0,
            shards: 1,
            route: RouteKind::OneShard,
        }
    }

    /// Digests spread over every part, as hashes are.
    fn spread(i: u64) -> u64 {
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    #[test]
    fn the_smallest_bound_validation_accepts_gives_every_part_one() {
        assert!(LOCK_SHARDS as u64 <= crate::topology::config::MIN_MAX_DIGESTS);
    }

    #[test]
    fn counts_add_up_under_one_digest() {
        let table = Digests::new();
        let mut texts = 0;
        for micros in [100, 300, 200] {
            table.record(&seen(7, micros), 1000, || {
                texts += 1;
                "SELECT ?".to_owned()
            });
        }
        let mut failed = seen(7, 50);
        failed.error = true;
        failed.route = RouteKind::Refused;
        failed.shards = 0;
        table.record(&failed, 1000, || unreachable!("known digest"));
        assert_eq!(texts, 1, "the text is made once, for a new digest");
        let rows = table.rows(DigestOrder::TotalTime, None);
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!(row.text, "SELECT ?");
        assert_eq!((row.count, row.errors), (4, 1));
        assert_eq!((row.total_us, row.max_us), (650, 300));
        assert_eq!((row.rows_sent, row.shards), (4, 3));
        assert_eq!(row.routes, "shard:3,refused:1");
        assert_eq!(row.digest, "0000000000000007");
        assert!(row.first_seen <= row.last_seen);
        let close = |got: u64, want: u64| got.abs_diff(want) * 16 <= want;
        assert!(close(row.p50_us, 100), "p50 {}", row.p50_us);
        assert!(close(row.p99_us, 300), "p99 {}", row.p99_us);
    }

    #[test]
    fn the_table_stays_within_its_bound_and_counts_evictions() {
        let table = Digests::new();
        let max = 10_000;
        for i in 0..1_000_000u64 {
            table.record(&seen(spread(i), 10), max, || format!("SELECT {i}"));
        }
        let len = table.len();
        assert!(len <= max, "{len} digests kept, bound {max}");
        assert!(len >= max * 3 / 4, "{len} digests kept: evicting too much");
        assert_eq!(table.evictions(), 1_000_000 - len as u64);
    }

    #[test]
    fn the_least_recently_seen_go_first() {
        let table = Digests::new();
        let max = LOCK_SHARDS * 8;
        let hot: Vec<u64> = (0..LOCK_SHARDS as u64 * 4).map(spread).collect();
        for round in 0..200u64 {
            for &digest in &hot {
                table.record(&seen(digest, 10), max, String::new);
            }
            table.record(&seen(spread(1_000 + round), 10), max, String::new);
        }
        let kept: Vec<String> = table
            .rows(DigestOrder::Count, None)
            .into_iter()
            .map(|row| row.digest)
            .collect();
        for digest in hot {
            assert!(
                kept.contains(&format!("{digest:016x}")),
                "a digest seen every round was evicted"
            );
        }
        assert!(table.evictions() > 0);
        assert!(table.len() <= max);
    }

    #[test]
    fn rows_are_ordered_and_limited() {
        let table = Digests::new();
        // Digest 1: many fast; 2: one slow; 3: errors.
        for _ in 0..10 {
            table.record(&seen(1, 10), 1000, String::new);
        }
        table.record(&seen(2, 5_000), 1000, String::new);
        let mut failed = seen(3, 20);
        failed.error = true;
        table.record(&failed, 1000, String::new);
        table.record(&failed, 1000, String::new);
        let first = |order| table.rows(order, Some(1))[0].digest.clone();
        assert_eq!(first(DigestOrder::TotalTime), format!("{:016x}", 2));
        assert_eq!(first(DigestOrder::P99), format!("{:016x}", 2));
        assert_eq!(first(DigestOrder::Count), format!("{:016x}", 1));
        assert_eq!(first(DigestOrder::Errors), format!("{:016x}", 3));
        assert_eq!(table.rows(DigestOrder::Count, Some(2)).len(), 2);
        assert_eq!(table.rows(DigestOrder::Count, None).len(), 3);
        table.reset();
        assert!(table.is_empty());
        assert!(table.rows(DigestOrder::Count, None).is_empty());
    }
}
