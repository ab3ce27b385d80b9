//! Ordered merges across shards with LIMIT/OFFSET, compared with the
//! reference server (numbers as numbers, text by the column collation).

use super::*;

#[tokio::test]
async fn order_by_limit_offset_equals_the_reference_server() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    // Shards whose IDs have different digit counts (0: 11 digits, 1: 14,
    // 5: 15, 100: 16, 3000/4095: 18), so a text comparison of IDs would order
    // them differently from the numbers; several rows per shard; repeated
    // data values so ties are broken by id across shards.
    let base = [0u32, 1, 5, 100, 1024, 2047, 2048, 3000, 4095];
    let words = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"];
    let mut shards = Vec::new();
    let mut datas = Vec::new();
    for i in 0..36 {
        shards.push(base[i % base.len()]);
        datas.push(format!("{tag}:{}", words[(i * 5) % words.len()]));
    }
    let ids = seed_pins(&mut conn, &mut reference, &shards, &datas).await;
    let mut list = ids.clone();
    list.push(absent_pin(2500, 1));
    list.push(absent_pin(1, 2));
    let list = id_list(&list);

    for tail in [
        "ORDER BY data DESC, id LIMIT 7 OFFSET 5",
        "ORDER BY data, id DESC LIMIT 7 OFFSET 5",
        "ORDER BY id LIMIT 10",
        "ORDER BY id DESC LIMIT 4 OFFSET 20",
        "ORDER BY data, id",
        "ORDER BY id LIMIT 5, 7",
        "ORDER BY data DESC, id LIMIT 100 OFFSET 30",
        "ORDER BY id LIMIT 5 OFFSET 1000",
        "ORDER BY id DESC LIMIT 1",
        // Fewer rows than a shard holds: each part is cut at offset + limit.
        "ORDER BY data DESC, id LIMIT 2 OFFSET 1",
        "ORDER BY id LIMIT 3",
    ] {
        let sql = format!("SELECT id, data FROM pins WHERE id IN ({list}) {tail}");
        let table = assert_same_as_reference(&mut conn, &mut reference, &sql).await;
        if !tail.contains("1000") {
            assert!(!table.rows.is_empty(), "{sql}");
        }
    }
    // ORDER BY a column that is not selected, and a select list in another
    // order than the sort keys.
    for sql in [
        format!("SELECT data FROM pins WHERE id IN ({list}) ORDER BY id DESC LIMIT 6 OFFSET 2"),
        format!("SELECT data, id FROM pins WHERE id IN ({list}) ORDER BY id LIMIT 8"),
    ] {
        assert_same_as_reference(&mut conn, &mut reference, &sql).await;
    }
}

#[tokio::test]
async fn order_by_numbers_compares_them_as_numbers() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    // Sequences whose text order differs from their numeric order
    // (2 < 10 < 100, negatives), spread over boards on both hosts, with
    // equal sequences on different shards.
    let sequences: [&[i64]; 6] = [
        &[2, 10, 100, -5],
        &[9, 95, 1000, 0],
        &[10, 11, 1_000_000, -40],
        &[3, 30, 300, 2],
        &[7, 70, 700_000, -100],
        &[1, 19, 199, 100],
    ];
    let rows: Vec<Vec<(u64, i64)>> = sequences
        .iter()
        .enumerate()
        .map(|(b, seqs)| {
            seqs.iter()
                .enumerate()
                .map(|(p, s)| (1000 + (b * 7 + p * 3) as u64 % 11, *s))
                .collect()
        })
        .collect();
    let boards = seed_boards(
        &mut conn,
        &mut reference,
        &tag,
        &[2, 600, 2000, 2050, 3500, 4095],
        &rows,
    )
    .await;
    let list = id_list(&boards);
    for tail in [
        // Every order is total (the same (sequence, pin_id) occurs on two
        // boards), so one right answer exists.
        "ORDER BY sequence DESC, pin_id, board_id LIMIT 7 OFFSET 3",
        "ORDER BY sequence DESC, pin_id, board_id LIMIT 2 OFFSET 1",
        "ORDER BY sequence, board_id, pin_id LIMIT 10",
        "ORDER BY sequence, board_id, pin_id",
        "ORDER BY board_id DESC, sequence LIMIT 9 OFFSET 2",
        "ORDER BY pin_id, sequence DESC, board_id LIMIT 12",
    ] {
        let sql = format!(
            "SELECT board_id, pin_id, sequence FROM board_has_pins WHERE board_id IN ({list}) {tail}"
        );
        let table = assert_same_as_reference(&mut conn, &mut reference, &sql).await;
        assert!(!table.rows.is_empty(), "{sql}");
    }
}

#[tokio::test]
async fn order_by_text_follows_the_column_collation() {
    let tag = unique_tag();
    let mut conn = client().await;
    let mut reference = reference().await;
    // utf8mb4 (the shard tables' charset) sorts case-insensitively:
    // 'Apple' < 'banana' < 'Cherry'; raw bytes would put 'Cherry' before
    // 'banana'. 'apple'/'APPLE' are equal and fall back to id.
    let words = [
        "Apple", "banana", "Cherry", "apple", "APPLE", "date", "Elder", "fig", "Zebra", "yak",
        "Ábaco", "abc",
    ];
    let base = [3u32, 700, 1800, 2200, 3100, 4000];
    let shards: Vec<u32> = (0..words.len()).map(|i| base[i % base.len()]).collect();
    let datas: Vec<String> = words.iter().map(|w| format!("{tag}:{w}")).collect();
    let ids = seed_pins(&mut conn, &mut reference, &shards, &datas).await;
    let list = id_list(&ids);
    for tail in [
        "ORDER BY data, id",
        "ORDER BY data DESC, id LIMIT 5 OFFSET 1",
        "ORDER BY data, id LIMIT 4",
    ] {
        let sql = format!("SELECT id, data FROM pins WHERE id IN ({list}) {tail}");
        assert_same_as_reference(&mut conn, &mut reference, &sql).await;
    }
}

/// Text merged across shards in the collation the server sorts by (F20):
/// binary and general_ci orders as one server gives them; a collation the
/// merge does not implement (Swedish, latin1's default latin1_swedish_ci)
/// is refused, for ORDER BY and for MIN / MAX, rather than answered in the
/// wrong order.
#[tokio::test]
async fn text_merges_follow_the_collation_or_are_refused() {
    let tag = unique_tag();
    let mut conn = client().await;
    conn.query_drop("SET NAMES utf8mb4").await.unwrap();
    let mut server = operations(MOD_HOST).await;
    server.query_drop("SET NAMES utf8mb4").await.unwrap();
    let words = ["ä", "b", "ß", "ss", "z", "B "];
    let emails: Vec<String> = words.iter().map(|w| format!("{tag}-{w}@x.com")).collect();
    for email in &emails {
        conn.query_drop(format!(
            "INSERT INTO user_by_email (email, user_id) VALUES ('{email}', 1)"
        ))
        .await
        .unwrap_or_else(|e| panic!("insert {email}: {e}"));
    }
    let list = emails
        .iter()
        .map(|e| format!("'{e}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let shards: BTreeSet<u32> = emails
        .iter()
        .map(|e| mod_shard(e.as_bytes(), 4096))
        .collect();
    assert!(shards.len() > 2, "the rows spread over shards: {shards:?}");
    // The same rows on one server, for the order it gives.
    let values = emails
        .iter()
        .map(|e| format!("SELECT _utf8mb4'{e}' COLLATE utf8mb4_general_ci AS email"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    for key in [
        "email",
        "email COLLATE utf8mb4_general_ci",
        "email COLLATE utf8mb4_bin",
        "CAST(email AS BINARY)",
    ] {
        for tail in ["ORDER BY k", "ORDER BY k DESC LIMIT 2"] {
            let proxy = fetch(
                &mut conn,
                &format!("SELECT {key} AS k FROM user_by_email WHERE email IN ({list}) {tail}"),
            )
            .await
            .unwrap_or_else(|e| panic!("{key} {tail}: {e}"));
            let one = fetch(
                &mut server,
                &format!("SELECT {key} AS k FROM ({values}) t {tail}"),
            )
            .await
            .unwrap();
            // No two keys are equal in these collations: one order.
            assert_eq!(proxy.rows, one.rows, "{key} {tail}");
        }
    }
    for key in [
        "email COLLATE utf8mb4_swedish_ci",
        "CONVERT(email USING latin1)",
    ] {
        for sql in [
            format!(
                "SELECT {key} AS k FROM user_by_email WHERE email IN ({list}) ORDER BY k LIMIT 1"
            ),
            format!("SELECT max({key}) AS k FROM user_by_email WHERE email IN ({list})"),
            format!("SELECT min({key}) AS k FROM user_by_email WHERE email IN ({list})"),
        ] {
            let (code, message) = server_error(fetch(&mut conn, &sql).await.expect_err(&sql));
            assert_eq!(code, 1105, "{sql}: {message}");
            assert!(message.contains("collation"), "{sql}: {message}");
        }
    }
    // general_ci over characters whose server weights shardgate does not
    // know (Cyrillic): refused; the same rows by utf8mb4_bin: merged.
    let cyrillic: Vec<String> = ["Йога", "Иван", "ёж"]
        .iter()
        .map(|w| format!("{tag}-{w}@x.com"))
        .collect();
    for email in &cyrillic {
        conn.query_drop(format!(
            "INSERT INTO user_by_email (email, user_id) VALUES ('{email}', 1)"
        ))
        .await
        .unwrap();
    }
    let all = emails
        .iter()
        .chain(&cyrillic)
        .map(|e| format!("'{e}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!("SELECT email FROM user_by_email WHERE email IN ({all}) ORDER BY email");
    let (code, message) = server_error(fetch(&mut conn, &sql).await.expect_err(&sql));
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("general_ci"), "{message}");
    let sql = format!(
        "SELECT email COLLATE utf8mb4_bin AS k FROM user_by_email WHERE email IN ({all}) ORDER BY k"
    );
    let merged = fetch(&mut conn, &sql).await.expect("utf8mb4_bin merge");
    let mut expected: Vec<String> = emails.iter().chain(&cyrillic).cloned().collect();
    expected.sort_by(|a, b| a.trim_end().cmp(b.trim_end()));
    let got: Vec<String> = merged.rows.iter().map(|r| r[0].clone().unwrap()).collect();
    assert_eq!(got, expected);
    for email in emails.iter().chain(&cyrillic) {
        conn.query_drop(format!("DELETE FROM user_by_email WHERE email = '{email}'"))
            .await
            .unwrap();
    }
}
