//! The health checker: pings every master and replica on an interval (with
//! `mysql_async`) and marks hosts up or down in their state
//! (`backend::pool::HostState`, which outlives the host's pools).
//!
//! One task per host of the topology in force; a supervisor re-reads the
//! topology every interval, starting tasks for hosts a reload added and
//! stopping those of hosts it removed. A host is down after
//! `health.failures_before_down` failed checks in a row and up again after
//! one good check. While a host is down, statements for it fail at once
//! (`HostPool::checkout`). With `health.auto_failover`, a master that goes
//! down is reported on the checker's event channel ([`HostEvent`]) once
//! its replica is up, and the control plane promotes the replica (as the
//! operations account, like `PROMOTE REPLICA`). Pings log in as the data
//! path's `backend` account (a ping needs no privilege), and a checker
//! reconnects when a reload changes that account, so it checks what the data
//! path would meet. A good check also reads the server's prepared statement
//! count against its `max_prepared_stmt_count`
//! (`HostState::has_statement_room`).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::replication::{read_lag, LagTracker, ReplicaLag};
use super::Backends;
use crate::sync::lock;
use crate::topology::{SharedTopology, Topology};

/// What the health checker tells whoever listens on its channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEvent {
    /// With `health.auto_failover`: `master` was marked down and `replica`,
    /// the replica of one of its ranges, is up: time to promote it. Sent
    /// once per time the master goes down.
    MasterDown {
        /// The master marked down.
        master: String,
        /// Its replica found up.
        replica: String,
    },
}

/// What the health checker checks: the routing table in force (its hosts
/// and `health` settings) and the host pools (whose host states keep the
/// health).
pub trait Checked: Send + Sync + 'static {
    /// The routing table in force.
    fn topology(&self) -> &SharedTopology;
    /// The host pools.
    fn backends(&self) -> &Backends;
}

/// What the checks say about a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    /// Not decided yet: no good check, and fewer failed ones than needed
    /// to mark it down.
    Unknown,
    /// The last check succeeded.
    Up,
    /// The last `failures_before_down` checks failed.
    Down,
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HealthState::Unknown => "unknown",
            HealthState::Up => "up",
            HealthState::Down => "down",
        })
    }
}

/// A copy of a host's health, for `SHOW HOSTS` and `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSnapshot {
    /// Up, down or unknown.
    pub state: HealthState,
    /// How long the last good check took (connect if needed, then ping).
    pub last_latency: Option<Duration>,
    /// When the last check ended.
    pub last_check: Option<SystemTime>,
    /// Why the last failed check failed.
    pub last_error: Option<String>,
    /// Checks run.
    pub checks: u64,
    /// Checks that failed.
    pub failures: u64,
    /// Checks that failed since the last good one.
    pub consecutive_failures: u32,
    /// For a replica: its lag behind its master, as last read.
    pub lag: Option<ReplicaLag>,
}

/// A host's health, kept in its state (which outlives its pools): the state in an atomic (read on
/// every checkout), the rest behind a lock only the checker and readers of
/// `SHOW HOSTS` take.
#[derive(Debug)]
pub struct HostHealth {
    state: AtomicU8,
    details: Mutex<HealthSnapshot>,
}

/// A change of state made by one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The state did not change.
    None,
    /// The host is up (it was down or unknown).
    Up {
        /// The state before.
        from: HealthState,
    },
    /// The host was just marked down.
    Down,
}

const UNKNOWN: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

impl Default for HostHealth {
    fn default() -> Self {
        Self::new()
    }
}

impl HostHealth {
    /// A host not checked yet.
    pub fn new() -> Self {
        Self {
            state: AtomicU8::new(UNKNOWN),
            details: Mutex::new(HealthSnapshot {
                state: HealthState::Unknown,
                last_latency: None,
                last_check: None,
                last_error: None,
                checks: 0,
                failures: 0,
                consecutive_failures: 0,
                lag: None,
            }),
        }
    }

    /// The current state (one atomic load).
    pub fn state(&self) -> HealthState {
        match self.state.load(Ordering::Acquire) {
            UP => HealthState::Up,
            DOWN => HealthState::Down,
            _ => HealthState::Unknown,
        }
    }

    /// Whether the checker marked the host down.
    pub fn is_down(&self) -> bool {
        self.state.load(Ordering::Acquire) == DOWN
    }

    /// A copy of everything known.
    pub fn snapshot(&self) -> HealthSnapshot {
        self.details().clone()
    }

    /// Why statements for this host are refused, if it is marked down.
    pub fn down_reason(&self) -> Option<String> {
        if !self.is_down() {
            return None;
        }
        let details = self.details();
        let ago = details
            .last_check
            .and_then(|at| at.elapsed().ok())
            .map_or(0, |d| d.as_millis());
        Some(format!(
            "marked down by the health checker: {} checks in a row failed, the last {ago} ms ago: {}",
            details.consecutive_failures,
            details.last_error.as_deref().unwrap_or("unknown error"),
        ))
    }

    /// Records a good check that took `latency`.
    pub fn record_success(&self, latency: Duration) -> Transition {
        let mut details = self.details();
        details.checks += 1;
        details.last_latency = Some(latency);
        details.last_check = Some(SystemTime::now());
        details.consecutive_failures = 0;
        let from = details.state;
        details.state = HealthState::Up;
        self.state.store(UP, Ordering::Release);
        if from == HealthState::Up {
            Transition::None
        } else {
            Transition::Up { from }
        }
    }

    /// Records a failed check; the host goes down at the
    /// `failures_before_down`-th failure in a row.
    pub fn record_failure(&self, error: String, failures_before_down: u32) -> Transition {
        let mut details = self.details();
        details.checks += 1;
        details.failures += 1;
        details.consecutive_failures = details.consecutive_failures.saturating_add(1);
        details.last_check = Some(SystemTime::now());
        details.last_error = Some(error);
        if details.state == HealthState::Down
            || details.consecutive_failures < failures_before_down.max(1)
        {
            return Transition::None;
        }
        details.state = HealthState::Down;
        self.state.store(DOWN, Ordering::Release);
        Transition::Down
    }

    /// Records a replica's lag as just read (none: the host is no replica
    /// any more, or is down).
    pub fn record_lag(&self, lag: Option<ReplicaLag>) {
        self.details().lag = lag;
    }

    fn details(&self) -> std::sync::MutexGuard<'_, HealthSnapshot> {
        lock(&self.details)
    }
}

/// Starts the health checker for `checked`'s hosts on the current runtime,
/// sending its [`HostEvent`]s to `events`. It stops when `checked` is
/// dropped.
pub fn spawn<T: Checked>(checked: &Arc<T>, events: UnboundedSender<HostEvent>) {
    tokio::spawn(supervise(Arc::downgrade(checked), events));
}

/// Keeps one checker task per host of the topology in force.
async fn supervise<T: Checked>(checked: Weak<T>, events: UnboundedSender<HostEvent>) {
    let mut checkers: HashMap<String, JoinHandle<()>> = HashMap::new();
    while let Some(strong) = checked.upgrade() {
        let topology = strong.topology().load();
        let interval = Duration::from_millis(topology.config.health.interval_ms.max(1));
        drop(strong);
        checkers.retain(|addr, task| {
            let keep = topology.hosts.iter().any(|h| &h.addr == addr);
            if !keep {
                info!(host = %addr, "host left the topology: health checks stop");
                task.abort();
            }
            keep
        });
        for host in &topology.hosts {
            checkers.entry(host.addr.clone()).or_insert_with(|| {
                tokio::spawn(check_host(
                    checked.clone(),
                    host.addr.clone(),
                    events.clone(),
                ))
            });
        }
        drop(topology);
        tokio::time::sleep(interval).await;
    }
    for task in checkers.into_values() {
        task.abort();
    }
}

/// The checker's connection to its host, and the account it logged in with.
struct CheckConn {
    conn: Conn,
    user: String,
    password: String,
}

/// Checks one host every `health.interval_ms` until `checked` is gone or
/// the host leaves the topology.
async fn check_host<T: Checked>(
    checked: Weak<T>,
    addr: String,
    events: UnboundedSender<HostEvent>,
) {
    let mut conn: Option<CheckConn> = None;
    let mut lag = LagReader::default();
    let mut failover_pending = false;
    while let Some(strong) = checked.upgrade() {
        let Some(host) = strong.backends().host(&addr) else {
            break;
        };
        let topology = strong.topology().load();
        let settings = &topology.config.health;
        let interval = Duration::from_millis(settings.interval_ms.max(1));
        let timeout = Duration::from_millis(settings.timeout_ms.max(1));
        let backend = &topology.config.backend;
        let started = Instant::now();
        let outcome = tokio::time::timeout(
            timeout,
            ping(&mut conn, &addr, &backend.user, &backend.password, timeout),
        )
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} ms", timeout.as_millis())));
        let elapsed = started.elapsed();
        let transition = match outcome {
            Ok(()) => {
                if let Some(checked) = conn.as_mut() {
                    if let Some((count, max)) =
                        read_prepared_statements(&mut checked.conn, timeout).await
                    {
                        host.record_prepared_statements(count, max);
                    }
                }
                let reading = lag.read(&topology, &addr, timeout).await;
                let failing = |l: &Option<ReplicaLag>| l.as_ref().and_then(|l| l.error.clone());
                if let Some(error) =
                    failing(&reading).filter(|e| Some(e) != failing(&host.health().lag).as_ref())
                {
                    warn!(host = %addr, %error, "replica lag not read: SHOW HOSTS shows NULL and promotions are not refused for lag until it is");
                }
                host.host_health.record_lag(reading);
                host.host_health.record_success(elapsed)
            }
            Err(error) => {
                conn = None;
                host.host_health.record_lag(None);
                host.host_health
                    .record_failure(error, settings.failures_before_down)
            }
        };
        match transition {
            Transition::None => {}
            Transition::Up { from } => {
                info!(host = %addr, latency_us = elapsed.as_micros() as u64, was = %from, "host is up");
                failover_pending = false;
            }
            Transition::Down => {
                let health = host.health();
                warn!(
                    host = %addr,
                    failures = health.consecutive_failures,
                    error = health.last_error.as_deref().unwrap_or(""),
                    "host marked down: its statements fail at once until a check succeeds"
                );
                strong.backends().pool(&addr).clear_idle();
                failover_pending = settings.auto_failover && topology.is_master(&addr);
            }
        }
        if failover_pending && host.host_health.is_down() {
            if let Some(replica) = replica_up(strong.backends(), &topology, &addr) {
                failover_pending = false;
                let _ = events.send(HostEvent::MasterDown {
                    master: addr.clone(),
                    replica,
                });
            }
        }
        drop((strong, topology, host));
        tokio::time::sleep(interval.saturating_sub(elapsed)).await;
    }
}

/// One check: connects if there is no connection (or the backend account
/// changed since it was made), then pings.
async fn ping(
    conn: &mut Option<CheckConn>,
    addr: &str,
    user: &str,
    password: &str,
    timeout: Duration,
) -> Result<(), String> {
    if conn
        .as_ref()
        .is_some_and(|c| c.user != user || c.password != password)
    {
        if let Some(stale) = conn.take() {
            let _ = stale.conn.disconnect().await;
        }
    }
    let checked = match conn {
        Some(checked) => checked,
        None => conn.insert(CheckConn {
            conn: connect(addr, user, password, timeout).await?,
            user: user.to_owned(),
            password: password.to_owned(),
        }),
    };
    checked
        .conn
        .ping()
        .await
        .map_err(|e| format!("ping failed: {e}"))
}

/// The server's `max_prepared_stmt_count` and `Prepared_stmt_count` (all
/// clients' statements open), in one read.
const PREPARED_STATEMENTS_SQL: &str = "SELECT @@global.max_prepared_stmt_count, VARIABLE_VALUE \
     FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT'";

/// How many prepared statements the server holds, and its maximum
/// (`HostState::has_statement_room`: backend connections keep no new
/// statement above three quarters of it); None when the read failed (the
/// last reading stays).
async fn read_prepared_statements(conn: &mut Conn, timeout: Duration) -> Option<(u64, u64)> {
    let read = conn.query_first::<(u64, u64), _>(PREPARED_STATEMENTS_SQL);
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(Some((max, count)))) => Some((count, max)),
        _ => None,
    }
}

/// A replica checker's connections for reading its lag (as the operations
/// account: `SHOW SLAVE STATUS` needs a privilege the data path's account
/// lacks), and the master positions seen.
#[derive(Default)]
struct LagReader {
    replica: Option<Conn>,
    master: Option<(String, Conn)>,
    tracker: LagTracker,
    /// The master the tracker's positions came from.
    tracked: String,
}

impl LagReader {
    /// The lag of `addr` if the topology makes it a replica; connections
    /// are made as needed and dropped after an error.
    async fn read(
        &mut self,
        topology: &Topology,
        addr: &str,
        timeout: Duration,
    ) -> Option<ReplicaLag> {
        let Some(master) = master_of(topology, addr) else {
            *self = LagReader::default();
            return None;
        };
        if self.tracked != master {
            *self = LagReader {
                tracked: master.clone(),
                ..LagReader::default()
            };
        }
        let account = topology.config.operations_account();
        let (user, password) = (&account.user, &account.password);
        if self.master.as_ref().is_none_or(|(at, _)| *at != master) {
            self.master = connect(&master, user, password, timeout)
                .await
                .ok()
                .map(|conn| (master.clone(), conn));
        }
        let reading = async {
            if self.replica.is_none() {
                self.replica = Some(connect(addr, user, password, timeout).await?);
            }
            let replica = self.replica.as_mut().ok_or("no connection")?;
            let master_conn = self.master.as_mut().map(|(_, conn)| conn);
            read_lag(&mut self.tracker, &master, master_conn, replica).await
        };
        let reading = tokio::time::timeout(timeout, reading)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {} ms", timeout.as_millis())));
        Some(reading.unwrap_or_else(|error| {
            self.replica = None;
            self.master = None;
            ReplicaLag {
                master,
                lag: None,
                seconds_behind_master: None,
                gtid_behind: None,
                sql_running: false,
                error: Some(error),
            }
        }))
    }
}

/// The master of the first range whose replica is `addr`.
fn master_of(topology: &Topology, addr: &str) -> Option<String> {
    topology
        .fleets
        .iter()
        .flat_map(|fleet| &fleet.ranges)
        .find(|range| {
            range
                .replica
                .is_some_and(|r| topology.hosts[r].addr == addr)
        })
        .map(|range| topology.hosts[range.master].addr.clone())
}

/// A control-plane connection to `addr` as `user`, bounded by `timeout`.
pub(crate) async fn connect(
    addr: &str,
    user: &str,
    password: &str,
    timeout: Duration,
) -> Result<Conn, String> {
    let opts = crate::ops::connection_opts(addr, user, password).map_err(|e| e.to_string())?;
    match tokio::time::timeout(timeout, Conn::new(opts)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(format!("cannot connect: {e}")),
        Err(_) => Err(format!(
            "cannot connect: no answer within {} ms",
            timeout.as_millis()
        )),
    }
}

/// The replica of one of `master`'s ranges that the checker found up.
fn replica_up(backends: &Backends, topology: &Topology, master: &str) -> Option<String> {
    topology
        .fleets
        .iter()
        .flat_map(|fleet| &fleet.ranges)
        .filter(|range| topology.hosts[range.master].addr == master)
        .filter_map(|range| range.replica)
        .map(|replica| &topology.hosts[replica].addr)
        .find(|replica| {
            backends
                .host(replica)
                .is_some_and(|host| host.host_health.state() == HealthState::Up)
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_after_enough_failures_in_a_row_and_up_after_one_success() {
        let health = HostHealth::new();
        assert_eq!(health.state(), HealthState::Unknown);
        assert_eq!(health.record_failure("refused".into(), 2), Transition::None);
        assert_eq!(health.state(), HealthState::Unknown);
        assert!(health.down_reason().is_none());
        assert_eq!(health.record_failure("refused".into(), 2), Transition::Down);
        assert!(health.is_down());
        assert_eq!(
            health.record_failure("refused again".into(), 2),
            Transition::None
        );
        let reason = health.down_reason().unwrap();
        assert!(reason.contains("3 checks in a row failed"), "{reason}");
        assert!(reason.contains("refused again"), "{reason}");
        assert_eq!(
            health.record_success(Duration::from_millis(1)),
            Transition::Up {
                from: HealthState::Down
            }
        );
        assert_eq!(health.state(), HealthState::Up);
        assert_eq!(health.record_failure("blip".into(), 2), Transition::None);
        assert_eq!(health.state(), HealthState::Up);
        let snapshot = health.snapshot();
        assert_eq!((snapshot.checks, snapshot.failures), (5, 4));
        assert_eq!(snapshot.consecutive_failures, 1);
        assert_eq!(snapshot.last_latency, Some(Duration::from_millis(1)));
        assert_eq!(snapshot.last_error.as_deref(), Some("blip"));
    }

    #[test]
    fn first_good_check_brings_an_unknown_host_up() {
        let health = HostHealth::new();
        assert_eq!(
            health.record_success(Duration::from_micros(300)),
            Transition::Up {
                from: HealthState::Unknown
            }
        );
        assert_eq!(
            health.record_success(Duration::from_micros(300)),
            Transition::None
        );
        assert_eq!(HealthState::Up.to_string(), "up");
        assert_eq!(HealthState::Down.to_string(), "down");
        assert_eq!(HealthState::Unknown.to_string(), "unknown");
    }
}
