//! The cutover sequence that changes which master serves shards while
//! proxies run: `MOVE SHARDS` (a range to a replica of its master) and
//! `PROMOTE REPLICA` on a ZooKeeper-sourced proxy share it, and so does
//! `shardgate fleet move`, which runs it from the command line.
//!
//! In order, each step timed and reported: read the document (the znode
//! and its version, or the config file in force) and check the change →
//! pause the shards (fleet-wide through ZooKeeper, every registered proxy
//! acknowledging, or the proxy's own gate for a config file) → (for a
//! promotion, whose whole host is paused: the old master `read_only = 1`,
//! so writers outside the proxies stop too) → read `@@gtid_binlog_pos` on
//! the old master → `MASTER_GTID_WAIT` on the new one → write the new map
//! (a version-checked push of the edited document, so a concurrent writer
//! makes it fail; or the atomic rewrite of the file, then its routing
//! table swapped in) → (stop replication on the new masters, when asked)
//! → wait until every live proxy runs it → resume. A failure before the
//! write resumes, makes the old master writable again and changes nothing;
//! what could not be undone is in the error.
//! Once the map is written, a live proxy that does not run it in time
//! leaves the shards paused: resumed on the old map, it would write to the
//! old master.
//!
//! Here: the errors and the shard ranges; `report` the timed steps,
//! `coordinate` the two ways to pause and write (ZooKeeper or the file),
//! `interrupt` `shardgate fleet move` stopped by a signal, `leftover` the
//! pause a killed one left,
//! `sequence` the steps in order, `moves` `MOVE SHARDS` itself.

mod coordinate;
mod interrupt;
mod leftover;
mod moves;
mod report;
mod sequence;

use std::fmt;

use crate::control::replica::CatchUpError;
use crate::control::zookeeper::ZkError;
use crate::topology::rewrite::RewriteError;

pub use coordinate::{Base, Coordinator, FleetSide};
pub use interrupt::{cli_requester, fleet_move_until, FleetMoveError};
pub use leftover::release_killed_cutover;
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
    /// The target is read-only: every write to the moved shards would fail.
    #[error(
        "target {target} is read_only: once the shards are on it every write to them fails (1290); nothing was changed. \
         Run SET GLOBAL read_only = 0 on {target} (it keeps replicating), then move again"
    )]
    TargetReadOnly {
        /// The new master.
        target: String,
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
    /// The old master could not be made `read_only` before its GTID
    /// position was read.
    #[error(
        "cannot set the old master {addr} read_only = 1 before reading its GTID position ({reason}); nothing was changed. \
         Give the operations account the privilege to SET GLOBAL read_only (SUPER or READ_ONLY ADMIN), or stop {addr}, then promote again"
    )]
    Fence {
        /// The old master.
        addr: String,
        /// The error.
        reason: String,
    },
    /// The new master did not catch up, or a statement on it failed.
    #[error("{0}; nothing was changed")]
    CatchUp(#[from] CatchUpError),
    /// The new map could not be written.
    #[error("the new shard map was not written: {reason}; nothing was changed")]
    Write {
        /// Why (a concurrent writer, an invalid document, ...).
        reason: String,
    },
    /// A failure before the write, and what could not be undone after it:
    /// the pause (the shards stay paused) or the old master's `read_only`.
    #[error(
        "{cause}{}{}",
        not_resumed_text(not_resumed),
        read_only_text(read_only)
    )]
    Unfinished {
        /// The failure.
        cause: Box<CutoverError>,
        /// The paused ranges, why resuming failed and the ranges as
        /// `RESUME SHARDS` takes them, when it failed.
        not_resumed: Option<(String, String, String)>,
        /// The old master and why `read_only = 0` failed on it, when it
        /// did.
        read_only: Option<(String, String)>,
    },
    /// Stopping replication on a new master failed once the map was in
    /// force.
    #[error(
        "the new shard map is in force, but on {host} {what} failed: {reason}; replication was stopped on {}. \
         Finish it by hand on {host}: STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0",
        if stopped.is_empty() { "no host".to_owned() } else { stopped.join(", ") }
    )]
    StopReplication {
        /// The new master.
        host: String,
        /// The statement.
        what: String,
        /// The error.
        reason: String,
        /// The new masters whose replication was stopped.
        stopped: Vec<String>,
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

    /// Whether another cutover got there first and nothing was changed: the
    /// shards were paused already, or the document was pushed over by
    /// another writer (its version moved on).
    pub fn lost_a_race(&self) -> bool {
        match self {
            CutoverError::Pause { reason, .. } => reason.contains("paused already"),
            CutoverError::Write { reason } => {
                reason.contains("not the expected version")
                    || reason.contains("another writer changed")
            }
            _ => false,
        }
    }
}

fn not_resumed_text(not_resumed: &Option<(String, String, String)>) -> String {
    not_resumed
        .as_ref()
        .map_or_else(String::new, |(ranges, reason, resume)| {
            format!(
                ". BUT shards {ranges} were NOT resumed ({reason}): they stay paused until RESUME SHARDS {resume}"
            )
        })
}

fn read_only_text(read_only: &Option<(String, String)>) -> String {
    read_only
        .as_ref()
        .map_or_else(String::new, |(addr, reason)| {
            format!(
                ". The old master {addr} was set read_only = 1 and could NOT be made writable again ({reason}): SET GLOBAL read_only = 0 on it"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_that_could_not_resume_says_so() {
        let error = CutoverError::Unfinished {
            cause: Box::new(CutoverError::Write {
                reason: "the config znode /x is at version 3, not the expected version 2".into(),
            }),
            not_resumed: Some((
                "main 1024-2047".into(),
                "connection loss".into(),
                "1024-2047 IN main".into(),
            )),
            read_only: Some(("127.0.0.1:3307".into(), "gone".into())),
        };
        let message = error.to_string();
        assert!(
            message.starts_with("the new shard map was not written"),
            "{message}"
        );
        assert!(
            message.contains("BUT shards main 1024-2047 were NOT resumed (connection loss): they stay paused until RESUME SHARDS 1024-2047 IN main"),
            "{message}"
        );
        assert!(
            message.contains("SET GLOBAL read_only = 0 on it"),
            "{message}"
        );
        assert!(!message.contains("were resumed"), "{message}");
        assert!(!error.lost_a_race());
    }

    #[test]
    fn a_failed_stop_replication_names_the_hosts_stopped() {
        let error = CutoverError::StopReplication {
            host: "127.0.0.1:3310".into(),
            what: "RESET SLAVE ALL".into(),
            reason: "denied".into(),
            stopped: vec!["127.0.0.1:3309".into()],
        };
        let message = error.to_string();
        assert!(
            message.contains("on 127.0.0.1:3310 RESET SLAVE ALL failed: denied; replication was stopped on 127.0.0.1:3309."),
            "{message}"
        );
        let none = CutoverError::StopReplication {
            host: "127.0.0.1:3309".into(),
            what: "STOP SLAVE".into(),
            reason: "denied".into(),
            stopped: Vec::new(),
        };
        assert!(none
            .to_string()
            .contains("replication was stopped on no host"));
    }

    #[test]
    fn lost_races_are_told_apart() {
        let race = CutoverError::Write {
            reason: "another writer changed the config znode /x during this push".into(),
        };
        assert!(race.lost_a_race());
        let paused = CutoverError::Pause {
            ranges: "main 0-2047".into(),
            reason: "shards 0-2047 of fleet main overlap shards 0-10, paused already; RESUME SHARDS 0-10 first".into(),
        };
        assert!(paused.lost_a_race());
        let stuck = CutoverError::NotAdopted {
            version: "znode version 4".into(),
            lagging: "p2 (version 3)".into(),
            waited_ms: 1000,
            ranges: "main 0-2047".into(),
            resume: "0-2047 IN main".into(),
        };
        assert!(!stuck.lost_a_race());
    }
}
