//! The fence on the statement path: while raised, statements that write or
//! lock, write through a function (sequences, user locks, stored
//! functions), or would commit a transaction bound to a shard (which holds
//! writes or locks: COMMIT, BEGIN, `SET autocommit = 1`, a schema change)
//! are refused; plain reads run. The control plane raises
//! it when this proxy can no longer prove that it holds its ZooKeeper
//! session, and lowers it once a new session has re-read the config.
//! Statements read one atomic; a write or locking read also compares the
//! clock with the [`Deadline`] the control plane keeps, so a proxy whose
//! process stalled past its deadline refuses writes before its watchdog
//! has run. The time in the message is read only when a statement is
//! refused.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use crate::error::ClientError;
use crate::router::{Plan, StatementKind};
use crate::sync::lock;

/// Whether writes are refused, and since when.
#[derive(Debug, Default)]
pub struct Fence {
    raised: AtomicBool,
    /// How many times it went up.
    raises: AtomicU64,
    /// When the session was last known live, and when the fence went up.
    times: Mutex<Option<(SystemTime, SystemTime)>>,
    /// Past this moment writes are refused even before the fence is raised.
    deadline: Deadline,
}

/// The moment past which a ZooKeeper-sourced proxy may no longer hold its
/// session (its last answered heartbeat's send time plus the session
/// timeout, less a margin), shared between the control plane's heartbeat
/// (which moves it on) and the statement path (which compares the clock
/// with it). None is set for a file-sourced proxy.
#[derive(Debug, Clone, Default)]
pub struct Deadline {
    /// Nanoseconds since [`epoch`] plus one; 0 when none is set.
    at: Arc<AtomicU64>,
    /// When the session was last known live, in the same unit.
    live: Arc<AtomicU64>,
}

/// The process's reference instant for [`Deadline`]: an hour before its
/// first use when the clock allows (moments before it count as it).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        let now = Instant::now();
        [3600, 60, 1]
            .iter()
            .find_map(|secs| now.checked_sub(Duration::from_secs(*secs)))
            .unwrap_or(now)
    })
}

fn ticks(instant: Instant) -> u64 {
    u64::try_from(instant.saturating_duration_since(epoch()).as_nanos())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

fn instant_of(ticks: u64) -> Instant {
    epoch() + Duration::from_nanos(ticks.saturating_sub(1))
}

impl Deadline {
    /// Moves the deadline to `at` (never back), the session having been
    /// known live at `live`.
    pub fn extend(&self, at: Instant, live: Instant) {
        self.live.fetch_max(ticks(live), Ordering::AcqRel);
        self.at.fetch_max(ticks(at), Ordering::AcqRel);
    }

    /// Whether a deadline is set and the clock is past it.
    pub fn passed(&self) -> bool {
        let at = self.at.load(Ordering::Acquire);
        at != 0 && ticks(Instant::now()) >= at
    }

    /// When the session was last known live, on the wall clock.
    fn live_at(&self) -> SystemTime {
        let live = instant_of(self.live.load(Ordering::Acquire));
        SystemTime::now()
            .checked_sub(live.elapsed())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

impl Fence {
    /// Whether the fence is up (one atomic load).
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// Raises the fence: the session was last known live at `lost_at`.
    /// False when it was already up.
    pub fn raise(&self, lost_at: SystemTime) -> bool {
        let mut times = lock(&self.times);
        if self.raised.load(Ordering::Acquire) {
            return false;
        }
        *times = Some((lost_at, SystemTime::now()));
        self.raises.fetch_add(1, Ordering::AcqRel);
        self.raised.store(true, Ordering::Release);
        true
    }

    /// How many times the fence went up: a read that starts at `n` and
    /// finds `n` still after it saw no new raise.
    pub fn raises(&self) -> u64 {
        self.raises.load(Ordering::Acquire)
    }

    /// Lowers the fence if it went up `raises` times (not once more since);
    /// false when it was down or went up again.
    pub fn lower(&self, raises: u64) -> bool {
        let _times = lock(&self.times);
        if self.raises.load(Ordering::Acquire) != raises {
            return false;
        }
        self.raised.swap(false, Ordering::AcqRel)
    }

    /// While raised: when the session was last known live, and when the
    /// fence went up.
    pub fn raised_times(&self) -> Option<(SystemTime, SystemTime)> {
        let times = lock(&self.times);
        self.is_raised().then(|| *times).flatten()
    }

    /// The deadline the control plane keeps for this fence.
    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// The error for a statement `plan` when the fence is up, or its
    /// deadline has passed, and it refuses `plan`; `bound`: the session's
    /// transaction is bound to a shard.
    pub fn refusal(&self, plan: &Plan, bound: bool) -> Option<ClientError> {
        if !refuses(plan, bound) {
            return None;
        }
        self.error()
    }

    /// The error for committing a transaction bound to a shard (an
    /// explicit COMMIT, or the commit the server makes implicitly before
    /// BEGIN, `SET autocommit = 1` or a schema change) when the fence is
    /// up or its deadline has passed. Every commit of a bound transaction
    /// checks it right before it is sent.
    pub fn commit_refusal(&self) -> Option<ClientError> {
        self.error()
    }

    /// The refusal while the fence is up or its deadline has passed.
    fn error(&self) -> Option<ClientError> {
        if self.is_raised() {
            let lost_at = self
                .raised_times()
                .map_or(SystemTime::now(), |(lost, _)| lost);
            return Some(ClientError::Fenced { lost_at });
        }
        self.deadline.passed().then(|| ClientError::Fenced {
            lost_at: self.deadline.live_at(),
        })
    }
}

/// Whether a raised fence refuses `plan`: a write, locking read or schema
/// change; a statement that writes through a function (a sequence, a user
/// lock, a stored function), whatever its form; and, with a transaction
/// bound to a shard (which holds writes or locks), every statement that
/// would commit it (COMMIT, BEGIN, `SET autocommit = 1`, a schema change).
/// A ROLLBACK, or the client's disconnect, ends such a transaction without
/// committing it.
fn refuses(plan: &Plan, bound: bool) -> bool {
    if plan.writes_through_function() || (bound && plan.commits_transaction()) {
        return true;
    }
    matches!(plan, Plan::Shard(query) if query.kind != StatementKind::Read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::SessionAction;

    #[test]
    fn a_passed_deadline_refuses_writes_before_the_fence_is_raised() {
        let fence = Fence::default();
        let commit = Plan::Session(SessionAction::Commit);
        assert!(fence.refusal(&commit, true).is_none(), "no deadline set");
        let now = Instant::now();
        fence.deadline().extend(now + Duration::from_secs(60), now);
        assert!(fence.refusal(&commit, true).is_none(), "deadline ahead");
        let stalled = Fence::default();
        let sent = now - Duration::from_secs(10);
        stalled
            .deadline()
            .extend(sent + Duration::from_millis(3600), sent);
        assert!(!stalled.is_raised());
        match stalled.refusal(&commit, true) {
            Some(ClientError::Fenced { lost_at }) => {
                let ago = SystemTime::now().duration_since(lost_at).unwrap();
                assert!(
                    ago >= Duration::from_secs(9) && ago < Duration::from_secs(11),
                    "{ago:?}"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(
            stalled.refusal(&commit, false).is_none(),
            "what a raised fence lets through, a passed deadline does too"
        );
        stalled.deadline().extend(sent, sent);
        assert!(stalled.deadline().passed(), "a deadline never moves back");
        stalled
            .deadline()
            .extend(Instant::now() + Duration::from_secs(60), Instant::now());
        assert!(
            stalled.refusal(&commit, true).is_none(),
            "moved on by a later answer"
        );
    }

    #[test]
    fn a_raise_after_a_read_started_keeps_the_fence_up() {
        let fence = Fence::default();
        assert!(!fence.is_raised() && fence.raised_times().is_none());
        let lost_at = SystemTime::now();
        assert!(fence.raise(lost_at));
        assert!(!fence.raise(SystemTime::now()), "already up");
        assert_eq!(fence.raised_times().map(|(lost, _)| lost), Some(lost_at));
        assert!(!fence.lower(0), "a read that started before the raise");
        assert!(fence.lower(fence.raises()));
        assert!(!fence.is_raised() && !fence.lower(1));
        assert!(
            fence
                .refusal(&Plan::Session(SessionAction::Commit), true)
                .is_none(),
            "nothing is refused while the fence is down"
        );
        fence.raise(lost_at);
        assert_eq!(
            fence.refusal(&Plan::Session(SessionAction::Commit), true),
            Some(ClientError::Fenced { lost_at })
        );
        assert!(fence
            .refusal(&Plan::Session(SessionAction::Commit), false)
            .is_none());
        assert_eq!(
            fence
                .refusal(&Plan::Session(SessionAction::Commit), true)
                .map(|e| e.code()),
            Some(1105)
        );
    }

    #[test]
    fn a_raised_fence_refuses_function_writes_and_every_commit_of_a_bound_transaction() {
        let fence = Fence::default();
        fence.raise(SystemTime::now());
        let any = |writes| Plan::AnyHost {
            sql: "SELECT GET_LOCK('a', 0)".into(),
            writes_through_function: writes,
        };
        assert!(fence.refusal(&any(true), false).is_some());
        assert!(fence.refusal(&any(false), false).is_none(), "a plain read");
        let commits = [
            Plan::Session(SessionAction::Commit),
            Plan::Session(SessionAction::Begin {
                sql: "START TRANSACTION READ ONLY".into(),
            }),
            Plan::Session(SessionAction::SetAutocommit(true)),
            Plan::Session(SessionAction::SetSession {
                variables: vec!["sql_mode".into()],
                sql: "SET sql_mode = ''".into(),
                autocommit: Some(true),
                writes_through_function: false,
                computed: false,
                evaluates: crate::router::SetEvaluation::default(),
            }),
        ];
        for plan in &commits {
            assert!(fence.refusal(plan, true).is_some(), "{plan:?}");
            assert!(
                fence.refusal(plan, false).is_none(),
                "nothing bound: {plan:?}"
            );
        }
        for plan in [
            Plan::Session(SessionAction::Rollback),
            Plan::Session(SessionAction::SetAutocommit(false)),
        ] {
            assert!(fence.refusal(&plan, true).is_none(), "{plan:?}");
        }
        assert!(fence.commit_refusal().is_some());
        assert!(fence.lower(fence.raises()));
        assert!(fence.commit_refusal().is_none());
    }
}
