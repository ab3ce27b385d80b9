//! The admin port against the real fleet: every command's columns and
//! values checked against config/shardgate.yaml, the port's own accounts,
//! errors that list what is accepted, and the stock `mariadb` CLI.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{ChangeUserOpts, Conn, Row};

use common::{
    admin, admin_addr, app, pin_id, Deadline, RunningProxy, MASTER_A, MASTER_B, MOD_HOST,
};

/// The proxy most tests share (started once per test binary).
fn proxy() -> &'static RunningProxy {
    static PROXY: OnceLock<RunningProxy> = OnceLock::new();
    PROXY.get_or_init(|| common::start_server("admin", &common::test_config_yaml()))
}

async fn rows(conn: &mut Conn, sql: &str) -> Vec<Row> {
    conn.query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

async fn error_of(conn: &mut Conn, sql: &str) -> (u16, String) {
    match conn.query::<Row, _>(sql).await {
        Ok(rows) => panic!("{sql} answered {} rows, expected an error", rows.len()),
        Err(e) => common::server_error(e),
    }
}

/// Runs `sql`, which must fail with `code` and a message containing each
/// of `parts`; the message.
async fn refused(conn: &mut Conn, sql: &str, code: u16, parts: &[&str]) -> String {
    let (got, message) = error_of(conn, sql).await;
    assert_eq!(got, code, "{sql}: {message}");
    for part in parts {
        assert!(
            message.contains(part),
            "{sql}: {part} missing from {message}"
        );
    }
    message
}

fn columns(row: &Row) -> Vec<String> {
    row.columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect()
}

fn text(row: &Row, column: &str) -> Option<String> {
    row.get::<Option<String>, _>(column)
        .unwrap_or_else(|| panic!("no column {column} in {:?}", columns(row)))
}

fn number(row: &Row, column: &str) -> u64 {
    row.get::<u64, _>(column)
        .unwrap_or_else(|| panic!("no number in column {column} of {:?}", columns(row)))
}

fn host(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

#[tokio::test]
async fn show_shard_names_database_master_replica_health_and_pause() {
    let proxy = proxy();
    let mut conn = admin(proxy).await;
    let found = rows(&mut conn, "SHOW SHARD 3429").await;
    assert_eq!(
        columns(&found[0]),
        [
            "fleet",
            "shard",
            "database",
            "range",
            "master",
            "replica",
            "master_health",
            "paused"
        ]
    );
    assert_eq!(found.len(), 2, "main and mod both have shard 3429");
    let main = &found[0];
    assert_eq!(text(main, "fleet").as_deref(), Some("main"));
    assert_eq!(number(main, "shard"), 3429);
    assert_eq!(text(main, "database").as_deref(), Some("db03429"));
    assert_eq!(text(main, "range").as_deref(), Some("2048-4095"));
    assert_eq!(text(main, "master"), Some(host(MASTER_B)));
    assert_eq!(text(main, "replica"), None);
    let health = text(main, "master_health").unwrap();
    assert!(
        ["up", "down", "unknown"].contains(&health.as_str()),
        "{health}"
    );
    assert_eq!(text(main, "paused").as_deref(), Some("no"));
    let modrow = &found[1];
    assert_eq!(text(modrow, "fleet").as_deref(), Some("mod"));
    assert_eq!(text(modrow, "database").as_deref(), Some("msdb03429"));
    assert_eq!(text(modrow, "master"), Some(host(MOD_HOST)));

    let low = rows(&mut conn, "show shard 17 in main;").await;
    assert_eq!(low.len(), 1);
    assert_eq!(text(&low[0], "master"), Some(host(MASTER_A)));
    assert_eq!(text(&low[0], "replica"), Some(host(3309)));
    assert_eq!(text(&low[0], "range").as_deref(), Some("0-2047"));

    refused(
        &mut conn,
        "SHOW SHARD 5000",
        1210,
        &["no fleet has shard 5000", "main has shards 0-4095"],
    )
    .await;
    refused(
        &mut conn,
        "SHOW SHARD 1 IN nosuch",
        1210,
        &["fleets are: main, mod"],
    )
    .await;
}

#[tokio::test]
async fn show_shards_like_matches_number_or_database() {
    let mut conn = admin(proxy()).await;
    let found = rows(&mut conn, "SHOW SHARDS LIKE 'db0342%'").await;
    assert_eq!(found.len(), 10);
    for (i, row) in found.iter().enumerate() {
        assert_eq!(text(row, "fleet").as_deref(), Some("main"));
        assert_eq!(text(row, "database"), Some(format!("db0342{i}")));
        assert_eq!(text(row, "master"), Some(host(MASTER_B)));
    }
    let by_number = rows(&mut conn, "show shards like '3429'").await;
    let fleets: Vec<_> = by_number
        .iter()
        .map(|r| text(r, "fleet").unwrap())
        .collect();
    assert_eq!(fleets, ["main", "mod"]);
    let upper = rows(&mut conn, "SHOW SHARDS LIKE 'MSDB0000_'").await;
    assert_eq!(upper.len(), 10);
    let all = rows(&mut conn, "SHOW SHARDS").await;
    let shards: usize = common::topology()
        .fleets
        .iter()
        .map(|f| f.shard_count as usize)
        .sum();
    assert_eq!(all.len(), shards);
}

#[tokio::test]
async fn show_hosts_lists_the_four_hosts_with_roles_and_health() {
    let proxy = proxy();
    let mut conn = admin(proxy).await;
    let deadline = Deadline::new("the mod host to show up", Duration::from_secs(10))
        .every(Duration::from_millis(200));
    loop {
        let hosts = rows(&mut conn, "SHOW HOSTS").await;
        assert_eq!(
            columns(&hosts[0]),
            [
                "host",
                "role",
                "health",
                "latency_ms",
                "last_check",
                "checks",
                "check_failures",
                "pool_in_use",
                "pool_idle",
                "queries",
                "errors",
                "last_error",
                "replication_lag_ms",
                "seconds_behind_master",
                "gtid_behind",
                "checkout_timeouts"
            ]
        );
        let names: Vec<_> = hosts.iter().map(|r| text(r, "host").unwrap()).collect();
        assert_eq!(
            names,
            [host(MASTER_A), host(3309), host(MASTER_B), host(MOD_HOST)]
        );
        let role = |i: usize| text(&hosts[i], "role").unwrap();
        assert_eq!(role(0), "master main 0-2047");
        assert_eq!(role(1), "replica of 127.0.0.1:3307 (main 0-2047)");
        assert_eq!(role(2), "master main 2048-4095");
        // Other fleets of the config may share the mod host (photos).
        assert!(role(3).starts_with("master mod 0-4095"), "{}", role(3));
        // The mod host is never stopped by any test: it comes up.
        let mod_host = &hosts[3];
        if text(mod_host, "health").as_deref() == Some("up") {
            assert!(text(mod_host, "latency_ms").is_some());
            assert!(text(mod_host, "last_check").unwrap().ends_with(" UTC"));
            assert!(number(mod_host, "checks") >= 1);
            break;
        }
        deadline.retry(text(mod_host, "health")).await;
    }
}

#[tokio::test]
async fn explain_route_shows_each_target() {
    let mut conn = admin(proxy()).await;
    let id = pin_id(3429, 7);
    let plan = rows(
        &mut conn,
        &format!("EXPLAIN ROUTE SELECT data FROM pins WHERE id = {id}"),
    )
    .await;
    assert_eq!(
        columns(&plan[0]),
        ["fleet", "shard", "database", "host", "kind", "sql", "note"]
    );
    assert_eq!(plan.len(), 1);
    assert_eq!(text(&plan[0], "fleet").as_deref(), Some("main"));
    assert_eq!(number(&plan[0], "shard"), 3429);
    assert_eq!(text(&plan[0], "database").as_deref(), Some("db03429"));
    assert_eq!(text(&plan[0], "host"), Some(host(MASTER_B)));
    assert_eq!(text(&plan[0], "kind").as_deref(), Some("read"));
    let sql = text(&plan[0], "sql").unwrap();
    assert!(sql.contains("db03429.pins"), "{sql}");
    assert!(sql.contains("local_id = 7"), "{sql}");

    let multi = rows(
        &mut conn,
        &format!(
            "explain route SELECT data FROM pins WHERE id IN ({}, {}) ORDER BY id",
            pin_id(5, 1),
            pin_id(3000, 2)
        ),
    )
    .await;
    let hosts: Vec<_> = multi.iter().map(|r| text(r, "host").unwrap()).collect();
    assert_eq!(hosts, [host(MASTER_A), host(MASTER_B)]);
    assert!(text(&multi[0], "note")
        .unwrap()
        .starts_with("part 1 of 2 of a multi-shard read"));
    assert!(text(&multi[1], "sql").unwrap().contains("db03000.pins"));

    let anywhere = rows(&mut conn, "EXPLAIN ROUTE SELECT 1").await;
    assert_eq!(
        text(&anywhere[0], "host").as_deref(),
        Some("any healthy master")
    );
    assert_eq!(text(&anywhere[0], "sql").as_deref(), Some("SELECT 1"));

    let placed = rows(
        &mut conn,
        "EXPLAIN ROUTE INSERT INTO pins (data) VALUES ('x')",
    )
    .await;
    assert_eq!(text(&placed[0], "kind").as_deref(), Some("write"));
    let note = text(&placed[0], "note").unwrap();
    assert!(note.contains("random open shard (0-4095)"), "{note}");

    let used = rows(&mut conn, "EXPLAIN ROUTE USE db00012").await;
    assert_eq!(number(&used[0], "shard"), 12);
    assert_eq!(text(&used[0], "host"), Some(host(MASTER_A)));
    assert!(text(&used[0], "note")
        .unwrap()
        .starts_with("answered by the proxy"));

    refused(
        &mut conn,
        "EXPLAIN ROUTE SELECT * FROM pins",
        1105,
        &["no shard key for table 'pins'"],
    )
    .await;
    refused(
        &mut conn,
        "EXPLAIN ROUTE SELECT * FROM nosuch WHERE id = 1",
        1146,
        &[],
    )
    .await;
}

/// `ENCODE ID ... IN photos` / `DECODE ID ... IN photos` use the photos
/// fleet's time layout (time_ms 62-23, shard 22-10, sequence 9-0); `IN main`
/// answers as the plain commands; an unknown fleet is 1210.
#[tokio::test]
async fn decode_and_encode_ids_in_a_fleet_follow_its_layout() {
    let mut conn = admin(proxy()).await;
    let expected: u64 = (28_735_409_992 << 23) | (3 << 10) | 1;
    let encoded = rows(&mut conn, "ENCODE ID 3 28735409992 1 IN photos").await;
    assert_eq!(number(&encoded[0], "id"), expected);
    let decoded = rows(&mut conn, &format!("DECODE ID {expected} IN photos")).await;
    assert_eq!(
        columns(&decoded[0]),
        ["id", "fleet", "shard", "time_ms", "time", "sequence", "database", "master"]
    );
    let row = &decoded[0];
    assert_eq!(number(row, "shard"), 3);
    assert_eq!(number(row, "time_ms"), 28_735_409_992);
    assert_eq!(number(row, "sequence"), 1);
    assert_eq!(text(row, "database").as_deref(), Some("dbp0003"));
    assert_eq!(text(row, "master"), Some(host(MOD_HOST)));
    assert!(
        text(row, "time").unwrap().starts_with("2026-11-29"),
        "{row:?}"
    );
    // EXPLAIN ROUTE of a point read goes by the ID's shard field.
    let route = common::explain_route_database(
        &mut conn,
        &format!("SELECT data FROM photos WHERE id = {expected}"),
    )
    .await;
    assert_eq!(route.as_deref(), Some("dbp0003"));
    let main = rows(&mut conn, "DECODE ID 241294492511762325 IN main").await;
    assert_eq!(number(&main[0], "shard"), 3429);
    assert_eq!(number(&main[0], "local_id"), 7075733);
    refused(
        &mut conn,
        "DECODE ID 1 IN nosuch",
        1210,
        &["unknown fleet 'nosuch'"],
    )
    .await;
    refused(
        &mut conn,
        "ENCODE ID 3 1 1024 IN photos",
        1210,
        &["sequence 1024 does not fit in an ID: sequence must be 0-1023"],
    )
    .await;
}

#[tokio::test]
async fn decode_and_encode_ids_round_trip() {
    let mut conn = admin(proxy()).await;
    let decoded = rows(&mut conn, "DECODE ID 241294492511762325").await;
    assert_eq!(
        columns(&decoded[0]),
        ["id", "shard", "type_id", "type", "local_id", "fleet", "database", "master"]
    );
    let row = &decoded[0];
    assert_eq!(number(row, "shard"), 3429);
    assert_eq!(number(row, "type_id"), 1);
    assert_eq!(text(row, "type").as_deref(), Some("pin"));
    assert_eq!(number(row, "local_id"), 7075733);
    assert_eq!(text(row, "database").as_deref(), Some("db03429"));
    assert_eq!(text(row, "master"), Some(host(MASTER_B)));

    for command in ["ENCODE ID 3429 1 7075733", "encode id 3429 pin 7075733;"] {
        let encoded = rows(&mut conn, command).await;
        assert_eq!(number(&encoded[0], "id"), 241294492511762325, "{command}");
    }
    let board = rows(&mut conn, "ENCODE ID 12 board 99").await;
    let id = number(&board[0], "id");
    let back = rows(&mut conn, &format!("DECODE ID {id}")).await;
    assert_eq!(number(&back[0], "shard"), 12);
    assert_eq!(text(&back[0], "type").as_deref(), Some("board"));
    assert_eq!(number(&back[0], "local_id"), 99);
    assert_eq!(text(&back[0], "master"), Some(host(MASTER_A)));

    refused(
        &mut conn,
        "ENCODE ID 70000 1 1",
        1210,
        &["shard must be 0-65535"],
    )
    .await;
    let (_, message) = error_of(&mut conn, "ENCODE ID 1 nosuch 1").await;
    for known in ["board=2", "pin=1", "user=3"] {
        assert!(message.contains(known), "{message}");
    }
    let (_, message) = error_of(&mut conn, "ENCODE ID 1 1 68719476736").await;
    assert!(message.contains("local id must be"), "{message}");
    refused(
        &mut conn,
        "DECODE ID 4611686018427387904",
        1210,
        &["reserved top bits"],
    )
    .await;
    refused(
        &mut conn,
        "ENCODE ID 1 2",
        1064,
        &["ENCODE ID <shard> <type> <local id>"],
    )
    .await;
}

#[tokio::test]
async fn unknown_commands_and_bad_arguments_say_what_is_accepted() {
    let mut conn = admin(proxy()).await;
    refused(
        &mut conn,
        "SHOW TABLES",
        1064,
        &[
            "HELP shows their arguments",
            "\n  SHOW SHARDS\n",
            "\n  SHOW SHARD\n",
            "\n  SHOW HOSTS\n",
            "\n  SHOW STATS\n",
            "\n  SHOW DIGESTS\n",
            "\n  RESET DIGESTS\n",
            "\n  SHOW SHARD STATS\n",
            "\n  SHOW CONFIG\n",
            "\n  SHOW PROXIES\n",
            "\n  RELOAD CONFIG\n",
            "\n  EXPLAIN ROUTE\n",
            "\n  DECODE ID\n",
            "\n  ENCODE ID\n",
            "\n  PROMOTE REPLICA\n",
            "\n  PAUSE SHARDS\n",
            "\n  RESUME SHARDS\n",
            "\n  MOVE SHARDS\n",
            "\n  VERIFY FLEET\n",
            "HELP",
        ],
    )
    .await;
    refused(
        &mut conn,
        "PAUSE SHARDS x-3",
        1064,
        &["'x' is not a shard number", "expected: PAUSE SHARDS"],
    )
    .await;

    let help = rows(&mut conn, "help").await;
    assert_eq!(columns(&help[0]), ["command", "answer"]);
    let commands = shardgate::admin::parse::COMMANDS.len();
    assert_eq!(help.len(), commands);
    assert_eq!(
        text(&help[0], "command").as_deref(),
        Some("SHOW SHARDS [LIKE '<pattern>']")
    );
    assert_eq!(rows(&mut conn, "SHOW COMMANDS;").await.len(), commands);

    // Drivers' own queries are answered; prepared statements are not taken.
    let comment: Option<String> = conn
        .query_first("select @@version_comment limit 1")
        .await
        .unwrap();
    assert_eq!(comment.as_deref(), Some("shardgate admin port"));
    let database: Option<Option<String>> = conn.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(database, Some(None));
    conn.query_drop("SET NAMES utf8mb4").await.unwrap();
    let error = conn.exec_drop("SHOW HOSTS", ()).await.unwrap_err();
    assert_eq!(common::server_error(error).0, 1295);
}

#[tokio::test]
async fn each_port_refuses_the_other_ports_accounts() {
    let proxy = proxy();
    let error = common::connect_to(proxy.listening.client, "admin", "admin")
        .await
        .unwrap_err();
    let (code, message) = common::server_error(error);
    assert_eq!(code, 1045);
    assert!(
        message.contains("admin accounts log in on the admin port"),
        "{message}"
    );
    let error = common::connect_to(proxy.listening.client, "admin", "wrong")
        .await
        .unwrap_err();
    let (code, message) = common::server_error(error);
    assert_eq!(code, 1045);
    assert!(!message.contains("admin port"), "{message}");

    for (user, password) in [("app", "app"), ("admin", "wrong"), ("nobody", "")] {
        let error = common::connect_to(admin_addr(proxy), user, password)
            .await
            .unwrap_err();
        let (code, _) = common::server_error(error);
        assert_eq!(code, 1698, "{user} on the admin port");
    }
    let mut app = app(proxy).await;
    let one: Option<u64> = app.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    app.change_user(
        ChangeUserOpts::default()
            .with_user(Some("app".to_owned()))
            .with_pass(Some("app".to_owned())),
    )
    .await
    .expect("COM_CHANGE_USER to a client account");
    let error = app
        .change_user(
            ChangeUserOpts::default()
                .with_user(Some("admin".to_owned()))
                .with_pass(Some("admin".to_owned())),
        )
        .await
        .unwrap_err();
    let (code, message) = common::server_error(error);
    assert_eq!(code, 1045);
    assert!(
        message.contains("admin accounts log in on the admin port"),
        "{message}"
    );
}

#[tokio::test]
async fn the_mariadb_cli_works_on_the_admin_port() {
    let addr = admin_addr(proxy());
    let output = common::mariadb_cli_at(
        addr,
        &["-u", "admin", "-padmin", "-D", "anything"],
        "select @@version_comment limit 1; SELECT DATABASE(); SHOW HOSTS; SHOW SHARD 3429 IN main",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "shardgate admin port");
    assert_eq!(lines[1], "anything", "SELECT DATABASE() after -D anything");
    assert!(
        lines[2].starts_with("127.0.0.1:3307\tmaster main 0-2047\t"),
        "{stdout}"
    );
    assert_eq!(lines.len(), 2 + 4 + 1, "{stdout}");
    assert!(
        lines[6].starts_with("main\t3429\tdb03429\t2048-4095\t127.0.0.1:3308\tNULL\t"),
        "{stdout}"
    );

    let refused = common::mariadb_cli_at(addr, &[], "SHOW HOSTS");
    assert!(!refused.status.success(), "the app account got in");
    let error = common::mariadb_cli_at(addr, &["-u", "admin", "-padmin"], "SHOW NOTHING");
    assert!(!error.status.success());
    let stderr = String::from_utf8_lossy(&error.stderr);
    assert!(stderr.contains("ERROR 1064"), "{stderr}");
    assert!(
        stderr.contains("unknown admin command 'SHOW NOTHING'"),
        "{stderr}"
    );
}

#[tokio::test]
async fn show_stats_counts_statements_per_kind_and_host() {
    let proxy = proxy();
    let mut app = app(proxy).await;
    let id = pin_id(3429, 1);
    app.query_drop(format!("SELECT data FROM pins WHERE id = {id}"))
        .await
        .unwrap();
    drop(app);
    let mut conn = admin(proxy).await;
    let stats = rows(&mut conn, "SHOW STATS").await;
    assert_eq!(
        columns(&stats[0]),
        ["scope", "name", "count", "errors", "p50_ms", "p99_ms"]
    );
    let master_b = stats
        .iter()
        .find(|r| {
            text(r, "scope").as_deref() == Some("host") && text(r, "name") == Some(host(MASTER_B))
        })
        .expect("a row for the host that served the read");
    assert!(number(master_b, "count") >= 1);
    let p50: f64 = master_b.get("p50_ms").unwrap();
    assert!(p50 > 0.0, "p50 {p50}");
    assert!(stats
        .iter()
        .any(|r| text(r, "scope").as_deref() == Some("statement") && number(r, "count") >= 1));
}

#[tokio::test]
async fn pause_holds_a_statement_until_resume() {
    let proxy = proxy();
    let mut conn = admin(proxy).await;
    let paused = rows(&mut conn, "PAUSE SHARDS 7 IN main").await;
    assert_eq!(
        columns(&paused[0]),
        ["fleets", "first", "last", "drained", "waited_ms"]
    );
    assert_eq!(text(&paused[0], "fleets").as_deref(), Some("main"));
    assert_eq!(number(&paused[0], "first"), 7);
    assert_eq!(number(&paused[0], "last"), 7);

    let waiting = tokio::spawn(async move {
        let mut app = app(proxy).await;
        let started = Instant::now();
        let count: Option<u64> = app
            .query_first(format!(
                "SELECT COUNT(*) FROM pins WHERE id = {}",
                pin_id(7, 1)
            ))
            .await
            .unwrap();
        (count, started.elapsed())
    });
    let deadline = Deadline::new(
        "the statement to wait (pause timeout 5 s)",
        Duration::from_secs(4),
    );
    loop {
        let shard = rows(&mut conn, "SHOW SHARD 7 IN main").await;
        let state = text(&shard[0], "paused").unwrap();
        if state == "yes (1 waiting)" {
            break;
        }
        assert!(state.starts_with("yes"), "{state}");
        deadline.retry(state).await;
    }
    let config = rows(&mut conn, "SHOW CONFIG").await;
    let paused_row = config
        .iter()
        .find(|r| text(r, "name").as_deref() == Some("paused"))
        .expect("SHOW CONFIG lists the pause");
    assert!(text(paused_row, "value")
        .unwrap()
        .starts_with("main 7-7 since "));

    let resumed = rows(&mut conn, "RESUME SHARDS 7 IN main").await;
    assert_eq!(number(&resumed[0], "released"), 1);
    let (count, waited) = waiting.await.unwrap();
    assert!(count.is_some());
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    let shard = rows(&mut conn, "SHOW SHARD 7 IN main").await;
    assert_eq!(text(&shard[0], "paused").as_deref(), Some("no"));

    refused(&mut conn, "RESUME SHARDS 7 IN main", 1105, &["7"]).await;
}

#[tokio::test]
async fn verify_fleet_on_the_clean_fleet_finds_no_problem() {
    let mut conn = admin(proxy()).await;
    let report = rows(&mut conn, "VERIFY FLEET").await;
    assert_eq!(
        columns(&report[0]),
        ["host", "database", "problem", "detail"]
    );
    let problems: Vec<String> = report
        .iter()
        .map(|r| {
            format!(
                "{:?} {:?} {:?} {:?}",
                text(r, "host"),
                text(r, "database"),
                text(r, "problem"),
                text(r, "detail")
            )
        })
        .collect();
    assert_eq!(report.len(), 1, "{problems:#?}");
    assert_eq!(text(&report[0], "problem").as_deref(), Some("ok"));
    let detail = text(&report[0], "detail").unwrap();
    assert!(detail.contains("4 hosts checked"), "{detail}");
    assert!(
        detail.contains("tables compared with the schema"),
        "{detail}"
    );
}

#[tokio::test]
async fn promote_replica_of_a_bad_address_is_refused_and_changes_nothing() {
    let mut conn = admin(proxy()).await;
    let message = refused(
        &mut conn,
        "PROMOTE REPLICA 127.0.0.1:9999",
        1105,
        &["127.0.0.1:9999"],
    )
    .await;
    assert!(message.starts_with("PROMOTE REPLICA: "), "{message}");
    refused(
        &mut conn,
        "PROMOTE REPLICA '127.0.0.1:3308'",
        1105,
        &["127.0.0.1:3308"],
    )
    .await;
    let shard = rows(&mut conn, "SHOW SHARD 3429 IN main").await;
    assert_eq!(text(&shard[0], "master"), Some(host(MASTER_B)));
    let low = rows(&mut conn, "SHOW SHARD 0 IN main").await;
    assert_eq!(text(&low[0], "master"), Some(host(MASTER_A)));
}

#[tokio::test]
async fn reload_config_reports_ok_or_every_error_and_show_config_keeps_it() {
    let proxy = common::start_server("admin-reload", &common::test_config_yaml());
    let mut conn = admin(&proxy).await;
    let before = rows(&mut conn, "SHOW CONFIG").await;
    assert_eq!(columns(&before[0]), ["name", "value"]);
    let value = |rows: &[Row], name: &str| {
        rows.iter()
            .find(|r| text(r, "name").as_deref() == Some(name))
            .and_then(|r| text(r, "value"))
    };
    assert_eq!(
        value(&before, "source"),
        Some(proxy.config_path.display().to_string())
    );
    let version = value(&before, "version").unwrap();
    assert_eq!(version.len(), 32);
    assert!(value(&before, "loaded_at").unwrap().ends_with(" UTC"));

    let reloaded = rows(&mut conn, "RELOAD CONFIG").await;
    assert_eq!(columns(&reloaded[0]), ["result", "version", "changes"]);
    assert_eq!(text(&reloaded[0], "result").as_deref(), Some("unchanged"));
    assert_eq!(text(&reloaded[0], "version"), Some(version.clone()));

    let good = std::fs::read_to_string(&proxy.config_path).unwrap();
    let bad = good.replace("master: 127.0.0.1:3308", "master: 127.0.0.1:notaport");
    assert_ne!(bad, good);
    common::write_config(&proxy.config_path, &bad);
    let message = refused(
        &mut conn,
        "RELOAD CONFIG",
        1105,
        &["notaport", &format!("version {version}")],
    )
    .await;
    assert!(message.starts_with("RELOAD CONFIG: "), "{message}");
    let after = rows(&mut conn, "SHOW CONFIG").await;
    assert_eq!(value(&after, "version"), Some(version.clone()));
    let result = value(&after, "last_reload_result").unwrap();
    assert!(result.starts_with("refused"), "{result}");
    assert!(result.contains("notaport"), "{result}");
    let shard = rows(&mut conn, "SHOW SHARD 3429 IN main").await;
    assert_eq!(text(&shard[0], "master"), Some(host(MASTER_B)));

    common::write_config(&proxy.config_path, &good);
    let restored = rows(&mut conn, "RELOAD CONFIG").await;
    assert_eq!(text(&restored[0], "version"), Some(version));
    let after = rows(&mut conn, "SHOW CONFIG").await;
    assert!(value(&after, "last_reload_result")
        .unwrap()
        .starts_with("ok"));
}

/// Logs in on the admin port the way a client whose default plugin is
/// `caching_sha2_password` does (MySQL 8's `mysql`, Connector/Python with
/// `auth_plugin`): its first answer to the native challenge is the 32-byte
/// SHA-256 scramble. Returns the server's reply packet.
async fn caching_sha2_login(password: &[u8]) -> Vec<u8> {
    use mysql_common::constants::CapabilityFlags;
    use mysql_common::io::ParseBuf;
    use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
    use mysql_common::proto::{MyDeserialize, MySerialize};
    use shardgate::protocol::{FrameReader, FrameWriter};

    let stream = tokio::net::TcpStream::connect(admin_addr(proxy()))
        .await
        .unwrap();
    let (r, w) = stream.into_split();
    let mut reader = FrameReader::new(r);
    let mut writer = FrameWriter::new(w);
    let (seq, payload) = reader.next_packet().await.unwrap();
    let handshake = HandshakePacket::deserialize((), &mut ParseBuf(&payload)).unwrap();
    let scramble = mysql_common::scramble::scramble_sha256(&handshake.nonce(), password)
        .expect("a non-empty password");
    let response = HandshakeResponse::new(
        Some(scramble.to_vec()),
        (8, 0, 36),
        Some(&b"admin"[..]),
        None::<&[u8]>,
        Some(AuthPlugin::CachingSha2Password),
        CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH
            | CapabilityFlags::CLIENT_DEPRECATE_EOF,
        None,
        16 * 1024 * 1024,
    );
    let mut body = Vec::new();
    response.serialize(&mut body);
    writer.write_packet(seq + 1, &body).await.unwrap();
    writer.flush().await.unwrap();
    reader.next_packet().await.unwrap().1
}

#[tokio::test]
async fn a_caching_sha2_first_answer_logs_in_with_the_right_password_only() {
    let accepted = caching_sha2_login(b"admin").await;
    assert_eq!(accepted[0], 0x00, "OK expected: {accepted:?}");
    let refused = caching_sha2_login(b"wrong").await;
    assert_eq!(refused[0], 0xFF, "ERR expected: {refused:?}");
    assert_eq!(u16::from_le_bytes([refused[1], refused[2]]), 1698);
}
