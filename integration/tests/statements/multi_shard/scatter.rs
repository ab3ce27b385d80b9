//! Explicit `/*+ SCATTER */` fan-out, and writes and locking reads that
//! never fan out.

use super::*;

#[tokio::test]
async fn scatter_runs_on_every_shard_only_when_asked() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let shards = [0u32, 17, 1023, 2047, 2048, 2049, 3071, 4095, 17, 4095];
    let datas: Vec<String> = (0..shards.len())
        .map(|i| format!("{tag}:{:02}", (i * 7) % 10))
        .collect();
    let ids = seed_pins(&mut conn, &mut reference, &shards, &datas).await;

    // What the masters hold for this tag, counted straight on each shard.
    let mut direct_total = 0u64;
    let distinct: BTreeSet<u32> = shards.iter().copied().collect();
    for shard in &distinct {
        let mut master = direct(main_master_port(*shard)).await;
        let n: u64 = master
            .query_first(format!(
                "SELECT COUNT(*) FROM db{shard:05}.pins WHERE data LIKE '{tag}%'"
            ))
            .await
            .unwrap()
            .unwrap();
        master.disconnect().await.ok();
        direct_total += n;
    }
    assert_eq!(direct_total, ids.len() as u64);

    let sql = format!("SELECT COUNT(*) FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'");
    let count: Option<u64> = conn
        .query_first(&sql)
        .await
        .unwrap_or_else(|e| panic!("scatter count: {e}"));
    assert_eq!(count, Some(direct_total), "{sql}");

    // Rows, merged in order, equal the reference.
    for tail in ["ORDER BY id", "ORDER BY data DESC, id LIMIT 4 OFFSET 2"] {
        let sql =
            format!("SELECT id, data FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%' {tail}");
        let table = assert_same_as_reference(&mut conn, &mut reference, &sql).await;
        assert!(!table.rows.is_empty());
    }
    // Unordered scatter rows: the same set.
    let rows: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'"
        ))
        .await
        .expect("scatter rows");
    let expected: BTreeSet<(u64, String)> =
        ids.iter().copied().zip(datas.iter().cloned()).collect();
    assert_eq!(rows.len(), ids.len());
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), expected);

    // Without the hint, the same statements are refused: no shard key.
    for sql in [
        format!("SELECT COUNT(*) FROM pins WHERE data LIKE '{tag}%'"),
        format!("SELECT id, data FROM pins WHERE data LIKE '{tag}%' ORDER BY id"),
    ] {
        let error = conn
            .query_drop(&sql)
            .await
            .expect_err("no key, no hint: refused");
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{message}");
        assert!(
            message.contains("no shard key for table 'pins'"),
            "{message}"
        );
    }
    // The connection is still usable.
    let again: Option<u64> = conn.query_first(&sql).await.unwrap();
    assert_eq!(again, Some(direct_total));
}

#[tokio::test]
async fn writes_and_locking_reads_never_fan_out() {
    let tag = unique_tag();
    let mut conn = client().await;
    let id = insert_pin(&mut conn, 2222, &format!("{tag}:keep")).await;
    let other = insert_pin(&mut conn, 33, &format!("{tag}:keep too")).await;
    let board_a = insert_board(&mut conn, 100, &tag).await;
    let board_b = insert_board(&mut conn, 3000, &tag).await;
    for sql in [
        format!("UPDATE pins /*+ SCATTER */ SET data = 'x' WHERE data LIKE '{tag}%'"),
        format!("DELETE FROM pins /*+ SCATTER */ WHERE data LIKE '{tag}%'"),
        format!("UPDATE pins SET data = 'x' WHERE id IN ({id}, {other})"),
        format!("DELETE FROM pins WHERE id IN ({id}, {other})"),
        format!("SELECT id, data FROM pins WHERE id IN ({id}, {other}) FOR UPDATE"),
        // A multi-row INSERT into a mapping table whose rows belong to two
        // shards (docs/reference/refused.md: refused, in and out of transactions).
        format!(
            "INSERT INTO board_has_pins (board_id, pin_id, sequence) VALUES ({board_a}, 1, 1), ({board_b}, 1, 1)"
        ),
    ] {
        let error = conn
            .query_drop(&sql)
            .await
            .expect_err("a scattered write is refused");
        let (code, message) = server_error(error);
        assert_eq!(code, 1105, "{message}");
        assert!(message.starts_with("shardgate:"), "{message}");
    }
    let fields = decode(id);
    assert_eq!(
        row_on_host(MASTER_B, "pins", 2222, fields.local_id).await,
        Some(format!("{tag}:keep")),
        "the row is untouched"
    );
    assert_eq!(
        row_on_host(MASTER_A, "pins", 33, decode(other).local_id).await,
        Some(format!("{tag}:keep too")),
        "the row is untouched"
    );
    // Neither shard got a mapping row.
    for (board, shard) in [(board_a, 100u32), (board_b, 3000)] {
        let mut master = direct(main_master_port(shard)).await;
        let n: u64 = master
            .query_first(format!(
                "SELECT COUNT(*) FROM db{shard:05}.board_has_pins WHERE board_id = {board}"
            ))
            .await
            .unwrap()
            .unwrap();
        master.disconnect().await.ok();
        assert_eq!(n, 0, "board {board} on shard {shard}");
    }
}
