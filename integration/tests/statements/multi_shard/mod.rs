//! Multi-shard reads through the proxy against the real fleet:
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
//! The multi-get benchmark (`bench_multi_get_proxy_vs_direct`, ignored) is
//! run by `integration/bench/multi_get.sh` against a release proxy.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Row, Value};
use shardgate::id::{mod_shard, ObjectId};

const PIN_TYPE: u16 = 1;
const BOARD_TYPE: u16 = 2;
const REFERENCE_DB: &str = "shardgate_reference";

mod aggregates;
mod bench;
mod binary;
mod in_list;
mod merge;
mod scatter;

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

/// The multi-get benchmark, run by `integration/bench/multi_get.sh`: 50-pin
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
