//! Hot reload of the config file: parse, validate, build the new routing
//! table, swap it in atomically; remember what happened for `SHOW CONFIG`.
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

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use md5::Digest;
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};

use super::Engine;
use crate::backend::pool::BackendSettings;
use crate::sync::lock;
use crate::topology::{ConfigErrors, Topology};

/// How long the file must stay quiet after a change before it is read
/// (editors and config managers write in several steps).
const DEBOUNCE: Duration = Duration::from_millis(200);

/// What set off a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadTrigger {
    /// The admin command `RELOAD CONFIG`.
    Admin,
    /// SIGHUP.
    Signal,
    /// The config file changed on disk.
    FileChange,
    /// `PROMOTE REPLICA` rewrote the file.
    Promotion,
}

/// The outcome of one reload attempt, as `SHOW CONFIG` shows it.
#[derive(Debug, Clone)]
pub struct ReloadAttempt {
    /// When it ran.
    pub at: SystemTime,
    /// What set it off.
    pub trigger: ReloadTrigger,
    /// `Ok(summary of the change)` or `Err(every validation error)`.
    pub result: Result<String, String>,
}

/// The config in force and the last reload attempt.
#[derive(Debug, Clone)]
pub struct ConfigStatusSnapshot {
    /// The file the config came from (`<none>` for a config built in code).
    pub source: String,
    /// MD5 (hex) of the text in force.
    pub version: String,
    /// When the config in force was loaded.
    pub loaded_at: SystemTime,
    /// The last reload attempt, if any.
    pub last_reload: Option<ReloadAttempt>,
}

/// Shared, lock-protected [`ConfigStatusSnapshot`]. Also serialises
/// reloads and promotions, so two of them never interleave (an async lock:
/// a reload waiting for another does not hold a runtime worker).
#[derive(Debug)]
pub struct ConfigStatus {
    inner: Mutex<ConfigStatusSnapshot>,
    serial: tokio::sync::Mutex<()>,
}

impl ConfigStatus {
    /// Status of a first config.
    pub fn new(source: String, version: String) -> Self {
        Self {
            inner: Mutex::new(ConfigStatusSnapshot {
                source,
                version,
                loaded_at: SystemTime::now(),
                last_reload: None,
            }),
            serial: tokio::sync::Mutex::new(()),
        }
    }

    /// A copy of the current status.
    pub fn snapshot(&self) -> ConfigStatusSnapshot {
        lock(&self.inner).clone()
    }

    /// Held while a reload or promotion reads the file and swaps the table.
    pub(crate) async fn serialize(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.serial.lock().await
    }

    fn record(&self, trigger: ReloadTrigger, result: Result<String, String>) {
        lock(&self.inner).last_reload = Some(ReloadAttempt {
            at: SystemTime::now(),
            trigger,
            result,
        });
    }

    fn loaded(&self, version: String, trigger: ReloadTrigger, description: String) {
        let now = SystemTime::now();
        let mut inner = lock(&self.inner);
        inner.version = version;
        inner.loaded_at = now;
        inner.last_reload = Some(ReloadAttempt {
            at: now,
            trigger,
            result: Ok(description),
        });
    }
}

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
}

/// MD5 (hex) of a config text: its version.
pub fn version_of(text: &[u8]) -> String {
    format!("{:x}", md5::Md5::digest(text))
}

/// Parses and validates the bytes of a config file (`source` names it in
/// error messages) and builds its routing table.
pub(crate) fn parse_config(bytes: &[u8], source: &str) -> Result<Topology, ConfigErrors> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ConfigErrors::single(source, 0, format!("the file is not UTF-8 text: {e}")))?;
    Topology::from_yaml_str(text, source)
}

/// A config file read once: its version and, if that is not the version in
/// force, the routing table built from the same bytes.
enum FileRead {
    Unchanged(String),
    Changed(String, Box<Topology>),
}

/// Reads and builds the file at `path` (blocking: run it off the runtime).
fn read_file(path: &Path, in_force: &str) -> Result<FileRead, ReloadError> {
    let bytes = std::fs::read(path).map_err(|source| ReloadError::Read {
        path: path.to_owned(),
        source,
    })?;
    let version = version_of(&bytes);
    if version == in_force {
        return Ok(FileRead::Unchanged(version));
    }
    let topology = parse_config(&bytes, &path.display().to_string()).map_err(|errors| {
        ReloadError::Invalid {
            version: in_force.to_owned(),
            errors,
        }
    })?;
    Ok(FileRead::Changed(version, Box::new(topology)))
}

impl Engine {
    /// The config in force and the last reload attempt.
    pub fn config_status(&self) -> ConfigStatusSnapshot {
        self.config_status.snapshot()
    }

    /// Reads the config file again and, if it is valid and differs from the
    /// version in force, swaps in its routing table. An invalid file is
    /// refused (and logged) and the table in force keeps serving. A file
    /// equal to the version in force changes nothing; a file change that
    /// only echoes it is not even recorded. The file is read and built on
    /// the blocking pool.
    pub async fn reload(&self, trigger: ReloadTrigger) -> Result<ReloadSummary, ReloadError> {
        let Some(path) = self.config_path.clone() else {
            return Err(ReloadError::NoConfigFile);
        };
        let _serial = self.config_status.serialize().await;
        let status = self.config_status.snapshot();
        let in_force = status.version.clone();
        let read_path = path.clone();
        let read = tokio::task::spawn_blocking(move || read_file(&read_path, &in_force))
            .await
            .unwrap_or_else(|e| {
                Err(ReloadError::Read {
                    path,
                    source: io::Error::other(format!("the reading task failed: {e}")),
                })
            });
        let result = match read {
            Ok(FileRead::Unchanged(version)) => {
                let description =
                    format!("no change: the file is version {version}, already in force");
                let last_failed = matches!(&status.last_reload, Some(a) if a.result.is_err());
                if trigger != ReloadTrigger::FileChange || last_failed {
                    self.config_status.record(trigger, Ok(description.clone()));
                }
                debug!(trigger = ?trigger, %version, "config reload: no change");
                Ok(ReloadSummary {
                    version,
                    changed: false,
                    description,
                })
            }
            Ok(FileRead::Changed(version, topology)) => {
                Ok(self.install(*topology, version, trigger, Vec::new()))
            }
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            warn!(trigger = ?trigger, "config reload refused: {e}");
            self.config_status.record(trigger, Err(e.to_string()));
        }
        result
    }

    /// Swaps in `topology` (version `version`), applies changed backend
    /// settings to new connections, and records the change. Hosts it adds
    /// get their pools before the swap; hosts that left have theirs retired
    /// (and their state forgotten) after it. Call with
    /// [`ConfigStatus::serialize`] held.
    pub(crate) fn install(
        &self,
        topology: Topology,
        version: String,
        trigger: ReloadTrigger,
        mut notes: Vec<String>,
    ) -> ReloadSummary {
        let old = self.topology.load();
        let mut changes = describe_changes(&old, &topology);
        let settings = BackendSettings::from_config(&topology.config.backend);
        let hosts: Vec<String> = topology.hosts.iter().map(|h| h.addr.clone()).collect();
        let host_refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
        if self.backends.reconfigure(settings) {
            changes.push(
                "backend settings changed: every pool reopens with them (connections in use finish first)"
                    .to_owned(),
            );
        }
        self.backends.add_hosts(&host_refs);
        self.topology.store(topology);
        drop(old);
        let retired = self.backends.retain_hosts(&host_refs);
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

/// Starts the config watchers of `engine`: SIGHUP, and a watch on the
/// directory of its config file (if it has one). Both log what happened
/// and never stop on an error. The SIGHUP handler is installed before this
/// returns; once the directory watch is in place, the file is reloaded
/// once, for a change made between the first load and the watch.
pub fn spawn_watchers(engine: Arc<Engine>) {
    spawn_signal_handler(Arc::downgrade(&engine));
    if let Some(path) = engine.config_path.clone() {
        spawn_file_watcher(Arc::downgrade(&engine), path);
    }
}

fn spawn_signal_handler(engine: Weak<Engine>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(e) => {
            error!(
                "cannot listen for SIGHUP ({e}); reload with RELOAD CONFIG or by editing the file"
            );
            return;
        }
    };
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(engine) = engine.upgrade() else {
                break;
            };
            info!("SIGHUP: reloading the config");
            let _ = engine.reload(ReloadTrigger::Signal).await;
        }
    });
}

/// The directories watched for one config path: the one that names it, and
/// the one holding the file it resolves to, when that is elsewhere (a
/// symlink). The target is resolved again after every reload, since a
/// ConfigMap update points the link at a new directory.
struct WatchedDirs {
    path: PathBuf,
    dir: PathBuf,
    target_dir: Option<PathBuf>,
}

impl WatchedDirs {
    fn new(path: PathBuf) -> Self {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        Self {
            path,
            dir,
            target_dir: None,
        }
    }

    /// Watches the target's directory if the path now resolves elsewhere
    /// (and stops watching the previous one).
    fn follow_target(&mut self, watcher: &mut impl notify::Watcher) {
        let resolved = resolved_dir(&self.path);
        let own = std::fs::canonicalize(&self.dir).ok();
        let wanted = resolved.filter(|target| Some(target) != own.as_ref());
        if wanted == self.target_dir {
            return;
        }
        if let Some(old) = self.target_dir.take() {
            let _ = watcher.unwatch(&old);
        }
        if let Some(target) = wanted {
            match watcher.watch(&target, notify::RecursiveMode::NonRecursive) {
                Ok(()) => {
                    info!(dir = %target.display(), "watching the config file's target directory too");
                    self.target_dir = Some(target);
                }
                Err(e) => {
                    warn!(dir = %target.display(), "cannot watch the config file's target directory ({e}); edits made there need SIGHUP or RELOAD CONFIG")
                }
            }
        }
    }
}

/// The directory of the file `path` resolves to, following symlinks.
fn resolved_dir(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path)
        .ok()
        .and_then(|target| target.parent().map(Path::to_path_buf))
}

fn spawn_file_watcher(engine: Weak<Engine>, path: PathBuf) {
    use notify::{RecursiveMode, Watcher};
    let mut dirs = WatchedDirs::new(path);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .and_then(|mut watcher| {
        watcher.watch(&dirs.dir, RecursiveMode::NonRecursive)?;
        Ok(watcher)
    });
    let mut watcher = match watcher {
        Ok(watcher) => watcher,
        Err(e) => {
            error!(dir = %dirs.dir.display(), "cannot watch the config directory ({e}); reload with SIGHUP or RELOAD CONFIG");
            return;
        }
    };
    info!(dir = %dirs.dir.display(), "watching the config directory for changes");
    dirs.follow_target(&mut watcher);
    tokio::spawn(async move {
        if !reload_on_file_change(&engine).await {
            return;
        }
        let is_change = |event: notify::Result<notify::Event>| match event {
            Ok(event) => changes_something(&event),
            Err(e) => {
                warn!("config directory watch: {e}");
                false
            }
        };
        while let Some(event) = rx.recv().await {
            if !is_change(event) {
                continue;
            }
            let mut deadline = tokio::time::Instant::now() + DEBOUNCE;
            loop {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(event)) => {
                        if is_change(event) {
                            deadline = tokio::time::Instant::now() + DEBOUNCE;
                        }
                    }
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            if !reload_on_file_change(&engine).await {
                return;
            }
            dirs.follow_target(&mut watcher);
        }
    });
}

/// Reloads for a file change (the outcome is logged and recorded by
/// [`Engine::reload`]); false once the engine is gone.
async fn reload_on_file_change(engine: &Weak<Engine>) -> bool {
    let Some(engine) = engine.upgrade() else {
        return false;
    };
    let _ = engine.reload(ReloadTrigger::FileChange).await;
    true
}

/// Whether `event` may have changed something in a watched directory.
/// Every change counts, whatever file it names (a ConfigMap update renames
/// a `..data` symlink, not the file); opening and reading files, ours
/// included, does not.
fn changes_something(event: &notify::Event) -> bool {
    use notify::event::{AccessKind, AccessMode};
    use notify::EventKind;
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests;
