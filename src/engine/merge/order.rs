//! How merged values order: the way the server sorts them (NULL first,
//! numbers as numbers, text by its collation, closely enough for rows the
//! shards already sorted).

use std::cmp::Ordering;

use mysql_common::constants::{ColumnFlags, ColumnType};

use super::decimal::compare_decimal_text;
use super::Value;
use crate::protocol::binary::ColumnInfo;
use crate::router::SortKey;

/// Orders two rows by the sort keys.
pub(super) fn compare_rows(
    a: &[Value],
    b: &[Value],
    keys: &[SortKey],
    columns: &[ColumnInfo],
) -> Ordering {
    for key in keys {
        let column = columns.get(key.column);
        let (x, y) = (a.get(key.column), b.get(key.column));
        let ordering = match (x, y, column) {
            (Some(x), Some(y), Some(column)) => compare_values(x, y, column),
            _ => Ordering::Equal,
        };
        let ordering = if key.descending {
            ordering.reverse()
        } else {
            ordering
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

/// Compares two values of a column the way the server orders them: NULL
/// first, numbers as numbers, text by a case-insensitive comparison unless
/// the column is binary.
pub(super) fn compare_values(a: &Value, b: &Value, column: &ColumnInfo) -> Ordering {
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, Some(_)) => return Ordering::Less,
        (Some(_), None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a.as_slice(), b.as_slice()),
    };
    match column.column_type {
        ColumnType::MYSQL_TYPE_TINY
        | ColumnType::MYSQL_TYPE_SHORT
        | ColumnType::MYSQL_TYPE_INT24
        | ColumnType::MYSQL_TYPE_LONG
        | ColumnType::MYSQL_TYPE_LONGLONG
        | ColumnType::MYSQL_TYPE_YEAR
        | ColumnType::MYSQL_TYPE_DECIMAL
        | ColumnType::MYSQL_TYPE_NEWDECIMAL => compare_decimal_text(a, b),
        ColumnType::MYSQL_TYPE_FLOAT | ColumnType::MYSQL_TYPE_DOUBLE => {
            let parse = |v: &[u8]| {
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|t| t.trim().parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            parse(a).total_cmp(&parse(b))
        }
        _ if is_binary_collation(column) => a.cmp(b),
        _ => fold_general_ci(a).cmp(fold_general_ci(b)),
    }
}

/// Collation ids that compare bytes: binary, and the `_bin` collations of
/// utf8mb4, utf8mb3 and latin1.
fn is_binary_collation(column: &ColumnInfo) -> bool {
    matches!(column.charset, 63 | 46 | 83 | 47) || column.flags.contains(ColumnFlags::BINARY_FLAG)
}

/// The weights `utf8mb4_general_ci` compares by, closely enough for merging
/// rows the shards already sorted: accents dropped, case folded to upper.
fn fold_general_ci(text: &[u8]) -> impl Iterator<Item = char> + '_ {
    use unicode_normalization::char::is_combining_mark;
    use unicode_normalization::UnicodeNormalization;
    std::str::from_utf8(text)
        .unwrap_or_default()
        .nfd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_uppercase)
}
