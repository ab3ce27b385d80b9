//! Bound parameter values rendered as SQL literals.

use std::fmt::Write as _;

use super::execute::{is_decimal_text, ParamValue};
use super::{BinaryError, DateTime, Time};
use crate::protocol::charset::Charset;

/// Appends `value` to `out` as a MySQL SQL literal that no character set
/// and no `sql_mode` can read as anything but that one value: the text
/// written is ASCII, and holds no backslash and no quote a value's bytes
/// could pair with.
///
/// - `NULL`; integers in decimal; DECIMAL values as their text, which
///   [`is_decimal_text`] has checked (`[+-]digits[.digits][e[+-]digits]`);
/// - floats in shortest round-trip scientific notation (`1.5e0`, `1e300`),
///   so MariaDB reads them as exactly the same DOUBLE; NaN and infinities,
///   which MariaDB cannot hold, are refused;
/// - strings as a hex literal with the connection's character set as
///   introducer (`_gbk X'C4E3'`), so the server takes the same bytes as
///   text of the same character set; blobs (`binary`), values sent in the
///   binary character set, and bytes that are not well-formed text of
///   `charset` (which the server would refuse in an introduced literal)
///   as `_binary X'..'`. The introduced literal has the character set's
///   default collation (not `collation_connection`) with the coercibility
///   of any literal, so comparing it with a column uses the column's
///   collation as a plain literal would;
/// - dates as `'YYYY-MM-DD'` or `'YYYY-MM-DD HH:MM:SS[.f]'`, times as
///   `'[-]HH:MM:SS[.f]'` with the days folded into the hours (e.g.
///   `'-26:03:04.000005'`), written from their numeric fields; fractions
///   without trailing zeros, microseconds above 999 999 clamped.
///
/// A negative number right after a `-` gives `--5`, which MariaDB reads as
/// minus minus 5 (a comment needs a space after `--`); the caller keeps
/// words from running into the literal ([`bind_separator`]).
pub fn render_literal(
    value: &ParamValue,
    charset: Charset,
    out: &mut String,
) -> Result<(), BinaryError> {
    match value {
        ParamValue::Null => out.push_str("NULL"),
        ParamValue::Int(v) => {
            let _ = write!(out, "{v}");
        }
        ParamValue::UInt(v) => {
            let _ = write!(out, "{v}");
        }
        ParamValue::Float(v) if v.is_finite() => {
            let _ = write!(out, "{v:e}");
        }
        ParamValue::Float(_) => return Err(BinaryError::Unrepresentable("NaN or infinity")),
        ParamValue::Decimal(text) if is_decimal_text(text.as_bytes()) => out.push_str(text),
        ParamValue::Decimal(_) => return Err(BinaryError::Unrepresentable("DECIMAL text")),
        ParamValue::Bytes { data, binary } => {
            let introducer = if bytes_are_text(data, *binary, charset) {
                charset.name()
            } else {
                Charset::BINARY.name()
            };
            out.reserve(data.len() * 2 + introducer.len() + 5);
            out.push('_');
            out.push_str(introducer);
            out.push(' ');
            push_hex(data, out);
        }
        ParamValue::Date(DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            micros,
        }) => {
            let _ = write!(out, "'{year:04}-{month:02}-{day:02}");
            if *hour != 0 || *minute != 0 || *second != 0 || *micros != 0 {
                let _ = write!(out, " {hour:02}:{minute:02}:{second:02}");
                push_fraction(*micros, out);
            }
            out.push('\'');
        }
        ParamValue::Time(Time {
            negative,
            days,
            hours,
            minutes,
            seconds,
            micros,
        }) => {
            let total_hours = u64::from(*days) * 24 + u64::from(*hours);
            let zero = total_hours == 0 && *minutes == 0 && *seconds == 0 && *micros == 0;
            out.push('\'');
            if *negative && !zero {
                out.push('-');
            }
            let _ = write!(out, "{total_hours:02}:{minutes:02}:{seconds:02}");
            push_fraction(*micros, out);
            out.push('\'');
        }
    }
    Ok(())
}

/// What goes between the statement text before a `?` marker (ending in
/// `before`) and the literal that replaces it: a space when the two would
/// otherwise run together (`SELECT?` would become the word
/// `SELECT_utf8mb4`; `1-?` with -5 would start a `--`).
pub fn bind_separator(before: Option<char>, literal_start: Option<char>) -> &'static str {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$' || !c.is_ascii();
    match (before, literal_start) {
        (Some(b), Some(l)) if word(b) && (word(l) || l == '\'') => " ",
        (Some('-'), Some('-' | '+')) => " ",
        _ => "",
    }
}

/// Whether [`render_literal`] writes bytes (sent as a blob when `binary`)
/// with `charset` as introducer rather than `_binary`.
pub fn bytes_are_text(data: &[u8], binary: bool, charset: Charset) -> bool {
    !binary && !charset.is_binary() && charset.is_well_formed(data)
}

/// Appends `X'..'` with the bytes in upper-case hex.
pub fn push_hex(data: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(data.len() * 2 + 3);
    out.push_str("X'");
    for &b in data {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0F)]));
    }
    out.push('\'');
}

/// `.ffffff` without trailing zeros; nothing for 0.
fn push_fraction(micros: u32, out: &mut String) {
    if micros == 0 {
        return;
    }
    let digits = format!("{:06}", micros.min(999_999));
    out.push('.');
    out.push_str(digits.trim_end_matches('0'));
}
