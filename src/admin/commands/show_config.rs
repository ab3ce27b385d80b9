//! `SHOW CONFIG`: the config source (file or znode), the version in force
//! (with its znode version for a znode), when it was loaded, the last
//! reload attempt, the ZooKeeper session's state (connected, disconnected
//! with the time the fence goes up, fenced), and the paused shard ranges
//! (a `paused` row each).

use crate::admin::answer::format_time;
use crate::admin::Answer;
use crate::control::reload::ReloadTrigger;
use crate::control::zookeeper::Liveness;
use crate::control::Control;

/// One `name`/`value` row per fact.
pub fn answer(control: &Control) -> Answer {
    let status = control.config_status();
    let mut answer = Answer::new(&["name", "value"]);
    let mut put = |name: &str, value: String| answer.push(vec![name.into(), value.into()]);
    put("source", status.source);
    put("version", status.version);
    if let Some(znode_version) = status.znode_version {
        put("znode_version", znode_version.to_string());
    }
    put("loaded_at", format_time(status.loaded_at));
    match status.last_reload {
        None => put("last_reload", "none since start".to_owned()),
        Some(attempt) => {
            put("last_reload_at", format_time(attempt.at));
            put(
                "last_reload_trigger",
                trigger_name(attempt.trigger).to_owned(),
            );
            put(
                "last_reload_result",
                match attempt.result {
                    Ok(summary) => format!("ok: {summary}"),
                    Err(errors) => {
                        format!("refused (the previous config stays in force):\n{errors}")
                    }
                },
            );
        }
    }
    if let Some(zookeeper) = &control.zookeeper {
        match zookeeper.liveness(&control.engine.fence) {
            Liveness::Connected => put("zookeeper", "connected".to_owned()),
            Liveness::Disconnected { since, fence_at } => {
                put("zookeeper", format!("disconnected since {}", format_time(since)));
                put("zookeeper_fence_at", format_time(fence_at));
            }
            Liveness::Fenced { since, lost_at } => put(
                "zookeeper",
                format!(
                    "fenced since {} (session last known live at {}): writes and locking reads are refused",
                    format_time(since),
                    format_time(lost_at)
                ),
            ),
        }
    }
    for paused in control.engine.pauses.paused() {
        put(
            "paused",
            format!(
                "{} {}-{} since {} ({} statements waiting)",
                paused.fleet,
                paused.first,
                paused.last,
                format_time(paused.since),
                paused.waiting
            ),
        );
    }
    answer
}

/// How an operator names what set a reload off.
pub fn trigger_name(trigger: ReloadTrigger) -> &'static str {
    match trigger {
        ReloadTrigger::Admin => "RELOAD CONFIG",
        ReloadTrigger::Signal => "SIGHUP",
        ReloadTrigger::FileChange => "file change",
        ReloadTrigger::Promotion => "PROMOTE REPLICA",
        ReloadTrigger::MoveShards => "MOVE SHARDS",
        ReloadTrigger::ZnodeChange => "znode change",
        ReloadTrigger::ZooKeeperSession => "ZooKeeper session (re)established",
    }
}
