//! MOVE SHARDS and PROMOTE REPLICA through ZooKeeper against the real
//! fleet and a real ZooKeeper: a dry run and refusals change nothing; a
//! move with two proxies leaves both on the new document when it answers,
//! and writes through either land on the new master only; a move on a
//! file-sourced proxy rewrites its file; a promotion switches both proxies
//! and makes the old master read-only; a concurrent push makes a move fail
//! with nothing changed; `fleet move` stopped by SIGINT withdraws its pause
//! before the write and keeps it after; RESUME SHARDS refuses a move's
//! pause without FORCE.
//!
//! Run under the fleet lock (`flock /work/fleet.lock cargo test --test
//! zookeeper_cutover`): the moves route writes to 3309 and the promotion
//! sets 3307 read-only. [`FleetGuard`] puts everything back however a test
//! ends: the test's rows (on 3309 unlogged), 3309's AUTO_INCREMENT of the
//! shards written, `read_only = 0` on 3307, replication on 3309, the
//! test's znodes.

use crate::common;
use common::zk_harness;

mod cli;
mod file_source;
mod interrupt;
mod moves;
mod promote;
mod refusals;

use std::time::Duration;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shardgate::topology::source::ZkLocation;
use zk_harness::*;

/// The new master of the moves: 3307's GTID replica.
const NEW_MASTER: u16 = 3309;
/// A shard the moves take from 3307 to 3309.
const MOVED_SHARD: u32 = 1100;
/// A shard that stays on 3307.
const STAYING_SHARD: u32 = 211;
/// 3309's AUTO_INCREMENT for the moved shard while a test writes there, so
/// rows written on 3307 meanwhile (other tests) cannot collide with them.
const HIGH_LOCAL_ID: u64 = 1 << 34;
/// The move every test makes.
const MOVE: &str = "MOVE SHARDS 1024-2047 IN main TO 127.0.0.1:3309";

/// A tag unique to this run, put in every row's `data`.
fn tag(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("zkcut-{test}-{}-{nanos}", std::process::id())
}

/// An admin command's answer rows (each cell as text, NULL as empty), or
/// its error code and message.
async fn admin_command(proxy: &RunningProxy, sql: &str) -> Result<Vec<Vec<String>>, (u16, String)> {
    admin_command_at(admin_addr(proxy), sql.to_owned()).await
}

/// [`admin_command`] on the admin port at `addr`.
async fn admin_command_at(
    addr: std::net::SocketAddr,
    sql: String,
) -> Result<Vec<Vec<String>>, (u16, String)> {
    let mut conn = connect_to(addr, "admin", "admin")
        .await
        .expect("admin login");
    let sql = sql.as_str();
    let answer: Result<Vec<Row>, _> = conn.query(sql).await;
    conn.disconnect().await.ok();
    match answer {
        Ok(rows) => Ok(rows
            .into_iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| {
                        row.get_opt::<String, _>(i)
                            .and_then(Result::ok)
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .collect()),
        Err(e) => Err(server_error(e)),
    }
}

/// The `step` column of a MOVE SHARDS answer.
fn step_names(rows: &[Vec<String>]) -> Vec<&str> {
    rows.iter().map(|row| row[0].as_str()).collect()
}

/// The master of main's `shard` in the routing table `proxy` runs.
fn master_of(proxy: &RunningProxy, shard: u32) -> String {
    let topology = proxy.engine.topology.load();
    let main = topology.fleet_by_name("main").expect("fleet main");
    topology.hosts[topology.master_of(main, shard).expect("a master")]
        .addr
        .clone()
}

/// The fleet-wide pause records under the document.
async fn pause_records(location: &ZkLocation) -> Vec<String> {
    let client = raw_client().await;
    let path = format!("{}/pauses", location.path);
    match client.list_children(&path).await {
        Ok(ids) => ids,
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(e) => panic!("list {path}: {e}"),
    }
}

/// The znode version of the document now.
async fn znode_version(location: &ZkLocation) -> i32 {
    shardgate::control::zookeeper::get(location)
        .await
        .expect("read the document")
        .znode_version
}

/// Waits until `proxy` runs znode version `version`.
async fn wait_for_znode(proxy: &RunningProxy, version: i32) {
    let control = proxy.control.clone();
    wait_until(
        "the proxy to run the pushed document",
        Duration::from_secs(5),
        move || control.config_status().znode_version == Some(version),
    )
    .await;
}

/// Waits until `proxy` has resumed everything (a proxy resumes a
/// fleet-wide pause when it sees its record deleted, a few ms after).
async fn wait_resumed(proxy: &RunningProxy) {
    let engine = proxy.engine.clone();
    wait_until("the proxy to resume", Duration::from_secs(2), move || {
        engine.pauses.paused().is_empty()
    })
    .await;
}

/// `local_id`s of the rows of main's `shard` on `port` tagged `tag`.
async fn tagged_rows(port: u16, shard: u32, tag: &str) -> Vec<u64> {
    let mut conn = direct(port).await;
    let rows: Vec<u64> = conn
        .query(format!(
            "SELECT local_id FROM db{shard:05}.pins WHERE data LIKE '{tag}%' ORDER BY local_id"
        ))
        .await
        .expect("direct read");
    conn.disconnect().await.ok();
    rows
}

/// `@@read_only` of the server at `port`.
async fn read_only(port: u16) -> u8 {
    let mut conn = operations(port).await;
    let value: Option<u8> = conn.query_first("SELECT @@read_only").await.unwrap();
    conn.disconnect().await.ok();
    value.unwrap_or_default()
}

/// Sets 3309's AUTO_INCREMENT of the moved shard's pins, unlogged (1: back
/// to the smallest allowed).
async fn new_master_auto_increment(conn: &mut Conn, value: u64) {
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .unwrap();
    conn.query_drop(format!(
        "ALTER TABLE db{MOVED_SHARD:05}.pins AUTO_INCREMENT = {value}"
    ))
    .await
    .unwrap();
}

/// Puts the fleet and ZooKeeper back however a test ends: the rows tagged
/// `tag` (on 3309 not binlogged, then on 3307, whose deletes replicate),
/// 3309's AUTO_INCREMENT, `read_only = 0` on 3307, replication on 3309
/// (restarted as `fleet.sh` sets it up if it stopped), the test's znodes.
struct FleetGuard {
    test: &'static str,
    tag: String,
    /// The proxies the test started: they leave ZooKeeper before its
    /// znodes are removed (else they re-create some).
    proxies: std::sync::Mutex<Vec<std::sync::Arc<shardgate::control::Control>>>,
}

impl FleetGuard {
    /// Arms the guard and raises 3309's AUTO_INCREMENT for the moved shard.
    async fn new(test: &'static str) -> Self {
        clean(test).await;
        let guard = Self {
            test,
            tag: tag(test),
            proxies: std::sync::Mutex::default(),
        };
        let (running, error) = replication_running(NEW_MASTER).await;
        assert!(
            running,
            "3309 must replicate from 3307 before the test: {error}"
        );
        let mut conn = operations(NEW_MASTER).await;
        new_master_auto_increment(&mut conn, HIGH_LOCAL_ID).await;
        conn.disconnect().await.ok();
        guard
    }
}

impl FleetGuard {
    /// Starts a proxy from `location` as `id`, shut down by the guard.
    fn start(&self, location: &ZkLocation, id: &str) -> RunningProxy {
        let proxy = start(location, id);
        self.proxies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(proxy.control.clone());
        proxy
    }
}

async fn restore(test: &str, tag: &str, proxies: Vec<std::sync::Arc<shardgate::control::Control>>) {
    for control in proxies {
        control.shutdown().await;
    }
    let mut replica = operations(NEW_MASTER).await;
    replica
        .query_drop("SET SESSION sql_log_bin = 0")
        .await
        .unwrap();
    for shard in [MOVED_SHARD, STAYING_SHARD] {
        replica
            .query_drop(format!(
                "DELETE FROM db{shard:05}.pins WHERE data LIKE '{tag}%' AND local_id >= {HIGH_LOCAL_ID}"
            ))
            .await
            .unwrap();
    }
    new_master_auto_increment(&mut replica, 1).await;
    let mut master = operations(MASTER_A).await;
    master.query_drop("SET GLOBAL read_only = 0").await.unwrap();
    master.disconnect().await.ok();
    delete_pins(MASTER_A, &[MOVED_SHARD, STAYING_SHARD], tag).await;
    let (running, _) = replication_running(NEW_MASTER).await;
    if !running {
        replica
            .query_drop(
                "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=3307, \
                 MASTER_USER='repl', MASTER_PASSWORD='replpw', MASTER_CONNECT_RETRY=1, \
                 MASTER_USE_GTID=slave_pos",
            )
            .await
            .unwrap();
        replica.query_drop("START SLAVE").await.unwrap();
        replica
            .query_drop("SET GLOBAL read_only = 0")
            .await
            .unwrap();
    }
    let mut master = direct(MASTER_A).await;
    let position: String = master
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap_or_default();
    master.disconnect().await.ok();
    let caught_up: Option<i64> = replica
        .exec_first("SELECT MASTER_GTID_WAIT(?, 10)", (position,))
        .await
        .unwrap();
    replica.disconnect().await.ok();
    assert_eq!(
        caught_up,
        Some(0),
        "3309 caught up with 3307 after the test"
    );
    clean(test).await;
}

impl Drop for FleetGuard {
    fn drop(&mut self) {
        let (test, tag) = (self.test, self.tag.clone());
        let proxies = std::mem::take(&mut *self.proxies.lock().unwrap_or_else(|e| e.into_inner()));
        let undo = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime")
                .block_on(restore(test, &tag, proxies));
        });
        if undo.join().is_err() {
            eprintln!(
                "restoring the fleet after {test} failed: delete rows with data LIKE '{}%' on 3309 (sql_log_bin=0) and 3307, \
                 SET GLOBAL read_only = 0 on 3307, check replication on 3309",
                self.tag
            );
        }
    }
}
