//! Per-host pools of backend connections, with a size limit, a checkout
//! timeout (waiters served first come, first served), a per-session share
//! of each pool ([`PoolShare`]), and fast failure for a host that just
//! refused us.
//!
//! What is known about a host (health, counters, latencies) lives in its
//! [`HostState`], which outlives the host's pools: a reload that changes
//! the backend settings replaces every pool, not what was learnt about the
//! hosts. A host's state is dropped when the host leaves the topology.

use std::collections::hash_map::Entry;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use tokio::sync::futures::Notified;
use tokio::sync::{AcquireError, Notify, OwnedSemaphorePermit, Semaphore};

use super::conn::{BackendConn, BackendError, ConnKey};
use super::health::{HealthSnapshot, HostHealth};
use super::link::{Dialer, TcpDialer};
use crate::stats::Histogram;
use crate::sync::{lock, read, write};
use crate::topology::config::BackendConfig;

/// How long after a failed connect a host is reported down without trying
/// again, so a dead host costs its statements nothing but an error.
const RETRY_DOWN_HOST_AFTER: Duration = Duration::from_millis(500);

/// How often a checkout waiting for a full pool asks again for the
/// connections held only for `SHOW WARNINGS`.
const PRESSURE_REPEAT: Duration = Duration::from_millis(100);

/// Why a pool gave no connection. The message is what the client sees as
/// the reason ([`PoolError::is_exhausted`] tells a healthy host's full pool
/// from a host that cannot be used).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The health checker marked the host down, or a connect to it failed
    /// moments ago: fails at once, without trying.
    #[error("{0}")]
    HostDown(String),
    /// The session holds its whole share of the host's pool and none came
    /// free in time.
    #[error("this session already holds {size} of the host's {max} connections, its share (limits.max_host_share_percent = {percent}); waited {waited:?}")]
    ShareExhausted {
        /// Connections in the session's share.
        size: usize,
        /// Connections in the pool.
        max: usize,
        /// `limits.max_host_share_percent`.
        percent: u32,
        /// How long the checkout waited.
        waited: Duration,
    },
    /// Every connection of the pool is checked out and none came free in
    /// time.
    #[error("all {max} connections of the pool (backend.pool_max_per_host) were in use by other sessions for backend.checkout_timeout_ms ({waited:?})")]
    PoolExhausted {
        /// Connections in the pool.
        max: usize,
        /// How long the checkout waited.
        waited: Duration,
    },
    /// The pool's semaphore was closed.
    #[error("pool closed")]
    Closed,
    /// Connecting to the host failed (refused, timed out, the login
    /// refused).
    #[error("{0}")]
    Connect(String),
}

impl PoolError {
    /// Whether the host is fine and only its pool (or the session's share
    /// of it) had no connection free in time.
    pub fn is_exhausted(&self) -> bool {
        matches!(
            self,
            PoolError::ShareExhausted { .. } | PoolError::PoolExhausted { .. }
        )
    }
}

/// How backend connections are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSettings {
    /// Backend account name.
    pub user: String,
    /// Backend account password.
    pub password: String,
    /// Most connections open to one host at once.
    pub max_per_host: usize,
    /// TCP connect plus login limit.
    pub connect_timeout: Duration,
    /// Longest wait for a free connection when the pool is full.
    pub checkout_timeout: Duration,
}

impl BackendSettings {
    /// The settings the config's `backend` section asks for.
    pub fn from_config(backend: &BackendConfig) -> Self {
        Self {
            user: backend.user.clone(),
            password: backend.password.clone(),
            max_per_host: backend.pool_max_per_host as usize,
            connect_timeout: Duration::from_millis(backend.connect_timeout_ms),
            checkout_timeout: Duration::from_millis(backend.checkout_timeout_ms),
        }
    }
}

/// What is known about one backend host: kept while the host is in the
/// topology, whatever happens to its pools.
#[derive(Debug)]
pub struct HostState {
    /// `host:port`.
    pub addr: String,
    /// What the health checker found (`backend::health`).
    pub host_health: HostHealth,
    /// Statements sent to this host: count, errors, latency.
    pub statements: Histogram,
    /// Connections checked out to run a statement on this host.
    pub checkouts: AtomicU64,
    /// How long checkouts waited for a place in the pool (and the
    /// session's share of it).
    pub pool_wait: Histogram,
    /// Checkouts that found no place free in time.
    pub checkout_timeouts: AtomicU64,
    /// Connect failures and broken connections on this host.
    pub errors: AtomicU64,
    /// The last failed connect, while it is recent.
    connect_failure: Mutex<Option<(Instant, String)>>,
    /// The server has room for more kept prepared statements
    /// (`statements::server_has_room`, read by the health checker).
    statement_room: AtomicBool,
}

impl HostState {
    /// A host nothing is known about yet.
    pub fn new(addr: String) -> Self {
        Self {
            addr,
            host_health: HostHealth::new(),
            statements: Histogram::new(),
            checkouts: AtomicU64::new(0),
            pool_wait: Histogram::new(),
            checkout_timeouts: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            connect_failure: Mutex::new(None),
            statement_room: AtomicBool::new(true),
        }
    }

    /// Whether backend connections to this host may keep more prepared
    /// statements: its server was under three quarters of its
    /// `max_prepared_stmt_count` when last read (true until read).
    pub fn has_statement_room(&self) -> bool {
        self.statement_room.load(Ordering::Relaxed)
    }

    /// Records the server's `Prepared_stmt_count` and
    /// `max_prepared_stmt_count`.
    pub fn record_prepared_statements(&self, count: u64, max: u64) {
        let room = super::statements::server_has_room(count, max);
        self.statement_room.store(room, Ordering::Relaxed);
    }

    /// What the health checker found.
    pub fn health(&self) -> HealthSnapshot {
        self.host_health.snapshot()
    }

    /// Whether the health checker marked the host down or the last
    /// connect attempt failed.
    pub fn is_down(&self) -> bool {
        self.host_health.is_down() || lock(&self.connect_failure).is_some()
    }

    /// Why statements for the host fail at once now, if they do.
    pub fn unavailable(&self) -> Option<String> {
        if let Some(reason) = self.host_health.down_reason() {
            return Some(reason);
        }
        match &*lock(&self.connect_failure) {
            Some((at, reason)) if at.elapsed() < RETRY_DOWN_HOST_AFTER => {
                Some(format!("{reason} ({} ms ago)", at.elapsed().as_millis()))
            }
            _ => None,
        }
    }

    fn connect_failed(&self, reason: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *lock(&self.connect_failure) = Some((Instant::now(), reason.to_owned()));
    }

    fn connected(&self) {
        *lock(&self.connect_failure) = None;
    }
}

/// The connections to one host, made with one set of backend settings.
/// It derefs to its host's [`HostState`] (health and counters), which is
/// shared with the host's later pools.
pub struct HostPool {
    host: Arc<HostState>,
    settings: BackendSettings,
    /// How its connections reach the host.
    dialer: Arc<dyn Dialer>,
    /// Boxed, as in [`PooledConn`]: a checkout and a release move a
    /// pointer, not the connection's buffers.
    #[allow(clippy::vec_box)]
    idle: Mutex<Vec<Box<BackendConn>>>,
    permits: Arc<Semaphore>,
    /// Woken when a checkout finds every connection in use: idle sessions
    /// that keep one only for `SHOW WARNINGS` give it up.
    pressure: Notify,
    /// Set when the host left the topology or the backend settings
    /// changed: connections are closed on release instead of kept.
    retired: AtomicBool,
}

impl Deref for HostPool {
    type Target = HostState;

    fn deref(&self) -> &HostState {
        &self.host
    }
}

/// A connection checked out of a pool. Dropping it closes the connection;
/// only [`PooledConn::release`] puts it back, so a connection abandoned
/// half-way through a response is never reused.
pub struct PooledConn {
    conn: Option<Box<BackendConn>>,
    pool: Arc<HostPool>,
    _permit: OwnedSemaphorePermit,
    /// The session's share of the pool this connection counts against.
    _share: Option<OwnedSemaphorePermit>,
    /// Whether the connection came from the idle list (it may have gone
    /// stale while it waited there).
    pub reused: bool,
}

impl PooledConn {
    /// The connection.
    pub fn conn(&mut self) -> &mut BackendConn {
        self.conn
            .as_mut()
            .expect("connection present until release")
    }

    /// The pool it belongs to.
    pub fn pool(&self) -> &Arc<HostPool> {
        &self.pool
    }

    /// Puts a clean connection back in its pool (one a `KILL` was aimed at
    /// is closed instead).
    pub fn release(mut self) {
        if let Some(conn) = self.conn.take().filter(|conn| !conn.kill_aimed) {
            let mut idle = lock(&self.pool.idle);
            if !self.pool.retired.load(Ordering::Acquire) {
                idle.push(conn);
            }
        }
    }

    /// Closes a connection that failed, and drops the host's other idle
    /// connections, which are likely stale too (a restarted server).
    pub fn discard_broken(self) {
        self.pool.errors.fetch_add(1, Ordering::Relaxed);
        self.pool.clear_idle();
    }
}

impl HostPool {
    fn new(host: Arc<HostState>, settings: BackendSettings, dialer: Arc<dyn Dialer>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(settings.max_per_host.max(1))),
            host,
            settings,
            dialer,
            idle: Mutex::new(Vec::new()),
            retired: AtomicBool::new(false),
            pressure: Notify::new(),
        }
    }

    /// Resolves when a checkout finds every connection of the pool in use
    /// (from the first poll on).
    pub fn pressure(&self) -> Notified<'_> {
        self.pressure.notified()
    }

    /// Whether a checkout would find a connection free now (without
    /// waiting for one to be released).
    pub fn has_free(&self) -> bool {
        self.permits.available_permits() > 0
    }

    /// How connections reach the host (control connections to it too).
    pub fn dialer(&self) -> &dyn Dialer {
        self.dialer.as_ref()
    }

    /// The host's state, shared with its other pools.
    pub fn host(&self) -> &Arc<HostState> {
        &self.host
    }

    /// Closes the idle connections and makes every connection still checked
    /// out close when released; the pool is freed with its last user.
    fn retire(&self) {
        let mut idle = lock(&self.idle);
        self.retired.store(true, Ordering::Release);
        idle.clear();
    }

    /// Whether the pool was retired (its host left the topology, or the
    /// backend settings changed).
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// A connection with the given key: an idle one if there is one, else a
    /// new one. Fails at once while the host is known to be down. With a
    /// `share` (a session's, and the percentage of the pool it may hold),
    /// the session first waits for a connection of its own share to be
    /// free, then for the pool; both waits together last at most the
    /// checkout timeout, and waiters are served in the order they came.
    pub async fn checkout(
        self: &Arc<Self>,
        key: ConnKey,
        share: Option<(&PoolShare, u32)>,
    ) -> Result<PooledConn, PoolError> {
        if let Some(reason) = self.host.unavailable() {
            return Err(PoolError::HostDown(reason));
        }
        let waited = self.settings.checkout_timeout;
        let started = tokio::time::Instant::now();
        let deadline = started + waited;
        let max = self.settings.max_per_host.max(1);
        let share_permit = match share {
            Some((share, percent)) if percent < 100 => {
                let size = self.share_size(percent);
                let semaphore = share.semaphore(&self.addr, size);
                let acquired = match semaphore.clone().try_acquire_owned() {
                    Ok(permit) => Ok(Ok(permit)),
                    Err(_) => tokio::time::timeout_at(deadline, semaphore.acquire_owned()).await,
                };
                let permit = acquired
                    .map_err(|_| self.timed_out(started))
                    .map_err(|()| PoolError::ShareExhausted {
                        size,
                        max,
                        percent,
                        waited,
                    })?
                    .map_err(|_| PoolError::Closed)?;
                Some(permit)
            }
            _ => None,
        };
        let permit = self
            .acquire_until(deadline)
            .await
            .ok_or_else(|| self.timed_out(started))
            .map_err(|()| PoolError::PoolExhausted { max, waited })?
            .map_err(|_| PoolError::Closed)?;
        self.pool_wait.record(started.elapsed(), false);
        self.checkouts.fetch_add(1, Ordering::Relaxed);
        if let Some(conn) = self.take_idle(key) {
            return Ok(self.checked_out(conn, permit, share_permit, true));
        }
        match BackendConn::connect_via(
            self.dialer.as_ref(),
            &self.addr,
            &self.settings.user,
            &self.settings.password,
            key,
            self.settings.connect_timeout,
        )
        .await
        {
            Ok(conn) => {
                self.host.connected();
                Ok(self.checked_out(Box::new(conn), permit, share_permit, false))
            }
            Err(error) => {
                let reason = describe_connect_error(&error);
                self.clear_idle();
                self.host.connect_failed(&reason);
                Err(PoolError::Connect(reason))
            }
        }
    }

    /// [`HostPool::checkout`] when it needs neither a wait nor a connect: a
    /// place in the pool (and in the session's share) free now and an idle
    /// connection with the given key. `None` when it would wait or connect
    /// (nothing is taken then: [`HostPool::checkout`] does the rest); the
    /// error at once while the host is known to be down.
    pub fn try_checkout(
        self: &Arc<Self>,
        key: ConnKey,
        share: Option<(&PoolShare, u32)>,
    ) -> Option<Result<PooledConn, PoolError>> {
        if let Some(reason) = self.host.unavailable() {
            return Some(Err(PoolError::HostDown(reason)));
        }
        let share_permit = match share {
            Some((share, percent)) if percent < 100 => Some(
                share
                    .semaphore(&self.addr, self.share_size(percent))
                    .try_acquire_owned()
                    .ok()?,
            ),
            _ => None,
        };
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        let conn = self.take_idle(key)?;
        // It did not wait: what a checkout that found a place at once
        // records (under a microsecond).
        self.pool_wait.record_us(0, false);
        self.checkouts.fetch_add(1, Ordering::Relaxed);
        Some(Ok(self.checked_out(conn, permit, share_permit, true)))
    }

    /// The connections of the pool a session's share holds at most, for
    /// `limits.max_host_share_percent` = `percent`.
    fn share_size(&self, percent: u32) -> usize {
        let max = self.settings.max_per_host.max(1);
        (max * percent as usize / 100).clamp(1, max)
    }

    /// `conn`, checked out with its places in the pool and the share.
    fn checked_out(
        self: &Arc<Self>,
        conn: Box<BackendConn>,
        permit: OwnedSemaphorePermit,
        share: Option<OwnedSemaphorePermit>,
        reused: bool,
    ) -> PooledConn {
        PooledConn {
            conn: Some(conn),
            pool: self.clone(),
            _permit: permit,
            _share: share,
            reused,
        }
    }

    /// Counts a checkout that waited from `started` and found no place.
    fn timed_out(&self, started: tokio::time::Instant) {
        self.pool_wait.record(started.elapsed(), true);
        self.checkout_timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// A place in the pool, waited for in arrival order until `deadline`
    /// (`None` past it);
    /// while none is free, sessions that keep a connection only for `SHOW
    /// WARNINGS` are asked to give it up (again every
    /// [`PRESSURE_REPEAT`], for those that went idle meanwhile).
    async fn acquire_until(
        &self,
        deadline: tokio::time::Instant,
    ) -> Option<Result<OwnedSemaphorePermit, AcquireError>> {
        // A free place is taken without arming a timer (the common case;
        // waiters queued before keep their turn: a place freed while they
        // wait goes to them, not to this call).
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return Some(Ok(permit));
        }
        let acquire = self.permits.clone().acquire_owned();
        tokio::pin!(acquire);
        let expired = tokio::time::sleep_until(deadline);
        tokio::pin!(expired);
        loop {
            if !self.has_free() {
                self.pressure.notify_waiters();
            }
            tokio::select! {
                permit = &mut acquire => return Some(permit),
                () = &mut expired => return None,
                () = tokio::time::sleep(PRESSURE_REPEAT) => {}
            }
        }
    }

    fn take_idle(&self, key: ConnKey) -> Option<Box<BackendConn>> {
        let mut idle = lock(&self.idle);
        let index = idle.iter().rposition(|conn| conn.key == key)?;
        Some(idle.swap_remove(index))
    }

    /// Closes every idle connection.
    pub fn clear_idle(&self) {
        lock(&self.idle).clear();
    }

    /// Connections idle in the pool.
    pub fn idle_count(&self) -> usize {
        lock(&self.idle).len()
    }

    /// Connections checked out now.
    pub fn in_use(&self) -> usize {
        self.settings.max_per_host.max(1) - self.permits.available_permits()
    }
}

/// One client session's claim on the hosts' pools: per host, a semaphore
/// of the connections the session may hold at once (its statements' and
/// its multi-shard parts'), so one session cannot take a whole pool.
#[derive(Debug, Default)]
pub struct PoolShare {
    /// By host address (from the config: a cheap hasher is safe).
    hosts: Mutex<FxHashMap<String, (usize, Arc<Semaphore>)>>,
}

impl PoolShare {
    /// A session's share of `size` connections of the host at `addr` (a
    /// new one when the size changed: a reload resized the pools).
    fn semaphore(&self, addr: &str, size: usize) -> Arc<Semaphore> {
        let mut hosts = lock(&self.hosts);
        if let Some((kept, semaphore)) = hosts.get(addr) {
            if *kept == size {
                return semaphore.clone();
            }
        }
        match hosts.entry(addr.to_owned()) {
            Entry::Occupied(mut entry) => {
                if entry.get().0 != size {
                    entry.insert((size, Arc::new(Semaphore::new(size))));
                }
                entry.get().1.clone()
            }
            Entry::Vacant(entry) => entry
                .insert((size, Arc::new(Semaphore::new(size))))
                .1
                .clone(),
        }
    }
}

fn describe_connect_error(error: &BackendError) -> String {
    match error {
        BackendError::Io(io) => format!("cannot connect: {io}"),
        other => other.to_string(),
    }
}

/// Every host's pool, by address. A reload that keeps a host keeps its
/// pool (and connections); one that changes the backend settings gives
/// each host a new pool sharing its [`HostState`]; a host that leaves has
/// its pool retired. Retired pools are kept weakly: they are listed while
/// a statement still uses them, and one of a host that left is handed out
/// again to statements still running on an older topology.
pub struct Backends {
    settings: RwLock<BackendSettings>,
    /// How every pool's connections reach their hosts.
    dialer: Arc<dyn Dialer>,
    /// The pools of the hosts of the topology in force (and of the one
    /// being installed), by address (from the config: a cheap hasher is safe).
    pools: RwLock<FxHashMap<String, Arc<HostPool>>>,
    /// Pools retired, oldest first, while something still uses them.
    retired: Mutex<Vec<Weak<HostPool>>>,
}

impl Backends {
    /// No hosts yet ([`Backends::add_hosts`] adds them); connections are
    /// TCP.
    pub fn new(settings: BackendSettings) -> Self {
        Self::with_dialer(settings, Arc::new(TcpDialer))
    }

    /// No hosts yet; every connection is opened through `dialer` (a test's
    /// fake hosts).
    pub fn with_dialer(settings: BackendSettings, dialer: Arc<dyn Dialer>) -> Self {
        Self {
            settings: RwLock::new(settings),
            dialer,
            pools: RwLock::new(FxHashMap::default()),
            retired: Mutex::new(Vec::new()),
        }
    }

    /// The pool for `addr`. For a host that is not in the topology in
    /// force (a statement still running on an older one), the host's
    /// retired pool while it lives, else a new retired pool that later
    /// statements for that host share: such connections close on release.
    pub fn pool(&self, addr: &str) -> Arc<HostPool> {
        if let Some(pool) = read(&self.pools).get(addr) {
            return pool.clone();
        }
        let mut retired = lock(&self.retired);
        if let Some(pool) = retired
            .iter()
            .rev()
            .filter_map(Weak::upgrade)
            .find(|pool| pool.addr == addr)
        {
            return pool;
        }
        let settings = read(&self.settings).clone();
        let pool = Arc::new(HostPool::new(
            Arc::new(HostState::new(addr.to_owned())),
            settings,
            self.dialer.clone(),
        ));
        pool.retire();
        retired.retain(|weak| weak.strong_count() > 0);
        retired.push(Arc::downgrade(&pool));
        pool
    }

    /// How connections reach the hosts.
    pub fn dialer(&self) -> &dyn Dialer {
        self.dialer.as_ref()
    }

    /// The state of `addr`, if it is a host of the topology in force.
    pub fn host(&self, addr: &str) -> Option<Arc<HostState>> {
        read(&self.pools).get(addr).map(|pool| pool.host.clone())
    }

    /// The pools of the hosts of the topology in force, sorted by address.
    pub fn all(&self) -> Vec<Arc<HostPool>> {
        let mut pools: Vec<_> = read(&self.pools).values().cloned().collect();
        pools.sort_by(|a, b| a.addr.cmp(&b.addr));
        pools
    }

    /// Retired pools still in use, sorted by address.
    pub fn retired(&self) -> Vec<Arc<HostPool>> {
        let mut retired = lock(&self.retired);
        retired.retain(|weak| weak.strong_count() > 0);
        let mut pools: Vec<_> = retired.iter().filter_map(Weak::upgrade).collect();
        drop(retired);
        pools.sort_by(|a, b| a.addr.cmp(&b.addr));
        pools
    }

    /// Gives each of `hosts` a pool (with a new state) if it has none:
    /// called before a topology with these hosts is swapped in, so its
    /// statements find their pools.
    pub fn add_hosts(&self, hosts: &[&str]) {
        let settings = read(&self.settings).clone();
        let mut pools = write(&self.pools);
        for addr in hosts {
            if !pools.contains_key(*addr) {
                let host = Arc::new(HostState::new((*addr).to_owned()));
                pools.insert(
                    (*addr).to_owned(),
                    Arc::new(HostPool::new(host, settings.clone(), self.dialer.clone())),
                );
            }
        }
    }

    /// Keeps the pools of `hosts` (the topology now in force) and retires
    /// every other one, forgetting what was known about those hosts;
    /// returns the addresses retired.
    pub fn retain_hosts(&self, hosts: &[&str]) -> Vec<String> {
        let mut pools = write(&self.pools);
        let mut departed: Vec<String> = pools
            .keys()
            .filter(|addr| !hosts.contains(&addr.as_str()))
            .cloned()
            .collect();
        let removed: Vec<Arc<HostPool>> = departed
            .iter()
            .filter_map(|addr| pools.remove(addr))
            .collect();
        drop(pools);
        self.retire_all(removed);
        departed.sort();
        departed
    }

    /// Uses `settings` for every connection made from now on: every host
    /// gets a new pool (keeping its state) and the old pools are retired.
    /// Returns whether they changed.
    pub fn reconfigure(&self, settings: BackendSettings) -> bool {
        let mut pools = write(&self.pools);
        let mut current = write(&self.settings);
        if *current == settings {
            return false;
        }
        *current = settings.clone();
        drop(current);
        let mut old = Vec::with_capacity(pools.len());
        for pool in pools.values_mut() {
            let fresh = Arc::new(HostPool::new(
                pool.host.clone(),
                settings.clone(),
                self.dialer.clone(),
            ));
            old.push(std::mem::replace(pool, fresh));
        }
        drop(pools);
        self.retire_all(old);
        true
    }

    fn retire_all(&self, pools: Vec<Arc<HostPool>>) {
        let mut retired = lock(&self.retired);
        retired.retain(|weak| weak.strong_count() > 0);
        for pool in pools {
            pool.retire();
            retired.push(Arc::downgrade(&pool));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(max_per_host: usize) -> Arc<HostPool> {
        let settings = BackendSettings {
            user: "shard".to_owned(),
            password: "pw".to_owned(),
            max_per_host,
            connect_timeout: Duration::from_millis(100),
            checkout_timeout: Duration::from_millis(100),
        };
        let host = Arc::new(HostState::new("127.0.0.1:1".to_owned()));
        Arc::new(HostPool::new(host, settings, Arc::new(TcpDialer)))
    }

    const KEY: ConnKey = ConnKey {
        framing: mysql_common::constants::CapabilityFlags::empty(),
        collation: 45,
    };

    #[test]
    fn a_checkout_that_would_wait_or_connect_is_left_to_the_async_one_with_nothing_taken() {
        let pool = pool(4);
        let share = PoolShare::default();
        assert!(pool.try_checkout(KEY, Some((&share, 50))).is_none());
        assert!(pool.try_checkout(KEY, None).is_none());
        assert_eq!(pool.in_use(), 0, "no place of the pool kept");
        let size = pool.share_size(50);
        assert_eq!(size, 2);
        let semaphore = share.semaphore(&pool.addr, size);
        assert_eq!(
            semaphore.available_permits(),
            2,
            "no place of the share kept"
        );
        assert_eq!(pool.checkouts.load(Ordering::Relaxed), 0);
        assert_eq!(pool.pool_wait.count(), 0);
        // A share that is used up: none, before the pool is looked at.
        let _held = semaphore.clone().try_acquire_many_owned(2);
        assert!(pool.try_checkout(KEY, Some((&share, 50))).is_none());
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn a_checkout_of_a_host_known_to_be_down_fails_at_once() {
        let pool = pool(4);
        pool.host.connect_failed("cannot connect: refused");
        match pool.try_checkout(KEY, None) {
            Some(Err(PoolError::HostDown(reason))) => {
                assert!(reason.starts_with("cannot connect: refused"), "{reason}")
            }
            Some(Ok(_)) => panic!("a connection from a host known to be down"),
            other => panic!("not refused at once: {:?}", other.map(|r| r.err())),
        }
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn pool_errors_say_whether_the_host_or_its_pool_failed() {
        let waited = Duration::from_millis(250);
        let share = PoolError::ShareExhausted {
            size: 2,
            max: 8,
            percent: 25,
            waited,
        };
        assert_eq!(
            share.to_string(),
            "this session already holds 2 of the host's 8 connections, its share (limits.max_host_share_percent = 25); waited 250ms"
        );
        assert_eq!(
            PoolError::PoolExhausted { max: 8, waited }.to_string(),
            "all 8 connections of the pool (backend.pool_max_per_host) were in use by other sessions for backend.checkout_timeout_ms (250ms)"
        );
        assert!(share.is_exhausted() && PoolError::PoolExhausted { max: 8, waited }.is_exhausted());
        assert!(!PoolError::HostDown("down".to_owned()).is_exhausted());
        assert_eq!(PoolError::Closed.to_string(), "pool closed");
        let refused = "cannot connect: Connection refused (os error 111)";
        assert_eq!(PoolError::Connect(refused.to_owned()).to_string(), refused);
        assert_eq!(PoolError::HostDown("down".to_owned()).to_string(), "down");
    }
}
