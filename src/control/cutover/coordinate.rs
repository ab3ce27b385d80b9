//! The two ways a cutover pauses, writes the new map and resumes: through
//! ZooKeeper for every proxy of a document, or on this proxy alone for a
//! config file.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{list, CutoverError, Range};
use crate::control::pause::{self, pause_fleet, Requester};
use crate::control::reload::ReloadTrigger;
use crate::control::status::{build_config, parse_config, version_of, write_atomically};
use crate::control::zookeeper::{self, GuardedPushError, ZooKeeper};
use crate::control::Control;
use crate::topology::Topology;

/// How often the wait for the proxies reads the registry.
const REGISTRY_POLL: Duration = Duration::from_millis(20);

/// Where the map lives and who must follow it.
pub enum Coordinator<'a> {
    /// A znode: every registered proxy pauses, follows the push and resumes.
    Fleet(FleetSide<'a>),
    /// A config file: this proxy alone.
    Local(&'a Control),
}

/// A fleet-wide cutover's session and who asks for it.
pub struct FleetSide<'a> {
    /// The session (a proxy's, or the CLI's own, unregistered).
    pub zookeeper: &'a ZooKeeper,
    /// Who asks, as the pause record says (`web-1`, `cli:host:pid`).
    pub requester: String,
    /// The admin account (or `cli`).
    pub user: String,
}

/// The document a cutover starts from.
pub struct Base {
    /// Its text.
    pub text: String,
    /// Its name in messages (the file or the `zookeeper://` URL).
    pub source_name: String,
    /// MD5 of the text.
    pub version: String,
    /// The znode version read (none for a file).
    pub znode_version: Option<i32>,
    /// Its routing table.
    pub topology: Arc<Topology>,
}

/// The pauses a cutover holds.
pub(super) enum Held {
    /// Fleet-wide pause records, by id.
    Fleet(Vec<String>),
    /// Ranges paused on this proxy's gate.
    Local(Vec<Range>),
}

/// The map written.
pub(super) struct Written {
    /// `znode version N (md5 M)` or `md5 M`.
    pub(super) describe: String,
    /// The znode version, for the wait on the registry.
    pub(super) znode_version: Option<i32>,
}

/// Why the new map was not written, or may not have been.
#[derive(Debug)]
pub(super) struct WriteFailure {
    /// What happened.
    pub(super) reason: String,
    /// The push's answer was lost and the znode could not be read back:
    /// the map may be in force, so the pause must stay.
    pub(super) outcome_unknown: bool,
}

impl From<String> for WriteFailure {
    fn from(reason: String) -> Self {
        Self {
            reason,
            outcome_unknown: false,
        }
    }
}

impl std::fmt::Display for WriteFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// The live proxies that did not take the new map in time.
pub(super) struct Lagging {
    /// Each with the znode version it runs.
    pub(super) proxies: String,
    /// How long the wait lasted.
    pub(super) waited_ms: u128,
}

impl std::fmt::Display for Lagging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} after {} ms", self.proxies, self.waited_ms)
    }
}

impl Coordinator<'_> {
    /// Reads the document: the znode with its version, or the config file
    /// (which must be the version in force).
    pub async fn base(&self) -> Result<Base, CutoverError> {
        match self {
            Coordinator::Fleet(side) => {
                let location = &side.zookeeper.location;
                let document = zookeeper::get(location).await?;
                let source_name = location.to_string();
                let text = String::from_utf8(document.bytes).map_err(|e| {
                    CutoverError::Document(format!("{source_name}: not UTF-8: {e}"))
                })?;
                let topology = parse_config(text.as_bytes(), &source_name).map_err(|errors| {
                    CutoverError::Document(format!(
                        "the document {source_name} is invalid:\n{errors}"
                    ))
                })?;
                Ok(Base {
                    text,
                    source_name,
                    version: document.version,
                    znode_version: Some(document.znode_version),
                    topology: Arc::new(topology),
                })
            }
            Coordinator::Local(control) => {
                let Some(path) = control.config_path.clone() else {
                    return Err(CutoverError::Document(
                        "this proxy was started without a config file: there is no map to rewrite"
                            .into(),
                    ));
                };
                let topology = control.engine.topology.load();
                let in_force = control.config_status.snapshot().version;
                let read = path.clone();
                let bytes = tokio::task::spawn_blocking(move || std::fs::read(read))
                    .await
                    .map_err(|e| CutoverError::Document(format!("the reading task failed: {e}")))?
                    .map_err(|e| {
                        CutoverError::Document(format!("cannot read {}: {e}", path.display()))
                    })?;
                let version = version_of(&bytes);
                if version != in_force {
                    return Err(CutoverError::Document(format!(
                        "the config file {} has changes that are not loaded (version {version} on disk, \
                         {in_force} in force); RELOAD CONFIG or undo them first",
                        path.display()
                    )));
                }
                let text = String::from_utf8(bytes).map_err(|e| {
                    CutoverError::Document(format!("{}: not UTF-8: {e}", path.display()))
                })?;
                Ok(Base {
                    text,
                    source_name: path.display().to_string(),
                    version,
                    znode_version: None,
                    topology,
                })
            }
        }
    }

    /// The proxies that would pause: the registry, or this proxy.
    pub(super) async fn proxies(&self) -> Result<Vec<String>, CutoverError> {
        match self {
            Coordinator::Fleet(side) => {
                let mut live = side.zookeeper.live_proxies().await?;
                live.sort();
                Ok(live)
            }
            Coordinator::Local(control) => Ok(vec![format!("{} (this proxy)", control.process.id)]),
        }
    }

    /// Pauses every range (all or none) for the cutover `what` (the
    /// fleet-wide records name it); answers once every proxy has paused
    /// and drained them.
    pub(super) async fn pause(
        &self,
        topology: &Topology,
        ranges: &[Range],
        what: &str,
    ) -> Result<(Held, String), CutoverError> {
        let drain = Duration::from_millis(topology.config.pause.drain_timeout_ms);
        let refused = |reason: String| CutoverError::Pause {
            ranges: list(ranges, Range::to_string, ", "),
            reason,
        };
        match self {
            Coordinator::Fleet(side) => {
                let mut ids = Vec::new();
                let mut proxies = Vec::new();
                for range in ranges {
                    let requester = Requester {
                        proxy: &side.requester,
                        user: &side.user,
                        cutover: Some(what),
                    };
                    let paused = pause_fleet(
                        side.zookeeper,
                        topology,
                        requester,
                        Some(&range.fleet),
                        range.first,
                        range.last,
                        drain,
                    )
                    .await;
                    match paused {
                        Ok(report) => {
                            ids.push(report.id);
                            proxies = report.proxies;
                        }
                        Err(e) => {
                            let undone = self.resume(&Held::Fleet(ids)).await;
                            let undone = undone.err().map_or_else(String::new, |u| {
                                format!(" (and withdrawing the pauses already made failed: {u}; RESUME SHARDS them)")
                            });
                            return Err(refused(format!("{e}{undone}")));
                        }
                    }
                }
                let detail = format!(
                    "{} paused on every proxy ({})",
                    list(ranges, Range::to_string, ", "),
                    proxies.join(", ")
                );
                Ok((Held::Fleet(ids), detail))
            }
            Coordinator::Local(control) => {
                let mut done: Vec<Range> = Vec::new();
                let mut drained = 0;
                for range in ranges {
                    let paused = pause::pause(
                        &control.engine.pauses,
                        topology,
                        Some(&range.fleet),
                        range.first,
                        range.last,
                        drain,
                    )
                    .await;
                    match paused {
                        Ok(report) => {
                            drained += report.drained;
                            done.push(range.clone());
                        }
                        Err(e) => {
                            let _ = self.resume(&Held::Local(done)).await;
                            return Err(refused(e.to_string()));
                        }
                    }
                }
                let detail = format!(
                    "{} paused on this proxy ({drained} statement(s) drained)",
                    list(ranges, Range::to_string, ", ")
                );
                Ok((Held::Local(done), detail))
            }
        }
    }

    /// Ends the pauses held. A fleet-wide record deleted by someone else
    /// meanwhile is an error (proxies may have resumed early), once the
    /// others are deleted.
    pub(super) async fn resume(&self, held: &Held) -> Result<String, String> {
        match (self, held) {
            (Coordinator::Fleet(side), Held::Fleet(ids)) => {
                let existing = side
                    .zookeeper
                    .pause_records()
                    .await
                    .map_err(|e| e.to_string())?;
                let (present, gone) = split_present(ids, &existing);
                if !present.is_empty() {
                    side.zookeeper
                        .delete_pauses(&present)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                if !gone.is_empty() {
                    return Err(format!(
                        "the pause records {} were deleted by someone else before the cutover ended (a RESUME \
                         SHARDS ... FORCE, or by hand); if the new map was written, proxies may have written to those \
                         shards on the old master before they took it: compare the old and the new master for rows \
                         written during the cutover{}",
                        gone.join(", "),
                        if present.is_empty() {
                            String::new()
                        } else {
                            format!(" (the other records were deleted: {})", present.join(", "))
                        }
                    ));
                }
                Ok(format!("pause records deleted: {}", ids.join(", ")))
            }
            (Coordinator::Local(control), Held::Local(ranges)) => {
                let mut released = 0;
                for range in ranges {
                    let report = pause::resume(
                        &control.engine.pauses,
                        Some(&range.fleet),
                        range.first,
                        range.last,
                    )
                    .map_err(|e| e.to_string())?;
                    released += report.released;
                }
                Ok(format!("{released} waiting statement(s) released"))
            }
            _ => Err("the pause held does not belong to this coordinator".to_owned()),
        }
    }

    /// Writes `text` as the new map, only over the document `base`: the
    /// znode still at its version and every fleet-wide pause in `held`
    /// still there (one multi), or the file still the version in force
    /// (then its routing table is swapped in, recorded with `trigger`).
    pub(super) async fn write(
        &self,
        base: &Base,
        text: &str,
        trigger: ReloadTrigger,
        changes: Vec<String>,
        held: Option<&Held>,
    ) -> Result<Written, WriteFailure> {
        match self {
            Coordinator::Fleet(side) => {
                let Some(znode_version) = base.znode_version else {
                    return Err("the document was read without its znode version"
                        .to_owned()
                        .into());
                };
                let ids = match held {
                    Some(Held::Fleet(ids)) => ids.as_slice(),
                    _ => &[],
                };
                let pushed = side
                    .zookeeper
                    .push_guarded(text.as_bytes(), &base.source_name, znode_version, ids)
                    .await
                    .map_err(|e| WriteFailure {
                        outcome_unknown: matches!(e, GuardedPushError::Unknown { .. }),
                        reason: e.to_string(),
                    })?;
                Ok(Written {
                    describe: format!(
                        "znode version {} (md5 {}), was {znode_version}",
                        pushed.znode_version, pushed.version,
                    ),
                    znode_version: Some(pushed.znode_version),
                })
            }
            Coordinator::Local(control) => {
                let Some(path) = control.config_path.clone() else {
                    return Err("this proxy has no config file".to_owned().into());
                };
                let _serial = control.config_status.serialize().await;
                if control.config_status.snapshot().version != base.version {
                    return Err("a reload changed the config in force meanwhile"
                        .to_owned()
                        .into());
                }
                let overrides = control.process.overrides.clone();
                let (expected, source, new_text) = (
                    base.version.clone(),
                    base.source_name.clone(),
                    text.to_owned(),
                );
                let built = tokio::task::spawn_blocking(move || {
                    let on_disk = std::fs::read(&path)
                        .map(|bytes| version_of(&bytes))
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                    if on_disk != expected {
                        return Err(format!(
                            "the config file {} changed on disk meanwhile (version {on_disk})",
                            path.display()
                        ));
                    }
                    let topology = build_config(new_text.as_bytes(), &source, &overrides).map_err(
                        |errors| format!("the edited config would be invalid:\n{errors}"),
                    )?;
                    write_atomically(&path, &new_text)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    Ok(topology)
                })
                .await
                .map_err(|e| format!("the writing task failed: {e}"))??;
                let version = version_of(text.as_bytes());
                control.install(built, version.clone(), trigger, changes);
                Ok(Written {
                    describe: format!(
                        "{} rewritten and in force (md5 {version})",
                        base.source_name
                    ),
                    znode_version: None,
                })
            }
        }
    }

    /// Waits (at most `timeout`) until every live proxy runs `written`;
    /// the proxies that do, or those that still do not with the version
    /// each runs.
    pub(super) async fn wait_adopted(
        &self,
        written: &Written,
        timeout: Duration,
    ) -> Result<String, Lagging> {
        let (Coordinator::Fleet(side), Some(version)) = (self, written.znode_version) else {
            return Ok("this proxy runs it (no other proxy follows a config file)".to_owned());
        };
        let started = Instant::now();
        loop {
            let lagging = match side.zookeeper.proxies().await {
                Ok(registered) => {
                    let mut running = Vec::new();
                    let mut lagging = Vec::new();
                    for (id, entry) in registered.entries {
                        match entry.and_then(|entry| entry.znode_version) {
                            Some(v) if runs(v, version) => running.push(id),
                            other => lagging.push(format!(
                                "{id} (znode version {})",
                                other.map_or_else(|| "unknown".to_owned(), |v| v.to_string())
                            )),
                        }
                    }
                    if lagging.is_empty() {
                        return Ok(format!(
                            "every live proxy runs znode version {version} or later: {}",
                            if running.is_empty() {
                                "none registered".to_owned()
                            } else {
                                running.join(", ")
                            }
                        ));
                    }
                    lagging.join(", ")
                }
                Err(e) => format!("the registry could not be read: {e}"),
            };
            if started.elapsed() >= timeout {
                return Err(Lagging {
                    proxies: lagging,
                    waited_ms: started.elapsed().as_millis(),
                });
            }
            tokio::time::sleep(REGISTRY_POLL).await;
        }
    }
}

/// Whether a proxy on znode version `running` runs the map written at
/// `written`: that version or a later push over it.
fn runs(running: i32, written: i32) -> bool {
    running >= written
}

/// `ids` split into those still among `records` and those gone.
fn split_present(
    ids: &[String],
    records: &[(String, zookeeper::PauseRecord)],
) -> (Vec<String>, Vec<String>) {
    ids.iter()
        .cloned()
        .partition(|id| records.iter().any(|(present, _)| present == id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_push_counts_as_running_the_map_written() {
        assert!(runs(7, 7));
        assert!(runs(8, 7));
        assert!(!runs(6, 7));
    }

    #[test]
    fn the_records_held_are_split_into_present_and_gone() {
        let record = zookeeper::PauseRecord {
            fleet: None,
            first: 0,
            last: 1,
            requested_by: "p".to_owned(),
            user: "u".to_owned(),
            requested_at_ms: 0,
            timeout_ms: 0,
            cutover: None,
        };
        let ids = vec!["a".to_owned(), "b".to_owned()];
        let (present, gone) = split_present(&ids, &[("b".to_owned(), record)]);
        assert_eq!(
            (present, gone),
            (vec!["b".to_owned()], vec!["a".to_owned()])
        );
    }
}
