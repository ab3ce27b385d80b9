//! Wire-level behaviour of the proxy that stock clients rely on: the auth
//! switch for clients that start with another plugin, malformed input, and
//! large values relayed byte-exact.

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
use mysql_common::proto::{MyDeserialize, MySerialize};
use mysql_common::scramble::scramble_native;
use shardgate::protocol::{FrameReader, FrameWriter};
use tokio::net::TcpStream;

async fn start_login(
    plugin: AuthPlugin<'static>,
    scramble: Vec<u8>,
) -> (
    FrameReader<tokio::net::tcp::OwnedReadHalf>,
    FrameWriter<tokio::net::tcp::OwnedWriteHalf>,
    u8,
) {
    let stream = TcpStream::connect(proxy_addr()).await.unwrap();
    let (r, w) = stream.into_split();
    let mut reader = FrameReader::new(r);
    let mut writer = FrameWriter::new(w);
    let (seq, payload) = reader.next_packet().await.unwrap();
    let handshake = HandshakePacket::deserialize((), &mut ParseBuf(&payload)).unwrap();
    assert_eq!(
        handshake.auth_plugin_name_ref(),
        Some(&b"mysql_native_password"[..])
    );
    let caps = CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_DEPRECATE_EOF;
    let response = HandshakeResponse::new(
        Some(scramble),
        (8, 0, 36),
        Some(&b"app"[..]),
        None::<&[u8]>,
        Some(plugin),
        caps,
        None,
        16 * 1024 * 1024,
    );
    let mut body = Vec::new();
    response.serialize(&mut body);
    let next = writer.write_packet(seq + 1, &body).await.unwrap();
    writer.flush().await.unwrap();
    (reader, writer, next)
}

#[tokio::test]
async fn a_caching_sha2_client_is_switched_to_native_password() {
    let (mut reader, mut writer, _) =
        start_login(AuthPlugin::CachingSha2Password, vec![7u8; 32]).await;
    let (seq, switch) = reader.next_packet().await.unwrap();
    assert_eq!(switch[0], 0xFE, "auth switch request");
    let rest = &switch[1..];
    let name_end = rest.iter().position(|b| *b == 0).unwrap();
    assert_eq!(&rest[..name_end], b"mysql_native_password");
    let nonce = rest[name_end + 1..].strip_suffix(&[0]).unwrap();
    let answer = scramble_native(nonce, b"app").unwrap();
    writer.write_packet(seq + 1, &answer).await.unwrap();
    writer.flush().await.unwrap();
    let (_, ok) = reader.next_packet().await.unwrap();
    assert_eq!(ok[0], 0x00, "login accepted after the switch: {ok:?}");
}

#[tokio::test]
async fn a_wrong_scramble_gets_access_denied() {
    let (mut reader, _writer, _) =
        start_login(AuthPlugin::MysqlNativePassword, vec![1u8; 20]).await;
    let (_, answer) = reader.next_packet().await.unwrap();
    assert_eq!(answer[0], 0xFF);
    assert_eq!(u16::from_le_bytes([answer[1], answer[2]]), 1045);
}

#[tokio::test]
async fn garbage_instead_of_a_handshake_response_gets_an_error_and_others_keep_working() {
    let stream = TcpStream::connect(proxy_addr()).await.unwrap();
    let (r, w) = stream.into_split();
    let mut reader = FrameReader::new(r);
    let mut writer = FrameWriter::new(w);
    reader.next_packet().await.unwrap();
    writer.write_packet(1, &[0xAB; 40]).await.unwrap();
    writer.flush().await.unwrap();
    let (_, answer) = reader.next_packet().await.unwrap();
    assert_eq!(answer[0], 0xFF, "an ERR packet, not a crash");

    let mut conn = client().await;
    let one: Option<u64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

/// A client that asks for the compressed protocol, which the proxy does not
/// offer, gets an error at login instead of a session in which both sides
/// wait for ever (Connector/Python's pure driver compresses anyway).
#[tokio::test]
async fn a_client_asking_for_compression_is_refused_at_login() {
    for flag in [
        CapabilityFlags::CLIENT_COMPRESS,
        CapabilityFlags::CLIENT_ZSTD_COMPRESSION_ALGORITHM,
    ] {
        let (_, _, offered, answer) = raw_login(flag).await;
        assert!(
            !offered.contains(CapabilityFlags::CLIENT_COMPRESS),
            "compression is not offered"
        );
        assert_eq!(answer[0], 0xFF, "{flag:?}: an ERR packet: {answer:?}");
        let message = String::from_utf8_lossy(&answer[9..]).into_owned();
        assert!(message.contains("compress"), "{message}");
    }
}

type RawReader = FrameReader<tokio::net::tcp::OwnedReadHalf>;
type RawWriter = FrameWriter<tokio::net::tcp::OwnedWriteHalf>;

/// A raw login as the app account with `extra` capabilities: the halves of
/// the connection, the capabilities the greeting offered and the answer to
/// the handshake response (within 5 s).
async fn raw_login(extra: CapabilityFlags) -> (RawReader, RawWriter, CapabilityFlags, Vec<u8>) {
    let stream = TcpStream::connect(proxy_addr()).await.unwrap();
    let (r, w) = stream.into_split();
    let mut reader = FrameReader::new(r);
    let mut writer = FrameWriter::new(w);
    let (seq, payload) = reader.next_packet().await.unwrap();
    let handshake = HandshakePacket::deserialize((), &mut ParseBuf(&payload)).unwrap();
    let scramble = scramble_native(&handshake.nonce(), APP_PASSWORD.as_bytes()).unwrap();
    let response = HandshakeResponse::new(
        Some(scramble.to_vec()),
        (8, 0, 36),
        Some(APP_USER.as_bytes()),
        None::<&[u8]>,
        Some(AuthPlugin::MysqlNativePassword),
        CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            | extra,
        None,
        16 * 1024 * 1024,
    );
    let mut body = Vec::new();
    response.serialize(&mut body);
    writer.write_packet(seq + 1, &body).await.unwrap();
    writer.flush().await.unwrap();
    let (_, answer) = tokio::time::timeout(std::time::Duration::from_secs(5), reader.next_packet())
        .await
        .expect("an answer, not a hang")
        .unwrap();
    (reader, writer, handshake.capabilities(), answer.to_vec())
}

/// A raw protocol session logged in as the app account, for commands no
/// client library exposes.
async fn raw_session(extra: CapabilityFlags) -> (RawReader, RawWriter) {
    let (reader, writer, _, ok) = raw_login(extra).await;
    assert_eq!(ok[0], 0x00, "logged in");
    (reader, writer)
}

async fn command(reader: &mut RawReader, writer: &mut RawWriter, packet: &[u8]) -> Vec<u8> {
    writer.write_packet(0, packet).await.unwrap();
    writer.flush().await.unwrap();
    reader.next_packet().await.unwrap().1
}

#[tokio::test]
async fn unsupported_commands_get_an_error_and_the_session_goes_on() {
    let (mut reader, mut writer) = raw_session(CapabilityFlags::empty()).await;
    let error = command(&mut reader, &mut writer, &[0x05, b'x']).await;
    assert_eq!(error[0], 0xFF);
    assert_eq!(u16::from_le_bytes([error[1], error[2]]), 1047);
    assert!(String::from_utf8_lossy(&error).contains("COM_CREATE_DB"));

    let columns = command(&mut reader, &mut writer, b"\x03SELECT 1").await;
    assert_eq!(columns, vec![1], "one column: the session goes on");
}

#[tokio::test]
async fn statistics_are_the_proxys_in_pairs_drivers_parse() {
    let _first = raw_session(CapabilityFlags::empty()).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (mut reader, mut writer) = raw_session(CapabilityFlags::empty()).await;
    let statistics = command(&mut reader, &mut writer, &[0x09]).await;
    let text = String::from_utf8_lossy(&statistics).into_owned();
    // As Connector/Python reads it: `label: number` pairs two spaces apart.
    let pairs: Vec<(&str, u64)> = text
        .split("  ")
        .map(|pair| {
            let (label, value) = pair
                .split_once(':')
                .unwrap_or_else(|| panic!("{pair:?} of {text:?} is no `label: value`"));
            let value = value
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{pair:?} of {text:?}: not a number"));
            (label.trim(), value)
        })
        .collect();
    let uptime = pairs.iter().find(|(label, _)| *label == "Uptime");
    assert!(
        uptime.is_some_and(|(_, seconds)| *seconds >= 1),
        "the proxy's uptime, not the new session's: {text:?}"
    );
}

#[tokio::test]
async fn statistics_set_option_and_field_list() {
    let (mut reader, mut writer) = raw_session(CapabilityFlags::empty()).await;
    let statistics = command(&mut reader, &mut writer, &[0x09]).await;
    assert!(String::from_utf8_lossy(&statistics).starts_with("Uptime: "));

    let eof = command(&mut reader, &mut writer, &[0x1B, 0, 0]).await;
    assert_eq!(eof[0], 0xFE, "COM_SET_OPTION answers EOF");

    let no_db = command(&mut reader, &mut writer, b"\x04pins\0").await;
    assert_eq!(u16::from_le_bytes([no_db[1], no_db[2]]), 1046);

    let ok = command(&mut reader, &mut writer, b"\x02db00123").await;
    assert_eq!(ok[0], 0x00);
    writer.write_packet(0, b"\x04pins\0").await.unwrap();
    writer.flush().await.unwrap();
    let mut names = Vec::new();
    loop {
        let (_, packet) = reader.next_packet().await.unwrap();
        if packet[0] == 0xFE {
            break;
        }
        assert_ne!(packet[0], 0xFF, "{}", String::from_utf8_lossy(&packet));
        names.push(String::from_utf8_lossy(&packet).into_owned());
    }
    assert_eq!(names.len(), 3, "local_id, data, ts");
    assert!(names[0].contains("local_id") && names[1].contains("data"));
    let columns = command(&mut reader, &mut writer, b"\x03SELECT 1").await;
    assert_eq!(columns, vec![1]);
}

#[tokio::test]
async fn long_data_parameters_are_joined_and_bound() {
    let (mut reader, mut writer) = raw_session(CapabilityFlags::CLIENT_DEPRECATE_EOF).await;
    let prepare_ok = command(&mut reader, &mut writer, b"\x16SELECT ? AS v").await;
    assert_eq!(prepare_ok[0], 0x00);
    let id = [prepare_ok[1], prepare_ok[2], prepare_ok[3], prepare_ok[4]];
    assert_eq!(
        u16::from_le_bytes([prepare_ok[7], prepare_ok[8]]),
        1,
        "one parameter"
    );
    for _ in 0..2 {
        reader.next_packet().await.unwrap();
    }
    for chunk in [&b"long "[..], b"data"] {
        let mut packet = vec![0x18];
        packet.extend_from_slice(&id);
        packet.extend_from_slice(&0u16.to_le_bytes());
        packet.extend_from_slice(chunk);
        writer.write_packet(0, &packet).await.unwrap();
    }
    let mut execute = vec![0x17];
    execute.extend_from_slice(&id);
    execute.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 0xFC, 0]);
    let count = command(&mut reader, &mut writer, &execute).await;
    assert_eq!(count, vec![1]);
    reader.next_packet().await.unwrap();
    let (_, row) = reader.next_packet().await.unwrap();
    assert_eq!(&row[..2], &[0x00, 0x00], "binary row, no NULLs");
    assert_eq!(&row[2..], b"\x09long data");
}

/// Long data, a NULL and an ID bound to a statement on one shard (its
/// values go to the server as parameters): the row is the stored one, the
/// long value and the NULL come back as bound, three times over.
#[tokio::test]
async fn long_data_and_null_parameters_of_a_one_shard_lookup() {
    let mut conn = client().await;
    conn.query_drop("INSERT /*+ SHARD(1234) */ INTO pins (data) VALUES ('long-data row')")
        .await
        .unwrap();
    let pin = conn.last_insert_id().unwrap();
    let (mut reader, mut writer) = raw_session(CapabilityFlags::CLIENT_DEPRECATE_EOF).await;
    let prepare_ok = command(
        &mut reader,
        &mut writer,
        b"\x16SELECT ? AS v, data, ? IS NULL AS n FROM pins WHERE id = ?",
    )
    .await;
    assert_eq!(
        prepare_ok[0],
        0x00,
        "{}",
        String::from_utf8_lossy(&prepare_ok)
    );
    let id = [prepare_ok[1], prepare_ok[2], prepare_ok[3], prepare_ok[4]];
    let columns = u16::from_le_bytes([prepare_ok[5], prepare_ok[6]]);
    let params = u16::from_le_bytes([prepare_ok[7], prepare_ok[8]]);
    assert_eq!((columns, params), (3, 3));
    for _ in 0..(columns + params) {
        reader.next_packet().await.unwrap();
    }
    for round in 0..3u8 {
        let long = format!("long \u{1F680} data {round} ").repeat(500);
        for chunk in long.as_bytes().chunks(1000) {
            let mut packet = vec![0x18];
            packet.extend_from_slice(&id);
            packet.extend_from_slice(&0u16.to_le_bytes());
            packet.extend_from_slice(chunk);
            writer.write_packet(0, &packet).await.unwrap();
        }
        let mut execute = vec![0x17];
        execute.extend_from_slice(&id);
        // No cursor, one iteration; parameter 1 NULL; types: BLOB (long
        // data), LONGLONG (NULL), LONGLONG UNSIGNED (the ID).
        execute.extend_from_slice(&[0, 1, 0, 0, 0, 0b0000_0010, 1, 0xFC, 0, 0x08, 0, 0x08, 0x80]);
        execute.extend_from_slice(&pin.to_le_bytes());
        let count = command(&mut reader, &mut writer, &execute).await;
        assert_eq!(count, vec![3], "{}", String::from_utf8_lossy(&count));
        for _ in 0..3 {
            reader.next_packet().await.unwrap();
        }
        let (_, row) = reader.next_packet().await.unwrap();
        assert_eq!(row[0], 0x00, "a binary row");
        let mut rest = &row[2..];
        let mut strings = Vec::new();
        for _ in 0..2 {
            let (len, skip) = match rest[0] {
                0xFC => (usize::from(u16::from_le_bytes([rest[1], rest[2]])), 3),
                n => (usize::from(n), 1),
            };
            strings.push(rest[skip..skip + len].to_vec());
            rest = &rest[skip + len..];
        }
        assert_eq!(strings[0], long.as_bytes(), "round {round}");
        assert_eq!(strings[1], b"long-data row");
        assert_eq!(rest, &1i64.to_le_bytes()[..rest.len()], "NULL IS NULL");
        let (_, end) = reader.next_packet().await.unwrap();
        assert!(end[0] == 0xFE, "end of rows: {end:?}");
    }
}

#[tokio::test]
async fn large_utf8_values_round_trip_byte_exact() {
    let mut conn = client().await;
    // `data` is TEXT (64 KiB); this value spans several reads of the relay.
    let value: String = "shardgate 🚀 ünïcødé ".repeat(1_800);
    conn.query_drop("SET NAMES utf8mb4").await.unwrap();
    conn.query_drop(format!(
        "INSERT /*+ SHARD(1234) */ INTO pins (data) VALUES ('{value}')"
    ))
    .await
    .unwrap();
    let id = conn.last_insert_id().unwrap();
    let back: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE id = {id}"))
        .await
        .unwrap();
    assert_eq!(back.as_deref(), Some(value.as_str()));
    let mut host = direct(MASTER_A).await;
    let length: Option<u64> = host
        .query_first(format!(
            "SELECT LENGTH(data) FROM db01234.pins WHERE local_id = {}",
            decode(id).local_id
        ))
        .await
        .unwrap();
    assert_eq!(length, Some(value.len() as u64));
}

/// A value crosses the proxy both ways: in the statement text and in the
/// result row.
async fn echo_through_a_shard(conn: &mut mysql_async::Conn, value: &str, prepared: bool) -> String {
    conn.query_drop("INSERT /*+ SHARD(4000) */ INTO pins (data) VALUES ('echo')")
        .await
        .unwrap();
    let id = conn.last_insert_id().unwrap();
    let row: Option<(String, String)> = if prepared {
        conn.exec_first(
            format!("SELECT ? AS v, data FROM pins WHERE id = {id}"),
            (value,),
        )
        .await
        .unwrap()
    } else {
        conn.query_first(format!(
            "SELECT '{value}' AS v, data FROM pins WHERE id = {id}"
        ))
        .await
        .unwrap()
    };
    let (echoed, data) = row.expect("one row");
    assert_eq!(data, "echo");
    echoed
}

#[tokio::test]
async fn a_two_megabyte_utf8_value_is_byte_exact_as_text_and_as_a_parameter() {
    let mut conn = client().await;
    conn.query_drop("SET NAMES utf8mb4").await.unwrap();
    let unit = "shardgate 🚀 ünïcødé ";
    let value = unit.repeat(2 * 1024 * 1024 / unit.len() + 1);
    assert!(value.len() > 2 * 1024 * 1024);
    assert_eq!(echo_through_a_shard(&mut conn, &value, false).await, value);
    assert_eq!(echo_through_a_shard(&mut conn, &value, true).await, value);
}

#[tokio::test]
async fn packets_over_sixteen_megabytes_are_split_and_joined() {
    // Past the default limits.max_allowed_packet (16 MiB, as MariaDB's):
    // a proxy allowing what the fleet allows (64 MiB).
    let yaml = with_limits(&test_config_yaml(), "  max_allowed_packet: 67108864\n");
    let proxy = start_server("protocol-big-packets", &yaml);
    let mut conn = app(&proxy).await;
    let value = "0123456789abcdef".repeat(17 * 1024 * 1024 / 16 + 3);
    assert!(value.len() > 0xFF_FFFF);
    assert_eq!(echo_through_a_shard(&mut conn, &value, false).await, value);
    assert_eq!(echo_through_a_shard(&mut conn, &value, true).await, value);
}

/// A file of `rows` lines `<tag>-<n>` for `LOAD DATA ... (data)`.
fn load_file(tag: &str, rows: usize) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("{tag}.txt"));
    let text: String = (0..rows).map(|n| format!("{tag}-{n}\n")).collect();
    std::fs::write(&path, text).expect("write the LOAD DATA file");
    path
}

/// How many pins of `shard` tagged `tag` the master at `port` holds.
async fn tagged_pins(port: u16, shard: u32, tag: &str) -> u64 {
    let mut conn = direct(port).await;
    let count: Option<u64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM db{shard:05}.pins WHERE data LIKE '{tag}-%'"
        ))
        .await
        .expect("count on the master");
    conn.disconnect().await.ok();
    count.unwrap_or(0)
}

fn cli_output(output: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test]
async fn load_data_local_infile_relays_the_clients_file_to_an_explicit_shard() {
    let pid = std::process::id();
    let addr = proxy_addr();

    // The mariadb CLI, a qualified table: 30,000 rows, many packets.
    let tag = format!("infile{pid}q");
    let file = load_file(&tag, 30_000);
    let sql = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE db03429.pins (data); SELECT COUNT(*) FROM db03429.pins WHERE data LIKE '{tag}-%'",
        file.display()
    );
    let output = mariadb_cli_at(addr, &["--local-infile=1"], &sql);
    assert!(output.status.success(), "{}", cli_output(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "30000");
    assert_eq!(tagged_pins(MASTER_B, 3429, &tag).await, 30_000);
    assert_eq!(tagged_pins(MASTER_A, 1000, &tag).await, 0);

    // Under USE: the table is qualified with the USE database.
    let tag = format!("infile{pid}u");
    let file = load_file(&tag, 3);
    let sql = format!(
        "USE db01000; LOAD DATA LOCAL INFILE '{}' IGNORE INTO TABLE pins FIELDS TERMINATED BY '\\t' (data)",
        file.display()
    );
    let output = mariadb_cli_at(addr, &["--local-infile=1"], &sql);
    assert!(output.status.success(), "{}", cli_output(&output));
    assert_eq!(tagged_pins(MASTER_A, 1000, &tag).await, 3);

    // A client that did not enable LOCAL INFILE: the server's 4166, and
    // nothing is loaded.
    let tag = format!("infile{pid}off");
    let file = load_file(&tag, 3);
    let sql = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE db03429.pins (data)",
        file.display()
    );
    let output = mariadb_cli_at(addr, &["--local-infile=0"], &sql);
    assert!(!output.status.success());
    let said = cli_output(&output);
    assert!(said.contains("ERROR 4166"), "{said}");
    assert!(said.contains("did not enable LOCAL INFILE"), "{said}");
    assert_eq!(tagged_pins(MASTER_B, 3429, &tag).await, 0);

    // mysql_async with its LOCAL INFILE handler; the session goes on.
    let tag = format!("infile{pid}m");
    let file = load_file(&tag, 5);
    let mut conn = client_with_local_files(std::slice::from_ref(&file)).await;
    conn.query_drop(format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE db03429.pins (data)",
        file.display()
    ))
    .await
    .unwrap();
    assert_eq!(conn.affected_rows(), 5);
    let through: Option<u64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM db03429.pins WHERE data LIKE '{tag}-%'"
        ))
        .await
        .unwrap();
    assert_eq!(through, Some(5));
    assert_eq!(tagged_pins(MASTER_B, 3429, &tag).await, 5);

    // Server-side files stay out of reach.
    for sql in [
        format!("LOAD DATA INFILE '{}' INTO TABLE db03429.pins (data)", file.display()),
        "SELECT data FROM db03429.pins LIMIT 1 INTO OUTFILE '/tmp/shardgate_outfile_probe'"
            .to_owned(),
        "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE pins (data)".to_owned(),
        "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE mysql.user".to_owned(),
        "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE db03429.pins (data) SET data = (SELECT 1 FROM db00001.pins LIMIT 1)".to_owned(),
    ] {
        let error = conn.query_drop(&sql).await.expect_err(&sql);
        let (code, message) = server_error(error);
        assert!(
            [1105, 1142, 1064].contains(&code),
            "{sql}: {code} {message}"
        );
    }

    // A server asking for another file than the statement names (here the
    // server converts the name to another character set) is refused: the
    // client is never asked, nothing is loaded.
    let tag = format!("infile{pid}fs");
    let file = load_file(&tag, 2);
    let renamed = file.with_file_name(format!("{tag}é.txt"));
    std::fs::copy(&file, &renamed).unwrap();
    let mut conn = client_with_local_files(std::slice::from_ref(&renamed)).await;
    conn.query_drop("SET character_set_filesystem = latin1")
        .await
        .unwrap();
    let error = conn
        .query_drop(format!(
            "LOAD DATA LOCAL INFILE '{}' INTO TABLE db03429.pins (data)",
            renamed.display()
        ))
        .await
        .expect_err("another file name");
    let (_, message) = server_error(error);
    assert!(message.contains("the statement names"), "{message}");
    assert_eq!(tagged_pins(MASTER_B, 3429, &tag).await, 0);
    let alive: Option<u8> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(alive, Some(1));
}

#[tokio::test]
async fn load_data_local_infile_follows_the_transaction_rules() {
    let pid = std::process::id();
    let tag = format!("infile{pid}tx");
    let file = load_file(&tag, 4);
    let load = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE db03429.pins (data)",
        file.display()
    );
    let mut conn = client_with_local_files(std::slice::from_ref(&file)).await;

    // Bound to another shard: refused, the transaction stays open.
    conn.query_drop("BEGIN").await.unwrap();
    insert_pin(&mut conn, 5, &format!("{tag}-other")).await;
    let error = conn.query_drop(&load).await.expect_err("another shard");
    let (code, message) = server_error(error);
    assert_eq!(code, 1105, "{message}");
    assert!(
        message.contains("db03429") || message.contains("3429"),
        "{message}"
    );
    conn.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(tagged_pins(MASTER_B, 3429, &tag).await, 0);
    assert_eq!(tagged_pins(MASTER_A, 5, &tag).await, 0);

    // It binds the transaction: rolled back, then committed.
    conn.query_drop("BEGIN").await.unwrap();
    conn.query_drop(&load).await.unwrap();
    let inside: Option<u64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM db03429.pins WHERE data LIKE '{tag}-%'"
        ))
        .await
        .unwrap();
    assert_eq!(inside, Some(4));
    assert_eq!(
        tagged_pins(MASTER_B, 3429, &tag).await,
        0,
        "not committed yet"
    );
    conn.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(tagged_pins(MASTER_B, 3429, &tag).await, 0);
    conn.query_drop("BEGIN").await.unwrap();
    conn.query_drop(&load).await.unwrap();
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(tagged_pins(MASTER_B, 3429, &tag).await, 4);
}
