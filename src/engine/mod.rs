//! Engine: executes router plans against the backends and relays answers.
//! Holds what all sessions share: the routing table and the host pools.

mod answer;
pub mod execute;
pub mod field_list;
pub mod multi;
pub mod prepared;
pub mod relay;
pub mod session_state;

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::pool::BackendSettings;
use crate::backend::Backends;
use crate::topology::{SharedTopology, Topology};

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
}

impl Engine {
    /// An engine for `topology`, with pools sized from its backend config.
    pub fn new(topology: Topology, config_path: Option<PathBuf>) -> Self {
        let backend = &topology.config.backend;
        let settings = BackendSettings {
            user: backend.user.clone(),
            password: backend.password.clone(),
            max_per_host: backend.pool_max_per_host as usize,
            connect_timeout: Duration::from_millis(backend.connect_timeout_ms),
            checkout_timeout: Duration::from_millis(backend.checkout_timeout_ms),
        };
        Self {
            topology: SharedTopology::new(topology),
            backends: Backends::new(settings),
            config_path,
        }
    }
}
