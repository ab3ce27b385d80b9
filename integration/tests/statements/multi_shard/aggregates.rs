//! Aggregates merged across shards exactly like one server, and refusals
//! of the ones that cannot be merged exactly.

use super::*;

/// Boards on both hosts with mapping rows; pin ids repeat across boards so
/// groups by pin_id span shards. The last two boards have no rows.
async fn seed_aggregate_boards(conn: &mut Conn, reference: &mut Conn, tag: &str) -> Vec<u64> {
    let shards = [9u32, 1111, 2047, 2048, 2600, 4094, 500, 3900];
    let rows: Vec<Vec<(u64, i64)>> = (0..shards.len())
        .map(|b| {
            if b >= 6 {
                return Vec::new();
            }
            (0..(3 + b as u64 * 2))
                .map(|p| {
                    (
                        7000 + (p * 3 + b as u64) % 9,
                        (p as i64 * 37 + b as i64 * 101) % 250 - 60,
                    )
                })
                // One row per (board, pin): a BTreeMap keeps the last.
                .collect::<std::collections::BTreeMap<u64, i64>>()
                .into_iter()
                .collect()
        })
        .collect();
    seed_boards(conn, reference, tag, &shards, &rows).await
}

#[tokio::test]
async fn aggregates_merge_exactly_like_one_server() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let boards = seed_aggregate_boards(&mut conn, &mut reference, &tag).await;
    let all = id_list(&boards);
    let with_rows = id_list(&boards[..6]);
    let empty = id_list(&boards[6..]);
    let from = "FROM board_has_pins WHERE board_id IN";

    for sql in [
        format!("SELECT COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all})"),
        format!("SELECT COUNT(*) {from} ({all})"),
        format!("SELECT COUNT(sequence), MAX(pin_id), MIN(board_id) {from} ({with_rows})"),
        format!("SELECT MIN(sequence), MAX(sequence) {from} ({all}) AND sequence > 0"),
        format!(
            "SELECT board_id, COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all}) GROUP BY board_id ORDER BY board_id"
        ),
        format!(
            "SELECT board_id, COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all}) GROUP BY board_id ORDER BY board_id DESC LIMIT 3 OFFSET 1"
        ),
        // Groups that span shards: the same pin on boards on several shards.
        format!(
            "SELECT pin_id, COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all}) GROUP BY pin_id ORDER BY pin_id"
        ),
        format!(
            "SELECT pin_id, COUNT(*) AS n, SUM(sequence) AS total {from} ({all}) GROUP BY pin_id ORDER BY pin_id DESC LIMIT 4"
        ),
        // Ordered by merged aggregates: only right after the groups are merged.
        format!(
            "SELECT pin_id, COUNT(*) AS n, MAX(sequence) {from} ({all}) GROUP BY pin_id ORDER BY n DESC, pin_id LIMIT 3"
        ),
        format!(
            "SELECT pin_id, SUM(sequence) AS total {from} ({all}) GROUP BY pin_id ORDER BY 2, 1 LIMIT 2 OFFSET 1"
        ),
        // Every shard empty: COUNT 0, the others NULL.
        format!("SELECT COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({empty})"),
        format!("SELECT board_id, COUNT(*) {from} ({empty}) GROUP BY board_id ORDER BY board_id"),
    ] {
        assert_same_as_reference(&mut conn, &mut reference, &sql).await;
    }

    // GROUP BY without ORDER BY: SQL leaves the order open; same groups.
    let sql = format!(
        "SELECT pin_id, COUNT(*), SUM(sequence), MIN(sequence), MAX(sequence) {from} ({all}) GROUP BY pin_id"
    );
    let got = fetch(&mut conn, &sql)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    let expected = fetch(&mut reference, &reference_sql(&sql)).await.unwrap();
    assert_eq!(got.columns, expected.columns);
    assert_eq!(got.sorted_rows(), expected.sorted_rows(), "{sql}");
    assert!(expected.rows.len() > 3);
}

#[tokio::test]
async fn scatter_aggregates_equal_the_reference() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let shards = [4u32, 4, 900, 2047, 2048, 3333, 4095, 4095];
    let datas: Vec<String> = ["k", "c", "x", "a", "m", "b", "z", "q"]
        .iter()
        .map(|w| format!("{tag}:{w}"))
        .collect();
    seed_pins(&mut conn, &mut reference, &shards, &datas).await;
    for sql in [
        format!("SELECT COUNT(*), MIN(data), MAX(data), MIN(id), MAX(id) FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'"),
        format!("SELECT COUNT(*), MIN(id) FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}:none%'"),
    ] {
        assert_same_as_reference(&mut conn, &mut reference, &sql).await;
    }
}

#[tokio::test]
async fn aggregates_that_cannot_be_merged_exactly_are_refused() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let boards = seed_aggregate_boards(&mut conn, &mut reference, &tag).await;
    let all = id_list(&boards);
    let from = "FROM board_has_pins WHERE board_id IN";
    let count_sql = format!("SELECT COUNT(*) {from} ({all})");
    let expected_count = fetch(&mut reference, &reference_sql(&count_sql))
        .await
        .unwrap();

    let refused: [(String, &[&str]); 6] = [
        (format!("SELECT AVG(sequence) {from} ({all})"), &["avg"]),
        (
            format!("SELECT pin_id, AVG(sequence) {from} ({all}) GROUP BY pin_id ORDER BY pin_id"),
            &["avg"],
        ),
        (
            format!("SELECT COUNT(DISTINCT pin_id) {from} ({all})"),
            &["distinct"],
        ),
        (
            format!("SELECT SUM(DISTINCT sequence) {from} ({all})"),
            &["distinct"],
        ),
        // An aggregate mixed with a column that is neither grouped nor aggregated.
        (
            format!("SELECT pin_id, COUNT(*) {from} ({all})"),
            &["pin_id"],
        ),
        (
            format!("SELECT board_id, pin_id, MAX(sequence) {from} ({all}) GROUP BY board_id"),
            &["pin_id"],
        ),
    ];
    for (sql, names) in &refused {
        assert_refused(fetch(&mut conn, sql).await, sql, names);
        // The connection stays usable, with the right answer.
        let after = fetch(&mut conn, &count_sql)
            .await
            .unwrap_or_else(|e| panic!("after a refusal: {e}"));
        assert_eq!(after, expected_count);
    }

    // Where an exact answer is possible but not required, an exact answer
    // or a refusal naming the construct; never a wrong answer. HAVING over
    // groups that span shards; AVG per group of the shard key (each group
    // lies on one shard).
    for (sql, name) in [
        (
            format!("SELECT pin_id, COUNT(*) {from} ({all}) GROUP BY pin_id HAVING COUNT(*) > 1 ORDER BY pin_id"),
            "having",
        ),
        (
            format!("SELECT board_id, AVG(sequence) {from} ({all}) GROUP BY board_id ORDER BY board_id"),
            "avg",
        ),
    ] {
        match fetch(&mut conn, &sql).await {
            Ok(got) => {
                let expected = fetch(&mut reference, &reference_sql(&sql)).await.unwrap();
                assert_eq!(got, expected, "{sql}");
                assert!(!expected.rows.is_empty());
            }
            Err(error) => assert_refused(Err(error), &sql, &[name]),
        }
    }

    // On one shard the server computes them itself: AVG of one board works.
    let sql = format!(
        "SELECT AVG(sequence), COUNT(DISTINCT pin_id) FROM board_has_pins WHERE board_id = {}",
        boards[3]
    );
    assert_same_as_reference(&mut conn, &mut reference, &sql).await;
}
