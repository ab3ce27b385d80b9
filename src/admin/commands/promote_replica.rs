//! `PROMOTE REPLICA <master> [STOP REPLICATION]`: the master's shard
//! ranges point at its replica, in memory and in the config file.

use crate::admin::{AdminError, Answer};
use crate::control::failover::PromoteOptions;
use crate::control::Control;
use crate::stats::operator::PromotionTrigger;

const COLUMNS: &[&str] = &[
    "master",
    "replica",
    "ranges",
    "replication_stopped",
    "config_written",
    "notes",
];

/// One row from the promotion's report.
pub async fn answer(
    control: &Control,
    master: &str,
    stop_replication: bool,
) -> Result<Answer, AdminError> {
    let outcome = control
        .promote_replica(master, PromoteOptions { stop_replication })
        .await;
    control.count_promotion(PromotionTrigger::Admin, &outcome);
    let report = outcome?;
    let mut answer = Answer::new(COLUMNS);
    answer.push(vec![
        report.master.into(),
        report.replica.into(),
        report.ranges.join(", ").into(),
        if report.replication_stopped {
            "yes"
        } else {
            "no"
        }
        .into(),
        report
            .config_written
            .map(|path| path.display().to_string())
            .into(),
        report.notes.join("\n").into(),
    ]);
    Ok(answer)
}
