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
    proxy_keeping(name, Some(keep))
}

/// [`proxy`]; `None` keeps the default `limits.backend_prepared_statements`.
fn proxy_keeping(name: &str, keep: Option<usize>) -> RunningProxy {
    let yaml = test_config_yaml();
    let one_connection = yaml.replace(
        "backend: { user: shard, password: shardpw, pool_max_per_host: 64 }",
        "backend: { user: shard, password: shardpw, pool_max_per_host: 1 }",
    );
    assert_ne!(one_connection, yaml, "the test config's backend line");
    let limits = keep.map_or_else(String::new, |keep| {
        format!("limits: {{ backend_prepared_statements: {keep} }}\n")
    });
    start_server(name, &format!("{one_connection}\n{limits}"))
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

    // Ten distinct texts (IDs on ten shards: each shard's database is in
    // the text): the first 4 are kept (there is room), the 6 others, seen
    // once, run as text (their columns read back exact): no prepare.
    let before = counters(&mut ops).await;
    for k in 0..10u32 {
        let other = pin_id(12 + k, (1 << 35) + u64::from(k));
        let _: Option<(String, String)> = conn.exec_first(&statement, (other,)).await.unwrap();
    }
    // The last text again: seen twice, it replaces the least recently
    // used statement, closed in the same write as the prepare.
    let last = pin_id(21, (1 << 35) + 9);
    let _: Option<(String, String)> = conn.exec_first(&statement, (last,)).await.unwrap();
    let [prepares, executes, closes, kept] = delta(counters(&mut ops).await, before);
    assert_eq!((prepares, executes), (5, 5));
    assert!(closes >= 1, "the evicted statement closed: {closes}");
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

/// 1,000 executes of a point lookup with 1,000 different IDs on one
/// connection make one prepare on the server: the ID's local part goes to
/// the server as a parameter of the one statement kept for the shard
/// (`WHERE local_id = ?`), not into the text. Each row is the one a direct
/// read of the shard gives.
#[tokio::test]
async fn point_lookups_with_new_ids_reuse_one_statement() {
    let _serial = serial().await;
    let proxy = proxy("backend-statements-ids", 4);
    let mut conn = app(&proxy).await;
    let mut ops = operations(MASTER_A).await;
    let base: u64 = 1 << 34;
    ops.query_drop(format!(
        "DELETE FROM db00013.pins WHERE local_id BETWEEN {base} AND {}",
        base + 999
    ))
    .await
    .unwrap();
    let values: Vec<String> = (0..1000u64)
        .map(|k| format!("({}, 'row {k}')", base + k))
        .collect();
    ops.query_drop(format!(
        "INSERT INTO db00013.pins (local_id, data) VALUES {}",
        values.join(", ")
    ))
    .await
    .unwrap();
    let direct: Vec<(u64, String)> = ops
        .query(format!(
            "SELECT local_id, data FROM db00013.pins WHERE local_id BETWEEN {base} AND {} ORDER BY local_id",
            base + 999
        ))
        .await
        .unwrap();
    assert_eq!(direct.len(), 1000);
    let statement = conn
        .prep("SELECT id, data FROM pins WHERE id = ?")
        .await
        .unwrap();

    let before = counters(&mut ops).await;
    for (local_id, data) in &direct {
        let id = pin_id(13, *local_id);
        let row: Option<(u64, String)> = conn.exec_first(&statement, (id,)).await.unwrap();
        assert_eq!(row, Some((id, data.clone())), "id {id}");
    }
    let [prepares, executes, _, _] = delta(counters(&mut ops).await, before);
    assert_eq!(executes, 1000);
    assert!(
        prepares <= 2,
        "{prepares} prepares on master A for 1,000 executes with new IDs"
    );

    // An ID of another type or past the fleet's shards is refused as the
    // same statement with the ID in its text is.
    for bad in [
        (13u64 << 46) | (2 << 36) | 5,
        (5000u64 << 46) | (1 << 36) | 5,
    ] {
        let prepared = conn
            .exec_drop(&statement, (bad,))
            .await
            .expect_err("bad ID");
        let text = conn
            .query_drop(format!("SELECT id, data FROM pins WHERE id = {bad}"))
            .await
            .expect_err("bad ID");
        assert_eq!(server_error(prepared), server_error(text), "ID {bad}");
    }
    ops.query_drop(format!(
        "DELETE FROM db00013.pins WHERE local_id BETWEEN {base} AND {}",
        base + 999
    ))
    .await
    .unwrap();
    drop(conn);
    drop(proxy);
}

/// Values of every binary-protocol type (and NULL) reach the server as the
/// parameters the client bound: a FLOAT keeps its four bytes, a DECIMAL its
/// digits, dates and times their fields. Rows written and read through the
/// proxy equal the same statements run on the server directly, and
/// executes with new values make no new prepare.
#[tokio::test]
async fn bound_values_of_every_type_reach_the_server_as_parameters() {
    let _serial = serial().await;
    let proxy = proxy("backend-statements-types", 4);
    let mut conn = app(&proxy).await;
    let mut ops = operations(MASTER_A).await;
    ops.query_drop("DROP TABLE IF EXISTS db00014.prep_types")
        .await
        .unwrap();
    ops.query_drop(
        "CREATE TABLE db00014.prep_types (local_id BIGINT UNSIGNED PRIMARY KEY, i INT, u BIGINT UNSIGNED, \
         f FLOAT, d DOUBLE, n DECIMAL(30,10), s VARCHAR(64), b BLOB, dt DATETIME(6), t TIME(6), y DATE)",
    )
    .await
    .unwrap();
    let insert = "INSERT INTO db00014.prep_types VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    let select = "SELECT i, u, f, d, n, s, b, dt, t, y, ? AS echo FROM db00014.prep_types WHERE local_id = ?";
    let rows = |k: u64| -> Vec<Value> {
        vec![
            Value::UInt(k),
            if k.is_multiple_of(3) {
                Value::NULL
            } else {
                Value::Int(-(k as i64) * 1000)
            },
            Value::UInt(u64::MAX - k),
            Value::Float(16777215.0 + k as f32),
            Value::Double(0.1 + k as f64),
            Value::Bytes(format!("{k}.0123456789").into_bytes()),
            Value::Bytes(format!("ünï'\\\"{k}").into_bytes()),
            Value::Bytes(vec![0, 0xFF, b'\'', b'\\', k as u8]),
            Value::Date(2024, 2, 29, 23, 59, 58, 123_456 + k as u32),
            Value::Time(true, 1, 2, 3, 4, 5 + k as u32),
            if k.is_multiple_of(2) {
                Value::NULL
            } else {
                Value::Date(1999, 12, 31, 0, 0, 0, 0)
            },
        ]
    };
    let proxy_insert = conn.prep(insert).await.unwrap();
    let proxy_select = conn.prep(select).await.unwrap();
    let mut host = direct(MASTER_A).await;
    let host_select = host.prep(select).await.unwrap();
    let host_insert = host.prep(insert).await.unwrap();
    let before = counters(&mut ops).await;
    for k in 1..=20u64 {
        conn.exec_drop(&proxy_insert, rows(k)).await.unwrap();
        let mut direct_values = rows(k);
        direct_values[0] = Value::UInt(k + 1000);
        host.exec_drop(&host_insert, direct_values).await.unwrap();
    }
    let [prepares, executes, _, _] = delta(counters(&mut ops).await, before);
    assert!(
        prepares <= 1 + 2,
        "{prepares} prepares for 20 proxy inserts"
    );
    assert!(executes >= 40, "{executes}");
    for k in 1..=20u64 {
        let echo = Value::Bytes(format!("echo {k}").into_bytes());
        let through: Vec<Value> = conn
            .exec_first::<mysql_async::Row, _, _>(&proxy_select, (echo.clone(), k))
            .await
            .unwrap()
            .expect("row")
            .unwrap();
        let on_host: Vec<Value> = host
            .exec_first::<mysql_async::Row, _, _>(&host_select, (echo.clone(), k + 1000))
            .await
            .unwrap()
            .expect("row")
            .unwrap();
        assert_eq!(through, on_host, "row {k}");
    }
    ops.query_drop("DROP TABLE db00014.prep_types")
        .await
        .unwrap();
    drop(conn);
    drop(proxy);
}

/// Puts master A's `max_prepared_stmt_count` back when the test ends,
/// however it ends.
struct RestoreMaxPrepared(u64);

impl Drop for RestoreMaxPrepared {
    fn drop(&mut self) {
        let old = self.0;
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().expect("runtime");
            runtime.block_on(async {
                let mut ops = operations(MASTER_A).await;
                ops.query_drop(format!("SET GLOBAL max_prepared_stmt_count = {old}"))
                    .await
                    .expect("restore max_prepared_stmt_count");
            });
        })
        .join()
        .expect("restored");
    }
}

/// A server at `max_prepared_stmt_count` refuses the prepare (1461): the
/// statement runs as text with its values written in, and the client gets
/// its rows as binary rows, not an error.
#[tokio::test]
async fn a_server_at_max_prepared_stmt_count_runs_the_statement_as_text() {
    let _serial = serial().await;
    let proxy = proxy("backend-statements-max", 4);
    let mut conn = app(&proxy).await;
    let mut ops = operations(MASTER_A).await;
    conn.query_drop("INSERT /*+ SHARD(15) */ INTO pins (data) VALUES ('at the limit')")
        .await
        .unwrap();
    let id = conn.last_insert_id().unwrap();
    let statement = conn
        .prep("SELECT data, ? AS v FROM pins WHERE id = ?")
        .await
        .unwrap();
    let by_text = conn
        .prep("SELECT data, 'by text' FROM pins WHERE id = ?")
        .await
        .unwrap();
    // A write whose ID is bound as a string (its values written into the
    // text) stays prepared on the connection, the last statement prepared
    // there.
    conn.exec_drop(
        "UPDATE pins SET data = CONCAT(data, '+') WHERE id = ?",
        (id.to_string(),),
    )
    .await
    .unwrap();
    let old: Option<u64> = ops
        .query_first("SELECT @@GLOBAL.max_prepared_stmt_count")
        .await
        .unwrap();
    let _restore = RestoreMaxPrepared(old.expect("max_prepared_stmt_count"));
    let before = counters(&mut ops).await;
    ops.query_drop(format!(
        "SET GLOBAL max_prepared_stmt_count = {}",
        before[3]
    ))
    .await
    .unwrap();
    // Another text whose prepare is refused: the kept write does not run
    // again in its place.
    let row: Option<(String, String)> = conn.exec_first(&by_text, (id.to_string(),)).await.unwrap();
    assert_eq!(
        row,
        Some(("at the limit+".to_owned(), "by text".to_owned()))
    );
    for k in 0..3i64 {
        let row: Option<(String, i64)> = conn.exec_first(&statement, (k, id)).await.unwrap();
        assert_eq!(row, Some(("at the limit+".to_owned(), k)));
    }
    let [prepares, executes, _, kept] = delta(counters(&mut ops).await, before);
    assert_eq!(kept, 0, "nothing more prepared on master A");
    assert_eq!(
        executes, 0,
        "no prepared statement ran: {prepares} prepares"
    );
    drop(conn);
    drop(proxy);
}

/// `per_shard` pins (local ids `base`..) on each of shards 0..`shards` of
/// master A, written directly; each one's ID and data.
async fn seed_shards(ops: &mut Conn, shards: u32, base: u64, per_shard: u64) -> Vec<(u64, String)> {
    let mut rows = Vec::new();
    for shard in 0..shards {
        let db = format!("db{shard:05}");
        ops.query_drop(format!(
            "DELETE FROM {db}.pins WHERE local_id BETWEEN {base} AND {}",
            base + per_shard - 1
        ))
        .await
        .unwrap();
        let values: Vec<String> = (0..per_shard)
            .map(|k| format!("({}, 'shard {shard} row {k}')", base + k))
            .collect();
        ops.query_drop(format!(
            "INSERT INTO {db}.pins (local_id, data) VALUES {}",
            values.join(", ")
        ))
        .await
        .unwrap();
        let direct: Vec<(u64, String)> = ops
            .query(format!(
                "SELECT local_id, data FROM {db}.pins WHERE local_id BETWEEN {base} AND {} ORDER BY local_id",
                base + per_shard - 1
            ))
            .await
            .unwrap();
        assert_eq!(direct.len() as u64, per_shard, "{db}");
        rows.extend(
            direct
                .into_iter()
                .map(|(local_id, data)| (pin_id(shard, local_id), data)),
        );
    }
    rows
}

/// Removes what [`seed_shards`] wrote.
async fn unseed_shards(ops: &mut Conn, shards: u32, base: u64, per_shard: u64) {
    for shard in 0..shards {
        ops.query_drop(format!(
            "DELETE FROM db{shard:05}.pins WHERE local_id BETWEEN {base} AND {}",
            base + per_shard - 1
        ))
        .await
        .unwrap();
    }
}

/// Executes `statement` (`... WHERE id = ?`) for each pick of `rows`,
/// checking each answer.
async fn lookups(
    conn: &mut Conn,
    statement: &mysql_async::Statement,
    rows: &[(u64, String)],
    picks: impl IntoIterator<Item = usize>,
) {
    for pick in picks {
        let (id, data) = &rows[pick];
        let row: Option<String> = conn.exec_first(statement, (*id,)).await.unwrap();
        assert_eq!(row.as_ref(), Some(data), "id {id}");
    }
}

/// The same pseudo-random picks of `rows` every run, spread uniformly.
fn uniform_picks(rows: usize, count: usize) -> Vec<usize> {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % rows as u64) as usize
        })
        .collect()
}

/// 2,000 prepared point lookups spread uniformly over 64 shard databases
/// of master A, on one backend connection with the default bound: after
/// a warm-up every shard's statement stays prepared (fewer than 0.05
/// prepares per execute; with 16 kept, three executes in four prepared),
/// and every row is the shard's.
#[tokio::test]
async fn lookups_over_64_shards_stay_prepared_with_the_default_bound() {
    let _serial = serial().await;
    let proxy = proxy_keeping("backend-statements-64", None);
    let mut conn = app(&proxy).await;
    let mut ops = operations(MASTER_A).await;
    let base: u64 = 3 << 33;
    let rows = seed_shards(&mut ops, 64, base, 4).await;
    let statement = conn
        .prep("SELECT data FROM pins WHERE id = ?")
        .await
        .unwrap();
    lookups(&mut conn, &statement, &rows, 0..rows.len()).await;
    let before = counters(&mut ops).await;
    lookups(
        &mut conn,
        &statement,
        &rows,
        uniform_picks(rows.len(), 2000),
    )
    .await;
    let [prepares, executes, _, kept] = delta(counters(&mut ops).await, before);
    assert_eq!(executes, 2000, "each lookup a prepared statement executed");
    assert!(
        prepares * 20 < executes,
        "{prepares} prepares on master A for {executes} executes over 64 shards"
    );
    assert!(kept <= 0, "{kept} more statements open on master A");
    unseed_shards(&mut ops, 64, base, 4).await;
    drop(conn);
    drop(proxy);
}

/// The same lookups with 16 statements kept per connection, fewer than
/// the 64 shards: the kept set stays put (no least-recently-used churn,
/// which prepared on three executes in four) and a statement not kept
/// runs in one round trip: as text when its columns read back exact, so
/// the prepares per execute stay far below 1. A statement with a FLOAT
/// column runs prepared, executed and closed at once instead, and its
/// value is the server's four bytes (as text, 16777215 reads 16777200).
#[tokio::test]
async fn more_shards_than_kept_statements_do_not_churn_and_answer_right() {
    let _serial = serial().await;
    let proxy = proxy("backend-statements-churn", 16);
    let mut conn = app(&proxy).await;
    let mut ops = operations(MASTER_A).await;
    let base: u64 = 5 << 33;
    let rows = seed_shards(&mut ops, 64, base, 4).await;
    let statement = conn
        .prep("SELECT data FROM pins WHERE id = ?")
        .await
        .unwrap();
    let picks = uniform_picks(rows.len(), 2500);
    let warm_up = (0..rows.len()).chain(picks[..500].iter().copied());
    lookups(&mut conn, &statement, &rows, warm_up).await;
    let before = counters(&mut ops).await;
    lookups(&mut conn, &statement, &rows, picks[500..].iter().copied()).await;
    let [prepares, executes, _, kept] = delta(counters(&mut ops).await, before);
    assert!(
        prepares * 5 < 2000,
        "{prepares} prepares on master A for 2,000 lookups over 64 shards, 16 kept"
    );
    assert!(
        executes >= 2000 / 5,
        "the kept statements still run: {executes}"
    );
    assert!(kept <= 0, "{kept} more statements open on master A");

    let float = conn
        .prep("SELECT data, CAST(16777215 AS FLOAT) AS f FROM pins WHERE id = ?")
        .await
        .unwrap();
    let before = counters(&mut ops).await;
    for pick in uniform_picks(rows.len(), 600) {
        let (id, data) = &rows[pick];
        let row: Option<(String, f32)> = conn.exec_first(&float, (*id,)).await.unwrap();
        assert_eq!(row, Some((data.clone(), 16_777_215.0)), "id {id}");
    }
    let [_, executes, _, kept] = delta(counters(&mut ops).await, before);
    assert_eq!(
        executes, 600,
        "every FLOAT lookup executed as a prepared statement"
    );
    assert!(
        kept <= 16,
        "{kept} more statements open: those run once are closed"
    );
    unseed_shards(&mut ops, 64, base, 4).await;
    drop(conn);
    drop(proxy);
}

/// A server past three quarters of its `max_prepared_stmt_count` (read by
/// the health checker) gets no new statement kept on it: lookups over 64
/// shards leave nothing more open there, and every row is right.
#[tokio::test]
async fn a_server_near_max_prepared_stmt_count_gets_no_new_kept_statements() {
    let _serial = serial().await;
    let mut ops = operations(MASTER_A).await;
    let base: u64 = 7 << 33;
    let rows = seed_shards(&mut ops, 64, base, 2).await;
    // Twelve statements held open by another client.
    let mut other = direct(MASTER_A).await;
    let mut held = Vec::new();
    for k in 0..12 {
        held.push(other.prep(format!("SELECT {k}")).await.unwrap());
    }
    let old: Option<u64> = ops
        .query_first("SELECT @@GLOBAL.max_prepared_stmt_count")
        .await
        .unwrap();
    let _restore = RestoreMaxPrepared(old.expect("max_prepared_stmt_count"));
    let open = counters(&mut ops).await[3];
    // Three more fit: the server is past three quarters of its maximum.
    ops.query_drop(format!("SET GLOBAL max_prepared_stmt_count = {}", open + 3))
        .await
        .unwrap();
    let proxy = proxy_keeping("backend-statements-near-max", None);
    // The health checker reads the server's counts once a second.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let mut conn = app(&proxy).await;
    let statement = conn
        .prep("SELECT data FROM pins WHERE id = ?")
        .await
        .unwrap();
    let before = counters(&mut ops).await;
    let picks = (0..rows.len()).chain(uniform_picks(rows.len(), 200));
    lookups(&mut conn, &statement, &rows, picks).await;
    let [prepares, _, _, kept] = delta(counters(&mut ops).await, before);
    assert_eq!(
        kept, 0,
        "no statement kept open on master A: {prepares} prepares"
    );
    drop(held);
    drop(other);
    drop(conn);
    drop(proxy);
    unseed_shards(&mut ops, 64, base, 2).await;
}

/// A server past three quarters of its `max_prepared_stmt_count` gets the
/// statements the proxy keeps there closed, one per prepared execute, so
/// that proxies cannot hold it at its maximum, where clients' own prepares
/// are refused (decision 0039); the lookups go on, answered right.
#[tokio::test]
async fn a_server_past_three_quarters_gets_the_kept_statements_closed() {
    let _serial = serial().await;
    let mut ops = operations(MASTER_A).await;
    let base: u64 = 6 << 33;
    let rows = seed_shards(&mut ops, 16, base, 2).await;
    let proxy = proxy_keeping("backend-statements-shed", None);
    let mut conn = app(&proxy).await;
    let statement = conn
        .prep("SELECT data FROM pins WHERE id = ?")
        .await
        .unwrap();
    let open_before = counters(&mut ops).await[3];
    lookups(&mut conn, &statement, &rows, 0..rows.len()).await;
    let kept = counters(&mut ops).await[3].saturating_sub(open_before);
    assert!(
        kept >= 8,
        "the proxy keeps the shards' statements: {kept} open"
    );
    let old: Option<u64> = ops
        .query_first("SELECT @@GLOBAL.max_prepared_stmt_count")
        .await
        .unwrap();
    let _restore = RestoreMaxPrepared(old.expect("max_prepared_stmt_count"));
    // No room even once the proxy's statements are closed.
    ops.query_drop("SET GLOBAL max_prepared_stmt_count = 0")
        .await
        .unwrap();
    // The health checker reads the server's counts once a second.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let picks = (0..rows.len()).chain(uniform_picks(rows.len(), 64));
    lookups(&mut conn, &statement, &rows, picks).await;
    let open_after = counters(&mut ops).await[3];
    assert!(
        open_after <= open_before,
        "the proxy's {kept} kept statements are closed: {open_after} open after, {open_before} before they were kept"
    );
    drop(conn);
    drop(proxy);
    unseed_shards(&mut ops, 16, base, 2).await;
}

/// A miss whose columns need binary rows (a FLOAT) goes as a prepare, an
/// execute of the last prepared statement and its close in one write. When
/// the server refuses that prepare (at `max_prepared_stmt_count`) right
/// after a kept write with a parameter was prepared, the execute does not
/// run the write again (MariaDB refuses it without its parameters), the
/// statement runs as text, and the write, closed by that close, is
/// prepared again (here: refused, so it runs as text) and runs once.
#[tokio::test]
async fn a_refused_one_write_miss_does_not_run_the_kept_write_again() {
    let _serial = serial().await;
    let proxy = proxy("backend-statements-refused-once", 4);
    let mut conn = app(&proxy).await;
    let mut ops = operations(MASTER_A).await;
    conn.query_drop("INSERT /*+ SHARD(16) */ INTO pins (data) VALUES ('once')")
        .await
        .unwrap();
    let id = conn.last_insert_id().unwrap();
    let float = conn
        .prep("SELECT data, CAST(16777215 AS FLOAT) AS f FROM pins WHERE id = ?")
        .await
        .unwrap();
    let append = conn
        .prep("UPDATE pins SET data = CONCAT(data, '+') WHERE id = ?")
        .await
        .unwrap();
    // Kept, with the ID's local part as its parameter: the last statement
    // prepared on the connection.
    conn.exec_drop(&append, (id,)).await.unwrap();
    let old: Option<u64> = ops
        .query_first("SELECT @@GLOBAL.max_prepared_stmt_count")
        .await
        .unwrap();
    let _restore = RestoreMaxPrepared(old.expect("max_prepared_stmt_count"));
    let open = counters(&mut ops).await[3];
    ops.query_drop(format!("SET GLOBAL max_prepared_stmt_count = {open}"))
        .await
        .unwrap();
    // The health checker sees no room: the FLOAT statement is not kept.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let row: Option<(String, f32)> = conn.exec_first(&float, (id,)).await.unwrap();
    assert_eq!(row.map(|(data, _)| data), Some("once+".to_owned()));
    assert_eq!(
        pin_on_host(id).await.as_deref(),
        Some("once+"),
        "the write ran once"
    );
    conn.exec_drop(&append, (id,)).await.unwrap();
    assert_eq!(
        pin_on_host(id).await.as_deref(),
        Some("once++"),
        "and once more when asked"
    );
    drop(conn);
    drop(proxy);
}
