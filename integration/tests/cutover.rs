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

mod common;

use std::collections::{BTreeMap, BTreeSet};
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
    admin, app, delete_pins, insert_pin, replication_running, try_insert_pin, write_config,
    Deadline, RunningProxy, MASTER_A, MASTER_B,
};

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

/// Bound for what should be immediate, generous for a loaded machine.
const PROMPT: Duration = Duration::from_secs(2);

/// One cutover test at a time.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

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

/// A marker unique to this run, put in every row's `data`.
fn marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("cutover-{what}-{}-{nanos}", std::process::id())
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
    let _serial = serial().await;
    let proxy = common::start_server("cutover-wait", &yaml);
    let mark = marker("wait");
    let mut ops = admin(&proxy).await;
    admin_command(&mut ops, "PAUSE SHARDS 600-601 IN main").await;

    // Waits, then runs once RESUME comes.
    let mut waiting = app(&proxy).await;
    let data = format!("{mark}-waited");
    let waiter = tokio::spawn(async move {
        let id = try_insert_pin(&mut waiting, 600, &data).await;
        (id, Instant::now(), waiting)
    });
    // Another shard of the same host is not delayed.
    let mut other = app(&proxy).await;
    let started = Instant::now();
    insert_pin(&mut other, 602, &format!("{mark}-free")).await;
    assert!(
        started.elapsed() < PROMPT,
        "an unpaused shard took {:?}",
        started.elapsed()
    );
    until("the statement for shard 600 waits", || {
        paused_with(&proxy, 600, 601, 1)
    })
    .await;
    assert!(!waiter.is_finished(), "the statement for shard 600 waits");
    assert!(rows_on(MASTER_A, 600, &mark).await.is_empty());
    let resume_sent = Instant::now();
    let resumed = admin_command(&mut ops, "RESUME SHARDS 600-601 IN main").await;
    let (id, finished_at, _conn) = waiter.await.unwrap();
    let id = id.expect("the waiting statement succeeds after RESUME");
    assert!(
        finished_at >= resume_sent,
        "the statement finished before RESUME was sent"
    );
    assert_eq!(common::decode(id).shard, 600);
    let rows = rows_on(MASTER_A, 600, &mark).await;
    assert_eq!(rows.len(), 1, "the waiting statement ran once: {rows:?}");
    assert!(!resumed.is_empty(), "RESUME answers with a report");

    // Paused longer than pause.timeout_ms: a clear error, nothing written.
    admin_command(&mut ops, "PAUSE SHARDS 600-601 IN main").await;
    let started = Instant::now();
    let error = try_insert_pin(&mut other, 601, &format!("{mark}-timed-out"))
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
        waited >= Duration::from_millis(650) && waited < Duration::from_secs(5),
        "waited {waited:?}"
    );
    // A statement that touches no shard is not held either.
    let one: Option<u32> = other.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    admin_command(&mut ops, "RESUME SHARDS 600-601 IN main").await;
    assert!(rows_on(MASTER_A, 601, &mark).await.is_empty());
    // The session is usable afterwards.
    insert_pin(&mut other, 601, &format!("{mark}-after")).await;

    delete_pins(MASTER_A, &[600, 601, 602], &mark).await;
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
    let _serial = serial().await;
    let proxy = common::start_server("cutover-drain", &yaml);
    let mark = marker("drain");
    let mut ops = admin(&proxy).await;
    let mut tx = app(&proxy).await;
    tx.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut tx, 605, &format!("{mark}-1")).await;

    // PAUSE waits for the transaction; its statements go on meanwhile.
    let mut pausing_ops = admin(&proxy).await;
    let pausing = tokio::spawn(async move {
        let answer = pausing_ops.query_drop("PAUSE SHARDS 605-606 IN main").await;
        (answer, Instant::now())
    });
    until("PAUSE SHARDS 605-606 drains", || {
        paused_with(&proxy, 605, 606, 0)
    })
    .await;
    assert!(
        !pausing.is_finished(),
        "PAUSE waits for the open transaction"
    );
    let started = Instant::now();
    insert_pin(&mut tx, 605, &format!("{mark}-2")).await;
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    assert!(
        !pausing.is_finished(),
        "PAUSE waits for the open transaction"
    );
    // RESUME of a range whose PAUSE has not answered is refused.
    let refused = ops
        .query_drop("RESUME SHARDS 605-606 IN main")
        .await
        .unwrap_err();
    let (_, message) = common::server_error(refused);
    assert!(message.contains("still draining"), "{message}");
    let commit_sent = Instant::now();
    tx.query_drop("COMMIT").await.unwrap();
    let (answer, answered_at) = pausing.await.unwrap();
    answer.expect("PAUSE succeeds once the transaction committed");
    assert!(
        answered_at >= commit_sent,
        "PAUSE answered before the COMMIT was sent"
    );
    assert_eq!(rows_on(MASTER_A, 605, &mark).await.len(), 2);
    admin_command(&mut ops, "RESUME SHARDS 605-606 IN main").await;

    // A transaction that outlives drain_timeout_ms: PAUSE fails, is undone.
    tx.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut tx, 606, &format!("{mark}-3")).await;
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
    insert_pin(&mut other, 605, &format!("{mark}-4")).await;
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    tx.query_drop("ROLLBACK").await.unwrap();

    let rows = rows_on(MASTER_A, 606, &mark).await;
    assert!(rows.is_empty(), "the rolled back row is gone: {rows:?}");
    delete_pins(MASTER_A, &[605, 606], &mark).await;
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
        match try_insert_pin(&mut conn, shard, &data).await {
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
    let mut conn = common::operations(NEW_MASTER).await;
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

/// Pinterest's move of half a host's shards, under a steady write load:
/// PAUSE SHARDS 1024-2047, wait for 3309 to have every GTID of 3307, write
/// the config with 1024-2047 on 3309, RELOAD CONFIG, RESUME SHARDS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_move_under_load_loses_no_write() {
    let _serial = serial().await;
    let proxy = common::start_server("cutover", &common::test_config_yaml());
    let mark = marker("move");
    let (running, error) = replication_running(NEW_MASTER).await;
    assert!(
        running,
        "3309 must replicate from 3307 before the test: {error}"
    );
    let mut traces = MoveCleanup {
        mark: mark.clone(),
        stop: Arc::new(AtomicBool::new(false)),
        tasks: Vec::new(),
        done: false,
    };
    set_new_master_auto_increment(HIGH_LOCAL_ID).await;

    traces.tasks = (0..8)
        .map(|task| {
            tokio::spawn(load_task(
                proxy.listening.client,
                task,
                mark.clone(),
                traces.stop.clone(),
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
    write_config(&proxy.config_path, &new_yaml);
    let reloaded = admin_command(&mut ops, "RELOAD CONFIG").await;
    let resume_sent = Instant::now();
    let resumed = admin_command(&mut ops, "RESUME SHARDS 1024-2047").await;
    let resumed_at = Instant::now();
    let pause_took = resumed_at - pause_sent;

    tokio::time::sleep(Duration::from_millis(700)).await;
    let logs = traces.stop_load().await;

    // Collect what is where, then clean up, then judge.
    let mut on_new = BTreeMap::new();
    let mut on_old = BTreeMap::new();
    for shard in MOVING.iter().chain(CONTROL.iter()).copied() {
        on_new.insert(shard, rows_on(NEW_MASTER, shard, &mark).await);
        on_old.insert(shard, rows_on(MASTER_A, shard, &mark).await);
    }
    traces.run().await;
    let (still_replicating, replication_error) = replication_running(NEW_MASTER).await;

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

/// Undoes the shard move test's traces on the fleet however the test ends:
/// stops the load, deletes its rows and resets 3309's AUTO_INCREMENT. The
/// test calls [`MoveCleanup::run`]; if it fails before that, `drop` does
/// the same on a runtime of its own.
struct MoveCleanup {
    mark: String,
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<LoadLog>>,
    done: bool,
}

impl MoveCleanup {
    /// Stops the load; what each task saw.
    async fn stop_load(&mut self) -> Vec<LoadLog> {
        self.stop.store(true, Ordering::SeqCst);
        let mut logs = Vec::new();
        for task in self.tasks.drain(..) {
            logs.push(task.await.expect("load task"));
        }
        logs
    }

    async fn run(&mut self) {
        cleanup(&self.mark).await;
        self.done = true;
    }
}

impl Drop for MoveCleanup {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.stop.store(true, Ordering::SeqCst);
        let tasks = std::mem::take(&mut self.tasks);
        let mark = self.mark.clone();
        let undo = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            runtime.block_on(async move {
                for task in tasks {
                    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
                }
                cleanup(&mark).await;
            });
        });
        if undo.join().is_err() {
            eprintln!(
                "cleaning up after the shard move test failed: delete the rows with data LIKE '{}%' on 3309 (sql_log_bin=0) and 3307, and reset 3309's AUTO_INCREMENT of the moving shards",
                self.mark
            );
        }
    }
}

/// Deletes the test's rows: first those only on 3309 (written through the
/// proxy after the move), straight on 3309 and not binlogged; then every
/// test row on 3307 (the deletes replicate to 3309). Resets 3309's
/// AUTO_INCREMENT of the moving shards and waits for 3309 to catch up.
async fn cleanup(mark: &str) {
    let mut replica = common::operations(NEW_MASTER).await;
    replica
        .query_drop("SET SESSION sql_log_bin = 0")
        .await
        .unwrap();
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
            .unwrap();
    }
    replica.disconnect().await.ok();
    set_new_master_auto_increment(1).await;
    let written_on: Vec<u32> = MOVING.iter().chain(CONTROL.iter()).copied().collect();
    delete_pins(MASTER_A, &written_on, mark).await;
    let mut master = common::direct(MASTER_A).await;
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
    let _serial = serial().await;
    let proxy = common::start_server("cutover-moved", &common::test_config_yaml());
    let mark = marker("moved");
    let mut tx = app(&proxy).await;
    tx.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut tx, 1100, &format!("{mark}-1")).await;
    write_config(&proxy.config_path, &moved_yaml());
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

/// A TCP forwarder in front of a backend port, to break the proxy's
/// backend connections the way a network or a restarted server does.
struct Forwarder {
    addr: SocketAddr,
    state: Arc<ForwarderState>,
}

struct ForwarderState {
    port: u16,
    /// The first statement containing these bytes reaches the server, but
    /// its answer is lost with the connection.
    lose_answer_to: std::sync::Mutex<Option<Vec<u8>>>,
    /// The connections being forwarded.
    connections: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl Forwarder {
    async fn start(port: u16) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(ForwarderState {
            port,
            lose_answer_to: std::sync::Mutex::new(None),
            connections: std::sync::Mutex::new(Vec::new()),
        });
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let connection = tokio::spawn(forward(client, accepting.clone()));
                accepting.connections.lock().unwrap().push(connection);
            }
        });
        Forwarder { addr, state }
    }

    /// Loses the answer to the next statement containing `marker`.
    fn lose_answer_to(&self, marker: &str) {
        *self.state.lose_answer_to.lock().unwrap() = Some(marker.as_bytes().to_vec());
    }

    /// Closes every connection it forwards (both sides) and returns once
    /// they are closed.
    async fn close_all(&self) {
        let connections = std::mem::take(&mut *self.state.connections.lock().unwrap());
        for connection in connections {
            connection.abort();
            let _ = connection.await;
        }
    }
}

impl ForwarderState {
    /// Whether `sent` carries the statement whose answer is to be lost
    /// (once).
    fn take_lost(&self, sent: &[u8]) -> bool {
        let mut lose = self.lose_answer_to.lock().unwrap();
        let hit = lose
            .as_deref()
            .is_some_and(|marker| sent.windows(marker.len()).any(|w| w == marker));
        if hit {
            *lose = None;
        }
        hit
    }
}

/// Forwards one connection both ways until either side closes, or until
/// the server answers a statement whose answer is to be lost.
async fn forward(client: TcpStream, state: Arc<ForwarderState>) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", state.port)).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let doomed = AtomicBool::new(false);
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if state.take_lost(&buf[..n]) {
                doomed.store(true, Ordering::SeqCst);
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if doomed.load(Ordering::SeqCst) {
                return;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// A proxy whose master B (shards 2048-4095 of main) is reached through
/// `forwarder`.
fn proxy_through(name: &str, forwarder: &Forwarder) -> RunningProxy {
    let yaml = common::test_config_yaml();
    let through = yaml.replace(
        "      - { range: [2048, 4095], master: 127.0.0.1:3308 }\n",
        &format!(
            "      - {{ range: [2048, 4095], master: {} }}\n",
            forwarder.addr
        ),
    );
    assert_ne!(
        through, yaml,
        "the host lines of config/shardgate.yaml changed"
    );
    common::start_server(name, &through)
}

/// Deletes the rows of `db03000.pins` on 3308 marked `mark`; those left.
async fn take_rows_on_b(mark: &str) -> BTreeMap<u64, String> {
    let rows = rows_on(MASTER_B, 3000, mark).await;
    delete_pins(MASTER_B, &[3000], mark).await;
    rows
}

/// An autocommit INSERT the server ran, whose answer was then lost with the
/// connection, is not sent again on another connection (it would be
/// written twice): the client gets the lost connection, told the statement
/// may have run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_whose_answer_is_lost_is_not_sent_again() {
    let _serial = serial().await;
    let forwarder = Forwarder::start(MASTER_B).await;
    let proxy = proxy_through("cutover-lost", &forwarder);
    let mark = marker("lost");
    let mut conn = app(&proxy).await;
    // Leaves a pooled connection to B, which the next statement reuses.
    insert_pin(&mut conn, 3000, &format!("{mark}-warm")).await;
    let lost = format!("{mark}-lost");
    forwarder.lose_answer_to(&lost);
    let result = try_insert_pin(&mut conn, 3000, &lost).await;
    let after = try_insert_pin(&mut conn, 3000, &format!("{mark}-after")).await;
    let rows = take_rows_on_b(&lost).await;
    take_rows_on_b(&mark).await;

    let (code, message) = common::server_error(result.expect_err("the answer was lost"));
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("127.0.0.1:") && message.contains("may have run"),
        "{message}"
    );
    assert_eq!(rows.len(), 1, "the INSERT ran exactly once: {rows:?}");
    after.expect("the session goes on");
}

/// A pooled connection that the server closed while it sat idle is replaced
/// before the statement is sent: the statement succeeds, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_closed_while_idle_is_replaced() {
    let _serial = serial().await;
    let forwarder = Forwarder::start(MASTER_B).await;
    let proxy = proxy_through("cutover-stale", &forwarder);
    let mark = marker("stale");
    let mut conn = app(&proxy).await;
    insert_pin(&mut conn, 3000, &format!("{mark}-warm")).await;
    forwarder.close_all().await;
    // A round trip through the proxy (on host A): by its end the proxy has
    // seen B's connection close.
    insert_pin(&mut conn, 10, &format!("{mark}-a")).await;
    let after = format!("{mark}-after");
    let result = try_insert_pin(&mut conn, 3000, &after).await;
    let rows = take_rows_on_b(&after).await;
    take_rows_on_b(&mark).await;
    delete_pins(MASTER_A, &[10], &mark).await;

    result.expect("a stale pooled connection is replaced before anything is sent on it");
    assert_eq!(rows.len(), 1, "{rows:?}");
}
