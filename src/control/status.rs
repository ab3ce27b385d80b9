//! The config in force as the proxy reports it: its version (the MD5 of the
//! document's bytes, and its znode version when it came from ZooKeeper),
//! where it came from, when it was loaded, and the last reload attempt;
//! with the lock that keeps reloads and promotions from interleaving.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use md5::Digest;

use crate::sync::lock;
use crate::topology::bootstrap::ListenOverrides;
use crate::topology::{ConfigErrors, Topology};

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
    /// `MOVE SHARDS` rewrote the file.
    MoveShards,
    /// The config znode changed (its watch fired).
    ZnodeChange,
    /// A ZooKeeper session was (re)established: the document is read again
    /// in case a change was missed.
    ZooKeeperSession,
}

impl ReloadTrigger {
    /// Whether a watcher set it off (the file or the znode), rather than a
    /// person: a reload that finds the version in force is then not
    /// recorded.
    pub fn is_watch(self) -> bool {
        matches!(
            self,
            ReloadTrigger::FileChange
                | ReloadTrigger::ZnodeChange
                | ReloadTrigger::ZooKeeperSession
        )
    }
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
    /// The znode version of the text in force, when it came from ZooKeeper.
    pub znode_version: Option<i32>,
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
    /// Configs put in force since the first (reloads, promotions, moves).
    applied: AtomicU64,
    /// Reload attempts refused.
    refused: AtomicU64,
}

impl ConfigStatus {
    /// Status of a first config.
    pub fn new(source: String, version: String) -> Self {
        Self {
            inner: Mutex::new(ConfigStatusSnapshot {
                source,
                version,
                znode_version: None,
                loaded_at: SystemTime::now(),
                last_reload: None,
            }),
            serial: tokio::sync::Mutex::new(()),
            applied: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Configs put in force since the first, and reload attempts refused.
    pub fn reload_counts(&self) -> (u64, u64) {
        (
            self.applied.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }

    /// A copy of the current status.
    pub fn snapshot(&self) -> ConfigStatusSnapshot {
        lock(&self.inner).clone()
    }

    /// Held while a reload or promotion reads the file and swaps the table.
    pub async fn serialize(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.serial.lock().await
    }

    /// Records a reload attempt that left the config in force as it was.
    pub fn record(&self, trigger: ReloadTrigger, result: Result<String, String>) {
        if result.is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        lock(&self.inner).last_reload = Some(ReloadAttempt {
            at: SystemTime::now(),
            trigger,
            result,
        });
    }

    /// Records the znode version of the document in force.
    pub fn set_znode_version(&self, version: Option<i32>) {
        lock(&self.inner).znode_version = version;
    }

    /// Records a new config in force (version `version`).
    pub fn loaded(&self, version: String, trigger: ReloadTrigger, description: String) {
        let now = SystemTime::now();
        self.applied.fetch_add(1, Ordering::Relaxed);
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

/// MD5 (hex) of a config text: its version.
pub fn version_of(text: &[u8]) -> String {
    format!("{:x}", md5::Md5::digest(text))
}

/// Parses and validates the bytes of a config file (`source` names it in
/// error messages) and builds its routing table.
pub fn parse_config(bytes: &[u8], source: &str) -> Result<Topology, ConfigErrors> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ConfigErrors::single(source, 0, format!("the file is not UTF-8 text: {e}")))?;
    Topology::from_yaml_str(text, source)
}

/// [`parse_config`] with this process's listen addresses laid over the
/// document's.
pub fn build_config(
    bytes: &[u8],
    source: &str,
    overrides: &ListenOverrides,
) -> Result<Topology, ConfigErrors> {
    let mut topology = parse_config(bytes, source)?;
    overrides
        .apply(&mut topology.config)
        .map_err(|e| ConfigErrors::single(source, 0, e))?;
    Ok(topology)
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
