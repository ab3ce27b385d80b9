//! Failover: `PROMOTE REPLICA <master>` points the master's ranges at its
//! replica, in memory and in the config file (written atomically).
//!
//! Before anything changes, the replica must answer. If the old master
//! still answers, the master's shards are paused first (the cutover gate:
//! new statements wait, running ones drain), so no write through the proxy
//! lands on the old master after its GTID position is read; then the
//! replica must apply everything up to that position (`MASTER_GTID_WAIT`),
//! so no acknowledged write is left behind; the pause ends once the new
//! routing table is in force (or the promotion failed), and the waiting
//! statements go to the new master. The file is edited as text
//! ([`crate::topology::rewrite`]) so the operator's comments stay, written
//! to a temporary file in the same directory, synced and renamed over the
//! old one (on the blocking pool); only then is the new routing table
//! swapped in.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tracing::{info, warn};

use super::pause::{PauseError, PauseGate, PausedRange};
use super::reload::{version_of, ReloadTrigger};
use super::Engine;
use crate::backend::health::connect;
use crate::topology::rewrite::{self, PromotedEntry, RewriteError};
use crate::topology::{ConfigErrors, Topology};

/// Longest wait for the replica to apply the master's last transaction.
pub const CATCH_UP_WAIT: Duration = Duration::from_secs(5);

/// What the replica runs when `stop_replication` is asked for (MariaDB).
pub const STOP_REPLICATION: [&str; 3] =
    ["STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0"];

/// Knobs of [`Engine::promote_replica`].
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
         RELOAD CONFIG or undo them, then promote again. The routing table was not changed{}",
        path.display(),
        replication_note(*replication_stopped)
    )]
    FileChanged {
        /// The config file.
        path: PathBuf,
        /// Version of the file on disk.
        on_disk: String,
        /// Version in force.
        in_force: String,
        /// Whether replication was already stopped on the replica.
        replication_stopped: bool,
    },
    /// The config file could not be edited, read or written.
    #[error("config file {}: {reason}. The routing table was not changed{}", path.display(), replication_note(*replication_stopped))]
    ConfigFile {
        /// The config file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
        /// Whether replication was already stopped on the replica.
        replication_stopped: bool,
    },
    /// A reload ran while the promotion was being checked.
    #[error("the routing table changed (a reload) while the promotion was being checked; run PROMOTE REPLICA again{}", replication_note(*replication_stopped))]
    Raced {
        /// Whether replication was already stopped on the replica.
        replication_stopped: bool,
    },
}

fn replication_note(stopped: bool) -> &'static str {
    if stopped {
        " (replication on the replica WAS already stopped and it is writable)"
    } else {
        ""
    }
}

impl Engine {
    /// Points every range whose master is `master` at its replica: checks
    /// the replica answers and, if the master still answers, pauses the
    /// master's shards, then waits until the replica has applied the
    /// master's position; optionally stops replication on it; rewrites the
    /// config file; swaps in the new routing table; ends its pause (on
    /// every path, errors included).
    pub async fn promote_replica(
        &self,
        master: &str,
        options: PromoteOptions,
    ) -> Result<PromoteReport, FailoverError> {
        let seen = self.topology.load();
        let (_, entries) = rewrite::promote_in_config(&seen.config, master)
            .map_err(FailoverError::NotPromotable)?;
        let master = entries[0].master.clone();
        let mut replicas: Vec<String> = entries.iter().map(|e| e.replica.clone()).collect();
        replicas.sort();
        replicas.dedup();
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
        match access.open(&master).await {
            Ok(mut conn) => {
                let drain = Duration::from_millis(seen.config.pause.drain_timeout_ms);
                match PromotionPause::hold(&self.pauses, &seen, &entries, drain).await {
                    Ok(pause) => paused = Some(pause),
                    Err(e) => {
                        let _ = conn.disconnect().await;
                        return Err(e);
                    }
                }
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
                notes.push(format!(
                    "master {master} still answers and accepts writes from other clients: fence it (read_only, or stop it)"
                ));
            }
            Err(reason) => {
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

        let mut replication_stopped = false;
        for (replica, conn) in &mut replica_conns {
            if options.stop_replication {
                for sql in STOP_REPLICATION {
                    conn.query_drop(sql)
                        .await
                        .map_err(|e| FailoverError::Replica {
                            replica: replica.clone(),
                            what: sql.to_owned(),
                            reason: format!("{e}{}", replication_note(replication_stopped)),
                        })?;
                    replication_stopped = true;
                }
                notes.push(format!(
                    "{replica}: replication stopped and forgotten, read_only = 0"
                ));
            } else {
                let read_only: Option<u8> =
                    conn.query_first("SELECT @@read_only").await.ok().flatten();
                if read_only == Some(1) {
                    notes.push(format!(
                        "{replica} is read_only: writes fail until you run SET GLOBAL read_only = 0 on it"
                    ));
                }
                notes.push(format!(
                    "{replica} still replicates from {master}: once the old master is fenced, run STOP SLAVE; RESET SLAVE ALL on it"
                ));
            }
        }
        for (_, conn) in replica_conns {
            let _ = conn.disconnect().await;
        }

        let config_written = self
            .commit_promotion(&seen, &master, &entries, &mut notes, replication_stopped)
            .await?;
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
        info!(%master, replica = %replicas.join(", "), ranges = %ranges.join(", "), "replica promoted");
        Ok(PromoteReport {
            master,
            replica: replicas.join(", "),
            ranges,
            replication_stopped,
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
        replication_stopped: bool,
    ) -> Result<Option<PathBuf>, FailoverError> {
        let _serial = self.config_status.serialize().await;
        if !Arc::ptr_eq(&self.topology.load(), seen) {
            return Err(FailoverError::Raced {
                replication_stopped,
            });
        }
        let moved = entries
            .iter()
            .map(|e| {
                format!(
                    "fleet {} shards {}-{} promoted from {} to {}",
                    e.fleet, e.first, e.last, e.master, e.replica
                )
            })
            .collect::<Vec<_>>();
        let in_force = self.config_status.snapshot().version;
        let master = master.to_owned();
        let Some(path) = self.config_path.clone() else {
            let config = seen.config.clone();
            let topology = off_runtime(PathBuf::from("<none>"), replication_stopped, move || {
                promote_in_memory(config, &master, replication_stopped)
            })
            .await?;
            notes.push(
                "this proxy has no config file: promoted in memory only, a restart undoes it"
                    .to_owned(),
            );
            self.install(topology, in_force, ReloadTrigger::Promotion, moved);
            return Ok(None);
        };
        let (topology, version, written) =
            off_runtime(path.clone(), replication_stopped, move || {
                rewrite_file(&path, &master, &in_force, replication_stopped)
            })
            .await?;
        self.install(topology, version, ReloadTrigger::Promotion, moved);
        Ok(Some(written))
    }
}

/// Runs `work` on the blocking pool; a task that failed is reported
/// against the config file `path`.
async fn off_runtime<T: Send + 'static>(
    path: PathBuf,
    replication_stopped: bool,
    work: impl FnOnce() -> Result<T, FailoverError> + Send + 'static,
) -> Result<T, FailoverError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(FailoverError::ConfigFile {
            path,
            reason: format!("the task editing it failed: {e}"),
            replication_stopped,
        })
    })
}

/// The routing table of `config` with `master`'s ranges promoted.
fn promote_in_memory(
    config: crate::topology::Config,
    master: &str,
    replication_stopped: bool,
) -> Result<Topology, FailoverError> {
    let (config, _) =
        rewrite::promote_in_config(&config, master).map_err(FailoverError::NotPromotable)?;
    Topology::from_config(config, "<promotion>").map_err(|errors| FailoverError::ConfigFile {
        path: PathBuf::from("<none>"),
        reason: format!("the promoted config is invalid: {errors}"),
        replication_stopped,
    })
}

/// Rewrites the config file at `path` (which must still be version
/// `in_force`) with `master`'s ranges promoted, after checking the new
/// text builds; returns its routing table, its version and the file
/// written. Blocking.
fn rewrite_file(
    path: &Path,
    master: &str,
    in_force: &str,
    replication_stopped: bool,
) -> Result<(Topology, String, PathBuf), FailoverError> {
    let file_error = |reason: String| FailoverError::ConfigFile {
        path: path.to_owned(),
        reason,
        replication_stopped,
    };
    let bytes = std::fs::read(path).map_err(|e| file_error(format!("cannot read it: {e}")))?;
    let on_disk = version_of(&bytes);
    if on_disk != in_force {
        return Err(FailoverError::FileChanged {
            path: path.to_owned(),
            on_disk,
            in_force: in_force.to_owned(),
            replication_stopped,
        });
    }
    let source = path.display().to_string();
    let text = String::from_utf8(bytes).map_err(|e| file_error(format!("not UTF-8 text: {e}")))?;
    let promoted =
        rewrite::promote_replica(&text, &source, master).map_err(|e| file_error(e.to_string()))?;
    let topology =
        Topology::from_yaml_str(&promoted.text, &source).map_err(|errors: ConfigErrors| {
            file_error(format!(
                "the promoted config would be invalid, so it was not written:\n{errors}"
            ))
        })?;
    let written = write_atomically(path, &promoted.text)
        .map_err(|e| file_error(format!("cannot write it: {e}")))?;
    Ok((topology, version_of(promoted.text.as_bytes()), written))
}

/// The shards a promotion holds paused while the replica catches up: every
/// range of the old master. Ranges it paused itself are resumed when it is
/// dropped, on every path; ranges an operator had paused already are used
/// as they are and left paused.
struct PromotionPause<'a> {
    gate: &'a PauseGate,
    /// Ranges paused by the promotion: (fleet, first, last).
    ours: Vec<(String, u32, u32)>,
    /// Parts of the master's ranges that were paused already, as `main 0-99`.
    operator: Vec<String>,
    started: Instant,
}

/// How often [`PromotionPause::hold`] looks again at shards it waits for.
const PAUSE_POLL: Duration = Duration::from_millis(10);

/// Attempts at pausing what is not paused yet, when operators pause parts
/// of the same range meanwhile.
const PAUSE_ATTEMPTS: usize = 5;

impl<'a> PromotionPause<'a> {
    /// Pauses every range of `entries` not paused yet, then waits (within
    /// `drain_timeout` in all) until every shard of them is paused and
    /// nothing runs on them (a range an operator is still draining).
    async fn hold(
        gate: &'a PauseGate,
        topology: &Topology,
        entries: &[PromotedEntry],
        drain_timeout: Duration,
    ) -> Result<PromotionPause<'a>, FailoverError> {
        let started = Instant::now();
        let deadline = started + drain_timeout;
        let mut held = PromotionPause {
            gate,
            ours: Vec::new(),
            operator: Vec::new(),
            started,
        };
        for entry in entries {
            let refused = |reason: String| FailoverError::Pause {
                fleet: entry.fleet.clone(),
                first: entry.first,
                last: entry.last,
                reason,
            };
            let before = unpaused(&gate.paused(), &entry.fleet, entry.first, entry.last);
            let mut attempts = 0;
            'pausing: loop {
                let gaps = unpaused(&gate.paused(), &entry.fleet, entry.first, entry.last);
                if gaps.is_empty() {
                    break;
                }
                attempts += 1;
                if attempts > PAUSE_ATTEMPTS {
                    return Err(refused(
                        "other pauses of these shards kept starting and ending meanwhile".into(),
                    ));
                }
                for (first, last) in gaps {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match gate
                        .pause(topology, Some(&entry.fleet), first, last, left)
                        .await
                    {
                        Ok(_) => held.ours.push((entry.fleet.clone(), first, last)),
                        Err(PauseError::AlreadyPaused { .. }) => continue 'pausing,
                        Err(e) => return Err(refused(e.to_string())),
                    }
                }
            }
            held.operator.extend(
                paused_parts(&before, entry.first, entry.last)
                    .into_iter()
                    .map(|(first, last)| format!("{} {first}-{last}", entry.fleet)),
            );
        }
        for entry in entries {
            held.wait_drained(entry, deadline).await?;
        }
        Ok(held)
    }

    /// Waits until every shard of `entry` is paused and nothing runs on it.
    async fn wait_drained(
        &self,
        entry: &PromotedEntry,
        deadline: Instant,
    ) -> Result<(), FailoverError> {
        loop {
            let gaps = unpaused(&self.gate.paused(), &entry.fleet, entry.first, entry.last);
            let busy = (entry.first..=entry.last)
                .find(|shard| self.gate.running_on(&entry.fleet, *shard) > 0);
            let reason = match (gaps.first(), busy) {
                (None, None) => return Ok(()),
                (Some((first, last)), _) => {
                    format!("shards {first}-{last} were resumed by someone else meanwhile")
                }
                (None, Some(shard)) => format!(
                    "statements still run on shard {shard}, paused by an operator whose PAUSE is still draining"
                ),
            };
            if Instant::now() >= deadline {
                return Err(FailoverError::Pause {
                    fleet: entry.fleet.clone(),
                    first: entry.first,
                    last: entry.last,
                    reason,
                });
            }
            tokio::time::sleep(PAUSE_POLL).await;
        }
    }

    /// Ends the promotion's own pauses; returns how long they were held
    /// and the ranges left paused for their operator.
    fn release(self) -> (Duration, Vec<String>) {
        let held = self.started.elapsed();
        let operator = self.operator.clone();
        drop(self);
        (held, operator)
    }
}

impl Drop for PromotionPause<'_> {
    fn drop(&mut self) {
        for (fleet, first, last) in self.ours.drain(..) {
            if let Err(e) = self.gate.resume(Some(&fleet), first, last) {
                warn!(%fleet, first, last, error = %e, "the promotion could not resume the shards it paused");
            }
        }
    }
}

/// The parts of `first..=last` of `fleet` that no range of `paused` covers.
fn unpaused(paused: &[PausedRange], fleet: &str, first: u32, last: u32) -> Vec<(u32, u32)> {
    let mut covered: Vec<(u32, u32)> = paused
        .iter()
        .filter(|p| p.fleet == fleet)
        .map(|p| (p.first, p.last))
        .collect();
    covered.sort_unstable();
    let mut gaps = Vec::new();
    let mut next = u64::from(first);
    for (a, b) in covered {
        if u64::from(b) < next || a > last {
            continue;
        }
        if u64::from(a) > next {
            gaps.push((next as u32, a - 1));
        }
        next = u64::from(b) + 1;
    }
    if next <= u64::from(last) {
        gaps.push((next as u32, last));
    }
    gaps
}

/// The parts of `first..=last` that are not in `gaps` (its paused parts).
fn paused_parts(gaps: &[(u32, u32)], first: u32, last: u32) -> Vec<(u32, u32)> {
    let mut parts = Vec::new();
    let mut next = u64::from(first);
    for (a, b) in gaps {
        if u64::from(*a) > next {
            parts.push((next as u32, a - 1));
        }
        next = u64::from(*b) + 1;
    }
    if next <= u64::from(last) {
        parts.push((next as u32, last));
    }
    parts
}

/// How the promotion reaches the hosts: the operations account, bounded by
/// the health check timeout.
struct Access {
    user: String,
    password: String,
    timeout: Duration,
}

impl Access {
    fn of(topology: &Topology) -> Self {
        let account = topology.config.operations_account();
        Self {
            user: account.user,
            password: account.password,
            timeout: Duration::from_millis(topology.config.health.timeout_ms.max(1)),
        }
    }

    /// A connection to `addr` that answered a ping.
    async fn open(&self, addr: &str) -> Result<Conn, String> {
        let mut conn = connect(addr, &self.user, &self.password, self.timeout).await?;
        match tokio::time::timeout(self.timeout, conn.ping()).await {
            Ok(Ok(())) => Ok(conn),
            Ok(Err(e)) => Err(format!("ping failed: {e}")),
            Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
        }
    }
}

/// A GTID position variable of the server.
async fn gtid(conn: &mut Conn, variable: &str) -> Result<String, String> {
    conn.query_first::<Option<String>, _>(format!("SELECT {variable}"))
        .await
        .map(|v| v.flatten().unwrap_or_default())
        .map_err(|e| e.to_string())
}

/// Waits (at most [`CATCH_UP_WAIT`]) until `replica` has applied `position`.
async fn wait_for(
    conn: &mut Conn,
    replica: &str,
    master: &str,
    position: &str,
) -> Result<(), FailoverError> {
    let waited: Option<i64> = conn
        .exec_first(
            "SELECT MASTER_GTID_WAIT(?, ?)",
            (position, CATCH_UP_WAIT.as_secs_f64()),
        )
        .await
        .map_err(|e| FailoverError::Replica {
            replica: replica.to_owned(),
            what: format!("MASTER_GTID_WAIT('{position}')"),
            reason: e.to_string(),
        })?
        .flatten();
    if waited == Some(0) {
        return Ok(());
    }
    let replica_pos = gtid(conn, "@@gtid_slave_pos")
        .await
        .unwrap_or_else(|e| format!("unknown ({e})"));
    warn!(%master, %replica, %position, %replica_pos, "promotion refused: replica behind");
    Err(FailoverError::ReplicaBehind {
        master: master.to_owned(),
        replica: replica.to_owned(),
        master_pos: position.to_owned(),
        replica_pos,
        waited: CATCH_UP_WAIT,
    })
}

/// Replaces the file at `path` (the file a symlink points to, if it is
/// one) with `text`: a temporary file in the same directory, synced,
/// renamed over it, then the directory synced. Returns the file written.
pub fn write_atomically(path: &Path, text: &str) -> io::Result<PathBuf> {
    let target = std::fs::canonicalize(path)?;
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the file has no directory"))?;
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let temp = dir.join(format!(
        ".{}.shardgate-{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.set_permissions(std::fs::metadata(&target)?.permissions())?;
        file.sync_all()?;
        std::fs::rename(&temp, &target)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    std::fs::File::open(dir)?.sync_all()?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{load, SPEC_YAML};
    use std::time::SystemTime;

    fn paused(fleet: &str, first: u32, last: u32) -> PausedRange {
        PausedRange {
            fleet: fleet.to_owned(),
            first,
            last,
            since: SystemTime::now(),
            waiting: 0,
        }
    }

    #[test]
    fn the_unpaused_parts_of_a_range() {
        assert_eq!(unpaused(&[], "main", 0, 2047), [(0, 2047)]);
        let list = [
            paused("main", 100, 199),
            paused("mod", 0, 4095),
            paused("main", 0, 9),
            paused("main", 2000, 3000),
        ];
        assert_eq!(unpaused(&list, "main", 0, 2047), [(10, 99), (200, 1999)]);
        assert_eq!(unpaused(&list, "main", 150, 160), []);
        assert_eq!(unpaused(&list, "mod", 7, 8), []);
        assert_eq!(
            unpaused(&[paused("main", 0, u32::MAX)], "main", 5, u32::MAX),
            []
        );
        assert_eq!(
            paused_parts(&[(10, 99), (200, 1999)], 0, 2047),
            [(0, 9), (100, 199), (2000, 2047)]
        );
        assert_eq!(paused_parts(&[(0, 2047)], 0, 2047), []);
    }

    fn entry(first: u32, last: u32) -> PromotedEntry {
        PromotedEntry {
            fleet: "main".into(),
            first,
            last,
            master: "127.0.0.1:3307".into(),
            replica: "127.0.0.1:3309".into(),
        }
    }

    fn ranges(gate: &PauseGate) -> Vec<(String, u32, u32)> {
        let mut list: Vec<_> = gate
            .paused()
            .into_iter()
            .map(|p| (p.fleet, p.first, p.last))
            .collect();
        list.sort();
        list
    }

    #[tokio::test]
    async fn a_promotion_pauses_the_masters_shards_and_resumes_only_its_own() {
        let engine = Engine::new(load(SPEC_YAML), None);
        let topology = engine.topology.load();
        let gate = &engine.pauses;
        let drain = Duration::from_secs(5);
        gate.pause(&topology, Some("main"), 100, 199, drain)
            .await
            .unwrap();

        let held = PromotionPause::hold(gate, &topology, &[entry(0, 2047)], drain)
            .await
            .unwrap();
        let main = |first, last| ("main".to_owned(), first, last);
        assert_eq!(ranges(gate), [main(0, 99), main(100, 199), main(200, 2047)]);
        assert!((0..=2047).all(|shard| gate.is_paused("main", shard)));
        assert!(!gate.is_paused("main", 2048));
        let (_, operator) = held.release();
        assert_eq!(operator, ["main 100-199"]);
        assert_eq!(ranges(gate), [main(100, 199)], "the operator's pause stays");

        // An error after the pause (here: dropping the guard) resumes too.
        let held = PromotionPause::hold(gate, &topology, &[entry(0, 2047)], drain)
            .await
            .unwrap();
        assert_eq!(ranges(gate).len(), 3);
        drop(held);
        assert_eq!(ranges(gate), [main(100, 199)]);
    }

    #[tokio::test]
    async fn a_promotion_refuses_when_its_shards_cannot_be_paused() {
        let engine = Engine::new(load(SPEC_YAML), None);
        let topology = engine.topology.load();
        let error = PromotionPause::hold(
            &engine.pauses,
            &topology,
            &[entry(0, 9000)],
            Duration::from_secs(1),
        )
        .await
        .err()
        .unwrap();
        let message = error.to_string();
        assert!(
            message.starts_with("cannot pause shards 0-9000 of fleet main"),
            "{message}"
        );
        assert!(message.ends_with("nothing was changed"), "{message}");
        assert!(engine.pauses.paused().is_empty());
    }

    #[test]
    fn atomic_write_replaces_the_file_and_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("shardgate-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.yaml");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.join("link.yaml");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let written = write_atomically(&link, "new").unwrap();
        assert_eq!(written, std::fs::canonicalize(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
