//! The fence on the statement path: while raised, statements that write or
//! lock (and the COMMIT of a transaction bound to a shard, which holds
//! writes or locks) are refused; plain reads run. The control plane raises
//! it when this proxy can no longer prove that it holds its ZooKeeper
//! session, and lowers it once a new session has re-read the config.
//! Statements read one atomic; the time in the message is read only when
//! a statement is refused.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::error::ClientError;
use crate::router::{Plan, SessionAction, StatementKind};
use crate::sync::lock;

/// Whether writes are refused, and since when.
#[derive(Debug, Default)]
pub struct Fence {
    raised: AtomicBool,
    /// How many times it went up.
    raises: AtomicU64,
    /// When the session was last known live, and when the fence went up.
    times: Mutex<Option<(SystemTime, SystemTime)>>,
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

    /// The error for a statement `plan` when the fence is up and refuses
    /// it; `bound`: the session's transaction is bound to a shard.
    pub fn refusal(&self, plan: &Plan, bound: bool) -> Option<ClientError> {
        if !self.is_raised() || !refuses(plan, bound) {
            return None;
        }
        let lost_at = self
            .raised_times()
            .map_or(SystemTime::now(), |(lost, _)| lost);
        Some(ClientError::Fenced { lost_at })
    }
}

/// Whether a raised fence refuses `plan`.
fn refuses(plan: &Plan, bound: bool) -> bool {
    match plan {
        Plan::Shard(query) => query.kind != StatementKind::Read,
        Plan::Session(SessionAction::Commit) => bound,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
