//! Hot reload of the config file: parse, validate, build the new routing
//! table, swap it in atomically; remember what happened for `SHOW CONFIG`.
//! Triggers: a change of the file (its directory is watched), SIGHUP, and
//! the admin command `RELOAD CONFIG`.

use std::sync::Mutex;
use std::time::SystemTime;

use super::Engine;

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

/// Shared, lock-protected [`ConfigStatusSnapshot`].
#[derive(Debug)]
pub struct ConfigStatus {
    inner: Mutex<ConfigStatusSnapshot>,
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
        }
    }

    /// A copy of the current status.
    pub fn snapshot(&self) -> ConfigStatusSnapshot {
        match self.inner.lock() {
            Ok(inner) => inner.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl Engine {
    /// The config in force and the last reload attempt.
    pub fn config_status(&self) -> ConfigStatusSnapshot {
        self.config_status.snapshot()
    }
}
