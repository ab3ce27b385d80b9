//! Cutover pause against the real fleet: statements for paused shards wait
//! and run after RESUME (or fail clearly after `pause.timeout_ms`), open
//! transactions hold a pause off until they end, and the full shard move
//! (Pinterest's third way: shards 1024-2047 of 3307 move to its GTID
//! replica 3309) under a steady write load loses no acknowledged write.
//!
//! A statement whose backend connection breaks after it was sent is not
//! sent again (it may have run), while a pooled connection the server
//! closed while idle is replaced before anything is sent on it.
//!
//! Fleet hygiene: rows written through the proxy onto 3309 are deleted
//! straight on 3309 (not binlogged), and every test row on 3307 is deleted
//! there (the delete replicates), so 3309 keeps replicating; a guard does
//! this when the shard move test fails half-way too. The tests run one at
//! a time, so the shard move's pause is timed alone.

use crate::common;
use common::move_load;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use common::{
    admin, app, delete_pins, insert_pin, serial, try_insert_pin, write_config, Deadline,
    RunningProxy, MASTER_A, MASTER_B,
};
use move_load::{marker, rows_on, NEW_MASTER};

mod broken_backend;
mod pause;
mod shard_move;

/// Bound for what should be immediate, generous for a loaded machine.
const PROMPT: Duration = Duration::from_secs(2);

/// Polls `condition` every 2 ms until it holds; fails after 10 s. Not
/// [`common::wait_until`] (every 20 ms): a statement seen waiting must be
/// checked on and resumed well within a 700 ms `pause.timeout_ms`.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Deadline::new(what, Duration::from_secs(10)).every(Duration::from_millis(2));
    while !condition() {
        deadline.retry(false).await;
    }
}

/// Whether `proxy` has shards `first-last` of main paused, with at least
/// `waiting` statements waiting for them.
fn paused_with(proxy: &RunningProxy, first: u32, last: u32, waiting: usize) -> bool {
    proxy.engine.pauses.paused().iter().any(|range| {
        range.fleet == "main"
            && range.first == first
            && range.last == last
            && range.waiting >= waiting
    })
}

/// Runs an admin command; its answer rows, each cell as text.
async fn admin_command(conn: &mut Conn, sql: &str) -> Vec<Vec<String>> {
    let rows: Vec<Row> = conn
        .query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|row| {
            (0..row.len())
                .map(|i| {
                    row.get_opt::<String, _>(i)
                        .and_then(Result::ok)
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect()
}

/// The test config with shards 1024-2047 moved from 3307 to 3309.
fn moved_yaml() -> String {
    let yaml = common::test_config_yaml();
    let moved = yaml.replace(
        "      - { range: [0, 2047],    master: 127.0.0.1:3307, replica: 127.0.0.1:3309 }\n",
        "      - { range: [0, 1023],    master: 127.0.0.1:3307 }\n      - { range: [1024, 2047], master: 127.0.0.1:3309 }\n",
    );
    assert_ne!(
        moved, yaml,
        "the host lines of config/shardgate.yaml changed"
    );
    moved
}
