//! Prepared statements (binary protocol) and multi-statements through the
//! proxy, against the real fleet, compared with the same statements sent
//! straight to the backends.

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Row, Value};
use shardgate::id::{mod_shard, ObjectId};

#[tokio::test]
async fn point_lookup_by_bound_id_as_number_and_as_string() {
    let mut conn = client().await;
    conn.exec_drop(
        "INSERT /*+ SHARD(2077) */ INTO pins (data) VALUES (?)",
        ("prepared pin",),
    )
    .await
    .unwrap();
    let id = conn.last_insert_id().unwrap();
    let fields = decode(id);
    assert_eq!(fields.shard, 2077);
    assert_eq!(
        row_on_host(MASTER_B, "pins", 2077, fields.local_id)
            .await
            .as_deref(),
        Some("prepared pin")
    );
    let statement = conn
        .prep("SELECT id, data FROM pins WHERE id = ?")
        .await
        .unwrap();
    assert_eq!(statement.num_params(), 1);
    assert_eq!(statement.columns().len(), 2);
    let by_number: Option<(u64, String)> = conn.exec_first(&statement, (id,)).await.unwrap();
    assert_eq!(by_number, Some((id, "prepared pin".to_owned())));
    let by_string: Option<(u64, String)> = conn
        .exec_first(&statement, (id.to_string(),))
        .await
        .unwrap();
    assert_eq!(by_string, Some((id, "prepared pin".to_owned())));
    conn.exec_drop(
        "UPDATE pins SET data = ? WHERE id = ?",
        ("changed 'quote' \\ back", id),
    )
    .await
    .unwrap();
    assert_eq!(
        row_on_host(MASTER_B, "pins", 2077, fields.local_id)
            .await
            .as_deref(),
        Some("changed 'quote' \\ back")
    );
}

#[tokio::test]
async fn mapping_and_mod_shard_keys_bound_as_parameters() {
    let mut conn = client().await;
    let board = ObjectId {
        shard: 900,
        type_id: 2,
        local_id: 424242,
    }
    .encode()
    .unwrap();
    for sequence in 1..=5u64 {
        conn.exec_drop(
            "REPLACE INTO board_has_pins (board_id, pin_id, sequence) VALUES (?, ?, ?)",
            (board, 1000 + sequence, sequence),
        )
        .await
        .unwrap();
    }
    let sequences: Vec<u64> = conn
        .exec(
            "SELECT sequence FROM board_has_pins WHERE board_id = ? ORDER BY sequence DESC LIMIT ?",
            (board, 3u64),
        )
        .await
        .unwrap();
    assert_eq!(sequences, vec![5, 4, 3]);

    let email = format!("prepared{}@example.com", std::process::id());
    conn.exec_drop(
        "REPLACE INTO user_by_email (email, user_id) VALUES (?, ?)",
        (&email, 77u64),
    )
    .await
    .unwrap();
    let user: Option<u64> = conn
        .exec_first(
            "SELECT user_id FROM user_by_email WHERE email = ?",
            (&email,),
        )
        .await
        .unwrap();
    assert_eq!(user, Some(77));
    let shard = mod_shard(email.as_bytes(), 4096);
    let mut host = direct(MOD_HOST).await;
    let on_host: Option<u64> = host
        .query_first(format!(
            "SELECT user_id FROM msdb{shard:05}.user_by_email WHERE email = '{email}'"
        ))
        .await
        .unwrap();
    assert_eq!(on_host, Some(77));
}

#[tokio::test]
async fn binary_rows_match_the_servers_own_for_every_common_type() {
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(12) */ INTO pins (data) VALUES ('typed')")
        .await
        .unwrap();
    let id = conn.last_insert_id().unwrap();
    let local = decode(id).local_id;
    let columns = "CAST(? AS SIGNED) AS i, CAST(? AS UNSIGNED) AS u, ? AS s, CAST(? AS DECIMAL(12,3)) AS d, \
                   CAST('2024-02-29 23:59:58.123456' AS DATETIME(6)) AS dt, CAST('2024-02-29' AS DATE) AS da, \
                   CAST('-26:03:04.5' AS TIME(1)) AS t, CAST(1.5 AS DOUBLE) AS f, NULL AS n, \
                   CAST(-7 AS SIGNED) AS neg, data, ts";
    let params = (
        -42i64,
        18_000_000_000_000_000_000u64,
        "héllo 🚀",
        "12345.678",
    );
    let through_proxy: Vec<Row> = conn
        .exec(
            format!("SELECT {columns} FROM pins WHERE id = {id}"),
            params,
        )
        .await
        .unwrap();
    let mut host = direct(MASTER_A).await;
    let direct_rows: Vec<Row> = host
        .exec(
            format!("SELECT {columns} FROM db00012.pins WHERE local_id = {local}"),
            params,
        )
        .await
        .unwrap();
    assert_eq!(through_proxy.len(), 1);
    let proxy_values: Vec<Value> = through_proxy[0].clone().unwrap();
    let direct_values: Vec<Value> = direct_rows[0].clone().unwrap();
    assert_eq!(proxy_values, direct_values);
}

/// 300 executes of distinct texts leave on each master at most
/// `limits.backend_prepared_statements` (16 by default) statements per
/// connection of the proxy's (others' tests prepare a few of their own).
#[tokio::test]
async fn many_executions_leave_at_most_the_kept_statements_prepared_on_the_backends() {
    let mut conn = client().await;
    let statement = conn
        .prep("SELECT data FROM pins WHERE id = ?")
        .await
        .unwrap();
    for local_id in 1..=300u64 {
        let shard = (local_id * 13 % 4096) as u32;
        let id = ObjectId {
            shard,
            type_id: 1,
            local_id,
        }
        .encode()
        .unwrap();
        let _: Option<String> = conn.exec_first(&statement, (id,)).await.unwrap();
    }
    for port in [MASTER_A, MASTER_B] {
        let mut host = direct(port).await;
        let row: Option<(String, u64)> = host
            .query_first("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
            .await
            .unwrap();
        let (_, count) = row.unwrap();
        let connections: Option<u64> = operations(port)
            .await
            .query_first(format!(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{BACKEND_USER}'"
            ))
            .await
            .unwrap();
        let bound = connections.unwrap_or(0) * 16 + 50;
        assert!(
            count < bound,
            "host {port} holds {count} prepared statements (bound {bound})"
        );
    }
}

#[tokio::test]
async fn a_prepare_without_a_shard_key_is_refused_at_prepare_time() {
    let mut conn = client().await;
    let error = conn
        .prep("SELECT data FROM pins WHERE data = ?")
        .await
        .expect_err("no key");
    let (code, message) = server_error(error);
    assert_eq!(code, 1105);
    assert!(message.contains("pins"), "{message}");
    let one: Option<u64> = conn.exec_first("SELECT ?", (1u64,)).await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn multi_statements_run_in_order_and_stop_at_the_first_error() {
    let mut conn = client().await;
    let mut result = conn
        .query_iter("SELECT 1 AS a; SELECT 2 AS b; INSERT /*+ SHARD(44) */ INTO pins (data) VALUES ('multi'); SELECT LAST_INSERT_ID()")
        .await
        .unwrap();
    let first: Vec<u64> = result.collect().await.unwrap();
    let second: Vec<u64> = result.collect().await.unwrap();
    let _insert: Vec<Row> = result.collect().await.unwrap();
    let last: Vec<u64> = result.collect().await.unwrap();
    drop(result);
    assert_eq!((first, second), (vec![1], vec![2]));
    let id = decode(last[0]);
    assert_eq!(id.shard, 44);
    assert_eq!(
        row_on_host(MASTER_A, "pins", 44, id.local_id)
            .await
            .as_deref(),
        Some("multi")
    );

    let error = conn
        .query_drop("SELECT 1; SELECT data FROM pins; SELECT 3")
        .await
        .expect_err("the second statement has no key");
    let (code, _) = server_error(error);
    assert_eq!(code, 1105);
    let one: Option<u64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(
        one,
        Some(1),
        "the connection is usable after the failed batch"
    );
}

/// A string parameter, as drivers that bind every value as a string send it.
fn bound_text(text: &str) -> Value {
    Value::Bytes(text.as_bytes().to_vec())
}

#[tokio::test]
async fn ids_bound_as_strings_split_and_route_like_integers() {
    let mut conn = client().await;
    let tag = format!("strbound{}", std::process::id());
    let on_b = insert_pin(&mut conn, 3429, &format!("{tag} b")).await;
    let on_a = insert_pin(&mut conn, 5, &format!("{tag} a")).await;
    let (b, a) = (decode(on_b), decode(on_a));

    // An IN list over two shards.
    let mut rows: Vec<(u64, String)> = conn
        .exec(
            "SELECT id, data FROM pins WHERE id IN (?, ?)",
            (bound_text(&on_b.to_string()), bound_text(&on_a.to_string())),
        )
        .await
        .unwrap();
    rows.sort();
    let mut expected = vec![(on_a, format!("{tag} a")), (on_b, format!("{tag} b"))];
    expected.sort();
    assert_eq!(rows, expected);

    // `= ?` on writes: each row changes on its own master; leading zeros are
    // the same number to the server.
    for (id, zeros) in [(on_b, ""), (on_a, "000")] {
        conn.exec_drop(
            "UPDATE pins SET data = ? WHERE id = ?",
            (
                bound_text(&format!("{tag} updated")),
                bound_text(&format!("{zeros}{id}")),
            ),
        )
        .await
        .unwrap();
    }
    let updated = Some(format!("{tag} updated"));
    assert_eq!(
        row_on_host(MASTER_B, "pins", 3429, b.local_id).await,
        updated
    );
    assert_eq!(row_on_host(MASTER_A, "pins", 5, a.local_id).await, updated);

    // Anything but plain decimal digits within 64 bits is refused, and
    // nothing is written.
    for text in [
        format!(" {on_b}"),
        format!("{on_b} "),
        format!("+{on_b}"),
        format!("{on_b}abc"),
        format!("{on_b}\0"),
        format!("{on_b}.0"),
        "3.4e17".to_owned(),
        "18446744073709551616".to_owned(),
        "２４１２９".to_owned(),
        String::new(),
    ] {
        for sql in [
            "UPDATE pins SET data = 'hostile' WHERE id = ?",
            "SELECT data FROM pins WHERE id IN (?, 241294492511762325)",
        ] {
            let error = conn
                .exec_drop(sql, (bound_text(&text),))
                .await
                .expect_err("not an ID");
            let (code, message) = server_error(error);
            assert_eq!(code, 1105, "{text:?}: {message}");
            assert!(message.contains("bad id"), "{text:?}: {message}");
        }
    }
    assert_eq!(
        row_on_host(MASTER_B, "pins", 3429, b.local_id).await,
        updated
    );

    // A mapping table's from-ID, written and read across shards.
    let boards = [
        ObjectId {
            shard: 3000,
            type_id: 2,
            local_id: 9191,
        },
        ObjectId {
            shard: 900,
            type_id: 2,
            local_id: 9191,
        },
    ];
    for board in &boards {
        let id = board.encode().unwrap();
        // Rows of earlier runs (other pins) would be read back too.
        let mut host = direct(main_master_port(board.shard)).await;
        host.query_drop(format!(
            "DELETE FROM db{:05}.board_has_pins WHERE board_id = {id}",
            board.shard
        ))
        .await
        .unwrap();
        conn.exec_drop(
            "REPLACE INTO board_has_pins (board_id, pin_id, sequence) VALUES (?, ?, ?)",
            (
                bound_text(&id.to_string()),
                bound_text(&on_b.to_string()),
                bound_text("1"),
            ),
        )
        .await
        .unwrap();
        let landed: Option<u64> = host
            .query_first(format!(
                "SELECT pin_id FROM db{:05}.board_has_pins WHERE board_id = {id}",
                board.shard
            ))
            .await
            .unwrap();
        assert_eq!(landed, Some(on_b), "board on shard {}", board.shard);
    }
    let found: Vec<(u64, u64)> = conn
        .exec(
            "SELECT board_id, pin_id FROM board_has_pins WHERE board_id IN (?, ?) ORDER BY board_id",
            (
                bound_text(&boards[0].encode().unwrap().to_string()),
                bound_text(&boards[1].encode().unwrap().to_string()),
            ),
        )
        .await
        .unwrap();
    let mut want: Vec<(u64, u64)> = boards
        .iter()
        .map(|board| (board.encode().unwrap(), on_b))
        .collect();
    want.sort();
    assert_eq!(found, want);
}

/// A table made on shard 12's database (master A) for one test, dropped
/// whatever the test finds.
async fn with_shard12_table<F: std::future::Future<Output = ()> + Send + 'static>(
    table: &str,
    columns: &str,
    rows: &str,
    checks: F,
) {
    let mut ops = operations(MASTER_A).await;
    let drop = format!("DROP TABLE IF EXISTS db00012.{table}");
    ops.query_drop(&drop).await.unwrap();
    ops.query_drop(format!("CREATE TABLE db00012.{table} ({columns})"))
        .await
        .unwrap();
    ops.query_drop(format!("INSERT INTO db00012.{table} VALUES {rows}"))
        .await
        .unwrap();
    let outcome = tokio::spawn(checks).await;
    ops.query_drop(&drop).await.unwrap();
    ops.disconnect().await.ok();
    if let Err(failed) = outcome {
        std::panic::resume_unwind(failed.into_panic());
    }
}

/// The values of the one row `sql` (bound with `params`) gives through the
/// proxy and straight from master A, both executed as prepared statements
/// (binary protocol).
async fn proxy_and_direct_row(sql: &str, params: Vec<Value>) -> (Vec<Value>, Vec<Value>) {
    let mut conn = client().await;
    let proxy: Vec<Row> = conn.exec(sql, params.clone()).await.unwrap();
    let mut host = direct(MASTER_A).await;
    let server: Vec<Row> = host.exec(sql, params).await.unwrap();
    assert_eq!((proxy.len(), server.len()), (1, 1), "{sql}");
    (proxy[0].clone().unwrap(), server[0].clone().unwrap())
}

/// The four bytes of a FLOAT value.
fn float_bits(value: &Value) -> u32 {
    match value {
        Value::Float(f) => f.to_bits(),
        other => panic!("not a FLOAT: {other:?}"),
    }
}

/// Red-team F15: the server prints FLOAT with 6 significant digits in text
/// rows, so a binary row rebuilt from text changes the value. Executed
/// through the proxy, a FLOAT comes back with the server's own four bytes,
/// from an expression or from a stored column read by the shard's key.
#[tokio::test]
async fn float_values_keep_the_servers_own_four_bytes() {
    for expression in [
        "CAST(16777215 AS FLOAT)",
        "CAST(123456789 AS FLOAT)",
        "CAST(3.14159265 AS FLOAT)",
        "CAST(0.1234567 AS FLOAT)",
        "CAST(1.17549435e-38 AS FLOAT)",
    ] {
        let (proxy, server) =
            proxy_and_direct_row(&format!("SELECT {expression} AS f"), Vec::new()).await;
        assert_eq!(
            float_bits(&proxy[0]),
            float_bits(&server[0]),
            "{expression}: proxy {proxy:?}, server {server:?}"
        );
    }
    assert_eq!(
        float_bits(
            &proxy_and_direct_row("SELECT CAST(16777215 AS FLOAT)", Vec::new())
                .await
                .0[0]
        ),
        16_777_215f32.to_bits()
    );
    with_shard12_table(
        "prep_floats",
        "local_id BIGINT UNSIGNED PRIMARY KEY, f FLOAT",
        "(2, 16777215), (3, 123456789), (4, 3.14159265)",
        async {
            for local_id in [2u64, 3, 4] {
                let (proxy, server) = proxy_and_direct_row(
                    "SELECT f FROM db00012.prep_floats WHERE local_id = ?",
                    vec![Value::UInt(local_id)],
                )
                .await;
                assert_eq!(
                    float_bits(&proxy[0]),
                    float_bits(&server[0]),
                    "row {local_id}: proxy {proxy:?}, server {server:?}"
                );
            }
        },
    )
    .await;
}

/// Binary rows of a stored row of many types (and of expressions over it)
/// through the proxy are the server's own: DOUBLE, DECIMAL, DATETIME(6),
/// negative and fractional TIME, BIT, JSON, BLOB, NULLs, unsigned BIGINT.
#[tokio::test]
async fn binary_rows_of_stored_columns_of_many_types_match_the_servers() {
    with_shard12_table(
        "prep_types",
        "local_id BIGINT UNSIGNED PRIMARY KEY, d DOUBLE, f FLOAT, dec65 DECIMAL(65,30), \
         dt DATETIME(6), t TIME(6), b BIT(12), j JSON, bl BLOB, u BIGINT UNSIGNED, \
         ti TINYINT UNSIGNED, y YEAR, e ENUM('a','b'), n INT NULL, vc VARCHAR(20)",
        "(1, 0.1234567890123456789, 16777215, -12345678901234567890.123456789012345678901234567890, \
         '2024-02-29 23:59:58.123456', '-838:59:58.999999', b'101010101010', '{\"a\": [1, 2.5]}', \
         x'00ff10fe', 18446744073709551615, 255, 2155, 'b', NULL, 'héllo'), \
         (2, -1.7976931348623157e308, -3.4e38, 0, '0000-00-00 00:00:00', '-00:00:00.5', b'0', \
         'null', '', 0, 0, 1901, 'a', -1, '')",
        async {
            for local_id in [1u64, 2] {
                let (proxy, server) = proxy_and_direct_row(
                    "SELECT *, d / 3 AS d3, f + 0 AS f0, TIMEDIFF(t, '01:00:00') AS td, \
                     CAST(u AS SIGNED) AS us, ? AS bound, NULL AS nothing \
                     FROM db00012.prep_types WHERE local_id = ?",
                    vec![Value::Double(2.5), Value::UInt(local_id)],
                )
                .await;
                assert_eq!(proxy, server, "row {local_id}");
            }
        },
    )
    .await;
}

/// What an execute leaves for `SHOW WARNINGS` is the statement's own: its
/// warnings, or its error, also when the server cannot prepare the
/// statement's text any more (its table went away after the client's
/// PREPARE) and the proxy runs it as text instead.
#[tokio::test]
async fn show_warnings_after_an_execute_lists_the_statements_own_conditions() {
    with_shard12_table(
        "prep_gone",
        "local_id BIGINT UNSIGNED PRIMARY KEY, v VARCHAR(10)",
        "(1, '7x')",
        async {
            let mut conn = client().await;
            let read = conn
                .prep("SELECT CAST(v AS INT) AS n FROM db00012.prep_gone WHERE local_id = ?")
                .await
                .unwrap();
            let n: Option<i64> = conn.exec_first(&read, (1u64,)).await.unwrap();
            assert_eq!(n, Some(7));
            let warnings: Vec<(String, u16, String)> = conn.query("SHOW WARNINGS").await.unwrap();
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert_eq!((warnings[0].0.as_str(), warnings[0].1), ("Warning", 1292));

            let mut ops = operations(MASTER_A).await;
            ops.query_drop("DROP TABLE db00012.prep_gone")
                .await
                .unwrap();
            let error = conn
                .exec_first::<i64, _, _>(&read, (1u64,))
                .await
                .expect_err("the table is gone");
            let (code, message) = server_error(error);
            assert_eq!(code, 1146, "{message}");
            let errors: Vec<(String, u16, String)> = conn.query("SHOW ERRORS").await.unwrap();
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(
                (errors[0].0.as_str(), errors[0].1),
                ("Error", 1146),
                "{errors:?}"
            );
            let counts: Option<(u64, u64)> = conn
                .query_first("SELECT @@warning_count, @@error_count")
                .await
                .unwrap();
            assert_eq!(counts, Some((1, 1)));
        },
    )
    .await;
}
