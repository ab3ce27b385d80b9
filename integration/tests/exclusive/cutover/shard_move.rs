//! The full shard move under a steady write load, its cleanup, and a
//! transaction whose shard a reload moved.

use super::*;
use move_load::{check_placement, MoveLoad};

/// Pinterest's move of half a host's shards, under a steady write load:
/// PAUSE SHARDS 1024-2047, wait for 3309 to have every GTID of 3307, write
/// the config with 1024-2047 on 3309, RELOAD CONFIG, RESUME SHARDS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_move_under_load_loses_no_write() {
    let _serial = serial().await;
    let proxy = common::start_server("cutover", &common::test_config_yaml());
    let mut load = MoveLoad::prepare(marker("cutover-move")).await;
    for task in 0..8 {
        load.spawn_client(proxy.listening.client, &format!("client-{task}"));
    }
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
    let logs = load.stop().await;
    // Collect what is where, then clean up, then judge.
    let (still_replicating, replication_error) = common::replication_running(NEW_MASTER).await;
    let placement = load.finish().await;

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
    let checked = check_placement(&acked, &placement, pause_sent, resumed_at);
    assert!(checked.moving_before > 0 && checked.moving_after > 0);
    println!(
        "moving shards: {} writes before PAUSE, {} after RESUME; {} to control shards",
        checked.moving_before, checked.moving_after, checked.control
    );
}

/// A transaction open on a shard that a reload (without a pause) moves to
/// another master is not committed on the old one: COMMIT rolls it back
/// there and fails with 1213.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_after_the_shard_moved_is_rolled_back() {
    let _serial = serial().await;
    let proxy = common::start_server("cutover-moved", &common::test_config_yaml());
    let mark = marker("cutover-moved");
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
