//! Hot reload of the config document (a file, or a znode: the bytes come
//! from [`Control::fetch`], the rest is the same): parse, validate, build
//! the new routing table, swap it in atomically; remember what happened
//! for `SHOW CONFIG`.
//! Triggers: any change in the file's directory (and, when the path is a
//! symlink, in its target's directory: a Kubernetes ConfigMap swaps a
//! `..data` symlink), SIGHUP, and the admin command `RELOAD CONFIG`. The
//! file is read and the table built on the blocking pool; an unchanged
//! file costs a read and a hash.
//!
//! A statement keeps the topology snapshot it started with, so statements
//! already running finish on the old table; client connections are never
//! touched. Pools of hosts that left are retired: their idle connections
//! close now, the ones in use close when released, and the pool is freed
//! with its last user.
//!
//! The config status it records (version, last attempt) is
//! [`super::status`], held by [`Control`]; the watchers are in `watch`.

mod watch;

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use tracing::{debug, info, warn};

use super::Control;
use crate::backend::pool::BackendSettings;
use crate::control::zookeeper::ZkError;
use crate::topology::bootstrap::ListenOverrides;
use crate::topology::prescan;
use crate::topology::rehome::{self, Rehoming};
use crate::topology::{ConfigErrors, Topology};

pub use super::status::{
    build_config, parse_config, version_of, ConfigStatus, ConfigStatusSnapshot, ReloadAttempt,
    ReloadTrigger,
};
pub use watch::spawn_watchers;

/// What a successful reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadSummary {
    /// MD5 (hex) of the config text now in force.
    pub version: String,
    /// Whether a new routing table was swapped in (false: the file is the
    /// version already in force).
    pub changed: bool,
    /// What changed, for a person (`hosts added: ...; fleet main: ...`).
    pub description: String,
}

/// Why a reload was refused. The config in force keeps serving in every case.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The proxy was started from a config built in code.
    #[error("this proxy was started without a config file, so there is nothing to reload")]
    NoConfigFile,
    /// The znode cannot be read.
    #[error(
        "cannot read the config document {location}: {source}; the config in force keeps serving"
    )]
    ZooKeeper {
        /// The config source.
        location: String,
        /// Why.
        #[source]
        source: ZkError,
    },
    /// The file cannot be read.
    #[error("cannot read the config file {}: {source}; the config in force keeps serving", path.display())]
    Read {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file does not parse or validate; every problem, each with its line.
    #[error(
        "the config file is invalid, so it was not loaded; the config in force (version {version}) keeps serving. {} problem(s):\n{errors}",
        errors.0.len()
    )]
    Invalid {
        /// Version (MD5) of the config still in force.
        version: String,
        /// Every problem found.
        errors: ConfigErrors,
    },
    /// The znode's document does not parse or validate.
    #[error(
        "the config document in the znode (znode version {znode_version}) is invalid, so it was not loaded; \
         the config in force (version {version}) keeps serving. {} problem(s):\n{errors}",
        errors.0.len()
    )]
    InvalidZnode {
        /// The refused document's znode version.
        znode_version: i32,
        /// Version (MD5) of the config still in force.
        version: String,
        /// Every problem found.
        errors: ConfigErrors,
    },
    /// The file would send existing data to other shards and the reload
    /// was not forced.
    #[error(
        "the config file would send existing data to other shards, so it was not loaded; the config in force \
         (version {version}) keeps serving. Re-homing change(s): {}. If the data has been moved to match, \
         load it with RELOAD CONFIG FORCE on the admin port",
        rehome::describe(changes)
    )]
    Rehome {
        /// Version (MD5) of the config still in force.
        version: String,
        /// Every re-homing change the file makes.
        changes: Vec<Rehoming>,
    },
}

/// Whether a reload may load a file that re-homes existing data
/// (`RELOAD CONFIG FORCE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Force {
    /// Refuse re-homing changes.
    No,
    /// Load them: the operator has moved the data to match.
    Rehome,
}

/// A config document read once: its version and, if that is not the
/// version in force, the routing table built from the same bytes.
enum DocumentRead {
    Unchanged(String),
    Changed(String, Box<Topology>),
}

/// The bytes of a config document and, for a znode, its version.
struct Fetched {
    bytes: Vec<u8>,
    znode_version: Option<i32>,
}

/// Builds the document's routing table unless it is the version in force
/// (blocking: run it off the runtime).
fn build_document(
    fetched: &Fetched,
    in_force: &str,
    source: &str,
    overrides: &ListenOverrides,
) -> Result<DocumentRead, ReloadError> {
    let version = version_of(&fetched.bytes);
    if version == in_force {
        return Ok(DocumentRead::Unchanged(version));
    }
    let topology =
        build_config(&fetched.bytes, source, overrides).map_err(|errors| {
            match fetched.znode_version {
                Some(znode_version) => ReloadError::InvalidZnode {
                    znode_version,
                    version: in_force.to_owned(),
                    errors,
                },
                None => ReloadError::Invalid {
                    version: in_force.to_owned(),
                    errors,
                },
            }
        })?;
    Ok(DocumentRead::Changed(version, Box::new(topology)))
}

impl Control {
    /// The config in force and the last reload attempt.
    pub fn config_status(&self) -> ConfigStatusSnapshot {
        self.config_status.snapshot()
    }

    /// Reads the config document: the file (on the blocking pool) or the
    /// znode.
    async fn fetch(&self) -> Result<Fetched, ReloadError> {
        if let Some(zookeeper) = &self.zookeeper {
            let (bytes, znode_version, _) = zookeeper
                .fetch(self.process.allow_open_acl)
                .await
                .map_err(|source| ReloadError::ZooKeeper {
                    location: zookeeper.location.to_string(),
                    source,
                })?;
            return Ok(Fetched {
                bytes,
                znode_version: Some(znode_version),
            });
        }
        let Some(path) = self.config_path.clone() else {
            return Err(ReloadError::NoConfigFile);
        };
        let read_path = path.clone();
        let read = tokio::task::spawn_blocking(move || prescan::read_bounded(&read_path))
            .await
            .unwrap_or_else(|e| Err(io::Error::other(format!("the reading task failed: {e}"))));
        read.map(|bytes| Fetched {
            bytes,
            znode_version: None,
        })
        .map_err(|source| ReloadError::Read { path, source })
    }

    /// Reads the config document again (the file, or the znode) and, if it
    /// is valid and differs from the version in force, swaps in its routing
    /// table. An invalid document is refused (and logged) and the table in
    /// force keeps serving. A document equal to the version in force
    /// changes nothing; a watcher's reload that only echoes it is not even
    /// recorded. The document is built on the blocking pool. Listen
    /// addresses never change here (they are bound once). A config file
    /// that would send existing data to other shards is refused: see
    /// [`Control::reload_with`].
    pub async fn reload(&self, trigger: ReloadTrigger) -> Result<ReloadSummary, ReloadError> {
        self.reload_with(trigger, Force::No).await
    }

    /// [`Control::reload`], loading a config file that would send existing
    /// data to other shards ([`rehome::rehoming_changes`]) only when
    /// `force`. A znode's document is taken as it is: `config push` is
    /// that gate, so every proxy of the znode routes the same way.
    pub async fn reload_with(
        &self,
        trigger: ReloadTrigger,
        force: Force,
    ) -> Result<ReloadSummary, ReloadError> {
        let _serial = self.config_status.serialize().await;
        let status = self.config_status.snapshot();
        let result = match self.fetch().await {
            Ok(fetched) => {
                let znode_version = fetched.znode_version;
                let in_force = status.version.clone();
                let source = status.source.clone();
                let overrides = self.process.overrides.clone();
                let built = tokio::task::spawn_blocking(move || {
                    build_document(&fetched, &in_force, &source, &overrides)
                })
                .await
                .unwrap_or_else(|e| {
                    Err(ReloadError::Read {
                        path: PathBuf::from(&status.source),
                        source: io::Error::other(format!("the building task failed: {e}")),
                    })
                });
                built.and_then(|read| self.take(read, znode_version, trigger, force, &status))
            }
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            warn!(trigger = ?trigger, "config reload refused: {e}");
            self.config_status.record(trigger, Err(e.to_string()));
        }
        result
    }

    /// Swaps in a changed document, or records an unchanged one; then
    /// updates the registry entry.
    fn take(
        &self,
        read: DocumentRead,
        znode_version: Option<i32>,
        trigger: ReloadTrigger,
        force: Force,
        status: &ConfigStatusSnapshot,
    ) -> Result<ReloadSummary, ReloadError> {
        let summary = match read {
            DocumentRead::Unchanged(version) => {
                let description = match znode_version {
                    Some(znode) => format!(
                        "no change: the znode holds version {version} (znode version {znode}), already in force"
                    ),
                    None => format!("no change: the file is version {version}, already in force"),
                };
                let last_failed = matches!(&status.last_reload, Some(a) if a.result.is_err());
                if !trigger.is_watch() || last_failed {
                    self.config_status.record(trigger, Ok(description.clone()));
                }
                debug!(trigger = ?trigger, %version, "config reload: no change");
                ReloadSummary {
                    version,
                    changed: false,
                    description,
                }
            }
            DocumentRead::Changed(version, topology) => {
                if self.zookeeper.is_none() && force == Force::No {
                    let changes = rehome::rehoming_changes(&self.engine.topology.load(), &topology);
                    if !changes.is_empty() {
                        return Err(ReloadError::Rehome {
                            version: status.version.clone(),
                            changes,
                        });
                    }
                }
                self.install(*topology, version, trigger, Vec::new())
            }
        };
        if summary.changed || znode_version != status.znode_version {
            self.config_status.set_znode_version(znode_version);
            self.publish_entry();
        }
        Ok(summary)
    }

    /// Swaps in `topology` (version `version`), applies changed backend
    /// settings to new connections, and records the change. Hosts it adds
    /// get their pools before the swap; hosts that left have theirs retired
    /// (and their state forgotten) after it. The object tables' columns
    /// read so far carry over and are read again at once. Call with
    /// [`ConfigStatus::serialize`] held.
    pub(crate) fn install(
        &self,
        mut topology: Topology,
        version: String,
        trigger: ReloadTrigger,
        mut notes: Vec<String>,
    ) -> ReloadSummary {
        let old = self.engine.topology.load();
        // The columns read so far serve until the new table's are read.
        topology.columns = Arc::clone(&old.columns);
        let mut changes = describe_changes(&old, &topology);
        let settings = BackendSettings::from_config(&topology.config.backend);
        let hosts: Vec<String> = topology.hosts.iter().map(|h| h.addr.clone()).collect();
        let host_refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
        if self.engine.backends.reconfigure(settings) {
            changes.push(
                "backend settings changed: every pool reopens with them (connections in use finish first)"
                    .to_owned(),
            );
        }
        self.engine.backends.add_hosts(&host_refs);
        self.engine.topology.store(topology);
        old.columns.request_refresh();
        drop(old);
        let retired = self.engine.backends.retain_hosts(&host_refs);
        if !retired.is_empty() {
            changes.push(format!(
                "pools closed (once their last statement finishes): {}",
                retired.join(", ")
            ));
        }
        changes.append(&mut notes);
        if changes.is_empty() {
            changes.push("no routing change (comments or layout only)".to_owned());
        }
        let description = changes.join("; ");
        info!(trigger = ?trigger, %version, "config loaded: {description}");
        self.config_status
            .loaded(version.clone(), trigger, description.clone());
        ReloadSummary {
            version,
            changed: true,
            description,
        }
    }
}

/// What differs between two routing tables, one phrase per change.
/// Settings read only at start-up are reported as needing a restart.
pub fn describe_changes(old: &Topology, new: &Topology) -> Vec<String> {
    let mut changes = Vec::new();
    let addrs =
        |t: &Topology| -> BTreeSet<String> { t.hosts.iter().map(|h| h.addr.clone()).collect() };
    let (before, after) = (addrs(old), addrs(new));
    push_list(&mut changes, "hosts added", after.difference(&before));
    push_list(&mut changes, "hosts removed", before.difference(&after));

    let fleet_names =
        |t: &Topology| -> BTreeSet<String> { t.fleets.iter().map(|f| f.name.clone()).collect() };
    let (fleets_before, fleets_after) = (fleet_names(old), fleet_names(new));
    push_list(
        &mut changes,
        "fleets added",
        fleets_after.difference(&fleets_before),
    );
    push_list(
        &mut changes,
        "fleets removed",
        fleets_before.difference(&fleets_after),
    );
    for fleet in &new.fleets {
        let Some(previous) = old.fleets.iter().find(|f| f.name == fleet.name) else {
            continue;
        };
        let name = &fleet.name;
        if previous.shard_count != fleet.shard_count {
            changes.push(format!(
                "fleet {name}: shards {} -> {}",
                previous.shard_count, fleet.shard_count
            ));
        }
        if previous.database != fleet.database {
            changes.push(format!(
                "fleet {name}: database names {} -> {}",
                previous.database_name(0),
                fleet.database_name(0)
            ));
        }
        if previous.open_range() != fleet.open_range() {
            let (a, b) = (previous.open_range(), fleet.open_range());
            changes.push(format!(
                "fleet {name}: open shards {}-{} -> {}-{}",
                a.0, a.1, b.0, b.1
            ));
        }
        let (was, now) = (ranges(old, previous), ranges(new, fleet));
        let moved: Vec<&String> = now.iter().filter(|r| !was.contains(r)).collect();
        if !moved.is_empty() {
            changes.push(format!(
                "fleet {name}: {}",
                moved
                    .iter()
                    .map(|r| format!("{r} now"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }

    let (t0, t1) = (&old.config.tables, &new.config.tables);
    push_list(
        &mut changes,
        "tables added",
        t1.keys().filter(|k| !t0.contains_key(*k)),
    );
    push_list(
        &mut changes,
        "tables removed",
        t0.keys().filter(|k| !t1.contains_key(*k)),
    );
    push_list(
        &mut changes,
        "tables changed",
        t1.iter()
            .filter(|(k, v)| t0.get(*k).is_some_and(|o| o != *v))
            .map(|(k, _)| k),
    );

    let (c0, c1) = (&old.config, &new.config);
    let mut setting = |differs: bool, what: &str| {
        if differs {
            changes.push(what.to_owned());
        }
    };
    setting(c0.types != c1.types, "object types changed");
    setting(
        c0.users != c1.users,
        "client accounts changed (checked at each login)",
    );
    setting(c0.placement != c1.placement, "placement changed");
    setting(c0.health != c1.health, "health check settings changed");
    setting(c0.pause != c1.pause, "pause settings changed");
    setting(
        c0.schema != c1.schema,
        "schema file changed (used by the next VERIFY FLEET)",
    );
    let admin_users = |c: &crate::topology::Config| c.admin.as_ref().map(|a| a.users.clone());
    setting(admin_users(c0) != admin_users(c1), "admin accounts changed");
    let restart = |changes: &mut Vec<String>, differs: bool, what: &str| {
        if differs {
            changes.push(format!(
                "{what} changed: takes effect after a restart (still the old one)"
            ));
        }
    };
    let admin_listen = |c: &crate::topology::Config| c.admin.as_ref().map(|a| a.listen.clone());
    let metrics_listen = |c: &crate::topology::Config| c.metrics.as_ref().map(|m| m.listen.clone());
    restart(&mut changes, c0.listen != c1.listen, "listen address");
    restart(
        &mut changes,
        admin_listen(c0) != admin_listen(c1),
        "admin listen address",
    );
    restart(
        &mut changes,
        metrics_listen(c0) != metrics_listen(c1),
        "metrics listen address",
    );
    restart(&mut changes, c0.tls != c1.tls, "tls section");
    changes
}

fn push_list<'a>(changes: &mut Vec<String>, what: &str, items: impl Iterator<Item = &'a String>) {
    let items: Vec<&str> = items.map(String::as_str).collect();
    if !items.is_empty() {
        changes.push(format!("{what}: {}", items.join(", ")));
    }
}

/// The ranges of `fleet`, as `0-2047 on 127.0.0.1:3307 (replica 127.0.0.1:3309)`.
fn ranges(topology: &Topology, fleet: &crate::topology::Fleet) -> Vec<String> {
    let addr = |id: usize| topology.host(id).map_or("?", |h| h.addr.as_str());
    fleet
        .ranges
        .iter()
        .map(|r| {
            let replica = r
                .replica
                .map(|id| format!(" (replica {})", addr(id)))
                .unwrap_or_default();
            format!("{}-{} on {}{replica}", r.first, r.last, addr(r.master))
        })
        .collect()
}

#[cfg(test)]
mod tests;
