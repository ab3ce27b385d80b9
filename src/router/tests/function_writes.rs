//! Statements that write through a function (sequences, user locks,
//! stored functions) and statements that would commit an open
//! transaction, as the plan says: what the fence refuses.

use super::*;

/// The plan of `sql`, under `USE db` when given.
fn plan_of(sql: &str, db: Option<&str>) -> Plan {
    let t = topo();
    let ctx = RouteContext {
        current_db: db.map(|d| t.parse_database(d).expect("test database")),
        ..RouteContext::default()
    };
    route(sql, &t, &ctx, &mut Fixed(3429))
}

#[test]
fn functions_that_write_mark_the_plan_whatever_its_form() {
    let writing = [
        ("SELECT NEXTVAL(db00001.s)", None),
        ("SELECT nextval(s)", Some("db00001")),
        ("SELECT SETVAL(db00001.s, 100)", None),
        ("SET @a = NEXT VALUE FOR db00001.s", None),
        ("SET @a = next /* c */ value for db00001.s", None),
        ("SET @a = GET_LOCK('a', 0)", None),
        ("SELECT GET_LOCK('a', 0)", None),
        ("select get_lock /* c */ ('a', 1)", None),
        ("DO RELEASE_LOCK('a')", None),
        ("DO RELEASE_ALL_LOCKS()", None),
        (
            "SELECT GET_LOCK('a', 0), data FROM pins WHERE id = 241294492511762325",
            None,
        ),
        (
            "SELECT data FROM db00001.pins WHERE local_id = db00001.f(1)",
            None,
        ),
        ("SELECT db00001.f(1)", None),
        ("SELECT `f`(1)", Some("db00001")),
        ("SELECT f(1)", Some("db00001")),
        // Without IGNORE_SPACE, `name (` is a stored function or UDF.
        ("SELECT concat ('a')", Some("db00001")),
        ("SELECT SUM (1) FROM db00001.pins", None),
        ("SET @a = 1 + my_udf(2)", None),
    ];
    let reading = [
        ("SELECT LASTVAL(db00001.s)", None),
        ("SELECT IS_FREE_LOCK('a'), IS_USED_LOCK('a')", None),
        ("SELECT SLEEP(0)", None),
        (
            "SELECT CONCAT('a', 'b'), count(*) FROM pins WHERE id = 241294492511762325",
            None,
        ),
        (
            "SELECT CAST(1 AS DECIMAL(10,2)), CONVERT('a', CHAR(3)), IF(1, 2, 3)",
            None,
        ),
        (
            "SELECT ST_X(POINT(1, 2)), JSON_EXTRACT('[1]', '$[0]')",
            None,
        ),
        ("WITH c (a) AS (SELECT 1) SELECT * FROM c", None),
        ("SELECT 'GET_LOCK(1)', `NEXTVAL`", None),
        ("SELECT 1 /* NEXTVAL(s) */", None),
        (
            "SET @a = (SELECT 1), sql_mode = CONCAT(@@sql_mode, ',STRICT_TRANS_TABLES')",
            None,
        ),
        (
            "SELECT data FROM pins WHERE id IN (241294492511762325, 1) = (1)",
            None,
        ),
    ];
    let mut wrong = Vec::new();
    for (sql, db) in writing {
        let plan = plan_of(sql, db);
        if matches!(plan, Plan::Reject(_)) || !plan.writes_through_function() {
            wrong.push(format!("{sql}: should write through a function: {plan:?}"));
        }
    }
    for (sql, db) in reading {
        let plan = plan_of(sql, db);
        if plan.writes_through_function() {
            wrong.push(format!("{sql}: only reads: {plan:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_part_of_a_multi_shard_read_carries_the_mark() {
    let sql = format!("SELECT GET_LOCK('x', 0), data FROM pins WHERE id IN ({PIN}, {PIN_FAR})");
    match plan_of(&sql, None) {
        Plan::MultiShard(query) => {
            assert_eq!(query.parts.len(), 2);
            assert!(query.parts.iter().all(|p| p.writes_through_function));
        }
        other => panic!("expected a multi-shard read: {other:?}"),
    }
    let plain = format!("SELECT data FROM pins WHERE id IN ({PIN}, {PIN_FAR})");
    assert!(!plan_of(&plain, None).writes_through_function());
}

#[test]
fn statements_that_would_commit_an_open_transaction() {
    let commits = [
        "COMMIT",
        "BEGIN",
        "START TRANSACTION",
        "START TRANSACTION READ ONLY",
        "START TRANSACTION READ WRITE",
        "START TRANSACTION WITH CONSISTENT SNAPSHOT",
        "SET autocommit = 1",
        "SET @@session.autocommit = ON",
        "SET autocommit = 1, sql_mode = ''",
        "ALTER TABLE db00001.pins ADD COLUMN x INT",
        "CREATE INDEX i ON db00001.pins (data)",
    ];
    let keeps = [
        "ROLLBACK",
        "SET autocommit = 0",
        "SET autocommit = 0, sql_mode = ''",
        "SET sql_mode = ''",
        "SAVEPOINT a",
        "SELECT 1",
        "SELECT data FROM db00001.pins",
        "INSERT INTO db00001.pins (data) VALUES ('x')",
    ];
    let mut wrong = Vec::new();
    for sql in commits {
        let plan = plan_of(sql, None);
        if !plan.commits_transaction() {
            wrong.push(format!("{sql}: commits: {plan:?}"));
        }
    }
    for sql in keeps {
        let plan = plan_of(sql, None);
        if matches!(plan, Plan::Reject(_)) || plan.commits_transaction() {
            wrong.push(format!("{sql}: does not commit: {plan:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn statements_that_leave_session_state_mark_their_shard_plan() {
    let marked = |plan: &Plan| match plan {
        Plan::Shard(query) => query.leaves_session_state,
        Plan::MultiShard(query) => query.parts.iter().all(|p| p.leaves_session_state),
        _ => false,
    };
    for sql in [
        "SELECT @v := data FROM db00001.pins WHERE local_id = 1",
        "SELECT data INTO @v FROM db00001.pins LIMIT 1",
        "SELECT GET_LOCK('a', 0), (SELECT 1 FROM db00001.pins LIMIT 1)",
        "SELECT NEXTVAL(db00001.s), data FROM db00001.pins LIMIT 1",
    ] {
        let plan = plan_of(sql, None);
        assert!(marked(&plan), "{sql}: {plan:?}");
    }
    for sql in [
        "SELECT data FROM db00001.pins WHERE local_id = 1",
        "INSERT INTO db00001.pins (data) VALUES (':= @v')",
        "SELECT @v, IS_FREE_LOCK('a') FROM db00001.pins LIMIT 1",
    ] {
        let plan = plan_of(sql, None);
        assert!(!marked(&plan), "{sql}: {plan:?}");
    }
}

/// F18: the shard database of a sequence or stored function named in an
/// expression (DML, or a DEFAULT / CHECK of a schema change) is one more
/// name of the statement.
#[test]
fn sequences_and_functions_of_another_shard_are_names_of_the_statement() {
    let elsewhere = |object: &str| {
        reject(
            "CrossShard",
            format!("{object} is in db00002, but the statement goes to db00001"),
        )
    };
    run(vec![
        c(
            "INSERT INTO db00001.redteam_t (v) VALUES (NEXTVAL(db00002.redteam_s))",
            elsewhere("db00002.redteam_s"),
        ),
        c(
            "SELECT NEXTVAL(db00002.redteam_s), v FROM db00001.redteam_t",
            elsewhere("db00002.redteam_s"),
        ),
        c(
            "UPDATE db00001.redteam_t SET v = SETVAL(db00002.redteam_s, 500) WHERE v = 'x'",
            elsewhere("db00002.redteam_s"),
        ),
        c(
            "SELECT LASTVAL(db00002.s) FROM db00001.t",
            elsewhere("db00002.s"),
        ),
        c(
            "SELECT `db00002` . `s`.nextval FROM db00001.t",
            elsewhere("db00002.s"),
        ),
        c("SELECT db00002.f(1) FROM db00001.t", elsewhere("db00002.f")),
        c(
            "CREATE TABLE db00001.redteam_d (a int DEFAULT (NEXTVAL(db00002.redteam_s)), b int)",
            elsewhere("db00002.redteam_s"),
        ),
        c(
            "ALTER TABLE db00001.redteam_d ADD c int DEFAULT (nextval(/* x */ db00002.redteam_s))",
            elsewhere("db00002.redteam_s"),
        ),
        c(
            "ALTER TABLE db00001.redteam_d ALTER b SET DEFAULT (NEXTVAL(db00002.redteam_s))",
            elsewhere("db00002.redteam_s"),
        ),
        c(
            "CREATE TABLE db00001.x (a int, CHECK (a < LASTVAL(db00002.s)))",
            elsewhere("db00002.s"),
        ),
        u(
            "db00001",
            "INSERT INTO t (v) VALUES (SETVAL(db00002.s, 5))",
            elsewhere("db00002.s"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} AND data = NEXTVAL(db00012.s)"),
            reject(
                "CrossShard",
                "db00012.s is in db00012, but the statement goes to db03429",
            ),
        ),
        c(
            format!("SELECT data, NEXTVAL(db03429.s) FROM pins WHERE id IN ({PIN}, {PIN_FAR})"),
            reject(
                "CrossShard",
                "db03429.s is in db03429, but the read runs on several shards",
            ),
        ),
        c(
            "SELECT NEXTVAL(db00001.s), NEXTVAL(db00002.s)",
            reject(
                "CrossShard",
                "db00001.s is in db00001, but db00002.s is in db00002",
            ),
        ),
        // Refused as the server's syntax sqlparser does not read.
        c(
            "SELECT NEXT VALUE FOR db00002.s, v FROM db00001.t",
            reject("Syntax", ""),
        ),
        // On the sequence's own shard: fine; table-less, sent there.
        c(
            "INSERT INTO db00001.redteam_t (v) VALUES (NEXTVAL(db00001.redteam_s))",
            write(
                "db00001",
                "INSERT INTO db00001.redteam_t (v) VALUES (NEXTVAL(db00001.redteam_s))",
            ),
        ),
        c(
            "SELECT NEXTVAL(db00002.s)",
            shard("db00002", "SELECT NEXTVAL(db00002.s)"),
        ),
        c(
            "SELECT db02048.f(1)",
            shard("db02048", "SELECT db02048.f(1)"),
        ),
        c(
            "DO SETVAL(db00002.s, 10)",
            shard("db00002", "DO SETVAL(db00002.s, 10)"),
        ),
        c(
            "CREATE TABLE db00002.d (a int DEFAULT (NEXTVAL(db00002.s)))",
            ddl(
                "db00002",
                "CREATE TABLE db00002.d (a int DEFAULT (NEXTVAL(db00002.s)))",
            ),
        ),
        // Databases that are not shard databases are left to the server.
        c("SELECT util.f(1)", any("SELECT util.f(1)")),
    ]);
}

/// What a SET's values reach (F2): the one shard database a subquery
/// reads (several refused), row locks, calls and subqueries.
#[test]
fn set_values_say_which_shard_they_read_and_whether_they_call() {
    let evaluates = |sql: &str| match plan_of(sql, None) {
        Plan::Session(SessionAction::SetSession { evaluates, .. }) => evaluates,
        other => panic!("{sql}: {other:?}"),
    };
    let read = evaluates("SET @x = (SELECT count(*) FROM db03000.pins)");
    assert_eq!(read.shard.map(|t| (t.fleet, t.shard)), Some((0, 3000)));
    assert!(read.calls && !read.locking);
    let locking =
        evaluates("SET @v = (SELECT data FROM `db00001`.pins WHERE local_id = 1 FOR UPDATE)");
    assert_eq!(locking.shard.map(|t| t.shard), Some(1));
    assert!(locking.locking);
    assert!(evaluates("SET @v = (SELECT 1 FROM db00001.pins LOCK IN SHARE MODE)").locking);
    assert!(evaluates("SET @s = SLEEP(0)").calls);
    assert_eq!(evaluates("SET @s = SLEEP(0)").shard, None);
    assert_eq!(
        evaluates("SET @a = 1, @b = 'db00001.pins'"),
        SetEvaluation::default()
    );
    assert_eq!(
        evaluates("SET sql_mode = CONCAT(@@sql_mode, ',ANSI')").shard,
        None
    );
    match plan_of(
        "SET @x = (SELECT count(*) FROM db00001.pins) + (SELECT count(*) FROM db03000.pins)",
        None,
    ) {
        Plan::Reject(RouteError::Unsupported(message)) => {
            assert!(message.contains("db00001, db03000"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}
