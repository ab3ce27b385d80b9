//! Locking reads nested anywhere, EXPLAIN ANALYZE, SERIALIZABLE, and shard
//! keys changed by an INSERT's ON DUPLICATE KEY UPDATE.

use super::*;

const ROW: &str = "db00001.redteam_t WHERE id = 1";

#[test]
fn a_locking_clause_nested_anywhere_makes_a_locking_read() {
    let nested = [
        format!("(SELECT v FROM {ROW} FOR UPDATE)"),
        format!("SELECT (SELECT v FROM {ROW} FOR UPDATE) AS x"),
        format!("SELECT * FROM (SELECT v FROM {ROW} FOR UPDATE) d"),
        format!("SELECT v FROM {ROW} UNION ALL (SELECT v FROM {ROW} FOR UPDATE)"),
        format!("WITH w AS (SELECT v FROM {ROW} FOR UPDATE) SELECT * FROM w"),
        format!("SELECT v FROM db00001.redteam_t WHERE id IN (SELECT id FROM {ROW} FOR UPDATE)"),
        format!("SELECT 1 FROM {ROW} AND EXISTS (SELECT 1 FROM db00001.redteam_t FOR SHARE)"),
        format!("SELECT * FROM (SELECT v FROM {ROW} FOR UPDATE NOWAIT) d"),
        format!("SELECT * FROM (SELECT v FROM {ROW} FOR UPDATE SKIP LOCKED) d"),
        format!("SELECT * FROM (SELECT v FROM {ROW} LOCK IN SHARE MODE) d"),
        format!("SELECT (SELECT v FROM {ROW} LOCK IN SHARE MODE) AS x LOCK IN SHARE MODE"),
    ];
    run(nested
        .into_iter()
        .map(|sql| c(sql.clone(), locking("db00001", sql)))
        .collect());
}

#[test]
fn a_nested_locking_read_across_shards_is_refused() {
    run(vec![c(
        format!(
            "SELECT * FROM (SELECT data FROM pins WHERE id IN ({PIN}, {PIN_FAR}) FOR UPDATE) d"
        ),
        reject(
            "CrossShard",
            "locking reads (FOR UPDATE, FOR SHARE) never fan out",
        ),
    )]);
}

#[test]
fn lock_words_that_are_names_stay_names() {
    let sql = "SELECT `lock` FROM db00001.t WHERE `lock` IN ('share') AND mode = 1";
    run(vec![c(sql, shard("db00001", sql))]);
}

#[test]
fn statements_that_execute_what_they_analyze_are_refused() {
    run(vec![
        c(
            "EXPLAIN ANALYZE DELETE FROM db00001.pins WHERE local_id = 0",
            reject("Unsupported", "EXPLAIN ANALYZE"),
        ),
        c(
            "EXPLAIN ANALYZE SELECT * FROM db00001.pins",
            reject("Unsupported", "EXPLAIN ANALYZE"),
        ),
        c(
            "ANALYZE DELETE FROM db00001.pins WHERE local_id = 0",
            reject("Unsupported", "ANALYZE"),
        ),
        c(
            "ANALYZE UPDATE db00001.pins SET data = 'x' WHERE local_id = 0",
            reject("Unsupported", "ANALYZE"),
        ),
        c(
            "ANALYZE INSERT INTO db00001.pins (data) VALUES ('x')",
            reject("Unsupported", "ANALYZE"),
        ),
        c(
            "ANALYZE FORMAT=JSON SELECT * FROM db00001.pins",
            reject("Unsupported", "ANALYZE"),
        ),
    ]);
}

#[test]
fn serializable_is_refused_other_levels_pass() {
    let set = |vars: &[&str], sql: &str| set_session(vars, sql, false);
    run(vec![
        c(
            "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            reject("Unsupported", "SERIALIZABLE"),
        ),
        c(
            "set transaction isolation level serializable",
            reject("Unsupported", "SERIALIZABLE"),
        ),
        c(
            "SET transaction_isolation='SERIALIZABLE'",
            reject("Unsupported", "SERIALIZABLE"),
        ),
        c(
            "SET @@session.tx_isolation = 'serializable'",
            reject("Unsupported", "SERIALIZABLE"),
        ),
        c(
            "SET tx_isolation = 3",
            reject("Unsupported", "SERIALIZABLE"),
        ),
        c(
            "SET STATEMENT transaction_isolation='SERIALIZABLE' FOR SELECT 1",
            reject("Unsupported", "SERIALIZABLE"),
        ),
        set(
            &["transaction_isolation"],
            "SET transaction_isolation = 'READ-COMMITTED'",
        ),
        c(
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
            Expect::Session(SessionAction::SetNextTransaction {
                sql: "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ".into(),
            }),
        ),
    ]);
}

#[test]
fn on_duplicate_key_update_of_a_shard_key_is_refused() {
    let email = mod_shard(b"a@b.c", 4096);
    let msdb: &'static str = Box::leak(format!("msdb{email:05}").into_boxed_str());
    run(vec![
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({BOARD}, 7, 1) ON DUPLICATE KEY UPDATE board_id = {BOARD_FAR}"),
            reject("Unsupported", "ON DUPLICATE KEY UPDATE of board_has_pins.board_id"),
        ),
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id) VALUES ({BOARD}, 7) ON DUPLICATE KEY UPDATE sequence = 2, BOARD_ID = board_id + 1"),
            reject("Unsupported", "board_has_pins.BOARD_ID"),
        ),
        c(
            "INSERT INTO user_by_email (email, user_id) VALUES ('a@b.c', 1) ON DUPLICATE KEY UPDATE email = 'x@y.z'",
            reject("Unsupported", "user_by_email.email"),
        ),
        c(
            "INSERT INTO db00001.board_has_pins (board_id, pin_id) VALUES (1, 7) ON DUPLICATE KEY UPDATE board_has_pins.board_id = 5",
            reject("Unsupported", "board_has_pins.board_id"),
        ),
        c(
            "INSERT INTO pins (data) VALUES ('x') ON DUPLICATE KEY UPDATE local_id = 5",
            reject("Unsupported", "pins.local_id"),
        ),
        // The value it already has changes nothing.
        c(
            format!("INSERT INTO board_has_pins (board_id, pin_id) VALUES ({BOARD}, 7) ON DUPLICATE KEY UPDATE board_id = VALUES(board_id), sequence = 3"),
            write("db03429", format!("INSERT INTO db03429.board_has_pins (board_id, pin_id) VALUES ({BOARD}, 7) ON DUPLICATE KEY UPDATE board_id = VALUES(board_id), sequence = 3")),
        ),
        c(
            "INSERT INTO user_by_email (email, user_id) VALUES ('a@b.c', 1) ON DUPLICATE KEY UPDATE email = VALUES(email), user_id = 2",
            write(msdb, format!("INSERT INTO {msdb}.user_by_email (email, user_id) VALUES ('a@b.c', 1) ON DUPLICATE KEY UPDATE email = VALUES(email), user_id = 2")),
        ),
    ]);
}

#[test]
fn a_shard_database_insert_checks_its_rows_keys() {
    run(vec![
        c(
            format!(
                "INSERT INTO db03429.board_has_pins (board_id, pin_id) VALUES ({BOARD_FAR}, 791)"
            ),
            reject("CrossShard", ""),
        ),
        c(
            format!("INSERT INTO db03429.board_has_pins (board_id, pin_id) VALUES ({BOARD}, 791)"),
            write(
                "db03429",
                format!(
                    "INSERT INTO db03429.board_has_pins (board_id, pin_id) VALUES ({BOARD}, 791)"
                ),
            ),
        ),
    ]);
}
