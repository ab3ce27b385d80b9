//! The registry of the proxies running one document: an ephemeral znode
//! per proxy under `<document>/proxies/`, holding its [`ProxyEntry`] as
//! JSON, created at start (a live duplicate id is refused), rewritten
//! after every swap, re-created on a new session, deleted at shutdown.

use std::sync::Arc;
use std::time::Duration;

use tracing::{error, warn};
use zookeeper_client as zk;

use super::{request, ZkError, ZooKeeper};
use crate::control::process::ProxyEntry;
use crate::control::status::version_of;
use crate::sync::lock;

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
    pub async fn register(&self, entry: ProxyEntry) -> Result<(), ZkError> {
        let client = self.client()?;
        self.create_entry(&client, &entry).await?;
        *lock(&self.entry) = Some(entry);
        Ok(())
    }

    async fn create_entry(&self, client: &zk::Client, entry: &ProxyEntry) -> Result<(), ZkError> {
        let dir = self.location.registry_path();
        let path = self.location.registry_entry(&entry.id);
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        client
            .mkdir(&dir, &persistent)
            .await
            .map_err(request("create", &dir))?;
        match client.create(&path, &entry.to_json(), &ephemeral).await {
            Ok(_) => Ok(()),
            Err(zk::Error::NodeExists) => {
                let owner = client
                    .check_stat(&path)
                    .await
                    .map_err(request("read", &path))?
                    .map_or(0, |stat| stat.ephemeral_owner);
                if owner == client.session_id().0 {
                    client
                        .set_data(&path, &entry.to_json(), None)
                        .await
                        .map_err(request("write", &path))?;
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

    /// Re-creates the entry on a new session. The previous session's
    /// entry may outlive it by up to a session timeout: wait for it.
    pub(super) async fn register_again(&self, client: &zk::Client) {
        let Some(entry) = lock(&self.entry).clone() else {
            return;
        };
        let give_up = tokio::time::Instant::now() + client.session_timeout() * 2;
        loop {
            match self.create_entry(client, &entry).await {
                Ok(()) => return,
                Err(ZkError::DuplicateId { .. }) if tokio::time::Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => {
                    error!("cannot register this proxy again on its new ZooKeeper session: {e}");
                    return;
                }
            }
        }
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
            let path = zk.location.registry_entry(&entry.id);
            if let Err(e) = client.set_data(&path, &entry.to_json(), None).await {
                warn!(%path, "cannot update this proxy's registry entry ({e}); it is written again on the next change or session");
            }
        }
    });
    zookeeper.keep(task);
}
