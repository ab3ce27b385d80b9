//! Session and connection state at the edges, checked on the servers: a
//! combined SET that fails never commits, a schema change with autocommit
//! off leaves no transaction open, `SET TRANSACTION` never leaks to a
//! pooled connection, and COM_FIELD_LIST reports the session's status.

mod common;

use std::time::Duration;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_common::constants::{CapabilityFlags, Command, StatusFlags};
use shardgate::backend::{BackendConn, ConnKey};
use shardgate::protocol::packets::{parse_eof_status, parse_err, parse_ok};

/// Shards this binary writes on (host A); rows are tagged.
const SHARD_A: u32 = 1919;
const TAG: &str = "engine-review";

async fn pin_on_host(id: u64) -> Option<String> {
    let fields = decode(id);
    row_on_host(
        main_master_port(fields.shard),
        "pins",
        fields.shard,
        fields.local_id,
    )
    .await
}

async fn in_transaction(conn: &mut mysql_async::Conn) -> (i64, i64) {
    conn.query_first("SELECT @@autocommit, @@in_transaction")
        .await
        .expect("session values")
        .expect("one row")
}

#[tokio::test]
async fn a_combined_set_that_fails_never_commits_the_transaction() {
    let mut conn = client().await;
    conn.query_drop("SET autocommit = 0").await.unwrap();
    let id = insert_pin(&mut conn, SHARD_A, &format!("{TAG} combined")).await;
    let refused = conn
        .query_drop("SET autocommit = 1, sql_mode = 'BOGUS'")
        .await
        .expect_err("a bogus sql_mode");
    let (code, message) = server_error(refused);
    assert!(code == 1105 || code == 1231, "{code} {message}");
    assert_eq!(pin_on_host(id).await, None, "nothing committed");
    assert_eq!(in_transaction(&mut conn).await, (0, 1), "still in it");
    conn.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(pin_on_host(id).await, None, "rolled back");

    // Unbound: an explicit transaction and an implicit one stay open.
    conn.query_drop("BEGIN").await.unwrap();
    conn.query_drop("SET autocommit = 1, sql_mode = 'BOGUS'")
        .await
        .expect_err("a bogus sql_mode");
    assert_eq!(in_transaction(&mut conn).await, (0, 1), "BEGIN kept");
    conn.query_drop("ROLLBACK").await.unwrap();
    let read = format!("SELECT data FROM pins WHERE id = {}", pin_id(SHARD_A, 1));
    conn.query_drop(&read).await.unwrap();
    conn.query_drop("SET autocommit = 1, sql_mode = 'BOGUS'")
        .await
        .expect_err("a bogus sql_mode");
    assert_eq!(in_transaction(&mut conn).await, (0, 1), "implicit kept");
    conn.query_drop("ROLLBACK").await.unwrap();
    // Nothing bound: turning autocommit on with another variable works.
    conn.query_drop("SET autocommit = 1, @engine_review = 1")
        .await
        .unwrap();
    assert_eq!(in_transaction(&mut conn).await, (1, 0));
}
