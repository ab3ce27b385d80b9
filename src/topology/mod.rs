//! Topology: the config file, its validation, and the routing table built
//! from it. The table is immutable; reload builds a new one and swaps it in
//! through [`SharedTopology`]. The one part read from the servers, the
//! object tables' columns ([`columns`]), is shared by every table a running
//! proxy swaps in and refreshed in place.

pub mod bootstrap;
pub mod columns;
pub mod config;
pub mod lines;
pub mod prescan;
pub mod rehome;
pub mod rewrite;
pub mod source;
pub mod tls_files;
pub mod validate;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

pub use config::Config;
pub use validate::{check_address, ConfigError, ConfigErrors};

/// Index of a fleet in [`Topology::fleets`].
pub type FleetId = usize;
/// Index of a distinct backend host in [`Topology::hosts`].
pub type HostId = usize;

/// A backend MySQL server that shardgate connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// `ip:port` or `name:port`, as written in the config.
    pub addr: String,
}

/// One contiguous shard range and the host pair that serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRange {
    /// First shard of the range (inclusive).
    pub first: u32,
    /// Last shard of the range (inclusive).
    pub last: u32,
    /// The master that serves reads and writes for the range.
    pub master: HostId,
    /// The replica kept for failover, if any.
    pub replica: Option<HostId>,
}

/// How shard database names are written, e.g. `db{:05}` → `db03429`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseFormat {
    /// Text before the number (`db`).
    pub prefix: String,
    /// Zero-padded width of the number (5); 0 means no padding (`{}`).
    pub width: usize,
    /// Text after the number (usually empty).
    pub suffix: String,
}

/// A set of hosts holding `shard_count` virtual shards.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// Name from the config (`main`, `mod`).
    pub name: String,
    /// Number of virtual shards; shards are `0..shard_count`.
    pub shard_count: u32,
    /// Database name format for this fleet's shards.
    pub database: DatabaseFormat,
    /// Shards new objects may be placed in (inclusive range), if any.
    pub open: Option<(u32, u32)>,
    /// Host ranges, sorted by `first`, covering `0..shard_count` exactly.
    pub ranges: Vec<HostRange>,
    /// Which bits of the fleet's IDs hold which field.
    pub layout: crate::id::IdLayout,
}

/// What kind of logical table a name refers to, and how its shard is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableKind {
    /// An object table keyed by the 64-bit `id` (composed from `local_id`).
    Object {
        /// Type id stored in bits 45-36 of the table's IDs.
        type_id: u16,
    },
    /// A mapping table; a row lives on the shard of its from-column's ID.
    Mapping {
        /// Column holding the from-ID (`board_id`).
        from_column: String,
    },
    /// A mod-shard table; shard = md5(key) % shard_count.
    ModShard {
        /// Column holding the lookup key (`email`).
        key_column: String,
    },
}

/// A logical table named in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRule {
    /// Table name as clients write it (lower case).
    pub name: String,
    /// Fleet the table lives on.
    pub fleet: FleetId,
    /// How the table's shard is found.
    pub kind: TableKind,
}

/// The complete, validated routing table. Built once per config version.
#[derive(Debug)]
pub struct Topology {
    /// The config it was built from.
    pub config: Config,
    /// Fleets, in config order.
    pub fleets: Vec<Fleet>,
    /// Distinct backend hosts (masters and replicas of every fleet).
    pub hosts: Vec<Host>,
    /// Logical tables by lower-case name.
    pub tables: HashMap<String, TableRule>,
    /// Which table this is among those [`SharedTopology`] has held (1 for
    /// the first, +1 per swap); 0 for one never stored. Sessions compare it
    /// to notice a reload.
    pub generation: u64,
    /// A number no other table of this process has, given when a
    /// [`SharedTopology`] takes the table in (which makes it immutable);
    /// 0 before, and in a clone. The router's plan templates are kept per
    /// identity; 0 has none.
    pub identity: u64,
    /// The object tables' columns as read from the servers (for `SELECT
    /// *`), shared by every table a running proxy swaps in.
    pub columns: Arc<columns::SharedColumns>,
}

/// The routing table currently in force, swapped atomically on reload.
/// Readers take a cheap snapshot with [`SharedTopology::load`]; a statement
/// keeps its snapshot until it finishes.
pub struct SharedTopology {
    current: ArcSwap<Topology>,
    generations: std::sync::atomic::AtomicU64,
}

impl SharedTopology {
    /// Wraps a first topology.
    pub fn new(mut topology: Topology) -> Self {
        topology.generation = 1;
        topology.identity = next_identity();
        Self {
            current: ArcSwap::from_pointee(topology),
            generations: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// A snapshot of the topology in force now.
    pub fn load(&self) -> Arc<Topology> {
        self.current.load_full()
    }

    /// Replaces the topology; statements holding the old snapshot finish on it.
    pub fn store(&self, mut topology: Topology) {
        use std::sync::atomic::Ordering;
        topology.generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        topology.identity = next_identity();
        self.current.store(Arc::new(topology));
    }
}

/// A fresh [`Topology::identity`].
fn next_identity() -> u64 {
    static IDENTITIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    IDENTITIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

impl Clone for Topology {
    /// A copy the caller may change: identity 0, until stored.
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
            fleets: self.fleets.clone(),
            hosts: self.hosts.clone(),
            tables: self.tables.clone(),
            generation: self.generation,
            identity: 0,
            columns: self.columns.clone(),
        }
    }
}

impl Topology {
    /// Reads, parses and validates a config file and builds its routing table.
    /// Every problem found is reported, each with the line it is on.
    pub fn load(path: &std::path::Path) -> Result<Topology, ConfigErrors> {
        let source = path.display().to_string();
        let bytes = prescan::read_bounded(path).map_err(|e| {
            ConfigErrors::single(&source, 0, format!("cannot read the config file: {e}"))
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            ConfigErrors::single(&source, 0, format!("the file is not UTF-8 text: {e}"))
        })?;
        Self::from_yaml_str(&text, &source)
    }

    /// Parses and validates YAML text (`source` names it in error messages).
    pub fn from_yaml_str(text: &str, source: &str) -> Result<Topology, ConfigErrors> {
        let (config, lines) = validate::parse(text, source)?;
        validate::build(config, source, &lines)
    }

    /// Validates a config built in code and builds its routing table
    /// (errors carry line 0).
    pub fn from_config(config: Config, source: &str) -> Result<Topology, ConfigErrors> {
        validate::build(config, source, &lines::LineIndex::default())
    }

    /// Every error on its own line, as `check-config` prints them.
    pub fn describe_errors(errors: &ConfigErrors) -> String {
        errors.to_string()
    }

    /// The logical table with this name (case-insensitive), if configured.
    pub fn table(&self, name: &str) -> Option<&TableRule> {
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            self.tables.get(&name.to_ascii_lowercase())
        } else {
            self.tables.get(name)
        }
    }

    /// The columns of an object table, in their order, if they were read.
    pub fn object_columns(&self, rule: &TableRule) -> Option<Arc<[String]>> {
        let fleet = self.fleets.get(rule.fleet)?;
        self.columns.get(&fleet.name, &rule.name)
    }

    /// How the shard databases differ on an object table's columns, when
    /// they do (its columns are then not given).
    pub fn object_columns_differ(&self, rule: &TableRule) -> Option<String> {
        let fleet = self.fleets.get(rule.fleet)?;
        self.columns.load().differing(&fleet.name, &rule.name)
    }

    /// The fleet with this config name.
    pub fn fleet_by_name(&self, name: &str) -> Option<FleetId> {
        self.fleets.iter().position(|f| f.name == name)
    }

    /// The fleet with this id.
    pub fn fleet(&self, fleet: FleetId) -> Option<&Fleet> {
        self.fleets.get(fleet)
    }

    /// Every distinct master, in config order (fleets, then ranges).
    pub fn masters(&self) -> Vec<HostId> {
        let mut masters = Vec::new();
        for range in self.fleets.iter().flat_map(|fleet| &fleet.ranges) {
            if !masters.contains(&range.master) {
                masters.push(range.master);
            }
        }
        masters
    }

    /// Whether `addr` is the master of some range.
    pub fn is_master(&self, addr: &str) -> bool {
        self.masters()
            .into_iter()
            .any(|host| self.hosts.get(host).is_some_and(|h| h.addr == addr))
    }

    /// The host with this id.
    pub fn host(&self, host: HostId) -> Option<&Host> {
        self.hosts.get(host)
    }

    /// The host range serving `shard` of `fleet`, or `None` if the shard is
    /// outside the fleet's shard count.
    pub fn host_range(&self, fleet: FleetId, shard: u32) -> Option<&HostRange> {
        self.fleets.get(fleet)?.range_of(shard)
    }

    /// The master serving `shard` of `fleet` (binary search over the ranges).
    pub fn master_of(&self, fleet: FleetId, shard: u32) -> Option<HostId> {
        self.host_range(fleet, shard).map(|r| r.master)
    }

    /// Recognises a shard database name (`db03429`, `msdb00012`) of any
    /// fleet, case-insensitively: the fleet and the shard number.
    pub fn parse_database(&self, name: &str) -> Option<(FleetId, u32)> {
        self.fleets.iter().enumerate().find_map(|(id, fleet)| {
            fleet
                .database
                .match_name(name)
                .filter(|&shard| shard < fleet.shard_count)
                .map(|shard| (id, shard))
        })
    }
}

impl Fleet {
    /// The database name of `shard` in this fleet (`db03429`).
    pub fn database_name(&self, shard: u32) -> String {
        self.database.format(shard)
    }

    /// The host range serving `shard`, or `None` past the shard count.
    pub fn range_of(&self, shard: u32) -> Option<&HostRange> {
        if shard >= self.shard_count {
            return None;
        }
        let after = self.ranges.partition_point(|r| r.first <= shard);
        let range = self.ranges.get(after.checked_sub(1)?)?;
        (shard <= range.last).then_some(range)
    }

    /// Whether the fleet's IDs are time-sortable, minted by the server at
    /// INSERT (its object tables store `id` and route like mapping tables
    /// keyed by `id`).
    pub fn mints_ids(&self) -> bool {
        self.layout.kind() == crate::id::LayoutKind::Time
    }

    /// The shards new objects may be placed in, `(first, last)` inclusive:
    /// `open` if set, else every shard.
    pub fn open_range(&self) -> (u32, u32) {
        self.open.unwrap_or((0, self.shard_count.saturating_sub(1)))
    }
}

impl DatabaseFormat {
    /// Parses a format such as `db{:05}` or `msdb{:05}`.
    pub fn parse(spec: &str) -> Option<DatabaseFormat> {
        parse_format(spec).ok()
    }

    /// The name of `shard` (`db03429`).
    pub fn format(&self, shard: u32) -> String {
        format!(
            "{}{:0width$}{}",
            self.prefix,
            shard,
            self.suffix,
            width = self.width
        )
    }

    /// The shard number if `name` is written in this format (case-insensitive).
    /// Only the exact width [`DatabaseFormat::format`] writes is accepted
    /// (`db03429`, not `db3429`), so every name means one shard.
    pub fn match_name(&self, name: &str) -> Option<u32> {
        let (p, s) = (self.prefix.len(), self.suffix.len());
        if name.len() <= p + s {
            return None;
        }
        let prefix = name.get(..p)?;
        let middle = name.get(p..name.len() - s)?;
        let suffix = name.get(name.len() - s..)?;
        if !prefix.eq_ignore_ascii_case(&self.prefix) || !suffix.eq_ignore_ascii_case(&self.suffix)
        {
            return None;
        }
        if middle.len() > 10 || !middle.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let shard = u32::try_from(middle.parse::<u64>().ok()?).ok()?;
        let natural = shard.checked_ilog10().map_or(1, |d| d as usize + 1);
        (middle.len() == natural.max(self.width)).then_some(shard)
    }
}

/// Parses a database format, saying what is wrong with a bad one.
fn parse_format(spec: &str) -> Result<DatabaseFormat, String> {
    let open = spec
        .find('{')
        .ok_or("has no `{...}` placeholder for the shard number; write e.g. `db{:05}`")?;
    let close = spec[open..]
        .find('}')
        .map(|i| open + i)
        .ok_or("has an unclosed `{`")?;
    let (prefix, placeholder, suffix) = (&spec[..open], &spec[open + 1..close], &spec[close + 1..]);
    if suffix.contains(['{', '}']) {
        return Err("has more than one `{...}` placeholder".into());
    }
    let width = match placeholder {
        "" => 0,
        p => {
            let digits = p
                .strip_prefix(":0")
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .ok_or(format!(
                    "has placeholder `{{{p}}}`; use `{{:0N}}` (zero-padded to N digits) or `{{}}`"
                ))?;
            match digits.parse::<usize>() {
                Ok(w) if (1..=10).contains(&w) => w,
                _ => return Err("pads to a width outside 1-10".into()),
            }
        }
    };
    if prefix.is_empty() {
        return Err("must start with a name before the placeholder, e.g. `db{:05}`".into());
    }
    let identifier = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
    };
    if !identifier(prefix) || !identifier(suffix) {
        return Err("may contain only letters, digits, `_` and `$` around the placeholder".into());
    }
    if prefix.ends_with(|c: char| c.is_ascii_digit())
        || suffix.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(
            "must not have a digit right next to the placeholder (names would be ambiguous)".into(),
        );
    }
    Ok(DatabaseFormat {
        prefix: prefix.to_owned(),
        width,
        suffix: suffix.to_owned(),
    })
}

#[cfg(test)]
pub(crate) mod tests;
