//! Fencing: a proxy cut off from ZooKeeper stops writing before its
//! session can have expired. The client does not say when the server last
//! heard from it, so a heartbeat keeps a clock of its own: every T/10 (at
//! least 50 ms, T the negotiated session timeout) it notes the time, then
//! sends a cheap request (a stat of the document's znode); when that
//! succeeds, the server heard from this session at or after the noted
//! time, so it cannot expire the session before that time + T. A watchdog
//! raises the engine's fence at that bound minus a margin, whatever the
//! client's state events say (they come late on a silent partition). The
//! fence is lowered only by the watch, after a session has re-read the
//! config (`watch`).

use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use tracing::{info, warn};
use zookeeper_client as zk;

use super::ZooKeeper;
use crate::control::Control;
use crate::sync::lock;

/// Shortest time between two heartbeats.
const MIN_INTERVAL: Duration = Duration::from_millis(50);
/// Smallest margin kept between the fence and the earliest expiry (about a
/// server tick plus timer jitter).
const MIN_MARGIN: Duration = Duration::from_millis(200);

/// The heartbeat's interval for a session timeout.
pub fn interval(timeout: Duration) -> Duration {
    (timeout / 10).max(MIN_INTERVAL)
}

/// How long before the earliest expiry the fence goes up.
pub fn margin(timeout: Duration) -> Duration {
    (timeout / 10).max(MIN_MARGIN)
}

/// The liveness clock: the send time of the newest heartbeat that got an
/// answer, and the session timeout it ran under.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    last_ok_sent: Instant,
    timeout: Duration,
}

impl Clock {
    /// A clock started by a round trip sent at `sent` under `timeout`.
    pub fn new(sent: Instant, timeout: Duration) -> Self {
        Self {
            last_ok_sent: sent,
            timeout,
        }
    }

    /// A request sent at `sent` was answered (by a session of `timeout`).
    /// The clock never goes back.
    pub fn answered(&mut self, sent: Instant, timeout: Duration) {
        if sent >= self.last_ok_sent {
            self.last_ok_sent = sent;
            self.timeout = timeout;
        }
    }

    /// The earliest moment the server may expire the session.
    pub fn earliest_expiry(&self) -> Instant {
        self.last_ok_sent + self.timeout
    }

    /// When the fence goes up: [`Clock::earliest_expiry`] minus the margin
    /// (never before the last answered send).
    pub fn fence_at(&self) -> Instant {
        self.earliest_expiry()
            .checked_sub(margin(self.timeout))
            .unwrap_or(self.last_ok_sent)
            .max(self.last_ok_sent)
    }

    /// The newest answered send time.
    pub fn last_ok_sent(&self) -> Instant {
        self.last_ok_sent
    }
}

/// What `SHOW CONFIG` says about the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// Heartbeats are answered.
    Connected,
    /// The client lost its connection; the fence goes up at `fence_at`
    /// unless a heartbeat is answered before.
    Disconnected {
        /// When the client reported the loss.
        since: SystemTime,
        /// When the fence goes up.
        fence_at: SystemTime,
    },
    /// Writes are refused.
    Fenced {
        /// When the fence went up.
        since: SystemTime,
        /// When the session was last known live.
        lost_at: SystemTime,
    },
}

/// The clock and the client-reported disconnection of a link.
#[derive(Debug)]
pub(super) struct Heartbeat {
    clock: Mutex<Clock>,
    disconnected_since: Mutex<Option<SystemTime>>,
    /// The statement path's copy of the clock's deadline, once the control
    /// plane runs.
    deadline: std::sync::OnceLock<crate::engine::fence::Deadline>,
}

impl Heartbeat {
    /// A clock started by the session's opening, sent at `sent`.
    pub(super) fn new(sent: Instant, timeout: Duration) -> Self {
        Self {
            clock: Mutex::new(Clock::new(sent, timeout)),
            disconnected_since: Mutex::new(None),
            deadline: std::sync::OnceLock::new(),
        }
    }

    /// A round trip sent at `sent` on a session of `timeout` succeeded.
    pub(super) fn answered(&self, sent: Instant, timeout: Duration) {
        let clock = {
            let mut clock = lock(&self.clock);
            clock.answered(sent, timeout);
            *clock
        };
        self.publish(clock);
    }

    /// From now on the statement path's `deadline` follows this clock.
    fn follow(&self, deadline: &crate::engine::fence::Deadline) {
        if self.deadline.set(deadline.clone()).is_ok() {
            self.publish(self.clock());
        }
    }

    fn publish(&self, clock: Clock) {
        if let Some(deadline) = self.deadline.get() {
            deadline.extend(clock.fence_at(), clock.last_ok_sent());
        }
    }

    fn clock(&self) -> Clock {
        *lock(&self.clock)
    }
}

/// `instant` (past or future) on the wall clock.
fn wall(instant: Instant) -> SystemTime {
    let now = Instant::now();
    let wall_now = SystemTime::now();
    if instant >= now {
        wall_now + (instant - now)
    } else {
        wall_now - (now - instant)
    }
}

impl ZooKeeper {
    /// The session's liveness as `SHOW CONFIG` shows it.
    pub fn liveness(&self, fence: &crate::engine::fence::Fence) -> Liveness {
        if let Some((lost_at, since)) = fence.raised_times() {
            return Liveness::Fenced { since, lost_at };
        }
        match *lock(&self.heartbeat.disconnected_since) {
            None => Liveness::Connected,
            Some(since) => Liveness::Disconnected {
                since,
                fence_at: wall(self.heartbeat.clock().fence_at()),
            },
        }
    }

    /// Notes a round trip sent at `sent` on `client` that succeeded.
    pub(super) fn answered(&self, client: &zk::Client, sent: Instant) {
        self.heartbeat.answered(sent, client.session_timeout());
    }
}

/// Starts the heartbeat and the watchdog of a ZooKeeper-sourced proxy.
pub(super) fn spawn(control: Weak<Control>, zookeeper: &std::sync::Arc<ZooKeeper>) {
    if let Some(control) = control.upgrade() {
        zookeeper.heartbeat.follow(control.engine.fence.deadline());
    }
    let zk = std::sync::Arc::clone(zookeeper);
    zookeeper.keep(tokio::spawn(heartbeat(zk)));
    let zk = std::sync::Arc::clone(zookeeper);
    zookeeper.keep(tokio::spawn(watchdog(control, zk)));
}

/// Sends a stat of the document's znode every interval, each on its own
/// task (a request that hangs does not delay the next one).
async fn heartbeat(zookeeper: std::sync::Arc<ZooKeeper>) {
    let path = zookeeper.location.path.clone();
    loop {
        let Ok(client) = zookeeper.client() else {
            return;
        };
        let timeout = client.session_timeout();
        let sent = Instant::now();
        let (zk, path) = (std::sync::Arc::clone(&zookeeper), path.clone());
        tokio::spawn(async move {
            if let Ok(Ok(_)) = tokio::time::timeout(timeout, client.check_stat(&path)).await {
                zk.answered(&client, sent);
            }
        });
        tokio::time::sleep(interval(timeout)).await;
    }
}

/// Raises the fence at the clock's deadline, and keeps the client's
/// disconnection time for `SHOW CONFIG`.
async fn watchdog(control: Weak<Control>, zookeeper: std::sync::Arc<ZooKeeper>) {
    loop {
        let Ok(client) = zookeeper.client() else {
            return;
        };
        let connected = matches!(
            client.state(),
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
        );
        {
            let mut since = lock(&zookeeper.heartbeat.disconnected_since);
            match (connected, *since) {
                (true, Some(_)) => *since = None,
                (false, None) => *since = Some(SystemTime::now()),
                _ => {}
            }
        }
        let clock = zookeeper.heartbeat.clock();
        let fence_at = clock.fence_at();
        let now = Instant::now();
        if now >= fence_at {
            let Some(control) = control.upgrade() else {
                return;
            };
            let lost_at = wall(clock.last_ok_sent());
            if control.engine.fence.raise(lost_at) {
                zookeeper.raises.send_replace(control.engine.fence.raises());
                warn!(
                    lost_at = %crate::clock::format_time(lost_at),
                    "no answer from ZooKeeper for the session timeout minus a margin: this proxy's session may expire \
                     soon, so it refuses writes and locking reads until a session re-reads the config"
                );
            }
        }
        let wake =
            (now + interval(clock.timeout)).min(fence_at.max(now + Duration::from_millis(1)));
        tokio::time::sleep_until(wake.into()).await;
    }
}

/// A read that started on session `session` when the fence had gone up
/// `raises` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// The session's id.
    pub session: i64,
    /// [`crate::engine::fence::Fence::raises`] before the read.
    pub raises: u64,
}

/// What has been read again since the fence went up.
#[derive(Debug, Default)]
pub(super) struct Recovery {
    config: Mutex<Option<Mark>>,
    pauses: Mutex<Option<Mark>>,
}

impl ZooKeeper {
    /// The config was read (and swapped in, or found unchanged) by a read
    /// marked `mark`: lowers the fence if the fleet-wide pauses were read
    /// and applied by the same session since the same raise.
    pub(super) fn config_reread(&self, control: &Control, mark: Mark) {
        *lock(&self.recovery.config) = Some(mark);
        self.try_unfence(control, mark);
    }

    /// The fleet-wide pause records were read and applied by a read marked
    /// `mark`: lowers the fence if the config was re-read likewise.
    pub fn pauses_applied(&self, control: &Control, mark: Mark) {
        *lock(&self.recovery.pauses) = Some(mark);
        self.try_unfence(control, mark);
    }

    /// Returns once the fence went up after a read marked `mark` started
    /// (at once if it did already): that read cannot lower it, so the
    /// reader reads again.
    pub async fn raised_after(&self, mark: Mark) {
        let mut raises = self.raises.subscribe();
        let _ = raises.wait_for(|raises| *raises != mark.raises).await;
    }

    fn try_unfence(&self, control: &Control, mark: Mark) {
        let fence = &control.engine.fence;
        let both = *lock(&self.recovery.config) == Some(mark)
            && *lock(&self.recovery.pauses) == Some(mark);
        if both
            && self.session() == Some(mark.session)
            && fence.is_raised()
            && fence.lower(mark.raises)
        {
            info!(
                session = %zk::SessionId(mark.session),
                "ZooKeeper session live, config and fleet-wide pauses read again: writes and locking reads are served again"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(4);

    #[test]
    fn the_fence_goes_up_a_margin_before_the_earliest_expiry() {
        let start = Instant::now();
        let clock = Clock::new(start, T);
        assert_eq!(clock.earliest_expiry(), start + T);
        assert_eq!(clock.fence_at(), start + Duration::from_millis(3600));
        assert!(clock.fence_at() < clock.earliest_expiry());
    }

    #[test]
    fn margin_and_interval_have_floors() {
        assert_eq!(margin(Duration::from_millis(1000)), MIN_MARGIN);
        assert_eq!(margin(Duration::from_secs(20)), Duration::from_secs(2));
        assert_eq!(interval(Duration::from_millis(400)), MIN_INTERVAL);
        assert_eq!(interval(T), Duration::from_millis(400));
        let short = Clock::new(Instant::now(), Duration::from_millis(100));
        assert_eq!(short.fence_at(), short.last_ok_sent());
    }

    #[test]
    fn an_older_answer_never_moves_the_clock_back() {
        let start = Instant::now();
        let mut clock = Clock::new(start + Duration::from_millis(500), T);
        clock.answered(start, T);
        assert_eq!(clock.last_ok_sent(), start + Duration::from_millis(500));
        clock.answered(start + Duration::from_millis(900), Duration::from_secs(2));
        assert_eq!(
            clock.fence_at(),
            start + Duration::from_millis(900) + Duration::from_millis(1800)
        );
    }
}
