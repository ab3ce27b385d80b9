//! Session and connection state at the edges, checked on the servers: a
//! combined SET that fails never commits, a schema change with autocommit
//! off leaves no transaction open, `SET TRANSACTION` never leaks to a
//! pooled connection, and COM_FIELD_LIST reports the session's status.

use crate::common;

use std::time::Duration;

use common::raw_proxy_conn as raw_client;
use common::*;
use mysql_async::prelude::Queryable;
use mysql_common::constants::{Command, StatusFlags};
use shardgate::backend::BackendConn;
use shardgate::protocol::packets::{parse_eof_status, parse_err, parse_ok};

/// Shards this binary writes on (host A); rows are tagged.
const SHARD_A: u32 = 1919;
const TAG: &str = "session-edges";

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
    conn.query_drop("SET autocommit = 1, @session_edges = 1")
        .await
        .unwrap();
    assert_eq!(in_transaction(&mut conn).await, (1, 0));
}

/// The status flags of the OK a statement gets.
async fn ok_status(conn: &mut BackendConn, sql: &str) -> StatusFlags {
    let answer = conn
        .simple_command(Command::COM_QUERY, sql.as_bytes())
        .await
        .unwrap();
    assert_eq!(answer[0], 0x00, "{sql}: {:?}", parse_err(&answer));
    parse_ok(&answer).unwrap().status
}

/// The status flags of a result set's two EOFs (columns, rows).
async fn result_statuses(conn: &mut BackendConn, sql: &str) -> Vec<StatusFlags> {
    conn.send_command(Command::COM_QUERY, sql.as_bytes())
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let (_, packet) = conn.reader.next_packet().await.unwrap();
        assert_ne!(packet[0], 0xFF, "{sql}: {:?}", parse_err(&packet));
        if packet[0] == 0xFE && packet.len() < 9 {
            seen.push(parse_eof_status(&packet).unwrap());
        }
    }
    seen
}

#[tokio::test]
async fn a_schema_change_with_autocommit_off_leaves_no_transaction_open() {
    let table = format!("fixe_ddl_{}", std::process::id());
    let db = format!("db{SHARD_A:05}");
    let mut raw = raw_client().await;
    ok_status(&mut raw, "SET autocommit = 0").await;
    // A read opens the implicit transaction; the schema change ends it.
    let read = format!("SELECT data FROM pins WHERE id = {}", pin_id(SHARD_A, 1));
    let seen = result_statuses(&mut raw, &read).await;
    assert!(seen[0].contains(StatusFlags::SERVER_STATUS_IN_TRANS));
    let status = ok_status(&mut raw, &format!("CREATE TABLE {db}.{table} (a INT)")).await;
    assert!(
        !status.contains(StatusFlags::SERVER_STATUS_IN_TRANS),
        "the CREATE's OK: {status:?}"
    );
    let mut conn = client().await;
    conn.query_drop("SET autocommit = 0").await.unwrap();
    conn.query_drop(format!("DROP TABLE {db}.{table}"))
        .await
        .unwrap();
    assert_eq!(in_transaction(&mut conn).await, (0, 0), "after the DROP");
    conn.query_drop("SET TRANSACTION READ ONLY")
        .await
        .expect("no transaction is in progress");
}

#[tokio::test]
async fn field_list_reports_the_sessions_status() {
    let mut raw = raw_client().await;
    ok_status(&mut raw, "SET autocommit = 0").await;
    let answer = raw
        .simple_command(Command::COM_INIT_DB, format!("db{SHARD_A:05}").as_bytes())
        .await
        .unwrap();
    assert_eq!(answer[0], 0x00, "{:?}", parse_err(&answer));
    raw.send_command(Command::COM_FIELD_LIST, b"pins\0")
        .await
        .unwrap();
    let end = loop {
        let (_, packet) = raw.reader.next_packet().await.unwrap();
        assert_ne!(packet[0], 0xFF, "{:?}", parse_err(&packet));
        if packet[0] == 0xFE {
            break packet;
        }
    };
    let status = parse_eof_status(&end).unwrap();
    assert!(
        !status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT),
        "autocommit is off in the session: {status:?}"
    );
}

/// An unknown table's COM_FIELD_LIST answers the server's ERR untouched:
/// its SQLSTATE marker is not taken for status flags.
#[tokio::test]
async fn field_list_of_an_unknown_table_keeps_the_servers_error() {
    let mut raw = raw_client().await;
    let answer = raw
        .simple_command(Command::COM_INIT_DB, format!("db{SHARD_A:05}").as_bytes())
        .await
        .unwrap();
    assert_eq!(answer[0], 0x00, "{:?}", parse_err(&answer));
    raw.send_command(Command::COM_FIELD_LIST, b"no_such_table_fl\0")
        .await
        .unwrap();
    let (_, packet) = raw.reader.next_packet().await.unwrap();
    assert_eq!(packet[0], 0xFF, "an ERR: {packet:?}");
    assert_eq!(packet[3], b'#', "the SQLSTATE marker: {packet:?}");
    assert_eq!(&packet[4..9], b"42S02", "the SQLSTATE: {packet:?}");
    let message = String::from_utf8_lossy(&packet[9..]);
    assert!(message.contains("no_such_table_fl"), "{message}");
}

#[tokio::test]
async fn set_transaction_never_reaches_another_sessions_statement() {
    let mut first = client().await;
    first.query_drop("SET TRANSACTION READ ONLY").await.unwrap();
    // A SHOW takes the characteristics to its connection but, on the
    // server, does not consume them.
    first
        .query_drop(format!("SHOW COLUMNS FROM db{SHARD_A:05}.pins"))
        .await
        .unwrap();
    let mut second = client().await;
    for n in 0..4 {
        let written = try_insert_pin(&mut second, SHARD_A, &format!("{TAG} rw {n}")).await;
        assert!(
            written.is_ok(),
            "another session's write: {:?}",
            written.map_err(server_error)
        );
    }
    delete_pins(MASTER_A, &[SHARD_A], TAG).await;
}

/// The server thread on master A running a statement containing `marker`.
async fn thread_running(marker: &str) -> Option<u64> {
    let mut ops = operations(MASTER_A).await;
    let id = ops
        .query_first(format!(
            "SELECT ID FROM information_schema.PROCESSLIST \
             WHERE INFO LIKE '%{marker}%' AND INFO NOT LIKE '%PROCESSLIST%'"
        ))
        .await
        .expect("backend process list");
    ops.disconnect().await.ok();
    id
}

async fn thread_exists(id: u64) -> bool {
    let mut ops = operations(MASTER_A).await;
    let found: Option<u64> = ops
        .query_first(format!(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE ID = {id}"
        ))
        .await
        .expect("backend process list");
    ops.disconnect().await.ok();
    found.is_some()
}

#[tokio::test]
async fn a_connection_a_kill_was_aimed_at_is_closed_not_pooled() {
    let mut victim = client().await;
    let mut killer = client().await;
    let id = insert_pin(&mut victim, SHARD_A, &format!("{TAG} kill")).await;
    let marker = "fixe_kill_marker";
    let victim_id = victim.id();
    let running = tokio::spawn(async move {
        let result = victim
            .query_drop(format!(
                "SELECT SLEEP(30) AS {marker} FROM pins WHERE id = {id}"
            ))
            .await;
        (victim, result)
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let thread = loop {
        if let Some(thread) = thread_running(marker).await {
            break thread;
        }
        assert!(std::time::Instant::now() < deadline, "never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    killer
        .query_drop(format!("KILL QUERY {victim_id}"))
        .await
        .unwrap();
    let (mut victim, result) = running.await.unwrap();
    assert_eq!(server_error(result.expect_err("cancelled")).0, 1317);
    // The next statement settles the previous one's connection.
    let one: Option<u64> = victim.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while thread_exists(thread).await {
        assert!(
            std::time::Instant::now() < deadline,
            "backend thread {thread} went back to the pool"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    delete_pins(MASTER_A, &[SHARD_A], &format!("{TAG} kill")).await;
}

/// Session variables that would undo the proxy's rules are refused before
/// they reach a server, and a session that tried them keeps working as
/// before: `completion_type = CHAIN` would have left a committed-looking
/// write in a server-side transaction the proxy did not know of.
#[tokio::test]
async fn variables_that_undo_the_proxys_rules_are_refused() {
    let mut conn = client().await;
    for statement in [
        "SET completion_type = 1",
        "SET SESSION completion_type = 'RELEASE'",
        "SET DEFAULT ROLE NONE",
        "SET ROLE NONE",
        "SET SESSION default_storage_engine = 'MRG_MyISAM'",
        "SET skip_replication = 1",
        "SHOW EXPLAIN FOR 1",
        "SHOW ANALYZE FOR 1",
    ] {
        let refused = conn.query_drop(statement).await.expect_err(statement);
        let (code, message) = server_error(refused);
        assert_eq!(code, 1105, "{statement}: {message}");
    }
    // The session's connection still chains nothing.
    conn.query_drop("BEGIN").await.unwrap();
    let first = insert_pin(&mut conn, SHARD_A, &format!("{TAG} chain 1")).await;
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(in_transaction(&mut conn).await, (1, 0));
    let second = insert_pin(&mut conn, SHARD_A, &format!("{TAG} chain 2")).await;
    drop(conn);
    assert!(pin_on_host(first).await.is_some(), "the committed write");
    assert!(
        pin_on_host(second).await.is_some(),
        "the autocommitted write"
    );
    // A CREATE TABLE without ENGINE made no MERGE table.
    let mut conn = client().await;
    let table = format!("fixe_engine_{}", std::process::id());
    let db = format!("db{SHARD_A:05}");
    conn.query_drop(format!("CREATE TABLE {db}.{table} (a INT)"))
        .await
        .unwrap();
    let mut server = direct(main_master_port(SHARD_A)).await;
    let engine: Option<String> = server
        .exec_first(
            "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (db.as_str(), table.as_str()),
        )
        .await
        .unwrap();
    conn.query_drop(format!("DROP TABLE {db}.{table}"))
        .await
        .unwrap();
    assert_eq!(engine.as_deref(), Some("InnoDB"));
    delete_pins(MASTER_A, &[SHARD_A], TAG).await;
}

/// Tag of the deadlock test's pins (not `TAG`: other tests delete those).
const DEADLOCK_TAG: &str = "deadlock-edges";

/// Rows of shard `SHARD_A` the deadlock test writes, made for it.
async fn two_pins(conn: &mut mysql_async::Conn, tag: &str) -> (u64, u64) {
    (
        insert_pin(conn, SHARD_A, &format!("{tag} one")).await,
        insert_pin(conn, SHARD_A, &format!("{tag} two")).await,
    )
}

/// Makes `a` and `b` (each in a transaction already) deadlock on pins
/// `one` and `two`; returns the victim (it got 1213) and the other.
async fn deadlock(
    mut a: mysql_async::Conn,
    mut b: mysql_async::Conn,
    (one, two): (u64, u64),
) -> (mysql_async::Conn, mysql_async::Conn) {
    let update = |id: u64, v: &str| format!("UPDATE pins SET data = '{v}' WHERE id = {id}");
    a.query_drop(update(one, "a")).await.expect("A locks one");
    b.query_drop(update(two, "b")).await.expect("B locks two");
    let waiting = tokio::spawn(async move {
        let result = a.query_drop(update(two, "a")).await;
        (a, result)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b_result = b.query_drop(update(one, "b")).await;
    let (a, a_result) = waiting.await.expect("A's task");
    match (a_result, b_result) {
        (Ok(()), Err(error)) => {
            assert_eq!(server_error(error).0, 1213, "B is the victim");
            (b, a)
        }
        (Err(error), Ok(())) => {
            assert_eq!(server_error(error).0, 1213, "A is the victim");
            (a, b)
        }
        other => panic!("one deadlock victim expected: {other:?}"),
    }
}

#[tokio::test]
async fn a_deadlock_ends_the_transaction_as_the_server_did() {
    let mut setup = client().await;
    let pins = two_pins(&mut setup, DEADLOCK_TAG).await;

    // autocommit off: the next statement opens a new transaction, which a
    // ROLLBACK undoes.
    let (mut a, mut b) = (client().await, client().await);
    a.query_drop("SET autocommit = 0").await.unwrap();
    b.query_drop("SET autocommit = 0").await.unwrap();
    let (mut victim, mut other) = deadlock(a, b, pins).await;
    assert_eq!(in_transaction(&mut victim).await, (0, 0), "rolled back");
    let after = insert_pin(&mut victim, SHARD_A, &format!("{DEADLOCK_TAG} after")).await;
    assert_eq!(in_transaction(&mut victim).await, (0, 1), "a new one");
    victim.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(pin_on_host(after).await, None, "the ROLLBACK undid it");
    other.query_drop("ROLLBACK").await.unwrap();

    // BEGIN: no transaction is left, and a new BEGIN binds a new one.
    let (mut a, mut b) = (client().await, client().await);
    a.query_drop("BEGIN").await.unwrap();
    b.query_drop("BEGIN").await.unwrap();
    let (mut victim, mut other) = deadlock(a, b, pins).await;
    assert_eq!(in_transaction(&mut victim).await, (1, 0), "rolled back");
    victim.query_drop("BEGIN").await.unwrap();
    let after = insert_pin(&mut victim, SHARD_A, &format!("{DEADLOCK_TAG} after")).await;
    victim.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(pin_on_host(after).await, None, "the ROLLBACK undid it");
    other.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(
        pin_on_host(pins.0).await.as_deref(),
        Some(format!("{DEADLOCK_TAG} one").as_str()),
        "no update of either transaction stayed"
    );
    delete_pins(MASTER_A, &[SHARD_A], DEADLOCK_TAG).await;
}

#[tokio::test]
async fn state_a_shard_statement_leaves_never_reaches_the_next_client() {
    // One connection per host: the second client surely gets the first's.
    let yaml = test_config_yaml().replace("pool_max_per_host: 64", "pool_max_per_host: 1");
    assert!(yaml.contains("pool_max_per_host: 1"));
    let proxy = start_server("stateleak", &yaml);
    let lock = format!("stateleak_{}", std::process::id());
    let mut a = app(&proxy).await;
    insert_pin(&mut a, 1, &format!("{TAG} stateleak")).await;
    let on_shard = "(SELECT 1 FROM db00001.pins LIMIT 1)";
    a.query_drop(format!(
        "SELECT @stateleak_secret := 'hunter2' AS a, {on_shard} AS b"
    ))
    .await
    .unwrap();
    a.query_drop("SELECT 'into' INTO @stateleak_into FROM db00001.pins LIMIT 1")
        .await
        .unwrap();
    let taken: Option<(i64, Option<i64>)> = a
        .query_first(format!(
            "SELECT GET_LOCK('{lock}', 0) AS g, {on_shard} AS b"
        ))
        .await
        .unwrap();
    assert_eq!(taken.map(|(g, _)| g), Some(1), "A took the lock");
    a.disconnect().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut b = app(&proxy).await;
    // The variables, IS_FREE_LOCK, and the shard's column.
    type Seen = (Option<String>, Option<String>, i64, Option<i64>);
    let seen: Option<Seen> = b
        .query_first(format!(
            "SELECT @stateleak_secret, @stateleak_into, IS_FREE_LOCK('{lock}'), {on_shard}"
        ))
        .await
        .unwrap();
    let (secret, into, free, _) = seen.expect("a row");
    assert_eq!((secret, into, free), (None, None, 1), "A's state is gone");
    let mut ops = operations(MASTER_A).await;
    let got: Option<i64> = ops
        .query_first(format!("SELECT GET_LOCK('{lock}', 0)"))
        .await
        .unwrap();
    assert_eq!(got, Some(1), "the lock is free on the server");
    ops.query_drop(format!("DO RELEASE_LOCK('{lock}')"))
        .await
        .unwrap();
}
