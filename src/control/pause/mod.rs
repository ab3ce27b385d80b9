//! Cutover pause, the operations: `PAUSE SHARDS a-b` makes new statements
//! for those shards wait (bounded) while statements and transactions
//! already running on them finish; `RESUME SHARDS a-b` lets the waiting
//! statements go, routed on the topology in force at that moment. Both
//! change the statement path's gate ([`PauseGate`]); this module adds the
//! drain, its timeout and the errors the operator reads. On a
//! ZooKeeper-sourced proxy the same pause is fleet-wide: a record under
//! the document that every proxy applies to its own gate ([`fleet`],
//! [`follow`]).

mod fleet;
mod follow;

pub use fleet::{
    pause_fleet, resume_command, resume_fleet, FleetPauseError, FleetPauseReport, Requester,
};
pub use follow::{apply_found, spawn_follower, Followed};

use std::time::{Duration, Instant};

use crate::engine::pause::{NotEnded, PauseGate, PausedRange};
use crate::topology::Topology;

/// How often `pause` looks at the in-flight counters while draining.
const DRAIN_POLL: Duration = Duration::from_millis(1);

/// Most running shards a drain-timeout error names one by one.
const SHARDS_NAMED: usize = 10;

/// The answer to `PAUSE SHARDS`: the range is paused and nothing runs on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseReport {
    /// The fleets paused.
    pub fleets: Vec<String>,
    /// First shard paused.
    pub first: u32,
    /// Last shard paused.
    pub last: u32,
    /// Statements and transactions that were running on the range when it
    /// was paused (all finished since).
    pub drained: usize,
    /// How long draining them took.
    pub waited: Duration,
}

/// The answer to `RESUME SHARDS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeReport {
    /// The fleets resumed.
    pub fleets: Vec<String>,
    /// First shard of the range given.
    pub first: u32,
    /// Last shard of the range given.
    pub last: u32,
    /// Statements that were waiting and now go on.
    pub released: usize,
    /// How long the range was paused (the longest, when several ranges
    /// were resumed together).
    pub paused_for: Duration,
}

/// Why `PAUSE` or `RESUME` refused or failed. The text is what the
/// operator reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PauseError {
    /// `first > last`.
    #[error("bad shard range {first}-{last}: the first shard must not be after the last")]
    BadRange {
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
    },
    /// No fleet of that name.
    #[error("no fleet named '{name}' (fleets: {known})")]
    UnknownFleet {
        /// The name given.
        name: String,
        /// The fleets configured, comma-separated.
        known: String,
    },
    /// The range goes past the fleet's (or every fleet's) last shard.
    #[error("shards {first}-{last} are outside {what}")]
    OutOfRange {
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
        /// `fleet main (shards 0-4095)` or the like.
        what: String,
    },
    /// Part of the range is paused already.
    #[error("shards {first}-{last} of fleet {fleet} overlap shards {paused_first}-{paused_last}, paused already; RESUME SHARDS {paused_first}-{paused_last} first, or pause a range that does not overlap")]
    AlreadyPaused {
        /// Fleet name.
        fleet: String,
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
        /// First shard of the paused range in the way.
        paused_first: u32,
        /// Last shard of the paused range in the way.
        paused_last: u32,
    },
    /// `RESUME` of a range that is not paused.
    #[error("shards {first}-{last} are not paused{fleet}; paused now: {paused}")]
    NotPaused {
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
        /// ` in fleet x` when one was named, else empty.
        fleet: String,
        /// The paused ranges, or `nothing`.
        paused: String,
    },
    /// `RESUME` of part of a paused range.
    #[error("shards {first}-{last} cover only part of the paused range {paused_first}-{paused_last} of fleet {fleet}; resume the whole range (RESUME SHARDS {paused_first}-{paused_last})")]
    PartialResume {
        /// Fleet name.
        fleet: String,
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
        /// First shard of the paused range.
        paused_first: u32,
        /// Last shard of the paused range.
        paused_last: u32,
    },
    /// `RESUME` of a range whose `PAUSE` has not answered yet.
    #[error("shards {paused_first}-{paused_last} of fleet {fleet} are still draining: their PAUSE SHARDS is waiting for the statements running on them and has not answered yet; wait for it to answer (at most pause.drain_timeout_ms; a drain that times out undoes the pause by itself), then RESUME SHARDS {paused_first}-{paused_last}")]
    StillDraining {
        /// Fleet name.
        fleet: String,
        /// First shard of the draining range.
        paused_first: u32,
        /// Last shard of the draining range.
        paused_last: u32,
    },
    /// Statements or transactions still ran when the drain timeout passed;
    /// the pause was undone.
    #[error("shards {first}-{last} of {fleets}: {running} statement(s) or transaction(s) were still running after {waited_ms} ms ({shards}); the pause was undone and statements flow again. Retry once the long transactions have finished, or raise pause.drain_timeout_ms")]
    DrainTimeout {
        /// `fleet main` or `fleets main, mod`.
        fleets: String,
        /// First shard of the range.
        first: u32,
        /// Last shard of the range.
        last: u32,
        /// Statements and transactions still registered.
        running: u32,
        /// Where they ran: `shard 1500: 1, shard 1777: 2`.
        shards: String,
        /// How long the pause waited.
        waited_ms: u128,
    },
    /// The pause's ranges were gone when its drain finished.
    #[error("shards {first}-{last} of {fleets}: the pause ended while it was draining; nothing is paused. PAUSE SHARDS {first}-{last} again")]
    Ended {
        /// `fleet main` or `fleets main, mod`.
        fleets: String,
        /// First shard of the range.
        first: u32,
        /// Last shard of the range.
        last: u32,
    },
}

/// Undoes, when dropped armed, the entries of a pause that did not
/// complete: its drain timed out, or its future was dropped mid-drain (the
/// admin port runs every command to completion, so there only the timeout
/// does this; the guard keeps entries that nobody finishes from staying
/// paused, and unresumable, since RESUME refuses a draining range).
struct PendingPause<'a> {
    gate: &'a PauseGate,
    ids: Vec<u64>,
    armed: bool,
}

impl Drop for PendingPause<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.gate.undo(&self.ids);
        }
    }
}

/// Pauses shards `first..=last` of `fleet` (every fleet that has them
/// when `None`) at `gate`: new statements for them wait from now on.
/// Returns once the statements and transactions already running on them
/// have finished; if some still run after `drain_timeout`, the pause is
/// undone and the error says where they run. Dropping the future before
/// it answers undoes the pause too.
pub async fn pause(
    gate: &PauseGate,
    topology: &Topology,
    fleet: Option<&str>,
    first: u32,
    last: u32,
    drain_timeout: Duration,
) -> Result<PauseReport, PauseError> {
    let fleets = pausable_fleets(topology, fleet, first, last)?;
    let started = Instant::now();
    let ids = gate
        .begin(&fleets, first, last, started)
        .map_err(|in_the_way| PauseError::AlreadyPaused {
            fleet: in_the_way.fleet,
            first,
            last,
            paused_first: in_the_way.first,
            paused_last: in_the_way.last,
        })?;
    let mut pending = PendingPause {
        gate,
        ids,
        armed: true,
    };
    let deadline = started + drain_timeout;
    let mut drained = None;
    let drained = loop {
        let running = gate.running(&fleets, first, last);
        let total: u32 = running.iter().map(|(_, _, n)| n).sum();
        let drained = *drained.get_or_insert(total as usize);
        if total == 0 {
            break drained;
        }
        if Instant::now() >= deadline {
            drop(pending);
            return Err(PauseError::DrainTimeout {
                fleets: fleet_list(&fleets),
                first,
                last,
                running: total,
                shards: describe_running(&fleets, &running),
                waited_ms: started.elapsed().as_millis(),
            });
        }
        tokio::time::sleep(DRAIN_POLL).await;
    };
    if !gate.confirm(&pending.ids) {
        return Err(PauseError::Ended {
            fleets: fleet_list(&fleets),
            first,
            last,
        });
    }
    pending.armed = false;
    Ok(PauseReport {
        fleets,
        first,
        last,
        drained,
        waited: started.elapsed(),
    })
}

/// Ends the pauses of `first..=last` at `gate` (of `fleet`, or of every
/// fleet when `None`): waiting statements go on, routed on the topology in
/// force now. Every paused range inside `first..=last` is resumed; one
/// that is only partly inside is refused, and so is the whole resume
/// while one of those ranges is still draining (its PAUSE has not
/// answered).
pub fn resume(
    gate: &PauseGate,
    fleet: Option<&str>,
    first: u32,
    last: u32,
) -> Result<ResumeReport, PauseError> {
    if first > last {
        return Err(PauseError::BadRange { first, last });
    }
    let removed = gate
        .end_within(fleet, first, last)
        .map_err(|not_ended| match not_ended {
            NotEnded::Partial(partial) => PauseError::PartialResume {
                fleet: partial.fleet,
                first,
                last,
                paused_first: partial.first,
                paused_last: partial.last,
            },
            NotEnded::Draining(draining) => PauseError::StillDraining {
                fleet: draining.fleet,
                paused_first: draining.first,
                paused_last: draining.last,
            },
            NotEnded::NothingPaused(paused) => PauseError::NotPaused {
                first,
                last,
                fleet: fleet.map_or_else(String::new, |name| format!(" in fleet {name}")),
                paused: describe_paused(&paused),
            },
        })?;
    let mut fleets: Vec<String> = Vec::new();
    for entry in &removed {
        if !fleets.contains(&entry.fleet) {
            fleets.push(entry.fleet.clone());
        }
    }
    Ok(ResumeReport {
        fleets,
        first,
        last,
        released: removed.iter().map(|e| e.released).sum(),
        paused_for: removed
            .iter()
            .map(|e| e.paused_for)
            .max()
            .unwrap_or_default(),
    })
}

/// The fleets a pause of `first..=last` applies to, checked.
pub(crate) fn pausable_fleets(
    topology: &Topology,
    fleet: Option<&str>,
    first: u32,
    last: u32,
) -> Result<Vec<String>, PauseError> {
    if first > last {
        return Err(PauseError::BadRange { first, last });
    }
    let describe = |f: &crate::topology::Fleet| {
        format!(
            "fleet {} (shards 0-{})",
            f.name,
            f.shard_count.saturating_sub(1)
        )
    };
    match fleet {
        Some(name) => {
            let Some(found) = topology.fleets.iter().find(|f| f.name == name) else {
                return Err(PauseError::UnknownFleet {
                    name: name.to_owned(),
                    known: topology
                        .fleets
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            };
            if last >= found.shard_count {
                return Err(PauseError::OutOfRange {
                    first,
                    last,
                    what: describe(found),
                });
            }
            Ok(vec![found.name.clone()])
        }
        None => {
            let fleets: Vec<String> = topology
                .fleets
                .iter()
                .filter(|f| last < f.shard_count)
                .map(|f| f.name.clone())
                .collect();
            if fleets.is_empty() {
                return Err(PauseError::OutOfRange {
                    first,
                    last,
                    what: format!(
                        "every fleet: {}",
                        topology
                            .fleets
                            .iter()
                            .map(describe)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            Ok(fleets)
        }
    }
}

fn fleet_list(fleets: &[String]) -> String {
    match fleets {
        [one] => format!("fleet {one}"),
        many => format!("fleets {}", many.join(", ")),
    }
}

fn describe_running(fleets: &[String], running: &[(String, u32, u32)]) -> String {
    let mut parts: Vec<String> = running
        .iter()
        .take(SHARDS_NAMED)
        .map(|(fleet, shard, count)| {
            if fleets.len() > 1 {
                format!("{fleet} shard {shard}: {count}")
            } else {
                format!("shard {shard}: {count}")
            }
        })
        .collect();
    if running.len() > SHARDS_NAMED {
        parts.push(format!("and {} more shards", running.len() - SHARDS_NAMED));
    }
    parts.join(", ")
}

fn describe_paused(paused: &[PausedRange]) -> String {
    if paused.is_empty() {
        return "nothing".to_owned();
    }
    paused
        .iter()
        .map(|e| format!("{} {}-{}", e.fleet, e.first, e.last))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
