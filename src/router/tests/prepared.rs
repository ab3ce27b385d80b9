//! Prepared statements: keys given as `?` markers, and bound values that route like literals.

use super::*;

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

/// A long value's stub (`engine::long_values`) in a key position is an
/// expression of unknown value: never a key that routes.
#[test]
fn a_long_value_stub_is_never_a_key() {
    let mut digits = String::new();
    for b in LONG_VALUE_STUB_PREFIX.iter().chain(b"0\x01") {
        digits.push_str(&format!("{b:02X}"));
    }
    assert!(is_long_value_stub(&digits));
    assert!(!is_long_value_stub(&digits[..digits.len() - 30]));
    let t = topo();
    let stub = format!("_utf8mb4 X'{digits}'");
    // Wherever a key is read from it, the plan is a refusal (the engine
    // then routes the whole text, the value in place).
    for sql in [
        format!("SELECT data FROM pins WHERE id = {stub}"),
        format!("SELECT data FROM pins WHERE id IN ({stub}, {PIN})"),
        format!("SELECT data FROM pins WHERE id = {PIN} OR id = {stub}"),
        format!("SELECT data FROM pins WHERE id = {PIN} AND id = {stub}"),
        format!("SELECT /*+ SHARD(5) */ data FROM pins WHERE id = {stub}"),
        format!("INSERT INTO pins (id, data) VALUES ({stub}, 'x')"),
        format!("INSERT INTO pins SET id = {stub}, data = 'x'"),
        format!("SELECT * FROM user_by_email WHERE email = {stub}"),
        format!("INSERT INTO user_by_email (email, id) VALUES ({stub}, 5)"),
        format!("INSERT /*+ SHARD(5) */ INTO user_by_email (email, id) VALUES ({stub}, 5)"),
        format!("UPDATE pins SET id = {stub} WHERE id = {PIN}"),
        format!("SELECT data FROM board_has_pins WHERE board_id = {stub}"),
    ] {
        let plan = route(&sql, &t, &RouteContext::default(), &mut Fixed(3429));
        assert!(
            matches!(plan, Plan::Reject(_)),
            "{sql}\n  => {}",
            short(&plan)
        );
    }
    let ctx = RouteContext {
        current_db: t.parse_database("msdb00005"),
        ..RouteContext::default()
    };
    let sql = format!("INSERT INTO user_by_email (email, id) VALUES ({stub}, 5)");
    let plan = route(&sql, &t, &ctx, &mut Fixed(3429));
    assert!(
        matches!(plan, Plan::Reject(_)),
        "{sql} under USE\n  => {}",
        short(&plan)
    );
    // Where no key is read from it, it is any value.
    run(vec![c(
        format!("SELECT data FROM pins WHERE id = {PIN} AND data = {stub}"),
        shard(
            "db03429",
            format!("SELECT data FROM db03429.pins WHERE local_id = 7075733 AND data = {stub}"),
        ),
    )]);
}
