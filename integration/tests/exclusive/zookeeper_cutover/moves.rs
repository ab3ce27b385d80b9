//! MOVE SHARDS through ZooKeeper with two proxies, and a move that loses
//! to a concurrent push.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_through_zookeeper_switches_every_proxy_before_it_answers() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-move").await;
    let location = location("cut-move");
    push(&location, &test_config_yaml(), None).await;
    let (one, two) = (
        guard.start(&location, "move-1"),
        guard.start(&location, "move-2"),
    );
    // A write before the move lands on 3307.
    let mut before = app(&two).await;
    insert_pin(&mut before, MOVED_SHARD, &format!("{}-before", guard.tag)).await;

    let rows = admin_command(&one, MOVE)
        .await
        .unwrap_or_else(|e| panic!("move: {e:?}"));
    eprintln!("{rows:#?}");
    // Both run the new document when the command answers.
    for proxy in [&one, &two] {
        assert_eq!(proxy.control.config_status().znode_version, Some(1));
        assert_eq!(master_of(proxy, MOVED_SHARD), "127.0.0.1:3309");
        assert_eq!(master_of(proxy, STAYING_SHARD), "127.0.0.1:3307");
        wait_resumed(proxy).await;
    }
    assert!(
        pause_records(&location).await.is_empty(),
        "the pause record is gone"
    );
    let steps = step_names(&rows);
    for step in [
        "read", "check", "source", "target", "pause", "gtid", "catch-up", "write", "proxies",
        "resume",
    ] {
        assert!(steps.contains(&step), "{step} in {steps:?}");
    }
    assert!(
        rows.iter()
            .any(|row| row[0] == "pause" && row[2].contains("move-1, move-2")),
        "{rows:?}"
    );
    assert!(rows.iter().any(|row| row[0] == "cleanup"), "{rows:?}");

    // Writes through either proxy land on the new master only.
    for (i, proxy) in [&one, &two].into_iter().enumerate() {
        let mut conn = app(proxy).await;
        insert_pin(&mut conn, MOVED_SHARD, &format!("{}-after-{i}", guard.tag)).await;
        conn.disconnect().await.ok();
    }
    before.disconnect().await.ok();
    let on_new = tagged_rows(NEW_MASTER, MOVED_SHARD, &guard.tag).await;
    let on_old = tagged_rows(MASTER_A, MOVED_SHARD, &guard.tag).await;
    assert_eq!(
        on_old.len(),
        1,
        "only the write before the move is on 3307: {on_old:?}"
    );
    assert_eq!(
        on_new.len(),
        3,
        "the first replicated, two written after: {on_new:?}"
    );
    assert_eq!(on_new.iter().filter(|id| **id >= HIGH_LOCAL_ID).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_push_makes_the_move_fail_with_nothing_changed() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-race").await;
    let location = location("cut-race");
    push(&location, &test_config_yaml(), None).await;
    let (one, two) = (
        guard.start(&location, "race-1"),
        guard.start(&location, "race-2"),
    );
    // An open transaction on a moving shard holds the move in its pause
    // while another writer pushes the document.
    let mut open = app(&two).await;
    open.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut open, MOVED_SHARD, &format!("{}-open", guard.tag)).await;
    let moving = tokio::spawn(admin_command_at(admin_addr(&one), MOVE.to_owned()));
    let paused = location.clone();
    let deadline = Deadline::new("the move's pause record", Duration::from_secs(5));
    while pause_records(&paused).await.is_empty() {
        deadline.retry("no record").await;
    }
    let other = test_config_yaml().replace(
        "users: [{ name: app, password: app }]",
        "users: [{ name: app, password: app }, { name: racer, password: racer }]",
    );
    let pushed = push(&location, &other, Some(0)).await;
    assert_eq!(pushed.znode_version, 1);
    open.query_drop("COMMIT").await.unwrap();
    open.disconnect().await.ok();

    let (code, message) = moving.await.unwrap().expect_err("the move loses");
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("the new shard map was not written"),
        "{message}"
    );
    assert!(
        message.contains("is at version 1, not the expected version 0"),
        "{message}"
    );
    assert!(message.contains("nothing was changed"), "{message}");
    let document = shardgate::control::zookeeper::get(&location).await.unwrap();
    assert_eq!(document.znode_version, 1);
    assert_eq!(
        document.version, pushed.version,
        "the other writer's document stays"
    );
    assert!(pause_records(&location).await.is_empty(), "resumed");
    for proxy in [&one, &two] {
        wait_for_znode(proxy, 1).await;
        wait_resumed(proxy).await;
        assert_eq!(master_of(proxy, MOVED_SHARD), "127.0.0.1:3307");
    }
    assert_eq!(
        tagged_rows(MASTER_A, MOVED_SHARD, &guard.tag).await.len(),
        1
    );
}

/// A live proxy that never takes the new document keeps the move from
/// resuming: the shards stay paused on every proxy and the error names it;
/// once it is gone, RESUME SHARDS lets them go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_does_not_take_the_new_map_keeps_the_shards_paused() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-stuck").await;
    let location = location("cut-stuck");
    let yaml = test_config_yaml().replace(
        "pause: { timeout_ms: 5000, drain_timeout_ms: 5000 }",
        "pause: { timeout_ms: 1000, drain_timeout_ms: 3000 }",
    );
    assert_ne!(
        yaml,
        test_config_yaml(),
        "the pause line of the config moved"
    );
    push(&location, &yaml, None).await;
    let (one, two) = (
        guard.start(&location, "stuck-1"),
        guard.start(&location, "stuck-2"),
    );
    // A registered "proxy" that acks pauses but stays on znode version 0.
    let stuck = raw_client().await;
    let ephemeral =
        zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
    let entry = shardgate::control::process::Process::new(
        "stuck-3".to_owned(),
        shardgate::topology::bootstrap::ListenOverrides::default(),
    )
    .entry("old".to_owned(), Some(0));
    stuck
        .create(
            &location.registry_entry("stuck-3"),
            &entry.to_json(),
            &ephemeral,
        )
        .await
        .expect("register the stuck proxy");
    let moving = tokio::spawn(admin_command_at(admin_addr(&one), MOVE.to_owned()));
    let deadline = Deadline::new("the move's pause record", Duration::from_secs(5));
    let record = loop {
        if let Some(id) = pause_records(&location).await.pop() {
            break id;
        }
        deadline.retry("no record").await;
    };
    stuck
        .create(
            &format!("{}/pauses/{record}/acks/stuck-3", location.path),
            b"",
            &ephemeral,
        )
        .await
        .expect("ack as the stuck proxy");

    let (code, message) = moving.await.unwrap().expect_err("the move cannot resume");
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("was written, but proxies stuck-3 (znode version 0)"),
        "{message}"
    );
    assert!(message.contains("STAY PAUSED"), "{message}");
    assert_eq!(pause_records(&location).await, [record], "the pause stays");
    for proxy in [&one, &two] {
        wait_for_znode(proxy, 1).await;
        assert_eq!(master_of(proxy, MOVED_SHARD), "127.0.0.1:3309");
        assert!(!proxy.engine.pauses.paused().is_empty(), "still paused");
    }
    stuck
        .delete(&location.registry_entry("stuck-3"), None)
        .await
        .unwrap();
    let resumed = admin_command(&one, "RESUME SHARDS 1024-2047 IN main FORCE")
        .await
        .unwrap_or_else(|e| panic!("resume: {e:?}"));
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    for proxy in [&one, &two] {
        wait_resumed(proxy).await;
    }
}
