//! The proxy's client sessions, by the id their handshake gave them: who
//! they are, what they are doing, and which backend connections they use
//! right now. `SHOW PROCESSLIST` lists them, `KILL` finds them here.
//!
//! The registry's map is locked only to add, remove, find and list
//! sessions (and, once, to wake them all for a stop or a takeover); a
//! session's statement path touches its own entry only (a mutex nobody
//! holds across an await).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use tokio::sync::Notify;

use crate::backend::HostPool;
use crate::sync::lock;

/// How much of a statement `SHOW PROCESSLIST` shows without FULL, in
/// characters (as a server truncates its Info column).
pub const INFO_WIDTH: usize = 100;

/// Most bytes of a statement's text the registry keeps for `SHOW FULL
/// PROCESSLIST`: a session's memory stays bounded whatever it sends.
pub const MAX_INFO_BYTES: usize = 64 * 1024;

/// Room for a statement's text an idle session keeps for its next one.
const KEPT_INFO_CAPACITY: usize = 512;

/// Every client session of the proxy.
pub struct Sessions {
    map: Mutex<HashMap<u32, Arc<SessionEntry>>>,
    next_id: Mutex<u32>,
    /// Set once the proxy stops: sessions close at their next boundary.
    drain: tokio::sync::watch::Sender<bool>,
    /// `drain`'s value, read by every session at every statement.
    draining: AtomicBool,
    /// Sessions closed by the stop: (idle when it came, after finishing
    /// a statement or transaction).
    shutdown_closed: [std::sync::atomic::AtomicU64; 2],
    /// Set while a new process takes the sessions over (`serve
    /// --takeover`): where a session at a boundary offers itself.
    handoff: Mutex<Option<HandoffLink>>,
    /// Whether `handoff` is set, read by every session at every statement.
    handing_off: AtomicBool,
}

/// Where sessions offer themselves to a takeover.
pub type HandoffLink = tokio::sync::mpsc::UnboundedSender<HandoffOffer>;

/// A session at a boundary offered to the process taking over.
pub struct HandoffOffer {
    /// Its id.
    pub connection_id: u32,
    /// Its whole state, as the frontend serialized it.
    pub state: serde_json::Value,
    /// Its client socket, open until `reply` is answered (the session
    /// waits for the answer).
    pub fd: std::os::fd::RawFd,
    /// `true`: the new process took it (the session ends here without
    /// touching the socket); `false`: it stays here.
    pub reply: tokio::sync::oneshot::Sender<bool>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::starting_at(1)
    }
}

impl Sessions {
    fn starting_at(id: u32) -> Self {
        Self {
            map: Mutex::default(),
            next_id: Mutex::new(id),
            drain: tokio::sync::watch::Sender::new(false),
            draining: AtomicBool::new(false),
            shutdown_closed: Default::default(),
            handoff: Mutex::new(None),
            handing_off: AtomicBool::new(false),
        }
    }

    /// Starts a takeover: sessions at a boundary offer themselves on `link`.
    pub fn request_handoff(&self, link: HandoffLink) {
        {
            // The flag changes with the link, under its lock: it is set
            // exactly while a link is.
            let mut handoff = lock(&self.handoff);
            *handoff = Some(link);
            self.handing_off.store(true, Ordering::SeqCst);
        }
        self.wake_all();
    }

    /// Ends the takeover's requests (done or failed).
    pub fn end_handoff(&self) {
        let mut handoff = lock(&self.handoff);
        self.handing_off.store(false, Ordering::SeqCst);
        *handoff = None;
    }

    /// Where to offer the session now, during a takeover.
    pub fn handoff_link(&self) -> Option<HandoffLink> {
        if !self.is_handing_off() {
            return None;
        }
        lock(&self.handoff).clone()
    }

    /// Whether a takeover asks for the sessions now.
    pub fn is_handing_off(&self) -> bool {
        self.handing_off.load(Ordering::SeqCst)
    }

    /// Wakes every session's wait for its next command
    /// ([`SessionEntry::boundary`]): a stop or a takeover started.
    fn wake_all(&self) {
        let entries: Vec<Arc<SessionEntry>> = lock(&self.map).values().cloned().collect();
        for entry in entries {
            entry.wake();
        }
    }

    /// The id the next connection would get (a takeover's new process
    /// goes on from it).
    pub fn peek_next_id(&self) -> u32 {
        *lock(&self.next_id)
    }

    /// Goes on numbering connections from `id` (the old process's next).
    pub fn continue_ids_from(&self, id: u32) {
        *lock(&self.next_id) = id.max(1);
    }

    /// Starts the stop: the client listener stops accepting and every
    /// session closes at its next statement boundary outside a
    /// transaction.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.drain.send_replace(true);
        self.wake_all();
    }

    /// Whether the stop started.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Waits until the stop starts.
    pub async fn draining(&self) {
        let mut started = self.drain.subscribe();
        let _ = started.wait_for(|draining| *draining).await;
    }

    /// Counts a session the stop closed; `after_work`: it finished a
    /// statement or transaction first.
    pub fn closed_for_shutdown(&self, after_work: bool) {
        self.shutdown_closed[usize::from(after_work)]
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sessions the stop closed so far: (idle at once, after their work).
    pub fn shutdown_closed(&self) -> (u64, u64) {
        let read = |i: usize| self.shutdown_closed[i].load(std::sync::atomic::Ordering::Relaxed);
        (read(0), read(1))
    }

    /// The id for a new connection: the next one in turn (from 1, wrapping
    /// after `u32::MAX`, never 0), skipping those live sessions still have.
    pub fn next_id(&self) -> u32 {
        let map = lock(&self.map);
        let mut next = lock(&self.next_id);
        loop {
            let id = *next;
            *next = next.wrapping_add(1).max(1);
            if !map.contains_key(&id) {
                return id;
            }
        }
    }

    /// Adds a logged-in session; it is removed when the returned
    /// registration is dropped.
    pub fn register(self: &Arc<Self>, id: u32, user: &str, host: &str) -> Registration {
        let entry = Arc::new(SessionEntry::new(id, user, host));
        lock(&self.map).insert(id, Arc::clone(&entry));
        Registration {
            sessions: Arc::clone(self),
            entry,
        }
    }

    /// The session with this id.
    pub fn get(&self, id: u64) -> Option<Arc<SessionEntry>> {
        let id = u32::try_from(id).ok()?;
        lock(&self.map).get(&id).cloned()
    }

    /// A snapshot of the sessions of `user`, by id.
    pub fn of_user(&self, user: &str) -> Vec<SessionRow> {
        let entries: Vec<Arc<SessionEntry>> = lock(&self.map)
            .values()
            .filter(|entry| entry.owned_by(user))
            .cloned()
            .collect();
        let mut rows: Vec<SessionRow> = entries.iter().map(|entry| entry.row()).collect();
        rows.sort_by_key(|row| row.id);
        rows
    }

    /// How many sessions there are.
    pub fn count(&self) -> usize {
        lock(&self.map).len()
    }
}

/// A session's place in the registry; dropping it removes the session.
pub struct Registration {
    sessions: Arc<Sessions>,
    entry: Arc<SessionEntry>,
}

impl Registration {
    /// The session's entry.
    pub fn entry(&self) -> &Arc<SessionEntry> {
        &self.entry
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // The session's task is over: the entry, which others may still
        // hold, does not keep it alive.
        lock(&self.entry.waiter).take();
        let mut map = lock(&self.sessions.map);
        if map
            .get(&self.entry.id)
            .is_some_and(|entry| Arc::ptr_eq(entry, &self.entry))
        {
            map.remove(&self.entry.id);
        }
    }
}

/// One session as the registry knows it.
pub struct SessionEntry {
    /// The id its handshake gave it (`CONNECTION_ID()`).
    pub id: u32,
    /// The account it logged in with (changed by COM_CHANGE_USER).
    user_name: Mutex<String>,
    /// The client's address.
    pub host: String,
    activity: Mutex<Activity>,
    backends: Mutex<Vec<BackendThread>>,
    next_use: AtomicU64,
    /// `KILL QUERY`s of the session so far, and their number when its
    /// current command started: a difference cancels the command.
    cancels: AtomicU64,
    cancels_at_start: AtomicU64,
    killed: AtomicBool,
    /// The session's task while it waits for its next command, woken by a
    /// kill, a stop and a takeover; registered once, kept between waits.
    waiter: Mutex<Option<Waker>>,
    /// Woken by every `KILL QUERY` of the session.
    cancel_signal: Notify,
}

/// What a session is doing.
struct Activity {
    db: Option<String>,
    command: &'static str,
    state: &'static str,
    /// The statement running, as the client sent it (turned into text
    /// only when `SHOW PROCESSLIST` reads it); its storage is kept between
    /// statements.
    info: Vec<u8>,
    /// Whether `info` holds a statement (none while idle).
    has_info: bool,
    since: Instant,
}

/// A backend connection a session is using: its host and the server's id
/// of it.
#[derive(Clone)]
pub struct BackendThread {
    /// The host's pool (its address is `pool.addr`).
    pub pool: Arc<HostPool>,
    /// The server's thread id of the connection.
    pub thread_id: u32,
    token: u64,
    kill_aimed: bool,
}

/// One row of `SHOW PROCESSLIST`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// Session id.
    pub id: u32,
    /// Account.
    pub user: String,
    /// Client address.
    pub host: String,
    /// Database selected.
    pub db: Option<String>,
    /// `Sleep`, `Query`, `Execute` ...
    pub command: &'static str,
    /// Time in the current state.
    pub elapsed: std::time::Duration,
    /// `executing` while a statement runs, else empty.
    pub state: &'static str,
    /// The statement being run, in full.
    pub info: Option<String>,
}

impl SessionEntry {
    fn new(id: u32, user: &str, host: &str) -> Self {
        Self {
            id,
            user_name: Mutex::new(user.to_owned()),
            host: host.to_owned(),
            activity: Mutex::new(Activity {
                db: None,
                command: "Sleep",
                state: "",
                info: Vec::new(),
                has_info: false,
                since: Instant::now(),
            }),
            backends: Mutex::new(Vec::new()),
            next_use: AtomicU64::new(0),
            cancels: AtomicU64::new(0),
            cancels_at_start: AtomicU64::new(0),
            killed: AtomicBool::new(false),
            waiter: Mutex::new(None),
            cancel_signal: Notify::new(),
        }
    }

    /// An entry for a session that is not in any registry (tests, tools).
    pub fn detached(id: u32) -> Arc<Self> {
        Arc::new(Self::new(id, "", ""))
    }

    /// The account the session logged in with.
    pub fn user(&self) -> String {
        lock(&self.user_name).clone()
    }

    /// Whether `user` owns this session.
    pub fn owned_by(&self, user: &str) -> bool {
        *lock(&self.user_name) == user
    }

    /// Records a new login on the session (COM_CHANGE_USER).
    pub fn set_user(&self, user: &str) {
        *lock(&self.user_name) = user.to_owned();
    }

    /// The session starts running `command` (a server's command name) with
    /// statement text `info` (its first [`MAX_INFO_BYTES`] kept), received
    /// at `since`.
    pub fn start(&self, command: &'static str, info: Option<&[u8]>, since: Instant) {
        let info = info.map(|text| &text[..text.len().min(MAX_INFO_BYTES)]);
        self.cancels_at_start
            .store(self.cancels.load(Ordering::SeqCst), Ordering::SeqCst);
        let mut activity = lock(&self.activity);
        activity.command = command;
        activity.state = "executing";
        activity.info.clear();
        activity.has_info = info.is_some();
        if let Some(text) = info {
            activity.info.extend_from_slice(text);
        }
        activity.since = since;
    }

    /// The session is idle again since `since`, with `db` selected.
    pub fn sleep(&self, db: Option<&str>, since: Instant) {
        let mut activity = lock(&self.activity);
        activity.command = "Sleep";
        activity.state = "";
        activity.has_info = false;
        // A long statement's text is not held while idle.
        if activity.info.capacity() > KEPT_INFO_CAPACITY {
            activity.info = Vec::new();
        }
        activity.since = since;
        if activity.db.as_deref() != db {
            activity.db = db.map(str::to_owned);
        }
    }

    /// Records that the session is using a backend connection until the
    /// returned guard is dropped.
    pub fn using(self: &Arc<Self>, pool: &Arc<HostPool>, thread_id: u32) -> BackendUse {
        let token = self.next_use.fetch_add(1, Ordering::Relaxed);
        lock(&self.backends).push(BackendThread {
            pool: Arc::clone(pool),
            thread_id,
            token,
            kill_aimed: false,
        });
        BackendUse {
            entry: Arc::clone(self),
            token,
        }
    }

    /// The backend connections the session is using now.
    pub fn backends(&self) -> Vec<BackendThread> {
        lock(&self.backends).clone()
    }

    /// Whether the session still uses `thread` (the same use of it, not a
    /// later one of the same connection); if so, records that a `KILL` is
    /// aimed at it ([`BackendUse::finish`] then says so).
    pub fn aim_kill(&self, thread: &BackendThread) -> bool {
        lock(&self.backends)
            .iter_mut()
            .find(|used| used.token == thread.token)
            .map(|used| used.kill_aimed = true)
            .is_some()
    }

    /// Cancels the session's current command (`KILL QUERY`): a statement
    /// of it that has not reached a backend yet does not start
    /// ([`SessionEntry::is_cancelled`]); one running is the caller's to
    /// kill on its server.
    pub fn cancel(&self) {
        self.cancels.fetch_add(1, Ordering::SeqCst);
        self.cancel_signal.notify_waiters();
    }

    /// Resolves once the current command is cancelled (at once if it
    /// already was): what a statement waits on beside a pause.
    pub async fn cancelled(&self) {
        loop {
            let signal = self.cancel_signal.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            signal.await;
        }
    }

    /// Whether the current command was cancelled since it started.
    pub fn is_cancelled(&self) -> bool {
        self.cancels.load(Ordering::SeqCst) != self.cancels_at_start.load(Ordering::SeqCst)
    }

    /// Asks the session to end (`KILL CONNECTION`): it closes once its
    /// current command is over, or at once when idle.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Whether the session was killed.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Resolves when the session is killed.
    pub fn killed(&self) -> Killed<'_> {
        Killed { entry: self }
    }

    /// Resolves when the session, waiting for its next command in the
    /// registry `sessions`, should stop waiting: the proxy stops and the
    /// session is `closable`, or a takeover asks for the sessions and the
    /// session is `movable`. One session waits on it at a time.
    pub fn boundary<'a>(
        &'a self,
        sessions: &'a Sessions,
        closable: bool,
        movable: bool,
    ) -> Boundary<'a> {
        Boundary {
            entry: self,
            sessions,
            closable,
            movable,
        }
    }

    /// Registers the task to wake for a kill, a stop or a takeover (kept
    /// from the last wait when it is the same task).
    fn register(&self, waker: &Waker) {
        let mut waiter = lock(&self.waiter);
        if !waiter.as_ref().is_some_and(|kept| kept.will_wake(waker)) {
            *waiter = Some(waker.clone());
        }
    }

    fn wake(&self) {
        if let Some(waiter) = lock(&self.waiter).as_ref() {
            waiter.wake_by_ref();
        }
    }

    /// A snapshot for `SHOW PROCESSLIST`.
    pub fn row(&self) -> SessionRow {
        let activity = lock(&self.activity);
        SessionRow {
            id: self.id,
            user: self.user(),
            host: self.host.clone(),
            db: activity.db.clone(),
            command: if self.is_killed() {
                "Killed"
            } else {
                activity.command
            },
            elapsed: activity.since.elapsed(),
            state: activity.state,
            info: activity
                .has_info
                .then(|| String::from_utf8_lossy(&activity.info).into_owned()),
        }
    }
}

/// The future of [`SessionEntry::killed`]. The flag is read after the
/// task is registered, so a kill between the two is not lost.
pub struct Killed<'a> {
    entry: &'a SessionEntry,
}

impl Future for Killed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.entry.register(cx.waker());
        if self.entry.is_killed() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Why a session stops waiting for its next command
/// ([`SessionEntry::boundary`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundarySignal {
    /// The proxy stops.
    Draining,
    /// A takeover asks for the sessions.
    HandoffRequested,
}

/// The future of [`SessionEntry::boundary`]. The flags are read after the
/// task is registered, so a stop or takeover between the two is not lost.
pub struct Boundary<'a> {
    entry: &'a SessionEntry,
    sessions: &'a Sessions,
    closable: bool,
    movable: bool,
}

impl Future for Boundary<'_> {
    type Output = BoundarySignal;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<BoundarySignal> {
        self.entry.register(cx.waker());
        if self.closable && self.sessions.is_draining() {
            Poll::Ready(BoundarySignal::Draining)
        } else if self.movable && self.sessions.is_handing_off() {
            Poll::Ready(BoundarySignal::HandoffRequested)
        } else {
            Poll::Pending
        }
    }
}

/// A backend connection in use by a session; dropping it ends the use.
pub struct BackendUse {
    entry: Arc<SessionEntry>,
    token: u64,
}

impl BackendUse {
    /// Ends the use; true when a `KILL` was aimed at it meanwhile
    /// ([`SessionEntry::aim_kill`]): the KILL may still reach the
    /// connection, which must then serve no one else.
    pub fn finish(self) -> bool {
        let mut backends = lock(&self.entry.backends);
        let index = backends
            .iter()
            .position(|thread| thread.token == self.token);
        index.is_some_and(|index| backends.swap_remove(index).kill_aimed)
    }
}

impl Drop for BackendUse {
    fn drop(&mut self) {
        lock(&self.entry.backends).retain(|thread| thread.token != self.token);
    }
}

/// `info` cut to [`INFO_WIDTH`] characters, as `SHOW PROCESSLIST` without
/// FULL shows it.
pub fn truncated_info(info: &str) -> &str {
    match info.char_indices().nth(INFO_WIDTH) {
        Some((end, _)) => &info[..end],
        None => info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_listed_until_its_registration_drops() {
        let sessions = Arc::new(Sessions::default());
        let first = sessions.register(7, "app", "127.0.0.1:5000");
        let other = sessions.register(8, "other", "127.0.0.1:5001");
        assert_eq!(sessions.of_user("app").len(), 1);
        assert_eq!(sessions.get(7).map(|e| e.id), Some(7));
        assert!(sessions.get(u64::from(u32::MAX) + 8).is_none());
        drop(first);
        assert!(sessions.get(7).is_none());
        assert!(sessions.of_user("app").is_empty());
        assert_eq!(sessions.count(), 1);
        drop(other);
        assert_eq!(sessions.count(), 0);
    }

    #[test]
    fn ids_wrap_around_the_live_sessions() {
        let sessions = Arc::new(Sessions::starting_at(u32::MAX));
        let _one = sessions.register(1, "app", "h");
        let _two = sessions.register(2, "app", "h");
        assert_eq!(sessions.next_id(), u32::MAX);
        assert_eq!(sessions.next_id(), 3, "0 is never an id; 1 and 2 are live");
        assert_eq!(sessions.next_id(), 4);
    }

    #[test]
    fn a_use_a_kill_was_aimed_at_says_so_when_it_ends() {
        let pool = crate::backend::Backends::new(crate::backend::pool::BackendSettings {
            user: String::new(),
            password: String::new(),
            max_per_host: 1,
            connect_timeout: std::time::Duration::from_secs(1),
            checkout_timeout: std::time::Duration::from_secs(1),
        })
        .pool("127.0.0.1:1");
        let entry = SessionEntry::detached(1);
        let quiet = entry.using(&pool, 10);
        assert!(!quiet.finish());
        let aimed = entry.using(&pool, 11);
        let thread = entry.backends().remove(0);
        assert!(entry.aim_kill(&thread));
        assert!(aimed.finish(), "the connection must not be pooled");
        assert!(!entry.aim_kill(&thread), "that use is over");
        assert!(entry.backends().is_empty());
    }

    #[test]
    fn activity_is_what_the_session_does_now() {
        let sessions = Arc::new(Sessions::default());
        let registration = sessions.register(3, "app", "h");
        let entry = registration.entry();
        entry.start("Query", Some(b"SELECT SLEEP(30)"), Instant::now());
        let row = entry.row();
        assert_eq!(
            (row.command, row.state, row.info.as_deref()),
            ("Query", "executing", Some("SELECT SLEEP(30)"))
        );
        entry.sleep(Some("db00001"), Instant::now());
        let row = entry.row();
        assert_eq!(
            (row.command, row.info, row.db.as_deref()),
            ("Sleep", None, Some("db00001"))
        );
        entry.start("Query", Some(b"SELECT 1"), Instant::now());
        assert!(!entry.is_cancelled());
        entry.cancel();
        assert!(entry.is_cancelled());
        entry.start("Query", Some(b"SELECT 2"), Instant::now());
        assert!(!entry.is_cancelled(), "the next command is not cancelled");
        entry.kill();
        assert!(entry.is_killed());
        assert_eq!(entry.row().command, "Killed");
    }

    #[test]
    fn the_time_in_a_state_counts_from_the_moment_given() {
        let entry = SessionEntry::detached(1);
        let minute = std::time::Duration::from_secs(60);
        let received = Instant::now()
            .checked_sub(minute)
            .expect("a minute of uptime");
        entry.start("Query", Some(b"SELECT 1"), received);
        assert!(entry.row().elapsed >= minute);
        entry.sleep(None, Instant::now());
        assert!(entry.row().elapsed < minute);
    }

    #[test]
    fn a_long_statement_is_kept_in_part() {
        let entry = SessionEntry::detached(1);
        entry.start(
            "Query",
            Some(&vec![b'x'; MAX_INFO_BYTES * 2]),
            Instant::now(),
        );
        assert_eq!(
            entry.row().info.map(|info| info.len()),
            Some(MAX_INFO_BYTES)
        );
    }

    #[test]
    fn a_statement_that_is_not_utf8_is_shown_with_replacement_characters() {
        let entry = SessionEntry::detached(1);
        entry.start(
            "Query",
            Some(b"SELECT '\xff\xfe' -- \xc3\xa9"),
            Instant::now(),
        );
        assert_eq!(
            entry.row().info.as_deref(),
            Some("SELECT '\u{fffd}\u{fffd}' -- \u{e9}")
        );
    }

    #[test]
    fn info_is_cut_at_a_hundred_characters() {
        let long = "é".repeat(150);
        assert_eq!(truncated_info(&long).chars().count(), INFO_WIDTH);
        assert_eq!(truncated_info("SELECT 1"), "SELECT 1");
    }

    #[tokio::test]
    async fn a_kill_wakes_the_waiting_session() {
        let sessions = Arc::new(Sessions::default());
        let registration = sessions.register(4, "app", "h");
        let entry = Arc::clone(registration.entry());
        let waiting = tokio::spawn(async move { entry.killed().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        sessions.get(4).expect("registered").kill();
        tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .expect("killed resolves")
            .expect("no panic");
    }

    /// Waits at the boundary of a session of `sessions` registered as `id`
    /// while `start` runs, for at most `patience`.
    async fn boundary_after(
        sessions: &Arc<Sessions>,
        id: u32,
        (closable, movable): (bool, bool),
        start: impl FnOnce(&Sessions),
        patience: std::time::Duration,
    ) -> Option<BoundarySignal> {
        let registration = sessions.register(id, "app", "h");
        let entry = Arc::clone(registration.entry());
        let waiting = {
            let sessions = Arc::clone(sessions);
            tokio::spawn(async move {
                let signal = entry.boundary(&sessions, closable, movable);
                tokio::time::timeout(patience, signal).await.ok()
            })
        };
        tokio::task::yield_now().await;
        start(sessions);
        waiting.await.expect("no panic")
    }

    #[tokio::test]
    async fn a_stop_wakes_a_closable_session_waiting_for_its_next_command() {
        let sessions = Arc::new(Sessions::default());
        let second = std::time::Duration::from_secs(1);
        let signal = boundary_after(
            &sessions,
            5,
            (true, false),
            Sessions::start_draining,
            second,
        )
        .await;
        assert_eq!(signal, Some(BoundarySignal::Draining));
    }

    #[tokio::test]
    async fn a_stop_leaves_a_session_in_a_transaction_waiting() {
        let sessions = Arc::new(Sessions::default());
        let moment = std::time::Duration::from_millis(50);
        let signal = boundary_after(
            &sessions,
            5,
            (false, true),
            Sessions::start_draining,
            moment,
        )
        .await;
        assert_eq!(signal, None);
        assert!(sessions.is_draining());
    }

    #[tokio::test]
    async fn a_takeover_wakes_a_movable_session_and_ends_with_its_link() {
        let sessions = Arc::new(Sessions::default());
        let (link, _offers) = tokio::sync::mpsc::unbounded_channel();
        let second = std::time::Duration::from_secs(1);
        let request = |sessions: &Sessions| sessions.request_handoff(link);
        let signal = boundary_after(&sessions, 6, (false, true), request, second).await;
        assert_eq!(signal, Some(BoundarySignal::HandoffRequested));
        assert!(sessions.handoff_link().is_some());
        sessions.end_handoff();
        assert!(sessions.handoff_link().is_none());
        let moment = std::time::Duration::from_millis(50);
        let signal = boundary_after(&sessions, 7, (true, true), |_| {}, moment).await;
        assert_eq!(signal, None, "no takeover asks any more");
    }

    #[tokio::test]
    async fn a_takeover_leaves_a_session_that_cannot_move_waiting() {
        let sessions = Arc::new(Sessions::default());
        let (link, _offers) = tokio::sync::mpsc::unbounded_channel();
        let moment = std::time::Duration::from_millis(50);
        let request = |sessions: &Sessions| sessions.request_handoff(link);
        let signal = boundary_after(&sessions, 8, (true, false), request, moment).await;
        assert_eq!(signal, None);
    }

    #[tokio::test]
    async fn a_kill_before_the_wait_is_not_lost() {
        let entry = SessionEntry::detached(1);
        entry.kill();
        tokio::time::timeout(std::time::Duration::from_secs(1), entry.killed())
            .await
            .expect("killed resolves");
    }
}
