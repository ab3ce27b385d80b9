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
    assert_eq!(clean.expected, 8192);
    assert_eq!(clean.hosts_checked, 4);
    let out = run_cli(&config_path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("fleet verify: 4 hosts checked, 8192 shard databases expected, tables compared with the schema: ok"),
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
    assert_eq!(report.expected, 8194);
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
