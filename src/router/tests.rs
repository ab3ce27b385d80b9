//! Table-driven router tests: statement → plan, target and SQL text.

use super::*;
use crate::id::mod_shard;
use crate::topology::tests::{load, SPEC_YAML};
use crate::topology::Topology;

/// A fleet with no open range, for placement errors.
const CLOSED_FLEET: &str = r#"  closed:
    shards: 16
    database: "cl{:03}"
    hosts:
      - { range: [0, 15], master: 127.0.0.1:3311 }
"#;

/// SPEC section 4's example (the topology tests' fixture), plus fleet
/// `closed` with no open range and object table `notes` (type `note`) on it.
fn topo() -> Topology {
    let yaml = SPEC_YAML
        .replacen("user: 3 }", "user: 3, note: 4 }", 1)
        .replacen("\ntables:\n", &format!("\n{CLOSED_FLEET}tables:\n"), 1)
        + "  notes:           { fleet: closed, object: note }\n";
    assert!(
        yaml.contains("note: 4") && yaml.contains(CLOSED_FLEET),
        "SPEC_YAML no longer has the shape this extends:\n{yaml}"
    );
    load(&yaml)
}

const fn id(shard: u64, type_id: u64, local: u64) -> u64 {
    (shard << 46) | (type_id << 36) | local
}

/// The SPEC vector: shard 3429, type 1 (pin), local 7075733.
const PIN: u64 = 241294492511762325;
const PIN_B: u64 = id(3429, 1, 5);
const PIN_FAR: u64 = id(12, 1, 9);
const BOARD: u64 = id(3429, 2, 77);
const BOARD_FAR: u64 = id(100, 2, 1);
/// SPEC's COLOCATE example: a board on shard 3429.
const COLOCATE: u64 = 241294561224164665;

/// Always chooses the same shard (clamped to the range).
struct Fixed(u32);

impl Placement for Fixed {
    fn choose(&mut self, first: u32, last: u32) -> u32 {
        self.0.clamp(first, last)
    }
}

#[derive(Debug)]
enum Expect {
    /// Runs on the shard whose database is named, with this text and kind.
    Shard(&'static str, String, StatementKind),
    /// Runs anywhere with this text.
    Any(String),
    /// Handled by the proxy.
    Session(SessionAction),
    /// About the previous statement, with this text.
    Diagnostics(String),
    /// Refused with this variant, the message containing the text.
    Reject(&'static str, String),
    /// Runs on several shards: each part's database and text (kind Read),
    /// in order, and the merge.
    Multi(Vec<(String, String)>, Merge),
}

fn variant(e: &RouteError) -> &'static str {
    match e {
        RouteError::Syntax(_) => "Syntax",
        RouteError::UnknownTable(_) => "UnknownTable",
        RouteError::UnknownDatabase(_) => "UnknownDatabase",
        RouteError::NoShardKey { .. } => "NoShardKey",
        RouteError::BadId { .. } => "BadId",
        RouteError::BadHint { .. } => "BadHint",
        RouteError::CrossShard(_) => "CrossShard",
        RouteError::Unsupported(_) => "Unsupported",
        RouteError::TooDeep(_) => "TooDeep",
        RouteError::SystemSchema { .. } => "SystemSchema",
        RouteError::Unreadable(_) => "Unreadable",
    }
}

fn shard(db: &'static str, sql: impl Into<String>) -> Expect {
    Expect::Shard(db, sql.into(), StatementKind::Read)
}
fn write(db: &'static str, sql: impl Into<String>) -> Expect {
    Expect::Shard(db, sql.into(), StatementKind::Write)
}
fn locking(db: &'static str, sql: impl Into<String>) -> Expect {
    Expect::Shard(db, sql.into(), StatementKind::LockingRead)
}
fn any(sql: impl Into<String>) -> Expect {
    Expect::Any(sql.into())
}
fn reject(kind: &'static str, contains: impl Into<String>) -> Expect {
    Expect::Reject(kind, contains.into())
}

/// Checks one case; returns a description of the mismatch, if any.
fn check(t: &Topology, sql: &str, use_db: Option<&str>, expect: &Expect) -> Option<String> {
    check_plan(t, sql, use_db, expect, false)
}

/// [`check`] with [`route`], or with [`route_prepare`] when `prepare`.
fn check_plan(
    t: &Topology,
    sql: &str,
    use_db: Option<&str>,
    expect: &Expect,
    prepare: bool,
) -> Option<String> {
    let ctx = RouteContext {
        current_db: use_db.map(|db| t.parse_database(db).expect("test USE database")),
        ..RouteContext::default()
    };
    let plan = if prepare {
        route_prepare(sql, t, &ctx)
    } else {
        route(sql, t, &ctx, &mut Fixed(3429))
    };
    let ok = match (expect, &plan) {
        (Expect::Shard(db, text, kind), Plan::Shard(q)) => {
            let (fleet, shard) = t.parse_database(db).expect("test database name");
            q.target.fleet == fleet
                && q.target.shard == shard
                && Some(q.target.host) == t.master_of(fleet, shard)
                && &q.sql == text
                && q.kind == *kind
        }
        (Expect::Any(text), Plan::AnyHost { sql }) => sql == text,
        (Expect::Session(action), Plan::Session(got)) => action == got,
        (Expect::Diagnostics(text), Plan::Diagnostics { sql, .. }) => sql == text,
        (Expect::Reject(kind, contains), Plan::Reject(e)) => {
            variant(e) == *kind && e.to_string().contains(contains.as_str())
        }
        (Expect::Multi(parts, merge), Plan::MultiShard(m)) => {
            m.merge == *merge
                && m.parts.len() == parts.len()
                && m.parts.iter().zip(parts).all(|(q, (db, text))| {
                    let (fleet, shard) = t.parse_database(db).expect("test database name");
                    q.target.fleet == fleet
                        && q.target.shard == shard
                        && Some(q.target.host) == t.master_of(fleet, shard)
                        && &q.sql == text
                        && q.kind == StatementKind::Read
                        && q.compose_insert_id.is_none()
                })
        }
        _ => false,
    };
    (!ok).then(|| {
        format!(
            "{sql:?} (USE {use_db:?})\n  expected {expect:?}\n  got      {}",
            short(&plan)
        )
    })
}

/// A plan for failure messages: a scatter's thousands of parts cut short.
fn short(plan: &Plan) -> String {
    match plan {
        Plan::MultiShard(m) if m.parts.len() > 6 => format!(
            "MultiShard({} parts; first {:?}; last {:?}; merge {:?})",
            m.parts.len(),
            m.parts.first(),
            m.parts.last(),
            m.merge
        ),
        _ => format!("{plan:?}"),
    }
}

fn run(cases: Vec<(String, Option<&str>, Expect)>) {
    let t = topo();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(sql, db, expect)| check(&t, sql, *db, expect))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn c(sql: impl Into<String>, expect: Expect) -> (String, Option<&'static str>, Expect) {
    (sql.into(), None, expect)
}

fn u(
    db: &'static str,
    sql: impl Into<String>,
    expect: Expect,
) -> (String, Option<&'static str>, Expect) {
    (sql.into(), Some(db), expect)
}

const COMPOSED: &str = "((3429<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615))";

#[test]
fn spec_table_examples() {
    run(vec![
        c(
            "SELECT id, data FROM pins WHERE id = 241294492511762325",
            shard(
                "db03429",
                "SELECT ((3429<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, data FROM db03429.pins WHERE local_id = 7075733",
            ),
        ),
        c(
            format!("UPDATE pins SET data = '{{\"a\":1}}' WHERE id = {PIN}"),
            write(
                "db03429",
                "UPDATE db03429.pins SET data = '{\"a\":1}' WHERE local_id = 7075733",
            ),
        ),
        c(
            format!("DELETE FROM pins WHERE id = {PIN}"),
            write("db03429", "DELETE FROM db03429.pins WHERE local_id = 7075733"),
        ),
        c(
            "SELECT data FROM db03429.pins WHERE local_id = 7075733",
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733"),
        ),
        u(
            "db03429",
            "SELECT data FROM pins WHERE local_id = 7075733",
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733"),
        ),
        c(
            "INSERT /*+ SHARD(3429) */ INTO pins (data) VALUES ('{...}')",
            write("db03429", "INSERT INTO db03429.pins (data) VALUES ('{...}')"),
        ),
        c(
            "INSERT /*+ COLOCATE(241294561224164665) */ INTO pins (data) VALUES ('{}')",
            write("db03429", "INSERT INTO db03429.pins (data) VALUES ('{}')"),
        ),
        c(
            // Placement (the test policy picks 3429).
            "INSERT INTO users (data) VALUES ('{}')",
            write("db03429", "INSERT INTO db03429.users (data) VALUES ('{}')"),
        ),
        c(
            format!("SELECT pin_id FROM board_has_pins WHERE board_id = {BOARD} ORDER BY sequence DESC LIMIT 50 OFFSET 150"),
            shard("db03429", format!("SELECT pin_id FROM db03429.board_has_pins WHERE board_id = {BOARD} ORDER BY sequence DESC LIMIT 50 OFFSET 150")),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({BOARD}, {PIN}, 1)"),
            write("db03429", format!("INSERT INTO db03429.board_has_pins (board_id, pin_id, sequence) VALUES ({BOARD}, {PIN}, 1)")),
        ),
        c(
            "SELECT user_id FROM user_by_email WHERE email = 'user@example.com'",
            shard("msdb02479", "SELECT user_id FROM msdb02479.user_by_email WHERE email = 'user@example.com'"),
        ),
        c("SELECT 1", any("SELECT 1")),
        c("SELECT @@version", any("SELECT @@version")),
        c(
            "SELECT DATABASE()",
            Expect::Session(SessionAction::SelectDatabase {
                column: "DATABASE()".into(),
            }),
        ),
        c("SHOW VARIABLES LIKE 'max%'", any("SHOW VARIABLES LIKE 'max%'")),
        c(
            "SET NAMES utf8mb4",
            Expect::Session(SessionAction::SetSession {
                variables: vec!["names".into()],
                sql: "SET NAMES utf8mb4".into(),
            }),
        ),
        c("SET autocommit=0", Expect::Session(SessionAction::SetAutocommit(false))),
    ]);
}

#[test]
fn object_tables_by_id() {
    run(vec![
        // Quoted IDs (Node's mysql2 sends 64-bit integers as strings).
        c(
            format!("SELECT data FROM pins WHERE id = '{PIN}'"),
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = \"{PIN}\""),
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733"),
        ),
        // Literal first.
        c(
            format!("SELECT data FROM pins WHERE {PIN} = id"),
            shard("db03429", "SELECT data FROM db03429.pins WHERE 7075733 = local_id"),
        ),
        // Qualified, aliased, backticks, case.
        c(
            format!("SELECT p.id, p.data FROM pins p WHERE p.id = {PIN} ORDER BY p.id"),
            shard("db03429", "SELECT ((3429<<46)|(1<<36)|(p.local_id + (p.local_id >> 36) * 18446744073709551615)) AS id, p.data FROM db03429.pins p WHERE p.local_id = 7075733 ORDER BY ((3429<<46)|(1<<36)|(p.local_id + (p.local_id >> 36) * 18446744073709551615))"),
        ),
        c(
            format!("SELECT pins.id FROM pins WHERE pins.id = {PIN}"),
            shard("db03429", "SELECT ((3429<<46)|(1<<36)|(pins.local_id + (pins.local_id >> 36) * 18446744073709551615)) AS id FROM db03429.pins WHERE pins.local_id = 7075733"),
        ),
        c(
            format!("select `id`, `data` from `PINS` where `id` = {PIN}"),
            shard("db03429", format!("select {COMPOSED} AS `id`, `data` from db03429.`PINS` where local_id = 7075733")),
        ),
        c(
            format!("SELECT ID AS pin, data FROM Pins WHERE Id = {PIN}"),
            shard("db03429", format!("SELECT {COMPOSED} AS pin, data FROM db03429.Pins WHERE local_id = 7075733")),
        ),
        // Other references to id get the composing expression.
        c(
            format!("SELECT COUNT(id) FROM pins WHERE id = {PIN} AND (id > 5 OR data IS NULL)"),
            shard("db03429", format!("SELECT COUNT({COMPOSED}) AS `COUNT(id)` FROM db03429.pins WHERE local_id = 7075733 AND ({COMPOSED} > 5 OR data IS NULL)")),
        ),
        // IN on one shard.
        c(
            format!("SELECT data FROM pins WHERE id IN ({PIN}, '{PIN_B}')"),
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id IN (7075733, 5)"),
        ),
        // Locking reads.
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} FOR UPDATE"),
            locking("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733 FOR UPDATE"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} FOR SHARE"),
            locking("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733 FOR SHARE"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} LOCK IN SHARE MODE"),
            locking("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733 LOCK IN SHARE MODE"),
        ),
        // Trailing semicolon kept.
        c(
            format!("DELETE FROM pins WHERE id = {PIN};"),
            write("db03429", "DELETE FROM db03429.pins WHERE local_id = 7075733;"),
        ),
        // Shard on the second host.
        c(
            format!("UPDATE boards SET data = '{{}}' WHERE id = {BOARD_FAR} LIMIT 1"),
            write("db00100", "UPDATE db00100.boards SET data = '{}' WHERE local_id = 1 LIMIT 1"),
        ),
        // Multi-byte text before an edited span.
        c(
            format!("SELECT 'héllo ✓ 日本', id FROM pins WHERE data = 'ü' AND id = {PIN}"),
            shard("db03429", format!("SELECT 'héllo ✓ 日本', {COMPOSED} AS id FROM db03429.pins WHERE data = 'ü' AND local_id = 7075733")),
        ),
        c(
            format!("SELECT data\n  FROM pins -- ☃ comment\n WHERE id = {PIN}"),
            shard("db03429", "SELECT data\n  FROM db03429.pins -- ☃ comment\n WHERE local_id = 7075733"),
        ),
    ]);
}

#[test]
fn bad_ids() {
    let reserved = PIN | (1 << 62);
    run(vec![
        c(
            format!("SELECT data FROM pins WHERE id = {reserved}"),
            reject("BadId", format!("bad id {reserved}: its reserved top bits")),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {}", u64::MAX),
            reject("BadId", "reserved"),
        ),
        c(
            "SELECT data FROM pins WHERE id = 99999999999999999999",
            reject("BadId", "does not fit in 64 bits"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {BOARD}"),
            reject(
                "BadId",
                format!("bad id {BOARD}: its type is 2 (board), but table pins holds type 1 (pin)"),
            ),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {}", id(5000, 1, 1)),
            reject(
                "BadId",
                "its shard 5000 is outside fleet main (shards 0-4095)",
            ),
        ),
        c(
            format!(
                "SELECT pin_id FROM board_has_pins WHERE board_id = {}",
                id(4096, 2, 1)
            ),
            reject("BadId", "shard 4096"),
        ),
        c(
            "SELECT data FROM pins WHERE id = 'abc'",
            reject("BadId", "bad id 'abc'"),
        ),
        c(
            "SELECT data FROM pins WHERE id = 1.5",
            reject("BadId", "decimal"),
        ),
        c(
            format!("INSERT /*+ COLOCATE({reserved}) */ INTO pins (data) VALUES ('x')"),
            reject("BadId", "reserved"),
        ),
        c(
            format!(
                "INSERT /*+ COLOCATE({}) */ INTO pins (data) VALUES ('x')",
                id(4096, 2, 1)
            ),
            reject("BadId", "outside fleet main"),
        ),
        c(
            "INSERT /*+ SHARD(4096) */ INTO pins (data) VALUES ('x')",
            reject("BadHint", "SHARD(4096): fleet main has shards 0-4095"),
        ),
        c(
            "SELECT /*+ SHARD(x) */ data FROM pins",
            reject("BadHint", "not a shard number"),
        ),
    ]);
}

#[test]
fn hints() {
    run(vec![
        c(
            "SELECT /*+ SHARD(7) */ id, data FROM pins LIMIT 10",
            shard(
                "db00007",
                "SELECT ((7<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, data FROM db00007.pins LIMIT 10",
            ),
        ),
        // Anywhere in the statement, and combined with other hints.
        c(
            "SELECT data FROM pins /*+ SHARD(7) */ WHERE data LIKE 'a%'",
            shard(
                "db00007",
                "SELECT data FROM db00007.pins WHERE data LIKE 'a%'",
            ),
        ),
        c(
            "SELECT data FROM pins WHERE data <> '' /*+ SHARD(7) */",
            shard("db00007", "SELECT data FROM db00007.pins WHERE data <> ''"),
        ),
        c(
            "SELECT /*+ SHARD(7) MAX_EXECUTION_TIME(1000) */ data FROM pins",
            shard(
                "db00007",
                "SELECT /*+ MAX_EXECUTION_TIME(1000) */ data FROM db00007.pins",
            ),
        ),
        c(
            "SELECT /*+ MAX_EXECUTION_TIME(1000) */ data FROM pins /*+ shard(7) */",
            shard(
                "db00007",
                "SELECT /*+ MAX_EXECUTION_TIME(1000) */ data FROM db00007.pins",
            ),
        ),
        c(
            "UPDATE /*+ SHARD(7) */ pins SET data = 'x' WHERE data = 'y'",
            write(
                "db00007",
                "UPDATE db00007.pins SET data = 'x' WHERE data = 'y'",
            ),
        ),
        c(
            format!("DELETE /*+ COLOCATE('{COLOCATE}') */ FROM board_has_pins WHERE pin_id = 5"),
            write(
                "db03429",
                "DELETE FROM db03429.board_has_pins WHERE pin_id = 5",
            ),
        ),
        // A hint that agrees with the key is fine; one that does not is not.
        c(
            format!("SELECT /*+ SHARD(3429) */ data FROM pins WHERE id = {PIN}"),
            shard(
                "db03429",
                "SELECT data FROM db03429.pins WHERE local_id = 7075733",
            ),
        ),
        c(
            format!("SELECT /*+ SHARD(7) */ data FROM pins WHERE id = {PIN}"),
            reject(
                "CrossShard",
                "pins.id = 241294492511762325 is on db03429, but hint SHARD(7) is on db00007",
            ),
        ),
        c(
            "SELECT /*+ SHARD(1) SHARD(2) */ data FROM pins",
            reject("CrossShard", "SHARD(1)"),
        ),
        c(
            "SELECT /*+ SHARD(7) SCATTER */ data FROM pins",
            reject(
                "BadHint",
                "SCATTER: it runs on every shard and cannot be combined with SHARD(7)",
            ),
        ),
        // Unknown hint words are real optimizer hints: left alone.
        c(
            "SELECT /*+ BKA(pins) */ 1",
            any("SELECT /*+ BKA(pins) */ 1"),
        ),
        // INSERT with a hint on a mapping table with no literal key.
        c(
            "INSERT /*+ SHARD(3) */ INTO board_has_pins (board_id, pin_id) VALUES (@b, 1)",
            write(
                "db00003",
                "INSERT INTO db00003.board_has_pins (board_id, pin_id) VALUES (@b, 1)",
            ),
        ),
    ]);
}

#[test]
fn inserts() {
    run(vec![
        c(
            "INSERT INTO pins (data) VALUES ('a'), ('b')",
            write("db03429", "INSERT INTO db03429.pins (data) VALUES ('a'), ('b')"),
        ),
        c(
            "REPLACE /*+ SHARD(1) */ INTO pins (local_id, data) VALUES (5, 'a')",
            write("db00001", "REPLACE INTO db00001.pins (local_id, data) VALUES (5, 'a')"),
        ),
        c(
            "INSERT INTO pins SET data = 'x'",
            write("db03429", "INSERT INTO db03429.pins SET data = 'x'"),
        ),
        u(
            "db00042",
            "INSERT INTO pins (data) VALUES ('a')",
            write("db00042", "INSERT INTO db00042.pins (data) VALUES ('a')"),
        ),
        c(
            format!("INSERT INTO pins (id, data) VALUES ({PIN}, 'a')"),
            reject("Unsupported", "SHARD(n)"),
        ),
        c(
            "INSERT INTO notes (data) VALUES ('a')",
            reject("NoShardKey", "fleet closed has no open shards"),
        ),
        c(
            "INSERT /*+ SHARD(3) */ INTO notes (data) VALUES ('a')",
            write("cl003", "INSERT INTO cl003.notes (data) VALUES ('a')"),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({BOARD}, 1, 1), ('{}', 2, 2)", id(3429, 2, 5)),
            write("db03429", format!("INSERT INTO db03429.board_has_pins (board_id, pin_id, sequence) VALUES ({BOARD}, 1, 1), ('{}', 2, 2)", id(3429, 2, 5))),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({BOARD}, 1, 1), ({BOARD_FAR}, 2, 2)"),
            reject("CrossShard", "INSERT rows of board_has_pins are on different shards"),
        ),
        c(
            format!("INSERT INTO board_has_pins SET board_id = {BOARD}, pin_id = 1"),
            write("db03429", format!("INSERT INTO db03429.board_has_pins SET board_id = {BOARD}, pin_id = 1")),
        ),
        c(
            "INSERT INTO board_has_pins (pin_id, sequence) VALUES (1, 1)",
            reject("NoShardKey", "table 'board_has_pins': expected a literal board_id ID in every row"),
        ),
        c(
            "INSERT INTO user_by_email (email, user_id) VALUES ('a@b.c', 5)",
            write(
                Box::leak(format!("msdb{:05}", mod_shard(b"a@b.c", 4096)).into_boxed_str()),
                format!("INSERT INTO msdb{:05}.user_by_email (email, user_id) VALUES ('a@b.c', 5)", mod_shard(b"a@b.c", 4096)),
            ),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id) VALUES ({BOARD}, 1) ON DUPLICATE KEY UPDATE sequence = sequence + 1"),
            write("db03429", format!("INSERT INTO db03429.board_has_pins (board_id, pin_id) VALUES ({BOARD}, 1) ON DUPLICATE KEY UPDATE sequence = sequence + 1")),
        ),
    ]);
    // compose_insert_id for object tables only.
    let t = topo();
    let ctx = RouteContext::default();
    let Plan::Shard(q) = route(
        "INSERT INTO boards (data) VALUES ('x')",
        &t,
        &ctx,
        &mut Fixed(9),
    ) else {
        panic!("object insert routes to a shard");
    };
    assert_eq!((q.target.shard, q.compose_insert_id), (9, Some(2)));
    let sql = format!("INSERT INTO board_has_pins (board_id, pin_id) VALUES ({BOARD}, 1)");
    let Plan::Shard(q) = route(&sql, &t, &ctx, &mut Fixed(9)) else {
        panic!("mapping insert routes to a shard");
    };
    assert_eq!(q.compose_insert_id, None);
    // Placement stays inside the open range.
    let mut random = RandomPlacement::seeded(1);
    for _ in 0..50 {
        let Plan::Shard(q) = route(
            "INSERT INTO pins (data) VALUES ('x')",
            &t,
            &ctx,
            &mut random,
        ) else {
            panic!("placement routes");
        };
        assert!(q.target.shard < 4096);
        assert_eq!(
            q.sql,
            format!(
                "INSERT INTO db{:05}.pins (data) VALUES ('x')",
                q.target.shard
            )
        );
    }
}

#[test]
fn mapping_and_mod_shard() {
    let email_shard = mod_shard(b"a@b.c", 4096);
    let email_db: &'static str = Box::leak(format!("msdb{email_shard:05}").into_boxed_str());
    run(vec![
        c(
            format!("SELECT pin_id FROM board_has_pins WHERE board_id = '{BOARD}' AND sequence > 5"),
            shard("db03429", format!("SELECT pin_id FROM db03429.board_has_pins WHERE board_id = '{BOARD}' AND sequence > 5")),
        ),
        c(
            // The from-ID may be of any type.
            format!("SELECT pin_id FROM user_likes_pins WHERE user_id = {PIN_FAR}"),
            shard("db00012", format!("SELECT pin_id FROM db00012.user_likes_pins WHERE user_id = {PIN_FAR}")),
        ),
        c(
            format!("DELETE FROM board_has_pins WHERE board_id = {BOARD} AND pin_id = {PIN}"),
            write("db03429", format!("DELETE FROM db03429.board_has_pins WHERE board_id = {BOARD} AND pin_id = {PIN}")),
        ),
        c(
            "SELECT user_id FROM user_by_email WHERE email = 'a@b.c'",
            shard(email_db, format!("SELECT user_id FROM {email_db}.user_by_email WHERE email = 'a@b.c'")),
        ),
        c(
            "UPDATE user_by_email SET user_id = 7 WHERE email = \"a@b.c\"",
            write(email_db, format!("UPDATE {email_db}.user_by_email SET user_id = 7 WHERE email = \"a@b.c\"")),
        ),
        c(
            "SELECT user_id FROM user_by_email WHERE email LIKE 'a%'",
            reject("NoShardKey", "no shard key for table 'user_by_email': expected WHERE email = <key>"),
        ),
        c(
            "SELECT pin_id FROM board_has_pins",
            reject("NoShardKey", "no shard key for table 'board_has_pins': expected WHERE board_id = <id>"),
        ),
        c(
            format!("UPDATE board_has_pins SET board_id = {BOARD} WHERE board_id = {BOARD}"),
            reject("Unsupported", "the row's shard depends on it"),
        ),
        c(
            format!("UPDATE pins SET id = 5 WHERE id = {PIN}"),
            reject("Unsupported", "never change"),
        ),
    ]);
}

#[test]
fn no_key_no_guess() {
    run(vec![
        c(
            "SELECT data FROM pins",
            reject("NoShardKey", "no shard key for table 'pins': expected WHERE id = <64-bit id>, a /*+ SHARD(n) */ or /*+ COLOCATE(id) */ hint, or USE dbNNNNN"),
        ),
        c("SELECT data FROM pins WHERE data = 'x'", reject("NoShardKey", "pins")),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} OR data = 'x'"),
            reject("NoShardKey", "pins"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} OR local_id = 5"),
            reject("NoShardKey", "pins"),
        ),
        c(
            format!("SELECT data FROM pins WHERE NOT (id = {PIN} OR id = {PIN_B})"),
            reject("NoShardKey", "pins"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id NOT IN ({PIN}, {PIN_B})"),
            reject("NoShardKey", "pins"),
        ),
        c("DELETE FROM pins", reject("NoShardKey", "pins")),
        c("UPDATE pins SET data = 'x'", reject("NoShardKey", "pins")),
        c("SELECT data FROM pins WHERE id = @x", reject("NoShardKey", "pins")),
        c("SELECT * FROM notes", reject("NoShardKey", "USE clNNN")),
    ]);
}

#[test]
fn cross_shard() {
    run(vec![
        c(
            format!("DELETE FROM pins WHERE id IN ({PIN}, {PIN_FAR})"),
            reject("CrossShard", "the IN list on pins.id spans several shards (db03429 and db00012); writes never fan out"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} AND id = {PIN_FAR}"),
            reject("CrossShard", "pins.id"),
        ),
        c(
            format!("SELECT p.data FROM pins p JOIN board_has_pins b ON b.pin_id = p.id WHERE b.board_id = {BOARD_FAR} AND p.id = {PIN}"),
            reject("CrossShard", "board_has_pins.board_id"),
        ),
        u(
            "db00007",
            format!("SELECT data FROM pins WHERE id = {PIN}"),
            reject("CrossShard", "USE db00007"),
        ),
        c(
            format!("SELECT data FROM db00007.pins WHERE local_id IN (SELECT pin_id FROM board_has_pins WHERE board_id = {BOARD})"),
            reject("CrossShard", "table in db00007"),
        ),
        c(
            "SELECT u.user_id FROM user_by_email u JOIN pins p ON p.id = u.user_id WHERE u.email = 'a@b.c'",
            reject("CrossShard", "fleet"),
        ),
    ]);
}

#[test]
fn joins_and_subqueries() {
    run(vec![
        c(
            format!("SELECT p.id, p.data FROM board_has_pins b JOIN pins p ON p.local_id = b.pin_id WHERE b.board_id = {BOARD} ORDER BY b.sequence DESC LIMIT 10"),
            shard("db03429", format!("SELECT ((3429<<46)|(1<<36)|(p.local_id + (p.local_id >> 36) * 18446744073709551615)) AS id, p.data FROM db03429.board_has_pins b JOIN db03429.pins p ON p.local_id = b.pin_id WHERE b.board_id = {BOARD} ORDER BY b.sequence DESC LIMIT 10")),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} AND EXISTS (SELECT 1 FROM board_has_pins WHERE board_id = {BOARD})"),
            shard("db03429", format!("SELECT data FROM db03429.pins WHERE local_id = 7075733 AND EXISTS (SELECT 1 FROM db03429.board_has_pins WHERE board_id = {BOARD})")),
        ),
        c(
            format!("WITH x AS (SELECT pin_id FROM board_has_pins WHERE board_id = {BOARD}) SELECT pin_id FROM x"),
            shard("db03429", format!("WITH x AS (SELECT pin_id FROM db03429.board_has_pins WHERE board_id = {BOARD}) SELECT pin_id FROM x")),
        ),
        c(
            format!("SELECT data FROM (SELECT data FROM pins WHERE id = {PIN}) AS t"),
            shard("db03429", "SELECT data FROM (SELECT data FROM db03429.pins WHERE local_id = 7075733) AS t"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} UNION ALL SELECT data FROM boards WHERE id = {BOARD}"),
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733 UNION ALL SELECT data FROM db03429.boards WHERE local_id = 77"),
        ),
        c(
            format!("DELETE p FROM pins p JOIN board_has_pins b ON b.pin_id = p.local_id WHERE b.board_id = {BOARD}"),
            write("db03429", format!("DELETE p FROM db03429.pins p JOIN db03429.board_has_pins b ON b.pin_id = p.local_id WHERE b.board_id = {BOARD}")),
        ),
        // Explicit database plus a table that follows it via its hint.
        c(
            "SELECT a.data FROM db00007.pins a JOIN db00007.boards b ON a.local_id = b.local_id",
            shard("db00007", "SELECT a.data FROM db00007.pins a JOIN db00007.boards b ON a.local_id = b.local_id"),
        ),
        c(
            "SELECT data FROM db00007.pins /*+ SHARD(7) */",
            shard("db00007", "SELECT data FROM db00007.pins"),
        ),
    ]);
}

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
                "SELECT * FROM db03429.comments c JOIN db03429.pins p ON p.local_id = c.pin",
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
    let set = |vars: &[&str], sql: &str| {
        c(
            sql,
            Expect::Session(SessionAction::SetSession {
                variables: vars.iter().map(|v| v.to_string()).collect(),
                sql: sql.into(),
            }),
        )
    };
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
            reject("Unsupported", "statement of its own"),
        ),
        set(&["names"], "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci"),
        set(&["charset"], "SET CHARACTER SET utf8mb4"),
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
        set(
            &["sql_select_limit"],
            "/* c */ SET sql_select_limit = DEFAULT",
        ),
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
        c("SHOW FULL PROCESSLIST", any("SHOW FULL PROCESSLIST")),
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
fn refused_statements() {
    run(vec![
        c(
            "CREATE TABLE pins (local_id BIGINT)",
            reject("Unsupported", "shardgate fleet init"),
        ),
        c(
            "ALTER TABLE pins ADD COLUMN x INT",
            reject("Unsupported", "shardgate fleet init"),
        ),
        c(
            "DROP TABLE pins",
            reject("Unsupported", "shardgate fleet init"),
        ),
        c(
            "DROP DATABASE db00001",
            reject("Unsupported", "shardgate fleet init"),
        ),
        c(
            "CREATE DATABASE foo",
            reject("Unsupported", "shardgate fleet init"),
        ),
        c(
            "TRUNCATE pins",
            reject("Unsupported", "shardgate fleet init"),
        ),
        c("SELEC 1", reject("Syntax", "")),
        c("SELECT * FROM", reject("Syntax", "")),
        c("", reject("Syntax", "Query was empty")),
        c("  ;", reject("Syntax", "empty")),
        c("SELECT 1; SELECT 2", reject("Unsupported", "one at a time")),
        c("SELECT 'unterminated", reject("Syntax", "")),
        c("LOCK TABLES pins READ", reject("Unsupported", "LOCK")),
        c("SELECT data FROM nope", reject("UnknownTable", "nope")),
    ]);
    // Error codes.
    assert_eq!(RouteError::Syntax(String::new()).code(), 1064);
    assert_eq!(RouteError::UnknownTable(String::new()).code(), 1146);
}

#[test]
fn faithful_forwarding() {
    // Text needing no rewrite is forwarded byte for byte.
    let t = topo();
    let ctx = RouteContext::default();
    for sql in [
        "SELECT /* a comment */ 1 -- trailing\n",
        "SELECT 'it''s', \"dq\", `bq` FROM information_schema.tables",
        "SELECT  data\tFROM db00001.pins\r\nWHERE local_id=1 # hash comment",
        "SELECT x'414243', 0x41, b'01', _utf8mb4'é' COLLATE utf8mb4_bin",
    ] {
        let text = match route(sql, &t, &ctx, &mut Fixed(0)) {
            Plan::AnyHost { sql } => sql,
            Plan::Shard(q) => q.sql,
            other => panic!("{sql:?} routed to {other:?}"),
        };
        assert_eq!(text, sql);
    }
}

#[test]
fn never_panics_on_odd_input() {
    let t = topo();
    let ctx = RouteContext {
        current_db: Some((0, 1)),
        ..RouteContext::default()
    };
    for sql in [
        "\u{0}",
        "SELECT id FROM pins WHERE id IN ()",
        "SELECT /*+ SHARD(((( */ 1",
        "SELECT /*+ COLOCATE() */ 1",
        "INSERT INTO pins VALUES",
        "SELECT * FROM a.b.c",
        "USE",
        "SET",
        "SET = 1",
        "SHOW",
        "UPDATE pins SET (a, b) = (1, 2)",
        "SELECT 日本 FROM 日本",
        "SELECT id FROM pins p, boards b",
    ] {
        let _ = route(sql, &t, &ctx, &mut Fixed(0));
    }
    // Every prefix of multi-shard statements, with and without USE.
    let statements = [
        format!("SELECT 'é' AS x, COUNT(*), id FROM pins WHERE ((id = {PIN}) OR /* c */ id IN ({PIN_FAR}, '{PIN_B}')) GROUP BY 3, x ORDER BY 2 DESC LIMIT 5, 10"),
        "SELECT data FROM pins /*+ SCATTER */ WHERE data <> '' ORDER BY ts, id LIMIT 1 OFFSET 2".to_owned(),
        format!("SELECT pin_id FROM board_has_pins WHERE {BOARD} = board_id OR board_id = {BOARD_FAR} ORDER BY sequence"),
    ];
    for sql in &statements {
        for (end, _) in sql.char_indices() {
            for ctx in [RouteContext::default(), ctx] {
                let _ = route(&sql[..end], &t, &ctx, &mut Fixed(0));
                let _ = route_prepare(&sql[..end], &t, &ctx);
            }
        }
    }
}

#[test]
fn parenthesised_and_explained() {
    run(vec![
        c("(SELECT 1)", any("(SELECT 1)")),
        c(
            format!("(SELECT data FROM pins WHERE id = {PIN})"),
            shard(
                "db03429",
                "(SELECT data FROM db03429.pins WHERE local_id = 7075733)",
            ),
        ),
        c(
            format!("EXPLAIN UPDATE pins SET data = 'x' WHERE id = {PIN}"),
            shard(
                "db03429",
                "EXPLAIN UPDATE db03429.pins SET data = 'x' WHERE local_id = 7075733",
            ),
        ),
        c("EXPLAIN USE db00001", reject("Unsupported", "EXPLAIN")),
        c("CALL proc()", reject("Unsupported", "CALL statements")),
    ]);
}

/// Cost of routing a point lookup (run with `--release --ignored --nocapture`).
#[test]
#[ignore]
fn bench_point_lookup() {
    let t = topo();
    let ctx = RouteContext::default();
    let sql = format!("SELECT data FROM pins WHERE id = {PIN}");
    let n = 200_000;
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(route(std::hint::black_box(&sql), &t, &ctx, &mut Fixed(0)));
    }
    let elapsed = start.elapsed();
    eprintln!("route(point lookup): {:?} per statement", elapsed / n);
}

/// Where the time of a point lookup goes (run with `--release --ignored --nocapture`).
#[test]
#[ignore]
fn bench_parts() {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;
    use sqlparser::tokenizer::Tokenizer;
    let sql = format!("SELECT data FROM pins WHERE id = {PIN}");
    let n = 200_000;
    let d = MySqlDialect {};
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(
            Tokenizer::new(&d, std::hint::black_box(&sql))
                .tokenize_with_location()
                .ok(),
        );
    }
    eprintln!("tokenize: {:?}", start.elapsed() / n);
    let start = std::time::Instant::now();
    for _ in 0..n {
        let tokens = Tokenizer::new(&d, std::hint::black_box(&sql))
            .tokenize_with_location()
            .unwrap_or_default();
        std::hint::black_box(
            Parser::new(&d)
                .with_tokens_with_locations(tokens)
                .parse_statements()
                .ok(),
        );
    }
    eprintln!("tokenize+parse: {:?}", start.elapsed() / n);
}

/// Runs `f` on a thread with a `stack`-byte stack (a runtime worker has
/// 2 MiB); a stack overflow aborts the test binary.
fn on_small_stack<T: Send + 'static>(stack: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .expect("thread starts")
        .join()
        .expect("no panic")
}

fn is_too_deep(plan: &Plan) -> bool {
    matches!(plan, Plan::Reject(e @ RouteError::TooDeep(m)) if m.len() > 10 && e.to_string().contains("nested too deeply") && e.code() == 1105)
}

#[test]
fn deep_statements_do_not_overflow_the_stack() {
    // Every shape an attacker can nest, 100,000 deep, on a runtime
    // worker's stack: refused, never a crash.
    let (plans, shapes) = on_small_stack(2 << 20, || {
        let t = topo();
        // Past the token cap most would be refused before parsing; the
        // nesting limit is what is tested here.
        let ctx = RouteContext {
            max_tokens: u64::MAX,
            ..RouteContext::default()
        };
        let n = 100_000;
        let shapes = vec![
            format!("SELECT 1{}", " IS NULL".repeat(n)),
            format!("SELECT 1{}", " IS NOT TRUE".repeat(n)),
            format!(
                "SELECT data FROM pins WHERE id = {PIN} AND 1{}",
                " IS NULL".repeat(n)
            ),
            format!("SELECT 'a'{}", " COLLATE utf8mb4_bin".repeat(n)),
            format!("SELECT {}1", "NOT ".repeat(n)),
            format!("SELECT {}1", "- ".repeat(n)),
            format!("SELECT {}1", "~".repeat(n)),
            format!("SELECT {}1", "!".repeat(n)),
            format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n)),
            format!(
                "SELECT * FROM {}pins{} WHERE id = {PIN}",
                "(".repeat(n),
                ")".repeat(n)
            ),
            format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n)),
            format!(
                "SELECT {}1{}",
                "CASE WHEN 1 THEN ".repeat(n),
                " END".repeat(n)
            ),
            format!("SELECT 1{}", " BETWEEN 0 AND 2".repeat(n)),
            format!("SELECT 1{}", " IN (1)".repeat(n)),
            format!("SELECT 1{}", " LIKE 'a'".repeat(n)),
            format!("SELECT 1{}", " = 1".repeat(n)),
            format!("SELECT 1{}", " + 1".repeat(n)),
            format!("SELECT 1{}", " UNION SELECT 1, 2".repeat(n)),
            format!(
                "SELECT data FROM pins WHERE id = {PIN}{}",
                " AND data <> 'x'".repeat(n)
            ),
            format!(
                "SELECT data FROM pins WHERE id = {PIN} AND ({}1)",
                "data = 'y' OR ".repeat(n)
            ),
            format!("SELECT /*+ SCATTER */ 1{} FROM pins", " + 1".repeat(n)),
            format!(
                "UPDATE pins SET data = 1{} WHERE id = {PIN}",
                " IS NULL".repeat(n)
            ),
            format!(
                "SELECT 1 FROM pins WHERE id = {PIN} ORDER BY 1{}",
                " + 1".repeat(n)
            ),
            // Unclosed: still refused before sqlparser recurses.
            format!("SELECT {}1", "(".repeat(n)),
        ];
        let plans: Vec<Plan> = shapes
            .iter()
            .map(|sql| route(sql, &t, &ctx, &mut Fixed(0)))
            .collect();
        (plans, shapes)
    });
    for (plan, sql) in plans.iter().zip(&shapes) {
        assert!(
            matches!(plan, Plan::Reject(_)),
            "{}: {}",
            &sql[..60],
            short(plan)
        );
    }
    assert!(plans.iter().filter(|p| is_too_deep(p)).count() >= 15);
}

#[test]
fn statements_just_within_the_depth_limits_route_on_a_quarter_of_a_worker_stack() {
    // The limits leave a 4x margin on a runtime worker's 2 MiB stack in a
    // debug build: the deepest statements they let through route on 512 KiB.
    let depth = planner::MAX_DEPTH as usize;
    let listed = planner::MAX_DEPTH_LISTED as usize;
    let walk = planner::MAX_WALK_DEPTH as usize;
    let plans = on_small_stack(512 << 10, move || {
        let t = topo();
        // The long flat lists below are past the default token cap; the
        // stack use is what is tested here.
        let ctx = RouteContext {
            max_tokens: u64::MAX,
            ..RouteContext::default()
        };
        [
            format!(
                "SELECT data FROM pins WHERE id = {PIN} AND (1{})",
                " OR 1".repeat(depth - 10)
            ),
            format!(
                "SELECT data FROM pins WHERE id = {PIN}{}",
                " AND data <> 'x'".repeat(depth / 2 - 10)
            ),
            format!("SELECT 1{}", " UNION SELECT 2".repeat(depth - 10)),
            format!(
                "SELECT data FROM pins WHERE id = {PIN} AND 1{}",
                " IS NULL".repeat(walk - 10)
            ),
            format!(
                "SELECT /*+ SCATTER */ 1{} AS x FROM pins ORDER BY 1{}",
                " + 1".repeat(listed - 2),
                " + 1".repeat(listed - 2)
            ),
            format!(
                "SELECT /*+ SCATTER */ id{}, COUNT(*) FROM pins GROUP BY id{}",
                " + 0".repeat(listed - 2),
                " + 0".repeat(listed - 2)
            ),
            format!(
                "SELECT id{} FROM pins WHERE id = {PIN}",
                " + 0".repeat(listed - 2)
            ),
            format!("SELECT CASE{} END", " WHEN 1 THEN 2".repeat(20_000)),
            format!("SELECT 1 IN ({}1)", "1, ".repeat(100_000)),
        ]
        .map(|sql| route(&sql, &t, &ctx, &mut Fixed(0)))
    });
    for plan in &plans {
        assert!(!matches!(plan, Plan::Reject(_)), "{}", short(plan));
    }
    // One more level is refused.
    let t = topo();
    let ctx = RouteContext::default();
    let over = format!(
        "SELECT data FROM pins WHERE id = {PIN} AND (1{})",
        " OR 1".repeat(depth + 1)
    );
    assert!(is_too_deep(&route(&over, &t, &ctx, &mut Fixed(0))));
    let over = format!(
        "SELECT 1{} FROM pins WHERE id = {PIN}",
        " + 1".repeat(listed + 1)
    );
    assert!(is_too_deep(&route(&over, &t, &ctx, &mut Fixed(0))));
    let over = format!(
        "SELECT data FROM pins WHERE id = {PIN} AND 1{}",
        " IS NULL".repeat(walk + 1)
    );
    assert!(is_too_deep(&route(&over, &t, &ctx, &mut Fixed(0))));
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
        c("SELECT @@version", any("SELECT @@version")),
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
        c(
            "SHOW WARNINGS; SELECT 1",
            reject("Unsupported", "one at a time"),
        ),
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

/// Like [`run`], with [`route_prepare`].
fn run_prepare(t: &Topology, cases: Vec<(String, Option<&str>, Expect)>) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(sql, db, expect)| check_plan(t, sql, *db, expect, true))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn prepare_with_marker_keys() {
    let t = topo();
    run_prepare(
        &t,
        vec![
            // The brief's example: the representative shard of main is its
            // first open shard, 0.
            c(
                "SELECT id, data FROM pins WHERE id = ?",
                shard(
                    "db00000",
                    "SELECT ((0<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, data FROM db00000.pins WHERE local_id = ?",
                ),
            ),
            c(
                "SELECT data FROM pins WHERE ? = id",
                shard("db00000", "SELECT data FROM db00000.pins WHERE ? = local_id"),
            ),
            c(
                "SELECT data FROM pins WHERE id IN (?, ?)",
                shard("db00000", "SELECT data FROM db00000.pins WHERE local_id IN (?, ?)"),
            ),
            c(
                "SELECT data FROM pins WHERE id = ? FOR UPDATE",
                locking("db00000", "SELECT data FROM db00000.pins WHERE local_id = ? FOR UPDATE"),
            ),
            c(
                "UPDATE pins SET data = ? WHERE id = ?",
                write("db00000", "UPDATE db00000.pins SET data = ? WHERE local_id = ?"),
            ),
            c(
                "DELETE FROM boards WHERE id = ?",
                write("db00000", "DELETE FROM db00000.boards WHERE local_id = ?"),
            ),
            // A literal key decides; markers in the same IN list agree.
            c(
                format!("SELECT data FROM pins WHERE id IN ({PIN}, ?)"),
                shard("db03429", "SELECT data FROM db03429.pins WHERE local_id IN (7075733, ?)"),
            ),
            c(
                format!("SELECT data FROM pins WHERE id = ? AND data <> '?' AND id = {PIN}"),
                shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = ? AND data <> '?' AND local_id = 7075733"),
            ),
            // A hint decides.
            c(
                "SELECT /*+ SHARD(7) */ data FROM pins WHERE id = ?",
                shard("db00007", "SELECT data FROM db00007.pins WHERE local_id = ?"),
            ),
            // USE decides (the representative of its fleet).
            u(
                "db00042",
                "SELECT data FROM pins WHERE id = ?",
                shard("db00042", "SELECT data FROM db00042.pins WHERE local_id = ?"),
            ),
            // Mapping and mod-shard keys.
            c(
                "SELECT pin_id FROM board_has_pins WHERE board_id = ? ORDER BY sequence DESC LIMIT ? OFFSET ?",
                shard("db00000", "SELECT pin_id FROM db00000.board_has_pins WHERE board_id = ? ORDER BY sequence DESC LIMIT ? OFFSET ?"),
            ),
            c(
                "SELECT user_id FROM user_by_email WHERE email = ?",
                shard("msdb00000", "SELECT user_id FROM msdb00000.user_by_email WHERE email = ?"),
            ),
            u(
                "db00042",
                "SELECT user_id FROM user_by_email WHERE email = ?",
                shard("msdb00000", "SELECT user_id FROM msdb00000.user_by_email WHERE email = ?"),
            ),
            u(
                "msdb00009",
                "SELECT user_id FROM user_by_email WHERE email = ?",
                shard("msdb00009", "SELECT user_id FROM msdb00009.user_by_email WHERE email = ?"),
            ),
            // A fleet with no open range: shard 0.
            c(
                "SELECT data FROM notes WHERE id = ?",
                shard("cl000", "SELECT data FROM cl000.notes WHERE local_id = ?"),
            ),
            // INSERT rows whose key is a marker.
            c(
                "INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES (?, ?, ?)",
                write("db00000", "INSERT INTO db00000.board_has_pins (board_id, pin_id, sequence) VALUES (?, ?, ?)"),
            ),
            c(
                "INSERT INTO board_has_pins (board_id, pin_id) VALUES (?, 1), (?, 2)",
                write("db00000", "INSERT INTO db00000.board_has_pins (board_id, pin_id) VALUES (?, 1), (?, 2)"),
            ),
            c(
                format!("INSERT INTO board_has_pins (board_id, pin_id) VALUES (?, 1), ({BOARD}, 2)"),
                write("db03429", format!("INSERT INTO db03429.board_has_pins (board_id, pin_id) VALUES (?, 1), ({BOARD}, 2)")),
            ),
            c(
                "INSERT INTO board_has_pins SET board_id = ?, pin_id = ?",
                write("db00000", "INSERT INTO db00000.board_has_pins SET board_id = ?, pin_id = ?"),
            ),
            c(
                "INSERT INTO user_by_email (email, user_id) VALUES (?, ?)",
                write("msdb00000", "INSERT INTO msdb00000.user_by_email (email, user_id) VALUES (?, ?)"),
            ),
            // Object INSERT with no hint: the open range's first shard.
            c(
                "INSERT INTO pins (data) VALUES (?)",
                write("db00000", "INSERT INTO db00000.pins (data) VALUES (?)"),
            ),
            c(
                "INSERT /*+ SHARD(3429) */ INTO pins (data) VALUES (?)",
                write("db03429", "INSERT INTO db03429.pins (data) VALUES (?)"),
            ),
            u(
                "db00042",
                "INSERT INTO pins (data) VALUES (?)",
                write("db00042", "INSERT INTO db00042.pins (data) VALUES (?)"),
            ),
            // No placeholders: as route (but for placement).
            c(
                format!("SELECT data FROM pins WHERE id = {PIN}"),
                shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733"),
            ),
            c("SELECT ?", any("SELECT ?")),
            c("SELECT 1", any("SELECT 1")),
            c("BEGIN", Expect::Session(SessionAction::Begin { sql: "BEGIN".into() })),
            // Still refused.
            c("SELECT data FROM pins WHERE data = ?", reject("NoShardKey", "pins")),
            c(
                "SELECT data FROM pins WHERE id = ? OR id = ?",
                shard("db00000", "SELECT data FROM db00000.pins WHERE local_id = ? OR local_id = ?"),
            ),
            c("SELECT data FROM pins WHERE id IN (?, @x)", reject("NoShardKey", "pins")),
            c("SELECT data FROM pins WHERE id = ?1", reject("NoShardKey", "pins")),
            c("INSERT INTO board_has_pins (pin_id) VALUES (?)", reject("NoShardKey", "board_has_pins")),
            c("INSERT INTO notes (data) VALUES (?)", reject("NoShardKey", "no open shards")),
            c("SELECT data FROM nope WHERE id = ?", reject("UnknownTable", "nope")),
            c("SELECT data FROM pins WHERE id = ", reject("Syntax", "")),
            c("SELECT /*+ SHARD(?) */ data FROM pins WHERE id = ?", reject("BadHint", "SHARD(?)")),
            c("SELECT /*+ COLOCATE(?) */ data FROM pins WHERE id = ?", reject("BadId", "COLOCATE")),
            c(
                format!("SELECT data FROM pins WHERE id = ? AND id = {PIN_FAR} AND id = {PIN}"),
                reject("CrossShard", "pins.id"),
            ),
            c(
                "UPDATE board_has_pins SET board_id = ? WHERE board_id = ?",
                reject("Unsupported", "the row's shard depends on it"),
            ),
            c(
                "SELECT u.user_id FROM user_by_email u JOIN pins p ON p.id = u.user_id WHERE u.email = ? AND p.id = ?",
                reject("CrossShard", "fleet"),
            ),
        ],
    );
    // The representative is the fleet's first open shard.
    let shifted = load(&SPEC_YAML.replacen("open: [0, 4095]", "open: [100, 4095]", 1));
    run_prepare(
        &shifted,
        vec![
            c(
                "SELECT data FROM pins WHERE id = ?",
                shard(
                    "db00100",
                    "SELECT data FROM db00100.pins WHERE local_id = ?",
                ),
            ),
            c(
                "INSERT INTO pins (data) VALUES (?)",
                write("db00100", "INSERT INTO db00100.pins (data) VALUES (?)"),
            ),
        ],
    );
    // compose_insert_id is kept for prepared object INSERTs.
    let Plan::Shard(q) = route_prepare(
        "INSERT INTO boards (data) VALUES (?)",
        &t,
        &RouteContext::default(),
    ) else {
        panic!("prepared object insert routes to a shard");
    };
    assert_eq!((q.target.shard, q.compose_insert_id), (0, Some(2)));
}

/// Substitutes `values` (SQL literals) into the `?` markers of `sql`.
fn bind(sql: &str, values: &[&str]) -> String {
    let ranges = placeholders(sql, &LexMode::default()).expect("markers found");
    assert_eq!(ranges.len(), values.len(), "{sql}: marker count");
    let mut out = String::new();
    let mut pos = 0;
    for (range, value) in ranges.into_iter().zip(values) {
        out.push_str(&sql[pos..range.start]);
        out.push_str(value);
        pos = range.end;
    }
    out.push_str(&sql[pos..]);
    out
}

#[test]
fn bound_values_route_like_literals() {
    let email_db: &'static str =
        Box::leak(format!("msdb{:05}", mod_shard("ü@例え.jp".as_bytes(), 4096)).into_boxed_str());
    let ab_db: &'static str =
        Box::leak(format!("msdb{:05}", mod_shard(b"a@b.c", 4096)).into_boxed_str());
    let cases: Vec<(&str, &[&str], Expect)> = vec![
        (
            "SELECT id, data FROM pins WHERE id = ?",
            &["241294492511762325"],
            shard("db03429", format!("SELECT {COMPOSED} AS id, data FROM db03429.pins WHERE local_id = 7075733")),
        ),
        // mysql2 binds 64-bit integers as strings.
        (
            "SELECT data FROM pins WHERE id = ?",
            &["'241294492511762325'"],
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733"),
        ),
        (
            "SELECT data FROM pins WHERE data <> '?' AND id IN (?, ?) -- ?",
            &["241294492511762325", "'241294492504686597'"],
            shard("db03429", "SELECT data FROM db03429.pins WHERE data <> '?' AND local_id IN (7075733, 5) -- ?"),
        ),
        (
            "UPDATE pins SET data = ? WHERE id = ?",
            &["'{\"é\":\"✓ ?\"}'", "241294492511762325"],
            write("db03429", "UPDATE db03429.pins SET data = '{\"é\":\"✓ ?\"}' WHERE local_id = 7075733"),
        ),
        (
            "INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES (?, ?, ?)",
            &["241294561224164665", "241294492511762325", "1"],
            write("db03429", "INSERT INTO db03429.board_has_pins (board_id, pin_id, sequence) VALUES (241294561224164665, 241294492511762325, 1)"),
        ),
        (
            "SELECT user_id FROM `user_by_email` WHERE email = ?",
            &["'ü@例え.jp'"],
            shard(email_db, format!("SELECT user_id FROM {email_db}.`user_by_email` WHERE email = 'ü@例え.jp'")),
        ),
        // A string sent as hex: the same bytes, the same shard.
        (
            "SELECT user_id FROM user_by_email WHERE email = ?",
            &["X'6140622E63'"],
            shard(ab_db, format!("SELECT user_id FROM {ab_db}.user_by_email WHERE email = X'6140622E63'")),
        ),
        // NULL and hex keys get errors, not panics.
        (
            "SELECT data FROM pins WHERE id = ?",
            &["NULL"],
            reject("NoShardKey", "expected WHERE id = <64-bit id>"),
        ),
        (
            "SELECT data FROM pins WHERE id IN (?, ?)",
            &["241294492511762325", "NULL"],
            reject("NoShardKey", "pins"),
        ),
        (
            "INSERT INTO board_has_pins (board_id, pin_id) VALUES (?, ?)",
            &["NULL", "1"],
            reject("NoShardKey", "a literal board_id ID in every row"),
        ),
        (
            "SELECT user_id FROM user_by_email WHERE email = ?",
            &["NULL"],
            reject("NoShardKey", "user_by_email"),
        ),
        (
            "SELECT data FROM pins WHERE id = ?",
            &["X'0359A80000006BF795'"],
            reject("BadId", "not a hexadecimal string"),
        ),
        (
            "SELECT data FROM pins WHERE id = ?",
            &["'12abc'"],
            reject("BadId", "bad id '12abc'"),
        ),
        (
            "SELECT data FROM pins WHERE id = ?",
            &["-1"],
            reject("NoShardKey", "pins"),
        ),
    ];
    let t = topo();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(sql, values, expect)| check(&t, &bind(sql, values), None, expect))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn markers_do_not_route_outside_prepare() {
    // COM_QUERY text with a `?` key is not a key: no key, no guess.
    run(vec![
        c(
            "SELECT data FROM pins WHERE id = ?",
            reject("NoShardKey", "pins"),
        ),
        c(
            "INSERT INTO board_has_pins (board_id, pin_id) VALUES (?, 1)",
            reject("NoShardKey", "board_has_pins"),
        ),
    ]);
}

// ---------------------------------------------------------------------
// Multi-shard reads.

fn multi(parts: Vec<(&str, String)>, merge: Merge) -> Expect {
    Expect::Multi(
        parts
            .into_iter()
            .map(|(db, sql)| (db.to_owned(), sql))
            .collect(),
        merge,
    )
}

/// Parts concatenated, no merge rules.
fn concat() -> Merge {
    Merge::default()
}

fn asc(column: usize) -> SortKey {
    SortKey {
        column,
        descending: false,
    }
}

fn desc(column: usize) -> SortKey {
    SortKey {
        column,
        descending: true,
    }
}

fn composed(shard: u32) -> String {
    format!("(({shard}<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615))")
}

const BOARD_B: u64 = id(3429, 2, 5);

#[test]
fn in_list_split_per_table_kind() {
    let (ea, eb) = (
        mod_shard(b"a@b.c", 4096),
        mod_shard(b"user@example.com", 4096),
    );
    assert_eq!(eb, 2479);
    let mut emails = vec![
        (
            format!("msdb{ea:05}"),
            "SELECT user_id FROM msdb{:05}.user_by_email WHERE email = 'a@b.c'"
                .replace("{:05}", &format!("{ea:05}")),
        ),
        (
            format!("msdb{eb:05}"),
            "SELECT user_id FROM msdb{:05}.user_by_email WHERE email = 'user@example.com'"
                .replace("{:05}", &format!("{eb:05}")),
        ),
    ];
    emails.sort();
    run(vec![
        // Object table: local ids per shard, `=` for one, `id` composed.
        c(
            format!("SELECT id, data FROM pins WHERE id IN ({PIN}, {PIN_FAR}, {PIN_B})"),
            multi(
                vec![
                    ("db00012", format!("SELECT {} AS id, data FROM db00012.pins WHERE local_id = 9", composed(12))),
                    ("db03429", format!("SELECT {COMPOSED} AS id, data FROM db03429.pins WHERE local_id IN (7075733, 5)")),
                ],
                concat(),
            ),
        ),
        // IDs as quoted strings (mysql2), other restrictions kept.
        c(
            format!("SELECT data FROM pins WHERE data <> '' AND id IN ('{PIN_FAR}', '{PIN}') AND ts > 0"),
            multi(
                vec![
                    ("db00012", "SELECT data FROM db00012.pins WHERE data <> '' AND local_id = 9 AND ts > 0".to_owned()),
                    ("db03429", "SELECT data FROM db03429.pins WHERE data <> '' AND local_id = 7075733 AND ts > 0".to_owned()),
                ],
                concat(),
            ),
        ),
        // Qualified by an alias.
        c(
            format!("SELECT p.id FROM pins AS p WHERE p.id IN ({PIN}, {PIN_FAR})"),
            multi(
                vec![
                    ("db00012", "SELECT ((12<<46)|(1<<36)|(p.local_id + (p.local_id >> 36) * 18446744073709551615)) AS id FROM db00012.pins AS p WHERE p.local_id = 9".to_owned()),
                    ("db03429", "SELECT ((3429<<46)|(1<<36)|(p.local_id + (p.local_id >> 36) * 18446744073709551615)) AS id FROM db03429.pins AS p WHERE p.local_id = 7075733".to_owned()),
                ],
                concat(),
            ),
        ),
        // Mapping table: from-ids kept as written, grouped by shard.
        c(
            format!("SELECT pin_id FROM board_has_pins WHERE board_id IN ({BOARD}, {BOARD_FAR}, '{BOARD_B}')"),
            multi(
                vec![
                    ("db00100", format!("SELECT pin_id FROM db00100.board_has_pins WHERE board_id = {BOARD_FAR}")),
                    ("db03429", format!("SELECT pin_id FROM db03429.board_has_pins WHERE board_id IN ({BOARD}, '{BOARD_B}')")),
                ],
                concat(),
            ),
        ),
        // Mod-shard key: grouped by md5 shard, on the mod fleet.
        c(
            "SELECT user_id FROM user_by_email WHERE email IN ('a@b.c', 'user@example.com')",
            Expect::Multi(emails, concat()),
        ),
        // All on one shard: a single-shard plan, as before.
        c(
            format!("SELECT data FROM pins WHERE id IN ({PIN}, {PIN_B})"),
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id IN (7075733, 5)"),
        ),
        c(
            format!("SELECT pin_id FROM board_has_pins WHERE board_id IN ({BOARD}, {BOARD_B})"),
            shard("db03429", format!("SELECT pin_id FROM db03429.board_has_pins WHERE board_id IN ({BOARD}, {BOARD_B})")),
        ),
        // Bad IDs anywhere in the list.
        c(
            format!("SELECT data FROM pins WHERE id IN ({PIN}, {PIN_FAR}, {BOARD_FAR})"),
            reject("BadId", "table pins holds type 1 (pin)"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id IN ({PIN}, 'x1')"),
            reject("BadId", "bad id 'x1'"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id IN ({PIN}, {})", u64::MAX),
            reject("BadId", "reserved top bits"),
        ),
    ]);
}

#[test]
fn or_of_keys() {
    run(vec![
        // On one shard: as an IN list on that shard.
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} OR id = {PIN_B}"),
            shard("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733 OR local_id = 5"),
        ),
        // Spanning: each part with its own keys, parentheses kept balanced.
        c(
            format!("SELECT data FROM pins WHERE (id = {PIN} OR {PIN_FAR} = id) AND data <> ''"),
            multi(
                vec![
                    ("db00012", "SELECT data FROM db00012.pins WHERE (local_id = 9) AND data <> ''".to_owned()),
                    ("db03429", "SELECT data FROM db03429.pins WHERE (local_id = 7075733) AND data <> ''".to_owned()),
                ],
                concat(),
            ),
        ),
        c(
            format!("SELECT data FROM pins WHERE ((id = {PIN})) OR (id = {PIN_FAR} OR id IN ({PIN_B}))"),
            multi(
                vec![
                    ("db00012", "SELECT data FROM db00012.pins WHERE local_id = 9".to_owned()),
                    ("db03429", "SELECT data FROM db03429.pins WHERE local_id IN (7075733, 5)".to_owned()),
                ],
                concat(),
            ),
        ),
        c(
            format!("SELECT pin_id FROM board_has_pins WHERE board_id = {BOARD} OR board_id = {BOARD_FAR}"),
            multi(
                vec![
                    ("db00100", format!("SELECT pin_id FROM db00100.board_has_pins WHERE board_id = {BOARD_FAR}")),
                    ("db03429", format!("SELECT pin_id FROM db03429.board_has_pins WHERE board_id = {BOARD}")),
                ],
                concat(),
            ),
        ),
        // Comments around the parentheses.
        c(
            format!("SELECT data FROM pins WHERE ( /* a */ id = {PIN} OR id IN ({PIN_FAR} /* b */) /* c */ )"),
            multi(
                vec![
                    ("db00012", "SELECT data FROM db00012.pins WHERE ( /* a */ local_id = 9 /* c */ )".to_owned()),
                    ("db03429", "SELECT data FROM db03429.pins WHERE ( /* a */ local_id = 7075733 /* c */ )".to_owned()),
                ],
                concat(),
            ),
        ),
        // Different columns: not a key restriction.
        c(
            format!("SELECT pin_id FROM board_has_pins WHERE board_id = {BOARD} OR pin_id = {PIN}"),
            reject("NoShardKey", "board_has_pins"),
        ),
        c(
            format!("UPDATE pins SET data = 'x' WHERE id = {PIN} OR id = {PIN_FAR}"),
            reject("CrossShard", "the OR of restrictions on pins.id spans several shards (db03429 and db00012); writes never fan out"),
        ),
    ]);
}

#[test]
fn order_by_and_limit() {
    let two = format!("WHERE id IN ({PIN}, {PIN_FAR})");
    let per = |sql: &str| -> Vec<(&'static str, String)> {
        vec![
            (
                "db00012",
                sql.replace("{db}", "db00012")
                    .replace("{local}", "local_id = 9")
                    .replace("{id}", &composed(12)),
            ),
            (
                "db03429",
                sql.replace("{db}", "db03429")
                    .replace("{local}", "local_id = 7075733")
                    .replace("{id}", COMPOSED),
            ),
        ]
    };
    run(vec![
        // By name, with LIMIT n OFFSET m: each part asked for n+m rows.
        c(
            format!("SELECT id, data FROM pins {two} ORDER BY id DESC LIMIT 10 OFFSET 5"),
            multi(
                per("SELECT {id} AS id, data FROM {db}.pins WHERE {local} ORDER BY {id} DESC LIMIT 15"),
                Merge { order_by: vec![desc(0)], offset: 5, limit: Some(10), ..Merge::default() },
            ),
        ),
        // LIMIT m, n.
        c(
            format!("SELECT data, ts FROM pins {two} ORDER BY ts LIMIT 5, 10"),
            multi(
                per("SELECT data, ts FROM {db}.pins WHERE {local} ORDER BY ts LIMIT 15"),
                Merge { order_by: vec![asc(1)], offset: 5, limit: Some(10), ..Merge::default() },
            ),
        ),
        // By alias and by position; LIMIT without ORDER BY.
        c(
            format!("SELECT data AS d, ts FROM pins {two} ORDER BY d ASC, 2 DESC"),
            multi(
                per("SELECT data AS d, ts FROM {db}.pins WHERE {local} ORDER BY d ASC, 2 DESC"),
                Merge { order_by: vec![asc(0), desc(1)], ..Merge::default() },
            ),
        ),
        c(
            format!("SELECT * FROM pins {two} LIMIT 3"),
            multi(
                per("SELECT * FROM {db}.pins WHERE {local} LIMIT 3"),
                Merge { limit: Some(3), ..Merge::default() },
            ),
        ),
        // A column that is not selected: appended as a hidden column
        // (`id` composed on each shard).
        c(
            format!("SELECT data FROM pins {two} ORDER BY ts DESC, id LIMIT 3"),
            multi(
                per("SELECT data, ts, {id} FROM {db}.pins WHERE {local} ORDER BY ts DESC, {id} LIMIT 3"),
                Merge { order_by: vec![desc(1), asc(2)], limit: Some(3), hidden_columns: 2, ..Merge::default() },
            ),
        ),
        // SPEC's board page, over two boards.
        c(
            format!("SELECT pin_id FROM board_has_pins WHERE board_id IN ({BOARD}, {BOARD_FAR}) ORDER BY sequence DESC LIMIT 50 OFFSET 150"),
            multi(
                vec![
                    ("db00100", format!("SELECT pin_id, sequence FROM db00100.board_has_pins WHERE board_id = {BOARD_FAR} ORDER BY sequence DESC LIMIT 200")),
                    ("db03429", format!("SELECT pin_id, sequence FROM db03429.board_has_pins WHERE board_id = {BOARD} ORDER BY sequence DESC LIMIT 200")),
                ],
                Merge { order_by: vec![desc(1)], offset: 150, limit: Some(50), hidden_columns: 1, ..Merge::default() },
            ),
        ),
        // Refused.
        c(
            format!("SELECT * FROM pins {two} ORDER BY ts"),
            reject("Unsupported", "ORDER BY with SELECT * over several shards: the proxy cannot tell the sort columns' positions; list the columns"),
        ),
        c(
            format!("SELECT data FROM pins {two} ORDER BY LENGTH(data)"),
            reject("Unsupported", "ORDER BY LENGTH(data) over several shards"),
        ),
        c(
            format!("SELECT data, ts FROM pins {two} ORDER BY 3"),
            reject("Unsupported", "ORDER BY 3: the select list has 2 columns"),
        ),
        // An expression that is selected is fine.
        c(
            format!("SELECT LENGTH(data) FROM pins {two} ORDER BY LENGTH(data)"),
            multi(
                per("SELECT LENGTH(data) FROM {db}.pins WHERE {local} ORDER BY LENGTH(data)"),
                Merge { order_by: vec![asc(0)], ..Merge::default() },
            ),
        ),
    ]);
}

#[test]
fn explicit_scatter() {
    let t = topo();
    let ctx = RouteContext::default();
    let plan = |sql: &str| route(sql, &t, &ctx, &mut Fixed(0));
    // Every shard of the table's fleet, in order, each qualified.
    let Plan::MultiShard(m) = plan("SELECT /*+ SCATTER */ id, data FROM pins WHERE data LIKE 'a%'")
    else {
        panic!("scatter plans a multi-shard read");
    };
    assert_eq!(m.parts.len(), 4096);
    assert_eq!(m.merge, concat());
    let (first, last) = (&m.parts[0], &m.parts[4095]);
    assert_eq!(
        first.sql,
        "SELECT ((0<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, data FROM db00000.pins WHERE data LIKE 'a%'"
    );
    assert_eq!(
        last.sql,
        "SELECT ((4095<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, data FROM db04095.pins WHERE data LIKE 'a%'"
    );
    for (i, part) in m.parts.iter().enumerate() {
        assert_eq!(part.target.shard as usize, i);
        assert_eq!(
            Some(part.target.host),
            t.master_of(part.target.fleet, part.target.shard)
        );
        assert_eq!(part.kind, StatementKind::Read);
    }
    // The mod-shard fleet.
    let Plan::MultiShard(m) =
        plan("SELECT email FROM user_by_email /*+ SCATTER */ ORDER BY email LIMIT 10")
    else {
        panic!("scatter plans a multi-shard read");
    };
    assert_eq!(m.parts.len(), 4096);
    assert_eq!(
        m.parts[4095].sql,
        "SELECT email FROM msdb04095.user_by_email ORDER BY email LIMIT 10"
    );
    assert_eq!(
        m.merge,
        Merge {
            order_by: vec![asc(0)],
            limit: Some(10),
            ..Merge::default()
        }
    );

    // A 16-shard fleet: an aggregate, exactly.
    let notes: Vec<(String, String)> = (0..16)
        .map(|s| {
            (
                format!("cl{s:03}"),
                format!("SELECT COUNT(*) FROM cl{s:03}.notes"),
            )
        })
        .collect();
    // The hint may sit where a hidden column or the LIMIT is edited.
    let notes_sorted: Vec<(String, String)> = (0..16)
        .map(|s| {
            (
                format!("cl{s:03}"),
                format!("SELECT data, ts FROM cl{s:03}.notes ORDER BY ts LIMIT 1"),
            )
        })
        .collect();
    let notes_count: Vec<(String, String)> = (0..16)
        .map(|s| {
            (
                format!("cl{s:03}"),
                format!("SELECT COUNT(*) FROM cl{s:03}.notes "),
            )
        })
        .collect();
    let count = || Merge {
        aggregation: Some(Aggregation {
            columns: vec![MergeColumn::Count],
        }),
        ..Merge::default()
    };
    run(vec![
        c(
            "SELECT data /*+ SCATTER */ FROM notes ORDER BY ts LIMIT 1",
            Expect::Multi(
                notes_sorted.clone(),
                Merge {
                    order_by: vec![asc(1)],
                    limit: Some(1),
                    hidden_columns: 1,
                    ..Merge::default()
                },
            ),
        ),
        c(
            "SELECT data/*+ SCATTER */FROM notes ORDER BY ts LIMIT 1",
            Expect::Multi(
                notes_sorted,
                Merge {
                    order_by: vec![asc(1)],
                    limit: Some(1),
                    hidden_columns: 1,
                    ..Merge::default()
                },
            ),
        ),
        c(
            "SELECT COUNT(*) FROM notes /*+ SCATTER */ LIMIT 1",
            Expect::Multi(
                notes_count,
                Merge {
                    limit: Some(1),
                    ..count()
                },
            ),
        ),
        c(
            "SELECT /*+ SCATTER */ COUNT(*) FROM notes",
            Expect::Multi(
                notes,
                Merge {
                    aggregation: Some(Aggregation {
                        columns: vec![MergeColumn::Count],
                    }),
                    ..Merge::default()
                },
            ),
        ),
        // No hint: no key, no guess.
        c(
            "SELECT data FROM pins WHERE data LIKE 'a%'",
            reject("NoShardKey", "pins"),
        ),
        // A key decides; the hint is ignored (or an IN list spans).
        c(
            format!("SELECT /*+ SCATTER */ data FROM pins WHERE id = {PIN}"),
            shard(
                "db03429",
                "SELECT data FROM db03429.pins WHERE local_id = 7075733",
            ),
        ),
        c(
            format!("SELECT /*+ SCATTER */ data FROM pins WHERE id IN ({PIN}, {PIN_FAR})"),
            multi(
                vec![
                    (
                        "db00012",
                        "SELECT data FROM db00012.pins WHERE local_id = 9".to_owned(),
                    ),
                    (
                        "db03429",
                        "SELECT data FROM db03429.pins WHERE local_id = 7075733".to_owned(),
                    ),
                ],
                concat(),
            ),
        ),
        u(
            "db00042",
            "SELECT /*+ SCATTER */ data FROM pins",
            shard("db00042", "SELECT data FROM db00042.pins"),
        ),
        c("SELECT /*+ SCATTER */ 1", any("SELECT 1")),
        // Writes and locking reads never scatter.
        c(
            "UPDATE /*+ SCATTER */ pins SET data = 'x'",
            reject(
                "Unsupported",
                "/*+ SCATTER */ on an INSERT, UPDATE or DELETE: writes never scatter",
            ),
        ),
        c(
            format!("DELETE /*+ SCATTER */ FROM pins WHERE id = {PIN}"),
            reject("Unsupported", "writes never scatter"),
        ),
        c(
            "INSERT /*+ SCATTER */ INTO pins (data) VALUES ('x')",
            reject("Unsupported", "writes never scatter"),
        ),
        c(
            "SELECT /*+ SCATTER */ data FROM pins FOR UPDATE",
            reject("Unsupported", "/*+ SCATTER */ on a locking read"),
        ),
        c(
            "SELECT /*+ SCATTER */ data FROM pins LOCK IN SHARE MODE",
            reject("Unsupported", "locking reads run on one shard"),
        ),
        c(
            format!("SELECT /*+ SCATTER COLOCATE({COLOCATE}) */ data FROM pins"),
            reject("BadHint", "cannot be combined with COLOCATE"),
        ),
        c(
            "EXPLAIN SELECT /*+ SCATTER */ data FROM pins",
            reject("Unsupported", "EXPLAIN of a read over several shards"),
        ),
    ]);
}

#[test]
fn aggregates_merged() {
    let boards = format!("WHERE board_id IN ({BOARD}, {BOARD_FAR})");
    let per = |sql: &str| -> Vec<(&'static str, String)> {
        vec![
            (
                "db00100",
                sql.replace("{db}", "db00100")
                    .replace("{key}", &format!("board_id = {BOARD_FAR}")),
            ),
            (
                "db03429",
                sql.replace("{db}", "db03429")
                    .replace("{key}", &format!("board_id = {BOARD}")),
            ),
        ]
    };
    let agg = |columns: Vec<MergeColumn>| Merge {
        aggregation: Some(Aggregation { columns }),
        ..Merge::default()
    };
    use MergeColumn::{Count, GroupKey, Max, Min, Sum};
    run(vec![
        c(
            format!("SELECT COUNT(*), COUNT(pin_id), SUM(sequence), MIN(sequence), MAX(sequence) FROM board_has_pins {boards}"),
            multi(
                per("SELECT COUNT(*), COUNT(pin_id), SUM(sequence), MIN(sequence), MAX(sequence) FROM {db}.board_has_pins WHERE {key}"),
                agg(vec![Count, Count, Sum, Min, Max]),
            ),
        ),
        // GROUP BY a selected column, ORDER BY an alias, LIMIT: the parts
        // get no LIMIT (groups span shards).
        c(
            format!("SELECT board_id, COUNT(*) AS n FROM board_has_pins {boards} GROUP BY board_id ORDER BY n DESC LIMIT 5 OFFSET 1"),
            multi(
                per("SELECT board_id, COUNT(*) AS n FROM {db}.board_has_pins WHERE {key} GROUP BY board_id ORDER BY n DESC"),
                Merge {
                    order_by: vec![desc(1)],
                    offset: 1,
                    limit: Some(5),
                    aggregation: Some(Aggregation { columns: vec![GroupKey, Count] }),
                    hidden_columns: 0,
                },
            ),
        ),
        // GROUP BY by position, a constant, an aggregate named in ORDER BY.
        c(
            format!("SELECT pin_id, 'x', MAX(sequence) FROM board_has_pins {boards} GROUP BY 1 ORDER BY MAX(sequence) LIMIT 2, 3"),
            multi(
                per("SELECT pin_id, 'x', MAX(sequence) FROM {db}.board_has_pins WHERE {key} GROUP BY 1 ORDER BY MAX(sequence)"),
                Merge {
                    order_by: vec![asc(2)],
                    offset: 2,
                    limit: Some(3),
                    aggregation: Some(Aggregation { columns: vec![GroupKey, GroupKey, Max] }),
                    hidden_columns: 0,
                },
            ),
        ),
        // A GROUP BY column that is not selected: a hidden group key.
        c(
            format!("SELECT COUNT(*) FROM board_has_pins {boards} GROUP BY pin_id"),
            multi(
                per("SELECT COUNT(*), pin_id FROM {db}.board_has_pins WHERE {key} GROUP BY pin_id"),
                Merge {
                    aggregation: Some(Aggregation { columns: vec![Count, GroupKey] }),
                    hidden_columns: 1,
                    ..Merge::default()
                },
            ),
        ),
        // GROUP BY alone: distinct groups.
        c(
            format!("SELECT pin_id FROM board_has_pins {boards} GROUP BY pin_id"),
            multi(
                per("SELECT pin_id FROM {db}.board_has_pins WHERE {key} GROUP BY pin_id"),
                agg(vec![GroupKey]),
            ),
        ),
        // A single shard: untouched, whatever the aggregate.
        c(
            format!("SELECT AVG(sequence), COUNT(DISTINCT pin_id) FROM board_has_pins WHERE board_id = {BOARD} HAVING 1"),
            shard("db03429", "SELECT AVG(sequence), COUNT(DISTINCT pin_id) FROM db03429.board_has_pins WHERE board_id = 241294561224164685 HAVING 1".replace("241294561224164685", &BOARD.to_string())),
        ),
    ]);
}

#[test]
fn multi_shard_refusals() {
    let two = format!("WHERE id IN ({PIN}, {PIN_FAR})");
    let boards = format!("WHERE board_id IN ({BOARD}, {BOARD_FAR})");
    run(vec![
        c(
            format!("SELECT AVG(sequence) FROM board_has_pins {boards}"),
            reject("Unsupported", "AVG over several shards cannot be merged exactly (an average of averages is wrong); select SUM(x) and COUNT(x) and divide"),
        ),
        c(
            format!("SELECT COUNT(DISTINCT pin_id) FROM board_has_pins {boards}"),
            reject("Unsupported", "COUNT(DISTINCT ...) over several shards cannot be merged exactly"),
        ),
        c(
            format!("SELECT SUM(DISTINCT sequence) FROM board_has_pins {boards}"),
            reject("Unsupported", "SUM(DISTINCT ...) over several shards"),
        ),
        c(
            format!("SELECT board_id, GROUP_CONCAT(pin_id) FROM board_has_pins {boards} GROUP BY board_id"),
            reject("Unsupported", "GROUP_CONCAT over several shards cannot be merged exactly; only COUNT, SUM, MIN and MAX are merged"),
        ),
        c(
            format!("SELECT STDDEV(sequence) FROM board_has_pins {boards}"),
            reject("Unsupported", "STDDEV over several shards"),
        ),
        c(
            format!("SELECT board_id, COUNT(*) FROM board_has_pins {boards} GROUP BY board_id HAVING COUNT(*) > 1"),
            reject("Unsupported", "HAVING over several shards: each shard would filter its partial groups"),
        ),
        c(
            format!("SELECT pin_id, COUNT(*) FROM board_has_pins {boards}"),
            reject("Unsupported", "column pin_id is neither grouped nor aggregated"),
        ),
        c(
            format!("SELECT pin_id, COUNT(*) FROM board_has_pins {boards} GROUP BY board_id"),
            reject("Unsupported", "column pin_id is neither grouped nor aggregated"),
        ),
        c(
            format!("SELECT SUM(sequence) + 1 FROM board_has_pins {boards}"),
            reject("Unsupported", "an aggregate inside an expression (SUM(sequence) + 1) over several shards"),
        ),
        c(
            format!("SELECT COALESCE(MAX(sequence), 0) FROM board_has_pins {boards}"),
            reject("Unsupported", "an aggregate inside an expression"),
        ),
        c(
            format!("SELECT * , COUNT(*) FROM board_has_pins {boards}"),
            reject("Unsupported", "SELECT * with aggregates or GROUP BY over several shards; list the columns"),
        ),
        c(
            format!("SELECT board_id, COUNT(*) FROM board_has_pins {boards} GROUP BY board_id ORDER BY sequence"),
            reject("Unsupported", "ORDER BY sequence in an aggregate over several shards: order by a selected column"),
        ),
        c(
            format!("SELECT COUNT(*) FROM board_has_pins {boards} GROUP BY board_id WITH ROLLUP"),
            reject("Unsupported", "WITH ROLLUP"),
        ),
        c(
            format!("SELECT DISTINCT data FROM pins {two}"),
            reject("Unsupported", "SELECT DISTINCT over several shards: rows distinct on each shard may repeat across shards; use GROUP BY"),
        ),
        c(
            format!("SELECT data, ROW_NUMBER() OVER (ORDER BY ts) FROM pins {two}"),
            reject("Unsupported", "window functions (OVER, WINDOW, QUALIFY) over several shards"),
        ),
        c(
            format!("SELECT COUNT(*) OVER () FROM pins {two}"),
            reject("Unsupported", "window functions"),
        ),
        c(
            format!("SELECT data, (SELECT 1) FROM pins {two}"),
            reject("Unsupported", "a subquery in a read over several shards"),
        ),
        c(
            format!("SELECT data FROM (SELECT data FROM pins {two}) AS t"),
            reject("Unsupported", "a subquery in a read over several shards"),
        ),
        c(
            format!("SELECT p.data FROM pins p JOIN board_has_pins b ON b.pin_id = p.local_id WHERE p.id IN ({PIN}, {PIN_FAR})"),
            reject("Unsupported", "a join in a read over several shards: each shard would join only its own rows"),
        ),
        c(
            format!("SELECT data FROM pins {two} UNION ALL SELECT 'x'"),
            reject("Unsupported", "UNION, INTERSECT or EXCEPT"),
        ),
        c(
            format!("WITH x AS (SELECT 1) SELECT data FROM pins {two}"),
            reject("Unsupported", "WITH (common table expressions) in a read over several shards"),
        ),
        c(
            format!("EXPLAIN SELECT data FROM pins {two}"),
            reject("Unsupported", "EXPLAIN of a read over several shards"),
        ),
        c(
            format!("SELECT data FROM pins {two} LIMIT @n"),
            reject("Unsupported", "LIMIT @n (LIMIT takes numbers)"),
        ),
        // Several shards plus something naming one shard.
        u(
            "db00007",
            format!("SELECT data FROM pins {two}"),
            reject("CrossShard", "the IN list on pins.id spans several shards, but USE db00007 is on db00007"),
        ),
        c(
            format!("SELECT /*+ SHARD(7) */ data FROM pins {two}"),
            reject("CrossShard", "but hint SHARD(7) is on db00007"),
        ),
        c(
            format!("SELECT data FROM pins {two} AND id = {PIN}"),
            reject("CrossShard", "but pins.id = 241294492511762325 is on db03429"),
        ),
        c(
            format!("SELECT data FROM pins {two} AND id IN ({PIN_B}, {PIN_FAR})"),
            reject("Unsupported", "several key restrictions whose values span shards"),
        ),
    ]);
}

#[test]
fn multi_shard_writes_and_locks_refused() {
    run(vec![
        c(
            format!("UPDATE pins SET data = 'x' WHERE id IN ({PIN}, {PIN_FAR})"),
            reject("CrossShard", "the IN list on pins.id spans several shards (db03429 and db00012); writes never fan out: send one statement per shard"),
        ),
        c(
            format!("DELETE FROM board_has_pins WHERE board_id IN ({BOARD}, {BOARD_FAR})"),
            reject("CrossShard", "writes never fan out"),
        ),
        c(
            "DELETE FROM user_by_email WHERE email IN ('a@b.c', 'user@example.com')",
            reject("CrossShard", "writes never fan out"),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id) SELECT board_id, pin_id FROM board_has_pins WHERE board_id IN ({BOARD}, {BOARD_FAR})"),
            reject("CrossShard", "writes never fan out"),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({BOARD}, 1, 1), ({BOARD_FAR}, 2, 2)"),
            reject("CrossShard", "INSERT rows of board_has_pins are on different shards"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id IN ({PIN}, {PIN_FAR}) FOR UPDATE"),
            reject("CrossShard", "locking reads (FOR UPDATE, FOR SHARE) never fan out"),
        ),
        c(
            format!("SELECT data FROM pins WHERE id IN ({PIN}, {PIN_FAR}) LOCK IN SHARE MODE"),
            reject("CrossShard", "locking reads"),
        ),
    ]);
}

#[test]
fn multi_shard_prepared() {
    let t = topo();
    run_prepare(
        &t,
        vec![
            // Markers only: one representative shard, as before.
            c(
                "SELECT id, data FROM pins WHERE id IN (?, ?, ?)",
                shard("db00000", "SELECT ((0<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, data FROM db00000.pins WHERE local_id IN (?, ?, ?)"),
            ),
            // Literals spanning shards: every part keeps the markers.
            c(
                format!("SELECT data FROM pins WHERE id IN ({PIN}, {PIN_FAR}, ?) ORDER BY ts LIMIT ?"),
                multi(
                    vec![
                        ("db00012", "SELECT data, ts FROM db00012.pins WHERE local_id IN (9, ?) ORDER BY ts LIMIT ?".to_owned()),
                        ("db03429", "SELECT data, ts FROM db03429.pins WHERE local_id IN (7075733, ?) ORDER BY ts LIMIT ?".to_owned()),
                    ],
                    Merge { order_by: vec![asc(1)], hidden_columns: 1, ..Merge::default() },
                ),
            ),
        ],
    );
    // EXECUTE: the bound values are in the text, and `route` splits.
    let sql = "SELECT id, data FROM pins WHERE id IN (?, ?, ?) ORDER BY id LIMIT ?";
    let bound = bind(
        sql,
        &[
            &PIN.to_string(),
            &format!("'{PIN_FAR}'"),
            &PIN_B.to_string(),
            "2",
        ],
    );
    let expect = multi(
        vec![
            ("db00012", format!("SELECT {} AS id, data FROM db00012.pins WHERE local_id = 9 ORDER BY {} LIMIT 2", composed(12), composed(12))),
            ("db03429", format!("SELECT {COMPOSED} AS id, data FROM db03429.pins WHERE local_id IN (7075733, 5) ORDER BY {COMPOSED} LIMIT 2")),
        ],
        Merge { order_by: vec![asc(0)], limit: Some(2), ..Merge::default() },
    );
    if let Some(failure) = check(&t, &bound, None, &expect) {
        panic!("{failure}");
    }
}

/// Cost of planning a 50-id IN list over many shards and a 4096-part
/// scatter (run with `--release --ignored --nocapture`).
#[test]
#[ignore]
fn bench_multi_shard() {
    let t = topo();
    let ctx = RouteContext::default();
    let ids: Vec<String> = (0..50).map(|i| id(i * 81, 1, i + 1).to_string()).collect();
    let sql = format!("SELECT id, data FROM pins WHERE id IN ({})", ids.join(", "));
    let n = 2_000;
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(route(std::hint::black_box(&sql), &t, &ctx, &mut Fixed(0)));
    }
    eprintln!("route(50 ids over 50 shards): {:?}", start.elapsed() / n);
    let sql = "SELECT /*+ SCATTER */ COUNT(*) FROM pins";
    let n = 50;
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(route(std::hint::black_box(sql), &t, &ctx, &mut Fixed(0)));
    }
    eprintln!("route(scatter over 4096 shards): {:?}", start.elapsed() / n);
}

#[test]
fn system_schemas_are_out_of_reach() {
    let denied = |schema: &str| {
        reject(
            "SystemSchema",
            format!("the {schema} schema is not reachable through the proxy"),
        )
    };
    let read_only = || reject("SystemSchema", "information_schema is read-only");
    run(vec![
        c("SELECT * FROM mysql.user", denied("mysql")),
        c("select authentication_string from `mysql`.`user`", denied("mysql")),
        c("SELECT * FROM MySQL . User", denied("mysql")),
        c("SELECT * FROM mysql/* x */.user", denied("mysql")),
        c("SELECT \"a\" FROM \"mysql\".\"user\"", denied("mysql")),
        c(format!("SELECT data FROM pins WHERE id = {PIN} AND data IN (SELECT user FROM mysql.user)"), denied("mysql")),
        c(format!("SELECT p.data FROM pins p JOIN mysql.user u ON 1 WHERE p.id = {PIN}"), denied("mysql")),
        c(format!("SELECT (SELECT MAX(password) FROM mysql.user) FROM pins WHERE id = {PIN}"), denied("mysql")),
        c("INSERT INTO mysql.help_keyword VALUES (9999, 'x')", denied("mysql")),
        c("INSERT INTO /*+ SHARD(5) */ pins (data) SELECT authentication_string FROM mysql.user", denied("mysql")),
        c("UPDATE mysql.global_priv SET priv = '{}' WHERE user = 'app'", denied("mysql")),
        c("DELETE FROM mysql.help_keyword WHERE help_keyword_id = 1", denied("mysql")),
        c("REPLACE INTO mysql.help_keyword VALUES (1, 'x')", denied("mysql")),
        c("SET @x = (SELECT authentication_string FROM mysql.user LIMIT 1)", denied("mysql")),
        c("SELECT * FROM JSON_TABLE((SELECT authentication_string FROM mysql.user LIMIT 1), '$' COLUMNS (a TEXT PATH '$')) t", denied("mysql")),
        c("SELECT sys.format_bytes(1)", denied("sys")),
        c("SELECT * FROM performance_schema.threads", denied("performance_schema")),
        c("WITH u AS (SELECT * FROM mysql.user) SELECT * FROM u", denied("mysql")),
        c("SHOW TABLES FROM mysql", denied("mysql")),
        c("SHOW COLUMNS FROM user FROM mysql", denied("mysql")),
        c("SHOW INDEX FROM mysql.user", denied("mysql")),
        c("SHOW CREATE TABLE mysql.user", denied("mysql")),
        c("SHOW TABLE STATUS IN sys", denied("sys")),
        c("SHOW TRIGGERS FROM mysql", denied("mysql")),
        c("DESCRIBE mysql.user", denied("mysql")),
        c("EXPLAIN SELECT * FROM mysql.user", denied("mysql")),
        c("USE mysql", reject("UnknownDatabase", "mysql")),
        c("SHOW GRANTS", reject("SystemSchema", "grants and password are not shown")),
        c("show grants for current_user()", reject("SystemSchema", "grants and password")),
        c("SHOW CREATE USER shard", reject("SystemSchema", "grants and password")),
        c("INSERT INTO information_schema.tables (table_name) VALUES ('x')", read_only()),
        c("UPDATE information_schema.tables SET table_name = 'x'", read_only()),
        c("DELETE FROM information_schema.processlist", read_only()),
        // What drivers read at connect keeps working.
        c("SELECT * FROM information_schema.tables", any("SELECT * FROM information_schema.tables")),
        c("SHOW TABLES FROM information_schema", any("SHOW TABLES FROM information_schema")),
        c(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'mysql'",
            any("SELECT table_name FROM information_schema.tables WHERE table_schema = 'mysql'"),
        ),
        c("SHOW VARIABLES LIKE 'sys%'", any("SHOW VARIABLES LIKE 'sys%'")),
        c("SELECT 'mysql.user'", any("SELECT 'mysql.user'")),
    ]);
    let t = topo();
    let plan = route(
        "SELECT * FROM mysql.user",
        &t,
        &RouteContext::default(),
        &mut Fixed(0),
    );
    let Plan::Reject(error) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!((error.code(), error.sql_state()), (1142, "42000"));
    assert_eq!(
        error.to_string(),
        "SELECT command denied for table 'mysql.user' (shardgate: the mysql schema is not reachable through the proxy)"
    );
}
/// Routes with the session's lexical state set directly.
fn route_lex(sql: &str, lex: LexMode) -> Plan {
    let ctx = RouteContext {
        lex,
        ..RouteContext::default()
    };
    route(sql, &topo(), &ctx, &mut Fixed(3429))
}

fn rejected_with(plan: &Plan, kind: &str, contains: &str) -> bool {
    matches!(plan, Plan::Reject(e) if variant(e) == kind && e.to_string().contains(contains))
}

#[test]
fn executable_comments_are_read_as_the_server_reads_them() {
    let mariadb = LexMode {
        server_version: 101119,
        ..LexMode::default()
    };
    // Issue 9 item 2: content of /*M! */ is SQL.
    let plan = route_lex(
        "/*M!CREATE TABLE db00001.x (a int) */ SELECT local_id FROM db00001.pins LIMIT 0",
        mariadb,
    );
    assert!(matches!(plan, Plan::Reject(_)), "{plan:?}");
    let plan = route_lex("SET @a=1 /*M!, GLOBAL max_connect_errors=4242 */", mariadb);
    assert!(rejected_with(&plan, "Unsupported", "GLOBAL"), "{plan:?}");
    let plan = route_lex(
        "SET @a=1 /*!100000 , GLOBAL max_connect_errors=4242 */",
        mariadb,
    );
    assert!(rejected_with(&plan, "Unsupported", "GLOBAL"), "{plan:?}");
    // Too new for the server: a comment, not SQL.
    let plan = route_lex(
        "SET @a=1 /*!999999 , GLOBAL max_connect_errors=4242 */",
        mariadb,
    );
    assert!(
        matches!(plan, Plan::Session(SessionAction::SetSession { .. })),
        "{plan:?}"
    );
    // MySQL 5.7+ versions are skipped by MariaDB.
    let plan = route_lex("SELECT 1 /*!50708 , (SELECT 1 FROM pins) */", mariadb);
    assert_eq!(
        plan,
        Plan::AnyHost {
            sql: "SELECT 1 /*!50708 , (SELECT 1 FROM pins) */".into()
        }
    );
    // Item 12: edits inside an executed comment land in place.
    let sql = format!("SELECT data FROM pins WHERE /*!id = {PIN}*/");
    match route_lex(&sql, mariadb) {
        Plan::Shard(q) => assert_eq!(
            q.sql,
            "SELECT data FROM db03429.pins WHERE /*!local_id = 7075733*/"
        ),
        other => panic!("{other:?}"),
    }
    let sql = format!("SELECT data FROM pins WHERE /*!40101 id = {PIN} */ /*!99999 OR 1=1 */");
    match route_lex(&sql, mariadb) {
        Plan::Shard(q) => assert_eq!(
            q.sql,
            "SELECT data FROM db03429.pins WHERE /*!40101 local_id = 7075733 */ /*!99999 OR 1=1 */"
        ),
        other => panic!("{other:?}"),
    }
    // A hint inside an executable comment, a nested comment: refused.
    for sql in [
        "SELECT /*! /*+ SHARD(1) */ 1 */",
        "SELECT 1 /*!99999 /* x */ OR 1=1 */",
        "SELECT 1--1",
    ] {
        let plan = route_lex(sql, mariadb);
        assert!(
            matches!(plan, Plan::Reject(RouteError::Unreadable(_))),
            "{sql}: {plan:?}"
        );
    }
}

#[test]
fn no_backslash_escapes_and_ansi_quotes() {
    let nbe = LexMode {
        no_backslash_escapes: true,
        ..LexMode::default()
    };
    // Issue 9 item 5.
    let sql = "SET @x='\\', GLOBAL max_connect_errors=4243 -- '";
    assert!(rejected_with(&route_lex(sql, nbe), "Unsupported", "GLOBAL"));
    // Without the mode it is one string: a user variable.
    assert!(matches!(
        route_lex(sql, LexMode::default()),
        Plan::Session(SessionAction::SetSession { .. })
    ));
    // A backslash in a string under the mode: read as a character.
    let sql = format!("SELECT data FROM pins WHERE id = {PIN} AND data = 'a\\'");
    match route_lex(&sql, nbe) {
        Plan::Shard(q) => assert_eq!(
            q.sql,
            "SELECT data FROM db03429.pins WHERE local_id = 7075733 AND data = 'a\\'"
        ),
        other => panic!("{other:?}"),
    }
    // ANSI_QUOTES: "pins" is a table.
    let ansi = LexMode {
        ansi_quotes: true,
        ..LexMode::default()
    };
    let sql = format!("SELECT \"data\" FROM \"pins\" WHERE \"id\" = {PIN}");
    match route_lex(&sql, ansi) {
        Plan::Shard(q) => assert!(q.sql.to_string().contains("7075733"), "{}", q.sql),
        other => panic!("{other:?}"),
    }
}

#[test]
fn gbk_multibyte_characters_swallow_no_backslash() {
    let gbk = LexMode {
        charset: ClientCharset::AsciiTrail(TrailCharset::Gbk),
        ..LexMode::default()
    };
    // 中 is E4 B8 AD; read as gbk, AD 5C is one character, and the quote
    // after it ends the string: `OR 1=1` is SQL.
    let sql = format!("SELECT data FROM pins WHERE id = {PIN} AND data = '中\\' OR 1=1 -- '");
    let plan = route_lex(&sql, gbk);
    assert!(matches!(plan, Plan::Reject(_)), "{plan:?}");
    // Read as UTF-8 it is one string.
    assert!(matches!(
        route_lex(&sql, LexMode::default()),
        Plan::Shard(_)
    ));
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
            sql: "SET STATEMENT max_statement_time=1 FOR SELECT 1".into()
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
fn literals_and_comments_cross_checked() {
    // Prefixed literals, concatenated strings and kept hints agree.
    let plan = route_lex(
        "SELECT x'41', X'42', b'1', N'n', _utf8mb4'u' 'v', 0x41, `a``b` /*+ MAX_EXECUTION_TIME(1) */",
        LexMode::default(),
    );
    assert!(matches!(plan, Plan::AnyHost { .. }), "{plan:?}");
}

#[test]
fn token_cap_refuses_before_parsing() {
    let sql = format!(
        "SELECT 1 FROM pins WHERE id IN ({})",
        vec!["1"; 2_000].join(",")
    );
    let ctx = RouteContext {
        max_tokens: 1_000,
        ..RouteContext::default()
    };
    let plan = route(&sql, &topo(), &ctx, &mut Fixed(0));
    assert!(
        rejected_with(&plan, "Unsupported", "max_statement_tokens"),
        "{plan:?}"
    );
}

/// Issue 9 item 8: an 8 MiB `IN (1,1,...)` is refused by the token cap in
/// linear time; prints the figures (`cargo test --release -- --ignored
/// --nocapture huge_in_list`).
#[test]
#[ignore]
fn huge_in_list_cost() {
    fn peak_rss() -> String {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM"))
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    }
    fn outcome(plan: &Plan) -> String {
        match plan {
            Plan::Reject(e) => e.to_string(),
            _ => "routed".to_owned(),
        }
    }
    let t = topo();
    let mut huge = String::from("SELECT 1 FROM pins WHERE id IN (1");
    while huge.len() < 8 << 20 {
        huge.push_str(",1");
    }
    huge.push(')');
    // Refused by the default token cap (peak RSS of the process so far).
    let start = std::time::Instant::now();
    let plan = route(&huge, &t, &RouteContext::default(), &mut Fixed(0));
    eprintln!(
        "8 MiB, default cap: {:?}, {} ({})",
        start.elapsed(),
        peak_rss(),
        outcome(&plan)
    );
    // Just under the default cap: parsed and planned in full.
    let near = format!(
        "SELECT 1 FROM pins WHERE id IN ({})",
        vec!["1"; 240_000].join(",")
    );
    let start = std::time::Instant::now();
    let plan = route(&near, &t, &RouteContext::default(), &mut Fixed(0));
    eprintln!(
        "{} bytes, 480k tokens: {:?}, {} ({})",
        near.len(),
        start.elapsed(),
        peak_rss(),
        outcome(&plan)
    );
    // Without the cap (the behaviour before it).
    let ctx = RouteContext {
        max_tokens: u64::MAX,
        ..RouteContext::default()
    };
    let start = std::time::Instant::now();
    let plan = route(&huge, &t, &ctx, &mut Fixed(0));
    eprintln!(
        "8 MiB, no cap: {:?}, {} ({})",
        start.elapsed(),
        peak_rss(),
        outcome(&plan)
    );
}

#[test]
fn bytes_in_bytes_out() {
    let latin1 = RouteContext {
        lex: LexMode {
            charset: ClientCharset::AsciiSafe,
            ..LexMode::default()
        },
        ..RouteContext::default()
    };
    let t = topo();
    let sql: &[u8] = b"SELECT HEX('\xe9')";
    assert_eq!(
        route(sql, &t, &latin1, &mut Fixed(0)),
        Plan::AnyHost { sql: sql.into() }
    );
    let mut sql = format!("SELECT data FROM pins WHERE id = {PIN} AND data = '").into_bytes();
    sql.extend_from_slice(b"\xe9\xff'");
    let mut want = b"SELECT data FROM db03429.pins WHERE local_id = 7075733 AND data = '".to_vec();
    want.extend_from_slice(b"\xe9\xff'");
    match route(sql.as_slice(), &t, &latin1, &mut Fixed(0)) {
        Plan::Shard(q) => assert_eq!(q.sql.as_bytes(), want.as_slice()),
        other => panic!("{other:?}"),
    }
    // Invalid UTF-8 on a utf8 connection: the same bytes, unchanged.
    match route(sql.as_slice(), &t, &RouteContext::default(), &mut Fixed(0)) {
        Plan::Shard(q) => assert_eq!(q.sql.as_bytes(), want.as_slice()),
        other => panic!("{other:?}"),
    }
}

/// Random statements built from pieces that stress the lexer (quotes,
/// comment markers, escapes, multibyte lead and trail bytes) never panic
/// the router, in any lexical mode.
#[test]
fn random_statements_never_panic() {
    const PIECES: &[&[u8]] = &[
        b"SELECT ",
        b"data ",
        b"FROM pins ",
        b"WHERE id = ",
        b"241294492511762325",
        b"'",
        b"\"",
        b"`",
        b"\\",
        b"/*",
        b"*/",
        b"/*!",
        b"/*M!",
        b"40101",
        b"999999",
        b"/*+ SHARD(1) */",
        b"--",
        b"-- ",
        b"#",
        b"\n",
        b";",
        b"?",
        b".",
        b"5e",
        b"1.5e-",
        b"x'",
        b"N'",
        b"\xbf",
        b"\x5c",
        b"\x81",
        b"\xe4\xb8\xad",
        b"\xff",
        b"\0",
        b" OR 1=1 ",
        b"SET STATEMENT a=1 FOR ",
        b"SET @a=1",
        b", GLOBAL x=1",
        b"(",
        b")",
        b",",
    ];
    let t = topo();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..40_000 {
        let mut sql = Vec::new();
        for _ in 0..(next() % 12) {
            sql.extend_from_slice(PIECES[(next() % PIECES.len() as u64) as usize]);
        }
        let charset = match next() % 5 {
            0 => ClientCharset::Utf8,
            1 => ClientCharset::AsciiSafe,
            2 => ClientCharset::AsciiTrail(TrailCharset::Gbk),
            3 => ClientCharset::AsciiTrail(TrailCharset::Big5),
            _ => ClientCharset::AsciiTrail(TrailCharset::Sjis),
        };
        let flags = next();
        let ctx = RouteContext {
            lex: LexMode {
                charset,
                no_backslash_escapes: flags & 1 != 0,
                ansi_quotes: flags & 2 != 0,
                ..LexMode::default()
            },
            ..RouteContext::default()
        };
        let _ = route(sql.as_slice(), &t, &ctx, &mut Fixed(0));
        let _ = route_prepare(sql.as_slice(), &t, &ctx);
        let _ = split_statements(sql.as_slice(), &ctx.lex);
        let _ = placeholders(sql.as_slice(), &ctx.lex);
    }
}
