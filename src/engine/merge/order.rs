//! How merged values order: the way the server sorts them (NULL first,
//! numbers as numbers, text by its collation, closely enough for rows the
//! shards already sorted).

use std::cmp::Ordering;

use mysql_common::constants::{ColumnFlags, ColumnType};

use super::decimal::compare_decimal_text;
use super::{RowFormat, Value};
use crate::protocol::binary::{binary_scalar, BinaryScalar, ColumnInfo};
use crate::router::SortKey;

/// Orders two rows by the sort keys.
pub(super) fn compare_rows(
    a: &[Value],
    b: &[Value],
    keys: &[SortKey],
    columns: &[ColumnInfo],
    format: RowFormat,
) -> Ordering {
    for key in keys {
        let column = columns.get(key.column);
        let (x, y) = (a.get(key.column), b.get(key.column));
        let ordering = match (x, y, column) {
            (Some(x), Some(y), Some(column)) => compare_values(x, y, column, format),
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
/// [`merges_exactly`]). Binary-protocol numbers and times compare by
/// their value.
pub(super) fn compare_values(
    a: &Value,
    b: &Value,
    column: &ColumnInfo,
    format: RowFormat,
) -> Ordering {
    let (a, b) = match (a, b) {
        (None, None) => return Ordering::Equal,
        (None, Some(_)) => return Ordering::Less,
        (Some(_), None) => return Ordering::Greater,
        (Some(a), Some(b)) => (a.as_slice(), b.as_slice()),
    };
    if format == RowFormat::Binary {
        match (binary_scalar(a, column), binary_scalar(b, column)) {
            (Some(BinaryScalar::Int(x)), Some(BinaryScalar::Int(y)))
            | (Some(BinaryScalar::Instant(x)), Some(BinaryScalar::Instant(y))) => return x.cmp(&y),
            (Some(BinaryScalar::Real(x)), Some(BinaryScalar::Real(y))) => return x.total_cmp(&y),
            _ => {}
        }
    }
    if is_numeric(column.column_type) {
        return compare_numbers(a, b, column.column_type);
    }
    if matches!(
        column.column_type,
        ColumnType::MYSQL_TYPE_TIME | ColumnType::MYSQL_TYPE_TIME2
    ) {
        if let (Some(x), Some(y)) = (time_text_micros(a), time_text_micros(b)) {
            return x.cmp(&y);
        }
    }
    match column.charset {
        BINARY | UTF8MB4_NOPAD_BIN | UTF8MB3_NOPAD_BIN => a.cmp(b),
        UTF8MB4_BIN | UTF8MB3_BIN | ASCII_BIN => pad_space_cmp(a.iter(), b.iter(), &b' '),
        _ if column.flags.contains(ColumnFlags::BINARY_FLAG) => {
            pad_space_cmp(a.iter(), b.iter(), &b' ')
        }
        _ => pad_space_cmp(fold_general_ci(a), fold_general_ci(b), ' '),
    }
}

/// A TIME value as the text protocol writes it (`[-]H+:MM:SS[.ffffff]`,
/// the hours of any width) in microseconds, or `None` for other text.
/// Its bytes do not order by value: `-003:00:00` < `-001:00:00` and
/// `100:00:00` > `99:00:00`.
fn time_text_micros(text: &[u8]) -> Option<i128> {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let text = std::str::from_utf8(text).ok()?;
    let (clock, fraction) = text.split_once('.').unwrap_or((text, ""));
    let mut fields = clock.split(':');
    let mut field = || -> Option<i128> {
        let digits = fields.next()?;
        if digits.is_empty() || !digits.bytes().all(|d| d.is_ascii_digit()) || digits.len() > 12 {
            return None;
        }
        digits.parse().ok()
    };
    let (hours, minutes, seconds) = (field()?, field()?, field()?);
    if fields.next().is_some()
        || fraction.len() > 6
        || !fraction.bytes().all(|d| d.is_ascii_digit())
    {
        return None;
    }
    let micros = format!("{fraction:0<6}").parse::<i128>().ok()?;
    let value = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros;
    Some(if negative { -value } else { value })
}

/// Compares two sequences as a PAD SPACE collation does: the shorter as if
/// padded with `space` (so `"a "` equals `"a"`, and `"a\t"` is less).
fn pad_space_cmp<T: Ord, I: Iterator<Item = T>>(mut a: I, mut b: I, space: T) -> Ordering {
    loop {
        let ordering = match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(x), None) => x.cmp(&space),
            (None, Some(y)) => space.cmp(&y),
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
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

/// Whether `id` is `utf8mb4_general_ci` or `utf8mb3_general_ci`.
pub(crate) fn is_general_ci(id: u16) -> bool {
    matches!(id, UTF8MB4_GENERAL_CI | UTF8MB3_GENERAL_CI)
}

/// The code points whose [`fold_general_ci`] weight was checked equal to
/// the weight MariaDB 10.11 gives them in `utf8mb4_general_ci`
/// (`WEIGHT_STRING`, every character of the Basic Multilingual Plane):
/// Latin-1 and Latin Extended-A, and the blocks where both leave the
/// character as it is. Elsewhere (Latin Extended-B, Greek, Cyrillic, ...)
/// the server's table predates today's Unicode case mappings.
const GENERAL_CI_CHECKED: &[(u32, u32)] = &[
    (0x0000, 0x017F),
    (0x06D4, 0x0928),
    (0x0B95, 0x0F42),
    (0x1100, 0x13F7),
    (0x13FE, 0x1B05),
    (0x1B13, 0x1C7F),
    (0x1D8F, 0x1EFA),
    (0x2002, 0x2125),
    (0x232B, 0x2ADB),
    (0x2ADD, 0x2C2F),
    (0x2D2E, 0x304B),
    (0x30FF, 0xA640),
    (0xA7F7, 0xAB52),
    (0xE000, 0xF8FF),
    (0xFB4F, 0xFFFF),
];

/// Whether every character of `text` has the `utf8mb4_general_ci` weight
/// the server gives it ([`GENERAL_CI_CHECKED`]; beyond the BMP all weigh
/// alike, as on the server).
pub(crate) fn general_ci_exact(text: &[u8]) -> bool {
    std::str::from_utf8(text).is_ok_and(|text| {
        text.chars().all(|c| {
            let c = u32::from(c);
            c > 0xFFFF
                || GENERAL_CI_CHECKED
                    .iter()
                    .any(|&(first, last)| (first..=last).contains(&c))
        })
    })
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
