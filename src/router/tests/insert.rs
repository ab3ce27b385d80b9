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
