//! A `serve --takeover` whose `shutdown.drain_timeout_ms` runs out while a
//! session holds a transaction open, between real `shardgate serve`
//! processes: the takeover still completes (found by
//! `integration/bench/takeover.sh`, whose clients once left a transaction
//! open: at the timeout the old process stopped at once as if its client
//! listener had failed, without the takeover's summary, the new process
//! never told the takeover was done).

use std::time::Duration;

use mysql_async::prelude::*;

use crate::common::file_serve::FileServe;
use crate::common::*;

/// One session idle between statements and one idle inside a transaction
/// when the takeover starts, `shutdown.drain_timeout_ms` 1500: the idle one
/// moves at once and keeps its user variable and `CONNECTION_ID()`; the
/// other holds the old process until twice the timeout, then the old
/// process logs the takeover's summary counting it as cut and exits 1 (a
/// session cut, as a stop that cuts one), the new one says the takeover
/// completed, and the transaction's row is not on the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_held_past_the_drain_timeout_does_not_stop_the_takeover() {
    let _fleet = serial().await;
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("takeover-drain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the test config directory");
    let yaml = format!(
        "{}\nshutdown: {{ drain_timeout_ms: 1500 }}\ntakeover: {{ socket: {} }}\n",
        test_config_yaml(),
        dir.join("takeover.sock").display()
    );
    let tag = format!("takeover-drain-{}", std::process::id());
    let mut old = FileServe::start("takeover-drain", "true", &yaml);
    let mut idle = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    idle.query_drop("SET @who = 'idle'").await.unwrap();
    let id: Option<u64> = idle.query_first("SELECT CONNECTION_ID()").await.unwrap();
    let mut held = connect_to(old.client, APP_USER, APP_PASSWORD)
        .await
        .expect("log in");
    held.query_drop("USE db00014").await.unwrap();
    held.query_drop("BEGIN").await.unwrap();
    held.query_drop(format!("INSERT INTO pins (data) VALUES ('{tag}')"))
        .await
        .unwrap();

    let mut new = FileServe::start_with("takeover-drain", "true", &yaml, &["--takeover"]);
    let started = std::time::Instant::now();
    let (code, log) = old.wait_exit(Duration::from_secs(20));
    assert!(
        log.contains("sessions handed 1, closed 0, cut 1") && !log.contains("shardgate stops"),
        "the takeover's summary counts the held session as cut:\n{log}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(3000),
        "the old process waited twice the drain timeout:\n{log}"
    );
    assert_eq!(code, Some(1), "a session cut: exit 1, as a stop:\n{log}");
    let (who, moved): (Option<String>, Option<u64>) = idle
        .query_first("SELECT @who, CONNECTION_ID()")
        .await
        .expect("the idle session on the new process")
        .expect("a row");
    assert_eq!((who.as_deref(), moved), (Some("idle"), id));
    let mut master = direct(main_master_port(14)).await;
    let rows: Option<u64> = master
        .query_first(format!(
            "SELECT COUNT(*) FROM db00014.pins WHERE data = '{tag}'"
        ))
        .await
        .unwrap();
    assert_eq!(rows, Some(0), "the held transaction was not committed");
    drop(held);
    new.signal("TERM");
    let (_, new_log) = new.wait_exit(Duration::from_secs(20));
    assert!(
        new.log.contains("completed=true") || new_log.contains("completed=true"),
        "the new process completed the takeover:\n{}{new_log}",
        new.log
    );
}
