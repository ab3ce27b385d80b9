//! Replica promotions: refusals that change nothing, stopping replication on
//! the replica, and the pause that holds a master's shards until the swap.

use super::*;

#[tokio::test]
async fn refused_promotions_change_nothing() {
    let _serial = serial().await;
    // Every fleet on 3310 (mod, photos) gets the dead replica, so the
    // promotion of 3310 reaches it.
    let yaml = base_yaml()
        .replace(
            "      - { range: [0, 4095], master: 127.0.0.1:3310 }\n",
            "      - { range: [0, 4095], master: 127.0.0.1:3310, replica: 127.0.0.1:1 }\n",
        )
        .replace(
            "      - { range: [0, 15], master: 127.0.0.1:3310 }\n",
            "      - { range: [0, 15], master: 127.0.0.1:3310, replica: 127.0.0.1:1 }\n",
        );
    assert_eq!(
        yaml.matches("master: 127.0.0.1:3310, replica: 127.0.0.1:1")
            .count(),
        yaml.matches("master: 127.0.0.1:3310").count(),
        "a fleet on 3310 kept no replica:\n{yaml}"
    );
    let proxy = start_server("reload-d", &yaml);
    let engine = proxy.engine.clone();
    let control = proxy.control.clone();
    let version = control.config_status().version;
    let options = KEEP_REPLICATION;

    let error = control
        .promote_replica("127.0.0.1:9999", options)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, FailoverError::NotPromotable(_)),
        "{message}"
    );
    assert!(
        message.contains("127.0.0.1:9999 is not the master of any shard range (masters: 127.0.0.1:3307, 127.0.0.1:3308, 127.0.0.1:3310)"),
        "{message}"
    );

    let message = control
        .promote_replica("127.0.0.1:3308", options)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("fleet main: shards 2048-4095 on master 127.0.0.1:3308 have no replica"),
        "{message}"
    );

    let started = Instant::now();
    let error = control
        .promote_replica("127.0.0.1:3310", options)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, FailoverError::ReplicaDown { .. }),
        "{message}"
    );
    assert!(
        message.contains("replica 127.0.0.1:1 does not answer"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));

    assert_eq!(std::fs::read_to_string(&proxy.config_path).unwrap(), yaml);
    assert_eq!(control.config_status().version, version);
    assert!(control.config_status().last_reload.is_none());
    assert_eq!(main_master(&engine, 0), "127.0.0.1:3307");
}

/// Puts 3309 back as the GTID replica of 3307, however the test ends.
struct RestoreReplication;

impl Drop for RestoreReplication {
    fn drop(&mut self) {
        let output = std::process::Command::new("mariadb")
            .args([
                "-h",
                "127.0.0.1",
                "-P",
                "3309",
                "-u",
                OPS_USER,
                &format!("-p{OPS_PASSWORD}"),
                "-e",
            ])
            .arg(
                "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=3307, \
                 MASTER_USER='repl', MASTER_PASSWORD='replpw', MASTER_CONNECT_RETRY=1, \
                 MASTER_USE_GTID=slave_pos; START SLAVE",
            )
            .output()
            .expect("run the mariadb CLI");
        assert!(
            output.status.success(),
            "restoring replication on 3309 failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// `stop_replication` really stops and forgets replication on the replica;
/// then 3309 is put back exactly as `fleet.sh` sets it up, and must catch up
/// with 3307 again. It stops 3309's replication for a moment: the other tests
/// of this binary wait on `serial()`, and cargo runs test binaries one after
/// another, so the cutover test (which needs 3309 replicating) never overlaps
/// it. Do not run it while another checkout's tests use the same fleet.
#[tokio::test]
async fn promotion_can_stop_replication_on_the_replica() {
    let _serial = serial().await;
    let mut replica = operations(3309).await;
    let before = slave_status_running(&mut replica).await;
    assert!(
        before.as_ref().is_some_and(SlaveStatus::running),
        "3309 must replicate before the test: {before:?}"
    );
    let proxy = start_server("reload-e", &base_yaml());
    let restore = RestoreReplication;
    let _writable = Writable(MASTER_A);
    let report = proxy
        .control
        .promote_replica(
            "127.0.0.1:3307",
            PromoteOptions {
                stop_replication: true,
            },
        )
        .await
        .expect("promotion");
    assert!(report.replication_stopped);
    assert_noted(&report.notes, |n| {
        n.contains("replication stopped and forgotten")
    });
    assert_eq!(
        slave_status(&mut replica).await,
        None,
        "RESET SLAVE ALL forgot the master"
    );
    let read_only: Option<u8> = replica.query_first("SELECT @@read_only").await.unwrap();
    assert_eq!(read_only, Some(0));

    tokio::task::spawn_blocking(move || drop(restore))
        .await
        .unwrap();
    let deadline = Deadline::new("3309 to resume replicating", Duration::from_secs(10))
        .every(Duration::from_millis(100));
    loop {
        let status = slave_status(&mut replica).await;
        if status.as_ref().is_some_and(SlaveStatus::running) {
            break;
        }
        deadline.retry(status).await;
    }
    let mut master = direct(MASTER_A).await;
    let position: Option<String> = master
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap();
    let caught_up: Option<i64> = replica
        .exec_first(
            "SELECT MASTER_GTID_WAIT(?, 10)",
            (position.unwrap_or_default(),),
        )
        .await
        .unwrap();
    assert_eq!(caught_up, Some(0), "3309 caught up with 3307 again");
    master.disconnect().await.ok();
    replica.disconnect().await.ok();
}

/// `PROMOTE REPLICA` of a live master pauses the master's shards before it
/// reads the master's GTID position, so nothing written through the proxy
/// after that lands on the old master: a transaction open on one of its
/// shards holds the promotion (the pause drains it), and statements for
/// its shards wait, then go to the new master. Writes go to 3308 only
/// (after the promotion, shards 0-2047 are on 3309, which must not get
/// rows written through a proxy).
#[tokio::test]
async fn a_promotion_holds_the_masters_shards_paused_until_the_swap() {
    let _serial = serial().await;
    let tag = format!("reload-pause-{}", std::process::id());
    let a_shards = [11u32, 1200];
    let _cleanup = DeletePins(vec![
        (MASTER_A, a_shards.to_vec(), tag.clone()),
        (MASTER_B, vec![2600], tag.clone()),
    ]);
    let _writable = Writable(MASTER_A);
    let proxy = start_server("reload-pause", &base_yaml());
    let engine = proxy.engine.clone();
    let control = proxy.control.clone();
    let mut conn = app(&proxy).await;
    let mut reads = Vec::new();
    for shard in a_shards {
        let data = format!("{tag}-{shard}");
        reads.push((insert_pin(&mut conn, shard, &data).await, data));
    }
    let load = start_load(&proxy, reads.clone(), tag.clone()).await;
    load.wait_rounds(3).await;

    // A transaction bound to 3307 (a locking read on shard 11).
    let mut bound = app(&proxy).await;
    bound.query_drop("BEGIN").await.unwrap();
    let locked: Option<String> = bound
        .query_first(format!(
            "SELECT data FROM pins WHERE id = {} FOR UPDATE",
            reads[0].0
        ))
        .await
        .unwrap();
    assert_eq!(locked.as_deref(), Some(reads[0].1.as_str()));

    let promoting = control.clone();
    let promotion = tokio::spawn(async move {
        promoting
            .promote_replica("127.0.0.1:3307", KEEP_REPLICATION)
            .await
    });
    let paused = engine.clone();
    wait_until(
        "the promotion to pause 0-2047",
        Duration::from_secs(5),
        || {
            paused
                .pauses
                .paused()
                .iter()
                .any(|p| p.fleet == "main" && p.first == 0 && p.last == 2047)
        },
    )
    .await;
    // The pause waits for the open transaction: nothing is swapped yet,
    // and the old master is not fenced before it is drained.
    assert!(!promotion.is_finished());
    assert_eq!(read_only(MASTER_A).await, Some(0));
    assert_eq!(main_master(&engine, 11), "127.0.0.1:3307");
    bound
        .query_drop("COMMIT")
        .await
        .expect("the bound transaction commits on 3307");

    let report = promotion.await.unwrap().expect("promotion");
    eprintln!("promotion: {report:#?}");
    assert_noted(&report.notes, |n| {
        n.starts_with("shards main 0-2047 were paused for ")
    });
    assert_noted(&report.notes, |n| {
        n.starts_with(
            "the old master 127.0.0.1:3307 was set read_only = 1 before its GTID position was read",
        )
    });
    assert_eq!(read_only(MASTER_A).await, Some(1));
    assert!(engine.pauses.paused().is_empty(), "the pause ended");
    assert_eq!(main_master(&engine, 11), "127.0.0.1:3309");
    load.wait_rounds(3).await;
    let (rounds, errors) = load.finish().await;
    assert!(errors.is_empty(), "the client saw errors: {errors:?}");
    eprintln!("client loop: {rounds} rounds");

    conn.disconnect().await.ok();
    bound.disconnect().await.ok();
}

/// Deletes a test's pins (port, shards, tag prefix) straight on their
/// hosts when dropped, so a failed assertion leaves no row behind (rows on
/// 3307 would stay on its replica 3309 too).
struct DeletePins(Vec<(u16, Vec<u32>, String)>);

impl Drop for DeletePins {
    fn drop(&mut self) {
        for (port, shards, tag) in &self.0 {
            let sql: String = shards
                .iter()
                .map(|shard| format!("DELETE FROM db{shard:05}.pins WHERE data LIKE '{tag}%';"))
                .collect();
            let output = std::process::Command::new("mariadb")
                .args(["-h", "127.0.0.1", "-P", &port.to_string()])
                .args(["-u", "shard", "-pshardpw", "-e", &sql])
                .output()
                .expect("run the mariadb CLI");
            assert!(
                output.status.success(),
                "deleting the test's rows on {port} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

/// A master this proxy cannot reach is not taken for dead while its
/// replica is still connected to it: the config names 3307 by a closed
/// port, and 3309 (its replica) replicates from the real 3307, so the
/// promotion is refused and nothing changes.
#[tokio::test]
async fn a_master_alive_for_its_replica_is_not_promoted() {
    let _serial = serial().await;
    let unreachable = "127.0.0.1:1";
    let yaml = base_yaml().replace(
        MAIN_A_LINE,
        &MAIN_A_LINE.replace("master: 127.0.0.1:3307", &format!("master: {unreachable}")),
    );
    assert_ne!(yaml, base_yaml());
    let proxy = start_server("reload-partition", &yaml);
    let control = proxy.control.clone();
    let version = control.config_status().version;

    let error = control
        .promote_replica(unreachable, KEEP_REPLICATION)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, FailoverError::MasterAlive { .. }),
        "{message}"
    );
    assert!(
        message.contains(
            "its replica 127.0.0.1:3309 is connected to its master 127.0.0.1:3307 (Slave_IO_Running = Yes)"
        ),
        "{message}"
    );
    assert!(message.contains("nothing was changed"), "{message}");
    assert_eq!(std::fs::read_to_string(&proxy.config_path).unwrap(), yaml);
    assert_eq!(control.config_status().version, version);
    assert_eq!(main_master(&proxy.engine, 0), unreachable);
    assert!(proxy.engine.pauses.paused().is_empty());
}

/// The old master is made read-only right after the pause, before its
/// GTID position is read; a promotion that fails before the file is
/// written (the replica does not catch up: its SQL thread is stopped)
/// makes it writable again.
#[tokio::test]
async fn a_failed_promotion_makes_the_fenced_master_writable_again() {
    let _serial = serial().await;
    let tag = format!("reload-unfence-{}", std::process::id());
    let _cleanup = DeletePins(vec![(MASTER_A, vec![11], tag.clone())]);
    let _writable = Writable(MASTER_A);
    let proxy = start_server("reload-unfence", &base_yaml());
    let mut replica = operations(3309).await;
    let _start = RunOn3309WhenDropped("START SLAVE SQL_THREAD");
    replica.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    let mut master = direct(MASTER_A).await;
    master
        .query_drop(format!(
            "INSERT INTO db00011.pins (data) VALUES ('{tag}-behind')"
        ))
        .await
        .unwrap();
    master.disconnect().await.ok();

    let error = proxy
        .control
        .promote_replica("127.0.0.1:3307", KEEP_REPLICATION)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, FailoverError::ReplicaBehind { .. }),
        "{message}"
    );
    assert_eq!(read_only(MASTER_A).await, Some(0), "writable again");
    assert_eq!(main_master(&proxy.engine, 11), "127.0.0.1:3307");
    assert!(proxy.engine.pauses.paused().is_empty());
    replica.disconnect().await.ok();
}

/// Automatic failover of a master this proxy cannot reach does not promote
/// while the master's replica is still connected to it, and tries again
/// while the master stays down: once the replica has lost it too (its IO
/// thread stopped here), the replica is promoted.
#[tokio::test]
async fn auto_failover_waits_until_the_replica_has_lost_the_master_too() {
    let _serial = serial().await;
    let unreachable = "127.0.0.1:1";
    let health = "health: { interval_ms: 1000, timeout_ms: 1000, failures_before_down: 2, auto_failover: false }";
    let yaml = base_yaml()
        .replace(
            MAIN_A_LINE,
            &MAIN_A_LINE.replace("master: 127.0.0.1:3307", &format!("master: {unreachable}")),
        )
        .replace(
            health,
            "health: { interval_ms: 200, timeout_ms: 500, failures_before_down: 2, auto_failover: true }",
        );
    assert!(yaml.contains("auto_failover: true") && yaml.contains(unreachable));
    let proxy = start_server("reload-auto", &yaml);
    let engine = proxy.engine.clone();
    wait_until(
        "the checker to mark the master down",
        Duration::from_secs(5),
        || {
            engine
                .backends
                .host(unreachable)
                .is_some_and(|h| h.host_health.is_down())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        main_master(&engine, 0),
        unreachable,
        "not promoted while 3309 is connected to its master"
    );

    let mut replica = operations(3309).await;
    let _start = RunOn3309WhenDropped("START SLAVE IO_THREAD");
    replica.query_drop("STOP SLAVE IO_THREAD").await.unwrap();
    replica.disconnect().await.ok();
    let engine = proxy.engine.clone();
    wait_until(
        "the range to fail over to 3309",
        Duration::from_secs(10),
        || main_master(&engine, 0) == "127.0.0.1:3309",
    )
    .await;
}
