//! What an operator alerts on beyond statements and hosts: client
//! connections refused and logins failed, promotions, sessions handed off;
//! counted here in atomics by whoever sees them happen, and the proxy's
//! state (config, fence, pauses) copied at each scrape into
//! [`ProxyFigures`] by the control plane.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// What set off a promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromotionTrigger {
    /// `health.auto_failover`.
    Auto,
    /// `PROMOTE REPLICA` on the admin port.
    Admin,
}

impl PromotionTrigger {
    /// The `trigger` label.
    pub fn name(self) -> &'static str {
        match self {
            PromotionTrigger::Auto => "auto",
            PromotionTrigger::Admin => "admin",
        }
    }
}

/// Counters of events outside the statement path.
#[derive(Debug, Default)]
pub struct OperatorCounters {
    refused_connections: AtomicU64,
    logins_failed: AtomicU64,
    promotions: [AtomicU64; 2],
    promotions_refused_lag: [AtomicU64; 2],
    handed_off: AtomicU64,
}

impl OperatorCounters {
    /// A client connection answered 1040 (over the client cap).
    pub fn connection_refused(&self) {
        self.refused_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A client login refused.
    pub fn login_failed(&self) {
        self.logins_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A replica promoted.
    pub fn promoted(&self, trigger: PromotionTrigger) {
        self.promotions[trigger as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A promotion refused because the replica lagged.
    pub fn promotion_refused_for_lag(&self, trigger: PromotionTrigger) {
        self.promotions_refused_lag[trigger as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A client session handed off to another process (`serve --takeover`).
    pub fn handed_off(&self) {
        self.handed_off.fetch_add(1, Ordering::Relaxed);
    }

    /// Client connections answered 1040.
    pub fn refused_connections(&self) -> u64 {
        self.refused_connections.load(Ordering::Relaxed)
    }

    /// Client logins refused.
    pub fn logins_failed(&self) -> u64 {
        self.logins_failed.load(Ordering::Relaxed)
    }

    /// Promotions done, by trigger.
    pub fn promotions(&self, trigger: PromotionTrigger) -> u64 {
        self.promotions[trigger as usize].load(Ordering::Relaxed)
    }

    /// Promotions refused for lag, by trigger.
    pub fn promotions_refused_for_lag(&self, trigger: PromotionTrigger) -> u64 {
        self.promotions_refused_lag[trigger as usize].load(Ordering::Relaxed)
    }

    /// Client sessions handed off.
    pub fn handed_off_sessions(&self) -> u64 {
        self.handed_off.load(Ordering::Relaxed)
    }
}

/// The proxy's state at a scrape, copied by the control plane.
#[derive(Debug, Clone, Default)]
pub struct ProxyFigures {
    /// Client sessions logged in now.
    pub clients: usize,
    /// Reloads that put a new config in force.
    pub reloads_applied: u64,
    /// Reloads refused (the config in force stayed).
    pub reloads_refused: u64,
    /// MD5 of the config in force.
    pub config_version: String,
    /// When the config in force was loaded.
    pub config_loaded_at: Option<SystemTime>,
    /// Since when writes are refused (the fence is up), if they are.
    pub fenced_since: Option<SystemTime>,
    /// Shards paused now, over every fleet.
    pub paused_shards: u64,
    /// Age of the oldest pause in force.
    pub oldest_pause: Option<Duration>,
    /// Sessions the graceful stop closed: (idle at once, after their work).
    pub drained: (u64, u64),
}

/// Seconds since the Unix epoch of `at` (0 for none).
pub fn unix_seconds(at: Option<SystemTime>) -> f64 {
    at.and_then(|at| at.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_count_per_trigger() {
        let counters = OperatorCounters::default();
        counters.promoted(PromotionTrigger::Auto);
        counters.promotion_refused_for_lag(PromotionTrigger::Admin);
        counters.promotion_refused_for_lag(PromotionTrigger::Admin);
        counters.connection_refused();
        counters.login_failed();
        counters.handed_off();
        assert_eq!(counters.promotions(PromotionTrigger::Auto), 1);
        assert_eq!(counters.promotions(PromotionTrigger::Admin), 0);
        assert_eq!(
            counters.promotions_refused_for_lag(PromotionTrigger::Admin),
            2
        );
        assert_eq!(
            (
                counters.refused_connections(),
                counters.logins_failed(),
                counters.handed_off_sessions()
            ),
            (1, 1, 1)
        );
        assert_eq!(unix_seconds(None), 0.0);
        assert_eq!(
            unix_seconds(Some(SystemTime::UNIX_EPOCH + Duration::from_millis(1500))),
            1.5
        );
    }
}
