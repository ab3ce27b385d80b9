//! The control plane: what changes the running proxy's routing rather than
//! serving statements. Hot reload of the config file and its watchers
//! ([`reload`]), `PROMOTE REPLICA` and automatic failover on the health
//! checker's host events ([`failover`]), the PAUSE/RESUME SHARDS
//! operations on the statement path's pause gate ([`pause`]), the
//! cutover of `MOVE SHARDS` ([`cutover`]) and the phase driver of a shard
//! split ([`split`]).
//!
//! [`Control`] holds what the control plane adds to the engine: the config
//! source (a file, or a znode with its ZooKeeper session: [`zookeeper`]),
//! the config status and this process's identity ([`process`]). The
//! statement path in `engine` never calls into it.

pub mod cutover;
pub mod failover;
pub mod pause;
pub mod process;
pub mod readiness;
pub mod reload;
pub mod replica;
pub mod shutdown;
pub mod split;
pub mod status;
pub mod zookeeper;

use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::health::Checked;
use crate::backend::Backends;
use crate::engine::Engine;
use crate::topology::source::ZkLocation;
use crate::topology::{ConfigErrors, SharedTopology, Topology};
use process::Process;
use status::{build_config, version_of, ConfigStatus};
use zookeeper::{ZkError, ZooKeeper};

/// A running proxy's control plane: the engine it changes, the config file
/// or znode the routing table came from, the config status (`SHOW
/// CONFIG`), whose lock keeps reloads and promotions from interleaving,
/// and this process's id and listen addresses.
pub struct Control {
    /// The engine whose routing table, pools and pause gate the control
    /// plane changes.
    pub engine: Arc<Engine>,
    /// The config file the topology came from, if any.
    pub config_path: Option<PathBuf>,
    /// The config in force and the last reload attempt (`SHOW CONFIG`).
    pub config_status: ConfigStatus,
    /// This process: its registry id and the listen addresses it lays over
    /// every document it loads.
    pub process: Process,
    /// The ZooKeeper session of a proxy whose config is a znode.
    pub zookeeper: Option<Arc<ZooKeeper>>,
    /// The fleet-wide pause records this proxy applied to its gate.
    pub followed: pause::Followed,
    /// The splits `SPLIT SHARDS` started on this proxy (`SHOW SPLITS`).
    pub splits: split::Splits,
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
        Self::from_file_as(path, Process::default())
    }

    /// [`Control::from_file`] for `process`, whose listen addresses replace
    /// the file's.
    pub fn from_file_as(path: PathBuf, process: Process) -> Result<Self, ConfigErrors> {
        let source = path.display().to_string();
        let bytes = crate::topology::prescan::read_bounded(&path).map_err(|e| {
            ConfigErrors::single(&source, 0, format!("cannot read the config file: {e}"))
        })?;
        let topology = build_config(&bytes, &source, &process.overrides)?;
        let mut control = Self::with_version(topology, Some(path), version_of(&bytes));
        control.process = process;
        Ok(control)
    }

    /// A control plane whose config is the document in the znode at
    /// `location`: a session is opened (in the current runtime), the
    /// document read and validated (refused with every problem),
    /// `process` registered under it (refused if its id is taken), and the
    /// fleet-wide pauses in force applied to the gate and acked.
    pub async fn from_zookeeper(location: ZkLocation, process: Process) -> Result<Self, ZkError> {
        let zookeeper = ZooKeeper::open(location).await?;
        let started = Self::start_on(&zookeeper, process).await;
        if started.is_err() {
            zookeeper.close().await;
        }
        let mut control = started?;
        let zookeeper = Arc::new(zookeeper);
        control.zookeeper = Some(Arc::clone(&zookeeper));
        if let Err(e) = pause::apply_found(&control).await {
            zookeeper.close().await;
            return Err(e);
        }
        // A push that landed between the first read and the registration
        // did not wait for this proxy (it was not registered yet): read the
        // document again now that it is, before the client port opens.
        if let Err(e) = control
            .reload(status::ReloadTrigger::ZooKeeperSession)
            .await
        {
            tracing::warn!("the document read again after registering was refused: {e}");
        }
        Ok(control)
    }

    async fn start_on(zookeeper: &ZooKeeper, process: Process) -> Result<Self, ZkError> {
        let (bytes, znode_version, openness) = zookeeper.fetch(process.allow_open_acl).await?;
        let path = &zookeeper.location.path;
        if openness.writable {
            tracing::warn!(
                "the config znode {path} is writable by anyone who can reach ZooKeeper; running on it \
                 because --zk-allow-open-acl was given"
            );
        } else if openness.readable {
            tracing::warn!("{}", zookeeper::acl::readable_document_warning(path));
        }
        let source = zookeeper.location.to_string();
        let version = version_of(&bytes);
        let overrides = process.overrides.clone();
        let name = source.clone();
        let topology = tokio::task::spawn_blocking(move || build_config(&bytes, &name, &overrides))
            .await
            .map_err(|e| ZkError::Invalid {
                source_name: source.clone(),
                errors: ConfigErrors::single(&source, 0, format!("the parsing task failed: {e}")),
            })?
            .map_err(|errors| ZkError::Invalid {
                source_name: source.clone(),
                errors,
            })?;
        zookeeper
            .register(
                process.entry(version.clone(), Some(znode_version)),
                process.takeover,
            )
            .await?;
        let mut control = Self::with_version(topology, None, version.clone());
        control.config_status = ConfigStatus::new(source, version);
        control.config_status.set_znode_version(Some(znode_version));
        control.process = process;
        Ok(control)
    }

    fn with_version(topology: Topology, config_path: Option<PathBuf>, version: String) -> Self {
        let source = config_path
            .as_ref()
            .map_or_else(|| "<none>".to_owned(), |p| p.display().to_string());
        Self {
            engine: Arc::new(Engine::new(topology)),
            config_path,
            config_status: ConfigStatus::new(source, version),
            process: Process::default(),
            zookeeper: None,
            followed: pause::Followed::default(),
            splits: split::Splits::default(),
        }
    }

    /// Writes this proxy's registry entry again (addresses, version in
    /// force); nothing for a file-sourced proxy.
    pub fn publish_entry(&self) {
        if let Some(zookeeper) = &self.zookeeper {
            let status = self.config_status.snapshot();
            zookeeper.publish(self.process.entry(status.version, status.znode_version));
        }
    }

    /// [`Control::publish_entry`], written before it returns.
    pub async fn publish_entry_now(&self) {
        if let Some(zookeeper) = &self.zookeeper {
            let status = self.config_status.snapshot();
            zookeeper
                .publish_now(self.process.entry(status.version, status.znode_version))
                .await;
        }
    }

    /// Leaves the fleet: deletes this proxy's registry entry and closes its
    /// ZooKeeper session (nothing for a file-sourced proxy).
    pub async fn shutdown(&self) {
        if let Some(zookeeper) = &self.zookeeper {
            zookeeper.close().await;
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
