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

#[tokio::test]
async fn many_executions_leave_no_statements_prepared_on_the_backends() {
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
        assert!(count < 50, "host {port} holds {count} prepared statements");
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
