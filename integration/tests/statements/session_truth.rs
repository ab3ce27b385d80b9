//! The session's truth through the proxy, with real clients and checked on
//! the servers: SETs as a server takes them (autocommit among other
//! variables, `SET TRANSACTION` for the next transaction only), the status
//! flags of every answer, and the session variables and functions a driver
//! reads (`@@autocommit`, `@@warning_count`, `DATABASE()`,
//! `LAST_INSERT_ID()`).

use crate::common;

use std::time::Duration;

use common::raw_proxy_conn as raw_client;
use common::*;
use mysql_async::prelude::Queryable;
use mysql_common::constants::{CapabilityFlags, Command, StatusFlags};
use shardgate::backend::{BackendConn, ConnKey};
use shardgate::protocol::frame::read_lenenc_int;
use shardgate::protocol::packets::{parse_eof_status, parse_err, parse_ok, status_offset};

/// Shards this binary writes on (host A, host B); rows are tagged.
const SHARD_A: u32 = 1717;
const SHARD_B: u32 = 2717;
const TAG: &str = "session-truth";

#[tokio::test]
async fn connector_j_connect_set_is_accepted_and_both_parts_take_effect() {
    let mut conn = client().await;
    conn.query_drop("set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')")
        .await
        .expect("MariaDB Connector/J's first statement");
    conn.query_drop("SET autocommit = 0, sql_mode = concat(@@sql_mode, ',PIPES_AS_CONCAT')")
        .await
        .expect("autocommit among other variables");
    let piped: Option<String> = conn.query_first("SELECT 'a' || 'b'").await.unwrap();
    assert_eq!(piped.as_deref(), Some("ab"), "sql_mode took effect");
    let id = insert_pin(&mut conn, SHARD_A, &format!("{TAG} cj")).await;
    assert_eq!(
        pin_on_host(id).await,
        None,
        "autocommit is off: not committed"
    );
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(
        pin_on_host(id).await.as_deref(),
        Some(format!("{TAG} cj").as_str())
    );
    // Back on, with another variable: the proxy applies it too.
    conn.query_drop("SET @@session.autocommit = ON, @sets_marker = 7")
        .await
        .unwrap();
    let id = insert_pin(&mut conn, SHARD_A, &format!("{TAG} cj2")).await;
    assert!(pin_on_host(id).await.is_some(), "autocommit is on again");
    let marker: Option<i64> = conn.query_first("SELECT @sets_marker").await.unwrap();
    assert_eq!(marker, Some(7));
    delete_pins(MASTER_A, &[SHARD_A], &format!("{TAG} cj")).await;
}

#[tokio::test]
async fn session_variables_are_the_sessions_in_text_and_prepared() {
    let mut conn = client().await;
    conn.query_drop("SET autocommit = 0").await.unwrap();
    let text: Option<i64> = conn.query_first("SELECT @@autocommit").await.unwrap();
    assert_eq!(text, Some(0), "text protocol");
    let prepared: Option<i64> = conn.exec_first("SELECT @@autocommit", ()).await.unwrap();
    assert_eq!(prepared, Some(0), "prepared statement");
    let before: Option<(i64, i64)> = conn
        .query_first("SELECT @@session.autocommit, @@in_transaction")
        .await
        .unwrap();
    assert_eq!(before, Some((0, 0)));
    conn.query_drop(format!(
        "SELECT data FROM pins WHERE id = {}",
        pin_id(SHARD_A, 1)
    ))
    .await
    .unwrap();
    let after: Option<(i64, i64)> = conn
        .query_first("SELECT @@session.autocommit, @@in_transaction")
        .await
        .unwrap();
    assert_eq!(after, Some((0, 1)), "a read opened the transaction");
    conn.query_drop("ROLLBACK").await.unwrap();
}

#[tokio::test]
async fn set_transaction_is_for_the_next_transaction_only() {
    let mut conn = client().await;
    conn.query_drop("SET TRANSACTION READ ONLY").await.unwrap();
    conn.query_drop("BEGIN").await.unwrap();
    let refused = try_insert_pin(&mut conn, SHARD_A, &format!("{TAG} ro"))
        .await
        .expect_err("the next transaction is read only");
    assert_eq!(server_error(refused).0, 1792);
    conn.query_drop("ROLLBACK").await.unwrap();
    // The transaction after it, on another host, is not.
    conn.query_drop("BEGIN").await.unwrap();
    let id = insert_pin(&mut conn, SHARD_B, &format!("{TAG} rw")).await;
    conn.query_drop("COMMIT").await.unwrap();
    assert!(pin_on_host(id).await.is_some());
    // Inside a transaction, as the server says.
    conn.query_drop("BEGIN").await.unwrap();
    let (code, message) = server_error(
        conn.query_drop("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .await
            .expect_err("refused inside a transaction"),
    );
    assert_eq!(code, 1568, "{message}");
    conn.query_drop("ROLLBACK").await.unwrap();
    // SET SESSION TRANSACTION is the session's: every connection has it.
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await
        .unwrap();
    let level: Option<String> = conn.query_first("SELECT @@tx_isolation").await.unwrap();
    assert_eq!(level.as_deref(), Some("READ-COMMITTED"));
    delete_pins(MASTER_B, &[SHARD_B], TAG).await;
}

#[tokio::test]
async fn diagnostics_counts_answer_one_column_per_item() {
    let mut conn = client().await;
    conn.query_drop("SELECT 1").await.unwrap();
    let mut result = conn
        .query_iter("SELECT @@warning_count, @@error_count")
        .await
        .unwrap();
    let names: Vec<String> = result
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let rows: Vec<(u64, u64)> = result.collect().await.unwrap();
    assert_eq!(names, ["@@warning_count", "@@error_count"]);
    assert_eq!(rows, [(0, 0)]);
    let mixed: Option<(u64, String)> = conn
        .query_first("SELECT @@warning_count, @@version")
        .await
        .unwrap();
    let (count, version) = mixed.unwrap();
    assert_eq!(count, 0);
    assert!(version.contains("MariaDB"), "{version}");
}

#[tokio::test]
async fn database_and_last_insert_id_in_statements_are_the_sessions() {
    let mut conn = client().await;
    conn.query_drop(format!("USE db{SHARD_A:05}"))
        .await
        .unwrap();
    let mut result = conn.query_iter("SELECT DATABASE(), 1").await.unwrap();
    let name = result.columns_ref()[0].name_str().into_owned();
    let row: Vec<(Option<String>, i64)> = result.collect().await.unwrap();
    assert_eq!(name, "DATABASE()");
    assert_eq!(row, [(Some(format!("db{SHARD_A:05}")), 1)]);

    let id = insert_pin(&mut conn, SHARD_A, &format!("{TAG} lid")).await;
    let plus: Option<u64> = conn
        .query_first("SELECT LAST_INSERT_ID() + 0")
        .await
        .unwrap();
    assert_eq!(plus, Some(id), "the 64-bit ID");
    let data: Option<String> = conn
        .query_first("SELECT data FROM pins WHERE id = LAST_INSERT_ID()")
        .await
        .unwrap();
    assert_eq!(
        data,
        Some(format!("{TAG} lid")),
        "routed by the session's ID"
    );
    delete_pins(MASTER_A, &[SHARD_A], &format!("{TAG} lid")).await;
}

// ----- status flags, read from the packets -----

async fn next(conn: &mut BackendConn) -> Vec<u8> {
    conn.reader.next_packet().await.unwrap().1
}

/// Sends `command` and reads the answer: the status flags of each OK/EOF
/// (column EOF included), and the OK's last-insert-id.
async fn statuses(
    conn: &mut BackendConn,
    command: Command,
    body: &[u8],
) -> (Vec<StatusFlags>, u64) {
    conn.send_command(command, body).await.unwrap();
    let first = next(conn).await;
    match first[0] {
        0xFF => panic!("{:?}", parse_err(&first)),
        0x00 => {
            let ok = parse_ok(&first).unwrap();
            return (vec![ok.status], ok.last_insert_id);
        }
        _ => {}
    }
    let columns = read_lenenc_int(&mut first.as_slice()).unwrap();
    for _ in 0..columns {
        next(conn).await;
    }
    let mut seen = vec![parse_eof_status(&next(conn).await).unwrap()];
    loop {
        let packet = next(conn).await;
        if packet[0] == 0xFE && packet.len() < 9 {
            seen.push(parse_eof_status(&packet).unwrap());
            return (seen, 0);
        }
    }
}

async fn query(conn: &mut BackendConn, sql: &str) -> Vec<StatusFlags> {
    statuses(conn, Command::COM_QUERY, sql.as_bytes()).await.0
}

fn assert_all(seen: &[StatusFlags], autocommit: bool, in_trans: bool, what: &str) {
    for status in seen {
        assert_eq!(
            status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT),
            autocommit,
            "{what}: autocommit in {status:?}"
        );
        assert_eq!(
            status.contains(StatusFlags::SERVER_STATUS_IN_TRANS),
            in_trans,
            "{what}: in-transaction in {status:?}"
        );
    }
}

#[tokio::test]
async fn status_flags_are_the_sessions_in_every_answer() {
    let mut conn = raw_client().await;
    let read = format!("SELECT data FROM pins WHERE id = {}", pin_id(SHARD_A, 1));
    query(&mut conn, "SET autocommit = 0").await;
    assert_all(
        &query(&mut conn, &read).await,
        false,
        true,
        "a shard read, autocommit off",
    );
    assert_all(
        &query(&mut conn, "SELECT 1").await,
        false,
        true,
        "any host, in the transaction",
    );
    let insert = format!("INSERT /*+ SHARD({SHARD_A}) */ INTO pins (data) VALUES ('{TAG} flags')");
    let (seen, id) = statuses(&mut conn, Command::COM_QUERY, insert.as_bytes()).await;
    assert_all(&seen, false, true, "a write binding the transaction");
    assert_all(&query(&mut conn, "COMMIT").await, false, false, "COMMIT");
    assert!(pin_on_host(id).await.is_some());

    // A prepared statement's execution (binary protocol).
    conn.send_command(Command::COM_STMT_PREPARE, read.as_bytes())
        .await
        .unwrap();
    let prepared = next(&mut conn).await;
    assert_eq!(prepared[0], 0x00, "{:?}", parse_err(&prepared));
    let statement = u32::from_le_bytes([prepared[1], prepared[2], prepared[3], prepared[4]]);
    let columns = u16::from_le_bytes([prepared[5], prepared[6]]);
    for _ in 0..=columns {
        next(&mut conn).await;
    }
    let mut execute = statement.to_le_bytes().to_vec();
    execute.push(0);
    execute.extend_from_slice(&1u32.to_le_bytes());
    let (seen, _) = statuses(&mut conn, Command::COM_STMT_EXECUTE, &execute).await;
    assert_all(&seen, false, true, "a prepared read, autocommit off");
    query(&mut conn, "ROLLBACK").await;

    // NO_BACKSLASH_ESCAPES in the proxy's own answers too.
    query(&mut conn, "SET sql_mode = 'NO_BACKSLASH_ESCAPES'").await;
    let begin = query(&mut conn, "BEGIN").await;
    assert!(
        begin[0].contains(StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES),
        "{begin:?}"
    );
    query(&mut conn, "ROLLBACK").await;
    delete_pins(MASTER_A, &[SHARD_A], &format!("{TAG} flags")).await;
}

#[tokio::test]
async fn mysql_cli_sees_the_connector_j_set_through() {
    let output = mariadb_cli(
        "set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES'); \
         SET autocommit = 0, time_zone = '+03:00'; SELECT @@autocommit, @@time_zone",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("0\t+03:00"), "{stdout}");
}

/// Every byte the proxy sends was read by it in the session's character
/// set: a gbk client cannot turn a comment inside `@@session/**/.warning_count`
/// into a column name that ends early, and no statement but the proxy's
/// own answers reads the servers' process list (every session's text).
#[tokio::test]
async fn no_text_reaches_a_server_unread() {
    let mut conn = client().await;
    conn.query_drop("SET NAMES gbk").await.expect("gbk");
    // 中 in UTF-8 is E4 B8 AD: in gbk AD 60 is one character, eating a
    // backtick of a doubled pair.
    let injected = "SELECT @@session/*中`, (SELECT GROUP_CONCAT(info) FROM information_schema.PROCESSLIST) #*/.warning_count, @@version";
    let error = conn
        .query_drop(injected)
        .await
        .expect_err("refused, not sent with a copied name");
    assert_eq!(server_error(error).0, 1105);
    conn.query_drop("SET NAMES utf8mb4").await.expect("utf8mb4");
    for sql in [
        "SELECT (SELECT GROUP_CONCAT(info) FROM information_schema.processlist)",
        "SELECT * FROM information_schema.PROCESSLIST ORDER BY id",
        "SELECT * FROM (SELECT * FROM information_schema.PROCESSLIST) p",
        "SET @leak = (SELECT GROUP_CONCAT(info) FROM information_schema.processlist)",
    ] {
        let error = conn.query_drop(sql).await.expect_err(sql);
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{sql}: {message}");
        assert!(message.contains("PROCESSLIST"), "{sql}: {message}");
    }
    let rows: Vec<mysql_async::Row> = conn
        .query("SELECT * FROM information_schema.PROCESSLIST")
        .await
        .expect("the proxy's own list");
    assert!(!rows.is_empty());
    conn.disconnect().await.ok();
}

/// `DO` and `SET` see the session's values, not a pooled connection's.
#[tokio::test]
async fn do_and_set_read_the_sessions_values() {
    let mut conn = client().await;
    let id = insert_pin(&mut conn, SHARD_A, TAG).await;
    conn.query_drop("SET @fixr_last = LAST_INSERT_ID()")
        .await
        .expect("set");
    let read: Option<u64> = conn.query_first("SELECT @fixr_last").await.expect("read");
    assert_eq!(read, Some(id));
    conn.query_drop("DO LAST_INSERT_ID()").await.expect("do");
    let (warnings, autocommit): (u64, u64) = conn
        .query_first("SELECT @@warning_count, @@autocommit")
        .await
        .expect("counts")
        .expect("a row");
    assert_eq!((warnings, autocommit), (0, 1));
    conn.query_drop("SET autocommit = 0").await.expect("off");
    let autocommit: Option<u64> = conn.query_first("SELECT @@autocommit").await.expect("read");
    assert_eq!(autocommit, Some(0));
    let (_, autocommit, _): (u64, u64, String) = conn
        .query_first("SELECT @@warning_count, @@autocommit, @@version")
        .await
        .expect("with a server's variable")
        .expect("a row");
    assert_eq!(autocommit, 0);
    conn.query_drop("ROLLBACK").await.ok();
    conn.disconnect().await.ok();
}

/// The column names and values of `sql` on `conn`, values as text.
async fn named_row(
    conn: &mut mysql_async::Conn,
    sql: &str,
) -> (Vec<String>, Vec<mysql_async::Value>) {
    let mut result = conn
        .query_iter(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let names = result
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let rows: Vec<mysql_async::Row> = result.collect().await.unwrap();
    let [row] = rows.as_slice() else {
        panic!("{sql}: {} rows", rows.len());
    };
    (names, row.clone().unwrap())
}

/// Items the proxy puts session values into are named as the server names
/// the client's text (asked of 3307 directly), with the server's values,
/// except where the proxy's value is by design its own: `VERSION()` and
/// `@@version` anywhere in a statement read the proxy's version.
#[tokio::test]
async fn rewritten_items_keep_the_servers_names() {
    let db = format!("db{SHARD_A:05}");
    let mut proxy = client().await;
    let mut server = direct(MASTER_A).await;
    for conn in [&mut proxy, &mut server] {
        conn.query_drop(format!("USE {db}")).await.unwrap();
    }
    for sql in [
        "SELECT CONNECTION_ID() > 0",
        "SELECT  connection_id()  >  0 , 1",
        "SELECT DATABASE() IS NULL, LAST_INSERT_ID() + 1, @@autocommit + 0, @@in_transaction = 0",
        "SELECT @@max_allowed_packet > 1024, IFNULL(DATABASE(), 'x'), `@@session.autocommit` FROM (SELECT @@session.autocommit) AS t",
        "SELECT DISTINCT 1 + CONNECTION_ID() - CONNECTION_ID() UNION SELECT 1",
    ] {
        assert_eq!(
            named_row(&mut proxy, sql).await,
            named_row(&mut server, sql).await,
            "{sql}"
        );
    }
    let version: String = proxy
        .query_first("SELECT VERSION()")
        .await
        .unwrap()
        .unwrap();
    assert!(version.ends_with("-MariaDB-shardgate"), "{version}");
    for (sql, at) in [
        ("SELECT @@version, 1", 0),
        ("SELECT 2, CONCAT(VERSION(), '')", 1),
        ("SELECT @@global.version AS v, CONNECTION_ID() > 0", 0),
    ] {
        let (names, mut values) = named_row(&mut proxy, sql).await;
        let (server_names, mut server_values) = named_row(&mut server, sql).await;
        assert_eq!(names, server_names, "{sql}");
        assert_eq!(
            values[at],
            mysql_async::Value::Bytes(version.clone().into_bytes()),
            "{sql}: the proxy's version"
        );
        values.remove(at);
        server_values.remove(at);
        assert_eq!(values, server_values, "{sql}");
    }
}

/// What one backend connection of the session has for the values a SET
/// computed: read with a statement on a shard of each host (3307, 3308,
/// 3310), so each runs on a connection of that host with the session's
/// settings replayed.
type Computed = (String, u64, Option<i64>, Option<String>, u64, String);

async fn computed_values(conn: &mut mysql_async::Conn, table: &str) -> Computed {
    type Row = (String, u64, Option<i64>, Option<Vec<u8>>, u64, String, u64);
    let row: Option<Row> = conn
        .query_first(format!(
            "SELECT @@session.sql_mode, @@session.max_sort_length, @n, HEX(@s), \
             @@session.sql_select_limit, @@session.collation_connection, COUNT(*) FROM {table}"
        ))
        .await
        .unwrap_or_else(|e| panic!("read back on {table}: {e}"));
    let (mode, sort, n, s, limit, collation, _) = row.expect("one row");
    let s = s.map(|hex| String::from_utf8(hex).expect("hex"));
    (mode, sort, n, s, limit, collation)
}

#[tokio::test]
async fn computed_sets_replay_the_first_servers_value_on_every_host() {
    let mut conn = client().await;
    let defaults: (String, u64) = conn
        .query_first("SELECT @@session.sql_mode, @@session.max_sort_length")
        .await
        .unwrap()
        .unwrap();
    for sql in [
        "SET SESSION sql_mode = CONCAT(@@sql_mode, ',PAD_CHAR_TO_FULL_LENGTH')",
        "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_UNSIGNED_SUBTRACTION')",
        "SET @@session.max_sort_length = @@session.max_sort_length + 1",
        "SET @@session.max_sort_length = @@session.max_sort_length + 1",
        "SET @n = 41",
        "SET @n = @n + 1",
        "SET @s = CONCAT('it''s \\\\ a ', CHAR(39), @n)",
        "SET sql_select_limit = 5000",
        "SET sql_select_limit = DEFAULT",
        "SET NAMES latin1 COLLATE latin1_bin",
        "SET collation_connection = CONCAT(@@character_set_connection, '_swedish_ci')",
    ] {
        conn.query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // What the first server computed, as the client reads it.
    let (mode, sort): (String, u64) = conn
        .query_first("SELECT @@session.sql_mode, @@session.max_sort_length")
        .await
        .unwrap()
        .unwrap();
    assert!(
        mode.contains("PAD_CHAR_TO_FULL_LENGTH") && mode.contains("NO_UNSIGNED_SUBTRACTION"),
        "{mode}"
    );
    for flag in defaults.0.split(',') {
        assert!(mode.split(',').any(|m| m == flag), "{flag} kept in {mode}");
    }
    assert_eq!(sort, defaults.1 + 2, "two increments, once each");
    let want: Computed = (
        mode,
        sort,
        Some(42),
        Some("69742773205C2061202734".to_owned() + "32"),
        u64::MAX,
        "latin1_swedish_ci".to_owned(),
    );
    let tables = [
        format!("db{SHARD_A:05}.pins"),
        format!("db{SHARD_B:05}.pins"),
        "msdb00001.user_by_email".to_owned(),
    ];
    for table in &tables {
        assert_eq!(computed_values(&mut conn, table).await, want, "{table}");
    }
    // Inside a transaction: its bound connection, and reads of other
    // shards on fresh pooled connections beside it.
    conn.query_drop("BEGIN").await.unwrap();
    conn.query_drop(format!(
        "SELECT data FROM pins WHERE id = {} FOR UPDATE",
        pin_id(SHARD_A, 1)
    ))
    .await
    .expect("the locking read binds the transaction");
    for table in &tables {
        assert_eq!(
            computed_values(&mut conn, table).await,
            want,
            "{table} in the transaction"
        );
    }
    // A computed SET inside the transaction runs on the bound connection;
    // the others get the value it computed there.
    conn.query_drop("SET @n = @n * 10").await.unwrap();
    conn.query_drop("COMMIT").await.unwrap();
    let want = (want.0, want.1, Some(420), want.3, want.4, want.5);
    for table in &tables {
        assert_eq!(
            computed_values(&mut conn, table).await,
            want,
            "{table} after COMMIT"
        );
    }
    // Several sessions at once take several pooled connections per host:
    // each replays the same values.
    let mut others = Vec::new();
    for _ in 0..3 {
        let mut other = client().await;
        other.query_drop("SET @n = 7").await.unwrap();
        others.push(other);
    }
    for table in &tables {
        assert_eq!(
            computed_values(&mut conn, table).await,
            want,
            "{table} beside others"
        );
    }
}

/// Whether another session's `FOR UPDATE NOWAIT` on the row is refused
/// as locked (1205, or 3572 on servers that say NOWAIT).
async fn row_is_locked(other: &mut mysql_async::Conn, row: &str) -> Result<bool, String> {
    match other
        .query_drop(format!("SELECT v FROM {row} FOR UPDATE NOWAIT"))
        .await
    {
        Ok(()) => Ok(false),
        Err(e) => match server_error(e) {
            (1205 | 3572, _) => Ok(true),
            (code, message) => Err(format!("{code} {message}")),
        },
    }
}

#[tokio::test]
async fn a_nested_locking_read_holds_its_row_locks_in_the_transaction() {
    let table = format!("db{SHARD_A:05}.lockread_t");
    let mut ops = operations(MASTER_A).await;
    ops.query_drop(format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();
    ops.query_drop(format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, v TEXT) ENGINE=InnoDB"
    ))
    .await
    .unwrap();
    ops.query_drop(format!("INSERT INTO {table} (id, v) VALUES (1, 'a')"))
        .await
        .unwrap();
    let row = format!("{table} WHERE id = 1");
    let queries = [
        format!("SELECT v FROM {row} FOR UPDATE"),
        format!("(SELECT v FROM {row} FOR UPDATE)"),
        format!("SELECT (SELECT v FROM {row} FOR UPDATE) AS x"),
        format!("SELECT * FROM (SELECT v FROM {row} FOR UPDATE) d"),
        format!("SELECT v FROM {row} UNION ALL (SELECT v FROM {row} FOR UPDATE)"),
        format!("WITH w AS (SELECT v FROM {row} FOR UPDATE) SELECT * FROM w"),
        format!("SELECT v FROM {table} WHERE id IN (SELECT id FROM {row} FOR UPDATE)"),
        format!("SELECT 1 FROM {row} AND EXISTS (SELECT 1 FROM {table} FOR UPDATE)"),
        format!("SELECT * FROM (SELECT v FROM {row} LOCK IN SHARE MODE) d"),
    ];
    let mut a = client().await;
    let mut b = client().await;
    assert_eq!(
        row_is_locked(&mut b, &row).await,
        Ok(false),
        "nobody holds it yet"
    );
    let mut unlocked = Vec::new();
    for query in &queries {
        a.query_drop("BEGIN").await.unwrap();
        let answered: mysql_async::Result<Option<String>> = a.query_first(query.as_str()).await;
        if let Err(e) = answered {
            unlocked.push(format!("{query}: refused: {e}"));
            a.query_drop("ROLLBACK").await.unwrap();
            continue;
        }
        let locked = row_is_locked(&mut b, &row).await;
        a.query_drop("ROLLBACK").await.unwrap();
        if locked != Ok(true) {
            unlocked.push(format!("{query}: {locked:?}"));
        }
        assert_eq!(
            row_is_locked(&mut b, &row).await,
            Ok(false),
            "released: {query}"
        );
    }
    // Prepared, too.
    a.query_drop("BEGIN").await.unwrap();
    let v: Option<String> = a
        .exec_first(
            format!("(SELECT v FROM {table} WHERE id = ? FOR UPDATE)"),
            (1,),
        )
        .await
        .unwrap();
    assert_eq!(v.as_deref(), Some("a"));
    let locked = row_is_locked(&mut b, &row).await;
    a.query_drop("ROLLBACK").await.unwrap();
    if locked != Ok(true) {
        unlocked.push(format!("prepared: {locked:?}"));
    }
    ops.query_drop(format!("DROP TABLE {table}")).await.unwrap();
    assert!(
        unlocked.is_empty(),
        "row not locked while A's transaction was open after:\n{}",
        unlocked.join("\n")
    );
}

#[tokio::test]
async fn serializable_is_refused_with_the_reason() {
    let mut conn = client().await;
    for sql in [
        "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        "SET transaction_isolation = 'SERIALIZABLE'",
        "SET tx_isolation = 'SERIALIZABLE'",
    ] {
        let (code, message) = server_error(conn.query_drop(sql).await.expect_err(sql));
        assert_eq!(code, 1105, "{sql}: {message}");
        assert!(message.contains("SERIALIZABLE"), "{sql}: {message}");
        let level: Option<String> = conn.query_first("SELECT @@tx_isolation").await.unwrap();
        assert_ne!(level.as_deref(), Some("SERIALIZABLE"), "{sql}");
    }
    // The other levels pass and take effect on the servers.
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await
        .unwrap();
    let level: Option<String> = conn.query_first("SELECT @@tx_isolation").await.unwrap();
    assert_eq!(level.as_deref(), Some("READ-COMMITTED"));
}

#[tokio::test]
async fn analyze_of_a_write_is_refused_and_writes_nothing() {
    let mut conn = client().await;
    let id = insert_pin(&mut conn, SHARD_A, &format!("{TAG} analyze")).await;
    let local = decode(id).local_id;
    for sql in [
        format!("ANALYZE DELETE FROM db{SHARD_A:05}.pins WHERE local_id = {local}"),
        format!("EXPLAIN ANALYZE DELETE FROM db{SHARD_A:05}.pins WHERE local_id = {local}"),
        format!("ANALYZE UPDATE db{SHARD_A:05}.pins SET data = 'x' WHERE local_id = {local}"),
    ] {
        let (code, message) = server_error(conn.query_drop(&sql).await.expect_err(&sql));
        assert_eq!(code, 1105, "{sql}: {message}");
        assert!(message.contains("ANALYZE"), "{sql}: {message}");
    }
    assert_eq!(
        pin_on_host(id).await.as_deref(),
        Some(format!("{TAG} analyze").as_str()),
        "the row is untouched"
    );
    delete_pins(MASTER_A, &[SHARD_A], &format!("{TAG} analyze")).await;
}

// ----- forms a server takes that the proxy refused (Connector/Python's suite) -----

#[tokio::test]
async fn quoted_user_variables_are_set_as_a_server_sets_them() {
    let mut conn = client().await;
    // Connector/Python's reset_session(user_variables=...) sends the first form.
    conn.query_drop("SET @`sg_quoted` = 1, @'sg quoted' = 'two', @\"SG_Dq\" := 3")
        .await
        .expect("quoted user variable names");
    let row: Option<(i64, String, i64)> = conn
        .query_first("SELECT @sg_quoted, @`sg quoted`, @sg_dq")
        .await
        .unwrap();
    assert_eq!(row, Some((1, "two".to_owned(), 3)));
    // The SET is the session's: a statement on a shard of the other host
    // sees the values too.
    let on_shard: Option<(i64, String, i64)> = conn
        .query_first(format!(
            "SELECT @sg_quoted, @`sg quoted`, COUNT(*) >= 0 FROM db{SHARD_B:05}.pins"
        ))
        .await
        .unwrap();
    assert_eq!(on_shard, Some((1, "two".to_owned(), 1)));
    let mut server = direct(MASTER_A).await;
    let refused = server.query_drop("SET @'' = 1").await.unwrap_err();
    let through_proxy = conn.query_drop("SET @'' = 1").await.unwrap_err();
    assert_eq!(server_error(through_proxy).0, server_error(refused).0);
}

#[tokio::test]
async fn start_transaction_with_consistent_snapshot_opens_the_transaction_on_the_server() {
    let mut conn = client().await;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .expect("the server's form");
    let id = insert_pin(&mut conn, SHARD_A, &format!("{TAG} snapshot")).await;
    let open: Option<i64> = conn.query_first("SELECT @@in_transaction").await.unwrap();
    assert_eq!(open, Some(1));
    assert_eq!(pin_on_host(id).await, None, "not committed yet");
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(
        pin_on_host(id).await.as_deref(),
        Some(format!("{TAG} snapshot").as_str())
    );
    // Its characteristics reach the server with it.
    conn.query_drop("START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT")
        .await
        .unwrap();
    let refused = try_insert_pin(&mut conn, SHARD_A, &format!("{TAG} snapshot ro"))
        .await
        .expect_err("a read-only transaction");
    assert_eq!(server_error(refused).0, 1792);
    conn.query_drop("ROLLBACK").await.unwrap();
    delete_pins(MASTER_A, &[SHARD_A], &format!("{TAG} snapshot")).await;
}

#[tokio::test]
async fn reset_connection_keeps_the_database_as_a_server_does() {
    let db = format!("db{SHARD_A:05}");
    let opts = |port: u16, user: &str, password: &str| {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some(user))
            .pass(Some(password))
            .db_name(Some(db.clone()))
            .prefer_socket(false)
    };
    let mut server = mysql_async::Conn::new(opts(MASTER_A, BACKEND_USER, BACKEND_PASSWORD))
        .await
        .unwrap();
    let mut conn = mysql_async::Conn::new(opts(proxy_addr().port(), APP_USER, APP_PASSWORD))
        .await
        .unwrap();
    for c in [&mut server, &mut conn] {
        c.query_drop("SET @sg_before_reset = 1").await.unwrap();
        assert!(c.reset().await.unwrap(), "COM_RESET_CONNECTION was sent");
    }
    let expected: Option<(Option<String>, Option<i64>)> = server
        .query_first("SELECT DATABASE(), @sg_before_reset")
        .await
        .unwrap();
    assert_eq!(expected, Some((Some(db.clone()), None)));
    let seen: Option<(Option<String>, Option<i64>)> = conn
        .query_first("SELECT DATABASE(), @sg_before_reset")
        .await
        .unwrap();
    assert_eq!(seen, expected, "the database stays, variables go");
    // Unqualified tables still route to it.
    let id = insert_pin(&mut conn, SHARD_A, &format!("{TAG} reset")).await;
    let data: Option<String> = conn
        .query_first(format!(
            "SELECT data FROM pins WHERE local_id = {}",
            decode(id).local_id
        ))
        .await
        .unwrap();
    assert_eq!(data, Some(format!("{TAG} reset")));
    delete_pins(MASTER_A, &[SHARD_A], &format!("{TAG} reset")).await;
}

#[tokio::test]
async fn preparing_several_statements_is_the_servers_syntax_error() {
    let mut server = direct(MASTER_A).await;
    let mut conn = client().await;
    let expected = server_error(server.prep("SELECT 1; SELECT 2").await.unwrap_err());
    let seen = server_error(conn.prep("SELECT 1; SELECT 2").await.unwrap_err());
    assert_eq!(seen.0, expected.0, "{seen:?} vs {expected:?}");
    assert_eq!(seen.0, 1064);
}

/// The `(name, value)` pairs of the `SESSION_TRACK_SYSTEM_VARIABLES`
/// entries of an OK packet's session state, if it has any.
fn tracked_variables(ok: &[u8]) -> Vec<(String, String)> {
    let (Some(info), Some(at)) = (parse_ok(ok), status_offset(ok, false)) else {
        return Vec::new();
    };
    if !info
        .status
        .contains(StatusFlags::SERVER_SESSION_STATE_CHANGED)
    {
        return Vec::new();
    }
    let lenenc_bytes = |rest: &mut &[u8]| -> Option<Vec<u8>> {
        let len = read_lenenc_int(rest)? as usize;
        let bytes = rest.get(..len)?.to_vec();
        *rest = &rest[len..];
        Some(bytes)
    };
    // Status (2) and warnings (2), then the info text.
    let mut rest = ok.get(at + 4..).unwrap_or_default();
    let _info = lenenc_bytes(&mut rest);
    let Some(state) = lenenc_bytes(&mut rest) else {
        return Vec::new();
    };
    let mut entries = state.as_slice();
    let mut out = Vec::new();
    while let Some((&kind, tail)) = entries.split_first() {
        entries = tail;
        let Some(data) = lenenc_bytes(&mut entries) else {
            break;
        };
        if kind == 0 {
            let mut data = data.as_slice();
            if let (Some(name), Some(value)) = (lenenc_bytes(&mut data), lenenc_bytes(&mut data)) {
                out.push((
                    String::from_utf8_lossy(&name).into_owned(),
                    String::from_utf8_lossy(&value).into_owned(),
                ));
            }
        }
    }
    out
}

#[tokio::test]
async fn set_names_reports_the_new_character_set_as_a_server_does() {
    // libmysqlclient (Connector/Python's C extension) encodes parameters in
    // the character set the server reports through session tracking.
    let key = ConnKey {
        framing: CapabilityFlags::CLIENT_SESSION_TRACK,
        collation: 45,
    };
    let mut answers = Vec::new();
    for (addr, user, password) in [
        (
            format!("127.0.0.1:{MASTER_A}"),
            BACKEND_USER,
            BACKEND_PASSWORD,
        ),
        (proxy_addr().to_string(), APP_USER, APP_PASSWORD),
    ] {
        let mut conn = BackendConn::connect(&addr, user, password, key, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("raw login to {addr}: {e}"));
        conn.send_command(
            Command::COM_QUERY,
            b"SET NAMES 'gbk' COLLATE 'gbk_chinese_ci'",
        )
        .await
        .unwrap();
        let ok = next(&mut conn).await;
        assert_eq!(ok[0], 0x00, "{addr}: {:?}", parse_err(&ok));
        let mut tracked = tracked_variables(&ok);
        // A server lists them in no fixed order.
        tracked.sort();
        answers.push(tracked);
    }
    assert!(
        answers[0].contains(&("character_set_client".to_owned(), "gbk".to_owned())),
        "the server reports it: {:?}",
        answers[0]
    );
    assert_eq!(
        answers[1], answers[0],
        "through the proxy as from the server"
    );
}

/// F14: `LAST_INSERT_ID()` / `@@identity` / `@@last_insert_id` after an
/// INSERT into a table that is not an object table, and `ROW_COUNT()`
/// after a DELETE, are the session's (a pooled connection's belong to
/// whichever statement ran on it last); `FOUND_ROWS()` and
/// `SQL_CALC_FOUND_ROWS` are refused. Checked against the rows on the
/// server.
#[tokio::test]
async fn row_count_and_insert_ids_of_non_object_tables_are_the_sessions() {
    let table = format!("db{SHARD_A:05}.sg_rowcount_t");
    let mut ops = operations(MASTER_A).await;
    ops.query_drop(format!("DROP TABLE IF EXISTS {table}"))
        .await
        .unwrap();
    ops.query_drop(format!(
        "CREATE TABLE {table} (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20)) AUTO_INCREMENT = 5004"
    ))
    .await
    .unwrap();
    let mut conn = client().await;
    conn.query_drop(format!("INSERT INTO {table} (v) VALUES ('li'), ('li2')"))
        .await
        .expect("insert into a table of no config entry");
    assert_eq!(conn.last_insert_id(), Some(5004));
    let ids: Option<(u64, u64, u64)> = conn
        .query_first("SELECT LAST_INSERT_ID(), @@identity, @@last_insert_id")
        .await
        .expect("read the insert id");
    assert_eq!(ids, Some((5004, 5004, 5004)), "the session's insert id");
    let alone: Option<u64> = conn.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(alone, Some(5004));

    conn.query_drop(format!("DELETE FROM {table} WHERE v = 'li'"))
        .await
        .unwrap();
    let count: Option<i64> = conn.query_first("SELECT ROW_COUNT()").await.unwrap();
    assert_eq!(count, Some(1), "ROW_COUNT() after a DELETE of one row");
    let again: Option<i64> = conn.query_first("SELECT ROW_COUNT()").await.unwrap();
    assert_eq!(again, Some(-1), "ROW_COUNT() after a result set");
    conn.query_drop(format!("UPDATE {table} SET v = 'x' WHERE v = 'nothing'"))
        .await
        .unwrap();
    let none: Option<i64> = conn.query_first("SELECT ROW_COUNT()").await.unwrap();
    assert_eq!(none, Some(0), "ROW_COUNT() after an UPDATE of no row");
    // On the server: the DELETE removed one row, the other is there.
    let left: Vec<(u64, String)> = ops
        .query(format!("SELECT id, v FROM {table} ORDER BY id"))
        .await
        .unwrap();
    assert_eq!(left, vec![(5005, "li2".to_owned())]);

    for statement in [
        format!("SELECT SQL_CALC_FOUND_ROWS id FROM {table} LIMIT 1"),
        "SELECT FOUND_ROWS()".to_owned(),
    ] {
        let error = conn.query_drop(&statement).await.expect_err(&statement);
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{statement}: {message}");
        assert!(
            message.contains("FOUND_ROWS() and SQL_CALC_FOUND_ROWS"),
            "{statement}: {message}"
        );
    }
    let one: Option<u8> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1), "the session goes on");
    ops.query_drop(format!("DROP TABLE {table}")).await.unwrap();
}

/// Whether some connection holds user lock `name` on the host at `port`,
/// asked as the operations account.
async fn lock_holder(port: u16, name: &str) -> Option<u64> {
    let mut ops = operations(port).await;
    let holder: Option<Option<u64>> = ops
        .query_first(format!("SELECT IS_USED_LOCK('{name}')"))
        .await
        .expect("IS_USED_LOCK");
    ops.disconnect().await.ok();
    holder.flatten()
}

/// A SET whose value reads a shard table runs once, on that shard, and is
/// replayed by value; one that takes a user lock or reads two shards is
/// refused and takes nothing anywhere (F2).
#[tokio::test]
async fn sets_that_read_tables_or_call_functions_run_once_where_they_read() {
    let (far, near) = (3000u32, 1u32);
    let mut conn = client().await;
    let count_on = |shard: u32| format!("SELECT count(*) FROM db{shard:05}.pins");
    let direct_count = |shard: u32| async move {
        let mut direct = direct(main_master_port(shard)).await;
        let count: Option<u64> = direct.query_first(count_on(shard)).await.unwrap();
        count.unwrap()
    };
    // db03000 lives on the second master only.
    conn.query_drop(format!("SET @x = ({})", count_on(far)))
        .await
        .expect("a SET reading db03000 runs on its host");
    let x: Option<u64> = conn.query_first("SELECT @x").await.unwrap();
    assert_eq!(x, Some(direct_count(far).await));
    // And one reading db00001, on the first master only: whichever host
    // "any master" would pick, one of the two SETs needs the other.
    conn.query_drop(format!("SET @w = ({})", count_on(near)))
        .await
        .expect("a SET reading db00001 runs on its host");
    let w: Option<u64> = conn.query_first("SELECT @w").await.unwrap();
    assert_eq!(w, Some(direct_count(near).await));
    // Every host the session reaches afterwards has the value, and no
    // connection runs the subquery again (db00001's host has no db03000).
    for shard in [near, far] {
        let count: Option<u64> = conn
            .query_first(count_on(shard))
            .await
            .unwrap_or_else(|e| panic!("a statement on shard {shard} after the SET: {e}"));
        assert_eq!(count, Some(direct_count(shard).await));
        let seen: Option<u64> = conn
            .query_first(format!("SELECT @x FROM db{shard:05}.pins LIMIT 1"))
            .await
            .unwrap();
        assert_eq!(seen, x, "@x on shard {shard}'s host");
    }
    // Side effects are refused, and none took place on any host.
    let lock = format!("sg_engine_{:08x}", rand::random::<u32>());
    let refused = conn
        .query_drop(format!("SET @l = GET_LOCK('{lock}', 0)"))
        .await
        .expect_err("a SET taking a user lock");
    let (code, message) = server_error(refused);
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("GET_LOCK"), "{message}");
    for shard in [near, far] {
        let _: Option<u64> = conn.query_first(count_on(shard)).await.unwrap();
    }
    for port in [MASTER_A, MASTER_B] {
        assert_eq!(lock_holder(port, &lock).await, None, "lock on {port}");
    }
    let refused = conn
        .query_drop(format!(
            "SET @y = ({}) + ({})",
            count_on(near),
            count_on(far)
        ))
        .await
        .expect_err("a SET reading two shards");
    assert!(server_error(refused).1.contains("several shard databases"));
    // The session is still whole.
    let x_again: Option<u64> = conn.query_first("SELECT @x").await.unwrap();
    assert_eq!(x_again, x);
}

/// `SET autocommit = 1` ends the transaction autocommit off opened, its
/// savepoints with it, as on a server: a savepoint given before the
/// transaction bound is not replayed into the next one.
#[tokio::test]
async fn autocommit_on_drops_the_savepoints_of_the_transaction_it_ends() {
    let tag = format!("{TAG} sp-ac");
    let mut conn = client().await;
    conn.query_drop("SET autocommit = 0").await.unwrap();
    conn.query_drop("SAVEPOINT sp_ac").await.unwrap();
    conn.query_drop("SET autocommit = 1").await.unwrap();
    conn.query_drop("SET autocommit = 0").await.unwrap();
    let id = insert_pin(&mut conn, SHARD_A, &tag).await;
    let (code, message) = server_error(
        conn.query_drop("ROLLBACK TO SAVEPOINT sp_ac")
            .await
            .expect_err("the savepoint went with the transaction SET autocommit = 1 ended"),
    );
    assert_eq!(code, 1305, "{message}");
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(
        pin_on_host(id).await.as_deref(),
        Some(tag.as_str()),
        "the insert was not rolled back to a savepoint of another transaction"
    );
    delete_pins(MASTER_A, &[SHARD_A], &tag).await;
}
