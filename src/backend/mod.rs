//! Backend: raw connections to the fleet's MySQL servers and per-host pools.

pub mod columns;
pub mod conn;
pub mod health;
pub mod pool;
pub mod statements;

use std::sync::atomic::Ordering;

use crate::stats::HostFigures;
use health::HealthState;

pub use conn::{BackendConn, BackendError, ConnKey};
pub use pool::{Backends, HostPool, PoolShare, PooledConn};

impl Backends {
    /// What `SHOW STATS` and `/metrics` show of every host with a pool,
    /// sorted by address.
    pub fn figures(&self) -> Vec<HostFigures> {
        self.all()
            .iter()
            .map(|pool| {
                let health = pool.health();
                HostFigures {
                    addr: pool.addr.clone(),
                    statements: pool.statements.snapshot(),
                    up: health.state == HealthState::Up,
                    check_latency: health.last_latency,
                    checks: health.checks,
                    check_failures: health.failures,
                    checkouts: pool.checkouts.load(Ordering::Relaxed),
                    errors: pool.errors.load(Ordering::Relaxed),
                    in_use: pool.in_use(),
                    idle: pool.idle_count(),
                }
            })
            .collect()
    }
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
        backends.add_hosts(&["127.0.0.1:3308", "127.0.0.1:3307"]);
        let pool = backends.pool("127.0.0.1:3307");
        pool.statements.record(Duration::from_millis(2), true);
        pool.checkouts.fetch_add(3, Ordering::Relaxed);
        pool.host_health.record_success(Duration::from_millis(1));
        let figures = backends.figures();
        let addrs: Vec<&str> = figures.iter().map(|f| f.addr.as_str()).collect();
        assert_eq!(addrs, ["127.0.0.1:3307", "127.0.0.1:3308"]);
        let first = &figures[0];
        assert_eq!(
            (first.statements.count(), first.statements.errors()),
            (1, 1)
        );
        assert!(first.up);
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
