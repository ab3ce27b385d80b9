//! Multi-shard reads: IN lists and ORs of keys split per shard, ORDER BY and LIMIT, aggregates, prepared forms.

use super::*;

fn desc(column: usize) -> SortKey {
    SortKey {
        column,
        descending: true,
    }
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

/// A string as the proxy binds a prepared statement's string parameter.
fn bound_string(charset: &str, text: &str) -> String {
    let hex: String = text.bytes().map(|b| format!("{b:02X}")).collect();
    format!("_{charset} X'{hex}'")
}

#[test]
fn ids_bound_as_strings_split_like_integers() {
    let (pin, far, pin_b) = (
        bound_string("utf8mb4", &PIN.to_string()),
        bound_string("latin1", &PIN_FAR.to_string()),
        bound_string("binary", &PIN_B.to_string()),
    );
    let (board, board_far) = (
        bound_string("utf8mb4", &BOARD.to_string()),
        bound_string("gbk", &BOARD_FAR.to_string()),
    );
    let mut cases = vec![
        c(
            format!("SELECT id, data FROM pins WHERE id IN ({pin}, {far}, {pin_b})"),
            multi(
                vec![
                    ("db00012", format!("SELECT {} AS id, data FROM db00012.pins WHERE local_id = 9", composed(12))),
                    ("db03429", format!("SELECT {COMPOSED} AS id, data FROM db03429.pins WHERE local_id IN (7075733, 5)")),
                ],
                concat(),
            ),
        ),
        // Last in the list, inside parentheses, on the left of `=`.
        c(
            format!("SELECT data FROM pins WHERE (id = {pin} OR {far} = id) AND data <> ''"),
            multi(
                vec![
                    ("db00012", "SELECT data FROM db00012.pins WHERE (local_id = 9) AND data <> ''".to_owned()),
                    ("db03429", "SELECT data FROM db03429.pins WHERE (local_id = 7075733) AND data <> ''".to_owned()),
                ],
                concat(),
            ),
        ),
        c(
            format!("SELECT data FROM pins WHERE {far} = id OR id IN ( {pin} /* x */ )"),
            multi(
                vec![
                    ("db00012", "SELECT data FROM db00012.pins WHERE local_id = 9".to_owned()),
                    ("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733".to_owned()),
                ],
                concat(),
            ),
        ),
        // A mapping key stays as written, byte for byte.
        c(
            format!("SELECT pin_id FROM board_has_pins WHERE board_id IN ({board}, {board_far})"),
            multi(
                vec![
                    ("db00100", format!("SELECT pin_id FROM db00100.board_has_pins WHERE board_id = {board_far}")),
                    ("db03429", format!("SELECT pin_id FROM db03429.board_has_pins WHERE board_id = {board}")),
                ],
                concat(),
            ),
        ),
        // Leading zeros: the server reads the same number.
        c(
            format!("SELECT data FROM pins WHERE id IN ({}, {far})", bound_string("utf8mb4", &format!("000{PIN}"))),
            multi(
                vec![
                    ("db00012", "SELECT data FROM db00012.pins WHERE local_id = 9".to_owned()),
                    ("db03429", "SELECT data FROM db03429.pins WHERE local_id = 7075733".to_owned()),
                ],
                concat(),
            ),
        ),
    ];
    // Anything but plain decimal digits within 64 bits is no ID, wherever
    // it stands in the list.
    let hostile = [
        format!(" {PIN}"),
        format!("{PIN} "),
        format!("+{PIN}"),
        format!("-{PIN}"),
        format!("{PIN}abc"),
        format!("{PIN}\0"),
        format!("\0{PIN}"),
        "1e3".to_owned(),
        "0x3429".to_owned(),
        String::new(),
        "18446744073709551616".to_owned(),
        "１２３".to_owned(),
        format!("{PIN}.0"),
    ];
    for text in &hostile {
        let value = bound_string("utf8mb4", text);
        cases.push(c(
            format!("SELECT data FROM pins WHERE id IN ({far}, {value})"),
            reject("BadId", "bad id _utf8mb4 X'"),
        ));
        cases.push(c(
            format!("SELECT data FROM pins WHERE id IN ({value}, {pin})"),
            reject("BadId", "bad id _utf8mb4 X'"),
        ));
    }
    cases.push(c(
        format!(
            "SELECT data FROM pins WHERE id IN ({far}, {})",
            bound_string("utf8mb4", "18446744073709551615")
        ),
        reject("BadId", "reserved top bits"),
    ));
    run(cases);
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
                // `*`: the columns, `id` composed with each part's shard.
                per("SELECT {id} AS id, `data`, `ts` FROM {db}.pins WHERE {local} LIMIT 3"),
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
        // A board's page of pins, over two boards.
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
