//! A dry run and the refusals: nothing changes (document, registry, pause
//! records, routing).

use super::*;

/// What must hold after a dry run or a refusal.
async fn nothing_changed(location: &ZkLocation, proxies: &[&RunningProxy]) {
    assert_eq!(
        znode_version(location).await,
        0,
        "the document was not written"
    );
    assert!(
        pause_records(location).await.is_empty(),
        "no pause record is left"
    );
    for proxy in proxies {
        assert!(proxy.engine.pauses.paused().is_empty(), "nothing paused");
        assert_eq!(proxy.control.config_status().znode_version, Some(0));
        assert_eq!(master_of(proxy, MOVED_SHARD), "127.0.0.1:3307");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_checks_and_changes_nothing() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-dry").await;
    let location = location("cut-dry");
    push(&location, &test_config_yaml(), None).await;
    let (one, two) = (
        guard.start(&location, "dry-1"),
        guard.start(&location, "dry-2"),
    );

    let rows = admin_command(&one, &format!("{MOVE} DRY RUN"))
        .await
        .unwrap_or_else(|e| panic!("dry run: {e:?}"));
    eprintln!("{rows:#?}");
    assert_eq!(
        step_names(&rows),
        [
            "read",
            "check",
            "source",
            "target",
            "would write",
            "would pause",
            "dry run",
            "cleanup after",
            "cleanup after",
            "cleanup after",
            "cleanup after",
            "cleanup after"
        ]
    );
    let detail = |name: &str| {
        rows.iter()
            .find(|row| row[0] == name)
            .map(|row| row[2].clone())
            .unwrap_or_default()
    };
    assert!(
        detail("target").starts_with("IO Yes, SQL Yes, from 127.0.0.1:3307"),
        "{rows:?}"
    );
    assert_eq!(
        detail("would write"),
        "range [0, 1023] master 127.0.0.1:3307; range [1024, 2047] master 127.0.0.1:3309"
    );
    assert_eq!(detail("would pause"), "main 1024-2047 on dry-1, dry-2");
    assert!(rows.iter().any(|row| row[2]
        .starts_with("databases db01024..db02047 are left on the old master 127.0.0.1:3307")));
    nothing_changed(&location, &[&one, &two]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_moves_change_nothing() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-refuse").await;
    let location = location("cut-refuse");
    push(&location, &test_config_yaml(), None).await;
    let one = guard.start(&location, "refuse-1");
    let refusals = [
        (
            "MOVE SHARDS 2048-3000 IN main TO 127.0.0.1:3309",
            1105,
            "target 127.0.0.1:3309 does not replicate the source 127.0.0.1:3308: it replicates from 127.0.0.1:3307",
        ),
        (
            "MOVE SHARDS 1024-2047 IN main TO 127.0.0.1:3308",
            1105,
            "target 127.0.0.1:3308 does not replicate the source 127.0.0.1:3307: it is no replica",
        ),
        (
            "MOVE SHARDS 2000-2100 IN main TO 127.0.0.1:3309",
            1105,
            "not inside one host entry",
        ),
        (
            "MOVE SHARDS 1024-2047 IN nope TO 127.0.0.1:3309",
            1210,
            "no fleet named 'nope'",
        ),
        (
            "MOVE SHARDS 1024-2047 TO 127.0.0.1:3309",
            1210,
            "fleets main, mod all have shards 1024-2047: say which",
        ),
    ];
    for (command, code, text) in refusals {
        let (got, message) = admin_command(&one, command).await.expect_err(command);
        assert_eq!(got, code, "{command}: {message}");
        assert!(message.contains(text), "{command}: {message}");
        assert!(
            message.contains("nothing was changed"),
            "{command}: {message}"
        );
        nothing_changed(&location, &[&one]).await;
    }
}

/// Sets `SET GLOBAL {variable} = {value}` on 3309 for a test; the guard
/// returned runs `restore` (the value the fleet runs) when dropped.
async fn set_on_target(
    variable: &'static str,
    value: u8,
    restore: &'static str,
) -> RunOn3309WhenDropped {
    let mut conn = operations(NEW_MASTER).await;
    conn.query_drop(format!("SET GLOBAL {variable} = {value}"))
        .await
        .unwrap();
    conn.disconnect().await.ok();
    RunOn3309WhenDropped(restore)
}

/// A read-only target would fail every write to the moved shards: the
/// move and its dry run refuse it and name the command that fixes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_target_is_refused() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-readonly").await;
    let location = location("cut-readonly");
    push(&location, &test_config_yaml(), None).await;
    let one = guard.start(&location, "readonly-1");
    let _read_only = set_on_target("read_only", 1, "SET GLOBAL read_only = 0").await;
    for command in [format!("{MOVE} DRY RUN"), MOVE.to_owned()] {
        let (code, message) = admin_command(&one, &command).await.expect_err(&command);
        assert_eq!(code, 1105, "{command}: {message}");
        assert!(
            message.contains("target 127.0.0.1:3309 is read_only")
                && message.contains("Run SET GLOBAL read_only = 0 on 127.0.0.1:3309"),
            "{command}: {message}"
        );
        assert!(
            message.contains("nothing was changed"),
            "{command}: {message}"
        );
        nothing_changed(&location, &[&one]).await;
    }
}

/// A target in strict GTID mode, in the same GTID domain as its master:
/// the dry run warns that keeping it replicating after the move breaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_warns_of_a_strict_mode_target() {
    let _serial = serial().await;
    let guard = FleetGuard::new("cut-strict").await;
    let location = location("cut-strict");
    push(&location, &test_config_yaml(), None).await;
    let one = guard.start(&location, "strict-1");
    let _strict = set_on_target("gtid_strict_mode", 1, "SET GLOBAL gtid_strict_mode = 0").await;
    let rows = admin_command(&one, &format!("{MOVE} DRY RUN"))
        .await
        .unwrap_or_else(|e| panic!("dry run: {e:?}"));
    assert!(
        rows.iter().any(|row| row[0] == "cleanup after"
            && row[2].starts_with(
                "127.0.0.1:3309 runs gtid_strict_mode = ON in the same GTID domain as 127.0.0.1:3307"
            )),
        "{rows:#?}"
    );
    nothing_changed(&location, &[&one]).await;
}
