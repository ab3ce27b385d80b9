//! The gates before a statement is sent: the fence (a proxy that cannot
//! prove its ZooKeeper session writes nothing) and the pause gate (a paused
//! shard runs nothing new; its statements wait for the resume, or fail
//! without having run).

use std::time::{Duration, SystemTime};

use super::fake::Reply;
use super::{error, not_reached, reached, rows, run_table, Case, Expect, Rig, Traffic, A, B};

fn fenced(rig: &Rig) {
    rig.engine.fence.raise(SystemTime::now());
    rig.fleet
        .on(B, "select title", Reply::rows(&["title"], &[&[Some("b")]]));
}

fn table() -> Vec<Case> {
    let on_a = crate::id::compose(5, 1, 1);
    let on_b = crate::id::compose(2049, 1, 7);
    vec![
        Case::new("a fenced proxy refuses a write and sends nothing")
            .given(fenced)
            .run(
                format!("UPDATE pins SET title = 'x' WHERE id = {on_b}"),
                error(1105, "lost its ZooKeeper session"),
            )
            .then(Traffic::Silent(B)),
        Case::new("a fenced proxy refuses an INSERT")
            .given(fenced)
            .run(
                "INSERT INTO pins (title) VALUES ('x')",
                error(1105, "lost its ZooKeeper session"),
            )
            .then(Traffic::Silent(A)),
        Case::new("a fenced proxy refuses a locking read")
            .given(fenced)
            .run(
                format!("SELECT title FROM pins WHERE id = {on_b} FOR UPDATE"),
                error(1105, "lost its ZooKeeper session"),
            )
            .then(Traffic::Silent(B)),
        Case::new("a fenced proxy refuses a write through a function")
            .given(fenced)
            .run(
                format!("SELECT GET_LOCK('x', 1) FROM pins WHERE id = {on_b}"),
                error(1105, "lost its ZooKeeper session"),
            )
            .then(Traffic::Silent(B)),
        Case::new("a fenced proxy still serves a plain read")
            .given(fenced)
            .run(
                format!("SELECT title FROM pins WHERE id = {on_b}"),
                rows(&["b"]),
            )
            .then(reached(B, "db02049.pins")),
        Case::new("a paused shard's statement that is not resumed fails without running")
            .given(|rig| {
                rig.pause(2049, 2049);
            })
            .run(
                format!("UPDATE pins SET title = 'x' WHERE id = {on_b}"),
                error(1205, "shard 2049 of fleet main is paused"),
            )
            .then(Traffic::Silent(B)),
        Case::new("a pause of one shard leaves the others running")
            .given(|rig| {
                rig.pause(2049, 2049);
            })
            .run(
                format!("UPDATE pins SET title = 'x' WHERE id = {on_a}"),
                Expect::Ok(0, 0),
            )
            .then(reached(A, "db00005.pins"))
            .then(Traffic::Silent(B)),
        Case::new("a multi-shard read with a paused part waits, then fails, sending nothing")
            .given(|rig| {
                rig.pause(4000, 4000);
            })
            .run(
                format!(
                    "SELECT title FROM pins WHERE id IN ({on_a}, {}, {})",
                    crate::id::compose(4000, 1, 1),
                    on_b
                ),
                error(1205, "shard 4000 of fleet main is paused"),
            )
            .then(not_reached(A, "db00005"))
            .then(Traffic::Silent(B)),
    ]
}

#[tokio::test]
async fn gate_rules_against_the_fake_fleet() {
    let count = run_table(table()).await;
    assert_eq!(count, 8);
}

#[tokio::test]
async fn a_fenced_proxy_refuses_to_commit_a_bound_transaction() {
    let mut rig = Rig::new();
    let mut session = rig.session();
    let on_b = crate::id::compose(2049, 1, 7);
    session.run("BEGIN").await;
    let wrote = session
        .run(&format!("UPDATE pins SET title = 'x' WHERE id = {on_b}"))
        .await;
    assert!(wrote.is_ok(0, 0), "{wrote:?}");
    rig.engine.fence.raise(SystemTime::now());
    let commit = session.run("COMMIT").await;
    assert_eq!(commit.code(), Some(1105), "{commit:?}");
    assert!(rig.fleet.queries_with(B, "commit").is_empty());
    let rollback = session.run("ROLLBACK").await;
    assert!(rollback.is_ok(0, 0), "{rollback:?}");
    assert_eq!(rig.fleet.queries_with(B, "rollback").len(), 1);
}

#[tokio::test]
async fn a_paused_shard_waits_then_runs_after_the_resume() {
    let mut rig = Rig::new();
    let mut session = rig.session();
    let on_b = crate::id::compose(2049, 1, 7);
    rig.pause(2048, 2100);
    let statement = format!("UPDATE pins SET title = 'x' WHERE id = {on_b}");
    let fleet = std::sync::Arc::clone(&rig.fleet);
    let resume = async {
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(
            fleet.queries(B).is_empty(),
            "nothing may reach B while its shard is paused"
        );
        rig.resume(2048, 2100);
    };
    let (answer, ()) = tokio::join!(session.run(&statement), resume);
    assert!(answer.is_ok(0, 0), "{answer:?}");
    assert_eq!(rig.fleet.queries_with(B, "set title = 'x'").len(), 1);
}
