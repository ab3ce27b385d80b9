//! Bound values can never change a statement's
//! structure, whatever the connection's character set and `sql_mode`; the
//! session's lexical state is the server's; long data, prepared statements
//! and recorded SETs are bounded per session. Through the real proxy, to the
//! real fleet, checking rows on the shards' masters.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};
use mysql_common::constants::{CapabilityFlags, Command};
use shardgate::backend::{BackendConn, ConnKey};
use shardgate::protocol::packets::parse_err;

/// The shard this file's rows go to (main fleet, master-b).
const SHARD: u32 = 3071;
/// Marks the rows this file writes.
const TAG: &str = "prepared-safety";

/// The payload that read password hashes on a gbk connection: a lead byte
/// whose trail may be `\`, then a quote that must stay inside the value.
fn injection(lead: &[u8]) -> Vec<u8> {
    let mut payload = lead.to_vec();
    payload.extend_from_slice(b"\\' UNION SELECT authentication_string FROM mysql.user -- ");
    payload
}

/// A charset tested: its name, a character that is valid UTF-8 and whose
/// last byte, read in the charset, is a lead byte that swallows a
/// following `\` (what broke out of a backslash-escaped literal), and
/// values (beyond the common ones) that are well-formed in it.
type CharsetCase = (&'static str, Vec<u8>, Vec<Vec<u8>>);

/// Every charset tested.
fn charsets() -> Vec<CharsetCase> {
    vec![
        (
            "utf8mb4",
            "你".as_bytes().to_vec(),
            vec!["你\\'".as_bytes().to_vec(), "😀".as_bytes().to_vec()],
        ),
        (
            "latin1",
            "é".as_bytes().to_vec(),
            vec![vec![0xE9, 0x5C], vec![0xFF, 0x27]],
        ),
        ("binary", "你".as_bytes().to_vec(), vec![]),
        (
            "gbk",
            "你".as_bytes().to_vec(),
            vec![vec![0x81, 0x5C], vec![0xBF, 0x5C, 0x27], vec![0xC4, 0xE3]],
        ),
        (
            "big5",
            "佡".as_bytes().to_vec(),
            vec![vec![0xA4, 0x5C], vec![0xA4, 0x5C, 0x27]],
        ),
        (
            "sjis",
            "佁".as_bytes().to_vec(),
            vec![vec![0x83, 0x5C], vec![0x83, 0x5C, 0x27]],
        ),
        (
            "cp932",
            "佁".as_bytes().to_vec(),
            vec![vec![0x83, 0x5C], vec![0x83, 0x5C, 0x27]],
        ),
    ]
}

/// Values every charset must carry byte-exact.
fn common_values() -> Vec<Vec<u8>> {
    [
        &b""[..],
        b"\0",
        b"\\",
        b"'",
        b"\"",
        b"\\'",
        b"'\\",
        b"a\0b\\c'd\"e`f",
        b"\x1a",
        b"-- x",
        b"?",
        b"/*!50000 x*/",
    ]
    .iter()
    .map(|v| v.to_vec())
    .collect()
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02X}")).collect()
}

async fn session(charset: &str, no_backslash_escapes: bool) -> Conn {
    let mut conn = client().await;
    conn.query_drop(format!("SET NAMES {charset}"))
        .await
        .unwrap();
    if no_backslash_escapes {
        conn.query_drop("SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            .await
            .unwrap();
    }
    let mode: String = conn
        .query_first("SELECT @@session.sql_mode")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(mode.contains("NO_BACKSLASH_ESCAPES"), no_backslash_escapes);
    // Bound strings are written in the charset the server now has.
    let bound: Option<String> = conn.exec_first("SELECT CHARSET(?)", ("x",)).await.unwrap();
    assert_eq!(bound.as_deref(), Some(charset));
    conn
}

/// A pin of this file's on [`SHARD`]; its ID and local id.
async fn own_pin(conn: &mut Conn, data: &str) -> (u64, u64) {
    conn.exec_drop(
        format!("INSERT /*+ SHARD({SHARD}) */ INTO pins (data) VALUES (?)"),
        (data,),
    )
    .await
    .unwrap();
    let id = conn.last_insert_id().unwrap();
    (id, decode(id).local_id)
}

#[tokio::test]
async fn injection_payload_stays_one_value_in_every_charset_and_mode() {
    let mut setup = client().await;
    let tag = format!("{TAG} injection");
    let (pin, _) = own_pin(&mut setup, &tag).await;
    for (charset, lead, _) in charsets() {
        for nbe in [false, true] {
            let mut conn = session(charset, nbe).await;
            let payload = injection(&lead);
            let rows: mysql_async::Result<Vec<Row>> = conn
                .exec(
                    "SELECT data FROM pins WHERE id = ? AND data = ?",
                    (pin, Value::Bytes(payload.clone())),
                )
                .await;
            match rows {
                Ok(rows) => assert!(rows.is_empty(), "{charset} nbe={nbe}: {rows:?}"),
                // Comparing a utf8mb4 column with bytes that are no UTF-8
                // (a binary session's value): MariaDB refuses the value, as
                // it does for the same bytes in a plain literal.
                Err(error) => {
                    let (code, message) = server_error(error);
                    assert!(
                        charset == "binary" && code == 1300,
                        "{charset} nbe={nbe}: {code} {message}"
                    );
                }
            }
            let echoed: Option<Vec<u8>> = conn
                .exec_first("SELECT ?", (Value::Bytes(payload.clone()),))
                .await
                .unwrap();
            assert_eq!(echoed.as_deref(), Some(&payload[..]), "{charset} nbe={nbe}");
            conn.disconnect().await.ok();
        }
    }
    delete_pins(main_master_port(SHARD), &[SHARD], &tag).await;
}

#[tokio::test]
async fn bound_values_round_trip_byte_exact() {
    let tag = format!("{TAG} round trip");
    let port = main_master_port(SHARD);
    for (charset, _, extra) in charsets() {
        for nbe in [false, true] {
            let mut conn = session(charset, nbe).await;
            let mut values = common_values();
            values.extend(extra.iter().cloned());
            for value in &values {
                let echoed: Option<Vec<u8>> = conn
                    .exec_first("SELECT ?", (Value::Bytes(value.clone()),))
                    .await
                    .unwrap();
                assert_eq!(
                    echoed.as_deref(),
                    Some(&value[..]),
                    "{charset} nbe={nbe} {value:?}"
                );
                let hexed: Option<String> = conn
                    .exec_first("SELECT HEX(?)", (Value::Bytes(value.clone()),))
                    .await
                    .unwrap();
                assert_eq!(hexed, Some(hex(value)), "{charset} nbe={nbe} {value:?}");
                // Stored on the shard's master as the same characters.
                let mut data = format!("{tag} ").into_bytes();
                data.extend_from_slice(value);
                conn.exec_drop(
                    format!("INSERT /*+ SHARD({SHARD}) */ INTO pins (data) VALUES (?)"),
                    (Value::Bytes(data.clone()),),
                )
                .await
                .unwrap_or_else(|e| panic!("{charset} nbe={nbe} insert {value:?}: {e}"));
                let local_id = decode(conn.last_insert_id().unwrap()).local_id;
                // What the server makes of these bytes in this charset.
                let mut master = direct(port).await;
                let expected: Option<String> = master
                    .query_first(format!(
                        "SELECT HEX(CONVERT(_{charset} X'{}' USING utf8mb4))",
                        hex(&data)
                    ))
                    .await
                    .unwrap();
                let stored: Option<String> = master
                    .query_first(format!(
                        "SELECT HEX(data) FROM db{SHARD:05}.pins WHERE local_id = {local_id}"
                    ))
                    .await
                    .unwrap();
                master.disconnect().await.ok();
                assert!(expected.is_some());
                assert_eq!(stored, expected, "{charset} nbe={nbe} {value:?}");
            }
            conn.disconnect().await.ok();
        }
    }
    delete_pins(port, &[SHARD], &tag).await;
}

/// Bytes that are no text of the session's charset, and blob parameters,
/// come back exactly (as a binary string).
#[tokio::test]
async fn invalid_sequences_and_blobs_round_trip() {
    let invalid: Vec<Vec<u8>> = vec![
        vec![0xFF],
        vec![0x81],
        vec![0xC3, 0x28],
        vec![0xFF, 0x00, 0x5C, 0x27],
        vec![0xED, 0xA0, 0x80],
    ];
    for charset in ["utf8mb4", "binary", "gbk", "sjis", "big5"] {
        let mut conn = session(charset, false).await;
        for value in &invalid {
            let echoed: Option<Vec<u8>> = conn
                .exec_first("SELECT ?", (Value::Bytes(value.clone()),))
                .await
                .unwrap_or_else(|e| panic!("{charset} {value:?}: {e}"));
            assert_eq!(echoed.as_deref(), Some(&value[..]), "{charset} {value:?}");
        }
        conn.disconnect().await.ok();
    }
    // BLOB-typed parameters, on a raw connection.
    let mut raw = raw_client(proxy_addr(), 45).await;
    let id = raw_prepare(&mut raw, "SELECT ?").await.unwrap();
    for value in &invalid {
        let rows = raw_execute(&mut raw, id, &[(0xFC, Some(value.clone()))])
            .await
            .unwrap();
        assert_eq!(rows, vec![vec![Some(value.clone())]]);
    }
}

/// The session's charset from the handshake collation (28, gbk), without
/// any SET NAMES: the gbk payload stays a value and round-trips.
#[tokio::test]
async fn handshake_collation_sets_the_charset() {
    let mut raw = raw_client(proxy_addr(), 28).await;
    let charset = raw_query_one(&mut raw, "SELECT @@session.character_set_client").await;
    assert_eq!(charset, b"gbk");
    let id = raw_prepare(&mut raw, "SELECT ?, HEX(?), CHARSET(?)")
        .await
        .unwrap();
    for value in [
        injection(&[0xBF]),
        vec![0x81, 0x5C],
        vec![0xBF, 0x5C, 0x27, 0x27],
    ] {
        let params: Vec<(u8, Option<Vec<u8>>)> =
            (0..3).map(|_| (0xFD, Some(value.clone()))).collect();
        let rows = raw_execute(&mut raw, id, &params).await.unwrap();
        assert_eq!(
            rows,
            vec![vec![
                Some(value.clone()),
                Some(hex(&value).into_bytes()),
                Some(b"gbk".to_vec())
            ]]
        );
    }
    // COM_RESET_CONNECTION goes back to the handshake's charset.
    raw_query_one(&mut raw, "SET NAMES latin1").await;
    let answer = raw
        .simple_command(Command::COM_RESET_CONNECTION, &[])
        .await
        .unwrap();
    assert_eq!(answer.first(), Some(&0x00));
    let id = raw_prepare(&mut raw, "SELECT CHARSET(?)").await.unwrap();
    let rows = raw_execute(&mut raw, id, &[(0xFD, Some(b"x".to_vec()))])
        .await
        .unwrap();
    assert_eq!(rows, vec![vec![Some(b"gbk".to_vec())]]);
}

/// Numbers are checked before they are written into the text: DECIMAL text
/// that is not a number is refused (1210) and nothing runs.
#[tokio::test]
async fn malformed_numbers_are_refused() {
    let mut raw = raw_client(proxy_addr(), 45).await;
    let id = raw_prepare(&mut raw, "SELECT CONCAT(?)").await.unwrap();
    for junk in [&b"1); DROP TABLE x; --"[..], b"1 OR 1=1", b"0x41", b""] {
        let (code, message) = raw_execute(&mut raw, id, &[(0xF6, Some(junk.to_vec()))])
            .await
            .unwrap_err();
        assert_eq!(code, 1210, "{junk:?}: {message}");
    }
    let rows = raw_execute(&mut raw, id, &[(0xF6, Some(b"-12.50e-1".to_vec()))])
        .await
        .unwrap();
    assert_eq!(rows, vec![vec![Some(b"-1.25".to_vec())]]);
    // A NaN double has no literal either.
    let (code, _) = raw_execute(
        &mut raw,
        id,
        &[(0x05, Some(f64::NAN.to_le_bytes().to_vec()))],
    )
    .await
    .unwrap_err();
    assert_eq!(code, 1210);
}

/// Inside a bound transaction the SET runs, and the state is read, on the
/// transaction's connection.
#[tokio::test]
async fn charset_followed_inside_a_transaction() {
    let tag = format!("{TAG} transaction");
    let mut conn = client().await;
    conn.query_drop("BEGIN").await.unwrap();
    own_pin(&mut conn, &tag).await;
    conn.query_drop("SET NAMES gbk").await.unwrap();
    let bound: Option<String> = conn.exec_first("SELECT CHARSET(?)", ("x",)).await.unwrap();
    assert_eq!(bound.as_deref(), Some("gbk"));
    let value = vec![0x81, 0x5C, 0x27];
    let echoed: Option<Vec<u8>> = conn
        .exec_first("SELECT ?", (Value::Bytes(value.clone()),))
        .await
        .unwrap();
    assert_eq!(echoed, Some(value));
    conn.query_drop("ROLLBACK").await.unwrap();
    conn.disconnect().await.ok();
}

/// The proxy takes ANSI_QUOTES (and NO_BACKSLASH_ESCAPES) from the server,
/// however the SET wrote it: with ANSI_QUOTES, `id = "<id>"` compares with
/// a column, so it is no shard key.
#[tokio::test]
async fn sql_mode_is_read_back_from_the_server() {
    let mut conn = client().await;
    let tag = format!("{TAG} mode");
    let (pin, _) = own_pin(&mut conn, &tag).await;
    let by_double_quotes = format!("SELECT data FROM pins WHERE id = \"{pin}\"");
    let found: Option<String> = conn.query_first(&by_double_quotes).await.unwrap();
    assert_eq!(found.as_deref(), Some(tag.as_str()));

    conn.query_drop("SET @m = 'ANSI_QUOTES,NO_BACKSLASH_ESCAPES'")
        .await
        .unwrap();
    conn.query_drop("SET sql_mode = @m").await.unwrap();
    let refused = conn.query_drop(&by_double_quotes).await.unwrap_err();
    let (code, message) = server_error(refused);
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("no shard key"), "{message}");

    conn.query_drop("SET sql_mode = REPLACE(@@sql_mode, 'ANSI_QUOTES', '')")
        .await
        .unwrap();
    let found: Option<String> = conn.query_first(&by_double_quotes).await.unwrap();
    assert_eq!(found.as_deref(), Some(tag.as_str()));
    conn.disconnect().await.ok();
    delete_pins(main_master_port(SHARD), &[SHARD], &tag).await;
}

/// An ID bound as a string (as mysql2 sends BigInt IDs) still routes.
#[tokio::test]
async fn ids_bound_as_strings_route_in_any_charset() {
    let mut setup = client().await;
    let tag = format!("{TAG} by string");
    let (pin, _) = own_pin(&mut setup, &tag).await;
    for charset in ["utf8mb4", "gbk", "latin1", "binary"] {
        let mut conn = session(charset, false).await;
        let found: Option<Vec<u8>> = conn
            .exec_first("SELECT data FROM pins WHERE id = ?", (pin.to_string(),))
            .await
            .unwrap_or_else(|e| panic!("{charset}: {e}"));
        assert_eq!(found, Some(tag.clone().into_bytes()), "{charset}");
        conn.disconnect().await.ok();
    }
    delete_pins(main_master_port(SHARD), &[SHARD], &tag).await;
}

// ----- per-session bounds -----

const LIMIT_PACKET: usize = 4 << 20;

fn limited_proxy() -> RunningProxy {
    let yaml = with_limits(
        &test_config_yaml(),
        &format!("  max_allowed_packet: {LIMIT_PACKET}\n  max_prepared_statements: 5\n  max_session_settings: 4\n  max_session_settings_bytes: 512\n"),
    );
    start_server("prepared-safety-limits", &yaml)
}

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn long_data_past_max_allowed_packet_is_dropped_and_refused() {
    let proxy = limited_proxy();
    let mut raw = raw_client(proxy.listening.client, 45).await;
    let id = raw_prepare(&mut raw, "SELECT CONCAT(LENGTH(?))")
        .await
        .unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let rss_before = vm_rss_kib();
    let mut payload = Vec::with_capacity(chunk.len() + 6);
    for _ in 0..150 {
        payload.clear();
        payload.extend_from_slice(&id.to_le_bytes());
        payload.extend_from_slice(&0u16.to_le_bytes());
        payload.extend_from_slice(&chunk);
        raw.send_command(Command::COM_STMT_SEND_LONG_DATA, &payload)
            .await
            .unwrap();
    }
    // The proxy has read all of it once it answers the next command.
    let error = raw_execute(&mut raw, id, &[(0xFC, None)])
        .await
        .unwrap_err();
    let rss_after = vm_rss_kib();
    assert_eq!(error.0, 1153, "{}", error.1);
    println!("VmRSS before {rss_before} KiB, after 150 MiB of long data {rss_after} KiB");
    assert!(
        rss_after < rss_before + 48 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    // The session goes on: long data within the limit works again.
    payload.clear();
    payload.extend_from_slice(&id.to_le_bytes());
    payload.extend_from_slice(&0u16.to_le_bytes());
    payload.extend_from_slice(&chunk);
    raw.send_command(Command::COM_STMT_SEND_LONG_DATA, &payload)
        .await
        .unwrap();
    let rows = raw_execute(&mut raw, id, &[(0xFC, None)]).await.unwrap();
    assert_eq!(rows, vec![vec![Some(b"1048576".to_vec())]]);
    // Other sessions were never affected.
    let started = Instant::now();
    let mut other = app(&proxy).await;
    let one: Option<i64> = other.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn prepared_text_and_count_are_bounded() {
    let proxy = limited_proxy();
    let mut raw = raw_client(proxy.listening.client, 45).await;
    let huge = format!("SELECT '{}'", "y".repeat(LIMIT_PACKET));
    let (code, message) = raw_prepare(&mut raw, &huge).await.unwrap_err();
    assert_eq!(code, 1153, "{message}");
    // Five statements may be open, not six; closing one makes room.
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(
            raw_prepare(&mut raw, &format!("SELECT {n} + ?"))
                .await
                .unwrap(),
        );
    }
    let (code, message) = raw_prepare(&mut raw, "SELECT 6").await.unwrap_err();
    assert_eq!(code, 1461, "{message}");
    assert!(message.contains("max_prepared_stmt_count"), "{message}");
    raw.send_command(Command::COM_STMT_CLOSE, &ids[0].to_le_bytes())
        .await
        .unwrap();
    raw_prepare(&mut raw, "SELECT 6").await.unwrap();
    // Several statements within the per-statement size, past the total.
    let mut raw = raw_client(proxy.listening.client, 45).await;
    let big = format!("SELECT '{}'", "z".repeat(LIMIT_PACKET / 2));
    raw_prepare(&mut raw, &big).await.unwrap();
    let (code, message) = raw_prepare(&mut raw, &big).await.unwrap_err();
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("max_allowed_packet"), "{message}");
    let rows = raw_query_one(&mut raw, "SELECT 'alive'").await;
    assert_eq!(rows, b"alive");
}

/// Bound values of 4096 bytes or more are routed with a short stub in their
/// place and spliced in after routing (`engine::long_values`): stored
/// byte-exact on the shard (an INSERT, an UPDATE whose key is rewritten),
/// answered by any host, and, where the stub cannot stand (a key, a SET the
/// session records, a read over several shards), routed again with the
/// value itself.
/// `HEX(data)` of this file's pin `local_id`, read on its master.
async fn stored_hex(master: &mut Conn, local_id: u64) -> Option<String> {
    master
        .query_first(format!(
            "SELECT HEX(data) FROM db{SHARD:05}.pins WHERE local_id = {local_id}"
        ))
        .await
        .unwrap()
}

#[tokio::test]
async fn long_values_reach_the_server_byte_exact_wherever_they_go() {
    let tag = format!("{TAG} long value");
    let port = main_master_port(SHARD);
    let mut conn = session("utf8mb4", false).await;
    // Quotes, backslashes, non-ASCII, and the stub's own marker as text.
    let mut value = format!("{tag} ").into_bytes();
    while value.len() < 40_000 {
        value.extend_from_slice("\\' \x01shardgate long value 0\x01 é x ".as_bytes());
    }
    conn.exec_drop(
        format!("INSERT /*+ SHARD({SHARD}) */ INTO pins (data) VALUES (?)"),
        (Value::Bytes(value.clone()),),
    )
    .await
    .unwrap();
    let id = conn.last_insert_id().unwrap();
    let local_id = decode(id).local_id;
    let mut master = direct(port).await;
    assert_eq!(stored_hex(&mut master, local_id).await, Some(hex(&value)));
    // An UPDATE by ID: the key rewritten to local_id, the value spliced.
    let updated: Vec<u8> = value
        .iter()
        .map(|&b| if b == b'x' { b'y' } else { b })
        .collect();
    conn.exec_drop(
        "UPDATE pins SET data = ? WHERE id = ?",
        (Value::Bytes(updated.clone()), id),
    )
    .await
    .unwrap();
    assert_eq!(stored_hex(&mut master, local_id).await, Some(hex(&updated)));
    // Any host.
    let md5: Option<String> = conn
        .exec_first("SELECT MD5(?)", (Value::Bytes(value.clone()),))
        .await
        .unwrap();
    let expected: Option<String> = master
        .query_first(format!("SELECT MD5(X'{}')", hex(&value)))
        .await
        .unwrap();
    assert_eq!(md5, expected);
    // Where a key goes: the ID behind 5000 zeros routes as the ID.
    let padded = format!("{}{id}", "0".repeat(5000));
    let data: Option<Vec<u8>> = conn
        .exec_first("SELECT data FROM pins WHERE id = ?", (padded,))
        .await
        .unwrap();
    assert_eq!(data.as_deref(), Some(&updated[..]));
    // A read over two shards.
    let elsewhere = pin_id(SHARD - 1, 1);
    let count: Option<u64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM pins WHERE id IN (?, ?) AND data = ?",
            (id, elsewhere, Value::Bytes(updated.clone())),
        )
        .await
        .unwrap();
    assert_eq!(count, Some(1));
    // A SET the session records and replays.
    let short = &value[..5000];
    conn.exec_drop("SET @long_value = ?", (Value::Bytes(short.to_vec()),))
        .await
        .unwrap();
    let back: Option<String> = conn.query_first("SELECT HEX(@long_value)").await.unwrap();
    assert_eq!(back, Some(hex(short)));
    master.disconnect().await.ok();
    conn.disconnect().await.ok();
    delete_pins(port, &[SHARD], &tag).await;
}

#[tokio::test]
async fn recorded_sets_are_bounded() {
    let proxy = limited_proxy();
    let mut conn = app(&proxy).await;
    for n in 0..4 {
        conn.query_drop(format!("SET @safety_v{n} = {n}"))
            .await
            .unwrap();
    }
    // Setting one again replaces it.
    conn.query_drop("SET @safety_v0 = 10").await.unwrap();
    let refused = conn.query_drop("SET @safety_v4 = 4").await.unwrap_err();
    let (code, message) = server_error(refused);
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("limits.max_session_settings"), "{message}");
    let v4: Option<Option<i64>> = conn.query_first("SELECT @safety_v4").await.unwrap();
    assert_eq!(v4, Some(None), "the refused SET did not run");
    let long = format!("SET @safety_v1 = '{}'", "q".repeat(600));
    let (code, message) = server_error(conn.query_drop(&long).await.unwrap_err());
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("max_session_settings_bytes"), "{message}");
    let v1: Option<i64> = conn.query_first("SELECT @safety_v1").await.unwrap();
    assert_eq!(v1, Some(1));
}

// ----- a raw client, for what mysql_async does not send -----

async fn raw_client(addr: SocketAddr, collation: u8) -> BackendConn {
    let key = ConnKey {
        framing: CapabilityFlags::empty(),
        collation,
    };
    BackendConn::connect(
        &addr.to_string(),
        APP_USER,
        APP_PASSWORD,
        key,
        Duration::from_secs(5),
    )
    .await
    .unwrap_or_else(|e| panic!("raw login to {addr}: {e}"))
}

fn error_of(payload: &[u8]) -> (u16, String) {
    let (code, _, message) = parse_err(payload).expect("an ERR packet");
    (code, message)
}

async fn next(conn: &mut BackendConn) -> Vec<u8> {
    conn.reader.next_packet().await.unwrap().1
}

/// Reads column definitions and their EOF.
async fn skip_definitions(conn: &mut BackendConn, count: usize) {
    if count == 0 {
        return;
    }
    for _ in 0..count {
        next(conn).await;
    }
    next(conn).await;
}

/// COM_STMT_PREPARE; the statement id.
async fn raw_prepare(conn: &mut BackendConn, sql: &str) -> Result<u32, (u16, String)> {
    conn.send_command(Command::COM_STMT_PREPARE, sql.as_bytes())
        .await
        .unwrap();
    let first = next(conn).await;
    if first[0] == 0xFF {
        return Err(error_of(&first));
    }
    let id = u32::from_le_bytes([first[1], first[2], first[3], first[4]]);
    let columns = usize::from(u16::from_le_bytes([first[5], first[6]]));
    let params = usize::from(u16::from_le_bytes([first[7], first[8]]));
    skip_definitions(conn, params).await;
    skip_definitions(conn, columns).await;
    Ok(id)
}

fn read_lenenc(buf: &mut &[u8]) -> u64 {
    let mut value = 0u64;
    let width = match buf[0] {
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        small => {
            *buf = &buf[1..];
            return u64::from(small);
        }
    };
    for (i, b) in buf[1..=width].iter().enumerate() {
        value |= u64::from(*b) << (8 * i);
    }
    *buf = &buf[1 + width..];
    value
}

/// COM_STMT_EXECUTE with `(type, value)` parameters, none NULL (`None`: the
/// value was sent as long data); the rows of a result whose columns are all
/// strings.
async fn raw_execute(
    conn: &mut BackendConn,
    id: u32,
    params: &[(u8, Option<Vec<u8>>)],
) -> Result<Vec<Vec<Option<Vec<u8>>>>, (u16, String)> {
    let mut payload = id.to_le_bytes().to_vec();
    payload.push(0);
    payload.extend_from_slice(&1u32.to_le_bytes());
    if !params.is_empty() {
        payload.extend(std::iter::repeat_n(0u8, params.len().div_ceil(8)));
        payload.push(1);
        for (t, _) in params {
            payload.extend_from_slice(&[*t, 0]);
        }
        for value in params.iter().filter_map(|(_, value)| value.as_ref()) {
            shardgate::protocol::frame::write_lenenc_bytes(&mut payload, value);
        }
    }
    conn.send_command(Command::COM_STMT_EXECUTE, &payload)
        .await
        .unwrap();
    let first = next(conn).await;
    match first[0] {
        0xFF => return Err(error_of(&first)),
        0x00 => return Ok(Vec::new()),
        _ => {}
    }
    let columns = read_lenenc(&mut first.as_slice()) as usize;
    skip_definitions(conn, columns).await;
    let mut rows = Vec::new();
    loop {
        let packet = next(conn).await;
        match packet[0] {
            0xFE if packet.len() < 9 => return Ok(rows),
            0xFF => return Err(error_of(&packet)),
            _ => {}
        }
        let bitmap = &packet[1..1 + (columns + 9) / 8];
        let mut rest = &packet[1 + bitmap.len()..];
        let mut row = Vec::new();
        for column in 0..columns {
            let bit = column + 2;
            if bitmap[bit / 8] & (1 << (bit % 8)) != 0 {
                row.push(None);
                continue;
            }
            let len = read_lenenc(&mut rest) as usize;
            row.push(Some(rest[..len].to_vec()));
            rest = &rest[len..];
        }
        rows.push(row);
    }
}

/// COM_QUERY; the first column of the first row (empty for an OK).
async fn raw_query_one(conn: &mut BackendConn, sql: &str) -> Vec<u8> {
    conn.send_command(Command::COM_QUERY, sql.as_bytes())
        .await
        .unwrap();
    let first = next(conn).await;
    match first[0] {
        0xFF => panic!("{sql}: {:?}", error_of(&first)),
        0x00 => return Vec::new(),
        _ => {}
    }
    let columns = read_lenenc(&mut first.as_slice()) as usize;
    skip_definitions(conn, columns).await;
    let mut value = None;
    loop {
        let packet = next(conn).await;
        if packet[0] == 0xFE && packet.len() < 9 {
            return value.unwrap_or_default();
        }
        if value.is_none() {
            let mut rest = packet.as_slice();
            let len = read_lenenc(&mut rest) as usize;
            value = Some(rest[..len].to_vec());
        }
    }
}
