//! Table schema changes sqlparser cannot parse (partition maintenance,
//! `LONG BYTE`, `ZEROFILL`, `SIGNED` on DECIMAL/FLOAT): read from the
//! tokens and passed to their one shard, or refused.

use super::*;

/// A partitioned table's `CREATE`, its partitions by `VALUES LESS THAN`.
const PARTITIONED: &str = "CREATE TABLE db00001.jobs (id BIGINT NOT NULL, run_at INT NOT NULL, PRIMARY KEY (id, run_at)) \
     PARTITION BY RANGE (run_at) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200), \
     PARTITION p2 VALUES LESS THAN MAXVALUE)";

/// Column types and attributes sqlparser does not read.
const TYPES: &str = "(a INT(6) ZEROFILL, b DECIMAL(10,2) SIGNED, c FLOAT SIGNED, d LONG BYTE)";

#[test]
fn statements_sqlparser_cannot_parse_are_what_this_path_is_for() {
    let dialect = sqlparser::dialect::MySqlDialect {};
    for sql in [
        "ALTER TABLE db00001.jobs DROP PARTITION p1".to_owned(),
        "ALTER TABLE db00001.jobs REORGANIZE PARTITION p2 INTO (PARTITION p2 VALUES LESS THAN (300), PARTITION p3 VALUES LESS THAN MAXVALUE)".to_owned(),
        format!("CREATE TABLE db00001.z {TYPES}"),
    ] {
        assert!(
            sqlparser::parser::Parser::parse_sql(&dialect, &sql).is_err(),
            "sqlparser parses {sql}: these tests no longer test the unparsed path"
        );
    }
}

#[test]
fn unparsed_schema_changes_go_to_their_shard() {
    run(vec![
        c(PARTITIONED, ddl("db00001", PARTITIONED)),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1",
            ddl("db00001", "ALTER TABLE db00001.jobs DROP PARTITION p1"),
        ),
        c(
            "ALTER TABLE db00001.jobs REORGANIZE PARTITION p2 INTO (PARTITION p2 VALUES LESS THAN (300), PARTITION p3 VALUES LESS THAN MAXVALUE)",
            ddl(
                "db00001",
                "ALTER TABLE db00001.jobs REORGANIZE PARTITION p2 INTO (PARTITION p2 VALUES LESS THAN (300), PARTITION p3 VALUES LESS THAN MAXVALUE)",
            ),
        ),
        c(
            format!("CREATE TABLE db02048.z {TYPES} ENGINE=InnoDB"),
            ddl(
                "db02048",
                format!("CREATE TABLE db02048.z {TYPES} ENGINE=InnoDB"),
            ),
        ),
        // Under USE: every table name is qualified, as a parsed one's.
        u(
            "db00007",
            "ALTER TABLE jobs DROP PARTITION p1",
            ddl("db00007", "ALTER TABLE db00007.jobs DROP PARTITION p1"),
        ),
        u(
            "db00007",
            format!("CREATE OR REPLACE TABLE IF NOT EXISTS `z 1` {TYPES}"),
            ddl(
                "db00007",
                format!("CREATE OR REPLACE TABLE IF NOT EXISTS db00007.`z 1` {TYPES}"),
            ),
        ),
        u(
            "db00007",
            "CREATE TABLE z (a LONG BYTE, b INT, FOREIGN KEY (b) REFERENCES t2 (b))",
            ddl(
                "db00007",
                "CREATE TABLE db00007.z (a LONG BYTE, b INT, FOREIGN KEY (b) REFERENCES db00007.t2 (b))",
            ),
        ),
        u(
            "db00007",
            "CREATE TABLE z (LIKE t2) PARTITION BY HASH (a) PARTITIONS 4",
            ddl(
                "db00007",
                "CREATE TABLE db00007.z (LIKE db00007.t2) PARTITION BY HASH (a) PARTITIONS 4",
            ),
        ),
        u(
            "db00007",
            "ALTER ONLINE TABLE jobs EXCHANGE PARTITION p0 WITH TABLE jobs_old WITHOUT VALIDATION",
            ddl(
                "db00007",
                "ALTER ONLINE TABLE db00007.jobs EXCHANGE PARTITION p0 WITH TABLE db00007.jobs_old WITHOUT VALIDATION",
            ),
        ),
        u(
            "db00007",
            "ALTER TABLE jobs RENAME COLUMN a TO b, DROP PARTITION p1, RENAME TO jobs2",
            ddl(
                "db00007",
                "ALTER TABLE db00007.jobs RENAME COLUMN a TO b, DROP PARTITION p1, RENAME TO db00007.jobs2",
            ),
        ),
        u(
            "db00007",
            "RENAME TABLE t1 WAIT 5 TO t2, db00007.t3 NOWAIT TO t4",
            ddl(
                "db00007",
                "RENAME TABLE db00007.t1 WAIT 5 TO db00007.t2, db00007.t3 NOWAIT TO db00007.t4",
            ),
        ),
        u(
            "db00007",
            "DROP TABLE IF EXISTS t1, t2 WAIT 5",
            ddl("db00007", "DROP TABLE IF EXISTS db00007.t1, db00007.t2 WAIT 5"),
        ),
        u(
            "db00007",
            "TRUNCATE t1 NOWAIT",
            ddl("db00007", "TRUNCATE db00007.t1 NOWAIT"),
        ),
        // A number starting with `.` is a number.
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1, ADD COLUMN f FLOAT SIGNED DEFAULT .5",
            ddl(
                "db00001",
                "ALTER TABLE db00001.jobs DROP PARTITION p1, ADD COLUMN f FLOAT SIGNED DEFAULT .5",
            ),
        ),
        // A column named `rename` is a column.
        u(
            "db00007",
            "ALTER TABLE jobs DROP PARTITION p1, ADD COLUMN rename LONG BYTE",
            ddl(
                "db00007",
                "ALTER TABLE db00007.jobs DROP PARTITION p1, ADD COLUMN rename LONG BYTE",
            ),
        ),
        // A trailing `;` ends the one statement.
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1;",
            ddl("db00001", "ALTER TABLE db00001.jobs DROP PARTITION p1;"),
        ),
    ]);
}

/// A hint names the shard of a table the config does not name, as for a
/// parsed schema change.
#[test]
fn unparsed_schema_changes_by_hint() {
    let topology = crate::topology::tests::load(crate::topology::tests::SPEC_YAML);
    run_cases(
        &topology,
        vec![
            c(
                "/*+ SHARD(5) */ ALTER TABLE jobs DROP PARTITION p1",
                ddl("db00005", "ALTER TABLE db00005.jobs DROP PARTITION p1"),
            ),
            c(
                format!("CREATE /*+ SHARD(2048) */ TABLE z {TYPES}"),
                ddl("db02048", format!("CREATE TABLE db02048.z {TYPES}")),
            ),
            c(
                "/*+ SHARD(5) */ ALTER TABLE db00006.jobs DROP PARTITION p1",
                reject("CrossShard", "SHARD(5)"),
            ),
        ],
        false,
    );
}

/// What a hostile client tries to smuggle through the unparsed path: each
/// refused.
#[test]
fn unparsed_schema_changes_refused() {
    const PASS: &str = "shardgate passes a statement it cannot parse";
    run(vec![
        // No shard named.
        c(
            "ALTER TABLE jobs DROP PARTITION p1",
            reject("NoShardKey", "USE dbNNNNN"),
        ),
        c(
            "ALTER TABLE pins DROP PARTITION p1",
            reject("NoShardKey", "fleet migrate"),
        ),
        // A second database, however written.
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1, RENAME TO db00002.jobs",
            reject("CrossShard", "db00002"),
        ),
        c(
            "ALTER TABLE db00001.jobs EXCHANGE PARTITION p0 WITH TABLE db00002.jobs",
            reject("CrossShard", "db00002"),
        ),
        c(
            "ALTER TABLE db00001.jobs EXCHANGE PARTITION p0 WITH TABLE `db00002` . `jobs`",
            reject("CrossShard", "db00002"),
        ),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1, ADD COLUMN d INT DEFAULT (db00002.f())",
            reject("CrossShard", "db00002"),
        ),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1, ADD CHECK (db00002.t.a > 0)",
            reject("CrossShard", "db00002"),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE, b INT, FOREIGN KEY (b) REFERENCES db00002.t (b))",
            reject("CrossShard", "db00002"),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE, b INT REFERENCES db00002.t (b))",
            reject("CrossShard", "db00002"),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE, b INT REFERENCES nodb.t (b))",
            reject("UnknownDatabase", "nodb"),
        ),
        u(
            "db00001",
            "/*+ SHARD(2) */ ALTER TABLE jobs DROP PARTITION p1",
            reject("CrossShard", "SHARD(2)"),
        ),
        // A system schema.
        c(
            "ALTER TABLE db00001.jobs EXCHANGE PARTITION p0 WITH TABLE mysql.user",
            reject("SystemSchema", "mysql.user"),
        ),
        c(
            "ALTER TABLE information_schema.tables DROP PARTITION p1",
            reject("SystemSchema", "information_schema"),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE, b INT REFERENCES information_schema.tables (b))",
            reject("SystemSchema", "information_schema"),
        ),
        // A second statement.
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1; DROP DATABASE db00002",
            reject("Syntax", "a second statement"),
        ),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1 -- x\n; DROP TABLE db00002.t",
            reject("Syntax", "a second statement"),
        ),
        // Executable comments, run or skipped.
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1 /*!, RENAME TO db00002.jobs */",
            reject("Syntax", "executable comment"),
        ),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1 /*M!999999 , RENAME TO db00002.jobs */",
            reject("Syntax", "executable comment"),
        ),
        c(
            "/*!ALTER TABLE db00001.jobs DROP PARTITION p1 */",
            reject("Syntax", "executable comment"),
        ),
        // Table options that reach outside the shard database.
        c(
            "CREATE TABLE db00001.z (a LONG BYTE) ENGINE=FEDERATED",
            reject("Unsupported", "ENGINE"),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE) PARTITION BY HASH (a) (PARTITION p0 ENGINE=CONNECT)",
            reject("Unsupported", "ENGINE"),
        ),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1, ENGINE=SPIDER",
            reject("Unsupported", "ENGINE"),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE) UNION=(db00002.t)",
            reject("Unsupported", "UNION="),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE) PARTITION BY HASH (a) (PARTITION p0 DATA DIRECTORY = '/tmp')",
            reject("Unsupported", "DIRECTORY"),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE) CONNECTION='mysql://u@h/db/t'",
            reject("Unsupported", "CONNECTION="),
        ),
        // Forms not passed.
        c(
            "CREATE TEMPORARY TABLE db00001.z (a LONG BYTE)",
            reject("Syntax", "temporary"),
        ),
        c(
            "DROP TEMPORARY TABLE db00001.z WAIT 1",
            reject("Syntax", "temporary"),
        ),
        c(
            "CREATE TABLE db00001.z (a LONG BYTE) SELECT a FROM db00001.t",
            reject("Syntax", "a SELECT"),
        ),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1 COMMENT 'x'.y",
            reject("Syntax", "a `.`"),
        ),
        // After `name.`, MariaDB reads a name even if it starts with
        // digits.
        c(
            "ALTER TABLE db00001.jobs EXCHANGE PARTITION p0 WITH TABLE db00002.1e5",
            reject("CrossShard", "db00002"),
        ),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1, RENAME TO db00002.1t",
            reject("CrossShard", "db00002"),
        ),
        c(
            "ALTER TABLE db00001.jobs DROP PARTITION p1, ADD COLUMN x INT DEFAULT (db00002.123())",
            reject("Syntax", "a `.`"),
        ),

        c(
            "SET STATEMENT max_statement_time=10 FOR ALTER TABLE db00001.jobs DROP PARTITION p1",
            reject("Syntax", ""),
        ),
    ]);
    // The reason is given after the parser's message, as a 1064.
    let Plan::Reject(e) = route(
        "ALTER TABLE db00001.jobs DROP PARTITION p1; DROP DATABASE db00002",
        &topo(),
        &RouteContext::default(),
        &mut Fixed(0),
    ) else {
        panic!("a second statement must be refused");
    };
    assert_eq!(e.code(), 1064);
    assert!(e.to_string().contains(PASS), "{e}");
}

/// Schema changes of other objects are never passed, however they are
/// written: each stays refused (the parser's 1064, or the refusal of a
/// parsed one).
#[test]
fn unparsed_non_table_schema_changes_refused() {
    let t = topo();
    let ctx = RouteContext {
        current_db: Some((0, 1)),
        ..RouteContext::default()
    };
    for sql in [
        "CREATE PROCEDURE db00001.p() BEGIN DROP DATABASE db00002; END",
        "CREATE DEFINER=root@localhost PROCEDURE p() ALTER TABLE db00001.jobs DROP PARTITION p1",
        "CREATE TRIGGER db00001.tr BEFORE INSERT ON db00001.jobs FOR EACH ROW SET NEW.a = 1",
        "CREATE EVENT db00001.e ON SCHEDULE EVERY 1 DAY DO ALTER TABLE db00001.jobs DROP PARTITION p1",
        "CREATE FUNCTION db00001.f() RETURNS LONG BYTE RETURN 1",
        "CREATE OR REPLACE ALGORITHM=MERGE VIEW v AS SELECT a FROM db00001.z",
        "CREATE DATABASE db09999 PARTITION p1",
        "DROP DATABASE IF EXISTS db00002 WAIT 1",
        "CREATE USER u IDENTIFIED VIA unix_socket OR mysql_native_password",
        "ALTER USER u ACCOUNT LOCK PARTITION",
        "DROP EVENT IF EXISTS db00001.e WAIT 1",
        "ALTER EVENT db00001.e RENAME TO db00002.e",
        "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (HOST 'h', DATABASE 'db00002')",
        "CREATE TABLESPACE ts ADD DATAFILE 'ts.ibd' ENGINE=InnoDB",
        "ALTER DATABASE db00001 UPGRADE DATA DIRECTORY NAME",
        "TRUNCATE PARTITION p1",
        "RENAME USER u TO v",
    ] {
        match route(sql, &t, &ctx, &mut Fixed(0)) {
            Plan::Reject(e) => assert!(
                !e.to_string().contains("shardgate passes"),
                "{sql}: read as a table schema change: {e}"
            ),
            other => panic!("{sql}: {other:?}"),
        }
    }
}

/// Prepared, an unparsed schema change is planned on its shard too.
#[test]
fn unparsed_schema_change_prepared() {
    match route_prepare(
        "ALTER TABLE db00003.jobs DROP PARTITION p1",
        &topo(),
        &RouteContext::default(),
    ) {
        Plan::Shard(q) => {
            assert_eq!(q.kind, StatementKind::SchemaChange);
            assert_eq!(q.target.shard, 3);
        }
        other => panic!("prepared ALTER TABLE ... DROP PARTITION: {other:?}"),
    }
}

/// In gbk an unquoted multibyte character is a name character, as the
/// server reads it: a column's name, part of a table's name on the shard,
/// or part of a database name that is no shard database (refused).
#[test]
fn unparsed_schema_changes_in_gbk() {
    let gbk = RouteContext {
        lex: LexMode {
            charset: ClientCharset::AsciiTrail(TrailCharset::Gbk),
            ..LexMode::default()
        },
        ..RouteContext::default()
    };
    // 海豚 in gbk.
    let dolphin: &[u8] = &[0xBA, 0xA3, 0xEB, 0xE0];
    let text = |parts: &[&[u8]]| parts.concat();
    let create = text(&[
        b"CREATE TABLE db00001.gbktest (",
        dolphin,
        b" INT AUTO_INCREMENT KEY, c1 LONG BYTE) CHARACTER SET 'gbk'",
    ]);
    match route(&create, &topo(), &gbk, &mut Fixed(0)) {
        Plan::Shard(q) => {
            assert_eq!(q.target.shard, 1);
            assert_eq!(q.sql.0, create);
        }
        other => panic!("{other:?}"),
    }
    // A gbk character of an unquoted name is a name character (as the
    // server reads it): touching a name it makes another name.
    for sql in [
        text(&[
            b"ALTER TABLE db00001.jobs DROP PARTITION p1, RENAME TO db00001.",
            dolphin,
        ]),
        text(&[b"CREATE TABLE db00001.t", dolphin, b" (a LONG BYTE)"]),
    ] {
        match route(&sql, &topo(), &gbk, &mut Fixed(0)) {
            Plan::Shard(q) => {
                assert_eq!(q.target.shard, 1);
                assert_eq!(q.sql.0, sql);
            }
            other => panic!("{}: {other:?}", String::from_utf8_lossy(&sql)),
        }
    }
    for sql in [
        // The database read is `海豚db00001`, not a shard database.
        text(&[
            b"ALTER TABLE db00001.jobs DROP PARTITION p1, RENAME TO ",
            dolphin,
            b"db00001.t",
        ]),
        // No database at all.
        text(&[b"CREATE TABLE ", dolphin, b" (a LONG BYTE)"]),
    ] {
        let plan = route(&sql, &topo(), &gbk, &mut Fixed(0));
        assert!(
            matches!(plan, Plan::Reject(_)),
            "{}: {plan:?}",
            String::from_utf8_lossy(&sql)
        );
    }
}

/// Under ANSI_QUOTES a `"..."` name is a name: a second database in one
/// is found like any other.
#[test]
fn unparsed_schema_changes_under_ansi_quotes() {
    let ansi = LexMode {
        ansi_quotes: true,
        ..LexMode::default()
    };
    let plan = route_lex(
        "ALTER TABLE \"db00001\".\"jobs\" EXCHANGE PARTITION p0 WITH TABLE \"db00002\".\"jobs\"",
        ansi,
    );
    assert!(rejected_with(&plan, "CrossShard", "db00002"), "{plan:?}");
}
