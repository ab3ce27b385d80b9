//! `PAUSE SHARDS` / `RESUME SHARDS` on a ZooKeeper-sourced proxy: the
//! pause is written as a record under the document and answers once every
//! registered proxy (this one too, through its follower) has applied it
//! and drained; it is withdrawn, and fails naming the proxies that did
//! not ack, at its timeout. `RESUME` deletes the matching records.

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
}

/// Pauses `first..=last` of `fleet` on every proxy of the document:
/// writes the record and waits until every registered proxy has acked,
/// at most `timeout` (plus a small margin for late acks).
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
    };
    let started = Instant::now();
    let id = zookeeper.create_pause(&record).await?;
    let in_fleet = fleet.map_or_else(String::new, |name| format!(" in fleet {name}"));
    loop {
        let live = zookeeper.live_proxies().await?;
        let Some(acked) = zookeeper.acks(&id).await? else {
            return Err(FleetPauseError::Withdrawn {
                first,
                last,
                fleet: in_fleet,
            });
        };
        let still = missing(&live, &acked);
        if still.is_empty() {
            let mut proxies = acked;
            proxies.sort();
            return Ok(FleetPauseReport {
                id,
                proxies,
                waited: started.elapsed(),
            });
        }
        if started.elapsed() >= timeout + ACK_MARGIN {
            zookeeper.delete_pauses(std::slice::from_ref(&id)).await?;
            return Err(FleetPauseError::NotAcked {
                first,
                last,
                fleet: in_fleet,
                missing: still.join(", "),
                waited_ms: started.elapsed().as_millis(),
            });
        }
        tokio::time::sleep(ACK_POLL).await;
    }
}

/// Resumes, on every proxy, the fleet-wide pauses inside `first..=last`
/// of `fleet` (every fleet when `None`): their records are deleted in one
/// multi. The records resumed.
pub async fn resume_fleet(
    zookeeper: &ZooKeeper,
    fleet: Option<&str>,
    first: u32,
    last: u32,
) -> Result<Vec<PauseRecord>, FleetPauseError> {
    if first > last {
        return Err(PauseError::BadRange { first, last }.into());
    }
    let records = zookeeper.pause_records().await?;
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
    let (ids, resumed): (Vec<String>, Vec<PauseRecord>) = records
        .iter()
        .filter(|(_, record)| record.within(fleet, first, last))
        .cloned()
        .unzip();
    if ids.is_empty() {
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
    zookeeper.delete_pauses(&ids).await?;
    Ok(resumed)
}
