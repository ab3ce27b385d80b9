//! Least privilege on the backends: the data path's account
//! (`shard`, config `backend`) can do DML and table DDL (CREATE, DROP,
//! INDEX, ALTER) on the shard databases and nothing else, so even a statement the router misread cannot reach the servers'
//! own schemas, globals or accounts; the operations account (`shardops`,
//! config `operations`) holds everything the control plane needs.
//! `integration/fleet.sh start` creates both on every instance.

use crate::common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// Every instance of the local fleet (each owns its accounts: they are not
/// replicated).
const FLEET_PORTS: [u16; 4] = [MASTER_A, MASTER_B, 3309, MOD_HOST];

/// `SHOW GRANTS` of the current user, without the password hash.
async fn own_grants(conn: &mut Conn) -> Vec<String> {
    let mut grants: Vec<String> = conn.query("SHOW GRANTS").await.expect("SHOW GRANTS");
    for grant in &mut grants {
        if let Some(at) = grant.find(" IDENTIFIED BY PASSWORD") {
            grant.truncate(at);
        }
    }
    grants.sort();
    grants
}

/// Runs `sql` on `conn` and returns the server's error code and message;
/// panics if the server accepted it.
async fn refused(conn: &mut Conn, sql: &str) -> (u16, String) {
    match conn.query_drop(sql).await {
        Ok(()) => panic!("the server accepted, as the data path's account: {sql}"),
        Err(error) => server_error(error),
    }
}

#[tokio::test]
async fn the_config_names_the_two_accounts_the_fleet_creates() {
    let config = topology().config;
    assert_eq!(
        (
            config.backend.user.as_str(),
            config.backend.password.as_str()
        ),
        (BACKEND_USER, BACKEND_PASSWORD)
    );
    let ops = config.operations.expect("an operations section");
    assert_eq!(
        (ops.user.as_str(), ops.password.as_str()),
        (OPS_USER, OPS_PASSWORD)
    );
}

#[tokio::test]
async fn the_backend_account_holds_dml_and_ddl_on_the_shard_databases_only() {
    for port in FLEET_PORTS {
        let mut conn = direct(port).await;
        assert_eq!(
            own_grants(&mut conn).await,
            [
                "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON `db_____`.* TO `shard`@`127.0.0.1`",
                "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER ON `msdb_____`.* TO `shard`@`127.0.0.1`",
                "GRANT USAGE ON *.* TO `shard`@`127.0.0.1`",
            ],
            "grants of shard on {port}"
        );
        conn.disconnect().await.ok();
        let mut ops = operations(port).await;
        assert_eq!(
            own_grants(&mut ops).await,
            ["GRANT ALL PRIVILEGES ON *.* TO `shardops`@`127.0.0.1`"],
            "grants of shardops on {port}"
        );
        ops.disconnect().await.ok();
    }
}

/// The privilege attacks (DDL outside the shard databases, grants, system
/// schemas, files), sent straight to the server as the data path's account:
/// each is denied by the server itself, and nothing changed. Table DDL on a
/// shard database is allowed (on a table of the test's own).
#[tokio::test]
async fn the_server_denies_the_backend_account_everything_outside_the_shards() {
    let tag = format!("priv-{}", std::process::id());
    let user = format!("sg_probe_{}", std::process::id());
    let mut ops = operations(MASTER_A).await;
    let global_before: Option<u64> = ops
        .query_first("SELECT @@GLOBAL.max_connect_errors")
        .await
        .unwrap();
    let keywords_before: Option<u64> = ops
        .query_first("SELECT COUNT(*) FROM mysql.help_keyword")
        .await
        .unwrap();
    assert!(
        !database_exists(MASTER_A, "zz").await,
        "zz exists before the test"
    );

    let mut conn = direct(MASTER_A).await;
    let cases = [
        ("SELECT * FROM mysql.user".to_owned(), 1142),
        (
            "UPDATE mysql.global_priv SET priv = '{}' WHERE User = 'app'".to_owned(),
            1142,
        ),
        (
            "INSERT INTO mysql.help_keyword (help_keyword_id, name) VALUES (99999, 'SHARDGATE')"
                .to_owned(),
            1142,
        ),
        ("DELETE FROM mysql.help_keyword".to_owned(), 1142),
        ("SET GLOBAL max_connect_errors = 4242".to_owned(), 1227),
        (format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'x'"), 1227),
        ("CREATE DATABASE zz".to_owned(), 1044),
        ("CREATE TABLE mysql.priv_probe (a INT)".to_owned(), 1142),
        ("DROP TABLE mysql.help_keyword".to_owned(), 1142),
        (
            "ALTER TABLE mysql.help_keyword ADD COLUMN priv_probe INT".to_owned(),
            1142,
        ),
        ("CREATE TABLE sys.priv_probe (a INT)".to_owned(), 1142),
        (
            "CREATE TABLE performance_schema.priv_probe (a INT)".to_owned(),
            1142,
        ),
        ("CREATE TABLE zz.priv_probe (a INT)".to_owned(), 1142),
        ("GRANT SELECT ON `db_____`.* TO 'app'@'%'".to_owned(), 1044),
        (
            "SELECT 1 INTO OUTFILE '/tmp/shardgate_priv_probe'".to_owned(),
            1227,
        ),
        ("SET SESSION sql_log_bin = 0".to_owned(), 1227),
        ("SELECT * FROM performance_schema.threads".to_owned(), 1142),
    ];
    for (sql, code) in &cases {
        let (got, message) = refused(&mut conn, sql).await;
        assert_eq!(got, *code, "{sql}: {message}");
        assert!(
            message.contains("denied") || message.contains("need"),
            "{sql}: {message}"
        );
    }

    // Nothing changed on the server.
    let global_after: Option<u64> = ops
        .query_first("SELECT @@GLOBAL.max_connect_errors")
        .await
        .unwrap();
    assert_eq!(global_after, global_before);
    let keywords_after: Option<u64> = ops
        .query_first("SELECT COUNT(*) FROM mysql.help_keyword")
        .await
        .unwrap();
    assert_eq!(keywords_after, keywords_before);
    let created: Option<u64> = ops
        .exec_first("SELECT COUNT(*) FROM mysql.user WHERE User = ?", (&user,))
        .await
        .unwrap();
    assert_eq!(created, Some(0), "user {user} was created");
    assert!(!database_exists(MASTER_A, "zz").await, "zz was created");
    let table: Option<u64> = ops
        .query_first(
            "SELECT COUNT(*) FROM information_schema.COLUMNS \
             WHERE TABLE_NAME = 'priv_probe' OR COLUMN_NAME = 'priv_probe'",
        )
        .await
        .unwrap();
    assert_eq!(table, Some(0));

    // Table DDL on a shard database works (on a table of the test's own,
    // never one the fleet shares), on both fleets' formats.
    let probe = format!("priv_ddl_{}", std::process::id());
    for (port, db) in [(MASTER_A, "db00001"), (MOD_HOST, "msdb00001")] {
        let mut shard = direct(port).await;
        for sql in [
            format!("CREATE TABLE {db}.{probe} (a INT PRIMARY KEY, b INT)"),
            format!("CREATE INDEX b ON {db}.{probe} (b)"),
            format!("ALTER TABLE {db}.{probe} ADD COLUMN c INT"),
            format!("DROP INDEX b ON {db}.{probe}"),
            format!("TRUNCATE TABLE {db}.{probe}"),
            format!("DROP TABLE {db}.{probe}"),
        ] {
            shard
                .query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql} on {port}: {e}"));
        }
        shard.disconnect().await.ok();
    }

    // DML on a shard database works, on both fleets' formats.
    conn.exec_drop("INSERT INTO db00001.pins (data) VALUES (?)", (&tag,))
        .await
        .expect("insert into a shard table");
    let local = conn.last_insert_id().expect("an AUTO_INCREMENT id");
    conn.exec_drop(
        "UPDATE db00001.pins SET data = ? WHERE local_id = ?",
        (format!("{tag}-updated"), local),
    )
    .await
    .expect("update a shard table");
    let data: Option<String> = conn
        .exec_first("SELECT data FROM db00001.pins WHERE local_id = ?", (local,))
        .await
        .expect("read a shard table");
    assert_eq!(data, Some(format!("{tag}-updated")));
    conn.exec_drop("DELETE FROM db00001.pins WHERE local_id = ?", (local,))
        .await
        .expect("delete from a shard table");
    assert_eq!(row_on_host(MASTER_A, "pins", 1, local).await, None);
    conn.disconnect().await.ok();

    let mut modhost = direct(MOD_HOST).await;
    let email = format!("{tag}@example.com");
    modhost
        .exec_drop(
            "INSERT INTO msdb00001.user_by_email (email, user_id) VALUES (?, 1)",
            (&email,),
        )
        .await
        .expect("insert into a mod-shard table");
    modhost
        .exec_drop(
            "DELETE FROM msdb00001.user_by_email WHERE email = ?",
            (&email,),
        )
        .await
        .expect("delete from a mod-shard table");
    modhost.disconnect().await.ok();
    ops.disconnect().await.ok();
}
