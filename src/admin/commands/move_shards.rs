//! `MOVE SHARDS a-b [IN fleet] TO host:port [DRY RUN]`: the shards get a
//! new master through the cutover sequence (fleet-wide on a
//! ZooKeeper-sourced proxy). The answer is a row per step, then a row per
//! thing left to clean up by hand.

use crate::admin::parse::ShardRange;
use crate::admin::{AdminError, Answer};
use crate::control::cutover::MoveRequest;
use crate::control::Control;

/// The steps (`step`, `ms`, `detail`), then the `cleanup` rows.
pub async fn answer(
    control: &Control,
    user: &str,
    range: &ShardRange,
    target: &str,
    dry_run: bool,
) -> Result<Answer, AdminError> {
    let request = MoveRequest {
        first: range.first,
        last: range.last,
        fleet: range.fleet.clone(),
        target: target.to_owned(),
        dry_run,
    };
    let report = control.move_shards(&request, user).await?;
    let mut answer = Answer::new(&["step", "ms", "detail"]);
    for step in report.steps {
        answer.push(vec![
            step.name.into(),
            u64::try_from(step.ms).unwrap_or(u64::MAX).into(),
            step.detail.into(),
        ]);
    }
    for cleanup in report.cleanup {
        answer.push(vec![
            if dry_run { "cleanup after" } else { "cleanup" }.into(),
            None::<u64>.into(),
            cleanup.into(),
        ]);
    }
    Ok(answer)
}
