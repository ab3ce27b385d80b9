//! Tests that change the shared fleet or the whole process: they stop,
//! kill or restart hosts, promote a replica, move shards, set server
//! globals, or measure the process's RSS and open files. Every test holds
//! [`common::serial`] for its whole run, so they run one at a time (as each
//! had the fleet to itself) while the parallel tests of `statements` and
//! `zookeeper_config`, in their own binaries, never overlap them. The
//! `zookeeper_*` modules need `SHARDGATE_ZK` (set by `integration/test.sh`).
//! Run one test with `cargo test --test exclusive cutover::name`.

#[path = "../common/mod.rs"]
mod common;

mod backend_statements;
mod cutover;
mod health_stats;
mod host_failure;
mod limits_prelogin;
mod limits_session;
mod multi_shard_failure;
mod operator_metrics;
mod reload_failover;
mod split;
mod split_admin;
mod split_claim;
mod split_load;
mod takeover;
mod takeover_drain;
mod verify_fleet;
mod zookeeper_cutover;
mod zookeeper_move;
