//! Engine: executes router plans against the backends and relays answers.
//! Holds what all sessions share: the routing table and the host pools.

mod answer;
pub mod execute;
pub mod failover;
pub mod field_list;
pub mod multi;
pub mod pause;
pub mod prepared;
pub mod relay;
pub mod reload;
pub mod session_state;

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::pool::BackendSettings;
use crate::backend::Backends;
use crate::stats::Stats;
use crate::topology::{SharedTopology, Topology};
use pause::PauseGate;
use reload::ConfigStatus;

pub use execute::write_error;
pub use session_state::{SessionSettings, SessionState};

/// Shared state of a running proxy.
pub struct Engine {
    /// The routing table in force.
    pub topology: SharedTopology,
    /// Connection pools, one per backend host.
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
    pub fn new(topology: Topology, config_path: Option<PathBuf>) -> Self {
        let settings = BackendSettings::from_config(&topology.config.backend);
        let source = config_path
            .as_ref()
            .map_or_else(|| "<none>".to_owned(), |p| p.display().to_string());
        let version = config_path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .map_or_else(String::new, |text| reload::version_of(&text));
        let pauses = PauseGate::new(Duration::from_millis(topology.config.pause.timeout_ms));
        Self {
            topology: SharedTopology::new(topology),
            backends: Backends::new(settings),
            config_path,
            config_status: ConfigStatus::new(source, version),
            pauses,
            stats: Stats::new(),
        }
    }
}
