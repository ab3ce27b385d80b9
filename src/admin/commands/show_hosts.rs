//! `SHOW HOSTS`: every backend host with its role in the topology in
//! force, what the health checker last found, pool use and counters.
//! Hosts that left the topology (a reload or promotion removed them) show
//! as `retired` while a statement still uses their retired pool.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::admin::answer::{format_time, millis};
use crate::admin::{Answer, Cell};
use crate::backend::HostPool;
use crate::engine::Engine;
use crate::topology::Topology;

const COLUMNS: &[&str] = &[
    "host",
    "role",
    "health",
    "latency_ms",
    "last_check",
    "checks",
    "check_failures",
    "pool_in_use",
    "pool_idle",
    "queries",
    "errors",
    "last_error",
    "replication_lag_ms",
    "seconds_behind_master",
    "gtid_behind",
    "checkout_timeouts",
];

/// The host list: topology order, then retired hosts by address.
pub fn answer(engine: &Engine) -> Answer {
    let topology = engine.topology.load();
    let mut answer = Answer::new(COLUMNS);
    let roles = roles(&topology);
    for host in &topology.hosts {
        let role = roles.get(host.addr.as_str()).map(|r| r.join(", "));
        answer.push(row(
            &engine.backends.pool(&host.addr),
            role.unwrap_or_default(),
        ));
    }
    let retired = engine
        .backends
        .retired()
        .into_iter()
        .filter(|pool| !roles.contains_key(pool.addr.as_str()));
    for pool in retired {
        answer.push(row(&pool, "retired".to_owned()));
    }
    answer
}

/// What each host is: `master main 0-2047`, `replica of 127.0.0.1:3307
/// (main 0-2047)`, one entry per range it serves.
fn roles(topology: &Topology) -> BTreeMap<&str, Vec<String>> {
    let mut roles: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for fleet in &topology.fleets {
        for range in &fleet.ranges {
            let Some(master) = topology.host(range.master) else {
                continue;
            };
            let span = format!("{} {}-{}", fleet.name, range.first, range.last);
            roles
                .entry(master.addr.as_str())
                .or_default()
                .push(format!("master {span}"));
            if let Some(replica) = range.replica.and_then(|r| topology.host(r)) {
                roles
                    .entry(replica.addr.as_str())
                    .or_default()
                    .push(format!("replica of {} ({span})", master.addr));
            }
        }
    }
    roles
}

fn row(pool: &HostPool, role: String) -> Vec<Cell> {
    let health = pool.health();
    let lag = health.lag.as_ref();
    vec![
        pool.addr.as_str().into(),
        role.into(),
        health.state.to_string().into(),
        health.last_latency.map(millis).into(),
        health.last_check.map(format_time).into(),
        health.checks.into(),
        health.failures.into(),
        pool.in_use().into(),
        pool.idle_count().into(),
        pool.checkouts.load(Ordering::Relaxed).into(),
        pool.errors.load(Ordering::Relaxed).into(),
        health.last_error.into(),
        lag.and_then(|l| l.lag)
            .map(|l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX))
            .into(),
        lag.and_then(|l| l.seconds_behind_master).into(),
        lag.and_then(|l| l.gtid_behind).into(),
        pool.checkout_timeouts.load(Ordering::Relaxed).into(),
    ]
}
