//! Per-host pools of backend connections, with a size limit, a checkout
//! timeout, and fast failure for a host that just refused us.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::conn::{BackendConn, BackendError, ConnKey};

/// How long after a failed connect a host is reported down without trying
/// again, so a dead host costs its statements nothing but an error.
const RETRY_DOWN_HOST_AFTER: Duration = Duration::from_millis(500);

/// How backend connections are made.
#[derive(Debug, Clone)]
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
    fn new(addr: String, settings: BackendSettings) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(settings.max_per_host.max(1))),
            addr,
            settings,
            idle: Mutex::new(Vec::new()),
            down: Mutex::new(None),
            queries: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// A connection with the given key: an idle one if there is one, else a
    /// new one. Fails at once while the host is known to be down.
    pub async fn checkout(self: &Arc<Self>, key: ConnKey) -> Result<PooledConn, String> {
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

    /// Whether the last connect attempt failed.
    pub fn is_down(&self) -> bool {
        self.down.lock().map(|d| d.is_some()).unwrap_or(false)
    }
}

fn describe_connect_error(error: &BackendError) -> String {
    match error {
        BackendError::Io(io) => format!("cannot connect: {io}"),
        other => other.to_string(),
    }
}

/// Every host pool, by address. Pools outlive topology versions, so a
/// reload that keeps a host keeps its connections.
pub struct Backends {
    settings: RwLock<BackendSettings>,
    pools: RwLock<HashMap<String, Arc<HostPool>>>,
}

impl Backends {
    /// No pools yet; they are made on first use.
    pub fn new(settings: BackendSettings) -> Self {
        Self {
            settings: RwLock::new(settings),
            pools: RwLock::new(HashMap::new()),
        }
    }

    /// The pool for `addr`, made if needed.
    pub fn pool(&self, addr: &str) -> Arc<HostPool> {
        if let Some(pool) = self.pools.read().ok().and_then(|p| p.get(addr).cloned()) {
            return pool;
        }
        let settings = self
            .settings
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone());
        let mut pools = match self.pools.write() {
            Ok(pools) => pools,
            Err(poisoned) => poisoned.into_inner(),
        };
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
}
