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
