//! Failover: `PROMOTE REPLICA <master>` points the master's ranges at its
//! replica, in memory and in the config file (written atomically).
//!
//! Before anything changes, the replica must answer. A master this proxy
//! cannot reach is not taken for dead while it answers with an error or
//! its replica's IO thread is connected to it. If the old master still
//! answers, the master's shards are paused first (the cutover gate: new
//! statements wait, running ones drain) and it is made `read_only`, so no
//! write (through the proxy or not) lands on it after its GTID position is
//! read; then the replica must apply everything up to that position
//! (`MASTER_GTID_WAIT`),
//! so no acknowledged write is left behind; the pause ends once the new
//! routing table is in force (or the promotion failed), and the waiting
//! statements go to the new master. The file is edited as text
//! ([`crate::topology::rewrite`]) so the operator's comments stay, written
//! to a temporary file in the same directory, synced and renamed over the
//! old one (on the blocking pool); only then is the new routing table
//! swapped in.
//!
//! Here: the errors, the report and the promotion's steps in order. The
//! pause it holds is in `hold`, the connections to the hosts and the GTID
//! catch-up in `replica`, the config file work in `config_file`, and
//! `health.auto_failover` (promoting on the health checker's events) in
//! `auto`.

mod auto;
mod config_file;
mod hold;
mod shared;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use tracing::info;

use super::Control;
use crate::control::cutover::CutoverError;
use crate::control::reload::ReloadTrigger;
use crate::control::replica::{
    fence, gtid, read_only, set_read_only, wait_for, Access, CatchUpError, OldMaster,
};
use crate::stats::operator::PromotionTrigger;
use crate::topology::rewrite::{self, PromotedEntry, RewriteError};
use crate::topology::Topology;
use config_file::{off_runtime, promote_in_memory, rewrite_file};
use hold::PromotionPause;

pub use crate::control::replica::{CATCH_UP_WAIT, STOP_REPLICATION};
pub use auto::spawn_auto_failover;

/// Knobs of [`Control::promote_replica`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PromoteOptions {
    /// Also stop replication on the replica, forget its master and make it
    /// writable ([`STOP_REPLICATION`]).
    pub stop_replication: bool,
}

/// What a promotion did.
#[derive(Debug, Clone)]
pub struct PromoteReport {
    /// The old master, as the config writes it.
    pub master: String,
    /// The replica that took over (several, comma-separated, if the
    /// master's ranges had different replicas).
    pub replica: String,
    /// The ranges moved, as `main 0-2047`.
    pub ranges: Vec<String>,
    /// Whether replication was stopped on the replica.
    pub replication_stopped: bool,
    /// The config file rewritten, if the proxy has one.
    pub config_written: Option<PathBuf>,
    /// What the operator should know (catch-up position, what is left to
    /// do by hand).
    pub notes: Vec<String>,
}

/// Why a promotion was refused or stopped. Unless the message says
/// otherwise, nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum FailoverError {
    /// The address is not a master, or one of its ranges has no replica.
    #[error("{0}")]
    NotPromotable(RewriteError),
    /// The master's shards could not be paused (or stay paused) while the
    /// replica caught up.
    #[error("cannot pause shards {first}-{last} of fleet {fleet} to hold writes during the promotion: {reason}; nothing was changed")]
    Pause {
        /// Fleet name.
        fleet: String,
        /// First shard of the range.
        first: u32,
        /// Last shard of the range.
        last: u32,
        /// Why.
        reason: String,
    },
    /// The replica does not answer.
    #[error("replica {replica} does not answer ({reason}); nothing was changed")]
    ReplicaDown {
        /// The replica.
        replica: String,
        /// The connect or ping error.
        reason: String,
    },
    /// The master still answers and the replica has not applied all of its
    /// transactions.
    #[error(
        "replica {replica} has not caught up with master {master}: the master is at GTID {master_pos}, \
         the replica at {replica_pos} after waiting {}s (writes through the proxy were paused meanwhile); \
         nothing was changed. Fix replication, or stop other writers of the master, then promote again",
        waited.as_secs()
    )]
    ReplicaBehind {
        /// The old master.
        master: String,
        /// The replica.
        replica: String,
        /// `@@gtid_binlog_pos` of the master.
        master_pos: String,
        /// `@@gtid_slave_pos` of the replica.
        replica_pos: String,
        /// How long we waited.
        waited: Duration,
    },
    /// A statement on the replica failed.
    #[error("replica {replica}: {what} failed: {reason}; the routing table was not changed")]
    Replica {
        /// The replica.
        replica: String,
        /// What was being done.
        what: String,
        /// The error.
        reason: String,
    },
    /// The file on disk is not the version in force (edited, not reloaded).
    #[error(
        "the config file {} has changes that are not loaded (version {on_disk} on disk, {in_force} in force); \
         RELOAD CONFIG or undo them, then promote again. The routing table was not changed",
        path.display()
    )]
    FileChanged {
        /// The config file.
        path: PathBuf,
        /// Version of the file on disk.
        on_disk: String,
        /// Version in force.
        in_force: String,
    },
    /// The config file could not be edited, read or written.
    #[error("config file {}: {reason}. The routing table was not changed", path.display())]
    ConfigFile {
        /// The config file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The promotion through ZooKeeper stopped (the message says what
    /// changed).
    #[error("{0}")]
    Cutover(Box<CutoverError>),
    /// A reload ran while the promotion was being checked.
    #[error("the routing table changed (a reload) while the promotion was being checked; run PROMOTE REPLICA again")]
    Raced,
    /// The replica is further behind its master than
    /// `health.max_promote_lag_ms`, as the health checker last read it.
    #[error(
        "replica {replica} is not promoted: it is behind master {master} by more than          health.max_promote_lag_ms ({max_ms} ms): {lag}; nothing was changed. Let it catch up          (START SLAVE if a replication thread is stopped), then promote again"
    )]
    ReplicaLagging {
        /// The old master.
        master: String,
        /// The replica.
        replica: String,
        /// Its lag, described.
        lag: String,
        /// `health.max_promote_lag_ms`.
        max_ms: u64,
    },
    /// The old master cannot be used by this proxy but runs: promoting
    /// would split the writes.
    #[error(
        "master {master} is not promoted: {why}; nothing was changed. If it is really gone, stop it \
         (or STOP SLAVE on its replica), then promote again"
    )]
    MasterAlive {
        /// The old master.
        master: String,
        /// The evidence that it runs.
        why: String,
    },
    /// A promotion that failed after the old master was set `read_only`,
    /// which could not be undone.
    #[error(
        "{cause}. The old master {master} was set read_only = 1 and could NOT be made writable again ({reason}): \
         SET GLOBAL read_only = 0 on it"
    )]
    ReadOnlyLeft {
        /// The failure.
        cause: Box<FailoverError>,
        /// The old master.
        master: String,
        /// Why `read_only = 0` failed.
        reason: String,
    },
}

impl From<CatchUpError> for FailoverError {
    fn from(error: CatchUpError) -> Self {
        match error {
            CatchUpError::Behind {
                master,
                replica,
                master_pos,
                replica_pos,
                waited,
            } => FailoverError::ReplicaBehind {
                master,
                replica,
                master_pos,
                replica_pos,
                waited,
            },
            CatchUpError::Statement {
                replica,
                what,
                reason,
            } => FailoverError::Replica {
                replica,
                what,
                reason,
            },
        }
    }
}

impl Control {
    /// Counts a promotion's `outcome` in `/metrics`: done, or refused for
    /// the replica's lag.
    pub fn count_promotion(
        &self,
        trigger: PromotionTrigger,
        outcome: &Result<PromoteReport, FailoverError>,
    ) {
        let counters = &self.engine.stats.operator;
        match outcome {
            Ok(_) => counters.promoted(trigger),
            Err(FailoverError::ReplicaLagging { .. }) => {
                counters.promotion_refused_for_lag(trigger)
            }
            Err(_) => {}
        }
    }

    /// Refuses a promotion to a replica whose lag, as the health checker
    /// last read it, is above `health.max_promote_lag_ms` (an unknown lag
    /// does not refuse: the catch-up wait still holds writes until the
    /// replica has the master's position when the master answers).
    fn refuse_lagging(
        &self,
        topology: &Topology,
        master: &str,
        replicas: &[String],
    ) -> Result<(), FailoverError> {
        let max_ms = topology.config.health.max_promote_lag_ms;
        for replica in replicas {
            let lag = self
                .engine
                .backends
                .host(replica)
                .and_then(|host| host.health().lag);
            if let Some(lag) = lag.filter(|lag| lag.exceeds(Duration::from_millis(max_ms))) {
                return Err(FailoverError::ReplicaLagging {
                    master: master.to_owned(),
                    replica: replica.clone(),
                    lag: lag.describe(),
                    max_ms,
                });
            }
        }
        Ok(())
    }

    /// Points every range whose master is `master` at its replica: checks
    /// the replica answers and the master is not alive out of this proxy's
    /// reach; if the master answers, pauses its shards and sets it
    /// `read_only`, then waits until the replica has applied the master's
    /// position; rewrites the config file; swaps in the new routing table;
    /// optionally stops replication on the replica; ends its pause (on
    /// every path, errors included; a failure before the file is written
    /// makes the old master writable again). On a ZooKeeper-sourced proxy the same happens for every
    /// proxy of the document, through the cutover sequence.
    pub async fn promote_replica(
        &self,
        master: &str,
        options: PromoteOptions,
    ) -> Result<PromoteReport, FailoverError> {
        if let Some(zookeeper) = &self.zookeeper {
            return self.promote_shared(zookeeper, master, options).await;
        }
        let seen = self.engine.topology.load();
        let (_, entries) = rewrite::promote_in_config(&seen.config, master)
            .map_err(FailoverError::NotPromotable)?;
        let master = entries[0].master.clone();
        let mut replicas: Vec<String> = entries.iter().map(|e| e.replica.clone()).collect();
        replicas.sort();
        replicas.dedup();
        self.refuse_lagging(&seen, &master, &replicas)?;
        let access = Access::of(&seen);
        let mut notes = Vec::new();

        let mut replica_conns = Vec::new();
        for replica in &replicas {
            let conn = access
                .open(replica)
                .await
                .map_err(|reason| FailoverError::ReplicaDown {
                    replica: replica.clone(),
                    reason,
                })?;
            replica_conns.push((replica.clone(), conn));
        }
        let mut paused = None;
        let mut fenced = false;
        let mut source = None;
        match access.old_master(&master, &mut replica_conns).await {
            OldMaster::Up(mut conn) => {
                let drain = Duration::from_millis(seen.config.pause.drain_timeout_ms);
                match PromotionPause::hold(&self.engine.pauses, &seen, &entries, drain).await {
                    Ok(pause) => paused = Some(pause),
                    Err(e) => {
                        let _ = conn.disconnect().await;
                        return Err(e);
                    }
                }
                match fence(&mut conn).await {
                    Ok(set) => fenced = set,
                    Err(reason) => {
                        let _ = conn.disconnect().await;
                        return Err(FailoverError::Cutover(Box::new(CutoverError::Fence {
                            addr: master.clone(),
                            reason,
                        })));
                    }
                }
                source = Some(conn);
            }
            OldMaster::Alive(why) => return Err(FailoverError::MasterAlive { master, why }),
            OldMaster::Down(reason) => {
                for (replica, conn) in &mut replica_conns {
                    let applied = gtid(conn, "@@gtid_slave_pos")
                        .await
                        .unwrap_or_else(|e| format!("unknown ({e})"));
                    notes.push(format!(
                        "master {master} does not answer ({reason}): transactions it had not shipped are not on {replica}, which had applied GTID {applied}"
                    ));
                }
            }
        }
        let committed = async {
            if let Some(mut conn) = source {
                let position = gtid(&mut conn, "@@gtid_binlog_pos").await;
                let _ = conn.disconnect().await;
                let position = position.map_err(|reason| FailoverError::Replica {
                    replica: master.clone(),
                    what: "reading the master's @@gtid_binlog_pos".into(),
                    reason,
                })?;
                for (replica, conn) in &mut replica_conns {
                    wait_for(conn, replica, &master, &position).await?;
                    notes.push(format!(
                        "master {master} still answers: {replica} had applied all of its transactions (GTID {position})"
                    ));
                }
            }
            self.commit_promotion(&seen, &master, &entries, &mut notes)
                .await
        }
        .await;
        let config_written = match committed {
            Ok(written) => written,
            Err(cause) => {
                if !fenced {
                    return Err(cause);
                }
                return Err(match set_read_only(&access, &master, false).await {
                    Ok(()) => cause,
                    Err(reason) => FailoverError::ReadOnlyLeft {
                        cause: Box::new(cause),
                        master,
                        reason,
                    },
                });
            }
        };
        if fenced {
            notes.push(format!(
                "the old master {master} was set read_only = 1 before its GTID position was read: a writer still pointed at it fails (accounts with READ_ONLY ADMIN still write)"
            ));
        }
        let mut stop_failed = None;
        let mut stopped = Vec::new();
        for (replica, conn) in &mut replica_conns {
            if !options.stop_replication {
                if read_only(conn).await == Ok(true) {
                    notes.push(format!(
                        "{replica} is read_only: writes fail until you run SET GLOBAL read_only = 0 on it"
                    ));
                }
                notes.push(format!(
                    "{replica} still replicates from {master}: once the old master is fenced, run STOP SLAVE; RESET SLAVE ALL on it"
                ));
                continue;
            }
            if stop_failed.is_some() {
                continue;
            }
            for sql in STOP_REPLICATION {
                if let Err(e) = conn.query_drop(sql).await {
                    stop_failed = Some((replica.clone(), sql.to_owned(), e.to_string()));
                    break;
                }
            }
            if stop_failed.is_none() {
                notes.push(format!(
                    "{replica}: replication stopped and forgotten, read_only = 0"
                ));
                stopped.push(replica.clone());
            }
        }
        for (_, conn) in replica_conns {
            let _ = conn.disconnect().await;
        }
        let ranges: Vec<String> = entries
            .iter()
            .map(|e| format!("{} {}-{}", e.fleet, e.first, e.last))
            .collect();
        if let Some(pause) = paused {
            let (held, operator) = pause.release();
            notes.push(format!(
                "shards {} were paused for {} ms: statements for them waited while {} caught up, then went to it",
                ranges.join(", "),
                held.as_millis(),
                replicas.join(", ")
            ));
            if !operator.is_empty() {
                notes.push(format!(
                    "shards {} were paused already and stay paused: RESUME SHARDS them when ready",
                    operator.join(", ")
                ));
            }
        }
        if let Some((host, what, reason)) = stop_failed {
            return Err(FailoverError::Cutover(Box::new(
                CutoverError::StopReplication {
                    host,
                    what,
                    reason,
                    stopped,
                },
            )));
        }
        info!(%master, replica = %replicas.join(", "), ranges = %ranges.join(", "), "replica promoted");
        Ok(PromoteReport {
            master,
            replica: replicas.join(", "),
            ranges,
            replication_stopped: options.stop_replication,
            config_written,
            notes,
        })
    }

    /// Writes the promotion to the config file and swaps in its routing
    /// table, unless a reload ran since `seen` was loaded. The file work
    /// (read, rewrite, build, write and sync) runs on the blocking pool.
    async fn commit_promotion(
        &self,
        seen: &Arc<Topology>,
        master: &str,
        entries: &[PromotedEntry],
        notes: &mut Vec<String>,
    ) -> Result<Option<PathBuf>, FailoverError> {
        let _serial = self.config_status.serialize().await;
        if !Arc::ptr_eq(&self.engine.topology.load(), seen) {
            return Err(FailoverError::Raced);
        }
        let moved = entries.iter().map(ToString::to_string).collect::<Vec<_>>();
        let in_force = self.config_status.snapshot().version;
        let master = master.to_owned();
        let Some(path) = self.config_path.clone() else {
            let config = seen.config.clone();
            let topology = off_runtime(PathBuf::from("<none>"), move || {
                promote_in_memory(config, &master)
            })
            .await?;
            notes.push(
                "this proxy has no config file: promoted in memory only, a restart undoes it"
                    .to_owned(),
            );
            self.install(topology, in_force, ReloadTrigger::Promotion, moved);
            return Ok(None);
        };
        let overrides = self.process.overrides.clone();
        let (topology, version, written) = off_runtime(path.clone(), move || {
            rewrite_file(&path, &master, &in_force, &overrides)
        })
        .await?;
        self.install(topology, version, ReloadTrigger::Promotion, moved);
        Ok(Some(written))
    }
}
