//! INSERT placement: object IDs composed, mapping rows routed by their key.

use super::*;

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

/// F21: an explicit `local_id` beyond the ID's 36 local bits (or an
/// AUTO_INCREMENT option beyond them) would poison the shard's object
/// table for every later INSERT; refused at planning time.
#[test]
fn explicit_local_ids_must_fit_the_id_layout() {
    let big = 1u64 << 36;
    let max = big - 1;
    let too_big = |written: &str| {
        reject(
            "Unsupported",
            format!("local_id {written} for object table pins"),
        )
    };
    run(vec![
        c(
            format!("INSERT /*+ SHARD(1) */ INTO pins (local_id, data) VALUES ({big}, 'x')"),
            too_big(&big.to_string()),
        ),
        c(
            format!("INSERT INTO db00001.pins (local_id, data) VALUES (5, 'a'), ('{big}', 'x')"),
            too_big(&format!("'{big}'")),
        ),
        c(
            format!("REPLACE INTO db00001.pins SET data = 'x', local_id = {big}"),
            too_big(&big.to_string()),
        ),
        c(
            format!("UPDATE pins SET local_id = {big} WHERE id = {PIN}"),
            too_big(&big.to_string()),
        ),
        c(
            format!("UPDATE db00001.pins p SET p.local_id = {big} WHERE p.local_id = 1"),
            too_big(&big.to_string()),
        ),
        // Values that may not fit: expressions, negative, hex, non-integers.
        c("INSERT /*+ SHARD(1) */ INTO pins (local_id, data) VALUES (1 << 36, 'x')", too_big("1 << 36")),
        c("INSERT /*+ SHARD(1) */ INTO pins (local_id, data) VALUES (-1, 'x')", too_big("-1")),
        c("INSERT /*+ SHARD(1) */ INTO pins (local_id, data) VALUES (0x1000000000, 'x')", too_big("0x1000000000")),
        c("INSERT /*+ SHARD(1) */ INTO pins (local_id, data) VALUES (6.9e10, 'x')", too_big("6.9e10")),
        c("UPDATE pins SET local_id = local_id + 1 WHERE id = 241294492511762325", too_big("local_id + 1")),
        // No column list: local_id is the table's first column.
        c(format!("INSERT /*+ SHARD(1) */ INTO pins VALUES ({big}, 'x', NULL)"), too_big(&big.to_string())),
        c(
            "INSERT INTO db00001.pins (local_id, data) SELECT local_id, data FROM db00001.pins WHERE local_id = 1",
            reject("Unsupported", "INSERT ... SELECT that sets local_id of object table pins"),
        ),
        // In range, NULL, DEFAULT, 0: the server's or the client's choice.
        c(
            format!("INSERT /*+ SHARD(1) */ INTO pins (local_id, data) VALUES ({max}, 'x'), (NULL, 'y'), (DEFAULT, 'z'), (0, 'w')"),
            write("db00001", format!("INSERT INTO db00001.pins (local_id, data) VALUES ({max}, 'x'), (NULL, 'y'), (DEFAULT, 'z'), (0, 'w')")),
        ),
        c(
            "INSERT /*+ SHARD(1) */ INTO pins VALUES (DEFAULT, 'x', NULL)",
            write("db00001", "INSERT INTO db00001.pins VALUES (DEFAULT, 'x', NULL)"),
        ),
        c(
            format!("UPDATE pins SET local_id = {max} WHERE id = {PIN}"),
            write("db03429", format!("UPDATE db03429.pins SET local_id = {max} WHERE local_id = 7075733")),
        ),
        // Tables that are not object tables may hold any value.
        c(
            format!("INSERT INTO db00001.scratch (local_id) VALUES ({big})"),
            write("db00001", format!("INSERT INTO db00001.scratch (local_id) VALUES ({big})")),
        ),
        // AUTO_INCREMENT = n on an object table.
        c(
            format!("ALTER TABLE db00001.pins AUTO_INCREMENT = {big}"),
            reject("Unsupported", format!("AUTO_INCREMENT = {big} on object table pins")),
        ),
        c(
            format!("ALTER /*+ SHARD(1) */ TABLE pins AUTO_INCREMENT {big}"),
            reject("Unsupported", "on object table pins"),
        ),
        u(
            "db00001",
            "ALTER TABLE pins AUTO_INCREMENT = 6.9e10",
            reject("Unsupported", "AUTO_INCREMENT = 6.9e10 on object table pins"),
        ),
        c(
            format!("CREATE TABLE db00001.pins (local_id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, data TEXT) AUTO_INCREMENT = {big}"),
            reject("Unsupported", "on object table pins"),
        ),
        // Also where the parser cannot read the statement (a schema change
        // passed through as written must not carry it either).
        c(
            format!("ALTER TABLE db00001.pins ENGINE=InnoDB, AUTO_INCREMENT = {big}"),
            reject("Unsupported", format!("AUTO_INCREMENT = {big} on object table pins")),
        ),
        c(
            format!("ALTER TABLE db00001.pins AUTO_INCREMENT = {max}"),
            ddl("db00001", format!("ALTER TABLE db00001.pins AUTO_INCREMENT = {max}")),
        ),
        c(
            format!("ALTER TABLE db00001.scratch AUTO_INCREMENT = {big}"),
            ddl("db00001", format!("ALTER TABLE db00001.scratch AUTO_INCREMENT = {big}")),
        ),
    ]);
    // Prepared: a marker is checked when the bound value is in the text.
    let t = topo();
    run_prepare(
        &t,
        vec![c(
            "INSERT /*+ SHARD(1) */ INTO pins (local_id, data) VALUES (?, ?)",
            write(
                "db00001",
                "INSERT INTO db00001.pins (local_id, data) VALUES (?, ?)",
            ),
        )],
    );
    let bound = bind(
        "INSERT /*+ SHARD(1) */ INTO pins (local_id, data) VALUES (?, ?)",
        &[
            &format!(
                "_utf8mb4 X'{}'",
                big.to_string()
                    .bytes()
                    .map(|b| format!("{b:02X}"))
                    .collect::<String>()
            ),
            "'x'",
        ],
    );
    run(vec![c(
        bound,
        reject("Unsupported", "local_id _utf8mb4 X'"),
    )]);
}
