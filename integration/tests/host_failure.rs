//! A dead host costs only its shards: stop master B, check that A's shards
//! keep working, that B's fail fast with an error naming shard and host,
//! and that B's shards work again once it is back.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;

#[tokio::test]
async fn a_stopped_host_fails_only_its_shards_and_recovers() {
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
