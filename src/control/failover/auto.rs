//! `health.auto_failover`: the consumer of the health checker's host
//! events, promoting the replica of a master marked down.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tracing::{error, warn};

use super::{FailoverError, PromoteOptions};
use crate::backend::health::HostEvent;
use crate::control::Control;
use crate::stats::operator::PromotionTrigger;

/// Receives `events` from the health checker of `control`'s engine until
/// the checker is gone (or `control` dropped), starting a promotion for each
/// [`HostEvent::MasterDown`].
pub fn spawn_auto_failover(control: &Arc<Control>, mut events: UnboundedReceiver<HostEvent>) {
    let control: Weak<Control> = Arc::downgrade(control);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            let Some(control) = control.upgrade() else {
                break;
            };
            match event {
                HostEvent::MasterDown { master, replica } => {
                    tokio::spawn(fail_over(control, master, replica));
                }
            }
        }
    });
}

/// How often a promotion refused because the master looks alive to its
/// replica is tried again while the health checker still sees the master
/// down, and how many times: a replica notices a master that vanished
/// (power, network) only after `slave_net_timeout` (60 s by default).
const ALIVE_RETRY: Duration = Duration::from_secs(5);
const ALIVE_RETRIES: u32 = 24;

/// Promotes the replica of a master that went down. Runs on its own task,
/// so a reload that stops the master's checker does not cut it short.
async fn fail_over(control: Arc<Control>, master: String, replica: String) {
    warn!(%master, %replica, "auto_failover: promoting the replica of a master marked down");
    let options = PromoteOptions {
        stop_replication: false,
    };
    let mut retries = 0;
    loop {
        let outcome = control.promote_replica(&master, options).await;
        control.count_promotion(PromotionTrigger::Auto, &outcome);
        match outcome {
            Ok(report) => warn!(
                %master,
                replica = %report.replica,
                ranges = %report.ranges.join(", "),
                config = ?report.config_written,
                notes = %report.notes.join("; "),
                "auto_failover: replica promoted"
            ),
            Err(e @ FailoverError::MasterAlive { .. })
                if retries < ALIVE_RETRIES && still_down(&control, &master) =>
            {
                retries += 1;
                warn!(
                    %master, %replica, error = %e,
                    "auto_failover: not promoted; trying again in {} s while the master stays down",
                    ALIVE_RETRY.as_secs()
                );
                tokio::time::sleep(ALIVE_RETRY).await;
                continue;
            }
            Err(e @ FailoverError::ReplicaLagging { .. }) => error!(
                %master, %replica, error = %e,
                "auto_failover: refused: the replica is too far behind its master; promote it by hand once it caught up"
            ),
            Err(e) if lost_a_race(&e) => warn!(
                %master, %replica, error = %e,
                "auto_failover: not promoted by this proxy (another promotion got there first)"
            ),
            Err(e) => error!(
                %master, %replica, error = %e,
                "auto_failover: promotion failed: do what the error says"
            ),
        }
        break;
    }
}

/// Whether the health checker still marks `master` down.
fn still_down(control: &Control, master: &str) -> bool {
    control
        .engine
        .backends
        .host(master)
        .is_some_and(|host| host.host_health.is_down())
}

/// Whether the promotion failed, with nothing changed, because another one
/// got there first: the master is no master any more, or (through
/// ZooKeeper) its shards are paused already or the document moved on
/// under the push.
fn lost_a_race(error: &FailoverError) -> bool {
    match error {
        FailoverError::NotPromotable(_) => true,
        FailoverError::Cutover(e) => e.lost_a_race(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::cutover::CutoverError;

    #[test]
    fn only_a_lost_race_is_harmless() {
        let race = FailoverError::Cutover(Box::new(CutoverError::Write {
            reason: "the config znode /x is at version 4, not the expected version 3".into(),
        }));
        assert!(lost_a_race(&race));
        let stuck = FailoverError::Cutover(Box::new(CutoverError::Resume {
            reason: "connection loss".into(),
            resume: "0-2047 IN main".into(),
        }));
        assert!(!lost_a_race(&stuck));
        let alive = FailoverError::MasterAlive {
            master: "127.0.0.1:3307".into(),
            why: "its replica is connected to it".into(),
        };
        assert!(!lost_a_race(&alive));
    }
}
