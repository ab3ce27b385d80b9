//! `KILL [QUERY] n`: only the caller's account's sessions, known ids; a
//! running statement is cancelled on the host and thread that run it
//! (`KILL QUERY <thread>` on a control connection), its client gets 1317
//! and its session goes on, on another connection.

use std::time::Duration;

use super::fake::{Reply, INTERRUPTED};
use super::{error, run_table, Case, Rig, Traffic, A, B, C};

fn table() -> Vec<Case> {
    vec![
        Case::new("KILL of an unknown id is 1094 and reaches no host")
            .run("KILL 999", error(1094, "Unknown thread id: 999"))
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(B))
            .then(Traffic::Silent(C)),
        Case::new("KILL QUERY of one's own session answers 1317, as a server does")
            .run("KILL QUERY 1", error(INTERRUPTED, "interrupted"))
            .then(Traffic::Silent(A)),
    ]
}

#[tokio::test]
async fn kill_rules_against_the_fake_fleet() {
    let count = run_table(table()).await;
    assert_eq!(count, 2);
}

#[tokio::test]
async fn kill_of_another_accounts_session_is_refused() {
    let mut rig = Rig::new();
    let other = rig.session_as("someone_else");
    let mut session = rig.session();
    let answer = session.run(&format!("KILL {}", other.id())).await;
    assert_eq!(answer.code(), Some(1095), "{answer:?}");
}

#[tokio::test]
async fn kill_query_reaches_the_host_and_thread_of_the_running_statement() {
    let mut rig = Rig::new();
    let on_b = crate::id::compose(2049, 1, 7);
    rig.fleet.on(
        B,
        "title = 'slow'",
        Reply::ok(1).after(Duration::from_secs(30)),
    );
    let mut victim = rig.session();
    let mut killer = rig.session();
    let victim_id = victim.id();
    let fleet = std::sync::Arc::clone(&rig.fleet);
    let kill = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while fleet.queries_with(B, "title = 'slow'").is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the statement never reached B"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        killer.run(&format!("KILL QUERY {victim_id}")).await
    };
    let started = tokio::time::Instant::now();
    let slow_sql = format!("UPDATE pins SET title = 'slow' WHERE id = {on_b}");
    let (slow, killed) = tokio::join!(victim.run(&slow_sql), kill);
    assert!(
        killed.is_ok(0, 0),
        "victim {victim_id}: {killed:?} / {slow:?}"
    );
    assert_eq!(slow.code(), Some(INTERRUPTED), "{slow:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let statement = rig.fleet.queries_with(B, "title = 'slow'");
    let thread = statement[0].thread;
    let kills = rig.fleet.queries_with(B, &format!("KILL QUERY {thread}"));
    assert_eq!(kills.len(), 1, "{:#?}", rig.fleet.received());
    assert_ne!(kills[0].thread, thread);
    assert!(rig.fleet.queries(A).is_empty() && rig.fleet.queries(C).is_empty());
    // The session goes on, on another connection: the one a KILL was aimed
    // at is never pooled again.
    let next = victim
        .run(&format!(
            "UPDATE pins SET title = 'after' WHERE id = {on_b}"
        ))
        .await;
    assert!(next.is_ok(0, 0), "{next:?}");
    let after = rig.fleet.queries_with(B, "title = 'after'");
    assert_ne!(after[0].thread, thread);
}

#[tokio::test]
async fn kill_query_ends_a_wait_at_a_paused_shard_at_once() {
    let mut rig = Rig::new();
    let on_b = crate::id::compose(2049, 1, 7);
    let mut victim = rig.session();
    let mut killer = rig.session();
    let victim_id = victim.id();
    rig.pause(2049, 2049);
    let sql = format!("UPDATE pins SET title = 'waits' WHERE id = {on_b}");
    let started = tokio::time::Instant::now();
    let kill = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        killer.run(&format!("KILL QUERY {victim_id}")).await
    };
    let (waited, killed) = tokio::join!(victim.run(&sql), kill);
    let elapsed = started.elapsed();
    assert!(killed.is_ok(0, 0), "{killed:?}");
    // The rig's pause.timeout_ms is 300: the KILL, not the timeout, ends it.
    assert_eq!(
        waited.code(),
        Some(INTERRUPTED),
        "{waited:?} after {elapsed:?}"
    );
    assert!(elapsed < Duration::from_millis(250), "{elapsed:?}");
    assert!(
        rig.fleet.queries(B).is_empty(),
        "{:#?}",
        rig.fleet.queries(B)
    );
    // The next statement of the session is not cancelled.
    rig.resume(2049, 2049);
    let next = victim.run(&sql).await;
    assert!(next.is_ok(0, 0), "{next:?}");
}
