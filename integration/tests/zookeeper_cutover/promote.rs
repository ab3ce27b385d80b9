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
