//! The cutover's steps in order, and what a failure at each one leaves.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tracing::{info, warn};

use super::coordinate::{Base, Coordinator, Held};
use super::report::Steps;
use super::{list, CutoverError, Range};
use crate::control::reload::ReloadTrigger;
use crate::control::replica::{gtid, set_read_only, wait_for, Access, STOP_REPLICATION};

/// One cutover, checked and ready to run.
pub struct Plan {
    /// What it is, for the log (`MOVE SHARDS 1024-2047 IN main TO ...`).
    pub what: String,
    /// The shards to pause.
    pub ranges: Vec<Range>,
    /// The old master and a connection to it, when it answers (then the
    /// shards are paused and the new masters catch up with it).
    pub source: (String, Option<Conn>),
    /// The new masters and a connection to each.
    pub targets: Vec<(String, Conn)>,
    /// The new document.
    pub text: String,
    /// How a file-sourced proxy records the swap.
    pub trigger: ReloadTrigger,
    /// What changed, for `SHOW CONFIG`.
    pub changes: Vec<String>,
    /// Stop replication on the new masters before the write.
    pub stop_replication: bool,
    /// Make the old master `read_only` once the map is written.
    pub fence_source: bool,
}

/// Runs `plan` over `base`: pause (when the old master answers), GTID
/// position, catch-up, (stop replication), write, wait for every proxy,
/// (fence the old master), resume. Notes for the operator are added to
/// `notes`.
pub(super) async fn run_plan(
    coordinator: &Coordinator<'_>,
    base: &Base,
    access: &Access,
    mut plan: Plan,
    steps: &mut Steps<'_>,
    notes: &mut Vec<String>,
) -> Result<(), CutoverError> {
    let (source, source_conn) = (plan.source.0.clone(), plan.source.1.take());
    let held = match &source_conn {
        Some(_) => Some(
            steps
                .run(
                    "pause",
                    coordinator.pause(&base.topology, &plan.ranges, &plan.what),
                )
                .await?,
        ),
        None => {
            notes.push(format!(
                "{source} does not answer: nothing was paused and transactions it had not shipped are not on the new master"
            ));
            None
        }
    };
    let before = before_write(
        coordinator,
        base,
        &mut plan,
        source_conn,
        held.as_ref(),
        steps,
    )
    .await;
    let written = match before {
        Ok(written) => written,
        Err(e) => {
            let keep = matches!(e, CutoverError::WriteUnknown { .. });
            if let (Some(held), false) = (&held, keep) {
                if let Err(undo) = steps.run("resume", undo(coordinator, held)).await {
                    warn!(what = %plan.what, "could not resume after a failed cutover: {undo}");
                    notes.push(format!("resuming failed: {undo}"));
                }
            }
            disconnect(plan.targets).await;
            return Err(e);
        }
    };
    disconnect(std::mem::take(&mut plan.targets)).await;
    let timeout = Duration::from_millis(base.topology.config.pause.timeout_ms);
    let adopted = steps
        .run("proxies", async {
            coordinator
                .wait_adopted(&written, timeout)
                .await
                .map(|detail| ((), detail))
        })
        .await;
    match (adopted, &held) {
        (Err(lagging), None) => notes.push(format!(
            "proxies {lagging} did not run the new map yet (nothing was paused: they send statements for those shards to {source} until they do)"
        )),
        (Err(lagging), Some(_)) => return Err(CutoverError::NotAdopted {
            version: written.describe.clone(),
            lagging: lagging.proxies,
            waited_ms: lagging.waited_ms,
            ranges: list(&plan.ranges, Range::to_string, ", "),
            resume: list(&plan.ranges, Range::command, "; RESUME SHARDS "),
        }),
        (Ok(()), _) => {}
    }
    if plan.fence_source && held.is_some() {
        let fenced = steps
            .run("read_only", async {
                set_read_only(access, &source)
                    .await
                    .map(|()| ((), format!("{source}: read_only = 1")))
            })
            .await;
        notes.push(match fenced {
            Ok(()) => format!(
                "the old master {source} was set read_only = 1: a writer still pointed at it fails (accounts with READ_ONLY ADMIN still write)"
            ),
            Err(e) => format!(
                "the old master {source} could NOT be set read_only ({e}): fence it yourself (SET GLOBAL read_only = 1, or stop it)"
            ),
        });
    }
    if let Some(held) = held {
        steps
            .run("resume", undo(coordinator, &held))
            .await
            .map_err(|reason| CutoverError::Resume {
                reason,
                resume: list(&plan.ranges, Range::command, "; RESUME SHARDS "),
            })?;
    }
    info!(what = %plan.what, steps = %steps.summary(), "cutover done");
    Ok(())
}

async fn undo(coordinator: &Coordinator<'_>, held: &Held) -> Result<((), String), String> {
    coordinator.resume(held).await.map(|detail| ((), detail))
}

/// The steps up to the write: what a failure here leaves unchanged.
async fn before_write(
    coordinator: &Coordinator<'_>,
    base: &Base,
    plan: &mut Plan,
    source_conn: Option<Conn>,
    held: Option<&Held>,
    steps: &mut Steps<'_>,
) -> Result<super::coordinate::Written, CutoverError> {
    let source = plan.source.0.clone();
    if let Some(mut conn) = source_conn {
        let position = steps
            .run("gtid", async {
                gtid(&mut conn, "@@gtid_binlog_pos")
                    .await
                    .map(|pos| (pos.clone(), format!("{source} @@gtid_binlog_pos = {pos}")))
            })
            .await;
        let _ = conn.disconnect().await;
        let position = position.map_err(|reason| CutoverError::Unreachable {
            role: "source",
            addr: source.clone(),
            reason,
        })?;
        for (target, conn) in &mut plan.targets {
            steps
                .run("catch-up", async {
                    wait_for(conn, target, &source, &position)
                        .await
                        .map(|()| ((), format!("{target} has applied {position}")))
                })
                .await?;
        }
    }
    let mut replication_stopped = false;
    if plan.stop_replication {
        for (target, conn) in &mut plan.targets {
            for sql in STOP_REPLICATION {
                let stopped = replication_stopped;
                steps
                    .run("stop replication", async {
                        conn.query_drop(sql)
                            .await
                            .map(|()| ((), format!("{target}: {sql}")))
                            .map_err(|e| CutoverError::StopReplication {
                                host: target.clone(),
                                what: sql.to_owned(),
                                reason: e.to_string(),
                                stopped,
                            })
                    })
                    .await?;
                replication_stopped = true;
            }
        }
    }
    let changes = plan.changes.clone();
    steps
        .run("write", async {
            coordinator
                .write(base, &plan.text, plan.trigger, changes, held)
                .await
                .map(|written| {
                    let detail = written.describe.clone();
                    (written, detail)
                })
        })
        .await
        .map_err(|failure| match failure.outcome_unknown {
            true => CutoverError::WriteUnknown {
                reason: failure.reason,
                ranges: list(&plan.ranges, Range::to_string, ", "),
                resume: list(&plan.ranges, Range::command, "; RESUME SHARDS "),
            },
            false => CutoverError::Write {
                reason: failure.reason,
                replication_stopped,
            },
        })
}

async fn disconnect(targets: Vec<(String, Conn)>) {
    for (_, conn) in targets {
        let _ = conn.disconnect().await;
    }
}

/// Runs `plan` as [`run_plan`] and returns the steps; for callers outside
/// this module (the promotion through ZooKeeper).
pub async fn run(
    coordinator: &Coordinator<'_>,
    base: &Base,
    plan: Plan,
    notes: &mut Vec<String>,
) -> Result<Vec<super::Step>, (CutoverError, Vec<super::Step>)> {
    let access = Access::of(&base.topology);
    let mut steps = Steps::new(None);
    match run_plan(coordinator, base, &access, plan, &mut steps, notes).await {
        Ok(()) => Ok(steps.done),
        Err(e) => Err((e, steps.done)),
    }
}
