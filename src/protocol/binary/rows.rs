//! Text-protocol rows converted to binary-protocol rows.

use mysql_common::constants::ColumnType;

use super::{BinaryError, ColumnInfo, DateTime, Time, ERROR_TEXT_MAX};
use crate::protocol::frame::{read_lenenc_int, write_lenenc_bytes};
use crate::protocol::packets::TEXT_NULL;

/// How a column's value travels in a binary-protocol row.
#[derive(Debug, Clone, Copy)]
enum RowWire {
    /// Little-endian integer of this many bytes.
    Int(usize),
    Float,
    Double,
    /// Length-encoded string, the text bytes unchanged.
    Bytes,
    DateTime,
    Time,
    /// No bytes; the value is always NULL.
    Null,
}

fn row_wire(column_type: ColumnType) -> Option<RowWire> {
    use ColumnType::*;
    Some(match column_type {
        MYSQL_TYPE_TINY => RowWire::Int(1),
        MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => RowWire::Int(2),
        MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 => RowWire::Int(4),
        MYSQL_TYPE_LONGLONG => RowWire::Int(8),
        MYSQL_TYPE_FLOAT => RowWire::Float,
        MYSQL_TYPE_DOUBLE => RowWire::Double,
        MYSQL_TYPE_DECIMAL
        | MYSQL_TYPE_NEWDECIMAL
        | MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_STRING
        | MYSQL_TYPE_ENUM
        | MYSQL_TYPE_SET
        | MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB
        | MYSQL_TYPE_BLOB
        | MYSQL_TYPE_JSON
        | MYSQL_TYPE_GEOMETRY
        | MYSQL_TYPE_BIT
        | MYSQL_TYPE_VECTOR => RowWire::Bytes,
        MYSQL_TYPE_DATE | MYSQL_TYPE_NEWDATE | MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP => {
            RowWire::DateTime
        }
        MYSQL_TYPE_TIME => RowWire::Time,
        MYSQL_TYPE_NULL => RowWire::Null,
        MYSQL_TYPE_TIMESTAMP2
        | MYSQL_TYPE_DATETIME2
        | MYSQL_TYPE_TIME2
        | MYSQL_TYPE_TYPED_ARRAY
        | MYSQL_TYPE_UNKNOWN => return None,
    })
}

/// Converts one text-protocol row payload (per column a length-encoded string,
/// or `0xFB` for NULL) into a binary-protocol row payload appended to `out`:
/// `0x00`, the NULL bitmap (offset 2), then the non-NULL values encoded by
/// column type. On error `out` is left as it was.
///
/// A `MYSQL_TYPE_NULL` column is always sent as NULL.
pub fn text_row_to_binary(
    row: &[u8],
    columns: &[ColumnInfo],
    out: &mut Vec<u8>,
) -> Result<(), BinaryError> {
    let start = out.len();
    let result = write_binary_row(row, columns, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_binary_row(
    row: &[u8],
    columns: &[ColumnInfo],
    out: &mut Vec<u8>,
) -> Result<(), BinaryError> {
    out.push(0x00);
    let bitmap_at = out.len();
    out.resize(bitmap_at + (columns.len() + 7 + 2) / 8, 0);
    let mut rest = row;
    for (index, column) in columns.iter().enumerate() {
        let wire = row_wire(column.column_type).ok_or(BinaryError::UnsupportedColumnType {
            column: index,
            column_type: column.column_type,
        })?;
        match read_text_value(&mut rest, index, columns.len())? {
            Some(text) if !matches!(wire, RowWire::Null) => {
                write_binary_value(text, wire, column, index, out)?;
            }
            _ => {
                let bit = index + 2;
                out[bitmap_at + bit / 8] |= 1 << (bit % 8);
            }
        }
    }
    if !rest.is_empty() {
        return Err(BinaryError::RowTooLong {
            columns: columns.len(),
            extra: rest.len(),
        });
    }
    Ok(())
}

/// Reads one text-row value: `None` for NULL.
fn read_text_value<'a>(
    rest: &mut &'a [u8],
    index: usize,
    expected: usize,
) -> Result<Option<&'a [u8]>, BinaryError> {
    match rest.first() {
        None => Err(BinaryError::RowTooShort {
            expected,
            found: index,
        }),
        Some(&TEXT_NULL) => {
            *rest = &rest[1..];
            Ok(None)
        }
        Some(_) => {
            let truncated = BinaryError::RowTruncated { column: index };
            let len = read_lenenc_int(rest).ok_or(truncated.clone())?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&len| len <= rest.len())
                .ok_or(truncated)?;
            let (value, tail) = rest.split_at(len);
            *rest = tail;
            Ok(Some(value))
        }
    }
}

fn write_binary_value(
    text: &[u8],
    wire: RowWire,
    column: &ColumnInfo,
    index: usize,
    out: &mut Vec<u8>,
) -> Result<(), BinaryError> {
    let bad_number = || BinaryError::BadNumber {
        column: index,
        column_type: column.column_type,
        text: shorten(text),
    };
    match wire {
        RowWire::Int(width) => {
            let bytes = parse_int(text, width, column.is_unsigned()).ok_or_else(bad_number)?;
            out.extend_from_slice(&bytes[..width]);
        }
        RowWire::Float => {
            let value: f32 = parse_text(text).ok_or_else(bad_number)?;
            out.extend_from_slice(&value.to_le_bytes());
        }
        RowWire::Double => {
            let value: f64 = parse_text(text).ok_or_else(bad_number)?;
            out.extend_from_slice(&value.to_le_bytes());
        }
        RowWire::Bytes => write_lenenc_bytes(out, text),
        RowWire::DateTime => {
            let dt = parse_datetime_text(text).ok_or_else(|| BinaryError::BadDate {
                column: index,
                text: shorten(text),
            })?;
            write_datetime(out, &dt);
        }
        RowWire::Time => {
            let t = parse_time_text(text).ok_or_else(|| BinaryError::BadTime {
                column: index,
                text: shorten(text),
            })?;
            write_time(out, &t);
        }
        // Handled by the caller: always NULL.
        RowWire::Null => {}
    }
    Ok(())
}

/// Parses decimal text as an integer that fits `width` bytes, signed or not;
/// returns its little-endian bytes (the first `width` are the encoding).
fn parse_int(text: &[u8], width: usize, unsigned: bool) -> Option<[u8; 8]> {
    let bits = 8 * width as u32;
    if unsigned {
        let value: u64 = parse_text(text)?;
        if bits < 64 && value >> bits != 0 {
            return None;
        }
        Some(value.to_le_bytes())
    } else {
        let value: i64 = parse_text(text)?;
        if bits < 64 {
            let max = (1i64 << (bits - 1)) - 1;
            if value > max || value < -max - 1 {
                return None;
            }
        }
        Some(value.to_le_bytes())
    }
}

fn parse_text<T: std::str::FromStr>(text: &[u8]) -> Option<T> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn shorten(text: &[u8]) -> String {
    String::from_utf8_lossy(&text[..text.len().min(ERROR_TEXT_MAX)]).into_owned()
}

/// The value of a run of ASCII digits (1 to 9 of them).
fn digits(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 9 {
        return None;
    }
    text.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

/// `H:MM:SS[.f]` with 1 to `max_hour_digits` hour digits and 1 to 6
/// fractional digits: (hours, minutes, seconds, microseconds).
fn parse_clock(text: &[u8], max_hour_digits: usize) -> Option<(u32, u8, u8, u32)> {
    let (clock, fraction) = match text.iter().position(|&b| b == b'.') {
        Some(dot) => (&text[..dot], Some(&text[dot + 1..])),
        None => (text, None),
    };
    let colon = clock.iter().position(|&b| b == b':')?;
    let hour_text = &clock[..colon];
    if hour_text.len() > max_hour_digits {
        return None;
    }
    let hours = digits(hour_text)?;
    let rest = &clock[colon + 1..];
    if rest.len() != 5 || rest[2] != b':' {
        return None;
    }
    let minutes = digits(&rest[..2])? as u8;
    let seconds = digits(&rest[3..])? as u8;
    let micros = match fraction {
        None => 0,
        Some(f) if f.len() <= 6 => digits(f)? * 10u32.pow(6 - f.len() as u32),
        Some(_) => return None,
    };
    Some((hours, minutes, seconds, micros))
}

/// `YYYY-MM-DD[ HH:MM:SS[.ffffff]]`.
fn parse_datetime_text(text: &[u8]) -> Option<DateTime> {
    let (date, clock) = match text.iter().position(|&b| b == b' ') {
        Some(space) => (&text[..space], Some(&text[space + 1..])),
        None => (text, None),
    };
    if date.len() != 10 || date[4] != b'-' || date[7] != b'-' {
        return None;
    }
    let mut dt = DateTime {
        year: digits(&date[..4])? as u16,
        month: digits(&date[5..7])? as u8,
        day: digits(&date[8..])? as u8,
        ..DateTime::default()
    };
    if let Some(clock) = clock {
        if clock.first() == Some(&b':') || clock.get(2) != Some(&b':') {
            return None;
        }
        let (hour, minute, second, micros) = parse_clock(clock, 2)?;
        dt.hour = hour as u8;
        dt.minute = minute;
        dt.second = second;
        dt.micros = micros;
    }
    Some(dt)
}

/// `[-]H:MM:SS[.ffffff]` (the hours may exceed 23).
fn parse_time_text(text: &[u8]) -> Option<Time> {
    let (negative, rest) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (hours, minutes, seconds, micros) = parse_clock(rest, 9)?;
    Some(Time {
        negative,
        days: hours / 24,
        hours: (hours % 24) as u8,
        minutes,
        seconds,
        micros,
    })
}

/// Binary DATE/DATETIME/TIMESTAMP: the shortest of lengths 0, 4, 7, 11.
fn write_datetime(out: &mut Vec<u8>, dt: &DateTime) {
    let len = if dt.micros != 0 {
        11
    } else if dt.hour != 0 || dt.minute != 0 || dt.second != 0 {
        7
    } else if dt.year != 0 || dt.month != 0 || dt.day != 0 {
        4
    } else {
        0
    };
    out.push(len);
    if len >= 4 {
        out.extend_from_slice(&dt.year.to_le_bytes());
        out.extend_from_slice(&[dt.month, dt.day]);
    }
    if len >= 7 {
        out.extend_from_slice(&[dt.hour, dt.minute, dt.second]);
    }
    if len == 11 {
        out.extend_from_slice(&dt.micros.to_le_bytes());
    }
}

/// Binary TIME: the shortest of lengths 0, 8, 12.
fn write_time(out: &mut Vec<u8>, t: &Time) {
    let len = if t.micros != 0 {
        12
    } else if t.days != 0 || t.hours != 0 || t.minutes != 0 || t.seconds != 0 {
        8
    } else {
        0
    };
    out.push(len);
    if len >= 8 {
        out.push(u8::from(t.negative));
        out.extend_from_slice(&t.days.to_le_bytes());
        out.extend_from_slice(&[t.hours, t.minutes, t.seconds]);
    }
    if len == 12 {
        out.extend_from_slice(&t.micros.to_le_bytes());
    }
}

/// Splits a binary-protocol row payload into its values, `None` for NULL:
/// each the value's bytes as the row carries them, except that a
/// length-encoded string loses its length (so the value of a string or
/// DECIMAL column is its text, as in a text row). The inverse of
/// [`write_binary_values`].
pub fn binary_row_values(
    row: &[u8],
    columns: &[ColumnInfo],
) -> Result<Vec<Option<Vec<u8>>>, BinaryError> {
    let bitmap_len = (columns.len() + 7 + 2) / 8;
    let short = |found| BinaryError::RowTooShort {
        expected: columns.len(),
        found,
    };
    if row.first() != Some(&0x00) || row.len() < 1 + bitmap_len {
        return Err(short(0));
    }
    let bitmap = &row[1..1 + bitmap_len];
    let mut rest = &row[1 + bitmap_len..];
    let mut values = Vec::with_capacity(columns.len());
    for (index, column) in columns.iter().enumerate() {
        let bit = index + 2;
        let wire = row_wire(column.column_type).ok_or(BinaryError::UnsupportedColumnType {
            column: index,
            column_type: column.column_type,
        })?;
        if bitmap[bit / 8] & (1 << (bit % 8)) != 0 || matches!(wire, RowWire::Null) {
            values.push(None);
            continue;
        }
        let truncated = BinaryError::RowTruncated { column: index };
        let (start, len) = match wire {
            RowWire::Int(width) => (0, width),
            RowWire::Float => (0, 4),
            RowWire::Double => (0, 8),
            RowWire::DateTime | RowWire::Time => {
                (0, 1 + usize::from(*rest.first().ok_or(truncated.clone())?))
            }
            RowWire::Bytes => {
                let mut after = rest;
                let len = read_lenenc_int(&mut after).ok_or(truncated.clone())?;
                let len = usize::try_from(len).map_err(|_| truncated.clone())?;
                (rest.len() - after.len(), len)
            }
            RowWire::Null => (0, 0),
        };
        let end = start
            .checked_add(len)
            .filter(|&end| end <= rest.len())
            .ok_or(truncated)?;
        values.push(Some(rest[start..end].to_vec()));
        rest = &rest[end..];
    }
    if !rest.is_empty() {
        return Err(BinaryError::RowTooLong {
            columns: columns.len(),
            extra: rest.len(),
        });
    }
    Ok(values)
}

/// Writes a binary-protocol row payload of `values` as
/// [`binary_row_values`] splits them (one per column, `None` for NULL)
/// to `out`.
pub fn write_binary_values(
    values: &[Option<Vec<u8>>],
    columns: &[ColumnInfo],
    out: &mut Vec<u8>,
) -> Result<(), BinaryError> {
    out.push(0x00);
    let bitmap_at = out.len();
    out.resize(bitmap_at + (columns.len() + 7 + 2) / 8, 0);
    for (index, column) in columns.iter().enumerate() {
        let wire = row_wire(column.column_type).ok_or(BinaryError::UnsupportedColumnType {
            column: index,
            column_type: column.column_type,
        })?;
        match values.get(index) {
            Some(Some(value)) if !matches!(wire, RowWire::Null) => match wire {
                RowWire::Bytes => write_lenenc_bytes(out, value),
                _ => out.extend_from_slice(value),
            },
            Some(_) => {
                let bit = index + 2;
                out[bitmap_at + bit / 8] |= 1 << (bit % 8);
            }
            None => {
                return Err(BinaryError::RowTooShort {
                    expected: columns.len(),
                    found: values.len(),
                })
            }
        }
    }
    Ok(())
}

/// A binary-row value read as a number or a point in time, for ordering
/// and adding values of a multi-shard merge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BinaryScalar {
    /// An integer column's value.
    Int(i128),
    /// A FLOAT or DOUBLE column's value.
    Real(f64),
    /// A DATE, DATETIME, TIMESTAMP or TIME value as microseconds in one
    /// ordered scale (dates from year 0).
    Instant(i128),
}

/// Reads a value as [`binary_row_values`] gives it as a number or a point
/// in time; `None` for a column whose value is text (strings, DECIMAL) or
/// a malformed value.
pub fn binary_scalar(value: &[u8], column: &ColumnInfo) -> Option<BinaryScalar> {
    match row_wire(column.column_type)? {
        RowWire::Int(width) if value.len() == width => {
            let mut bytes = [0u8; 8];
            bytes[..width].copy_from_slice(value);
            let unsigned = u64::from_le_bytes(bytes);
            let number = if column.is_unsigned() {
                i128::from(unsigned)
            } else {
                let shift = 64 - 8 * width as u32;
                i128::from(((unsigned << shift) as i64) >> shift)
            };
            Some(BinaryScalar::Int(number))
        }
        RowWire::Float => Some(BinaryScalar::Real(f64::from(f32::from_le_bytes(
            value.try_into().ok()?,
        )))),
        RowWire::Double => Some(BinaryScalar::Real(f64::from_le_bytes(
            value.try_into().ok()?,
        ))),
        RowWire::DateTime => {
            let field = |i: usize| value.get(i).copied().map(i128::from).unwrap_or(0);
            let year = i128::from(u16::from_le_bytes([
                value.get(1).copied().unwrap_or(0),
                value.get(2).copied().unwrap_or(0),
            ]));
            let micros = value
                .get(8..12)
                .and_then(|b| b.try_into().ok())
                .map(|b| i128::from(u32::from_le_bytes(b)))
                .unwrap_or(0);
            let days = (year * 13 + field(3)) * 32 + field(4);
            Some(BinaryScalar::Instant(
                ((days * 24 + field(5)) * 60 + field(6)) * 60_000_000
                    + field(7) * 1_000_000
                    + micros,
            ))
        }
        RowWire::Time => {
            let field = |i: usize| value.get(i).copied().map(i128::from).unwrap_or(0);
            let days = value
                .get(2..6)
                .and_then(|b| b.try_into().ok())
                .map(|b| i128::from(u32::from_le_bytes(b)))
                .unwrap_or(0);
            let micros = value
                .get(9..13)
                .and_then(|b| b.try_into().ok())
                .map(|b| i128::from(u32::from_le_bytes(b)))
                .unwrap_or(0);
            let magnitude = ((days * 24 + field(6)) * 60 + field(7)) * 60_000_000
                + field(8) * 1_000_000
                + micros;
            Some(BinaryScalar::Instant(if field(1) != 0 {
                -magnitude
            } else {
                magnitude
            }))
        }
        _ => None,
    }
}

/// The binary-row value (as [`binary_row_values`] gives it) of a number
/// written as text, for a column of `column`'s type.
pub fn number_text_to_binary(text: &[u8], column: &ColumnInfo) -> Result<Vec<u8>, BinaryError> {
    let wire = row_wire(column.column_type).ok_or(BinaryError::UnsupportedColumnType {
        column: 0,
        column_type: column.column_type,
    })?;
    if matches!(wire, RowWire::Bytes) {
        return Ok(text.to_vec());
    }
    let mut out = Vec::new();
    write_binary_value(text, wire, column, 0, &mut out)?;
    Ok(out)
}
