//! Cutover pause: `PAUSE SHARDS a-b` makes new statements for those shards
//! wait (bounded) while statements and transactions already running on them
//! finish; `RESUME SHARDS a-b` lets the waiting statements go, routed on the
//! topology in force at that moment.

use std::time::Duration;

/// The shards paused now, and the statements running on each shard.
#[derive(Debug)]
pub struct PauseGate {
    wait_timeout: Duration,
}

impl PauseGate {
    /// A gate with nothing paused; waiting statements give up after
    /// `wait_timeout`.
    pub fn new(wait_timeout: Duration) -> Self {
        Self { wait_timeout }
    }

    /// How long a statement for a paused shard waits.
    pub fn wait_timeout(&self) -> Duration {
        self.wait_timeout
    }
}
