//! Statements about the proxy's sessions and version: CONNECTION_ID(),
//! VERSION() / @@version, the process list, KILL.

use super::*;

fn session(action: SessionAction) -> Expect {
    Expect::Session(action)
}

fn processlist(full: bool, table: bool, id: Option<u64>) -> Expect {
    session(SessionAction::ProcessList { full, table, id })
}

#[test]
fn connection_id_and_version_are_the_proxys() {
    run(vec![
        c(
            "SELECT CONNECTION_ID()",
            session(SessionAction::SelectConnectionId {
                column: "CONNECTION_ID()".into(),
            }),
        ),
        c(
            "select connection_id() AS me",
            session(SessionAction::SelectConnectionId {
                column: "me".into(),
            }),
        ),
        c(
            "SELECT VERSION()",
            session(SessionAction::SelectVersion {
                column: "VERSION()".into(),
            }),
        ),
        c(
            "SELECT @@version",
            session(SessionAction::SelectVersion {
                column: "@@version".into(),
            }),
        ),
        c(
            "SELECT @@GLOBAL.VERSION v",
            session(SessionAction::SelectVersion { column: "v".into() }),
        ),
        c("SELECT @@session.version", any("SELECT @@session.version")),
        c("SELECT @@version_comment", any("SELECT @@version_comment")),
        // Inside a larger select list: the session's id as a literal.
        c(
            "SELECT CONNECTION_ID(), 1",
            any("SELECT 0 AS `CONNECTION_ID()`, 1"),
        ),
    ]);
}

#[test]
fn the_process_list_is_the_proxys() {
    run(vec![
        c("SHOW PROCESSLIST", processlist(false, false, None)),
        c("show full processlist", processlist(true, false, None)),
        c(
            "SELECT * FROM information_schema.PROCESSLIST",
            processlist(true, true, None),
        ),
        c(
            "select * from INFORMATION_SCHEMA.processlist where id = 42",
            processlist(true, true, Some(42)),
        ),
        c(
            "SELECT info FROM information_schema.PROCESSLIST",
            reject("Unsupported", "information_schema.PROCESSLIST"),
        ),
        c(
            "SELECT * FROM information_schema.PROCESSLIST WHERE user = 'app'",
            reject("Unsupported", "information_schema.PROCESSLIST"),
        ),
    ]);
}

#[test]
fn every_other_statement_naming_the_process_list_is_refused() {
    let refused = || reject("Unsupported", "information_schema.PROCESSLIST");
    run(vec![
        c("SELECT * FROM information_schema.PROCESSLIST ORDER BY id", refused()),
        c("SELECT * FROM information_schema.PROCESSLIST LIMIT 5", refused()),
        c(
            "WITH p AS (SELECT * FROM information_schema.processlist) SELECT * FROM p",
            refused(),
        ),
        c(
            "SELECT 1 UNION SELECT id FROM information_schema.processlist",
            refused(),
        ),
        c(
            "SELECT * FROM (SELECT * FROM information_schema.processlist) AS p",
            refused(),
        ),
        c(
            "SELECT (SELECT GROUP_CONCAT(info) FROM information_schema.processlist)",
            refused(),
        ),
        c(
            "SELECT 1 FROM dual WHERE EXISTS (SELECT 1 FROM `information_schema` . `PROCESSLIST`)",
            refused(),
        ),
        c(
            "SET @x = (SELECT GROUP_CONCAT(info) FROM information_schema.processlist)",
            refused(),
        ),
        c(
            "DO (SELECT COUNT(*) FROM information_schema.processlist)",
            refused(),
        ),
        c(
            "SHOW TABLES FROM db00001 WHERE (SELECT 1 FROM information_schema.processlist LIMIT 1)",
            refused(),
        ),
        c(
            "SELECT * FROM pins WHERE id = 1 AND 1 IN (SELECT id FROM information_schema.processlist)",
            refused(),
        ),
    ]);
}

#[test]
fn kill_forms() {
    run(vec![
        c(
            "KILL 7",
            session(SessionAction::Kill {
                query: false,
                id: 7,
            }),
        ),
        c(
            "KILL CONNECTION 7",
            session(SessionAction::Kill {
                query: false,
                id: 7,
            }),
        ),
        c(
            "kill query 12",
            session(SessionAction::Kill {
                query: true,
                id: 12,
            }),
        ),
    ]);
}

#[test]
fn reading_another_connections_statement_is_refused() {
    let refused = || reject("Unsupported", "SHOW EXPLAIN");
    run(vec![
        c("SHOW EXPLAIN FOR 239", refused()),
        c("show explain format=json for 12", refused()),
        c("SHOW ANALYZE FOR 5", refused()),
        c("/* x */ SHOW\tANALYZE FORMAT = JSON FOR 5", refused()),
        c("EXPLAIN FOR CONNECTION 7", refused()),
        c("explain format=json for connection 7", refused()),
        c("ANALYZE FOR CONNECTION 7", refused()),
        c("DESCRIBE FOR CONNECTION 7", refused()),
        // EXPLAIN of a statement is still planned as that statement.
        c(
            "EXPLAIN SELECT data FROM db00001.pins FOR UPDATE",
            shard(
                "db00001",
                "EXPLAIN SELECT data FROM db00001.pins FOR UPDATE",
            ),
        ),
    ]);
}
