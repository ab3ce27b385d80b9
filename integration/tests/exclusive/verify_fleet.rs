//! VERIFY FLEET against the real fleet (`integration/fleet.sh start` +
//! `fleet init`): a clean fleet has no problem; an orphan database, a
//! missing table, an unexpected table and an added column are each reported
//! exactly (and always undone, by a drop guard); a missing database, an
//! unreachable host and a promoted replica are checked with configs of
//! their own (no writes); `shardgate fleet verify` prints a line per
//! problem and fails when there is one.
//!
//! Only shards nobody else's tests use heavily are touched: db03000 on 3307
//! (an orphan: 3308 owns shard 3000; 3309 replicates it from 3307), and
//! db04091-db04093 on 3308.

use crate::common;

use std::process::{Command, Output};
use std::time::Duration;

use common::{
    config_path, database_exists, repo_root, topology, Deadline, FLEET, OPS_PASSWORD, OPS_USER,
};
use shardgate::ops::{kind, verify_with_schema, Problem, VerifyReport};
use shardgate::topology::Topology;

const A: &str = "127.0.0.1:3307";
const B: &str = "127.0.0.1:3308";
const REPLICA: &str = "127.0.0.1:3309";
/// Every host of the local fleet.
const FLEET_HOSTS: [&str; 4] = [A, B, REPLICA, "127.0.0.1:3310"];
/// Where the missing table is kept meanwhile (not a shard database name).
const SCRATCH: &str = "shardgate_verify_scratch";

fn schema() -> String {
    std::fs::read_to_string(repo_root().join("config/schema.sql")).unwrap()
}

/// Verifies with the schema, waiting out another test's stopped host
/// (the health tests stop 3308 for a few seconds).
async fn verify_settled(topology: &Topology) -> VerifyReport {
    let schema = schema();
    let deadline = Deadline::new("the fleet's hosts to be reachable", Duration::from_secs(30))
        .every(Duration::from_millis(500));
    loop {
        let report = verify_with_schema(topology, Some(&schema))
            .await
            .expect("verify");
        let unreachable_fleet_host = report
            .problems()
            .iter()
            .any(|p| p.kind == kind::UNREACHABLE_HOST && FLEET_HOSTS.contains(&p.host.as_str()));
        if !unreachable_fleet_host || deadline.passed() {
            eprintln!("{report}");
            return report;
        }
        deadline.pause().await;
    }
}

/// `(host, database, kind)` of every problem.
fn rows(report: &VerifyReport) -> Vec<(String, String, &'static str)> {
    report
        .problems()
        .into_iter()
        .map(|p| (p.host, p.database, p.kind))
        .collect()
}

fn row(host: &str, database: &str, kind: &'static str) -> (String, String, &'static str) {
    (host.to_string(), database.to_string(), kind)
}

/// Runs SQL straight on a backend with the `mariadb` CLI (stops at the
/// first error), as the operations account (the damage is DDL).
fn backend_sql(host: &str, sql: &str) -> Output {
    let port = host.rsplit_once(':').unwrap().1;
    Command::new("mariadb")
        .args(["-h127.0.0.1", "-P", port, "-u", OPS_USER])
        .arg(format!("-p{OPS_PASSWORD}"))
        .args(["-e", sql])
        .output()
        .expect("run the mariadb CLI")
}

fn backend_ok(host: &str, sql: &str) {
    let out = backend_sql(host, sql);
    assert!(
        out.status.success(),
        "{host}: {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until `database` is (or is not) on the host at `port`.
async fn wait_database(port: u16, database: &str, present: bool) {
    let [state, other] = if present {
        ["present", "absent"]
    } else {
        ["absent", "present"]
    };
    let deadline = Deadline::new(
        format!("{database} {state} on {port}"),
        Duration::from_secs(20),
    )
    .every(Duration::from_millis(100));
    while database_exists(port, database).await != present {
        deadline.retry(other).await;
    }
}

/// The damage done to the fleet; dropping it undoes every piece, each step
/// idempotent (so a run interrupted earlier is repaired by the next one).
struct Damage;

impl Damage {
    const UNDO: [(&'static str, &'static str); 4] = [
        (A, "DROP DATABASE IF EXISTS db03000"),
        (
            B,
            "RENAME TABLE IF EXISTS shardgate_verify_scratch.boards TO db04091.boards; \
             DROP DATABASE IF EXISTS shardgate_verify_scratch",
        ),
        (B, "DROP TABLE IF EXISTS db04092.verify_unexpected"),
        (
            B,
            "ALTER TABLE db04093.users DROP COLUMN IF EXISTS verify_added",
        ),
    ];

    fn repair() {
        for (host, sql) in Self::UNDO {
            let out = backend_sql(host, sql);
            if !out.status.success() {
                eprintln!(
                    "undo on {host} failed: {sql}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }

    fn make() -> Damage {
        Self::repair();
        let damage = Damage;
        backend_ok(A, "CREATE DATABASE db03000");
        backend_ok(
            B,
            &format!("CREATE DATABASE {SCRATCH}; RENAME TABLE db04091.boards TO {SCRATCH}.boards"),
        );
        backend_ok(B, "CREATE TABLE db04092.verify_unexpected (x INT)");
        backend_ok(B, "ALTER TABLE db04093.users ADD COLUMN verify_added INT");
        damage
    }
}

impl Drop for Damage {
    fn drop(&mut self) {
        Self::repair();
    }
}

fn run_cli(config: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["fleet", "verify", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run shardgate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_fleet_then_each_problem_reported_exactly_then_restored() {
    let _fleet = FLEET.lock().await;
    Damage::repair();
    wait_database(3309, "db03000", false).await;
    let topology = topology();

    let clean = verify_settled(&topology).await;
    assert!(clean.is_ok(), "{:#?}", clean.problems());
    assert!(clean.schema_compared);
    assert_eq!(
        clean.expected,
        topology
            .fleets
            .iter()
            .map(|f| f.shard_count as usize)
            .sum::<usize>()
    );
    assert_eq!(clean.hosts_checked, 4);
    let out = run_cli(&config_path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with(&format!(
            "fleet verify: 4 hosts checked, {} shard databases expected, tables compared with the schema: ok",
            clean.expected
        )),
        "{stdout}"
    );

    let damage = Damage::make();
    wait_database(3309, "db03000", true).await;
    let report = verify_settled(&topology).await;
    assert_eq!(
        rows(&report),
        [
            row(A, "db03000", kind::ORPHAN_DATABASE),
            row(B, "db04091", kind::MISSING_TABLE),
            row(B, "db04092", kind::UNEXPECTED_TABLE),
            row(B, "db04093", kind::COLUMNS_DIFFER),
            row(REPLICA, "db03000", kind::ORPHAN_DATABASE),
        ],
        "{:#?}",
        report.problems()
    );
    let details: Vec<String> = report.problems().into_iter().map(|p| p.detail).collect();
    assert!(
        details[0].starts_with("shard 3000 of fleet main belongs on 127.0.0.1:3308"),
        "{}",
        details[0]
    );
    assert!(!details[0].contains("replicated copy"), "{}", details[0]);
    assert!(
        details[1].starts_with("`boards` (schema line "),
        "{}",
        details[1]
    );
    assert_eq!(details[2], "`verify_unexpected` is not in the schema");
    assert_eq!(
        details[3],
        "`users`: not in the schema: `verify_added` (position 4); \
         expected (local_id, data, ts), found (local_id, data, ts, verify_added)"
    );
    assert!(
        details[4].contains("a replicated copy: 127.0.0.1:3307 (whose replica this is) has it too"),
        "{}",
        details[4]
    );
    assert_eq!(report.count(kind::ORPHAN_DATABASE), 2);

    // The CLI: a line per problem, then the summary on stderr, exit 1.
    let out = run_cli(&config_path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let expected: Vec<String> = report.problems().iter().map(Problem::to_string).collect();
    assert_eq!(lines, expected, "{stdout}");
    assert!(
        lines[0].starts_with("127.0.0.1:3307 db03000: orphan database: shard 3000"),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "5 problems (1 columns differ, 1 missing table, 2 orphan database, 1 unexpected table)"
        ),
        "{stderr}"
    );

    drop(damage);
    wait_database(3309, "db03000", false).await;
    assert!(!database_exists(3307, "db03000").await);
    assert!(!database_exists(3308, SCRATCH).await);
    let restored = verify_settled(&topology).await;
    assert!(restored.is_ok(), "{:#?}", restored.problems());
}

/// `config/shardgate.yaml` with text replaced.
fn config_with(replace: &[(&str, &str)]) -> Topology {
    let mut yaml = std::fs::read_to_string(config_path()).unwrap();
    for (from, to) in replace {
        assert!(yaml.contains(from), "{from}");
        yaml = yaml.replace(from, to);
    }
    Topology::from_yaml_str(&yaml, "verify test").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_databases_and_an_unreachable_host() {
    let _fleet = FLEET.lock().await;
    // A fleet nobody created, on 3308; the mod fleet on a port nothing listens on.
    let topology = config_with(&[
        (
            "  mod:\n",
            "  extra:\n    shards: 2\n    database: \"vfx{:05}\"\n    hosts:\n      - { range: [0, 1], master: 127.0.0.1:3308 }\n  mod:\n",
        ),
        ("master: 127.0.0.1:3310", "master: 127.0.0.1:1"),
    ]);
    let report = verify_settled(&topology).await;
    assert_eq!(
        rows(&report),
        [
            row("127.0.0.1:1", "", kind::UNREACHABLE_HOST),
            row(B, "vfx00000", kind::MISSING_DATABASE),
            row(B, "vfx00001", kind::MISSING_DATABASE),
        ],
        "{:#?}",
        report.problems()
    );
    let problems = report.problems();
    assert!(
        problems[0].detail.contains("cannot connect to 127.0.0.1:1"),
        "{}",
        problems[0].detail
    );
    assert_eq!(
        problems[1].detail,
        "shard 0 of fleet extra (range 0-1) is served by this host (`shardgate fleet init` creates it)"
    );
    assert_eq!(
        report.expected,
        topology
            .fleets
            .iter()
            .map(|f| f.shard_count as usize)
            .sum::<usize>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promoted_replica_is_a_clean_master_and_a_stale_old_master_holds_orphans() {
    let _fleet = FLEET.lock().await;
    // After PROMOTE REPLICA 127.0.0.1:3307: 3309 serves 0-2047, 3307 is gone.
    let promoted = config_with(&[(
        "master: 127.0.0.1:3307, replica: 127.0.0.1:3309",
        "master: 127.0.0.1:3309",
    )]);
    let report = verify_settled(&promoted).await;
    assert!(report.is_ok(), "{:#?}", report.problems());
    assert_eq!(report.hosts_checked, 3);

    // A move of 1024-2047 to 3309 while 3307 keeps 0-1023: each holds the
    // other half until it is dropped.
    let moved = config_with(&[(
        "      - { range: [0, 2047],    master: 127.0.0.1:3307, replica: 127.0.0.1:3309 }\n",
        "      - { range: [0, 1023],    master: 127.0.0.1:3307 }\n      - { range: [1024, 2047], master: 127.0.0.1:3309 }\n",
    )]);
    let report = verify_settled(&moved).await;
    assert_eq!(report.count(kind::ORPHAN_DATABASE), 2048, "{report}");
    let problems = report.problems();
    assert_eq!(problems.len(), 2048, "{report}");
    assert_eq!(
        (problems[0].host.as_str(), problems[0].database.as_str()),
        (A, "db01024")
    );
    assert_eq!(
        (
            problems[2047].host.as_str(),
            problems[2047].database.as_str()
        ),
        (REPLICA, "db01023")
    );
    assert!(
        problems[0]
            .detail
            .starts_with("shard 1024 of fleet main belongs on 127.0.0.1:3309"),
        "{}",
        problems[0].detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_schema_is_an_error_naming_its_line() {
    let e = verify_with_schema(
        &topology(),
        Some("CREATE TABLE pins (id INT);\nDROP TABLE boards;"),
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "schema line 2: only CREATE TABLE statements are allowed in a schema file, found `DROP TABLE boards`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mod_key_whose_collation_equates_different_keys_is_warned_about() {
    let _fleet = FLEET.lock().await;
    // config/schema.sql makes user_by_email.email utf8mb4 (general_ci):
    // 'A@x.com' and 'a@x.com ' are one key to the server, two hashes to
    // shardgate (redteam F7).
    let report = verify_settled(&topology()).await;
    let warned: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("user_by_email.email"))
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", report.warnings);
    assert!(
        warned[0].contains("utf8mb4_general_ci") && warned[0].contains("127.0.0.1:3310"),
        "{warned:?}"
    );
    assert!(
        report.to_string().contains("warning: mod-shard key"),
        "{report}"
    );
    // The CLI's summary (stdout when the fleet is ok, stderr otherwise).
    let out = run_cli(&config_path());
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains("warning: mod-shard key user_by_email.email"),
        "{printed}"
    );
}

// ------------------------------------------------------------ row verify
//
// `fleet verify --rows` / `VERIFY SHARDS ... ROWS AGAINST`: 3307 against its
// GTID replica 3309 (and the spare 3311, when it runs) on shards 1900-1903
// of fleet main, through tables each test creates on 3307 (so they
// replicate) and drops at the end (which replicates too, whatever was
// planted on 3309 with sql_log_bin=0).

use mysql_async::prelude::Queryable;
use shardgate::ops::{row_kind, verify_rows, RowVerifyReport, RowVerifyRequest};

const ROW_SHARDS: (u32, u32) = (1900, 1903);
const SPARE: &str = "127.0.0.1:3311";

/// Drops `db01900..db01903.<table>` on 3307 (replicated) when dropped, and
/// `extra` statements on other hosts.
struct RowTable {
    table: &'static str,
    extra: Vec<(&'static str, String)>,
}

impl RowTable {
    fn drop_sql(table: &str) -> String {
        (ROW_SHARDS.0..=ROW_SHARDS.1)
            .map(|s| format!("DROP TABLE IF EXISTS db{s:05}.{table};"))
            .collect()
    }

    /// Creates the table in every shard database of [`ROW_SHARDS`] on 3307,
    /// `rows` rows in db01900 and 3 in each other one.
    fn create(table: &'static str, rows: u32) -> RowTable {
        backend_ok(A, &Self::drop_sql(table));
        let guard = RowTable {
            table,
            extra: Vec::new(),
        };
        let mut sql = String::new();
        for shard in ROW_SHARDS.0..=ROW_SHARDS.1 {
            let n = if shard == ROW_SHARDS.0 { rows } else { 3 };
            sql.push_str(&format!(
                "CREATE TABLE db{shard:05}.{table} (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, \
                 v VARCHAR(64) NULL, n INT NULL); \
                 INSERT INTO db{shard:05}.{table} SELECT seq, CONCAT('row ', seq), \
                 IF(seq % 7 = 0, NULL, seq * 3) FROM db{shard:05}.seq_1_to_{n};"
            ));
        }
        backend_ok(A, &sql);
        guard
    }
}

impl Drop for RowTable {
    fn drop(&mut self) {
        for (host, sql) in &self.extra {
            let out = backend_sql(host, sql);
            if !out.status.success() {
                eprintln!(
                    "cleanup on {host} failed: {sql}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        backend_ok(A, &Self::drop_sql(self.table));
    }
}

fn row_request(against: &str) -> RowVerifyRequest {
    let mut request = RowVerifyRequest::new(ROW_SHARDS.0, ROW_SHARDS.1, against);
    request.fleet = Some("main".to_owned());
    request.max_rows_per_second = 0;
    request
}

async fn verify_rows_ok(request: &RowVerifyRequest) -> RowVerifyReport {
    let report = verify_rows(&topology(), request)
        .await
        .expect("verify rows");
    eprintln!("{report}");
    for difference in &report.differences {
        eprintln!("  {difference}");
    }
    report
}

/// A difference as `(shard, kind, missing, extra, changed)`.
type Found = (u32, &'static str, Vec<String>, Vec<String>, Vec<String>);

/// The differences of `table`.
fn differences_of(report: &RowVerifyReport, table: &str) -> Vec<Found> {
    report
        .differences
        .iter()
        .filter(|d| d.table == table)
        .map(|d| {
            (
                d.shard,
                d.kind,
                d.keys.missing_on_target.clone(),
                d.keys.extra_on_target.clone(),
                d.keys.changed.clone(),
            )
        })
        .collect()
}

fn strings(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_a_replica_in_sync_then_planted_differences_named() {
    let _fleet = FLEET.lock().await;
    let table = "verify_rows_plant";
    let _guard = RowTable::create(table, 2500);

    let report = verify_rows_ok(&row_request(REPLICA)).await;
    assert!(report.is_ok(), "{report}");
    assert!(report.target_replicates);
    assert_eq!(report.databases, 4);
    // 2500 rows in chunks of 1000 (3 chunks) and every other table.
    assert!(report.chunks >= 3 + 4 * 5, "{report}");
    assert!(report.rows >= 2500 + 9, "{report}");

    // On the replica only: a changed row, a deleted row, an extra row (in
    // the last, open chunk), and a changed row in another shard.
    backend_ok(
        REPLICA,
        &format!(
            "SET SESSION sql_log_bin = 0; \
             UPDATE db01900.{table} SET v = 'planted' WHERE id = 17; \
             DELETE FROM db01900.{table} WHERE id = 1500; \
             INSERT INTO db01900.{table} VALUES (999999, 'extra', NULL); \
             UPDATE db01902.{table} SET n = NULL WHERE id = 2;"
        ),
    );
    let report = verify_rows_ok(&row_request(REPLICA)).await;
    assert!(!report.is_ok());
    let mut found = differences_of(&report, table);
    found.sort();
    assert_eq!(
        found,
        vec![
            (
                1900,
                row_kind::ROWS_DIFFER,
                vec![],
                vec![],
                strings(&["17"])
            ),
            (
                1900,
                row_kind::ROWS_DIFFER,
                vec![],
                strings(&["999999"]),
                vec![]
            ),
            (
                1900,
                row_kind::ROWS_DIFFER,
                strings(&["1500"]),
                vec![],
                vec![]
            ),
            (1902, row_kind::ROWS_DIFFER, vec![], vec![], strings(&["2"])),
        ],
        "{report}"
    );
    assert_eq!(
        report.differences.len(),
        4,
        "only the planted rows: {report}"
    );
    // Each was re-read, and pinned at the source's GTID point, before it was reported.
    assert!(report.pinned_reads >= 4, "{report}");
    let ranges: Vec<&str> = report
        .differences
        .iter()
        .map(|d| d.key_range.as_str())
        .collect();
    assert!(ranges.contains(&"(-inf, 1000]"), "{ranges:?}");
    assert!(ranges.contains(&"(1000, 2000]"), "{ranges:?}");
    assert!(ranges.contains(&"(2000, +inf)"), "{ranges:?}");
    let (running, status) = common::replication_running(3309).await;
    assert!(
        running,
        "the pinned reads left replication stopped: {status}"
    );

    // The CLI: a line per difference, exit status 1.
    let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args([
            "fleet",
            "verify",
            "--rows",
            "--shards",
            "1900-1903",
            "--fleet",
            "main",
        ])
        .args([
            "--against",
            REPLICA,
            "--max-rows-per-second",
            "0",
            "--config",
        ])
        .arg(config_path())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run shardgate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    for line in [
        format!("shard 1900 db01900.{table}: rows differ in keys (-inf, 1000]: 1 changed: 17"),
        format!("shard 1900 db01900.{table}: rows differ in keys (1000, 2000]: 1 missing on target: 1500"),
        format!("shard 1900 db01900.{table}: rows differ in keys (2000, +inf): 1 extra on target: 999999"),
        format!("shard 1902 db01902.{table}: rows differ in keys (-inf, +inf): 1 changed: 2"),
    ] {
        assert!(stdout.contains(&line), "{line} missing from {stdout}");
    }
    assert!(stderr.contains("4 differences"), "{stderr}");

    // The admin port: a row per difference.
    let proxy = common::start_server("verify-rows", &common::test_config_yaml());
    let mut admin = common::admin(&proxy).await;
    let rows: Vec<(u64, String, String, String, Option<String>, String)> = admin
        .query("VERIFY SHARDS 1900-1903 IN main ROWS AGAINST 127.0.0.1:3309 MAX 0 ROWS PER SECOND")
        .await
        .expect("VERIFY SHARDS ROWS");
    let mine: Vec<_> = rows.iter().filter(|r| r.2 == table).collect();
    assert_eq!(mine.len(), 4, "{rows:?}");
    assert!(
        mine.contains(&&(
            1900,
            "db01900".to_owned(),
            table.to_owned(),
            "rows differ".to_owned(),
            Some("(1000, 2000]".to_owned()),
            "1 missing on target: 1500".to_owned()
        )),
        "{rows:?}"
    );
    let error = admin
        .query_drop("VERIFY SHARDS 1900-2100 IN main ROWS AGAINST 127.0.0.1:3309")
        .await
        .unwrap_err();
    let (code, message) = common::server_error(error);
    assert_eq!(code, 1210, "{message}");
    assert!(message.contains("several masters"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_under_a_concurrent_writer_show_no_false_difference() {
    let _fleet = FLEET.lock().await;
    let table = "verify_rows_load";
    let _guard = RowTable::create(table, 3000);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut conn = common::operations(3307).await;
            let mut ops = 0u64;
            let mut next = 100_000u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let k = (ops * 37) % 3000 + 1;
                let sql = match ops % 3 {
                    0 => format!("UPDATE db01900.{table} SET v = CONCAT('w', {ops}), n = {ops} WHERE id = {k}"),
                    1 => {
                        next += 1;
                        format!("INSERT INTO db01900.{table} VALUES ({next}, 'new', {ops}), ({}, 'mid', 1) \
                                 ON DUPLICATE KEY UPDATE n = n + 1", 500 + ops % 2000)
                    }
                    _ => format!("DELETE FROM db01900.{table} WHERE id = {}; \
                                  UPDATE db01901.{table} SET n = {ops} WHERE id = 2", (ops * 53) % 3000 + 1),
                };
                conn.query_drop(sql).await.expect("write through 3307");
                ops += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            ops
        })
    };
    let mut request = row_request(REPLICA);
    request.chunk_rows = 250;
    let mut reports = Vec::new();
    for _ in 0..3 {
        reports.push(verify_rows_ok(&request).await);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let ops = writer.await.expect("writer");
    eprintln!("writer: {ops} statements during the verifies");
    assert!(ops > 100, "the writer hardly ran: {ops}");
    for report in &reports {
        assert!(report.is_ok(), "a false difference under writes: {report}");
        assert!(report.chunks >= 12, "{report}");
    }
    let (running, status) = common::replication_running(3309).await;
    assert!(running, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_max_rows_per_second_holds_the_rate() {
    let _fleet = FLEET.lock().await;
    let table = "verify_rows_rate";
    let _guard = RowTable::create(table, 3000);
    let unlimited = verify_rows_ok(&row_request(REPLICA)).await;
    assert!(unlimited.is_ok(), "{unlimited}");
    let mut request = row_request(REPLICA);
    request.max_rows_per_second = 1000;
    let limited = verify_rows_ok(&request).await;
    assert!(limited.is_ok(), "{limited}");
    assert!(limited.rows >= 3000, "{limited}");
    let floor = Duration::from_secs_f64(limited.rows as f64 / 1000.0);
    assert!(
        limited.elapsed >= floor,
        "{} rows in {:?}, under the {floor:?} 1000 rows/s allows",
        limited.rows,
        limited.elapsed
    );
    assert!(limited.rows_per_second() <= 1000.0, "{limited}");
    assert!(
        limited.elapsed > unlimited.elapsed,
        "{unlimited} / {limited}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_a_copy_on_the_spare_server() {
    let _fleet = FLEET.lock().await;
    let spare_up = || {
        mysql_async::Conn::new(
            mysql_async::OptsBuilder::default()
                .ip_or_hostname("127.0.0.1")
                .tcp_port(3311)
                .user(Some(OPS_USER))
                .pass(Some(OPS_PASSWORD)),
        )
    };
    if spare_up().await.is_err() {
        // Created empty and started on first use; `fleet.sh stop` stops it.
        tokio::task::spawn_blocking(|| common::fleet_script(&["start-host", "3311"]))
            .await
            .expect("start-host 3311");
        spare_up().await.expect("the spare server 3311 answers");
    }
    let table = "verify_rows_copy";
    let mut guard = RowTable::create(table, 1200);
    guard
        .extra
        .push((SPARE, "DROP DATABASE IF EXISTS db01901".to_owned()));
    backend_ok(SPARE, "DROP DATABASE IF EXISTS db01901");
    let copy = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; mariadb-dump -h127.0.0.1 -P3307 -u{OPS_USER} -p{OPS_PASSWORD} \
             --single-transaction --databases db01901 | mariadb -h127.0.0.1 -P3311 -u{OPS_USER} -p{OPS_PASSWORD}"
        ))
        .output()
        .expect("run mariadb-dump");
    assert!(
        copy.status.success(),
        "copy to 3311: {}{}",
        String::from_utf8_lossy(&copy.stdout),
        String::from_utf8_lossy(&copy.stderr)
    );
    let mut request = row_request(SPARE);
    (request.first, request.last) = (1901, 1901);
    let report = verify_rows_ok(&request).await;
    assert!(report.is_ok(), "{report}");
    assert!(!report.target_replicates);
    assert!(report.tables >= 6, "{report}");

    backend_ok(
        SPARE,
        &format!("UPDATE db01901.{table} SET v = 'changed' WHERE id = 3"),
    );
    let report = verify_rows_ok(&request).await;
    assert_eq!(
        differences_of(&report, table),
        vec![(1901, row_kind::ROWS_DIFFER, vec![], vec![], strings(&["3"]))],
        "{report}"
    );
    // Not on the spare at all: every table missing.
    (request.first, request.last) = (1902, 1902);
    let report = verify_rows_ok(&request).await;
    assert!(
        report
            .differences
            .iter()
            .any(|d| d.table == table && d.kind == row_kind::MISSING_TABLE),
        "{report}"
    );
}
