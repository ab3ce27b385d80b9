//! Session state and transactions through the proxy, checked on the hosts:
//! single-shard transactions, savepoints, reads outside the transaction,
//! SHOW WARNINGS, COM_RESET_CONNECTION, COM_CHANGE_USER, disconnects.

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{ChangeUserOpts, Conn};

async fn insert_pin(conn: &mut Conn, shard: u32, data: &str) -> u64 {
    conn.query_drop(format!(
        "INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('{data}')"
    ))
    .await
    .unwrap();
    conn.last_insert_id().unwrap()
}

#[tokio::test]
async fn transaction_binds_to_one_shard_and_refuses_a_second() {
    let mut conn = client().await;
    conn.query_drop("BEGIN").await.unwrap();
    let first = insert_pin(&mut conn, 5, "txn one").await;
    let error = conn
        .query_drop("INSERT /*+ SHARD(3000) */ INTO pins (data) VALUES ('other shard')")
        .await
        .expect_err("a second shard is refused");
    let (code, message) = server_error(error);
    assert_eq!(code, 1105);
    assert!(
        message.contains("shard 5") && message.contains("3000"),
        "{message}"
    );
    let own: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE id = {first}"))
        .await
        .unwrap();
    assert_eq!(
        own.as_deref(),
        Some("txn one"),
        "the bound shard sees its own write"
    );
    assert_eq!(pin_on_host(first).await, None, "not committed yet");
    conn.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(pin_on_host(first).await, None, "rolled back");
    let one: Option<u64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn savepoints_roll_back_part_of_a_transaction() {
    let mut conn = client().await;
    conn.query_drop("START TRANSACTION").await.unwrap();
    conn.query_drop("SAVEPOINT early").await.unwrap();
    let kept = insert_pin(&mut conn, 6, "kept").await;
    conn.query_drop("SAVEPOINT middle").await.unwrap();
    let undone = insert_pin(&mut conn, 6, "undone").await;
    conn.query_drop("ROLLBACK TO SAVEPOINT middle")
        .await
        .unwrap();
    conn.query_drop("RELEASE SAVEPOINT early").await.unwrap();
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(pin_on_host(kept).await.as_deref(), Some("kept"));
    assert_eq!(pin_on_host(undone).await, None);
}

#[tokio::test]
async fn autocommit_off_reads_many_shards_and_commits_one() {
    let mut setup = client().await;
    let a = insert_pin(&mut setup, 20, "read a").await;
    let b = insert_pin(&mut setup, 3020, "read b").await;

    let mut conn = client().await;
    conn.query_drop("SET autocommit = 0").await.unwrap();
    for (id, want) in [(a, "read a"), (b, "read b")] {
        let data: Option<String> = conn
            .query_first(format!("SELECT data FROM pins WHERE id = {id}"))
            .await
            .unwrap();
        assert_eq!(data.as_deref(), Some(want));
    }
    conn.query_drop(format!("UPDATE pins SET data = 'changed' WHERE id = {b}"))
        .await
        .unwrap();
    assert_eq!(
        pin_on_host(b).await.as_deref(),
        Some("read b"),
        "uncommitted"
    );
    let data: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE id = {a}"))
        .await
        .expect("a read of another shard is served outside the transaction");
    assert_eq!(data.as_deref(), Some("read a"));
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(pin_on_host(b).await.as_deref(), Some("changed"));
}

#[tokio::test]
async fn select_for_update_read_modify_write() {
    let mut conn = client().await;
    let id = insert_pin(&mut conn, 2100, "10").await;
    conn.query_drop("BEGIN").await.unwrap();
    let value: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE id = {id} FOR UPDATE"))
        .await
        .unwrap();
    let next = value.unwrap().parse::<u32>().unwrap() + 1;
    conn.query_drop(format!("UPDATE pins SET data = '{next}' WHERE id = {id}"))
        .await
        .unwrap();
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(pin_on_host(id).await.as_deref(), Some("11"));
}

#[tokio::test]
async fn a_client_that_vanishes_mid_transaction_leaves_nothing() {
    let mut conn = client().await;
    conn.query_drop("BEGIN").await.unwrap();
    let id = insert_pin(&mut conn, 30, "abandoned").await;
    drop(conn);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(pin_on_host(id).await, None);
    let mut other = client().await;
    let data: Option<String> = other
        .query_first(format!("SELECT data FROM pins WHERE id = {id}"))
        .await
        .unwrap();
    assert_eq!(data, None);
}

#[tokio::test]
async fn show_warnings_sees_the_previous_statement() {
    let mut conn = client().await;
    let value: Option<Option<u64>> = conn.query_first("SELECT 1/0").await.unwrap();
    assert_eq!(value, Some(None));
    let warnings: Vec<(String, u32, String)> = conn.query("SHOW WARNINGS").await.unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].1, 1365, "{warnings:?}");
    let count: Option<u64> = conn.query_first("SELECT @@warning_count").await.unwrap();
    assert_eq!(
        count,
        Some(1),
        "diagnostics statements keep the count, as on a server"
    );
    conn.query_drop("SELECT data FROM db00003.pins WHERE local_id = 1")
        .await
        .unwrap();
    let count: Option<u64> = conn.query_first("SELECT @@warning_count").await.unwrap();
    assert_eq!(count, Some(0), "a clean statement clears it");
    let none: Vec<(String, u32, String)> = conn.query("SHOW WARNINGS").await.unwrap();
    assert!(none.is_empty(), "{none:?}");
}

#[tokio::test]
async fn session_settings_follow_the_client_and_reset_clears_them() {
    let mut conn = client().await;
    conn.query_drop("SET sql_mode = 'ANSI_QUOTES'")
        .await
        .unwrap();
    conn.query_drop("SET @marker = 'mine'").await.unwrap();
    for shard in [1u32, 2500] {
        let mode: Option<String> = conn
            .query_first(format!(
                "SELECT @@sql_mode FROM pins WHERE id = {}",
                shardgate::id::ObjectId {
                    shard,
                    type_id: 1,
                    local_id: 1
                }
                .encode()
                .unwrap()
            ))
            .await
            .unwrap();
        if let Some(mode) = mode {
            assert_eq!(mode, "ANSI_QUOTES");
        }
        let marker: Option<Option<String>> = conn.query_first("SELECT @marker").await.unwrap();
        assert_eq!(marker, Some(Some("mine".to_owned())));
    }
    let mut other = client().await;
    let marker: Option<Option<String>> = other.query_first("SELECT @marker").await.unwrap();
    assert_eq!(
        marker,
        Some(None),
        "another session does not see our variables"
    );

    conn.reset().await.unwrap();
    let marker: Option<Option<String>> = conn.query_first("SELECT @marker").await.unwrap();
    assert_eq!(
        marker,
        Some(None),
        "COM_RESET_CONNECTION cleared the session"
    );
}

#[tokio::test]
async fn change_user_checks_the_password_and_resets_the_session() {
    let mut conn = client().await;
    conn.query_drop("USE db00042").await.unwrap();
    conn.change_user(
        ChangeUserOpts::default()
            .with_user(Some(APP_USER.to_owned()))
            .with_pass(Some(APP_PASSWORD.to_owned())),
    )
    .await
    .expect("change user with the right password");
    let database: Option<Option<String>> = conn.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(database, Some(None));

    let mut conn = client().await;
    let error = conn
        .change_user(
            ChangeUserOpts::default()
                .with_user(Some(APP_USER.to_owned()))
                .with_pass(Some("wrong".to_owned())),
        )
        .await
        .expect_err("wrong password");
    assert!(format!("{error:?}").contains("1045"), "{error:?}");
}
