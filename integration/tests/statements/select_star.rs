//! `SELECT *` on object tables through the proxy, checked against what the
//! shard's server has: the columns of `SHOW COLUMNS` in order with
//! `local_id` replaced by `id`, and `id` the row's composed 64-bit ID (text
//! and prepared, one shard and several); after `ALTER TABLE ... ADD
//! COLUMN` the new column appears once the columns are read again.
//! Needs `integration/fleet.sh start` and `shardgate fleet init`.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use shardgate::id::compose;

/// Shards of this binary's rows (one per main-fleet master).
const SHARD_B: u32 = 3601;
const SHARD_A: u32 = 601;

/// A pin on `shard` with `data`; its ID.
async fn insert_pin(conn: &mut Conn, shard: u32, data: &str) -> u64 {
    conn.query_drop(format!(
        "INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('{data}')"
    ))
    .await
    .expect("insert a pin");
    conn.last_insert_id().expect("the pin's id")
}

/// The column names of a result's rows.
fn names(row: &Row) -> Vec<String> {
    row.columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect()
}

/// What a client must see for `SELECT *` on `table` of `shard`: the
/// server's columns in order, `local_id` as `id`.
async fn expected_columns(shard: u32, table: &str) -> Vec<String> {
    let mut conn = direct(main_master_port(shard)).await;
    let rows: Vec<Row> = conn
        .query(format!("SHOW COLUMNS FROM db{shard:05}.{table}"))
        .await
        .expect("SHOW COLUMNS");
    conn.disconnect().await.ok();
    let fields: Vec<String> = rows
        .iter()
        .map(|r| r.get::<String, _>(0).expect("Field"))
        .collect();
    assert!(fields.iter().any(|f| f == "local_id"), "{fields:?}");
    fields
        .into_iter()
        .map(|f| if f == "local_id" { "id".to_owned() } else { f })
        .collect()
}

/// The row of `pins` with this ID read straight from its master.
async fn row_on_server(id: u64) -> Row {
    let fields = decode(id);
    let mut conn = direct(main_master_port(fields.shard)).await;
    let row: Row = conn
        .query_first(format!(
            "SELECT * FROM db{:05}.pins WHERE local_id = {}",
            fields.shard, fields.local_id
        ))
        .await
        .expect("direct read")
        .expect("the row is on its master");
    conn.disconnect().await.ok();
    row
}

/// Checks one row of a text `SELECT *` on `pins`: the columns are the
/// server's with `id` for `local_id`, `id` is `id`, every other value is
/// the server's.
async fn check_text_row(row: &Row, id: u64, expected: &[String]) {
    assert_eq!(names(row)[..expected.len()], *expected);
    let server = row_on_server(id).await;
    let server_names = names(&server);
    for (i, name) in expected.iter().enumerate() {
        if name == "id" {
            assert_eq!(server_names[i], "local_id");
            assert_eq!(row.get::<u64, _>(i), Some(id), "the composed id");
        } else {
            assert_eq!(row.as_ref(i), server.as_ref(i), "column {name}");
        }
    }
}

#[tokio::test]
async fn star_on_an_object_table_returns_the_global_id_in_column_order() {
    let mut conn = client().await;
    let id = insert_pin(&mut conn, SHARD_B, "star one").await;
    let expected = expected_columns(SHARD_B, "pins").await;

    let rows: Vec<Row> = conn
        .query(format!("SELECT * FROM pins WHERE id = {id}"))
        .await
        .expect("SELECT *");
    assert_eq!(rows.len(), 1);
    check_text_row(&rows[0], id, &expected).await;

    // `id` has the type and flags `SELECT id` gives.
    let named: Row = conn
        .query_first(format!("SELECT id, data FROM pins WHERE id = {id}"))
        .await
        .unwrap()
        .expect("row");
    let at = expected.iter().position(|c| c == "id").expect("id column");
    let (star_id, named_id) = (&rows[0].columns_ref()[at], &named.columns_ref()[0]);
    assert_eq!(star_id.column_type(), named_id.column_type());
    assert_eq!(star_id.flags(), named_id.flags());

    let aliased: Row = conn
        .query_first(format!("SELECT p.* FROM pins p WHERE p.id = {id}"))
        .await
        .unwrap()
        .expect("row");
    check_text_row(&aliased, id, &expected).await;

    let more: Row = conn
        .query_first(format!("SELECT *, data FROM pins WHERE id = {id}"))
        .await
        .unwrap()
        .expect("row");
    check_text_row(&more, id, &expected).await;
    let mut with_data = expected.clone();
    with_data.push("data".to_owned());
    assert_eq!(names(&more), with_data);
    assert_eq!(
        more.get::<String, _>(expected.len()).as_deref(),
        Some("star one")
    );

    // USE: unqualified tables are the shard's.
    conn.query_drop(format!("USE db{SHARD_B:05}"))
        .await
        .unwrap();
    let used: Row = conn
        .query_first(format!("SELECT * FROM pins WHERE id = {id}"))
        .await
        .unwrap()
        .expect("row");
    check_text_row(&used, id, &expected).await;
}

#[tokio::test]
async fn star_over_several_shards_composes_each_rows_id() {
    let mut conn = client().await;
    let a = insert_pin(&mut conn, SHARD_A, "star a").await;
    let b = insert_pin(&mut conn, SHARD_B, "star b").await;
    let expected = expected_columns(SHARD_A, "pins").await;
    assert_eq!(expected, expected_columns(SHARD_B, "pins").await);
    let rows: Vec<Row> = conn
        .query(format!("SELECT * FROM pins WHERE id IN ({b}, {a})"))
        .await
        .expect("multi-shard SELECT *");
    assert_eq!(rows.len(), 2);
    let at = expected.iter().position(|c| c == "id").expect("id column");
    let mut ids = Vec::new();
    for row in &rows {
        let id: u64 = row.get(at).expect("id");
        check_text_row(row, id, &expected).await;
        ids.push(id);
    }
    ids.sort_unstable();
    let mut want = vec![a, b];
    want.sort_unstable();
    assert_eq!(ids, want);
}

#[tokio::test]
async fn prepared_star_describes_and_returns_the_global_id() {
    let mut conn = client().await;
    let a = insert_pin(&mut conn, SHARD_A, "prepared star a").await;
    let b = insert_pin(&mut conn, SHARD_B, "prepared star b").await;
    let expected = expected_columns(SHARD_B, "pins").await;
    let at = expected.iter().position(|c| c == "id").expect("id column");
    let data_at = expected.iter().position(|c| c == "data").expect("data");

    let one = conn
        .prep("SELECT * FROM pins WHERE id = ?")
        .await
        .expect("prepare");
    let described: Vec<String> = one
        .columns()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    assert_eq!(described, expected, "the PREPARE response's columns");
    let rows: Vec<Row> = conn.exec(&one, (b,)).await.expect("execute");
    assert_eq!(rows.len(), 1);
    assert_eq!(names(&rows[0]), expected);
    assert_eq!(rows[0].get::<u64, _>(at), Some(b));
    assert_eq!(
        rows[0].get::<String, _>(data_at).as_deref(),
        Some("prepared star b")
    );

    let two = conn
        .prep("SELECT * FROM pins WHERE id IN (?, ?)")
        .await
        .expect("prepare");
    assert_eq!(two.columns().len(), expected.len());
    let rows: Vec<Row> = conn.exec(&two, (a, b)).await.expect("execute");
    let mut got: Vec<(u64, String)> = rows
        .iter()
        .map(|r| {
            assert_eq!(names(r), expected);
            (r.get(at).expect("id"), r.get(data_at).expect("data"))
        })
        .collect();
    got.sort_unstable();
    let mut want = vec![
        (a, "prepared star a".to_owned()),
        (b, "prepared star b".to_owned()),
    ];
    want.sort_unstable();
    assert_eq!(got, want);
}

/// Databases of this binary's own fleet (`dbx{:04}`, covered by the data
/// account's `db_____` grant), on master A: the range's first and last
/// (those the columns are read from) and the one written to.
const STAR_DATABASES: [&str; 3] = ["dbx0000", "dbx0005", "dbx0015"];

/// The test config plus fleet `star` (16 shards on master A) with object
/// tables `star_notes` (created by the test) and `star_gone` (never
/// created), columns read every 300 ms.
fn star_fleet_yaml() -> String {
    let yaml = test_config_yaml();
    let with = yaml
        .replacen("types: { ", "types: { star_note: 901, star_gone: 902, ", 1)
        .replacen(
            "\ntables:\n",
            "\n  star:\n    shards: 16\n    database: \"dbx{:04}\"\n    hosts:\n      - { range: [0, 15], master: 127.0.0.1:3307 }\ntables:\n  star_notes: { fleet: star, object: star_note }\n  star_gone: { fleet: star, object: star_gone }\n",
            1,
        )
        .replacen("auto_failover: false }", "auto_failover: false, columns_refresh_ms: 300 }", 1);
    assert!(
        with.contains("star_note: 901")
            && with.contains("star_gone: { fleet")
            && with.contains("columns_refresh_ms"),
        "config/shardgate.yaml no longer has the shape this extends"
    );
    with
}

async fn on_star_databases(ops: &mut Conn, statement: &str) {
    for db in STAR_DATABASES {
        ops.query_drop(statement.replace("{db}", db))
            .await
            .unwrap_or_else(|e| panic!("{statement} on {db}: {e}"));
    }
}

/// The column names of `SELECT * FROM star_notes WHERE id = <id>` and its
/// `extra` value, if it has one.
async fn star_notes(conn: &mut Conn, id: u64) -> (Vec<String>, Option<i64>) {
    let row: Row = conn
        .query_first(format!("SELECT * FROM star_notes WHERE id = {id}"))
        .await
        .expect("SELECT * FROM star_notes")
        .expect("row");
    let columns = names(&row);
    let extra = columns
        .iter()
        .position(|c| c == "extra")
        .and_then(|i| row.get(i));
    (columns, extra)
}

#[tokio::test]
async fn star_follows_a_column_added_on_the_servers_and_refuses_unread_tables() {
    let mut ops = operations(MASTER_A).await;
    on_star_databases(&mut ops, "DROP DATABASE IF EXISTS {db}").await;
    on_star_databases(&mut ops, "CREATE DATABASE {db}").await;
    on_star_databases(
        &mut ops,
        "CREATE TABLE {db}.star_notes (local_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, body TEXT)",
    )
    .await;
    // The databases go whatever the checks find.
    let outcome = tokio::spawn(star_fleet_checks()).await;
    on_star_databases(&mut ops, "DROP DATABASE IF EXISTS {db}").await;
    ops.disconnect().await.ok();
    if let Err(failed) = outcome {
        std::panic::resume_unwind(failed.into_panic());
    }
}

async fn star_fleet_checks() {
    let proxy = start_server("select_star", &star_fleet_yaml());
    let mut conn = connect_to(proxy.listening.client, APP_USER, APP_PASSWORD)
        .await
        .expect("connect");
    conn.query_drop("INSERT /*+ SHARD(5) */ INTO star_notes (body) VALUES ('note')")
        .await
        .expect("insert");
    let id = conn.last_insert_id().expect("id");
    assert_eq!(decode(id).shard, 5);
    assert_eq!(
        star_notes(&mut conn, id).await,
        (vec!["id".to_owned(), "body".to_owned()], None)
    );

    let mut ops = operations(MASTER_A).await;
    on_star_databases(
        &mut ops,
        "ALTER TABLE {db}.star_notes ADD COLUMN extra INT NOT NULL DEFAULT 7",
    )
    .await;
    ops.disconnect().await.ok();
    let deadline = Instant::now() + Duration::from_secs(10);
    let want = (
        vec!["id".to_owned(), "body".to_owned(), "extra".to_owned()],
        Some(7),
    );
    loop {
        let got = star_notes(&mut conn, id).await;
        if got == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new column never appeared: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A column added on one database only: refused until every one has it.
    let mut ops = operations(MASTER_A).await;
    ops.query_drop("ALTER TABLE dbx0015.star_notes ADD COLUMN later INT")
        .await
        .expect("alter one database");
    ops.disconnect().await.ok();
    let deadline = Instant::now() + Duration::from_secs(10);
    let message = loop {
        match conn
            .query_drop(format!("SELECT * FROM star_notes WHERE id = {id}"))
            .await
        {
            Err(error) => break server_error(error).1,
            Ok(()) => assert!(Instant::now() < deadline, "never refused"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        message.contains("dbx0000 has (local_id, body, extra)")
            && message.contains("dbx0015 has (local_id, body, extra, later)"),
        "{message}"
    );

    let gone = compose(5, 902, 1);
    let error = conn
        .query_drop(format!("SELECT * FROM star_gone WHERE id = {gone}"))
        .await
        .expect_err("columns never read");
    let (code, message) = server_error(error);
    assert_eq!(code, 1105, "{message}");
    assert!(
        message
            .contains("SELECT * on object table star_gone: shardgate has not read its columns yet")
            && message.contains("name the columns"),
        "{message}"
    );
    conn.disconnect().await.ok();
}
