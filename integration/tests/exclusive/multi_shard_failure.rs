//! A stopped host makes a multi-shard read fail fast, with an error naming
//! the host, and the same read works again once the host is back.
//! In `exclusive`, one test at a time: it stops master B (3308), which
//! must not disturb the parallel tests of `statements`.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// Restarts B however the checks end, so a failed assertion does not leave
/// the fleet broken for later tests.
struct RestartHostB;

impl Drop for RestartHostB {
    fn drop(&mut self) {
        fleet_script(&["start-host", "3308"]);
    }
}

/// Runs `sql`, giving up after 10 s (a hang is a failure too).
async fn rows_within(
    conn: &mut Conn,
    sql: &str,
) -> (Result<Vec<(u64, String)>, mysql_async::Error>, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(10), conn.query::<(u64, String), _>(sql))
        .await
        .unwrap_or_else(|_| panic!("no answer within 10 s: {sql}"));
    (result, started.elapsed())
}

#[tokio::test]
async fn a_stopped_host_fails_a_fan_out_fast_naming_the_host_and_recovers() {
    let _serial = serial().await;
    let tag = format!("msf{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
    let mut conn = client().await;
    let mut expected = BTreeSet::new();
    let mut on_a = Vec::new();
    let mut all = Vec::new();
    for (i, shard) in [3u32, 500, 1999, 2047, 2048, 2500, 3100, 4095]
        .iter()
        .enumerate()
    {
        let data = format!("{tag}:{i}");
        conn.query_drop(format!(
            "INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('{data}')"
        ))
        .await
        .unwrap();
        let id = conn.last_insert_id().unwrap();
        assert_eq!(decode(id).shard, *shard);
        if *shard < 2048 {
            on_a.push((id, data.clone()));
        }
        all.push(id);
        expected.insert((id, data));
    }
    let list = |ids: &[u64]| {
        ids.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let both_sql = format!("SELECT id, data FROM pins WHERE id IN ({})", list(&all));
    let a_ids: Vec<u64> = on_a.iter().map(|(id, _)| *id).collect();
    let a_sql = format!("SELECT id, data FROM pins WHERE id IN ({})", list(&a_ids));
    let scatter_sql = format!("SELECT COUNT(*) FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'");

    // Before: the fan-out works (and leaves pooled connections to B behind,
    // which the stop makes stale).
    let (before, _) = rows_within(&mut conn, &both_sql).await;
    let before = before.expect("the IN list over both hosts works while both are up");
    assert_eq!(before.into_iter().collect::<BTreeSet<_>>(), expected);

    tokio::task::spawn_blocking(|| fleet_script(&["stop-host", "3308"]))
        .await
        .unwrap();
    let restart = RestartHostB;
    {
        for attempt in 0..3 {
            let (result, elapsed) = rows_within(&mut conn, &both_sql).await;
            let error = result.expect_err("an IN list spanning the stopped host must fail");
            let (code, message) = server_error(error);
            assert_eq!(code, 1105, "attempt {attempt}: {message}");
            assert!(
                message.contains("127.0.0.1:3308"),
                "attempt {attempt}: {message}"
            );
            assert!(
                elapsed < Duration::from_secs(2),
                "attempt {attempt}: failed in {elapsed:?}"
            );

            // The same connection still serves A's shards, fanned out too.
            let (result, _) = rows_within(&mut conn, &a_sql).await;
            let rows = result.expect("an IN list over A's shards keeps working");
            assert_eq!(
                rows.into_iter().collect::<BTreeSet<_>>(),
                on_a.iter().cloned().collect::<BTreeSet<_>>()
            );
        }
        // A scatter touches every shard, so B's too: it fails fast as well.
        let started = Instant::now();
        let result = tokio::time::timeout(
            Duration::from_secs(10),
            conn.query_first::<u64, _>(&scatter_sql),
        )
        .await
        .expect("the scatter answers within 10 s");
        let elapsed = started.elapsed();
        let (code, message) =
            server_error(result.expect_err("a scatter over a stopped host fails"));
        assert_eq!(code, 1105, "{message}");
        assert!(message.contains("127.0.0.1:3308"), "{message}");
        assert!(
            elapsed < Duration::from_secs(2),
            "scatter failed in {elapsed:?}"
        );
    }
    tokio::task::spawn_blocking(move || drop(restart))
        .await
        .unwrap();

    // B is back: the same statements work again, with the same rows.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match rows_within(&mut conn, &both_sql).await.0 {
            Ok(rows) => {
                assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), expected);
                break;
            }
            Err(error) if Instant::now() < deadline => {
                let _ = error;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("the IN list does not work again after B restarted: {error}"),
        }
    }
    let count: Option<u64> = conn
        .query_first(&scatter_sql)
        .await
        .expect("scatter works again");
    assert_eq!(count, Some(expected.len() as u64));
}
