//! Unit tests of the multi-shard merge.

use std::cmp::Ordering;

use mysql_common::constants::{ColumnFlags, ColumnType};

use super::decimal::{add_numbers, compare_decimal_text};
use super::order::compare_values;
use super::*;
use crate::protocol::binary::ColumnInfo;
use crate::router::{Aggregation, Merge, MergeColumn, SortKey};

fn int_column() -> ColumnInfo {
    ColumnInfo::new(ColumnType::MYSQL_TYPE_LONGLONG, ColumnFlags::empty())
}

fn text_column() -> ColumnInfo {
    let mut column = ColumnInfo::new(ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty());
    column.charset = 45;
    column
}

fn v(text: &str) -> Value {
    Some(text.as_bytes().to_vec())
}

fn part(rows: Vec<Vec<Value>>) -> PartRows {
    rows
}

#[test]
fn numbers_compare_as_numbers_not_bytes() {
    let column = int_column();
    assert_eq!(
        compare_values(&v("10"), &v("9"), &column, RowFormat::Text),
        Ordering::Greater
    );
    assert_eq!(
        compare_values(&v("-10"), &v("-9"), &column, RowFormat::Text),
        Ordering::Less
    );
    assert_eq!(
        compare_values(&None, &v("-9"), &column, RowFormat::Text),
        Ordering::Less
    );
    let decimal = ColumnInfo::new(ColumnType::MYSQL_TYPE_NEWDECIMAL, ColumnFlags::empty());
    assert_eq!(
        compare_values(&v("2.50"), &v("2.5"), &decimal, RowFormat::Text),
        Ordering::Equal
    );
    assert_eq!(
        compare_values(&v("-0.00"), &v("0"), &decimal, RowFormat::Text),
        Ordering::Equal
    );
    assert_eq!(
        compare_values(&v("100.1"), &v("99.99"), &decimal, RowFormat::Text),
        Ordering::Greater
    );
}

#[test]
fn text_compares_case_insensitively() {
    let column = text_column();
    assert_eq!(
        compare_values(&v("apple"), &v("Banana"), &column, RowFormat::Text),
        Ordering::Less
    );
}

#[test]
fn k_way_merge_with_offset_and_limit() {
    let columns = vec![int_column()];
    let parts = vec![
        part(vec![vec![v("1")], vec![v("10")], vec![v("100")]]),
        part(vec![vec![v("2")], vec![v("20")]]),
        part(vec![]),
    ];
    let merge = Merge {
        order_by: vec![SortKey {
            column: 0,
            descending: false,
        }],
        offset: 1,
        limit: Some(3),
        ..Merge::default()
    };
    let rows = merge_rows(parts, &columns, &merge, RowFormat::Text);
    assert_eq!(rows, vec![vec![v("2")], vec![v("10")], vec![v("20")]]);
}

#[test]
fn descending_merge() {
    let columns = vec![int_column()];
    let parts = vec![
        part(vec![vec![v("100")], vec![v("1")]]),
        part(vec![vec![v("20")], vec![v("2")]]),
    ];
    let merge = Merge {
        order_by: vec![SortKey {
            column: 0,
            descending: true,
        }],
        ..Merge::default()
    };
    let rows = merge_rows(parts, &columns, &merge, RowFormat::Text);
    let flat: Vec<_> = rows.into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(flat, vec![v("100"), v("20"), v("2"), v("1")]);
}

#[test]
fn aggregates_merge_by_group() {
    let columns = vec![
        int_column(),
        int_column(),
        int_column(),
        int_column(),
        int_column(),
    ];
    let rules = vec![
        MergeColumn::GroupKey,
        MergeColumn::Count,
        MergeColumn::Sum,
        MergeColumn::Min,
        MergeColumn::Max,
    ];
    let parts = vec![
        part(vec![
            vec![v("1"), v("2"), v("30"), v("10"), v("20")],
            vec![v("2"), v("1"), v("5"), v("5"), v("5")],
        ]),
        part(vec![vec![v("1"), v("3"), v("9"), v("2"), v("4")]]),
    ];
    let merge = Merge {
        aggregation: Some(Aggregation { columns: rules }),
        order_by: vec![SortKey {
            column: 0,
            descending: false,
        }],
        ..Merge::default()
    };
    let rows = merge_rows(parts, &columns, &merge, RowFormat::Text);
    assert_eq!(
        rows,
        vec![
            vec![v("1"), v("5"), v("39"), v("2"), v("20")],
            vec![v("2"), v("1"), v("5"), v("5"), v("5")],
        ]
    );
}

#[test]
fn sums_are_exact_for_decimals_and_null_aware() {
    assert_eq!(add_numbers(b"1.25", b"2.5"), b"3.75".to_vec());
    assert_eq!(add_numbers(b"-1.25", b"1"), b"-0.25".to_vec());
    assert_eq!(
        add_numbers(b"99999999999999999999", b"1"),
        b"100000000000000000000".to_vec()
    );
    assert_eq!(
        combine(MergeColumn::Sum, &None, &v("4"), None, RowFormat::Text),
        v("4"),
        "NULL parts are ignored"
    );
    assert_eq!(
        combine(MergeColumn::Sum, &None, &None, None, RowFormat::Text),
        None
    );
}

#[test]
fn text_rows_decode() {
    let mut row = Vec::new();
    crate::protocol::frame::write_lenenc_bytes(&mut row, b"abc");
    row.push(TEXT_NULL);
    crate::protocol::frame::write_lenenc_bytes(&mut row, b"");
    assert_eq!(decode_text_row(&row, 3), vec![v("abc"), None, v("")]);
}

#[test]
fn decimal_text_compares_exactly() {
    let cases: [(&[u8], &[u8], Ordering); 10] = [
        (b"1", b"1.000", Ordering::Equal),
        (b"007.5", b"7.50", Ordering::Equal),
        (b"-0", b"+0.0", Ordering::Equal),
        (b"-1", b"0", Ordering::Less),
        (b"-2.5", b"-2.25", Ordering::Less),
        (b"-100", b"-99.999", Ordering::Less),
        (b"0.1", b"0.09", Ordering::Greater),
        (
            b"12345678901234567890123",
            b"12345678901234567890122",
            Ordering::Greater,
        ),
        (b"+3", b"2.9999999999", Ordering::Greater),
        (b".5", b"0.5", Ordering::Equal),
    ];
    for (a, b, expected) in cases {
        assert_eq!(
            compare_decimal_text(a, b),
            expected,
            "{} vs {}",
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b)
        );
        assert_eq!(compare_decimal_text(b, a), expected.reverse());
    }
}

#[test]
fn sums_keep_the_larger_scale_and_fall_back_to_doubles_for_exponents() {
    assert_eq!(add_numbers(b"0.10", b"0.2"), b"0.30".to_vec());
    assert_eq!(add_numbers(b"-5", b"2.000"), b"-3.000".to_vec());
    assert_eq!(add_numbers(b"-0.5", b"-0.25"), b"-0.75".to_vec());
    assert_eq!(add_numbers(b" 7 ", b"8"), b"15".to_vec());
    assert_eq!(add_numbers(b"1e2", b"1"), b"101".to_vec());
    assert_eq!(add_numbers(b"2.5E1", b"0.5"), b"25.5".to_vec());
    // Past i128's reach, decimals are added as doubles.
    let huge = "9".repeat(40);
    assert_eq!(
        add_numbers(huge.as_bytes(), b"0"),
        b"10000000000000000000000000000000000000000".to_vec()
    );
}

#[test]
fn binary_collations_compare_bytes() {
    let mut column = text_column();
    column.charset = 63;
    assert_eq!(
        compare_values(&v("apple"), &v("Banana"), &column, RowFormat::Text),
        Ordering::Greater
    );
    let column = text_column();
    assert_eq!(
        compare_values(&v("\u{e9}t\u{e9}"), &v("ETE"), &column, RowFormat::Text),
        Ordering::Equal,
        "accents and case fold away under utf8mb4_general_ci"
    );
}

#[test]
fn doubles_compare_as_numbers() {
    let column = ColumnInfo::new(ColumnType::MYSQL_TYPE_DOUBLE, ColumnFlags::empty());
    assert_eq!(
        compare_values(&v("1e3"), &v("999.5"), &column, RowFormat::Text),
        Ordering::Greater
    );
    assert_eq!(
        compare_values(&v("-0.5"), &v("0.25"), &column, RowFormat::Text),
        Ordering::Less
    );
}

#[test]
fn rows_order_by_several_keys_with_nulls_first() {
    let columns = vec![int_column(), text_column()];
    let merge = Merge {
        order_by: vec![
            SortKey {
                column: 0,
                descending: false,
            },
            SortKey {
                column: 1,
                descending: true,
            },
        ],
        ..Merge::default()
    };
    let parts = vec![
        vec![
            vec![None, v("x")],
            vec![v("1"), v("b")],
            vec![v("2"), v("a")],
        ],
        vec![vec![v("1"), v("c")], vec![v("1"), v("a")]],
    ];
    let rows = merge_rows(parts, &columns, &merge, RowFormat::Text);
    assert_eq!(
        rows,
        vec![
            vec![None, v("x")],
            vec![v("1"), v("c")],
            vec![v("1"), v("b")],
            vec![v("1"), v("a")],
            vec![v("2"), v("a")],
        ]
    );
}

#[test]
fn unsorted_parts_concatenate_in_part_order_and_offset_past_the_end_is_empty() {
    let columns = vec![int_column()];
    let parts = vec![vec![vec![v("3")], vec![v("1")]], vec![vec![v("2")]]];
    let all = merge_rows(parts.clone(), &columns, &Merge::default(), RowFormat::Text);
    assert_eq!(all, vec![vec![v("3")], vec![v("1")], vec![v("2")]]);
    let merge = Merge {
        offset: 5,
        ..Merge::default()
    };
    assert!(merge_rows(parts, &columns, &merge, RowFormat::Text).is_empty());
}

#[test]
fn min_and_max_skip_nulls_and_compare_by_type() {
    let column = int_column();
    assert_eq!(
        combine(
            MergeColumn::Min,
            &v("10"),
            &v("9"),
            Some(&column),
            RowFormat::Text
        ),
        v("9")
    );
    assert_eq!(
        combine(
            MergeColumn::Max,
            &v("10"),
            &v("9"),
            Some(&column),
            RowFormat::Text
        ),
        v("10")
    );
    assert_eq!(
        combine(
            MergeColumn::Max,
            &None,
            &v("9"),
            Some(&column),
            RowFormat::Text
        ),
        v("9")
    );
    assert_eq!(
        combine(MergeColumn::Min, &v("9"), &None, None, RowFormat::Text),
        v("9")
    );
    assert_eq!(
        combine(
            MergeColumn::GroupKey,
            &v("a"),
            &v("b"),
            None,
            RowFormat::Text
        ),
        v("a")
    );
}

#[test]
fn text_compares_in_the_collation_read_from_the_server() {
    let mut column = text_column();
    // utf8mb4_general_ci: ß weighs as S (before "ss"), accents dropped,
    // trailing spaces ignored.
    assert_eq!(
        compare_values(&v("ß"), &v("ss"), &column, RowFormat::Text),
        Ordering::Less
    );
    assert_eq!(
        compare_values(&v("ß"), &v("s"), &column, RowFormat::Text),
        Ordering::Equal
    );
    assert_eq!(
        compare_values(&v("ä"), &v("b"), &column, RowFormat::Text),
        Ordering::Less
    );
    assert_eq!(
        compare_values(&v("a "), &v("A"), &column, RowFormat::Text),
        Ordering::Equal
    );
    // utf8mb4_bin: code points, trailing spaces ignored; binary: bytes.
    column.charset = 46;
    assert_eq!(
        compare_values(&v("z"), &v("ß"), &column, RowFormat::Text),
        Ordering::Less
    );
    assert_eq!(
        compare_values(&v("B"), &v("a"), &column, RowFormat::Text),
        Ordering::Less
    );
    assert_eq!(
        compare_values(&v("a "), &v("a"), &column, RowFormat::Text),
        Ordering::Equal
    );
    assert_eq!(
        compare_values(&v("a\t"), &v("a"), &column, RowFormat::Text),
        Ordering::Less
    );
    column.charset = 63;
    assert_eq!(
        compare_values(&v("a "), &v("a"), &column, RowFormat::Text),
        Ordering::Greater
    );
    // What is merged exactly, and what is refused.
    for id in [63, 46, 83, 65, 1070, 1107, 45, 33] {
        assert!(merges_exactly(id), "{id}");
    }
    // latin1_swedish_ci, latin1_general_ci, utf8mb4_swedish_ci,
    // utf8mb4_unicode_ci, latin1_bin, utf8mb4_uca1400_ai_ci.
    for id in [8, 48, 232, 224, 47, 2308] {
        assert!(!merges_exactly(id), "{id}");
    }
    assert!(general_ci_exact("Ärger straße 東京 😀".as_bytes()));
    assert!(
        !general_ci_exact("Йога".as_bytes()),
        "Cyrillic: not checked"
    );
    assert!(
        !general_ci_exact("ƀ".as_bytes()),
        "Latin Extended-B: not checked"
    );
}

#[test]
fn binary_values_order_and_add_by_their_value() {
    let float = ColumnInfo::new(ColumnType::MYSQL_TYPE_FLOAT, ColumnFlags::empty());
    let time = ColumnInfo::new(ColumnType::MYSQL_TYPE_TIME, ColumnFlags::empty());
    let count = int_column();
    let f = |x: f32| Some(x.to_le_bytes().to_vec());
    // TIME -01:00:00 and 00:30:00 as the binary protocol sends them.
    let minus_hour = Some(vec![8, 1, 0, 0, 0, 0, 1, 0, 0]);
    let half_hour = Some(vec![8, 0, 0, 0, 0, 0, 0, 30, 0]);
    let columns = vec![float, time, count];
    let parts = vec![
        part(vec![vec![
            f(16_777_215.0),
            half_hour.clone(),
            Some(2i64.to_le_bytes().to_vec()),
        ]]),
        part(vec![vec![
            f(-1.5),
            minus_hour.clone(),
            Some(3i64.to_le_bytes().to_vec()),
        ]]),
        part(vec![vec![
            f(16_777_214.0),
            half_hour.clone(),
            Some(4i64.to_le_bytes().to_vec()),
        ]]),
    ];
    let by = |column, descending| Merge {
        order_by: vec![SortKey { column, descending }],
        ..Merge::default()
    };
    let rows = merge_rows(parts.clone(), &columns, &by(0, true), RowFormat::Binary);
    let firsts: Vec<_> = rows.iter().map(|r| r[0].clone()).collect();
    assert_eq!(firsts, vec![f(16_777_215.0), f(16_777_214.0), f(-1.5)]);
    let rows = merge_rows(parts.clone(), &columns, &by(1, false), RowFormat::Binary);
    assert_eq!(rows[0][1], minus_hour, "a negative TIME first");

    let merge = Merge {
        aggregation: Some(Aggregation {
            columns: vec![MergeColumn::Max, MergeColumn::Min, MergeColumn::Count],
        }),
        ..Merge::default()
    };
    let rows = merge_rows(parts, &columns, &merge, RowFormat::Binary);
    assert_eq!(
        rows,
        vec![vec![
            f(16_777_215.0),
            minus_hour,
            Some(9i64.to_le_bytes().to_vec())
        ]]
    );
}

#[test]
fn time_text_compares_by_its_value() {
    let time = ColumnInfo::new(ColumnType::MYSQL_TYPE_TIME, ColumnFlags::empty());
    let cmp = |a: &str, b: &str| compare_values(&v(a), &v(b), &time, RowFormat::Text);
    assert_eq!(cmp("-003:00:07.5", "-001:00:04.5"), Ordering::Less);
    assert_eq!(cmp("-00:00:01", "00:00:00"), Ordering::Less);
    assert_eq!(cmp("100:00:00", "99:59:59"), Ordering::Greater);
    assert_eq!(cmp("838:59:59", "-838:59:59"), Ordering::Greater);
    assert_eq!(cmp("01:00:00.5", "01:00:00.25"), Ordering::Greater);
    assert_eq!(cmp("01:00:00.50", "01:00:00.5"), Ordering::Equal);
    assert_eq!(cmp("-00:00:00.1", "-00:00:00.2"), Ordering::Greater);
    assert_eq!(cmp("10:00:00", "09:00:00"), Ordering::Greater);
}
