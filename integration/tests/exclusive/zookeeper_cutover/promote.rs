//! PROMOTE REPLICA through ZooKeeper: every proxy switches before it
//! answers, and the old master is made read-only.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_through_zookeeper_switches_every_proxy_and_fences_the_old_master() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-promote").await;
    let location = location("cut-promote");
    push(&location, &test_config_yaml(), None).await;
    let (one, two) = (
        guard.start(&location, "promote-1"),
        guard.start(&location, "promote-2"),
    );
    assert_eq!(read_only(MASTER_A).await, 0);

    let rows = admin_command(&one, "PROMOTE REPLICA 127.0.0.1:3307")
        .await
        .unwrap_or_else(|e| panic!("promote: {e:?}"));
    eprintln!("{rows:#?}");
    let notes = &rows[0][5];
    for proxy in [&one, &two] {
        assert_eq!(proxy.control.config_status().znode_version, Some(1));
        assert_eq!(master_of(proxy, 0), "127.0.0.1:3309");
        assert_eq!(master_of(proxy, MOVED_SHARD), "127.0.0.1:3309");
        wait_resumed(proxy).await;
    }
    assert!(pause_records(&location).await.is_empty());
    assert_eq!(read_only(MASTER_A).await, 1, "the old master is read-only");
    assert!(notes.contains("was set read_only = 1"), "{notes}");
    assert!(notes.contains("pause ("), "{notes}");
    let at = |step: &str| {
        notes
            .find(step)
            .unwrap_or_else(|| panic!("no step {step} in {notes}"))
    };
    assert!(
        at("pause (") < at("read_only (")
            && at("read_only (") < at("gtid (")
            && at("gtid (") < at("write ("),
        "the old master is fenced after the pause, before its GTID position is read: {notes}"
    );
    let document = shardgate::control::zookeeper::get(&location).await.unwrap();
    let text = String::from_utf8(document.bytes).unwrap();
    assert!(text.contains("master: 127.0.0.1:3309"), "{text}");

    let mut conn = app(&two).await;
    insert_pin(&mut conn, MOVED_SHARD, &format!("{}-after", guard.tag)).await;
    conn.disconnect().await.ok();
    assert_eq!(
        tagged_rows(NEW_MASTER, MOVED_SHARD, &guard.tag).await.len(),
        1
    );
    assert!(tagged_rows(MASTER_A, MOVED_SHARD, &guard.tag)
        .await
        .is_empty());
}

/// The old master is fenced right after the pause, before its GTID
/// position is read; a promotion that then fails (a concurrent push) makes
/// it writable again and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_promotion_makes_the_fenced_master_writable_again() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-unfence").await;
    let location = location("cut-unfence");
    push(&location, &test_config_yaml(), None).await;
    let (one, two) = (
        guard.start(&location, "unfence-1"),
        guard.start(&location, "unfence-2"),
    );
    assert_eq!(read_only(MASTER_A).await, 0);
    // An open transaction on one of 3307's shards holds the promotion in
    // its pause while another writer pushes the document.
    let mut open = app(&two).await;
    open.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut open, MOVED_SHARD, &format!("{}-open", guard.tag)).await;
    let promoting = tokio::spawn(admin_command_at(
        admin_addr(&one),
        "PROMOTE REPLICA 127.0.0.1:3307".to_owned(),
    ));
    let deadline = Deadline::new("the promotion's pause record", Duration::from_secs(5));
    while pause_records(&location).await.is_empty() {
        deadline.retry("no record").await;
    }
    let other = test_config_yaml().replace(
        "users: [{ name: app, password: app }]",
        "users: [{ name: app, password: app }, { name: racer, password: racer }]",
    );
    push(&location, &other, Some(0)).await;
    open.query_drop("COMMIT").await.unwrap();
    open.disconnect().await.ok();

    let (code, message) = promoting.await.unwrap().expect_err("the promotion loses");
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("the new shard map was not written")
            && message.contains("nothing was changed"),
        "{message}"
    );
    assert!(!message.contains("NOT"), "everything was undone: {message}");
    assert_eq!(
        read_only(MASTER_A).await,
        0,
        "the old master is writable again"
    );
    assert!(pause_records(&location).await.is_empty(), "resumed");
    for proxy in [&one, &two] {
        wait_for_znode(proxy, 1).await;
        wait_resumed(proxy).await;
        assert_eq!(master_of(proxy, MOVED_SHARD), "127.0.0.1:3307");
    }
}

/// A master this proxy cannot reach while its replica is connected to it
/// (the document names 3307 by a closed port; 3309 replicates from the
/// real 3307) is not promoted: nothing is paused or written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_alive_for_its_replica_is_not_promoted_through_zookeeper() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-partition").await;
    let location = location("cut-partition");
    let yaml = test_config_yaml().replace(
        "master: 127.0.0.1:3307, replica: 127.0.0.1:3309",
        "master: 127.0.0.1:1, replica: 127.0.0.1:3309",
    );
    assert_ne!(yaml, test_config_yaml());
    push(&location, &yaml, None).await;
    let one = guard.start(&location, "partition-1");
    let (code, message) = admin_command(&one, "PROMOTE REPLICA 127.0.0.1:1")
        .await
        .expect_err("refused");
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("its replica 127.0.0.1:3309 is connected to its master 127.0.0.1:3307")
            && message.contains("nothing was changed"),
        "{message}"
    );
    assert_eq!(znode_version(&location).await, 0);
    assert!(pause_records(&location).await.is_empty());
    assert_eq!(master_of(&one, 0), "127.0.0.1:1");
}
