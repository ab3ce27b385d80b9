//! `health.auto_failover`: the consumer of the health checker's host
//! events, promoting the replica of a master marked down.

use std::sync::{Arc, Weak};

use tokio::sync::mpsc::UnboundedReceiver;
use tracing::{error, warn};

use super::{FailoverError, PromoteOptions};
use crate::backend::health::HostEvent;
use crate::control::Control;

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

/// Promotes the replica of a master that went down. Runs on its own task,
/// so a reload that stops the master's checker does not cut it short.
async fn fail_over(control: Arc<Control>, master: String, replica: String) {
    warn!(%master, %replica, "auto_failover: promoting the replica of a master marked down");
    let options = PromoteOptions {
        stop_replication: false,
    };
    match control.promote_replica(&master, options).await {
        Ok(report) => warn!(
            %master,
            replica = %report.replica,
            ranges = %report.ranges.join(", "),
            config = ?report.config_written,
            notes = %report.notes.join("; "),
            "auto_failover: replica promoted"
        ),
        Err(e @ (FailoverError::NotPromotable(_) | FailoverError::Cutover(_)))
            if control.zookeeper.is_some() =>
        {
            warn!(
                %master, %replica, error = %e,
                "auto_failover: not promoted by this proxy (another proxy of the document may have promoted first)"
            );
        }
        Err(e) => error!(%master, %replica, error = %e, "auto_failover: promotion failed"),
    }
}
