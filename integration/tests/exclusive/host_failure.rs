//! A dead host costs only its shards: stop master B, check that A's shards
//! keep working, that B's fail fast with an error naming shard and host,
//! and that B's shards work again once it is back.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;

#[tokio::test]
async fn a_stopped_host_fails_only_its_shards_and_recovers() {
    let _serial = serial().await;
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(3000) */ INTO pins (data) VALUES ('b side')")
        .await
        .unwrap();
    let on_b = conn.last_insert_id().unwrap();
    conn.query_drop("INSERT /*+ SHARD(10) */ INTO pins (data) VALUES ('a side')")
        .await
        .unwrap();
    let on_a = conn.last_insert_id().unwrap();

    /// Restarts B however the checks below end, so a failed assertion
    /// does not leave the fleet broken for later tests.
    struct RestartHostB;
    impl Drop for RestartHostB {
        fn drop(&mut self) {
            fleet_script(&["start-host", "3308"]);
        }
    }

    tokio::task::spawn_blocking(|| fleet_script(&["stop-host", "3308"]))
        .await
        .unwrap();
    let restart = RestartHostB;
    {
        for _ in 0..3 {
            let data: Option<String> = conn
                .query_first(format!("SELECT data FROM pins WHERE id = {on_a}"))
                .await
                .expect("A's shards keep working");
            assert_eq!(data.as_deref(), Some("a side"));

            let started = Instant::now();
            let error = conn
                .query_drop(format!("SELECT data FROM pins WHERE id = {on_b}"))
                .await
                .expect_err("B's shard must fail");
            let elapsed = started.elapsed();
            let (code, message) = server_error(error);
            assert_eq!(code, 1105, "{message}");
            assert!(message.contains("shard 3000"), "{message}");
            assert!(message.contains("127.0.0.1:3308"), "{message}");
            assert!(elapsed < Duration::from_secs(2), "failed in {elapsed:?}");

            conn.query_drop("INSERT /*+ SHARD(11) */ INTO pins (data) VALUES ('still fine')")
                .await
                .expect("writes to A's shards keep working");
        }
    }
    tokio::task::spawn_blocking(move || drop(restart))
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match conn
            .query_first::<String, _>(format!("SELECT data FROM pins WHERE id = {on_b}"))
            .await
        {
            Ok(data) => {
                assert_eq!(data.as_deref(), Some("b side"));
                break;
            }
            Err(error) if Instant::now() < deadline => {
                let _ = error;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("B's shards did not come back: {error}"),
        }
    }
}

/// A master that never answered (nothing listens on 3399) must not cost
/// more than its shards, even before the health checker has marked it down:
/// logins and statements any master can answer (drivers send several at
/// connect) go to a master that answers, every time.
#[tokio::test]
async fn statements_for_any_master_skip_one_that_refuses() {
    let _serial = serial().await;
    let yaml = test_config_yaml().replace(
        "{ range: [2048, 4095], master: 127.0.0.1:3308 }",
        "{ range: [2048, 4095], master: 127.0.0.1:3399 }",
    );
    assert!(
        yaml.contains("127.0.0.1:3399"),
        "the config names the dead master"
    );
    let proxy = start_server("dead-master", &yaml);
    for attempt in 0..8 {
        let mut conn = connect_to(proxy.listening.client, APP_USER, APP_PASSWORD)
            .await
            .unwrap_or_else(|e| panic!("login {attempt} through a proxy with a dead master: {e}"));
        let one: Option<i64> = conn.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
        let port: Option<u16> = conn.query_first("SELECT @@port").await.unwrap();
        assert!(
            port == Some(MASTER_A) || port == Some(MOD_HOST),
            "answered by a master that is up, not {port:?}"
        );
        let error = conn
            .query_drop("SELECT data FROM pins WHERE id = 241294492511762325")
            .await
            .expect_err("shard 3429 lives on the dead master");
        let message = error.to_string();
        assert!(
            message.contains("3429") && message.contains("127.0.0.1:3399"),
            "the error names shard and host: {message}"
        );
        conn.disconnect().await.unwrap();
    }
}
