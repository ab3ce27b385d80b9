//! `PROMOTE REPLICA` on a ZooKeeper-sourced proxy: the promoted document
//! goes through the cutover sequence, so every proxy of the document
//! pauses, follows the version-checked push and resumes together. Several
//! proxies promoting the same master at once (automatic failover): the
//! first push wins, the others fail on the version check or find the
//! master no longer a master.

use mysql_async::Conn;

use super::{FailoverError, PromoteOptions, PromoteReport};
use crate::control::cutover::{self, Coordinator, FleetSide, Plan, Range};
use crate::control::reload::ReloadTrigger;
use crate::control::replica::{read_only, Access, OldMaster};
use crate::control::zookeeper::ZooKeeper;
use crate::control::Control;
use crate::topology::rewrite;

impl Control {
    /// Promotes `master`'s replicas in the document at `zookeeper`'s znode,
    /// for every proxy of it.
    pub(super) async fn promote_shared(
        &self,
        zookeeper: &ZooKeeper,
        master: &str,
        options: PromoteOptions,
    ) -> Result<PromoteReport, FailoverError> {
        let coordinator = Coordinator::Fleet(FleetSide {
            zookeeper,
            requester: self.process.id.clone(),
            user: "PROMOTE REPLICA".to_owned(),
        });
        let base = coordinator
            .base()
            .await
            .map_err(|e| FailoverError::Cutover(Box::new(e)))?;
        let promoted = rewrite::promote_replica(&base.text, &base.source_name, master)
            .map_err(FailoverError::NotPromotable)?;
        let entries = &promoted.entries;
        let master = entries
            .first()
            .map_or_else(|| master.to_owned(), |e| e.master.clone());
        let mut replicas: Vec<String> = entries.iter().map(|e| e.replica.clone()).collect();
        replicas.sort();
        replicas.dedup();
        self.refuse_lagging(&base.topology, &master, &replicas)?;
        let access = Access::of(&base.topology);
        let mut targets = Vec::new();
        for replica in &replicas {
            match access.open(replica).await {
                Ok(conn) => targets.push((replica.clone(), conn)),
                Err(reason) => {
                    disconnect(targets).await;
                    return Err(FailoverError::ReplicaDown {
                        replica: replica.clone(),
                        reason,
                    });
                }
            }
        }
        let source = match access.old_master(&master, &mut targets).await {
            OldMaster::Up(conn) => Some(conn),
            OldMaster::Down(_) => None,
            OldMaster::Alive(why) => {
                disconnect(targets).await;
                return Err(FailoverError::MasterAlive { master, why });
            }
        };
        let mut notes = Vec::new();
        if !options.stop_replication {
            for (replica, conn) in &mut targets {
                if read_only(conn).await == Ok(true) {
                    notes.push(format!(
                        "{replica} is read_only: writes fail until you run SET GLOBAL read_only = 0 on it"
                    ));
                }
            }
        }
        let ranges: Vec<Range> = entries
            .iter()
            .map(|e| Range {
                fleet: e.fleet.clone(),
                first: e.first,
                last: e.last,
            })
            .collect();
        let changes = entries.iter().map(ToString::to_string).collect();
        let plan = Plan {
            what: format!("PROMOTE REPLICA {master}"),
            ranges: ranges.clone(),
            source: (master.clone(), source),
            targets,
            text: promoted.text.clone(),
            trigger: ReloadTrigger::Promotion,
            changes,
            stop_replication: options.stop_replication,
            fence_source: true,
        };
        let steps = cutover::run(&coordinator, &base, plan, &mut notes)
            .await
            .map_err(|(error, _)| FailoverError::Cutover(Box::new(error)))?;
        notes.splice(0..0, steps.iter().map(ToString::to_string));
        if !options.stop_replication {
            for replica in &replicas {
                notes.push(format!(
                    "{replica} still replicates from {master}: once the old master is fenced, run STOP SLAVE; RESET SLAVE ALL on it"
                ));
            }
        }
        Ok(PromoteReport {
            master,
            replica: replicas.join(", "),
            ranges: ranges.iter().map(ToString::to_string).collect(),
            replication_stopped: options.stop_replication,
            config_written: None,
            notes,
        })
    }
}

async fn disconnect(targets: Vec<(String, Conn)>) {
    for (_, conn) in targets {
        let _ = conn.disconnect().await;
    }
}
