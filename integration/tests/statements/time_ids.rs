//! Time-sortable IDs (fleet `photos`, Instagram's layout): the server
//! mints `id` at INSERT from `NOW(3)`, the shard and the shard database's
//! sequence; the client's insert id is that `id`, reads route by its shard
//! field, a time range of IDs needs SCATTER or a shard, and a reload that
//! changes the layout is refused unless forced.
//!
//! Rows are tagged with the test's name and process id and deleted at the
//! end; the fleet's databases `dbp0000..dbp0015` live on 3310.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use shardgate::id::{FieldName, IdLayout};

/// The photos fleet's master.
const PHOTOS_HOST: u16 = 3310;

fn layout() -> IdLayout {
    let topology = topology();
    let fleet = topology.fleet_by_name("photos").expect("fleet photos");
    topology.fleets[fleet].layout.clone()
}

fn field(layout: &IdLayout, id: u64, name: FieldName) -> u64 {
    layout
        .decode(id)
        .expect("a minted id fits the layout")
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .expect("field present")
}

async fn cleanup(tag: &str) {
    let mut server = operations(PHOTOS_HOST).await;
    for shard in 0..16 {
        server
            .query_drop(format!(
                "DELETE FROM dbp{shard:04}.photos WHERE data LIKE '{tag}%'"
            ))
            .await
            .expect("clean up");
    }
    server.disconnect().await.ok();
}

/// An INSERT returns the minted id as its insert id and as
/// `LAST_INSERT_ID()`; the id's shard field names the database the row is
/// in on 3310, its time field is now, and a point read by it finds the row.
#[tokio::test]
async fn minted_ids_are_time_sortable_and_route_back_to_their_rows() {
    let layout = layout();
    let tag = format!("time-ids-route-{}", std::process::id());
    let mut conn = client().await;
    let mut ids = Vec::new();
    for i in 0..20u32 {
        let hint = if i % 2 == 0 {
            format!("/*+ SHARD({}) */ ", i % 16)
        } else {
            String::new()
        };
        conn.query_drop(format!(
            "INSERT {hint}INTO photos (data) VALUES ('{tag}-{i}')"
        ))
        .await
        .unwrap_or_else(|e| panic!("insert {i}: {e}"));
        let id = conn.last_insert_id().expect("an insert id");
        let last: Option<u64> = conn.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
        assert_eq!(last, Some(id), "LAST_INSERT_ID() of insert {i}");
        ids.push(id);
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut server = direct(PHOTOS_HOST).await;
    for (i, &id) in ids.iter().enumerate() {
        let shard = field(&layout, id, FieldName::Shard);
        if i % 2 == 0 {
            assert_eq!(shard, i as u64 % 16, "insert {i} had SHARD({})", i % 16);
        }
        let minted_at = layout.epoch_ms + field(&layout, id, FieldName::TimeMs);
        assert!(
            minted_at <= now_ms + 5 && minted_at + 60_000 >= now_ms,
            "id {id} of insert {i}: time {minted_at} is not near now {now_ms}"
        );
        let data = format!("{tag}-{i}");
        let on_host: Option<String> = server
            .query_first(format!(
                "SELECT data FROM dbp{shard:04}.photos WHERE id = {id}"
            ))
            .await
            .expect("direct read");
        assert_eq!(
            on_host.as_deref(),
            Some(data.as_str()),
            "row of id {id} in dbp{shard:04}"
        );
        let through: Option<String> = conn
            .query_first(format!("SELECT data FROM photos WHERE id = {id}"))
            .await
            .expect("read by id");
        assert_eq!(
            through.as_deref(),
            Some(data.as_str()),
            "point read of id {id}"
        );
    }
    server.disconnect().await.ok();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]) || {
            // Across shards only the time field orders; within one second
            // every later insert has a later or equal time field.
            ids.windows(2).all(|w| {
                field(&layout, w[0], FieldName::TimeMs) <= field(&layout, w[1], FieldName::TimeMs)
            })
        },
        "ids do not sort by time: {ids:?}"
    );
    // An IN list over several shards splits and finds every row.
    let list = ids
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let rows: Vec<String> = conn
        .query(format!("SELECT data FROM photos WHERE id IN ({list})"))
        .await
        .expect("IN read");
    assert_eq!(rows.len(), ids.len());
    // A prepared point read routes by the shard field too.
    let data: Option<String> = conn
        .exec_first("SELECT data FROM photos WHERE id = ?", (ids[3],))
        .await
        .expect("prepared read");
    assert_eq!(data, Some(format!("{tag}-3")));
    // A prepared INSERT mints its id too; the insert id finds the row.
    conn.exec_drop(
        "INSERT INTO photos (data) VALUES (?)",
        (format!("{tag}-p"),),
    )
    .await
    .expect("prepared insert");
    let prepared = conn.last_insert_id().expect("an insert id");
    assert!(prepared > ids[0], "{prepared} after {ids:?}");
    let shard = field(&layout, prepared, FieldName::Shard);
    let mut server = direct(PHOTOS_HOST).await;
    let on_host: Option<String> = server
        .query_first(format!(
            "SELECT data FROM dbp{shard:04}.photos WHERE id = {prepared}"
        ))
        .await
        .expect("direct read");
    assert_eq!(on_host, Some(format!("{tag}-p")));
    server.disconnect().await.ok();
    conn.disconnect().await.ok();
    cleanup(&tag).await;
}

/// 16 sessions x 10,000 inserts concurrently on one shard: no two IDs are equal
/// and each session's IDs never go back in time (decision 0033: within one
/// borrowed millisecond they are ordered by the sequence, which may wrap).
#[tokio::test]
async fn concurrent_inserts_on_one_shard_never_collide() {
    const SESSIONS: usize = 16;
    const PER_SESSION: usize = 10_000;
    let tag = format!("time-ids-burst-{}", std::process::id());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..SESSIONS {
        let tag = tag.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = client().await;
            let mut ids = Vec::with_capacity(PER_SESSION);
            for i in 0..PER_SESSION {
                conn.query_drop(format!(
                    "INSERT /*+ SHARD(5) */ INTO photos (data) VALUES ('{tag}-{s}-{i}')"
                ))
                .await
                .unwrap_or_else(|e| panic!("session {s} insert {i}: {e}"));
                ids.push(conn.last_insert_id().expect("an insert id"));
            }
            conn.disconnect().await.ok();
            ids
        }));
    }
    let layout = layout();
    let mut all = HashSet::new();
    let mut same_millisecond_wraps = 0;
    for (s, task) in tasks.into_iter().enumerate() {
        let ids = task.await.expect("session task");
        for w in ids.windows(2) {
            let (before, after) = (
                field(&layout, w[0], FieldName::TimeMs),
                field(&layout, w[1], FieldName::TimeMs),
            );
            assert!(
                before <= after,
                "session {s}: id {} (ms {after}) after {} (ms {before})",
                w[1],
                w[0]
            );
            if w[1] < w[0] {
                same_millisecond_wraps += 1;
            }
        }
        for id in ids {
            assert!(all.insert(id), "id {id} minted twice");
        }
    }
    assert_eq!(all.len(), SESSIONS * PER_SESSION);
    eprintln!(
        "{SESSIONS} sessions x {PER_SESSION} inserts on one shard: {:?}, \
         {same_millisecond_wraps} smaller IDs within a borrowed millisecond",
        started.elapsed()
    );
    assert!(
        same_millisecond_wraps <= SESSIONS,
        "{same_millisecond_wraps} smaller IDs within one millisecond: more than a rare wrap"
    );
    let mut server = operations(PHOTOS_HOST).await;
    let stored: Option<u64> = server
        .query_first(format!(
            "SELECT COUNT(DISTINCT id) FROM dbp0005.photos WHERE data LIKE '{tag}%'"
        ))
        .await
        .unwrap();
    assert_eq!(stored, Some((SESSIONS * PER_SESSION) as u64));
    server.disconnect().await.ok();
    cleanup(&tag).await;
}

/// `id BETWEEN <id at t1> AND <id at t2>` spans every shard of a time
/// layout: refused with a message naming SCATTER and SHARD, answered with
/// either.
#[tokio::test]
async fn a_time_range_read_needs_scatter_or_a_shard() {
    let layout = layout();
    let tag = format!("time-ids-range-{}", std::process::id());
    let mut conn = client().await;
    let mut ids = Vec::new();
    for shard in [2u32, 9] {
        conn.query_drop(format!(
            "INSERT /*+ SHARD({shard}) */ INTO photos (data) VALUES ('{tag}')"
        ))
        .await
        .expect("insert");
        ids.push(conn.last_insert_id().expect("insert id"));
    }
    let at = |id: u64| field(&layout, id, FieldName::TimeMs);
    let low = layout
        .encode(&[(FieldName::TimeMs, at(ids[0]) - 1_000)])
        .unwrap();
    let high = layout
        .encode(&[(FieldName::TimeMs, at(ids[1]) + 1_000)])
        .unwrap();
    let range = format!("FROM photos WHERE id BETWEEN {low} AND {high} AND data = '{tag}'");
    let (code, message) = server_error(
        conn.query_drop(format!("SELECT id {range}"))
            .await
            .expect_err("a time range without a shard"),
    );
    assert!(
        message.contains("SCATTER") && message.contains("SHARD(n)"),
        "{code}: {message}"
    );
    let mut all: Vec<u64> = conn
        .query(format!("SELECT /*+ SCATTER */ id {range}"))
        .await
        .expect("scattered time range");
    all.sort_unstable();
    assert_eq!(all, ids);
    let one: Vec<u64> = conn
        .query(format!("SELECT /*+ SHARD(9) */ id {range}"))
        .await
        .expect("time range on one shard");
    assert_eq!(one, vec![ids[1]]);
    conn.disconnect().await.ok();
    cleanup(&tag).await;
}

/// A reload that changes the photos fleet's ID layout would make stored
/// IDs decode to other shards: `RELOAD CONFIG` refuses it, FORCE loads it.
#[tokio::test]
async fn a_reload_that_changes_the_id_layout_is_refused_unless_forced() {
    const SEQUENCE: &str = "sequence: { shift: 0,  bits: 10 }";
    let yaml = test_config_yaml();
    assert!(yaml.contains(SEQUENCE), "config/shardgate.yaml changed");
    let proxy = start_server("time-ids-rehome", &yaml);
    let changed = yaml.replace(SEQUENCE, "sequence: { shift: 0,  bits: 9 }");
    write_config(&proxy.config_path, &changed);
    let mut admin = admin(&proxy).await;
    let (code, message) = server_error(admin.query_drop("RELOAD CONFIG").await.unwrap_err());
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("fleet photos: ID layout") && message.contains("sequence 9-0"),
        "{message}"
    );
    let photos = |proxy: &RunningProxy| {
        let topology = proxy.engine.topology.load();
        let fleet = topology.fleet_by_name("photos").expect("photos");
        topology.fleets[fleet].layout.describe()
    };
    assert!(
        photos(&proxy).contains("sequence 9-0"),
        "{}",
        photos(&proxy)
    );
    let answer: Vec<(String, String, String)> = admin
        .query("RELOAD CONFIG FORCE")
        .await
        .expect("forced reload");
    assert_eq!(answer[0].0, "reloaded", "{answer:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        photos(&proxy).contains("sequence 8-0"),
        "{}",
        photos(&proxy)
    );
    admin.disconnect().await.ok();
}
