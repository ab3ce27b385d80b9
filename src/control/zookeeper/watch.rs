//! The watch on the document's znode: a one-shot watch armed, the document
//! read and swapped in through the reload path (same validation, same
//! all-or-nothing rule), then a wait for the next change. A reconnect
//! (same session) re-reads the document, since a change may have been
//! missed meanwhile; an expired session is replaced by a new client, which
//! registers again and re-reads. A read that succeeds may lower the fence
//! raised before it (`fence`).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tracing::{info, warn};
use zookeeper_client as zk;

use super::{connect, fence, registry, ZooKeeper};
use crate::control::status::ReloadTrigger;
use crate::control::Control;

/// First pause before retrying a failed request or connection; it doubles
/// on each failure in a row up to [`RETRY_PAUSE_MAX`].
const RETRY_PAUSE: Duration = Duration::from_millis(250);
/// Longest pause between retries.
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(10);
/// Failures in a row between two log lines (the first is always logged).
const LOG_EVERY: u32 = 20;

/// Retries with a growing pause, logging the first failure and then one in
/// [`LOG_EVERY`] (a long outage is one line a few minutes, not four a
/// second).
struct Backoff {
    failures: u32,
}

impl Backoff {
    fn new() -> Self {
        Self { failures: 0 }
    }

    /// Logs `what` failing (if it is time to) and waits before the retry.
    async fn failed(&mut self, what: String) {
        if self.failures.is_multiple_of(LOG_EVERY) {
            warn!(failures = self.failures + 1, "{what}; retrying");
        }
        let pause = RETRY_PAUSE
            .saturating_mul(1 << self.failures.min(6))
            .min(RETRY_PAUSE_MAX);
        self.failures = self.failures.saturating_add(1);
        tokio::time::sleep(pause).await;
    }
}

/// What ended a wait on the watch.
enum Wake {
    /// The znode changed (or was created or deleted).
    Changed,
    /// The same session is connected again.
    Reconnected,
    /// The session expired or was closed: a new client is needed.
    Lost,
}

/// Starts the watch and the registry task of a ZooKeeper-sourced proxy
/// (nothing for a file-sourced one).
pub fn spawn_watch(control: &Arc<Control>) {
    let Some(zookeeper) = control.zookeeper.clone() else {
        return;
    };
    registry::spawn_publisher(&zookeeper);
    crate::control::pause::spawn_follower(control);
    let weak = Arc::downgrade(control);
    fence::spawn(weak.clone(), &zookeeper);
    let zk = Arc::clone(&zookeeper);
    zookeeper.keep(tokio::spawn(async move { watch(weak, zk).await }));
}

async fn watch(control: Weak<Control>, zookeeper: Arc<ZooKeeper>) {
    let path = zookeeper.location.path.clone();
    // The first pass catches a change made between the start's read and
    // the watch.
    let mut trigger = ReloadTrigger::ZooKeeperSession;
    let mut backoff = Backoff::new();
    loop {
        let Ok(client) = zookeeper.client() else {
            return;
        };
        let mut states = client.state_watcher();
        let wake = match client.check_and_watch_stat(&path).await {
            Ok((_, watcher)) => {
                let Some(control) = control.upgrade() else {
                    return;
                };
                let mark = fence::Mark {
                    session: client.session_id().0,
                    raises: control.engine.fence.raises(),
                };
                let sent = Instant::now();
                let fired = watcher.changed();
                tokio::pin!(fired);
                // A change while this version is read and built supersedes
                // it: the reload is dropped (a build already running ends
                // on its blocking thread, unused) and the newest is read.
                let reloaded = tokio::select! {
                    reloaded = control.reload(trigger) => Ok(reloaded.is_ok()),
                    event = &mut fired => Err(event),
                };
                if matches!(reloaded, Ok(true)) {
                    zookeeper.answered(&client, sent);
                    zookeeper.config_reread(&control, mark);
                }
                drop(control);
                backoff = Backoff::new();
                match reloaded {
                    Ok(_) => wait(fired, &mut states, zookeeper.raised_after(mark)).await,
                    Err(event) => {
                        info!("the config znode changed while its previous version was being read; reading the newest");
                        woken_by(&event)
                    }
                }
            }
            Err(zk::Error::SessionExpired | zk::Error::ClientClosed) => Wake::Lost,
            Err(_) if client.state().is_terminated() => Wake::Lost,
            Err(e) => {
                backoff
                    .failed(format!("cannot watch the config znode {path} ({e})"))
                    .await;
                Wake::Reconnected
            }
        };
        trigger = match wake {
            Wake::Changed => ReloadTrigger::ZnodeChange,
            Wake::Reconnected => ReloadTrigger::ZooKeeperSession,
            Wake::Lost => {
                if !renew(&zookeeper).await {
                    return;
                }
                ReloadTrigger::ZooKeeperSession
            }
        };
    }
}

/// What a fired watch means.
fn woken_by(event: &zk::WatchedEvent) -> Wake {
    if matches!(event.event_type, zk::EventType::Session) {
        Wake::Lost
    } else {
        Wake::Changed
    }
}

/// Waits for the watch to fire, the session to change state, or the fence
/// to go up after the read (`fenced`: the document is read again).
async fn wait(
    mut fired: std::pin::Pin<&mut impl std::future::Future<Output = zk::WatchedEvent>>,
    states: &mut zk::StateWatcher,
    fenced: impl std::future::Future<Output = ()>,
) -> Wake {
    tokio::pin!(fenced);
    loop {
        tokio::select! {
            () = &mut fenced => return Wake::Reconnected,
            event = &mut fired => return woken_by(&event),
            state = states.changed() => match state {
                zk::SessionState::Disconnected => {
                    warn!("ZooKeeper connection lost; the config in force keeps serving while the client reconnects");
                }
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                    info!("ZooKeeper connection back (same session): reading the config document again");
                    return Wake::Reconnected;
                }
                _ => return Wake::Lost,
            }
        }
    }
}

/// Replaces an expired session with a new client, retrying until one
/// connects, and registers this proxy on it; false once the link is
/// closed.
async fn renew(zookeeper: &Arc<ZooKeeper>) -> bool {
    warn!("ZooKeeper session expired: opening a new one (the config in force keeps serving)");
    let mut backoff = Backoff::new();
    loop {
        if zookeeper.is_closed() {
            return false;
        }
        match connect(&zookeeper.location).await {
            Ok(client) => {
                if !zookeeper.replace_client(client.clone()) {
                    return false;
                }
                zookeeper.spawn_register_again(client.clone());
                info!(session = %client.session_id(), "new ZooKeeper session: registering again, reading the config document");
                return true;
            }
            Err(e) => {
                backoff
                    .failed(format!("cannot open a new ZooKeeper session ({e})"))
                    .await;
            }
        }
    }
}
