//! Routing through the proxy to the real local fleet, checked on the hosts.
//! Needs `integration/fleet.sh start` and `shardgate fleet init` (done by
//! `integration/test.sh`).

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use shardgate::id::{mod_shard, ObjectId};

#[tokio::test]
async fn insert_by_shard_hint_lands_on_owner_and_reports_global_id() {
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(3429) */ INTO pins (data) VALUES ('{\"t\":\"hint\"}')")
        .await
        .expect("insert");
    let id = conn.last_insert_id().expect("last insert id");
    let fields = decode(id);
    assert_eq!((fields.shard, fields.type_id), (3429, 1));
    let reported: u64 = conn
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reported, id);
    assert_eq!(
        row_on_host(MASTER_B, "pins", 3429, fields.local_id)
            .await
            .as_deref(),
        Some("{\"t\":\"hint\"}")
    );
    assert!(
        !database_exists(MASTER_A, "db03429").await,
        "shard 3429 must live on B only"
    );
}

#[tokio::test]
async fn colocate_puts_a_pin_on_its_boards_shard() {
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(100) */ INTO boards (data) VALUES ('board')")
        .await
        .unwrap();
    let board = conn.last_insert_id().unwrap();
    assert_eq!(decode(board).type_id, 2);
    conn.query_drop(format!(
        "INSERT /*+ COLOCATE({board}) */ INTO pins (data) VALUES ('colocated')"
    ))
    .await
    .unwrap();
    let pin = decode(conn.last_insert_id().unwrap());
    assert_eq!((pin.shard, pin.type_id), (100, 1));
    assert_eq!(
        row_on_host(MASTER_A, "pins", 100, pin.local_id)
            .await
            .as_deref(),
        Some("colocated")
    );
}

#[tokio::test]
async fn unhinted_inserts_are_placed_over_both_hosts() {
    let mut conn = client().await;
    let mut shards = Vec::new();
    for i in 0..60 {
        conn.query_drop(format!("INSERT INTO users (data) VALUES ('user {i}')"))
            .await
            .unwrap();
        let id = decode(conn.last_insert_id().unwrap());
        assert_eq!(id.type_id, 3);
        let port = main_master_port(id.shard);
        assert_eq!(
            row_on_host(port, "users", id.shard, id.local_id).await,
            Some(format!("user {i}"))
        );
        shards.push(id.shard);
    }
    assert!(shards.iter().any(|s| *s < 2048) && shards.iter().any(|s| *s >= 2048));
    shards.sort_unstable();
    shards.dedup();
    assert!(
        shards.len() > 30,
        "random placement spreads: {} shards",
        shards.len()
    );
}

#[tokio::test]
async fn read_update_delete_by_id() {
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(2500) */ INTO pins (data) VALUES ('before')")
        .await
        .unwrap();
    let id = conn.last_insert_id().unwrap();
    let fields = decode(id);

    let row: Option<(u64, String)> = conn
        .query_first(format!("SELECT id, data FROM pins WHERE id = {id}"))
        .await
        .unwrap();
    assert_eq!(row, Some((id, "before".to_owned())));
    let quoted: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE id = '{id}'"))
        .await
        .unwrap();
    assert_eq!(quoted.as_deref(), Some("before"));

    conn.query_drop(format!("UPDATE pins SET data = 'after' WHERE id = {id}"))
        .await
        .unwrap();
    assert_eq!(conn.affected_rows(), 1);
    assert_eq!(
        row_on_host(MASTER_B, "pins", 2500, fields.local_id)
            .await
            .as_deref(),
        Some("after")
    );

    conn.query_drop(format!("DELETE FROM pins WHERE id = {id}"))
        .await
        .unwrap();
    assert_eq!(conn.affected_rows(), 1);
    assert_eq!(
        row_on_host(MASTER_B, "pins", 2500, fields.local_id).await,
        None
    );
    let gone: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE id = {id}"))
        .await
        .unwrap();
    assert_eq!(gone, None);
}

#[tokio::test]
async fn explicit_database_and_use() {
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(77) */ INTO pins (data) VALUES ('explicit')")
        .await
        .unwrap();
    let local = decode(conn.last_insert_id().unwrap()).local_id;
    let data: Option<String> = conn
        .query_first(format!(
            "SELECT data FROM db00077.pins WHERE local_id = {local}"
        ))
        .await
        .unwrap();
    assert_eq!(data.as_deref(), Some("explicit"));

    conn.query_drop("USE db00077").await.unwrap();
    let database: Option<String> = conn.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(database.as_deref(), Some("db00077"));
    let data: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE local_id = {local}"))
        .await
        .unwrap();
    assert_eq!(data.as_deref(), Some("explicit"));
    conn.query_drop("INSERT INTO pins (data) VALUES ('via use')")
        .await
        .unwrap();
    let id = decode(conn.last_insert_id().unwrap());
    assert_eq!(id.shard, 77);
    assert_eq!(
        row_on_host(MASTER_A, "pins", 77, id.local_id)
            .await
            .as_deref(),
        Some("via use")
    );
}

#[tokio::test]
async fn mapping_rows_follow_the_from_id_and_read_back_in_order() {
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(3000) */ INTO boards (data) VALUES ('b')")
        .await
        .unwrap();
    let board = conn.last_insert_id().unwrap();
    for sequence in 1..=200u64 {
        let pin = ObjectId {
            shard: (sequence * 13 % 4096) as u32,
            type_id: 1,
            local_id: sequence,
        }
        .encode()
        .unwrap();
        conn.query_drop(format!(
            "INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({board}, {pin}, {sequence})"
        ))
        .await
        .unwrap();
    }
    let sequences: Vec<u64> = conn
        .query(format!(
            "SELECT sequence FROM board_has_pins WHERE board_id = {board} ORDER BY sequence DESC LIMIT 50 OFFSET 150"
        ))
        .await
        .unwrap();
    assert_eq!(sequences, (1..=50).rev().collect::<Vec<u64>>());

    let mut host = direct(MASTER_B).await;
    let count: Option<u64> = host
        .query_first(format!(
            "SELECT COUNT(*) FROM db03000.board_has_pins WHERE board_id = {board}"
        ))
        .await
        .unwrap();
    assert_eq!(count, Some(200));
}

#[tokio::test]
async fn mod_shard_rows_land_by_md5_of_the_key() {
    let mut conn = client().await;
    let email = format!("user{}@example.com", std::process::id());
    conn.query_drop(format!(
        "REPLACE INTO user_by_email (email, user_id) VALUES ('{email}', 4242)"
    ))
    .await
    .unwrap();
    let user: Option<u64> = conn
        .query_first(format!(
            "SELECT user_id FROM user_by_email WHERE email = '{email}'"
        ))
        .await
        .unwrap();
    assert_eq!(user, Some(4242));
    let shard = mod_shard(email.as_bytes(), 4096);
    let mut host = direct(MOD_HOST).await;
    let on_host: Option<u64> = host
        .query_first(format!(
            "SELECT user_id FROM msdb{shard:05}.user_by_email WHERE email = '{email}'"
        ))
        .await
        .unwrap();
    assert_eq!(on_host, Some(4242));
    assert_eq!(mod_shard(b"user@example.com", 4096), 2479);
}

#[tokio::test]
async fn unroutable_statements_and_bad_ids_get_clear_errors_and_the_connection_survives() {
    let mut conn = client().await;
    let cases: Vec<(String, u16, Vec<&str>)> = vec![
        ("SELECT data FROM pins".into(), 1105, vec!["pins", "id"]),
        ("UPDATE pins SET data = 'x'".into(), 1105, vec!["pins"]),
        (
            "SELECT data FROM board_has_pins ORDER BY sequence".into(),
            1105,
            vec!["board_has_pins", "board_id"],
        ),
        (
            format!("SELECT data FROM pins WHERE id = {}", 1u64 << 63),
            1105,
            vec!["9223372036854775808"],
        ),
        (
            format!(
                "SELECT data FROM pins WHERE id = {}",
                ObjectId {
                    shard: 5,
                    type_id: 2,
                    local_id: 1
                }
                .encode()
                .unwrap()
            ),
            1105,
            vec!["type"],
        ),
        (
            format!(
                "SELECT data FROM pins WHERE id = {}",
                ObjectId {
                    shard: 5000,
                    type_id: 1,
                    local_id: 1
                }
                .encode()
                .unwrap()
            ),
            1105,
            vec!["5000"],
        ),
        (
            "SELECT * FROM no_such_table WHERE id = 1".into(),
            1146,
            vec!["no_such_table"],
        ),
        ("SELEKT * FROM pins".into(), 1064, vec![]),
        ("USE db99999".into(), 1049, vec!["db99999"]),
    ];
    for (sql, code, words) in cases {
        let error = conn.query_drop(&sql).await.expect_err(&sql);
        let (got_code, message) = server_error(error);
        assert_eq!(got_code, code, "{sql}: {message}");
        for word in words {
            assert!(
                message.contains(word),
                "{sql}: '{message}' should mention {word}"
            );
        }
        let one: Option<u64> = conn.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1), "connection usable after: {sql}");
    }
}

#[tokio::test]
async fn backend_errors_pass_through_with_code_and_state() {
    let mut conn = client().await;
    let email = format!("dup{}@example.com", std::process::id());
    conn.query_drop(format!(
        "REPLACE INTO user_by_email (email, user_id) VALUES ('{email}', 1)"
    ))
    .await
    .unwrap();
    let error = conn
        .query_drop(format!(
            "INSERT INTO user_by_email (email, user_id) VALUES ('{email}', 2)"
        ))
        .await
        .expect_err("duplicate key");
    match error {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 1062);
            assert_eq!(e.state, "23000");
            assert!(e.message.contains("Duplicate entry"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn thousand_inserts_all_acknowledged_ids_are_on_their_hosts() {
    let mut conn = client().await;
    let tag = format!("bulk-{}", std::process::id());
    let mut by_shard: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
    for i in 0..1000 {
        conn.query_drop(format!("INSERT INTO pins (data) VALUES ('{tag}-{i}')"))
            .await
            .unwrap();
        let id = decode(conn.last_insert_id().unwrap());
        by_shard.entry(id.shard).or_default().push(id.local_id);
    }
    let mut found = 0usize;
    let mut hosts = [direct(MASTER_A).await, direct(MASTER_B).await];
    for (shard, locals) in &by_shard {
        let host = &mut hosts[usize::from(*shard >= 2048)];
        let list = locals
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let count: Option<u64> = host
            .query_first(format!(
                "SELECT COUNT(*) FROM db{shard:05}.pins WHERE local_id IN ({list}) AND data LIKE '{tag}-%'"
            ))
            .await
            .unwrap();
        found += count.unwrap_or(0) as usize;
    }
    assert_eq!(found, 1000, "every acknowledged insert is on its host");
    assert!(by_shard.keys().any(|s| *s < 2048) && by_shard.keys().any(|s| *s >= 2048));
}

#[test]
fn stock_mariadb_cli_inserts_and_reads_through_the_proxy() {
    let output = mariadb_cli(
        "INSERT /*+ SHARD(9) */ INTO pins (data) VALUES ('from the cli'); SELECT LAST_INSERT_ID();",
    );
    assert!(
        output.status.success(),
        "mariadb CLI failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let id: u64 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("an id");
    let fields = decode(id);
    assert_eq!(fields.shard, 9);
    let read = mariadb_cli(&format!("SELECT data FROM pins WHERE id = {id}"));
    assert_eq!(String::from_utf8_lossy(&read.stdout).trim(), "from the cli");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let on_host = runtime.block_on(row_on_host(MASTER_A, "pins", 9, fields.local_id));
    assert_eq!(on_host.as_deref(), Some("from the cli"));

    let refused = mariadb_cli("SELECT data FROM pins");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("shardgate"));
}

#[test]
fn wrong_password_is_refused_with_1045() {
    let addr = proxy_addr();
    let output = std::process::Command::new("mariadb")
        .args([
            "-h127.0.0.1",
            &format!("-P{}", addr.port()),
            "-uapp",
            "-pwrong",
            "-e",
            "SELECT 1",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("1045"), "{stderr}");
}

#[tokio::test]
async fn full_fleet_every_shard_database_is_on_its_master() {
    let topology = topology();
    let report = shardgate::ops::verify(&topology).await.expect("verify");
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(
        report.expected,
        topology
            .fleets
            .iter()
            .map(|f| f.shard_count as usize)
            .sum::<usize>()
    );
    let mut conn = client().await;
    for shard in [0u32, 2047, 2048, 4095] {
        conn.query_drop(format!(
            "INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('edge')"
        ))
        .await
        .unwrap();
        let id = decode(conn.last_insert_id().unwrap());
        assert_eq!(id.shard, shard);
        assert_eq!(
            row_on_host(main_master_port(shard), "pins", shard, id.local_id)
                .await
                .as_deref(),
            Some("edge")
        );
    }
}

#[tokio::test]
async fn on_duplicate_key_update_never_moves_a_shard_key() {
    let mut conn = client().await;
    let mut ids = Vec::new();
    for shard in [1u32, 3000] {
        conn.query_drop(format!(
            "INSERT /*+ SHARD({shard}) */ INTO boards (data) VALUES ('odku')"
        ))
        .await
        .unwrap();
        ids.push(conn.last_insert_id().unwrap());
    }
    let (near, far) = (ids[0], ids[1]);
    let pin = 7_000_000 + u64::from(std::process::id());
    let insert = format!(
        "INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({near}, {pin}, 1)"
    );
    conn.query_drop(&insert).await.unwrap();
    let refused = [
        format!("{insert} ON DUPLICATE KEY UPDATE board_id = {far}"),
        format!("{insert} ON DUPLICATE KEY UPDATE sequence = 2, board_has_pins.board_id = board_id + 1"),
        format!("INSERT INTO db00001.board_has_pins (board_id, pin_id, sequence) VALUES ({near}, {pin}, 1) ON DUPLICATE KEY UPDATE board_id = {far}"),
        format!("INSERT INTO db00001.board_has_pins (board_id, pin_id, sequence) VALUES ({far}, {}, 1)", pin + 1),
    ];
    for sql in &refused {
        let (code, message) = server_error(conn.query_drop(sql).await.expect_err(sql));
        assert_eq!(code, 1105, "{sql}: {message}");
    }
    // The same value changes nothing: allowed.
    conn.query_drop(format!(
        "{insert} ON DUPLICATE KEY UPDATE board_id = VALUES(board_id), sequence = 5"
    ))
    .await
    .unwrap();
    let mut host = direct(MASTER_A).await;
    let rows: Vec<(u64, u64, u64)> = host
        .query(format!(
            "SELECT board_id, pin_id, sequence FROM db00001.board_has_pins WHERE pin_id IN ({pin}, {})",
            pin + 1
        ))
        .await
        .unwrap();
    assert_eq!(
        rows,
        vec![(near, pin, 5)],
        "the row kept its key; no far row in db00001"
    );

    let email = format!("odku{}@example.com", std::process::id());
    let insert = format!("REPLACE INTO user_by_email (email, user_id) VALUES ('{email}', 1)");
    conn.query_drop(&insert).await.unwrap();
    let sql = format!(
        "INSERT INTO user_by_email (email, user_id) VALUES ('{email}', 1) ON DUPLICATE KEY UPDATE email = 'moved-{email}'"
    );
    let (code, message) = server_error(conn.query_drop(&sql).await.expect_err(&sql));
    assert_eq!(code, 1105, "{message}");
    let shard = mod_shard(email.as_bytes(), 4096);
    let on_host: Option<String> = direct(MOD_HOST)
        .await
        .query_first(format!(
            "SELECT email FROM msdb{shard:05}.user_by_email WHERE user_id = 1 AND email LIKE '%{email}'"
        ))
        .await
        .unwrap();
    assert_eq!(on_host.as_deref(), Some(email.as_str()));
    host.query_drop(format!(
        "DELETE FROM db00001.board_has_pins WHERE pin_id IN ({pin}, {})",
        pin + 1
    ))
    .await
    .unwrap();
}

/// F19: a join or subquery over two sharded tables is refused unless every
/// sharded table has a key of its own (or is located by an ID-key equality
/// with one, a hint, USE or its shard database): routed by one table's key
/// it would silently miss the other's rows on other shards.
#[tokio::test]
async fn joins_over_sharded_tables_need_a_key_for_each() {
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(1) */ INTO boards (data) VALUES ('f19-board')")
        .await
        .unwrap();
    let board = conn.last_insert_id().unwrap();
    let far_pin = insert_pin(&mut conn, 3000, "f19-far").await;
    conn.query_drop(format!(
        "INSERT /*+ COLOCATE({board}) */ INTO pins (data) VALUES ('f19-near')"
    ))
    .await
    .unwrap();
    let near_pin = conn.last_insert_id().unwrap();
    for (pin, sequence) in [(far_pin, 1), (near_pin, 2)] {
        conn.query_drop(format!(
            "INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({board}, {pin}, {sequence})"
        ))
        .await
        .unwrap();
    }
    // On the servers: the far pin on host B (shard 3000), the mapping rows
    // and the near pin on host A (shard 1).
    assert_eq!(pin_on_host(far_pin).await.as_deref(), Some("f19-far"));
    assert_eq!(pin_on_host(near_pin).await.as_deref(), Some("f19-near"));
    let mut host_a = direct(MASTER_A).await;
    let mapped: Option<u64> = host_a
        .query_first(format!(
            "SELECT COUNT(*) FROM db00001.board_has_pins WHERE board_id = {board}"
        ))
        .await
        .unwrap();
    assert_eq!(mapped, Some(2));

    // A server holding every table would answer both pins; routed by the
    // board's key alone, the far one is missed: refused instead.
    for statement in [
        format!("SELECT p.id, p.data FROM pins p JOIN board_has_pins b ON b.pin_id = p.id WHERE b.board_id = {board}"),
        format!("SELECT count(*) FROM pins p WHERE p.id IN (SELECT pin_id FROM board_has_pins WHERE board_id = {board})"),
        format!("UPDATE pins p JOIN board_has_pins b ON b.pin_id = p.id SET p.data = 'f19-changed' WHERE b.board_id = {board}"),
    ] {
        let error = conn.query_drop(&statement).await.expect_err(&statement);
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{statement}: {message}");
        assert!(
            message.contains("no shard key for table 'pins'"),
            "{statement}: {message}"
        );
    }
    assert_eq!(
        pin_on_host(near_pin).await.as_deref(),
        Some("f19-near"),
        "the UPDATE ran"
    );

    // Located by an ID-key equality with the keyed table: fine.
    let mut pins: Vec<u64> = conn
        .query(format!(
            "SELECT b.pin_id FROM boards bo JOIN board_has_pins b ON b.board_id = bo.id WHERE bo.id = {board}"
        ))
        .await
        .expect("a mapping joined with its from-table");
    pins.sort_unstable();
    let mut expected = vec![far_pin, near_pin];
    expected.sort_unstable();
    assert_eq!(pins, expected);
    // One shard asked for explicitly: that shard's rows.
    let near: Vec<String> = conn
        .query(format!(
            "SELECT p.data FROM pins p JOIN board_has_pins b ON b.pin_id = p.id /*+ SHARD(1) */ WHERE b.board_id = {board}"
        ))
        .await
        .expect("a join on one named shard");
    assert_eq!(near, ["f19-near"]);
    conn.query_drop(format!(
        "DELETE FROM board_has_pins WHERE board_id = {board}"
    ))
    .await
    .unwrap();
    for id in [far_pin, near_pin] {
        conn.query_drop(format!("DELETE FROM pins WHERE id = {id}"))
            .await
            .unwrap();
    }
    conn.query_drop(format!("DELETE FROM boards WHERE id = {board}"))
        .await
        .unwrap();
}

/// F18: a sequence of another shard database named in a column DEFAULT of
/// a schema change, or in NEXTVAL / SETVAL of a statement on shard 1, is a
/// name of the statement: refused, and shard 2's sequence is untouched. A
/// table-less NEXTVAL goes to the sequence's own shard.
#[tokio::test]
async fn sequences_of_another_shard_are_names_of_the_statement() {
    let mut ops = operations(MASTER_A).await;
    ops.query_drop(
        "DROP SEQUENCE IF EXISTS db00002.sg_f18_seq; DROP TABLE IF EXISTS db00001.sg_f18_t, db00001.sg_f18_d; \
         CREATE SEQUENCE db00002.sg_f18_seq; CREATE TABLE db00001.sg_f18_t (v VARCHAR(40))",
    )
    .await
    .unwrap();
    const NEXT: &str = "SELECT next_not_cached_value FROM db00002.sg_f18_seq";
    let before: Option<i64> = ops.query_first(NEXT).await.unwrap();
    let mut conn = client().await;
    for statement in [
        "CREATE TABLE db00001.sg_f18_d (a INT DEFAULT (NEXTVAL(db00002.sg_f18_seq)), b INT)",
        "INSERT INTO db00001.sg_f18_t (v) VALUES (NEXTVAL(db00002.sg_f18_seq))",
        "UPDATE db00001.sg_f18_t SET v = SETVAL(db00002.sg_f18_seq, 500)",
        "SELECT NEXTVAL(db00002.sg_f18_seq), v FROM db00001.sg_f18_t",
    ] {
        let error = conn.query_drop(statement).await.expect_err(statement);
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{statement}: {message}");
        assert!(
            message.contains("db00002.sg_f18_seq is in db00002, but the statement goes to db00001"),
            "{statement}: {message}"
        );
    }
    let after: Option<i64> = ops.query_first(NEXT).await.unwrap();
    assert_eq!(after, before, "shard 2's sequence moved");
    let created: Option<u64> = ops
        .query_first(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'db00001' AND TABLE_NAME = 'sg_f18_d'",
        )
        .await
        .unwrap();
    assert_eq!(created, Some(0), "the schema change ran");
    let rows: Option<u64> = ops
        .query_first("SELECT COUNT(*) FROM db00001.sg_f18_t")
        .await
        .unwrap();
    assert_eq!(rows, Some(0));
    // On its own shard, a sequence is read and advanced as on a server.
    let first: Option<i64> = conn
        .query_first("SELECT NEXTVAL(db00002.sg_f18_seq)")
        .await
        .expect("NEXTVAL on the sequence's shard");
    assert_eq!(first, before);
    ops.query_drop("DROP SEQUENCE db00002.sg_f18_seq; DROP TABLE db00001.sg_f18_t")
        .await
        .unwrap();
}
