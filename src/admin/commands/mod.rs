//! One file per admin command; [`run`] dispatches a parsed [`Command`].

mod client;
mod decode_id;
mod encode_id;
mod explain_route;
mod fleet_id;
mod help;
mod move_shards;
mod pause_shards;
mod promote_replica;
mod reload_config;
mod reset_digests;
mod show_config;
mod show_digests;
mod show_hosts;
mod show_proxies;
mod show_shard_stats;
mod show_shards;
mod show_splits;
mod show_stats;
mod split_shards;
mod verify_fleet;
mod verify_rows;

use std::sync::Arc;

use tracing::{info, warn};

use super::parse::{Command, ShardRange};
use super::{AdminError, Answer};
use crate::control::Control;
use crate::engine::Engine;

/// Who runs a command, for the answers that depend on it.
pub struct Context<'a> {
    /// The proxy's control plane (config file, reload, promotion; shared
    /// with the background jobs a command starts).
    pub control: &'a Arc<Control>,
    /// The proxy's engine (`control.engine`).
    pub engine: &'a Engine,
    /// The admin account logged in.
    pub user: &'a str,
    /// `user@address` of the session, as `USER()` shows it.
    pub client: String,
    /// The session's connection id.
    pub connection_id: u32,
    /// The name the client gave with `USE`, if any.
    pub database: Option<&'a str>,
}

/// Runs one command and returns its answer. Commands that change the
/// proxy are logged with the account that ran them.
pub async fn run(context: &Context<'_>, command: Command) -> Result<Answer, AdminError> {
    let engine = context.engine;
    match command {
        Command::Help => Ok(help::answer()),
        Command::ShowShards { like } => Ok(show_shards::all(engine, like.as_deref())),
        Command::ShowShard { shard, fleet } => show_shards::one(engine, shard, fleet.as_deref()),
        Command::ShowHosts => Ok(show_hosts::answer(engine)),
        Command::ShowStats => Ok(show_stats::answer(engine)),
        Command::ShowDigests { order, limit } => Ok(show_digests::answer(engine, order, limit)),
        Command::ResetDigests => {
            logged(context, "RESET DIGESTS", Ok(reset_digests::answer(engine)))
        }
        Command::ShowShardStats { top, order } => Ok(show_shard_stats::answer(engine, top, order)),
        Command::ShowConfig => Ok(show_config::answer(context.control)),
        Command::ShowProxies => show_proxies::answer(context.control).await,
        Command::ReloadConfig { force } => logged(
            context,
            if force {
                "RELOAD CONFIG FORCE"
            } else {
                "RELOAD CONFIG"
            },
            reload_config::answer(context.control, force).await,
        ),
        Command::ExplainRoute { statement } => explain_route::answer(engine, &statement),
        Command::DecodeId { id } => decode_id::answer(engine, id),
        Command::DecodeIdIn { id, fleet } => fleet_id::decode(engine, id, &fleet),
        Command::EncodeIdIn {
            shard,
            second,
            third,
            fleet,
        } => fleet_id::encode(engine, shard, &second, third, &fleet),
        Command::EncodeId {
            shard,
            object_type,
            local_id,
        } => encode_id::answer(engine, shard, &object_type, local_id),
        Command::PromoteReplica {
            master,
            stop_replication,
        } => {
            let what = format!(
                "PROMOTE REPLICA {master}{}",
                if stop_replication {
                    " STOP REPLICATION"
                } else {
                    ""
                }
            );
            info!(user = context.user, "{what}: starting");
            let result = promote_replica::answer(context.control, &master, stop_replication).await;
            logged(context, &what, result)
        }
        Command::PauseShards(range) => {
            let what = format!("PAUSE SHARDS {}", describe(&range));
            info!(user = context.user, "{what}: draining");
            logged(
                context,
                &what,
                pause_shards::pause(context.control, context.user, &range).await,
            )
        }
        Command::ResumeShards { range, force } => {
            let what = format!(
                "RESUME SHARDS {}{}",
                describe(&range),
                if force { " FORCE" } else { "" }
            );
            logged(
                context,
                &what,
                pause_shards::resume(context.control, &range, force).await,
            )
        }
        Command::MoveShards {
            range,
            target,
            dry_run,
        } => {
            let what = format!(
                "MOVE SHARDS {} TO {target}{}",
                describe(&range),
                if dry_run { " DRY RUN" } else { "" }
            );
            info!(user = context.user, "{what}: starting");
            let result =
                move_shards::answer(context.control, context.user, &range, &target, dry_run).await;
            logged(context, &what, result)
        }
        Command::VerifyFleet => verify_fleet::answer(context.control).await,
        Command::VerifyShardRows {
            range,
            against,
            max_rows_per_second,
        } => {
            let what = format!("VERIFY SHARDS {} ROWS AGAINST {against}", describe(&range));
            info!(user = context.user, "{what}: starting");
            let result =
                verify_rows::answer(context.control, &range, &against, max_rows_per_second).await;
            logged(context, &what, result)
        }
        Command::SplitShards(split) => {
            let what = format!(
                "SPLIT SHARDS {} TO {}{}{}",
                describe(&split.range),
                split.target,
                if split.resume { " RESUME" } else { "" },
                if split.dry_run { " DRY RUN" } else { "" }
            );
            info!(user = context.user, "{what}: starting");
            let result = split_shards::answer(context.control, context.user, split).await;
            logged(context, &what, result)
        }
        Command::ShowSplits => Ok(show_splits::answer(context.control)),
        Command::Select(items) => client::select(context, &items),
        Command::Set => Ok(Answer::default()),
    }
}

fn describe(range: &ShardRange) -> String {
    match &range.fleet {
        Some(fleet) => format!("{}-{} IN {fleet}", range.first, range.last),
        None => format!("{}-{}", range.first, range.last),
    }
}

fn logged(
    context: &Context<'_>,
    what: &str,
    result: Result<Answer, AdminError>,
) -> Result<Answer, AdminError> {
    match &result {
        Ok(_) => info!(user = context.user, "{what}: done"),
        Err(error) => warn!(user = context.user, %error, "{what}: failed"),
    }
    result
}
