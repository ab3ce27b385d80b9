//! Transactions: the first write binds the transaction to its shard's
//! connection, later statements of the shard use that connection, a write
//! to another shard is refused before it is sent, plain reads of other
//! shards run outside, the server's own end of a transaction (a deadlock)
//! ends the binding, and a schema change commits first.

use super::fake::{Reply, DEADLOCK};
use super::{
    error, in_order, not_reached, reached, rows, run_table, same_connection, Answer, Case, Expect,
    Rig, Traffic, A, B, C,
};
use mysql_common::constants::StatusFlags;

fn table() -> Vec<Case> {
    let on_a = crate::id::compose(5, 1, 1);
    let on_b = crate::id::compose(2049, 1, 7);
    let on_b2 = crate::id::compose(2049, 1, 8);
    let other_shard_same_host = crate::id::compose(2050, 1, 8);
    let ok = || Expect::Ok(0, 0);
    vec![
        Case::new(
            "BEGIN and a write bind the transaction; the second statement uses its connection",
        )
        .run("BEGIN", ok())
        .run(
            format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
            ok(),
        )
        .run(
            format!("UPDATE pins SET title = 'b' WHERE id = {on_b2}"),
            ok(),
        )
        .run("COMMIT", ok())
        .then(same_connection(B, "set title = 'a'", "set title = 'b'"))
        .then(same_connection(B, "set title = 'a'", "commit"))
        .then(in_order(
            B,
            &["begin", "set title = 'a'", "set title = 'b'", "commit"],
        ))
        .then(Traffic::Silent(A)),
        Case::new(
            "a write to a second shard inside a transaction is refused and nothing reaches it",
        )
        .run("BEGIN", ok())
        .run(
            format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
            ok(),
        )
        .run(
            format!("UPDATE pins SET title = 'other' WHERE id = {on_a}"),
            error(1105, "shard"),
        )
        .run("COMMIT", ok())
        .then(Traffic::Silent(A))
        .then(in_order(B, &["begin", "set title = 'a'", "commit"])),
        Case::new("a write to another shard of the same host is refused and not sent")
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run(
                format!("UPDATE pins SET title = 'b' WHERE id = {other_shard_same_host}"),
                error(
                    1105,
                    "a write or locking read for shard 2050 of fleet main cannot join it",
                ),
            )
            .run("COMMIT", ok())
            .then(not_reached(B, "db02050"))
            .then(same_connection(B, "set title = 'a'", "commit")),
        Case::new("a locking read of a second shard is refused too")
            .run("BEGIN", ok())
            .run(format!("DELETE FROM pins WHERE id = {on_b}"), ok())
            .run(
                format!("SELECT title FROM pins WHERE id = {on_a} FOR UPDATE"),
                error(1105, "shard"),
            )
            .then(Traffic::Silent(A)),
        Case::new("a plain read of another shard runs outside the transaction")
            .given(|rig| {
                rig.fleet
                    .on(A, "db00005", Reply::rows(&["title"], &[&[Some("x")]]))
            })
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run(
                format!("SELECT title FROM pins WHERE id = {on_a}"),
                rows(&["x"]),
            )
            .run("COMMIT", ok())
            .then(reached(A, "db00005.pins"))
            .then(not_reached(A, "begin"))
            .then(not_reached(A, "commit")),
        Case::new("the transaction's own shard keeps reads on its connection")
            .given(|rig| {
                rig.fleet
                    .on(B, "select title", Reply::rows(&["title"], &[&[Some("b")]]))
            })
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run(
                format!("SELECT title FROM pins WHERE id = {on_b2}"),
                rows(&["b"]),
            )
            .then(same_connection(B, "set title = 'a'", "select title")),
        Case::new("ROLLBACK reaches the bound connection")
            .run("START TRANSACTION", ok())
            .run("INSERT INTO pins (title) VALUES ('t')", Expect::Ok(0, 0))
            .run("ROLLBACK", ok())
            .then(same_connection(A, "insert into db00000.pins", "rollback")),
        Case::new("autocommit off: the first write opens and binds the transaction")
            .run("SET autocommit = 0", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run(
                format!("UPDATE pins SET title = 'c' WHERE id = {on_a}"),
                error(1105, "shard"),
            )
            .run("COMMIT", ok())
            .then(same_connection(B, "set title = 'a'", "commit"))
            .then(Traffic::Silent(A)),
        Case::new("a transaction that bound nothing commits without a host")
            .run("BEGIN", ok())
            .run("COMMIT", ok())
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(B))
            .then(Traffic::Silent(C)),
        Case::new("SET TRANSACTION goes with the transaction's BEGIN, on its connection")
            .run("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ok())
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run("COMMIT", ok())
            .then(in_order(
                B,
                &["read committed", "begin", "set title = 'a'", "commit"],
            ))
            .then(same_connection(B, "read committed", "set title = 'a'")),
        Case::new("savepoints go to the bound connection")
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run("SAVEPOINT s1", ok())
            .run("ROLLBACK TO SAVEPOINT s1", ok())
            .run("COMMIT", ok())
            .then(same_connection(B, "savepoint s1", "set title = 'a'"))
            .then(in_order(
                B,
                &["savepoint s1", "rollback to savepoint s1", "commit"],
            )),
        Case::new("a deadlock ends the binding: the next write may go to another shard")
            .given(|rig| {
                rig.fleet.on(
                    B,
                    "title = 'dead'",
                    Reply::error(
                        DEADLOCK,
                        "Deadlock found when trying to get lock; try restarting transaction",
                    ),
                )
            })
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run(
                format!("UPDATE pins SET title = 'dead' WHERE id = {on_b}"),
                error(DEADLOCK, "Deadlock"),
            )
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'next' WHERE id = {on_a}"),
                ok(),
            )
            .run("COMMIT", ok())
            .then(same_connection(A, "title = 'next'", "commit")),
        Case::new("a failed statement that leaves the transaction open keeps the binding")
            .given(|rig| {
                rig.fleet
                    .on(B, "title = 'dup'", Reply::error(1062, "Duplicate entry"))
            })
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run(
                format!("UPDATE pins SET title = 'dup' WHERE id = {on_b}"),
                error(1062, "Duplicate"),
            )
            .run(
                format!("UPDATE pins SET title = 'z' WHERE id = {on_a}"),
                error(1105, "shard"),
            )
            .run("COMMIT", ok())
            .then(same_connection(B, "title = 'dup'", "commit"))
            .then(Traffic::Silent(A)),
        Case::new("a schema change in a bound transaction commits it first, on its connection")
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run("ALTER TABLE db02049.pins ADD COLUMN extra INT", ok())
            .then(in_order(
                B,
                &["set title = 'a'", "commit", "alter table db02049.pins"],
            )),
        Case::new("a schema change whose implicit commit fails is not sent")
            .given(|rig| {
                rig.fleet
                    .on_exact(B, "COMMIT", Reply::error(1180, "Got error 1 during COMMIT"))
            })
            .run("BEGIN", ok())
            .run(
                format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"),
                ok(),
            )
            .run(
                "ALTER TABLE db02049.pins ADD COLUMN extra INT",
                error(1180, "during COMMIT"),
            )
            .then(not_reached(B, "alter table")),
        Case::new("a schema change without a shard is refused and reaches no host")
            .run("ALTER TABLE pins ADD COLUMN extra INT", error(1105, ""))
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(B))
            .then(Traffic::Silent(C)),
    ]
}

#[tokio::test]
async fn transaction_rules_against_the_fake_fleet() {
    let count = run_table(table()).await;
    assert_eq!(count, 16);
}

#[tokio::test]
async fn the_session_status_carries_the_sessions_transaction() {
    let mut rig = Rig::new();
    let mut session = rig.session();
    let on_b = crate::id::compose(2049, 1, 7);
    let in_trans = |answer: &Answer| match answer {
        Answer::Ok { status, .. } => status.contains(StatusFlags::SERVER_STATUS_IN_TRANS),
        other => panic!("expected OK, got {other:?}"),
    };
    assert!(in_trans(&session.run("BEGIN").await));
    assert!(in_trans(
        &session
            .run(&format!("UPDATE pins SET title = 'a' WHERE id = {on_b}"))
            .await
    ));
    assert!(!in_trans(&session.run("COMMIT").await));
    let answer = session.run("SET autocommit = 0").await;
    match answer {
        Answer::Ok { status, .. } => {
            assert!(!status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT))
        }
        other => panic!("expected OK, got {other:?}"),
    }
}
