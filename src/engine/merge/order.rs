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
/// first, numbers as numbers, text by the column's collation
/// (`column.charset`, the collation id the parts were read with; see
/// [`merges_exactly`]).
pub(super) fn compare_values(a: &Value, b: &Value, column: &ColumnInfo) -> Ordering {
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, Some(_)) => return Ordering::Less,
        (Some(_), None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a.as_slice(), b.as_slice()),
    };
    if is_numeric(column.column_type) {
        return compare_numbers(a, b, column.column_type);
    }
    match column.charset {
        BINARY | UTF8MB4_NOPAD_BIN | UTF8MB3_NOPAD_BIN => a.cmp(b),
        UTF8MB4_BIN | UTF8MB3_BIN | ASCII_BIN => trim_pad(a).cmp(trim_pad(b)),
        _ if column.flags.contains(ColumnFlags::BINARY_FLAG) => trim_pad(a).cmp(trim_pad(b)),
        _ => fold_general_ci(trim_pad(a)).cmp(fold_general_ci(trim_pad(b))),
    }
}

/// Whether the values of a column of `column_type` compare as numbers.
pub(crate) fn is_numeric(column_type: ColumnType) -> bool {
    matches!(
        column_type,
        ColumnType::MYSQL_TYPE_TINY
            | ColumnType::MYSQL_TYPE_SHORT
            | ColumnType::MYSQL_TYPE_INT24
            | ColumnType::MYSQL_TYPE_LONG
            | ColumnType::MYSQL_TYPE_LONGLONG
            | ColumnType::MYSQL_TYPE_YEAR
            | ColumnType::MYSQL_TYPE_DECIMAL
            | ColumnType::MYSQL_TYPE_NEWDECIMAL
            | ColumnType::MYSQL_TYPE_FLOAT
            | ColumnType::MYSQL_TYPE_DOUBLE
    )
}

fn compare_numbers(a: &[u8], b: &[u8], column_type: ColumnType) -> Ordering {
    match column_type {
        ColumnType::MYSQL_TYPE_FLOAT | ColumnType::MYSQL_TYPE_DOUBLE => {
            let parse = |v: &[u8]| {
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|t| t.trim().parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            parse(a).total_cmp(&parse(b))
        }
        _ => compare_decimal_text(a, b),
    }
}

const BINARY: u16 = 63;
const UTF8MB4_BIN: u16 = 46;
const UTF8MB3_BIN: u16 = 83;
const ASCII_BIN: u16 = 65;
const UTF8MB4_NOPAD_BIN: u16 = 1070;
const UTF8MB3_NOPAD_BIN: u16 = 1107;
const UTF8MB4_GENERAL_CI: u16 = 45;
const UTF8MB3_GENERAL_CI: u16 = 33;

/// Whether text of collation `id`, as the parts send it (UTF-8), merges in
/// the server's order: `binary`, the `_bin` collations of utf8mb4, utf8mb3
/// and ascii (code point order, trailing spaces ignored unless `nopad`),
/// and `utf8mb4_general_ci` / `utf8mb3_general_ci`. Others (`latin1`'s
/// default `latin1_swedish_ci`, language collations, UCA) are not
/// implemented: a merge by them is refused.
pub(crate) fn merges_exactly(id: u16) -> bool {
    matches!(
        id,
        BINARY
            | UTF8MB4_BIN
            | UTF8MB3_BIN
            | ASCII_BIN
            | UTF8MB4_NOPAD_BIN
            | UTF8MB3_NOPAD_BIN
            | UTF8MB4_GENERAL_CI
            | UTF8MB3_GENERAL_CI
    )
}

/// `text` without the trailing spaces a PAD SPACE collation ignores.
fn trim_pad(text: &[u8]) -> &[u8] {
    let end = text.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    &text[..end]
}

/// The weights `utf8mb4_general_ci` compares by: one per character, the
/// character without its accents, upper-cased (`ß` weighs as `S`), every
/// character beyond the Basic Multilingual Plane as U+FFFD.
fn fold_general_ci(text: &[u8]) -> impl Iterator<Item = char> + '_ {
    use unicode_normalization::char::{decompose_canonical, is_combining_mark};
    std::str::from_utf8(text)
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if u32::from(c) > 0xFFFF {
                return '\u{FFFD}';
            }
            if c == 'ß' {
                return 'S';
            }
            let mut base = c;
            let mut first = true;
            decompose_canonical(c, |part| {
                if first && !is_combining_mark(part) {
                    base = part;
                }
                first = false;
            });
            let mut upper = base.to_uppercase();
            match (upper.next(), upper.next()) {
                (Some(one), None) => one,
                _ => base,
            }
        })
}
