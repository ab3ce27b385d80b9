//! Schema changes through the proxy on an explicit shard (a shard database
//! in the name, USE, a hint), checked on the servers: the table is on that
//! shard's master, in that database, and nowhere else; the refusals (no
//! shard, several shards, the servers' own schemas) with their codes; and
//! inside a transaction, the transaction committed first, as the server
//! does. Every table is the test's own (`ddl_t_<pid>_<n>`); the fleet's
//! shared tables are never changed.

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// A table name of this test process.
fn table(n: u32) -> String {
    format!("ddl_t_{}_{n}", std::process::id())
}

/// Every `database.table` named `name` on the host at `port`, sorted.
async fn places(port: u16, name: &str) -> Vec<String> {
    let mut ops = operations(port).await;
    let found: Vec<String> = ops
        .exec(
            "SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES \
             WHERE TABLE_NAME = ? ORDER BY 1",
            (name,),
        )
        .await
        .expect("information_schema.TABLES");
    ops.disconnect().await.ok();
    found
}

/// Asserts `name` exists as `db.name` on the master at `port` and on no
/// other master (the replica of A follows A).
async fn only_on(port: u16, db: &str, name: &str) {
    for master in [MASTER_A, MASTER_B, MOD_HOST] {
        let want = if master == port {
            vec![format!("{db}.{name}")]
        } else {
            Vec::new()
        };
        assert_eq!(places(master, name).await, want, "{name} on {master}");
    }
}

/// Asserts `name` exists on no master.
async fn nowhere(name: &str) {
    for master in [MASTER_A, MASTER_B, MOD_HOST] {
        assert_eq!(
            places(master, name).await,
            Vec::<String>::new(),
            "{name} on {master}"
        );
    }
}

/// The error code and message the proxy answered `sql` with.
async fn refused(conn: &mut Conn, sql: &str) -> (u16, String) {
    match conn.query_drop(sql).await {
        Ok(()) => panic!("the proxy accepted: {sql}"),
        Err(error) => server_error(error),
    }
}

/// The column names of `db.name`, as the operations account reads them.
async fn columns(port: u16, db: &str, name: &str) -> Vec<String> {
    let mut ops = operations(port).await;
    let found: Vec<String> = ops
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (db, name),
        )
        .await
        .expect("information_schema.COLUMNS");
    ops.disconnect().await.ok();
    found
}

#[tokio::test]
async fn qualified_names_reach_their_shards_master_only() {
    let mut conn = client().await;
    for (db, port, n) in [
        ("db00017", MASTER_A, 1),
        ("db02049", MASTER_B, 2),
        ("msdb00017", MOD_HOST, 3),
    ] {
        let name = table(n);
        conn.query_drop(format!(
            "CREATE TABLE {db}.{name} (a INT PRIMARY KEY, b VARCHAR(10)) ENGINE=InnoDB"
        ))
        .await
        .unwrap_or_else(|e| panic!("create {db}.{name}: {e}"));
        only_on(port, db, &name).await;
        conn.query_drop(format!("ALTER TABLE {db}.{name} ADD COLUMN c INT"))
            .await
            .expect("alter");
        conn.query_drop(format!("CREATE INDEX ib ON {db}.{name} (b)"))
            .await
            .expect("create index");
        assert_eq!(columns(port, db, &name).await, ["a", "b", "c"]);
        conn.query_drop(format!("INSERT INTO {db}.{name} (a, b) VALUES (1, 'x')"))
            .await
            .expect("insert");
        conn.query_drop(format!("TRUNCATE TABLE {db}.{name}"))
            .await
            .expect("truncate");
        let rows: Option<u64> = conn
            .query_first(format!("SELECT COUNT(*) FROM {db}.{name}"))
            .await
            .expect("count");
        assert_eq!(rows, Some(0));
        conn.query_drop(format!("DROP INDEX ib ON {db}.{name}"))
            .await
            .expect("drop index");
        conn.query_drop(format!("DROP TABLE {db}.{name}"))
            .await
            .expect("drop");
        nowhere(&name).await;
    }
}

#[tokio::test]
async fn the_use_database_and_hints_name_the_shard() {
    let mut conn = client().await;
    let (name, renamed, hinted) = (table(10), table(11), table(12));
    conn.query_drop("USE db02050").await.expect("use");
    conn.query_drop(format!("CREATE TABLE {name} (a INT)"))
        .await
        .expect("create under USE");
    only_on(MASTER_B, "db02050", &name).await;
    conn.query_drop(format!("RENAME TABLE {name} TO {renamed}"))
        .await
        .expect("rename");
    nowhere(&name).await;
    only_on(MASTER_B, "db02050", &renamed).await;
    // A hint that agrees with USE; one that does not is refused.
    conn.query_drop(format!(
        "/*+ SHARD(2050) */ CREATE TABLE {hinted} LIKE {renamed}"
    ))
    .await
    .expect("create with an agreeing hint");
    only_on(MASTER_B, "db02050", &hinted).await;
    let (code, message) = refused(&mut conn, &format!("/*+ SHARD(7) */ DROP TABLE {hinted}")).await;
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("SHARD(7)"), "{message}");
    conn.query_drop(format!("DROP TABLE {renamed}, {hinted}"))
        .await
        .expect("drop both");
    nowhere(&renamed).await;
    nowhere(&hinted).await;
}

#[tokio::test]
async fn schema_changes_outside_one_explicit_shard_are_refused() {
    let mut conn = client().await;
    let name = table(20);
    let cases: [(String, u16, &str); 9] = [
        (
            "ALTER TABLE pins ADD COLUMN ddl_never INT".to_owned(),
            1105,
            "shardgate fleet migrate",
        ),
        ("DROP TABLE pins".to_owned(), 1105, "dbNNNNN.pins"),
        (format!("CREATE TABLE {name} (a INT)"), 1105, "USE dbNNNNN"),
        // Not MariaDB syntax, but read from its tokens it names two
        // shard databases: refused as such.
        (
            format!("CREATE TABLE db00001.{name} (a INT), db00002.{name} (a INT)"),
            1105,
            "several shards",
        ),
        (
            format!("DROP TABLE db00001.{name}, db02048.{name}"),
            1105,
            "several shards",
        ),
        (format!("CREATE TABLE mysql.{name} (a INT)"), 1142, "mysql"),
        (
            "DROP TABLE information_schema.TABLES".to_owned(),
            1142,
            "information_schema",
        ),
        ("CREATE DATABASE ddl_never".to_owned(), 1105, "fleet init"),
        ("DROP DATABASE db00001".to_owned(), 1105, "fleet init"),
    ];
    for (sql, code, needle) in &cases {
        let (got, message) = refused(&mut conn, sql).await;
        assert_eq!(got, *code, "{sql}: {message}");
        assert!(message.contains(needle), "{sql}: {message}");
    }
    nowhere(&name).await;
    assert!(database_exists(MASTER_A, "db00001").await);
}

/// Rows of `db.name` as a direct connection to the master at `port` sees
/// them (committed rows only), sorted.
async fn committed_rows(port: u16, db: &str, name: &str) -> Vec<i64> {
    let mut ops = operations(port).await;
    let rows: Vec<i64> = ops
        .query(format!("SELECT a FROM {db}.{name} ORDER BY a"))
        .await
        .expect("committed rows");
    ops.disconnect().await.ok();
    rows
}

/// `(@@autocommit, @@in_transaction)` as the proxy answers them.
async fn transaction_state(conn: &mut Conn) -> (i64, i64) {
    conn.query_first("SELECT @@autocommit, @@in_transaction")
        .await
        .expect("session values")
        .expect("one row")
}

#[tokio::test]
async fn a_schema_change_commits_the_open_transaction_first() {
    let mut conn = client().await;
    let (name, other, third) = (table(30), table(31), table(32));
    conn.query_drop(format!("CREATE TABLE db00021.{name} (a INT PRIMARY KEY)"))
        .await
        .expect("create");
    // BEGIN, a write on shard 21 (host A), a schema change on shard 2100
    // (host B): the write is committed first, then the table is created.
    conn.query_drop("BEGIN").await.expect("begin");
    conn.query_drop(format!("INSERT INTO db00021.{name} VALUES (1)"))
        .await
        .expect("insert in the transaction");
    assert_eq!(committed_rows(MASTER_A, "db00021", &name).await, [0; 0]);
    conn.query_drop(format!("CREATE TABLE db02100.{other} (a INT)"))
        .await
        .expect("a schema change on another shard inside the transaction");
    assert_eq!(committed_rows(MASTER_A, "db00021", &name).await, [1]);
    only_on(MASTER_B, "db02100", &other).await;
    assert_eq!(transaction_state(&mut conn).await, (1, 0), "none open");
    // ROLLBACK now has nothing to undo.
    conn.query_drop("ROLLBACK").await.expect("rollback");
    assert_eq!(committed_rows(MASTER_A, "db00021", &name).await, [1]);
    // BEGIN with only a read: nothing to commit, the transaction ends.
    conn.query_drop("BEGIN").await.expect("begin");
    conn.query_drop(format!("SELECT a FROM db00021.{name}"))
        .await
        .unwrap();
    conn.query_drop(format!("DROP TABLE db02100.{other}"))
        .await
        .expect("drop after a read-only BEGIN");
    assert_eq!(transaction_state(&mut conn).await, (1, 0));
    nowhere(&other).await;

    // autocommit off, the schema change on the transaction's own shard.
    conn.query_drop("SET autocommit = 0").await.unwrap();
    conn.query_drop(format!("INSERT INTO db00021.{name} VALUES (2)"))
        .await
        .unwrap();
    assert_eq!(transaction_state(&mut conn).await, (0, 1));
    conn.query_drop(format!("ALTER TABLE db00021.{name} ADD COLUMN b INT"))
        .await
        .expect("a schema change on the bound shard");
    assert_eq!(committed_rows(MASTER_A, "db00021", &name).await, [1, 2]);
    assert_eq!(columns(MASTER_A, "db00021", &name).await, ["a", "b"]);
    assert_eq!(transaction_state(&mut conn).await, (0, 0));
    // The next statement opens a new transaction, which ROLLBACK undoes.
    conn.query_drop(format!("INSERT INTO db00021.{name} VALUES (3, 3)"))
        .await
        .unwrap();
    assert_eq!(transaction_state(&mut conn).await, (0, 1));
    conn.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(committed_rows(MASTER_A, "db00021", &name).await, [1, 2]);
    conn.query_drop("SET autocommit = 1").await.unwrap();

    // A COMMIT that fails (the server killed the transaction's connection):
    // its error is the answer, and the schema change is not run.
    conn.query_drop("BEGIN").await.unwrap();
    conn.query_drop(format!("INSERT INTO db00021.{name} VALUES (4, 4)"))
        .await
        .unwrap();
    let marker = format!("kill-me-{}", std::process::id());
    let locking =
        format!("SELECT a, SLEEP(2), '{marker}' FROM db00021.{name} WHERE a = 4 FOR UPDATE");
    let find = async {
        let mut ops = operations(MASTER_A).await;
        let like = format!("%{marker}%");
        for _ in 0..40 {
            let id: Option<u64> = ops
                .exec_first(
                    "SELECT ID FROM information_schema.PROCESSLIST \
                     WHERE INFO LIKE ? AND INFO NOT LIKE '%PROCESSLIST%'",
                    (&like,),
                )
                .await
                .expect("processlist");
            if let Some(id) = id {
                return (ops, id);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the locking read never showed in the processlist");
    };
    let (read, (mut ops, thread)) = tokio::join!(conn.query_drop(&locking), find);
    read.expect("the locking read on the bound connection");
    ops.query_drop(format!("KILL {thread}"))
        .await
        .expect("kill");
    ops.disconnect().await.ok();
    let (code, message) =
        refused(&mut conn, &format!("CREATE TABLE db02100.{third} (a INT)")).await;
    assert_ne!(code, 0, "{message}");
    nowhere(&third).await;
    assert_eq!(committed_rows(MASTER_A, "db00021", &name).await, [1, 2]);
    assert_eq!(transaction_state(&mut conn).await, (1, 0), "{message}");
    conn.query_drop(format!("DROP TABLE db00021.{name}"))
        .await
        .expect("the session goes on");
    nowhere(&name).await;
}

/// A foreign key to another shard database, or table options that reach
/// other tables or files, are refused and nothing is created.
#[tokio::test]
async fn schema_changes_reach_no_other_shard() {
    let mut conn = client().await;
    let parent = table(90);
    let child = table(91);
    conn.query_drop(format!(
        "CREATE TABLE db00006.{parent} (a INT PRIMARY KEY) ENGINE=InnoDB"
    ))
    .await
    .expect("a parent on shard 6");
    for sql in [
        format!(
            "CREATE TABLE db00005.{child} (a INT, FOREIGN KEY (a) REFERENCES db00006.{parent} (a) ON DELETE CASCADE) ENGINE=InnoDB"
        ),
        format!("CREATE TABLE db00005.{child} (a INT) ENGINE=MERGE UNION=(db00006.{parent})"),
        format!("CREATE TABLE db00005.{child} (a INT) DATA DIRECTORY = '/tmp'"),
    ] {
        let (code, message) = refused(&mut conn, &sql).await;
        assert!(message.contains("shard"), "{sql}: {code} {message}");
    }
    nowhere(&child).await;
    // On its own shard the foreign key is the server's.
    conn.query_drop(format!(
        "CREATE TABLE db00006.{child} (a INT, FOREIGN KEY (a) REFERENCES db00006.{parent} (a)) ENGINE=InnoDB"
    ))
    .await
    .expect("a foreign key within shard 6");
    only_on(MASTER_A, "db00006", &child).await;
    for name in [&child, &parent] {
        conn.query_drop(format!("DROP TABLE db00006.{name}"))
            .await
            .expect("cleanup");
    }
    conn.disconnect().await.ok();
}

/// A table the config does not name, with a `/*+ SHARD(n) */` hint and no
/// USE: created, changed and dropped in shard n's database on its master
/// (the config's ID fleet, main), and nowhere else.
#[tokio::test]
async fn a_hint_names_the_shard_of_a_new_table() {
    let mut conn = client().await;
    let name = table(40);
    conn.query_drop(format!(
        "/*+ SHARD(2051) */ CREATE TABLE {name} (a INT PRIMARY KEY) ENGINE=InnoDB"
    ))
    .await
    .expect("create with a hint");
    only_on(MASTER_B, "db02051", &name).await;
    conn.query_drop(format!(
        "ALTER /*+ SHARD(2051) */ TABLE {name} ADD COLUMN b INT"
    ))
    .await
    .expect("alter with a hint");
    assert_eq!(columns(MASTER_B, "db02051", &name).await, ["a", "b"]);
    conn.query_drop(format!("/*+ SHARD(2051) */ DROP TABLE {name}"))
        .await
        .expect("drop with a hint");
    nowhere(&name).await;
    conn.disconnect().await.ok();
}

/// The partitions of `db.name` on the host at `port`, in order.
async fn partitions(port: u16, db: &str, name: &str) -> Vec<String> {
    let mut ops = operations(port).await;
    let found: Vec<String> = ops
        .exec(
            "SELECT PARTITION_NAME FROM information_schema.PARTITIONS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY PARTITION_ORDINAL_POSITION",
            (db, name),
        )
        .await
        .expect("information_schema.PARTITIONS");
    ops.disconnect().await.ok();
    found
}

/// The column types of `db.name` on the host at `port`, in order.
async fn column_types(port: u16, db: &str, name: &str) -> Vec<String> {
    let mut ops = operations(port).await;
    let found: Vec<String> = ops
        .exec(
            "SELECT COLUMN_TYPE FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (db, name),
        )
        .await
        .expect("information_schema.COLUMNS");
    ops.disconnect().await.ok();
    found
}

/// Statements sqlparser cannot parse but MariaDB accepts (partition
/// maintenance, `LONG BYTE`, `ZEROFILL`, `SIGNED`), on one explicit shard:
/// they run there and nowhere else; what a hostile client hides in them (a
/// second statement, an executable comment, a second database, a system
/// schema, a routine) is refused and changes nothing.
#[tokio::test]
async fn unparsed_table_schema_changes_run_on_their_shard_only() {
    let mut conn = client().await;
    let (jobs, types, never) = (table(50), table(51), table(52));
    conn.query_drop(format!(
        "CREATE TABLE db02052.{jobs} (a BIGINT NOT NULL, run_at INT NOT NULL, PRIMARY KEY (a, run_at)) ENGINE=InnoDB \
         PARTITION BY RANGE (run_at) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200), \
         PARTITION p2 VALUES LESS THAN MAXVALUE)"
    ))
    .await
    .expect("a partitioned table on shard 2052");
    only_on(MASTER_B, "db02052", &jobs).await;
    assert_eq!(
        partitions(MASTER_B, "db02052", &jobs).await,
        ["p0", "p1", "p2"]
    );
    conn.query_drop(format!(
        "INSERT INTO db02052.{jobs} (a, run_at) VALUES (1, 50), (2, 150), (3, 250)"
    ))
    .await
    .expect("rows in each partition");
    conn.query_drop(format!("ALTER TABLE db02052.{jobs} DROP PARTITION p1"))
        .await
        .expect("drop a partition");
    assert_eq!(partitions(MASTER_B, "db02052", &jobs).await, ["p0", "p2"]);
    assert_eq!(committed_rows(MASTER_B, "db02052", &jobs).await, [1, 3]);
    conn.query_drop("USE db02052").await.expect("use");
    conn.query_drop(format!(
        "ALTER TABLE {jobs} REORGANIZE PARTITION p2 INTO \
         (PARTITION p2 VALUES LESS THAN (300), PARTITION p3 VALUES LESS THAN MAXVALUE)"
    ))
    .await
    .expect("reorganize a partition under USE");
    assert_eq!(
        partitions(MASTER_B, "db02052", &jobs).await,
        ["p0", "p2", "p3"]
    );
    conn.query_drop(format!(
        "/*+ SHARD(2052) */ CREATE TABLE {types} \
         (a INT(6) ZEROFILL, b DECIMAL(10,2) SIGNED, c FLOAT SIGNED, d LONG BYTE) ENGINE=InnoDB"
    ))
    .await
    .expect("ZEROFILL, SIGNED and LONG BYTE with a hint");
    only_on(MASTER_B, "db02052", &types).await;
    assert_eq!(
        column_types(MASTER_B, "db02052", &types).await,
        [
            "int(6) unsigned zerofill",
            "decimal(10,2)",
            "float",
            "mediumblob"
        ]
    );
    let mut other = client().await;
    let cases: Vec<(String, u16, &str)> = vec![
        (
            format!("ALTER TABLE db02052.{jobs} DROP PARTITION p0 /*!, RENAME TO db00017.{never} */"),
            1064,
            "executable comment",
        ),
        (
            format!("ALTER TABLE db02052.{jobs} DROP PARTITION p0 /*M!999999 , RENAME TO db00017.{never} */"),
            1064,
            "executable comment",
        ),
        (
            format!("ALTER TABLE db02052.{jobs} DROP PARTITION p0, RENAME TO db00017.{never}"),
            1105,
            "db00017",
        ),
        (
            format!("ALTER TABLE db02052.{jobs} EXCHANGE PARTITION p0 WITH TABLE `db00017`.{never}"),
            1105,
            "db00017",
        ),
        (
            format!("ALTER TABLE db02052.{jobs} DROP PARTITION p0, ADD COLUMN x INT DEFAULT (db00017.f())"),
            1105,
            "db00017",
        ),
        (
            format!("CREATE TABLE db02052.{never} (a LONG BYTE, b INT, FOREIGN KEY (b) REFERENCES db00017.t (b))"),
            1105,
            "db00017",
        ),
        (
            "ALTER TABLE information_schema.TABLES DROP PARTITION p0".to_owned(),
            1142,
            "information_schema",
        ),
        (
            format!("ALTER TABLE db02052.{jobs} EXCHANGE PARTITION p0 WITH TABLE mysql.user"),
            1142,
            "mysql",
        ),
        (
            format!("CREATE TABLE db02052.{never} (a LONG BYTE) ENGINE=FEDERATED"),
            1105,
            "ENGINE",
        ),
        (
            format!("CREATE TABLE db02052.{never} (a LONG BYTE) PARTITION BY HASH (a) (PARTITION p0 DATA DIRECTORY = '/tmp')"),
            1105,
            "DIRECTORY",
        ),
        (
            format!("CREATE TEMPORARY TABLE db02052.{never} (a LONG BYTE)"),
            1064,
            "temporary",
        ),
        (
            format!("CREATE TABLE db02052.{never} (a LONG BYTE) SELECT a FROM db02052.{jobs}"),
            1064,
            "SELECT",
        ),
        (
            format!("CREATE PROCEDURE db02052.{never}() ALTER TABLE db02052.{jobs} DROP PARTITION p0"),
            1064,
            "",
        ),
        (
            format!("CREATE EVENT db02052.{never} ON SCHEDULE EVERY 1 DAY DO ALTER TABLE db02052.{jobs} DROP PARTITION p0"),
            1064,
            "",
        ),
        (
            format!("ALTER TABLE {jobs} DROP PARTITION p0"),
            1105,
            "USE dbNNNNN",
        ),
    ];
    for (sql, code, needle) in &cases {
        let (got, message) = refused(&mut other, sql).await;
        assert_eq!(got, *code, "{sql}: {message}");
        assert!(message.contains(needle), "{sql}: {message}");
    }
    // A multi-statement COM_QUERY is split and each statement routed on
    // its own; a prepared text is one statement, as the server reads it.
    let second =
        format!("ALTER TABLE db02052.{jobs} DROP PARTITION p0; DROP TABLE db02052.{types}");
    match other.prep(&second).await {
        Ok(_) => panic!("the proxy prepared: {second}"),
        Err(error) => {
            let (code, message) = server_error(error);
            assert_eq!(code, 1064, "{second}: {message}");
            assert!(
                message.contains("a second statement"),
                "{second}: {message}"
            );
        }
    }
    assert_eq!(
        partitions(MASTER_B, "db02052", &jobs).await,
        ["p0", "p2", "p3"]
    );
    only_on(MASTER_B, "db02052", &types).await;
    nowhere(&never).await;
    let mut ops = operations(MASTER_B).await;
    let routines: Option<u64> = ops
        .exec_first(
            "SELECT (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_NAME = ?) \
             + (SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_NAME = ?)",
            (&never, &never),
        )
        .await
        .expect("routines and events");
    assert_eq!(routines, Some(0));
    ops.disconnect().await.ok();
    conn.query_drop(format!("DROP TABLE {jobs}, {types}"))
        .await
        .expect("cleanup");
    nowhere(&jobs).await;
    nowhere(&types).await;
    other.disconnect().await.ok();
    conn.disconnect().await.ok();
}
