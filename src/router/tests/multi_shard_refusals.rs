//! Multi-shard statements the router refuses: shapes it cannot merge, writes and locking reads.

use super::*;

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
