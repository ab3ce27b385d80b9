//! Shard pauses: statements for paused shards wait for RESUME or time out,
//! and PAUSE drains open transactions first.

use super::*;

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
    let mark = marker("cutover-wait");
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
/// drain); a pause whose drain times out is undone and says why; a
/// transaction idle during the pause is rolled back so the pause completes.
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
    let mark = marker("cutover-drain");
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

    // A transaction whose statement runs past drain_timeout_ms: PAUSE
    // fails, is undone.
    tx.query_drop("BEGIN").await.unwrap();
    let busy_id = insert_pin(&mut tx, 606, &format!("{mark}-3")).await;
    let busy = common::update_pin_slowly(tx, busy_id, 2.5);
    tokio::time::sleep(Duration::from_millis(200)).await;
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
    let (mut tx, answer) = busy.await.unwrap();
    answer.expect("the long UPDATE");
    tx.query_drop("ROLLBACK").await.unwrap();
    let rows = rows_on(MASTER_A, 606, &mark).await;
    assert!(rows.is_empty(), "the rolled back row is gone: {rows:?}");

    // A transaction that sits idle on a shard being paused is rolled back
    // after 3/4 of drain_timeout_ms, so the PAUSE completes; the client's
    // next statement is told (1213, retry the transaction) and the session
    // goes on.
    tx.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut tx, 606, &format!("{mark}-5")).await;
    let started = Instant::now();
    admin_command(&mut ops, "PAUSE SHARDS 605-606 IN main").await;
    let took = started.elapsed();
    eprintln!("PAUSE beside an idle transaction took {took:?}");
    assert!(took >= Duration::from_millis(1000), "{took:?}");
    let rows = rows_on(MASTER_A, 606, &mark).await;
    assert!(
        rows.is_empty(),
        "the idle transaction was rolled back: {rows:?}"
    );
    admin_command(&mut ops, "RESUME SHARDS 605-606 IN main").await;
    let error = tx.query_drop("COMMIT").await.unwrap_err();
    let (code, message) = common::server_error(error);
    assert_eq!(code, 1213, "{message}");
    assert!(
        message.contains("shard 606 of fleet main") && message.contains("pause.drain_timeout_ms"),
        "{message}"
    );
    let rows = rows_on(MASTER_A, 606, &mark).await;
    assert!(rows.is_empty(), "nothing was committed: {rows:?}");
    insert_pin(&mut tx, 606, &format!("{mark}-6")).await;
    assert_eq!(
        rows_on(MASTER_A, 606, &mark).await.len(),
        1,
        "autocommit again"
    );
    // A client that sends ROLLBACK is answered OK.
    tx.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut tx, 605, &format!("{mark}-7")).await;
    admin_command(&mut ops, "PAUSE SHARDS 605-606 IN main").await;
    admin_command(&mut ops, "RESUME SHARDS 605-606 IN main").await;
    tx.query_drop("ROLLBACK")
        .await
        .expect("ROLLBACK after the proxy rolled back");
    assert_eq!(
        rows_on(MASTER_A, 605, &mark).await.len(),
        3,
        "-1, -2 and -4, not the rolled back -7"
    );
    delete_pins(MASTER_A, &[605, 606], &mark).await;
}
