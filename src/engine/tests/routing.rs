//! Routing execution: a single-shard statement reaches its shard's master
//! and database with the router's text, the host's answer is relayed
//! (insert ids composed), a dead host costs only its shards, and what the
//! router refuses reaches no host.

use super::fake::Reply;
use super::{error, pin, reached, rows, run_table, Case, Expect, Rig, Traffic, A, B, C, M};

fn table() -> Vec<Case> {
    let on_a = pin(5, 1);
    let on_b = pin(2049, 7);
    let on_c = pin(4000, 9);
    vec![
        Case::new("a read by ID reaches shard 5 on host A")
            .given(|rig| {
                rig.fleet
                    .on(A, "db00005.pins", Reply::rows(&["title"], &[&[Some("a")]]))
            })
            .run(
                format!("SELECT title FROM pins WHERE id = {on_a}"),
                rows(&["a"]),
            )
            .then(reached(A, "db00005.pins"))
            .then(Traffic::Silent(B))
            .then(Traffic::Silent(C)),
        Case::new("a read by ID reaches host B's db02049")
            .given(|rig| {
                rig.fleet
                    .on(B, "db02049.pins", Reply::rows(&["title"], &[&[Some("b")]]))
            })
            .run(
                format!("SELECT title FROM pins WHERE id = {on_b}"),
                rows(&["b"]),
            )
            .then(reached(B, "from db02049.pins where local_id = 7"))
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(C)),
        Case::new("a read by ID reaches shard 4000 on host C")
            .given(|rig| {
                rig.fleet
                    .on(C, "db04000.pins", Reply::rows(&["title"], &[&[None]]))
            })
            .run(
                format!("SELECT title FROM pins WHERE id = {on_c}"),
                rows(&["NULL"]),
            )
            .then(reached(C, "db04000.pins"))
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(B)),
        Case::new("an UPDATE by ID gets the host's affected rows")
            .given(|rig| rig.fleet.on(B, "update db02049.pins", Reply::ok(3)))
            .run(
                format!("UPDATE pins SET title = 'x' WHERE id = {on_b}"),
                Expect::Ok(3, 0),
            )
            .then(reached(B, "update db02049.pins set title = 'x'")),
        Case::new("a DELETE by ID reaches only its shard")
            .given(|rig| rig.fleet.on(C, "delete from db04000.pins", Reply::ok(1)))
            .run(
                format!("DELETE FROM pins WHERE id = {on_c}"),
                Expect::Ok(1, 0),
            )
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(B)),
        Case::new("an INSERT of a new object gets its ID composed from the shard's insert id")
            .given(|rig| {
                rig.fleet.on(
                    A,
                    "insert into db00000.pins",
                    Reply::Ok {
                        affected: 1,
                        insert_id: 42,
                    },
                )
            })
            .run(
                "INSERT INTO pins (title) VALUES ('new')",
                Expect::Ok(1, pin(0, 42)),
            )
            .then(reached(A, "insert into db00000.pins")),
        Case::new("a mapping-table row goes with its board's shard")
            .run(
                format!(
                    "INSERT INTO board_has_pins (board_id, pin_id) VALUES ({}, {on_a})",
                    crate::id::compose(3000, 2, 4)
                ),
                Expect::Ok(0, 0),
            )
            .then(reached(B, "db03000.board_has_pins"))
            .then(Traffic::Silent(A)),
        Case::new("a mod-sharded key reaches the mod fleet's master")
            .run(
                "SELECT user_id FROM user_by_email WHERE email = 'a@b.c'",
                Expect::Ok(0, 0),
            )
            .then(reached(M, "from msdb"))
            .then(Traffic::Silent(A)),
        Case::new("USE picks the shard database of a statement without a key")
            .run("USE db02050", Expect::Ok(0, 0))
            .run("SELECT COUNT(*) FROM pins", Expect::Ok(0, 0))
            .then(reached(B, "db02050.pins"))
            .then(Traffic::Silent(A)),
        Case::new("a SHARD hint names the shard")
            .run(
                "/*+ SHARD(3500) */ SELECT COUNT(*) FROM pins",
                Expect::Ok(0, 0),
            )
            .then(reached(C, "db03500.pins"))
            .then(Traffic::Silent(A)),
        Case::new("the host's error is relayed with its code")
            .given(|rig| {
                rig.fleet.on(
                    B,
                    "insert into",
                    Reply::error(1062, "Duplicate entry '7' for key 'PRIMARY'"),
                )
            })
            .run(
                "/*+ SHARD(2049) */ INSERT INTO pins (local_id, title) VALUES (7, 'dup')",
                error(1062, "Duplicate entry '7'"),
            ),
        Case::new("a dead host fails its shard's statements, naming shard and host")
            .given(|rig| rig.fleet.kill_host(B))
            .run(
                format!("SELECT title FROM pins WHERE id = {on_b}"),
                error(1105, "shard 2049 of fleet main is on host 127.0.0.1:2"),
            )
            .then(Traffic::Silent(B)),
        Case::new("a dead host costs only its shards")
            .given(|rig| {
                rig.fleet.kill_host(B);
                rig.fleet
                    .on(A, "db00005", Reply::rows(&["title"], &[&[Some("a")]]));
            })
            .run(
                format!("SELECT title FROM pins WHERE id = {on_b}"),
                error(1105, "unavailable"),
            )
            .run(
                format!("SELECT title FROM pins WHERE id = {on_a}"),
                rows(&["a"]),
            ),
        Case::new("a host that dies mid-statement is the statement's error")
            .given(|rig| rig.fleet.on(B, "db02049", Reply::Drop))
            .run(
                format!("UPDATE pins SET title = 'y' WHERE id = {on_b}"),
                error(1105, "lost the connection to host 127.0.0.1:2"),
            ),
        Case::new("a write without a key is refused and reaches no host")
            .run("UPDATE pins SET title = 'z'", error(1105, "pins"))
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(B))
            .then(Traffic::Silent(C)),
        Case::new("the servers' own schemas are refused before routing")
            .run("SELECT * FROM mysql.user", error(1142, ""))
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(B)),
        Case::new("a session SET is replayed on the connection before the statement")
            .given(|rig| {
                rig.fleet
                    .on(A, "db00005", Reply::rows(&["title"], &[&[Some("a")]]))
            })
            .run(
                "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
                Expect::Ok(0, 0),
            )
            .run(
                format!("SELECT title FROM pins WHERE id = {on_a}"),
                rows(&["a"]),
            )
            .then(super::in_order(
                A,
                &[
                    "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
                    "db00005.pins",
                ],
            )),
    ]
}

#[tokio::test]
async fn routing_rules_against_the_fake_fleet() {
    let count = run_table(table()).await;
    assert_eq!(count, 17);
}

#[tokio::test]
async fn a_connection_is_reused_for_the_next_statement_and_not_reset() {
    let mut rig = Rig::new();
    let mut session = rig.session();
    let id = pin(2049, 1);
    for _ in 0..3 {
        session
            .run(&format!("SELECT title FROM pins WHERE id = {id}"))
            .await;
    }
    let received = rig.fleet.queries_with(B, "db02049.pins");
    assert_eq!(received.len(), 3);
    assert!(
        received.iter().all(|r| r.thread == received[0].thread),
        "{received:#?}"
    );
    assert!(rig
        .fleet
        .received()
        .iter()
        .all(|r| r.command != mysql_common::constants::Command::COM_RESET_CONNECTION as u8));
}

#[tokio::test]
async fn a_connection_the_host_closed_while_idle_is_replaced_before_use() {
    let mut rig = Rig::new();
    rig.fleet
        .on(B, "db02049", Reply::rows(&["title"], &[&[Some("b")]]));
    let mut session = rig.session();
    let sql = format!("SELECT title FROM pins WHERE id = {}", pin(2049, 1));
    assert_eq!(session.run(&sql).await.rows(), Some(vec!["b".to_owned()]));
    rig.fleet.restart_host(B);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let again = session.run(&sql).await;
    assert_eq!(again.rows(), Some(vec!["b".to_owned()]), "{again:?}");
    let received = rig.fleet.queries_with(B, "db02049.pins");
    assert_eq!(
        received.len(),
        2,
        "sent once on each connection: {received:#?}"
    );
    assert_ne!(received[0].thread, received[1].thread);
}

#[tokio::test]
async fn a_connection_that_sent_an_unsolicited_error_while_idle_is_not_used() {
    let mut rig = Rig::new();
    rig.fleet
        .on(B, "db02049", Reply::rows(&["title"], &[&[Some("b")]]));
    let mut session = rig.session();
    let sql = format!("SELECT title FROM pins WHERE id = {}", pin(2049, 1));
    assert_eq!(session.run(&sql).await.rows(), Some(vec!["b".to_owned()]));
    rig.fleet.announce_shutdown(B);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let again = session.run(&sql).await;
    assert_eq!(again.rows(), Some(vec!["b".to_owned()]), "{again:?}");
    let received = rig.fleet.queries_with(B, "db02049.pins");
    assert_eq!(received.len(), 2, "{received:#?}");
    assert_ne!(
        received[0].thread, received[1].thread,
        "sent again on the connection that announced its end"
    );
}
