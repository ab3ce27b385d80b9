//! The fence on the statement path: while raised, statements that write or
//! lock (and the COMMIT of a transaction bound to a shard, which holds
//! writes or locks) are refused; plain reads run. The control plane raises
//! it when this proxy can no longer prove that it holds its ZooKeeper
//! session, and lowers it once a new session has re-read the config.
//! Statements read one atomic; the time in the message is read only when
//! a statement is refused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::error::ClientError;
use crate::router::{Plan, SessionAction, StatementKind};
use crate::sync::lock;

/// Whether writes are refused, and since when.
#[derive(Debug, Default)]
pub struct Fence {
    raised: AtomicBool,
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
        self.raised.store(true, Ordering::Release);
        true
    }

    /// Lowers the fence; false when it was down.
    pub fn lower(&self) -> bool {
        let _times = lock(&self.times);
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
