//! `MOVE SHARDS a-b [IN fleet] TO host:port [DRY RUN]` and `shardgate
//! fleet move`: checks (the edit, the source answers, the target is a
//! running GTID replica of it), then the cutover sequence, then the
//! cleanup the operator does by hand.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::coordinate::{Base, Coordinator, FleetSide};
use super::report::{CutoverReport, Progress, Steps};
use super::sequence::{run_plan, Plan};
use super::{CutoverError, Range};
use crate::control::pause::pausable_fleets;
use crate::control::reload::ReloadTrigger;
use crate::control::replica::{gtid, read_only, replication, Access};
use crate::control::zookeeper::ZooKeeper;
use crate::control::Control;
use crate::topology::config::HostConfig;
use crate::topology::rewrite::{move_in_config, move_shards, MovedRange};
use crate::topology::source::ZkLocation;

/// What to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveRequest {
    /// First shard.
    pub first: u32,
    /// Last shard.
    pub last: u32,
    /// The fleet (needed when several fleets have those shards).
    pub fleet: Option<String>,
    /// The new master, `host:port`: a running GTID replica of the current one.
    pub target: String,
    /// Check and describe only; change nothing.
    pub dry_run: bool,
}

impl MoveRequest {
    /// The command as typed, for logs.
    pub fn describe(&self) -> String {
        format!(
            "MOVE SHARDS {}-{}{} TO {}{}",
            self.first,
            self.last,
            self.fleet
                .as_deref()
                .map_or_else(String::new, |f| format!(" IN {f}")),
            self.target,
            if self.dry_run { " DRY RUN" } else { "" }
        )
    }
}

impl Control {
    /// `MOVE SHARDS` on this proxy: fleet-wide through ZooKeeper when the
    /// config is a znode (`user` is the admin account the pause record
    /// names), else on this proxy and its config file.
    pub async fn move_shards(
        &self,
        request: &MoveRequest,
        user: &str,
    ) -> Result<CutoverReport, CutoverError> {
        let coordinator = match &self.zookeeper {
            Some(zookeeper) => Coordinator::Fleet(FleetSide {
                zookeeper,
                requester: self.process.id.clone(),
                user: user.to_owned(),
            }),
            None => Coordinator::Local(self),
        };
        run_move(&coordinator, request, None).await
    }
}

/// `shardgate fleet move`: the same sequence run by this process on its
/// own ZooKeeper session (it does not register as a proxy); `progress`
/// hears of each step as it starts and ends.
pub async fn fleet_move(
    location: ZkLocation,
    request: &MoveRequest,
    progress: Progress<'_>,
) -> Result<CutoverReport, CutoverError> {
    let zookeeper = ZooKeeper::open(location).await?;
    let coordinator = Coordinator::Fleet(FleetSide {
        zookeeper: &zookeeper,
        requester: super::cli_requester(),
        user: "cli".to_owned(),
    });
    let result = run_move(&coordinator, request, Some(progress)).await;
    zookeeper.close().await;
    result
}

async fn run_move(
    coordinator: &Coordinator<'_>,
    request: &MoveRequest,
    progress: Option<Progress<'_>>,
) -> Result<CutoverReport, CutoverError> {
    let mut steps = Steps::new(progress);
    let result = checked_move(coordinator, request, &mut steps).await;
    match result {
        Ok(cleanup) => Ok(CutoverReport {
            steps: steps.done,
            cleanup,
        }),
        Err(e) => {
            if progress.is_none() {
                tracing::warn!(what = %request.describe(), steps = %steps.summary(), "move failed: {e}");
            }
            Err(e)
        }
    }
}

/// What the checks found: the move and its connections.
struct Checked {
    fleet: String,
    moved: MovedRange,
    text: String,
    source: Conn,
    target: Conn,
    /// The target runs `gtid_strict_mode` in the source's GTID domain.
    same_domain: bool,
}

/// The target's `@@gtid_domain_id` when it runs `gtid_strict_mode = ON`.
async fn strict_mode(conn: &mut Conn) -> Option<String> {
    let row: Option<(Option<u8>, Option<String>)> = conn
        .query_first("SELECT @@gtid_strict_mode, CAST(@@gtid_domain_id AS CHAR)")
        .await
        .ok()
        .flatten();
    match row {
        Some((Some(1), domain)) => domain,
        _ => None,
    }
}

async fn checked_move(
    coordinator: &Coordinator<'_>,
    request: &MoveRequest,
    steps: &mut Steps<'_>,
) -> Result<Vec<String>, CutoverError> {
    let base = steps
        .run("read", async {
            coordinator.base().await.map(|base| {
                let detail = match base.znode_version {
                    Some(v) => format!(
                        "{}: znode version {v}, md5 {}",
                        base.source_name, base.version
                    ),
                    None => format!("{}: md5 {} (in force)", base.source_name, base.version),
                };
                (base, detail)
            })
        })
        .await?;
    let access = Access::of(&base.topology);
    let checked = check(&base, &access, request, steps).await?;
    let local = matches!(coordinator, Coordinator::Local(_));
    let mut cleanup = cleanup(&base, &checked.fleet, &checked.moved);
    if checked.same_domain {
        cleanup.insert(0, format!(
            "{to} runs gtid_strict_mode = ON in the same GTID domain as {from}: once {to} takes writes, the events it \
             still receives from {from} are out of order for strict mode and its replication stops with an error. \
             Stop replication on {to} (STOP SLAVE; RESET SLAVE ALL) as soon as nothing writes the moved shards on {from}, \
             or give {to} its own gtid_domain_id before the next move",
            to = checked.moved.to,
            from = checked.moved.from
        ));
    }
    if local {
        cleanup.push(format!(
            "only this proxy and its config file {} changed: every other proxy still sends shards {}-{} to {} \
             until its own config says {} (run the same MOVE SHARDS on each, or use a ZooKeeper config)",
            base.source_name, checked.moved.first, checked.moved.last, checked.moved.from, checked.moved.to
        ));
    }
    let moved = &checked.moved;
    if request.dry_run {
        steps.note(
            "would write",
            0,
            new_entries(&checked.text, &base.source_name, moved),
        );
        let proxies = coordinator.proxies().await?;
        steps.note(
            "would pause",
            0,
            format!(
                "{} {}-{} on {}",
                checked.fleet,
                moved.first,
                moved.last,
                if proxies.is_empty() {
                    "no registered proxy".to_owned()
                } else {
                    proxies.join(", ")
                }
            ),
        );
        steps.note("dry run", 0, "nothing was changed".to_owned());
        let _ = checked.source.disconnect().await;
        let _ = checked.target.disconnect().await;
        return Ok(cleanup);
    }
    let plan = Plan {
        what: request.describe(),
        ranges: vec![Range {
            fleet: checked.fleet.clone(),
            first: moved.first,
            last: moved.last,
        }],
        source: (moved.from.clone(), Some(checked.source)),
        targets: vec![(moved.to.clone(), checked.target)],
        text: checked.text,
        trigger: ReloadTrigger::MoveShards,
        changes: vec![format!(
            "fleet {} shards {}-{} moved from {} to {}",
            checked.fleet, moved.first, moved.last, moved.from, moved.to
        )],
        stop_replication: false,
        fence_source: false,
    };
    let mut notes = Vec::new();
    let result = run_plan(coordinator, &base, &access, plan, steps, &mut notes).await;
    for note in notes {
        steps.note("note", 0, note);
    }
    result.map(|()| cleanup)
}

/// The checks before anything changes: fleet, edit, source, target.
async fn check(
    base: &Base,
    access: &Access,
    request: &MoveRequest,
    steps: &mut Steps<'_>,
) -> Result<Checked, CutoverError> {
    let (fleet, moved, text) = steps
        .run("check", async {
            let fleets = pausable_fleets(
                &base.topology,
                request.fleet.as_deref(),
                request.first,
                request.last,
            )
            .map_err(|e| CutoverError::Argument(e.to_string()))?;
            let fleet = match fleets.as_slice() {
                [one] => one.clone(),
                several => {
                    return Err(CutoverError::Argument(format!(
                        "fleets {} all have shards {}-{}: say which, MOVE SHARDS {}-{} IN <fleet> TO {}",
                        several.join(", "),
                        request.first,
                        request.last,
                        request.first,
                        request.last,
                        request.target
                    )))
                }
            };
            let (_, moved) = move_in_config(
                &base.topology.config,
                &fleet,
                request.first,
                request.last,
                &request.target,
            )?;
            let edited = move_shards(
                &base.text,
                &base.source_name,
                &fleet,
                request.first,
                request.last,
                &request.target,
            )?;
            let detail = format!(
                "{fleet} {}-{}: {} -> {} (host entry {}-{} split)",
                moved.first, moved.last, moved.from, moved.to, moved.entry[0], moved.entry[1]
            );
            Ok(((fleet, moved, edited.text), detail))
        })
        .await?;
    let source = steps
        .run("source", async {
            let mut conn =
                access
                    .open(&moved.from)
                    .await
                    .map_err(|reason| CutoverError::Unreachable {
                        role: "source",
                        addr: moved.from.clone(),
                        reason,
                    })?;
            let position = gtid(&mut conn, "@@gtid_binlog_pos")
                .await
                .unwrap_or_else(|e| format!("unknown ({e})"));
            Ok::<_, CutoverError>((
                conn,
                format!("{} answers, @@gtid_binlog_pos {position}", moved.from),
            ))
        })
        .await?;
    let target = steps
        .run("target", async {
            let unreachable = |reason: String| CutoverError::Unreachable {
                role: "target",
                addr: moved.to.clone(),
                reason,
            };
            let mut conn = access.open(&moved.to).await.map_err(unreachable)?;
            let status = replication(&mut conn).await;
            let not_replicating = |why: String| CutoverError::NotReplicating {
                target: moved.to.clone(),
                master: moved.from.clone(),
                why,
            };
            let problem = match &status {
                Err(e) => Some(format!("SHOW SLAVE STATUS failed: {e}")),
                Ok(None) => Some("it is no replica (SHOW SLAVE STATUS is empty)".to_owned()),
                Ok(Some(status)) => status
                    .problem_for(&moved.from)
                    .or_else(|| status.lag_problem(base.topology.config.health.max_promote_lag_ms)),
            };
            if let Some(why) = problem {
                let _ = conn.disconnect().await;
                return Err(not_replicating(why));
            }
            match read_only(&mut conn).await {
                Ok(false) => {}
                Ok(true) => {
                    let _ = conn.disconnect().await;
                    return Err(CutoverError::TargetReadOnly {
                        target: moved.to.clone(),
                    });
                }
                Err(reason) => {
                    let _ = conn.disconnect().await;
                    return Err(unreachable(format!("SELECT @@read_only failed: {reason}")));
                }
            }
            let strict = strict_mode(&mut conn).await;
            let detail = status
                .ok()
                .flatten()
                .map(|s| s.describe())
                .unwrap_or_default();
            Ok(((conn, strict), format!("{detail}, read_only 0")))
        })
        .await;
    let (target, strict) = match target {
        Ok(found) => found,
        Err(e) => {
            let _ = source.disconnect().await;
            return Err(e);
        }
    };
    let mut source = source;
    let same_domain = match strict {
        Some(domain) => {
            gtid(&mut source, "CAST(@@gtid_domain_id AS CHAR)")
                .await
                .ok()
                == Some(domain)
        }
        None => false,
    };
    Ok(Checked {
        fleet,
        moved,
        text,
        source,
        target,
        same_domain,
    })
}

/// The host entries of the new text for the old entry's range.
fn new_entries(text: &str, source_name: &str, moved: &MovedRange) -> String {
    let Ok(topology) = crate::control::status::parse_config(text.as_bytes(), source_name) else {
        return "the edited document does not parse".to_owned();
    };
    let Some(fleet) = topology.config.fleets.get(&moved.fleet) else {
        return String::new();
    };
    fleet
        .hosts
        .iter()
        .filter(|h| h.range[0] >= moved.entry[0] && h.range[1] <= moved.entry[1])
        .map(describe_entry)
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe_entry(host: &HostConfig) -> String {
    format!(
        "range [{}, {}] master {}{}",
        host.range[0],
        host.range[1],
        host.master,
        host.replica
            .as_deref()
            .map_or_else(String::new, |r| format!(" replica {r}"))
    )
}

/// What the operator cleans up after the move.
fn cleanup(base: &Base, fleet: &str, moved: &MovedRange) -> Vec<String> {
    let databases = |first: u32, last: u32| {
        base.topology
            .fleets
            .iter()
            .find(|f| f.name == fleet)
            .map_or_else(
                || format!("shards {first}-{last}"),
                |f| format!("{}..{}", f.database.format(first), f.database.format(last)),
            )
    };
    let (from, to) = (&moved.from, &moved.to);
    let mut cleanup = vec![format!(
        "{to} still replicates from {from}: once nothing writes shards {}-{} on {from} any more (and after backups), \
         STOP SLAVE; RESET SLAVE ALL on {to}, BEFORE dropping anything (else drops on {from} replicate to {to})",
        moved.first, moved.last
    )];
    cleanup.push(format!(
        "databases {} are left on the old master {from}: drop them there (VERIFY FLEET lists them until then)",
        databases(moved.first, moved.last)
    ));
    let mut rest = Vec::new();
    if moved.entry[0] < moved.first {
        rest.push((moved.entry[0], moved.first - 1));
    }
    if moved.last < moved.entry[1] {
        rest.push((moved.last + 1, moved.entry[1]));
    }
    for (first, last) in rest {
        cleanup.push(format!(
            "databases {} (still served by {from}) were copied to the new master {to} by replication: drop them on {to}",
            databases(first, last)
        ));
    }
    if let Some(replica) = &moved.replica_dropped {
        cleanup.push(format!(
            "{replica} is no longer the replica of the shards staying on {from} (entry {}-{} less the moved range): \
             give them a new replica (`replica:` in their host entries)",
            moved.entry[0], moved.entry[1]
        ));
    }
    cleanup.push(format!(
        "shards {}-{} on {to} have no replica: give it one and add `replica:` to their entry",
        moved.first, moved.last
    ));
    cleanup
}
