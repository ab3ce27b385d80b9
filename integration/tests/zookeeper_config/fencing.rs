//! A proxy cut off from ZooKeeper (its connection black-holed by the
//! relay) keeps writing only until its session could have expired: then
//! it refuses writes, locking reads and the COMMIT of a transaction that
//! wrote, serves plain reads, and shows `fenced` in `SHOW CONFIG`; before
//! the server drops its registry entry (where a fleet-wide pause stops
//! waiting for it). Back in touch, it reads the document pushed meanwhile
//! and writes again.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use shardgate::control::zookeeper::Liveness;

use super::expiry::relay;
use super::*;

/// The shard the test writes on (master at 3307).
const SHARD: u32 = 517;
/// The prefix of the test's rows.
const TAG: &str = "zkfence";

/// Rows of the test with `data` starting with `tag`, read on the master.
async fn rows_tagged(tag: &str) -> u64 {
    let mut conn = direct(main_master_port(SHARD)).await;
    let count: Option<u64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM db{SHARD:05}.pins WHERE data LIKE '{tag}%'"
        ))
        .await
        .expect("direct count");
    conn.disconnect().await.ok();
    count.unwrap_or(0)
}

fn assert_fenced_refusal(error: mysql_async::Error, what: &str) {
    let (code, message) = server_error(error);
    assert_eq!(code, 1105, "{what}: {message}");
    assert!(
        message.contains("lost its ZooKeeper session at")
            && message.contains("another proxy may have moved shards"),
        "{what}: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_cut_off_from_zookeeper_stops_writing_before_its_session_can_expire() {
    let test = "fencing";
    clean(test).await;
    delete_pins(main_master_port(SHARD), &[SHARD], TAG).await;
    let direct_location = location(test);
    let first = push(&direct_location, &document(), None).await;
    let relay = relay(zk_hosts()).await;
    let through_relay = ZkLocation {
        hosts: vec![relay.addr.to_string()],
        path: direct_location.path.clone(),
    };
    let proxy = start(&through_relay, "fence-a");
    let zookeeper = proxy.control.zookeeper.clone().expect("ZooKeeper-sourced");
    let timeout = zookeeper.session_timeout().expect("a session");
    let client = raw_client().await;
    let entry_path = direct_location.registry_entry("fence-a");
    assert!(client.check_stat(&entry_path).await.unwrap().is_some());
    assert_eq!(show_config(&proxy).await["zookeeper"], "connected");
    let mut app_conn = app(&proxy).await;
    let mut transaction = app(&proxy).await;

    relay.blocked.store(true, Ordering::SeqCst);
    let blocked_at = Instant::now();
    // Within the session timeout writes still land.
    insert_pin(&mut app_conn, SHARD, &format!("{TAG}-before")).await;
    transaction.query_drop("BEGIN").await.expect("BEGIN");
    insert_pin(&mut transaction, SHARD, &format!("{TAG}-tx")).await;
    assert!(blocked_at.elapsed() < timeout / 2, "the writes were slow");

    let mut seen_disconnected = false;
    let fenced_after = loop {
        match zookeeper.liveness(&proxy.control.engine.fence) {
            Liveness::Fenced { .. } => break blocked_at.elapsed(),
            Liveness::Disconnected { .. } => seen_disconnected = true,
            Liveness::Connected => {}
        }
        assert!(
            blocked_at.elapsed() < timeout * 2,
            "not fenced within twice the session timeout"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    println!("fenced {fenced_after:?} after the cut (session timeout {timeout:?})");
    assert!(
        fenced_after < timeout,
        "fenced {fenced_after:?} after the cut, not before the session timeout {timeout:?}"
    );
    assert!(
        seen_disconnected,
        "SHOW CONFIG never said disconnected before the fence"
    );
    assert!(
        client.check_stat(&entry_path).await.unwrap().is_some(),
        "the entry went before the fence"
    );

    let refused = try_insert_pin(&mut app_conn, SHARD, &format!("{TAG}-refused")).await;
    assert_fenced_refusal(refused.expect_err("INSERT while fenced"), "INSERT");
    assert_eq!(rows_tagged(&format!("{TAG}-refused")).await, 0);
    let locking = app_conn
        .query_drop(format!(
            "SELECT data FROM db{SHARD:05}.pins WHERE local_id = 1 FOR UPDATE"
        ))
        .await;
    assert_fenced_refusal(locking.expect_err("FOR UPDATE while fenced"), "FOR UPDATE");
    let count: Option<u64> = app_conn
        .query_first(format!(
            "SELECT COUNT(*) FROM db{SHARD:05}.pins WHERE data = '{TAG}-before'"
        ))
        .await
        .expect("a plain read is served while fenced");
    assert_eq!(count, Some(1));
    let commit = transaction.query_drop("COMMIT").await;
    assert_fenced_refusal(commit.expect_err("COMMIT while fenced"), "COMMIT");
    transaction.query_drop("ROLLBACK").await.expect("ROLLBACK");
    assert_eq!(rows_tagged(&format!("{TAG}-tx")).await, 0);
    let shown = show_config(&proxy).await;
    assert!(shown["zookeeper"].starts_with("fenced since"), "{shown:?}");
    let samples = scrape_metrics(&proxy).await;
    assert_eq!(metric_sample(&samples, "shardgate_fenced"), 1.0);
    let since = metric_sample(&samples, "shardgate_fenced_since_timestamp_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        since > now - 60.0 && since <= now,
        "fenced since {since}, now {now}"
    );

    // The server drops the entry (a fleet-wide pause stops waiting for this
    // proxy there) only after the fence.
    let entry_gone_after = loop {
        if client.check_stat(&entry_path).await.unwrap().is_none() {
            break blocked_at.elapsed();
        }
        assert!(
            blocked_at.elapsed() < Duration::from_secs(15),
            "the session never expired"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!("entry gone {entry_gone_after:?} after the cut");
    assert!(fenced_after < entry_gone_after);

    let second = push(
        &direct_location,
        &document_with_account("fence"),
        Some(first.znode_version),
    )
    .await;
    assert!(proxy.control.engine.fence.is_raised());
    // Past the client's own expiry (1.4 x the session timeout).
    tokio::time::sleep((timeout * 3 / 2).saturating_sub(blocked_at.elapsed())).await;
    relay.blocked.store(false, Ordering::SeqCst);
    let unblocked_at = Instant::now();
    while proxy.control.engine.fence.is_raised() {
        assert!(
            unblocked_at.elapsed() < Duration::from_secs(25),
            "still fenced after the relay passed bytes again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let samples = scrape_metrics(&proxy).await;
    assert_eq!(metric_sample(&samples, "shardgate_fenced"), 0.0);
    assert_eq!(
        metric_sample(&samples, "shardgate_fenced_since_timestamp_seconds"),
        0.0
    );
    println!(
        "unfenced {:?} after the relay passed bytes again",
        unblocked_at.elapsed()
    );
    assert_eq!(
        proxy.control.config_status().version,
        second.version,
        "unfenced before the document pushed meanwhile was in force"
    );
    let id = insert_pin(&mut app_conn, SHARD, &format!("{TAG}-after")).await;
    assert_eq!(
        pin_on_host(id).await.as_deref(),
        Some(&*format!("{TAG}-after"))
    );
    assert!(can_log_in(&proxy, "zkcore_fence", "pw_fence").await);
    assert_eq!(show_config(&proxy).await["zookeeper"], "connected");

    app_conn.disconnect().await.ok();
    transaction.disconnect().await.ok();
    proxy.control.shutdown().await;
    drop(client);
    delete_pins(main_master_port(SHARD), &[SHARD], TAG).await;
    clean(test).await;
}

/// The prefix of the rows of the implicit-commit test.
const IMPLICIT_TAG: &str = "zkimplicit";

/// `value` as the sequence `db<SHARD>.zkimplicit_seq` holds it on its
/// master: the next value it would hand out.
async fn sequence_next(ops: &mut Conn) -> Option<i64> {
    ops.query_first(format!(
        "SELECT next_not_cached_value FROM db{SHARD:05}.zkimplicit_seq"
    ))
    .await
    .expect("read the sequence on its master")
}

/// Who holds the user lock `zkimplicit_lock` on each master (NULL: free).
async fn lock_holders() -> Vec<Option<u64>> {
    let mut holders = Vec::new();
    for port in [MASTER_A, MASTER_B] {
        let mut conn = direct(port).await;
        let holder: Option<Option<u64>> = conn
            .query_first("SELECT IS_USED_LOCK('zkimplicit_lock')")
            .await
            .expect("IS_USED_LOCK on a master");
        conn.disconnect().await.ok();
        holders.push(holder.flatten());
    }
    holders
}

/// While fenced, no statement makes the server commit a transaction that
/// wrote (`SET autocommit = 1`, `BEGIN`, `START TRANSACTION [READ ONLY |
/// READ WRITE]`, a schema change, COMMIT), and no statement writes through
/// a function (sequences, user locks, stored functions) whatever its form:
/// each is refused with the fence's error, and on the masters the rows
/// stay uncommitted, the sequence where it was, the lock free. A client
/// that leaves (disconnect, COM_RESET_CONNECTION) rolls its transaction
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_proxy_commits_no_transaction_and_writes_through_no_function() {
    let test = "fence-implicit";
    clean(test).await;
    let master = main_master_port(SHARD);
    delete_pins(master, &[SHARD], IMPLICIT_TAG).await;
    let mut ops = operations(master).await;
    ops.query_drop(format!(
        "CREATE OR REPLACE SEQUENCE db{SHARD:05}.zkimplicit_seq NOCACHE"
    ))
    .await
    .expect("create the sequence");
    ops.query_drop(format!("DROP TABLE IF EXISTS db{SHARD:05}.zkimplicit_t"))
        .await
        .expect("drop the DDL's table");
    let direct_location = location(test);
    push(&direct_location, &document(), None).await;
    let relay = relay(zk_hosts()).await;
    let through_relay = ZkLocation {
        hosts: vec![relay.addr.to_string()],
        path: direct_location.path.clone(),
    };
    let proxy = start(&through_relay, "fence-implicit");
    let timeout = proxy
        .control
        .zookeeper
        .as_ref()
        .and_then(|zookeeper| zookeeper.session_timeout())
        .expect("a ZooKeeper session");
    let mut reads = app(&proxy).await;
    let mut explicit = app(&proxy).await;
    let mut implicit = app(&proxy).await;
    let mut leaving = app(&proxy).await;
    let mut reset = app(&proxy).await;
    for conn in [&mut explicit, &mut leaving, &mut reset] {
        conn.query_drop("BEGIN").await.expect("BEGIN");
    }
    implicit
        .query_drop("SET autocommit = 0")
        .await
        .expect("autocommit off");
    for (conn, name) in [
        (&mut explicit, "explicit"),
        (&mut implicit, "implicit"),
        (&mut leaving, "leaving"),
        (&mut reset, "reset"),
    ] {
        insert_pin(conn, SHARD, &format!("{IMPLICIT_TAG}-{name}")).await;
    }
    let sequence_before = sequence_next(&mut ops).await;
    assert_eq!(lock_holders().await, vec![None, None]);

    relay.blocked.store(true, Ordering::SeqCst);
    let blocked_at = Instant::now();
    while !proxy.control.engine.fence.is_raised() {
        assert!(
            blocked_at.elapsed() < timeout * 2,
            "not fenced within twice the session timeout"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let uncommitted = |name: &str| format!("{IMPLICIT_TAG}-{name}");
    for statement in [
        "SET autocommit = 1".to_owned(),
        "SET autocommit = 1, sql_mode = @@sql_mode".to_owned(),
        "BEGIN".to_owned(),
        "START TRANSACTION".to_owned(),
        "START TRANSACTION READ ONLY".to_owned(),
        "START TRANSACTION READ WRITE".to_owned(),
        format!("CREATE TABLE db{SHARD:05}.zkimplicit_t (a INT)"),
        "COMMIT".to_owned(),
    ] {
        let refused = explicit.query_drop(&statement).await;
        assert_fenced_refusal(refused.expect_err(&statement), &statement);
        assert_eq!(
            rows_tagged(&uncommitted("explicit")).await,
            0,
            "{statement} committed the open transaction"
        );
    }
    for statement in [
        "SET autocommit = 1",
        "SET @@session.autocommit = ON",
        "BEGIN",
        "COMMIT",
    ] {
        let refused = implicit.query_drop(statement).await;
        assert_fenced_refusal(refused.expect_err(statement), statement);
        assert_eq!(
            rows_tagged(&uncommitted("implicit")).await,
            0,
            "{statement} committed the open transaction (autocommit off)"
        );
    }
    let tables: Option<u64> = ops
        .query_first(format!(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'db{SHARD:05}' AND TABLE_NAME = 'zkimplicit_t'"
        ))
        .await
        .expect("look for the DDL's table");
    assert_eq!(tables, Some(0), "the schema change ran while fenced");

    for statement in [
        // On the sequence's shard (its table has one row).
        format!("SELECT NEXTVAL(db{SHARD:05}.zkimplicit_seq) FROM db{SHARD:05}.zkimplicit_seq"),
        format!(
            "SELECT SETVAL(db{SHARD:05}.zkimplicit_seq, 1000) FROM db{SHARD:05}.zkimplicit_seq"
        ),
        format!("SELECT NEXTVAL(db{SHARD:05}.zkimplicit_seq)"),
        format!("SELECT SETVAL(db{SHARD:05}.zkimplicit_seq, 1000)"),
        format!("SET @v = NEXT VALUE FOR db{SHARD:05}.zkimplicit_seq"),
        format!("DO NEXTVAL(db{SHARD:05}.zkimplicit_seq)"),
        "SELECT GET_LOCK('zkimplicit_lock', 0)".to_owned(),
        "DO GET_LOCK('zkimplicit_lock', 0)".to_owned(),
        "SET @l = GET_LOCK('zkimplicit_lock', 0)".to_owned(),
        format!("SELECT GET_LOCK('zkimplicit_lock', 0) FROM db{SHARD:05}.pins LIMIT 1"),
        "SELECT RELEASE_ALL_LOCKS()".to_owned(),
        format!("SELECT db{SHARD:05}.zkimplicit_function()"),
    ] {
        let refused = reads.query_drop(&statement).await;
        assert_fenced_refusal(refused.expect_err(&statement), &statement);
    }
    assert_eq!(
        sequence_next(&mut ops).await,
        sequence_before,
        "the sequence moved while fenced"
    );
    assert_eq!(
        lock_holders().await,
        vec![None, None],
        "a user lock was taken while fenced"
    );
    // What only reads is served.
    let free: Option<u64> = reads
        .query_first("SELECT IS_FREE_LOCK('zkimplicit_lock')")
        .await
        .expect("IS_FREE_LOCK is served while fenced");
    assert_eq!(free, Some(1));
    reads
        .query_drop(format!(
            "SELECT LASTVAL(db{SHARD:05}.zkimplicit_seq), SLEEP(0) FROM db{SHARD:05}.pins LIMIT 1"
        ))
        .await
        .expect("LASTVAL and SLEEP are served while fenced");

    // Leaving rolls back.
    leaving.disconnect().await.expect("disconnect");
    reset.reset().await.expect("COM_RESET_CONNECTION");
    explicit.query_drop("ROLLBACK").await.expect("ROLLBACK");
    implicit.query_drop("ROLLBACK").await.expect("ROLLBACK");
    tokio::time::sleep(Duration::from_millis(200)).await;
    for name in ["explicit", "implicit", "leaving", "reset"] {
        assert_eq!(rows_tagged(&uncommitted(name)).await, 0, "{name}");
    }

    relay.blocked.store(false, Ordering::SeqCst);
    for conn in [reads, explicit, implicit, reset] {
        conn.disconnect().await.ok();
    }
    proxy.control.shutdown().await;
    ops.query_drop(format!(
        "DROP SEQUENCE IF EXISTS db{SHARD:05}.zkimplicit_seq"
    ))
    .await
    .ok();
    ops.query_drop(format!("DROP TABLE IF EXISTS db{SHARD:05}.zkimplicit_t"))
        .await
        .ok();
    ops.disconnect().await.ok();
    delete_pins(master, &[SHARD], IMPLICIT_TAG).await;
    clean(test).await;
}
