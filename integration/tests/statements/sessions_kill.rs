//! The proxy's own sessions, through real clients: the handshake's id is
//! `CONNECTION_ID()`, `SHOW PROCESSLIST` lists the proxy's sessions of the
//! same account, `KILL QUERY` cancels a statement on the servers that run
//! it (single- and multi-shard, and Ctrl-C in the `mariadb` CLI), `KILL`
//! ends a session, the version is the backends' marked as the proxy's, and
//! `wait_timeout` closes idle sessions.

use crate::common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use mysql_common::constants::{CapabilityFlags, Command as MyCommand};
use shardgate::backend::{BackendConn, ConnKey};
use tokio::io::AsyncReadExt;

/// A second client account, to check that sessions are private to theirs.
const OTHER_USER: &str = "kill_other";
const OTHER_PASSWORD: &str = "kill_other_pw";

/// Shards of this test's rows: one on each main master.
const SHARD_A: u32 = 1717;
const SHARD_B: u32 = 3717;

/// A whole proxy whose config has a second account.
fn proxy() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let yaml = test_config_yaml().replace(
            "users: [{ name: app, password: app }]",
            &format!(
                "users: [{{ name: app, password: app }}, {{ name: {OTHER_USER}, password: {OTHER_PASSWORD} }}]"
            ),
        );
        assert!(yaml.contains(OTHER_USER), "the config's users line changed");
        start_server("sessions_kill", &yaml).listening.client
    })
}

async fn app() -> Conn {
    connect_to(proxy(), APP_USER, APP_PASSWORD)
        .await
        .expect("connect as app")
}

async fn other() -> Conn {
    connect_to(proxy(), OTHER_USER, OTHER_PASSWORD)
        .await
        .expect("connect as the second account")
}

/// The proxy's process list as `conn` sees it: (Id, Command, State, Info).
async fn processlist(conn: &mut Conn, sql: &str) -> Vec<(u64, String, String, Option<String>)> {
    let rows: Vec<Row> = conn.query(sql).await.expect("process list");
    rows.into_iter()
        .map(|row| {
            (
                row.get::<u64, _>(0).expect("Id"),
                row.get::<String, _>(4).expect("Command"),
                row.get::<String, _>(6).expect("State"),
                row.get::<Option<String>, _>(7).expect("Info"),
            )
        })
        .collect()
}

/// Waits until session `id` runs a statement that contains `marker`.
async fn wait_running(watcher: &mut Conn, id: u32, marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = processlist(watcher, "SHOW FULL PROCESSLIST").await;
        let running = list.iter().any(|(row_id, command, _, info)| {
            *row_id == u64::from(id)
                && command == "Query"
                && info.as_deref().is_some_and(|info| info.contains(marker))
        });
        if running {
            // The statement is registered before it reaches the backend;
            // give it the moment to get there.
            tokio::time::sleep(Duration::from_millis(300)).await;
            return;
        }
        assert!(Instant::now() < deadline, "session {id} never ran {marker}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many server threads on the master at `port` run a statement
/// containing `marker` (asked as the operations account).
async fn backend_threads(port: u16, marker: &str) -> u64 {
    backend_threads_in(port, "Query", marker).await
}

/// [`backend_threads`] in the server's `command` (`Query`; `Execute` for a
/// prepared statement).
async fn backend_threads_in(port: u16, command: &str, marker: &str) -> u64 {
    let mut conn = operations(port).await;
    let count: Option<u64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE COMMAND = '{command}' AND INFO LIKE '%{marker}%' AND INFO NOT LIKE '%PROCESSLIST%'"
        ))
        .await
        .expect("backend process list");
    conn.disconnect().await.ok();
    count.unwrap_or(0)
}

/// The masters a statement without a sharded table may run on.
const MASTERS: [u16; 3] = [MASTER_A, MASTER_B, MOD_HOST];

/// How many server threads on any master run a statement containing
/// `marker`.
async fn running_anywhere(marker: &str) -> u64 {
    let mut count = 0;
    for port in MASTERS {
        count += backend_threads(port, marker).await;
    }
    count
}

async fn wait_no_backend_threads(port: u16, marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while backend_threads(port, marker).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the statement {marker} still runs on {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `conn` was closed by the proxy: its next statement fails with a
/// connection error, not a server error.
async fn is_closed(conn: &mut Conn) -> bool {
    !matches!(
        conn.query_drop("SELECT 1").await,
        Ok(()) | Err(mysql_async::Error::Server(_))
    )
}

async fn insert_pin(conn: &mut Conn, shard: u32) -> u64 {
    conn.query_drop(format!(
        "INSERT /*+ SHARD({shard}) */ INTO pins (data) VALUES ('sessions_kill')"
    ))
    .await
    .expect("insert");
    conn.last_insert_id().expect("an ID")
}

#[tokio::test]
async fn the_handshake_id_is_connection_id() {
    let mut conn = app().await;
    let id: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await.unwrap();
    assert_eq!(id, Some(u64::from(conn.id())));
    let id: Option<u64> = conn
        .exec_first("SELECT CONNECTION_ID() AS me", ())
        .await
        .unwrap();
    assert_eq!(id, Some(u64::from(conn.id())), "prepared");
    let mut second = app().await;
    assert_ne!(second.id(), conn.id());
    let id: Option<u64> = second.query_first("SELECT connection_id()").await.unwrap();
    assert_eq!(id, Some(u64::from(second.id())));
}

#[tokio::test]
async fn the_version_is_the_backends_marked_as_the_proxys() {
    // The greeting's version, read off the socket.
    let mut socket = tokio::net::TcpStream::connect(proxy()).await.unwrap();
    let mut header = [0u8; 4];
    socket.read_exact(&mut header).await.unwrap();
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut greeting = vec![0u8; len];
    socket.read_exact(&mut greeting).await.unwrap();
    let end = greeting[1..].iter().position(|b| *b == 0).unwrap() + 1;
    let greeted = String::from_utf8(greeting[1..end].to_vec()).unwrap();

    let mut backend = direct(MASTER_A).await;
    let backend_version: String = backend
        .query_first("SELECT VERSION()")
        .await
        .unwrap()
        .unwrap();
    let number = backend_version.split('-').next().unwrap();
    let expected = format!("{number}-MariaDB-shardgate");
    assert_eq!(greeted, format!("5.5.5-{expected}"));

    let mut conn = app().await;
    for sql in [
        "SELECT VERSION()",
        "SELECT @@version",
        "SELECT @@global.version",
    ] {
        let version: Option<String> = conn.query_first(sql).await.unwrap();
        assert_eq!(version.as_deref(), Some(expected.as_str()), "{sql}");
        let version: Option<String> = conn.exec_first(sql, ()).await.unwrap();
        assert_eq!(
            version.as_deref(),
            Some(expected.as_str()),
            "prepared {sql}"
        );
    }
}

#[tokio::test]
async fn the_process_list_shows_the_accounts_own_sessions() {
    let mut watcher = app().await;
    let mut sleeper = app().await;
    let mut stranger = other().await;
    let sleeper_id = sleeper.id();
    let marker = "pl_marker_sleep";
    let running = tokio::spawn(async move {
        let slept: Option<u64> = sleeper
            .query_first(format!("SELECT SLEEP(2) AS {marker}"))
            .await
            .unwrap();
        (sleeper, slept)
    });
    wait_running(&mut watcher, sleeper_id, marker).await;

    let list = processlist(&mut watcher, "SHOW PROCESSLIST").await;
    let own = list
        .iter()
        .find(|row| row.0 == u64::from(watcher.id()))
        .expect("the session itself is listed");
    assert_eq!(
        (own.1.as_str(), own.3.as_deref()),
        ("Query", Some("SHOW PROCESSLIST"))
    );
    let sleeping = list
        .iter()
        .find(|row| row.0 == u64::from(sleeper_id))
        .expect("the other session of the account is listed");
    assert_eq!(sleeping.2, "executing");
    assert_eq!(
        sleeping.3.as_deref(),
        Some(format!("SELECT SLEEP(2) AS {marker}").as_str())
    );
    assert!(
        list.iter().all(|row| row.0 != u64::from(stranger.id())),
        "another account's session is not listed"
    );
    let theirs = processlist(&mut stranger, "SHOW FULL PROCESSLIST").await;
    assert!(theirs.iter().all(|row| row.0 != u64::from(sleeper_id)));
    assert!(theirs.iter().any(|row| row.0 == u64::from(stranger.id())));

    let rows: Vec<Row> = watcher
        .query(format!(
            "SELECT * FROM information_schema.PROCESSLIST WHERE ID = {sleeper_id}"
        ))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<String, _>("USER").as_deref(), Some(APP_USER));
    assert_eq!(
        rows[0].get::<String, _>("COMMAND").as_deref(),
        Some("Query")
    );
    let all: Vec<Row> = watcher
        .query("SELECT * FROM information_schema.PROCESSLIST")
        .await
        .unwrap();
    assert!(all.len() >= 2);

    let (mut sleeper, slept) = running.await.unwrap();
    assert_eq!(slept, Some(0));
    watcher.query_drop("USE db01717").await.unwrap();
    let list: Vec<Row> = sleeper.query("SHOW PROCESSLIST").await.unwrap();
    let row = list
        .iter()
        .find(|row| row.get::<u64, _>(0) == Some(u64::from(watcher.id())))
        .unwrap();
    assert_eq!(row.get::<String, _>(4).as_deref(), Some("Sleep"));
    assert_eq!(
        row.get::<Option<String>, _>(3).flatten().as_deref(),
        Some("db01717")
    );
    assert_eq!(row.get::<Option<String>, _>(7).flatten(), None);
}

#[tokio::test]
async fn kill_query_cancels_a_statement_on_its_server() {
    let mut killer = app().await;
    let mut victim = app().await;
    let victim_id = victim.id();
    let marker = "kq_marker_single";
    let running = tokio::spawn(async move {
        let started = Instant::now();
        let result = victim
            .query_drop(format!("SELECT SLEEP(30) AS {marker}"))
            .await;
        (victim, result, started.elapsed())
    });
    wait_running(&mut killer, victim_id, marker).await;
    assert_eq!(
        running_anywhere(marker).await,
        1,
        "the statement runs on one master"
    );
    killer
        .query_drop(format!("KILL QUERY {victim_id}"))
        .await
        .unwrap();
    let (mut victim, result, took) = running.await.unwrap();
    let (code, message) = server_error(result.expect_err("the statement was cancelled"));
    assert_eq!(code, 1317, "{message}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    for port in MASTERS {
        wait_no_backend_threads(port, marker).await;
    }
    // The session goes on.
    let one: Option<u64> = victim.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

/// A prepared statement's execute runs on its server as a prepared
/// statement (the server lists it as `Execute`), and `KILL QUERY` cancels it
/// there as it cancels a text statement; the session goes on.
#[tokio::test]
async fn kill_query_cancels_a_prepared_execute_on_its_server() {
    let mut killer = app().await;
    let mut victim = app().await;
    let victim_id = victim.id();
    let marker = "kq_marker_prepared";
    let running = tokio::spawn(async move {
        let started = Instant::now();
        let result = victim
            .exec_drop(format!("SELECT SLEEP(?) AS {marker}"), (30u32,))
            .await;
        (victim, result, started.elapsed())
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut executing = 0;
        for port in MASTERS {
            executing += backend_threads_in(port, "Execute", marker).await;
        }
        if executing == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no master runs {marker} as a prepared statement ({executing})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    killer
        .query_drop(format!("KILL QUERY {victim_id}"))
        .await
        .unwrap();
    let (mut victim, result, took) = running.await.unwrap();
    let (code, message) = server_error(result.expect_err("the statement was cancelled"));
    assert_eq!(code, 1317, "{message}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    for port in MASTERS {
        let deadline = Instant::now() + Duration::from_secs(5);
        while backend_threads_in(port, "Execute", marker).await > 0 {
            assert!(Instant::now() < deadline, "{marker} still runs on {port}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let one: Option<u64> = victim.exec_first("SELECT ?", (1u64,)).await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn kill_query_cancels_every_part_of_a_multi_shard_read() {
    let mut killer = app().await;
    let mut victim = app().await;
    let a = insert_pin(&mut victim, SHARD_A).await;
    let b = insert_pin(&mut victim, SHARD_B).await;
    let victim_id = victim.id();
    let marker = "kq_marker_multi";
    let running = tokio::spawn(async move {
        let started = Instant::now();
        let result = victim
            .query_drop(format!(
                "SELECT SLEEP(8) AS {marker} FROM pins WHERE id IN ({a}, {b})"
            ))
            .await;
        (victim, result, started.elapsed())
    });
    wait_running(&mut killer, victim_id, marker).await;
    assert_eq!(backend_threads(MASTER_A, marker).await, 1);
    assert_eq!(backend_threads(MASTER_B, marker).await, 1);
    killer
        .query_drop(format!("KILL QUERY {victim_id}"))
        .await
        .unwrap();
    let (mut victim, result, took) = running.await.unwrap();
    let (code, message) = server_error(result.expect_err("the read was cancelled"));
    assert_eq!(code, 1317, "{message}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    for port in MASTERS {
        wait_no_backend_threads(port, marker).await;
    }
    let one: Option<u64> = victim.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn kill_connection_ends_the_session_and_rolls_back() {
    let mut killer = app().await;
    let mut idle = app().await;
    killer
        .query_drop(format!("KILL CONNECTION {}", idle.id()))
        .await
        .unwrap();
    assert!(is_closed(&mut idle).await, "the killed session is closed");

    // COM_PROCESS_KILL, the old command byte.
    let mut idle = app().await;
    let key = ConnKey {
        framing: CapabilityFlags::empty(),
        collation: 45,
    };
    let mut raw = BackendConn::connect(
        &proxy().to_string(),
        APP_USER,
        APP_PASSWORD,
        key,
        Duration::from_secs(5),
    )
    .await
    .expect("a raw client logs in");
    let answer = raw
        .simple_command(MyCommand::COM_PROCESS_KILL, &idle.id().to_le_bytes())
        .await
        .unwrap();
    assert_eq!(answer.first(), Some(&0x00), "OK");
    assert!(is_closed(&mut idle).await, "killed with COM_PROCESS_KILL");
    let answer = raw
        .simple_command(MyCommand::COM_PROCESS_KILL, &4_000_000_000u32.to_le_bytes())
        .await
        .unwrap();
    assert_eq!(answer.first(), Some(&0xFF), "ERR for an unknown id");
    assert_eq!(u16::from_le_bytes([answer[1], answer[2]]), 1094);

    // A session inside a transaction: its write is rolled back.
    let mut writer = app().await;
    writer.query_drop("BEGIN").await.unwrap();
    let id = insert_pin(&mut writer, SHARD_A).await;
    let local = decode(id).local_id;
    killer
        .query_drop(format!("KILL {}", writer.id()))
        .await
        .unwrap();
    assert!(is_closed(&mut writer).await);
    assert_eq!(row_on_host(MASTER_A, "pins", SHARD_A, local).await, None);

    // A session running a statement: cancelled, then closed.
    let mut busy = app().await;
    let busy_id = busy.id();
    let marker = "kc_marker_busy";
    let running = tokio::spawn(async move {
        let result = busy
            .query_drop(format!("SELECT SLEEP(30) AS {marker}"))
            .await;
        (busy, result)
    });
    wait_running(&mut killer, busy_id, marker).await;
    killer.query_drop(format!("KILL {busy_id}")).await.unwrap();
    let (mut busy, result) = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the killed statement ends")
        .unwrap();
    assert!(result.is_err());
    for port in MASTERS {
        wait_no_backend_threads(port, marker).await;
    }
    assert!(is_closed(&mut busy).await);
    let list = processlist(&mut killer, "SHOW PROCESSLIST").await;
    assert!(list.iter().all(|row| row.0 != u64::from(busy_id)));
}

#[tokio::test]
async fn kill_refuses_unknown_and_foreign_sessions() {
    let mut conn = app().await;
    let stranger = other().await;
    let (code, message) = server_error(conn.query_drop("KILL 4000000000").await.unwrap_err());
    assert_eq!(
        (code, message.as_str()),
        (1094, "Unknown thread id: 4000000000")
    );
    let (code, message) = server_error(
        conn.query_drop(format!("KILL QUERY {}", stranger.id()))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 1095);
    assert_eq!(
        message,
        format!("You are not owner of thread {}", stranger.id())
    );
    // Yourself: KILL QUERY interrupts the KILL itself, KILL ends the session.
    let own = conn.id();
    let (code, _) = server_error(
        conn.query_drop(format!("KILL QUERY {own}"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 1317);
    let (code, message) = server_error(conn.query_drop(format!("KILL {own}")).await.unwrap_err());
    assert_eq!((code, message.as_str()), (1927, "Connection was killed"));
    assert!(is_closed(&mut conn).await);
}

#[tokio::test]
async fn ctrl_c_in_the_mariadb_cli_stops_the_statement() {
    let marker = "cli_marker_sigint";
    let started = Instant::now();
    let child = Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &proxy().port().to_string(),
            "-u",
            APP_USER,
            &format!("-p{APP_PASSWORD}"),
            "-e",
            &format!("SELECT SLEEP(30) AS {marker}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the mariadb CLI");
    let deadline = Instant::now() + Duration::from_secs(10);
    while running_anywhere(marker).await == 0 {
        assert!(Instant::now() < deadline, "the CLI's statement never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("send SIGINT");
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .expect("the CLI ends");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Query execution was interrupted"),
        "{stderr}"
    );
    for port in MASTERS {
        wait_no_backend_threads(port, marker).await;
    }
}

#[tokio::test]
async fn an_idle_session_is_closed_after_its_wait_timeout() {
    for set in ["SET wait_timeout = 1", "SET SESSION wait_timeout = 1"] {
        let mut conn = app().await;
        conn.query_drop(set).await.unwrap();
        let value: Option<u64> = conn.query_first("SELECT @@wait_timeout").await.unwrap();
        assert_eq!(value, Some(1), "{set}");
        tokio::time::sleep(Duration::from_millis(2200)).await;
        assert!(is_closed(&mut conn).await, "{set}: closed after 1 s idle");
    }
    // A session that keeps talking is not closed, nor is one without the SET.
    let mut busy = app().await;
    busy.query_drop("SET wait_timeout = 2").await.unwrap();
    let mut plain = app().await;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        busy.query_drop("SELECT 1").await.unwrap();
    }
    assert!(!is_closed(&mut plain).await);
}

#[tokio::test]
async fn change_user_moves_the_session_to_the_new_account() {
    let mut conn = app().await;
    let id = conn.id();
    conn.change_user(
        mysql_async::ChangeUserOpts::default()
            .with_user(Some(OTHER_USER.to_owned()))
            .with_pass(Some(OTHER_PASSWORD.to_owned())),
    )
    .await
    .expect("change user");
    let same: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await.unwrap();
    assert_eq!(same, Some(u64::from(id)));
    let mut watcher = app().await;
    let list = processlist(&mut watcher, "SHOW PROCESSLIST").await;
    assert!(list.iter().all(|row| row.0 != u64::from(id)));
    let (code, _) = server_error(watcher.query_drop(format!("KILL {id}")).await.unwrap_err());
    assert_eq!(code, 1095);
    let mut theirs = other().await;
    let list = processlist(&mut theirs, "SHOW PROCESSLIST").await;
    assert!(list.iter().any(|row| row.0 == u64::from(id)));
}

/// `KILL QUERY` of a statement waiting for a paused shard ends the wait at
/// once with 1317 (not the pause's 1205 after `pause.timeout_ms`, 5 s
/// here); the statement never ran, and the session's next statement is not
/// cancelled. The pause is of a proxy of the test's own.
#[tokio::test]
async fn kill_query_ends_a_wait_for_a_paused_shard() {
    const PAUSED: u32 = 3799;
    let proxy = start_server("sessions_kill_pause", &test_config_yaml());
    let mut ops = admin(&proxy).await;
    ops.query_drop(format!("PAUSE SHARDS {PAUSED}-{PAUSED} IN main"))
        .await
        .expect("pause");
    let mut killer = connect_to(proxy.listening.client, APP_USER, APP_PASSWORD)
        .await
        .expect("connect");
    let mut victim = connect_to(proxy.listening.client, APP_USER, APP_PASSWORD)
        .await
        .expect("connect");
    let victim_id = victim.id();
    let marker = "kq_marker_paused";
    let id = shardgate::id::compose(PAUSED, 1, 1);
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let result = victim
            .query_drop(format!("SELECT {id} AS {marker} FROM pins WHERE id = {id}"))
            .await;
        (victim, result, started.elapsed())
    });
    wait_running(&mut killer, victim_id, marker).await;
    killer
        .query_drop(format!("KILL QUERY {victim_id}"))
        .await
        .unwrap();
    let (mut victim, result, took) = waiting.await.unwrap();
    let (code, message) = server_error(result.expect_err("the statement was cancelled"));
    assert_eq!(code, 1317, "{message} after {took:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(running_anywhere(marker).await, 0, "it never ran");
    ops.query_drop(format!("RESUME SHARDS {PAUSED}-{PAUSED} IN main"))
        .await
        .expect("resume");
    let one: Option<u64> = victim.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}
