//! Multi-shard reads executed as prepared statements: each part runs on its
//! server as a prepared statement and the merge keeps the servers' binary
//! values, so the client gets, value for value and bit for bit, what each
//! server gives a binary-protocol client for its rows (a FLOAT rebuilt from
//! text would keep 6 significant digits).

use super::*;

/// The select list of these tests: values of many types computed from the
/// pin's number `n` (the part of `data` after the tag).
const VALUES: &str = "data, \
     CAST(16777215 - CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED) AS FLOAT) AS f, \
     CAST(123456789 * CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED) AS FLOAT) AS f2, \
     CAST(SUBSTRING_INDEX(data, ':', -1) / 7 AS DOUBLE) AS d, \
     CAST(SUBSTRING_INDEX(data, ':', -1) / 7 AS DECIMAL(30,20)) AS de, \
     CAST('2024-02-29 23:59:58.123456' AS DATETIME(6)) - INTERVAL CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED) * 1000001 MICROSECOND AS dt, \
     CAST(SEC_TO_TIME(CAST(SUBSTRING_INDEX(data, ':', -1) AS SIGNED) * -3601.5 + 7200) AS TIME(1)) AS t, \
     CAST(18446744073709551615 - CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED) AS UNSIGNED) AS u, \
     IF(CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED) % 2 = 0, NULL, CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED)) AS maybe, \
     CAST(UNHEX(REPEAT('00FF', CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED))) AS BINARY) AS bl, \
     NULL AS nothing";

/// Shards on both masters, one pin each (`{tag}:1` .. `{tag}:6`); their IDs.
async fn seed(conn: &mut Conn, tag: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    for (n, shard) in [12u32, 700, 2047, 2048, 3001, 4095].into_iter().enumerate() {
        ids.push(insert_pin(conn, shard, &format!("{tag}:{}", n + 1)).await);
    }
    ids
}

/// The rows of [`VALUES`] for `ids`, each read straight from its master
/// with the binary protocol (a prepared statement of its own).
async fn direct_rows(ids: &[u64]) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for &id in ids {
        let fields = decode(id);
        let mut host = direct(main_master_port(fields.shard)).await;
        let row: Option<Row> = host
            .exec_first(
                format!(
                    "SELECT {VALUES} FROM db{:05}.pins WHERE local_id = ?",
                    fields.shard
                ),
                (fields.local_id,),
            )
            .await
            .unwrap();
        rows.push(row.expect("the pin on its master").unwrap());
        host.disconnect().await.ok();
    }
    rows
}

/// The rows a prepared statement gives through the proxy.
async fn proxy_rows(conn: &mut Conn, sql: &str, ids: &[u64]) -> Vec<Vec<Value>> {
    let bound: Vec<Value> = ids.iter().map(|id| Value::UInt(*id)).collect();
    let rows: Vec<Row> = conn
        .exec(sql, Params::Positional(bound))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    rows.into_iter().map(Row::unwrap).collect()
}

fn in_list(ids: &[u64]) -> String {
    vec!["?"; ids.len()].join(", ")
}

/// Positions of [`VALUES`]' columns.
const F: usize = 1;
const F2: usize = 2;
const DT: usize = 5;
const T: usize = 6;

/// F15 for multi-shard reads: FLOAT, DOUBLE, DECIMAL, DATETIME(6), TIME,
/// BIGINT UNSIGNED, NULL and binary strings of an IN list split over both
/// masters are the servers' own binary values.
#[tokio::test]
async fn multi_shard_prepared_values_are_the_servers_binary_values() {
    let tag = unique_tag();
    let mut conn = client().await;
    let ids = seed(&mut conn, &tag).await;
    let expected = direct_rows(&ids).await;
    let sql = format!("SELECT {VALUES} FROM pins WHERE id IN ({})", in_list(&ids));
    let mut got = proxy_rows(&mut conn, &sql, &ids).await;
    got.sort_by_key(|row| format!("{:?}", row[0]));
    assert_eq!(got.len(), expected.len());
    for (proxy, server) in got.iter().zip(&expected) {
        assert_eq!(proxy, server, "proxy vs server for {:?}", server[0]);
    }
    let f = F;
    for (proxy, server) in got.iter().zip(&expected) {
        match (&proxy[f], &server[f]) {
            (Value::Float(p), Value::Float(s)) => assert_eq!(p.to_bits(), s.to_bits()),
            other => panic!("FLOAT column as {other:?}"),
        }
    }
}

/// ORDER BY over FLOAT, TIME (negative values) and DATETIME(6), LIMIT and
/// OFFSET, and MIN/MAX/COUNT/SUM over the parts' binary values answer what
/// one server holding all the rows would.
#[tokio::test]
async fn multi_shard_prepared_order_limit_and_aggregates_over_binary_values() {
    let tag = unique_tag();
    let mut conn = client().await;
    let ids = seed(&mut conn, &tag).await;
    let expected = direct_rows(&ids).await;
    let list = in_list(&ids);
    let as_f32 = |v: &Value| match v {
        Value::Float(f) => *f,
        other => panic!("FLOAT column as {other:?}"),
    };
    let as_micros = |v: &Value| match v {
        Value::Time(negative, days, h, m, s, us) => {
            let magnitude =
                ((i64::from(*days) * 24 + i64::from(*h)) * 60 + i64::from(*m)) * 60 * 1_000_000
                    + i64::from(*s) * 1_000_000
                    + i64::from(*us);
            if *negative {
                -magnitude
            } else {
                magnitude
            }
        }
        other => panic!("TIME column as {other:?}"),
    };
    let as_datetime = |v: &Value| match v {
        Value::Date(y, mo, d, h, mi, s, us) => (*y, *mo, *d, *h, *mi, *s, *us),
        other => panic!("DATETIME column as {other:?}"),
    };
    let (f, t, dt) = (F2, T, DT);

    let sql =
        format!("SELECT {VALUES} FROM pins WHERE id IN ({list}) ORDER BY f2 DESC LIMIT 3 OFFSET 1");
    let mut want = expected.clone();
    want.sort_by(|a, b| as_f32(&b[f]).total_cmp(&as_f32(&a[f])));
    assert_eq!(
        proxy_rows(&mut conn, &sql, &ids).await,
        want[1..4].to_vec(),
        "{sql}"
    );

    let sql = format!("SELECT {VALUES} FROM pins WHERE id IN ({list}) ORDER BY t LIMIT 4");
    let mut want = expected.clone();
    want.sort_by_key(|row| as_micros(&row[t]));
    assert!(as_micros(&want[0][t]) < 0 && as_micros(&want[5][t]) > 0);
    assert_eq!(
        proxy_rows(&mut conn, &sql, &ids).await,
        want[..4].to_vec(),
        "{sql}"
    );

    let sql = format!("SELECT {VALUES} FROM pins WHERE id IN ({list}) ORDER BY dt DESC, u");
    let mut want = expected.clone();
    want.sort_by_key(|row| std::cmp::Reverse(as_datetime(&row[dt])));
    assert_eq!(proxy_rows(&mut conn, &sql, &ids).await, want, "{sql}");

    let sql = format!(
        "SELECT COUNT(*), MIN(CAST(123456789 * CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED) AS FLOAT)), \
         MAX(CAST(SEC_TO_TIME(CAST(SUBSTRING_INDEX(data, ':', -1) AS SIGNED) * -3601.5 + 7200) AS TIME(1))), \
         MIN(CAST(SEC_TO_TIME(CAST(SUBSTRING_INDEX(data, ':', -1) AS SIGNED) * -3601.5 + 7200) AS TIME(1))), \
         SUM(CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED)) FROM pins WHERE id IN ({list})"
    );
    let got = proxy_rows(&mut conn, &sql, &ids).await;
    let min_f = expected
        .iter()
        .map(|row| as_f32(&row[f]))
        .fold(f32::MAX, f32::min);
    let max_t = expected
        .iter()
        .map(|row| &row[t])
        .max_by_key(|v| as_micros(v))
        .unwrap();
    let min_t = expected
        .iter()
        .map(|row| &row[t])
        .min_by_key(|v| as_micros(v))
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0][0], Value::Int(6), "{sql}");
    // MIN of a FLOAT expression is a DOUBLE holding the FLOAT's value.
    assert_eq!(got[0][1], Value::Double(f64::from(min_f)), "{sql}");
    assert_eq!((&got[0][2], &got[0][3]), (max_t, min_t), "{sql}");
    assert_eq!(got[0][4], Value::Bytes(b"21".to_vec()), "{sql}");
}

/// Groups that span shards, merged from binary values: COUNT and SUM
/// added, MIN/MAX of FLOAT and TIME by value, ordered by the group key.
#[tokio::test]
async fn multi_shard_prepared_group_by_merges_binary_aggregates() {
    let tag = unique_tag();
    let mut conn = client().await;
    let ids = seed(&mut conn, &tag).await;
    let expected = direct_rows(&ids).await;
    let n = "CAST(SUBSTRING_INDEX(data, ':', -1) AS UNSIGNED)";
    let sql = format!(
        "SELECT {n} % 2 AS parity, COUNT(*), SUM({n}), MAX(CAST(123456789 * {n} AS FLOAT)), \
         MIN(CAST(SEC_TO_TIME(CAST(SUBSTRING_INDEX(data, ':', -1) AS SIGNED) * -3601.5 + 7200) AS TIME(1))) \
         FROM pins WHERE id IN ({}) GROUP BY parity ORDER BY parity DESC",
        in_list(&ids)
    );
    let got = proxy_rows(&mut conn, &sql, &ids).await;
    assert_eq!(got.len(), 2, "{sql}");
    for (row, parity) in got.iter().zip([1u64, 0]) {
        let members: Vec<&Vec<Value>> = expected
            .iter()
            .enumerate()
            .filter(|(i, _)| (*i as u64 + 1) % 2 == parity)
            .map(|(_, row)| row)
            .collect();
        let sum: u64 = (1..=6u64).filter(|k| k % 2 == parity).sum();
        let max_f = members
            .iter()
            .map(|r| match &r[F2] {
                Value::Float(f) => *f,
                other => panic!("{other:?}"),
            })
            .fold(f32::MIN, f32::max);
        let min_t = members
            .iter()
            .map(|r| r[T].clone())
            .min_by_key(|v| match v {
                Value::Time(neg, d, h, m, s, us) => {
                    let x = ((i64::from(*d) * 24 + i64::from(*h)) * 3600
                        + i64::from(*m) * 60
                        + i64::from(*s))
                        * 1_000_000
                        + i64::from(*us);
                    if *neg {
                        -x
                    } else {
                        x
                    }
                }
                other => panic!("{other:?}"),
            })
            .unwrap();
        assert_eq!(row[0], Value::Int(parity as i64), "{sql}");
        assert_eq!(row[1], Value::Int(3), "{sql}");
        assert_eq!(row[2], Value::Bytes(sum.to_string().into_bytes()), "{sql}");
        assert_eq!(row[3], Value::Double(f64::from(max_f)), "{sql}");
        assert_eq!(row[4], min_t, "{sql}");
    }
}

/// The text protocol's multi-shard merge orders TIME by value too: the
/// text of negative times (`-04:00:09.0` < `-00:00:03.0`) and of times past
/// 99 hours does not order by its bytes.
#[tokio::test]
async fn multi_shard_text_reads_order_time_by_its_value() {
    let tag = unique_tag();
    let mut conn = client().await;
    let ids = seed(&mut conn, &tag).await;
    let literal_ids = ids
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let time = |k: &str| format!("CAST(SEC_TO_TIME({k} * -3601.5 + 7200) AS TIME(1))");
    let k = "CAST(SUBSTRING_INDEX(data, ':', -1) AS SIGNED)";
    // The server's own order and extremes of the same six values.
    let mut direct = common::direct(3307).await;
    let expected: Vec<String> = direct
        .query(format!(
            "SELECT {} AS t FROM db00012.seq_1_to_6 ORDER BY t",
            time("seq")
        ))
        .await
        .expect("direct ORDER BY");
    let expected_extremes: Vec<(String, String)> = direct
        .query(format!(
            "SELECT MIN({0}), MAX({0}) FROM db00012.seq_1_to_6",
            time("seq")
        ))
        .await
        .expect("direct MIN/MAX");
    assert!(expected[0].starts_with('-'), "{expected:?}");

    let sql = format!(
        "SELECT {} AS t FROM pins WHERE id IN ({}) ORDER BY t",
        time(k),
        literal_ids
    );
    let got: Vec<String> = conn.query(&sql).await.expect("ORDER BY through the proxy");
    assert_eq!(got, expected, "{sql}");
    let sql = format!(
        "SELECT MIN({0}), MAX({0}) FROM pins WHERE id IN ({1})",
        time(k),
        literal_ids
    );
    let got: Vec<(String, String)> = conn.query(&sql).await.expect("MIN/MAX through the proxy");
    assert_eq!(got, expected_extremes, "{sql}");
}
