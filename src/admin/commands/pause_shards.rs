//! `PAUSE SHARDS a-b [IN fleet]` and `RESUME SHARDS a-b [IN fleet]`: the
//! cutover pause. PAUSE answers once the statements already running on
//! those shards have finished; RESUME releases the waiting ones. On a
//! ZooKeeper-sourced proxy both are fleet-wide: PAUSE answers once every
//! registered proxy has paused and drained, RESUME resumes them all,
//! except the shards a running cutover holds: those only with `FORCE`.

use std::time::Duration;

use crate::admin::answer::millis;
use crate::admin::parse::ShardRange;
use crate::admin::{AdminError, Answer};
use crate::control::pause::Requester;
use crate::control::{self, Control};

/// Pauses the range; a row with what was drained (or which proxies
/// acked) and how long it took.
pub async fn pause(
    control: &Control,
    user: &str,
    range: &ShardRange,
) -> Result<Answer, AdminError> {
    let engine = &control.engine;
    let topology = engine.topology.load();
    let drain_timeout = Duration::from_millis(topology.config.pause.drain_timeout_ms);
    if let Some(zookeeper) = &control.zookeeper {
        let requester = Requester {
            proxy: &control.process.id,
            user,
            cutover: None,
        };
        let report = control::pause::pause_fleet(
            zookeeper,
            &topology,
            requester,
            range.fleet.as_deref(),
            range.first,
            range.last,
            drain_timeout,
        )
        .await?;
        let mut answer = Answer::new(&["pause", "first", "last", "proxies", "waited_ms"]);
        answer.push(vec![
            report.id.into(),
            range.first.into(),
            range.last.into(),
            report.proxies.join(", ").into(),
            millis(report.waited).into(),
        ]);
        return Ok(answer);
    }
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
/// range was paused (fleet-wide: a row per pause record deleted; `force`
/// also deletes those a cutover holds).
pub async fn resume(
    control: &Control,
    range: &ShardRange,
    force: bool,
) -> Result<Answer, AdminError> {
    if let Some(zookeeper) = &control.zookeeper {
        let resumed = control::pause::resume_fleet(
            zookeeper,
            range.fleet.as_deref(),
            range.first,
            range.last,
            force,
        )
        .await?;
        let mut answer =
            Answer::new(&["pause", "fleet", "first", "last", "requested_by", "cutover"]);
        for record in resumed {
            answer.push(vec![
                record.id().into(),
                record.fleet.clone().into(),
                record.first.into(),
                record.last.into(),
                record.requested_by.clone().into(),
                record.cutover.clone().into(),
            ]);
        }
        return Ok(answer);
    }
    let report = control::pause::resume(
        &control.engine.pauses,
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
