//! The cutover sequence that changes which master serves shards while
//! proxies run: `MOVE SHARDS` (a range to a replica of its master) and
//! `PROMOTE REPLICA` on a ZooKeeper-sourced proxy share it, and so does
//! `shardgate fleet move`, which runs it from the command line.
//!
//! In order, each step timed and reported: read the document (the znode
//! and its version, or the config file in force) and check the change →
//! pause the shards (fleet-wide through ZooKeeper, every registered proxy
//! acknowledging, or the proxy's own gate for a config file) → read
//! `@@gtid_binlog_pos` on the old master → `MASTER_GTID_WAIT` on the new
//! one → write the new map (a version-checked push of the edited document,
//! so a concurrent writer makes it fail; or the atomic rewrite of the file,
//! then its routing table swapped in) → wait until every live proxy runs
//! it → resume. A failure before the write resumes and changes nothing.
//! Once the map is written, a live proxy that does not run it in time
//! leaves the shards paused: resumed on the old map, it would write to the
//! old master.
//!
//! Here: the errors and the shard ranges; `report` the timed steps,
//! `coordinate` the two ways to pause and write (ZooKeeper or the file),
//! `interrupt` `shardgate fleet move` stopped by a signal,
//! `sequence` the steps in order, `moves` `MOVE SHARDS` itself.

mod coordinate;
mod interrupt;
mod moves;
mod report;
mod sequence;

use std::fmt;

use crate::control::replica::CatchUpError;
use crate::control::zookeeper::ZkError;
use crate::topology::rewrite::RewriteError;

pub use coordinate::{Base, Coordinator, FleetSide};
pub use interrupt::{cli_requester, fleet_move_until, FleetMoveError};
pub use moves::{fleet_move, MoveRequest};
pub use report::{CutoverReport, Progress, Step, StepEvent};
pub use sequence::{run, Plan};

/// Shards `first..=last` of one fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// The fleet.
    pub fleet: String,
    /// First shard.
    pub first: u32,
    /// Last shard.
    pub last: u32,
}

impl Range {
    /// The range as `RESUME SHARDS` takes it for a cutover's pause:
    /// `1024-2047 IN main FORCE`.
    pub fn command(&self) -> String {
        format!("{}-{} IN {} FORCE", self.first, self.last, self.fleet)
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}-{}", self.fleet, self.first, self.last)
    }
}

fn list(ranges: &[Range], show: impl Fn(&Range) -> String, separator: &str) -> String {
    ranges.iter().map(show).collect::<Vec<_>>().join(separator)
}

/// Why a cutover was refused or stopped. Unless the message says
/// otherwise, nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum CutoverError {
    /// Arguments that do not fit the config (fleet, range).
    #[error("{0}; nothing was changed")]
    Argument(String),
    /// The config edit is not possible.
    #[error("{0}; nothing was changed")]
    Edit(#[from] RewriteError),
    /// A host does not answer.
    #[error("{role} {addr} does not answer ({reason}); nothing was changed")]
    Unreachable {
        /// `source` or `target`.
        role: &'static str,
        /// The host.
        addr: String,
        /// The connect or ping error.
        reason: String,
    },
    /// The target is not a running GTID replica of the source.
    #[error(
        "target {target} does not replicate the source {master}: {why}; nothing was changed. \
         Make it a GTID replica of {master} (CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos; START SLAVE), \
         let it catch up, then move again"
    )]
    NotReplicating {
        /// The new master.
        target: String,
        /// The current master.
        master: String,
        /// What is wrong.
        why: String,
    },
    /// The document or the registry could not be read.
    #[error("{0}; nothing was changed")]
    ZooKeeper(#[from] ZkError),
    /// The document (znode or config file) cannot be read, or is not the
    /// one in force.
    #[error("{0}; nothing was changed")]
    Document(String),
    /// The shards could not be paused.
    #[error("cannot pause shards {ranges}: {reason}; nothing was changed")]
    Pause {
        /// The ranges.
        ranges: String,
        /// Why.
        reason: String,
    },
    /// The new master did not catch up, or a statement on it failed.
    #[error("{0}; the shards were resumed and nothing was changed")]
    CatchUp(#[from] CatchUpError),
    /// Stopping replication on the new master failed.
    #[error(
        "{host}: {what} failed: {reason}; the shards were resumed and the shard map was not changed{}",
        if *stopped { " (replication on it WAS already stopped)" } else { "" }
    )]
    StopReplication {
        /// The new master.
        host: String,
        /// The statement.
        what: String,
        /// The error.
        reason: String,
        /// Whether replication was stopped already.
        stopped: bool,
    },
    /// The new map could not be written.
    #[error(
        "the new shard map was not written: {reason}; the shards were resumed and nothing was changed{}",
        if *replication_stopped { " (but replication on the new master WAS stopped)" } else { "" }
    )]
    Write {
        /// Why (a concurrent writer, an invalid document, ...).
        reason: String,
        /// Whether replication on the new master was stopped before.
        replication_stopped: bool,
    },
    /// The push's answer was lost and the document could not be read back:
    /// the new map may be in force, so the shards stay paused.
    #[error(
        "{reason}; shards {ranges} STAY PAUSED on every proxy. Check which map is in force \
         (`shardgate config get`, and SHOW PROXIES for the version each proxy runs); once every live proxy \
         runs the version the document has, RESUME SHARDS {resume}"
    )]
    WriteUnknown {
        /// What was lost and what the read-back found.
        reason: String,
        /// The paused ranges.
        ranges: String,
        /// The ranges as `RESUME SHARDS` takes them.
        resume: String,
    },
    /// The map was written, but some live proxies do not run it.
    #[error(
        "the new shard map ({version}) was written, but proxies {lagging} do not run it after {waited_ms} ms; \
         shards {ranges} STAY PAUSED on every proxy (on the old map a proxy would write to the old master). \
         Once SHOW PROXIES shows them on the new version, RESUME SHARDS {resume}; or stop those proxies, then resume"
    )]
    NotAdopted {
        /// The version written.
        version: String,
        /// The proxies and the version each runs.
        lagging: String,
        /// How long the wait lasted.
        waited_ms: u128,
        /// The paused ranges.
        ranges: String,
        /// The ranges as `RESUME SHARDS` takes them.
        resume: String,
    },
    /// Everything is done but the resume failed.
    #[error(
        "the new shard map is in force on every proxy, but resuming failed ({reason}); \
         RESUME SHARDS {resume} to let the waiting statements go"
    )]
    Resume {
        /// Why.
        reason: String,
        /// The ranges as `RESUME SHARDS` takes them.
        resume: String,
    },
}

impl CutoverError {
    /// Whether the error is about the arguments (MySQL 1210) rather than a
    /// failure (1105).
    pub fn is_argument(&self) -> bool {
        matches!(self, CutoverError::Argument(_))
    }
}
