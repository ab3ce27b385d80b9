//! The pure parts of the row compare: the SQL of a chunk (its key range,
//! its checksum, its per-row hashes), the diff of two key -> hash lists and
//! the pacing of `--max-rows-per-second`. No sockets.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use crate::ops::quote_ident;

/// One table to compare: where it is, its primary key and every column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    /// Shard database.
    pub database: String,
    /// Table name.
    pub table: String,
    /// Primary key columns in key order (empty: no primary key).
    pub key: Vec<String>,
    /// Every column in ordinal order.
    pub columns: Vec<String>,
}

impl TableShape {
    /// `` `db`.`table` ``.
    pub fn qualified(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.database),
            quote_ident(&self.table)
        )
    }

    fn key_list(&self) -> String {
        self.key
            .iter()
            .map(|c| quote_ident(c))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The key as a row constructor, `(`a`, `b`)` (a bare column for one).
    fn key_tuple(&self) -> String {
        if self.key.len() == 1 {
            quote_ident(&self.key[0])
        } else {
            format!("({})", self.key_list())
        }
    }

    fn placeholders(&self) -> String {
        if self.key.len() == 1 {
            "?".to_owned()
        } else {
            format!("({})", vec!["?"; self.key.len()].join(", "))
        }
    }

    /// An MD5 (32 hex digits) of every column of a row, NULL-safe: each
    /// column is hashed on its own (a NULL becomes `-`, which no MD5 is), so
    /// neither a NULL nor a separator inside a value can make two different
    /// rows hash alike.
    pub fn row_hash(&self) -> String {
        let parts: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("COALESCE(MD5({}), '-')", quote_ident(c)))
            .collect();
        format!("MD5(CONCAT_WS('#', {}))", parts.join(", "))
    }

    /// The `WHERE` of a chunk: keys above `lo` (exclusive) up to `hi`
    /// (inclusive); an absent bound is open. Its parameters are the
    /// bounds' values, `lo` first.
    pub fn range_filter(&self, range: &ChunkBounds) -> String {
        let mut parts = Vec::new();
        if range.lo.is_some() {
            parts.push(format!("{} > {}", self.key_tuple(), self.placeholders()));
        }
        if range.hi.is_some() {
            parts.push(format!("{} <= {}", self.key_tuple(), self.placeholders()));
        }
        if parts.is_empty() {
            "1".to_owned()
        } else {
            parts.join(" AND ")
        }
    }

    /// The upper bound of the chunk that starts above `from.lo` and holds
    /// `rows` keys: the `rows`-th key above it, at most `from.hi` (the
    /// table's last key when its compare began, so rows inserted meanwhile
    /// cannot keep the chunking going). No row: the chunk is the rest of the
    /// table. Parameters: `from`'s values.
    pub fn boundary_sql(&self, from: &ChunkBounds, rows: usize) -> String {
        format!(
            "SELECT {} FROM {} WHERE {} ORDER BY {} LIMIT 1 OFFSET {}",
            self.key_list(),
            self.qualified(),
            self.range_filter(from),
            self.key_list(),
            rows.max(1) - 1
        )
    }

    /// The table's last key.
    pub fn last_key_sql(&self) -> String {
        let descending: Vec<String> = self
            .key
            .iter()
            .map(|c| format!("{} DESC", quote_ident(c)))
            .collect();
        format!(
            "SELECT {} FROM {} ORDER BY {} LIMIT 1",
            self.key_list(),
            self.qualified(),
            descending.join(", ")
        )
    }

    /// Row count and a 128-bit XOR of the row hashes of one chunk (two
    /// 64-bit halves): equal on both sides when the rows are, whatever
    /// order the servers read them in.
    pub fn checksum_sql(&self, range: &ChunkBounds) -> String {
        format!(
            "SELECT COUNT(*), \
             COALESCE(BIT_XOR(CAST(CONV(SUBSTRING(h, 1, 16), 16, 10) AS UNSIGNED)), 0), \
             COALESCE(BIT_XOR(CAST(CONV(SUBSTRING(h, 17, 16), 16, 10) AS UNSIGNED)), 0) \
             FROM (SELECT {} AS h FROM {} WHERE {}) AS chunk",
            self.row_hash(),
            self.qualified(),
            self.range_filter(range)
        )
    }

    /// Every key of one chunk with its row hash, in key order.
    pub fn rows_sql(&self, range: &ChunkBounds) -> String {
        format!(
            "SELECT {}, {} FROM {} WHERE {} ORDER BY {}",
            self.key_list(),
            self.row_hash(),
            self.qualified(),
            self.range_filter(range),
            self.key_list()
        )
    }
}

/// A chunk's key range: above `lo` (exclusive), up to `hi` (inclusive);
/// `None` is open. The values are the primary key's, in key order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkBounds {
    /// Exclusive lower bound.
    pub lo: Option<Vec<mysql_async::Value>>,
    /// Inclusive upper bound.
    pub hi: Option<Vec<mysql_async::Value>>,
}

impl ChunkBounds {
    /// The statement parameters of [`TableShape::range_filter`].
    pub fn params(&self) -> Vec<mysql_async::Value> {
        self.lo
            .iter()
            .chain(self.hi.iter())
            .flat_map(|v| v.iter().cloned())
            .collect()
    }
}

impl fmt::Display for ChunkBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.lo {
            Some(lo) => write!(f, "({}", format_key(lo))?,
            None => write!(f, "(-inf")?,
        }
        match &self.hi {
            Some(hi) => write!(f, ", {}]", format_key(hi)),
            None => write!(f, ", +inf)"),
        }
    }
}

/// A key as a person reads it: `17`, `'abc'`, `(3, 17)` for two columns.
pub fn format_key(values: &[mysql_async::Value]) -> String {
    let one = |v: &mysql_async::Value| match v {
        mysql_async::Value::Bytes(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => format!("'{}'", text.replace('\'', "''")),
            Err(_) => v.as_sql(false),
        },
        other => other.as_sql(false),
    };
    if values.len() == 1 {
        one(&values[0])
    } else {
        format!(
            "({})",
            values.iter().map(one).collect::<Vec<_>>().join(", ")
        )
    }
}

/// The row count and 128-bit hash XOR of a chunk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checksum {
    /// Rows in the chunk.
    pub rows: u64,
    /// XOR of the first 64 bits of every row hash.
    pub high: u64,
    /// XOR of the last 64 bits of every row hash.
    pub low: u64,
}

/// How the rows of one chunk differ (keys as [`format_key`] writes them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowsDiff {
    /// On the source, not on the target.
    pub missing_on_target: Vec<String>,
    /// On the target, not on the source.
    pub extra_on_target: Vec<String>,
    /// On both, with different contents.
    pub changed: Vec<String>,
}

impl RowsDiff {
    /// No key differs.
    pub fn is_empty(&self) -> bool {
        self.missing_on_target.is_empty()
            && self.extra_on_target.is_empty()
            && self.changed.is_empty()
    }

    /// How many keys differ.
    pub fn len(&self) -> usize {
        self.missing_on_target.len() + self.extra_on_target.len() + self.changed.len()
    }
}

/// Keys listed per kind in a report line; the rest are counted.
pub const KEYS_LISTED: usize = 20;

fn listed(keys: &[String]) -> String {
    let shown: Vec<&str> = keys.iter().take(KEYS_LISTED).map(String::as_str).collect();
    let more = keys.len().saturating_sub(KEYS_LISTED);
    if more == 0 {
        shown.join(" ")
    } else {
        format!("{} ... and {more} more", shown.join(" "))
    }
}

impl fmt::Display for RowsDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (keys, what) in [
            (&self.missing_on_target, "missing on target"),
            (&self.extra_on_target, "extra on target"),
            (&self.changed, "changed"),
        ] {
            if !keys.is_empty() {
                parts.push(format!("{} {what}: {}", keys.len(), listed(keys)));
            }
        }
        write!(f, "{}", parts.join("; "))
    }
}

/// The keys whose rows differ between two `(key, row hash)` lists: missing
/// on the target, extra on it, or changed. Keys keep the order of their
/// list (the source's first).
pub fn diff_rows(source: &[(String, String)], target: &[(String, String)]) -> RowsDiff {
    let on_target: HashMap<&str, &str> = target
        .iter()
        .map(|(k, h)| (k.as_str(), h.as_str()))
        .collect();
    let on_source: HashMap<&str, &str> = source
        .iter()
        .map(|(k, h)| (k.as_str(), h.as_str()))
        .collect();
    let mut diff = RowsDiff::default();
    for (key, hash) in source {
        match on_target.get(key.as_str()) {
            None => diff.missing_on_target.push(key.clone()),
            Some(other) if other != hash => diff.changed.push(key.clone()),
            Some(_) => {}
        }
    }
    for (key, _) in target {
        if !on_source.contains_key(key.as_str()) {
            diff.extra_on_target.push(key.clone());
        }
    }
    diff
}

/// How long to wait before reading more so that `rows` read in `elapsed`
/// stay at or under `max_per_second` (0: no limit).
pub fn pace(rows: u64, elapsed: Duration, max_per_second: u64) -> Duration {
    if max_per_second == 0 {
        return Duration::ZERO;
    }
    let due = Duration::from_secs_f64(rows as f64 / max_per_second as f64);
    due.saturating_sub(elapsed)
}

/// Picks the GTID position out of `SHOW STATUS LIKE 'binlog_snapshot_%'`
/// rows: the `(file, offset)` of the snapshot, or `None` when the binlog
/// is off (empty file).
pub fn snapshot_coordinates(status: &[(String, String)]) -> Option<(String, u64)> {
    let value = |name: &str| {
        status
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let file = value("Binlog_snapshot_file").filter(|f| !f.is_empty())?;
    let offset = value("Binlog_snapshot_position")?.parse().ok()?;
    Some((file.to_owned(), offset))
}
