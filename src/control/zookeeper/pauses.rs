//! Fleet-wide pause records under the document: `<document>/pauses/<id>`
//! holds a [`PauseRecord`] as JSON, `<id>/acks/<proxy-id>` is the
//! ephemeral ack of each proxy that applied it to its own gate and
//! drained. The record encoding and the "who has not acked yet" set logic
//! are pure; the rest are the reads and writes on them.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use zookeeper_client as zk;

use super::{ephemeral, persistent, request, Mark, ZkError, ZooKeeper};

/// One fleet-wide pause, as stored in its znode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseRecord {
    /// The fleet named (`None`: every fleet that has the range).
    pub fleet: Option<String>,
    /// First shard paused.
    pub first: u32,
    /// Last shard paused.
    pub last: u32,
    /// The proxy the `PAUSE SHARDS` was typed into.
    pub requested_by: String,
    /// The admin account that typed it.
    pub user: String,
    /// When (milliseconds since the Unix epoch).
    pub requested_at_ms: u64,
    /// How long each proxy may drain, and the coordinator waits, in ms.
    pub timeout_ms: u64,
    /// The cutover that holds the pause (`MOVE SHARDS 1024-2047 IN main TO
    /// ...`); none for a `PAUSE SHARDS`. `RESUME SHARDS` leaves such a
    /// record alone unless told `FORCE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutover: Option<String>,
}

impl PauseRecord {
    /// The record as stored.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A record read back; `None` for data that is not one.
    pub fn from_json(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// The znode name of this record: fleet, range, requester and time, so
    /// two pauses never share one.
    pub fn id(&self) -> String {
        format!(
            "{}-{}-{}-{}-{}",
            self.fleet.as_deref().unwrap_or("all"),
            self.first,
            self.last,
            self.requested_by,
            self.requested_at_ms
        )
    }

    /// Whether this record's range meets `first..=last` of `fleet` (`None`
    /// on either side: every fleet).
    pub fn overlaps(&self, fleet: Option<&str>, first: u32, last: u32) -> bool {
        let same_fleet = match (self.fleet.as_deref(), fleet) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        same_fleet && self.first <= last && first <= self.last
    }

    /// Whether this record lies inside `first..=last` of `fleet` (`None`:
    /// any fleet).
    pub fn within(&self, fleet: Option<&str>, first: u32, last: u32) -> bool {
        let same_fleet = fleet.is_none_or(|name| self.fleet.as_deref() == Some(name));
        same_fleet && first <= self.first && self.last <= last
    }
}

/// The live proxies that have not acked: `live` less `acked`, sorted.
pub fn missing(live: &[String], acked: &[String]) -> Vec<String> {
    let acked: BTreeSet<&String> = acked.iter().collect();
    let missing: BTreeSet<&String> = live.iter().filter(|id| !acked.contains(id)).collect();
    missing.into_iter().cloned().collect()
}

/// The fleet-wide pause records, read with a watch on their list.
#[derive(Debug)]
pub struct WatchedPauses {
    /// The records, by id.
    pub records: Vec<(String, PauseRecord)>,
    /// Fires when the list changes.
    pub watcher: zk::OneshotWatcher,
    /// The session's state changes.
    pub states: zk::StateWatcher,
    /// The session that read them and the fence's count before the read.
    pub mark: Mark,
}

impl ZooKeeper {
    /// `<document>/pauses`.
    fn pauses_path(&self) -> String {
        format!("{}/pauses", self.location.path)
    }

    /// `<document>/pauses/<id>`.
    pub(super) fn record_path(&self, id: &str) -> String {
        format!("{}/{id}", self.pauses_path())
    }

    fn acks_path(&self, id: &str) -> String {
        format!("{}/acks", self.record_path(id))
    }

    /// Creates the record (and its `acks`) in one multi; its id.
    pub async fn create_pause(&self, record: &PauseRecord) -> Result<String, ZkError> {
        let client = self.client()?;
        let dir = self.pauses_path();
        client
            .mkdir(&dir, &persistent())
            .await
            .map_err(request("create", &dir))?;
        let id = record.id();
        let path = self.record_path(&id);
        let mut multi = client.new_multi_writer();
        let added = multi
            .add_create(&path, &record.to_json(), &persistent())
            .and_then(|()| multi.add_create(&self.acks_path(&id), b"", &persistent()));
        added.map_err(request("create", &path))?;
        multi.commit().await.map_err(|e| ZkError::Multi {
            what: "create",
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Ok(id)
    }

    /// Every pause record, by id (unreadable ones left out).
    pub async fn pause_records(&self) -> Result<Vec<(String, PauseRecord)>, ZkError> {
        let client = self.client()?;
        let dir = self.pauses_path();
        let ids = match client.list_children(&dir).await {
            Ok(ids) => ids,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(request("list", &dir)(e)),
        };
        read_records(&client, &dir, ids).await
    }

    /// [`ZooKeeper::pause_records`] with a one-shot watch on the list and
    /// the session's state watcher; the read is marked with its session and
    /// `raises` (the fence's count before the read).
    pub async fn watch_pause_records(&self, raises: u64) -> Result<WatchedPauses, ZkError> {
        let client = self.client()?;
        let mark = Mark {
            session: client.session_id().0,
            raises,
        };
        let states = client.state_watcher();
        let dir = self.pauses_path();
        client
            .mkdir(&dir, &persistent())
            .await
            .map_err(request("create", &dir))?;
        let (ids, watcher) = client
            .list_and_watch_children(&dir)
            .await
            .map_err(request("watch", &dir))?;
        Ok(WatchedPauses {
            records: read_records(&client, &dir, ids).await?,
            watcher,
            states,
            mark,
        })
    }

    /// The proxies that acked record `id` (none when it is gone).
    pub async fn acks(&self, id: &str) -> Result<Option<Vec<String>>, ZkError> {
        let client = self.client()?;
        let path = self.acks_path(id);
        match client.list_children(&path).await {
            Ok(ids) => Ok(Some(ids)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(request("list", &path)(e)),
        }
    }

    /// The ids of the registered proxies.
    pub async fn live_proxies(&self) -> Result<Vec<String>, ZkError> {
        let client = self.client()?;
        let dir = self.location.registry_path();
        match client.list_children(&dir).await {
            Ok(ids) => Ok(ids),
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(request("list", &dir)(e)),
        }
    }

    /// Acks record `id` as this proxy (ephemeral: it goes with the
    /// session). False when the record is gone.
    ///
    /// An ack under this id held by another session is a previous process
    /// of this id that left, whose session has not expired yet: when this
    /// session holds the id in the registry, it is replaced, or it would
    /// vanish at that expiry and leave this proxy unacked.
    pub async fn ack(&self, id: &str, proxy: &str) -> Result<bool, ZkError> {
        const ATTEMPTS: usize = 3;
        let client = self.client()?;
        let path = format!("{}/{proxy}", self.acks_path(id));
        let session = client.session_id().0;
        for _ in 0..ATTEMPTS {
            match client.create(&path, b"", &ephemeral()).await {
                Ok(_) => return Ok(true),
                Err(zk::Error::NoNode) => return Ok(false),
                Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(request("create", &path)(e)),
            }
            let stat = match client.check_stat(&path).await {
                Ok(Some(stat)) => stat,
                Ok(None) => continue,
                Err(e) => return Err(request("read", &path)(e)),
            };
            let registered = self.registered_session.load(Ordering::SeqCst) == session;
            if stat.ephemeral_owner == session || !registered {
                return Ok(true);
            }
            match client.delete(&path, Some(stat.version)).await {
                Ok(()) | Err(zk::Error::NoNode | zk::Error::BadVersion) => {}
                Err(e) => return Err(request("delete", &path)(e)),
            }
        }
        Err(request("create", &path)(zk::Error::NodeExists))
    }

    /// Deletes records `ids` with their acks, all in one multi. A proxy
    /// acking in between makes the multi fail; it is retried on a fresh
    /// list of acks.
    pub async fn delete_pauses(&self, ids: &[String]) -> Result<(), ZkError> {
        const ATTEMPTS: usize = 5;
        let client = self.client()?;
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            let mut multi = client.new_multi_writer();
            for id in ids {
                let acks = self.acks_path(id);
                let acked = match client.list_children(&acks).await {
                    Ok(acked) => Some(acked),
                    Err(zk::Error::NoNode) => None,
                    Err(e) => return Err(request("list", &acks)(e)),
                };
                if let Some(acked) = acked {
                    for proxy in acked {
                        let path = format!("{acks}/{proxy}");
                        multi
                            .add_delete(&path, None)
                            .map_err(request("delete", &path))?;
                    }
                    multi
                        .add_delete(&acks, None)
                        .map_err(request("delete", &acks))?;
                }
                let path = self.record_path(id);
                multi
                    .add_delete(&path, None)
                    .map_err(request("delete", &path))?;
            }
            match multi.commit().await {
                Ok(_) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
        }
        Err(ZkError::Multi {
            what: "delete",
            path: ids.join(", "),
            reason: last,
        })
    }
}

async fn read_records(
    client: &zk::Client,
    dir: &str,
    mut ids: Vec<String>,
) -> Result<Vec<(String, PauseRecord)>, ZkError> {
    ids.sort();
    let mut records = Vec::with_capacity(ids.len());
    for id in ids {
        let path = format!("{dir}/{id}");
        match client.get_data(&path).await {
            Ok((bytes, _)) => {
                if let Some(record) = PauseRecord::from_json(&bytes) {
                    records.push((id, record));
                }
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(request("read", &path)(e)),
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fleet: Option<&str>, first: u32, last: u32) -> PauseRecord {
        PauseRecord {
            fleet: fleet.map(str::to_owned),
            first,
            last,
            requested_by: "alpha".to_owned(),
            user: "admin".to_owned(),
            requested_at_ms: 1_700_000_000_000,
            timeout_ms: 5000,
            cutover: None,
        }
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_record_reads_back_as_written_and_garbage_is_none() {
        let written = record(Some("main"), 100, 199);
        assert_eq!(PauseRecord::from_json(&written.to_json()), Some(written));
        assert_eq!(PauseRecord::from_json(b"{not json"), None);
    }

    #[test]
    fn the_cutover_field_reads_back_and_an_older_record_has_none() {
        let mut held = record(Some("main"), 1024, 2047);
        held.cutover = Some("MOVE SHARDS 1024-2047 IN main TO h:1".to_owned());
        assert_eq!(PauseRecord::from_json(&held.to_json()), Some(held));
        let older = br#"{"fleet":"main","first":1,"last":2,"requested_by":"a","user":"u","requested_at_ms":1,"timeout_ms":5}"#;
        assert_eq!(PauseRecord::from_json(older).map(|r| r.cutover), Some(None));
    }

    #[test]
    fn the_id_names_fleet_range_requester_and_time() {
        assert_eq!(
            record(None, 1, 2).id(),
            "all-1-2-alpha-1700000000000".to_owned()
        );
        assert_eq!(
            record(Some("main"), 1, 2).id(),
            "main-1-2-alpha-1700000000000"
        );
    }

    #[test]
    fn overlap_and_within_respect_the_fleet() {
        let main = record(Some("main"), 100, 199);
        assert!(main.overlaps(Some("main"), 199, 300));
        assert!(main.overlaps(None, 0, 100));
        assert!(!main.overlaps(Some("mod"), 0, 4095));
        assert!(!main.overlaps(Some("main"), 200, 300));
        assert!(main.within(None, 0, 4095));
        assert!(main.within(Some("main"), 100, 199));
        assert!(!main.within(Some("mod"), 0, 4095));
        assert!(!main.within(Some("main"), 150, 4095));
        assert!(record(None, 5, 6).overlaps(Some("mod"), 6, 6));
        assert!(!record(None, 5, 6).within(Some("mod"), 0, 10));
    }

    #[test]
    fn missing_is_the_live_proxies_that_did_not_ack() {
        assert_eq!(
            missing(&ids(&["c", "a", "b"]), &ids(&["b"])),
            ids(&["a", "c"])
        );
        assert!(missing(&ids(&["a"]), &ids(&["a", "gone"])).is_empty());
        assert!(missing(&[], &ids(&["a"])).is_empty());
    }
}
