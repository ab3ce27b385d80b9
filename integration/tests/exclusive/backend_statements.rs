//! Prepared statements kept prepared on the backend connection
//! (`limits.backend_prepared_statements`): executes of the same planned
//! text on a connection reuse one server-side statement; the cache is
//! bounded (the least recently used closed), follows the connection's
//! session settings, and the server re-prepares a kept statement after a
//! table it reads changes. Counted with master A's global `Com_stmt_*`
//! status, which only this test moves (it holds [`common::serial`]; the
//! proxy has one connection per host).

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

/// A proxy of its own: one backend connection per host, at most `keep`
/// statements kept on it.
fn proxy(name: &str, keep: usize) -> RunningProxy {
    let yaml = test_config_yaml();
    let one_connection = yaml.replace(
        "backend: { user: shard, password: shardpw, pool_max_per_host: 64 }",
        "backend: { user: shard, password: shardpw, pool_max_per_host: 1 }",
    );
    assert_ne!(one_connection, yaml, "the test config's backend line");
    start_server(
        name,
        &format!("{one_connection}\nlimits: {{ backend_prepared_statements: {keep} }}\n"),
    )
}

/// Master A's `Com_stmt_prepare`, `Com_stmt_execute`, `Com_stmt_close`
/// and `Prepared_stmt_count`.
async fn counters(ops: &mut Conn) -> [u64; 4] {
    let mut out = [0; 4];
    for (i, name) in [
        "Com_stmt_prepare",
        "Com_stmt_execute",
        "Com_stmt_close",
        "Prepared_stmt_count",
    ]
    .iter()
    .enumerate()
    {
        let row: Option<(String, u64)> = ops
            .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
            .await
            .unwrap();
        out[i] = row.expect("status variable").1;
    }
    out
}

fn delta(after: [u64; 4], before: [u64; 4]) -> [i64; 4] {
    let mut out = [0; 4];
    for i in 0..4 {
        out[i] = after[i] as i64 - before[i] as i64;
    }
    out
}

/// N executes of one statement on one connection make one prepare on the
/// server, not N; distinct texts beyond the bound close the least recently
/// used; a kept statement is not reused under other settings
/// (`ANSI_QUOTES` reads `"data"` as the column).
#[tokio::test]
async fn executes_reuse_the_statement_kept_on_the_backend_connection() {
    let _serial = serial().await;
    let proxy = proxy("backend-statements", 4);
    let mut conn = app(&proxy).await;
    let mut ops = operations(MASTER_A).await;
    conn.query_drop("INSERT /*+ SHARD(12) */ INTO pins (data) VALUES ('kept')")
        .await
        .unwrap();
    let id = conn.last_insert_id().unwrap();
    let statement = conn
        .prep("SELECT \"data\", data FROM pins WHERE id = ?")
        .await
        .unwrap();

    let before = counters(&mut ops).await;
    for _ in 0..50 {
        let row: Option<(String, String)> = conn.exec_first(&statement, (id,)).await.unwrap();
        assert_eq!(row, Some(("data".to_owned(), "kept".to_owned())));
    }
    let [prepares, executes, _, kept] = delta(counters(&mut ops).await, before);
    assert_eq!((prepares, executes), (1, 50), "one prepare for 50 executes");
    assert_eq!(kept, 1, "the statement stays prepared on the server");

    // Under other settings the statement is read again: "data" is the
    // column, and the statement of the old settings is closed.
    conn.query_drop("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
        .await
        .unwrap();
    let before = counters(&mut ops).await;
    let row: Option<(String, String)> = conn.exec_first(&statement, (id,)).await.unwrap();
    assert_eq!(row, Some(("kept".to_owned(), "kept".to_owned())));
    let [prepares, _, closes, _] = delta(counters(&mut ops).await, before);
    assert_eq!(prepares, 1);
    assert!(closes >= 1, "the old settings' statement closed: {closes}");
    conn.query_drop("SET SESSION sql_mode = DEFAULT")
        .await
        .unwrap();

    // Ten distinct texts (other IDs on shard 12): at most 4 stay prepared.
    let before = counters(&mut ops).await;
    for k in 0..10u64 {
        let other = pin_id(12, (1 << 35) + k);
        let _: Option<(String, String)> = conn.exec_first(&statement, (other,)).await.unwrap();
    }
    // The last text again: kept, so no prepare; the statement evicted by
    // the last insert is closed with it (closes go out with the next
    // command).
    let last = pin_id(12, (1 << 35) + 9);
    let _: Option<(String, String)> = conn.exec_first(&statement, (last,)).await.unwrap();
    let [prepares, executes, closes, kept] = delta(counters(&mut ops).await, before);
    assert_eq!((prepares, executes), (10, 11));
    assert!(closes >= 6, "evicted statements closed: {closes}");
    assert!(kept <= 4, "{kept} more statements prepared on master A");

    // The proxy gone, its connection and statements go with it.
    drop(conn);
    drop(proxy);
}

/// A kept statement whose table changes (a column's type, the table
/// dropped and made again) answers with the table as it is now: MariaDB
/// re-prepares it on its own.
#[tokio::test]
async fn a_kept_statement_reads_its_table_as_it_is_after_ddl() {
    let _serial = serial().await;
    let proxy = proxy("backend-statements-ddl", 4);
    let mut conn = app(&proxy).await;
    let mut ops = operations(MASTER_A).await;
    ops.query_drop("DROP TABLE IF EXISTS db00012.prep_kept")
        .await
        .unwrap();
    ops.query_drop("CREATE TABLE db00012.prep_kept (local_id BIGINT UNSIGNED PRIMARY KEY, c INT)")
        .await
        .unwrap();
    ops.query_drop("INSERT INTO db00012.prep_kept VALUES (1, 5)")
        .await
        .unwrap();
    let sql = "SELECT c FROM db00012.prep_kept WHERE local_id = ?";
    let first: Vec<Value> = conn
        .exec_first::<mysql_async::Row, _, _>(sql, (1u64,))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first, vec![Value::Int(5)]);
    let before = counters(&mut ops).await;
    ops.query_drop("ALTER TABLE db00012.prep_kept MODIFY c VARCHAR(10)")
        .await
        .unwrap();
    ops.query_drop("UPDATE db00012.prep_kept SET c = 'x5'")
        .await
        .unwrap();
    let changed: Vec<Value> = conn
        .exec_first::<mysql_async::Row, _, _>(sql, (1u64,))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(changed, vec![Value::Bytes(b"x5".to_vec())]);
    ops.query_drop("DROP TABLE db00012.prep_kept")
        .await
        .unwrap();
    let gone = conn.exec_drop(sql, (1u64,)).await.expect_err("table gone");
    assert_eq!(server_error(gone).0, 1146);
    ops.query_drop(
        "CREATE TABLE db00012.prep_kept (local_id BIGINT UNSIGNED PRIMARY KEY, d DOUBLE, c TEXT)",
    )
    .await
    .unwrap();
    ops.query_drop("INSERT INTO db00012.prep_kept VALUES (1, 2.5, 'again')")
        .await
        .unwrap();
    let again: Vec<Value> = conn
        .exec_first::<mysql_async::Row, _, _>(sql, (1u64,))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(again, vec![Value::Bytes(b"again".to_vec())]);
    let [prepares, ..] = delta(counters(&mut ops).await, before);
    assert!(prepares <= 2, "{prepares} prepares");
    ops.query_drop("DROP TABLE db00012.prep_kept")
        .await
        .unwrap();
    drop(conn);
    drop(proxy);
}
