//! Explicit scatters (`/*+ SCATTER */`) over every shard of a fleet.

use super::*;

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
