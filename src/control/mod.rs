//! The control plane: what changes the running proxy's routing rather than
//! serving statements. Hot reload of the config file and its watchers
//! ([`reload`]), `PROMOTE REPLICA` and automatic failover on the health
//! checker's host events ([`failover`]), and the PAUSE/RESUME SHARDS
//! operations on the statement path's pause gate ([`pause`]).
//!
//! [`Control`] holds what the control plane adds to the engine: the config
//! file and the config status. The statement path in `engine` never calls
//! into it.

pub mod failover;
pub mod pause;
pub mod reload;
pub mod status;

use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::health::Checked;
use crate::backend::Backends;
use crate::engine::Engine;
use crate::topology::{ConfigErrors, SharedTopology, Topology};
use status::{parse_config, version_of, ConfigStatus};

/// A running proxy's control plane: the engine it changes, the config file
/// the routing table came from, and the config status (`SHOW CONFIG`),
/// whose lock keeps reloads and promotions from interleaving.
pub struct Control {
    /// The engine whose routing table, pools and pause gate the control
    /// plane changes.
    pub engine: Arc<Engine>,
    /// The config file the topology came from, if any.
    pub config_path: Option<PathBuf>,
    /// The config in force and the last reload attempt (`SHOW CONFIG`).
    pub config_status: ConfigStatus,
}

impl Control {
    /// A control plane and its engine for `topology`. The version shown for
    /// `config_path` is the hash of the file as it is now;
    /// [`Control::from_file`] hashes the very bytes it parses.
    pub fn new(topology: Topology, config_path: Option<PathBuf>) -> Self {
        let version = config_path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .map_or_else(String::new, |text| version_of(&text));
        Self::with_version(topology, config_path, version)
    }

    /// A control plane and its engine for the config file at `path`, read
    /// once: the routing table and the version in force come from the
    /// same bytes.
    pub fn from_file(path: PathBuf) -> Result<Self, ConfigErrors> {
        let source = path.display().to_string();
        let bytes = std::fs::read(&path).map_err(|e| {
            ConfigErrors::single(&source, 0, format!("cannot read the config file: {e}"))
        })?;
        let topology = parse_config(&bytes, &source)?;
        Ok(Self::with_version(topology, Some(path), version_of(&bytes)))
    }

    fn with_version(topology: Topology, config_path: Option<PathBuf>, version: String) -> Self {
        let source = config_path
            .as_ref()
            .map_or_else(|| "<none>".to_owned(), |p| p.display().to_string());
        Self {
            engine: Arc::new(Engine::new(topology)),
            config_path,
            config_status: ConfigStatus::new(source, version),
        }
    }
}

impl Checked for Engine {
    fn topology(&self) -> &SharedTopology {
        &self.topology
    }

    fn backends(&self) -> &Backends {
        &self.backends
    }
}
