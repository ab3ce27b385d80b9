//! Schema changes: routed to one explicit shard (a shard database in the
//! name, USE, a hint), qualified like other statements, refused otherwise.

use super::*;

#[test]
fn schema_changes_on_an_explicit_shard() {
    run(vec![
        c(
            "CREATE TABLE db00007.t1 (a INT PRIMARY KEY) ENGINE=InnoDB",
            ddl(
                "db00007",
                "CREATE TABLE db00007.t1 (a INT PRIMARY KEY) ENGINE=InnoDB",
            ),
        ),
        c(
            "CREATE TABLE IF NOT EXISTS msdb00009.t1 (a INT)",
            ddl(
                "msdb00009",
                "CREATE TABLE IF NOT EXISTS msdb00009.t1 (a INT)",
            ),
        ),
        u(
            "db00007",
            "CREATE TABLE t1 (a INT)",
            ddl("db00007", "CREATE TABLE db00007.t1 (a INT)"),
        ),
        u(
            "db00007",
            "CREATE TABLE `t 1` LIKE pins",
            ddl("db00007", "CREATE TABLE db00007.`t 1` LIKE db00007.pins"),
        ),
        u(
            "db00007",
            "DROP TABLE IF EXISTS t1, t2",
            ddl("db00007", "DROP TABLE IF EXISTS db00007.t1, db00007.t2"),
        ),
        c(
            "DROP TABLE db02048.t1",
            ddl("db02048", "DROP TABLE db02048.t1"),
        ),
        u(
            "db00007",
            "ALTER TABLE pins ADD COLUMN x INT",
            ddl("db00007", "ALTER TABLE db00007.pins ADD COLUMN x INT"),
        ),
        c(
            "/*+ SHARD(12) */ ALTER TABLE pins ADD COLUMN x INT",
            ddl("db00012", "ALTER TABLE db00012.pins ADD COLUMN x INT"),
        ),
        c(
            format!("/*+ COLOCATE({COLOCATE}) */ TRUNCATE TABLE boards"),
            ddl("db03429", "TRUNCATE TABLE db03429.boards"),
        ),
        u(
            "db00007",
            "ALTER TABLE t1 RENAME TO t2",
            ddl("db00007", "ALTER TABLE db00007.t1 RENAME TO db00007.t2"),
        ),
        u(
            "db00007",
            "CREATE INDEX i ON t1 (a)",
            ddl("db00007", "CREATE INDEX i ON db00007.t1 (a)"),
        ),
        u(
            "db00007",
            "DROP INDEX i ON t1",
            ddl("db00007", "DROP INDEX i ON db00007.t1"),
        ),
        u(
            "db00007",
            "RENAME TABLE t1 TO t2, db00007.t3 TO t4",
            ddl(
                "db00007",
                "RENAME TABLE db00007.t1 TO db00007.t2, db00007.t3 TO db00007.t4",
            ),
        ),
        u(
            "db00007",
            "TRUNCATE t1",
            ddl("db00007", "TRUNCATE db00007.t1"),
        ),
        u(
            "db00007",
            "DROP VIEW v1",
            ddl("db00007", "DROP VIEW db00007.v1"),
        ),
        // A hint agreeing with the USE database.
        u(
            "db00007",
            "/*+ SHARD(7) */ DROP TABLE t1",
            ddl("db00007", "DROP TABLE db00007.t1"),
        ),
    ]);
}

/// A table the config does not name, created with a hint and no USE: on
/// the config's one fleet of object tables (main; mod has none), or on the
/// fleet of another table the statement names.
#[test]
fn new_tables_by_hint() {
    let topology = crate::topology::tests::load(crate::topology::tests::SPEC_YAML);
    run_cases(
        &topology,
        vec![
            c(
                "/*+ SHARD(3) */ CREATE TABLE t1 (a INT, b INT REFERENCES t0 (a))",
                ddl(
                    "db00003",
                    "CREATE TABLE db00003.t1 (a INT, b INT REFERENCES db00003.t0 (a))",
                ),
            ),
            c(
                "CREATE /*+ SHARD(2048) */ TABLE `t 1` (a INT)",
                ddl("db02048", "CREATE TABLE db02048.`t 1` (a INT)"),
            ),
            c(
                "/*+ SHARD(9) */ CREATE TABLE t1 LIKE user_by_email",
                ddl(
                    "msdb00009",
                    "CREATE TABLE msdb00009.t1 LIKE msdb00009.user_by_email",
                ),
            ),
            c(
                "/*+ SHARD(9) */ ALTER TABLE t1 ADD COLUMN x INT",
                ddl("db00009", "ALTER TABLE db00009.t1 ADD COLUMN x INT"),
            ),
            c(
                "/*+ SHARD(9) */ DROP TABLE t1",
                ddl("db00009", "DROP TABLE db00009.t1"),
            ),
            c(
                "/*+ COLOCATE(241294561224164665) */ CREATE TABLE t1 (a INT)",
                ddl("db03429", "CREATE TABLE db03429.t1 (a INT)"),
            ),
            c(
                "/*+ SHARD(4096) */ CREATE TABLE t1 (a INT)",
                reject("BadHint", "SHARD(4096)"),
            ),
            // The hint disagrees with the shard database named.
            c(
                "/*+ SHARD(3) */ CREATE TABLE t1 LIKE db00004.t0",
                reject("CrossShard", "SHARD(3)"),
            ),
            c(
                "/*+ SCATTER */ CREATE TABLE t1 (a INT)",
                reject("NoShardKey", "SHARD(n)"),
            ),
        ],
        false,
    );
}

#[test]
fn schema_changes_refused() {
    run(vec![
        // A sharded table with no shard named: every shard is `fleet migrate`'s job.
        c(
            "ALTER TABLE pins ADD COLUMN x INT",
            reject("NoShardKey", "shardgate fleet migrate"),
        ),
        c("DROP TABLE pins", reject("NoShardKey", "dbNNNNN.pins")),
        c("TRUNCATE user_by_email", reject("NoShardKey", "msdbNNNNN")),
        // A table the config does not name, with nothing saying where.
        c(
            "CREATE TABLE t1 (a INT)",
            reject("NoShardKey", "USE dbNNNNN"),
        ),
        // Object tables on two fleets (main, closed): a hint names no fleet.
        c(
            "/*+ SHARD(3) */ CREATE TABLE t1 (a INT)",
            reject("NoShardKey", "several fleets"),
        ),
        c(
            "/*+ SCATTER */ CREATE TABLE t1 (a INT)",
            reject("NoShardKey", "SHARD(n)"),
        ),
        // Across shards.
        c(
            "DROP TABLE db00001.t1, db00002.t1",
            reject("CrossShard", "db00002"),
        ),
        c(
            "RENAME TABLE db00001.t1 TO db00002.t1",
            reject("CrossShard", "db00001"),
        ),
        u(
            "db00007",
            "/*+ SHARD(8) */ DROP TABLE t1",
            reject("CrossShard", "SHARD(8)"),
        ),
        u(
            "db00007",
            "ALTER TABLE user_by_email ADD COLUMN x INT",
            reject("NoShardKey", "msdbNNNNN"),
        ),
        c(
            "/*+ SCATTER */ ALTER TABLE pins ADD COLUMN x INT",
            reject("Unsupported", "fleet migrate"),
        ),
        // The servers' own schemas.
        c(
            "CREATE TABLE mysql.t1 (a INT)",
            reject("SystemSchema", "mysql.t1"),
        ),
        c("DROP TABLE sys.t1", reject("SystemSchema", "DROP")),
        c(
            "ALTER TABLE performance_schema.t1 ADD COLUMN x INT",
            reject("SystemSchema", "ALTER"),
        ),
        c(
            "CREATE TABLE information_schema.t1 (a INT)",
            reject("SystemSchema", "information_schema"),
        ),
        c(
            "DROP TABLE information_schema.tables",
            reject("SystemSchema", "read-only"),
        ),
        u(
            "db00007",
            "CREATE TABLE t1 LIKE mysql.user",
            reject("SystemSchema", "mysql.user"),
        ),
        c("DROP TABLE nodb.t1", reject("UnknownDatabase", "nodb")),
        // Forms not routed.
        u(
            "db00007",
            "CREATE TEMPORARY TABLE t1 (a INT)",
            reject("Unsupported", "temporary"),
        ),
        u(
            "db00007",
            "DROP TEMPORARY TABLE t1",
            reject("Unsupported", "temporary"),
        ),
        u(
            "db00007",
            "CREATE TABLE t1 AS SELECT * FROM pins",
            reject("Unsupported", "CREATE TABLE ... SELECT"),
        ),
        u(
            "db00007",
            "CREATE VIEW v1 AS SELECT 1",
            reject("Unsupported", "fleet migrate"),
        ),
        c(
            "CREATE DATABASE db09999",
            reject("Unsupported", "fleet init"),
        ),
        c("DROP DATABASE db00001", reject("Unsupported", "fleet init")),
        c("DROP SCHEMA db00001", reject("Unsupported", "fleet init")),
    ]);
}

#[test]
fn schema_changes_reach_no_other_shard_or_server() {
    run(vec![
        // A foreign key's table is one more name that must be on the shard.
        u(
            "db00007",
            "CREATE TABLE t1 (a INT, FOREIGN KEY (a) REFERENCES db00002.boards (id) ON DELETE CASCADE)",
            reject("CrossShard", "db00002"),
        ),
        c(
            "ALTER TABLE db00007.t1 ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES db00008.t2 (a)",
            reject("CrossShard", "db00008"),
        ),
        c(
            "CREATE TABLE db00007.t1 (a INT REFERENCES db00009.t2 (a))",
            reject("CrossShard", "db00009"),
        ),
        c(
            "CREATE TABLE db00007.t1 (a INT, FOREIGN KEY (a) REFERENCES mysql.user (a))",
            reject("SystemSchema", "mysql.user"),
        ),
        u(
            "db00007",
            "CREATE TABLE t1 (a INT, FOREIGN KEY (a) REFERENCES t2 (a))",
            ddl(
                "db00007",
                "CREATE TABLE db00007.t1 (a INT, FOREIGN KEY (a) REFERENCES db00007.t2 (a))",
            ),
        ),
        // Table options that reach other tables, files or servers.
        u(
            "db00007",
            "CREATE TABLE m (a INT) ENGINE=MERGE UNION=(db00002.t1)",
            reject("Unsupported", "ENGINE"),
        ),
        u(
            "db00007",
            "CREATE TABLE m (a INT) UNION=(db00002.t1)",
            reject("Unsupported", "UNION="),
        ),
        u(
            "db00007",
            "CREATE TABLE f (a INT) ENGINE=CONNECT TABLE_TYPE=MYSQL",
            reject("Unsupported", "ENGINE"),
        ),
        u(
            "db00007",
            "ALTER TABLE t1 ENGINE = FEDERATED",
            reject("Unsupported", "ENGINE"),
        ),
        u(
            "db00007",
            "CREATE TABLE s (a INT) ENGINE=SPIDER COMMENT='wrapper \"mysql\"'",
            reject("Unsupported", "ENGINE"),
        ),
        u(
            "db00007",
            "CREATE TABLE d (a INT) DATA DIRECTORY = '/tmp'",
            reject("Unsupported", "DIRECTORY"),
        ),
        u(
            "db00007",
            "CREATE TABLE d (a INT) INDEX DIRECTORY = '/tmp'",
            reject("Unsupported", "DIRECTORY"),
        ),
        u(
            "db00007",
            "CREATE TABLE d (a INT) ENGINE=Aria",
            ddl("db00007", "CREATE TABLE db00007.d (a INT) ENGINE=Aria"),
        ),
    ]);
}

#[test]
fn schema_change_kind_and_codes() {
    let t = topo();
    let ctx = RouteContext::default();
    let Plan::Reject(e) = route("DROP TABLE mysql.user", &t, &ctx, &mut Fixed(0)) else {
        panic!("DROP TABLE mysql.user must be refused");
    };
    assert_eq!(e.code(), 1142);
    let Plan::Reject(e) = route("ALTER TABLE pins ADD x INT", &t, &ctx, &mut Fixed(0)) else {
        panic!("ALTER TABLE pins with no shard must be refused");
    };
    assert_eq!(e.code(), 1105);
    // Prepared, a schema change goes to the shard it names, as a schema change.
    match route_prepare("DROP TABLE db00003.t1", &t, &ctx) {
        Plan::Shard(q) => {
            assert_eq!(q.kind, StatementKind::SchemaChange);
            assert_eq!(q.target.shard, 3);
        }
        other => panic!("prepared DROP TABLE: {other:?}"),
    }
}

#[test]
fn statements_for_every_shard_name_their_table_alone() {
    let table = |sql: &str| migration_table(sql).map(|t| (t.name, t.dropped));
    assert_eq!(
        table("ALTER TABLE pins ADD COLUMN note INT"),
        Ok(("pins".to_owned(), false))
    );
    assert_eq!(
        table("CREATE TABLE IF NOT EXISTS scratch (a INT) ENGINE=InnoDB;"),
        Ok(("scratch".to_owned(), false))
    );
    assert_eq!(
        table("DROP TABLE IF EXISTS scratch"),
        Ok(("scratch".to_owned(), true))
    );
    assert_eq!(
        table("CREATE INDEX i ON `pins` (data(10))"),
        Ok(("pins".to_owned(), false))
    );
    for (sql, needle) in [
        ("ALTER TABLE db00001.pins ADD x INT", "qualified"),
        ("CREATE TABLE t LIKE db00001.pins", "qualified"),
        ("ALTER TABLE pins RENAME TO pins2", "renaming"),
        ("/*+ SHARD(1) */ DROP TABLE pins", "hint"),
        ("ALTER TABLE pins ADD x INT; DROP TABLE pins", "exactly one"),
        ("UPDATE pins SET data = 1", "not a table schema change"),
        ("CREATE TEMPORARY TABLE t (a INT)", "temporary"),
        (
            "ALTER TABLE pins ADD FOREIGN KEY (board) REFERENCES db00002.boards (id)",
            "qualified",
        ),
        ("CREATE TABLE m (a INT) ENGINE=MERGE UNION=(pins)", "ENGINE"),
        ("CREATE TABLE d (a INT) DATA DIRECTORY='/tmp'", "DIRECTORY"),
    ] {
        match migration_table(sql) {
            Ok(found) => panic!("{sql}: {found:?}"),
            Err(e) => assert!(e.to_string().contains(needle), "{sql}: {e}"),
        }
    }
}
