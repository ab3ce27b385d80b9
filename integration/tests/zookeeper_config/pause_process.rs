//! Fleet-wide PAUSE with real `shardgate serve` processes: a proxy killed
//! with SIGKILL while it could not ack holds the pause only until its
//! session expires; a proxy process started while a pause record exists
//! holds the range until RESUME and acks.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use shardgate::control::zookeeper::SESSION_TIMEOUT;

use super::pause::{count_on, document_with_pause, marker, PROMPT};
use super::serve::{acked_on, admin_on, app_on, ServeProcess};
use super::*;

/// Starts one process per id, in order.
async fn serve_all(location: &ZkLocation, ids: &[&str]) -> Vec<ServeProcess> {
    let mut proxies = Vec::new();
    for id in ids {
        proxies.push(ServeProcess::start(location, id).await);
    }
    proxies
}

/// Polls `proxy`'s `SHOW PROXIES` until `acked(listed)` holds (5 s at most).
async fn until_listed(
    proxy: &ServeProcess,
    what: &str,
    acked: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
) {
    let deadline = Deadline::new(what, Duration::from_secs(5));
    loop {
        let listed = acked_on(proxy).await;
        if acked(&listed) {
            return;
        }
        deadline.retry(listed).await;
    }
}

/// An insert of a pin on `shard` through `proxy`, on a task: its result
/// and when it returned.
pub(super) fn insert_later(
    proxy: &ServeProcess,
    shard: u32,
    data: String,
) -> tokio::task::JoinHandle<(mysql_async::Result<u64>, Instant)> {
    let addr = proxy.client;
    tokio::spawn(async move {
        let mut conn = connect_to(addr, APP_USER, APP_PASSWORD)
            .await
            .expect("client login");
        let id = try_insert_pin(&mut conn, shard, &data).await;
        let returned = Instant::now();
        conn.disconnect().await.ok();
        (id, returned)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_answers_once_the_session_of_a_proxy_killed_mid_pause_expired() {
    let test = "pause-kill";
    clean(test).await;
    let location = location(test);
    push(&location, &document_with_pause(15_000, 10_000), None).await;
    let mut proxies = serve_all(&location, &["kill-1", "kill-2", "kill-3"]).await;
    let mark = marker("kill");
    // kill-3 cannot drain: a transaction wrote on the range through it.
    let mut transaction = app_on(&proxies[2]).await;
    transaction.query_drop("BEGIN").await.expect("BEGIN");
    insert_pin(&mut transaction, 1760, &format!("{mark}-tx")).await;

    let first = proxies[0].admin;
    let pausing = tokio::spawn(async move {
        let answer = admin_on(first, "PAUSE SHARDS 1760-1761 IN main").await;
        (answer, Instant::now())
    });
    until_listed(&proxies[1], "kill-1 and kill-2 ack", |listed| {
        ["kill-1", "kill-2"]
            .iter()
            .all(|id| listed.get(*id).is_some_and(|acked| !acked.is_empty()))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        acked_on(&proxies[1]).await["kill-3"].is_empty(),
        "kill-3 acked with a transaction open on the range"
    );
    assert!(!pausing.is_finished(), "the pause answered without kill-3");

    let killed_at = Instant::now();
    proxies[2].signal("KILL");
    let status = proxies[2].exited().await;
    assert_eq!(status.signal(), Some(9), "kill-3: {status}");
    drop(transaction);
    let (answer, answered_at) = pausing.await.expect("the PAUSE task");
    let answer = answer.expect("PAUSE SHARDS answers OK once kill-3's session expired");
    let waited = answered_at.duration_since(killed_at);
    println!("PAUSE answered {waited:?} after SIGKILL (session timeout {SESSION_TIMEOUT:?})");
    // The server heard from kill-3 at most one heartbeat (T/10) before the
    // kill, and expires it a server tick (200 ms) after T at the latest.
    let slack = Duration::from_millis(1500);
    assert!(
        waited >= SESSION_TIMEOUT - SESSION_TIMEOUT / 5 && waited < SESSION_TIMEOUT + slack,
        "the PAUSE answered {waited:?} after the kill, not after the session expired \
         ({SESSION_TIMEOUT:?}, slack {slack:?})"
    );
    assert_eq!(
        text(&answer[0], "proxies").as_deref(),
        Some("kill-1, kill-2")
    );
    let listed = acked_on(&proxies[0]).await;
    assert_eq!(
        listed.keys().collect::<Vec<_>>(),
        ["kill-1", "kill-2"],
        "kill-3's entry is still there: {listed:?}"
    );
    let client = raw_client().await;
    assert_eq!(pause_records(&client, &location).await.len(), 1);

    let held = insert_later(&proxies[0], 1760, format!("{mark}-held"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        count_on(MASTER_A, 1760, &format!("{mark}-held")).await,
        0,
        "kill-1 wrote to a paused shard"
    );
    assert!(!held.is_finished());
    let resume_sent = Instant::now();
    admin_on(proxies[1].admin, "RESUME SHARDS 1760-1761 IN main")
        .await
        .expect("RESUME SHARDS");
    let (id, returned) = held.await.expect("the held insert");
    id.expect("the held insert runs after RESUME");
    assert!(returned >= resume_sent && returned - resume_sent < PROMPT);
    assert!(pause_records(&client, &location).await.is_empty());
    assert_eq!(count_on(MASTER_A, 1760, &format!("{mark}-held")).await, 1);
    assert_eq!(
        count_on(MASTER_A, 1760, &format!("{mark}-tx")).await,
        0,
        "the killed proxy's open transaction was committed"
    );

    for proxy in proxies.drain(..2) {
        proxy.terminate().await;
    }
    drop(client);
    delete_pins(MASTER_A, &[1760], &mark).await;
    clean(test).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_process_started_during_a_pause_holds_the_range_until_resume() {
    let test = "pause-start-process";
    clean(test).await;
    let location = location(test);
    push(&location, &document_with_pause(15_000, 3000), None).await;
    let proxies = serve_all(&location, &["start-1", "start-2", "start-3"]).await;
    let answer = admin_on(proxies[0].admin, "PAUSE SHARDS 1770-1771 IN main")
        .await
        .expect("PAUSE SHARDS");
    assert_eq!(
        text(&answer[0], "proxies").as_deref(),
        Some("start-1, start-2, start-3")
    );
    let pause = text(&answer[0], "pause").expect("a pause id");

    let fourth = ServeProcess::start(&location, "start-4").await;
    let mark = marker("start4");
    // Sent as soon as it listens.
    let held = insert_later(&fourth, 1770, format!("{mark}-held"));
    // It acked before it published its client port.
    let listed = acked_on(&proxies[1]).await;
    assert_eq!(listed.get("start-4"), Some(&pause), "{listed:?}");
    // It serves the rest of the fleet at once.
    let mut conn = app_on(&fourth).await;
    let sent = Instant::now();
    insert_pin(&mut conn, 1772, &format!("{mark}-free")).await;
    assert!(sent.elapsed() < PROMPT, "start-4 held an unpaused shard");
    conn.disconnect().await.ok();

    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        count_on(MASTER_A, 1770, &mark).await,
        0,
        "start-4 wrote to a paused shard"
    );
    assert!(
        !held.is_finished(),
        "start-4 answered a write to a paused shard"
    );
    let resume_sent = Instant::now();
    admin_on(proxies[2].admin, "RESUME SHARDS 1770-1771 IN main")
        .await
        .expect("RESUME SHARDS");
    let (id, returned) = held.await.expect("the held insert");
    id.expect("the held insert runs after RESUME");
    assert!(returned >= resume_sent && returned - resume_sent < PROMPT);
    assert_eq!(count_on(MASTER_A, 1770, &mark).await, 1);

    fourth.terminate().await;
    for proxy in proxies {
        proxy.terminate().await;
    }
    delete_pins(MASTER_A, &[1770, 1772], &mark).await;
    clean(test).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_restarted_under_its_id_during_a_pause_stays_acked_past_its_predecessors_session() {
    let test = "pause-restart-same-id";
    clean(test).await;
    let location = location(test);
    push(&location, &document_with_pause(15_000, 3000), None).await;
    let proxies = serve_all(&location, &["again-1", "again-2"]).await;
    let answer = admin_on(proxies[0].admin, "PAUSE SHARDS 1776-1777 IN main")
        .await
        .expect("PAUSE SHARDS");
    let pause = text(&answer[0], "pause").expect("a pause id");
    let mut proxies = proxies.into_iter();
    let (first, second) = (
        proxies.next().expect("again-1"),
        proxies.next().expect("again-2"),
    );
    // A clean stop and an immediate start under the same id: the stopped
    // process's ack may outlive it until its session expires.
    first.terminate().await;
    let again = ServeProcess::start(&location, "again-1").await;
    let listed = acked_on(&second).await;
    assert_eq!(listed.get("again-1"), Some(&pause), "{listed:?}");
    tokio::time::sleep(SESSION_TIMEOUT * 2).await;
    let listed = acked_on(&second).await;
    assert_eq!(
        listed.get("again-1"),
        Some(&pause),
        "the restarted proxy lost its ack with its predecessor's session: {listed:?}"
    );
    let mark = marker("again");
    let held = insert_later(&again, 1776, format!("{mark}-held"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !held.is_finished(),
        "the restarted proxy wrote to a paused shard"
    );
    admin_on(second.admin, "RESUME SHARDS 1776-1777 IN main")
        .await
        .expect("RESUME SHARDS");
    let (id, _) = held.await.expect("the held insert");
    id.expect("the held insert runs after RESUME");
    assert_eq!(count_on(MASTER_A, 1776, &mark).await, 1);
    again.terminate().await;
    second.terminate().await;
    delete_pins(MASTER_A, &[1776], &mark).await;
    clean(test).await;
}
