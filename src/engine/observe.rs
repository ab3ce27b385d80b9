//! What a statement leaves in the statistics once it ended: its digest's
//! counts, its shards' counts, and a line of the slow-statement log.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::warn;

use super::session_state::SessionState;
use super::Engine;
use crate::router::{statement_digest, Plan, Target};
use crate::stats::digest::{Observation, RouteKind};
use crate::topology::Topology;

/// Longest statement read again for its digest when routing did not get as
/// far as reading it (one refused by size is not read at all).
const MAX_REREAD_BYTES: usize = 64 * 1024;

/// What routing decided about a statement, kept for its observation.
#[derive(Debug)]
pub(super) struct Routed {
    digest: Option<u64>,
    route: RouteKind,
    targets: Targets,
}

#[derive(Debug)]
enum Targets {
    None,
    One(Target),
    Many(Vec<Target>),
}

impl Default for Routed {
    fn default() -> Self {
        Self {
            digest: None,
            route: RouteKind::Refused,
            targets: Targets::None,
        }
    }
}

impl Routed {
    /// What `plan` (of a statement whose digest is `digest`) will do.
    pub(super) fn of(plan: &Plan, digest: Option<u64>, topology: &Topology) -> Self {
        let (route, targets) = match plan {
            Plan::Shard(query) => (RouteKind::OneShard, Targets::One(query.target)),
            Plan::MultiShard(query) => {
                let targets: Vec<Target> = query.parts.iter().map(|part| part.target).collect();
                let every_shard = targets.first().is_some_and(|first| {
                    topology
                        .fleets
                        .get(first.fleet)
                        .is_some_and(|fleet| targets.len() as u64 == u64::from(fleet.shard_count))
                });
                let route = if every_shard {
                    RouteKind::Scatter
                } else {
                    RouteKind::InSplit
                };
                (route, Targets::Many(targets))
            }
            Plan::AnyHost { .. } => (RouteKind::AnyHost, Targets::None),
            Plan::Session(_) | Plan::Diagnostics { .. } => (RouteKind::Session, Targets::None),
            Plan::Reject(_) => (RouteKind::Refused, Targets::None),
        };
        Self {
            digest,
            route,
            targets,
        }
    }

    /// The statement was refused after routing (the fence).
    pub(super) fn refused(&mut self) {
        self.route = RouteKind::Refused;
        self.targets = Targets::None;
    }

    fn targets(&self) -> &[Target] {
        match &self.targets {
            Targets::None => &[],
            Targets::One(target) => std::slice::from_ref(target),
            Targets::Many(targets) => targets,
        }
    }
}

impl Engine {
    /// Counts a statement that ended (`sql`, routed as `routed`, after
    /// `elapsed`, answered with an error or not) under its digest and its
    /// shards, and logs it when slower than `stats.slow_statement_ms`.
    pub(super) fn observe(
        &self,
        state: &SessionState,
        sql: &[u8],
        routed: &Routed,
        elapsed: Duration,
        error: bool,
    ) {
        let topology = self.topology.load();
        let config = &topology.config.stats;
        let reread = || {
            if sql.len() > MAX_REREAD_BYTES {
                statement_digest(b"", &state.route)
            } else {
                statement_digest(sql, &state.route)
            }
        };
        let digest = routed.digest.unwrap_or_else(|| reread().0);
        let targets = routed.targets();
        let seen = Observation {
            digest,
            elapsed,
            error,
            rows_sent: state.statement_rows_sent,
            rows_affected: u64::try_from(state.route.row_count).unwrap_or(0),
            shards: targets.len() as u32,
            route: routed.route,
        };
        let max = usize::try_from(config.max_digests).unwrap_or(usize::MAX);
        self.stats.digests.record(&seen, max, || reread().1);
        self.stats.record_route(seen.route, elapsed, error);
        for target in targets {
            if let Some(fleet) = topology.fleets.get(target.fleet) {
                self.stats.shards.record(
                    (target.fleet, &fleet.name, fleet.shard_count),
                    target.shard,
                    elapsed,
                    error,
                );
            }
        }
        let slow_ms = config.slow_statement_ms;
        if slow_ms > 0 && elapsed >= Duration::from_millis(slow_ms) {
            let second = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs());
            if let Some(suppressed) = self
                .stats
                .slow_log
                .permit(second, config.slow_log_per_second)
            {
                let first = targets.first();
                let shard = first
                    .and_then(|t| {
                        let fleet = topology.fleets.get(t.fleet)?;
                        Some(format!("{}/{}", fleet.name, t.shard))
                    })
                    .unwrap_or_default();
                let host = first
                    .and_then(|t| topology.hosts.get(t.host))
                    .map(|h| h.addr.as_str())
                    .unwrap_or_default();
                warn!(
                    target: "shardgate::slow",
                    digest = %format_args!("{digest:016x}"),
                    text = %reread().1,
                    user = %state.entry.user(),
                    client = %state.entry.host,
                    connection_id = state.connection_id,
                    route = seen.route.name(),
                    shard = %shard,
                    shards = seen.shards,
                    host = %host,
                    time_ms = elapsed.as_secs_f64() * 1000.0,
                    rows_sent = seen.rows_sent,
                    rows_affected = seen.rows_affected,
                    error,
                    suppressed_since_last = suppressed,
                    "slow statement"
                );
            }
        }
    }
}
