//! The cutover's steps in order, and what a failure at each one leaves.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tracing::{info, warn};

use super::coordinate::{Base, Coordinator, Held};
use super::report::Steps;
use super::{list, CutoverError, Range};
use crate::control::reload::ReloadTrigger;
use crate::control::replica::{fence, gtid, set_read_only, wait_for, Access, STOP_REPLICATION};

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
    /// Stop replication on the new masters once the map is written.
    pub stop_replication: bool,
    /// Make the old master `read_only` right after the pause, before its
    /// GTID position is read (a promotion: the whole host is paused).
    pub fence_source: bool,
}

/// Runs `plan` over `base`: pause (when the old master answers), (fence
/// the old master: `read_only = 1`), GTID position, catch-up, write, (stop
/// replication on the new masters), wait for every proxy, resume. A
/// failure before the write resumes and makes the old master writable
/// again. Notes for the operator are added to `notes`.
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
        Some(_) => match steps
            .run(
                "pause",
                coordinator.pause(&base.topology, &plan.ranges, &plan.what),
            )
            .await
        {
            Ok(held) => Some(held),
            Err(e) => {
                disconnect(plan.targets).await;
                if let Some(conn) = source_conn {
                    let _ = conn.disconnect().await;
                }
                return Err(e);
            }
        },
        None => {
            notes.push(format!(
                "{source} does not answer: nothing was paused and transactions it had not shipped are not on the new master"
            ));
            None
        }
    };
    let mut fenced = false;
    let before = before_write(
        coordinator,
        base,
        &mut plan,
        source_conn,
        held.as_ref(),
        &mut fenced,
        steps,
    )
    .await;
    let written = match before {
        Ok(written) => written,
        Err(cause @ CutoverError::WriteUnknown { .. }) => {
            // The map may be in force: the pause and the fence stay.
            disconnect(plan.targets).await;
            return Err(cause);
        }
        Err(cause) => {
            let read_only = if fenced {
                steps
                    .run("read_only", async {
                        set_read_only(access, &source, false)
                            .await
                            .map(|()| ((), format!("{source}: read_only = 0 again")))
                    })
                    .await
                    .err()
                    .map(|reason| (source.clone(), reason))
            } else {
                None
            };
            let not_resumed = match &held {
                Some(held) => steps.run("resume", undo(coordinator, held)).await.err().map(|reason| {
                    warn!(what = %plan.what, "could not resume after a failed cutover: {reason}");
                    (
                        list(&plan.ranges, Range::to_string, ", "),
                        reason,
                        list(&plan.ranges, Range::command, "; RESUME SHARDS "),
                    )
                }),
                None => None,
            };
            disconnect(plan.targets).await;
            return Err(match (not_resumed, read_only) {
                (None, None) => cause,
                (not_resumed, read_only) => CutoverError::Unfinished {
                    cause: Box::new(cause),
                    not_resumed,
                    read_only,
                },
            });
        }
    };
    if fenced {
        notes.push(format!(
            "the old master {source} was set read_only = 1 before its GTID position was read: a writer still pointed at it fails (accounts with READ_ONLY ADMIN still write)"
        ));
    }
    let targets = std::mem::take(&mut plan.targets);
    let stop_failed = if plan.stop_replication {
        stop_replication(targets, steps).await.err()
    } else {
        disconnect(targets).await;
        None
    };
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
    if let Some(held) = held {
        steps
            .run("resume", undo(coordinator, &held))
            .await
            .map_err(|reason| CutoverError::Resume {
                reason: match &stop_failed {
                    Some(stop) => format!("{reason}; besides, {stop}"),
                    None => reason,
                },
                resume: list(&plan.ranges, Range::command, "; RESUME SHARDS "),
            })?;
    }
    if let Some(stop) = stop_failed {
        return Err(stop);
    }
    info!(what = %plan.what, steps = %steps.summary(), "cutover done");
    Ok(())
}

async fn undo(coordinator: &Coordinator<'_>, held: &Held) -> Result<((), String), String> {
    coordinator.resume(held).await.map(|detail| ((), detail))
}

/// The steps up to the write: what a failure here leaves unchanged (once
/// the caller has undone the pause and, when `fenced` is set, the old
/// master's `read_only`).
async fn before_write(
    coordinator: &Coordinator<'_>,
    base: &Base,
    plan: &mut Plan,
    source_conn: Option<Conn>,
    held: Option<&Held>,
    fenced: &mut bool,
    steps: &mut Steps<'_>,
) -> Result<super::coordinate::Written, CutoverError> {
    let source = plan.source.0.clone();
    if let Some(mut conn) = source_conn {
        if plan.fence_source {
            let fenced_now = steps
                .run("read_only", async {
                    fence(&mut conn).await.map(|set| {
                        let detail = if set {
                            "read_only = 1"
                        } else {
                            "read_only = 1 already"
                        };
                        (set, format!("{source}: {detail}"))
                    })
                })
                .await;
            match fenced_now {
                Ok(set) => *fenced = set,
                Err(reason) => {
                    let _ = conn.disconnect().await;
                    return Err(CutoverError::Fence {
                        addr: source,
                        reason,
                    });
                }
            }
        }
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
            },
        })
}

/// [`STOP_REPLICATION`] on every new master, once the map is written; the
/// error names the hosts whose replication was stopped.
async fn stop_replication(
    targets: Vec<(String, Conn)>,
    steps: &mut Steps<'_>,
) -> Result<(), CutoverError> {
    let mut stopped = Vec::new();
    let mut failed = None;
    for (target, mut conn) in targets {
        if failed.is_none() {
            for sql in STOP_REPLICATION {
                let done = steps
                    .run("stop replication", async {
                        conn.query_drop(sql)
                            .await
                            .map(|()| ((), format!("{target}: {sql}")))
                            .map_err(|e| e.to_string())
                    })
                    .await;
                if let Err(reason) = done {
                    failed = Some((target.clone(), sql.to_owned(), reason));
                    break;
                }
            }
            if failed.is_none() {
                stopped.push(target.clone());
            }
        }
        let _ = conn.disconnect().await;
    }
    match failed {
        None => Ok(()),
        Some((host, what, reason)) => Err(CutoverError::StopReplication {
            host,
            what,
            reason,
            stopped,
        }),
    }
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
