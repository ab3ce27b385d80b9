//! `PAUSE SHARDS` / `RESUME SHARDS` on a ZooKeeper-sourced proxy: the
//! pause is written as a record under the document and answers once every
//! registered proxy (this one too, through its follower) has applied it
//! and drained; it is withdrawn, and fails naming the proxies that did
//! not ack, at its timeout, or when ZooKeeper fails while it waits.
//! `RESUME` deletes the matching records, but those a cutover holds only
//! when told `FORCE`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{pausable_fleets, PauseError};
use crate::control::zookeeper::{missing, PauseRecord, ZkError, ZooKeeper};
use crate::topology::Topology;

/// How often the pause looks at the acks and the registry.
const ACK_POLL: Duration = Duration::from_millis(10);

/// Extra wait past the drain timeout for the acks of proxies that drained
/// just in time.
const ACK_MARGIN: Duration = Duration::from_millis(500);

/// Why a fleet-wide `PAUSE` or `RESUME` refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetPauseError {
    /// Refused before anything was written (range, fleet, overlap).
    #[error("{0}")]
    Refused(#[from] PauseError),
    /// ZooKeeper did not answer.
    #[error("{0}")]
    ZooKeeper(#[from] ZkError),
    /// Some live proxies did not ack in time; the record was deleted.
    #[error("shards {first}-{last}{fleet}: proxies {missing} did not pause within {waited_ms} ms (statements or transactions still running on the range there, or no ZooKeeper session); the pause was withdrawn and every proxy serves those shards again. Look at those proxies' logs for the shards still busy, then retry, or raise pause.drain_timeout_ms")]
    NotAcked {
        /// First shard.
        first: u32,
        /// Last shard.
        last: u32,
        /// ` in fleet x` or empty.
        fleet: String,
        /// The proxies that did not ack, comma-separated.
        missing: String,
        /// How long the pause waited.
        waited_ms: u128,
    },
    /// ZooKeeper failed once the record may have been written; what
    /// became of the record is said.
    #[error("shards {first}-{last}{fleet}: the fleet-wide pause failed ({reason}); {outcome}")]
    Failed {
        /// First shard.
        first: u32,
        /// Last shard.
        last: u32,
        /// ` in fleet x` or empty.
        fleet: String,
        /// The ZooKeeper error (or the proxies that did not ack).
        reason: String,
        /// Whether the record is gone, or the command that removes it.
        outcome: String,
    },
    /// The record was deleted while the pause waited (a `RESUME`).
    #[error("shards {first}-{last}{fleet}: the fleet-wide pause was resumed (its record deleted) before every proxy acked; nothing is paused. PAUSE SHARDS {first}-{last} again")]
    Withdrawn {
        /// First shard.
        first: u32,
        /// Last shard.
        last: u32,
        /// ` in fleet x` or empty.
        fleet: String,
    },
    /// `RESUME` without `FORCE` of a range a running cutover holds.
    #[error("shards {paused_first}-{paused_last}{fleet} are held by the cutover `{cutover}` (asked on {requested_by}); resuming them before it answers lets proxies on the old shard map write to the old master. Wait for it to answer; if it died (its proxy or CLI gone, see SHOW PROXIES and its log) and `shardgate config get` shows which map is in force, RESUME SHARDS {paused_first}-{paused_last}{in_fleet} FORCE")]
    HeldByCutover {
        /// The cutover, as its record names it.
        cutover: String,
        /// The proxy (or `cli:host:pid`) that runs it.
        requested_by: String,
        /// ` of fleet x` or empty.
        fleet: String,
        /// ` IN x` or empty, for the command.
        in_fleet: String,
        /// First shard of the held record.
        paused_first: u32,
        /// Last shard of the held record.
        paused_last: u32,
    },
}

/// The answer to a fleet-wide `PAUSE SHARDS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetPauseReport {
    /// The record's id.
    pub id: String,
    /// The proxies that acked.
    pub proxies: Vec<String>,
    /// How long it took.
    pub waited: Duration,
}

/// Who asks for a fleet-wide pause.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// This proxy's id.
    pub proxy: &'a str,
    /// The admin account.
    pub user: &'a str,
    /// The cutover that pauses (its command), none for `PAUSE SHARDS`.
    pub cutover: Option<&'a str>,
}

/// How the wait for the acks ended.
enum Acks {
    /// Every live proxy acked: they.
    All(Vec<String>),
    /// The timeout passed: the live proxies that did not ack.
    Missing(Vec<String>),
    /// The record was deleted meanwhile.
    Gone,
}

/// Pauses `first..=last` of `fleet` on every proxy of the document:
/// writes the record and waits until every registered proxy has acked,
/// at most `timeout` (plus a small margin for late acks). On any failure
/// once the record may exist, it is withdrawn (or the error names the
/// command that removes it).
pub async fn pause_fleet(
    zookeeper: &ZooKeeper,
    topology: &Topology,
    requester: Requester<'_>,
    fleet: Option<&str>,
    first: u32,
    last: u32,
    timeout: Duration,
) -> Result<FleetPauseReport, FleetPauseError> {
    pausable_fleets(topology, fleet, first, last)?;
    let records = zookeeper.pause_records().await?;
    if let Some((_, record)) = records
        .iter()
        .find(|(_, record)| record.overlaps(fleet, first, last))
    {
        return Err(PauseError::AlreadyPaused {
            fleet: record
                .fleet
                .clone()
                .unwrap_or_else(|| "<every fleet>".to_owned()),
            first,
            last,
            paused_first: record.first,
            paused_last: record.last,
        }
        .into());
    }
    let record = PauseRecord {
        fleet: fleet.map(str::to_owned),
        first,
        last,
        requested_by: requester.proxy.to_owned(),
        user: requester.user.to_owned(),
        requested_at_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        cutover: requester.cutover.map(str::to_owned),
    };
    let started = Instant::now();
    let in_fleet = fleet.map_or_else(String::new, |name| format!(" in fleet {name}"));
    let failed = |reason: String, outcome: String| FleetPauseError::Failed {
        first,
        last,
        fleet: in_fleet.clone(),
        reason,
        outcome,
    };
    let id = record.id();
    let acks = match zookeeper.create_pause(&record).await {
        Ok(_) => wait_for_acks(zookeeper, &id, started, timeout).await,
        Err(e) => Err(e),
    };
    match acks {
        Ok(Acks::All(mut proxies)) => {
            proxies.sort();
            Ok(FleetPauseReport {
                id,
                proxies,
                waited: started.elapsed(),
            })
        }
        Ok(Acks::Gone) => Err(FleetPauseError::Withdrawn {
            first,
            last,
            fleet: in_fleet,
        }),
        Ok(Acks::Missing(still)) => match withdraw(zookeeper, &id).await {
            Ok(_) => Err(FleetPauseError::NotAcked {
                first,
                last,
                fleet: in_fleet.clone(),
                missing: still.join(", "),
                waited_ms: started.elapsed().as_millis(),
            }),
            Err(e) => Err(failed(
                format!("proxies {} did not pause in time", still.join(", ")),
                left_behind(&record, &id, &e),
            )),
        },
        Err(e) => Err(failed(
            e.to_string(),
            match withdraw(zookeeper, &id).await {
                Ok(false) => "its record was not written: nothing is paused".to_owned(),
                Ok(true) => {
                    format!("its record {id} was withdrawn: every proxy serves those shards again")
                }
                Err(withdrawing) => left_behind(&record, &id, &withdrawing),
            },
        )),
    }
}

/// Polls the acks of record `id` until every live proxy has acked, the
/// record is gone, or `timeout` (and the margin) passed since `started`.
async fn wait_for_acks(
    zookeeper: &ZooKeeper,
    id: &str,
    started: Instant,
    timeout: Duration,
) -> Result<Acks, ZkError> {
    loop {
        let live = zookeeper.live_proxies().await?;
        let Some(acked) = zookeeper.acks(id).await? else {
            return Ok(Acks::Gone);
        };
        let still = missing(&live, &acked);
        if still.is_empty() {
            return Ok(Acks::All(acked));
        }
        if started.elapsed() >= timeout + ACK_MARGIN {
            return Ok(Acks::Missing(still));
        }
        tokio::time::sleep(ACK_POLL).await;
    }
}

/// Deletes record `id` if it exists; whether it did.
async fn withdraw(zookeeper: &ZooKeeper, id: &str) -> Result<bool, ZkError> {
    if zookeeper.acks(id).await?.is_none() {
        return Ok(false);
    }
    zookeeper.delete_pauses(&[id.to_owned()]).await?;
    Ok(true)
}

/// What to say of a record that could not be withdrawn.
fn left_behind(record: &PauseRecord, id: &str, error: &ZkError) -> String {
    format!(
        "its record {id} may still exist and could NOT be withdrawn ({error}): the proxies that applied it keep \
         those shards paused. Once ZooKeeper answers, RESUME SHARDS {}",
        resume_command(record)
    )
}

/// The arguments of the `RESUME SHARDS` that ends `record`: `a-b [IN f]
/// [FORCE]`.
pub fn resume_command(record: &PauseRecord) -> String {
    format!(
        "{}-{}{}{}",
        record.first,
        record.last,
        record
            .fleet
            .as_deref()
            .map_or_else(String::new, |f| format!(" IN {f}")),
        if record.cutover.is_some() {
            " FORCE"
        } else {
            ""
        }
    )
}

/// Resumes, on every proxy, the fleet-wide pauses inside `first..=last`
/// of `fleet` (every fleet when `None`): their records are deleted in one
/// multi. A record a cutover holds is left alone, and the resume
/// refused, unless `force`. The records resumed.
pub async fn resume_fleet(
    zookeeper: &ZooKeeper,
    fleet: Option<&str>,
    first: u32,
    last: u32,
    force: bool,
) -> Result<Vec<PauseRecord>, FleetPauseError> {
    if first > last {
        return Err(PauseError::BadRange { first, last }.into());
    }
    let records = zookeeper.pause_records().await?;
    let (ids, resumed): (Vec<String>, Vec<PauseRecord>) =
        to_resume(&records, fleet, first, last, force)?
            .into_iter()
            .unzip();
    zookeeper.delete_pauses(&ids).await?;
    Ok(resumed)
}

/// The records a `RESUME SHARDS first-last [IN fleet] [FORCE]` deletes,
/// or why it refuses.
fn to_resume(
    records: &[(String, PauseRecord)],
    fleet: Option<&str>,
    first: u32,
    last: u32,
    force: bool,
) -> Result<Vec<(String, PauseRecord)>, FleetPauseError> {
    if let Some((_, partial)) = records.iter().find(|(_, record)| {
        record.overlaps(fleet, first, last) && !record.within(fleet, first, last)
    }) {
        return Err(PauseError::PartialResume {
            fleet: partial
                .fleet
                .clone()
                .unwrap_or_else(|| "<every fleet>".to_owned()),
            first,
            last,
            paused_first: partial.first,
            paused_last: partial.last,
        }
        .into());
    }
    let chosen: Vec<(String, PauseRecord)> = records
        .iter()
        .filter(|(_, record)| record.within(fleet, first, last))
        .cloned()
        .collect();
    if chosen.is_empty() {
        let paused = records
            .iter()
            .map(|(_, r)| {
                format!(
                    "{} {}-{}",
                    r.fleet.as_deref().unwrap_or("<every fleet>"),
                    r.first,
                    r.last
                )
            })
            .collect::<Vec<_>>();
        return Err(PauseError::NotPaused {
            first,
            last,
            fleet: fleet.map_or_else(String::new, |name| format!(" in fleet {name}")),
            paused: if paused.is_empty() {
                "nothing".to_owned()
            } else {
                paused.join(", ")
            },
        }
        .into());
    }
    if !force {
        if let Some((_, held)) = chosen.iter().find(|(_, record)| record.cutover.is_some()) {
            return Err(FleetPauseError::HeldByCutover {
                cutover: held.cutover.clone().unwrap_or_default(),
                requested_by: held.requested_by.clone(),
                fleet: held
                    .fleet
                    .as_deref()
                    .map_or_else(String::new, |f| format!(" of fleet {f}")),
                in_fleet: held
                    .fleet
                    .as_deref()
                    .map_or_else(String::new, |f| format!(" IN {f}")),
                paused_first: held.first,
                paused_last: held.last,
            });
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests;
