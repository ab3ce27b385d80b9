//! The pause a killed `shardgate fleet move` (or `fleet split`) left: its
//! record is persistent, so after a SIGKILL or a crash the shards stay
//! paused on every proxy. The same move run again on the same machine
//! takes the record over when the process that created it
//! (`cli:<host>:<pid>`) is gone: nobody can push under it any more. If the
//! killed run's map was written (the document routes the range to the
//! target), the record is deleted once every live proxy runs it (the
//! cutover is then complete); if not, it is deleted at once (every proxy
//! still runs the old map) and the move runs again.

use std::time::{Duration, Instant};

use super::MoveRequest;
use crate::control::status::parse_config;
use crate::control::zookeeper::{PauseRecord, ZooKeeper};
use crate::topology::bootstrap::default_proxy_id;
use crate::topology::source::ZkLocation;

/// How long the proxies may take to run the killed move's map.
const ADOPT_TIMEOUT: Duration = Duration::from_secs(30);
/// Between two reads of the registry.
const POLL: Duration = Duration::from_millis(50);

/// Whether `requester` (`cli:<host>:<pid>`) names a process of this host
/// that no longer runs. `false` when it cannot be told (another host, no
/// `/proc`).
fn killed_here(requester: &str, this: &str) -> bool {
    let Some((host, pid)) = requester
        .strip_prefix("cli:")
        .and_then(|rest| rest.rsplit_once(':'))
    else {
        return false;
    };
    let this_host = this.rsplit_once(':').map_or(this, |(host, _)| host);
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    host == this_host
        && pid != std::process::id()
        && std::path::Path::new("/proc/self").exists()
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The records among `records` that a killed run of the cutover `what`
/// left on this host.
fn left_by_killed(records: &[(String, PauseRecord)], what: &str, this: &str) -> Vec<String> {
    records
        .iter()
        .filter(|(_, r)| r.cutover.as_deref() == Some(what) && killed_here(&r.requested_by, this))
        .map(|(id, _)| id.clone())
        .collect()
}

/// Takes over the pause records a killed run of `request` left (see the
/// module); what it did, `None` when there were none. The error says what
/// stays paused.
pub async fn release_killed_cutover(
    location: &ZkLocation,
    request: &MoveRequest,
) -> Result<Option<String>, String> {
    let zookeeper = ZooKeeper::open(location.clone())
        .await
        .map_err(|e| e.to_string())?;
    let result = release(&zookeeper, location, request).await;
    zookeeper.close().await;
    result
}

async fn release(
    zookeeper: &ZooKeeper,
    location: &ZkLocation,
    request: &MoveRequest,
) -> Result<Option<String>, String> {
    let what = request.describe();
    let records = zookeeper.pause_records().await.map_err(|e| e.to_string())?;
    let ids = left_by_killed(&records, &what, &default_proxy_id());
    if ids.is_empty() {
        return Ok(None);
    }
    let document = crate::control::zookeeper::get(location)
        .await
        .map_err(|e| e.to_string())?;
    let topology =
        parse_config(&document.bytes, &location.to_string()).map_err(|e| e.to_string())?;
    let routed = request
        .fleet
        .as_deref()
        .and_then(|name| topology.fleet_by_name(name))
        .and_then(|fleet| topology.master_of(fleet, request.first))
        .is_some_and(|host| topology.hosts[host].addr == request.target);
    let outcome = if routed {
        let version = document.znode_version;
        let started = Instant::now();
        loop {
            let registered = zookeeper.proxies().await.map_err(|e| e.to_string())?;
            let lagging: Vec<String> = registered
                .entries
                .iter()
                .filter(|(_, entry)| {
                    entry
                        .as_ref()
                        .and_then(|e| e.znode_version)
                        .is_none_or(|v| v < version)
                })
                .map(|(id, _)| id.clone())
                .collect();
            if lagging.is_empty() {
                break;
            }
            if started.elapsed() >= ADOPT_TIMEOUT {
                return Err(format!(
                    "the killed `{what}` wrote its map (znode version {version}) but {} do not run it after {}s: \
                     its pause records {} stay; RESUME SHARDS {}-{} FORCE once SHOW PROXIES shows them on it",
                    lagging.join(", "),
                    ADOPT_TIMEOUT.as_secs(),
                    ids.join(", "),
                    request.first,
                    request.last
                ));
            }
            tokio::time::sleep(POLL).await;
        }
        format!("its map was written (znode version {version}) and every live proxy runs it")
    } else {
        "its map was not written: every proxy runs the old one".to_owned()
    };
    zookeeper.delete_pauses(&ids).await.map_err(|e| {
        format!(
            "deleting the killed cutover's pause records {}: {e}",
            ids.join(", ")
        )
    })?;
    Ok(Some(format!(
        "took over the pause records {} of a killed `{what}`: {outcome}; resumed",
        ids.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(requested_by: &str, cutover: Option<&str>) -> PauseRecord {
        PauseRecord {
            fleet: Some("main".into()),
            first: 8,
            last: 15,
            requested_by: requested_by.into(),
            user: "cli".into(),
            requested_at_ms: 0,
            timeout_ms: 5000,
            cutover: cutover.map(Into::into),
        }
    }

    #[test]
    fn only_records_of_this_cutover_by_a_gone_process_of_this_host_are_taken_over() {
        let what = "MOVE SHARDS 8-15 IN main TO t:1";
        let gone = u32::MAX - 1;
        let me = std::process::id();
        let records = vec![
            (
                "a".to_owned(),
                record(&format!("cli:here:{gone}"), Some(what)),
            ),
            (
                "b".to_owned(),
                record(&format!("cli:here:{me}"), Some(what)),
            ),
            (
                "c".to_owned(),
                record(&format!("cli:elsewhere:{gone}"), Some(what)),
            ),
            (
                "d".to_owned(),
                record(
                    &format!("cli:here:{gone}"),
                    Some("MOVE SHARDS 0-7 IN main TO t:1"),
                ),
            ),
            ("e".to_owned(), record(&format!("cli:here:{gone}"), None)),
            ("f".to_owned(), record("proxy-1", Some(what))),
        ];
        assert_eq!(
            left_by_killed(&records, what, "here:1"),
            vec!["a".to_owned()]
        );
    }
}
