//! A shard move under a steady write load, the parts every move test
//! shares: shards 1024-2047 of main move from master A (3307) to its GTID
//! replica 3309 while clients insert pins into moving and control shards;
//! where each acknowledged write must be afterwards; and the cleanup that
//! leaves the fleet as it was, also when a test fails half-way.
//!
//! Rows written through a proxy onto 3309 after the move are deleted
//! straight on 3309 (not binlogged), every test row on 3307 and 3308 is
//! deleted there (3307's deletes replicate), so 3309 keeps replicating.
//! While a test runs, 3309's AUTO_INCREMENT of the moving shards is raised
//! to [`HIGH_LOCAL_ID`]: rows written there cannot collide with rows that
//! reach it from 3307 (a duplicate key would stop replication).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use tokio::task::JoinHandle;

use crate::common;
use crate::common::MASTER_A;

/// The new master: 3307's GTID replica.
pub const NEW_MASTER: u16 = 3309;
/// Moving shards the load writes to (inside 1024-2047).
pub const MOVING: [u32; 6] = [1031, 1298, 1555, 1789, 1902, 2040];
/// Control shards the load writes to: on 3307 outside the moved range,
/// and on 3308.
pub const CONTROL: [u32; 4] = [211, 977, 2301, 3998];
/// 3309's AUTO_INCREMENT for the moving shards during a test.
pub const HIGH_LOCAL_ID: u64 = 1 << 34;

/// A marker unique to this run, put in every row's `data`.
pub fn marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{what}-{}-{nanos}", std::process::id())
}

/// Every shard the load writes to.
pub fn load_shards() -> Vec<u32> {
    MOVING.iter().chain(CONTROL.iter()).copied().collect()
}

/// `local_id`s of the rows of `db<shard>.pins` on `port` whose data starts
/// with `prefix`, with their data.
pub async fn rows_on(port: u16, shard: u32, prefix: &str) -> BTreeMap<u64, String> {
    let mut conn = common::direct(port).await;
    let rows: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT local_id, data FROM db{shard:05}.pins WHERE data LIKE '{prefix}%'"
        ))
        .await
        .expect("direct read");
    conn.disconnect().await.ok();
    rows.into_iter().collect()
}

/// One acknowledged insert.
#[derive(Debug, Clone)]
pub struct Acked {
    /// Its shard.
    pub shard: u32,
    /// The 64-bit ID the proxy answered.
    pub id: u64,
    /// The row's `data`.
    pub data: String,
    /// When the statement was sent.
    pub sent: Instant,
    /// When its answer arrived.
    pub acked: Instant,
}

impl Acked {
    /// Send to answer.
    pub fn latency(&self) -> Duration {
        self.acked - self.sent
    }
}

/// What one load task saw.
#[derive(Debug, Default)]
pub struct LoadLog {
    /// The client's label (e.g. the proxy it went through).
    pub client: String,
    /// Acknowledged inserts, in order.
    pub acked: Vec<Acked>,
    /// (shard, data, error text).
    pub errors: Vec<(u32, String, String)>,
}

/// One client connection inserting a pin every ~2 ms, round robin over
/// [`load_shards`] from an offset of `task`, until `stop`.
async fn load_task(
    proxy: SocketAddr,
    client: String,
    task: usize,
    mark: String,
    stop: Arc<AtomicBool>,
) -> LoadLog {
    let mut conn = common::connect_to(proxy, common::APP_USER, common::APP_PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("load client {client} login: {e}"));
    let shards = load_shards();
    let mut log = LoadLog {
        client,
        ..LoadLog::default()
    };
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let shard = shards[(task + n) % shards.len()];
        let data = format!("{mark}-{task}-{n}");
        let sent = Instant::now();
        match common::try_insert_pin(&mut conn, shard, &data).await {
            Ok(id) => log.acked.push(Acked {
                shard,
                id,
                data,
                sent,
                acked: Instant::now(),
            }),
            Err(error) => log.errors.push((shard, data, error.to_string())),
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    conn.disconnect().await.ok();
    log
}

/// Sets (or, with 1, resets to the smallest allowed) the AUTO_INCREMENT of
/// the moving shards' pins on the new master, without binlogging it.
async fn set_new_master_auto_increment(value: u64) {
    let mut conn = common::operations(NEW_MASTER).await;
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .expect("sql_log_bin = 0 on 3309");
    for shard in MOVING {
        conn.query_drop(format!(
            "ALTER TABLE db{shard:05}.pins AUTO_INCREMENT = {value}"
        ))
        .await
        .unwrap_or_else(|e| panic!("AUTO_INCREMENT of shard {shard} on 3309: {e}"));
    }
    conn.disconnect().await.ok();
}

/// 3307's `@@global.read_only`.
async fn read_only(port: u16) -> bool {
    let mut conn = common::operations(port).await;
    let value: Option<u8> = conn
        .query_first("SELECT @@global.read_only")
        .await
        .unwrap_or_else(|e| panic!("read_only of {port}: {e}"));
    conn.disconnect().await.ok();
    value == Some(1)
}

/// The load of a move test and the undoing of its traces on the fleet
/// however the test ends: the test calls [`MoveLoad::finish`]; if it fails
/// before that, `drop` does the same on a runtime of its own.
pub struct MoveLoad {
    /// Put in every row the load writes.
    pub mark: String,
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<LoadLog>>,
    old_master_read_only: bool,
    done: bool,
}

impl MoveLoad {
    /// Checks that 3309 replicates from 3307, notes 3307's `read_only`
    /// and raises 3309's AUTO_INCREMENT of the moving shards.
    pub async fn prepare(mark: String) -> Self {
        let (running, error) = common::replication_running(NEW_MASTER).await;
        assert!(
            running,
            "3309 must replicate from 3307 before the test: {error}"
        );
        let load = Self {
            mark,
            stop: Arc::new(AtomicBool::new(false)),
            tasks: Vec::new(),
            old_master_read_only: read_only(MASTER_A).await,
            done: false,
        };
        set_new_master_auto_increment(HIGH_LOCAL_ID).await;
        load
    }

    /// Starts one more load client through the proxy at `proxy`, labelled
    /// `client` in its log.
    pub fn spawn_client(&mut self, proxy: SocketAddr, client: &str) {
        let task = self.tasks.len();
        self.tasks.push(tokio::spawn(load_task(
            proxy,
            client.to_owned(),
            task,
            self.mark.clone(),
            self.stop.clone(),
        )));
    }

    /// Stops the load; what each client saw.
    pub async fn stop(&mut self) -> Vec<LoadLog> {
        self.stop.store(true, Ordering::SeqCst);
        let mut logs = Vec::new();
        for task in self.tasks.drain(..) {
            logs.push(task.await.expect("load task"));
        }
        logs
    }

    /// Where the load's rows are now, then the cleanup.
    pub async fn finish(&mut self) -> Placement {
        let placement = Placement::read(&self.mark).await;
        cleanup(&self.mark, self.old_master_read_only).await;
        self.done = true;
        placement
    }
}

impl Drop for MoveLoad {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.stop.store(true, Ordering::SeqCst);
        let tasks = std::mem::take(&mut self.tasks);
        let mark = self.mark.clone();
        let read_only = self.old_master_read_only;
        let undo = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            runtime.block_on(async move {
                for task in tasks {
                    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
                }
                cleanup(&mark, read_only).await;
            });
        });
        if undo.join().is_err() {
            eprintln!(
                "cleaning up after the shard move test failed: SET GLOBAL read_only = {} on 3307, START SLAVE on 3309 if stopped, delete the rows with data LIKE '{}%' on 3309 (sql_log_bin=0), 3307 and 3308, and reset 3309's AUTO_INCREMENT of the moving shards",
                u8::from(read_only),
                self.mark
            );
        }
    }
}

/// Puts 3307's `read_only` back to `read_only` and starts 3309's
/// replication if it was stopped. Deletes the test's rows:
/// first those only on 3309 (written through a proxy after the move),
/// straight on 3309 and not binlogged; then every test row on 3307 (the
/// deletes replicate to 3309) and 3308. Resets 3309's AUTO_INCREMENT of
/// the moving shards and waits for 3309 to catch up.
async fn cleanup(mark: &str, read_only: bool) {
    let mut master = common::operations(MASTER_A).await;
    master
        .query_drop(format!("SET GLOBAL read_only = {}", u8::from(read_only)))
        .await
        .expect("restore read_only on 3307");
    let mut replica = common::operations(NEW_MASTER).await;
    let (replicating, error) = common::replication_running(NEW_MASTER).await;
    if !replicating {
        eprintln!("3309 does not replicate from 3307 ({error}): START SLAVE");
        replica
            .query_drop("START SLAVE")
            .await
            .expect("START SLAVE on 3309");
    }
    replica
        .query_drop("SET SESSION sql_log_bin = 0")
        .await
        .expect("sql_log_bin = 0 on 3309");
    for shard in MOVING {
        let on_old = rows_on(MASTER_A, shard, mark).await;
        let keep: Vec<String> = on_old.keys().map(u64::to_string).collect();
        let not_from_3307 = if keep.is_empty() {
            String::new()
        } else {
            format!(" AND local_id NOT IN ({})", keep.join(","))
        };
        replica
            .query_drop(format!(
                "DELETE FROM db{shard:05}.pins WHERE data LIKE '{mark}%'{not_from_3307}"
            ))
            .await
            .unwrap_or_else(|e| panic!("delete the test's rows of shard {shard} on 3309: {e}"));
    }
    replica.disconnect().await.ok();
    set_new_master_auto_increment(1).await;
    for shard in load_shards() {
        common::delete_pins(common::main_master_port(shard), &[shard], mark).await;
    }
    let position: String = master
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .expect("gtid_binlog_pos of 3307")
        .unwrap_or_default();
    master.disconnect().await.ok();
    let mut replica = common::direct(NEW_MASTER).await;
    let _: Option<i64> = replica
        .query_first(format!("SELECT MASTER_GTID_WAIT('{position}', 10)"))
        .await
        .expect("MASTER_GTID_WAIT on 3309");
    replica.disconnect().await.ok();
}

/// The load's rows on the servers after a move: for each moving shard its
/// rows on the new master and on 3307; for each control shard its rows on
/// its master (`old`).
#[derive(Debug, Default)]
pub struct Placement {
    /// Moving shard → its rows on 3309 (`local_id` → data).
    pub new: BTreeMap<u32, BTreeMap<u64, String>>,
    /// Every load shard → its rows on the master it had before the move.
    pub old: BTreeMap<u32, BTreeMap<u64, String>>,
}

impl Placement {
    /// Reads the rows whose data starts with `mark`.
    async fn read(mark: &str) -> Self {
        let mut placement = Self::default();
        for shard in MOVING {
            placement
                .new
                .insert(shard, rows_on(NEW_MASTER, shard, mark).await);
        }
        for shard in load_shards() {
            let rows = rows_on(common::main_master_port(shard), shard, mark).await;
            placement.old.insert(shard, rows);
        }
        placement
    }
}

/// Counts of a move's checked writes.
#[derive(Debug, PartialEq, Eq)]
pub struct Checked {
    /// Writes to moving shards acknowledged before `before`.
    pub moving_before: usize,
    /// Writes to moving shards acknowledged after `switched`.
    pub moving_after: usize,
    /// Writes to control shards.
    pub control: usize,
}

/// Asserts where the acknowledged writes are: every write to a moving
/// shard on the new master; those acknowledged after `switched` (when a
/// proxy first routed the moved shards to their new master) not on 3307
/// and written on 3309 (a local id from its raised AUTO_INCREMENT); every
/// write to a control shard on its master; each write once and no row
/// nobody acknowledged. `before` is when the move began.
pub fn check_placement(
    acked: &[&Acked],
    placement: &Placement,
    before: Instant,
    switched: Instant,
) -> Checked {
    let mut checked = Checked {
        moving_before: 0,
        moving_after: 0,
        control: 0,
    };
    for write in acked {
        let local = common::decode(write.id).local_id;
        let text_in = |rows: &BTreeMap<u64, String>| rows.get(&local).cloned();
        let (id, shard, data) = (write.id, write.shard, write.data.as_str());
        let old = &placement.old[&shard];
        if CONTROL.contains(&shard) {
            checked.control += 1;
            assert_eq!(
                text_in(old).as_deref(),
                Some(data),
                "control write {id} (shard {shard}) is on its master"
            );
            continue;
        }
        assert_eq!(
            text_in(&placement.new[&shard]).as_deref(),
            Some(data),
            "acknowledged write {id} (shard {shard}, {data}) is on the new master"
        );
        if write.acked > switched {
            checked.moving_after += 1;
            assert_eq!(
                text_in(old),
                None,
                "write {id} (shard {shard}, {data}) acknowledged {:?} after the switch is on 3307",
                write.acked - switched
            );
            assert!(
                local >= HIGH_LOCAL_ID,
                "write {id} acknowledged after the switch has local id {local}: not from 3309"
            );
        }
        if write.acked < before {
            checked.moving_before += 1;
        }
    }
    let acked_data: BTreeSet<&str> = acked.iter().map(|w| w.data.as_str()).collect();
    assert_eq!(
        acked_data.len(),
        acked.len(),
        "each write acknowledged once"
    );
    for rows in placement.new.values() {
        for data in rows.values() {
            assert!(
                acked_data.contains(data.as_str()),
                "unacknowledged row {data} on 3309"
            );
        }
    }
    let rows_in = |hosts: &BTreeMap<u32, BTreeMap<u64, String>>, shards: &[u32]| -> usize {
        shards.iter().map(|shard| hosts[shard].len()).sum()
    };
    let acked_on = |shards: &[u32]| acked.iter().filter(|w| shards.contains(&w.shard)).count();
    assert_eq!(
        rows_in(&placement.new, &MOVING),
        acked_on(&MOVING),
        "each write to a moving shard once on 3309"
    );
    assert_eq!(
        rows_in(&placement.old, &CONTROL),
        acked_on(&CONTROL),
        "each write to a control shard once on its master"
    );
    checked
}
