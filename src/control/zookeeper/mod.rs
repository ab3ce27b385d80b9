//! The config document in ZooKeeper: one session per proxy, the document
//! read from its znode and watched (`watch`), this proxy's ephemeral entry
//! in the registry under the document (`registry`), and the version-checked
//! writes of `shardgate config push` and the reads of `config get`
//! (`document`), and a cutover's push guarded by its pause records
//! (`guarded`).
//!
//! The session lives in [`ZooKeeper`]. A session that expired is dead for
//! good: the watcher builds a new client, registers again and re-reads the
//! document. The document's znode is the root of everything about one
//! fleet's proxies: the registry (`<path>/proxies/<id>`) and the fleet-wide
//! pause records (`<path>/pauses/<id>`, `pauses`). Cut off from ZooKeeper
//! for nearly a session timeout, the proxy refuses writes until a session
//! re-reads the document (`fence`).

pub mod acl;
pub mod auth;
mod document;
mod fence;
mod guarded;
mod pauses;
mod records;
mod registry;
mod watch;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zookeeper_client as zk;

use super::process::ProxyEntry;
use crate::sync::lock;
use crate::topology::source::ZkLocation;
use crate::topology::ConfigErrors;

pub use document::{get, push, push_with, refuse_open_document, refuse_rehoming, Document, Pushed};
pub use fence::{Clock, Liveness, Mark};
pub use guarded::{outcome, GuardedPushError, Outcome};
pub use pauses::{missing, PauseRecord, WatchedPauses};
pub use records::{
    claim_split, read_split_record, split_claim_path, split_record_path, write_split_record,
    SplitClaim, SplitClaimed,
};
pub use registry::Registered;
pub use watch::spawn_watch;

/// The session timeout a proxy asks ZooKeeper for (the server clamps it to
/// its own minimum and maximum).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Longest wait for the registry entry's deletion at shutdown (ZooKeeper
/// may be unreachable: the entry then goes with the session).
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Longest wait for a first session, on top of what the client allows.
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// Why a ZooKeeper operation failed. Nothing was changed unless the
/// message says so.
#[derive(Debug, thiserror::Error)]
pub enum ZkError {
    /// No server of the ensemble gave a session.
    #[error("cannot reach ZooKeeper at {hosts}: {reason}; is it running and reachable?")]
    Connect {
        /// The connect string.
        hosts: String,
        /// The client's error.
        reason: String,
    },
    /// A request failed.
    #[error("ZooKeeper {what} of {path} failed: {source}{}", access_hint(source))]
    Request {
        /// The request (`read`, `create`, ...).
        what: &'static str,
        /// The znode.
        path: String,
        /// The client's error.
        #[source]
        source: zk::Error,
    },
    /// The document's znode does not exist.
    #[error("the config znode {location} does not exist; write it with `shardgate config push FILE --source {location}`")]
    NoDocument {
        /// The source.
        location: String,
    },
    /// The document does not parse or validate.
    #[error("the config document {source_name} is invalid ({} problem(s)):\n{errors}", errors.0.len())]
    Invalid {
        /// The document's name in the messages.
        source_name: String,
        /// Every problem, each with its line.
        errors: ConfigErrors,
    },
    /// Another live proxy holds this id.
    #[error(
        "proxy id `{id}` is already registered at {path} by a live proxy (ZooKeeper session {owner:#x}); \
         give this proxy another --proxy-id, or, if that proxy just stopped, wait for its session to expire \
         (at most {timeout_ms} ms) and start again"
    )]
    DuplicateId {
        /// The id.
        id: String,
        /// Its registry znode.
        path: String,
        /// The session that holds it.
        owner: i64,
        /// This client's session timeout.
        timeout_ms: u128,
    },
    /// `serve --takeover` with the id of the running proxy: both processes
    /// serve during the hand-off, each registered and acking fleet-wide
    /// pauses under its own id.
    #[error(
        "proxy id `{id}` is registered at {path} by a live proxy, presumably the one this --takeover replaces: \
         both processes serve during the hand-off, each registered (and acking fleet-wide pauses) under its own id, \
         so the new process needs another --proxy-id (the default, host:pid, is one); the running proxy goes on serving"
    )]
    TakeoverSameId {
        /// The id.
        id: String,
        /// Its registry znode.
        path: String,
    },
    /// `config push` of a document that would send existing data to other
    /// shards, without `--allow-rehome`.
    #[error(
        "the document would send existing data to other shards compared with the one in {path} (znode version \
         {znode_version}); nothing was written. Re-homing change(s): {}. If the data has been moved to match, \
         push again with --allow-rehome",
        crate::topology::rehome::describe(changes)
    )]
    Rehome {
        /// The znode.
        path: String,
        /// The version of the document in force.
        znode_version: i32,
        /// Every re-homing change.
        changes: Vec<crate::topology::rehome::Rehoming>,
    },
    /// `config push --expected-version N` but the znode is at another version.
    #[error(
        "the config znode {path} is at version {}, not the expected version {expected}; nothing was written. \
         `shardgate config get` it, merge your change, and push again",
        actual.map_or_else(|| "<none: it does not exist>".to_owned(), |v| v.to_string())
    )]
    StaleVersion {
        /// The znode.
        path: String,
        /// The version the push was based on.
        expected: i32,
        /// The version found (none: no znode).
        actual: Option<i32>,
    },
    /// Another writer changed the znode between the push's read and write.
    #[error(
        "another writer changed the config znode {path} during this push: read at version {}, now at version {}; \
         nothing was written. `shardgate config get` it, merge your change, and push again",
        version_text(*read), version_text(*now)
    )]
    ConcurrentWrite {
        /// The znode.
        path: String,
        /// The version the push read.
        read: Option<i32>,
        /// The version found after the refused write.
        now: Option<i32>,
    },
    /// A read returned an older document than one this proxy already read
    /// (a new session on a server that lags behind the leader).
    #[error(
        "the ZooKeeper server answered with an older state of {path} (change {read:#x}) than this proxy \
         already read (change {seen:#x}); the config in force keeps serving and the read is retried"
    )]
    Stale {
        /// The znode.
        path: String,
        /// The transaction id of the change the read returned.
        read: i64,
        /// The newest change read before.
        seen: i64,
    },
    /// A multi (several writes, all or none) failed; nothing was changed.
    #[error("ZooKeeper {what} of {path} (all or nothing) failed: {reason}; nothing was changed, try again")]
    Multi {
        /// The writes (`create`, `delete`).
        what: &'static str,
        /// The znodes.
        path: String,
        /// The client's error.
        reason: String,
    },
    /// The document's znode is writable by anyone, and the process was
    /// not told that is intended (`--zk-allow-open-acl`).
    #[error("{}", acl::open_document_refusal(path, *creating))]
    OpenDocument {
        /// The znode.
        path: String,
        /// Whether it does not exist yet and a push would create it open
        /// (no `--zk-auth-file`).
        creating: bool,
    },
    /// The session was closed (the proxy is shutting down).
    #[error("the ZooKeeper session of this proxy is closed")]
    Closed,
}

/// What to do about a request the znode's ACL refused.
fn access_hint(error: &zk::Error) -> &'static str {
    if matches!(error, zk::Error::NoAuth) {
        match auth::installed() {
            None => " (the znode's ACL admits only an identity this process was not given: pass --zk-auth-file with its user:password)",
            Some(_) => " (the znode's ACL does not admit the identity of --zk-auth-file: use the one that created it)",
        }
    } else {
        ""
    }
}

/// A persistent znode: only this process's ZooKeeper identity may read and
/// write it when it has one ([`auth`]), else anyone.
fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(auth::acls())
}

/// An ephemeral znode (gone with its session), with the same ACL as
/// [`persistent`].
fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(auth::acls())
}

/// The znode's version now, if it exists and can be read: what a writer
/// that lost a version check found in its way.
async fn version_now(client: &zk::Client, path: &str) -> Option<i32> {
    client
        .check_stat(path)
        .await
        .ok()
        .flatten()
        .map(|stat| stat.version)
}

fn version_text(version: Option<i32>) -> String {
    version.map_or_else(|| "<none: no znode>".to_owned(), |v| v.to_string())
}

fn request<'a>(what: &'static str, path: &'a str) -> impl FnOnce(zk::Error) -> ZkError + 'a {
    move |source| ZkError::Request {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Opens a session on the ensemble of `location`, inside the current tokio
/// runtime (the client spawns its own task there). Fails at once when no
/// server answers.
pub async fn connect(location: &ZkLocation) -> Result<zk::Client, ZkError> {
    let hosts = location.connect_string();
    let connecting = auth::authenticate(zk::Client::connector())
        .with_session_timeout(SESSION_TIMEOUT)
        .with_fail_eagerly()
        .connect(&hosts);
    match tokio::time::timeout(CONNECT_WAIT, connecting).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(ZkError::Connect {
            hosts,
            reason: e.to_string(),
        }),
        Err(_) => Err(ZkError::Connect {
            hosts,
            reason: format!("no session within {} s", CONNECT_WAIT.as_secs()),
        }),
    }
}

/// A proxy's link to ZooKeeper: the document's location, the session in
/// use (replaced after an expiry), the registry entry it keeps, and its
/// background tasks.
#[derive(Debug)]
pub struct ZooKeeper {
    /// Where the document is.
    pub location: ZkLocation,
    client: Mutex<Option<zk::Client>>,
    entry: Mutex<Option<ProxyEntry>>,
    publish_wanted: tokio::sync::Notify,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
    /// The newest change of the document read so far (its `mzxid`): a read
    /// never goes back before it, across sessions too.
    newest_read: AtomicI64,
    /// The session that created this proxy's registry entry (0: none):
    /// only that session writes or deletes it.
    registered_session: AtomicI64,
    /// The session in use has not read the document yet (a new session
    /// first syncs its server with the leader).
    unsynced: AtomicBool,
    /// The fencing clock (`fence`).
    heartbeat: fence::Heartbeat,
    /// What was read again since the fence went up.
    recovery: fence::Recovery,
    /// The fence's count of raises, for reads to start again after one.
    raises: tokio::sync::watch::Sender<u64>,
}

impl ZooKeeper {
    /// Opens a session for the document at `location`.
    pub async fn open(location: ZkLocation) -> Result<Self, ZkError> {
        let sent = Instant::now();
        let client = connect(&location).await?;
        let heartbeat = fence::Heartbeat::new(sent, client.session_timeout());
        Ok(Self {
            location,
            client: Mutex::new(Some(client)),
            entry: Mutex::new(None),
            publish_wanted: tokio::sync::Notify::new(),
            tasks: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            newest_read: AtomicI64::new(i64::MIN),
            registered_session: AtomicI64::new(0),
            unsynced: AtomicBool::new(false),
            heartbeat,
            recovery: fence::Recovery::default(),
            raises: tokio::sync::watch::Sender::new(0),
        })
    }

    /// The session in use.
    fn client(&self) -> Result<zk::Client, ZkError> {
        lock(&self.client).clone().ok_or(ZkError::Closed)
    }

    /// The id of the session in use.
    fn session(&self) -> Option<i64> {
        lock(&self.client)
            .as_ref()
            .map(|client| client.session_id().0)
    }

    /// The session timeout ZooKeeper granted.
    pub fn session_timeout(&self) -> Option<Duration> {
        lock(&self.client).as_ref().map(zk::Client::session_timeout)
    }

    /// Reads the document: its bytes, znode version and how open its ACL
    /// is. Never an older state than one read before: the first read of a
    /// new session syncs its server with the leader, and a read older than
    /// the newest one seen is refused ([`ZkError::Stale`]). A znode anyone
    /// can write is refused ([`ZkError::OpenDocument`]) unless
    /// `allow_open_acl`.
    pub async fn fetch(
        &self,
        allow_open_acl: bool,
    ) -> Result<(Vec<u8>, i32, acl::Openness), ZkError> {
        let (bytes, version) = self.fetch_data().await?;
        let path = &self.location.path;
        let client = self.client()?;
        let openness = match client.get_acl(path).await {
            Ok((acls, _)) => acl::Openness::of(&acls),
            Err(zk::Error::NoNode) => {
                return Err(ZkError::NoDocument {
                    location: self.location.to_string(),
                })
            }
            Err(e) => return Err(request("read the ACL", path)(e)),
        };
        if openness.writable && !allow_open_acl {
            return Err(ZkError::OpenDocument {
                path: path.clone(),
                creating: false,
            });
        }
        Ok((bytes, version, openness))
    }

    async fn fetch_data(&self) -> Result<(Vec<u8>, i32), ZkError> {
        let client = self.client()?;
        let path = &self.location.path;
        if self.unsynced.load(Ordering::SeqCst) {
            client.sync(path).await.map_err(request("sync", path))?;
            self.unsynced.store(false, Ordering::SeqCst);
        }
        match client.get_data(path).await {
            Ok((bytes, stat)) => {
                let seen = self.newest_read.fetch_max(stat.mzxid, Ordering::SeqCst);
                if stat.mzxid < seen {
                    return Err(ZkError::Stale {
                        path: path.clone(),
                        read: stat.mzxid,
                        seen,
                    });
                }
                Ok((bytes, stat.version))
            }
            Err(zk::Error::NoNode) => Err(ZkError::NoDocument {
                location: self.location.to_string(),
            }),
            Err(e) => Err(request("read", path)(e)),
        }
    }

    /// Puts `client`, a new session, in use; false when the link was
    /// closed meanwhile.
    fn replace_client(&self, client: zk::Client) -> bool {
        let mut current = lock(&self.client);
        if current.is_none() {
            return false;
        }
        *current = Some(client);
        self.unsynced.store(true, Ordering::SeqCst);
        true
    }

    /// Keeps a background task of this link (aborted by [`ZooKeeper::close`]).
    pub(crate) fn keep(&self, task: JoinHandle<()>) {
        lock(&self.tasks).push(task);
    }

    /// Ends the session: stops the watcher and the registry task, deletes
    /// this proxy's registry entry and closes the session (which would
    /// delete it too).
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        let client = lock(&self.client).take();
        let id = lock(&self.entry).as_ref().map(|entry| entry.id.clone());
        if let (Some(client), Some(id)) = (client, id) {
            if self.registered_session.load(Ordering::SeqCst) != client.session_id().0 {
                // Not ours (any more): the id may be another proxy's now.
                return;
            }
            let path = self.location.registry_entry(&id);
            match tokio::time::timeout(CLOSE_WAIT, client.delete(&path, None)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(%path, "cannot delete this proxy's registry entry ({e}); it goes with the session");
                }
                Err(_) => {
                    tracing::warn!(%path, "ZooKeeper did not answer the deletion of this proxy's registry entry; it goes when the session expires");
                }
            }
        }
    }

    /// Whether [`ZooKeeper::close`] ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}
