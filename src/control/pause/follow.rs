//! Every ZooKeeper-sourced proxy follows the fleet-wide pause records:
//! a record it has not applied yet goes to its own pause gate exactly as
//! a local `PAUSE SHARDS` (same drain, bounded by the record's timeout),
//! then it acks; a record gone is resumed on its gate. Records found at
//! start are applied before the client listener opens; after a new
//! session, new records are applied (and every applied one acked again)
//! before gone ones are resumed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tracing::{info, warn};
use zookeeper_client as zk;

use super::{pause, resume};
use crate::control::zookeeper::{PauseRecord, ZkError, ZooKeeper};
use crate::control::Control;
use crate::sync::lock;

/// Pause before retrying a failed read of the records.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// The records this proxy has applied to its gate, by id.
#[derive(Debug, Default)]
pub struct Followed(Mutex<BTreeMap<String, PauseRecord>>);

impl Followed {
    /// The ids applied now.
    pub fn ids(&self) -> Vec<String> {
        lock(&self.0).keys().cloned().collect()
    }
}

/// Applies the records present now and acks them: the start's step,
/// before the client listener opens.
pub async fn apply_found(control: &Control) -> Result<(), ZkError> {
    let Some(zookeeper) = &control.zookeeper else {
        return Ok(());
    };
    let records = zookeeper.pause_records().await?;
    reconcile(control, zookeeper, &records).await;
    Ok(())
}

/// Starts the task that follows the records (nothing for a file-sourced
/// proxy).
pub fn spawn_follower(control: &Arc<Control>) {
    let Some(zookeeper) = control.zookeeper.clone() else {
        return;
    };
    let weak = Arc::downgrade(control);
    let zk = Arc::clone(&zookeeper);
    zookeeper.keep(tokio::spawn(async move { follow(weak, zk).await }));
}

async fn follow(control: Weak<Control>, zookeeper: Arc<ZooKeeper>) {
    loop {
        if zookeeper.is_closed() {
            return;
        }
        let Some(raises) = control.upgrade().map(|c| c.engine.fence.raises()) else {
            return;
        };
        let watched = zookeeper.watch_pause_records(raises).await;
        let Some(control) = control.upgrade() else {
            return;
        };
        match watched {
            Ok(watched) => {
                reconcile(&control, &zookeeper, &watched.records).await;
                zookeeper.pauses_applied(&control, watched.mark);
                drop(control);
                tokio::select! {
                    () = wait(watched.watcher, watched.states) => {}
                    () = zookeeper.raised_after(watched.mark) => {}
                }
            }
            Err(e) => {
                drop(control);
                warn!("cannot read the fleet-wide pauses ({e}); retrying");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// Waits for the list to change or the session to change state.
async fn wait(watcher: zk::OneshotWatcher, mut states: zk::StateWatcher) {
    tokio::select! {
        _ = watcher.changed() => {}
        _ = states.changed() => {}
    }
}

/// Brings the gate in line with `records`: applies (and acks) the new
/// ones first, acks the applied ones again (a new session lost the acks),
/// then resumes the applied ones that are gone.
async fn reconcile(control: &Control, zookeeper: &ZooKeeper, records: &[(String, PauseRecord)]) {
    let own = &control.process.id;
    for (id, record) in records {
        let applied = lock(&control.followed.0).contains_key(id);
        if !applied {
            if !apply(control, id, record).await {
                continue;
            }
            lock(&control.followed.0).insert(id.clone(), record.clone());
        }
        match zookeeper.ack(id, own).await {
            Ok(true) => {}
            Ok(false) => {
                info!(pause = %id, "the fleet-wide pause ended before this proxy acked it")
            }
            Err(e) => {
                warn!(pause = %id, "cannot ack the fleet-wide pause ({e}); acked again on the next change")
            }
        }
    }
    let gone: Vec<(String, PauseRecord)> = {
        let mut followed = lock(&control.followed.0);
        let gone: Vec<String> = followed
            .keys()
            .filter(|id| !records.iter().any(|(present, _)| present == *id))
            .cloned()
            .collect();
        gone.into_iter()
            .filter_map(|id| followed.remove(&id).map(|record| (id, record)))
            .collect()
    };
    for (id, record) in gone {
        match resume(
            &control.engine.pauses,
            record.fleet.as_deref(),
            record.first,
            record.last,
        ) {
            Ok(report) => {
                info!(pause = %id, released = report.released, "fleet-wide pause ended: shards {}-{} resumed", record.first, record.last);
            }
            Err(e) => warn!(pause = %id, "fleet-wide pause ended but resuming it here failed: {e}"),
        }
    }
}

/// Applies one record to the gate; false (logged) when it could not be.
async fn apply(control: &Control, id: &str, record: &PauseRecord) -> bool {
    let topology = control.engine.topology.load();
    let paused = pause(
        &control.engine.pauses,
        &topology,
        record.fleet.as_deref(),
        record.first,
        record.last,
        Duration::from_millis(record.timeout_ms),
    )
    .await;
    match paused {
        Ok(report) => {
            info!(pause = %id, drained = report.drained, "fleet-wide pause applied: shards {}-{} paused, requested by {}", record.first, record.last, record.requested_by);
            true
        }
        Err(e) => {
            warn!(pause = %id, "cannot apply the fleet-wide pause requested by {}: {e}", record.requested_by);
            false
        }
    }
}
