//! Backend: raw connections to the fleet's MySQL servers and per-host pools.

pub mod columns;
pub mod conn;
pub mod health;
pub mod link;
pub mod pool;
pub mod replication;
pub mod statements;

use std::sync::atomic::Ordering;

use crate::stats::{HostFigures, LagFigures};
use crate::topology::Topology;
use health::HealthState;

pub use conn::{BackendConn, BackendError, ConnKey};
pub use link::{Dialer, TcpDialer};
pub use pool::{Backends, HostPool, PoolShare, PooledConn};

impl Backends {
    /// What `SHOW STATS` and `/metrics` show of every host with a pool,
    /// sorted by address, with its fleets and role in `topology`.
    pub fn figures(&self, topology: &Topology) -> Vec<HostFigures> {
        self.all()
            .iter()
            .map(|pool| {
                let health = pool.health();
                let (fleet, role) = fleet_and_role(topology, &pool.addr);
                HostFigures {
                    addr: pool.addr.clone(),
                    statements: pool.statements.snapshot(),
                    up: health.state == HealthState::Up,
                    check_latency: health.last_latency,
                    checks: health.checks,
                    check_failures: health.failures,
                    fleet,
                    role,
                    checkouts: pool.checkouts.load(Ordering::Relaxed),
                    pool_wait: pool.pool_wait.snapshot(),
                    checkout_timeouts: pool.checkout_timeouts.load(Ordering::Relaxed),
                    errors: pool.errors.load(Ordering::Relaxed),
                    in_use: pool.in_use(),
                    idle: pool.idle_count(),
                    lag: health.lag.map(|lag| LagFigures {
                        lag: lag.lag,
                        seconds_behind_master: lag.seconds_behind_master,
                        gtid_behind: lag.gtid_behind,
                        sql_running: lag.sql_running,
                    }),
                }
            })
            .collect()
    }
}

/// The fleets `addr` serves (comma-separated, in config order) and its role
/// in them: `master`, `replica`, `master,replica`, or `retired` when it
/// serves none.
fn fleet_and_role(topology: &Topology, addr: &str) -> (String, &'static str) {
    let (mut fleets, mut master, mut replica) = (Vec::new(), false, false);
    for fleet in &topology.fleets {
        for range in &fleet.ranges {
            let is = |index: usize| topology.hosts.get(index).is_some_and(|h| h.addr == addr);
            let as_master = is(range.master);
            let as_replica = range.replica.is_some_and(is);
            if (as_master || as_replica) && !fleets.contains(&fleet.name.as_str()) {
                fleets.push(fleet.name.as_str());
            }
            master |= as_master;
            replica |= as_replica;
        }
    }
    let role = match (master, replica) {
        (true, true) => "master,replica",
        (true, false) => "master",
        (false, true) => "replica",
        (false, false) => "retired",
    };
    (fleets.join(","), role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{load, SPEC_YAML};
    use std::time::Duration;

    #[test]
    fn figures_copy_each_pool_and_its_host_state() {
        let topology = load(SPEC_YAML);
        let backends = Backends::new(pool::BackendSettings::from_config(&topology.config.backend));
        backends.add_hosts(&[
            "127.0.0.1:3308",
            "127.0.0.1:3307",
            "127.0.0.1:3309",
            "10.0.0.9:3306",
        ]);
        let pool = backends.pool("127.0.0.1:3307");
        pool.statements.record(Duration::from_millis(2), true);
        pool.checkouts.fetch_add(3, Ordering::Relaxed);
        pool.host_health.record_success(Duration::from_millis(1));
        let figures = backends.figures(&topology);
        let addrs: Vec<&str> = figures.iter().map(|f| f.addr.as_str()).collect();
        assert_eq!(
            addrs,
            [
                "10.0.0.9:3306",
                "127.0.0.1:3307",
                "127.0.0.1:3308",
                "127.0.0.1:3309"
            ]
        );
        let labels: Vec<(&str, &str)> =
            figures.iter().map(|f| (f.fleet.as_str(), f.role)).collect();
        assert_eq!(
            labels,
            [
                ("", "retired"),
                ("main", "master"),
                ("main", "master"),
                ("main", "replica")
            ]
        );
        let figures = &figures[1..];
        let first = &figures[0];
        assert_eq!(
            (first.statements.count(), first.statements.errors()),
            (1, 1)
        );
        assert!(first.up);
        assert_eq!((first.fleet.as_str(), first.role), ("main", "master"));
        assert_eq!(first.check_latency, Some(Duration::from_millis(1)));
        assert_eq!((first.checks, first.check_failures), (1, 0));
        assert_eq!((first.checkouts, first.errors), (3, 0));
        assert_eq!((first.in_use, first.idle), (0, 0));
        let second = &figures[1];
        assert!(!second.up);
        assert_eq!(second.check_latency, None);
        assert_eq!(second.statements.count(), 0);
    }
}
