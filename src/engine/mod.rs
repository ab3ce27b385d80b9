//! Engine: executes router plans against the backends and relays answers.
//! Holds what all sessions share: the routing table and the host pools.

mod answer;
mod checkout;
pub mod diagnostics_copy;
mod direct;
pub mod execute;
mod failure;
pub mod fence;
pub mod field_list;
mod kill;
mod lex_state;
pub mod local_infile;
pub mod long_values;
mod merge;
pub mod multi;
mod observe;
pub mod pause;
pub mod prepared;
mod proxy_info;
pub mod relay;
mod server_info;
pub mod session_state;
pub mod sessions;
mod transaction;
pub mod transaction_state;
mod venue;

use crate::backend::pool::BackendSettings;
use crate::backend::{Backends, Dialer, TcpDialer};
use crate::stats::Stats;
use crate::topology::{SharedTopology, Topology};
use fence::Fence;
use pause::PauseGate;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

pub use failure::write_error;
pub use server_info::{proxy_version, ServerInfo};
pub use session_state::{SessionSettings, SessionState};
pub use sessions::{Registration, SessionEntry, Sessions};

/// Shared state of a running proxy.
pub struct Engine {
    /// The routing table in force.
    pub topology: SharedTopology,
    /// Connection pools and what is known about each backend host.
    pub backends: Backends,
    /// Shards paused for a cutover, and statements running per shard.
    pub pauses: PauseGate,
    /// Raised while this proxy cannot prove it holds its ZooKeeper session:
    /// writes and locking reads are refused.
    pub fence: Fence,
    /// Statement counts, errors and latencies (`SHOW STATS`, `/metrics`).
    pub stats: Stats,
    /// The client sessions, by id (`SHOW PROCESSLIST`, `KILL`).
    pub sessions: Arc<Sessions>,
    /// Client connections open now, counted against the client cap
    /// (`limits.max_client_connections`) from their accept, or their
    /// arrival from a takeover, to their close.
    pub clients: crate::net::ConnectionCount,
    /// The version and idle timeouts presented to clients, once read.
    server: OnceLock<ServerInfo>,
    /// When the proxy started (the `Uptime` of COM_STATISTICS).
    pub started: Instant,
    /// Bytes all multi-shard reads hold now (`limits.max_merge_bytes_total`).
    pub(crate) merge_bytes: Arc<std::sync::atomic::AtomicU64>,
}

impl Engine {
    /// An engine for `topology`, with pools sized from its backend config.
    pub fn new(topology: Topology) -> Self {
        Self::with_dialer(topology, Arc::new(TcpDialer))
    }

    /// An engine whose backend connections reach their hosts through
    /// `dialer` ([`Engine::new`]: TCP; engine unit tests: scripted fake
    /// hosts).
    pub fn with_dialer(topology: Topology, dialer: Arc<dyn Dialer>) -> Self {
        let settings = BackendSettings::from_config(&topology.config.backend);
        let backends = Backends::with_dialer(settings, dialer);
        let hosts: Vec<&str> = topology.hosts.iter().map(|h| h.addr.as_str()).collect();
        backends.add_hosts(&hosts);
        Self {
            topology: SharedTopology::new(topology),
            backends,
            pauses: PauseGate::new(),
            fence: Fence::default(),
            stats: Stats::new(),
            sessions: Arc::default(),
            clients: crate::net::ConnectionCount::default(),
            server: OnceLock::new(),
            started: Instant::now(),
            merge_bytes: Arc::default(),
        }
    }
}

#[cfg(test)]
mod tests;
