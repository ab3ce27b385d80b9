//! Cutover pause against the real fleet: statements for paused shards wait
//! and run after RESUME (or fail clearly after `pause.timeout_ms`), open
//! transactions hold a pause off until they end, and the full shard move
//! (Pinterest's third way: shards 1024-2047 of 3307 move to its GTID
//! replica 3309) under a steady write load loses no acknowledged write.
//!
//! Fleet hygiene: rows written through the proxy onto 3309 are deleted
//! straight on 3309 (not binlogged), and every test row on 3307 is deleted
//! there (the delete replicates), so 3309 keeps replicating.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use common::{RunningProxy, MASTER_A};

/// The new master: 3307's GTID replica.
const NEW_MASTER: u16 = 3309;
/// Moving shards the load writes to (inside 1024-2047).
const MOVING: [u32; 6] = [1031, 1298, 1555, 1789, 1902, 2040];
/// Control shards the load writes to (0-1023, staying on 3307).
const CONTROL: [u32; 2] = [211, 977];
/// 3309's AUTO_INCREMENT for the moving shards during the test: rows the
/// proxy writes there cannot collide with rows another test writes on 3307
/// meanwhile (a duplicate key would stop replication).
const HIGH_LOCAL_ID: u64 = 1 << 34;

/// A marker unique to this run, put in every row's `data`.
fn marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("cutover-{what}-{}-{nanos}", std::process::id())
}

async fn admin(proxy: &RunningProxy) -> Conn {
    let addr: SocketAddr = proxy
        .listening
        .admin
        .expect("the test config has an admin port");
    common::connect_to(addr, "admin", "admin")
        .await
        .expect("admin login")
}

async fn app(proxy: &RunningProxy) -> Conn {
    common::connect_to(
        proxy.listening.client,
        common::APP_USER,
        common::APP_PASSWORD,
    )
    .await
    .expect("client login")
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

/// Replaces the proxy's config file atomically (temporary file + rename).
fn write_config(proxy: &RunningProxy, yaml: &str) {
    let temp = proxy.config_path.with_extension("yaml.new");
    std::fs::write(&temp, yaml).unwrap();
    std::fs::rename(&temp, &proxy.config_path).unwrap();
}

/// `INSERT` of one pin on `shard`; its 64-bit ID.
async fn insert_pin(conn: &mut Conn, shard: u32, data: &str) -> mysql_async::Result<u64> {
    conn.query_drop(format!(
        "INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('{data}')"
    ))
    .await?;
    Ok(conn.last_insert_id().unwrap_or(0))
}

/// `local_id`s of the rows of `db<shard>.pins` on `port` whose data starts
/// with `prefix`, with their data.
async fn rows_on(port: u16, shard: u32, prefix: &str) -> BTreeMap<u64, String> {
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

/// A statement for a paused shard waits and completes after RESUME; one
/// for an unpaused shard is not delayed; one that waits longer than
/// `pause.timeout_ms` fails with the clear error and never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_statements_wait_for_resume_or_time_out() {
    let yaml = common::test_config_yaml()
        .replace("pause: { timeout_ms: 5000,", "pause: { timeout_ms: 700,");
    assert!(yaml.contains("timeout_ms: 700,"), "the pause section moved");
    let proxy = common::start_server("cutover-wait", &yaml);
    let mark = marker("wait");
    let mut ops = admin(&proxy).await;
    admin_command(&mut ops, "PAUSE SHARDS 600-601 IN main").await;

    // Waits, then runs once RESUME comes.
    let mut waiting = app(&proxy).await;
    let data = format!("{mark}-waited");
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let id = insert_pin(&mut waiting, 600, &data).await;
        (id, started.elapsed(), waiting)
    });
    // Another shard of the same host is not delayed.
    let mut other = app(&proxy).await;
    let started = Instant::now();
    insert_pin(&mut other, 602, &format!("{mark}-free"))
        .await
        .expect("unpaused shard");
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "an unpaused shard took {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the statement for shard 600 waits");
    assert!(rows_on(MASTER_A, 600, &mark).await.is_empty());
    let resumed = admin_command(&mut ops, "RESUME SHARDS 600-601 IN main").await;
    let (id, waited, _conn) = waiter.await.unwrap();
    let id = id.expect("the waiting statement succeeds after RESUME");
    assert!(waited >= Duration::from_millis(300), "waited {waited:?}");
    assert_eq!(common::decode(id).shard, 600);
    let rows = rows_on(MASTER_A, 600, &mark).await;
    assert_eq!(rows.len(), 1, "the waiting statement ran once: {rows:?}");
    assert!(!resumed.is_empty(), "RESUME answers with a report");

    // Paused longer than pause.timeout_ms: a clear error, nothing written.
    admin_command(&mut ops, "PAUSE SHARDS 600-601 IN main").await;
    let started = Instant::now();
    let error = insert_pin(&mut other, 601, &format!("{mark}-timed-out"))
        .await
        .unwrap_err();
    let waited = started.elapsed();
    let (code, message) = common::server_error(error);
    assert_eq!(code, 1205, "{message}");
    assert!(
        message.contains("shard 601 of fleet main is paused") && message.contains("retry"),
        "{message}"
    );
    assert!(
        waited >= Duration::from_millis(650) && waited < Duration::from_millis(2000),
        "waited {waited:?}"
    );
    // A statement that touches no shard is not held either.
    let one: Option<u32> = other.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    admin_command(&mut ops, "RESUME SHARDS 600-601 IN main").await;
    assert!(rows_on(MASTER_A, 601, &mark).await.is_empty());
    // The session is usable afterwards.
    insert_pin(&mut other, 601, &format!("{mark}-after"))
        .await
        .unwrap();

    let mut direct = common::direct(MASTER_A).await;
    for shard in [600, 601, 602] {
        direct
            .query_drop(format!(
                "DELETE FROM db{shard:05}.pins WHERE data LIKE '{mark}%'"
            ))
            .await
            .unwrap();
    }
}

/// PAUSE waits for an open transaction on a paused shard to end; the
/// transaction's own statements do not wait (they would deadlock the
/// drain); a pause whose drain times out is undone and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_drains_open_transactions() {
    let yaml =
        common::test_config_yaml().replace("drain_timeout_ms: 5000 }", "drain_timeout_ms: 1500 }");
    assert!(
        yaml.contains("drain_timeout_ms: 1500"),
        "the pause section moved"
    );
    let proxy = common::start_server("cutover-drain", &yaml);
    let mark = marker("drain");
    let mut ops = admin(&proxy).await;
    let mut tx = app(&proxy).await;
    tx.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut tx, 605, &format!("{mark}-1"))
        .await
        .unwrap();

    // PAUSE waits for the transaction; its statements go on meanwhile.
    let admin_addr = proxy.listening.admin.unwrap();
    let pausing = tokio::spawn(async move {
        let mut ops = common::connect_to(admin_addr, "admin", "admin")
            .await
            .unwrap();
        let started = Instant::now();
        let answer = ops.query_drop("PAUSE SHARDS 605-606 IN main").await;
        (answer, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !pausing.is_finished(),
        "PAUSE waits for the open transaction"
    );
    let started = Instant::now();
    insert_pin(&mut tx, 605, &format!("{mark}-2"))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(300));
    tx.query_drop("COMMIT").await.unwrap();
    let (answer, waited) = pausing.await.unwrap();
    answer.expect("PAUSE succeeds once the transaction committed");
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert_eq!(rows_on(MASTER_A, 605, &mark).await.len(), 2);
    admin_command(&mut ops, "RESUME SHARDS 605-606 IN main").await;

    // A transaction that outlives drain_timeout_ms: PAUSE fails, is undone.
    tx.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut tx, 606, &format!("{mark}-3"))
        .await
        .unwrap();
    let error = ops
        .query_drop("PAUSE SHARDS 605-606 IN main")
        .await
        .unwrap_err();
    let (_, message) = common::server_error(error);
    assert!(
        message.contains("shard 606: 1") && message.contains("undone"),
        "{message}"
    );
    // Nothing is paused: other sessions' statements run at once.
    let mut other = app(&proxy).await;
    let started = Instant::now();
    insert_pin(&mut other, 605, &format!("{mark}-4"))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(300));
    tx.query_drop("ROLLBACK").await.unwrap();

    let mut direct = common::direct(MASTER_A).await;
    let rows = rows_on(MASTER_A, 606, &mark).await;
    assert!(rows.is_empty(), "the rolled back row is gone: {rows:?}");
    for shard in [605, 606] {
        direct
            .query_drop(format!(
                "DELETE FROM db{shard:05}.pins WHERE data LIKE '{mark}%'"
            ))
            .await
            .unwrap();
    }
}

/// What one load task saw.
#[derive(Debug, Default)]
struct LoadLog {
    /// (shard, 64-bit ID, data, acknowledged at).
    acked: Vec<(u32, u64, String, Instant)>,
    /// (shard, data, error text).
    errors: Vec<(u32, String, String)>,
}

/// One client connection inserting pins on its shards until `stop`.
async fn load_task(
    client: SocketAddr,
    task: usize,
    mark: String,
    stop: Arc<AtomicBool>,
) -> LoadLog {
    let mut conn = common::connect_to(client, common::APP_USER, common::APP_PASSWORD)
        .await
        .expect("load client login");
    let shards: Vec<u32> = MOVING.iter().chain(CONTROL.iter()).copied().collect();
    let mut log = LoadLog::default();
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let shard = shards[(task + n) % shards.len()];
        let data = format!("{mark}-{task}-{n}");
        match insert_pin(&mut conn, shard, &data).await {
            Ok(id) => log.acked.push((shard, id, data, Instant::now())),
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
    let mut conn = common::direct(NEW_MASTER).await;
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .unwrap();
    for shard in MOVING {
        conn.query_drop(format!(
            "ALTER TABLE db{shard:05}.pins AUTO_INCREMENT = {value}"
        ))
        .await
        .unwrap();
    }
    conn.disconnect().await.ok();
}

/// Whether 3309's replication threads both run.
async fn replication_running() -> (bool, String) {
    let mut conn = common::direct(NEW_MASTER).await;
    let row: Option<Row> = conn.query_first("SHOW SLAVE STATUS").await.unwrap();
    let row = row.expect("3309 is a replica");
    let field = |name: &str| -> String {
        row.get_opt::<String, _>(name)
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    let running = field("Slave_IO_Running") == "Yes" && field("Slave_SQL_Running") == "Yes";
    (running, field("Last_Error"))
}

/// Pinterest's move of half a host's shards, under a steady write load:
/// PAUSE SHARDS 1024-2047, wait for 3309 to have every GTID of 3307, write
/// the config with 1024-2047 on 3309, RELOAD CONFIG, RESUME SHARDS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_move_under_load_loses_no_write() {
    let proxy = common::start_server("cutover", &common::test_config_yaml());
    let mark = marker("move");
    let (running, error) = replication_running().await;
    assert!(
        running,
        "3309 must replicate from 3307 before the test: {error}"
    );
    set_new_master_auto_increment(HIGH_LOCAL_ID).await;

    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            tokio::spawn(load_task(
                proxy.listening.client,
                task,
                mark.clone(),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;

    let mut ops = admin(&proxy).await;
    let mut master = common::direct(MASTER_A).await;
    let mut replica = common::direct(NEW_MASTER).await;
    let new_yaml = moved_yaml();

    let pause_sent = Instant::now();
    let paused = admin_command(&mut ops, "PAUSE SHARDS 1024-2047").await;
    let paused_at = Instant::now();
    let position: String = master
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let caught_up: Option<i64> = replica
        .query_first(format!("SELECT MASTER_GTID_WAIT('{position}', 5)"))
        .await
        .unwrap();
    write_config(&proxy, &new_yaml);
    let reloaded = admin_command(&mut ops, "RELOAD CONFIG").await;
    let resume_sent = Instant::now();
    let resumed = admin_command(&mut ops, "RESUME SHARDS 1024-2047").await;
    let resumed_at = Instant::now();
    let pause_took = resumed_at - pause_sent;

    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::SeqCst);
    let mut logs = Vec::new();
    for task in tasks {
        logs.push(task.await.unwrap());
    }

    // Collect what is where, then clean up, then judge.
    let mut on_new = BTreeMap::new();
    let mut on_old = BTreeMap::new();
    for shard in MOVING.iter().chain(CONTROL.iter()).copied() {
        on_new.insert(shard, rows_on(NEW_MASTER, shard, &mark).await);
        on_old.insert(shard, rows_on(MASTER_A, shard, &mark).await);
    }
    cleanup(&mark, &on_old).await;
    let (still_replicating, replication_error) = replication_running().await;

    println!(
        "PAUSE answered in {:?} ({paused:?}), GTID wait {:?}, RELOAD {reloaded:?}, RESUME {resumed:?}; pause to resume {pause_took:?}",
        paused_at - pause_sent,
        resume_sent - paused_at,
    );
    let errors: Vec<_> = logs.iter().flat_map(|log| log.errors.iter()).collect();
    let acked: Vec<_> = logs.iter().flat_map(|log| log.acked.iter()).collect();
    println!(
        "{} writes acknowledged, {} errors",
        acked.len(),
        errors.len()
    );
    assert!(
        still_replicating,
        "3309 stopped replicating: {replication_error}"
    );
    assert_eq!(caught_up, Some(0), "3309 caught up with {position}");
    assert!(errors.is_empty(), "statements failed: {errors:#?}");
    assert!(
        pause_took < Duration::from_secs(1),
        "PAUSE to RESUME took {pause_took:?}"
    );

    let mut moved_after_resume = 0;
    let mut moved_before_pause = 0;
    for (shard, id, data, acked_at) in &acked {
        let local = common::decode(*id).local_id;
        let local_text = |rows: &BTreeMap<u64, String>| rows.get(&local).cloned();
        let (new_rows, old_rows) = (&on_new[shard], &on_old[shard]);
        if CONTROL.contains(shard) {
            assert_eq!(
                local_text(old_rows).as_deref(),
                Some(data.as_str()),
                "control write {id} (shard {shard}) is on 3307"
            );
            continue;
        }
        assert_eq!(
            local_text(new_rows).as_deref(),
            Some(data.as_str()),
            "acknowledged write {id} (shard {shard}, {data}) is on the new master"
        );
        if *acked_at > resumed_at {
            moved_after_resume += 1;
            assert_eq!(
                local_text(old_rows),
                None,
                "write {id} acknowledged after RESUME is not on 3307"
            );
        }
        if *acked_at < pause_sent {
            moved_before_pause += 1;
        }
    }
    assert!(moved_before_pause > 0 && moved_after_resume > 0);
    // Every row the load wrote was acknowledged, once.
    let acked_data: BTreeSet<&str> = acked.iter().map(|(_, _, d, _)| d.as_str()).collect();
    assert_eq!(acked_data.len(), acked.len());
    for shard in MOVING {
        for data in on_new[&shard].values() {
            assert!(
                acked_data.contains(data.as_str()),
                "unacknowledged row {data}"
            );
        }
    }
    let rows_written = |hosts: &BTreeMap<u32, BTreeMap<u64, String>>, shards: &[u32]| -> usize {
        shards.iter().map(|shard| hosts[shard].len()).sum()
    };
    let acked_on = |shards: &[u32]| acked.iter().filter(|(s, ..)| shards.contains(s)).count();
    assert_eq!(
        rows_written(&on_new, &MOVING),
        acked_on(&MOVING),
        "each write once"
    );
    assert_eq!(
        rows_written(&on_old, &CONTROL),
        acked_on(&CONTROL),
        "each write once"
    );
    println!(
        "moving shards: {moved_before_pause} writes before PAUSE, {moved_after_resume} after RESUME"
    );
}

/// Deletes the test's rows: first those only on 3309 (written through the
/// proxy after the move), straight on 3309 and not binlogged; then every
/// test row on 3307 (the deletes replicate to 3309). Resets 3309's
/// AUTO_INCREMENT of the moving shards and waits for 3309 to catch up.
async fn cleanup(mark: &str, on_old: &BTreeMap<u32, BTreeMap<u64, String>>) {
    let mut replica = common::direct(NEW_MASTER).await;
    replica
        .query_drop("SET SESSION sql_log_bin = 0")
        .await
        .unwrap();
    for shard in MOVING {
        let keep: Vec<String> = on_old[&shard].keys().map(u64::to_string).collect();
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
            .unwrap();
    }
    replica.disconnect().await.ok();
    set_new_master_auto_increment(1).await;
    let mut master = common::direct(MASTER_A).await;
    for shard in MOVING.iter().chain(CONTROL.iter()) {
        master
            .query_drop(format!(
                "DELETE FROM db{shard:05}.pins WHERE data LIKE '{mark}%'"
            ))
            .await
            .unwrap();
    }
    let position: String = master
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let mut replica = common::direct(NEW_MASTER).await;
    let _: Option<i64> = replica
        .query_first(format!("SELECT MASTER_GTID_WAIT('{position}', 10)"))
        .await
        .unwrap();
}

/// A transaction open on a shard that a reload (without a pause) moves to
/// another master is not committed on the old one: COMMIT rolls it back
/// there and fails with 1213.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_after_the_shard_moved_is_rolled_back() {
    let proxy = common::start_server("cutover-moved", &common::test_config_yaml());
    let mark = marker("moved");
    let mut tx = app(&proxy).await;
    tx.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut tx, 1100, &format!("{mark}-1"))
        .await
        .unwrap();
    write_config(&proxy, &moved_yaml());
    let mut ops = admin(&proxy).await;
    admin_command(&mut ops, "RELOAD CONFIG").await;
    let error = tx.query_drop("COMMIT").await.unwrap_err();
    let (code, message) = common::server_error(error);
    assert_eq!(code, 1213, "{message}");
    assert!(
        message.contains("moved from 127.0.0.1:3307 to 127.0.0.1:3309")
            && message.contains("rolled back"),
        "{message}"
    );
    assert!(rows_on(MASTER_A, 1100, &mark).await.is_empty());
    assert!(rows_on(NEW_MASTER, 1100, &mark).await.is_empty());
    // The session is out of the transaction and usable.
    let one: Option<u32> = tx.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}
