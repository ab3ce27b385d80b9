//! This proxy process as the registry and `SHOW PROXIES` describe it: its
//! id, the listen addresses it lays over the document's, when it started
//! and where it listens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::sync::lock;
use crate::topology::bootstrap::{default_proxy_id, ListenOverrides};

/// What one process is, beyond its config document.
#[derive(Debug)]
pub struct Process {
    /// Its id in the registry (`--proxy-id`, default `host:pid`).
    pub id: String,
    /// Listen addresses given by flags or the bootstrap file; applied to
    /// every document it loads.
    pub overrides: ListenOverrides,
    /// Whether a config znode anyone can write is accepted
    /// (`--zk-allow-open-acl`); refused otherwise.
    pub allow_open_acl: bool,
    /// Started to take over from a running process (`serve --takeover`):
    /// an id held in the registry is that process's, refused at once.
    pub takeover: bool,
    /// When it started.
    pub started_at: SystemTime,
    addresses: Mutex<Addresses>,
    /// A stop was asked for (SIGTERM): `/ready` answers 503.
    draining: AtomicBool,
}

/// Where a started proxy listens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Addresses {
    /// The client port.
    pub client: Option<String>,
    /// The admin port.
    pub admin: Option<String>,
    /// The `/metrics` endpoint.
    pub metrics: Option<String>,
}

impl Default for Process {
    fn default() -> Self {
        Self::new(default_proxy_id(), ListenOverrides::default())
    }
}

impl Process {
    /// A process with this id and these overrides, started now.
    pub fn new(id: String, overrides: ListenOverrides) -> Self {
        Self {
            id,
            overrides,
            allow_open_acl: false,
            takeover: false,
            started_at: SystemTime::now(),
            addresses: Mutex::new(Addresses::default()),
            draining: AtomicBool::new(false),
        }
    }

    /// Marks the process as stopping: it reports itself not ready.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Whether it is stopping.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Records where the proxy listens, once it has bound its ports.
    pub fn set_addresses(&self, addresses: Addresses) {
        *lock(&self.addresses) = addresses;
    }

    /// Where the proxy listens (empty before it started).
    pub fn addresses(&self) -> Addresses {
        lock(&self.addresses).clone()
    }

    /// Its registry entry with the config version in force.
    pub fn entry(&self, config_version: String, znode_version: Option<i32>) -> ProxyEntry {
        ProxyEntry {
            id: self.id.clone(),
            pid: std::process::id(),
            addresses: self.addresses(),
            config_version,
            znode_version,
            started_at: self
                .started_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }
}

/// One proxy's registry entry (JSON in its ephemeral znode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyEntry {
    /// The proxy's id.
    pub id: String,
    /// Its process id.
    pub pid: u32,
    /// Where it listens.
    #[serde(flatten)]
    pub addresses: Addresses,
    /// MD5 (hex) of the document in force.
    pub config_version: String,
    /// The znode version of the document in force (none for a file).
    pub znode_version: Option<i32>,
    /// When it started (seconds since the Unix epoch).
    pub started_at: u64,
}

impl ProxyEntry {
    /// The entry as stored.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// An entry read back; `None` for data that is not one.
    pub fn from_json(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_through_json() {
        let process = Process::new("web-1".into(), ListenOverrides::default());
        process.set_addresses(Addresses {
            client: Some("127.0.0.1:7033".into()),
            admin: Some("127.0.0.1:7032".into()),
            metrics: None,
        });
        let entry = process.entry("abc".into(), Some(3));
        let json = String::from_utf8(entry.to_json()).unwrap();
        assert!(json.contains("\"client\":\"127.0.0.1:7033\""), "{json}");
        assert_eq!(ProxyEntry::from_json(json.as_bytes()), Some(entry));
        assert_eq!(ProxyEntry::from_json(b"not json"), None);
    }
}
