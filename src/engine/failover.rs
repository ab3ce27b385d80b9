//! Failover: `PROMOTE REPLICA <master>` points the master's ranges at its
//! replica, in memory and in the config file (written atomically).
//!
//! Before anything changes, the replica must answer, and if the old master
//! still answers, the replica must have applied everything the master has
//! (`MASTER_GTID_WAIT` on the master's `@@gtid_binlog_pos`), so no
//! acknowledged write is left behind. The file is edited as text
//! ([`crate::topology::rewrite`]) so the operator's comments stay, written
//! to a temporary file in the same directory, synced and renamed over the
//! old one; only then is the new routing table swapped in.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tracing::{info, warn};

use super::reload::{version_of, ReloadTrigger};
use super::Engine;
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
         the replica at {replica_pos} after waiting {}s; nothing was changed. Stop the writes \
         (PAUSE SHARDS) or fix replication, then promote again",
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
    /// the replica answers and, if the master still answers, that the
    /// replica has caught up; optionally stops replication on it; rewrites
    /// the config file; swaps in the new routing table.
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
        match access.open(&master).await {
            Ok(mut conn) => {
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

        let config_written =
            self.commit_promotion(&seen, &master, &entries, &mut notes, replication_stopped)?;
        let ranges: Vec<String> = entries
            .iter()
            .map(|e| format!("{} {}-{}", e.fleet, e.first, e.last))
            .collect();
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
    /// table, unless a reload ran since `seen` was loaded.
    fn commit_promotion(
        &self,
        seen: &Arc<Topology>,
        master: &str,
        entries: &[PromotedEntry],
        notes: &mut Vec<String>,
        replication_stopped: bool,
    ) -> Result<Option<PathBuf>, FailoverError> {
        let _serial = self.config_status.serialize();
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
        let Some(path) = self.config_path.as_deref() else {
            let (config, _) = rewrite::promote_in_config(&seen.config, master)
                .map_err(FailoverError::NotPromotable)?;
            let topology = Topology::from_config(config, "<promotion>").map_err(|errors| {
                FailoverError::ConfigFile {
                    path: PathBuf::from("<none>"),
                    reason: format!("the promoted config is invalid: {errors}"),
                    replication_stopped,
                }
            })?;
            notes.push(
                "this proxy has no config file: promoted in memory only, a restart undoes it"
                    .to_owned(),
            );
            let version = self.config_status.snapshot().version;
            self.install(topology, version, ReloadTrigger::Promotion, moved);
            return Ok(None);
        };
        let file_error = |reason: String| FailoverError::ConfigFile {
            path: path.to_owned(),
            reason,
            replication_stopped,
        };
        let bytes = std::fs::read(path).map_err(|e| file_error(format!("cannot read it: {e}")))?;
        let on_disk = version_of(&bytes);
        let in_force = self.config_status.snapshot().version;
        if on_disk != in_force {
            return Err(FailoverError::FileChanged {
                path: path.to_owned(),
                on_disk,
                in_force,
                replication_stopped,
            });
        }
        let source = path.display().to_string();
        let text =
            String::from_utf8(bytes).map_err(|e| file_error(format!("not UTF-8 text: {e}")))?;
        let promoted = rewrite::promote_replica(&text, &source, master)
            .map_err(|e| file_error(e.to_string()))?;
        let topology =
            Topology::from_yaml_str(&promoted.text, &source).map_err(|errors: ConfigErrors| {
                file_error(format!(
                    "the promoted config would be invalid, so it was not written:\n{errors}"
                ))
            })?;
        let written = write_atomically(path, &promoted.text)
            .map_err(|e| file_error(format!("cannot write it: {e}")))?;
        self.install(
            topology,
            version_of(promoted.text.as_bytes()),
            ReloadTrigger::Promotion,
            moved,
        );
        Ok(Some(written))
    }
}

/// How the promotion reaches the hosts: the backend account, bounded by
/// the health check timeout.
struct Access {
    user: String,
    password: String,
    timeout: Duration,
}

impl Access {
    fn of(topology: &Topology) -> Self {
        Self {
            user: topology.config.backend.user.clone(),
            password: topology.config.backend.password.clone(),
            timeout: Duration::from_millis(topology.config.health.timeout_ms.max(1)),
        }
    }

    /// A connection to `addr` that answered a ping.
    async fn open(&self, addr: &str) -> Result<Conn, String> {
        let opts = crate::fleet::connection_opts(addr, &self.user, &self.password)
            .map_err(|e| e.to_string())?;
        let answered = tokio::time::timeout(self.timeout, async {
            let mut conn = Conn::new(opts).await?;
            conn.ping().await?;
            Ok::<_, mysql_async::Error>(conn)
        })
        .await;
        match answered {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(e.to_string()),
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
