//! The control plane: what changes the running proxy's routing rather than
//! serving statements. Hot reload of the config file and its watchers
//! ([`reload`]), `PROMOTE REPLICA` and automatic failover on the health
//! checker's host events ([`failover`]), and the PAUSE/RESUME SHARDS
//! operations on the statement path's pause gate ([`pause`]).
//!
//! [`Engine::reload`](crate::engine::Engine::reload) and
//! [`Engine::promote_replica`](crate::engine::Engine::promote_replica) are
//! defined here, on the engine whose shared state (routing table, pools,
//! config status, pause gate) they change; the statement path in `engine`
//! never calls them.

pub mod failover;
pub mod pause;
pub mod reload;

use crate::backend::health::Checked;
use crate::backend::Backends;
use crate::engine::Engine;
use crate::topology::SharedTopology;

impl Checked for Engine {
    fn topology(&self) -> &SharedTopology {
        &self.topology
    }

    fn backends(&self) -> &Backends {
        &self.backends
    }
}
