//! Hot reload and failover against the real fleet: a client keeps querying
//! through three reloads (file rewrite, SIGHUP, RELOAD CONFIG) and a
//! promotion of 3307's replica and sees no error; an invalid config is
//! refused while the old table keeps routing; a host that leaves has its
//! pool retired once its last statement finishes; refused promotions
//! change nothing.
//!
//! Fleet hygiene: nothing is written through a proxy to a shard served by
//! 3309; rows written on 3307 (they replicate) are deleted on 3307, rows on
//! 3308 on 3308. A promotion of the live 3307 sets it read-only: a guard
//! ([`Writable`]) sets it back. Run under the fleet lock.
//!
//! The tests share one lock: a SIGHUP reloads every proxy of the process.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use shardgate::control::failover::{FailoverError, PromoteOptions};
use shardgate::control::reload::{version_of, ReloadError, ReloadTrigger};
use shardgate::control::Control;
use shardgate::engine::Engine;
use shardgate::topology::Topology;

mod promote;
mod reload;

const MAIN_A_LINE: &str =
    "      - { range: [0, 2047],    master: 127.0.0.1:3307, replica: 127.0.0.1:3309 }\n";
const MAIN_B_LINE: &str = "      - { range: [2048, 4095], master: 127.0.0.1:3308 }\n";
const OPEN_LINE: &str = "    open: [0, 4095]";

fn base_yaml() -> String {
    let yaml = test_config_yaml();
    for line in [MAIN_A_LINE, MAIN_B_LINE, OPEN_LINE] {
        assert!(yaml.contains(line), "config/shardgate.yaml changed: {line}");
    }
    yaml
}

/// A promotion that leaves replication on the replica alone.
const KEEP_REPLICATION: PromoteOptions = PromoteOptions {
    stop_replication: false,
};

/// Makes the server at `port` writable again (`read_only = 0`) when
/// dropped: a promotion of a live master leaves it read-only.
struct Writable(u16);

impl Drop for Writable {
    fn drop(&mut self) {
        let output = std::process::Command::new("mariadb")
            .args(["-h", "127.0.0.1", "-P", &self.0.to_string()])
            .args(["-u", OPS_USER, &format!("-p{OPS_PASSWORD}")])
            .args(["-e", "SET GLOBAL read_only = 0"])
            .output()
            .expect("run the mariadb CLI");
        assert!(
            output.status.success(),
            "SET GLOBAL read_only = 0 on {} failed: {}",
            self.0,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// `@@read_only` of the server at `port`.
async fn read_only(port: u16) -> Option<u8> {
    let mut conn = operations(port).await;
    let value = conn.query_first("SELECT @@read_only").await.unwrap();
    conn.disconnect().await.ok();
    value
}

/// Waits (5 s at most) until `control` has loaded `yaml`.
async fn wait_for_version(control: &Control, what: &str, yaml: &str) {
    let version = version_of(yaml.as_bytes());
    wait_until(what, Duration::from_secs(5), || {
        control.config_status().version == version
    })
    .await;
}

/// The master of shard `shard` of fleet main in `engine`'s current table.
fn main_master(engine: &Engine, shard: u32) -> String {
    let topology = engine.topology.load();
    let main = topology.fleet_by_name("main").expect("fleet main");
    topology.hosts[topology.master_of(main, shard).expect("a master")]
        .addr
        .clone()
}

/// Fails unless one of a promotion's `notes` matches.
#[track_caller]
fn assert_noted(notes: &[String], matches: impl Fn(&str) -> bool) {
    assert!(notes.iter().any(|n| matches(n)), "{notes:?}");
}

/// Shards of `n` hint-less inserts (placed in the fleet's open range).
async fn placed_shards(conn: &mut Conn, n: usize, data: &str) -> Vec<u32> {
    let mut shards = Vec::new();
    for _ in 0..n {
        conn.query_drop(format!("INSERT INTO pins (data) VALUES ('{data}')"))
            .await
            .expect("hint-less insert");
        shards.push(decode(conn.last_insert_id().unwrap()).shard);
    }
    shards
}

async fn read_pin(conn: &mut Conn, id: u64) -> mysql_async::Result<Option<String>> {
    conn.query_first(format!("SELECT data FROM pins WHERE id = {id}"))
        .await
}

/// Statements the pool of `addr` has run, if it has a pool.
fn checkouts_on(engine: &Engine, addr: &str) -> Option<u64> {
    engine
        .backends
        .all()
        .iter()
        .find(|p| p.addr == addr)
        .map(|p| p.checkouts.load(Ordering::Relaxed))
}

/// What the client loop saw.
struct Load {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

/// A client that reads `reads` (id, expected data) and inserts a pin on a
/// master-B shard, in a loop, until stopped; returns every error it saw.
async fn start_load(proxy: &RunningProxy, reads: Vec<(u64, String)>, tag: String) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let mut conn = app(proxy).await;
    let (stop_flag, counter) = (stop.clone(), rounds.clone());
    let task = tokio::spawn(async move {
        let mut errors = Vec::new();
        while !stop_flag.load(Ordering::Relaxed) {
            for (id, expected) in &reads {
                match read_pin(&mut conn, *id).await {
                    Ok(Some(data)) if data == *expected => {}
                    other => errors.push(format!("read {id}: {other:?}")),
                }
            }
            let insert =
                format!("INSERT /*+ SHARD(2600) */ INTO pins (data) VALUES ('{tag}-load')");
            if let Err(e) = conn.query_drop(insert).await {
                errors.push(format!("insert: {e}"));
            }
            counter.fetch_add(1, Ordering::Relaxed);
        }
        conn.disconnect().await.ok();
        errors
    });
    Load { stop, rounds, task }
}

impl Load {
    async fn wait_rounds(&self, more: u64) {
        let target = self.rounds.load(Ordering::Relaxed) + more;
        let rounds = self.rounds.clone();
        wait_until("the client loop to go on", Duration::from_secs(10), || {
            rounds.load(Ordering::Relaxed) >= target
        })
        .await;
    }

    async fn finish(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let errors = self.task.await.unwrap();
        (self.rounds.load(Ordering::Relaxed), errors)
    }
}
