//! Statements routed by their shard key: object IDs, mapping keys, hints, joins and subqueries, system schemas.

use super::*;

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
        c("SELECT @@version_comment", any("SELECT @@version_comment")),
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
                autocommit: None,
                writes_through_function: false,
                computed: false,
                evaluates: crate::router::SetEvaluation::default(),
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
        u(
            "db03429",
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
        u(
            "db03429",
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

/// No key, no guess, per table: a join or subquery over two sharded
/// tables needs a key (or a hint, USE, a shard database) for each.
#[test]
fn every_sharded_table_needs_its_own_key() {
    let unkeyed = |table: &str| {
        reject(
            "NoShardKey",
            format!("no shard key for table '{table}': expected a key of its own"),
        )
    };
    run(vec![
        // The red team's: pins located by nothing but board_has_pins' key.
        c(
            format!("SELECT p.id, p.data FROM pins p JOIN board_has_pins b ON b.pin_id = p.id WHERE b.board_id = {BOARD}"),
            reject("NoShardKey", format!("expected a key of its own (p.id = <64-bit id>) (the statement goes to db03429 by board_has_pins.board_id = {BOARD}, where a join or subquery sees only that shard's pins rows)")),
        ),
        c(
            format!("SELECT count(*) FROM pins p WHERE p.id IN (SELECT pin_id FROM board_has_pins WHERE board_id = {BOARD})"),
            unkeyed("pins"),
        ),
        c(format!("SELECT u.data FROM users u, pins p WHERE p.id = {PIN}"), unkeyed("users")),
        c(
            format!("SELECT data FROM pins WHERE id = {PIN} AND EXISTS (SELECT 1 FROM boards WHERE data = 'x')"),
            unkeyed("boards"),
        ),
        c(
            format!("SELECT p.id, p.data FROM board_has_pins b JOIN pins p ON p.local_id = b.pin_id WHERE b.board_id = {BOARD}"),
            unkeyed("pins"),
        ),
        c(
            format!("UPDATE pins p JOIN board_has_pins b ON b.pin_id = p.id SET p.data = 'x' WHERE b.board_id = {BOARD}"),
            unkeyed("pins"),
        ),
        c(
            format!("DELETE p FROM pins p JOIN board_has_pins b ON b.pin_id = p.local_id WHERE b.board_id = {BOARD}"),
            unkeyed("pins"),
        ),
        c(format!("SELECT p1.data FROM pins p1 JOIN pins p2 ON p1.data = p2.data WHERE p1.id = {PIN}"), unkeyed("pins")),
        // INSERT ... SELECT: rows of a mapping table without literal keys
        // would land on the source's shard whatever their board_id.
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id) SELECT board_id, {PIN} FROM boards WHERE id = {BOARD}"),
            unkeyed("board_has_pins"),
        ),
        // An object INSERT placed at random reading an unkeyed table.
        c("INSERT INTO pins (data) SELECT data FROM boards", unkeyed("boards")),
        // Mod-shard keys: equal strings may hash to different shards.
        c(
            "SELECT a.user_id FROM user_by_email a JOIN user_by_email b ON a.email = b.email WHERE a.email = 'a@b.c'",
            unkeyed("user_by_email"),
        ),
        // The ON of an outer join keeps every row of the preserved side: it
        // locates only the other side.
        c(
            format!("SELECT p.data, b.data FROM pins p LEFT JOIN boards b ON p.id = {PIN} AND b.id = {BOARD}"),
            unkeyed("pins"),
        ),
        c(
            format!("SELECT b.pin_id FROM board_has_pins b LEFT JOIN boards bo ON b.board_id = bo.id AND b.board_id = {BOARD}"),
            unkeyed("board_has_pins"),
        ),
        c(
            format!("SELECT bo.data FROM boards bo LEFT JOIN board_has_pins b ON b.board_id = bo.id AND b.board_id = {BOARD}"),
            unkeyed("boards"),
        ),
        c(
            format!("SELECT p.data, b.data FROM pins p LEFT JOIN boards b ON b.id = {BOARD} WHERE p.id = {PIN}"),
            shard("db03429", "SELECT p.data, b.data FROM db03429.pins p LEFT JOIN db03429.boards b ON b.local_id = 77 WHERE p.local_id = 7075733"),
        ),
        c(
            format!("SELECT bo.data FROM boards bo LEFT JOIN board_has_pins b ON b.board_id = bo.id WHERE bo.id = {BOARD}"),
            shard("db03429", "SELECT bo.data FROM db03429.boards bo LEFT JOIN db03429.board_has_pins b ON b.board_id = ((3429<<46)|(2<<36)|(bo.local_id + (bo.local_id >> 36) * 18446744073709551615)) WHERE bo.local_id = 77"),
        ),
        c(
            format!("SELECT b.pin_id FROM boards bo RIGHT JOIN board_has_pins b ON b.board_id = bo.id WHERE b.board_id = {BOARD}"),
            shard("db03429", format!("SELECT b.pin_id FROM db03429.boards bo RIGHT JOIN db03429.board_has_pins b ON b.board_id = ((3429<<46)|(2<<36)|(bo.local_id + (bo.local_id >> 36) * 18446744073709551615)) WHERE b.board_id = {BOARD}")),
        ),
        // Fine: each table keyed, or located by an equality of ID keys,
        // or all by a hint, USE or shard databases.
        c(
            format!("SELECT p.data FROM pins p JOIN board_has_pins b ON b.pin_id = p.id WHERE b.board_id = {BOARD} AND p.id = {PIN}"),
            shard("db03429", format!("SELECT p.data FROM db03429.pins p JOIN db03429.board_has_pins b ON b.pin_id = ((3429<<46)|(1<<36)|(p.local_id + (p.local_id >> 36) * 18446744073709551615)) WHERE b.board_id = {BOARD} AND p.local_id = 7075733")),
        ),
        c(
            format!("SELECT b.pin_id FROM boards bo JOIN board_has_pins b ON b.board_id = bo.id WHERE bo.id = {BOARD}"),
            shard("db03429", "SELECT b.pin_id FROM db03429.boards bo JOIN db03429.board_has_pins b ON b.board_id = ((3429<<46)|(2<<36)|(bo.local_id + (bo.local_id >> 36) * 18446744073709551615)) WHERE bo.local_id = 77"),
        ),
        c(
            format!("SELECT data FROM boards bo WHERE bo.id = {BOARD} AND EXISTS (SELECT 1 FROM board_has_pins b WHERE b.board_id = bo.id)"),
            shard("db03429", "SELECT data FROM db03429.boards bo WHERE bo.local_id = 77 AND EXISTS (SELECT 1 FROM db03429.board_has_pins b WHERE b.board_id = ((3429<<46)|(2<<36)|(bo.local_id + (bo.local_id >> 36) * 18446744073709551615)))"),
        ),
        c(
            format!("SELECT p.data FROM pins p JOIN board_has_pins b ON b.pin_id = p.id /*+ SHARD(3429) */ WHERE b.board_id = {BOARD}"),
            shard("db03429", format!("SELECT p.data FROM db03429.pins p JOIN db03429.board_has_pins b ON b.pin_id = ((3429<<46)|(1<<36)|(p.local_id + (p.local_id >> 36) * 18446744073709551615)) WHERE b.board_id = {BOARD}")),
        ),
        c(
            format!("SELECT p.data FROM db03429.pins p JOIN board_has_pins b ON b.pin_id = p.local_id WHERE b.board_id = {BOARD}"),
            shard("db03429", format!("SELECT p.data FROM db03429.pins p JOIN db03429.board_has_pins b ON b.pin_id = p.local_id WHERE b.board_id = {BOARD}")),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id) SELECT {BOARD}, {PIN} FROM pins WHERE id = {PIN}"),
            unkeyed("board_has_pins"),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id) VALUES ({BOARD}, {PIN})"),
            write("db03429", format!("INSERT INTO db03429.board_has_pins (board_id, pin_id) VALUES ({BOARD}, {PIN})")),
        ),
        c(
            format!("INSERT INTO pins (data) SELECT data FROM boards WHERE id = {BOARD}"),
            write("db03429", "INSERT INTO db03429.pins (data) SELECT data FROM db03429.boards WHERE local_id = 77"),
        ),
    ]);
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
        c(
            "DELETE FROM information_schema.processlist",
            reject("Unsupported", "information_schema.PROCESSLIST"),
        ),
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
