//! The full shard move under a steady write load, its cleanup, and a
//! transaction whose shard a reload moved.

use super::*;

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
