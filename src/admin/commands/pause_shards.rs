//! `PAUSE SHARDS a-b [IN fleet]` and `RESUME SHARDS a-b [IN fleet]`: the
//! cutover pause. PAUSE answers once the statements already running on
//! those shards have finished; RESUME releases the waiting ones.

use std::time::Duration;

use crate::admin::answer::millis;
use crate::admin::parse::ShardRange;
use crate::admin::{AdminError, Answer};
use crate::control;
use crate::engine::Engine;

/// Pauses the range; a row with what was drained and how long it took.
pub async fn pause(engine: &Engine, range: &ShardRange) -> Result<Answer, AdminError> {
    let topology = engine.topology.load();
    let drain_timeout = Duration::from_millis(topology.config.pause.drain_timeout_ms);
    let report = control::pause::pause(
        &engine.pauses,
        &topology,
        range.fleet.as_deref(),
        range.first,
        range.last,
        drain_timeout,
    )
    .await?;
    let mut answer = Answer::new(&["fleets", "first", "last", "drained", "waited_ms"]);
    answer.push(vec![
        report.fleets.join(", ").into(),
        report.first.into(),
        report.last.into(),
        report.drained.into(),
        millis(report.waited).into(),
    ]);
    Ok(answer)
}

/// Resumes the range; a row with the statements released and how long the
/// range was paused.
pub fn resume(engine: &Engine, range: &ShardRange) -> Result<Answer, AdminError> {
    let report = control::pause::resume(
        &engine.pauses,
        range.fleet.as_deref(),
        range.first,
        range.last,
    )?;
    let mut answer = Answer::new(&["fleets", "first", "last", "released", "paused_ms"]);
    answer.push(vec![
        report.fleets.join(", ").into(),
        report.first.into(),
        report.last.into(),
        report.released.into(),
        millis(report.paused_for).into(),
    ]);
    Ok(answer)
}
