//! "One reading of the text, the server's": attacks that hide SQL
//! from the router (executable comments, NO_BACKSLASH_ESCAPES, a gbk
//! connection, `SET STATEMENT ... FOR`) sent through the real proxy as the
//! app account, each checked on the backends with the operations account:
//! no table or user created, no global changed.
//!
//! The NO_BACKSLASH_ESCAPES and gbk checks need the proxy to know the
//! session's real sql_mode and character set (`RouteContext::lex`, filled
//! from the server's state); the router's reading under each mode is also
//! unit-tested with the mode set directly (`router::tests`).

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// Hosts of the test fleet (masters and the mod-shard host).
const HOSTS: [u16; 3] = [MASTER_A, MASTER_B, MOD_HOST];

async fn max_connect_errors(port: u16) -> u64 {
    let mut conn = operations(port).await;
    let value: Option<u64> = conn
        .query_first("SELECT @@GLOBAL.max_connect_errors")
        .await
        .expect("read the global");
    conn.disconnect().await.ok();
    value.expect("a value")
}

/// `max_connect_errors` on every host.
async fn globals() -> Vec<u64> {
    let mut out = Vec::new();
    for port in HOSTS {
        out.push(max_connect_errors(port).await);
    }
    out
}

/// Asserts the globals are as `before`; if an attack changed one, puts it
/// back first (the fleet is shared) and then fails.
async fn assert_globals_unchanged(before: &[u64], attack: &str) {
    let after = globals().await;
    if after != before {
        for (port, value) in HOSTS.iter().zip(before) {
            let mut conn = operations(*port).await;
            conn.query_drop(format!("SET GLOBAL max_connect_errors = {value}"))
                .await
                .ok();
            conn.disconnect().await.ok();
        }
        panic!("{attack} changed @@GLOBAL.max_connect_errors: {before:?} -> {after:?}");
    }
}

async fn table_exists(port: u16, schema: &str, table: &str) -> bool {
    let mut conn = operations(port).await;
    let found: Option<String> = conn
        .exec_first(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
            (schema, table),
        )
        .await
        .expect("information_schema.tables");
    conn.disconnect().await.ok();
    found.is_some()
}

async fn user_exists(port: u16, user: &str) -> bool {
    let mut conn = operations(port).await;
    let found: Option<String> = conn
        .exec_first("SELECT user FROM mysql.user WHERE user = ?", (user,))
        .await
        .expect("mysql.user");
    conn.disconnect().await.ok();
    found.is_some()
}

/// Sends `sql` through the proxy and expects an error; its code and message.
async fn refused(conn: &mut Conn, sql: &str) -> (u16, String) {
    let error = conn
        .query_drop(sql)
        .await
        .expect_err(&format!("refused: {sql}"));
    server_error(error)
}

#[tokio::test]
async fn executable_comments_cannot_hide_ddl() {
    let mut conn = client().await;
    for sql in [
        "/*M!CREATE TABLE db00001.lexing_x (a int) */ SELECT local_id FROM db00001.pins LIMIT 0",
        "/*!CREATE TABLE db00001.lexing_x (a int) */ SELECT local_id FROM db00001.pins LIMIT 0",
        "/*!100000 CREATE TABLE db00001.lexing_x (a int) */ SELECT local_id FROM db00001.pins LIMIT 0",
    ] {
        let (code, message) = refused(&mut conn, sql).await;
        assert!(
            !table_exists(MASTER_A, "db00001", "lexing_x").await,
            "{sql} created the table"
        );
        // Refused by the proxy (the router's reading), not by the server.
        assert!(
            message.starts_with("shardgate:") || message.starts_with("You have an error in your SQL syntax: "),
            "{sql}: {code} {message}"
        );
        assert!(!message.contains("check the manual"), "{sql}: {message}");
    }
    // The connection is still usable.
    let one: Option<u64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn executable_comments_cannot_hide_a_global_set() {
    let before = globals().await;
    let mut conn = client().await;
    for sql in [
        "SET @a=1 /*M!, GLOBAL max_connect_errors=4242 */",
        "SET @a=1 /*!, GLOBAL max_connect_errors=4242 */",
        "SET @a=1 /*M!100000 , GLOBAL max_connect_errors=4242 */",
    ] {
        let result = conn.query_drop(sql).await;
        assert_globals_unchanged(&before, sql).await;
        // Refused by the proxy, not left to the backend account's privileges.
        let (code, message) = server_error(result.expect_err("refused"));
        assert_eq!(code, 1105, "{sql}: {message}");
        assert!(message.contains("GLOBAL"), "{sql}: {message}");
    }
}

#[tokio::test]
async fn conditional_comment_keys_route_in_place() {
    let mut conn = client().await;
    let tag = "lexing-cond";
    let id = insert_pin(&mut conn, 77, &format!("{tag} a")).await;
    let data: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE /*!id = {id}*/"))
        .await
        .expect("routes on the key inside /*! */");
    let versioned: Option<String> = conn
        .query_first(format!(
            "SELECT data FROM pins WHERE /*!40101 id = {id} */ /*!999999 OR 1=1 */"
        ))
        .await
        .expect("routes on the key inside /*!40101 */");
    delete_pins(main_master_port(77), &[77], tag).await;
    assert_eq!(data.as_deref(), Some("lexing-cond a"));
    assert_eq!(versioned.as_deref(), Some("lexing-cond a"));
}

#[tokio::test]
async fn set_statement_runs_the_wrapped_statement_only() {
    let mut conn = client().await;
    let one: Option<u64> = conn
        .query_first("SET STATEMENT max_statement_time=1 FOR SELECT 1")
        .await
        .expect("SET STATEMENT ... FOR SELECT works");
    assert_eq!(one, Some(1));
    // Not recorded as a session setting.
    let _: Option<u64> = conn
        .query_first("SET STATEMENT max_statement_time=5 FOR SELECT 2")
        .await
        .unwrap();
    let time: Option<f64> = conn
        .query_first("SELECT @@max_statement_time")
        .await
        .unwrap();
    assert_eq!(time, Some(0.0), "SET STATEMENT leaked into the session");

    for sql in [
        "SET STATEMENT max_statement_time=1 FOR CREATE USER lexing_u@'%' IDENTIFIED BY 'x'",
        "SET STATEMENT max_statement_time=1 FOR CREATE USER lexing_u",
        "SET STATEMENT max_statement_time=1 FOR KILL 999999",
        "SET STATEMENT sql_mode='NO_BACKSLASH_ESCAPES' FOR SELECT 1",
    ] {
        let (code, message) = refused(&mut conn, sql).await;
        assert!(
            message.starts_with("shardgate:")
                || message.starts_with("You have an error in your SQL syntax: "),
            "{sql}: {code} {message}"
        );
        assert!(!message.contains("check the manual"), "{sql}: {message}");
    }
    for port in HOSTS {
        assert!(
            !user_exists(port, "lexing_u").await,
            "user created on {port}"
        );
    }
    // Later statements of the session are not wrapped either.
    let one: Option<u64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

/// Depends on the proxy tracking the session's sql_mode.
#[tokio::test]
async fn no_backslash_escapes_is_read_as_the_server_reads_it() {
    let before = globals().await;
    let mut conn = client().await;
    conn.query_drop("SET sql_mode='NO_BACKSLASH_ESCAPES'")
        .await
        .expect("set the mode");
    let attack = "SET @x='\\', GLOBAL max_connect_errors=4243 -- '";
    let result = conn.query_drop(attack).await;
    assert_globals_unchanged(&before, attack).await;
    // Refused by the proxy, not left to the backend account's privileges.
    let (code, message) = server_error(result.expect_err("the GLOBAL assignment is refused"));
    assert_eq!(code, 1105, "{message}");
    assert!(message.starts_with("shardgate:"), "{message}");
    // A backslash in a string: read as a character, or refused; never
    // misread.
    match conn.query_first::<String, _>("SELECT 'a\\'").await {
        Ok(value) => assert_eq!(value.as_deref(), Some("a\\")),
        Err(error) => {
            let (code, message) = server_error(error);
            assert!(code == 1105 || code == 1064, "{code} {message}");
        }
    }
}

/// Depends on the proxy tracking the connection's character set.
#[tokio::test]
async fn gbk_multibyte_characters_do_not_hide_sql() {
    let before = globals().await;
    let mut conn = client().await;
    conn.query_drop("SET NAMES gbk")
        .await
        .expect("SET NAMES gbk");
    // 中 is E4 B8 AD in UTF-8; read as gbk, AD 5C is one character and
    // the quote after it ends the string.
    let attack = "SET @x='中\\', GLOBAL max_connect_errors=4244 -- '";
    let result = conn.query_drop(attack).await;
    assert_globals_unchanged(&before, attack).await;
    let (code, message) = server_error(result.expect_err("the GLOBAL assignment is refused"));
    assert_eq!(code, 1105, "{message}");
    assert!(message.starts_with("shardgate:"), "{message}");
}

#[tokio::test]
async fn statement_bytes_are_never_altered() {
    let mut conn = client().await;
    conn.query_drop("SET NAMES latin1")
        .await
        .expect("SET NAMES latin1");
    // 0xE9 is é in latin1 and not UTF-8: it reaches the server as sent.
    let sql: &[u8] = b"SELECT HEX('\xe9')";
    let hex: Option<String> = conn.query_first(sql).await.expect("forwarded");
    assert_eq!(hex.as_deref(), Some("E9"));
    // Also with a routed statement's edits around it.
    let tag = "lexing-bytes";
    let id = insert_pin(&mut conn, 78, &format!("{tag} a")).await;
    let mut sql = b"SELECT HEX('".to_vec();
    sql.push(0xE9);
    sql.extend_from_slice(format!("'), data FROM pins WHERE id = {id}").as_bytes());
    let row: Option<(String, String)> = conn.query_first(sql.as_slice()).await.expect("routed");
    delete_pins(main_master_port(78), &[78], tag).await;
    assert_eq!(row, Some(("E9".to_owned(), "lexing-bytes a".to_owned())));
    // A SET the session records as text: refused, never altered.
    let (code, message) = server_error(
        conn.query_drop(b"SET @x = '\xe9'".as_slice())
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, 1105, "{message}");
}

/// Drops `db.table` on its host (operations account).
async fn drop_table_on(port: u16, db: &str, table: &str) {
    let mut ops = operations(port).await;
    ops.query_drop(format!("DROP TABLE IF EXISTS {db}.{table}"))
        .await
        .expect("drop the test table");
}

#[tokio::test]
async fn multibyte_column_names_of_the_sessions_character_set_reach_the_server() {
    // Connector/Python's BugOra21535573: column names in gbk / sjis / big5,
    // unquoted, in a session of that character set.
    let db = "db01717";
    for (charset, name, utf8_hex) in [
        ("gbk", &b"\xBA\xA3\xEB\xE0"[..], "E6B5B7E8B19A"),
        (
            "sjis",
            &b"\x83\x56\x83\x43\x83\x89"[..],
            "E382B7E382A4E383A9",
        ),
    ] {
        let table = format!("sg_mb_{charset}");
        drop_table_on(MASTER_A, db, &table).await;
        let mut conn = client().await;
        conn.query_drop(format!("SET NAMES {charset}"))
            .await
            .unwrap();
        let statement = |parts: &[&[u8]]| parts.concat();
        let create = statement(&[
            format!("CREATE TABLE {db}.{table} (").as_bytes(),
            name,
            b" INT AUTO_INCREMENT KEY, c1 VARCHAR(40)) CHARACTER SET ",
            charset.as_bytes(),
        ]);
        conn.query_drop(create.as_slice())
            .await
            .unwrap_or_else(|e| panic!("{charset}: CREATE TABLE: {e}"));
        let insert = statement(&[
            format!("INSERT INTO {db}.{table} (").as_bytes(),
            name,
            b", c1) VALUES (7, '",
            name,
            b"')",
        ]);
        conn.query_drop(insert.as_slice())
            .await
            .unwrap_or_else(|e| panic!("{charset}: INSERT: {e}"));
        // On the server: the column is named as the client wrote it, the
        // row is there.
        let mut ops = operations(MASTER_A).await;
        let column: Option<String> = ops
            .query_first(format!(
                "SELECT HEX(COLUMN_NAME) FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{table}' AND ORDINAL_POSITION = 1"
            ))
            .await
            .unwrap();
        assert_eq!(column.as_deref(), Some(utf8_hex), "{charset}");
        let row: Option<(i64, String)> = ops
            .query_first(format!(
                "SELECT 1 * 7, HEX(CONVERT(c1 USING utf8mb4)) FROM {db}.{table}"
            ))
            .await
            .unwrap();
        assert_eq!(row, Some((7, utf8_hex.to_owned())), "{charset}");
        drop_table_on(MASTER_A, db, &table).await;
    }
}

#[tokio::test]
async fn a_non_ascii_byte_outside_quotes_of_a_single_byte_charset_is_refused_with_the_way_out() {
    let mut conn = client().await;
    conn.query_drop("SET NAMES latin1").await.unwrap();
    let (code, message) = server_error(
        conn.query_drop(&b"SELECT data AS caf\xE9 FROM db01717.pins LIMIT 0"[..])
            .await
            .expect_err("refused"),
    );
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("backticks"), "{message}");
    conn.query_drop(&b"SELECT data AS `caf\xE9` FROM db01717.pins LIMIT 0"[..])
        .await
        .expect("quoted, it goes through");
}
