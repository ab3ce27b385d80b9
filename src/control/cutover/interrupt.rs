//! `shardgate fleet move` stopped by a signal: before the write the pause
//! is withdrawn and nothing changed; during the write the answer is
//! awaited (the push is one request); after it the pause is kept (proxies
//! may still run the old map) and the version written and the `RESUME`
//! command are said.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use super::moves::fleet_move;
use super::report::{CutoverReport, Progress, StepEvent};
use super::{CutoverError, MoveRequest};
use crate::control::pause::resume_command;
use crate::control::zookeeper::{PauseRecord, ZooKeeper};
use crate::sync::lock;
use crate::topology::bootstrap::default_proxy_id;
use crate::topology::source::ZkLocation;

/// How long after the first withdrawal a record created by the stopped
/// move is looked for again.
const LATE_CREATE: Duration = Duration::from_millis(300);

/// The requester the pause records of `shardgate fleet move` name:
/// `cli:<host>:<pid>`, unique to this process.
pub fn cli_requester() -> String {
    format!("cli:{}", default_proxy_id())
}

/// How `shardgate fleet move` ended without a report.
#[derive(Debug, thiserror::Error)]
pub enum FleetMoveError {
    /// The move failed (the error says what it left).
    #[error("fleet move failed: {0}")]
    Failed(#[from] CutoverError),
    /// A signal stopped it.
    #[error("fleet move stopped by {signal}: {outcome}")]
    Interrupted {
        /// `SIGINT` or `SIGTERM`.
        signal: &'static str,
        /// What it left, and what to do.
        outcome: String,
    },
}

/// Where the move was, from its progress.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// The write has not started: nothing changed yet.
    BeforeWrite,
    /// The push is out.
    Writing,
    /// The write failed: the sequence resumes by itself.
    WriteFailed,
    /// The new map is written (the write step's detail).
    Written(String),
}

impl Phase {
    /// The phase after `event`.
    fn after(&self, event: &StepEvent<'_>) -> Phase {
        match event {
            StepEvent::Started("write") => Phase::Writing,
            StepEvent::Ended(step) if step.name == "write" => {
                if step.detail.starts_with("failed: ") {
                    Phase::WriteFailed
                } else {
                    Phase::Written(step.detail.clone())
                }
            }
            _ => self.clone(),
        }
    }
}

/// [`fleet_move`], stopped when `stop` answers (with the signal's name):
/// before the write its pause records are withdrawn; a write under way is
/// awaited; after the write the records stay and the error says which
/// version was written and how to resume.
pub async fn fleet_move_until(
    location: ZkLocation,
    request: &MoveRequest,
    progress: Progress<'_>,
    stop: impl Future<Output = &'static str>,
) -> Result<CutoverReport, FleetMoveError> {
    let (phase, mut changed) = tokio::sync::watch::channel(Phase::BeforeWrite);
    let done: Mutex<Vec<&'static str>> = Mutex::default();
    let tracking = |event: StepEvent<'_>| {
        if let StepEvent::Ended(step) = &event {
            lock(&done).push(step.name);
        }
        phase.send_modify(|phase| *phase = phase.after(&event));
        progress(event);
    };
    let run = fleet_move(location.clone(), request, &tracking);
    tokio::pin!(run, stop);
    let signal = tokio::select! {
        ended = &mut run => return Ok(ended?),
        signal = &mut stop => signal,
    };
    loop {
        let now = changed.borrow_and_update().clone();
        match now {
            Phase::Writing | Phase::WriteFailed => tokio::select! {
                ended = &mut run => return Ok(ended?),
                _ = changed.changed() => {}
            },
            Phase::BeforeWrite => {
                let steps = lock(&done).join(", ");
                return Err(FleetMoveError::Interrupted {
                    signal,
                    outcome: withdraw(location, &steps).await,
                });
            }
            Phase::Written(detail) => {
                return Err(FleetMoveError::Interrupted {
                    signal,
                    outcome: kept(location, &detail).await,
                });
            }
        }
    }
}

/// This process's pause records, read on a new session.
async fn own_records(
    location: ZkLocation,
) -> Result<(ZooKeeper, Vec<(String, PauseRecord)>), String> {
    let zookeeper = ZooKeeper::open(location).await.map_err(|e| e.to_string())?;
    let requester = cli_requester();
    match zookeeper.pause_records().await {
        Ok(records) => {
            let own = records
                .into_iter()
                .filter(|(_, record)| record.requested_by == requester)
                .collect();
            Ok((zookeeper, own))
        }
        Err(e) => {
            zookeeper.close().await;
            Err(e.to_string())
        }
    }
}

/// Deletes this process's pause records; what happened. Read twice, a
/// little apart: a record the stopped move was creating may land after
/// the first read.
async fn withdraw(location: ZkLocation, steps: &str) -> String {
    let before = format!("stopped before the new shard map was written (steps done: {steps})");
    let mut withdrawn: Vec<String> = Vec::new();
    for round in 0..2 {
        if round > 0 {
            tokio::time::sleep(LATE_CREATE).await;
        }
        let (zookeeper, own) = match own_records(location.clone()).await {
            Ok(found) => found,
            Err(e) => {
                return format!(
                    "{before}; its pause records could not be read ({e}): look for records requested by {} \
                     and RESUME SHARDS them with FORCE",
                    cli_requester()
                )
            }
        };
        let ids: Vec<String> = own.iter().map(|(id, _)| id.clone()).collect();
        let deleted = if ids.is_empty() {
            Ok(())
        } else {
            zookeeper.delete_pauses(&ids).await
        };
        zookeeper.close().await;
        if let Err(e) = deleted {
            return format!(
                "{before}; nothing changed, but the pause records {} could NOT be withdrawn ({e}): RESUME SHARDS {}",
                ids.join(", "),
                commands(&own)
            );
        }
        withdrawn.extend(ids);
    }
    if withdrawn.is_empty() {
        format!("{before}; nothing was paused and nothing changed")
    } else {
        format!(
            "{before}; the pause was withdrawn (records {}) and nothing changed",
            withdrawn.join(", ")
        )
    }
}

/// Says what the written map and the records kept need.
async fn kept(location: ZkLocation, written: &str) -> String {
    let before = format!("stopped after the new shard map was written ({written})");
    match own_records(location).await {
        Ok((zookeeper, own)) => {
            zookeeper.close().await;
            if own.is_empty() {
                return format!("{before}; its pause was already resumed: the move is complete");
            }
            format!(
                "{before}; the shards STAY PAUSED on every proxy (records {}, held by `{}`): a proxy still on \
                 the old map would write to the old master. Once SHOW PROXIES shows every live proxy on that \
                 znode version or later, RESUME SHARDS {}; then do the move's cleanup by hand (the dry run \
                 lists it)",
                own.iter()
                    .map(|(id, _)| id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                own.first()
                    .and_then(|(_, record)| record.cutover.clone())
                    .unwrap_or_default(),
                commands(&own)
            )
        }
        Err(e) => format!(
            "{before}; the shards stay paused, and the pause records could not be read ({e}): once SHOW \
             PROXIES shows every live proxy on that znode version, RESUME SHARDS the moved range with FORCE"
        ),
    }
}

/// `RESUME SHARDS` arguments for `records`, `; RESUME SHARDS `-separated.
fn commands(records: &[(String, PauseRecord)]) -> String {
    records
        .iter()
        .map(|(_, record)| resume_command(record))
        .collect::<Vec<_>>()
        .join("; RESUME SHARDS ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::cutover::Step;

    fn ended(name: &'static str, detail: &str) -> Step {
        Step {
            name,
            ms: 1,
            detail: detail.to_owned(),
        }
    }

    #[test]
    fn the_phase_follows_the_write_step() {
        let before = Phase::BeforeWrite;
        let pause = ended("pause", "main 1024-2047 paused");
        assert_eq!(before.after(&StepEvent::Ended(&pause)), Phase::BeforeWrite);
        let writing = before.after(&StepEvent::Started("write"));
        assert_eq!(writing, Phase::Writing);
        let written = ended("write", "znode version 3 (md5 x), was 2");
        assert_eq!(
            writing.after(&StepEvent::Ended(&written)),
            Phase::Written("znode version 3 (md5 x), was 2".to_owned())
        );
        let failed = ended("write", "failed: the new shard map was not written");
        assert_eq!(
            writing.after(&StepEvent::Ended(&failed)),
            Phase::WriteFailed
        );
        let after = Phase::Written("v".to_owned());
        assert_eq!(
            after.after(&StepEvent::Started("proxies")),
            Phase::Written("v".to_owned())
        );
    }
}
