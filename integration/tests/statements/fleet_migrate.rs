//! `shardgate fleet migrate`, the real binary, on a scratch table of the
//! test's own in the first 16 shard databases of the main fleet (a config
//! of 16 shards on master A, so the shared fleet's tables are never
//! changed and the scratch table exists only for the test's few seconds):
//! a dry run changes nothing, a run stopped by `--limit` resumes from its
//! state file, a failing shard is reported with its reason and a non-zero
//! exit, the final definition check, and the cleanup.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use mysql_async::prelude::Queryable;

const SHARDS: u32 = 16;

/// A config whose fleet `main` is the first 16 shard databases of master A.
fn small_config(dir: &Path) -> PathBuf {
    let yaml = format!(
        r#"listen: 127.0.0.1:0
users: [{{ name: app, password: app }}]
backend: {{ user: {BACKEND_USER}, password: {BACKEND_PASSWORD} }}
operations: {{ user: {OPS_USER}, password: {OPS_PASSWORD} }}
types: {{ pin: 1 }}
fleets:
  main:
    shards: {SHARDS}
    database: "db{{:05}}"
    hosts:
      - {{ range: [0, {last}], master: 127.0.0.1:{MASTER_A} }}
tables:
  pins: {{ fleet: main, object: pin }}
"#,
        last = SHARDS - 1
    );
    let path = dir.join("small.yaml");
    write_config(&path, &yaml);
    path
}

/// Runs `shardgate fleet migrate` with `args` in `dir`.
fn migrate(dir: &Path, config: &Path, args: &[&str]) -> Output {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .current_dir(dir)
        .args(["fleet", "migrate", "--config"])
        .arg(config)
        .args(["--fleet", "main"])
        .args(args)
        .output()
        .expect("run shardgate fleet migrate");
    eprintln!(
        "fleet migrate {args:?}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The columns of `table` in every one of the 16 shard databases (empty:
/// no such table there).
async fn columns_by_shard(table: &str) -> Vec<Vec<String>> {
    let mut ops = operations(MASTER_A).await;
    let mut all = Vec::new();
    for shard in 0..SHARDS {
        let columns: Vec<String> = ops
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                (format!("db{shard:05}"), table),
            )
            .await
            .expect("information_schema.COLUMNS");
        all.push(columns);
    }
    ops.disconnect().await.ok();
    all
}

fn same_everywhere(columns: &[&str]) -> Vec<Vec<String>> {
    vec![columns.iter().map(|c| c.to_string()).collect(); SHARDS as usize]
}

#[tokio::test]
async fn migrate_a_scratch_table_on_every_shard() {
    let table = format!("ddl_mig_{}", std::process::id());
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("fleet-migrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test directory");
    let config = small_config(&dir);
    let create = format!("CREATE TABLE IF NOT EXISTS {table} (id INT PRIMARY KEY)");

    // A dry run prints the plan and changes nothing.
    let dry = migrate(&dir, &config, &["--sql", &create, "--dry-run"]);
    assert!(dry.status.success());
    let plan = text(&dry);
    assert!(plan.contains("16 shard databases on 1 hosts"), "{plan}");
    assert!(plan.contains("(db00000 .. db00015), 16 to do"), "{plan}");
    assert!(
        plan.contains(&format!("USE `db00000`; then {create}")),
        "{plan}"
    );
    assert_eq!(columns_by_shard(&table).await, same_everywhere(&[]));

    // The scratch table on every shard.
    let created = migrate(&dir, &config, &["--sql", &create]);
    assert!(created.status.success(), "{}", text(&created));
    assert_eq!(columns_by_shard(&table).await, same_everywhere(&["id"]));

    // Stopped after 5 shards (as an interruption would): non-zero, the
    // state file kept, 5 shards changed; the rerun does the 11 others.
    let add = format!("ALTER TABLE {table} ADD COLUMN v INT");
    let state = dir.join("add.state");
    let state_arg = state.to_str().expect("utf-8 path");
    let stopped = migrate(
        &dir,
        &config,
        &["--sql", &add, "--state", state_arg, "--limit", "5"],
    );
    assert!(!stopped.status.success());
    assert!(text(&stopped).contains("11 left"), "{}", text(&stopped));
    let changed = columns_by_shard(&table)
        .await
        .iter()
        .filter(|c| c.len() == 2)
        .count();
    assert_eq!(changed, 5);
    let resumed = migrate(&dir, &config, &["--sql", &add, "--state", state_arg]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let out = text(&resumed);
    assert!(
        out.contains("11 applied, 0 already applied, 5 done before"),
        "{out}"
    );
    assert!(out.contains("is the same in every shard database"), "{out}");
    assert!(out.contains("`v` int(11) DEFAULT NULL"), "{out}");
    assert!(!state.exists(), "the state file is removed when complete");
    assert_eq!(
        columns_by_shard(&table).await,
        same_everywhere(&["id", "v"])
    );

    // Run again without a state file: every shard says "duplicate column"
    // and none applied the statement, so there is no definition to compare
    // with (a `v BIGINT` would meet the same errors): none counts as
    // applied.
    let again_state = dir.join("again.state");
    let again = migrate(
        &dir,
        &config,
        &[
            "--sql",
            &add,
            "--state",
            again_state.to_str().expect("utf-8 path"),
        ],
    );
    assert!(!again.status.success(), "{}", text(&again));
    let out = text(&again);
    assert!(out.contains("0 applied, 0 already applied"), "{out}");
    assert!(out.contains("16 failed"), "{out}");
    assert!(
        out.contains("no shard database applied the statement"),
        "{out}"
    );

    // Failing shards: db00003 has no table (1146), db00004 already has a
    // `w` of another type (1060, and a definition that differs).
    let mut ops = operations(MASTER_A).await;
    ops.query_drop(format!("DROP TABLE db00003.{table}"))
        .await
        .expect("drop on one shard");
    ops.query_drop(format!("ALTER TABLE db00004.{table} ADD COLUMN w TEXT"))
        .await
        .expect("a conflicting column on one shard");
    let add_w = format!("ALTER TABLE {table} ADD COLUMN w INT");
    let failed = migrate(&dir, &config, &["--sql", &add_w]);
    assert!(!failed.status.success());
    let out = text(&failed);
    assert!(
        out.contains("14 applied, 0 already applied, 0 done before, 2 failed"),
        "{out}"
    );
    assert!(
        out.contains("failed: db00003 on 127.0.0.1:3307: 1146"),
        "{out}"
    );
    assert!(
        out.contains("failed: db00004 on 127.0.0.1:3307: 1060")
            && out.contains("not counted as already applied"),
        "{out}"
    );
    assert!(out.contains("state file"), "{out}");

    // Repaired by hand, the rerun finishes the two and the check passes.
    ops.query_drop(format!(
        "CREATE TABLE db00003.{table} (id INT PRIMARY KEY, v INT)"
    ))
    .await
    .expect("repair db00003");
    ops.query_drop(format!("ALTER TABLE db00004.{table} DROP COLUMN w"))
        .await
        .expect("repair db00004");
    ops.disconnect().await.ok();
    let finished = migrate(&dir, &config, &["--sql", &add_w]);
    assert!(finished.status.success(), "{}", text(&finished));
    assert!(text(&finished).contains("2 applied, 0 already applied, 14 done before"));
    assert_eq!(
        columns_by_shard(&table).await,
        same_everywhere(&["id", "v", "w"])
    );

    // Cleanup: the scratch table dropped everywhere.
    let drop = format!("DROP TABLE {table}");
    let dropped = migrate(&dir, &config, &["--sql", &drop]);
    assert!(dropped.status.success(), "{}", text(&dropped));
    assert_eq!(columns_by_shard(&table).await, same_everywhere(&[]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn unplannable_migrations_are_refused_before_anything_runs() {
    let dir = repo_root()
        .join("target/test-configs")
        .join(format!("fleet-migrate-refused-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test directory");
    let config = small_config(&dir);
    for (sql, needle) in [
        ("ALTER TABLE db00001.pins ADD COLUMN x INT", "qualified"),
        ("SELECT 1", "not a table schema change"),
        ("ALTER TABLE pins ADD COLUMN", "syntax"),
    ] {
        let output = migrate(&dir, &config, &["--sql", sql]);
        assert!(!output.status.success(), "{sql}");
        assert!(text(&output).contains(needle), "{sql}: {}", text(&output));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
