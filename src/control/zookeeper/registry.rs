//! The registry of the proxies running one document: an ephemeral znode
//! per proxy under `<document>/proxies/`, holding its [`ProxyEntry`] as
//! JSON, created at start (a live duplicate id is refused), rewritten
//! after every swap, re-created on a new session, deleted at shutdown.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{error, warn};
use zookeeper_client as zk;

use super::{ephemeral, persistent, request, ZkError, ZooKeeper};
use crate::control::process::ProxyEntry;
use crate::control::status::version_of;
use crate::sync::lock;

/// First pause between attempts to register again on a new session.
const REGISTER_RETRY_FIRST: Duration = Duration::from_millis(200);
/// Longest pause between them.
const REGISTER_RETRY_MAX: Duration = Duration::from_secs(5);
/// Attempts between two log lines about a registration that keeps failing.
const REGISTER_LOG_EVERY: u32 = 10;

/// Every registered proxy of a document, and the document now in its znode.
#[derive(Debug, Clone)]
pub struct Registered {
    /// The entries, by id; `None` for a znode whose data is not an entry.
    pub entries: Vec<(String, Option<ProxyEntry>)>,
    /// MD5 of the document now in the znode (none: no znode).
    pub current_version: Option<String>,
    /// Its znode version.
    pub current_znode_version: Option<i32>,
}

impl ZooKeeper {
    /// Claims this proxy's id with `entry`: creates its ephemeral znode
    /// (and the registry's directory). Refused when another live session
    /// holds the id.
    ///
    /// A proxy restarted at once after a crash finds its previous entry
    /// still there until that session expires: the id is retried for up to
    /// twice the session timeout before it is refused. A `takeover` is
    /// refused at once ([`ZkError::TakeoverSameId`]): the running process it
    /// would replace holds the id until the hand-off ends.
    pub async fn register(&self, entry: ProxyEntry, takeover: bool) -> Result<(), ZkError> {
        let client = self.client()?;
        let give_up = tokio::time::Instant::now() + client.session_timeout() * 2;
        loop {
            match self.create_entry(&client, &entry).await {
                Ok(()) => break,
                Err(ZkError::DuplicateId { id, path, .. }) if takeover => {
                    return Err(ZkError::TakeoverSameId { id, path });
                }
                Err(ZkError::DuplicateId { .. }) if tokio::time::Instant::now() < give_up => {
                    tokio::time::sleep(REGISTER_RETRY_FIRST).await;
                }
                Err(e) => return Err(e),
            }
        }
        *lock(&self.entry) = Some(entry);
        Ok(())
    }

    async fn create_entry(&self, client: &zk::Client, entry: &ProxyEntry) -> Result<(), ZkError> {
        let dir = self.location.registry_path();
        let path = self.location.registry_entry(&entry.id);
        client
            .mkdir(&dir, &persistent())
            .await
            .map_err(request("create", &dir))?;
        let session = client.session_id().0;
        match client.create(&path, &entry.to_json(), &ephemeral()).await {
            Ok(_) => {
                self.registered_session.store(session, Ordering::SeqCst);
                Ok(())
            }
            Err(zk::Error::NodeExists) => {
                let owner = client
                    .check_stat(&path)
                    .await
                    .map_err(request("read", &path))?
                    .map_or(0, |stat| stat.ephemeral_owner);
                if owner == session {
                    client
                        .set_data(&path, &entry.to_json(), None)
                        .await
                        .map_err(request("write", &path))?;
                    self.registered_session.store(session, Ordering::SeqCst);
                    return Ok(());
                }
                Err(ZkError::DuplicateId {
                    id: entry.id.clone(),
                    path,
                    owner,
                    timeout_ms: client.session_timeout().as_millis(),
                })
            }
            Err(e) => Err(request("create", &path)(e)),
        }
    }

    /// Re-creates the entry on `client`, a new session, in the background
    /// until it is created or the session is replaced: the previous
    /// session's entry may outlive it by up to a session timeout, and
    /// another proxy may hold the id meanwhile (this proxy then keeps
    /// serving unregistered, and says so).
    pub(super) fn spawn_register_again(self: &Arc<Self>, client: zk::Client) {
        let zookeeper = Arc::clone(self);
        let task = tokio::spawn(async move {
            let session = client.session_id().0;
            let mut pause = REGISTER_RETRY_FIRST;
            for attempt in 0u32.. {
                if zookeeper.is_closed() || zookeeper.session() != Some(session) {
                    return;
                }
                // The latest entry: a swap may have happened meanwhile.
                let Some(entry) = lock(&zookeeper.entry).clone() else {
                    return;
                };
                match zookeeper.create_entry(&client, &entry).await {
                    Ok(()) => {
                        if attempt > 0 {
                            warn!(id = %entry.id, "registered again after {attempt} attempt(s)");
                        }
                        return;
                    }
                    Err(e) => {
                        if attempt % REGISTER_LOG_EVERY == REGISTER_LOG_EVERY - 1 {
                            error!(
                                "this proxy is not registered (SHOW PROXIES does not list it) and keeps trying: {e}"
                            );
                        }
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(REGISTER_RETRY_MAX);
                    }
                }
            }
        });
        self.keep(task);
    }

    /// Replaces the entry (a swap, or the addresses once bound); the
    /// registry task writes it.
    pub fn publish(&self, entry: ProxyEntry) {
        let mut current = lock(&self.entry);
        if current.is_some() {
            *current = Some(entry);
            self.publish_wanted.notify_one();
        }
    }

    /// Replaces the entry and writes it now (the start's write of the
    /// bound addresses, so the registry shows them once the proxy
    /// listens); a failure is logged, the entry is written again on the
    /// next change or session.
    pub async fn publish_now(&self, entry: ProxyEntry) {
        {
            let mut current = lock(&self.entry);
            if current.is_none() {
                return;
            }
            *current = Some(entry.clone());
        }
        let Ok(client) = self.client() else {
            return;
        };
        self.write_entry(&client, &entry).await;
    }

    /// Writes `entry` over this proxy's registry znode, if this session
    /// created it: after a lost session the id may be another proxy's now.
    async fn write_entry(&self, client: &zk::Client, entry: &ProxyEntry) {
        if self.registered_session.load(Ordering::SeqCst) != client.session_id().0 {
            return;
        }
        let path = self.location.registry_entry(&entry.id);
        if let Err(e) = client.set_data(&path, &entry.to_json(), None).await {
            warn!(%path, "cannot update this proxy's registry entry ({e}); it is written again on the next change or session");
        }
    }

    /// Every registered proxy of this document.
    pub async fn proxies(&self) -> Result<Registered, ZkError> {
        let client = self.client()?;
        let path = &self.location.path;
        let (current_version, current_znode_version) = match client.get_data(path).await {
            Ok((bytes, stat)) => (Some(version_of(&bytes)), Some(stat.version)),
            Err(zk::Error::NoNode) => (None, None),
            Err(e) => return Err(request("read", path)(e)),
        };
        let dir = self.location.registry_path();
        let mut ids = match client.list_children(&dir).await {
            Ok(ids) => ids,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(request("list", &dir)(e)),
        };
        ids.sort();
        let mut entries = Vec::with_capacity(ids.len());
        for id in ids {
            let entry_path = self.location.registry_entry(&id);
            match client.get_data(&entry_path).await {
                Ok((bytes, _)) => entries.push((id, ProxyEntry::from_json(&bytes))),
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(request("read", &entry_path)(e)),
            }
        }
        Ok(Registered {
            entries,
            current_version,
            current_znode_version,
        })
    }
}

/// Starts the task that writes this proxy's entry whenever it changes.
pub(super) fn spawn_publisher(zookeeper: &Arc<ZooKeeper>) {
    let zk = Arc::clone(zookeeper);
    let task = tokio::spawn(async move {
        loop {
            zk.publish_wanted.notified().await;
            let Some(entry) = lock(&zk.entry).clone() else {
                continue;
            };
            let Ok(client) = zk.client() else {
                return;
            };
            zk.write_entry(&client, &entry).await;
        }
    });
    zookeeper.keep(task);
}
