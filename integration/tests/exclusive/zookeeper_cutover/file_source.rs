//! MOVE SHARDS on a proxy started from a config file: the file is
//! rewritten and routing switches, with the same checks and pause.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_on_a_file_sourced_proxy_rewrites_its_file() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-file").await;
    let proxy = start_server("cut-file", &test_config_yaml());
    let rows = admin_command(&proxy, MOVE)
        .await
        .unwrap_or_else(|e| panic!("move: {e:?}"));
    eprintln!("{rows:#?}");
    let steps = step_names(&rows);
    for step in ["pause", "gtid", "catch-up", "write", "proxies", "resume"] {
        assert!(steps.contains(&step), "{step} in {steps:?}");
    }
    assert!(
        rows.iter().any(
            |row| row[2].starts_with("only this proxy and its config file")
                && row[2]
                    .contains("every other proxy still sends shards 1024-2047 to 127.0.0.1:3307")
        ),
        "{rows:#?}"
    );
    let text = std::fs::read_to_string(&proxy.config_path).unwrap();
    assert!(!text.contains("range: [0, 2047]"), "{text}");
    assert!(text.contains("1024, 2047]"), "{text}");
    let reparsed = shardgate::topology::Topology::load(&proxy.config_path).unwrap();
    let main = reparsed.fleet_by_name("main").unwrap();
    let master = reparsed.master_of(main, MOVED_SHARD).unwrap();
    assert_eq!(
        reparsed.hosts[master].addr, "127.0.0.1:3309",
        "the file says so"
    );
    assert_eq!(master_of(&proxy, MOVED_SHARD), "127.0.0.1:3309");
    assert_eq!(master_of(&proxy, STAYING_SHARD), "127.0.0.1:3307");
    assert!(proxy.engine.pauses.paused().is_empty());
    let status = proxy.control.config_status();
    assert_eq!(
        status.version,
        shardgate::control::reload::version_of(text.as_bytes()),
        "the file's text is the version in force"
    );

    let mut conn = app(&proxy).await;
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
