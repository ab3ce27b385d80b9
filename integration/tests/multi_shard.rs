//! Multi-shard reads (issue 4) through the proxy against the real fleet:
//! IN lists split per shard, ordered merges with LIMIT/OFFSET, explicit
//! `/*+ SCATTER */`, and aggregates merged across shards.
//!
//! Every answer is checked against the servers: rows are read back straight
//! from the masters, and ordered or aggregated answers are compared with the
//! same query on one reference server that holds all the rows
//! (`shardgate_reference` on the mod host, 3310, whose tables have the same
//! column types and charset as the shard tables and keep the global ID).
//!
//! Tests run in parallel against a shared fleet: each one writes rows marked
//! with its own random tag, or under boards it creates, and reads only those.
//!
//! The benchmark of issue 4 (`bench_multi_get_proxy_vs_direct`, ignored) is
//! run by `integration/bench/multi_get.sh` against a release proxy.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Value};
use shardgate::id::{mod_shard, ObjectId};

const PIN_TYPE: u16 = 1;
const BOARD_TYPE: u16 = 2;
const REFERENCE_DB: &str = "shardgate_reference";

// ------------------------------------------------------------------ helpers

/// A tag unique to one test run, used as a `data` prefix: `ms` + 12 hex digits
/// (no LIKE wildcards).
fn unique_tag() -> String {
    format!("ms{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff)
}

/// A comma-separated SQL list of IDs.
fn id_list(ids: &[u64]) -> String {
    ids.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A pin ID on `shard` that no row has (local ids come from AUTO_INCREMENT
/// and never get near the top of the 36-bit local range).
fn absent_pin(shard: u32, k: u64) -> u64 {
    ObjectId {
        shard,
        type_id: PIN_TYPE,
        local_id: (1u64 << 36) - 1 - k,
    }
    .encode()
    .expect("valid id")
}

/// Inserts a pin on `shard` through the proxy and returns its global ID,
/// checked to carry that shard and the pin type.
async fn insert_pin(conn: &mut Conn, shard: u32, data: &str) -> u64 {
    conn.query_drop(format!(
        "INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('{data}')"
    ))
    .await
    .unwrap_or_else(|e| panic!("insert a pin on shard {shard}: {e}"));
    let id = conn.last_insert_id().expect("last insert id");
    let fields = decode(id);
    assert_eq!((fields.shard, fields.type_id), (shard, PIN_TYPE), "id {id}");
    id
}

/// Inserts a board on `shard` through the proxy and returns its global ID.
async fn insert_board(conn: &mut Conn, shard: u32, data: &str) -> u64 {
    conn.query_drop(format!(
        "INSERT /*+ SHARD({shard}) */ INTO boards (data) VALUES ('{data}')"
    ))
    .await
    .unwrap_or_else(|e| panic!("insert a board on shard {shard}: {e}"));
    let id = conn.last_insert_id().expect("last insert id");
    let fields = decode(id);
    assert_eq!(
        (fields.shard, fields.type_id),
        (shard, BOARD_TYPE),
        "id {id}"
    );
    id
}

/// A result set as text: column names and rows of optional strings
/// (NULL as None), so answers of the proxy and of the reference server
/// compare value by value whatever the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    columns: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
}

impl Table {
    /// The rows sorted, for answers whose order SQL does not define.
    fn sorted_rows(&self) -> Vec<Vec<Option<String>>> {
        let mut rows = self.rows.clone();
        rows.sort();
        rows
    }
}

fn value_text(value: Value) -> Option<String> {
    match value {
        Value::NULL => None,
        Value::Bytes(bytes) => Some(String::from_utf8(bytes).expect("utf-8 value")),
        Value::Int(v) => Some(v.to_string()),
        Value::UInt(v) => Some(v.to_string()),
        other => Some(format!("{other:?}")),
    }
}

fn row_texts(rows: Vec<Row>) -> Vec<Vec<Option<String>>> {
    rows.into_iter()
        .map(|row| row.unwrap().into_iter().map(value_text).collect())
        .collect()
}

/// Runs a text-protocol query and returns its first result set.
async fn fetch(conn: &mut Conn, sql: &str) -> Result<Table, mysql_async::Error> {
    let mut result = conn.query_iter(sql).await?;
    let columns = result
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let rows: Vec<Row> = result.collect().await?;
    drop(result);
    Ok(Table {
        columns,
        rows: row_texts(rows),
    })
}

/// A connection to the reference server (3310) with the reference tables,
/// created if missing with the shard tables' column types and charset.
async fn reference() -> Conn {
    let mut conn = operations(MOD_HOST).await;
    for sql in [
        format!("CREATE DATABASE IF NOT EXISTS {REFERENCE_DB}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {REFERENCE_DB}.pins (
               id   BIGINT UNSIGNED NOT NULL PRIMARY KEY,
               data TEXT
             ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {REFERENCE_DB}.board_has_pins (
               board_id BIGINT UNSIGNED NOT NULL,
               pin_id   BIGINT UNSIGNED NOT NULL,
               sequence BIGINT NOT NULL DEFAULT 0,
               PRIMARY KEY (board_id, pin_id)
             ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
        ),
    ] {
        conn.query_drop(sql).await.expect("reference schema");
    }
    conn
}

/// The same statement for the reference server: tables qualified with the
/// reference database, hints removed.
fn reference_sql(sql: &str) -> String {
    sql.replace("/*+ SCATTER */", "")
        .replace(" FROM pins", &format!(" FROM {REFERENCE_DB}.pins"))
        .replace(
            " FROM board_has_pins",
            &format!(" FROM {REFERENCE_DB}.board_has_pins"),
        )
}

/// Runs `sql` through the proxy and on the reference server; asserts the
/// same column names and the same rows in the same order, and that the
/// answer is not trivially empty unless `may_be_empty`.
async fn assert_same_as_reference(proxy: &mut Conn, reference: &mut Conn, sql: &str) -> Table {
    let expected = fetch(reference, &reference_sql(sql))
        .await
        .unwrap_or_else(|e| panic!("reference query failed: {e}\n{sql}"));
    let got = fetch(proxy, sql)
        .await
        .unwrap_or_else(|e| panic!("through the proxy: {e}\n{sql}"));
    assert_eq!(got.columns, expected.columns, "column names of\n{sql}");
    assert_eq!(
        got.rows, expected.rows,
        "rows of\n{sql}\n(left: proxy, right: reference)"
    );
    got
}

/// Seeds pins on `shards` (one per entry) through the proxy with data
/// `datas[i]`, and the same rows (global ID, data) into the reference table.
async fn seed_pins(
    conn: &mut Conn,
    reference: &mut Conn,
    shards: &[u32],
    datas: &[String],
) -> Vec<u64> {
    assert_eq!(shards.len(), datas.len());
    let mut ids = Vec::new();
    for (shard, data) in shards.iter().zip(datas) {
        ids.push(insert_pin(conn, *shard, data).await);
    }
    let values = ids
        .iter()
        .zip(datas)
        .map(|(id, data)| format!("({id}, '{data}')"))
        .collect::<Vec<_>>()
        .join(", ");
    reference
        .query_drop(format!(
            "INSERT INTO {REFERENCE_DB}.pins (id, data) VALUES {values}"
        ))
        .await
        .expect("reference insert");
    ids
}

/// Creates one board per shard and gives board `b` the (pin_id, sequence)
/// rows `rows[b]` in board_has_pins, through the proxy and in the reference
/// table; checks on each board's master that its rows landed on its shard.
async fn seed_boards(
    conn: &mut Conn,
    reference: &mut Conn,
    tag: &str,
    shards: &[u32],
    rows: &[Vec<(u64, i64)>],
) -> Vec<u64> {
    assert_eq!(shards.len(), rows.len());
    let mut boards = Vec::new();
    for (shard, board_rows) in shards.iter().zip(rows) {
        let board = insert_board(conn, *shard, &format!("{tag} board")).await;
        boards.push(board);
        if board_rows.is_empty() {
            continue;
        }
        let values = board_rows
            .iter()
            .map(|(pin, sequence)| format!("({board}, {pin}, {sequence})"))
            .collect::<Vec<_>>()
            .join(", ");
        conn.query_drop(format!(
            "INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES {values}"
        ))
        .await
        .unwrap_or_else(|e| panic!("mapping rows of board {board}: {e}"));
        reference
            .query_drop(format!(
                "INSERT INTO {REFERENCE_DB}.board_has_pins (board_id, pin_id, sequence) VALUES {values}"
            ))
            .await
            .expect("reference insert");
        let mut master = direct(main_master_port(*shard)).await;
        let on_shard: u64 = master
            .query_first(format!(
                "SELECT COUNT(*) FROM db{shard:05}.board_has_pins WHERE board_id = {board}"
            ))
            .await
            .expect("direct count")
            .expect("a count");
        master.disconnect().await.ok();
        assert_eq!(
            on_shard,
            board_rows.len() as u64,
            "board {board} on shard {shard}"
        );
    }
    boards
}

/// Asserts that a failed statement is a shardgate refusal (1105) whose
/// message names what is not supported (each of `names`, case-insensitive).
fn assert_refused(result: Result<Table, mysql_async::Error>, sql: &str, names: &[&str]) {
    let error = match result {
        Ok(table) => panic!("expected a refusal, got {table:?}\n{sql}"),
        Err(error) => error,
    };
    let (code, message) = server_error(error);
    assert_eq!(code, 1105, "{message}\n{sql}");
    let lower = message.to_lowercase();
    assert!(lower.starts_with("shardgate:"), "{message}\n{sql}");
    assert!(
        lower.contains("support"),
        "says it is not supported: {message}\n{sql}"
    );
    for name in names {
        assert!(
            lower.contains(&name.to_lowercase()),
            "the message names {name}: {message}\n{sql}"
        );
    }
}

/// Shards for `n` pins over both hosts: a stride through 0..4096 (so both
/// halves), with every fifth entry repeating an earlier shard so some
/// shards get several IDs of one list.
fn spread_shards(n: usize, stride: u32, offset: u32) -> Vec<u32> {
    let mut shards: Vec<u32> = Vec::new();
    for i in 0..n {
        if i % 5 == 4 {
            shards.push(shards[i / 2]);
        } else {
            shards.push((offset + i as u32 * stride) % 4096);
        }
    }
    let on_a = shards.iter().filter(|s| **s < 2048).count();
    assert!(
        on_a >= n / 4 && n - on_a >= n / 4,
        "shards on both hosts: {shards:?}"
    );
    shards
}

// --------------------------------------------------------- 1. IN-list split

#[tokio::test]
async fn in_list_of_50_ids_over_both_hosts_returns_exactly_those_rows() {
    let tag = unique_tag();
    let mut conn = client().await;
    let shards = spread_shards(50, 613, 11);
    let mut expected = BTreeSet::new();
    let mut ids = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let data = format!("{tag}:{i}");
        let id = insert_pin(&mut conn, *shard, &data).await;
        // The row is where its ID says, on that shard's master.
        let fields = decode(id);
        assert_eq!(
            row_on_host(main_master_port(*shard), "pins", *shard, fields.local_id).await,
            Some(data.clone()),
            "pin {id} on shard {shard}"
        );
        expected.insert((id, data));
        ids.push(id);
    }
    let distinct_shards: BTreeSet<u32> = shards.iter().copied().collect();
    assert!(distinct_shards.len() >= 35, "{distinct_shards:?}");

    // Shuffled order, plus IDs that exist nowhere: on a shard that has rows
    // of the list (both hosts) and on shards that have none.
    let mut list = ids.clone();
    list.reverse();
    list.rotate_left(17);
    let absent = [
        absent_pin(shards[0], 1),
        absent_pin(shards[1], 2),
        absent_pin(shards.iter().copied().find(|s| *s >= 2048).unwrap(), 3),
        absent_pin(5, 4),
        absent_pin(4095, 5),
    ];
    for with_absent in [false, true] {
        let mut query_ids = list.clone();
        if with_absent {
            query_ids.splice(10..10, absent);
        }
        let sql = format!(
            "SELECT id, data FROM pins WHERE id IN ({})",
            id_list(&query_ids)
        );
        let table = fetch(&mut conn, &sql)
            .await
            .unwrap_or_else(|e| panic!("IN list over {} shards: {e}", distinct_shards.len()));
        assert_eq!(
            table.columns,
            ["id", "data"],
            "one set of column definitions"
        );
        assert_eq!(
            table.rows.len(),
            50,
            "exactly 50 rows (absent IDs: {with_absent})"
        );
        let got: BTreeSet<(u64, String)> = table
            .rows
            .iter()
            .map(|row| {
                let id: u64 = row[0].as_deref().expect("id").parse().expect("numeric id");
                (id, row[1].clone().expect("data"))
            })
            .collect();
        assert_eq!(got.len(), 50, "no duplicate rows");
        assert_eq!(got, expected, "the rows of exactly those IDs");
        for (id, _) in &got {
            let fields = decode(*id);
            assert_eq!(fields.type_id, PIN_TYPE);
            assert!(
                shards.contains(&fields.shard),
                "id {id} decodes to a seeded shard"
            );
        }
    }

    // LIMIT without ORDER BY: any 5 of the rows, each once.
    let some: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins WHERE id IN ({}) LIMIT 5",
            id_list(&list)
        ))
        .await
        .expect("IN list with LIMIT");
    let some: BTreeSet<(u64, String)> = some.into_iter().collect();
    assert_eq!(some.len(), 5, "{some:?}");
    assert!(some.is_subset(&expected), "{some:?}");

    // Typed decoding of the same answer, and the connection stays usable.
    let typed: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins WHERE id IN ({})",
            id_list(&list)
        ))
        .await
        .expect("typed rows");
    assert_eq!(typed.into_iter().collect::<BTreeSet<_>>(), expected);
    let only_absent: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins WHERE id IN ({})",
            id_list(&absent)
        ))
        .await
        .expect("IN list of absent IDs over several shards");
    assert!(only_absent.is_empty(), "{only_absent:?}");
    let one: u64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

#[tokio::test]
async fn in_list_with_other_columns_and_conditions_keeps_its_where_clause() {
    let tag = unique_tag();
    let mut conn = client().await;
    let shards = spread_shards(20, 977, 3);
    let mut ids = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let kind = if i % 2 == 0 { "even" } else { "odd" };
        ids.push(insert_pin(&mut conn, *shard, &format!("{tag}:{kind}:{i}")).await);
    }
    // A further condition beside the IN list is kept on every shard.
    let rows: Vec<(String, u64)> = conn
        .query(format!(
            "SELECT data, id FROM pins WHERE id IN ({}) AND data LIKE '{tag}:even:%'",
            id_list(&ids)
        ))
        .await
        .expect("IN list and another condition");
    let got: BTreeSet<(String, u64)> = rows.into_iter().collect();
    let expected: BTreeSet<(String, u64)> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(i, id)| (format!("{tag}:even:{i}"), *id))
        .collect();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn prepared_in_list_of_placeholders_over_both_hosts() {
    let tag = unique_tag();
    let mut conn = client().await;
    let shards = spread_shards(50, 419, 29);
    let mut expected = BTreeSet::new();
    let mut ids = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let data = format!("{tag}:{i}");
        let id = insert_pin(&mut conn, *shard, &data).await;
        expected.insert((id, data));
        ids.push(id);
    }
    let placeholders = vec!["?"; 53].join(", ");
    let statement = conn
        .prep(format!(
            "SELECT id, data FROM pins WHERE id IN ({placeholders})"
        ))
        .await
        .expect("prepare an IN list of 53 placeholders");
    assert_eq!(statement.num_params(), 53);

    // 50 existing IDs and 3 absent ones.
    let mut bound: Vec<Value> = ids.iter().map(|id| Value::UInt(*id)).collect();
    bound.push(Value::UInt(absent_pin(shards[2], 1)));
    bound.push(Value::UInt(absent_pin(3000, 2)));
    bound.push(Value::UInt(absent_pin(7, 3)));
    let rows: Vec<(u64, String)> = conn
        .exec(&statement, Params::Positional(bound))
        .await
        .expect("execute with 53 bound IDs");
    assert_eq!(rows.len(), 50);
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), expected);

    // The same statement again with other values: the second half of the
    // IDs as strings, the rest absent; routed afresh from the bound values.
    let mut bound: Vec<Value> = ids[25..]
        .iter()
        .map(|id| Value::Bytes(id.to_string().into_bytes()))
        .collect();
    for k in 0..28 {
        bound.push(Value::UInt(absent_pin(shards[k % 25], 10 + k as u64)));
    }
    let rows: Vec<(u64, String)> = conn
        .exec(&statement, Params::Positional(bound))
        .await
        .expect("second execution");
    let second: BTreeSet<(u64, String)> = expected
        .iter()
        .filter(|(id, _)| ids[25..].contains(id))
        .cloned()
        .collect();
    assert_eq!(rows.len(), 25);
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), second);
    conn.close(statement).await.ok();
}

#[tokio::test]
async fn or_of_ids_over_both_hosts_is_split_like_an_in_list() {
    let tag = unique_tag();
    let mut conn = client().await;
    let a1 = insert_pin(&mut conn, 12, &format!("{tag}:a1")).await;
    let a2 = insert_pin(&mut conn, 1900, &format!("{tag}:a2")).await;
    let b1 = insert_pin(&mut conn, 2100, &format!("{tag}:b1")).await;
    let b2 = insert_pin(&mut conn, 4000, &format!("{tag}:b2")).await;
    let rows: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins WHERE id = {a1} OR id = {b1} OR id = {a2} OR id = {b2} OR id = {}",
            absent_pin(3333, 1)
        ))
        .await
        .expect("OR of IDs over both hosts");
    let expected: BTreeSet<(u64, String)> = [
        (a1, format!("{tag}:a1")),
        (a2, format!("{tag}:a2")),
        (b1, format!("{tag}:b1")),
        (b2, format!("{tag}:b2")),
    ]
    .into_iter()
    .collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), expected);
}

#[tokio::test]
async fn in_list_on_a_mapping_from_column_and_on_a_mod_shard_key() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let rows_per_board: Vec<Vec<(u64, i64)>> = (0..6)
        .map(|b| (0..3).map(|p| (100 + p, b * 10 + p as i64)).collect())
        .collect();
    let boards = seed_boards(
        &mut conn,
        &mut reference,
        &tag,
        &[40, 1500, 2047, 2048, 2900, 4090],
        &rows_per_board,
    )
    .await;
    let got: Vec<(u64, u64, i64)> = conn
        .query(format!(
            "SELECT board_id, pin_id, sequence FROM board_has_pins WHERE board_id IN ({})",
            id_list(&boards)
        ))
        .await
        .expect("IN list on board_id over both hosts");
    let expected: BTreeSet<(u64, u64, i64)> = boards
        .iter()
        .zip(&rows_per_board)
        .flat_map(|(board, rows)| rows.iter().map(move |(pin, seq)| (*board, *pin, *seq)))
        .collect();
    assert_eq!(got.len(), expected.len());
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);

    // Mod-shard keys: emails on distinct mod shards of the mod fleet.
    let emails: Vec<String> = (0..8).map(|i| format!("{tag}.{i}@example.com")).collect();
    let mod_shards: BTreeSet<u32> = emails
        .iter()
        .map(|e| mod_shard(e.as_bytes(), 4096))
        .collect();
    assert!(mod_shards.len() >= 7, "{mod_shards:?}");
    for (i, email) in emails.iter().enumerate() {
        conn.query_drop(format!(
            "INSERT INTO user_by_email (email, user_id) VALUES ('{email}', {})",
            1000 + i
        ))
        .await
        .unwrap();
    }
    let list = emails
        .iter()
        .map(|e| format!("'{e}'"))
        .chain(std::iter::once(format!("'{tag}.absent@example.com'")))
        .collect::<Vec<_>>()
        .join(", ");
    let got: Vec<(String, u64)> = conn
        .query(format!(
            "SELECT email, user_id FROM user_by_email WHERE email IN ({list})"
        ))
        .await
        .expect("IN list on a mod-shard key");
    let expected: BTreeSet<(String, u64)> = emails
        .iter()
        .enumerate()
        .map(|(i, e)| (e.clone(), 1000 + i as u64))
        .collect();
    assert_eq!(got.len(), 8);
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);
}

// ------------------------------------------------- 2. ordered merge, LIMIT

#[tokio::test]
async fn order_by_limit_offset_equals_the_reference_server() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    // Shards whose IDs have different digit counts (0: 11 digits, 1: 14,
    // 5: 15, 100: 16, 3000/4095: 18), so a text comparison of IDs would order
    // them differently from the numbers; several rows per shard; repeated
    // data values so ties are broken by id across shards.
    let base = [0u32, 1, 5, 100, 1024, 2047, 2048, 3000, 4095];
    let words = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"];
    let mut shards = Vec::new();
    let mut datas = Vec::new();
    for i in 0..36 {
        shards.push(base[i % base.len()]);
        datas.push(format!("{tag}:{}", words[(i * 5) % words.len()]));
    }
    let ids = seed_pins(&mut conn, &mut reference, &shards, &datas).await;
    let mut list = ids.clone();
    list.push(absent_pin(2500, 1));
    list.push(absent_pin(1, 2));
    let list = id_list(&list);

    for tail in [
        "ORDER BY data DESC, id LIMIT 7 OFFSET 5",
        "ORDER BY data, id DESC LIMIT 7 OFFSET 5",
        "ORDER BY id LIMIT 10",
        "ORDER BY id DESC LIMIT 4 OFFSET 20",
        "ORDER BY data, id",
        "ORDER BY id LIMIT 5, 7",
        "ORDER BY data DESC, id LIMIT 100 OFFSET 30",
        "ORDER BY id LIMIT 5 OFFSET 1000",
        "ORDER BY id DESC LIMIT 1",
        // Fewer rows than a shard holds: each part is cut at offset + limit.
        "ORDER BY data DESC, id LIMIT 2 OFFSET 1",
        "ORDER BY id LIMIT 3",
    ] {
        let sql = format!("SELECT id, data FROM pins WHERE id IN ({list}) {tail}");
        let table = assert_same_as_reference(&mut conn, &mut reference, &sql).await;
        if !tail.contains("1000") {
            assert!(!table.rows.is_empty(), "{sql}");
        }
    }
    // ORDER BY a column that is not selected, and a select list in another
    // order than the sort keys.
    for sql in [
        format!("SELECT data FROM pins WHERE id IN ({list}) ORDER BY id DESC LIMIT 6 OFFSET 2"),
        format!("SELECT data, id FROM pins WHERE id IN ({list}) ORDER BY id LIMIT 8"),
    ] {
        assert_same_as_reference(&mut conn, &mut reference, &sql).await;
    }
}

#[tokio::test]
async fn order_by_numbers_compares_them_as_numbers() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    // Sequences whose text order differs from their numeric order
    // (2 < 10 < 100, negatives), spread over boards on both hosts, with
    // equal sequences on different shards.
    let sequences: [&[i64]; 6] = [
        &[2, 10, 100, -5],
        &[9, 95, 1000, 0],
        &[10, 11, 1_000_000, -40],
        &[3, 30, 300, 2],
        &[7, 70, 700_000, -100],
        &[1, 19, 199, 100],
    ];
    let rows: Vec<Vec<(u64, i64)>> = sequences
        .iter()
        .enumerate()
        .map(|(b, seqs)| {
            seqs.iter()
                .enumerate()
                .map(|(p, s)| (1000 + (b * 7 + p * 3) as u64 % 11, *s))
                .collect()
        })
        .collect();
    let boards = seed_boards(
        &mut conn,
        &mut reference,
        &tag,
        &[2, 600, 2000, 2050, 3500, 4095],
        &rows,
    )
    .await;
    let list = id_list(&boards);
    for tail in [
        // Every order is total (the same (sequence, pin_id) occurs on two
        // boards), so one right answer exists.
        "ORDER BY sequence DESC, pin_id, board_id LIMIT 7 OFFSET 3",
        "ORDER BY sequence DESC, pin_id, board_id LIMIT 2 OFFSET 1",
        "ORDER BY sequence, board_id, pin_id LIMIT 10",
        "ORDER BY sequence, board_id, pin_id",
        "ORDER BY board_id DESC, sequence LIMIT 9 OFFSET 2",
        "ORDER BY pin_id, sequence DESC, board_id LIMIT 12",
    ] {
        let sql = format!(
            "SELECT board_id, pin_id, sequence FROM board_has_pins WHERE board_id IN ({list}) {tail}"
        );
        let table = assert_same_as_reference(&mut conn, &mut reference, &sql).await;
        assert!(!table.rows.is_empty(), "{sql}");
    }
}

#[tokio::test]
async fn order_by_text_follows_the_column_collation() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    // utf8mb4 (the shard tables' charset) sorts case-insensitively:
    // 'Apple' < 'banana' < 'Cherry'; raw bytes would put 'Cherry' before
    // 'banana'. 'apple'/'APPLE' are equal and fall back to id.
    let words = [
        "Apple", "banana", "Cherry", "apple", "APPLE", "date", "Elder", "fig", "Zebra", "yak",
        "Ábaco", "abc",
    ];
    let base = [3u32, 700, 1800, 2200, 3100, 4000];
    let shards: Vec<u32> = (0..words.len()).map(|i| base[i % base.len()]).collect();
    let datas: Vec<String> = words.iter().map(|w| format!("{tag}:{w}")).collect();
    let ids = seed_pins(&mut conn, &mut reference, &shards, &datas).await;
    let list = id_list(&ids);
    for tail in [
        "ORDER BY data, id",
        "ORDER BY data DESC, id LIMIT 5 OFFSET 1",
        "ORDER BY data, id LIMIT 4",
    ] {
        let sql = format!("SELECT id, data FROM pins WHERE id IN ({list}) {tail}");
        assert_same_as_reference(&mut conn, &mut reference, &sql).await;
    }
}

// ---------------------------------------------------------------- 3. scatter

#[tokio::test]
async fn scatter_runs_on_every_shard_only_when_asked() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let shards = [0u32, 17, 1023, 2047, 2048, 2049, 3071, 4095, 17, 4095];
    let datas: Vec<String> = (0..shards.len())
        .map(|i| format!("{tag}:{:02}", (i * 7) % 10))
        .collect();
    let ids = seed_pins(&mut conn, &mut reference, &shards, &datas).await;

    // What the masters hold for this tag, counted straight on each shard.
    let mut direct_total = 0u64;
    let distinct: BTreeSet<u32> = shards.iter().copied().collect();
    for shard in &distinct {
        let mut master = direct(main_master_port(*shard)).await;
        let n: u64 = master
            .query_first(format!(
                "SELECT COUNT(*) FROM db{shard:05}.pins WHERE data LIKE '{tag}%'"
            ))
            .await
            .unwrap()
            .unwrap();
        master.disconnect().await.ok();
        direct_total += n;
    }
    assert_eq!(direct_total, ids.len() as u64);

    let sql = format!("SELECT COUNT(*) FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'");
    let count: Option<u64> = conn
        .query_first(&sql)
        .await
        .unwrap_or_else(|e| panic!("scatter count: {e}"));
    assert_eq!(count, Some(direct_total), "{sql}");

    // Rows, merged in order, equal the reference.
    for tail in ["ORDER BY id", "ORDER BY data DESC, id LIMIT 4 OFFSET 2"] {
        let sql =
            format!("SELECT id, data FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%' {tail}");
        let table = assert_same_as_reference(&mut conn, &mut reference, &sql).await;
        assert!(!table.rows.is_empty());
    }
    // Unordered scatter rows: the same set.
    let rows: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'"
        ))
        .await
        .expect("scatter rows");
    let expected: BTreeSet<(u64, String)> =
        ids.iter().copied().zip(datas.iter().cloned()).collect();
    assert_eq!(rows.len(), ids.len());
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), expected);

    // Without the hint, the same statements are refused: no shard key.
    for sql in [
        format!("SELECT COUNT(*) FROM pins WHERE data LIKE '{tag}%'"),
        format!("SELECT id, data FROM pins WHERE data LIKE '{tag}%' ORDER BY id"),
    ] {
        let error = conn
            .query_drop(&sql)
            .await
            .expect_err("no key, no hint: refused");
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{message}");
        assert!(
            message.contains("no shard key for table 'pins'"),
            "{message}"
        );
    }
    // The connection is still usable.
    let again: Option<u64> = conn.query_first(&sql).await.unwrap();
    assert_eq!(again, Some(direct_total));
}

#[tokio::test]
async fn writes_and_locking_reads_never_fan_out() {
    let tag = unique_tag();
    let mut conn = client().await;
    let id = insert_pin(&mut conn, 2222, &format!("{tag}:keep")).await;
    let other = insert_pin(&mut conn, 33, &format!("{tag}:keep too")).await;
    let board_a = insert_board(&mut conn, 100, &tag).await;
    let board_b = insert_board(&mut conn, 3000, &tag).await;
    for sql in [
        format!("UPDATE pins /*+ SCATTER */ SET data = 'x' WHERE data LIKE '{tag}%'"),
        format!("DELETE FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'"),
        format!("UPDATE pins SET data = 'x' WHERE id IN ({id}, {other})"),
        format!("DELETE FROM pins WHERE id IN ({id}, {other})"),
        format!("SELECT id, data FROM pins WHERE id IN ({id}, {other}) FOR UPDATE"),
        // A multi-row INSERT into a mapping table whose rows belong to two
        // shards (README: refused, in and out of transactions).
        format!(
            "INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({board_a}, 1, 1), ({board_b}, 1, 1)"
        ),
    ] {
        let error = conn
            .query_drop(&sql)
            .await
            .expect_err("a scattered write is refused");
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{message}");
        assert!(message.starts_with("shardgate:"), "{message}");
    }
    let fields = decode(id);
    assert_eq!(
        row_on_host(MASTER_B, "pins", 2222, fields.local_id).await,
        Some(format!("{tag}:keep")),
        "the row is untouched"
    );
    assert_eq!(
        row_on_host(MASTER_A, "pins", 33, decode(other).local_id).await,
        Some(format!("{tag}:keep too")),
        "the row is untouched"
    );
    // Neither shard got a mapping row.
    for (board, shard) in [(board_a, 100u32), (board_b, 3000)] {
        let mut master = direct(main_master_port(shard)).await;
        let n: u64 = master
            .query_first(format!(
                "SELECT COUNT(*) FROM db{shard:05}.board_has_pins WHERE board_id = {board}"
            ))
            .await
            .unwrap()
            .unwrap();
        master.disconnect().await.ok();
        assert_eq!(n, 0, "board {board} on shard {shard}");
    }
}

// ------------------------------------------------------------- 4. aggregates

/// Boards on both hosts with mapping rows; pin ids repeat across boards so
/// groups by pin_id span shards. The last two boards have no rows.
async fn seed_aggregate_boards(conn: &mut Conn, reference: &mut Conn, tag: &str) -> Vec<u64> {
    let shards = [9u32, 1111, 2047, 2048, 2600, 4094, 500, 3900];
    let rows: Vec<Vec<(u64, i64)>> = (0..shards.len())
        .map(|b| {
            if b >= 6 {
                return Vec::new();
            }
            (0..(3 + b as u64 * 2))
                .map(|p| {
                    (
                        7000 + (p * 3 + b as u64) % 9,
                        (p as i64 * 37 + b as i64 * 101) % 250 - 60,
                    )
                })
                // One row per (board, pin): a BTreeMap keeps the last.
                .collect::<std::collections::BTreeMap<u64, i64>>()
                .into_iter()
                .collect()
        })
        .collect();
    seed_boards(conn, reference, tag, &shards, &rows).await
}

#[tokio::test]
async fn aggregates_merge_exactly_like_one_server() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let boards = seed_aggregate_boards(&mut conn, &mut reference, &tag).await;
    let all = id_list(&boards);
    let with_rows = id_list(&boards[..6]);
    let empty = id_list(&boards[6..]);
    let from = "FROM board_has_pins WHERE board_id IN";

    for sql in [
        format!("SELECT COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all})"),
        format!("SELECT COUNT(*) {from} ({all})"),
        format!("SELECT COUNT(sequence), MAX(pin_id), MIN(board_id) {from} ({with_rows})"),
        format!("SELECT MIN(sequence), MAX(sequence) {from} ({all}) AND sequence > 0"),
        format!(
            "SELECT board_id, COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all}) GROUP BY board_id ORDER BY board_id"
        ),
        format!(
            "SELECT board_id, COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all}) GROUP BY board_id ORDER BY board_id DESC LIMIT 3 OFFSET 1"
        ),
        // Groups that span shards: the same pin on boards on several shards.
        format!(
            "SELECT pin_id, COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all}) GROUP BY pin_id ORDER BY pin_id"
        ),
        format!(
            "SELECT pin_id, COUNT(*) AS n, SUM(sequence) AS total {from} ({all}) GROUP BY pin_id ORDER BY pin_id DESC LIMIT 4"
        ),
        // Ordered by merged aggregates: only right after the groups are merged.
        format!(
            "SELECT pin_id, COUNT(*) AS n, MAX(sequence) {from} ({all}) GROUP BY pin_id ORDER BY n DESC, pin_id LIMIT 3"
        ),
        format!(
            "SELECT pin_id, SUM(sequence) AS total {from} ({all}) GROUP BY pin_id ORDER BY 2, 1 LIMIT 2 OFFSET 1"
        ),
        // Every shard empty: COUNT 0, the others NULL.
        format!("SELECT COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({empty})"),
        format!("SELECT board_id, COUNT(*) {from} ({empty}) GROUP BY board_id ORDER BY board_id"),
    ] {
        assert_same_as_reference(&mut conn, &mut reference, &sql).await;
    }

    // GROUP BY without ORDER BY: SQL leaves the order open; same groups.
    let sql = format!(
        "SELECT pin_id, COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all}) GROUP BY pin_id"
    );
    let got = fetch(&mut conn, &sql)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    let expected = fetch(&mut reference, &reference_sql(&sql)).await.unwrap();
    assert_eq!(got.columns, expected.columns);
    assert_eq!(got.sorted_rows(), expected.sorted_rows(), "{sql}");
    assert!(expected.rows.len() > 3);
}

#[tokio::test]
async fn scatter_aggregates_equal_the_reference() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let shards = [4u32, 4, 900, 2047, 2048, 3333, 4095, 4095];
    let datas: Vec<String> = ["k", "c", "x", "a", "m", "b", "z", "q"]
        .iter()
        .map(|w| format!("{tag}:{w}"))
        .collect();
    seed_pins(&mut conn, &mut reference, &shards, &datas).await;
    for sql in [
        format!("SELECT COUNT(*), MIN(data), MAX(data), MIN(id), MAX(id) FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'"),
        format!("SELECT COUNT(*), MIN(id) FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}:none%'"),
    ] {
        assert_same_as_reference(&mut conn, &mut reference, &sql).await;
    }
}

#[tokio::test]
async fn aggregates_that_cannot_be_merged_exactly_are_refused() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let boards = seed_aggregate_boards(&mut conn, &mut reference, &tag).await;
    let all = id_list(&boards);
    let from = "FROM board_has_pins WHERE board_id IN";
    let count_sql = format!("SELECT COUNT(*) {from} ({all})");
    let expected_count = fetch(&mut reference, &reference_sql(&count_sql))
        .await
        .unwrap();

    let refused: [(String, &[&str]); 6] = [
        (format!("SELECT AVG(sequence) {from} ({all})"), &["avg"]),
        (
            format!("SELECT pin_id, AVG(sequence) {from} ({all}) GROUP BY pin_id ORDER BY pin_id"),
            &["avg"],
        ),
        (
            format!("SELECT COUNT(DISTINCT pin_id) {from} ({all})"),
            &["distinct"],
        ),
        (
            format!("SELECT SUM(DISTINCT sequence) {from} ({all})"),
            &["distinct"],
        ),
        // An aggregate mixed with a column that is neither grouped nor aggregated.
        (
            format!("SELECT pin_id, COUNT(*) {from} ({all})"),
            &["pin_id"],
        ),
        (
            format!("SELECT board_id, pin_id, MAX(sequence) {from} ({all}) GROUP BY board_id"),
            &["pin_id"],
        ),
    ];
    for (sql, names) in &refused {
        assert_refused(fetch(&mut conn, sql).await, sql, names);
        // The connection stays usable, with the right answer.
        let after = fetch(&mut conn, &count_sql)
            .await
            .unwrap_or_else(|e| panic!("after a refusal: {e}"));
        assert_eq!(after, expected_count);
    }

    // Where an exact answer is possible but not required, an exact answer
    // or a refusal naming the construct; never a wrong answer. HAVING over
    // groups that span shards; AVG per group of the shard key (each group
    // lies on one shard).
    for (sql, name) in [
        (
            format!("SELECT pin_id, COUNT(*) {from} ({all}) GROUP BY pin_id HAVING COUNT(*) > 1 ORDER BY pin_id"),
            "having",
        ),
        (
            format!("SELECT board_id, AVG(sequence) {from} ({all}) GROUP BY board_id ORDER BY board_id"),
            "avg",
        ),
    ] {
        match fetch(&mut conn, &sql).await {
            Ok(got) => {
                let expected = fetch(&mut reference, &reference_sql(&sql)).await.unwrap();
                assert_eq!(got, expected, "{sql}");
                assert!(!expected.rows.is_empty());
            }
            Err(error) => assert_refused(Err(error), &sql, &[name]),
        }
    }

    // On one shard the server computes them itself: AVG of one board works.
    let sql = format!(
        "SELECT AVG(sequence), COUNT(DISTINCT pin_id) FROM board_has_pins WHERE board_id = {}",
        boards[3]
    );
    assert_same_as_reference(&mut conn, &mut reference, &sql).await;
}

// -------------------------------------------------------------- benchmark

/// Issue 4's benchmark, run by `integration/bench/multi_get.sh`: 50-pin
/// gets by ID spread over all shards of both masters, through a release
/// proxy (one `SELECT id, data FROM pins WHERE id IN (...)`) vs the same
/// lookups sent straight to the masters grouped per shard, in parallel.
/// Configured by environment variables (see the script); prints a markdown
/// report on stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run by integration/bench/multi_get.sh against a release proxy"]
async fn bench_multi_get_proxy_vs_direct() {
    bench::run().await;
}

mod bench {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use tokio::task::JoinSet;

    use super::*;

    fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => v
                .parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not valid")),
            _ => default,
        }
    }

    struct Config {
        proxy_port: u16,
        proxy_pid: Option<u32>,
        seconds: f64,
        warmup: f64,
        rounds: usize,
        concurrency: Vec<usize>,
        per_get: usize,
        shards: u32,
        rows_per_shard: usize,
        pool_max: usize,
        quiet_busy: u64,
        quiet_wait: u64,
        seed: u64,
        /// Only the direct half (tests the harness without a proxy).
        direct_only: bool,
    }

    fn config() -> Config {
        Config {
            proxy_port: env("MULTI_GET_PROXY_PORT", 6033),
            proxy_pid: std::env::var("MULTI_GET_PROXY_PID")
                .ok()
                .and_then(|p| p.parse().ok()),
            seconds: env("MULTI_GET_SECONDS", 10.0),
            warmup: env("MULTI_GET_WARMUP", 3.0),
            rounds: env("MULTI_GET_ROUNDS", 3),
            concurrency: env("MULTI_GET_CONCURRENCY", "1 8".to_owned())
                .split_whitespace()
                .map(|c| c.parse().expect("concurrency"))
                .collect(),
            per_get: env("MULTI_GET_IDS", 50),
            shards: env("MULTI_GET_SHARDS", 4096),
            rows_per_shard: env("MULTI_GET_ROWS", 4),
            pool_max: env("MULTI_GET_POOL_MAX", 64),
            quiet_busy: env("MULTI_GET_QUIET_BUSY", 25),
            quiet_wait: env("MULTI_GET_QUIET_WAIT", 120),
            seed: env("MULTI_GET_SEED", 20240601),
            direct_only: env("MULTI_GET_DIRECT_ONLY", 0u8) == 1,
        }
    }

    fn pool(port: u16, user: &str, password: &str, max: usize) -> Pool {
        let opts: Opts = OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some(user))
            .pass(Some(password))
            .prefer_socket(false)
            // As an application's pool: connections are kept between gets
            // and handed out again without a COM_RESET_CONNECTION round trip.
            .pool_opts(
                PoolOpts::default()
                    .with_constraints(PoolConstraints::new(0, max).expect("constraints"))
                    .with_reset_connection(false)
                    .with_inactive_connection_ttl(Duration::from_secs(3600)),
            )
            .into();
        Pool::new(opts)
    }

    /// One seeded pin: global ID, shard, local id.
    #[derive(Clone, Copy)]
    struct Pin {
        id: u64,
        shard: u32,
        local: u64,
    }

    /// Seeds `rows_per_shard` pins (data 'mget:...', 100 bytes) on each of
    /// `shards` shards spread evenly over 0..4096, straight on the masters;
    /// rows of an earlier run are reused. Returns the pins.
    async fn seed(cfg: &Config, masters: &BTreeMap<u16, Pool>) -> Vec<Pin> {
        let step = 4096 / cfg.shards;
        let wanted: Vec<u32> = (0..cfg.shards).map(|i| i * step).collect();
        let mut set = JoinSet::new();
        let chunks: Vec<Vec<u32>> = wanted
            .chunks(wanted.len().div_ceil(8))
            .map(<[u32]>::to_vec)
            .collect();
        for chunk in chunks {
            let masters = masters.clone();
            let rows = cfg.rows_per_shard;
            set.spawn(async move {
                let mut pins = Vec::new();
                for shard in chunk {
                    let mut conn = masters[&main_master_port(shard)].get_conn().await.expect("master");
                    let read = format!(
                        "SELECT local_id FROM db{shard:05}.pins WHERE data LIKE 'mget:%' ORDER BY local_id LIMIT {rows}"
                    );
                    let mut locals: Vec<u64> = conn.query(&read).await.expect("read seeded rows");
                    if locals.len() < rows {
                        let values = (locals.len()..rows)
                            .map(|r| {
                                let data = format!("mget:{shard}:{r}:{}", "x".repeat(100));
                                format!("('{}')", &data[..100])
                            })
                            .collect::<Vec<_>>()
                            .join(", ");
                        conn.query_drop(format!("INSERT INTO db{shard:05}.pins (data) VALUES {values}"))
                            .await
                            .expect("seed rows");
                        locals = conn.query(&read).await.expect("read seeded rows");
                    }
                    for local in locals {
                        let id = ObjectId { shard, type_id: PIN_TYPE, local_id: local }
                            .encode()
                            .unwrap();
                        pins.push(Pin { id, shard, local });
                    }
                }
                pins
            });
        }
        let mut pins = Vec::new();
        while let Some(part) = set.join_next().await {
            pins.extend(part.expect("seed task"));
        }
        pins.sort_by_key(|p| p.id);
        assert_eq!(pins.len(), wanted.len() * cfg.rows_per_shard, "seeded rows");
        pins
    }

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum Mode {
        Direct,
        Proxy,
    }

    /// One 50-get through the proxy: one statement; returns the rows.
    async fn get_via_proxy(proxy: &Pool, pins: &[Pin]) -> Vec<(u64, String)> {
        let ids: Vec<u64> = pins.iter().map(|p| p.id).collect();
        let mut conn = proxy.get_conn().await.expect("proxy connection");
        conn.query(format!(
            "SELECT id, data FROM pins WHERE id IN ({})",
            id_list(&ids)
        ))
        .await
        .expect("proxy multi-get")
    }

    /// The same get as an application does it without the proxy: group by
    /// shard, one query per shard on its master, all in parallel.
    async fn get_direct(masters: &Arc<BTreeMap<u16, Pool>>, pins: &[Pin]) -> Vec<(u64, String)> {
        let mut by_shard: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for pin in pins {
            by_shard.entry(pin.shard).or_default().push(pin.local);
        }
        let mut set = JoinSet::new();
        for (shard, locals) in by_shard {
            let pool = masters[&main_master_port(shard)].clone();
            set.spawn(async move {
                let mut conn = pool.get_conn().await.expect("master connection");
                let rows: Vec<(u64, String)> = conn
                    .query(format!(
                        "SELECT local_id, data FROM db{shard:05}.pins WHERE local_id IN ({})",
                        id_list(&locals)
                    ))
                    .await
                    .expect("direct per-shard get");
                rows.into_iter()
                    .map(|(local, data)| {
                        let id = ObjectId {
                            shard,
                            type_id: PIN_TYPE,
                            local_id: local,
                        }
                        .encode()
                        .unwrap();
                        (id, data)
                    })
                    .collect::<Vec<_>>()
            });
        }
        let mut rows = Vec::with_capacity(pins.len());
        while let Some(part) = set.join_next().await {
            rows.extend(part.expect("per-shard task"));
        }
        rows
    }

    /// Picks `n` distinct pins at random.
    fn pick(rng: &mut StdRng, all: &[Pin], n: usize) -> Vec<Pin> {
        let mut chosen: Vec<Pin> = Vec::with_capacity(n);
        while chosen.len() < n {
            let pin = all[rng.random_range(0..all.len())];
            if !chosen.iter().any(|c| c.id == pin.id) {
                chosen.push(pin);
            }
        }
        chosen
    }

    struct RunResult {
        gets: usize,
        secs: f64,
        p50_us: f64,
        p95_us: f64,
        p99_us: f64,
        shards_per_get: f64,
        cpu: Cpu,
        busy_before: u64,
    }

    /// CPU time in clock ticks of the processes involved, and of the machine.
    #[derive(Default, Clone, Copy)]
    struct Cpu {
        proxy: u64,
        mariadbd: u64,
        client: u64,
        machine_process: u64,
        machine_softirq: u64,
        machine_total: u64,
    }

    fn proc_ticks(pid: u32) -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let rest = &s[s.rfind(')')? + 2..];
                let f: Vec<&str> = rest.split_whitespace().collect();
                // Fields 14 and 15 (utime, stime) are 12 and 13 after ")".
                Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
            })
            .unwrap_or(0)
    }

    /// (busy, total, process, irq+softirq) ticks of the whole machine.
    fn machine_ticks() -> (u64, u64, u64, u64) {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let line = stat.lines().next().unwrap_or("");
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        let busy = g(0) + g(1) + g(2) + g(5) + g(6) + g(7);
        (busy, busy + g(3) + g(4), g(0) + g(1) + g(2), g(5) + g(6))
    }

    fn mariadbd_pids() -> Vec<u32> {
        let fleet = repo_root().join("integration/.fleet");
        let fleet = std::env::var("SHARDGATE_FLEET_DIR")
            .map(Into::into)
            .unwrap_or(fleet);
        [MASTER_A, MASTER_B]
            .iter()
            .filter_map(|port| {
                std::fs::read_to_string(fleet.join(port.to_string()).join("mariadbd.pid"))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect()
    }

    fn snapshot(proxy_pid: Option<u32>) -> Cpu {
        let (_, total, process, softirq) = machine_ticks();
        Cpu {
            proxy: proxy_pid.map(proc_ticks).unwrap_or(0),
            mariadbd: mariadbd_pids().into_iter().map(proc_ticks).sum(),
            client: proc_ticks(std::process::id()),
            machine_process: process,
            machine_softirq: softirq,
            machine_total: total,
        }
    }

    fn diff(a: Cpu, b: Cpu) -> Cpu {
        Cpu {
            proxy: b.proxy.saturating_sub(a.proxy),
            mariadbd: b.mariadbd.saturating_sub(a.mariadbd),
            client: b.client.saturating_sub(a.client),
            machine_process: b.machine_process.saturating_sub(a.machine_process),
            machine_softirq: b.machine_softirq.saturating_sub(a.machine_softirq),
            machine_total: b.machine_total.saturating_sub(a.machine_total),
        }
    }

    /// Waits (up to `wait` s) for the machine to be under `busy` % busy over
    /// a second; returns the last measured %.
    async fn wait_quiet(busy_limit: u64, wait: u64) -> u64 {
        let mut waited = 0;
        loop {
            let (b0, t0, _, _) = machine_ticks();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let (b1, t1, _, _) = machine_ticks();
            let busy = (b1 - b0) * 100 / (t1 - t0).max(1);
            if busy < busy_limit || waited >= wait {
                return busy;
            }
            if waited % 30 == 0 {
                eprintln!("[multi_get] machine {busy}% busy; waiting for a quieter moment");
            }
            waited += 1;
        }
    }

    /// What the clients read and where from.
    struct Clients {
        pins: Arc<Vec<Pin>>,
        masters: Arc<BTreeMap<u16, Pool>>,
        proxy: Pool,
    }

    /// One timed run of `workers` clients in `mode`, each looping over gets
    /// of random ID sets (seeded by `seed`, so both modes get the same sets).
    async fn run_mode(
        cfg: &Config,
        clients: &Clients,
        mode: Mode,
        workers: usize,
        secs: f64,
        seed: u64,
    ) -> RunResult {
        let busy_before = if secs >= 1.0 {
            wait_quiet(cfg.quiet_busy, cfg.quiet_wait).await
        } else {
            0
        };
        let before = snapshot(cfg.proxy_pid);
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(secs);
        let mut set = JoinSet::new();
        for w in 0..workers {
            let pins = clients.pins.clone();
            let masters = clients.masters.clone();
            let proxy = clients.proxy.clone();
            let per_get = cfg.per_get;
            set.spawn(async move {
                // The same seed in both modes: both fetch the same ID sets.
                let mut rng = StdRng::seed_from_u64(seed ^ (w as u64 * 0x9e37_79b9));
                let mut latencies = Vec::new();
                let mut shards = 0usize;
                while Instant::now() < deadline {
                    let chosen = pick(&mut rng, &pins, per_get);
                    let t = Instant::now();
                    let rows = match mode {
                        Mode::Proxy => get_via_proxy(&proxy, &chosen).await,
                        Mode::Direct => get_direct(&masters, &chosen).await,
                    };
                    latencies.push(t.elapsed());
                    assert_eq!(rows.len(), per_get, "{mode:?}: every ID is found once");
                    let mut wanted: Vec<u64> = chosen.iter().map(|p| p.id).collect();
                    let mut got: Vec<u64> = rows.iter().map(|r| r.0).collect();
                    wanted.sort_unstable();
                    got.sort_unstable();
                    assert_eq!(got, wanted, "{mode:?}: the rows of the asked IDs");
                    let distinct: BTreeSet<u32> = chosen.iter().map(|p| p.shard).collect();
                    shards += distinct.len();
                }
                (latencies, shards)
            });
        }
        let mut latencies = Vec::new();
        let mut shards = 0;
        while let Some(r) = set.join_next().await {
            let (l, s) = r.expect("worker");
            latencies.extend(l);
            shards += s;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let cpu = diff(before, snapshot(cfg.proxy_pid));
        latencies.sort_unstable();
        let pct = |p: f64| {
            latencies[((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1]
                .as_secs_f64()
                * 1e6
        };
        RunResult {
            gets: latencies.len(),
            secs: elapsed,
            p50_us: pct(0.50),
            p95_us: pct(0.95),
            p99_us: pct(0.99),
            shards_per_get: shards as f64 / latencies.len() as f64,
            cpu,
            busy_before,
        }
    }

    /// The modes of a round, in the order they run: alternating per round
    /// so drift favours neither.
    fn modes(cfg: &Config, round: usize) -> Vec<Mode> {
        if cfg.direct_only {
            vec![Mode::Direct]
        } else if round.is_multiple_of(2) {
            vec![Mode::Direct, Mode::Proxy]
        } else {
            vec![Mode::Proxy, Mode::Direct]
        }
    }

    pub(super) async fn run() {
        let cfg = config();
        let hz: f64 = env("MULTI_GET_CLK_TCK", 100.0);
        let masters: Arc<BTreeMap<u16, Pool>> = Arc::new(
            [MASTER_A, MASTER_B]
                .into_iter()
                .map(|port| (port, pool(port, "shard", "shardpw", cfg.pool_max)))
                .collect(),
        );
        let proxy = pool(cfg.proxy_port, APP_USER, APP_PASSWORD, cfg.pool_max);
        eprintln!(
            "[multi_get] seeding / reading {} shards x {} rows",
            cfg.shards, cfg.rows_per_shard
        );
        let pins = Arc::new(seed(&cfg, &masters).await);
        eprintln!("[multi_get] {} pins", pins.len());

        // Correctness first: a few gets, both ways, give the same rows.
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        for _ in 0..if cfg.direct_only { 0 } else { 5 } {
            let chosen = pick(&mut rng, &pins, cfg.per_get);
            let mut a = get_via_proxy(&proxy, &chosen).await;
            let mut b = get_direct(&masters, &chosen).await;
            a.sort();
            b.sort();
            assert_eq!(a.len(), cfg.per_get);
            assert_eq!(a, b, "the proxy and the masters return the same rows");
        }
        let clients = Clients {
            pins,
            masters,
            proxy,
        };

        let mut out = String::new();
        let mut shards_per_get = Vec::new();
        for &workers in &cfg.concurrency {
            if cfg.warmup > 0.0 {
                for mode in modes(&cfg, 0) {
                    run_mode(&cfg, &clients, mode, workers, cfg.warmup, cfg.seed).await;
                }
            }
            out.push_str(&format!("\n### {workers} concurrent client(s)\n\n"));
            out.push_str("| round | direct gets/s | proxy gets/s | ratio | direct p50 / p95 / p99 (µs) | proxy p50 / p95 / p99 (µs) | CPU µs / get, direct: mariadbd + client + softirq | CPU µs / get, proxy: proxy + mariadbd + client + softirq | others' CPU during, direct / proxy |\n");
            out.push_str("|---|---|---|---|---|---|---|---|---|\n");
            let mut ratios = Vec::new();
            for round in 0..cfg.rounds {
                let order = modes(&cfg, round);
                let seed = cfg.seed + round as u64 * 7919;
                let mut results = BTreeMap::new();
                for mode in order {
                    let r = run_mode(&cfg, &clients, mode, workers, cfg.seconds, seed).await;
                    eprintln!(
                        "[multi_get] {workers} clients round {} {mode:?}: {:.0} gets/s p50 {:.0} µs p95 {:.0} µs ({:.1} shards/get; busy before {}%)",
                        round + 1,
                        r.gets as f64 / r.secs,
                        r.p50_us,
                        r.p95_us,
                        r.shards_per_get,
                        r.busy_before
                    );
                    shards_per_get.push(r.shards_per_get);
                    results.insert(mode == Mode::Proxy, r);
                }
                let d = &results[&false];
                let Some(p) = results.get(&true) else {
                    out.push_str(&format!(
                        "| {} | {:.0} | - | - | {:.0} / {:.0} / {:.0} | - | - | - | - |\n",
                        round + 1,
                        d.gets as f64 / d.secs,
                        d.p50_us,
                        d.p95_us,
                        d.p99_us
                    ));
                    continue;
                };
                let (dr, pr) = (d.gets as f64 / d.secs, p.gets as f64 / p.secs);
                let per_get = |ticks: u64, gets: usize| ticks as f64 * 1e6 / hz / gets as f64;
                let others = |r: &RunResult, own: u64| {
                    let o = r.cpu.machine_process.saturating_sub(own) as f64 * 100.0
                        / r.cpu.machine_total.max(1) as f64;
                    o.max(0.0)
                };
                let dc = (
                    per_get(d.cpu.mariadbd, d.gets),
                    per_get(d.cpu.client, d.gets),
                    per_get(d.cpu.machine_softirq, d.gets),
                );
                let pc = (
                    per_get(p.cpu.proxy, p.gets),
                    per_get(p.cpu.mariadbd, p.gets),
                    per_get(p.cpu.client, p.gets),
                    per_get(p.cpu.machine_softirq, p.gets),
                );
                out.push_str(&format!(
                    "| {} | {:.0} | {:.0} | {:.3} | {:.0} / {:.0} / {:.0} | {:.0} / {:.0} / {:.0} | {:.0} + {:.0} + {:.0} = {:.0} | {:.0} + {:.0} + {:.0} + {:.0} = {:.0} | {:.0}% / {:.0}% |\n",
                    round + 1, dr, pr, pr / dr,
                    d.p50_us, d.p95_us, d.p99_us, p.p50_us, p.p95_us, p.p99_us,
                    dc.0, dc.1, dc.2, dc.0 + dc.1 + dc.2,
                    pc.0, pc.1, pc.2, pc.3, pc.0 + pc.1 + pc.2 + pc.3,
                    others(d, d.cpu.mariadbd + d.cpu.client),
                    others(p, p.cpu.proxy + p.cpu.mariadbd + p.cpu.client),
                ));
                ratios.push(pr / dr);
            }
            if ratios.is_empty() {
                continue;
            }
            ratios.sort_by(f64::total_cmp);
            let median = ratios[ratios.len() / 2];
            out.push_str(&format!(
                "\nMedian proxy/direct gets/s ratio with {workers} concurrent client(s): **{median:.3}** (range {:.3} - {:.3}).\n",
                ratios[0],
                ratios[ratios.len() - 1]
            ));
        }
        println!("MULTI_GET_REPORT_BEGIN");
        println!(
            "{} pins: {} rows on each of {} shards ({}, both masters), 100-byte data; \
             {} distinct random IDs per get, on {:.1} distinct shards on average; \
             {} s per run, {} rounds, {} s warm-up per mode; client pools of up to {} connections per host.",
            clients.pins.len(),
            cfg.rows_per_shard,
            cfg.shards,
            match 4096 / cfg.shards {
                1 => "every shard".to_owned(),
                step => format!("shards 0, {step}, {}, ..., {}", 2 * step, 4096 - step),
            },
            cfg.per_get,
            shards_per_get.iter().sum::<f64>() / shards_per_get.len().max(1) as f64,
            cfg.seconds,
            cfg.rounds,
            cfg.warmup,
            cfg.pool_max
        );
        println!("{out}");
        println!("MULTI_GET_REPORT_END");
        drop(clients.proxy.disconnect().await);
        if let Ok(masters) = Arc::try_unwrap(clients.masters) {
            for (_, pool) in masters {
                drop(pool.disconnect().await);
            }
        }
    }
}
