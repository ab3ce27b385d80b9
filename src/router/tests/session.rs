//! Statements about the session or no shard: USE and explicit databases, SET, SHOW, diagnostics, savepoints.

use super::*;

#[test]
fn explicit_and_use_databases() {
    run(vec![
        c(
            "SELECT data FROM DB03429.pins /* keep me */ WHERE local_id = 1",
            shard(
                "db03429",
                "SELECT data FROM DB03429.pins /* keep me */ WHERE local_id = 1",
            ),
        ),
        c(
            "SELECT * FROM `msdb00012`.`user_by_email` WHERE user_id = 1",
            shard(
                "msdb00012",
                "SELECT * FROM `msdb00012`.`user_by_email` WHERE user_id = 1",
            ),
        ),
        c(
            "SELECT * FROM db99999.pins",
            reject("UnknownDatabase", "db99999"),
        ),
        c("SELECT * FROM shop.pins", reject("UnknownDatabase", "shop")),
        c(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'db00001'",
            any("SELECT table_name FROM information_schema.tables WHERE table_schema = 'db00001'"),
        ),
        c(
            "SELECT user FROM mysql.user",
            reject("SystemSchema", "mysql schema is not reachable"),
        ),
        c(
            "USE db03429",
            Expect::Session(SessionAction::Use {
                fleet: 0,
                shard: 3429,
            }),
        ),
        c(
            "use `msdb00001`",
            Expect::Session(SessionAction::Use { fleet: 1, shard: 1 }),
        ),
        c("USE shop", reject("UnknownDatabase", "shop")),
        u(
            "db03429",
            "SELECT id, data FROM pins ORDER BY ts DESC LIMIT 5",
            shard(
                "db03429",
                format!("SELECT {COMPOSED} AS id, data FROM db03429.pins ORDER BY ts DESC LIMIT 5"),
            ),
        ),
        u(
            "db03429",
            format!("SELECT data FROM pins WHERE id = {PIN_B}"),
            shard(
                "db03429",
                "SELECT data FROM db03429.pins WHERE local_id = 5",
            ),
        ),
        // Unknown tables under USE are plain tables of that database.
        u(
            "db03429",
            "SELECT * FROM comments c JOIN pins p ON p.local_id = c.pin",
            shard(
                "db03429",
                format!("SELECT c.*, {} AS id, p.`data`, p.`ts` FROM db03429.comments c JOIN db03429.pins p ON p.local_id = c.pin", COMPOSED.replace("local_id", "p.local_id")),
            ),
        ),
        u(
            "db03429",
            "UPDATE comments SET body = 'x' WHERE k = 1",
            write(
                "db03429",
                "UPDATE db03429.comments SET body = 'x' WHERE k = 1",
            ),
        ),
        // USE of one fleet does not capture another fleet's tables.
        u(
            "db03429",
            "SELECT user_id FROM user_by_email WHERE email = 'user@example.com'",
            shard(
                "msdb02479",
                "SELECT user_id FROM msdb02479.user_by_email WHERE email = 'user@example.com'",
            ),
        ),
        c("SELECT * FROM comments", reject("UnknownTable", "comments")),
        c("SELECT 1 FROM dual", any("SELECT 1 FROM dual")),
    ]);
}

#[test]
fn session_statements() {
    let set = |vars: &[&str], sql: &str| set_session(vars, sql, false);
    run(vec![
        c(
            "BEGIN",
            Expect::Session(SessionAction::Begin {
                sql: "BEGIN".into(),
            }),
        ),
        c(
            "START TRANSACTION READ ONLY",
            Expect::Session(SessionAction::Begin {
                sql: "START TRANSACTION READ ONLY".into(),
            }),
        ),
        c(
            "START TRANSACTION WITH CONSISTENT SNAPSHOT",
            Expect::Session(SessionAction::Begin {
                sql: "START TRANSACTION WITH CONSISTENT SNAPSHOT".into(),
            }),
        ),
        c(
            "start transaction read write, /* c */ with consistent snapshot;",
            Expect::Session(SessionAction::Begin {
                sql: "start transaction read write, /* c */ with consistent snapshot;".into(),
            }),
        ),
        c(
            "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY, READ WRITE",
            reject("Syntax", "WITH"),
        ),
        c(
            "START TRANSACTION WITH CONSISTENT",
            reject("Syntax", "WITH"),
        ),
        set(&["@a"], "SET @`a` = 1"),
        set(&["@a b", "@c"], "SET @'A b' := 1, @\"c\" = 'x'"),
        c("SET @'' = 1", reject("Syntax", "variable name")),
        c("commit", Expect::Session(SessionAction::Commit)),
        c("ROLLBACK", Expect::Session(SessionAction::Rollback)),
        c(
            "SET autocommit = 1",
            Expect::Session(SessionAction::SetAutocommit(true)),
        ),
        c(
            "SET @@autocommit=OFF",
            Expect::Session(SessionAction::SetAutocommit(false)),
        ),
        c(
            "SET autocommit = DEFAULT",
            Expect::Session(SessionAction::SetAutocommit(true)),
        ),
        c(
            "SET SESSION autocommit = ON",
            Expect::Session(SessionAction::SetAutocommit(true)),
        ),
        c(
            "set @@session.AUTOCOMMIT = 0;",
            Expect::Session(SessionAction::SetAutocommit(false)),
        ),
        c("SET autocommit = 'x'", reject("Unsupported", "autocommit")),
        c(
            "SET autocommit = 0, sql_mode = ''",
            Expect::Session(SessionAction::SetSession {
                variables: vec!["sql_mode".into()],
                sql: "SET sql_mode = ''".into(),
                autocommit: Some(false),
                writes_through_function: false,
                computed: false,
                evaluates: crate::router::SetEvaluation::default(),
            }),
        ),
        // MariaDB Connector/J's first statement.
        c(
            "set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')",
            Expect::Session(SessionAction::SetSession {
                variables: vec!["sql_mode".into()],
                sql: "SET sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')".into(),
                autocommit: Some(true),
                writes_through_function: false,
                computed: true,
                evaluates: crate::router::SetEvaluation {
                    calls: true,
                    ..Default::default()
                },
            }),
        ),
        c(
            "SET NAMES utf8mb4, /* c */ SESSION autocommit = OFF, @@local.time_zone='+00:00';",
            Expect::Session(SessionAction::SetSession {
                variables: vec!["names".into(), "time_zone".into()],
                sql: "SET NAMES utf8mb4, @@local.time_zone='+00:00'".into(),
                autocommit: Some(false),
                writes_through_function: false,
                computed: false,
                evaluates: crate::router::SetEvaluation::default(),
            }),
        ),
        c(
            "SET @@autocommit = 0, sql_mode = ''",
            Expect::Session(SessionAction::SetSession {
                variables: vec!["sql_mode".into()],
                sql: "SET sql_mode = ''".into(),
                autocommit: Some(false),
                writes_through_function: false,
                computed: false,
                evaluates: crate::router::SetEvaluation::default(),
            }),
        ),
        c(
            "SET autocommit = 0, sql_mode = /* c */ ''",
            reject("Unsupported", "comments"),
        ),
        // An executable comment the backends read: its assignment as they
        // read it.
        c(
            "SET autocommit = 0, /*!40101 sql_mode = '' */",
            Expect::Session(SessionAction::SetSession {
                variables: vec!["sql_mode".into()],
                sql: "SET sql_mode = ''".into(),
                autocommit: Some(false),
                writes_through_function: false,
                computed: false,
                evaluates: crate::router::SetEvaluation::default(),
            }),
        ),
        c(
            "SET autocommit = 0, sql_mode = /*!40101 '' */ 'x'",
            reject("Unsupported", "comments"),
        ),
        c(
            "SET autocommit = 2, sql_mode = ''",
            reject("Unsupported", "autocommit"),
        ),
        c(
            "SET GLOBAL autocommit = 0, sql_mode = ''",
            reject("Unsupported", "server-wide"),
        ),
        c(
            "SET autocommit = 0, @@global.sql_mode = ''",
            reject("Unsupported", "server-wide"),
        ),
        set(&["sql_mode"], "SET SESSION sql_mode = ''"),
        set(&["sql_mode"], "SET LOCAL sql_mode = ''"),
        set(&["sql_mode"], "SET @@session.sql_mode = ''"),
        set(&["sql_mode"], "SET @@local.sql_mode = ''"),
        c(
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
            Expect::Session(SessionAction::SetNextTransaction {
                sql: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED".into(),
            }),
        ),
        c(
            "set transaction read only",
            Expect::Session(SessionAction::SetNextTransaction {
                sql: "set transaction read only".into(),
            }),
        ),
        c("SET TRANSACTION", reject("Syntax", "ISOLATION LEVEL")),
        c(
            "SELECT @@autocommit, @@SESSION.autocommit AS a, @@in_transaction",
            Expect::Session(SessionAction::SelectSessionValues {
                columns: vec![
                    ("@@autocommit".into(), SessionValue::Autocommit),
                    ("a".into(), SessionValue::Autocommit),
                    ("@@in_transaction".into(), SessionValue::InTransaction),
                ],
            }),
        ),
        c(
            "SELECT @@autocommit, @@version",
            any("SELECT 1 AS `@@autocommit`, '10.11.0-MariaDB-shardgate' AS `@@version`"),
        ),
        // The proxy's packet limit (16 MiB by default), not the servers'.
        c(
            "SELECT @@max_allowed_packet",
            any("SELECT 16777216 AS `@@max_allowed_packet`"),
        ),
        c(
            "select @@global.max_allowed_packet, @@session.max_allowed_packet - 1",
            any("select 16777216 AS `@@global.max_allowed_packet`, 16777216 - 1 AS `@@session.max_allowed_packet - 1`"),
        ),
        c(
            "SELECT @@global.autocommit",
            any("SELECT @@global.autocommit"),
        ),
        // An item a value was put into keeps the name of the client's text.
        c(
            "SELECT DISTINCT CONNECTION_ID()  >  0, `a``b` + @@in_transaction, version() LIKE '1%' FROM dual",
            any("SELECT DISTINCT 0  >  0 AS `CONNECTION_ID()  >  0`, `a``b` + 0 AS ```a````b`` + @@in_transaction`, '10.11.0-MariaDB-shardgate' LIKE '1%' AS `version() LIKE '1%'` FROM dual"),
        ),
        c(
            "SELECT @@version, 1 UNION SELECT VERSION(), CONNECTION_ID() + 1",
            any("SELECT '10.11.0-MariaDB-shardgate' AS `@@version`, 1 UNION SELECT '10.11.0-MariaDB-shardgate' AS `VERSION()`, 0 + 1"),
        ),
        c(
            "SELECT (SELECT @@global.version) v, IFNULL(DATABASE(), 'none') AS d",
            any("SELECT (SELECT '10.11.0-MariaDB-shardgate' AS `@@global.version`) v, IFNULL(NULL, 'none') AS d"),
        ),
        c(
            "SELECT CONNECTION_ID() + 0, connection_id()",
            any("SELECT 0 + 0 AS `CONNECTION_ID() + 0`, 0 AS `connection_id()`"),
        ),
        set(&["names"], "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci"),
        // The connection's collation is the database's: computed.
        set_session(&["charset"], "SET CHARACTER SET utf8mb4", true),
        set(&["sql_mode"], "SET sql_mode='STRICT_TRANS_TABLES'"),
        set(&["time_zone"], "SET time_zone = '+00:00'"),
        set(
            &["transaction_isolation"],
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        ),
        set(
            &["transaction_isolation", "transaction_read_only"],
            "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        ),
        set(&["@x"], "SET @X = 1"),
        set(
            &["@a", "sql_mode", "net_write_timeout"],
            "SET @a := 1, @@SESSION.sql_mode = 'x', net_write_timeout=600",
        ),
        set_session(
            &["sql_select_limit"],
            "/* c */ SET sql_select_limit = DEFAULT",
            true,
        ),
        // Values computed from the session are replayed by value.
        set_session(
            &["sql_mode"],
            "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_ENGINE_SUBSTITUTION')",
            true,
        ),
        set_session(
            &["max_sort_length"],
            "SET @@session.max_sort_length = @@session.max_sort_length + 1",
            true,
        ),
        set_session(&["names"], "SET NAMES DEFAULT", true),
        set_session(&["time_zone"], "SET time_zone = @tz", true),
        set_session(&["@t"], "SET @t = CURRENT_TIMESTAMP", true),
        set_session(&["@a", "@b"], "SET @a = 1, @b = @a", true),
        set(&["names"], "SET NAMES utf8mb4"),
        set(&["@n", "sql_mode"], "SET @n = -5, sql_mode = ANSI"),
        c(
            "SET GLOBAL max_connections = 10",
            reject("Unsupported", "SET GLOBAL"),
        ),
        c(
            "SET @@global.max_connections = 10",
            reject("Unsupported", "server-wide"),
        ),
        c("SET PASSWORD = 'x'", reject("Unsupported", "PASSWORD")),
        c(
            "SELECT LAST_INSERT_ID()",
            Expect::Session(SessionAction::SelectLastInsertId {
                column: "LAST_INSERT_ID()".into(),
            }),
        ),
        c(
            "select schema()",
            Expect::Session(SessionAction::SelectDatabase {
                column: "schema()".into(),
            }),
        ),
        c(
            "SELECT DATABASE() AS db",
            Expect::Session(SessionAction::SelectDatabase {
                column: "db".into(),
            }),
        ),
        c("SELECT LAST_INSERT_ID(5)", any("SELECT LAST_INSERT_ID(5)")),
    ]);
}

#[test]
fn table_less_and_show() {
    run(vec![
        c(
            "SELECT @@version_comment LIMIT 1",
            any("SELECT @@version_comment LIMIT 1"),
        ),
        c("SELECT NOW(), 1 + 1", any("SELECT NOW(), 1 + 1")),
        c("/* ping */ SELECT 1", any("/* ping */ SELECT 1")),
        c("SHOW DATABASES", any("SHOW DATABASES")),
        c(
            "SHOW SESSION STATUS LIKE 'Threads%'",
            any("SHOW SESSION STATUS LIKE 'Threads%'"),
        ),
        c(
            "SHOW ENGINE INNODB STATUS",
            any("SHOW ENGINE INNODB STATUS"),
        ),
        c("SHOW STATUS", any("SHOW STATUS")),
        c(
            "SHOW GRANTS FOR CURRENT_USER()",
            reject("SystemSchema", "grants and password are not shown"),
        ),
        c("SHOW TABLES", any("SHOW TABLES")),
        u(
            "db03429",
            "SHOW TABLES",
            shard("db03429", "SHOW TABLES FROM db03429"),
        ),
        u(
            "db03429",
            "SHOW FULL TABLES LIKE 'p%'",
            shard("db03429", "SHOW FULL TABLES FROM db03429 LIKE 'p%'"),
        ),
        c(
            "SHOW TABLES FROM db00012",
            shard("db00012", "SHOW TABLES FROM db00012"),
        ),
        c("SHOW TABLES FROM nope", reject("UnknownDatabase", "nope")),
        u(
            "db03429",
            "SHOW COLUMNS FROM pins",
            shard("db03429", "SHOW COLUMNS FROM db03429.pins"),
        ),
        c(
            "SHOW COLUMNS FROM pins",
            reject("NoShardKey", "USE dbNNNNN"),
        ),
        c(
            "SHOW COLUMNS FROM pins FROM db00001",
            shard("db00001", "SHOW COLUMNS FROM pins FROM db00001"),
        ),
        c(
            "SHOW COLUMNS FROM mystery",
            reject("UnknownTable", "mystery"),
        ),
        u(
            "db03429",
            "SHOW CREATE TABLE `pins`",
            shard("db03429", "SHOW CREATE TABLE db03429.`pins`"),
        ),
        u(
            "db03429",
            "SHOW INDEX FROM pins",
            shard("db03429", "SHOW INDEX FROM db03429.pins"),
        ),
        c(
            "SHOW INDEX FROM pins FROM db00002",
            shard("db00002", "SHOW INDEX FROM pins FROM db00002"),
        ),
        u(
            "db03429",
            "DESCRIBE pins",
            shard("db03429", "DESCRIBE db03429.pins"),
        ),
        u(
            "db03429",
            "SHOW TABLE STATUS",
            shard("db03429", "SHOW TABLE STATUS FROM db03429"),
        ),
        u("msdb00001", "DESC pins", reject("CrossShard", "fleet main")),
        u(
            "db03429",
            format!("EXPLAIN SELECT data FROM pins WHERE id = {PIN}"),
            shard(
                "db03429",
                "EXPLAIN SELECT data FROM db03429.pins WHERE local_id = 7075733",
            ),
        ),
    ]);
}

#[test]
fn show_forms_sqlparser_does_not_know() {
    run(vec![
        c(
            "SHOW CREATE DATABASE db00001",
            shard("db00001", "SHOW CREATE DATABASE db00001"),
        ),
        c(
            "SHOW TRIGGERS FROM db00001",
            shard("db00001", "SHOW TRIGGERS FROM db00001"),
        ),
        c(
            "SHOW INDEX FROM db00002.pins",
            shard("db00002", "SHOW INDEX FROM db00002.pins"),
        ),
        c(
            "SHOW TABLE STATUS FROM db00003 LIKE 'p%'",
            shard("db00003", "SHOW TABLE STATUS FROM db00003 LIKE 'p%'"),
        ),
        c("SHOW SLAVE STATUS", any("SHOW SLAVE STATUS")),
        c("SHOW PLUGINS", any("SHOW PLUGINS")),
    ]);
}

#[test]
fn diagnostics() {
    let diag = |sql: &str| c(sql, Expect::Diagnostics(sql.to_owned()));
    run(vec![
        diag("SHOW WARNINGS"),
        diag("show warnings limit 10"),
        diag("SHOW WARNINGS LIMIT 5, 10"),
        diag("SHOW ERRORS"),
        diag("SHOW ERRORS LIMIT 1;"),
        diag("SHOW COUNT(*) WARNINGS"),
        diag("SHOW COUNT( * ) ERRORS"),
        diag("/* c */ SHOW WARNINGS"),
        diag("SELECT @@warning_count"),
        diag("SELECT @@error_count"),
        diag("select @@SESSION.warning_count"),
        diag("SELECT @@session.error_count AS errors"),
        diag("SELECT @@local.warning_count"),
        diag("SELECT @@warning_count, @@error_count"),
        diag("SELECT @@warning_count, @@version_comment, 1 LIMIT 1"),
        // Not diagnostics.
        c("SELECT @@version_comment", any("SELECT @@version_comment")),
        c(
            "SELECT @@global.warning_count",
            any("SELECT @@global.warning_count"),
        ),
        c(
            "SELECT @@warning_count + 1",
            any("SELECT @@warning_count + 1"),
        ),
        c("SELECT warning_count FROM t", reject("UnknownTable", "t")),
        c(
            "SHOW VARIABLES LIKE 'warning%'",
            any("SHOW VARIABLES LIKE 'warning%'"),
        ),
        c("SHOW COUNT(*) THINGS", any("SHOW COUNT(*) THINGS")),
        c("SHOW WARNINGS; SELECT 1", reject("Syntax", "one at a time")),
        u(
            "db03429",
            "SHOW WARNINGS",
            Expect::Diagnostics("SHOW WARNINGS".into()),
        ),
    ]);
    // route_prepare agrees.
    let t = topo();
    assert_eq!(
        route_prepare("SHOW WARNINGS", &t, &RouteContext::default()),
        Plan::Diagnostics {
            sql: "SHOW WARNINGS".into(),
            asked: Diagnostics::List(DiagnosticsArea::Warnings),
        }
    );
}

#[test]
fn savepoints() {
    let savepoint = |sql: &str| {
        c(
            sql,
            Expect::Session(SessionAction::Savepoint { sql: sql.into() }),
        )
    };
    run(vec![
        savepoint("SAVEPOINT a"),
        savepoint("savepoint `my point`"),
        savepoint("ROLLBACK TO a"),
        savepoint("ROLLBACK TO SAVEPOINT a"),
        savepoint("ROLLBACK WORK TO a"),
        savepoint("rollback work to savepoint a;"),
        savepoint("RELEASE SAVEPOINT a"),
        c("ROLLBACK", Expect::Session(SessionAction::Rollback)),
        c("ROLLBACK WORK", Expect::Session(SessionAction::Rollback)),
        c("ROLLBACK AND CHAIN", reject("Unsupported", "AND CHAIN")),
        c("SAVEPOINT", reject("Syntax", "")),
    ]);
}

#[test]
fn set_statement_routes_the_wrapped_statement() {
    let plan = route_lex(
        "SET STATEMENT max_statement_time=1 FOR SELECT 1",
        LexMode::default(),
    );
    assert_eq!(
        plan,
        Plan::AnyHost {
            sql: "SET STATEMENT max_statement_time=1 FOR SELECT 1".into(),
            writes_through_function: false,
        }
    );
    let sql = format!(
        "SET STATEMENT max_statement_time=1, join_cache_level=(1) FOR SELECT data FROM pins WHERE id = {PIN}"
    );
    match route_lex(&sql, LexMode::default()) {
        Plan::Shard(q) => assert_eq!(
            q.sql,
            "SET STATEMENT max_statement_time=1, join_cache_level=(1) FOR SELECT data FROM db03429.pins WHERE local_id = 7075733"
        ),
        other => panic!("{other:?}"),
    }
    for (sql, kind) in [
        (
            "SET STATEMENT max_statement_time=1 FOR CREATE USER x IDENTIFIED BY 'y'",
            "*",
        ),
        (
            "SET STATEMENT max_statement_time=1 FOR CREATE USER x",
            "Unsupported",
        ),
        (
            "SET STATEMENT max_statement_time=1 FOR KILL 1",
            "Unsupported",
        ),
        (
            "SET STATEMENT max_statement_time=1 FOR SET GLOBAL max_connections=1",
            "Unsupported",
        ),
        (
            "SET STATEMENT max_statement_time=1 FOR USE db00001",
            "Unsupported",
        ),
        (
            "SET STATEMENT max_statement_time=1 FOR BEGIN",
            "Unsupported",
        ),
        (
            "SET STATEMENT max_statement_time=1 FOR SELECT data FROM pins",
            "NoShardKey",
        ),
        (
            "SET STATEMENT sql_mode='NO_BACKSLASH_ESCAPES' FOR SELECT 1",
            "Unreadable",
        ),
        (
            "SET STATEMENT character_set_client=gbk FOR SELECT 1",
            "Unreadable",
        ),
        (
            "SET STATEMENT collation_connection=gbk_bin FOR SELECT 1",
            "Unreadable",
        ),
        (
            "SET STATEMENT GLOBAL max_connections=1 FOR SELECT 1",
            "Unsupported",
        ),
        ("SET STATEMENT max_statement_time=1", "Syntax"),
        ("SET STATEMENT FOR SELECT 1", "Syntax"),
    ] {
        let plan = route_lex(sql, LexMode::default());
        assert!(
            matches!(&plan, Plan::Reject(e) if kind == "*" || variant(e) == kind),
            "{sql}: {plan:?}"
        );
    }
}

#[test]
fn session_functions_in_statements_sent_to_a_backend_are_the_sessions_values() {
    run(vec![
        u(
            "db03429",
            "SELECT DATABASE(), 1",
            any("SELECT 'db03429' AS `DATABASE()`, 1"),
        ),
        c(
            "SELECT 1, schema( ) FROM dual",
            any("SELECT 1, NULL AS `schema( )` FROM dual"),
        ),
        c(
            "SELECT LAST_INSERT_ID() + 1, CONCAT(DATABASE(), 'x') AS d",
            any("SELECT 0 + 1 AS `LAST_INSERT_ID() + 1`, CONCAT(NULL, 'x') AS d"),
        ),
        c(
            "SELECT DATABASE() db, (SELECT DATABASE())",
            any("SELECT NULL db, (SELECT NULL AS `DATABASE()`)"),
        ),
        c(
            "SELECT @@SESSION.autocommit + 0, @@local . in_transaction x, @@global.autocommit",
            any("SELECT 1 + 0 AS `@@SESSION.autocommit + 0`, 0 x, @@global.autocommit"),
        ),
        // Qualified, quoted, or with arguments: not the session's function.
        c(
            "SELECT LAST_INSERT_ID(5), `DATABASE`(), x.database()",
            any("SELECT LAST_INSERT_ID(5), `DATABASE`(), x.database()"),
        ),
    ]);
}

#[test]
fn a_key_given_as_last_insert_id_routes_by_the_sessions_id() {
    let t = topo();
    let id = (3429u64 << 46) | (1 << 36) | 7;
    let ctx = RouteContext {
        last_insert_id: id,
        ..RouteContext::default()
    };
    let plan = route(
        "SELECT data FROM pins WHERE id = LAST_INSERT_ID()",
        &t,
        &ctx,
        &mut Fixed(0),
    );
    let Plan::Shard(query) = plan else {
        panic!("{plan:?}");
    };
    assert_eq!(query.target.shard, 3429);
    assert!(
        String::from_utf8_lossy(&query.sql.0).ends_with("WHERE local_id = 7"),
        "{:?}",
        query.sql
    );
}

#[test]
fn do_and_set_get_the_sessions_values() {
    let ctx = RouteContext {
        last_insert_id: 4242,
        autocommit: false,
        ..RouteContext::default()
    };
    let plan = |sql: &str| route(sql, &topo(), &ctx, &mut Fixed(3429));
    assert_eq!(
        plan("DO LAST_INSERT_ID(), @@autocommit"),
        Plan::AnyHost {
            sql: "DO 4242, 0".into(),
            writes_through_function: false,
        }
    );
    assert_eq!(
        plan("SET @x = LAST_INSERT_ID(), @y := (SELECT @@autocommit)"),
        Plan::Session(SessionAction::SetSession {
            variables: vec!["@x".to_owned(), "@y".to_owned()],
            sql: "SET @x = 4242, @y := (SELECT 0 AS `@@autocommit`)".into(),
            autocommit: None,
            writes_through_function: false,
            computed: true,
            evaluates: crate::router::SetEvaluation {
                calls: true,
                ..Default::default()
            },
        })
    );
    // An assigned variable stays a name.
    assert_eq!(
        plan("SET @@session.max_allowed_packet = 1024"),
        Plan::Session(SessionAction::SetSession {
            variables: vec!["max_allowed_packet".to_owned()],
            sql: "SET @@session.max_allowed_packet = 1024".into(),
            autocommit: None,
            writes_through_function: false,
            computed: false,
            evaluates: crate::router::SetEvaluation::default(),
        })
    );
    assert_eq!(
        plan("SET @@autocommit = 1"),
        Plan::Session(SessionAction::SetAutocommit(true))
    );
}

#[test]
fn variables_that_would_undo_the_proxys_rules_are_refused() {
    let set = |vars: &[&str], sql: &str| set_session(vars, sql, false);
    run(vec![
        c("SET ROLE NONE", reject("Unsupported", "SET ROLE")),
        c("set role admin_role", reject("Unsupported", "SET ROLE")),
        c(
            "SET DEFAULT ROLE NONE",
            reject("Unsupported", "DEFAULT ROLE"),
        ),
        c(
            "SET DEFAULT ROLE r FOR CURRENT_USER",
            reject("Unsupported", "DEFAULT ROLE"),
        ),
        c(
            "SET completion_type = 1",
            reject("Unsupported", "completion_type"),
        ),
        c(
            "SET @@session.completion_type = 'CHAIN'",
            reject("Unsupported", "completion_type"),
        ),
        c(
            "SET sql_mode = '', completion_type = RELEASE",
            reject("Unsupported", "completion_type"),
        ),
        c(
            "SET STATEMENT completion_type = 2 FOR SELECT 1",
            reject("Unsupported", "completion_type"),
        ),
        set(&["completion_type"], "SET completion_type = NO_CHAIN"),
        set(&["completion_type"], "SET completion_type = 0"),
        c(
            "SET SESSION default_storage_engine = 'MRG_MyISAM'",
            reject("Unsupported", "default_storage_engine"),
        ),
        c(
            "SET storage_engine = SPIDER",
            reject("Unsupported", "storage_engine"),
        ),
        c(
            "SET default_tmp_storage_engine = CONNECT",
            reject("Unsupported", "default_tmp_storage_engine"),
        ),
        set(
            &["default_storage_engine"],
            "SET default_storage_engine = innodb",
        ),
        set(
            &["default_storage_engine"],
            "SET default_storage_engine = 'Aria'",
        ),
        c(
            "SET SESSION skip_replication = 1",
            reject("Unsupported", "skip_replication"),
        ),
    ]);
}

/// [`records_whole_text`] says yes only for SETs the planner records
/// whole (so their length alone may refuse them before analysis), and no
/// for every SET it records otherwise or not at all.
#[test]
fn a_set_recorded_whole_is_known_from_its_first_bytes() {
    let topology = topo();
    let recorded_whole =
        |sql: &str| match route(sql, &topology, &RouteContext::default(), &mut Fixed(0)) {
            Plan::Session(SessionAction::SetSession { sql: text, .. }) => text.0 == sql.as_bytes(),
            _ => false,
        };
    for sql in [
        "SET @x = 'abc'",
        "  SET @x = 1, @y = 2",
        "SET @@session.sql_mode = ''",
        "SET @@local.wait_timeout = 10",
        "SET @@max_statement_time = 1",
        "SET sql_mode = 'ANSI'",
        "SET wait_timeout=10",
        "SET\tmax_statement_time = 1, @z = 'q'",
    ] {
        assert!(records_whole_text(sql.as_bytes()), "{sql}");
        assert!(
            recorded_whole(sql),
            "{sql}: {:?}",
            route(sql, &topology, &RouteContext::default(), &mut Fixed(0))
        );
    }
    for sql in [
        "SET autocommit = 0",
        "SET @x = 1, autocommit = 1",
        "SET AUTOCOMMIT = 1",
        "SET STATEMENT max_statement_time = 1 FOR SELECT 1",
        "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
        "SET SESSION TRANSACTION READ ONLY",
        "SET GLOBAL wait_timeout = 1",
        "SET @@global.wait_timeout = 1",
        "SET NAMES utf8mb4",
        "SET CHARACTER SET utf8mb4",
        "SET PASSWORD = 'x'",
        "/* c */ SET @x = 1",
        "set @`odd name` = 1",
        "SET@x=1",
        "SETx = 1",
        "SELECT 1",
        "SET",
    ] {
        assert!(!records_whole_text(sql.as_bytes()), "{sql}");
    }
}

/// F14: `ROW_COUNT()`, `@@identity` and `@@last_insert_id` read the
/// session's values (a pooled connection's are another statement's);
/// `FOUND_ROWS()` and `SQL_CALC_FOUND_ROWS` are refused.
#[test]
fn row_count_and_insert_id_variables_are_the_sessions_found_rows_is_refused() {
    let t = topo();
    let plan_with = |sql: &str, row_count: i64, last_insert_id: u64| {
        let ctx = RouteContext {
            row_count,
            last_insert_id,
            ..RouteContext::default()
        };
        route(sql, &t, &ctx, &mut Fixed(3429))
    };
    let any_sql = |plan: Plan| match plan {
        Plan::AnyHost { sql, .. } => sql.to_string(),
        other => panic!("expected a table-less plan, got {other:?}"),
    };
    assert_eq!(
        any_sql(plan_with("SELECT ROW_COUNT()", 3, 0)),
        "SELECT 3 AS `ROW_COUNT()`"
    );
    assert_eq!(
        any_sql(plan_with("SELECT row_count ( ) > 0 AS hit", -1, 0)),
        "SELECT -1 > 0 AS hit"
    );
    assert_eq!(
        any_sql(plan_with(
            "SELECT @@identity, @@session.last_insert_id",
            0,
            5004
        )),
        "SELECT 5004 AS `@@identity`, 5004 AS `@@session.last_insert_id`"
    );
    match plan_with("SELECT data FROM db00001.t WHERE n = ROW_COUNT()", 2, 0) {
        Plan::Shard(query) => {
            assert_eq!(
                query.sql.to_string(),
                "SELECT data FROM db00001.t WHERE n = 2"
            )
        }
        other => panic!("expected shard 1: {other:?}"),
    }
    for sql in [
        "SELECT FOUND_ROWS()",
        "SELECT found_rows /* c */ () AS n",
        "SELECT SQL_CALC_FOUND_ROWS id FROM db00001.t LIMIT 1",
        "SET @n = FOUND_ROWS()",
        "DO FOUND_ROWS()",
    ] {
        match plan_with(sql, 0, 0) {
            Plan::Reject(error) => assert!(
                error
                    .to_string()
                    .contains("FOUND_ROWS() and SQL_CALC_FOUND_ROWS"),
                "{sql}: {error}"
            ),
            other => panic!("{sql}: expected a refusal, got {other:?}"),
        }
    }
    // A name, not the function.
    assert_eq!(
        any_sql(plan_with("SELECT 'FOUND_ROWS()', `found_rows`", 0, 0)),
        "SELECT 'FOUND_ROWS()', `found_rows`"
    );
}
