//! IN lists (and ORs of IDs) split per shard, over both hosts, in text and
//! prepared statements, on mapping and mod-shard keys.

use super::*;

#[tokio::test]
async fn in_list_of_50_ids_over_both_hosts_returns_exactly_those_rows() {
    let tag = unique_tag();
    let mut conn = client().await;
    let shards = spread_shards(50, 613, 11);
    let mut expected = BTreeSet::new();
    let mut ids = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let data = format!("{tag}:{i}");
        let id = insert_pin(&mut conn, *shard, &data).await;
        // The row is where its ID says, on that shard's master.
        let fields = decode(id);
        assert_eq!(
            row_on_host(main_master_port(*shard), "pins", *shard, fields.local_id).await,
            Some(data.clone()),
            "pin {id} on shard {shard}"
        );
        expected.insert((id, data));
        ids.push(id);
    }
    let distinct_shards: BTreeSet<u32> = shards.iter().copied().collect();
    assert!(distinct_shards.len() >= 35, "{distinct_shards:?}");

    // Shuffled order, plus IDs that exist nowhere: on a shard that has rows
    // of the list (both hosts) and on shards that have none.
    let mut list = ids.clone();
    list.reverse();
    list.rotate_left(17);
    let absent = [
        absent_pin(shards[0], 1),
        absent_pin(shards[1], 2),
        absent_pin(shards.iter().copied().find(|s| *s >= 2048).unwrap(), 3),
        absent_pin(5, 4),
        absent_pin(4095, 5),
    ];
    for with_absent in [false, true] {
        let mut query_ids = list.clone();
        if with_absent {
            query_ids.splice(10..10, absent);
        }
        let sql = format!(
            "SELECT id, data FROM pins WHERE id IN ({})",
            id_list(&query_ids)
        );
        let table = fetch(&mut conn, &sql)
            .await
            .unwrap_or_else(|e| panic!("IN list over {} shards: {e}", distinct_shards.len()));
        assert_eq!(
            table.columns,
            ["id", "data"],
            "one set of column definitions"
        );
        assert_eq!(
            table.rows.len(),
            50,
            "exactly 50 rows (absent IDs: {with_absent})"
        );
        let got: BTreeSet<(u64, String)> = table
            .rows
            .iter()
            .map(|row| {
                let id: u64 = row[0].as_deref().expect("id").parse().expect("numeric id");
                (id, row[1].clone().expect("data"))
            })
            .collect();
        assert_eq!(got.len(), 50, "no duplicate rows");
        assert_eq!(got, expected, "the rows of exactly those IDs");
        for (id, _) in &got {
            let fields = decode(*id);
            assert_eq!(fields.type_id, PIN_TYPE);
            assert!(
                shards.contains(&fields.shard),
                "id {id} decodes to a seeded shard"
            );
        }
    }

    // LIMIT without ORDER BY: any 5 of the rows, each once.
    let some: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins WHERE id IN ({}) LIMIT 5",
            id_list(&list)
        ))
        .await
        .expect("IN list with LIMIT");
    let some: BTreeSet<(u64, String)> = some.into_iter().collect();
    assert_eq!(some.len(), 5, "{some:?}");
    assert!(some.is_subset(&expected), "{some:?}");

    // Typed decoding of the same answer, and the connection stays usable.
    let typed: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins WHERE id IN ({})",
            id_list(&list)
        ))
        .await
        .expect("typed rows");
    assert_eq!(typed.into_iter().collect::<BTreeSet<_>>(), expected);
    let only_absent: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins WHERE id IN ({})",
            id_list(&absent)
        ))
        .await
        .expect("IN list of absent IDs over several shards");
    assert!(only_absent.is_empty(), "{only_absent:?}");
    let one: u64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

#[tokio::test]
async fn in_list_with_other_columns_and_conditions_keeps_its_where_clause() {
    let tag = unique_tag();
    let mut conn = client().await;
    let shards = spread_shards(20, 977, 3);
    let mut ids = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let kind = if i % 2 == 0 { "even" } else { "odd" };
        ids.push(insert_pin(&mut conn, *shard, &format!("{tag}:{kind}:{i}")).await);
    }
    // A further condition beside the IN list is kept on every shard.
    let rows: Vec<(String, u64)> = conn
        .query(format!(
            "SELECT data, id FROM pins WHERE id IN ({}) AND data LIKE '{tag}:even:%'",
            id_list(&ids)
        ))
        .await
        .expect("IN list and another condition");
    let got: BTreeSet<(String, u64)> = rows.into_iter().collect();
    let expected: BTreeSet<(String, u64)> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(i, id)| (format!("{tag}:even:{i}"), *id))
        .collect();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn prepared_in_list_of_placeholders_over_both_hosts() {
    let tag = unique_tag();
    let mut conn = client().await;
    let shards = spread_shards(50, 419, 29);
    let mut expected = BTreeSet::new();
    let mut ids = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let data = format!("{tag}:{i}");
        let id = insert_pin(&mut conn, *shard, &data).await;
        expected.insert((id, data));
        ids.push(id);
    }
    let placeholders = vec!["?"; 53].join(", ");
    let statement = conn
        .prep(format!(
            "SELECT id, data FROM pins WHERE id IN ({placeholders})"
        ))
        .await
        .expect("prepare an IN list of 53 placeholders");
    assert_eq!(statement.num_params(), 53);

    // 50 existing IDs and 3 absent ones.
    let mut bound: Vec<Value> = ids.iter().map(|id| Value::UInt(*id)).collect();
    bound.push(Value::UInt(absent_pin(shards[2], 1)));
    bound.push(Value::UInt(absent_pin(3000, 2)));
    bound.push(Value::UInt(absent_pin(7, 3)));
    let rows: Vec<(u64, String)> = conn
        .exec(&statement, Params::Positional(bound))
        .await
        .expect("execute with 53 bound IDs");
    assert_eq!(rows.len(), 50);
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), expected);

    // The same statement again with other values: the second half of the
    // IDs as strings, the rest absent; routed afresh from the bound values.
    let mut bound: Vec<Value> = ids[25..]
        .iter()
        .map(|id| Value::Bytes(id.to_string().into_bytes()))
        .collect();
    for k in 0..28 {
        bound.push(Value::UInt(absent_pin(shards[k % 25], 10 + k as u64)));
    }
    let rows: Vec<(u64, String)> = conn
        .exec(&statement, Params::Positional(bound))
        .await
        .expect("second execution");
    let second: BTreeSet<(u64, String)> = expected
        .iter()
        .filter(|(id, _)| ids[25..].contains(id))
        .cloned()
        .collect();
    assert_eq!(rows.len(), 25);
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), second);
    conn.close(statement).await.ok();
}

#[tokio::test]
async fn or_of_ids_over_both_hosts_is_split_like_an_in_list() {
    let tag = unique_tag();
    let mut conn = client().await;
    let a1 = insert_pin(&mut conn, 12, &format!("{tag}:a1")).await;
    let a2 = insert_pin(&mut conn, 1900, &format!("{tag}:a2")).await;
    let b1 = insert_pin(&mut conn, 2100, &format!("{tag}:b1")).await;
    let b2 = insert_pin(&mut conn, 4000, &format!("{tag}:b2")).await;
    let rows: Vec<(u64, String)> = conn
        .query(format!(
            "SELECT id, data FROM pins WHERE id = {a1} OR id = {b1} OR id = {a2} OR id = {b2} OR id = {}",
            absent_pin(3333, 1)
        ))
        .await
        .expect("OR of IDs over both hosts");
    let expected: BTreeSet<(u64, String)> = [
        (a1, format!("{tag}:a1")),
        (a2, format!("{tag}:a2")),
        (b1, format!("{tag}:b1")),
        (b2, format!("{tag}:b2")),
    ]
    .into_iter()
    .collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows.into_iter().collect::<BTreeSet<_>>(), expected);
}

#[tokio::test]
async fn in_list_on_a_mapping_from_column_and_on_a_mod_shard_key() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    let rows_per_board: Vec<Vec<(u64, i64)>> = (0..6)
        .map(|b| (0..3).map(|p| (100 + p, b * 10 + p as i64)).collect())
        .collect();
    let boards = seed_boards(
        &mut conn,
        &mut reference,
        &tag,
        &[40, 1500, 2047, 2048, 2900, 4090],
        &rows_per_board,
    )
    .await;
    let got: Vec<(u64, u64, i64)> = conn
        .query(format!(
            "SELECT board_id, pin_id, sequence FROM board_has_pins WHERE board_id IN ({})",
            id_list(&boards)
        ))
        .await
        .expect("IN list on board_id over both hosts");
    let expected: BTreeSet<(u64, u64, i64)> = boards
        .iter()
        .zip(&rows_per_board)
        .flat_map(|(board, rows)| rows.iter().map(move |(pin, seq)| (*board, *pin, *seq)))
        .collect();
    assert_eq!(got.len(), expected.len());
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);

    // Mod-shard keys: emails on distinct mod shards of the mod fleet.
    let emails: Vec<String> = (0..8).map(|i| format!("{tag}.{i}@example.com")).collect();
    let mod_shards: BTreeSet<u32> = emails
        .iter()
        .map(|e| mod_shard(e.as_bytes(), 4096))
        .collect();
    assert!(mod_shards.len() >= 7, "{mod_shards:?}");
    for (i, email) in emails.iter().enumerate() {
        conn.query_drop(format!(
            "INSERT INTO user_by_email (email, user_id) VALUES ('{email}', {})",
            1000 + i
        ))
        .await
        .unwrap();
    }
    let list = emails
        .iter()
        .map(|e| format!("'{e}'"))
        .chain(std::iter::once(format!("'{tag}.absent@example.com'")))
        .collect::<Vec<_>>()
        .join(", ");
    let got: Vec<(String, u64)> = conn
        .query(format!(
            "SELECT email, user_id FROM user_by_email WHERE email IN ({list})"
        ))
        .await
        .expect("IN list on a mod-shard key");
    let expected: BTreeSet<(String, u64)> = emails
        .iter()
        .enumerate()
        .map(|(i, e)| (e.clone(), 1000 + i as u64))
        .collect();
    assert_eq!(got.len(), 8);
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);
}

/// Inside a bound transaction, an IN list over the bound shard and another
/// one reads the bound shard on the transaction's connection (F10): it sees
/// the transaction's own uncommitted insert, as one server would, and the
/// ROLLBACK still removes it.
#[tokio::test]
async fn in_list_inside_a_transaction_sees_its_own_writes_on_the_bound_shard() {
    let tag = unique_tag();
    let mut conn = client().await;
    let committed = insert_pin(&mut conn, 3000, &format!("{tag}:committed")).await;
    conn.query_drop("BEGIN").await.expect("BEGIN");
    let mine = insert_pin(&mut conn, 5, &format!("{tag}:uncommitted")).await;
    let list = id_list(&[mine, committed]);
    let rows = fetch(
        &mut conn,
        &format!("SELECT id, data FROM pins WHERE id IN ({list}) ORDER BY id"),
    )
    .await
    .expect("IN list in the transaction");
    assert_eq!(
        rows.rows,
        vec![
            vec![Some(mine.to_string()), Some(format!("{tag}:uncommitted"))],
            vec![
                Some(committed.to_string()),
                Some(format!("{tag}:committed"))
            ],
        ],
        "the IN list sees the transaction's own row on the bound shard"
    );
    let count: Option<u64> = conn
        .query_first(format!("SELECT count(*) FROM pins WHERE id IN ({list})"))
        .await
        .expect("count in the transaction");
    assert_eq!(count, Some(2), "a count agrees with the point read");
    // The bound connection is still the transaction's: a point read too.
    let point: Option<String> = conn
        .query_first(format!("SELECT data FROM pins WHERE id = {mine}"))
        .await
        .expect("point read");
    assert_eq!(point, Some(format!("{tag}:uncommitted")));
    assert_eq!(
        pin_on_host(mine).await,
        None,
        "uncommitted: not visible outside"
    );
    conn.query_drop("ROLLBACK").await.expect("ROLLBACK");
    assert_eq!(pin_on_host(mine).await, None, "rolled back on the server");
    assert_eq!(
        pin_on_host(committed).await,
        Some(format!("{tag}:committed"))
    );
    delete_pins(MASTER_B, &[3000], &tag).await;
}
