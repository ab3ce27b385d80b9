//! Engine: executes router plans against the backends and relays answers.
//! Holds what all sessions share: the routing table and the host pools.

mod answer;
mod checkout;
pub mod execute;
pub mod failover;
mod failure;
pub mod field_list;
mod lex_state;
mod merge;
pub mod multi;
pub mod pause;
pub mod prepared;
pub mod relay;
pub mod reload;
pub mod session_state;
mod transaction;
mod venue;

use std::path::PathBuf;

use crate::backend::pool::BackendSettings;
use crate::backend::Backends;
use crate::stats::Stats;
use crate::topology::{ConfigErrors, SharedTopology, Topology};
use pause::PauseGate;
use reload::ConfigStatus;

pub use failure::write_error;
pub use session_state::{SessionSettings, SessionState};

/// Shared state of a running proxy.
pub struct Engine {
    /// The routing table in force.
    pub topology: SharedTopology,
    /// Connection pools and what is known about each backend host.
    pub backends: Backends,
    /// The config file the topology came from, if any.
    pub config_path: Option<PathBuf>,
    /// The config in force and the last reload attempt (`SHOW CONFIG`).
    pub config_status: ConfigStatus,
    /// Shards paused for a cutover, and statements running per shard.
    pub pauses: PauseGate,
    /// Statement counts, errors and latencies (`SHOW STATS`, `/metrics`).
    pub stats: Stats,
}

impl Engine {
    /// An engine for `topology`, with pools sized from its backend config.
    /// The version shown for `config_path` is the hash of the file as it
    /// is now; [`Engine::from_file`] hashes the very bytes it parses.
    pub fn new(topology: Topology, config_path: Option<PathBuf>) -> Self {
        let version = config_path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .map_or_else(String::new, |text| reload::version_of(&text));
        Self::with_version(topology, config_path, version)
    }

    /// An engine for the config file at `path`, read once: the routing
    /// table and the version in force come from the same bytes.
    pub fn from_file(path: PathBuf) -> Result<Self, ConfigErrors> {
        let source = path.display().to_string();
        let bytes = std::fs::read(&path).map_err(|e| {
            ConfigErrors::single(&source, 0, format!("cannot read the config file: {e}"))
        })?;
        let topology = reload::parse_config(&bytes, &source)?;
        Ok(Self::with_version(
            topology,
            Some(path),
            reload::version_of(&bytes),
        ))
    }

    fn with_version(topology: Topology, config_path: Option<PathBuf>, version: String) -> Self {
        let settings = BackendSettings::from_config(&topology.config.backend);
        let source = config_path
            .as_ref()
            .map_or_else(|| "<none>".to_owned(), |p| p.display().to_string());
        let pauses = PauseGate::new();
        let backends = Backends::new(settings);
        let hosts: Vec<&str> = topology.hosts.iter().map(|h| h.addr.as_str()).collect();
        backends.add_hosts(&hosts);
        Self {
            topology: SharedTopology::new(topology),
            backends,
            config_path,
            config_status: ConfigStatus::new(source, version),
            pauses,
            stats: Stats::new(),
        }
    }
}
