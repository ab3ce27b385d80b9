//! Fleet-wide PAUSE / RESUME SHARDS: a pause typed into one proxy of a
//! document holds the range on every proxy, answers once all of them
//! acked, is withdrawn naming a proxy that cannot drain, stops waiting for
//! a proxy whose session ended, and holds a proxy started meanwhile.
//! Everything is checked on the servers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::expiry::relay;
use super::serve::admin_on;
use super::*;

/// A statement on an unpaused shard must answer within this.
pub(super) const PROMPT: Duration = Duration::from_secs(2);

/// The test document with its pause section replaced.
pub(super) fn document_with_pause(timeout_ms: u64, drain_timeout_ms: u64) -> String {
    let yaml = document();
    let line = "pause: { timeout_ms: 5000, drain_timeout_ms: 5000 }";
    assert!(
        yaml.contains(line),
        "the pause line of the test config moved"
    );
    yaml.replace(
        line,
        &format!("pause: {{ timeout_ms: {timeout_ms}, drain_timeout_ms: {drain_timeout_ms} }}"),
    )
}

/// A marker unique to this run, put in every row's `data`.
pub(super) fn marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("zkpause-{what}-{}-{nanos}", std::process::id())
}

/// Rows of `db<shard>.pins` on `port` whose data starts with `prefix`.
pub(super) async fn count_on(port: u16, shard: u32, prefix: &str) -> usize {
    let mut conn = direct(port).await;
    let n: Option<u64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM db{shard:05}.pins WHERE data LIKE '{prefix}%'"
        ))
        .await
        .expect("direct count");
    conn.disconnect().await.ok();
    usize::try_from(n.unwrap_or(0)).unwrap_or(usize::MAX)
}

/// Runs `sql` on the admin port of `proxy`; its rows, or the error.
async fn admin_try(proxy: &RunningProxy, sql: &str) -> Result<Vec<Row>, mysql_async::Error> {
    admin_on(admin_addr(proxy), sql).await
}

/// Whether `proxy`'s gate has shards `first-last` of main paused.
fn paused(proxy: &RunningProxy, first: u32, last: u32) -> bool {
    proxy
        .engine
        .pauses
        .paused()
        .iter()
        .any(|r| r.fleet == "main" && r.first == first && r.last == last)
}

/// Polls `condition` every 10 ms, failing after `limit`.
async fn until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `SHOW PROXIES` as id → pauses_acked.
async fn acked(proxy: &RunningProxy) -> BTreeMap<String, String> {
    acked_at(admin_addr(proxy)).await
}

/// `SHOW PROXIES` on the admin port at `addr` as id → pauses_acked.
pub(super) async fn acked_at(addr: std::net::SocketAddr) -> BTreeMap<String, String> {
    let answer = admin_on(addr, "SHOW PROXIES").await.expect("SHOW PROXIES");
    answer
        .iter()
        .map(|row| {
            (
                text(row, "id").expect("an id"),
                text(row, "pauses_acked").unwrap_or_default(),
            )
        })
        .collect()
}

/// A writer inserting pins on `shard` through `proxy` until `stop`; how
/// many inserts the proxy acknowledged, and how many failed.
fn writer(
    proxy: &RunningProxy,
    shard: u32,
    data: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, usize)> {
    let addr = proxy.listening.client;
    tokio::spawn(async move {
        let mut conn = connect_to(addr, APP_USER, APP_PASSWORD)
            .await
            .expect("client login");
        let (mut ok, mut failed) = (0, 0);
        while !stop.load(Ordering::SeqCst) {
            match try_insert_pin(&mut conn, shard, &data).await {
                Ok(_) => ok += 1,
                Err(_) => failed += 1,
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        conn.disconnect().await.ok();
        (ok, failed)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_holds_the_range_on_every_proxy_and_loses_no_write() {
    let test = "pause-fleet";
    clean(test).await;
    let location = location(test);
    push(&location, &document_with_pause(15_000, 3000), None).await;
    let ids = ["alpha", "beta", "gamma"];
    let proxies: Vec<RunningProxy> = ids.iter().map(|id| start(&location, id)).collect();
    let mark = marker("fleet");
    let (held, free) = (1700, 1710);
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for (proxy, id) in proxies.iter().zip(ids) {
        for shard in [held, free] {
            let data = format!("{mark}-{id}-{shard}");
            writers.push((
                id,
                shard,
                data.clone(),
                writer(proxy, shard, data, stop.clone()),
            ));
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let answer = admin_try(&proxies[0], "PAUSE SHARDS 1700-1701 IN main")
        .await
        .expect("PAUSE SHARDS answers OK");
    assert_eq!(
        text(&answer[0], "proxies").as_deref(),
        Some("alpha, beta, gamma")
    );
    for (proxy, id) in proxies.iter().zip(ids) {
        assert!(paused(proxy, 1700, 1701), "{id} has not paused the range");
    }
    let listed = acked(&proxies[1]).await;
    let pause = text(&answer[0], "pause").expect("a pause id");
    for id in ids {
        assert_eq!(listed.get(id), Some(&pause), "{listed:?}");
    }
    // Nothing reaches the paused shard on the server; the other shard
    // takes writes from every proxy.
    let held_before = count_on(MASTER_A, held, &mark).await;
    let free_before: Vec<usize> = counts_by_proxy(free, &mark, &ids).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        count_on(MASTER_A, held, &mark).await,
        held_before,
        "a write reached the paused shard"
    );
    let free_after = counts_by_proxy(free, &mark, &ids).await;
    for ((id, before), after) in ids.iter().zip(&free_before).zip(&free_after) {
        assert!(
            after > before,
            "writes through {id} to shard {free} stopped"
        );
    }

    let resumed = admin_try(&proxies[1], "RESUME SHARDS 1700-1701 IN main")
        .await
        .expect("RESUME SHARDS answers OK");
    assert_eq!(resumed.len(), 1);
    for (proxy, id) in proxies.iter().zip(ids) {
        until(&format!("{id} resumes"), PROMPT, || {
            !paused(proxy, 1700, 1701)
        })
        .await;
    }
    let resumed_at = Instant::now();
    for id in ids {
        let prefix = format!("{mark}-{id}-{held}");
        let before = count_on(MASTER_A, held, &prefix).await;
        loop {
            if count_on(MASTER_A, held, &prefix).await > before {
                break;
            }
            assert!(
                resumed_at.elapsed() < PROMPT * 2,
                "writes through {id} to the resumed shard do not go on"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    stop.store(true, Ordering::SeqCst);
    for (id, shard, data, task) in writers {
        let (ok, failed) = task.await.expect("writer");
        assert_eq!(failed, 0, "writes through {id} to shard {shard} failed");
        assert_eq!(
            count_on(MASTER_A, shard, &data).await,
            ok,
            "acknowledged writes through {id} to shard {shard} missing or extra on the server"
        );
    }
    assert!(pause_records(&raw_client().await, &location)
        .await
        .is_empty());
    delete_pins(MASTER_A, &[held, free], &mark).await;
    for proxy in &proxies {
        proxy.control.shutdown().await;
    }
    clean(test).await;
}

/// Per proxy, the rows it wrote to `shard`.
async fn counts_by_proxy(shard: u32, mark: &str, ids: &[&str]) -> Vec<usize> {
    let mut counts = Vec::new();
    for id in ids {
        counts.push(count_on(MASTER_A, shard, &format!("{mark}-{id}-{shard}")).await);
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_cannot_drain_withdraws_the_pause_and_is_named() {
    let test = "pause-drain";
    clean(test).await;
    let location = location(test);
    push(&location, &document_with_pause(5000, 1500), None).await;
    let alpha = start(&location, "alpha");
    let beta = start(&location, "beta");
    let mark = marker("drain");
    let mut tx = app(&beta).await;
    tx.query_drop("BEGIN").await.expect("BEGIN");
    let busy_id = insert_pin(&mut tx, 1720, &format!("{mark}-tx")).await;
    // A statement running past the drain (an idle transaction would be
    // rolled back at 3/4 of it and let the pause complete).
    let busy = tokio::spawn(async move {
        let answer = tx
            .query_drop(format!(
                "UPDATE pins SET data = IF(SLEEP(2.5) = 0, data, data) WHERE id = {busy_id}"
            ))
            .await;
        (tx, answer)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let error = admin_try(&alpha, "PAUSE SHARDS 1720-1721 IN main")
        .await
        .expect_err("the pause times out");
    let (code, message) = server_error(error);
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("proxies beta did not pause") && message.contains("withdrawn"),
        "{message}"
    );
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert!(pause_records(&raw_client().await, &location)
        .await
        .is_empty());
    for (proxy, id) in [(&alpha, "alpha"), (&beta, "beta")] {
        until(&format!("{id} serves the range again"), PROMPT, || {
            !paused(proxy, 1720, 1721)
        })
        .await;
    }
    let (mut tx, answer) = busy.await.expect("the long UPDATE's task");
    answer.expect("the long UPDATE");
    tx.query_drop("COMMIT").await.expect("COMMIT");
    for (proxy, id) in [(&alpha, "alpha"), (&beta, "beta")] {
        let mut conn = app(proxy).await;
        let sent = Instant::now();
        insert_pin(&mut conn, 1721, &format!("{mark}-{id}")).await;
        assert!(sent.elapsed() < PROMPT, "{id} held the insert");
        conn.disconnect().await.ok();
    }
    assert_eq!(count_on(MASTER_A, 1720, &mark).await, 1);
    assert_eq!(count_on(MASTER_A, 1721, &mark).await, 2);
    delete_pins(MASTER_A, &[1720, 1721], &mark).await;
    alpha.control.shutdown().await;
    beta.control.shutdown().await;
    clean(test).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_stops_waiting_for_a_proxy_whose_session_ended_which_applies_it_on_return() {
    let test = "pause-expiry";
    clean(test).await;
    let direct_location = location(test);
    push(&direct_location, &document_with_pause(15_000, 20_000), None).await;
    let relay = relay(zk_hosts()).await;
    let through_relay = ZkLocation {
        hosts: vec![relay.addr.to_string()],
        path: direct_location.path.clone(),
    };
    let alpha = start(&direct_location, "alpha");
    let beta = start(&direct_location, "beta");
    let gamma = start(&through_relay, "gamma");
    let mark = marker("expiry");

    // gamma is cut off from ZooKeeper: it never sees the record, and its
    // entry goes when its session expires.
    relay.blocked.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let answer = admin_try(&alpha, "PAUSE SHARDS 1730-1731 IN main")
        .await
        .expect("the pause goes through once gamma's entry is gone");
    let waited = started.elapsed();
    assert_eq!(text(&answer[0], "proxies").as_deref(), Some("alpha, beta"));
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(15),
        "waited {waited:?}"
    );
    assert!(
        !paused(&gamma, 1730, 1731),
        "gamma cannot have seen the record"
    );

    // Back on a new session, gamma applies the record before anything else
    // and acks it.
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(started.elapsed())).await;
    relay.blocked.store(false, Ordering::SeqCst);
    until(
        "gamma applies the pause on its new session",
        Duration::from_secs(15),
        || paused(&gamma, 1730, 1731),
    )
    .await;
    let pause = text(&answer[0], "pause").expect("a pause id");
    let back = Instant::now();
    loop {
        if acked(&alpha).await.get("gamma") == Some(&pause) {
            break;
        }
        assert!(back.elapsed() < Duration::from_secs(5), "gamma never acked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut conn = app(&gamma).await;
    let data = format!("{mark}-gamma");
    let held = tokio::spawn(async move {
        let id = try_insert_pin(&mut conn, 1730, &data).await;
        (id, conn)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        count_on(MASTER_A, 1730, &mark).await,
        0,
        "gamma wrote to a paused shard"
    );
    admin_try(&beta, "RESUME SHARDS 1730-1731 IN main")
        .await
        .expect("RESUME");
    let (id, conn) = held.await.expect("writer");
    id.expect("the held insert runs after RESUME");
    conn.disconnect().await.ok();
    assert_eq!(count_on(MASTER_A, 1730, &mark).await, 1);
    delete_pins(MASTER_A, &[1730], &mark).await;
    for proxy in [&alpha, &beta, &gamma] {
        proxy.control.shutdown().await;
    }
    clean(test).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_started_during_a_pause_holds_the_range_until_resume() {
    let test = "pause-start";
    clean(test).await;
    let location = location(test);
    push(&location, &document_with_pause(8000, 3000), None).await;
    let alpha = start(&location, "alpha");
    let answer = admin_try(&alpha, "PAUSE SHARDS 1740-1741 IN main")
        .await
        .expect("PAUSE");
    let pause = text(&answer[0], "pause").expect("a pause id");
    let beta = start(&location, "beta");
    assert!(
        paused(&beta, 1740, 1741),
        "beta serves the paused range after its start"
    );
    let mark = marker("start");
    let mut conn = app(&beta).await;
    let data = format!("{mark}-beta");
    let held = tokio::spawn(async move {
        let id = try_insert_pin(&mut conn, 1740, &data).await;
        (id, Instant::now(), conn)
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        count_on(MASTER_A, 1740, &mark).await,
        0,
        "beta wrote to a paused shard"
    );
    assert!(!held.is_finished());
    let listed = acked(&alpha).await;
    assert_eq!(listed.get("beta"), Some(&pause), "beta did not ack");
    // The local refusals hold fleet-wide, and change nothing.
    for (sql, expected) in [
        ("PAUSE SHARDS 1741-1750 IN main", "paused already"),
        (
            "RESUME SHARDS 1740-1740 IN main",
            "only part of the paused range",
        ),
        ("RESUME SHARDS 1800-1900 IN main", "are not paused"),
    ] {
        let error = admin_try(&beta, sql).await.expect_err(sql);
        let (_, message) = server_error(error);
        assert!(message.contains(expected), "{sql}: {message}");
    }
    assert_eq!(
        pause_records(&raw_client().await, &location).await,
        std::slice::from_ref(&pause)
    );
    assert!(paused(&alpha, 1740, 1741) && paused(&beta, 1740, 1741));
    let sent = Instant::now();
    admin_try(&beta, "RESUME SHARDS 1740-1741 IN main")
        .await
        .expect("RESUME");
    let (id, ran_at, conn) = held.await.expect("writer");
    id.expect("the held insert runs after RESUME");
    assert!(ran_at >= sent);
    conn.disconnect().await.ok();
    assert_eq!(count_on(MASTER_A, 1740, &mark).await, 1);
    delete_pins(MASTER_A, &[1740], &mark).await;
    alpha.control.shutdown().await;
    beta.control.shutdown().await;
    clean(test).await;
}
