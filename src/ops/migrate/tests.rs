//! The pure parts of `fleet migrate`: plans, state files, definitions.

use super::state::{read_state, StateFile};
use super::*;

#[test]
fn auto_increment_counters_are_not_definitions() {
    assert_eq!(
        without_auto_increment(
            "CREATE TABLE `t` (\n  `a` int NOT NULL AUTO_INCREMENT\n) ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4"
        ),
        "CREATE TABLE `t` (\n  `a` int NOT NULL AUTO_INCREMENT\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    );
}

#[test]
fn the_state_file_belongs_to_one_migration() {
    let dir = std::env::temp_dir().join(format!("sg-migrate-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("state");
    let _ = std::fs::remove_file(&path);
    let sql = "ALTER TABLE t ADD COLUMN x INT -- a\nnote";
    assert!(read_state(&path, "main", sql).unwrap().is_empty());
    let state = StateFile::open(&path, "main", sql).unwrap();
    state.done("db00001").unwrap();
    state.done("db00007").unwrap();
    drop(state);
    let done = read_state(&path, "main", sql).unwrap();
    assert_eq!(done.len(), 2);
    assert!(done.contains("db00007"));
    let other = read_state(&path, "main", "ALTER TABLE t ADD COLUMN y INT").unwrap_err();
    assert!(other.to_string().contains("another migration"), "{other}");
    assert!(read_state(&path, "mod", sql).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn plans_name_the_fleet_and_its_shards() {
    let topology = crate::topology::tests::load(crate::topology::tests::SPEC_YAML);
    let mut options = MigrateOptions::new("ALTER TABLE user_by_email ADD COLUMN x INT");
    options.state = Some(std::env::temp_dir().join("sg-migrate-none.state"));
    let plan = plan(&topology, &options).unwrap();
    assert_eq!(plan.fleet.1, "mod");
    assert_eq!(plan.shards(), 4096);
    assert_eq!(plan.hosts.len(), 1);
    let text = plan.to_string();
    assert!(text.contains("msdb00000 .. msdb04095"), "{text}");
    assert!(
        text.contains("USE `msdb00000`; then ALTER TABLE user_by_email"),
        "{text}"
    );

    options.sql = "CREATE TABLE IF NOT EXISTS scratch (a INT)".into();
    let error = plan_err(&topology, &options);
    assert!(error.contains("--fleet"), "{error}");
    options.fleet = Some("main".into());
    let plan = super::plan(&topology, &options).unwrap();
    assert_eq!((plan.shards(), plan.hosts.len()), (4096, 2));
    options.sql = "ALTER TABLE user_by_email ADD COLUMN x INT".into();
    assert!(plan_err(&topology, &options).contains("fleet mod"));
    options.fleet = None;
    for (sql, needle) in [
        ("ALTER TABLE db00001.pins ADD x INT", "qualified"),
        ("RENAME TABLE pins TO pins2", "renaming"),
        ("/*+ SHARD(1) */ ALTER TABLE pins ADD x INT", "hint"),
        ("SELECT 1", "not a table schema change"),
        ("CREATE DATABASE x", "not a table schema change"),
    ] {
        options.sql = sql.into();
        assert!(plan_err(&topology, &options).contains(needle), "{sql}");
    }
}

fn plan_err(topology: &Topology, options: &MigrateOptions) -> String {
    match plan(topology, options) {
        Ok(plan) => panic!("planned {plan}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_statement_is_checked_as_the_servers_session_reads_it() {
    let sql = "ALTER TABLE pins ADD COLUMN c INT COMMENT 'a\\'; DROP TABLE pins; -- '";
    let table = migration_table(sql).expect("one statement with backslash escapes");
    assert_eq!(table.name, "pins");
    let default = server_lex_mode("STRICT_TRANS_TABLES", "utf8mb4", "10.11.19-MariaDB");
    assert_eq!(check_as_server_reads(sql, &default, &table), Ok(()));
    let no_escapes = server_lex_mode(
        "STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES",
        "utf8mb4",
        "10.11.19-MariaDB",
    );
    assert!(no_escapes.no_backslash_escapes);
    let refused = check_as_server_reads(sql, &no_escapes, &table).unwrap_err();
    assert!(refused.contains("not sent"), "{refused}");
    // A version comment above the server's version stays a comment.
    let sql = "ALTER TABLE pins ADD COLUMN x INT /*!999999 , DROP COLUMN data */";
    let table = migration_table(sql).expect("one statement");
    let old = server_lex_mode("", "utf8mb4", "10.11.19-MariaDB");
    assert_eq!(check_as_server_reads(sql, &old, &table), Ok(()));
    assert_eq!(old.charset, ClientCharset::Utf8);
    let unknown = server_lex_mode("ANSI_QUOTES", "klingon", "garbage");
    assert!(unknown.ansi_quotes);
    assert_eq!(
        unknown.charset,
        ClientCharset::AsciiTrail(TrailCharset::Gbk)
    );
}
