//! One file per admin command; [`run`] dispatches a parsed [`Command`].

mod client;
mod decode_id;
mod encode_id;
mod explain_route;
mod help;
mod show_config;
mod show_hosts;
mod show_shards;
mod verify_fleet;

use tracing::info;

use super::parse::Command;
use super::{AdminError, Answer};
use crate::engine::Engine;

/// Who runs a command, for the answers that depend on it.
pub struct Context<'a> {
    /// The proxy.
    pub engine: &'a Engine,
    /// The admin account logged in.
    pub user: &'a str,
    /// `user@address` of the session, as `USER()` shows it.
    pub client: String,
    /// The session's connection id.
    pub connection_id: u32,
}

/// Runs one command and returns its answer.
pub async fn run(context: &Context<'_>, command: Command) -> Result<Answer, AdminError> {
    let engine = context.engine;
    match command {
        Command::Help => Ok(help::answer()),
        Command::ShowShards { like } => Ok(show_shards::all(engine, like.as_deref())),
        Command::ShowShard { shard, fleet } => show_shards::one(engine, shard, fleet.as_deref()),
        Command::ShowHosts => Ok(show_hosts::answer(engine)),
        Command::ShowConfig => Ok(show_config::answer(engine)),
        Command::ExplainRoute { statement } => explain_route::answer(engine, &statement),
        Command::DecodeId { id } => decode_id::answer(engine, id),
        Command::EncodeId {
            shard,
            object_type,
            local_id,
        } => encode_id::answer(engine, shard, &object_type, local_id),
        Command::VerifyFleet => {
            info!(user = context.user, "VERIFY FLEET");
            verify_fleet::answer(engine).await
        }
        Command::Select(items) => client::select(context, &items),
        Command::Set => Ok(Answer::default()),
        Command::ShowStats
        | Command::ReloadConfig
        | Command::PromoteReplica { .. }
        | Command::PauseShards(_)
        | Command::ResumeShards(_) => Err(AdminError::Argument(
            "this command is not available yet".to_owned(),
        )),
    }
}
