//! Tests that only need the shared fleet: each runs statements through a
//! proxy started in-process (or the `shardgate` binary) against
//! 127.0.0.1:3307-3310, on rows and tables of its own, so they all run in
//! parallel. Needs `integration/fleet.sh start` and `shardgate fleet init`
//! (done by `integration/test.sh`). One module per area; run one test with
//! `cargo test --test statements routing::name`.

#[path = "../common/mod.rs"]
mod common;

mod fleet_migrate;
mod lexing;
mod local_id_range;
mod multi_shard;
mod prepared;
mod prepared_safety;
mod privileges;
mod protocol;
mod routing;
mod schema_changes;
mod select_star;
mod session_edges;
mod session_truth;
mod sessions;
mod sessions_kill;
mod time_ids;
mod tls;
