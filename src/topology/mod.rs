//! Topology: the config file, its validation, and the routing table built
//! from it. The table is immutable; reload builds a new one and swaps it in
//! through [`SharedTopology`].

pub mod config;
pub mod validate;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

pub use config::Config;
pub use validate::{ConfigError, ConfigErrors};

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
    /// Zero-padded width of the number (5).
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
#[derive(Debug, Clone)]
pub struct Topology {
    /// The config it was built from.
    pub config: Config,
    /// Fleets, in config order.
    pub fleets: Vec<Fleet>,
    /// Distinct backend hosts (masters and replicas of every fleet).
    pub hosts: Vec<Host>,
    /// Logical tables by lower-case name.
    pub tables: HashMap<String, TableRule>,
}

/// The routing table currently in force, swapped atomically on reload.
/// Readers take a cheap snapshot with [`SharedTopology::load`]; a statement
/// keeps its snapshot until it finishes.
pub struct SharedTopology {
    current: ArcSwap<Topology>,
}

impl SharedTopology {
    /// Wraps a first topology.
    pub fn new(topology: Topology) -> Self {
        Self {
            current: ArcSwap::from_pointee(topology),
        }
    }

    /// A snapshot of the topology in force now.
    pub fn load(&self) -> Arc<Topology> {
        self.current.load_full()
    }

    /// Replaces the topology; statements holding the old snapshot finish on it.
    pub fn store(&self, topology: Topology) {
        self.current.store(Arc::new(topology));
    }
}

impl Topology {
    /// Reads, parses and validates a config file and builds its routing table.
    /// Every problem found is reported, each with the line it is on.
    pub fn load(path: &std::path::Path) -> Result<Topology, ConfigErrors> {
        todo!("{path:?}")
    }

    /// Parses and validates YAML text (`source` names it in error messages).
    pub fn from_yaml_str(text: &str, source: &str) -> Result<Topology, ConfigErrors> {
        todo!("{text}{source}")
    }

    /// The logical table with this name (case-insensitive), if configured.
    pub fn table(&self, name: &str) -> Option<&TableRule> {
        todo!("{name}")
    }

    /// The fleet with this config name.
    pub fn fleet_by_name(&self, name: &str) -> Option<FleetId> {
        todo!("{name}")
    }

    /// The host range serving `shard` of `fleet`, or `None` if the shard is
    /// outside the fleet's shard count.
    pub fn host_range(&self, fleet: FleetId, shard: u32) -> Option<&HostRange> {
        todo!("{fleet}{shard}")
    }

    /// The master serving `shard` of `fleet` (binary search over the ranges).
    pub fn master_of(&self, fleet: FleetId, shard: u32) -> Option<HostId> {
        todo!("{fleet}{shard}")
    }

    /// Recognises a shard database name (`db03429`, `msdb00012`) of any
    /// fleet, case-insensitively: the fleet and the shard number.
    pub fn parse_database(&self, name: &str) -> Option<(FleetId, u32)> {
        todo!("{name}")
    }
}

impl Fleet {
    /// The database name of `shard` in this fleet (`db03429`).
    pub fn database_name(&self, shard: u32) -> String {
        self.database.format(shard)
    }
}

impl DatabaseFormat {
    /// Parses a format such as `db{:05}` or `msdb{:05}`.
    pub fn parse(spec: &str) -> Option<DatabaseFormat> {
        todo!("{spec}")
    }

    /// The name of `shard` (`db03429`).
    pub fn format(&self, shard: u32) -> String {
        todo!("{shard}")
    }

    /// The shard number if `name` is written in this format (case-insensitive).
    pub fn match_name(&self, name: &str) -> Option<u32> {
        todo!("{name}")
    }
}
