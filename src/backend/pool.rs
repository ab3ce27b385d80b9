//! Per-host pools of backend connections, with a size limit, a checkout
//! timeout, and fast failure for a host that just refused us.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::conn::{BackendConn, BackendError, ConnKey};
use super::health::{HealthSnapshot, HostHealth};
use crate::stats::Histogram;
use crate::topology::config::BackendConfig;

/// How long after a failed connect a host is reported down without trying
/// again, so a dead host costs its statements nothing but an error.
const RETRY_DOWN_HOST_AFTER: Duration = Duration::from_millis(500);

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

/// The connections to one host.
pub struct HostPool {
    /// `host:port`.
    pub addr: String,
    settings: BackendSettings,
    idle: Mutex<Vec<BackendConn>>,
    permits: Arc<Semaphore>,
    down: Mutex<Option<(Instant, String)>>,
    /// Statements sent to this host.
    pub queries: AtomicU64,
    /// Connect failures and broken connections on this host.
    pub errors: AtomicU64,
    /// Set when the host left the topology (or the backend settings
    /// changed): connections are closed on release instead of kept.
    retired: AtomicBool,
    /// What the health checker found (`backend::health`).
    pub host_health: HostHealth,
    /// Statements sent to this host: count, errors, latency.
    pub statements: Histogram,
}

/// A connection checked out of a pool. Dropping it closes the connection;
/// only [`PooledConn::release`] puts it back, so a connection abandoned
/// half-way through a response is never reused.
pub struct PooledConn {
    conn: Option<BackendConn>,
    pool: Arc<HostPool>,
    _permit: OwnedSemaphorePermit,
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

    /// Puts a clean connection back in its pool.
    pub fn release(mut self) {
        if let Some(conn) = self.conn.take() {
            if let Ok(mut idle) = self.pool.idle.lock() {
                if !self.pool.retired.load(Ordering::Acquire) {
                    idle.push(conn);
                }
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
    fn new(addr: String, settings: BackendSettings) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(settings.max_per_host.max(1))),
            addr,
            settings,
            idle: Mutex::new(Vec::new()),
            down: Mutex::new(None),
            queries: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            host_health: HostHealth::new(),
            statements: Histogram::new(),
        }
    }

    /// Closes the idle connections and makes every connection still checked
    /// out close when released; the pool is freed with its last user.
    fn retire(&self) {
        let mut idle = match self.idle.lock() {
            Ok(idle) => idle,
            Err(poisoned) => poisoned.into_inner(),
        };
        self.retired.store(true, Ordering::Release);
        idle.clear();
    }

    /// Whether the pool was retired (its host left the topology).
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// A connection with the given key: an idle one if there is one, else a
    /// new one. Fails at once while the host is known to be down.
    pub async fn checkout(self: &Arc<Self>, key: ConnKey) -> Result<PooledConn, String> {
        if let Some(reason) = self.host_health.down_reason() {
            return Err(reason);
        }
        if let Some(reason) = self.recent_failure() {
            return Err(reason);
        }
        let permit = tokio::time::timeout(
            self.settings.checkout_timeout,
            self.permits.clone().acquire_owned(),
        )
        .await
        .map_err(|_| {
            format!(
                "all {} connections to the host are busy (waited {:?})",
                self.settings.max_per_host, self.settings.checkout_timeout
            )
        })?
        .map_err(|_| "pool closed".to_owned())?;
        self.queries.fetch_add(1, Ordering::Relaxed);
        if let Some(conn) = self.take_idle(key) {
            return Ok(PooledConn {
                conn: Some(conn),
                pool: self.clone(),
                _permit: permit,
                reused: true,
            });
        }
        match BackendConn::connect(
            &self.addr,
            &self.settings.user,
            &self.settings.password,
            key,
            self.settings.connect_timeout,
        )
        .await
        {
            Ok(conn) => {
                self.mark_up();
                Ok(PooledConn {
                    conn: Some(conn),
                    pool: self.clone(),
                    _permit: permit,
                    reused: false,
                })
            }
            Err(error) => {
                let reason = describe_connect_error(&error);
                self.mark_down(&reason);
                Err(reason)
            }
        }
    }

    fn take_idle(&self, key: ConnKey) -> Option<BackendConn> {
        let mut idle = self.idle.lock().ok()?;
        let index = idle.iter().rposition(|conn| conn.key == key)?;
        Some(idle.swap_remove(index))
    }

    /// Closes every idle connection.
    pub fn clear_idle(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }

    /// Connections idle in the pool.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|idle| idle.len()).unwrap_or(0)
    }

    /// Connections checked out now.
    pub fn in_use(&self) -> usize {
        self.settings.max_per_host.max(1) - self.permits.available_permits()
    }

    fn recent_failure(&self) -> Option<String> {
        let down = self.down.lock().ok()?;
        match &*down {
            Some((at, reason)) if at.elapsed() < RETRY_DOWN_HOST_AFTER => {
                Some(format!("{reason} ({} ms ago)", at.elapsed().as_millis()))
            }
            _ => None,
        }
    }

    fn mark_down(&self, reason: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.clear_idle();
        if let Ok(mut down) = self.down.lock() {
            *down = Some((Instant::now(), reason.to_owned()));
        }
    }

    fn mark_up(&self) {
        if let Ok(mut down) = self.down.lock() {
            *down = None;
        }
    }

    /// Whether the health checker marked the host down or the last
    /// connect attempt failed.
    pub fn is_down(&self) -> bool {
        self.host_health.is_down() || self.down.lock().map(|d| d.is_some()).unwrap_or(false)
    }

    /// What the health checker found.
    pub fn health(&self) -> HealthSnapshot {
        self.host_health.snapshot()
    }
}

fn describe_connect_error(error: &BackendError) -> String {
    match error {
        BackendError::Io(io) => format!("cannot connect: {io}"),
        other => other.to_string(),
    }
}

/// Every host pool, by address. Pools outlive topology versions, so a
/// reload that keeps a host keeps its connections; a host that leaves has
/// its pool retired ([`Backends::retain_hosts`]).
pub struct Backends {
    settings: RwLock<BackendSettings>,
    pools: RwLock<HashMap<String, Arc<HostPool>>>,
    /// The hosts of the topology in force once a reload has told us (None
    /// before): a statement still running on an older snapshot gets a
    /// one-off pool for a host that left, which is not kept.
    hosts: RwLock<Option<HashSet<String>>>,
}

impl Backends {
    /// No pools yet; they are made on first use.
    pub fn new(settings: BackendSettings) -> Self {
        Self {
            settings: RwLock::new(settings),
            pools: RwLock::new(HashMap::new()),
            hosts: RwLock::new(None),
        }
    }

    /// The pool for `addr`, made if needed.
    pub fn pool(&self, addr: &str) -> Arc<HostPool> {
        if let Some(pool) = self.pools.read().ok().and_then(|p| p.get(addr).cloned()) {
            return pool;
        }
        let mut pools = write_lock(&self.pools);
        let settings = read_lock(&self.settings).clone();
        let known = read_lock(&self.hosts)
            .as_ref()
            .is_none_or(|hosts| hosts.contains(addr));
        if !known {
            let pool = HostPool::new(addr.to_owned(), settings);
            pool.retire();
            return Arc::new(pool);
        }
        pools
            .entry(addr.to_owned())
            .or_insert_with(|| Arc::new(HostPool::new(addr.to_owned(), settings)))
            .clone()
    }

    /// Every pool made so far, sorted by address.
    pub fn all(&self) -> Vec<Arc<HostPool>> {
        let mut pools: Vec<_> = self
            .pools
            .read()
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default();
        pools.sort_by(|a, b| a.addr.cmp(&b.addr));
        pools
    }

    /// Keeps the pools of `hosts` (the topology now in force) and retires
    /// every other one; returns the addresses retired.
    pub fn retain_hosts(&self, hosts: &[&str]) -> Vec<String> {
        let keep: HashSet<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        let mut pools = write_lock(&self.pools);
        let mut retired: Vec<String> = pools
            .keys()
            .filter(|addr| !keep.contains(*addr))
            .cloned()
            .collect();
        for addr in &retired {
            if let Some(pool) = pools.remove(addr) {
                pool.retire();
            }
        }
        *write_lock(&self.hosts) = Some(keep);
        retired.sort();
        retired
    }

    /// Uses `settings` for every connection made from now on: every pool is
    /// retired and made again on first use. Returns whether they changed.
    pub fn reconfigure(&self, settings: BackendSettings) -> bool {
        let mut pools = write_lock(&self.pools);
        let mut current = write_lock(&self.settings);
        if *current == settings {
            return false;
        }
        *current = settings;
        for (_, pool) in pools.drain() {
            pool.retire();
        }
        true
    }
}

fn read_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
