use std::time::Duration;

use mysql_async::Value;

use super::plan::*;

fn shape(key: &[&str], columns: &[&str]) -> TableShape {
    TableShape {
        database: "db00007".to_owned(),
        table: "pins".to_owned(),
        key: key.iter().map(|s| s.to_string()).collect(),
        columns: columns.iter().map(|s| s.to_string()).collect(),
    }
}

fn rows(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, h)| (k.to_string(), h.to_string()))
        .collect()
}

#[test]
fn single_key_chunk_sql_binds_bounds_in_order() {
    let t = shape(&["local_id"], &["local_id", "data"]);
    let range = ChunkBounds {
        lo: Some(vec![Value::UInt(10)]),
        hi: Some(vec![Value::UInt(1010)]),
    };
    assert_eq!(t.range_filter(&range), "`local_id` > ? AND `local_id` <= ?");
    assert_eq!(range.params(), vec![Value::UInt(10), Value::UInt(1010)]);
    assert_eq!(t.range_filter(&ChunkBounds::default()), "1");
    let open_top = ChunkBounds {
        lo: Some(vec![Value::UInt(10)]),
        hi: None,
    };
    assert_eq!(t.range_filter(&open_top), "`local_id` > ?");
    assert_eq!(
        t.boundary_sql(&range, 1000),
        "SELECT `local_id` FROM `db00007`.`pins` WHERE `local_id` > ? AND `local_id` <= ? \
         ORDER BY `local_id` LIMIT 1 OFFSET 999"
    );
    assert_eq!(
        t.last_key_sql(),
        "SELECT `local_id` FROM `db00007`.`pins` ORDER BY `local_id` DESC LIMIT 1"
    );
    assert_eq!(range.to_string(), "(10, 1010]");
    assert_eq!(ChunkBounds::default().to_string(), "(-inf, +inf)");
}

#[test]
fn composite_key_uses_row_constructors() {
    let t = shape(&["board_id", "pin_id"], &["board_id", "pin_id", "ts"]);
    let range = ChunkBounds {
        lo: Some(vec![Value::Int(1), Value::Int(2)]),
        hi: Some(vec![Value::Int(3), Value::Int(4)]),
    };
    assert_eq!(
        t.range_filter(&range),
        "(`board_id`, `pin_id`) > (?, ?) AND (`board_id`, `pin_id`) <= (?, ?)"
    );
    assert_eq!(range.params().len(), 4);
    assert!(t
        .rows_sql(&range)
        .ends_with("ORDER BY `board_id`, `pin_id`"));
    assert_eq!(
        format_key(&[Value::Int(3), Value::Bytes(b"a'b".to_vec())]),
        "(3, 'a''b')"
    );
}

#[test]
fn row_hash_is_null_safe_and_covers_every_column() {
    let t = shape(&["id"], &["id", "a", "weird`name"]);
    let hash = t.row_hash();
    assert_eq!(
        hash,
        "MD5(CONCAT_WS('#', COALESCE(MD5(`id`), '-'), COALESCE(MD5(`a`), '-'), COALESCE(MD5(`weird``name`), '-')))"
    );
    let checksum = t.checksum_sql(&ChunkBounds::default());
    assert!(checksum.starts_with("SELECT COUNT(*), COALESCE(BIT_XOR("));
    assert!(checksum.contains(&hash));
}

#[test]
fn diff_names_missing_extra_and_changed_keys() {
    let source = rows(&[("1", "a"), ("2", "b"), ("3", "c"), ("5", "e")]);
    let target = rows(&[("1", "a"), ("3", "X"), ("4", "d"), ("5", "e")]);
    let diff = diff_rows(&source, &target);
    assert_eq!(diff.missing_on_target, vec!["2"]);
    assert_eq!(diff.extra_on_target, vec!["4"]);
    assert_eq!(diff.changed, vec!["3"]);
    assert_eq!(diff.len(), 3);
    assert_eq!(
        diff.to_string(),
        "1 missing on target: 2; 1 extra on target: 4; 1 changed: 3"
    );
    assert!(diff_rows(&source, &source).is_empty());
    assert!(diff_rows(&[], &[]).is_empty());
}

#[test]
fn long_key_lists_are_bounded() {
    let source: Vec<(String, String)> = (0..50).map(|i| (i.to_string(), "h".to_owned())).collect();
    let diff = diff_rows(&source, &[]);
    assert_eq!(diff.missing_on_target.len(), 50);
    let text = diff.to_string();
    assert!(text.starts_with("50 missing on target: 0 1 2"), "{text}");
    assert!(text.ends_with("19 ... and 30 more"), "{text}");
}

#[test]
fn pace_holds_the_rate() {
    assert_eq!(pace(1000, Duration::from_millis(100), 0), Duration::ZERO);
    assert_eq!(
        pace(1000, Duration::from_millis(100), 1000),
        Duration::from_millis(900)
    );
    assert_eq!(pace(1000, Duration::from_secs(2), 1000), Duration::ZERO);
}

#[test]
fn snapshot_coordinates_come_from_the_status_rows() {
    let status = vec![
        (
            "Binlog_snapshot_file".to_owned(),
            "mariadb-bin.000009".to_owned(),
        ),
        ("Binlog_snapshot_position".to_owned(), "389".to_owned()),
    ];
    assert_eq!(
        snapshot_coordinates(&status),
        Some(("mariadb-bin.000009".to_owned(), 389))
    );
    let off = vec![
        ("Binlog_snapshot_file".to_owned(), String::new()),
        ("Binlog_snapshot_position".to_owned(), "0".to_owned()),
    ];
    assert_eq!(snapshot_coordinates(&off), None);
}

fn example_topology() -> crate::topology::Topology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/shardgate.yaml");
    crate::topology::Topology::load(&path).expect("the example config loads")
}

fn scope_error(first: u32, last: u32, fleet: Option<&str>, against: &str) -> String {
    let mut request = super::RowVerifyRequest::new(first, last, against);
    request.fleet = fleet.map(str::to_owned);
    match super::scope(&example_topology(), &request) {
        Ok(_) => "ok".to_owned(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn scope_takes_one_masters_range_of_one_fleet() {
    let request = super::RowVerifyRequest {
        fleet: Some("main".to_owned()),
        ..super::RowVerifyRequest::new(1024, 2047, "127.0.0.1:3309")
    };
    let scope = super::scope(&example_topology(), &request).expect("in range");
    assert_eq!(scope.source, "127.0.0.1:3307");
    assert!(scope_error(1024, 2047, None, "127.0.0.1:3309").contains("several fleets"));
    assert!(scope_error(2000, 2100, Some("main"), "127.0.0.1:3309")
        .contains("several masters (127.0.0.1:3307, 127.0.0.1:3308)"));
    assert!(scope_error(0, 5000, Some("main"), "127.0.0.1:3309").contains("not 5000"));
    assert!(scope_error(0, 1, Some("nope"), "127.0.0.1:3309").contains("no fleet named 'nope'"));
    assert!(scope_error(0, 1, Some("main"), "127.0.0.1:3307").contains("is the shards' master"));
    assert!(scope_error(5, 1, Some("main"), "127.0.0.1:3309").contains("backwards"));
}
