//! A backend `local_id` above 36 bits is never OR-ed into a composed ID:
//! every read that would return (or compare) the ID of
//! such a row, and an INSERT whose AUTO_INCREMENT went past 2^36, gets a
//! 1105 naming the table, the shard and the value, instead of the ID of
//! another row.
//!
//! The test owns `users` of shard 3777 (on 3308, no replica): it puts a row
//! with `local_id = 2^36 + 5` there straight on the host as the operations
//! account, and removes it (and resets the AUTO_INCREMENT) however it ends.

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

const SHARD: u32 = 3777;
const DATABASE: &str = "db03777";
const USERS_TYPE: u16 = 3;
/// The first `local_id` an ID cannot carry, plus 5.
const BIG: u64 = (1 << 36) + 5;

/// Removes the test's rows (tagged `.0`) on shard database `.1` and
/// brings the AUTO_INCREMENT back (to one past the largest remaining
/// `local_id`), when dropped.
struct Cleanup(String, &'static str);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let database = self.1;
        let sql = format!(
            "DELETE FROM {database}.users WHERE data LIKE '{}%' OR local_id > 68719476735; \
             ALTER TABLE {database}.users AUTO_INCREMENT = 1",
            self.0
        );
        let output = std::process::Command::new("mariadb")
            .args(["-h127.0.0.1", "-P", &MASTER_B.to_string(), "-u", OPS_USER])
            .arg(format!("-p{OPS_PASSWORD}"))
            .args(["-e", &sql])
            .output()
            .expect("run the mariadb CLI");
        assert!(
            output.status.success(),
            "cleaning {database} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Asserts that `result` is the 1105 refusal naming table, shard and value.
fn assert_refused<T: std::fmt::Debug>(
    what: &str,
    result: mysql_async::Result<T>,
    table: &str,
    value: u64,
) {
    let error = result.expect_err(what);
    let (code, message) = server_error(error);
    assert_eq!(code, 1105, "{what}: {message}");
    for part in [
        "shardgate: ".to_owned(),
        format!("table {table}"),
        format!("on shard {SHARD}"),
        format!("local_id {value}"),
    ] {
        assert!(message.contains(&part), "{what}: {part:?} not in {message}");
    }
}

async fn auto_increment(ops: &mut Conn) -> u64 {
    ops.query_first(format!(
        "SELECT AUTO_INCREMENT FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = '{DATABASE}' AND TABLE_NAME = 'users'"
    ))
    .await
    .unwrap()
    .flatten()
    .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_ids_above_36_bits_are_refused_never_composed() {
    let tag = format!("local-id-range-{}", std::process::id());
    drop(Cleanup(tag.clone(), DATABASE));
    let _cleanup = Cleanup(tag.clone(), DATABASE);
    let mut conn = client().await;

    // An ordinary row first: its ID reads back fine, by every form.
    conn.query_drop(format!(
        "INSERT /*+ SHARD({SHARD}) */ INTO users (data) VALUES ('{tag}-a')"
    ))
    .await
    .unwrap();
    let small = conn.last_insert_id().unwrap();
    let small_local = decode(small).local_id;
    assert_eq!(
        small,
        user_id(SHARD, small_local),
        "an ordinary insert is composed"
    );

    // A multi-row INSERT whose last row passes 2^36 (a client may derive
    // the other rows' IDs by adding 1 to the first): refused, naming the
    // first local_id an ID cannot carry.
    let mut ops = operations(MASTER_B).await;
    ops.query_drop(format!(
        "ALTER TABLE {DATABASE}.users AUTO_INCREMENT = {}",
        (1u64 << 36) - 2
    ))
    .await
    .unwrap();
    assert_refused(
        "multi-row insert past 2^36",
        conn.query_drop(format!(
            "INSERT /*+ SHARD({SHARD}) */ INTO users (data) \
             VALUES ('{tag}-m1'), ('{tag}-m2'), ('{tag}-m3')"
        ))
        .await,
        "users",
        1 << 36,
    );
    ops.query_drop(format!(
        "DELETE FROM {DATABASE}.users WHERE data LIKE '{tag}-m%'"
    ))
    .await
    .unwrap();

    // The row an ID cannot carry, written straight on the host.
    ops.query_drop(format!(
        "INSERT INTO {DATABASE}.users (local_id, data) VALUES ({BIG}, '{tag}-big')"
    ))
    .await
    .unwrap();
    assert!(auto_increment(&mut ops).await > BIG);

    let table = format!("{DATABASE}.users");
    // A scatter read (the multi-shard merge path).
    let scatter =
        format!("SELECT id, data FROM users /*+ SCATTER */ WHERE data LIKE '{tag}%' ORDER BY data");
    assert_refused(
        "scatter",
        conn.query::<(u64, String), _>(&scatter).await,
        &table,
        BIG,
    );
    // USE the shard, text protocol: the in-range row comes first, then the
    // error replaces the rest of the result.
    conn.query_drop(format!("USE {DATABASE}")).await.unwrap();
    let ordered = format!("SELECT id, data FROM users WHERE data LIKE '{tag}%' ORDER BY local_id");
    assert_refused(
        "USE, text",
        conn.query::<(u64, String), _>(&ordered).await,
        &table,
        BIG,
    );
    // The same as a prepared statement (binary rows).
    let prepared = "SELECT id, data FROM users WHERE data LIKE ? ORDER BY local_id";
    assert_refused(
        "USE, prepared",
        conn.exec::<(u64, String), _, _>(prepared, (format!("{tag}%"),))
            .await,
        &table,
        BIG,
    );
    // `id` used outside the select list is refused too (no comparison
    // against a wrong ID).
    assert_refused(
        "id in WHERE",
        conn.query::<String, _>(format!(
            "SELECT data FROM users WHERE data LIKE '{tag}%' AND id > 0"
        ))
        .await,
        &table,
        BIG,
    );
    // Reads that do not reach the row are unaffected: by id, by id IN
    // across shards, and a scatter of in-range rows only (a session
    // without USE).
    let mut conn = client().await;
    let by_id: Option<String> = conn
        .query_first(format!("SELECT data FROM users WHERE id = {small}"))
        .await
        .unwrap();
    assert_eq!(by_id, Some(format!("{tag}-a")));
    let other = user_id(12, 1);
    let ids: Vec<u64> = conn
        .query(format!(
            "SELECT id FROM users WHERE id IN ({small}, {other}) ORDER BY id"
        ))
        .await
        .unwrap();
    assert!(ids.contains(&small), "{ids:?}");
    let listed: Vec<u64> = conn
        .query(format!(
            "SELECT id FROM users /*+ SCATTER */ WHERE data = '{tag}-a'"
        ))
        .await
        .unwrap();
    assert_eq!(listed, [small]);

    // An INSERT whose AUTO_INCREMENT is past 2^36: refused, no ID given.
    assert_refused(
        "insert past 2^36",
        conn.query_drop(format!(
            "INSERT /*+ SHARD({SHARD}) */ INTO users (data) VALUES ('{tag}-next')"
        ))
        .await,
        "users",
        BIG + 1,
    );
    let last: Option<u64> = conn.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(
        last,
        Some(0),
        "the refused insert recorded no ID in the session"
    );
    let written: Option<u64> = ops
        .query_first(format!(
            "SELECT local_id FROM {DATABASE}.users WHERE data = '{tag}-next'"
        ))
        .await
        .unwrap();
    assert_eq!(
        written,
        Some(BIG + 1),
        "the message says the row was written"
    );
    // The session is still usable.
    let one: Option<u8> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    conn.disconnect().await.ok();
    ops.disconnect().await.ok();
}

/// The ID of user `local_id` on `shard`.
fn user_id(shard: u32, local_id: u64) -> u64 {
    shardgate::id::ObjectId {
        shard,
        type_id: USERS_TYPE,
        local_id,
    }
    .encode()
    .expect("a valid id")
}

/// F21: an explicit `local_id` (or `AUTO_INCREMENT =`) beyond the 36 bits
/// of an ID's local part is refused before it reaches the server: written,
/// it would make InnoDB hand every later INSERT on the shard a local_id no
/// ID can carry. Shard 3778 (host B), its own `users` table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_local_ids_beyond_36_bits_never_reach_the_server() {
    const POISON_SHARD: u32 = 3778;
    const POISON_DATABASE: &str = "db03778";
    let tag = format!("local-id-poison-{}", std::process::id());
    drop(Cleanup(tag.clone(), POISON_DATABASE));
    let _cleanup = Cleanup(tag.clone(), POISON_DATABASE);
    let mut conn = client().await;
    let mut ops = operations(MASTER_B).await;
    conn.query_drop(format!(
        "INSERT /*+ SHARD({POISON_SHARD}) */ INTO users (data) VALUES ('{tag}-a')"
    ))
    .await
    .unwrap();
    let small = conn.last_insert_id().unwrap();
    let big = 1u64 << 36;
    for statement in [
        format!("INSERT /*+ SHARD({POISON_SHARD}) */ INTO users (local_id, data) VALUES ({big}, '{tag}-poison')"),
        format!("INSERT INTO {POISON_DATABASE}.users (local_id, data) VALUES ({big}, '{tag}-poison')"),
        format!("REPLACE INTO {POISON_DATABASE}.users SET local_id = '{big}', data = '{tag}-poison'"),
        format!("UPDATE users SET local_id = {big} WHERE id = {small}"),
    ] {
        let error = conn.query_drop(&statement).await.expect_err(&statement);
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{statement}: {message}");
        assert!(message.contains("local_id"), "{statement}: {message}");
    }
    let error = conn
        .query_drop(format!(
            "ALTER TABLE {POISON_DATABASE}.users AUTO_INCREMENT = {big}"
        ))
        .await
        .expect_err("AUTO_INCREMENT beyond 36 bits");
    let (code, message) = server_error(error);
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("AUTO_INCREMENT"), "{message}");
    // On the server: nothing beyond 36 bits, the counter below 2^36.
    let beyond: Option<u64> = ops
        .query_first(format!(
            "SELECT COUNT(*) FROM {POISON_DATABASE}.users WHERE local_id > 68719476735 OR data = '{tag}-poison'"
        ))
        .await
        .unwrap();
    assert_eq!(beyond, Some(0), "a local_id beyond 36 bits was written");
    let counter: Option<u64> = ops
        .query_first(format!(
            "SELECT AUTO_INCREMENT FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = '{POISON_DATABASE}' AND TABLE_NAME = 'users'"
        ))
        .await
        .unwrap();
    assert!(
        counter.is_some_and(|n| n < big),
        "the AUTO_INCREMENT passed 2^36: {counter:?}"
    );
    // The shard still places rows with IDs.
    conn.query_drop(format!(
        "INSERT /*+ SHARD({POISON_SHARD}) */ INTO users (data) VALUES ('{tag}-b')"
    ))
    .await
    .expect("an ordinary insert after the refusals");
    let next = decode(conn.last_insert_id().unwrap());
    assert_eq!(next.shard, POISON_SHARD);
    assert!(next.local_id < big);
    conn.disconnect().await.ok();
    ops.disconnect().await.ok();
}
