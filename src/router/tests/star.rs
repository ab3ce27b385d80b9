//! `SELECT *` and `t.*` over object tables: the table's columns with the
//! composed `id` in place of `local_id`.

use super::*;

/// The composed ID of shard 3429's pins, qualified.
fn composed_q(qualifier: &str) -> String {
    COMPOSED.replace("local_id", &format!("{qualifier}.local_id"))
}

#[test]
fn star_over_an_object_table_gives_the_composed_id_in_column_order() {
    run(vec![
        c(
            format!("SELECT * FROM pins WHERE id = {PIN}"),
            shard(
                "db03429",
                format!("SELECT {COMPOSED} AS id, `data`, `ts` FROM db03429.pins WHERE local_id = 7075733"),
            ),
        ),
        c(
            format!("SELECT p.* FROM pins p WHERE p.id = {PIN}"),
            shard(
                "db03429",
                format!(
                    "SELECT {} AS id, p.`data`, p.`ts` FROM db03429.pins p WHERE p.local_id = 7075733",
                    composed_q("p")
                ),
            ),
        ),
        c(
            format!("select PINS.* from pins where id = {PIN}"),
            shard(
                "db03429",
                format!(
                    "select {} AS id, PINS.`data`, PINS.`ts` from db03429.pins where local_id = 7075733",
                    composed_q("PINS")
                ),
            ),
        ),
        c(
            format!("SELECT *, data FROM pins WHERE id = {PIN}"),
            shard(
                "db03429",
                format!("SELECT {COMPOSED} AS id, `data`, `ts`, data FROM db03429.pins WHERE local_id = 7075733"),
            ),
        ),
        c(
            format!("SELECT data, p.* FROM pins AS p WHERE id = {PIN}"),
            shard(
                "db03429",
                format!(
                    "SELECT data, {} AS id, p.`data`, p.`ts` FROM db03429.pins AS p WHERE local_id = 7075733",
                    composed_q("p")
                ),
            ),
        ),
        // USE: the shard of the database.
        u(
            "db00007",
            "SELECT * FROM users LIMIT 1",
            shard(
                "db00007",
                "SELECT ((7<<46)|(3<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, `data`, `ts` FROM db00007.users LIMIT 1",
            ),
        ),
        c(
            "SELECT /*+ SHARD(7) */ * FROM boards",
            shard(
                "db00007",
                "SELECT ((7<<46)|(2<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, `data`, `ts` FROM db00007.boards",
            ),
        ),
        // EXPLAIN shows the statement the shard runs.
        c(
            format!("EXPLAIN SELECT * FROM pins WHERE id = {PIN}"),
            shard(
                "db03429",
                format!("EXPLAIN SELECT {COMPOSED} AS id, `data`, `ts` FROM db03429.pins WHERE local_id = 7075733"),
            ),
        ),
    ]);
}

#[test]
fn star_over_joins_and_subqueries() {
    run(vec![
        // Every FROM item in order: object tables expanded (qualified),
        // the others as `t.*` (under USE: a table without a key of its own
        // is refused otherwise).
        u(
            "db03429",
            format!("SELECT * FROM pins p JOIN board_has_pins b ON b.pin_id = p.local_id WHERE b.board_id = {BOARD}"),
            shard(
                "db03429",
                format!(
                    "SELECT {} AS id, p.`data`, p.`ts`, b.* FROM db03429.pins p JOIN db03429.board_has_pins b ON b.pin_id = p.local_id WHERE b.board_id = {BOARD}",
                    composed_q("p")
                ),
            ),
        ),
        u(
            "db03429",
            format!("SELECT * FROM board_has_pins, pins WHERE board_id = {BOARD} AND pin_id = local_id"),
            shard(
                "db03429",
                format!(
                    "SELECT board_has_pins.*, {} AS id, pins.`data`, pins.`ts` FROM db03429.board_has_pins, db03429.pins WHERE board_id = {BOARD} AND pin_id = local_id",
                    composed_q("pins")
                ),
            ),
        ),
        // A table named with its shard database keeps its name.
        c(
            format!("SELECT * FROM pins p, db03429 . board_has_pins WHERE p.id = {PIN}"),
            shard(
                "db03429",
                format!(
                    "SELECT {} AS id, p.`data`, p.`ts`, db03429 . board_has_pins.* FROM db03429.pins p, db03429 . board_has_pins WHERE p.local_id = 7075733",
                    composed_q("p")
                ),
            ),
        ),
        // The inner `*` is the table's; the outer one sees the derived
        // table's columns (already `id`) and stays.
        c(
            format!("SELECT * FROM (SELECT * FROM pins WHERE id = {PIN}) d"),
            shard(
                "db03429",
                format!("SELECT * FROM (SELECT {COMPOSED} AS id, `data`, `ts` FROM db03429.pins WHERE local_id = 7075733) d"),
            ),
        ),
        c(
            format!("SELECT d.*, p.* FROM (SELECT 1 AS one) d, pins p WHERE p.id = {PIN}"),
            shard(
                "db03429",
                format!(
                    "SELECT d.*, {} AS id, p.`data`, p.`ts` FROM (SELECT 1 AS one) d, db03429.pins p WHERE p.local_id = 7075733",
                    composed_q("p")
                ),
            ),
        ),
        // EXISTS: columns nobody sees, sent as written.
        u(
            "db03429",
            format!("SELECT data FROM pins WHERE id = {PIN} AND EXISTS (SELECT * FROM boards WHERE data = 'x')"),
            shard(
                "db03429",
                "SELECT data FROM db03429.pins WHERE local_id = 7075733 AND EXISTS (SELECT * FROM db03429.boards WHERE data = 'x')",
            ),
        ),
        // NATURAL and USING merge columns: name them.
        u(
            "db03429",
            format!("SELECT * FROM pins NATURAL JOIN boards WHERE pins.id = {PIN}"),
            reject("Unsupported", "SELECT * over an object table with a NATURAL join or a join with USING: name the columns"),
        ),
        u(
            "db03429",
            format!("SELECT * FROM pins JOIN boards USING (data) WHERE pins.id = {PIN}"),
            reject("Unsupported", "NATURAL join or a join with USING"),
        ),
        // ... but `t.*` of one of them is fine.
        u(
            "db03429",
            format!("SELECT pins.* FROM pins JOIN boards USING (data) WHERE pins.id = {PIN}"),
            shard(
                "db03429",
                format!(
                    "SELECT {} AS id, pins.`data`, pins.`ts` FROM db03429.pins JOIN db03429.boards USING (data) WHERE pins.local_id = 7075733",
                    composed_q("pins")
                ),
            ),
        ),
    ]);
}

#[test]
fn star_stays_where_there_is_no_logical_object_table() {
    run(vec![
        // Mapping and mod-shard tables have no local_id.
        c(
            format!("SELECT * FROM board_has_pins WHERE board_id = {BOARD}"),
            shard("db03429", format!("SELECT * FROM db03429.board_has_pins WHERE board_id = {BOARD}")),
        ),
        c(
            "SELECT * FROM user_by_email WHERE email = 'user@example.com'",
            shard("msdb02479", "SELECT * FROM msdb02479.user_by_email WHERE email = 'user@example.com'"),
        ),
        // A shard database's table is the table as stored.
        c(
            "SELECT * FROM db03429.pins WHERE local_id = 7075733",
            shard("db03429", "SELECT * FROM db03429.pins WHERE local_id = 7075733"),
        ),
        // A qualifier naming no object table of the scope.
        u(
            "db03429",
            format!("SELECT b.* FROM pins p JOIN board_has_pins b ON b.pin_id = p.local_id WHERE p.id = {PIN}"),
            shard(
                "db03429",
                "SELECT b.* FROM db03429.pins p JOIN db03429.board_has_pins b ON b.pin_id = p.local_id WHERE p.local_id = 7075733",
            ),
        ),
        // Writes copy rows as stored.
        u(
            "db03429",
            format!("INSERT INTO archive SELECT * FROM pins WHERE id = {PIN}"),
            write("db03429", "INSERT INTO db03429.archive SELECT * FROM db03429.pins WHERE local_id = 7075733"),
        ),
        c("SELECT COUNT(*) FROM pins /*+ SHARD(7) */", shard("db00007", "SELECT COUNT(*) FROM db00007.pins")),
    ]);
}

#[test]
fn star_over_several_shards_composes_each_parts_ids() {
    run(vec![
        c(
            format!("SELECT * FROM pins WHERE id IN ({PIN}, {PIN_FAR})"),
            multi(
                vec![
                    ("db00012", format!("SELECT {} AS id, `data`, `ts` FROM db00012.pins WHERE local_id = 9", composed(12))),
                    ("db03429", format!("SELECT {COMPOSED} AS id, `data`, `ts` FROM db03429.pins WHERE local_id = 7075733")),
                ],
                concat(),
            ),
        ),
        c(
            format!("SELECT p.* FROM pins p WHERE p.id = {PIN} OR p.id = {PIN_FAR}"),
            multi(
                vec![
                    ("db00012", format!("SELECT {} AS id, p.`data`, p.`ts` FROM db00012.pins p WHERE p.local_id = 9", composed(12).replace("local_id", "p.local_id"))),
                    ("db03429", format!("SELECT {} AS id, p.`data`, p.`ts` FROM db03429.pins p WHERE p.local_id = 7075733", composed_q("p"))),
                ],
                concat(),
            ),
        ),
    ]);
}

#[test]
fn star_in_prepared_statements_has_the_executions_columns() {
    let t = topo();
    let sql = "SELECT * FROM pins WHERE id = ?";
    run_prepare(
        &t,
        vec![c(
            sql,
            shard(
                "db00000",
                "SELECT ((0<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, `data`, `ts` FROM db00000.pins WHERE local_id = ?",
            ),
        )],
    );
    run(vec![c(
        bind(sql, &[&PIN.to_string()]),
        shard(
            "db03429",
            format!(
                "SELECT {COMPOSED} AS id, `data`, `ts` FROM db03429.pins WHERE local_id = 7075733"
            ),
        ),
    )]);
}

#[test]
fn star_over_a_table_whose_columns_are_unknown_is_refused() {
    let unknown = "SELECT * on object table notes: shardgate has not read its columns yet";
    run(vec![
        u("cl003", "SELECT * FROM notes", reject("Unsupported", unknown)),
        u("cl003", "SELECT n.* FROM notes n", reject("Unsupported", unknown)),
        u(
            "cl003",
            "SELECT * FROM notes",
            reject("Unsupported", "name the columns: SELECT id, ... FROM notes"),
        ),
        // Named columns need no reading; EXISTS sends its `*` as written.
        u(
            "cl003",
            "SELECT id, data FROM notes WHERE EXISTS (SELECT * FROM notes)",
            shard(
                "cl003",
                "SELECT ((3<<46)|(4<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id, data FROM cl003.notes WHERE EXISTS (SELECT * FROM cl003.notes)",
            ),
        ),
    ]);
    // No reading at all (a proxy whose servers were unreachable).
    let plan = route(
        &format!("SELECT * FROM pins WHERE id = {PIN}"),
        &load(SPEC_YAML),
        &RouteContext::default(),
        &mut Fixed(0),
    );
    assert!(
        rejected_with(&plan, "Unsupported", "SELECT * on object table pins"),
        "{plan:?}"
    );
}

#[test]
fn expanded_columns_are_quoted_and_tables_without_local_id_stay() {
    let mut t = topo();
    let mut columns = TableColumns::default();
    columns.insert(
        "main",
        "pins",
        vec!["order".into(), "LOCAL_ID".into(), "a$b".into()],
    );
    columns.insert("main", "boards", vec!["data".into()]);
    t.columns = Arc::new(SharedColumns::with(columns));
    run_cases(
        &t,
        vec![
            c(
                "SELECT /*+ SHARD(7) */ * FROM pins",
                shard(
                    "db00007",
                    "SELECT `order`, ((7<<46)|(1<<36)|(LOCAL_ID + (LOCAL_ID >> 36) * 18446744073709551615)) AS id, `a$b` FROM db00007.pins",
                ),
            ),
            c(
                "SELECT /*+ SHARD(7) */ * FROM boards",
                shard("db00007", "SELECT * FROM db00007.boards"),
            ),
        ],
        false,
    );
}

#[test]
fn star_over_columns_with_other_names_is_refused() {
    let refusal = "a column name is not plain ASCII";
    for name in ["a`b", "caf\u{e9}", "x\u{4e2d}`, (SELECT 1) #", "a b", ""] {
        let mut t = topo();
        let mut columns = TableColumns::default();
        columns.insert("main", "pins", vec!["local_id".into(), name.into()]);
        t.columns = Arc::new(SharedColumns::with(columns));
        run_cases(
            &t,
            vec![
                c(
                    "SELECT /*+ SHARD(7) */ * FROM pins",
                    reject("Unsupported", refusal),
                ),
                c(
                    "SELECT /*+ SHARD(7) */ id FROM pins",
                    shard(
                        "db00007",
                        "SELECT ((7<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id FROM db00007.pins",
                    ),
                ),
            ],
            false,
        );
    }
}
