//! Multi-shard reads: each shard's part reaches its host with only its
//! keys, the parts' rows are merged (order, LIMIT/OFFSET, aggregates), and
//! the limits hold: a part that takes too long reports the time limit and
//! is killed on its host, a merge over its memory limit is refused, a dead
//! host or a part's error fails the read, and writes never fan out.

use super::fake::Reply;
use super::{
    error, not_reached, reached, rows, run_table, same_connection, Case, Expect, Rig, Traffic, A,
    B, C,
};

/// Pins on shards 5 (host A), 2049 (B) and 4000 (C).
fn three() -> String {
    let ids = [
        crate::id::compose(5, 1, 1),
        crate::id::compose(2049, 1, 2),
        crate::id::compose(4000, 1, 3),
    ];
    format!("{}, {}, {}", ids[0], ids[1], ids[2])
}

/// Each host answers its part with two sorted rows of `(local_id, title)`.
fn sorted_parts(rig: &Rig) {
    let fleet = &rig.fleet;
    let columns = [("local_id", true), ("title", false)];
    fleet.on(
        A,
        "from db00005",
        Reply::table(
            &columns,
            &[&[Some("1"), Some("a1")], &[Some("4"), Some("a4")]],
        ),
    );
    fleet.on(
        B,
        "from db02049",
        Reply::table(
            &columns,
            &[&[Some("2"), Some("b2")], &[Some("5"), Some("b5")]],
        ),
    );
    fleet.on(
        C,
        "from db04000",
        Reply::table(
            &columns,
            &[&[Some("3"), Some("c3")], &[Some("6"), Some("c6")]],
        ),
    );
}

fn table() -> Vec<Case> {
    let ids = three();
    vec![
        Case::new("a read of three shards merges the rows of three hosts in order with LIMIT")
            .given(sorted_parts)
            .run(
                format!("SELECT local_id, title FROM pins WHERE id IN ({ids}) ORDER BY local_id LIMIT 4"),
                rows(&["1,a1", "2,b2", "3,c3", "4,a4"]),
            )
            .then(reached(A, "db00005.pins"))
            .then(reached(B, "db02049.pins"))
            .then(reached(C, "db04000.pins"))
            .then(not_reached(A, "db02049"))
            .then(not_reached(B, "db04000")),
        Case::new("OFFSET skips the first merged rows")
            .given(sorted_parts)
            .run(
                format!("SELECT local_id, title FROM pins WHERE id IN ({ids}) ORDER BY local_id LIMIT 2 OFFSET 3"),
                rows(&["4,a4", "5,b5"]),
            ),
        Case::new("descending order merges from the top")
            .given(|rig| {
                let columns = [("local_id", true)];
                rig.fleet.on(A, "db00005", Reply::table(&columns, &[&[Some("4")], &[Some("1")]]));
                rig.fleet.on(B, "db02049", Reply::table(&columns, &[&[Some("5")], &[Some("2")]]));
                rig.fleet.on(C, "db04000", Reply::table(&columns, &[&[Some("6")], &[Some("3")]]));
            })
            .run(
                format!("SELECT local_id FROM pins WHERE id IN ({ids}) ORDER BY local_id DESC LIMIT 3"),
                rows(&["6", "5", "4"]),
            ),
        Case::new("COUNT(*) of three shards is the sum of the parts' counts")
            .given(|rig| {
                rig.fleet.on(A, "db00005", Reply::ints(&["COUNT(*)"], &[&[2]]));
                rig.fleet.on(B, "db02049", Reply::ints(&["COUNT(*)"], &[&[3]]));
                rig.fleet.on(C, "db04000", Reply::ints(&["COUNT(*)"], &[&[4]]));
            })
            .run(format!("SELECT COUNT(*) FROM pins WHERE id IN ({ids})"), rows(&["9"])),
        Case::new("MAX over three shards is the largest part's")
            .given(|rig| {
                rig.fleet.on(A, "db00005", Reply::ints(&["MAX(local_id)"], &[&[7]]));
                rig.fleet.on(B, "db02049", Reply::ints(&["MAX(local_id)"], &[&[11]]));
                rig.fleet.on(C, "db04000", Reply::ints(&["MAX(local_id)"], &[&[3]]));
            })
            .run(format!("SELECT MAX(local_id) FROM pins WHERE id IN ({ids})"), rows(&["11"])),
        Case::new("a part that times out reports the time limit and is killed on its host")
            .limits("multi_shard_part_timeout_ms: 200")
            .given(|rig| {
                sorted_parts(rig);
                rig.fleet.on(
                    C,
                    "from db04000",
                    Reply::ints(&["local_id"], &[&[3]]).after(std::time::Duration::from_secs(30)),
                );
            })
            .run(
                format!("SELECT local_id, title FROM pins WHERE id IN ({ids}) ORDER BY local_id LIMIT 4"),
                error(1969, "shard 4000 of fleet main (host 127.0.0.1:3) did not finish its part of a multi-shard read within limits.multi_shard_part_timeout_ms (200 ms)"),
            ),
        Case::new("a part's error fails the whole read")
            .given(|rig| {
                sorted_parts(rig);
                rig.fleet.on(B, "db02049", Reply::error(1146, "Table 'db02049.pins' doesn't exist"));
            })
            .run(
                format!("SELECT local_id, title FROM pins WHERE id IN ({ids}) ORDER BY local_id"),
                error(1146, "db02049.pins"),
            ),
        Case::new("a dead host fails the read, naming its shard and host")
            .given(|rig| {
                sorted_parts(rig);
                rig.fleet.kill_host(C);
            })
            .run(
                format!("SELECT local_id, title FROM pins WHERE id IN ({ids}) ORDER BY local_id"),
                error(1105, "127.0.0.1:3"),
            )
            .then(Traffic::Silent(C)),
        Case::new("a merge over limits.max_merge_bytes is refused")
            .limits("max_merge_bytes: 600")
            .given(|rig| {
                let long = "x".repeat(300);
                let columns = [("local_id", true), ("title", false)];
                for (host, db) in [(A, "db00005"), (B, "db02049"), (C, "db04000")] {
                    rig.fleet.on(
                        host,
                        db,
                        Reply::Rows {
                            columns: columns
                                .iter()
                                .map(|(name, int)| {
                                    let kind = match int {
                                        true => crate::protocol::packets::LocalColumnType::BigInt,
                                        false => crate::protocol::packets::LocalColumnType::Text,
                                    };
                                    ((*name).to_owned(), kind)
                                })
                                .collect(),
                            rows: vec![vec![Some("1".to_owned()), Some(long.clone())]],
                        },
                    );
                }
            })
            .run(
                format!("SELECT local_id, title FROM pins WHERE id IN ({ids})"),
                error(1105, "limits.max_merge_bytes (600 bytes)"),
            ),
        Case::new("writes never fan out: an UPDATE of three shards is refused, nothing sent")
            .run(format!("UPDATE pins SET title = 'x' WHERE id IN ({ids})"), error(1105, ""))
            .then(Traffic::Silent(A))
            .then(Traffic::Silent(B))
            .then(Traffic::Silent(C)),
        Case::new("inside a bound transaction the bound shard's part runs on its connection")
            .given(sorted_parts)
            .run("BEGIN", Expect::Ok(0, 0))
            .run(
                format!(
                    "UPDATE pins SET title = 'bound' WHERE id = {}",
                    crate::id::compose(2049, 1, 2)
                ),
                Expect::Ok(0, 0),
            )
            .run(
                format!("SELECT local_id, title FROM pins WHERE id IN ({ids}) ORDER BY local_id LIMIT 3"),
                rows(&["1,a1", "2,b2", "3,c3"]),
            )
            .run("COMMIT", Expect::Ok(0, 0))
            .then(same_connection(B, "title = 'bound'", "select local_id"))
            .then(not_reached(A, "begin")),
    ]
}

#[tokio::test]
async fn multi_shard_rules_against_the_fake_fleet() {
    let count = run_table(table()).await;
    assert_eq!(count, 11);
}

#[tokio::test]
async fn a_timed_out_part_is_killed_on_its_host_by_thread() {
    let mut rig = Rig::with_limits("multi_shard_part_timeout_ms: 200");
    sorted_parts(&rig);
    rig.fleet.on(
        C,
        "from db04000",
        Reply::ints(&["local_id"], &[&[3]]).after(std::time::Duration::from_secs(30)),
    );
    let mut session = rig.session();
    let answer = session
        .run(&format!(
            "SELECT local_id, title FROM pins WHERE id IN ({}) ORDER BY local_id",
            three()
        ))
        .await;
    assert_eq!(answer.code(), Some(1969), "{answer:?}");
    let part = rig.fleet.queries_with(C, "db04000");
    assert_eq!(part.len(), 1, "{part:#?}");
    let kill = format!("KILL QUERY {}", part[0].thread);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
    while rig.fleet.queries_with(C, &kill).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{kill} never reached C: {:#?}",
            rig.fleet.queries(C)
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let killed = rig.fleet.queries_with(C, &kill);
    assert_ne!(
        killed[0].thread, part[0].thread,
        "the KILL goes on a control connection"
    );
}
